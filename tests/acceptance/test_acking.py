"""Reliability: tuple trees, anchoring, acking and failing (Storm's integration_test.clj)."""

from __future__ import annotations

import pytest

from squall import Config, Fields, TopologyBuilder
from squall.testing import AckFailMapTracker, AckTracker, FeederSpout, TupleCaptureBolt

from ..conftest import wait_until
from .components import (
    AckBolt, AckEveryOtherBolt, AggBolt, AsyncAckBolt, BranchingBolt, DirectSpout, DupAnchorBolt, EmitReturnBolt,
    FailBolt, FailFirstAttemptBolt, IdentityBolt, IteratorAnchorBolt, NeverAckBolt, Recorder, RecordingFailBolt,
    ReplayingSpout, TaskBolt, TickRecorderBolt,
)
from .conftest import component_stat, wait_idle


def tracked_feeder(fields=("num",), tracker=None):
    feeder = FeederSpout(Fields(*fields))
    tracker = tracker if tracker is not None else AckTracker()
    feeder.set_ack_fail_delegate(tracker)
    return feeder, tracker


class Settler:
    """Feeds a spout and waits until the topology has processed all that follows from it,
    standing in for Storm's tracked topologies (``tracked-wait``)."""

    def __init__(self, cluster, name):
        self.cluster = cluster
        self.name = name
        self.fed: dict[str, int] = {}

    def feed(self, spout_id, feeder, values, msg_id=None):
        feeder.feed(values, msg_id)
        self.fed[spout_id] = self.fed.get(spout_id, 0) + 1
        assert wait_until(lambda: component_stat(self.cluster, self.name, spout_id, "emitted")
                          >= self.fed[spout_id])
        assert wait_idle(self.cluster, self.name)


def check_acks(tracker: AckTracker, n: int) -> None:
    """Storm's AckTrackingFeeder.assertNumAcks: assert, then reset the count."""
    assert tracker.get_num_acks() == n
    tracker.reset_num_acks()


@pytest.mark.hosts("process")
def test_tree_with_fan_out_and_multi_anchored_fan_in_completes_only_when_every_branch_is_acked(cluster):
    """Storm's test-acking.

    Three feeders branch into 2, 4 and 1 children; an aggregator anchors one tuple to every 3
    inputs it gets (from any tree), which branches into 2 acked leaves. A spout tuple is acked
    only once all its children went into completed aggregates.
    """
    (f1, c1), (f2, c2), (f3, c3) = tracked_feeder(), tracked_feeder(), tracked_feeder()
    builder = TopologyBuilder()
    builder.set_spout("1", f1)
    builder.set_spout("2", f2)
    builder.set_spout("3", f3)
    builder.set_bolt("4", BranchingBolt(2)).shuffle_grouping("1")
    builder.set_bolt("5", BranchingBolt(4)).shuffle_grouping("2")
    builder.set_bolt("6", BranchingBolt(1)).shuffle_grouping("3")
    (builder.set_bolt("7", AggBolt(3))
     .shuffle_grouping("4").shuffle_grouping("5").shuffle_grouping("6"))
    builder.set_bolt("8", BranchingBolt(2)).shuffle_grouping("7")
    builder.set_bolt("9", AckBolt()).shuffle_grouping("8")
    cluster.submit_topology("acking-test1", {}, builder.create_topology())
    s = Settler(cluster, "acking-test1")

    s.feed("1", f1, [1])
    check_acks(c1, 0)
    s.feed("2", f2, [1])
    check_acks(c1, 1)
    check_acks(c2, 1)
    s.feed("1", f1, [1])
    check_acks(c1, 0)
    s.feed("1", f1, [1])
    check_acks(c1, 1)
    s.feed("3", f3, [1])
    check_acks(c1, 0)
    check_acks(c3, 0)
    s.feed("2", f2, [1])
    check_acks(c1, 1)
    check_acks(c2, 1)
    check_acks(c3, 1)


def test_anchoring_a_child_twice_to_the_same_input_still_completes_the_tree(cluster):
    """Storm's test-acking-self-anchor: anchors=[t, t] xors two edge ids into the input's
    ack value and the child's, which cancel out correctly."""
    feeder, tracker = tracked_feeder()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", DupAnchorBolt()).shuffle_grouping("1")
    builder.set_bolt("3", AckBolt()).shuffle_grouping("2")
    cluster.submit_topology("self-anchor", {}, builder.create_topology())
    s = Settler(cluster, "self-anchor")

    s.feed("1", feeder, [1])
    check_acks(tracker, 1)
    for _ in range(3):
        s.feed("1", feeder, [1])
    check_acks(tracker, 3)


def test_a_bolt_that_acks_every_other_tuple_leaves_the_others_incomplete(cluster):
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", AckEveryOtherBolt()).global_grouping("1")
    cluster.submit_topology("every-other", {}, builder.create_topology())
    s = Settler(cluster, "every-other")

    for i in range(1, 5):
        s.feed("1", feeder, ["x"], i)

    assert [i for i in range(1, 5) if tracker.is_acked(i)] == [1, 3]
    assert not any(tracker.is_failed(i) for i in range(1, 5))


@pytest.mark.parametrize("how", ["gen", "iter", "set"])
def test_anchors_given_as_an_iterator_anchor_the_child_sent_to_every_task(cluster, how):
    """A bolt anchors its child to its input given as a generator, an iterator (or a set); the
    child goes to both tasks of an all-grouped bolt, which fail it. Before, the generator was
    read up by the check of the anchors' types, so both copies went out unanchored and the
    spout tuple was acked at once, whatever became of them; now an iterator is read once into a
    list, as a list anchors every copy, and the spout tuple fails."""
    feeder, tracker = tracked_feeder(("how",), AckFailMapTracker())
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", IteratorAnchorBolt()).shuffle_grouping("1")
    builder.set_bolt("3", RecordingFailBolt(recorder), 2).all_grouping("2")
    cluster.submit_topology("iterator-anchors", {}, builder.create_topology())

    feeder.feed([how], 1)

    assert wait_until(lambda: tracker.is_failed(1) or tracker.is_acked(1))
    assert wait_until(lambda: recorder.count("got") == 2)
    assert tracker.is_failed(1) and not tracker.is_acked(1)
    got = recorder.events("got")
    assert len({task for _, task, _ in got}) == 2  # one copy per task of "3"
    assert [values for _, _, values in got] == [[how], [how]]
    assert component_stat(cluster, "iterator-anchors", "2", "emitted") == 1
    assert wait_until(lambda: component_stat(cluster, "iterator-anchors", "3", "failed") == 2)


@pytest.mark.hosts("process")
def test_a_spout_tuple_is_acked_once_both_of_its_children_are_acked(cluster):
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", BranchingBolt(2), 2).shuffle_grouping("1")
    builder.set_bolt("3", AckBolt(), 3).shuffle_grouping("2")
    conf = Config()
    conf.set_num_workers(2)
    cluster.submit_topology("fan-out", conf, builder.create_topology())

    for i in range(20):
        feeder.feed([i], i)

    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(20)))
    assert wait_until(lambda: component_stat(cluster, "fan-out", "3", "executed") == 40)


def test_children_of_which_only_one_is_acked_never_complete_their_trees(cluster):
    """Each spout tuple gets 2 children on the same bolt task, which acks every other tuple:
    exactly one child per tree is acked, so no tree completes."""
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", BranchingBolt(2)).shuffle_grouping("1")
    builder.set_bolt("3", AckEveryOtherBolt()).global_grouping("2")
    cluster.submit_topology("half-acked", {}, builder.create_topology())
    s = Settler(cluster, "half-acked")

    for i in range(3):
        s.feed("1", feeder, [i], i)

    assert component_stat(cluster, "half-acked", "3", "executed") == 6
    assert not any(tracker.is_acked(i) or tracker.is_failed(i) for i in range(3))


@pytest.mark.hosts
def test_tuples_are_acked_across_two_workers_with_two_ackers(cluster):
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder, 2)
    builder.set_bolt("2", BranchingBolt(3), 3).shuffle_grouping("1")
    builder.set_bolt("3", AckBolt(), 3).shuffle_grouping("2")
    conf = Config()
    conf.set_num_workers(2)
    cluster.submit_topology("two-workers", conf, builder.create_topology())

    for i in range(100):
        feeder.feed([i], i)

    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(100)))
    info = cluster.get_topology_info("two-workers")
    assert info["num_workers"] == 2
    assert info["acker"]["tasks"] == 2
    assert not any(tracker.is_failed(i) for i in range(100))


@pytest.mark.hosts
def test_a_failed_tuple_fails_its_spout_tuple_long_before_the_timeout(cluster):
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", BranchingBolt(2)).shuffle_grouping("1")
    builder.set_bolt("3", FailBolt()).shuffle_grouping("2")
    conf = Config()
    conf.set_message_timeout_secs(30)
    conf.set_num_workers(2)
    cluster.submit_topology("failing", conf, builder.create_topology())

    feeder.feed(["x"], "m1")

    assert wait_until(lambda: tracker.is_failed("m1"), 10)
    assert not tracker.is_acked("m1")
    assert wait_until(lambda: component_stat(cluster, "failing", "1", "failed") == 1)


@pytest.mark.hosts("process")
def test_with_acking_disabled_the_spout_is_acked_at_once_on_emit(cluster):
    """topology.acker.executors = 0: no tree is tracked, so ``ack(msg_id)`` comes straight
    from ``emit`` although the bolt never acks."""
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", NeverAckBolt()).shuffle_grouping("1")
    conf = Config()
    conf.set_num_ackers(0)
    cluster.submit_topology("no-ackers", conf, builder.create_topology())

    feeder.feed(["x"], "m1")
    feeder.feed(["y"], "m2")

    assert wait_until(lambda: tracker.is_acked("m1") and tracker.is_acked("m2"))
    assert cluster.get_topology_info("no-ackers")["acker"]["tasks"] == 0
    assert wait_until(lambda: component_stat(cluster, "no-ackers", "1", "acked") == 2)


@pytest.mark.parametrize("executors", [2, 1])
def test_max_spout_pending_bounds_the_tuples_in_flight_per_spout_task(cluster, executors):
    """With a bolt that never acks, the 2 spout tasks (on 2 executors, or together on one)
    stop at 3 pending tuples each, although 20 were fed."""
    feeder, _tracker = tracked_feeder()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder, executors).set_num_tasks(2).set_max_spout_pending(3)
    builder.set_bolt("2", NeverAckBolt()).shuffle_grouping("1")
    cluster.submit_topology("max-pending", {}, builder.create_topology())

    for i in range(20):
        feeder.feed([i], i)

    assert wait_until(lambda: component_stat(cluster, "max-pending", "1", "emitted") == 6)
    assert wait_idle(cluster, "max-pending")
    assert not wait_until(lambda: component_stat(cluster, "max-pending", "1", "emitted") > 6, 0.3)
    assert component_stat(cluster, "max-pending", "2", "executed") == 6


def test_max_spout_pending_from_the_topology_config_applies_too(cluster):
    feeder, _tracker = tracked_feeder()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", NeverAckBolt()).shuffle_grouping("1")
    conf = Config()
    conf.set_max_spout_pending(2)
    cluster.submit_topology("max-pending-conf", conf, builder.create_topology())

    for i in range(10):
        feeder.feed([i], i)

    assert wait_until(lambda: component_stat(cluster, "max-pending-conf", "1", "emitted") == 2)
    assert not wait_until(lambda: component_stat(cluster, "max-pending-conf", "1", "emitted") > 2, 0.3)


def test_acked_trees_free_max_spout_pending_slots(cluster):
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder).set_max_spout_pending(1)
    builder.set_bolt("2", AckBolt()).shuffle_grouping("1")
    cluster.submit_topology("pending-freed", {}, builder.create_topology())

    for i in range(30):
        feeder.feed([i], i)

    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(30)))


def test_a_basic_bolt_anchors_to_an_input_that_belongs_to_several_trees(cluster):
    """An aggregate anchored to inputs of 3 spout tuples goes through a BasicBolt (which
    anchors its emit to that multi-root input and acks it) before the leaf acks it: all three
    spout tuples complete together."""
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("agg", AggBolt(3)).shuffle_grouping("1")
    builder.set_bolt("basic", IdentityBolt()).shuffle_grouping("agg")
    builder.set_bolt("leaf", AckBolt()).shuffle_grouping("basic")
    cluster.submit_topology("multi-root", {}, builder.create_topology())
    s = Settler(cluster, "multi-root")

    s.feed("1", feeder, [1], "a")
    s.feed("1", feeder, [2], "b")
    assert not tracker.is_acked("a") and not tracker.is_acked("b")
    s.feed("1", feeder, [3], "c")

    assert wait_until(lambda: all(tracker.is_acked(m) for m in "abc"))


def test_emit_returns_the_task_ids_the_tuple_was_sent_to(cluster):
    recorder = Recorder()
    feeder = FeederSpout(Fields("word"))
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", EmitReturnBolt(recorder)).shuffle_grouping("1")
    builder.set_bolt("all", AckBolt(), 3).all_grouping("2")
    builder.set_bolt("one", AckBolt(), 2).global_grouping("2")
    builder.set_bolt("sink", AckBolt(), 2).fields_grouping("2", Fields("word"))
    cluster.submit_topology("emit-return", {}, builder.create_topology())

    feeder.feed(["w"])

    assert wait_until(lambda: recorder.count("emit") == 1)
    # tasks: "1": 1, "2": 2, "__acker": 3, "all": 4-6, "one": 7-8, "sink": 9-10
    [(_kind, _word, targets)] = recorder.events("emit")
    assert targets[:4] == [4, 5, 6, 7]
    assert len(targets) == 5 and targets[4] in (9, 10)


def test_a_bolt_may_emit_and_ack_from_its_own_thread(cluster):
    """The collector is thread-safe: acks and anchored emits made from a bolt's background
    thread complete the tree, and wake the loop that sleeps meanwhile."""
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("async", AsyncAckBolt(0.05)).shuffle_grouping("1")
    builder.set_bolt("leaf", AckBolt()).shuffle_grouping("async")
    cluster.submit_topology("async-ack", {}, builder.create_topology())

    for i in range(5):
        feeder.feed([i], i)

    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(5)))
    assert component_stat(cluster, "async-ack", "leaf", "executed") == 5


def test_a_spout_tuple_nobody_subscribes_to_is_acked_at_once(cluster):
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    cluster.submit_topology("no-subscribers", {}, builder.create_topology())

    feeder.feed(["x"], "m")

    assert wait_until(lambda: tracker.is_acked("m"))


def test_emit_direct_to_a_task_that_does_not_subscribe_is_dropped_and_acked(cluster):
    """Storm silently drops an emitDirect to a task of a component that does not subscribe;
    the tuple had no target, so its tree is complete at once."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", DirectSpout([("sink", 1, "to-sink"), ("other", 0, "to-other")]))
    builder.set_bolt("sink", TickRecorderBolt(recorder), 2).direct_grouping("spout", "direct")
    builder.set_bolt("other", TickRecorderBolt(recorder))  # subscribes to nothing
    cluster.submit_topology("direct-drop", {}, builder.create_topology())

    assert wait_until(lambda: component_stat(cluster, "direct-drop", "spout", "acked") == 2)
    assert [e[5] for e in recorder.events("tuple")] == [["to-sink"]]
    assert component_stat(cluster, "direct-drop", "spout", "transferred") == 1


@pytest.mark.hosts
def test_acks_and_fails_reach_the_spout_task_that_emitted_the_tuple_and_replays_complete(cluster):
    """3 spout tasks on one executor each emit 4 tuples; the bolt fails every first attempt,
    the spout replays on fail. Every id is failed once then acked once, each time on the
    task that emitted it (Storm's at-least-once pattern)."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", ReplayingSpout(4, recorder)).set_num_tasks(3)
    builder.set_bolt("bolt", FailFirstAttemptBolt(), 2).shuffle_grouping("spout")
    conf = Config()
    conf.set_num_workers(2)
    cluster.submit_topology("replay", conf, builder.create_topology())

    assert wait_until(lambda: recorder.count("ack") == 12)
    assert recorder.count("fail") == 12
    for kind in ("ack", "fail"):
        events = recorder.events(kind)
        assert all(msg_id.startswith(f"{task}-") for _k, task, msg_id in events)
        assert len({msg_id for _k, _t, msg_id in events}) == 12
    assert cluster.get_topology_info("replay")["components"]["spout"]["executors"] == 1


def test_a_fields_grouped_key_reaches_the_task_its_stable_hash_names_from_a_spout_and_a_basic_bolt(cluster):
    """The task a key goes to is ``stable_hash([key]) % tasks`` (in task order) whoever emits it:
    a spout and a BasicBolt, each the only subscriber's (the emit's own routing, compiled where
    the engine is), for ASCII keys of every length, other strs, a str subclass and a non-str,
    over two workers; every key arrives once."""
    import random

    from squall._stable_hash import stable_hash

    class Word(str):
        pass

    rng = random.Random(11)
    keys = ["", "a", "abc", "abcd", "abcde", "x" * 40, "caf\u00e9", "\U0001f600", Word("word"), 7]
    keys += ["".join(chr(rng.randrange(33, 127)) for _ in range(rng.randrange(1, 20))) for _ in range(60)]
    to_task, to_bolt = FeederSpout(Fields("word")), FeederSpout(Fields("word"))
    capture = TupleCaptureBolt()
    builder = TopologyBuilder()
    builder.set_spout("to_task", to_task)
    builder.set_spout("to_bolt", to_bolt)
    builder.set_bolt("from_spout", TaskBolt(), 3).fields_grouping("to_task", Fields("word"))
    builder.set_bolt("id", IdentityBolt(Fields("word"))).shuffle_grouping("to_bolt")
    builder.set_bolt("from_bolt", TaskBolt(), 3).fields_grouping("id", Fields("word"))
    builder.set_bolt("capture", capture).shuffle_grouping("from_spout").shuffle_grouping("from_bolt")
    conf = Config()
    conf.set_num_workers(2)
    cluster.submit_topology("fields-routing", conf, builder.create_topology())
    for key in keys:
        to_task.feed([key])
        to_bolt.feed([key])

    assert wait_until(lambda: sum(map(len, capture.results().values())) == 2 * len(keys), timeout=60)
    for component in ("from_spout", "from_bolt"):
        rows = [values for _stream, values in capture.results()[component]]
        assert sorted(repr(key) for _task, _index, key in rows) == sorted(map(repr, keys))
        for _task, index, key in rows:
            assert index == stable_hash([key]) % 3, (component, key)
