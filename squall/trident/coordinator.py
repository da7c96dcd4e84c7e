"""Trident's coordination: Storm's ``MasterBatchCoordinator`` and ``TridentSpoutCoordinator``.

The master coordinator is a spout (``$mastercoord-bg<i>``, one task per batch group: a
connected part of the topology's graph) that hands out its group's batches:
``$batch`` starts one, ``$commit`` commits it once processed, ``$success`` says it is done.
Its rules live in the pure `BatchCoordinatorCore` (time passed in); the spout only emits what
the core returns and keeps the core's durable part (the oldest uncommitted txid, the attempt
ids) in the topology's transactional state, so a restarted worker resumes where it was.
"""

from __future__ import annotations

import collections
import enum
import logging
import pickle
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import cloudpickle

from .._collectors import BasicOutputCollector, OutputFieldsDeclarer, SpoutOutputCollector
from .._components import BasicBolt, Spout
from .._config import Config
from .._errors import FailedException
from .._failure import UNAVAILABLE, UNKNOWN, WORKER_LOST, DeadLetterCounts, FailureCause
from .._fields import Fields
from .._transactional import Delete, LaunchRefusedError, MasterBackend, Put
from .._tuple import Tuple
from ..drpc import DRPCSpout
from .executor import (
    BATCH_STREAM,
    COMMIT_STREAM,
    SUCCESS_STREAM,
    BatchBody,
    BatchInfo,
    BatchOutput,
    master_coordinator_id,
)
from .failures import STALL_FAILURES, stalled_text, unavailable_text
from .operation import TridentCollector
from .stats import BatchDeadLetters, BatchTimes, given_up_since
from .txstate import TransactionalState, check_name, transactional_state

if TYPE_CHECKING:
    from .spout import ITridentSpout

log = logging.getLogger(__name__)

# the public names; BATCH_STREAM, COMMIT_STREAM, SUCCESS_STREAM and master_coordinator_id are
# executor's, re-exported (the planner and tests import them from here)
__all__ = [
    "BATCH_STREAM", "COMMIT_STREAM", "CURRENT_ATTEMPTS", "CURRENT_TX", "EMIT_INTERVAL_KEY", "LAST_COMMITTED",
    "MAX_PENDING_KEY", "META_PREFIX", "SPOUT_COORDINATOR_PREFIX", "SUCCESS_STREAM", "AttemptState",
    "BatchCoordinatorCore", "CoordinatorEmit", "CoordinatorSnapshot", "MasterBatchCoordinator",
    "SpoutEmitterBody", "TransactionAttempt", "TridentSpoutCoordinator", "TxStatus", "load_snapshot",
    "master_coordinator_id", "max_active_batches", "spout_coordinator_id",
]

EMIT_INTERVAL_KEY = Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS
MAX_PENDING_KEY = Config.TOPOLOGY_MAX_SPOUT_PENDING
# under each spout's transactional state (Storm's /transactional/<txid key>/coordinator/...)
CURRENT_TX = "coordinator/currtx"
CURRENT_ATTEMPTS = "coordinator/currattempts"
LAST_COMMITTED = "coordinator/committed"  # the attempt of the newest txid committed
META_PREFIX = "meta/"


SPOUT_COORDINATOR_PREFIX = "$spoutcoord-"


class _Refusal:
    """Whether the master refused this worker launch its transactional state
    (`LaunchRefusedError`: the topology was killed, or the worker moved or relaunched). It
    never takes the launch back, so a coordinator does no more work here: it has nothing to
    save its progress in, and another launch (if any) resumes from what was saved. Said once
    in the log, not raised: a coordinator still committing when its topology is killed would
    otherwise crash its worker before the operations' ``cleanup`` ran. Said at INFO: each cause
    is an operator's own act (a kill, a rebalance, a relaunch), and a warning on every killed
    Trident topology would teach users to ignore warnings."""

    def __init__(self) -> None:
        self.refused = False

    def note(self, component: str, error: LaunchRefusedError) -> None:
        """The master refused ``component``'s call: log it the first time."""
        if not self.refused:
            self.refused = True
            log.info("Trident coordinator %s stops: the master no longer runs this worker launch "
                        "(topology killed, worker moved or relaunched): %s", component, error)


class _FailureLog:
    """When the master coordinator says that a batch failed: each time a txid fails for the
    first time in a row, and then at most once every ``interval_secs`` for the same txid, with
    how many failures of it went unsaid. A source that is down fails the same txid every few
    milliseconds (its spout coordinator raises at once), and a line for each floods the log;
    Storm's coordinator says nothing at all."""

    def __init__(self, interval_secs: float = 10.0) -> None:
        self.interval_secs = interval_secs
        self.txid: int | None = None
        self.said_at = float("-inf")
        self.unsaid = 0

    def failed(self, txid: int, now: float) -> int | None:
        """``txid`` failed at ``now``: None to say nothing, else how many failures of it went
        unsaid since the last line."""
        if txid == self.txid and now - self.said_at < self.interval_secs:
            self.unsaid += 1
            return None
        unsaid = self.unsaid if txid == self.txid else 0
        self.txid, self.said_at, self.unsaid = txid, now, 0
        return unsaid


class _StallWatch:
    """Counts the failures in a row of each txid (its running attempt's: the later txids a failure
    drops fail after it, as news of nothing) and says when one reaches `STALL_FAILURES`: once per
    txid, which stalls the topology until it commits (see `squall.trident.failures`)."""

    def __init__(self, threshold: int = STALL_FAILURES) -> None:
        self.threshold = threshold
        self.failures: dict[int, int] = {}
        self.reported: set[int] = set()

    def failed(self, txid: int) -> int | None:
        """An attempt of ``txid`` failed: its failures in a row when that is the time to say it
        stalls, else None."""
        n = self.failures[txid] = self.failures.get(txid, 0) + 1
        if n < self.threshold or txid in self.reported:
            return None
        self.reported.add(txid)
        return n

    def committed(self, txid: int) -> None:
        """``txid`` committed: it and the txids before it fail no more."""
        for t in [t for t in self.failures if t <= txid]:
            del self.failures[t]
        self.reported = {t for t in self.reported if t > txid}


def _is_drpc(spout: Any) -> bool:
    """Whether ``spout`` (a master coordinator's `ITridentSpout`) is a DRPC stream's: a plain
    `DRPCSpout` in its adapter (`squall.trident.spout.RichSpoutAdapter`)."""
    return isinstance(getattr(spout, "spout", None), DRPCSpout)


class _BackgroundSaves:
    """The master coordinator's saves to a master over the network, on a thread of their own,
    in order: each save's emits are handed back (`done`) once it is durable, and ``wake`` tells
    the spout's loop, which meanwhile runs the worker's other executors instead of waiting out
    the round trip (Storm's coordinator blocks only its own executor's thread on ZooKeeper)."""

    def __init__(self, name: str, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._todo: queue.SimpleQueue[tuple[Callable[[], None], list[CoordinatorEmit]] | None] = queue.SimpleQueue()
        self._done: collections.deque[list[CoordinatorEmit]] = collections.deque()
        self._error: BaseException | None = None
        self.in_flight = 0  # saves submitted and not yet handed back by `done`
        self._thread = threading.Thread(target=self._run, name=f"squall-trident-saves-{name}", daemon=True)
        self._thread.start()

    def submit(self, save: Callable[[], None], emits: list[CoordinatorEmit]) -> None:
        """Run ``save``, then hand ``emits`` back."""
        self.in_flight += 1
        self._todo.put((save, emits))

    def done(self) -> list[CoordinatorEmit]:
        """The emits of the saves finished since the last call, in order.

        Raises:
            BaseException: what a save raised (the saves after it are not run).
        """
        out: list[CoordinatorEmit] = []
        while self._done:
            out += self._done.popleft()
            self.in_flight -= 1
        if not out and self._error is not None:
            error, self._error = self._error, None
            raise error
        return out

    def close(self) -> None:
        """No more saves: the thread ends once the one running finished."""
        self._todo.put(None)

    def _run(self) -> None:
        while (item := self._todo.get()) is not None:
            save, emits = item
            try:
                save()
            except BaseException as e:  # noqa: BLE001 (raised in the spout's loop by `done`)
                self._error = e
                self._wake()
                return
            self._done.append(emits)
            self._wake()


def _over_the_network(states: Sequence[TransactionalState]) -> bool:
    """Whether the states are the master's through a link that crosses processes (the process
    and Spark hosts), where a save is a round trip worth taking off the spout's loop."""
    backends = [getattr(s, "backend", None) for s in states]
    return all(isinstance(b, MasterBackend) and getattr(b.master, "passes_records", False) is not True
               for b in backends)


def spout_coordinator_id(spout_id: str) -> str:
    """The component id of the coordinator bolt of the spout executor bolt ``spout_id``."""
    return SPOUT_COORDINATOR_PREFIX + spout_id


@dataclass(frozen=True, order=True)
class TransactionAttempt:
    """One attempt of one batch: the ``batch_id`` Trident operations see.

    ``txid`` numbers batches from 1; ``attempt_id`` changes each time the coordinator
    replays the txid after a failure.
    """

    txid: int
    attempt_id: int


class AttemptState(enum.Enum):
    """Where an active batch is (Storm's ``AttemptStatus``)."""

    PROCESSING = "processing"   # its $batch tree is open
    PROCESSED = "processed"     # every tuple was processed; waits for its turn to commit
    COMMITTING = "committing"   # its $commit tree is open


@dataclass
class TxStatus:
    """One active txid: the attempt running and where it is."""

    attempt: TransactionAttempt
    state: AttemptState = AttemptState.PROCESSING


@dataclass(frozen=True)
class CoordinatorEmit:
    """One tuple the master coordinator must emit: ``attempt`` on ``stream``."""

    stream: str
    attempt: TransactionAttempt


@dataclass(frozen=True)
class CoordinatorSnapshot:
    """The durable part of the coordinator: what a restarted one resumes from."""

    current_txid: int
    attempt_ids: tuple[tuple[int, int], ...]
    last_committed: TransactionAttempt | None = None


def max_active_batches(conf: dict) -> int:
    """``topology.max.spout.pending`` as the coordinator reads it: unset (or ``"auto"``, the
    tuner's, which has no meaning for batches) is 1, as Storm's null."""
    value = conf.get(MAX_PENDING_KEY)
    if value is None or value == "auto":
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{MAX_PENDING_KEY} must be a positive integer for a Trident topology, got {value!r}")
    return value


class BatchCoordinatorCore:
    """Storm's ``MasterBatchCoordinator`` rules, without I/O.

    ``current_txid`` is the oldest txid not committed; at most ``max_pending`` txids are active
    from there. A new ``$batch`` goes out only when a spout is ready for it and
    ``emit_interval_secs`` passed since the previous one (Storm's throttler, which paces
    replays too). The oldest active txid is committed once PROCESSED, so commits follow txid
    order; a committed txid gives ``$success`` and ``current_txid`` moves on. A failed attempt
    drops its txid and every later active one: they are emitted again with new attempt ids.

    Methods return what to emit; `snapshot` is what must be saved before it is emitted.
    """

    def __init__(self, max_pending: int, emit_interval_secs: float, current_txid: int = 1,
                 attempt_ids: dict[int, int] | None = None,
                 last_committed: TransactionAttempt | None = None) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending}")
        self.max_pending = max_pending
        self.emit_interval_secs = emit_interval_secs
        self.current_txid = current_txid
        self.active: dict[int, TxStatus] = {}
        # only the txids that may still run: a restarted coordinator gives each a new attempt id
        self.attempt_ids: dict[int, int] = {
            t: a for t, a in (attempt_ids or {}).items() if current_txid <= t < current_txid + max_pending}
        self._last_emit: float | None = None
        self.last_committed = last_committed

    @classmethod
    def restore(cls, max_pending: int, emit_interval_secs: float,
                snapshot: CoordinatorSnapshot | None) -> BatchCoordinatorCore:
        """A core resuming from ``snapshot`` (None: a new topology, from txid 1)."""
        if snapshot is None:
            return cls(max_pending, emit_interval_secs)
        return cls(max_pending, emit_interval_secs, snapshot.current_txid, dict(snapshot.attempt_ids),
                   snapshot.last_committed)

    def snapshot(self) -> CoordinatorSnapshot:
        """The durable part now."""
        return CoordinatorSnapshot(self.current_txid, tuple(sorted(self.attempt_ids.items())), self.last_committed)

    def resend_success(self) -> list[CoordinatorEmit]:
        """At a restart: the ``$success`` of the newest txid committed, which the coordinator
        may have died before sending (it saves before it emits). Its receivers take a second
        one as they take the first; a txid not yet past (a worker that died between the two
        writes of a commit's save) is replayed and gets its own."""
        c = self.last_committed
        return [CoordinatorEmit(SUCCESS_STREAM, c)] if c is not None and c.txid < self.current_txid else []

    def next(self, now: float, ready: Callable[[int], bool]) -> list[CoordinatorEmit]:
        """What to emit now: a due ``$commit``, and a ``$batch`` if one may start.

        ``ready(txid)`` asks the spouts' coordinators whether ``txid`` may start.
        """
        out = self._maybe_commit()
        if len(self.active) >= self.max_pending:
            return out
        for txid in range(self.current_txid, self.current_txid + self.max_pending):
            if txid in self.active:
                continue
            if self._throttled(now) or not ready(txid):
                break
            attempt = TransactionAttempt(txid, self.attempt_ids.get(txid, -1) + 1)
            self.attempt_ids[txid] = attempt.attempt_id
            self.active[txid] = TxStatus(attempt)
            self._last_emit = now
            out.append(CoordinatorEmit(BATCH_STREAM, attempt))
        return out

    def acked(self, stream: str, attempt: TransactionAttempt) -> list[CoordinatorEmit]:
        """The ``$batch`` or ``$commit`` tree of ``attempt`` completed."""
        status = self.active.get(attempt.txid)
        if status is None or status.attempt != attempt:
            return []  # an attempt replaced since: its news is stale
        out: list[CoordinatorEmit] = []
        if stream == BATCH_STREAM and status.state is AttemptState.PROCESSING:
            status.state = AttemptState.PROCESSED
        elif stream == COMMIT_STREAM and status.state is AttemptState.COMMITTING:
            del self.active[attempt.txid]
            self.attempt_ids.pop(attempt.txid, None)
            self.current_txid = attempt.txid + 1
            self.last_committed = attempt
            out.append(CoordinatorEmit(SUCCESS_STREAM, attempt))
        return out + self._maybe_commit()

    def is_running(self, attempt: TransactionAttempt) -> bool:
        """Whether ``attempt`` is the running attempt of its txid (not one replaced or dropped)."""
        status = self.active.get(attempt.txid)
        return status is not None and status.attempt == attempt

    def failed(self, stream: str, attempt: TransactionAttempt) -> list[CoordinatorEmit]:
        """The ``$batch`` or ``$commit`` tree of ``attempt`` failed or timed out: the txid and
        every later active one start again (at the next `next`)."""
        if not self.is_running(attempt):
            return []
        for txid in [t for t in self.active if t >= attempt.txid]:
            del self.active[txid]
        return []

    def _maybe_commit(self) -> list[CoordinatorEmit]:
        status = self.active.get(self.current_txid)
        if status is not None and status.state is AttemptState.PROCESSED:
            status.state = AttemptState.COMMITTING
            return [CoordinatorEmit(COMMIT_STREAM, status.attempt)]
        return []

    def _throttled(self, now: float) -> bool:
        return self._last_emit is not None and now - self._last_emit < self.emit_interval_secs


def _meta_key(txid: int) -> str:
    # zero-padded so that the keys sort as the txids do
    return f"{META_PREFIX}{txid:020d}"


def load_snapshot(states: Sequence[TransactionalState], max_pending: int) -> CoordinatorSnapshot | None:
    """The coordinator's durable part as its spouts' states keep it (the furthest of them, as
    Storm reads every managed spout's); None if none has any."""
    currents = [c for c in (s.get(CURRENT_TX) for s in states) if isinstance(c, int)]
    saved = [dict(a) for a in (s.get(CURRENT_ATTEMPTS) for s in states) if a]
    committed = [c for c in (s.get(LAST_COMMITTED) for s in states) if isinstance(c, TransactionAttempt)]
    if not currents and not saved and not committed:
        return None
    # no current txid yet (nothing committed) is txid 1, as Storm's; the attempt ids of txid 1
    # still count then, or a worker dying before the first commit would reuse them
    current = max(currents, default=1)
    attempts: dict[int, int] = {}
    for stored in saved:
        for txid, attempt in stored.items():
            if current <= txid < current + max_pending:
                attempts[txid] = max(attempt, attempts.get(txid, -1))
    return CoordinatorSnapshot(current, tuple(sorted(attempts.items())),
                               max(committed, key=lambda a: a.txid, default=None))


class MasterBatchCoordinator(Spout):
    """The spout that drives a batch group (Storm's ``MasterBatchCoordinator``): component
    ``$mastercoord-<group>``, one task.

    It emits ``$batch`` and ``$commit`` with message ids ``("batch"|"commit", txid,
    attempt_id)``, so their trees' acks and fails (message timeouts included) come back to it,
    and ``$success`` unanchored. `BatchCoordinatorCore` decides; this shell saves the core's
    durable part in each managed spout's transactional state (``coordinator/currtx``,
    ``coordinator/currattempts``) before it emits what the core returned, so a restarted worker
    resumes at the uncommitted txid with attempt ids never used before.

    Args:
        txid_keys: the managed spouts' txid keys (``new_stream(txid, spout)``), one per spout.
        spouts: the managed spouts; a txid starts once any one's coordinator is ready for it
            (Storm's "right now it goes if anyone is ready").
    """

    def __init__(self, txid_keys: Sequence[str], spouts: Sequence[ITridentSpout]) -> None:
        if not txid_keys or len(txid_keys) != len(spouts):
            raise ValueError(f"MasterBatchCoordinator needs one txid key per spout, at least one; got "
                             f"{len(txid_keys)} keys for {len(spouts)} spouts")
        # refused here, when the topology is built, not by a worker that then cannot open
        self.txid_keys = [check_name(key, "name (a spout's txid)") for key in txid_keys]
        self.spouts = list(spouts)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``$batch`` (``Fields("tx", "cause")``: why its last attempt failed, or None), ``$commit``
        and ``$success`` (``Fields("tx")``)."""
        declarer.declare_stream(BATCH_STREAM, Fields("tx", "cause"))
        for stream in (COMMIT_STREAM, SUCCESS_STREAM):
            declarer.declare_stream(stream, Fields("tx"))

    def get_component_configuration(self) -> dict[str, Any] | None:
        """One task at most: the txids are its alone to hand out."""
        return {Config.TOPOLOGY_MAX_TASK_PARALLELISM: 1}

    def open(self, conf: dict, context: Any, collector: SpoutOutputCollector) -> None:
        """Restore the core from the spouts' transactional states and make their coordinators."""
        super().open(conf, context, collector)
        interval_ms = conf.get(EMIT_INTERVAL_KEY)
        interval_ms = 500 if interval_ms is None else interval_ms
        max_pending = max_active_batches(conf)
        self._states = [transactional_state(context, key) for key in self.txid_keys]
        self.core = BatchCoordinatorCore.restore(max_pending, interval_ms / 1000.0,
                                                 load_snapshot(self._states, max_pending))
        self._saved = self.core.snapshot()
        self._resend = self.core.resend_success()
        self._times = BatchTimes(self.core.current_txid, max_pending)
        self._coordinators = [spout.get_coordinator(key, conf, context)
                              for key, spout in zip(self.txid_keys, self.spouts)]
        self._active = True
        self._component = context.get_this_component_id()
        self._refusal = _Refusal()
        self._failures = _FailureLog()
        # a DRPC stream's batches stall nothing: a request its operation raises on fails to its
        # caller and is not replayed, and the txid's replay carries the requests after it
        self._stalls = None if all(_is_drpc(spout) for spout in self.spouts) else _StallWatch()
        self._last_cause: FailureCause | None = None  # the cause `fail_with` hands `fail`
        # per txid, why its last attempt failed (a FailureCause's wire form), for its replay's
        # $batch: a plain spout in it (a DRPC stream's) tells its records why
        self._causes: dict[int, tuple] = {}
        # the txids a launch before this one started and did not commit: their replays say so
        # (a DRPC request in one hears why it failed, not a bare "Request failed")
        task = context.get_this_task_id()
        for txid, attempt_id in sorted(self.core.attempt_ids.items()):
            self._causes[txid] = FailureCause(
                WORKER_LOST, self._component, task, "",
                f"the master batch coordinator started again (a new launch of its worker) with Trident batch "
                f"txid {txid} attempt {attempt_id} in flight, which it replays").wire()
        self._saves = _BackgroundSaves(self._component, collector.wake) if _over_the_network(self._states) else None
        log.info("Trident coordinator %s resumes at txid %d", self._component, self.core.current_txid)

    def activate(self) -> None:
        """New batches may start again."""
        self._active = True

    def deactivate(self) -> None:
        """No new batch starts; active ones still commit."""
        self._active = False

    def next_tuple(self) -> None:
        """Emit what saves made durable; start a batch or commit one, if due (nothing once the
        master refused this launch)."""
        self._emit_saved()
        if not self._refusal.refused:
            self._step([])

    def ack(self, msg_id: Any) -> None:
        """A ``$batch`` or ``$commit`` tree completed."""
        self._emit_saved()
        if self._refusal.refused:
            return
        stream, attempt = self._parse(msg_id)
        self._step(self.core.acked(stream, attempt))

    def fail_with(self, msg_id: Any, cause: FailureCause) -> None:
        """`fail`, knowing why: the replay of the txid (and of the later ones the failure drops)
        carries ``cause`` in its ``$batch``."""
        if not self._refusal.refused:
            _, attempt = self._parse(msg_id)
            if self.core.is_running(attempt):
                for txid in self.core.active:
                    if txid >= attempt.txid:
                        self._causes[txid] = cause.wire()
        self._last_cause = cause
        try:
            self.fail(msg_id)
        finally:
            self._last_cause = None

    def fail(self, msg_id: Any) -> None:
        """A ``$batch`` or ``$commit`` tree failed or timed out: the core replays it."""
        self._emit_saved()
        if self._refusal.refused:
            return
        stream, attempt = self._parse(msg_id)
        # only an attempt still running is news: the later txids a failure drops fail after it
        unsaid = self._failures.failed(attempt.txid, time.monotonic()) if self.core.is_running(attempt) else None
        if unsaid is not None:
            log.info("Trident batch %s failed on %s; it is replayed%s", attempt, stream,
                     f" (and failed {unsaid} more times since the last line)" if unsaid else "")
        if self._stalls is not None and self.core.is_running(attempt):
            self._watch_stall(attempt.txid, stream)
        self._step(self.core.failed(stream, attempt))

    def _watch_stall(self, txid: int, stream: str) -> None:
        """An attempt of ``txid`` failed: once it failed `STALL_FAILURES` times in a row, report
        that the topology is stalled there, why and how to get out (once per txid)."""
        assert self._stalls is not None  # `fail` watches only the batches that can stall
        failures = self._stalls.failed(txid)
        if failures is None:
            return
        cause = self._last_cause
        last = cause.describe() if cause is not None and cause != UNKNOWN else f"its {stream} tree failed (no cause given)"
        # reported (and so logged) once: Storm's throttle of an executor's reports never drops it
        if cause is not None and cause.kind == UNAVAILABLE:
            # a store or source that is down: the replays go through once it answers, and the
            # advice to fix an operation or the data would send the user the wrong way
            self.collector.report_error(unavailable_text(txid, self.txid_keys, failures, last))
        else:
            self.collector.report_error(stalled_text(txid, self.txid_keys, failures, last))

    def _step(self, emits: list[CoordinatorEmit]) -> None:
        # what an ack or fail decided and what may start after it go out behind one save: a
        # commit's three keys and the next batch's attempt id in one call to the master
        if self._resend:
            emits, self._resend = self._resend + emits, []
        if self._active:
            emits += self.core.next(time.monotonic(), self._ready)
        self._send(emits)

    def close(self) -> None:
        """Close the spouts' coordinators."""
        saves = getattr(self, "_saves", None)
        if saves is not None:
            saves.close()
        for coordinator in getattr(self, "_coordinators", []):
            coordinator.close()

    def component_statistics(self) -> dict[tuple[str, str, str], float]:
        """The current txid, the batches in flight and committed, and their latency, for the UI
        (`squall.trident.stats`)."""
        times = getattr(self, "_times", None)
        return times.figures.statistics() if times is not None else {}

    def _ready(self, txid: int) -> bool:
        # Storm's rule: any spout ready starts the batch, and the others emit what they have
        # for it (a feeder not fed, nothing). Every coordinator is asked: a feeder's answer
        # lets the txid through for its replays too.
        ready = False
        for coordinator in self._coordinators:
            ready = coordinator.is_ready(txid) or ready
        return ready

    @staticmethod
    def _parse(msg_id: Any) -> tuple[str, TransactionAttempt]:
        kind, txid, attempt_id = msg_id
        return (BATCH_STREAM if kind == "batch" else COMMIT_STREAM), TransactionAttempt(txid, attempt_id)

    def _send(self, emits: list[CoordinatorEmit]) -> None:
        if len(self.core.active) != self._times.figures.in_flight or emits:
            self._times.observe([(e.stream, e.attempt.txid) for e in emits], self.core.current_txid,
                                len(self.core.active), time.monotonic())
        if not emits:
            return
        # saved before emitted: a restarted coordinator must not reuse an attempt id
        changes = self._changes()
        saves = self._saves
        if saves is not None and (changes or saves.in_flight):  # behind the saves before it, in order
            saves.submit(lambda: self._write(changes), emits)
            return
        try:
            self._write(changes)
        except LaunchRefusedError as e:
            self._refusal.note(self._component, e)
            return
        self._emit(emits)

    def _emit_saved(self) -> None:
        if self._saves is None or not self._saves.in_flight:
            return
        try:
            emits = self._saves.done()
        except LaunchRefusedError as e:
            self._refusal.note(self._component, e)
            return
        if not self._refusal.refused:
            self._emit(emits)

    def _emit(self, emits: list[CoordinatorEmit]) -> None:
        for emit in emits:
            if emit.stream == SUCCESS_STREAM:
                if self._stalls is not None:
                    self._stalls.committed(emit.attempt.txid)
                self.collector.emit([emit.attempt], stream=SUCCESS_STREAM)
            elif emit.stream == BATCH_STREAM:
                self.collector.emit([emit.attempt, self._causes.pop(emit.attempt.txid, None)],
                                    msg_id=("batch", emit.attempt.txid, emit.attempt.attempt_id), stream=BATCH_STREAM)
            else:
                self.collector.emit([emit.attempt], msg_id=("commit", emit.attempt.txid, emit.attempt.attempt_id),
                                    stream=emit.stream)

    def _write(self, changes: list[Put | Delete]) -> None:
        if changes:
            for state in self._states:
                state.write(changes)

    def _changes(self) -> list[Put | Delete]:
        """What the durable part changed since the last save, as one write (marked saved)."""
        snapshot = self.core.snapshot()
        if snapshot == self._saved:
            return []
        # One write a state (one round trip to the master), its keys applied in this order: the
        # current txid first: a commit moves it past a txid whose attempt id it drops, and a
        # store stopped between the two keys must not leave that txid current without its
        # attempt id (its replay would reuse attempt 0); the other way round leaves a stale
        # attempt id of a txid behind the current one, which restore ignores. The committed
        # attempt before the current txid: stopped between them, it is not past the current
        # txid, whose $success is then not re-sent at the restart (it is replayed)
        changes: list[Put | Delete] = []
        if snapshot.last_committed != self._saved.last_committed:
            changes.append(Put(LAST_COMMITTED, snapshot.last_committed))
        if snapshot.current_txid != self._saved.current_txid:
            changes.append(Put(CURRENT_TX, snapshot.current_txid))
        if snapshot.attempt_ids != self._saved.attempt_ids:
            changes.append(Put(CURRENT_ATTEMPTS, dict(snapshot.attempt_ids)))
        self._saved = snapshot
        return changes


class TridentSpoutCoordinator(BasicBolt):
    """The spout's coordinator bolt ``$spoutcoord-<spout>`` (one task; Storm's
    ``TridentSpoutCoordinator``).

    On the master's ``$batch`` it asks the spout's `BatchCoordinator` for the batch's metadata
    (given the previous txid's, and this txid's own if it ran before: a replay), stores it in
    the spout's transactional state under ``meta/<txid>`` and emits ``$batch`` ``[tx,
    metadata, cause]`` anchored to the input, to every task of the spout executor bolt. On
    ``$success`` it tells the coordinator and forgets the metadata of older txids.
    """

    def __init__(self, txid_key: str, spout: ITridentSpout) -> None:
        self.txid_key = check_name(txid_key, "name (a spout's txid)")
        self.spout = spout

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``$batch`` with ``Fields("tx", "metadata", "cause")`` (the master's cause)."""
        declarer.declare_stream(BATCH_STREAM, Fields("tx", "metadata", "cause"))

    def get_component_configuration(self) -> dict[str, Any] | None:
        """One task at most."""
        return {Config.TOPOLOGY_MAX_TASK_PARALLELISM: 1}

    def prepare(self, conf: dict, context: Any) -> None:
        """Make the spout's coordinator and open its transactional state."""
        super().prepare(conf, context)
        self.coordinator = self.spout.get_coordinator(self.txid_key, conf, context)
        self.state = transactional_state(context, self.txid_key)
        self._meta: dict[str, bytes] | None = None
        self._stale: list[Delete] = []  # metadata a $success made stale: deleted with the next batch's put
        self._component = context.get_this_component_id()
        self._refusal = _Refusal()

    def execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        """``$batch``: initialize the transaction; ``$success``: the batch committed. Once the
        master refused this launch the input fails (its batch is replayed where the topology
        runs, if it does), quietly."""
        if self._refusal.refused:
            raise FailedException(f"{self._component}: the master no longer runs this worker launch")
        try:
            self._execute(tup, collector)
        except LaunchRefusedError as e:
            self._refusal.note(self._component, e)
            raise FailedException(f"{self._component}: the master no longer runs this worker launch") from None

    def _metas(self) -> dict[str, bytes]:
        # This task is its spout's only writer of meta/ (one task; a replaced launch is refused),
        # so the state is read once, and then mirrored as it is written: a batch costs one write
        # to the master and no read (on the process host each was a round trip the loop waited
        # for; the stale keys a $success leaves go with the next batch's put). Kept pickled, so that what the coordinator gets is a copy, as from the state.
        if self._meta is None:
            self._meta = {k: cloudpickle.dumps(self.state.get(k)) for k in self.state.list(META_PREFIX)}
        return self._meta

    def _execute(self, tup: Tuple, collector: BasicOutputCollector) -> None:
        attempt = tup.values[0]
        metas = self._metas()
        key = _meta_key(attempt.txid)
        earlier = sorted(k for k in metas if k < key)
        if tup.source_stream == SUCCESS_STREAM:
            # their deletes wait for the next batch's put: a worker dying first leaves them, and
            # the next $success after its restart finds them again
            for old in earlier:
                self._stale.append(Delete(old))
                del metas[old]
            self.coordinator.success(attempt.txid)
            return
        previous = pickle.loads(metas[earlier[-1]]) if earlier else None
        own = metas.get(key)
        metadata = self.coordinator.initialize_transaction(attempt.txid, previous,
                                                           None if own is None else pickle.loads(own))
        self.state.write([*self._stale, Put(key, metadata)])
        self._stale = []
        metas[key] = cloudpickle.dumps(metadata)
        collector.emit([attempt, metadata, tup.values[1]], stream=BATCH_STREAM)

    def cleanup(self) -> None:
        """Close the spout's coordinator."""
        self.coordinator.close()


class _EmitterCollector(TridentCollector):
    """What an `Emitter` emits through: one batch's tuples onto the spout's stream, kept until
    the emitter returns and then handed on in one call (`flush`): one Python call per tuple,
    not one per layer of outputs. A tuple of the wrong width is refused at its ``emit``."""

    def __init__(self, output: BatchOutput, batch: BatchInfo, stream: str, width: int) -> None:
        self._output = output
        self._batch = batch
        self._stream = stream
        self._width = width
        self.rows: list[list] = []

    def emit(self, values: list) -> None:
        """Emit one tuple of the batch."""
        row = list(values)
        if len(row) != self._width:
            self._output.emit(self._batch, self._stream, row)  # its error when the width is wrong
            return
        self.rows.append(row)

    def emit_many(self, rows: list[list]) -> None:
        """Emit each of ``rows`` (kept as they are: made for this), in order."""
        width = self._width
        if all(len(row) == width for row in rows):
            self.rows.extend(rows)
            return
        for row in rows:
            self.emit(row)

    def flush(self) -> None:
        """Hand on what was emitted, in order."""
        rows, self.rows = self.rows, []
        if rows:
            self._output.emit_many(self._batch, self._stream, rows)

    def report_error(self, error: BaseException) -> None:
        """Report ``error`` without failing the batch."""
        self._output.report_error(error)


class SpoutEmitterBody(BatchBody):
    """The body of a spout executor bolt (Storm's ``TridentSpoutExecutor``): on the spout
    coordinator's ``$batch`` ``[metadata, cause]`` it has the spout's `Emitter` emit the batch
    onto ``stream`` (first, if ``cause`` says why the attempt before failed and the emitter has
    ``failed_with(txid, cause)``, it is told); the executor then finishes the batch at once.
    ``$success`` reaches the emitter's ``success``.

    Args:
        spout: the Trident spout.
        stream: the data stream (``s<N>``) the spout's tuples go on.
        txid_key: the spout's txid key given to ``get_emitter`` (None: the bolt's component id).
    """

    def __init__(self, spout: ITridentSpout, stream: str, txid_key: str | None = None) -> None:
        self.spout = spout
        self.stream = stream
        self.txid_key = txid_key

    def prepare(self, conf: dict, context: Any, output: BatchOutput) -> None:
        """Make the emitter."""
        self._output = output
        self._component = context.get_this_component_id()
        key = self.txid_key if self.txid_key is not None else self._component
        self.emitter = self.spout.get_emitter(key, conf, context)
        self._refusal = _Refusal()
        # another width goes out through the output's emit, which emits it or raises its error
        self._width = len(self.spout.get_output_fields())
        self._dead_letters = BatchDeadLetters()

    def init_batch(self, batch: BatchInfo) -> None:
        """Nothing to set up: the whole batch is emitted in `execute`."""

    def execute(self, batch: BatchInfo, stream: str, values: list) -> None:
        """Emit the batch whose metadata the spout coordinator sent."""
        if stream != BATCH_STREAM:
            raise ValueError(f"the spout executor of stream {self.stream!r} takes only the spout coordinator's "
                             f"{BATCH_STREAM}, got a tuple on {stream!r}")
        collector = _EmitterCollector(self._output, batch, self.stream, self._width)
        failed = getattr(self.emitter, "failed_with", None)
        if values[1] is not None and failed is not None:  # a replay, and why its attempt before failed
            failed(batch.attempt.txid, FailureCause.from_wire(values[1]))
        # the records the emitter gives up in this attempt: counted once its txid commits
        counts: DeadLetterCounts | None = getattr(self.emitter, "dead_letter_counts", None)
        before = counts.by_cause() if counts is not None else {}
        try:
            self.emitter.emit_batch(batch.attempt, values[0], collector)
        except LaunchRefusedError as e:
            self._refused(e)
        finally:  # what was emitted before a failure goes out as it did (the batch fails anyway)
            collector.flush()
            if counts is not None:
                self._dead_letters.attempted(batch.attempt.txid, given_up_since(before, counts.by_cause()))

    def _refused(self, error: LaunchRefusedError) -> NoReturn:
        """A partitioned spout's emitter reads and writes its partitions' metadata in the
        transactional state, which the master refuses to a worker launch it no longer runs (the
        topology killed or rebalanced while a batch was here): said once, at INFO, as the
        coordinators say it, and the input fails quietly (its batch is replayed where the topology
        runs, if it does). Raised as it was, every kill and rebalance of a topology over Kafka
        logged "execute raised on an input, which fails" with the refusal's traceback."""
        self._refusal.note(self._component, error)
        raise FailedException(f"{self._component}: the master no longer runs this worker launch") from None

    def finish_batch(self, batch: BatchInfo) -> None:
        """Nothing left: the executor sends the counts."""

    def get_component_configuration(self) -> dict[str, Any] | None:
        """The spout's (Storm gives the spout executor bolt the spout's configuration)."""
        return self.spout.get_component_configuration()

    def success(self, attempt: TransactionAttempt) -> None:
        """The batch committed: tell the emitter, and count the records it gave up in it.

        A refusal is said (once) and goes no further: the executor runs ``success`` outside the
        batch's handling of a `FailedException` (a ``$success`` is the master's notice, sent
        unanchored: there is no batch to fail), so raised here it reached the engine, which
        reported "execute raised on an input, which fails" with its traceback; the emitter's
        clean-up is left to the launch that runs the topology now, as the spout coordinator's."""
        try:
            self.emitter.success(attempt)
        except LaunchRefusedError as e:
            self._refusal.note(self._component, e)
        self._dead_letters.committed(attempt.txid)

    def component_statistics(self) -> dict[tuple[str, str, str], float]:
        """The records the emitter gave up in the batches committed (`BatchDeadLetters`), as the
        task's ``dead_lettered`` statistic: what every live view shows of a spout's. None before
        the task is prepared (a heartbeat may read it first)."""
        dead: BatchDeadLetters | None = getattr(self, "_dead_letters", None)
        return dead.figures() if dead is not None else {}

    def cleanup(self) -> None:
        """Close the emitter."""
        self.emitter.close()
