"""LocalCluster on a simulated clock: timeouts follow the clock the test moves, not real time."""

import time

from squall import Bolt, Config, Fields, LocalCluster, TopologyBuilder
from squall.engine.clock import SimulatedClock
from squall.testing import AckFailMapTracker, FeederSpout

from ..acceptance.components import AlwaysCrashingBolt, FloodSpout, Recorder


class NeverAcks(Bolt):
    def execute(self, tup):
        pass


def _wait(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def test_a_tuple_times_out_between_t_and_2t_of_simulated_time():
    """A 10 s message timeout passes in well under a second of real time: the tuple is not
    failed after 9 simulated seconds, and is failed once 21 have passed (the spout's pending
    map has two buckets rotated every T, so the fail comes between T and 2T)."""
    feeder = FeederSpout(Fields("x"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("sink", NeverAcks()).shuffle_grouping("feed")
    conf = Config()
    conf.set_message_timeout_secs(10)
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("sim", conf, builder.create_topology())
        feeder.feed([1], "m1")
        assert _wait(lambda: cluster.get_topology_info("sim")["components"]["sink"]["executed"] == 1)
        cluster.advance_cluster_time(9)
        time.sleep(0.1)
        assert not tracker.is_failed("m1")
        cluster.advance_cluster_time(12)
        assert _wait(lambda: tracker.is_failed("m1"))
        assert not tracker.is_acked("m1")


def test_advance_cluster_time_needs_a_simulated_clock():
    with LocalCluster() as cluster:
        try:
            cluster.advance_cluster_time(1)
        except TypeError as e:
            assert "SimulatedClock" in str(e)
        else:
            raise AssertionError("expected TypeError")


def test_crash_restarts_back_off_in_real_time_whatever_the_simulated_clock_does():
    """The crash backoff measures how long a worker ran on the clock its delay waits on (real
    time): a bolt that crashes on every tuple backs off even while the test moves the cluster's
    clock by minutes (on the simulated clock every crash would look like one after a steady run,
    and restart at once)."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("flood", FloodSpout())
    builder.set_bolt("crasher", AlwaysCrashingBolt(recorder, 0.05)).shuffle_grouping("flood")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("sim-crash", {}, builder.create_topology())
        assert _wait(lambda: recorder.count("prepare") >= 2)  # one crash, restarted at once
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            cluster.advance_cluster_time(120, step=120)  # more than once while each worker lives
            time.sleep(0.01)
        # at once, then after 1 s and 2 s: a few restarts, not one per crash of a flooded bolt
        assert cluster.get_topology_info("sim-crash")["workers"][0]["restarts"] <= 4
