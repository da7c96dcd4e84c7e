"""Event-time windows at their edges, as Storm's WindowedBoltExecutor treats them: a tuple at a
watermark that is no window end, timestamps before 0 and infinite ones, and a count window whose
bolt raised with fail-fast off."""

from __future__ import annotations

import math

import pytest

from squall import (BaseWindowedBolt, Config, Count, Duration, Fields, InvalidTopologyException, LocalCluster,
                    TopologyBuilder)
from squall.testing import AckFailMapTracker, FeederSpout, SimulatedClock, TupleCaptureBolt
from squall.testing._registry import SharedCounter, SharedLog
from squall.windowing.watermark import WatermarkGenerator

from ..conftest import wait_until


class Rec(BaseWindowedBolt):
    """Records each window's end and values."""

    def __init__(self):
        super().__init__()
        self.log = SharedLog()

    def execute(self, window):
        self.log.append((window.get_end_timestamp(), [t.values[0] for t in window.get()]))


def _executed(cluster, name):
    return cluster.get_topology_info(name)["components"]["window"]["executed"]


def test_a_tuple_at_a_watermark_between_window_ends_is_in_its_window_not_late():
    """Whole-second timestamps and lag 0: every event of the newest second that came after a
    watermark tick went to the late stream, though its window (ending later) had not fired."""
    bolt = Rec().with_tumbling_window(Duration.seconds(5)).with_timestamp_field("ts").with_late_tuple_stream("late")
    feeder = FeederSpout(Fields("v", "ts"))
    capture = TupleCaptureBolt()
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("window", bolt).global_grouping("feeder")
    b.set_bolt("late", capture).global_grouping("window", "late")
    conf = Config()
    conf["topology.stats.sample.rate"] = 1.0
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("sec", conf, b.create_topology())
        t = 1_700_000_012_000  # whole seconds, not a window end (5 s)
        feeder.feed(["a", t - 1000], "a")
        feeder.feed(["b", t], "b")
        assert wait_until(lambda: _executed(cluster, "sec") == 2)
        cluster.advance_cluster_time(1)  # the watermark: t
        feeder.feed(["c", t], "c")  # the same second, after the tick
        feeder.feed(["d", t + 5000], "d")
        assert wait_until(lambda: _executed(cluster, "sec") == 4)
        cluster.advance_cluster_time(1)  # the watermark t + 5000 fires (t - 2000, t + 3000]
        assert wait_until(lambda: bolt.log.items() == [(t + 3000, ["a", "b", "c"])])
        assert capture.results().get("window", []) == []


def test_a_tuple_at_a_window_end_that_fired_is_late():
    """Where the watermark is a window end that was evaluated, a tuple at it is late (issue 33)."""
    from squall.windowing import Duration as D
    from squall.windowing.manager import window_manager

    class Listener:
        def __init__(self):
            self.windows = []

        def on_expiry(self, events):
            pass

        def on_activation(self, events, new, expired, end_ts):
            self.windows.append((end_ts, list(events)))
    listener = Listener()
    manager = window_manager(listener, D(5000), D(5000), event_time=True)
    manager.add("a", 14_000)
    manager.add_watermark(15_000)
    assert listener.windows == [(15_000, ["a"])]
    assert manager.trigger.evaluated_through(15_000) and not manager.trigger.evaluated_through(16_000)


def test_a_timestamp_before_0_is_late_as_storms_first_watermark_makes_it():
    """It was in no window, and expired unacknowledged as late: gone without a word."""
    gen = WatermarkGenerator(0, {("s", "default"): [1]}, 30_000)
    assert not gen.track(("s", "default", 1), -5500, 0)
    assert gen.track(("s", "default", 1), 0, 0) and gen.track(("s", "default", 1), 2500, 0)


class RecCount(BaseWindowedBolt):
    def __init__(self):
        super().__init__()
        self.log = SharedLog()

    def execute(self, window):
        self.log.append([t.values[0] for t in window.get()])


@pytest.mark.parametrize("bad", [math.inf, -math.inf])
def test_an_infinite_timestamp_is_reported_and_failed_not_a_crash(bad):
    bolt = RecCount().with_tumbling_window(Count(1)).with_timestamp_field("ts")
    feeder = FeederSpout(Fields("v", "ts"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("window", bolt).global_grouping("feeder")
    with LocalCluster() as cluster:
        cluster.submit_topology("infts", Config(), b.create_topology())
        feeder.feed(["x", bad], "x")
        assert wait_until(lambda: tracker.is_failed("x"))
        errors = cluster.get_topology_info("infts")["errors"]
        assert [e["fatal"] for e in errors] == [False] and "timestamp field 'ts' is" in errors[0]["error"]


def test_an_infinite_window_setting_is_refused_naming_the_component():
    b = TopologyBuilder()
    b.set_spout("feeder", FeederSpout(Fields("v", "ts")))
    b.set_bolt("window", RecCount().with_tumbling_window(Count(2)).with_timestamp_field("ts")) \
        .global_grouping("feeder").add_configuration("topology.bolts.tuple.timestamp.max.lag.ms", math.inf)
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyException, match=r"Component \[window\]"):
        cluster.submit_topology("inflag", Config(), b.create_topology())


class RaisesOnce(BaseWindowedBolt):
    def __init__(self):
        super().__init__()
        self.log = SharedLog()
        self.calls = SharedCounter()

    def execute(self, window):
        self.calls.incr()
        if self.calls.value == 1:
            raise ValueError("boom")
        self.log.append([t.values[0] for t in window.get()])


def test_a_count_window_whose_bolt_raised_keeps_its_windows_aligned():
    """With fail-fast off, the raise skipped the trigger's reset: every later tumbling window
    fired a tuple early ([1,2,3], [4,5,6] instead of [3,4,5], [6,7,8])."""
    bolt = RaisesOnce().with_tumbling_window(Count(3))
    feeder = FeederSpout(Fields("v"))
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("window", bolt).global_grouping("feeder")
    conf = Config()
    conf["topology.bolt.fail.fast"] = False
    with LocalCluster() as cluster:
        cluster.submit_topology("ff", conf, b.create_topology())
        for i in range(9):
            feeder.feed([i], i)
        assert wait_until(lambda: len(bolt.log.items()) == 2)
        assert bolt.log.items() == [[3, 4, 5], [6, 7, 8]]
