"""Stateful windowed bolts: window evaluations update a checkpointed state; inputs are acked once
out of their last window and committed; a rollback drops the windows and fails what they held."""

import pytest

from squall import (BaseStatefulBolt, BaseStatefulWindowedBolt, BaseWindowedBolt, Bolt, Config, Count, Duration, Fields,
                    InvalidTopologyException, LocalCluster, TopologyBuilder)
from squall._tuple import Source, Tuple
from squall.state._bolt import StatefulBoltExecutor
from squall.state._windowed import StatefulWindowedBoltExecutor
from squall.state.checkpoint import INITSTATE, PREPARE, ROLLBACK
from squall.state.memory import HostMemory
from squall.testing import AckFailMapTracker, FeederSpout
from squall.testing._registry import SharedCounter, SharedFlag, SharedLog

from ..conftest import wait_until
from .test_core import BoltCtx, Recorder, cp


class WindowSums(BaseStatefulWindowedBolt):
    """Adds each window's values to ``total`` and counts windows, in its state."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("sum"))

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        s = sum(t[0] for t in window.get())
        self.state.put("total", self.state.get("total", 0) + s)
        self.state.put("windows", self.state.get("windows", 0) + 1)
        self.collector.emit([s])  # anchored to the window


def test_window_evaluations_are_committed_and_inputs_acked_after_they_leave_their_window():
    feeder = FeederSpout(Fields("v"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    for i in range(1, 101):
        feeder.feed([i], i)
    b = TopologyBuilder()
    b.set_spout("values", feeder)
    b.set_bolt("sums", WindowSums().with_tumbling_window(Count(10))).shuffle_grouping("values")
    conf = Config()
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    with LocalCluster() as cluster:
        cluster.submit_topology("windows", conf, b.create_topology())
        # the last window's tuples stay until a next window expires them (Storm's count windows)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(1, 91)), 20)
        assert not any(tracker.is_acked(i) for i in range(91, 101))

        def committed(key):
            [ns] = [n for n in cluster._state_memory.namespaces("windows") if n.startswith("sums-")]
            return cluster.get_state("windows", ns).get(key)
        assert wait_until(lambda: committed("windows") == 10, 10)
        assert committed("total") == 5050
        assert not any(tracker.is_failed(i) for i in range(1, 101))


def test_a_rollback_fails_the_tuples_in_the_windows_and_empties_them():
    bolt = WindowSums().with_tumbling_window(Count(3))
    ex = StatefulBoltExecutor(StatefulWindowedBoltExecutor(bolt))
    rec = Recorder()
    ex.prepare(dict(bolt.get_component_configuration()), BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    src = Source("values", "default", 1, Fields("v"))
    ex.execute(cp(-1, INITSTATE))
    first = [Tuple([i], src) for i in (1, 2, 3)]
    for t in first:  # a full window: it fires, and its tuples expire at the next one
        ex.execute(t)
    ex.execute(cp(0, PREPARE))
    held = [Tuple([i], src) for i in (4, 5)]
    for t in held:
        ex.execute(t)
    ex.execute(cp(0, ROLLBACK))
    assert all(t in rec.failed for t in held)
    assert len(ex.bolt.manager) == 0
    assert ex.state.get("total") is None  # the evaluation was not committed
    for t in [Tuple([i], src) for i in (4, 5, 6)]:  # the replays fill a window again
        ex.execute(t)
    assert ex.state.get("total") == 15


class PlainWindowSums(BaseWindowedBolt):
    """Emits each window's sum (not stateful)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("v"))

    def execute(self, window):
        self.collector.emit([sum(t[0] for t in window.get())])


class Total(BaseStatefulBolt):
    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.state.put("total", self.state.get("total", 0) + tup[0])
        self.collector.ack(tup)


def _commits_the_sum_of(n: int, sums: PlainWindowSums, name: str, timeout: float, conf: Config) -> None:
    """Feeds 1..``n`` through the plain windowed bolt ``sums`` into the stateful `Total`, in a
    stateful topology checkpointing every 100 ms, and waits until `Total` committed their sum."""
    feeder = FeederSpout(Fields("v"))
    for i in range(1, n + 1):
        feeder.feed([i], i)
    b = TopologyBuilder()
    b.set_spout("values", feeder)
    b.set_bolt("sums", sums).shuffle_grouping("values")
    b.set_bolt("total", Total()).global_grouping("sums")
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    with LocalCluster() as cluster:
        cluster.submit_topology(name, conf, b.create_topology())

        def total():
            [ns] = [n for n in cluster._state_memory.namespaces(name) if n.startswith("total-")] or [None]
            return ns and dict(cluster.get_state(name, ns).committed()).get("total")
        assert wait_until(lambda: total() == n * (n + 1) // 2, timeout), total()


def test_a_plain_windowed_bolt_in_a_stateful_topology_keeps_its_timer():
    """A duration window fires from its timer: inside the checkpoint forwarder it must still run."""
    _commits_the_sum_of(50, PlainWindowSums().with_tumbling_window(Duration.of(200)), "timed", 20, Config())


def test_a_plain_count_window_in_a_stateful_topology_lets_checkpoints_pass_once_its_stream_stops():
    """A count window acks an input when the next window fires; the checkpoint forwarder held
    every checkpoint until the inputs before it were acked, so once the stream stopped no
    checkpoint passed the window, and the stateful bolt after it never committed its results
    (nor even got INITSTATE). Checkpoints pass such a bolt at once now, as in Storm: all ten
    windows of 1..100 are committed, 5,050."""
    conf = Config()
    conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS] = 120  # no timeout frees the held inputs
    _commits_the_sum_of(100, PlainWindowSums().with_tumbling_window(Count(10)), "counted", 30, conf)


class RejectsTens(Bolt):
    """A plain bolt that fails the records it cannot use (multiples of ten) and passes on the rest."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("v"))

    def execute(self, tup):
        if tup[0] % 10 == 0:
            self.collector.fail(tup)
        else:
            self.collector.emit([tup[0]], anchors=tup)
            self.collector.ack(tup)


class Sums(BaseStatefulBolt):
    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.state.put("total", self.state.get("total", 0) + tup[0])
        self.collector.ack(tup)


def test_records_a_plain_bolt_fails_replay_alone_and_roll_back_no_state():
    """Storm's forwarder passes checkpoints whatever its bolt failed; a PREPARE failed for
    each rejected record rolled the stateful bolt back, failing every good record acked since
    its last commit (a FeederSpout does not replay them: they were lost)."""
    feeder = FeederSpout(Fields("v"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    for i in range(1, 501):
        feeder.feed([i], i)
    b = TopologyBuilder()
    b.set_spout("values", feeder)
    b.set_bolt("filter", RejectsTens()).shuffle_grouping("values")
    b.set_bolt("sums", Sums()).shuffle_grouping("filter")
    conf = Config()
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    conf.set_message_timeout_secs(120)
    good = [i for i in range(1, 501) if i % 10]
    with LocalCluster() as cluster:
        cluster.submit_topology("rejects", conf, b.create_topology())
        assert wait_until(lambda: all(tracker.is_acked(i) or tracker.is_failed(i) for i in range(1, 501)), 60)
        assert [i for i in good if tracker.is_failed(i)] == []
        assert all(tracker.is_failed(i) for i in range(10, 501, 10))
        [ns] = [n for n in cluster._state_memory.namespaces("rejects") if n.startswith("sums-")]
        assert cluster.get_state("rejects", ns).get("total") == sum(good)


class PairSums(BaseStatefulWindowedBolt):
    """Emits each window's sum, unanchored when made persistent (Storm's persistent windows)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("v"))

    def execute(self, window):
        self.collector.emit([sum(t[0] for t in window.get())])


class FailsAPrepare(WindowSums):
    """`WindowSums` that records each window's sum and each commit, and fails the first PREPARE
    after the test sets ``fail_next`` (a checkpoint that fails: every stateful bolt rolls back)."""

    def __init__(self):
        super().__init__()
        self.sums = SharedLog()
        self.commits = SharedCounter()
        self.fail_next = SharedFlag()

    def execute(self, window):
        super().execute(window)
        self.sums.append(sum(t[0] for t in window.get()))

    def pre_prepare(self, txid):
        if self.fail_next.is_set():
            self.fail_next.clear()
            raise RuntimeError("a checkpoint that fails (test)")

    def pre_commit(self, txid):
        self.commits.incr()


def _chain(downstream, through_a_plain_bolt=False):
    b = TopologyBuilder()
    b.set_spout("values", FeederSpout(Fields("v")))
    b.set_bolt("pairs", PairSums().with_tumbling_window(Count(2)).with_persistence()).shuffle_grouping("values")
    if through_a_plain_bolt:
        b.set_bolt("filter", RejectsTens()).shuffle_grouping("pairs")
    b.set_bolt("totals", downstream).shuffle_grouping("filter" if through_a_plain_bolt else "pairs")
    return b


@pytest.mark.parametrize("through_a_plain_bolt", [False, True], ids=["direct", "through a plain bolt"])
def test_a_stateful_window_without_persistence_after_a_persistent_one_is_refused(through_a_plain_bolt):
    """A persistent window's results are unanchored: a stateful window without persistence,
    rolled back, failed those it held for their spouts to replay, and nothing did. On a
    LocalCluster (pairs of 20 records, a window of 5 pairs after them, a PREPARE failed while
    it held 3 pairs committed before): 1 window of 10 came out, not 2; 6 records lost, nothing
    failed or reported. Refused at create_topology, naming both components and the way out."""
    b = _chain(WindowSums().with_tumbling_window(Count(5)), through_a_plain_bolt)
    with pytest.raises(InvalidTopologyException) as e:
        b.create_topology()
    msg = str(e.value)
    assert msg.startswith("Component [totals]: a stateful windowed bolt without persistence")
    assert "persistent window [pairs] (stream [default]" in msg and "with_persistence()" in msg
    assert ("through [filter]" in msg) is through_a_plain_bolt


def test_a_persistent_windows_late_stream_may_feed_a_stateful_window_without_persistence():
    """The late-tuple stream is anchored to the late inputs: their spouts replay them."""
    b = TopologyBuilder()
    b.set_spout("values", FeederSpout(Fields("v", "ts")))
    b.set_bolt("pairs", PairSums().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts")
               .with_late_tuple_stream("late").with_persistence()).shuffle_grouping("values")
    b.set_bolt("totals", WindowSums().with_tumbling_window(Count(5))).shuffle_grouping("pairs", "late")
    b.create_topology()


def test_a_stateful_window_without_persistence_on_a_late_stream_of_results_is_refused_naming_that_stream():
    """A persistent window's late-tuple stream is anchored to its inputs; when those are another
    persistent window's results, its late tuples are such results, in no spout's tree, and a
    rollback of a window without persistence lost the ones it held. Refused by the rule the
    checkpoints follow (`held_streams`), and the error names the late stream the results take
    (until 2026-12-07 it said "through [windows]", as if they came on its results' stream)."""
    b = TopologyBuilder()
    b.set_spout("values", FeederSpout(Fields("v", "ts")))
    b.set_bolt("pairs", PairSums().with_tumbling_window(Count(2)).with_persistence()).shuffle_grouping("values")
    b.set_bolt("windows", PairSums().with_tumbling_window(Duration.of(10)).with_timestamp_field("v")
               .with_late_tuple_stream("late").with_persistence()).shuffle_grouping("pairs")
    b.set_bolt("totals", WindowSums().with_tumbling_window(Count(5))).shuffle_grouping("windows", "late")
    with pytest.raises(InvalidTopologyException) as e:
        b.create_topology()
    assert str(e.value).startswith(
        "Component [totals]: a stateful windowed bolt without persistence cannot take the results of the "
        "persistent window [pairs] (stream [default], through [windows]'s late-tuple stream [late]): ")


def test_a_persistent_window_after_a_persistent_one_counts_every_record_across_a_rollback():
    """The way out the refusal names: the second window persistent too keeps the pairs it
    committed through a rollback, and the first re-fires those after the commit. 20 records of
    1, in pairs (10 results), into windows of 5 pairs: a PREPARE fails while the second window
    holds 3 pairs committed before it; both windows of 10 come out, each once."""
    feeder = FeederSpout(Fields("v"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    totals = FailsAPrepare()
    b = TopologyBuilder()
    b.set_spout("values", feeder)
    b.set_bolt("pairs", PairSums().with_tumbling_window(Count(2)).with_persistence()).shuffle_grouping("values")
    b.set_bolt("totals", totals.with_tumbling_window(Count(5)).with_persistence()).shuffle_grouping("pairs")
    conf = Config()
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    with LocalCluster() as cluster:
        cluster.submit_topology("chain", conf, b.create_topology())
        for i in range(6):
            feeder.feed([1], i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(6)), 20)  # acked at pairs' commit
        seen = totals.commits.value
        assert wait_until(lambda: totals.commits.value >= seen + 2, 20)  # and the 3 pairs committed at totals
        totals.fail_next.set()
        assert wait_until(lambda: not totals.fail_next.is_set(), 20)
        seen = totals.commits.value
        assert wait_until(lambda: totals.commits.value >= seen + 1, 20)  # recovered
        for i in range(6, 20):
            feeder.feed([1], i)
        assert wait_until(lambda: len(totals.sums.items()) >= 2, 20), totals.sums.items()
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(20)), 20)
    assert totals.sums.items() == [10, 10]
