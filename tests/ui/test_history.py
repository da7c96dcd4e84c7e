"""The UI daemon's throughput history: rates between samples, the bounded ring, killed topologies."""

import pytest

from squall.engine.clock import SimulatedClock
from squall.ui.history import History, HistorySampler, TaskCounts, Totals


def test_rates_are_per_second_since_the_previous_sample():
    h = History(interval_secs=5, keep_secs=60)
    h.record([Totals("t-1", 100, 2, 4.0)], now=1000.0)
    h.record([Totals("t-1", 600, 7, 5.5)], now=1005.0)
    first, second = h.samples("t-1")
    assert (first.acked_per_sec, first.failed_per_sec) == (0.0, 0.0)
    assert (second.acked_per_sec, second.failed_per_sec) == (100.0, 1.0)
    assert second.to_json() == {"time": 1005.0, "acked": 600, "failed": 7, "ackedPerSec": 100.0,
                                "failedPerSec": 1.0, "completeLatency": 5.5, "deadLettered": 0,
                                "deadLetteredPerSec": 0.0}


def test_a_count_that_went_down_gives_no_negative_rate():
    h = History(interval_secs=5, keep_secs=60)
    h.record([Totals("t-1", 500, 0, 1.0)], now=0.0)
    h.record([Totals("t-1", 20, 0, 1.0)], now=5.0)
    assert h.samples("t-1")[-1].acked_per_sec == 0.0


def test_the_ring_keeps_only_the_last_keep_secs():
    h = History(interval_secs=5, keep_secs=30)
    for i in range(100):
        h.record([Totals("t-1", i, 0, 0.0)], now=i * 5.0)
    samples = h.samples("t-1")
    assert len(samples) == 7
    assert samples[-1].time - samples[0].time == 30.0


def test_a_topology_the_master_no_longer_lists_is_forgotten():
    h = History(interval_secs=5, keep_secs=60)
    h.record([Totals("a-1", 1, 0, 0.0), Totals("b-2", 1, 0, 0.0)], now=0.0)
    h.record([Totals("b-2", 2, 0, 0.0)], now=5.0)
    assert h.samples("a-1") == []
    assert len(h.samples("b-2")) == 2


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="ui.history"):
        History(interval_secs=0, keep_secs=60)


def test_sampler_skips_a_sample_when_the_master_is_down():
    clock = SimulatedClock(start=100.0)
    answers = [[Totals("t-1", 10, 0, 1.0)], ConnectionError("master down"), [Totals("t-1", 30, 0, 1.0)]]

    def read():
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    sampler = HistorySampler(read, interval_secs=5, keep_secs=60, clock=clock)
    for _ in range(3):
        sampler.sample_once()
        clock.advance(5)
    samples = sampler.samples("t-1")
    assert [s.time for s in samples] == [100.0, 110.0]
    assert samples[-1].acked_per_sec == 2.0


def test_sampler_thread_samples_on_its_clock():
    clock = SimulatedClock(start=0.0)
    calls = []
    sampler = HistorySampler(lambda: calls.append(clock.now()) or [], interval_secs=5, keep_secs=60, clock=clock)
    sampler.start()
    try:
        import time
        deadline = time.monotonic() + 5
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
        clock.advance(5)
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sampler.stop()
    assert calls[:2] == [0.0, 5.0]


def test_a_spout_task_whose_worker_restarted_counts_from_zero_while_the_others_count_on():
    h = History(interval_secs=5, keep_secs=60)
    h.record([Totals("t-1", 600, 10, 1.0, {1: TaskCounts(500, 10), 2: TaskCounts(100, 0)})], now=0.0)
    # task 1's worker restarted: it reports 40 acks and 3 failures since; task 2 went on by 50
    h.record([Totals("t-1", 190, 3, 1.0, {1: TaskCounts(40, 3), 2: TaskCounts(150, 0)})], now=5.0)
    last = h.samples("t-1")[-1]
    assert (last.acked, last.failed) == (190, 3)  # the totals, as the topology page shows them
    assert (last.acked_per_sec, last.failed_per_sec) == ((40 + 50) / 5, 3 / 5)
    # a task missing from a reading (its worker not reported yet) keeps its last counts
    h.record([Totals("t-1", 150, 0, 1.0, {2: TaskCounts(150, 0)})], now=10.0)
    h.record([Totals("t-1", 160, 1, 1.0, {1: TaskCounts(10, 1), 2: TaskCounts(150, 0)})], now=15.0)
    assert (h.samples("t-1")[-1].acked_per_sec, h.samples("t-1")[-1].failed_per_sec) == (10 / 5, 1 / 5)
