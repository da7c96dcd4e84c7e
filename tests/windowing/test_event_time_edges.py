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


def _window_topology(bolt, late=None, fields=("v", "ts")):
    """A feeder into ``bolt`` (component "window", global grouping), and ``late`` (a capture, if
    given) on the window's late stream: the feeder and the topology."""
    feeder = FeederSpout(Fields(*fields))
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("window", bolt).global_grouping("feeder")
    if late is not None:
        b.set_bolt("late", late).global_grouping("window", "late")
    return feeder, b.create_topology()


def _executed(cluster, name):
    return cluster.get_topology_info(name)["components"]["window"]["executed"]


def test_a_tuple_at_a_watermark_between_window_ends_is_in_its_window_not_late():
    """Whole-second timestamps and lag 0: every event of the newest second that came after a
    watermark tick went to the late stream, though its window (ending later) had not fired."""
    bolt = Rec().with_tumbling_window(Duration.seconds(5)).with_timestamp_field("ts").with_late_tuple_stream("late")
    capture = TupleCaptureBolt()
    feeder, topology = _window_topology(bolt, late=capture)
    conf = Config()
    conf["topology.stats.sample.rate"] = 1.0
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("sec", conf, topology)
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


def test_a_timestamp_before_0_stays_late_after_the_first_watermark_tick():
    """The watermark never goes to 0 or below, as Storm's (``lastWaterMarkTs`` starts at 0):
    with a 30 s lag and a newest timestamp of 200 ms it was -29,800, and a tuple at -800 ms
    that was late before that tick was in time after it (the explore's record 110: late in 6
    runs, in the window (-5000, 0] in one)."""
    src = ("s", "default", 1)
    gen = WatermarkGenerator(30_000, {("s", "default"): [1]}, 10_000)
    assert not gen.track(src, -800, 0.0)
    assert gen.track(src, 200, 0.1)
    assert gen.next_watermark(1.1) is None and gen.last_watermark is None  # 200 - 30,000: none yet
    assert not gen.track(src, -800, 1.2) and not gen.track(src, -1, 1.2)
    assert gen.track(src, 0, 1.2)
    gen.track(src, 30_500, 2.0)
    assert gen.next_watermark(2.1) == 500 and not gen.track(src, -800, 2.2)
    # a persistent window's state saved when the watermark could be negative restores as none
    restored = WatermarkGenerator(30_000, {("s", "default"): [1]}, 10_000)
    restored.restore_state([[[["s", "default", 1], 200]], -29_800])
    assert restored.last_watermark is None and not restored.track(src, -800, 0.0)
    assert restored.next_watermark(0.0) is None


def test_every_negative_timestamp_is_late_whether_it_comes_before_or_after_a_watermark_tick():
    """A windowed bolt (tumbling 5 s, lag 30 s, late stream) on a LocalCluster: records before
    0 fed before the first watermark tick and after it are all on the late stream, and every
    record sent is either in a window or late. Before, those fed after the tick were counted
    in the window (-5000, 0] (sent 7: 3 windowed of 4 negative, 1 late)."""
    bolt = (Rec().with_tumbling_window(Duration.seconds(5)).with_timestamp_field("ts")
            .with_lag(Duration.seconds(30)).with_late_tuple_stream("late"))
    capture = TupleCaptureBolt()
    feeder, topology = _window_topology(bolt, late=capture)
    conf = Config()
    conf["topology.stats.sample.rate"] = 1.0
    before_tick = [("a", -800), ("b", 200)]
    after_tick = [("c", -800), ("d", -4999), ("e", 0), ("f", -1), ("g", 35_000)]
    closer = ("z", 100_000)  # moves the watermark to 70 s: every window above fires; it stays held

    def windowed():
        return [v for _end, values in bolt.log.items() for v in values]

    def late():
        return [values[0].values[0] for _stream, values in capture.results().get("window", [])]
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("neg", conf, topology)
        for v, ts in before_tick:
            feeder.feed([v, ts], v)
        assert wait_until(lambda: _executed(cluster, "neg") == 2)
        cluster.advance_cluster_time(2)  # watermark ticks: the newest (200) less the lag is below 0
        for v, ts in [*after_tick, closer]:
            feeder.feed([v, ts], v)
        assert wait_until(lambda: _executed(cluster, "neg") == 8)
        cluster.advance_cluster_time(2)
        sent = len(before_tick) + len(after_tick)  # the closer's window is after the watermark
        assert wait_until(lambda: len(windowed()) + len(late()) == sent)
        assert sorted(late()) == ["a", "c", "d", "f"]
        assert bolt.log.items() == [(0, ["e"]), (5000, ["b"]), (35_000, ["g"])]


class RecCount(BaseWindowedBolt):
    def __init__(self):
        super().__init__()
        self.log = SharedLog()

    def execute(self, window):
        self.log.append([t.values[0] for t in window.get()])


@pytest.mark.parametrize("bad", [math.inf, -math.inf])
def test_an_infinite_timestamp_is_reported_and_failed_not_a_crash(bad):
    bolt = RecCount().with_tumbling_window(Count(1)).with_timestamp_field("ts")
    feeder, topology = _window_topology(bolt)
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    with LocalCluster() as cluster:
        cluster.submit_topology("infts", Config(), topology)
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
    feeder, topology = _window_topology(bolt, fields=("v",))
    conf = Config()
    conf["topology.bolt.fail.fast"] = False
    with LocalCluster() as cluster:
        cluster.submit_topology("ff", conf, topology)
        for i in range(9):
            feeder.feed([i], i)
        assert wait_until(lambda: len(bolt.log.items()) == 2)
        assert bolt.log.items() == [[3, 4, 5], [6, 7, 8]]


def test_no_stalled_warning_while_no_timestamp_has_passed_the_lag(caplog):
    """Event time from 0 with a 30 s lag: the watermark has no first value (it starts above 0)
    until a timestamp passes 30 s. That is no stall: no warning over 3 message timeouts, though
    newer tuples came; then the windows fire once the lag is passed, every record in its window."""
    import logging
    caplog.set_level(logging.WARNING, logger="squall.windowing")
    bolt = (Rec().with_tumbling_window(Duration.seconds(5)).with_timestamp_field("ts")
            .with_lag(Duration.seconds(30)).with_late_tuple_stream("late"))
    feeder, topology = _window_topology(bolt)
    conf = Config()
    conf.set_message_timeout_secs(10)
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("lag", conf, topology)
        for i in range(8):  # 1 s of event time per 5 s of the cluster's: ts 0 .. 7 s
            feeder.feed([f"r{i}", 1000 * i], f"r{i}")
            assert wait_until(lambda i=i: _executed(cluster, "lag") == i + 1)
            cluster.advance_cluster_time(5)
        assert not [r for r in caplog.records if "the watermark has not moved" in r.getMessage()]
        feeder.feed(["z", 40_000], "z")  # the watermark 10 s: the windows ending 0, 5 and 10 s fire
        assert wait_until(lambda: _executed(cluster, "lag") == 9)
        cluster.advance_cluster_time(2)
        assert wait_until(lambda: bolt.log.items() == [(0, ["r0"]), (5000, ["r1", "r2", "r3", "r4", "r5"]),
                                                       (10_000, ["r6", "r7"])])
