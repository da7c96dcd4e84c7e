"""squall.testing's tracked topologies, capture_topology, test_tuple and multiseteq, ported from
Storm's own uses: storm-core's TestingTest (testWithTrackedCluster, testTestTuple,
testTestTupleWithMkTupleParam) and TopologyIntegrationTest (testAcking, testAckBranching,
testAckingSelfAnchor).

tracked_wait is the synchronisation here: every assertion after it reads counts that must be
final when it returns (nothing sleeps, nothing polls)."""

from __future__ import annotations

import re
import threading
import time
from unittest import mock

import pytest

from squall import (
    BaseWindowedBolt,
    BasicBolt,
    Bolt,
    Config,
    Duration,
    Fields,
    LocalCluster,
    TopologyBuilder,
    is_tick_tuple,
)
from squall.engine.clock import SimulatedClock
from squall.testing import (
    AckFailMapTracker,
    AckTracker,
    FeederSpout,
    TrackedTopology,
    capture_topology,
    multiset,
    multiseteq,
    read_tuples,
    test_tuple,
    track_and_capture_topology,
    tracked_wait,
    with_simulated_time_local_cluster,
    with_tracked_cluster,
)
from squall.testing._registry import SharedFlag, SharedLog

from .conftest import wait_until


class AckTrackingFeeder:
    """storm-core's AckTrackingFeeder: a FeederSpout whose acks an AckTracker counts."""

    def __init__(self, *fields: str) -> None:
        self.tracker = AckTracker()
        self.spout = FeederSpout(Fields(list(fields)))
        self.spout.set_ack_fail_delegate(self.tracker)

    def feed(self, values, msg_id=None) -> None:
        self.spout.feed(values, msg_id)

    def assert_num_acks(self, n: int) -> None:
        assert self.tracker.get_num_acks() == n
        self.tracker.reset_num_acks()


class IdentityBolt(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("num"))

    def execute(self, tup):
        self.collector.emit(list(tup.values), tup)
        self.collector.ack(tup)


class AggBolt(Bolt):
    """Holds its inputs until it has ``branches`` of them, then emits one tuple anchored to all
    and acks them."""

    def __init__(self, branches: int) -> None:
        self.branches = branches

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("num"))

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.seen = []

    def execute(self, tup):
        self.seen.append(tup)
        if len(self.seen) == self.branches:
            self.collector.emit([1], self.seen)
            for t in self.seen:
                self.collector.ack(t)
            self.seen = []


class BranchingBolt(Bolt):
    def __init__(self, branches: int) -> None:
        self.branches = branches

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("num"))

    def execute(self, tup):
        for i in range(self.branches):
            self.collector.emit([i], tup)
        self.collector.ack(tup)


class AckBolt(Bolt):
    def execute(self, tup):
        self.collector.ack(tup)


class Windowed(BaseWindowedBolt):
    def execute(self, window):
        pass


class DupAnchorBolt(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("num"))

    def execute(self, tup):
        self.collector.emit([1], [tup, tup])
        self.collector.ack(tup)


def test_with_tracked_cluster():
    """TestingTest.testWithTrackedCluster (and TopologyIntegrationTest.testAckBranching)."""
    with with_tracked_cluster() as cluster:
        feeder = AckTrackingFeeder("num")
        builder = TopologyBuilder()
        builder.set_spout("1", feeder.spout)
        builder.set_bolt("2", IdentityBolt()).shuffle_grouping("1")
        builder.set_bolt("3", IdentityBolt()).shuffle_grouping("1")
        builder.set_bolt("4", AggBolt(4)).shuffle_grouping("2").shuffle_grouping("3")
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("test-acking2", Config(), tracked)
        cluster.advance_cluster_time(11)
        feeder.feed([1])
        tracked_wait(tracked, 1)
        feeder.assert_num_acks(0)
        feeder.feed([1])
        tracked_wait(tracked, 1)
        feeder.assert_num_acks(2)
        # the acks counted above are the spout's whole story: nothing moves any more
        amounts = {k: tracked.global_amt(k) for k in ("spout-emitted", "transferred", "processed")}
        assert amounts["spout-emitted"] == 2
        assert amounts["transferred"] == amounts["processed"] > 0


def test_acking():
    """TopologyIntegrationTest.testAcking: three feeders, branching and aggregating bolts; each
    tracked_wait returns with exactly the acks that topology can have made by then."""
    with with_tracked_cluster() as cluster:
        feeder1, feeder2, feeder3 = AckTrackingFeeder("num"), AckTrackingFeeder("num"), AckTrackingFeeder("num")
        builder = TopologyBuilder()
        builder.set_spout("1", feeder1.spout)
        builder.set_spout("2", feeder2.spout)
        builder.set_spout("3", feeder3.spout)
        builder.set_bolt("4", BranchingBolt(2)).shuffle_grouping("1")
        builder.set_bolt("5", BranchingBolt(4)).shuffle_grouping("2")
        builder.set_bolt("6", BranchingBolt(1)).shuffle_grouping("3")
        builder.set_bolt("7", AggBolt(3)).shuffle_grouping("4").shuffle_grouping("5").shuffle_grouping("6")
        builder.set_bolt("8", BranchingBolt(2)).shuffle_grouping("7")
        builder.set_bolt("9", AckBolt()).shuffle_grouping("8")
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("acking-test1", {}, tracked)
        cluster.advance_cluster_time(11)
        feeder1.feed([1])
        tracked_wait(tracked, 1)
        feeder1.assert_num_acks(0)
        feeder2.feed([1])
        tracked_wait(tracked, 1)
        feeder1.assert_num_acks(1)
        feeder2.assert_num_acks(1)
        feeder1.feed([1])
        tracked_wait(tracked, 1)
        feeder1.assert_num_acks(0)
        feeder1.feed([1])
        tracked_wait(tracked, 1)
        feeder1.assert_num_acks(1)
        feeder3.feed([1])
        tracked_wait(tracked, 1)
        feeder1.assert_num_acks(0)
        feeder3.assert_num_acks(0)
        feeder2.feed([1])  # (Storm's test ends its checks here) its 4 branches complete two groups of 3:
        tracked_wait(tracked, 1)  # the held branch of feeder1's last tuple, feeder3's, and feeder2's
        feeder1.assert_num_acks(1)
        feeder2.assert_num_acks(1)
        feeder3.assert_num_acks(1)


def test_acking_self_anchor():
    """TopologyIntegrationTest.testAckingSelfAnchor: a tuple anchored twice to one input."""
    with with_tracked_cluster() as cluster:
        feeder = AckTrackingFeeder("num")
        builder = TopologyBuilder()
        builder.set_spout("1", feeder.spout)
        builder.set_bolt("2", DupAnchorBolt()).shuffle_grouping("1")
        builder.set_bolt("3", AckBolt()).shuffle_grouping("2")
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("test", {}, tracked)
        cluster.advance_cluster_time(11)
        feeder.feed([1])
        tracked_wait(tracked, 1)
        feeder.assert_num_acks(1)
        feeder.feed([1])
        feeder.feed([1])
        feeder.feed([1])
        tracked_wait(tracked, 3)
        feeder.assert_num_acks(3)


class Split(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))

    def execute(self, tup, collector):
        for word in tup["sentence"].split():
            collector.emit([word])


class Record(BasicBolt):
    """Records every word it executes, in the test's shared log."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def execute(self, tup, collector):
        self.log.append(tup["word"])


@pytest.mark.parametrize("workers", [1, 2])
def test_tracked_wait_returns_once_every_fed_tuple_is_processed(workers):
    """Fed sentences go through a split (2 tasks) and a recording bolt (3 tasks, fields
    grouping), on one worker and across two: at each return of tracked_wait every word of
    every sentence fed so far has been recorded, none missing and none twice."""
    log = SharedLog()
    feeder = AckTrackingFeeder("sentence")
    builder = TopologyBuilder()
    builder.set_spout("sentences", feeder.spout)
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("record", Record(log), 3).fields_grouping("split", Fields("word"))
    with LocalCluster() as cluster:
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("words", {Config.TOPOLOGY_WORKERS: workers}, tracked)
        expected: list[str] = []
        for round_ in range(5):
            sentences = [f"r{round_} s{i} " + " ".join(f"w{i}-{j}" for j in range(i % 4 + 1)) for i in range(20)]
            for s in sentences:
                feeder.feed([s])
                expected.extend(s.split())
            tracked_wait(tracked, len(sentences))
            assert multiset(log.items()) == multiset(expected)
            feeder.assert_num_acks(len(sentences))
        assert tracked.global_amt("spout-emitted") == 100


HELD = threading.Event()


class Held(Bolt):
    """Executes an input only once the test lets it go (HELD)."""

    def execute(self, tup):
        HELD.wait(30)
        self.collector.ack(tup)


def test_tracked_wait_times_out_naming_what_is_not_processed():
    feeder = AckTrackingFeeder("n")
    builder = TopologyBuilder()
    builder.set_spout("numbers", feeder.spout)
    # on a thread of its own: held, it must not hold the spout's loop too (the spout's second
    # emit then waited for it, and the timeout saw one tuple or two by the machine's speed)
    builder.set_bolt("held", Held()).shuffle_grouping("numbers") \
        .add_configuration(Config.TOPOLOGY_EXECUTOR_OWN_THREAD, True)
    HELD.clear()
    with LocalCluster() as cluster:
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("held", {}, tracked)
        try:
            feeder.feed([1])
            feeder.feed([2])
            # both emitted (and so transferred, counted before the emit returns), then the wait
            assert wait_until(lambda: tracked.global_amt("spout-emitted") == 2, 30)
            with pytest.raises(AssertionError) as caught:
                tracked_wait(tracked, 2, timeout_secs=0.5)
            message = str(caught.value)
            assert message.startswith("Test timed out (0.5s) in tracked_wait(2): ")
            assert "[held] 2" in message  # one being executed, one waiting: neither processed
            assert "spouts emitted" not in message  # both were emitted
        finally:
            HELD.set()
        tracked_wait(tracked, 2)  # the same two, once let go
        feeder.assert_num_acks(2)
        with pytest.raises(AssertionError, match=r"the spouts emitted 0 of the 1 tuples waited for \(2 in all\)"):
            tracked_wait(tracked, 1, timeout_secs=0.2)  # nothing more was fed


class CannotConnect(Bolt):
    def prepare(self, conf, context, collector):
        raise RuntimeError("cannot connect to the database")

    def execute(self, tup):
        self.collector.ack(tup)


def test_tracked_wait_times_out_naming_the_worker_that_crashed():
    """Before, a bolt whose prepare raised took its worker (and the spout in it) down, and the
    timeout said only "the spouts emitted 0 of the 1 tuples waited for (0 in all)"."""
    feeder = FeederSpout(Fields("n"))
    builder = TopologyBuilder()
    builder.set_spout("numbers", feeder)
    builder.set_bolt("db", CannotConnect()).shuffle_grouping("numbers")
    with with_tracked_cluster() as cluster:
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("db", {}, tracked)
        feeder.feed([1])
        with pytest.raises(AssertionError) as caught:
            tracked_wait(tracked, 1, timeout_secs=0.5)
    message = str(caught.value)
    assert message.startswith("Test timed out (0.5s) in tracked_wait(1): ")  # then what the counts tell
    assert re.search(r"; errors reported: \[db\] task \d+: RuntimeError: cannot connect to the database "
                     r"\(worker crashed\)$", message)


def test_tracked_wait_without_submission_says_so():
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")))
    with LocalCluster() as cluster:
        tracked = TrackedTopology(builder.create_topology(), cluster)
        with pytest.raises(AssertionError, match="it was never submitted"):
            tracked.tracked_wait(1, timeout_secs=0.1)
        with LocalCluster() as other, pytest.raises(ValueError, match="made for another cluster"):
            other.submit_topology("elsewhere", {}, tracked)


def test_track_and_capture_topology():
    """Every tuple of every component and stream is captured (Storm's captureTopology)."""
    feeder = FeederSpout(Fields("sentence"))
    builder = TopologyBuilder()
    builder.set_spout("sentences", feeder)
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    topology = builder.create_topology()
    with LocalCluster() as cluster:
        captured = track_and_capture_topology(cluster, topology)
        cluster.submit_topology("captured", {}, captured.topology)
        feeder.feed(["the cow"])
        feeder.feed(["jumped over the moon"])
        tracked_wait(captured, 2)
        results = captured.capturer.get_and_clear_results()
        assert read_tuples(results, "sentences") == [["the cow"], ["jumped over the moon"]]
        assert multiseteq(read_tuples(results, "split"),
                          [["the"], ["cow"], ["jumped"], ["over"], ["the"], ["moon"]])
        feeder.feed(["again"])
        tracked_wait(captured, 1)
        results = captured.capturer.get_results()
        assert read_tuples(results, "sentences") == [["again"]]
        assert read_tuples(results, "split") == [["again"]]
    assert set(topology.components) == {"sentences", "split"}  # the original is left as it was
    plain, capturer = capture_topology(topology)
    assert len(plain.components) == 3 and capturer.get_results() == {}


def test_test_tuple():
    """TestingTest.testTestTuple."""
    tup = test_tuple(["james", "bond"])
    assert tup.get_values() == ["james", "bond"]
    assert tup.get_source_stream_id() == "default"
    assert list(tup.get_fields()) == ["field1", "field2"]
    assert tup.get_source_component() == "component"


def test_test_tuple_with_params():
    """TestingTest.testTestTupleWithMkTupleParam."""
    tup = test_tuple(["james", "bond"], stream="test-stream", component="test-component",
                     fields=["fname", "lname"])
    assert tup.get_values() == ["james", "bond"]
    assert tup.get_source_stream_id() == "test-stream"
    assert list(tup.get_fields()) == ["fname", "lname"]
    assert tup.get_source_component() == "test-component"
    assert tup["lname"] == "bond"
    with pytest.raises(ValueError, match="Expected 1 fields"):
        test_tuple(["james", "bond"], fields=["name"])
    with pytest.raises(TypeError, match="list of values"):
        test_tuple("james")


def test_unit_testing_a_bolt_with_test_tuple():
    """A bolt's execute, unit-tested with a mocked collector, as Storm users do with Mockito."""
    collector = mock.Mock()
    Split().execute(test_tuple(["the cow jumped"], fields=["sentence"]), collector)
    assert collector.emit.call_args_list == [mock.call(["the"]), mock.call(["cow"]), mock.call(["jumped"])]

    out = mock.Mock()
    bolt = IdentityBolt()
    bolt.prepare({}, None, out)
    tup = test_tuple([7])
    bolt.execute(tup)
    out.emit.assert_called_once_with([7], tup)
    out.ack.assert_called_once_with(tup)


def test_multiseteq():
    assert multiseteq([["a"], ["b"], ["a"]], [["a"], ["a"], ["b"]])
    assert not multiseteq([["a"], ["b"]], [["a"], ["a"], ["b"]])
    assert multiseteq([1, {"k": [1, 2]}], [{"k": [1, 2]}, 1])
    assert multiset([["x"], ["x"]]) == {("x",): 2}


class CountTicks(Bolt):
    """Records its ticks and its inputs."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def execute(self, tup):
        self.log.append("tick" if is_tick_tuple(tup) else tup["n"])
        self.collector.ack(tup)


class SlowPrepareTicks(CountTicks):
    """`CountTicks` whose prepare takes a while of real time (a connection opened, a model loaded)."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        time.sleep(0.5)


def test_simulated_time_waits_for_a_bolt_still_preparing_before_it_passes():
    """advance_cluster_time right after a submission whose bolt is still in its prepare (user
    code runs on the worker's loop, after the submission returns): the clock must not pass the
    bolt's ticks by while it prepares, as Storm's advanceClusterTime waits for its workers to
    idle. Before, three simulated seconds went by in the half second of real time the prepare
    took, and the bolt, whose ticks were scheduled after it, got none (the same under load,
    where `test_ticks_are_counted_like_tuples` saw 0 ticks)."""
    log = SharedLog()
    builder = TopologyBuilder()
    builder.set_spout("numbers", AckTrackingFeeder("n").spout)
    builder.set_bolt("ticked", SlowPrepareTicks(log)).shuffle_grouping("numbers") \
        .add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("slow-ticks", {}, builder.create_topology())
        cluster.advance_cluster_time(3)
        assert log.items().count("tick") == 3


def test_ticks_are_counted_like_tuples():
    """Tick tuples go through a bolt's inbox: counted as transferred and processed, so a bolt
    with ticks still lets tracked_wait return."""
    log = SharedLog()
    feeder = AckTrackingFeeder("n")
    builder = TopologyBuilder()
    builder.set_spout("numbers", feeder.spout)
    builder.set_bolt("ticked", CountTicks(log)).shuffle_grouping("numbers") \
        .add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
    with with_tracked_cluster() as cluster:
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("ticks", {}, tracked)
        cluster.advance_cluster_time(3)
        feeder.feed([5])
        tracked_wait(tracked, 1)
        feeder.assert_num_acks(1)
        assert log.items().count(5) == 1 and log.items().count("tick") >= 2
        assert tracked.global_amt("transferred") == tracked.global_amt("processed")



class CrashesOnFirstBoom(Bolt):
    """Records and acks each tuple; the first "boom" crashes its worker (fail fast) before it
    is recorded, a later one is recorded."""

    def __init__(self, seen: SharedLog, crashed: SharedFlag) -> None:
        self.seen, self.crashed = seen, crashed

    def execute(self, tup):
        if tup[0] == "boom" and not self.crashed.is_set():
            self.crashed.set()
            raise RuntimeError("boom")
        self.seen.append(tup[0])
        self.collector.ack(tup)


def test_tracked_wait_after_a_worker_crash_counts_what_it_held_as_lost_and_the_counts_meet_again():
    """feed (one worker) -> crash (the other). The crash takes the "boom" tuple it was running
    with it: tracked_wait counts it as lost (it can never be processed now) and returns, where
    it waited for it until its timeout. Once the worker is restarted, what is fed (a replay of
    "boom" too) is processed there and waited for as before. On a simulated clock that does not
    move: no message timeout fails anything; "boom" fails on the master's notice of the death."""
    seen, crashed = SharedLog(), SharedFlag()
    feeder = FeederSpout(Fields(["x"]))
    acks = AckFailMapTracker()
    feeder.set_ack_fail_delegate(acks)
    builder = TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("crash", CrashesOnFirstBoom(seen, crashed)).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    conf[Config.TOPOLOGY_BOLT_FAIL_FAST] = True  # the exception crashes the worker
    with LocalCluster(clock=SimulatedClock()) as cluster:
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("crashing", conf, tracked)

        info = cluster.get_topology_info("crashing")
        [port] = {s["worker"] for s in info["components"]["crash"]["task_stats"].values()}
        assert {s["worker"] for s in info["components"]["feed"]["task_stats"].values()} != {port}

        def crash_worker():
            return next(w for w in cluster.get_topology_info("crashing")["workers"] if w["port"] == port)

        feeder.feed(["a"], "a")
        tracked_wait(tracked, 1)
        assert seen.items() == ["a"]
        feeder.feed(["boom"], "boom")
        tracked_wait(tracked, 1)  # returns: "boom" died with its worker
        assert seen.items() == ["a"] and tracked.global_amt("lost") >= 1
        assert wait_until(lambda: acks.is_failed("boom"))  # the spout heard the worker died
        assert wait_until(lambda: crash_worker()["restarts"] == 1 and crash_worker()["alive"])
        feeder.feed(["c"], "c")
        feeder.feed(["boom"], "boom")  # as a replaying spout would, now that its worker is back
        tracked_wait(tracked, 2)
        assert seen.items() == ["a", "c", "boom"] and acks.is_acked("c") and acks.is_acked("boom")
        amounts = {key: tracked.global_amt(key) for key in ("transferred", "processed", "lost", "spout-emitted")}
        assert amounts["transferred"] == amounts["processed"] + amounts["lost"] and amounts["spout-emitted"] == 4


class Drops(Bolt):
    def execute(self, tup):
        pass  # never acks: only the message timeout completes the tuple


def test_with_simulated_time_local_cluster_times_a_tuple_out_without_waiting():
    """Storm's Testing.withSimulatedTimeLocalCluster with timeouts on (as Storm's testTimeout
    asks for them): a 10 s timeout fails the tuple between 10 and 20 s of the simulated clock,
    and no real second passes."""
    feeder = FeederSpout(Fields("n"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("numbers", feeder)
    builder.set_bolt("drops", Drops()).shuffle_grouping("numbers")
    conf = Config()
    conf.set_message_timeout_secs(10)
    with with_simulated_time_local_cluster({Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: True}) as cluster:
        assert isinstance(cluster.clock, SimulatedClock)
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("drops", conf, tracked)
        feeder.feed([1], "m1")
        tracked_wait(tracked, 1)
        cluster.advance_cluster_time(9)
        tracked_wait(tracked, 0)
        assert not tracker.is_failed("m1")
        cluster.advance_cluster_time(12)
        tracked_wait(tracked, 0)
        assert tracker.is_failed("m1") and not tracker.is_acked("m1")


@pytest.mark.parametrize("cluster_of", [with_tracked_cluster, with_simulated_time_local_cluster])
def test_storms_testing_clusters_time_no_tuple_out_unless_asked(cluster_of):
    """Storm's withTrackedCluster and withSimulatedTimeLocalCluster build a LocalCluster.Builder
    cluster, whose topology.enable.message.timeouts is false. Before, squall's had timeouts on:
    AggBolt's held tuple failed 60 s of simulated time later, where Storm's is acked with the
    next one, and a one-minute window was refused (InvalidTopologyException: "Window duration
    ... 70000 is more than topology.message.timeout.secs value 30000")."""
    feeder = FeederSpout(Fields("num"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", AggBolt(2)).shuffle_grouping("1")
    builder.set_spout("quiet", FeederSpout(Fields("num")))
    builder.set_bolt("minute", Windowed().with_window(Duration.minutes(1), Duration.seconds(10))) \
        .shuffle_grouping("quiet")
    with cluster_of() as cluster:
        tracked = TrackedTopology(builder.create_topology(), cluster)
        cluster.submit_topology("held", {}, tracked)
        feeder.feed([1], "first")
        tracked_wait(tracked, 1)
        cluster.advance_cluster_time(60)
        feeder.feed([2], "second")
        tracked_wait(tracked, 1)
        assert tracker.is_acked("first") and tracker.is_acked("second") and not tracker.is_failed("first")
