"""LocalCluster, the master and its timers on a simulated clock: timeouts follow the clock the
test moves, not real time."""

import threading
import time

import pytest

from squall import Bolt, Config, Fields, LocalCluster, TopologyBuilder
from squall._config import cluster_conf
from squall.cluster.timers import Timers
from squall.engine.clock import SimulatedClock
from squall.testing import AckFailMapTracker, FeederSpout

from ..acceptance.components import AlwaysCrashingBolt, FloodSpout, Recorder
from .served import served
from .test_master import _register, _topology


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


class SlowTicks(Bolt):
    """Counts its ticks, each of which takes real time (a flush, a write)."""

    def __init__(self, ticks):
        self.ticks = ticks

    def get_component_configuration(self):
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 1}

    def execute(self, tup):
        if tup.source_component == "__system":
            self.ticks.incr()
            time.sleep(0.05)
        self.collector.ack(tup)


def test_advance_cluster_time_gives_a_busy_bolt_every_tick():
    """Storm's advanceClusterTime waits for idle at each step: 10 s at a 1 s tick frequency
    give 10 ticks. A bolt busy in its previous tick when a step came had the due ticks merged
    into one: 3 of 10 at 0.1 s a tick."""
    from squall.testing._registry import SharedCounter
    ticks = SharedCounter()
    b = TopologyBuilder()
    b.set_spout("s", FeederSpout(Fields("x")))
    b.set_bolt("ticker", SlowTicks(ticks)).shuffle_grouping("s")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("ticks", {}, b.create_topology())
        assert _wait(lambda: cluster.get_topology_info("ticks")["status"] == "ACTIVE")
        cluster.advance_cluster_time(1)
        assert _wait(lambda: cluster.is_idle("ticks"))
        before = ticks.value
        cluster.advance_cluster_time(10)
        assert _wait(lambda: cluster.is_idle("ticks") and ticks.value - before >= 10)
        assert ticks.value - before == 10


def test_advance_cluster_time_needs_a_simulated_clock():
    with LocalCluster() as cluster:
        try:
            cluster.advance_cluster_time(1)
        except TypeError as e:
            assert "SimulatedClock" in str(e)
        else:
            raise AssertionError("expected TypeError")


def test_crash_restarts_back_off_on_the_clusters_simulated_clock():
    """LocalCluster's master is the master of every host, on the cluster's clock: a bolt that
    crashes on every tuple is restarted at once, then held 1 s, 2 s, ... of that clock. While a
    test keeps simulated time still, the held worker stays down whatever real time passes; a
    step of simulated time past its delay starts it again."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("flood", FloodSpout())
    builder.set_bolt("crasher", AlwaysCrashingBolt(recorder, 0.05)).shuffle_grouping("flood")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("sim-crash", {"topology.bolt.fail.fast": True}, builder.create_topology())
        assert _wait(lambda: recorder.count("prepare") >= 2)  # one crash, restarted at once
        assert _wait(lambda: cluster.get_topology_info("sim-crash")["workers"][0]["restarts"] == 2)
        time.sleep(1.5)  # the second quick crash holds it 1 s of simulated time, which stands still
        assert recorder.count("prepare") == 2
        cluster.advance_cluster_time(1.5, step=0.5)
        assert _wait(lambda: recorder.count("prepare") == 3)


# --- the master (Nimbus) on a simulated clock: driven through its operations, no processes -----------
@pytest.fixture
def sim_master(tmp_path):
    clock = SimulatedClock(1000.0)
    conf = cluster_conf({"storm.local.dir": str(tmp_path), "nimbus.task.timeout.secs": 30,
                         "nimbus.task.launch.secs": 120})
    master = served(conf, clock=clock)
    _register(master)
    master.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    return master, clock


def test_a_kill_waits_its_wait_secs_of_simulated_time(sim_master):
    m, clock = sim_master
    m.op_kill(name="t", wait_secs=30)
    m.monitor()
    clock.advance(29)
    m.monitor()
    assert m.op_list()[0]["status"] == "KILLED"  # still there: its spouts are deactivated, tuples drain
    clock.advance(2)
    m.monitor()
    assert m.op_list() == []


def test_a_rebalance_waits_its_wait_secs_of_simulated_time(sim_master):
    m, clock = sim_master
    m.op_rebalance(name="t", num_workers=1, wait_secs=30)
    clock.advance(29)
    m.monitor()
    assert m.op_list()[0]["status"] == "REBALANCING"
    assert m.op_list()[0]["num_workers"] == 2
    clock.advance(2)
    m.monitor()
    assert m.op_list()[0]["status"] == "ACTIVE"
    assert m.op_list()[0]["num_workers"] == 1


def test_a_worker_whose_heartbeats_stop_is_relaunched_after_the_task_timeout_of_simulated_time(sim_master):
    m, clock = sim_master
    topo = m.topologies["t"]
    silent, other = sorted(topo.assignment)
    for slot in (silent, other):
        m.op_heartbeat(storm_id=topo.plan.storm_id, slot=slot, launch_id=topo.launch_ids[slot])
    first = topo.launch_ids[silent]
    for _ in range(29):  # the other one keeps beating; the silent one stays within the timeout
        clock.advance(1)
        m.op_heartbeat(storm_id=topo.plan.storm_id, slot=other, launch_id=topo.launch_ids[other])
        _register(m)  # their supervisor syncs: it can restart the silent one in place
        m.monitor()
    assert topo.launch_ids[silent] == first
    clock.advance(2)
    _register(m)
    m.monitor()
    assert topo.launch_ids[silent] == first + 1  # its supervisor restarts it under the new id
    assert m.op_heartbeat(storm_id=topo.plan.storm_id, slot=silent, launch_id=first) == {"stop": True}
    # the other worker hears of the death, stamped with the master's (simulated) time
    reply = m.op_heartbeat(storm_id=topo.plan.storm_id, slot=other, launch_id=topo.launch_ids[other],
                           lost_generation=0, epoch=m.epoch)
    assert [(lost["slot"], lost["time"]) for lost in reply["lost"]] == [(silent, 1031.0)]


def test_the_uptime_and_an_error_time_are_on_the_masters_clock(sim_master):
    m, clock = sim_master
    clock.advance(42)
    assert m.op_list()[0]["uptime_secs"] == 42
    topo = m.topologies["t"]
    slot = sorted(topo.assignment)[0]
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001],
                         exits=[{"storm_id": topo.plan.storm_id, "slot": slot, "launch_id": topo.launch_ids[slot],
                                 "status": 1, "started": False, "output": "ImportError: no module x"}])
    assert [e.time for e in topo.errors] == [1042.0]


def test_timers_run_an_action_once_the_simulated_clock_passes_its_delay():
    clock = SimulatedClock()
    timers = Timers("test-timers", clock=clock)
    ran = threading.Event()
    try:
        timers.schedule(30, ran.set)
        clock.advance(29)
        assert not ran.wait(0.2)
        clock.advance(2)
        assert ran.wait(5)
    finally:
        timers.stop()
