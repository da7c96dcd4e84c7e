"""Trident spouts: FixedBatchSpout, the adapters of IBatchSpout and of a plain Spout, and
FeederBatchSpout; the last two also on LocalCluster, wired by hand (no compiler)."""

from __future__ import annotations

from typing import Any

import pytest

from squall import Config, FailedException, Fields, LocalCluster, Spout, TopologyBuilder
from squall.testing._registry import SharedLog, SharedQueue
from squall.trident.coordinator import (
    MasterBatchCoordinator,
    SpoutEmitterBody,
    TransactionAttempt,
    TridentSpoutCoordinator,
)
from squall.trident.executor import BatchBody, BoltSpec, InputSpec, TridentBoltExecutor, wire
from squall.trident.spout import (
    BatchSpoutAdapter,
    FeederBatchSpout,
    FixedBatchSpout,
    ITridentSpout,
    RichSpoutAdapter,
)

from ..conftest import wait_until


class Collect:
    """A TridentCollector that keeps what it is given."""

    def __init__(self) -> None:
        self.values: list[list] = []
        self.errors: list[BaseException] = []

    def emit(self, values: list) -> None:
        self.values.append(list(values))

    def report_error(self, error: BaseException) -> None:
        self.errors.append(error)


def emitted(emitter: Any, tx: TransactionAttempt, metadata: Any = None) -> list[list]:
    out = Collect()
    emitter.emit_batch(tx, metadata, out)
    return out.values


# --- FixedBatchSpout and BatchSpoutAdapter ----------------------------------------------------------

def test_fixed_batch_spout_gives_each_txid_its_slice_and_the_same_one_again() -> None:
    spout = FixedBatchSpout(Fields("n"), 3, *[[i] for i in range(8)])
    emitter = BatchSpoutAdapter(spout).get_emitter("k", {}, None)
    assert emitted(emitter, TransactionAttempt(1, 0)) == [[0], [1], [2]]
    assert emitted(emitter, TransactionAttempt(2, 0)) == [[3], [4], [5]]
    assert emitted(emitter, TransactionAttempt(1, 3)) == [[0], [1], [2]]  # a replay
    assert emitted(emitter, TransactionAttempt(3, 0)) == [[6], [7]]
    assert emitted(emitter, TransactionAttempt(4, 0)) == []
    # a new copy (a restarted worker) agrees
    again = BatchSpoutAdapter(FixedBatchSpout(Fields("n"), 3, *[[i] for i in range(8)])).get_emitter("k", {}, None)
    assert emitted(again, TransactionAttempt(2, 1)) == [[3], [4], [5]]


def test_fixed_batch_spout_cycles_when_told() -> None:
    spout = FixedBatchSpout(["n"], 3, *[[i] for i in range(5)])
    spout.set_cycle(True)
    assert [spout.batch(t) for t in range(1, 6)] == [[[0], [1], [2]], [[3], [4]], [[0], [1], [2]], [[3], [4]],
                                                     [[0], [1], [2]]]
    assert spout.get_component_configuration() == {"topology.max.task.parallelism": 1}


def test_fixed_batch_spout_refuses_tuples_that_do_not_fit_its_fields() -> None:
    with pytest.raises(ValueError, match=r"tuple 1 \['a', 'b'\] has 2 values for 1 fields \['word'\]"):
        FixedBatchSpout(Fields("word"), 2, ["x"], ["a", "b"])
    with pytest.raises(ValueError, match="max_batch_size must be a positive integer"):
        FixedBatchSpout(Fields("word"), 0, ["x"])


def test_batch_spout_adapter_passes_the_txid_and_acks_on_success() -> None:
    calls = []

    class Recording(FixedBatchSpout):
        def open(self, conf, context):
            calls.append(("open",))

        def ack(self, batch_id):
            calls.append(("ack", batch_id))

    adapter = BatchSpoutAdapter(Recording(Fields("n"), 1, [1], [2]))
    coordinator = adapter.get_coordinator("k", {}, None)
    assert coordinator.is_ready(1) and coordinator.initialize_transaction(1, None, None) is None
    emitter = adapter.get_emitter("k", {}, None)
    assert emitted(emitter, TransactionAttempt(2, 0)) == [[2]]
    emitter.success(TransactionAttempt(2, 0))
    assert calls == [("open",), ("ack", 2)]
    assert adapter.get_output_fields() == Fields("n")


# --- RichSpoutAdapter ------------------------------------------------------------------------------

class ListSpout(Spout):
    """Emits ids 0..n-1 one per next_tuple, each with itself as message id; a failed id goes
    back in the queue (a spout that replays, as Storm's at-least-once needs)."""

    def __init__(self, n: int, log: SharedLog | None = None) -> None:
        self.n = n
        self.log = log
        self.queue = SharedQueue()
        for i in range(n):
            self.queue.put(i)

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("id"))

    def next_tuple(self) -> None:
        try:
            i = self.queue.take()
        except IndexError:
            return
        self.collector.emit([i], i)

    def ack(self, msg_id) -> None:
        if self.log is not None:
            self.log.append(("ack", msg_id))

    def fail(self, msg_id) -> None:
        if self.log is not None:
            self.log.append(("fail", msg_id))
        self.queue.put(msg_id)


def test_rich_spout_adapter_batches_next_tuple_up_to_the_max_and_acks_or_fails_the_ids() -> None:
    log = SharedLog()
    adapter = RichSpoutAdapter(ListSpout(7, log))
    assert adapter.get_output_fields() == Fields("id")
    emitter = adapter.get_emitter("k", {"topology.spout.max.batch.size": 3}, None)
    assert emitted(emitter, TransactionAttempt(1, 0)) == [[0], [1], [2]]
    assert emitted(emitter, TransactionAttempt(2, 0)) == [[3], [4], [5]]
    emitter.success(TransactionAttempt(1, 0))
    assert log.items() == [("ack", 0), ("ack", 1), ("ack", 2)]
    # txid 2 asked again: its ids failed, the spout queues them again after 6
    assert emitted(emitter, TransactionAttempt(2, 1)) == [[6], [3], [4]]
    assert log.items()[3:] == [("fail", 3), ("fail", 4), ("fail", 5)]
    assert emitted(emitter, TransactionAttempt(3, 0)) == [[5]]  # stops at a call that emits nothing
    assert emitted(emitter, TransactionAttempt(4, 0)) == []


def test_rich_spout_adapter_needs_exactly_one_stream() -> None:
    class TwoStreams(Spout):
        def declare_output_fields(self, declarer):
            declarer.declare_stream("a", Fields("x"))
            declarer.declare_stream("b", Fields("x"))

    with pytest.raises(ValueError, match=r"exactly one stream; TwoStreams declares \['a', 'b'\]"):
        RichSpoutAdapter(TwoStreams())


# --- on LocalCluster, wired by hand ----------------------------------------------------------------

class Recording(BatchBody):
    """A committer logging each batch's tuples at its commit; fails the first attempt of the
    txids in ``fail_txids`` at the commit."""

    def __init__(self, log: SharedLog, fail_txids: frozenset[int] = frozenset()) -> None:
        self.log = log
        self.fail_txids = fail_txids

    def prepare(self, conf, context, output):
        pass

    def init_batch(self, batch):
        batch.state["rows"] = []

    def execute(self, batch, stream, values):
        batch.state["rows"].append(values)

    def finish_batch(self, batch):
        if batch.attempt.txid in self.fail_txids and batch.attempt.attempt_id == 0:
            raise FailedException("fail on purpose at the commit")
        self.log.append((batch.attempt.txid, batch.state["rows"]))


def hand_wired(spout: ITridentSpout, body: BatchBody, spout_tasks: int, fields: Fields) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("$mastercoord-bg0", MasterBatchCoordinator(["txid-key"], [spout]))
    builder.set_bolt("$spoutcoord-spout0", TridentSpoutCoordinator("txid-key", spout)) \
        .global_grouping("$mastercoord-bg0", "$batch").global_grouping("$mastercoord-bg0", "$success")
    spout_spec = BoltSpec(inputs=(InputSpec("$spoutcoord-spout0", "$batch", Fields("metadata")),),
                          outputs=(("s1", fields),), committer=False)
    wire(builder.set_bolt("spout0", TridentBoltExecutor(spout_spec, SpoutEmitterBody(spout, "s1", "txid-key")),
                          spout_tasks), spout_spec, [])
    spec = BoltSpec(inputs=(InputSpec("spout0", "s1", fields),), outputs=(), committer=True)
    wire(builder.set_bolt("b-0", TridentBoltExecutor(spec, body)).shuffle_grouping("spout0", "s1"), spec, ["spout0"])
    return builder.create_topology()


def test_feeder_batch_spout_feed_returns_once_its_batch_committed_across_two_emitter_tasks() -> None:
    spout = FeederBatchSpout(["word"])
    log = SharedLog()
    with LocalCluster() as cluster:
        cluster.submit_topology("feeder", {"topology.workers": 2}, hand_wired(spout, Recording(log), 2, Fields("word")))
        spout.feed([["a"], ["b"], ["c"]])
        first = log.items()
        spout.feed([["d"]])
        second = log.items()
        cluster.kill_topology("feeder", wait_secs=0)
    assert [sorted(r[0] for r in rows) for _, rows in first] == [["a", "b", "c"]]
    assert [sorted(r[0] for r in rows) for _, rows in second[1:]] == [["d"]]
    assert [txid for txid, _ in second] == [1, 2]  # a batch starts only when one was fed
    with pytest.raises(ValueError, match=r"tuple 0 \['x', 'y'\] has 2 values for 1 fields"):
        spout.feed([["x", "y"]])


def test_a_plain_spout_in_trident_is_at_least_once_and_every_id_is_acked_once_committed() -> None:
    n = 60
    spout_log, log = SharedLog(), SharedLog()
    adapter = RichSpoutAdapter(ListSpout(n, spout_log))
    conf = Config()
    conf.set_max_spout_pending(2)
    conf["topology.spout.max.batch.size"] = 7
    with LocalCluster() as cluster:
        cluster.submit_topology("rich", conf, hand_wired(adapter, Recording(log, frozenset({2, 3})), 1, Fields("id")))
        assert wait_until(lambda: {m for e, m in spout_log.items() if e == "ack"} == set(range(n)), 60)
        cluster.kill_topology("rich", wait_secs=0)
    committed = [row[0] for _, rows in log.items() for row in rows]
    assert set(committed) == set(range(n))  # every record, at least once
    acks = [m for e, m in spout_log.items() if e == "ack"]
    assert sorted(acks) == list(range(n))  # each acked once, when its batch committed
    failed = {m for e, m in spout_log.items() if e == "fail"}
    assert failed, "the failed commits of txids 2 and 3 failed no spout id"
    print(f"{n} ids, {len(committed)} committed ({len(committed) - n} again after a failure), {len(failed)} failed")


class _Where:
    """The little of a TopologyContext a FeederBatchSpout's coordinator reads."""

    def __init__(self, component: str) -> None:
        self.component = component

    def get_this_component_id(self) -> str:
        return self.component

    def get_component_tasks(self, component: str) -> list[int]:
        return [1]


def test_feeder_batch_spout_lets_a_restarted_master_coordinator_replay_the_txid_it_had_not_committed() -> None:
    """The master coordinator's worker died with txid 1 in flight: the new one must let txid 1
    go again with nothing more fed (it waited for the next feed), and still wait for a feed for
    txid 2."""
    spout = FeederBatchSpout(["word"])
    spout_coordinator = spout.get_coordinator("key", {}, _Where("$spoutcoord-spout0"))
    master = spout.get_coordinator("key", {}, _Where("$mastercoord-bg0"))
    assert not master.is_ready(1)
    spout.feed_no_wait([["a"]])
    assert master.is_ready(1)
    metadata = spout_coordinator.initialize_transaction(1, None, None)
    restarted = spout.get_coordinator("key", {}, _Where("$mastercoord-bg0"))
    assert restarted.is_ready(1)
    assert spout_coordinator.initialize_transaction(1, None, metadata) == metadata  # the same tuples again
    assert not restarted.is_ready(2)


def test_feeder_batch_spout_feed_that_times_out_says_how_far_its_batch_got() -> None:
    """Before, each said "(is the topology submitted and active?)", also to a test whose
    topology ran and failed its batch again and again, or whose worker crash-looped."""
    spout = FeederBatchSpout(["word"])
    errors = "the topology's errors (cluster.get_topology_info(name)['errors']) say why"
    with pytest.raises(TimeoutError, match=r"^FeederBatchSpout: the batch fed was not committed within 0.01 s: the "
                                           r"topology began no batch: is it submitted and active, and its workers up"):
        spout.feed([["a"]], timeout=0.01)
    spout.get_coordinator("key", {}, _Where("$spoutcoord-spout0")).initialize_transaction(1, None, None)
    with pytest.raises(TimeoutError) as taken:
        spout.feed([["b"]], timeout=0.01)
    with pytest.raises(TimeoutError) as first:
        spout.wait_committed(spout._took.items()[0][0], timeout=0.01)
    assert str(first.value).endswith(
        "the topology took it as Trident batch txid 1 but has not committed it: a bolt fails it or raises on it (it "
        f"is replayed), or a worker crashes; {errors}")
    assert str(taken.value).endswith(
        f"the topology has not taken it yet: it waits behind batch txid 1, begun and not committed; {errors}")
