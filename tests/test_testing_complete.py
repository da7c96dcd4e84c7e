"""`complete_topology` when the topology under test has a bug: a worker that crashes fails the
test at once, naming the component, task and error; a topology that never completes times out
with a message naming the bolts that hold the spouts' tuples, and the errors reported."""

from __future__ import annotations

import re
import threading

import pytest

from squall import (
    BaseWindowedBolt,
    BasicBolt,
    Bolt,
    Config,
    Count,
    Duration,
    Fields,
    LocalCluster,
    TopologyBuilder,
)
from squall.testing import (
    FeederSpout,
    complete_topology,
    read_tuples,
    track_and_capture_topology,
    tracked_wait,
    with_simulated_time_local_cluster,
    with_tracked_cluster,
)
from squall.testing._registry import SharedFlag


class CannotConnect(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def prepare(self, conf, context, collector):
        raise RuntimeError("cannot connect to the database")

    def execute(self, tup):
        self.collector.ack(tup)


class NeverAcks(Bolt):
    def execute(self, tup):
        pass


class OddRaises(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def execute(self, tup, collector):
        if tup["n"] % 2:
            raise ValueError("odd number")
        collector.emit([tup["n"]])


class WindowSum(BaseWindowedBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("sum"))

    def execute(self, window):
        self.collector.emit([sum(t["n"] for t in window.get())])


def test_a_worker_that_crashes_fails_complete_topology_at_once_naming_component_task_and_error():
    """Before, `prepare` raising crash-looped the bolt's worker while complete_topology waited out
    its timeout, then said only "spouts not done: {'numbers': '0/3 tuples completed'}"."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")))
    builder.set_bolt("db", CannotConnect()).shuffle_grouping("numbers")
    with LocalCluster() as cluster:
        with pytest.raises(AssertionError) as raised:
            complete_topology(cluster, builder.create_topology(), {"numbers": [[1], [2], [3]]}, timeout_secs=20)
        assert not cluster.get_topology_names()  # killed all the same
    message = str(raised.value)
    assert "timed out" not in message
    assert message.startswith("complete_topology: a worker of the topology crashed in component [db] task ")
    assert "RuntimeError: cannot connect to the database" in message
    assert "in prepare" in message  # the user's frame, from the traceback


def test_a_timeout_names_the_bolts_holding_the_tuples_and_the_errors_reported():
    """Before, the message was only "spouts not done: {'numbers': '3/6 tuples completed'}"."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")))
    builder.set_bolt("odd", OddRaises()).shuffle_grouping("numbers")
    builder.set_bolt("stuck", NeverAcks()).shuffle_grouping("numbers")
    builder.set_bolt("sums", WindowSum().with_tumbling_window(Count.of(4))).shuffle_grouping("numbers")
    with pytest.raises(AssertionError) as raised:
        complete_topology(None, builder.create_topology(), {"numbers": [[n] for n in range(6)]}, timeout_secs=1)
    message = str(raised.value)
    # the 3 odd numbers failed: they count as done
    assert message.startswith("Test timed out (1s); spouts not done: {'numbers': '3/6 tuples completed'}; ")
    assert "[stuck] holds 6 of the 6 tuples it executed, neither acked nor failed;" in message
    # one window of 4 fired; its tuples leave it only when the next one fires
    assert ("[sums] holds 6 of the 6 tuples it executed, neither acked nor failed, a windowed bolt: it acks "
            "a tuple when the tuple leaves its last window") in message
    assert "[odd]" not in message.split("; errors reported:")[0]  # it acked 3, failed 3
    assert re.search(r"; errors reported: \[odd\] task \d+: ValueError: odd number \(x3\)$", message)


def test_a_timeout_says_when_message_timeouts_are_off_so_that_none_could_complete_the_held_tuples():
    """Storm's testing clusters have them off (with_tracked_cluster here): a test that counted on
    a timeout to fail the tuples a bolt holds waits out its own. Before, the message did not say
    why nothing timed them out."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")))
    builder.set_bolt("stuck", NeverAcks()).shuffle_grouping("numbers")
    with LocalCluster({Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: False}) as cluster, \
            pytest.raises(AssertionError) as raised:
        complete_topology(cluster, builder.create_topology(), {"numbers": [[1], [2]]}, timeout_secs=1)
    assert str(raised.value) == (
        "Test timed out (1s); spouts not done: {'numbers': '0/2 tuples completed'}; [stuck] holds 2 of the 2 "
        "tuples it executed, neither acked nor failed, and message timeouts are off (topology.enable.message."
        "timeouts false, as on with_tracked_cluster and with_simulated_time_local_cluster unless asked for): "
        "no timeout fails them")


def test_a_topology_that_completes_reports_nothing_of_the_kind():
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")))
    builder.set_bolt("odd", OddRaises()).shuffle_grouping("numbers")
    result = complete_topology(None, builder.create_topology(), {"numbers": [[n] for n in range(6)]})
    assert read_tuples(result, "numbers") == [[n] for n in range(6)]
    assert read_tuples(result, "odd") == [[0], [2], [4]]


def test_windows_are_tested_with_a_tracked_wait_which_waits_for_processing_not_acks():
    """What docs/testing.md advises for count and event-time windows, which keep their last
    tuples: every window that can fire has fired once `tracked_wait` returns."""
    feeder = FeederSpout(Fields("n", "ts"))
    builder = TopologyBuilder()
    builder.set_spout("numbers", feeder)
    builder.set_bolt("by_count", WindowSum().with_tumbling_window(Count.of(4))).global_grouping("numbers")
    builder.set_bolt("by_time", WindowSum().with_tumbling_window(Duration.seconds(5)).with_timestamp_field("ts")
                     .with_watermark_interval(Duration.of(100))).global_grouping("numbers")
    with with_tracked_cluster() as cluster:
        captured = track_and_capture_topology(cluster, builder.create_topology())
        cluster.submit_topology("windows", {}, captured.topology)
        for n in range(1, 21):
            feeder.feed([n, 700 * n])  # 700 ms apart: 0.7 s ... 14 s
        tracked_wait(captured, 20)
        cluster.advance_cluster_time(1)  # the watermark's timer
        tracked_wait(captured, 0)
        results = captured.capturer.get_results()
    assert read_tuples(results, "numbers") == [[n, 700 * n] for n in range(1, 21)]
    assert read_tuples(results, "by_count") == [[1 + 2 + 3 + 4], [5 + 6 + 7 + 8], [9 + 10 + 11 + 12],
                                                 [13 + 14 + 15 + 16], [17 + 18 + 19 + 20]]
    # (0, 5 s]: 1..7; (5 s, 10 s]: 8..14; the watermark (14 s) has not reached 15 s
    assert read_tuples(results, "by_time") == [[sum(range(1, 8))], [sum(range(8, 15))]]


class WindowStats(BaseWindowedBolt):
    """Per activation: the window's sum, and how many tuples it holds, are new, expired."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("sum", "size", "new", "expired"))

    def execute(self, window):
        self.collector.emit([sum(t["n"] for t in window.get()), len(window.get()), len(window.get_new()),
                             len(window.get_expired())])


def windowed(**bolts):
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")))
    for cid, bolt in bolts.items():
        builder.set_bolt(cid, bolt).global_grouping("numbers")
    return builder.create_topology()


def test_count_windows_complete_with_every_window_storm_fires():
    """A count window keeps its last tuples (fewer than its sliding count) until more input
    comes, which fixed input never sends: complete_topology timed out, and returned nothing of
    the windows that had fired. It now ends once every input tuple was emitted, the topology is
    idle and the only tuples pending are in such windows (count triggers, or event time), and
    returns each window Storm's fire on these 10 tuples."""
    topology = windowed(tumbling=WindowStats().with_tumbling_window(Count.of(4)),
                        sliding=WindowStats().with_window(Count.of(4), Count.of(2)),
                        by_count=WindowStats().with_window(Duration.seconds(20), Count.of(3)))
    result = complete_topology(None, topology, {"numbers": [[n] for n in range(1, 11)]}, timeout_secs=15)
    assert read_tuples(result, "tumbling") == [[1 + 2 + 3 + 4, 4, 4, 0], [5 + 6 + 7 + 8, 4, 4, 4]]
    assert read_tuples(result, "sliding") == [[1 + 2, 2, 2, 0], [10, 4, 2, 0], [18, 4, 2, 2], [26, 4, 2, 2],
                                              [34, 4, 2, 2]]
    assert read_tuples(result, "by_count") == [[6, 3, 3, 0], [21, 6, 3, 0], [45, 9, 3, 0]]


def test_sliding_time_windows_on_simulated_time_hold_a_tuple_in_each_of_its_windows():
    """On a SimulatedClock the tuples arrive at the instant the window's timer starts: stamped
    with it, they were on the boundary of the window ending one length later, and a sliding
    window of 10 s every 5 s had them in one window, not two (10 s every 3 s: in 3 of 4)."""
    topology = windowed(tumbling=WindowStats().with_tumbling_window(Duration.seconds(5)),
                        halves=WindowStats().with_window(Duration.seconds(10), Duration.seconds(5)),
                        thirds=WindowStats().with_window(Duration.seconds(9), Duration.seconds(3)))
    with with_simulated_time_local_cluster() as cluster:
        result = complete_topology(cluster, topology, {"numbers": [[n] for n in range(1, 11)]}, timeout_secs=15)
    assert read_tuples(result, "tumbling") == [[55, 10, 10, 0]]
    assert read_tuples(result, "halves") == [[55, 10, 10, 0], [55, 10, 0, 0]]
    assert read_tuples(result, "thirds") == [[55, 10, 10, 0], [55, 10, 0, 0], [55, 10, 0, 0]]


class Router(Bolt):
    """Evens on "default", odds on "odd", and each number straight to one of [sink]'s tasks."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))
        declarer.declare_stream("odd", Fields("n"))
        declarer.declare_stream("to_sink", Fields("n"), direct=True)

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.sinks = context.get_component_tasks("sink")

    def execute(self, tup):
        n = tup["n"]
        self.collector.emit([n], tup, stream="odd" if n % 2 else "default")
        self.collector.emit_direct(self.sinks[n % len(self.sinks)], [n], tup, stream="to_sink")
        self.collector.ack(tup)


class Sink(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n", "task"))

    def execute(self, tup):
        self.collector.emit([tup["n"], self.context.get_this_task_id()], tup)
        self.collector.ack(tup)


def test_reading_a_direct_stream_which_nothing_captures_is_an_error_naming_where_its_tuples_went():
    """emit_direct sends a tuple only to the task it names, never to the capture bolt (Storm's
    too). Before, read_tuples of a direct stream gave [] for the 20 tuples emitted on it."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")), 2)
    builder.set_bolt("router", Router(), 3).shuffle_grouping("numbers")
    builder.set_bolt("sink", Sink(), 2).direct_grouping("router", "to_sink")
    result = complete_topology(None, builder.create_topology(), {"numbers": [[n] for n in range(20)]})
    assert sorted(read_tuples(result, "numbers")) == [[n] for n in range(20)]
    assert sorted(read_tuples(result, "router")) == [[n] for n in range(0, 20, 2)]
    assert sorted(read_tuples(result, "router", "odd")) == [[n] for n in range(1, 20, 2)]
    with pytest.raises(ValueError, match=r"^read_tuples: stream \[to_sink\] of \[router\] is a direct stream: "
                                         r"each emit_direct goes only to the task it names, never to the capture.*"
                                         r"read what the components it goes to emitted: \[sink\]$"):
        read_tuples(result, "router", "to_sink")
    got = read_tuples(result, "sink")
    assert sorted(n for n, _task in got) == list(range(20))
    assert len({task for _n, task in got}) == 2  # evens to one task, odds to the other


class WaitsOnTwo(Bolt):
    """Blocks on the number 2 until the flag is set (at most 10 s), like a call that hangs."""

    def __init__(self, flag):
        self.flag = flag

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def execute(self, tup):
        if tup["n"] == 2:
            self.flag.wait(10)
        self.collector.emit([tup["n"]], tup)
        self.collector.ack(tup)


def test_a_timeout_names_the_bolt_whose_inbox_waits_behind_a_call_that_hangs():
    """Before: "spouts not done: {'numbers': '2/5 tuples completed'}", and no word of [hangs]."""
    flag = SharedFlag()
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")))
    builder.set_bolt("hangs", WaitsOnTwo(flag)).shuffle_grouping("numbers") \
        .add_configuration(Config.TOPOLOGY_EXECUTOR_OWN_THREAD, True)
    # let go a second after the timeout (the message is made at it), so that the kill that follows
    # waits for the call no more than that
    release = threading.Timer(4.0, flag.set)
    release.start()
    try:
        with pytest.raises(AssertionError) as raised:
            complete_topology(None, builder.create_topology(), {"numbers": [[n] for n in range(5)]}, timeout_secs=3)
    finally:
        release.cancel()
        flag.set()
    assert str(raised.value) == ("Test timed out (3s); spouts not done: {'numbers': '2/5 tuples completed'}; "
                                 "[hangs] has 2 tuples waiting in its inbox")


def test_reading_a_component_the_topology_does_not_have_names_the_ones_it_has():
    """Before, read_tuples(result, "slpit") gave [], as Storm's readTuples does: an assertion
    that a misspelt component emitted nothing passed."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")))
    builder.set_bolt("odd", OddRaises()).shuffle_grouping("numbers")
    result = complete_topology(None, builder.create_topology(), {"numbers": [[2]]})
    assert read_tuples(result, "odd") == [[2]]
    assert read_tuples(result, "odd", "no-such-stream") == []  # a stream nothing was emitted on: Storm's []
    with pytest.raises(ValueError, match=r"^read_tuples: \[od\] is not a component of the topology; its "
                                         r"components: \[numbers\], \[odd\]$"):
        read_tuples(result, "od")
