"""How executors share threads: an idle topology sleeps, and a component on its own thread
may block without stalling the others of its worker."""

from __future__ import annotations

import time

from squall import Config, Fields, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout

from ..conftest import wait_until
from .components import AckBolt, BlockingBolt, Gate, Recorder, TestPlannerBolt, TestPlannerSpout
from .conftest import wait_idle


def test_an_idle_topology_uses_little_cpu(cluster):
    """A behaviour check, not a benchmark: a spout that emits nothing must let its worker
    sleep (Storm's spout wait strategy) instead of spinning on next_tuple."""
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout())
    builder.set_bolt("bolt", TestPlannerBolt()).shuffle_grouping("spout")
    cluster.submit_topology("idle", {}, builder.create_topology())
    assert wait_idle(cluster, "idle")

    cpu0, wall0 = time.process_time(), time.monotonic()
    time.sleep(2)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0

    assert cpu < 0.10 * wall, f"idle topology used {cpu:.3f} s of CPU in {wall:.2f} s"


def test_a_blocking_bolt_on_its_own_thread_does_not_stall_another_path_in_its_worker(cluster):
    """Spout A feeds a bolt that blocks in execute (on its own thread); spout B's path, in the
    same worker, keeps completing tuples while it is blocked."""
    gate, recorder = Gate(), Recorder()
    feeder_a, feeder_b = FeederSpout(Fields("x")), FeederSpout(Fields("x"))
    tracker = AckFailMapTracker()
    feeder_b.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("a", feeder_a)
    builder.set_spout("b", feeder_b)
    builder.set_bolt("blocking", BlockingBolt(gate, recorder)).shuffle_grouping("a").set_own_thread()
    builder.set_bolt("free", AckBolt()).shuffle_grouping("b")
    cluster.submit_topology("blocking", {}, builder.create_topology())
    assert cluster.get_topology_info("blocking")["num_workers"] == 1

    feeder_a.feed(["slow"])
    assert wait_until(lambda: recorder.count("start") == 1)
    try:
        for i in range(5):
            feeder_b.feed([i], i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(5)))
        assert recorder.count("end") == 0  # still blocked while the other path completed
    finally:
        gate.open()
    assert wait_until(lambda: recorder.count("end") == 1)


def test_a_bolt_blocking_on_the_shared_loop_stalls_only_itself(cluster):
    """As in Storm, where every executor has a thread: a bolt that blocks in execute without
    asking for its own thread stalls only its own path. The watchdog moves the worker's other
    executors to a new thread, so spout B's path keeps completing tuples, and spout A's
    tuples, stuck behind the blocked bolt, time out and fail back to A."""
    gate, recorder = Gate(), Recorder()
    feeder_a, feeder_b = FeederSpout(Fields("x")), FeederSpout(Fields("x"))
    tracker_a, tracker_b = AckFailMapTracker(), AckFailMapTracker()
    feeder_a.set_ack_fail_delegate(tracker_a)
    feeder_b.set_ack_fail_delegate(tracker_b)
    builder = TopologyBuilder()
    builder.set_spout("a", feeder_a)
    builder.set_spout("b", feeder_b)
    builder.set_bolt("blocking", BlockingBolt(gate, recorder)).shuffle_grouping("a")
    builder.set_bolt("free", AckBolt()).shuffle_grouping("b")
    conf = Config()
    conf.set_message_timeout_secs(2)
    conf["topology.executor.blocking.warn.millis"] = 300
    cluster.submit_topology("blocking", conf, builder.create_topology())
    assert cluster.get_topology_info("blocking")["num_workers"] == 1

    feeder_a.feed(["slow"], "slow")
    assert wait_until(lambda: recorder.count("start") == 1)
    try:
        feeder_a.feed(["queued"], "queued")
        for i in range(5):
            feeder_b.feed([i], i)
        assert wait_until(lambda: all(tracker_b.is_acked(i) for i in range(5)), 5)
        assert wait_until(lambda: tracker_a.is_failed("slow") and tracker_a.is_failed("queued"), 6)
        assert recorder.count("end") == 0  # still blocked all along
    finally:
        gate.open()
    assert wait_until(lambda: recorder.count("end") == 2)
    # the two threads hand each other tuples and acks in both directions from now on
    feeder_a.feed(["after"], "after")
    assert wait_until(lambda: tracker_a.is_acked("after"))
