"""Windowed bolts on a LocalCluster: Storm's acking rule (an input is acked when it leaves its
last window, and an unanchored emit is anchored to the whole window), processing-time and
event-time windows on the cluster's (simulated) clock, the late-tuple stream, and Storm's
checks at submit."""

from __future__ import annotations

import logging
import time

import pytest

from squall import (BaseWindowedBolt, Bolt, Config, Count, Duration, Fields, InvalidTopologyException,
                    LocalCluster, Spout, TopologyBuilder)
from squall.testing import AckFailMapTracker, FeederSpout, SimulatedClock, TupleCaptureBolt
from squall.testing._registry import SharedCounter, SharedLog, SharedQueue
from squall.windowing.executor import WindowedBoltExecutor

from ..conftest import wait_until
from ..feeders import PreemptedFeederSpout, executed

# The simulated-time tests' spout is held this long before each emit, as a spout preempted
# under load: each moves the clock only once the window bolt executed what was fed, or an
# input still on its way when the clock moved would land a window later.
HELD_SECS = 0.3


class RecordingWindowBolt(BaseWindowedBolt):
    """Records each window's values, new and expired values and bounds; emits the window's
    first values and its size, unanchored (so anchored to the whole window)."""

    def __init__(self) -> None:
        super().__init__()
        self.log = SharedLog()

    def execute(self, window):
        first = [t.values[0] for t in window.get()]
        self.log.append((first, [t.values[0] for t in window.get_new()],
                         [t.values[0] for t in window.get_expired()],
                         window.get_start_timestamp(), window.get_end_timestamp()))
        self.collector.emit([first[0], len(first)])
        for t in window.get():
            self.collector.ack(t)  # ignored (the window acks its inputs): acking twice would break trees

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("first", "size"))

    def windows(self):
        return [w[0] for w in self.log.items()]


class FailingBolt(Bolt):
    """Fails every input."""

    def execute(self, tup):
        self.collector.fail(tup)


def _topology(bolt, fields=("v",), downstream=None, spout=None):
    feeder = spout or FeederSpout(Fields(*fields))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("feeder", feeder)
    builder.set_bolt("window", bolt).global_grouping("feeder")
    if downstream is not None:
        builder.set_bolt("down", downstream).shuffle_grouping("window")
    return feeder, tracker, builder.create_topology()


def _acked(tracker, ids):
    return {m for m in ids if tracker.is_acked(m)}


def _executed(cluster, name):
    return executed(cluster, name, "window")


def test_each_input_is_acked_exactly_when_it_leaves_its_last_window():
    bolt = RecordingWindowBolt().with_window(Count(3), Count(2))
    capture = TupleCaptureBolt()
    feeder, tracker, topo = _topology(bolt, downstream=capture)
    ids = [f"m{i}" for i in range(1, 8)]
    with LocalCluster() as cluster:
        cluster.submit_topology("acks", Config(), topo)
        for i in range(4):
            feeder.feed([i + 1], ids[i])
        assert wait_until(lambda: len(bolt.windows()) == 2)
        assert wait_until(lambda: _acked(tracker, ids) == {"m1"})
        for i in range(4, 7):
            feeder.feed([i + 1], ids[i])
        assert wait_until(lambda: len(bolt.windows()) == 3)
        assert wait_until(lambda: _acked(tracker, ids) == {"m1", "m2", "m3"})
        time.sleep(0.3)  # nothing else is acked: m4..m6 are in the window, m7 waits for the next
        assert _acked(tracker, ids) == {"m1", "m2", "m3"}
        assert not any(tracker.is_failed(m) for m in ids)
    assert bolt.windows() == [[1, 2], [2, 3, 4], [4, 5, 6]]
    assert [w[2] for w in bolt.log.items()] == [[], [1], [2, 3]]
    assert [v for _s, v in capture.results()["window"]] == [[1, 2], [2, 3], [4, 3]]


def test_an_unanchored_emit_is_anchored_to_every_tuple_of_the_window():
    bolt = RecordingWindowBolt().with_tumbling_window(Count(2))
    feeder, tracker, topo = _topology(bolt, downstream=FailingBolt())
    with LocalCluster() as cluster:
        cluster.submit_topology("anchors", Config(), topo)
        for i, m in enumerate(["a", "b", "c"]):
            feeder.feed([i], m)
        # the window [a, b] emitted one tuple, which "down" failed: both a and b fail
        assert wait_until(lambda: tracker.is_failed("a") and tracker.is_failed("b"))
        time.sleep(0.2)
        assert not tracker.is_failed("c") and not tracker.is_acked("c")


def test_processing_time_window_fires_on_the_cluster_clock():
    """a and b arrive at the instant the window's timer starts (t0, the clock not moved): they
    are in both their windows of 4 s every 2 s, those ending at t0 + 2 and t0 + 4 (stamped t0,
    they were on the boundary of the second and left it unevaluated)."""
    bolt = RecordingWindowBolt().with_window(Duration.seconds(4), Duration.seconds(2))
    feeder, tracker, topo = _topology(bolt, spout=PreemptedFeederSpout(Fields("v"), HELD_SECS))
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("ptime", Config(), topo)  # the window's timer: every 2 s from t0
        feeder.feed([1], "a")
        feeder.feed([2], "b")
        assert wait_until(lambda: _executed(cluster, "ptime") == 2)
        cluster.advance_cluster_time(2)  # t0 + 2
        assert wait_until(lambda: bolt.windows() == [[1, 2]]), bolt.log.items()
        feeder.feed([3], "c")
        assert wait_until(lambda: _executed(cluster, "ptime") == 3)
        cluster.advance_cluster_time(2)  # t0 + 4: a and b in their second window, with c
        assert wait_until(lambda: bolt.windows() == [[1, 2], [1, 2, 3]]), bolt.log.items()
        cluster.advance_cluster_time(2)  # t0 + 6: a and b left (acked), c in its second window
        assert wait_until(lambda: bolt.windows() == [[1, 2], [1, 2, 3], [3]]), bolt.log.items()
        assert wait_until(lambda: tracker.is_acked("a") and tracker.is_acked("b"))
        assert not tracker.is_acked("c")
        cluster.advance_cluster_time(2)  # t0 + 8: c leaves; the window is empty, execute is not called
        assert wait_until(lambda: tracker.is_acked("c"))
        assert len(bolt.windows()) == 3
    assert {w[4] - w[3] for w in bolt.log.items()[1:]} == {4000}
    assert bolt.log.items()[1][1] == [3] and bolt.log.items()[2][2] == [1, 2]  # new; expired


def test_event_time_windows_follow_the_watermark_and_late_tuples_go_to_their_stream():
    bolt = RecordingWindowBolt().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts") \
        .with_late_tuple_stream("late")
    feeder = PreemptedFeederSpout(Fields("v", "ts"), HELD_SECS)
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    capture = TupleCaptureBolt()
    builder = TopologyBuilder()
    builder.set_spout("feeder", feeder)
    builder.set_bolt("window", bolt).global_grouping("feeder")
    builder.set_bolt("late", capture).global_grouping("window", "late")
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("etime", Config(), builder.create_topology())
        for v, ts in (("a", 101), ("b", 105), ("c", 112), ("d", 125)):
            feeder.feed([v, ts], v)
        assert wait_until(lambda: _executed(cluster, "etime") == 4)
        cluster.advance_cluster_time(1)  # the watermark interval: watermark 125
        # windows end on multiples of 10 and hold (end - 10, end]; the one ending 130 waits
        assert wait_until(lambda: bolt.windows() == [["a", "b"], ["c"]]), bolt.log.items()
        assert [w[3:] for w in bolt.log.items()] == [(100, 110), (110, 120)]
        assert wait_until(lambda: tracker.is_acked("a") and tracker.is_acked("b"))  # left their window
        feeder.feed(["old", 50], "old")  # before the watermark: late
        assert wait_until(lambda: tracker.is_acked("old"))
        [(stream, [late])] = capture.results()["window"]
        assert stream == "late" and late.values == ["old", 50] and late.source_component == "feeder"
        assert not tracker.is_acked("c") and not tracker.is_acked("d")
        feeder.feed(["e", 140], "e")
        assert wait_until(lambda: _executed(cluster, "etime") == 6)  # a-d, old, e
        cluster.advance_cluster_time(1)  # watermark 140
        assert wait_until(lambda: bolt.windows()[2:] == [["d"], ["e"]]), bolt.log.items()
        assert wait_until(lambda: tracker.is_acked("c") and tracker.is_acked("d"))
        assert not tracker.is_acked("e")
    assert "old" not in [v for w in bolt.windows() for v in w]


def test_a_timestamp_that_is_not_a_number_is_reported_naming_component_and_field():
    bolt = RecordingWindowBolt().with_tumbling_window(Count(1)).with_timestamp_field("ts")
    feeder, tracker, topo = _topology(bolt, fields=("v", "ts"))
    with LocalCluster() as cluster:
        cluster.submit_topology("badts", Config(), topo)
        feeder.feed(["x", "yesterday"], "x")
        assert wait_until(lambda: tracker.is_failed("x"))
        errors = cluster.get_topology_info("badts")["errors"]
    assert any("[window]" in e["error"] and "'ts'" in e["error"] and "yesterday" in e["error"] for e in errors)


@pytest.mark.parametrize("bolt, conf, message", [
    (lambda: RecordingWindowBolt().with_window(Duration.seconds(30), Duration.seconds(5)),
     {"topology.message.timeout.secs": 30}, "Window duration (length + sliding interval) value 35000"),
    (lambda: RecordingWindowBolt().with_window(Count(30), Count(10)),
     {"topology.max.spout.pending": 20}, "Window count (length + sliding interval) value 40"),
    (lambda: RecordingWindowBolt().with_window(Count(3)).with_late_tuple_stream("late"),
     {}, "Late tuple stream can be defined only when specifying a timestamp field"),
    (lambda: RecordingWindowBolt().with_window(Count(3)).with_timestamp_field("when"),
     {}, "timestamp field 'when' is not a field of its input stream [default] of component [feeder]"),
    (lambda: RecordingWindowBolt(), {}, "Window length is not specified"),
    (lambda: RecordingWindowBolt().with_window(Count(3)).with_timestamp_field("v"),
     {"topology.bolts.late.tuple.stream": "late"}, "Stream for late tuples [late] must be defined"),
])
def test_storm_window_checks_refuse_the_topology_at_submit_naming_the_component(bolt, conf, message):
    _feeder, _tracker, topo = _topology(bolt())
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyException) as err:
        cluster.submit_topology("bad", conf, topo)
    assert "Component [window]" in str(err.value) and message in str(err.value)


class _Pass(Bolt):
    def execute(self, tuple_):
        self.collector.emit(tuple_.values, anchors=[tuple_])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("v"))


@pytest.mark.parametrize("through_a_bolt", [False, True])
def test_a_feeding_spouts_own_max_spout_pending_below_a_count_window_is_refused_naming_it(through_a_bolt):
    # Storm checks only the topology's bound; a spout's own one stalls the window as surely
    # (3 trees in flight, a window that waits for 5 more after 5: it never fills: the topology would hang silently)
    builder = TopologyBuilder()
    builder.set_spout("feeder", FeederSpout(Fields("v"))).set_max_spout_pending(3)
    builder.set_spout("other", FeederSpout(Fields("v"))).set_max_spout_pending(100)
    source = "feeder"
    if through_a_bolt:
        builder.set_bolt("pass", _Pass()).shuffle_grouping("feeder")
        source = "pass"
    builder.set_bolt("window", RecordingWindowBolt().with_tumbling_window(Count(5))) \
        .global_grouping(source).global_grouping("other")
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyException) as err:
        cluster.submit_topology("stall", Config(), builder.create_topology())
    assert str(err.value) == (
        "Component [window]: Window count (length + sliding interval) value 10 is more than spout [feeder]'s "
        "topology.max.spout.pending value 3: the spout would stop before the window fills")


def test_a_spout_bound_that_holds_the_window_or_one_feeding_only_checkpoints_passes():
    builder = TopologyBuilder()
    builder.set_spout("feeder", FeederSpout(Fields("v"))).set_max_spout_pending(10)
    builder.set_bolt("window", RecordingWindowBolt().with_tumbling_window(Count(5))).global_grouping("feeder")
    unrelated = FeederSpout(Fields("v"))
    builder.set_spout("unrelated", unrelated).set_max_spout_pending(1)
    builder.set_bolt("elsewhere", _Pass()).shuffle_grouping("unrelated")
    with LocalCluster() as cluster:
        cluster.submit_topology("holds", Config(), builder.create_topology())


def test_timeouts_off_or_enough_timeout_pass_the_checks():
    for conf in ({"topology.enable.message.timeouts": False}, {"topology.message.timeout.secs": 36}):
        _f, _t, topo = _topology(RecordingWindowBolt().with_window(Duration.seconds(30), Duration.seconds(5)))
        with LocalCluster() as cluster:
            cluster.submit_topology("ok", conf, topo)


def test_the_spouts_before_a_window_get_no_automatic_max_spout_pending_so_its_windows_fill(caplog):
    """The automatic limit (64 tuples a spout task at first, growing as tuples complete) held
    an event-time window's spout below a window's worth of tuples: none completed, and none
    came to move the watermark, until they timed out. Unset, nothing limits them (Storm's
    default), and every window the watermark passes fires and acks its tuples."""
    caplog.set_level(logging.INFO, logger="squall.engine.pending_tuner")
    bolt = RecordingWindowBolt().with_tumbling_window(Duration.seconds(10)).with_timestamp_field("ts")
    feeder, tracker, topo = _topology(bolt, fields=("v", "ts"))
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("long", Config(), topo)
        for i in range(500):
            feeder.feed([i, 100 * i], i)  # 50 s of event time, 100 ms apart
        assert wait_until(lambda: cluster.get_topology_info("long")["components"]["window"]["executed"] == 500), \
            cluster.get_topology_info("long")["components"]["feeder"]
        cluster.advance_cluster_time(1)  # the watermark interval: watermark 49,900
        # the windows end on multiples of 10 s and hold (end - 10 s, end]: those to 40 s fire
        assert wait_until(lambda: len(bolt.windows()) == 5), bolt.log.items()
        assert [(len(w[0]), w[4]) for w in bolt.log.items()] == [(1, 0), (100, 10000), (100, 20000), (100, 30000),
                                                                  (100, 40000)]
        # a tuple is acked when it leaves its window: when the next one fires (to 30 s here)
        assert wait_until(lambda: _acked(tracker, range(500)) == set(range(301))), \
            sorted(set(range(301)) ^ _acked(tracker, range(500)))[:20]
        assert not any(tracker.is_failed(i) for i in range(500))
    assert any("bolt [window] holds their inputs in windows" in r.getMessage() for r in caplog.records)

class ReplayingSpout(Spout):
    """Emits the (id, ts) records the test puts, the id as message id, and puts a failed one
    back to be emitted again (a spout that replays); logs what it emitted, acked and failed."""

    def __init__(self) -> None:
        self.queue = SharedQueue()
        self.emitted = SharedLog()
        self.acked = SharedLog()
        self.failed = SharedLog()

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.ts_of = {}

    def next_tuple(self):
        try:
            rid, ts = self.queue.take()
        except IndexError:
            return
        self.ts_of[rid] = ts
        self.emitted.append(rid)
        self.collector.emit([rid, ts], rid)

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id):
        self.failed.append(msg_id)
        self.queue.put((msg_id, self.ts_of[msg_id]))

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))


class TickCountingExecutor(WindowedBoltExecutor):
    """The windowed bolt's executor, counting the ticks it is sent (one a second of the cluster's
    clock), so the test moves the clock once the bolt's loop has seen the last move."""

    def __init__(self, bolt) -> None:
        super().__init__(bolt)
        self.ticks = SharedCounter()

    def execute(self, tup):
        if tup.source_stream == "__tick":
            self.ticks.incr()
        super().execute(tup)


@pytest.mark.parametrize("event_time", [False, True], ids=["count window", "event-time window"])
def test_a_pause_longer_than_the_message_timeout_counts_each_held_record_once(event_time):
    """A window holds its inputs until they leave their last window: a count window until
    enough tuples came, an event-time window until later ones move the watermark. Three records
    held through a 70 s pause of the stream (message timeout 30 s, nothing failing): they timed
    out, their replays joined the window beside them, and the count window fired [r0 r1 r2 r0
    r1] then [r2 r3 r4 r5 r6]; the event-time one [r0 r1 r2 r2] (the replays of r0 and r1 late).
    The window now resets the timeouts of the tuples it holds: each record is in exactly one
    window, none failed, none emitted twice."""
    spout = ReplayingSpout()
    bolt = RecordingWindowBolt()
    if event_time:
        bolt = bolt.with_tumbling_window(Duration.seconds(5)).with_timestamp_field("ts")
    else:
        bolt = bolt.with_tumbling_window(Count(5))
    window = TickCountingExecutor(bolt)
    b = TopologyBuilder()
    b.set_spout("records", spout)
    b.set_bolt("window", window).global_grouping("records") \
        .add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
    b.set_bolt("down", TupleCaptureBolt()).shuffle_grouping("window")
    conf = Config()
    conf.set_message_timeout_secs(30)
    records = [(f"r{i}", 1000 + i) for i in range(3)] + [(f"r{i}", 1000 + 2000 * i) for i in range(3, 10)]
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("pause", conf, b.create_topology())
        for r in records[:3]:
            spout.queue.put(r)
        assert wait_until(lambda: len(spout.emitted.items()) == 3)
        for second in range(1, 71):  # the pause: the clock moves, one tick at a time
            cluster.advance_cluster_time(1)
            assert wait_until(lambda: window.ticks.value >= second), (window.ticks.value, second)
        for r in records[3:]:
            spout.queue.put(r)
        if event_time:
            spout.queue.put(("end", 1_000_001))  # moves the watermark past the last record's window, not its own
        for second in range(71, 81):  # the watermark's timer (event time) and the ticks go on
            cluster.advance_cluster_time(1)
            assert wait_until(lambda: window.ticks.value >= second)
        assert wait_until(lambda: {rid for ids in bolt.windows() for rid in ids} >= {r for r, _ts in records}), \
            bolt.windows()
        in_windows = [rid for ids in bolt.windows() for rid in ids]
    assert spout.failed.items() == []
    assert sorted(in_windows) == sorted(r for r, _ts in records), bolt.windows()
    assert sorted(spout.emitted.items()) == sorted([r for r, _ts in records] + (["end"] if event_time else []))
