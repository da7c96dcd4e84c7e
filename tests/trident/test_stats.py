"""`BatchTimes`, what the master batch coordinator reports to the UI: time passed in."""

from __future__ import annotations

from squall.engine.stats import (TRIDENT_BATCH_LATENCY, TRIDENT_BATCHES_COMMITTED, TRIDENT_BATCHES_IN_FLIGHT,
                                 TRIDENT_CURRENT_TXID, TRIDENT_MAX_BATCHES_IN_FLIGHT)
from squall.trident.executor import BATCH_STREAM, COMMIT_STREAM, SUCCESS_STREAM
from squall.trident.stats import BatchTimes, CoordinatorFigures


def test_a_commit_is_timed_from_its_txids_first_batch_through_replays():
    times = BatchTimes(current_txid=1, max_in_flight=2)
    times.observe([(BATCH_STREAM, 1), (BATCH_STREAM, 2)], 1, 2, now=10.0)
    times.observe([], 1, 0, now=10.5)                     # both failed
    times.observe([(BATCH_STREAM, 1), (BATCH_STREAM, 2)], 1, 2, now=11.0)   # replayed
    times.observe([(COMMIT_STREAM, 1)], 1, 2, now=11.2)
    times.observe([(SUCCESS_STREAM, 1), (COMMIT_STREAM, 2)], 2, 1, now=12.0)
    times.observe([(SUCCESS_STREAM, 2)], 3, 0, now=12.25)
    assert times.figures == CoordinatorFigures(current_txid=3, in_flight=0, max_in_flight=2, committed=2,
                                               latency_ms=2000.0 + 2250.0, timed=2)


def test_figures_are_replaced_not_changed_and_read_as_statistics():
    times = BatchTimes(current_txid=7, max_in_flight=3)
    before = times.figures
    assert before.statistics() == {(TRIDENT_CURRENT_TXID, "", ""): 7, (TRIDENT_BATCHES_IN_FLIGHT, "", ""): 0,
                                   (TRIDENT_MAX_BATCHES_IN_FLIGHT, "", ""): 3,
                                   (TRIDENT_BATCHES_COMMITTED, "", ""): 0}
    times.observe([(BATCH_STREAM, 7)], 7, 1, now=1.0)
    times.observe([(SUCCESS_STREAM, 7)], 8, 0, now=1.5)
    assert before.current_txid == 7 and before.committed == 0  # a reader's copy stays as it was
    stats = times.figures.statistics()
    assert stats[(TRIDENT_BATCH_LATENCY, "", "")] == 500.0 and stats[(TRIDENT_BATCH_LATENCY + "#n", "", "")] == 1
    assert stats[(TRIDENT_CURRENT_TXID, "", "")] == 8 and stats[(TRIDENT_BATCHES_COMMITTED, "", "")] == 1


def test_a_commit_a_restarted_coordinator_did_not_start_counts_but_is_not_timed():
    times = BatchTimes(current_txid=5, max_in_flight=1)
    times.observe([(SUCCESS_STREAM, 5)], 6, 0, now=3.0)
    assert (times.figures.committed, times.figures.timed, times.figures.latency_ms) == (1, 0, 0.0)
    assert (TRIDENT_BATCH_LATENCY, "", "") not in times.figures.statistics()
