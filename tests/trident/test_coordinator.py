"""The master coordinator: its pure core (time passed in) and, on LocalCluster, the spout and
the spout coordinator bolt resuming after their worker dies."""

from __future__ import annotations

import squall.trident.spout as spout_api

import collections
import threading

import pytest

from squall import Config, FailedException, Fields, LocalCluster, TopologyBuilder, TopologyContext
from squall._transactional import LaunchRefusedError, MemoryBackend
from squall._tuple import Source, Tuple
from squall.testing._registry import SharedLog, _lock, _Shared
from squall.trident.coordinator import (
    BATCH_STREAM,
    COMMIT_STREAM,
    SUCCESS_STREAM,
    BatchCoordinatorCore,
    CoordinatorEmit,
    CoordinatorSnapshot,
    MasterBatchCoordinator,
    SpoutEmitterBody,
    TransactionAttempt,
    TridentSpoutCoordinator,
    max_active_batches,
)
from squall.trident.executor import BatchBody, BatchInfo, BoltSpec, InputSpec, TridentBoltExecutor, wire
from squall.trident.spout import BatchSpoutAdapter, Emitter, FixedBatchSpout, ITridentSpout
from squall.trident.txstate import BackedTransactionalState, TransactionalStateError

from ..conftest import wait_until
from .test_executor import Context as ExecutorContext
from .test_executor import Recorder


def always(_txid: int) -> bool:
    return True


def tx(txid: int, attempt: int = 0) -> TransactionAttempt:
    return TransactionAttempt(txid, attempt)


def batch(txid: int, attempt: int = 0) -> CoordinatorEmit:
    return CoordinatorEmit(BATCH_STREAM, tx(txid, attempt))


def commit(txid: int, attempt: int = 0) -> CoordinatorEmit:
    return CoordinatorEmit(COMMIT_STREAM, tx(txid, attempt))


def success(txid: int, attempt: int = 0) -> CoordinatorEmit:
    return CoordinatorEmit(SUCCESS_STREAM, tx(txid, attempt))


def test_one_batch_goes_through_batch_commit_success_and_the_next_starts() -> None:
    core = BatchCoordinatorCore(max_pending=1, emit_interval_secs=0.0)
    assert core.next(0.0, always) == [batch(1)]
    assert core.next(0.1, always) == []  # one active at most
    assert core.acked(BATCH_STREAM, tx(1)) == [commit(1)]
    assert core.next(0.2, always) == []  # committing still counts as active
    assert core.acked(COMMIT_STREAM, tx(1)) == [success(1)]
    assert core.current_txid == 2
    assert core.next(0.3, always) == [batch(2)]


def test_max_pending_caps_active_batches_and_unset_means_one() -> None:
    assert max_active_batches({}) == 1
    assert max_active_batches({"topology.max.spout.pending": None}) == 1
    assert max_active_batches({"topology.max.spout.pending": 3}) == 3
    with pytest.raises(ValueError, match="topology.max.spout.pending"):
        max_active_batches({"topology.max.spout.pending": 0})
    core = BatchCoordinatorCore(max_pending=3, emit_interval_secs=0.0)
    started = []
    for now in range(10):
        started += core.next(float(now), always)
    assert started == [batch(1), batch(2), batch(3)]


def test_emit_interval_paces_new_batches() -> None:
    core = BatchCoordinatorCore(max_pending=5, emit_interval_secs=0.5)
    assert core.next(10.0, always) == [batch(1)]
    assert core.next(10.49, always) == []
    assert core.next(10.5, always) == [batch(2)]
    assert core.next(10.6, always) == []
    assert core.next(11.0, always) == [batch(3)]


def test_a_txid_starts_only_when_the_spouts_are_ready_for_it() -> None:
    core = BatchCoordinatorCore(max_pending=2, emit_interval_secs=0.0)
    asked = []

    def ready(txid: int) -> bool:
        asked.append(txid)
        return txid == 1

    assert core.next(0.0, ready) == [batch(1)]
    assert core.next(1.0, ready) == []  # 2 is not ready, and 3 is not asked before 2
    assert asked == [1, 2, 2]


def test_commits_follow_txid_order_whatever_order_batches_finish_in() -> None:
    core = BatchCoordinatorCore(max_pending=3, emit_interval_secs=0.0)
    for now in range(3):
        core.next(float(now), always)
    assert core.acked(BATCH_STREAM, tx(3)) == []
    assert core.acked(BATCH_STREAM, tx(2)) == []  # 1 is not processed yet: no commit for 2
    assert core.acked(BATCH_STREAM, tx(1)) == [commit(1)]
    assert core.acked(COMMIT_STREAM, tx(1)) == [success(1), commit(2)]
    assert core.acked(COMMIT_STREAM, tx(2)) == [success(2), commit(3)]
    assert core.next(5.0, always) == [batch(4), batch(5)]
    assert core.acked(COMMIT_STREAM, tx(3)) == [success(3)]
    assert core.current_txid == 4


def test_a_failure_replays_the_txid_with_a_new_attempt_and_restarts_every_later_one() -> None:
    core = BatchCoordinatorCore(max_pending=3, emit_interval_secs=0.0)
    for now in range(3):
        core.next(float(now), always)
    core.acked(BATCH_STREAM, tx(1))
    core.acked(BATCH_STREAM, tx(3))
    assert core.failed(BATCH_STREAM, tx(2)) == []
    assert set(core.active) == {1}
    started = []
    for now in range(3, 6):
        started += core.next(float(now), always)
    assert started == [batch(2, 1), batch(3, 1)]
    # the old attempts' news is stale now
    assert core.acked(BATCH_STREAM, tx(3)) == []
    assert core.failed(BATCH_STREAM, tx(2)) == []
    assert core.acked(COMMIT_STREAM, tx(1)) == [success(1)]
    assert core.acked(BATCH_STREAM, tx(2, 1)) == [commit(2, 1)]


def test_a_failed_commit_replays_the_batch() -> None:
    core = BatchCoordinatorCore(max_pending=1, emit_interval_secs=0.0)
    core.next(0.0, always)
    core.acked(BATCH_STREAM, tx(1))
    core.failed(COMMIT_STREAM, tx(1))  # a message timeout is a fail from the acker
    assert core.next(1.0, always) == [batch(1, 1)]
    assert core.acked(BATCH_STREAM, tx(1, 1)) == [commit(1, 1)]
    assert core.acked(COMMIT_STREAM, tx(1, 1)) == [success(1, 1)]


def test_a_restored_core_resumes_at_the_uncommitted_txid_with_new_attempt_ids() -> None:
    core = BatchCoordinatorCore(max_pending=2, emit_interval_secs=0.0)
    core.next(0.0, always)
    core.next(1.0, always)
    core.acked(BATCH_STREAM, tx(1))
    core.acked(COMMIT_STREAM, tx(1))
    saved = core.snapshot()
    assert saved.current_txid == 2
    again = BatchCoordinatorCore.restore(2, 0.0, saved)
    # txid 2 ran as attempt 0 before the restart; with no interval both start at once
    assert again.next(0.0, always) == [batch(2, 1), batch(3)]
    assert BatchCoordinatorCore.restore(2, 0.0, None).next(0.0, always) == [batch(1), batch(2)]


# --- the runtime on LocalCluster, wired by hand ----------------------------------------------------

def test_a_txid_that_cannot_name_a_transactional_state_is_refused_when_the_topology_is_built() -> None:
    """Any text names a state (Storm's txid ids are ZooKeeper paths): only an empty part is refused."""
    adapter = BatchSpoutAdapter(FixedBatchSpout(Fields("w"), 1, ["a"]))
    assert MasterBatchCoordinator(["my spout", "$drpc"], [adapter, adapter]).txid_keys == ["my spout", "$drpc"]
    with pytest.raises(TransactionalStateError, match="'a//b' must have no empty '/'-separated part"):
        TridentSpoutCoordinator("a//b", adapter)
    with pytest.raises(TransactionalStateError, match="must be a non-empty str"):
        MasterBatchCoordinator([""], [adapter])


class SharedStore(_Shared):
    """A transactional word-count store outside the workers: word -> (txid, count)."""

    def _new(self) -> dict:
        return {}

    def apply(self, txid: int, counts: dict[str, int]) -> None:
        """Storm's transactional rule: a word whose stored txid is this one has its update already."""
        with _lock:
            store = self._mem()
            for word, n in counts.items():
                stored_txid, total = store.get(word, (0, 0))
                if stored_txid != txid:
                    store[word] = (txid, total + n)

    def counts(self) -> dict[str, int]:
        """word -> count."""
        with _lock:
            return {w: c for w, (_, c) in self._mem().items()}


class LoggingCoordinator(MasterBatchCoordinator):
    """Logs where it resumes, each tree's end, and crashes its worker once, at the ack of the
    commit of ``crash_txid`` (after the committers applied it, before the txid is saved as done)."""

    def __init__(self, txid_keys, spouts, log: SharedLog, crash_txid: int) -> None:
        super().__init__(txid_keys, spouts)
        self.log = log
        self.crash_txid = crash_txid

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.log.append(("open", self.core.current_txid))

    def ack(self, msg_id):
        kind, txid, attempt = msg_id
        if kind == "commit" and txid == self.crash_txid and ("crashed", txid) not in self.log.items():
            self.log.append(("crashed", txid))
            raise RuntimeError("crash on purpose: the master coordinator's worker dies after a commit")
        self.log.append(("ack", kind, txid, attempt))
        super().ack(msg_id)

    def fail(self, msg_id):
        self.log.append(("fail", *msg_id))
        super().fail(msg_id)


class CountingBody(BatchBody):
    """A committer counting words per batch into the shared store at the commit; it fails some
    attempts on purpose and holds one commit past its message timeout."""

    def __init__(self, store: SharedStore, commits: SharedLog, master_log: SharedLog) -> None:
        self.store = store
        self.commits = commits
        self.master_log = master_log

    def prepare(self, conf, context, output):
        self.task = context.get_this_task_id()

    def init_batch(self, batch):
        batch.state["counts"] = collections.Counter()

    def execute(self, batch, stream, values):
        if batch.attempt.txid % 5 == 2 and batch.attempt.attempt_id == 0:
            raise FailedException("fail on purpose while processing")
        batch.state["counts"][values[0]] += 1

    def finish_batch(self, batch):
        txid, attempt = batch.attempt.txid, batch.attempt.attempt_id
        if txid % 5 == 4 and attempt == 0:
            raise FailedException("fail on purpose at the commit")
        if txid == 8 and attempt == 0:
            # held until the master saw this commit time out: its tree ends by the message timeout
            assert wait_until(lambda: ("fail", "commit", 8, 0) in self.master_log.items(), 60)
        self.store.apply(txid, batch.state["counts"])
        self.commits.append((self.task, txid, attempt))


WORDS = "the quick brown fox jumps over the lazy dog and the cow".split()


def test_exactly_once_counts_and_ordered_commits_through_failures_a_timeout_and_a_coordinator_crash() -> None:
    sentences = [[WORDS[(i * 7) % len(WORDS)]] for i in range(150)]
    spout = FixedBatchSpout(Fields("word"), 4, *sentences)  # 38 batches
    batches = -(-len(sentences) // 4)
    adapter = BatchSpoutAdapter(spout)
    store, commits, master_log = SharedStore(), SharedLog(), SharedLog()

    builder = TopologyBuilder()
    builder.set_spout("$mastercoord-bg0", LoggingCoordinator(["words"], [adapter], master_log, crash_txid=12))
    builder.set_bolt("$spoutcoord-spout0", TridentSpoutCoordinator("words", adapter)) \
        .global_grouping("$mastercoord-bg0", "$batch").global_grouping("$mastercoord-bg0", "$success")
    spout_spec = BoltSpec(inputs=(InputSpec("$spoutcoord-spout0", "$batch", Fields("metadata")),),
                          outputs=(("s1", Fields("word")),), committer=False)
    wire(builder.set_bolt("spout0", TridentBoltExecutor(spout_spec, SpoutEmitterBody(adapter, "s1", "words"))),
         spout_spec, [])
    count_spec = BoltSpec(inputs=(InputSpec("spout0", "s1", Fields("word")),), outputs=(), committer=True)
    counter = builder.set_bolt("b-0", TridentBoltExecutor(count_spec, CountingBody(store, commits, master_log)), 2)
    counter.fields_grouping("spout0", Fields("word"), "s1").set_own_thread(True)  # it blocks, for the timeout
    wire(counter, count_spec, ["spout0"])

    conf = Config()
    conf.set_num_workers(2)
    conf.set_max_spout_pending(3)
    conf.set_message_timeout_secs(2)
    expected = collections.Counter(s[0] for s in sentences)
    with LocalCluster() as cluster:
        cluster.submit_topology("trident-runtime", conf, builder.create_topology())

        def committed() -> set[int]:
            return {e[2] for e in master_log.items() if e[0] == "ack" and e[1] == "commit"}

        # every batch committed, and two more (empty) after it: nothing is left to change the counts
        assert wait_until(lambda: set(range(1, batches + 3)) <= committed(), 120), \
            f"not committed: {sorted(set(range(1, batches + 3)) - committed())[:10]}"
        counts = store.counts()
        cluster.kill_topology("trident-runtime", wait_secs=0)

    fails = [e for e in master_log.items() if e[0] == "fail"]
    print(f"{batches} batches, {len(sentences)} words; fails: {fails}; commits: {len(commits.items())}")
    assert counts == dict(expected)
    assert sum(counts.values()) == len(sentences) == 150
    entries = master_log.items()
    # the induced failures happened: processing (txid 2), commit (txid 4), the timeout (txid 8)
    assert ("fail", "batch", 2, 0) in entries and ("fail", "commit", 4, 0) in entries
    assert ("fail", "commit", 8, 0) in entries
    # the restarted coordinator resumed at the txid whose commit it had not recorded
    opens = [e for e in entries if e[0] == "open"]
    assert opens[0] == ("open", 1) and ("crashed", 12) in entries and opens[1] == ("open", 12)
    # commits per task in txid order: a txid again only as the replay of a commit not recorded
    for task in {c[0] for c in commits.items()}:
        txids = [c[1] for c in commits.items() if c[0] == task]
        assert txids == sorted(txids), f"task {task} committed out of txid order: {txids}"
        assert set(txids) >= set(range(1, batches + 1))


# --- the shell's saves, with the worker dying between two writes ---------------------------------

class _Crash(Exception):
    """The worker dies here."""


class DyingBackend(MemoryBackend):
    """The cluster's store; once ``armed``, it takes ``armed`` more puts and the worker dies at the next."""

    armed: int | None = None

    def put(self, topology, key, blob):
        if self.armed is not None:
            if self.armed == 0:
                self.armed = None
                raise _Crash(f"the worker died before it wrote {key}")
            self.armed -= 1
        super().put(topology, key, blob)


class RecordingCollector:
    """What the master coordinator emitted: (stream, attempt)."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, TransactionAttempt]] = []

    def emit(self, values, msg_id=None, stream="default"):
        self.emitted.append((stream, values[0]))
        return []


def open_master(backend: MemoryBackend, spouts: int = 1,
                collector: RecordingCollector | None = None) -> tuple[MasterBatchCoordinator, RecordingCollector]:
    adapters = [BatchSpoutAdapter(FixedBatchSpout(Fields("w"), 1, ["a"])) for _ in range(spouts)]
    keys = [f"spout{i}" for i in range(spouts)]
    master = MasterBatchCoordinator(keys, adapters)
    b = TopologyBuilder()
    b.set_spout("$mastercoord-bg0", master)
    conf = {"topology.name": "t", "topology.max.spout.pending": 1, "topology.trident.batch.emit.interval.millis": 0}
    context = TopologyContext(b.create_topology(), "t-1-2", {1: "$mastercoord-bg0"}, 1, 6700, [1], conf,
                              transactional_home=backend)
    collector = collector or RecordingCollector()
    master.open(conf, context, collector)
    return master, collector


@pytest.mark.parametrize("spouts, writes", [(1, w) for w in range(3)] + [(2, w) for w in range(6)])
def test_a_worker_dying_while_it_saves_a_commit_never_reuses_an_attempt_id(spouts: int, writes: int) -> None:
    """The commit of txid 1 changes both the current txid and the attempt ids, in each spout's
    state; the worker dies after ``writes`` of those writes. The restarted coordinator must not
    emit an attempt it emitted before (executors and the acker would take the old attempt's news
    for the new one's): saving the attempt ids without txid 1 before moving past it replayed
    txid 1 as attempt 0."""
    backend = DyingBackend()
    master, first = open_master(backend, spouts)
    master.next_tuple()
    assert first.emitted == [(BATCH_STREAM, tx(1))]
    master.ack(("batch", 1, 0))
    assert first.emitted[-1] == (COMMIT_STREAM, tx(1))
    backend.armed = writes
    with pytest.raises(_Crash):
        master.ack(("commit", 1, 0))
    again, second = open_master(backend, spouts)
    again.next_tuple()
    batches = [a for s, a in first.emitted + second.emitted if s == BATCH_STREAM]
    assert len(batches) == len(set(batches)) == 2, batches
    # resumed at txid 1 (its commit not recorded: replayed, a new attempt) or at txid 2, after
    # the $success of txid 1, which the dead worker may not have sent; the commit's save holds
    # txid 2's first attempt id too (one write), so a state that kept it starts txid 2 at attempt 1
    assert second.emitted in ([(BATCH_STREAM, tx(1, 1))], [(SUCCESS_STREAM, tx(1)), (BATCH_STREAM, tx(2))],
                              [(SUCCESS_STREAM, tx(1)), (BATCH_STREAM, tx(2, 1))])


def test_a_restarted_coordinator_sends_the_success_of_the_newest_committed_txid_again() -> None:
    """It saves before it emits: a worker dying after the save of a commit and before its
    $success would leave the spouts' success(txid) (a FeederBatchSpout's feed waits for it; a
    plain spout's ids are acked there) never called. A second one is harmless."""
    backend = DyingBackend()
    master, first = open_master(backend, 1)
    master.next_tuple()
    master.ack(("batch", 1, 0))
    master.ack(("commit", 1, 0))  # then txid 2 starts at once
    assert first.emitted[-2:] == [(SUCCESS_STREAM, tx(1)), (BATCH_STREAM, tx(2))]
    again, second = open_master(backend, 1)
    again.next_tuple()
    again.next_tuple()
    assert second.emitted == [(SUCCESS_STREAM, tx(1)), (BATCH_STREAM, tx(2, 1))]



class CauseRecorder(RecordingCollector):
    """Also keeps each ``$batch``'s cause (why the attempt before failed, as `FailureCause.wire`)."""

    def __init__(self) -> None:
        super().__init__()
        self.causes: list[tuple[TransactionAttempt, object]] = []

    def emit(self, values, msg_id=None, stream="default"):
        if stream == BATCH_STREAM:
            self.causes.append((values[0], values[1]))
        return super().emit(values, msg_id, stream)


def test_a_restarted_coordinator_tells_the_batches_it_replays_why_and_so_a_drpc_caller() -> None:
    """A Trident DRPC request whose batch was in flight when the master coordinator's worker
    died (SIGKILLed on the process host) failed to its caller as a bare "Request failed": the
    restarted coordinator replayed the txid with no cause, and the DRPC spout's emitter failed
    the request it held without one. The replay now says why, and the caller hears it."""
    from squall.drpc import DRPCSpout, LocalDRPC
    from squall.trident.spout import _RichSpoutEmitter
    from squall._failure import FailureCause

    backend = MemoryBackend()
    master, first = open_master(backend, 1, CauseRecorder())
    master.next_tuple()  # txid 1 starts (attempt 0); its worker dies before it commits
    assert first.causes == [(tx(1), None)]
    again, second = open_master(backend, 1, CauseRecorder())
    again.next_tuple()
    [(attempt, cause)] = second.causes
    assert attempt == tx(1, 1)
    said = ("lost in [$mastercoord-bg0] task 1: the master batch coordinator started again (a new launch of its "
            "worker) with Trident batch txid 1 attempt 0 in flight, which it replays")
    assert FailureCause.from_wire(cause).describe() == said

    # what the DRPC stream's spout executor does with that $batch: fail the request it held
    with LocalDRPC() as drpc:
        out: list = []
        caller = threading.Thread(target=lambda: out.append(_outcome(drpc.execute, "totals", "u1")), daemon=True)
        caller.start()
        emitter = _RichSpoutEmitter(DRPCSpout("totals", drpc), {"topology.message.timeout.secs": 30}, None, 1)
        batch_out = RecordingCollector()
        assert wait_until(lambda: (emitter.emit_batch(tx(1), None, batch_out), batch_out.emitted)[1], 10)
        emitter.failed_with(1, FailureCause.from_wire(cause))  # what SpoutEmitterBody does with the cause
        caller.join(10)
    assert out == [f"DRPCExecutionException: Request failed: {said}"]


def _outcome(execute, function, args) -> str:
    try:
        return execute(function, args)
    except Exception as e:  # noqa: BLE001 (the caller's error, compared as text)
        return f"{type(e).__name__}: {e}"

# --- a launch the master no longer runs ------------------------------------------------------------

class RefusingBackend(MemoryBackend):
    """The master's store; once ``refused``, it refuses every call as from a worker launch it no
    longer runs (the topology was killed while the coordinator was still at work)."""

    refused = False

    def _check(self) -> None:
        if self.refused:
            raise LaunchRefusedError("transactional state of topology 't': worker '127.0.0.1:6700' launch 0 of "
                                     "'t-1-2' is not running now (killed, moved or relaunched); refused")

    def get(self, topology, key):
        self._check()
        return super().get(topology, key)

    def put(self, topology, key, blob):
        self._check()
        super().put(topology, key, blob)

    def delete(self, topology, key, prefix=False):
        self._check()
        super().delete(topology, key, prefix)

    def list(self, topology, prefix=""):
        self._check()
        return super().list(topology, prefix)


def test_a_master_coordinator_whose_launch_the_master_refuses_stops_quietly(caplog) -> None:
    """Killed while it commits: its save of the commit is refused. It must not raise (that crashed
    its worker before the operations' cleanup ran), emit nothing more and say so once."""
    backend = RefusingBackend()
    master, collector = open_master(backend)
    master.next_tuple()
    master.ack(("batch", 1, 0))
    assert collector.emitted == [(BATCH_STREAM, tx(1)), (COMMIT_STREAM, tx(1))]
    backend.refused = True
    with caplog.at_level("INFO", logger="squall.trident.coordinator"):
        master.ack(("commit", 1, 0))  # its save is refused: no $success, no next batch
        master.next_tuple()
        master.fail(("batch", 2, 0))
        master.ack(("commit", 1, 0))
    assert collector.emitted == [(BATCH_STREAM, tx(1)), (COMMIT_STREAM, tx(1))]
    refusals = [r for r in caplog.records if "no longer runs this worker launch" in r.getMessage()]
    assert len(refusals) == 1 and "$mastercoord-bg0" in refusals[0].getMessage()
    master.close()
    # nothing of the refused commit was saved: a launch that runs the topology replays txid 1
    backend.refused = False
    again, second = open_master(backend)
    again.next_tuple()
    assert second.emitted == [(BATCH_STREAM, tx(1, 1))]


class _Input:
    def __init__(self, stream: str, values: list) -> None:
        self.source_stream = stream
        self.values = values


class _Emits:
    def __init__(self) -> None:
        self.emitted: list = []

    def emit(self, values, stream="default"):
        self.emitted.append((stream, values))
        return []


def test_a_spout_coordinator_whose_launch_the_master_refuses_fails_its_inputs_quietly(caplog) -> None:
    """Its batch's input fails (a FailedException: not reported, the worker goes on to stop
    cleanly) rather than being acked without the batch's metadata saved and emitted."""
    backend = RefusingBackend()
    coordinator = TridentSpoutCoordinator("spout0", BatchSpoutAdapter(FixedBatchSpout(Fields("w"), 1, ["a"])))
    b = TopologyBuilder()
    b.set_spout("$mastercoord-bg0", MasterBatchCoordinator(["spout0"], [coordinator.spout]))
    b.set_bolt("$spoutcoord-spout0", coordinator).global_grouping("$mastercoord-bg0", BATCH_STREAM)
    conf = {"topology.name": "t"}
    context = TopologyContext(b.create_topology(), "t-1-2", {1: "$mastercoord-bg0", 2: "$spoutcoord-spout0"}, 2,
                              6700, [1, 2], conf,
                              transactional_home=backend)
    coordinator.prepare(conf, context)
    out = _Emits()
    coordinator.execute(_Input(BATCH_STREAM, [tx(1), None]), out)
    assert [(s, v[0]) for s, v in out.emitted] == [(BATCH_STREAM, tx(1))]
    backend.refused = True
    with caplog.at_level("INFO", logger="squall.trident.coordinator"):
        for attempt in (tx(2), tx(2, 1)):
            with pytest.raises(FailedException) as e:
                coordinator.execute(_Input(BATCH_STREAM, [attempt, None]), out)
            assert type(e.value) is FailedException, "refused: failed quietly, not reported"
    assert len(out.emitted) == 1
    assert len([r for r in caplog.records if "no longer runs this worker launch" in r.getMessage()]) == 1
    coordinator.cleanup()


REFUSED = ("transactional state of topology 't': worker 'localhost:1024' launch 1 of 't-1-2' is not running "
           "now (killed, moved or relaunched); refused")


class _RefusedEmitter(Emitter):
    """A partitioned spout's emitter (Kafka's), whose metadata reads and writes the master refuses."""

    def emit_batch(self, tx, metadata, collector) -> None:
        raise LaunchRefusedError(REFUSED)

    def success(self, tx) -> None:
        raise LaunchRefusedError(REFUSED)


class _RefusedSpout(ITridentSpout):
    def get_coordinator(self, txid_key, conf, context):
        raise AssertionError("not asked")

    def get_emitter(self, txid_key, conf, context):
        return _RefusedEmitter()

    def get_output_fields(self) -> Fields:
        return Fields("w")


def test_a_spout_emitter_whose_launch_the_master_refuses_fails_its_inputs_quietly(caplog) -> None:
    """Killed or rebalanced while a batch is at a Kafka spout's emitter: the refusal fails the
    input quietly (a FailedException, not reported) and is said once at INFO, as the coordinators
    say it. It was raised as it was: "[spout-k] task 15 execute raised on an input, which fails"
    with the refusal's traceback, at every kill and rebalance of a topology over Kafka."""
    class Context:
        def get_this_component_id(self) -> str:
            return "spout-k"

    body = SpoutEmitterBody(_RefusedSpout(), "s1", "k")
    body.prepare({}, Context(), None)
    with caplog.at_level("INFO", logger="squall.trident.coordinator"):
        for attempt in (tx(2), tx(2, 1)):
            with pytest.raises(FailedException) as e:
                body.execute(BatchInfo(attempt), BATCH_STREAM, [None, None])
            assert type(e.value) is FailedException, "refused: failed quietly, not reported"
        body.success(tx(1))   # said once: the refusal is noted, not raised (below)
    refusals = [r.getMessage() for r in caplog.records if "no longer runs this worker launch" in r.getMessage()]
    assert len(refusals) == 1 and "spout-k" in refusals[0], refusals
    # a $success is no batch's (the master's notice, unanchored): the executor runs it outside
    # its FailedException handling, so a refusal raised there reached the engine, which
    # reported "execute raised on an input, which fails" with its traceback
    spec = BoltSpec(inputs=(InputSpec("$spoutcoord-k", BATCH_STREAM, Fields("metadata")),),
                    outputs=(("s1", Fields("w")),), committer=False)
    bolt, out = TridentBoltExecutor(spec, SpoutEmitterBody(_RefusedSpout(), "s1", "k")), Recorder()
    bolt.prepare({"topology.message.timeout.secs": 30}, ExecutorContext(), out)
    done = Tuple([tx(1)], Source("$mastercoord-bg0", SUCCESS_STREAM, 1, Fields("tx")))
    bolt.execute(done)
    assert out.acked == [done] and out.failed == [] and out.errors == []


def test_a_transaction_attempt_crosses_workers_without_pickle() -> None:
    """Every Trident data tuple carries its batch's attempt first: it is one of squall's own
    registered records (as Storm registers its), so Trident runs across workers with
    topology.fall.back.on.pickle false, and no tuple pays for cloudpickle."""
    from squall._tuple import Source, Tuple
    from squall.engine.serialize import Serializer

    src = Source("b-0", "s1", 3, Fields("$tx", "word", "count"))
    sender = Serializer({"topology.fall.back.on.pickle": False}, lambda task, stream: src)
    values = [tx(12, 3), "word", 5]
    data = sender.encode_value(values, "a Trident tuple")
    assert sender.decode_value(data) == values
    batch = sender.encode_batch([7, Tuple(values, src)])
    receiver = Serializer({"topology.fall.back.on.pickle": False}, lambda task, stream: src)
    target, tup = receiver.decode_batch(batch)
    assert target == 7 and tup.values == values and type(tup.values[0]) is TransactionAttempt


class CountingBackend(MemoryBackend):
    """The master's store, counting the calls a worker makes to it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def get(self, topology, key):
        self.calls.append("get")
        return super().get(topology, key)

    def put(self, topology, key, blob):
        self.calls.append("put")
        super().put(topology, key, blob)

    def delete(self, topology, key, prefix=False):
        self.calls.append("delete")
        super().delete(topology, key, prefix)

    def list(self, topology, prefix=""):
        self.calls.append("list")
        return super().list(topology, prefix)

    def write(self, topology, writes):
        self.calls.append(" ".join(["write"] + [("put " if w.value is not None else "delete ") + w.key for w in writes]))
        for w in writes:  # one call: its parts not counted again
            if w.value is None:
                MemoryBackend.delete(self, topology, w.key, prefix=True)
            else:
                MemoryBackend.put(self, topology, w.key, w.value)


def test_the_master_coordinator_saves_once_a_step_a_commit_and_the_next_batch_together() -> None:
    """Its keys change at a batch's start (the attempt ids) and at a commit (the committed
    attempt, the current txid, the attempt ids): each step is one write to the master, and a
    commit's write carries the next batch's attempt id (4 round trips a batch before: 1 + 3)."""
    backend = CountingBackend()
    master, out = open_master(backend)
    backend.calls.clear()
    master.next_tuple()
    master.ack(("batch", 1, 0))
    master.ack(("commit", 1, 0))
    master.ack(("batch", 2, 0))
    assert out.emitted == [(BATCH_STREAM, tx(1)), (COMMIT_STREAM, tx(1)), (SUCCESS_STREAM, tx(1)),
                           (BATCH_STREAM, tx(2)), (COMMIT_STREAM, tx(2))]
    key = "spout0/coordinator/"
    assert backend.calls == [f"write put {key}currattempts",
                             f"write put {key}committed put {key}currtx put {key}currattempts"]
    again, _ = open_master(backend)
    assert again.core.snapshot() == CoordinatorSnapshot(2, ((2, 0),), tx(1))


class _HeldLink:
    """A master over the network whose trident_state_write replies wait until ``release``d."""

    def __init__(self) -> None:
        import threading

        from squall._config import cluster_conf
        from squall.cluster.store import MemoryStore

        from ..cluster.served import served
        self.master = served(cluster_conf({}), store=MemoryStore.for_conf({}))
        self.release = threading.Semaphore(0)
        self.writes = 0

    def call(self, op, **args):
        if op == "trident_state_write":
            if not self.release.acquire(timeout=10):  # a save made on the spout's loop holds it here
                raise RuntimeError("the save waited for a release that the held loop could not give")
            self.writes += 1
        return getattr(self.master, f"op_{op}")(**args)


def test_over_the_network_the_master_coordinator_saves_off_its_loop_and_emits_once_saved() -> None:
    """On the process host a save is a round trip to the master: it runs on a thread of its own
    and the spout's loop goes on (the worker's other executors run meanwhile); what it must
    precede is emitted at the first call after it is durable, which ``wake`` brings at once."""
    import threading

    from squall._transactional import MasterBackend

    link = _HeldLink()
    woken = threading.Event()

    class Waking(RecordingCollector):
        def wake(self):
            woken.set()

    master = MasterBatchCoordinator(["spout0"], [BatchSpoutAdapter(FixedBatchSpout(Fields("w"), 1, ["a"]))])
    b = TopologyBuilder()
    b.set_spout("$mastercoord-bg0", master)
    conf = {"topology.name": "t", "topology.max.spout.pending": 1, "topology.trident.batch.emit.interval.millis": 0}
    context = TopologyContext(b.create_topology(), "t-1-2", {1: "$mastercoord-bg0"}, 1, 6700, [1], conf,
                              transactional_home=MasterBackend(link))
    out = Waking()
    master.open(conf, context, out)

    def saved_then_emitted(expected):
        master.next_tuple()
        assert out.emitted == before, "nothing goes out before its save is durable"
        woken.clear()
        link.release.release()
        assert woken.wait(10)
        master.next_tuple()
        assert out.emitted == before + expected

    before: list = []
    saved_then_emitted([(BATCH_STREAM, tx(1))])
    master.ack(("batch", 1, 0))  # nothing to save: the commit goes out at once
    assert out.emitted[-1] == (COMMIT_STREAM, tx(1))
    before = list(out.emitted)
    master.ack(("commit", 1, 0))
    saved_then_emitted([(SUCCESS_STREAM, tx(1)), (BATCH_STREAM, tx(2))])
    assert link.writes == 2
    state = BackedTransactionalState(MasterBackend(link), "t", "spout0")
    assert (state.get("coordinator/currtx"), state.get("coordinator/currattempts")) == (2, {2: 0})
    master.close()


class Metas(spout_api.BatchCoordinator):
    """Metadata: the txid and what the coordinator was given, in a list it then changes in place
    (what it gets must be copies, as from the state)."""

    def __init__(self) -> None:
        self.seen: list = []

    def initialize_transaction(self, txid, prev_metadata, curr_metadata):
        self.seen.append((txid, None if prev_metadata is None else list(prev_metadata),
                          None if curr_metadata is None else list(curr_metadata)))
        meta = [txid]
        for given in (prev_metadata, curr_metadata):
            if given is not None:
                given.append("changed")
        return meta

    def success(self, txid):
        pass

    def is_ready(self, txid):
        return True

    def close(self):
        pass


class MetaSpout(BatchSpoutAdapter):
    def __init__(self, coordinator: Metas) -> None:
        super().__init__(FixedBatchSpout(Fields("w"), 1, ["a"]))
        self.metas = coordinator

    def get_coordinator(self, txid_key, conf, context):
        return self.metas


def _spout_coordinator(backend, metas):
    coordinator = TridentSpoutCoordinator("spout0", MetaSpout(metas))
    b = TopologyBuilder()
    b.set_spout("$mastercoord-bg0", MasterBatchCoordinator(["spout0"], [coordinator.spout]))
    b.set_bolt("$spoutcoord-spout0", coordinator).global_grouping("$mastercoord-bg0", BATCH_STREAM)
    conf = {"topology.name": "t"}
    context = TopologyContext(b.create_topology(), "t-1-2", {1: "$mastercoord-bg0", 2: "$spoutcoord-spout0"}, 2,
                              6700, [1, 2], conf, transactional_home=backend)
    coordinator.prepare(conf, context)
    return coordinator


def test_a_spout_coordinator_reads_its_metadata_once_then_writes_each_batchs_and_hands_out_copies() -> None:
    """It is its spout's only writer of the metadata: after one read at its first batch, a batch
    costs the master one write, which also deletes what the last $success made stale (each was
    a round trip on the process host). A replay gets the txid's own metadata and the previous txid's, copies
    as the state's are; a restarted coordinator reads what the master kept."""
    backend, metas = CountingBackend(), Metas()
    coordinator, out = _spout_coordinator(backend, metas), _Emits()
    for stream, attempt in ((BATCH_STREAM, tx(1)), (BATCH_STREAM, tx(2)), (BATCH_STREAM, tx(2, 1)),
                            (SUCCESS_STREAM, tx(2)), (BATCH_STREAM, tx(3))):
        coordinator.execute(_Input(stream, [attempt, None] if stream == BATCH_STREAM else [attempt]), out)
    meta = [f"spout0/meta/{txid:020d}" for txid in range(4)]
    assert backend.calls == ["list", f"write put {meta[1]}", f"write put {meta[2]}", f"write put {meta[2]}",
                             f"write delete {meta[1]} put {meta[3]}"]
    assert metas.seen == [(1, None, None), (2, [1], None), (2, [1], [2]), (3, [2], None)]
    assert [v[1] for s, v in out.emitted] == [[1], [2], [2], [3]]
    restarted = _spout_coordinator(backend, Metas())
    restarted.execute(_Input(BATCH_STREAM, [tx(3, 1), None]), out)
    assert restarted.coordinator.seen == [(3, [2], [3])], "the restarted one reads the master's (txid 1 deleted)"
    coordinator.cleanup()


def test_a_txid_failing_again_and_again_is_said_once_every_interval_with_the_failures_unsaid():
    from squall.trident.coordinator import _FailureLog
    said = _FailureLog(interval_secs=10.0)
    assert said.failed(1, 0.0) == 0  # its first failure: said
    assert [said.failed(1, t / 100) for t in range(1, 200)] == [None] * 199  # a source down: 2 s of retries
    assert said.failed(1, 10.0) == 199  # the next line counts them
    assert said.failed(3, 10.1) == 0  # another txid: said at once
    assert said.failed(1, 10.2) == 0  # and txid 1 again is a new run of failures
    assert said.failed(1, 10.3) is None


def test_only_the_running_attempt_of_a_txid_is_running():
    core = BatchCoordinatorCore(max_pending=3, emit_interval_secs=0.0)
    emitted = core.next(0.0, lambda txid: True)
    assert [e.attempt for e in emitted] == [TransactionAttempt(t, 0) for t in (1, 2, 3)]
    assert all(core.is_running(e.attempt) for e in emitted)
    core.failed(BATCH_STREAM, TransactionAttempt(1, 0))  # drops 2 and 3 with it
    assert not any(core.is_running(e.attempt) for e in emitted)
    again = core.next(1.0, lambda txid: True)
    assert core.is_running(TransactionAttempt(2, 1)) and TransactionAttempt(2, 1) in [e.attempt for e in again]
