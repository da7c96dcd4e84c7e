"""The master coordinator: its pure core (time passed in) and, on LocalCluster, the spout and
the spout coordinator bolt resuming after their worker dies."""

from __future__ import annotations

from squall.trident.coordinator import (
    BATCH_STREAM,
    COMMIT_STREAM,
    SUCCESS_STREAM,
    BatchCoordinatorCore,
    CoordinatorEmit,
    TransactionAttempt,
    max_active_batches,
)

import pytest


def always(_txid: int) -> bool:
    return True


def tx(txid: int, attempt: int = 0) -> TransactionAttempt:
    return TransactionAttempt(txid, attempt)


def batch(txid: int, attempt: int = 0) -> CoordinatorEmit:
    return CoordinatorEmit(BATCH_STREAM, tx(txid, attempt))


def commit(txid: int, attempt: int = 0) -> CoordinatorEmit:
    return CoordinatorEmit(COMMIT_STREAM, tx(txid, attempt))


def success(txid: int, attempt: int = 0) -> CoordinatorEmit:
    return CoordinatorEmit(SUCCESS_STREAM, tx(txid, attempt))


def test_one_batch_goes_through_batch_commit_success_and_the_next_starts() -> None:
    core = BatchCoordinatorCore(max_pending=1, emit_interval_secs=0.0)
    assert core.next(0.0, always) == [batch(1)]
    assert core.next(0.1, always) == []  # one active at most
    assert core.acked(BATCH_STREAM, tx(1)) == [commit(1)]
    assert core.next(0.2, always) == []  # committing still counts as active
    assert core.acked(COMMIT_STREAM, tx(1)) == [success(1)]
    assert core.current_txid == 2
    assert core.next(0.3, always) == [batch(2)]


def test_max_pending_caps_active_batches_and_unset_means_one() -> None:
    assert max_active_batches({}) == 1
    assert max_active_batches({"topology.max.spout.pending": None}) == 1
    assert max_active_batches({"topology.max.spout.pending": 3}) == 3
    with pytest.raises(ValueError, match="topology.max.spout.pending"):
        max_active_batches({"topology.max.spout.pending": 0})
    core = BatchCoordinatorCore(max_pending=3, emit_interval_secs=0.0)
    started = []
    for now in range(10):
        started += core.next(float(now), always)
    assert started == [batch(1), batch(2), batch(3)]


def test_emit_interval_paces_new_batches() -> None:
    core = BatchCoordinatorCore(max_pending=5, emit_interval_secs=0.5)
    assert core.next(10.0, always) == [batch(1)]
    assert core.next(10.49, always) == []
    assert core.next(10.5, always) == [batch(2)]
    assert core.next(10.6, always) == []
    assert core.next(11.0, always) == [batch(3)]


def test_a_txid_starts_only_when_the_spouts_are_ready_for_it() -> None:
    core = BatchCoordinatorCore(max_pending=2, emit_interval_secs=0.0)
    asked = []

    def ready(txid: int) -> bool:
        asked.append(txid)
        return txid == 1

    assert core.next(0.0, ready) == [batch(1)]
    assert core.next(1.0, ready) == []  # 2 is not ready, and 3 is not asked before 2
    assert asked == [1, 2, 2]


def test_commits_follow_txid_order_whatever_order_batches_finish_in() -> None:
    core = BatchCoordinatorCore(max_pending=3, emit_interval_secs=0.0)
    for now in range(3):
        core.next(float(now), always)
    assert core.acked(BATCH_STREAM, tx(3)) == []
    assert core.acked(BATCH_STREAM, tx(2)) == []  # 1 is not processed yet: no commit for 2
    assert core.acked(BATCH_STREAM, tx(1)) == [commit(1)]
    assert core.acked(COMMIT_STREAM, tx(1)) == [success(1), commit(2)]
    assert core.acked(COMMIT_STREAM, tx(2)) == [success(2), commit(3)]
    assert core.next(5.0, always) == [batch(4), batch(5)]
    assert core.acked(COMMIT_STREAM, tx(3)) == [success(3)]
    assert core.current_txid == 4


def test_a_failure_replays_the_txid_with_a_new_attempt_and_restarts_every_later_one() -> None:
    core = BatchCoordinatorCore(max_pending=3, emit_interval_secs=0.0)
    for now in range(3):
        core.next(float(now), always)
    core.acked(BATCH_STREAM, tx(1))
    core.acked(BATCH_STREAM, tx(3))
    assert core.failed(BATCH_STREAM, tx(2)) == []
    assert set(core.active) == {1}
    started = []
    for now in range(3, 6):
        started += core.next(float(now), always)
    assert started == [batch(2, 1), batch(3, 1)]
    # the old attempts' news is stale now
    assert core.acked(BATCH_STREAM, tx(3)) == []
    assert core.failed(BATCH_STREAM, tx(2)) == []
    assert core.acked(COMMIT_STREAM, tx(1)) == [success(1)]
    assert core.acked(BATCH_STREAM, tx(2, 1)) == [commit(2, 1)]


def test_a_failed_commit_replays_the_batch() -> None:
    core = BatchCoordinatorCore(max_pending=1, emit_interval_secs=0.0)
    core.next(0.0, always)
    core.acked(BATCH_STREAM, tx(1))
    core.failed(COMMIT_STREAM, tx(1))  # a message timeout is a fail from the acker
    assert core.next(1.0, always) == [batch(1, 1)]
    assert core.acked(BATCH_STREAM, tx(1, 1)) == [commit(1, 1)]
    assert core.acked(COMMIT_STREAM, tx(1, 1)) == [success(1, 1)]


def test_a_restored_core_resumes_at_the_uncommitted_txid_with_new_attempt_ids() -> None:
    core = BatchCoordinatorCore(max_pending=2, emit_interval_secs=0.0)
    core.next(0.0, always)
    core.next(1.0, always)
    core.acked(BATCH_STREAM, tx(1))
    core.acked(COMMIT_STREAM, tx(1))
    saved = core.snapshot()
    assert saved.current_txid == 2
    again = BatchCoordinatorCore.restore(2, 0.0, saved)
    # txid 2 ran as attempt 0 before the restart; with no interval both start at once
    assert again.next(0.0, always) == [batch(2, 1), batch(3)]
    assert BatchCoordinatorCore.restore(2, 0.0, None).next(0.0, always) == [batch(1), batch(2)]
