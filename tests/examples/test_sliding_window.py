"""examples/sliding_window.py and examples/sliding_tuple_ts.py (Storm's SlidingWindowTopology
and SlidingTupleTsTopology): their sums and averages on fed data, on a LocalCluster, and which
spout tuples complete (those that left every window downstream)."""

from __future__ import annotations

import time

from squall import Fields, StormTopology
from squall.testing import AckFailMapTracker, FeederSpout, SimulatedClock, TupleCaptureBolt
from squall import LocalCluster

from ..conftest import wait_until
from ..feeders import PreemptedFeederSpout, executed
from .conftest import RecordingCollector, StubContext


def _values(capture, component):
    return [v[0] for _s, v in capture.results().get(component, [])]


def test_modules_define_build_and_conf(sliding_window, sliding_tuple_ts):
    for module in (sliding_window, sliding_tuple_ts):
        assert isinstance(module.build(), StormTopology)
        assert module.conf["topology.workers"] == 1


def test_random_integer_spout_emits_value_ts_a_day_behind_and_msgid(sliding_window):
    spout = sliding_window.RandomIntegerSpout(interval_secs=0, seed=1)
    out = RecordingCollector()
    spout.open({}, StubContext(), out)
    before = int(time.time() * 1000) - sliding_window.DAY_MS
    for _ in range(5):
        spout.next_tuple()
    assert [m for _v, m in out.emitted] == [1, 2, 3, 4, 5]
    for (value, ts, msgid), m in out.emitted:
        assert 0 <= value < 1000 and msgid == m and before <= ts <= before + 60_000


def test_sliding_sum_then_tumbling_average_and_only_tuples_out_of_every_window_complete(sliding_window, cluster):
    feeder = FeederSpout(Fields("value", "ts", "msgid"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = sliding_window.make_builder(feeder)
    capture = TupleCaptureBolt()
    builder.set_bolt("capture", capture).global_grouping("slidingsum").global_grouping("tumblingavg")
    for i in range(1, 61):
        feeder.feed([i, 0, i], i)
    cluster.submit_topology("sliding", sliding_window.conf, builder.create_topology())

    # the last 30 values every 10: 1..10, 1..20, 1..30, 11..40, 21..50, 31..60
    assert wait_until(lambda: len(_values(capture, "tumblingavg")) == 2), capture.results()
    assert _values(capture, "slidingsum") == [55, 210, 465, 765, 1065, 1365]
    assert _values(capture, "tumblingavg") == [(55 + 210 + 465) // 3, (765 + 1065 + 1365) // 3]
    # 1..10 went only into the first three sums, which left the averaging window when the
    # second average fired; 11 is also in the fourth sum, still in that window
    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(1, 11)))
    time.sleep(0.2)
    assert not any(tracker.is_acked(i) or tracker.is_failed(i) for i in range(11, 61))


def test_event_time_sums_follow_the_tuples_timestamps(sliding_tuple_ts):
    # held before each emit as under load: the clock moves once the sums executed what was fed
    feeder = PreemptedFeederSpout(Fields("value", "ts", "msgid"), 0.05)
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = sliding_tuple_ts.make_builder(feeder)
    capture = TupleCaptureBolt()
    builder.set_bolt("capture", capture).global_grouping("slidingsum")
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("tuple-ts", sliding_tuple_ts.conf, builder.create_topology())
        for i in range(1, 13):  # value i at i seconds of event time
            feeder.feed([i, i * 1000, i], i)
        assert wait_until(lambda: executed(cluster, "tuple-ts", "slidingsum") == 12)
        cluster.advance_cluster_time(1)  # watermark 12 s - 5 s lag: windows ending 3 s and 6 s
        # (-2, 3] holds 1..3; (1, 6] holds 2..6
        assert wait_until(lambda: _values(capture, "slidingsum") == [6, 20]), capture.results()
        feeder.feed([100, 20_000, 13], 13)
        assert wait_until(lambda: executed(cluster, "tuple-ts", "slidingsum") == 13)
        cluster.advance_cluster_time(1)  # watermark 15 s: windows ending 9, 12, 15 s
        assert wait_until(lambda: _values(capture, "slidingsum") == [6, 20, 35, 50, 23]), capture.results()
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(1, 11)))  # left (10, 15]
        assert not any(tracker.is_acked(i) for i in (11, 12, 13))


def test_main_runs_and_prints_sums_then_counts(sliding_window, capsys):
    sliding_window.main(run_secs=0.5)
    out = capsys.readouterr().out
    assert "topology sliding-window (ACTIVE" in out
    counts = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] in
              (["integer"], ["slidingsum"], ["tumblingavg"], ["printer"])}
    assert sorted(counts) == ["integer", "printer", "slidingsum", "tumblingavg"]
    assert int(counts["integer"][4]) > 0 and "error in" not in out
