"""How executors share threads: an idle topology sleeps, and a component on its own thread
may block without stalling the others of its worker."""

from __future__ import annotations

import logging
import re
import threading
import time

from squall import Config, Fields, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout

from ..conftest import wait_until
from .components import (AckBolt, BlockingBolt, Gate, PrepareRecordingBolt, Recorder, SlowAckBolt, SlowPrepareBolt,
                         SqliteBolt, TestPlannerBolt, TestPlannerSpout, ThreadRecordingSpout)
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


def _blocking_topology(gate, recorder, feeder_a, feeder_b, b_bolt):
    builder = TopologyBuilder()
    builder.set_spout("a", feeder_a)
    builder.set_spout("b", feeder_b)
    builder.set_bolt("blocking", BlockingBolt(gate, recorder)).shuffle_grouping("a")
    return builder, builder.set_bolt("free", b_bolt).shuffle_grouping("b")


def _split_loops():
    """The threads of loops the watchdog split off (``squall-worker-PORT-N``)."""
    return [t.name for t in threading.enumerate() if re.fullmatch(r"squall-worker-\d+-\d+", t.name)]


def test_with_blocking_move_false_the_loop_is_not_split_and_the_warning_names_the_key(cluster, caplog):
    """topology.executor.blocking.move: false on the topology: the watchdog only warns, as
    before squall moved executors; the other path stalls with the blocking bolt until it returns."""
    caplog.set_level(logging.WARNING, logger="squall")
    gate, recorder = Gate(), Recorder()
    feeder_a, feeder_b = FeederSpout(Fields("x")), FeederSpout(Fields("x"))
    tracker_b = AckFailMapTracker()
    feeder_b.set_ack_fail_delegate(tracker_b)
    builder, _ = _blocking_topology(gate, recorder, feeder_a, feeder_b, AckBolt())
    conf = Config()
    conf["topology.executor.blocking.warn.millis"] = 300
    conf["topology.executor.blocking.move"] = False
    cluster.submit_topology("no-move", conf, builder.create_topology())
    feeder_a.feed(["slow"])
    assert wait_until(lambda: recorder.count("start") == 1)
    try:
        feeder_b.feed([1], 1)
        assert wait_until(lambda: "topology.executor.blocking.move is false" in caplog.text, 5)
        assert not wait_until(lambda: tracker_b.is_acked(1), 1.0)  # stalled with the blocking bolt
        assert _split_loops() == []
        warnings = [r.getMessage() for r in caplog.records if "[blocking]" in r.getMessage()]
        assert len(warnings) == 1  # once per stall, not at every look of the watchdog
    finally:
        gate.open()
    assert wait_until(lambda: tracker_b.is_acked(1))


def test_a_component_whose_resources_are_tied_to_its_thread_stays_on_it_when_it_sets_blocking_move_false(cluster):
    """A bolt whose prepare opened an sqlite3 connection (usable only from that thread) sets the
    key on itself: it stays on its thread, stalled until the blocking call returns, then goes on
    without error; a component without the key moves and goes on at once."""
    gate, recorder = Gate(), Recorder()
    feeder_a, feeder_b, feeder_c = FeederSpout(Fields("x")), FeederSpout(Fields("x")), FeederSpout(Fields("x"))
    tracker_b, tracker_c = AckFailMapTracker(), AckFailMapTracker()
    feeder_b.set_ack_fail_delegate(tracker_b)
    feeder_c.set_ack_fail_delegate(tracker_c)
    builder, free = _blocking_topology(gate, recorder, feeder_a, feeder_b, SqliteBolt())
    free.add_configuration("topology.executor.blocking.move", False)
    builder.set_spout("c", feeder_c)
    builder.set_bolt("mover", AckBolt()).shuffle_grouping("c")
    conf = Config()
    conf["topology.executor.blocking.warn.millis"] = 300
    cluster.submit_topology("sqlite", conf, builder.create_topology())
    feeder_b.feed([0], 0)
    assert wait_until(lambda: tracker_b.is_acked(0))  # the connection works on its own thread
    feeder_a.feed(["slow"])
    assert wait_until(lambda: recorder.count("start") == 1)
    try:
        feeder_b.feed([1], 1)
        feeder_c.feed([1], 1)
        assert wait_until(lambda: tracker_c.is_acked(1), 5)  # "mover" moved and goes on
        assert not tracker_b.is_acked(1)
    finally:
        gate.open()
    assert wait_until(lambda: tracker_b.is_acked(1))
    feeder_b.feed([2], 2)
    assert wait_until(lambda: tracker_b.is_acked(2))
    assert cluster.get_topology_info("sqlite")["errors"] == []  # no ProgrammingError


def test_a_prepare_slower_than_the_watchdog_leaves_every_executor_of_its_loop_prepared(cluster):
    """The watchdog runs while the executors are still opening: a prepare slower than
    topology.executor.blocking.warn.millis splits the shared loop. The blocked bolt, and the
    component that opts out of moving (placed after it on the loop), stay on the old thread;
    the others move. Every one of them is still prepared once, and processes tuples."""
    recorder = Recorder()
    feeder_a, feeder_b, feeder_c = FeederSpout(Fields("x")), FeederSpout(Fields("x")), FeederSpout(Fields("x"))
    trackers = {name: AckFailMapTracker() for name in "abc"}
    for name, feeder in zip("abc", (feeder_a, feeder_b, feeder_c)):
        feeder.set_ack_fail_delegate(trackers[name])
    builder = TopologyBuilder()
    builder.set_spout("a", feeder_a)
    builder.set_spout("b", feeder_b)
    builder.set_spout("c", feeder_c)
    builder.set_bolt("a-slow", SlowPrepareBolt(recorder, 1.0)).shuffle_grouping("a")
    builder.set_bolt("b-mover", PrepareRecordingBolt(recorder)).shuffle_grouping("b")
    kept = builder.set_bolt("c-kept", PrepareRecordingBolt(recorder)).shuffle_grouping("c")
    kept.add_configuration("topology.executor.blocking.move", False)
    conf = Config()
    conf["topology.executor.blocking.warn.millis"] = 200
    cluster.submit_topology("slow-prepare", conf, builder.create_topology())
    assert cluster.get_topology_info("slow-prepare")["num_workers"] == 1
    for name, feeder in zip("abc", (feeder_a, feeder_b, feeder_c)):
        feeder.feed([name], name)
    assert wait_until(lambda: all(trackers[n].is_acked(n) for n in "abc"), 10)
    assert sorted(e[1] for e in recorder.events("prepared")) == ["a-slow", "b-mover", "c-kept"]
    assert _split_loops() != []  # the loop was split while "a-slow" prepared
    assert cluster.get_topology_info("slow-prepare")["errors"] == []


def test_a_moved_spout_runs_its_calls_one_at_a_time_on_one_thread_then_on_the_new_one(cluster):
    """DESIGN.md: spout methods stay on one thread. The watchdog moves an executor whole,
    between two calls: its calls never overlap, they run on the old thread until the move and on
    the new one after, never back and forth."""
    gate, recorder, spout_recorder = Gate(), Recorder(), Recorder()
    feeder_a = FeederSpout(Fields("x"))
    builder = TopologyBuilder()
    builder.set_spout("a", feeder_a)
    builder.set_spout("s", ThreadRecordingSpout(spout_recorder))
    builder.set_bolt("blocking", BlockingBolt(gate, recorder)).shuffle_grouping("a")
    builder.set_bolt("sink", AckBolt()).shuffle_grouping("s")
    conf = Config()
    conf["topology.executor.blocking.warn.millis"] = 300
    cluster.submit_topology("moved-spout", conf, builder.create_topology())
    assert wait_until(lambda: spout_recorder.count("acked") >= 5)
    feeder_a.feed(["slow"])
    assert wait_until(lambda: recorder.count("start") == 1)
    try:
        assert wait_until(lambda: spout_recorder.count("thread") == 2, 5)  # moved
        acked = spout_recorder.count("acked")
        assert wait_until(lambda: spout_recorder.count("acked") >= acked + 5)  # and goes on
    finally:
        gate.open()
    assert wait_until(lambda: recorder.count("end") == 1)
    acked = spout_recorder.count("acked")
    assert wait_until(lambda: spout_recorder.count("acked") >= acked + 5)
    assert spout_recorder.count("overlap") == 0
    threads = [e[1] for e in spout_recorder.events("thread")]
    assert len(threads) == 2 and threads[0] != threads[1]


def _stuck_errors(cluster, name):
    return [e for e in cluster.get_topology_info(name)["errors"] if "has been in one call of its user code" in e["error"]]


def test_a_call_stuck_in_user_code_past_the_message_timeout_is_reported_naming_its_component_and_task(cluster, caplog):
    """A bolt on its own thread blocks in execute (no other executor shares its loop, so the
    watchdog has nothing to move and said nothing). Past the message timeout, the user is told
    which component and task, and where it is stuck: a warning in the worker's log and an error
    of the topology with the stack; every tuple it held fails meanwhile, and it goes on once it
    returns."""
    caplog.set_level(logging.WARNING, logger="squall")
    gate, recorder = Gate(), Recorder()
    feeder = FeederSpout(Fields("x"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("blocking", BlockingBolt(gate, recorder)).shuffle_grouping("feed").set_own_thread()
    conf = Config()
    conf.set_message_timeout_secs(2)
    cluster.submit_topology("stuck", conf, builder.create_topology())
    [task] = cluster.get_topology_info("stuck")["components"]["blocking"]["task_stats"]
    try:
        for i in range(5):
            feeder.feed([i], i)
        assert wait_until(lambda: recorder.count("start") == 1)
        assert wait_until(lambda: _stuck_errors(cluster, "stuck"), 8), "no error named the stuck bolt"
        [error] = _stuck_errors(cluster, "stuck")
        assert error["component"] == "blocking" and error["task"] == task, error
        assert "(execute)" in error["error"] and "in execute" in error["traceback"], error
        assert any("[blocking] task" in r.getMessage() and "gate.wait" in r.getMessage() for r in caplog.records)
        assert wait_until(lambda: all(tracker.is_failed(i) for i in range(5)), 6)  # each record fails back
        assert recorder.count("end") == 0  # still stuck all along
    finally:
        gate.open()
    feeder.feed(["after"], "after")
    assert wait_until(lambda: tracker.is_acked("after"))
    assert len(_stuck_errors(cluster, "stuck")) == 1  # once per stuck call


def test_a_bolt_slow_on_each_of_many_inputs_is_not_reported_as_stuck(cluster):
    """0.3 s per input, 12 inputs queued: one drain of its inbox lasts longer than the 2 s
    message timeout, but each input is a call of its own that returns: not stuck."""
    feeder = FeederSpout(Fields("x"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("slow", SlowAckBolt(0.3)).shuffle_grouping("feed").set_own_thread()
    conf = Config()
    conf.set_message_timeout_secs(2)
    cluster.submit_topology("slow", conf, builder.create_topology())
    for i in range(12):
        feeder.feed([i], i)
    assert wait_until(lambda: all(tracker.is_acked(i) or tracker.is_failed(i) for i in range(12)), 20)
    assert _stuck_errors(cluster, "slow") == []


def test_a_bolt_slow_on_each_of_many_queued_inputs_does_not_split_its_loop(cluster, caplog):
    """0.1 s per input, 12 inputs queued: one drain of its inbox holds the shared loop for over a
    second, past topology.executor.blocking.warn.millis (0.3 s), but each input is a call of its
    own that returns (a bolt merely slow, as any is on a saturated machine): the watchdog leaves
    the loop whole and warns of nothing."""
    caplog.set_level(logging.WARNING, logger="squall")
    feeder = FeederSpout(Fields("x"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("slow", SlowAckBolt(0.1)).shuffle_grouping("feed")
    conf = Config()
    conf["topology.executor.blocking.warn.millis"] = 300
    cluster.submit_topology("slowloop", conf, builder.create_topology())
    for i in range(12):
        feeder.feed([i], i)
    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(12)), 30)
    assert [r.getMessage() for r in caplog.records if "held its shared loop" in r.getMessage()] == []
    assert _split_loops() == []
