"""The UI's history (the topology page's throughput and failures charts) of a topology submitted
while the daemon samples: what it did before its first sample is in that sample's rates.

A new user's pipeline (20,000 events, 39 malformed) submitted to a `LocalCluster` with its UI up
summed its failures chart to 493 of its spout's 1,059 failures and its dead letters to 23 of 39:
the first sample of every topology said 0 per second, whatever it had done since the sample
before, when it was not there yet."""

import pytest

from squall import Bolt, Config, Fields, LocalCluster, TopologyBuilder
from squall.engine.clock import SimulatedClock
from squall.testing import FixedTupleSpout
from squall.ui.history import History, HistorySampler, TaskCounts, Totals

from ..conftest import wait_until

N, EVERY = 200, 8  # records, and every EVERY-th one is failed by the bolt


def test_a_topology_submitted_between_two_readings_counts_what_it_did_before_its_first_sample():
    h = History(interval_secs=5, keep_secs=60)
    h.record([Totals("old-1", 10, 0, 1.0)], now=100.0)
    h.record([Totals("old-1", 20, 0, 1.0), Totals("new-2", 300, 12, 2.0, dead_lettered=3)], now=105.0)
    (first,) = h.samples("new-2")
    assert (first.acked_per_sec, first.failed_per_sec, first.dead_lettered_per_sec) == (60.0, 2.4, 0.6)
    assert h.samples("old-1")[-1].acked_per_sec == 2.0


def test_a_new_topologys_first_sample_counts_every_launch_of_its_spout_tasks():
    """Its spout's first worker died before the first sample: the ended launch counts too."""
    h = History(interval_secs=5, keep_secs=60)
    h.record([], now=0.0)
    launches = {1: TaskCounts(40, 5, ("L2", "s:1")), 2: TaskCounts(30, 0, ("L1", "s:2"))}
    h.record([Totals("t-1", 70, 5, 1.0, launches, ended={1: [TaskCounts(100, 7, ("L1", "s:1"))]})], now=10.0)
    (first,) = h.samples("t-1")
    assert (first.acked_per_sec, first.failed_per_sec) == (17.0, 1.2)
    # the next sample counts from those launches on
    h.record([Totals("t-1", 80, 6, 1.0, {1: TaskCounts(45, 6, ("L2", "s:1")), 2: TaskCounts(35, 0, ("L1", "s:2"))},
                     ended={1: [TaskCounts(100, 7, ("L1", "s:1"))]})], now=15.0)
    assert (h.samples("t-1")[-1].acked_per_sec, h.samples("t-1")[-1].failed_per_sec) == (2.0, 0.2)


def test_a_topology_running_before_the_first_reading_has_no_rate_in_its_first_sample():
    h = History(interval_secs=5, keep_secs=60)
    h.record([Totals("t-1", 500, 9, 1.0)], now=0.0)
    assert h.samples("t-1")[0].acked_per_sec == 0.0


def test_a_topology_running_while_thousands_came_and_went_is_not_counted_again_after_a_missed_reading():
    """A topology read since the daemon's first reading, while 5,000 others were submitted and
    killed; a reading misses it, the next reads it again: its all-time figures are not what it
    did since. On main the 4,097th topology read pushed it out of those remembered (the first
    read goes first), and it came back as new: 1,000,000 acked in 5 s, 200,000 per second."""
    h = History(interval_secs=5, keep_secs=60)
    now, acked = 0.0, 0
    for batch in range(5):
        acked += 200_000
        h.record([Totals("long-1", acked, 0, 1.0), *(Totals(f"short-{batch}-{i}", 1, 0, 1.0) for i in range(1000))],
                 now=now)
        now += 5.0
    assert h.samples("long-1")[-1].acked_per_sec == 40_000.0
    h.record([], now=now)
    h.record([Totals("long-1", acked, 0, 1.0)], now=now + 5.0)
    assert [s.acked_per_sec for s in h.samples("long-1")] == [0.0]


def test_a_topology_a_reading_missed_is_not_counted_again_when_it_comes_back():
    """A reading that missed a topology (killed between the master's answers) drops its ring;
    read again, its all-time figures are not what it did since."""
    h = History(interval_secs=5, keep_secs=60)
    h.record([], now=0.0)
    h.record([Totals("t-1", 100, 0, 1.0)], now=5.0)
    h.record([], now=10.0)
    h.record([Totals("t-1", 110, 0, 1.0)], now=15.0)
    assert h.samples("t-1")[0].acked_per_sec == 0.0


class FailEvery(Bolt):
    """Fails every ``EVERY``-th record (by its number), acks the others."""

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup):
        if tup["n"] % EVERY == 0:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


@pytest.mark.timeout(60)
def test_the_charts_count_a_topology_submitted_while_the_ui_samples_from_its_start():
    pytest.importorskip("starlette", reason="the UI needs the ui extra: pip install -e '.[ui]'")
    from squall.ui.link import DirectLink
    from squall.ui.pages import read_totals

    b = TopologyBuilder()
    b.set_spout("src", FixedTupleSpout([[i] for i in range(N)], Fields("n")), 2)
    b.set_bolt("check", FailEvery(), 2).shuffle_grouping("src")
    failed = len(range(0, N, EVERY))
    with LocalCluster() as cluster:
        link = DirectLink(cluster)
        clock = SimulatedClock(start=1000.0)
        sampler = HistorySampler(lambda: list(read_totals(link)), interval_secs=5, keep_secs=60, clock=clock)
        sampler.sample_once()  # the daemon reads the cluster: no topology yet
        cluster.submit_topology("burst", Config(), b.create_topology())
        def totals():
            return [(t.acked, t.failed) for t in read_totals(link)]

        assert wait_until(lambda: totals() == [(N - failed, failed)], 30), totals()
        clock.advance(5)
        sampler.sample_once()
        (first,) = sampler.samples(cluster.get_topology_info("burst")["id"])
        # every record's tree ended between the two readings: the rates over those 5 s hold them all
        assert (first.acked_per_sec * 5, first.failed_per_sec * 5) == (N - failed, failed)
        cluster.kill_topology("burst", wait_secs=0)
