"""The bolt every Trident bolt runs in (Storm's ``TridentBoltExecutor``).

The planner builds one :class:`TridentBoltExecutor` per Trident bolt from a
:class:`BoltSpec` (its subscriptions and output streams) and a :class:`BatchBody`
(what runs inside: the fused processors, or the spout's emitter). The executor keeps
the per-batch bookkeeping (``$coord`` counts, ``$commit``, failures); the body only
sees batches.
"""

from __future__ import annotations

import abc
import enum
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._collectors import OutputCollector, OutputFieldsDeclarer
from .._components import Bolt
from .._config import Config, conf_value
from .._errors import FailedException, ReportedFailedException, StoreUnavailableException
from .._failure import EXCEPTION, EXPLICIT, UNAVAILABLE, FailureCause, fail_because, fail_for
from .._fields import Fields
from .._native import pack_rows
from .._tuple import Tuple, is_tick_tuple
from ..engine.routing import wrong_size
from .failures import TridentOperationError

if TYPE_CHECKING:  # coordinator.py imports this module (SpoutEmitterBody is a BatchBody)
    from .coordinator import TransactionAttempt

log = logging.getLogger(__name__)

# the master coordinator's streams, each Fields("tx") (Storm's MasterBatchCoordinator)
BATCH_STREAM = "$batch"
COMMIT_STREAM = "$commit"
SUCCESS_STREAM = "$success"

TX_FIELD = "$tx"
COORD_STREAM_PREFIX = "$coord-"
# a data stream's direct twin: the tuples one input (or one finish) of a batch sends a task,
# packed into one engine tuple, so the engine's emit, ack and delivery are paid per pack
PACK_STREAM_PREFIX = "$pack-"
PACK_FIELD = "$values"
# at most this many tuples in one pack: a huge batch stays many messages, each far below the
# transport's squall.transport.max.message.bytes (a refused one would fail its batch at every replay)
PACK_MAX_TUPLES = 1000
# how often a Trident bolt looks for batches whose trees must have timed out (Storm's 5 s)
TICK_SECS = 5


@dataclass(frozen=True)
class InputSpec:
    """One subscription of a Trident bolt.

    ``stream`` is a data stream ``s<N>`` of an upstream Trident bolt, or ``$batch`` of a
    ``$spoutcoord-<spout>`` bolt; ``fields`` are the operation-visible fields (the
    leading ``$tx`` value excluded); ``batch_group`` the batch group of its batches (None: the
    bolt's `BoltSpec.batch_group`).
    """

    component: str
    stream: str
    fields: Fields
    batch_group: str | None = None


@dataclass(frozen=True)
class BoltSpec:
    """What the planner tells a :class:`TridentBoltExecutor` about its place in the graph.

    ``outputs`` are ``("s<N>", fields)`` pairs, declared as ``["$tx", *fields]``;
    ``committer`` marks a bolt holding a state: it finishes a batch only once the batch's
    ``$commit`` arrived.

    A bolt may hold operations of several batch groups (Storm's: a state's updater and the
    queries of it from another connected part of the graph): each input names its group
    (`InputSpec.batch_group`), ``output_groups`` the group of each output stream not in
    ``batch_group``, and ``commit_groups`` the groups whose batches finish at their commit (None:
    ``batch_group``'s if ``committer``). The defaults are a bolt of one group, ``batch_group``.
    """

    inputs: tuple[InputSpec, ...]
    outputs: tuple[tuple[str, Fields], ...]
    committer: bool
    batch_group: str = "bg0"
    output_groups: tuple[tuple[str, str], ...] = ()
    commit_groups: tuple[str, ...] | None = None

    def input_group(self, spec: InputSpec) -> str:
        """The batch group of input ``spec``."""
        group = getattr(spec, "batch_group", None)  # None also for a spec pickled before groups
        return self.batch_group if group is None else group

    def output_group(self, stream: str) -> str:
        """The batch group of output stream ``stream``."""
        return dict(getattr(self, "output_groups", ()) or ()).get(stream, self.batch_group)

    def committing_groups(self) -> tuple[str, ...]:
        """The groups whose batches this bolt finishes only at their ``$commit``."""
        groups = getattr(self, "commit_groups", None)
        if groups is None:
            return (self.batch_group,) if self.committer else ()
        return tuple(groups)

    def groups(self) -> tuple[str, ...]:
        """Every batch group the bolt takes part in, ``batch_group`` first."""
        out = [self.batch_group]
        for g in (*(self.input_group(i) for i in self.inputs), *(self.output_group(s) for s, _ in self.outputs),
                  *self.committing_groups()):
            if g not in out:
                out.append(g)
        return tuple(out)


@dataclass
class BatchInfo:
    """One attempt of one batch, as one task sees it.

    ``state`` is free room for the body's per-batch state (keyed by processor); it is
    dropped with the batch. ``batch_group`` is the batch group the batch is of (a bolt may hold
    operations of several; Storm's ``BatchInfo.batchGroup``): the body starts and finishes the
    batch in that group's operations only; None: in all of them.
    """

    attempt: TransactionAttempt
    state: dict[Any, Any] = field(default_factory=dict)
    batch_group: str | None = None


class BatchOutput(abc.ABC):
    """What a :class:`BatchBody` emits through; given to it by the executor."""

    @abc.abstractmethod
    def emit(self, batch: BatchInfo, stream: str, values: list) -> None:
        """Emit ``values`` (without the tx) on data stream ``stream`` as part of ``batch``.

        The executor adds the tx value, anchors the tuple to the input being processed
        (or to the tuple that finishes the batch) and counts it per receiving task.
        """

    def emit_many(self, batch: BatchInfo, stream: str, rows: list[list]) -> None:
        """`emit` of each of ``rows`` (lists the caller made for this and does not keep), in order."""
        for values in rows:
            self.emit(batch, stream, values)

    @abc.abstractmethod
    def report_error(self, error: BaseException) -> None:
        """Report an error to the UI/log without failing the batch."""


class BatchBody(abc.ABC):
    """What runs inside a Trident bolt (Storm's ``ITridentBatchBolt`` / ``SubtopologyBolt``).

    Raising :class:`squall.FailedException` from ``init_batch``, ``execute`` or
    ``finish_batch`` fails the batch; it is replayed with the same txid.
    """

    @abc.abstractmethod
    def prepare(self, conf: dict, context: Any, output: BatchOutput) -> None:
        """Called once per task before any batch."""

    @abc.abstractmethod
    def init_batch(self, batch: BatchInfo) -> None:
        """A new batch (or a new attempt of one) starts on this task."""

    @abc.abstractmethod
    def execute(self, batch: BatchInfo, stream: str, values: list) -> None:
        """One data tuple of ``batch`` arrived on input ``stream`` (values without the tx)."""

    def execute_many(self, batch: BatchInfo, stream: str, rows: Sequence[Any]) -> None:
        """`execute` of each of ``rows`` in order: a pack's tuples, each a list (or a tuple,
        off the wire, which it makes a list)."""
        for values in rows:
            self.execute(batch, stream, values if type(values) is list else list(values))

    @abc.abstractmethod
    def finish_batch(self, batch: BatchInfo) -> None:
        """Every tuple of the batch arrived (and, for a committer, its ``$commit``)."""

    def success(self, attempt: TransactionAttempt) -> None:
        """The batch was committed everywhere (its ``$success``); committers and spouts only."""

    def cleanup(self) -> None:
        """Called once when the task stops."""

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Configuration for the bolt (a spout's own, for the spout executor bolt), or None."""
        return None


def master_coordinator_id(batch_group: str = "bg0") -> str:
    """The component id of a batch group's master coordinator spout."""
    return f"$mastercoord-{batch_group}"


def coord_stream(batch_group: str = "bg0") -> str:
    """The direct stream on which a Trident bolt reports its per-task counts of a batch."""
    return COORD_STREAM_PREFIX + batch_group


def pack_stream(stream: str) -> str:
    """The direct stream that carries data stream ``stream``'s tuples packed per receiving task."""
    return PACK_STREAM_PREFIX + stream


def wire(declarer: Any, spec: BoltSpec, upstream_trident_bolts: Any) -> Any:
    """Subscribe a Trident bolt's declarer (`squall.BoltDeclarer`) to the system streams its
    `TridentBoltExecutor` needs; the planner subscribes the data streams ``s<N>`` itself.

    - ``$coord-<group>`` of every upstream Trident bolt in ``upstream_trident_bolts``
      (direct grouping), for each batch group it reads data of: their per-task counts of each
      batch;
    - a committer: ``$commit`` of the master coordinator of each group it commits (all grouping);
    - a spout executor bolt (an input on ``$batch`` of a ``$spoutcoord-<spout>``): that
      ``$batch`` (all grouping) and its group's master coordinator's ``$success`` (all grouping).

    Returns the declarer.
    """
    upstream = set(upstream_trident_bolts)
    coords = sorted({(i.component, spec.input_group(i)) for i in spec.inputs if i.component in upstream})
    # a bolt upstream in no input (a caller's list wider than the inputs): the bolt's own group
    coords += [(c, spec.batch_group) for c in sorted(upstream - {c for c, _ in coords})]
    for component, group in coords:
        declarer.direct_grouping(component, coord_stream(group))
    for i in spec.inputs:
        if i.component in upstream:
            declarer.direct_grouping(i.component, pack_stream(i.stream))
    for group in spec.committing_groups():
        declarer.all_grouping(master_coordinator_id(group), COMMIT_STREAM)
    spout_inputs = sorted({(i.component, spec.input_group(i)) for i in spec.inputs if i.stream == BATCH_STREAM})
    for component, _ in spout_inputs:
        declarer.all_grouping(component, BATCH_STREAM)
    for group in sorted({g for _, g in spout_inputs}):
        declarer.all_grouping(master_coordinator_id(group), SUCCESS_STREAM)
    return declarer


class TupleKind(enum.Enum):
    """What an input of a Trident bolt is to the batch it belongs to."""

    DATA = "data"       # a data tuple (or the spout coordinator's $batch)
    COORD = "coord"     # an upstream task's count of the tuples it sent this task
    COMMIT = "commit"   # the master coordinator's $commit (committers only)


@dataclass
class TrackedBatch:
    """What one task knows of one attempt of one batch (Storm's ``TrackedBatch``)."""

    info: BatchInfo
    commit_received: bool
    touched: float
    reported_tasks: int = 0
    expected_tuples: int = 0
    received_tuples: int = 0
    emitted: dict[int, int] = field(default_factory=dict)  # task -> data tuples sent it
    failed: bool = False
    started: bool = False  # the body's init_batch ran
    held: Any = None  # the input whose ack waits until the batch finishes (Storm's delayedAck)

    @property
    def attempt(self) -> TransactionAttempt:
        """The attempt tracked."""
        return self.info.attempt

    def take_held(self) -> Any:
        """The held input, now released (None if there is none)."""
        held, self.held = self.held, None
        return held


def batch_name(attempt: Any) -> str:
    """``Trident batch txid 3 attempt 1``: how a failure's reason names a batch attempt."""
    return f"Trident batch txid {attempt.txid} attempt {attempt.attempt_id}"


@dataclass(frozen=True)
class Decision:
    """What to do with an input after the tracker saw it.

    ``finish``: the batch is complete, finish it with this input as the finishing tuple;
    ``ack_input``/``fail_input``: answer the input now (neither: it is held);
    ``fail_held``: a previously held input to fail now; ``reason``: why the batch fails, where
    the tracker knows (what the failures then tell the batch's spout).
    """

    finish: bool = False
    ack_input: bool = False
    fail_input: bool = False
    fail_held: Any = None
    reason: str = ""


_ACK = Decision(ack_input=True)
_FINISH_ACK = Decision(finish=True, ack_input=True)
"""The decisions of nearly every data tuple, made once (a Decision is immutable)."""


class BatchTracker:
    """The per-batch bookkeeping of one task of a Trident bolt, without I/O.

    A batch finishes once every upstream task (``expected_reports`` of them) reported its
    count, exactly that many data tuples arrived (a difference fails the batch) and, for a
    committer, its ``$commit`` arrived. A task with no upstream Trident bolt (the spout
    executor) finishes a batch at its one input. A newer attempt of a txid replaces the older;
    an older one is refused. A batch untouched for longer than ``timeout_secs`` is dropped: its
    tree has timed out at the master coordinator, which replays it.
    """

    def __init__(self, expected_reports: int, committer: bool, timeout_secs: float,
                 batch_group: str | None = None) -> None:
        self.expected_reports = expected_reports
        self.committer = committer
        self.timeout_secs = timeout_secs
        self.batch_group = batch_group  # given to each batch's BatchInfo
        self.batches: dict[int, TrackedBatch] = {}

    def open(self, attempt: TransactionAttempt, now: float) -> tuple[TrackedBatch | None, Any]:
        """The tracked batch for ``attempt``, made if new, and a held input of a replaced older
        attempt to fail (or None). The batch is None if ``attempt`` is older than the one
        tracked: its input must be failed."""
        tracked = self.batches.get(attempt.txid)
        replaced = None
        if tracked is not None:
            if attempt.attempt_id < tracked.attempt.attempt_id:
                return None, None
            if attempt.attempt_id > tracked.attempt.attempt_id:
                replaced = tracked.take_held()
                tracked = None
        if tracked is None:
            tracked = TrackedBatch(BatchInfo(attempt, batch_group=self.batch_group), commit_received=not self.committer,
                                   touched=now)
            self.batches[attempt.txid] = tracked
        tracked.touched = now
        return tracked, replaced

    def data(self, tracked: TrackedBatch, count: int = 1) -> Decision:
        """``count`` data tuples of ``tracked`` arrived, one engine tuple (the body is to execute
        them first, unless this says fail: the batch failed already)."""
        if tracked.failed:
            return Decision(fail_input=True, fail_held=tracked.take_held())
        tracked.received_tuples += count
        if self.expected_reports == 0:
            return _FINISH_ACK
        return _ACK

    def coord(self, tracked: TrackedBatch, count: int, tup: Any) -> Decision:
        """An upstream task reported ``count`` data tuples of ``tracked`` sent to this task."""
        tracked.reported_tasks += 1
        tracked.expected_tuples += count
        return self._check(tracked, tup, TupleKind.COORD)

    def commit(self, tracked: TrackedBatch, tup: Any) -> Decision:
        """The batch's ``$commit`` arrived."""
        tracked.commit_received = True
        return self._check(tracked, tup, TupleKind.COMMIT)

    def _check(self, tracked: TrackedBatch, tup: Any, kind: TupleKind) -> Decision:
        if tracked.failed:
            return Decision(fail_input=True, fail_held=tracked.take_held())
        # A committer holds its $commit until the finish (the commit's tree ends once the state
        # committed). Other bolts hold nothing, unlike Storm's, which holds their first report:
        # a bolt downstream of a committer of its batch group (a stream after a
        # persistent_aggregate's new values) hears from it only after the $commit, which comes
        # once the $batch tree completed, and a held report would keep that tree open for good.
        hold = tracked.held is None and kind is TupleKind.COMMIT
        if hold:
            tracked.held = tup
        if tracked.commit_received and tracked.reported_tasks == self.expected_reports:
            if tracked.received_tuples == tracked.expected_tuples:
                return Decision(finish=True, ack_input=not hold)
            log.warning("Failing batch %s: expected %d tuples but received %d", tracked.attempt,
                        tracked.expected_tuples, tracked.received_tuples)
            return self.fail(tracked, tup, hold, f"{batch_name(tracked.attempt)}: its upstream tasks reported "
                             f"{tracked.expected_tuples} tuples sent to this task, {tracked.received_tuples} arrived")
        return Decision(ack_input=not hold)

    def fail(self, tracked: TrackedBatch, tup: Any, input_held: bool = False, reason: str = "") -> Decision:
        """Fail ``tracked`` at input ``tup`` (for ``reason``, if known): it and the held input
        are failed, and so is every later input of this attempt."""
        tracked.failed = True
        held = tracked.take_held()
        return Decision(fail_input=not input_held, fail_held=held, reason=reason)

    def finished(self, tracked: TrackedBatch) -> Any:
        """``tracked`` finished: forget it; returns the held input, to ack now."""
        self.batches.pop(tracked.attempt.txid, None)
        return tracked.take_held()

    def count_emitted(self, attempt: TransactionAttempt, tasks: list[int]) -> None:
        """Data tuples of ``attempt`` went to ``tasks`` (one each)."""
        tracked = self.batches.get(attempt.txid)
        # the attempt emitted is nearly always the very object tracked: compare it first
        if tracked is None or (tracked.info.attempt is not attempt and tracked.info.attempt != attempt):
            raise _untracked(attempt)
        emitted = tracked.emitted
        for task in tasks:
            emitted[task] = emitted.get(task, 0) + 1

    def count_emitted_per_task(self, attempt: TransactionAttempt, counts: dict[int, int]) -> None:
        """``counts[task]`` data tuples of ``attempt`` went to each task."""
        tracked = self.batches.get(attempt.txid)
        if tracked is None or (tracked.info.attempt is not attempt and tracked.info.attempt != attempt):
            raise _untracked(attempt)
        emitted = tracked.emitted
        for task, n in counts.items():
            emitted[task] = emitted.get(task, 0) + n

    def expire(self, now: float) -> list[Any]:
        """Drop batches untouched for longer than the message timeout; their held inputs, to fail."""
        out = []
        for txid, tracked in list(self.batches.items()):
            if now - tracked.touched > self.timeout_secs:
                del self.batches[txid]
                held = tracked.take_held()
                if held is not None:
                    out.append(held)
        return out


def _untracked(attempt: TransactionAttempt) -> ValueError:
    return ValueError(f"emit for batch {attempt}, which this task does not track now "
                      f"(finished, failed over, or never started)")


class _Output(BatchOutput):
    """The executor's `BatchOutput`: adds the tx, anchors to the input at hand, counts per task."""

    def __init__(self, executor: TridentBoltExecutor, packed: dict[str, Any]) -> None:
        self._executor = executor
        self._packed = packed  # packed stream -> its engine router (its choice, its counts)
        self._packs: dict[tuple[str, int], list[list]] = {}
        self._attempt: Any = None

    def emit(self, batch: BatchInfo, stream: str, values: list) -> None:
        """See `BatchOutput.emit`."""
        if stream in self._packed:
            # the receiver gets its own list, as from a plain emit
            self.emit_many(batch, stream, [list(values)])
            return
        ex = self._executor
        tasks = ex.collector.emit([batch.attempt, *values], anchors=ex._anchor, stream=stream)
        ex._trackers[batch.batch_group].count_emitted(batch.attempt, tasks)

    def emit_many(self, batch: BatchInfo, stream: str, rows: list[list]) -> None:
        """See `BatchOutput.emit_many`. On a packed stream each row waits in its task's pack until
        the body returns (`flush`), to be anchored to the same input; its task is the choice the
        engine's emit would make (the stream's router, on the same values), and the stream's
        counts stay the tuples' (the UI, monitor) while its $pack- twin counts packs."""
        router = self._packed.get(stream)
        if router is None:
            for values in rows:
                self.emit(batch, stream, values)
            return
        attempt = batch.attempt
        if self._attempt is not attempt:
            if self._packs:
                self.flush()
            self._attempt = attempt
        counts: dict[int, int] = {}
        if type(rows) is not list:
            rows = list(rows)
        packed, transferred = 0, 0
        try:
            packed, transferred = pack_rows(rows, attempt, router.choose, router.nfields - 1, self._packs, stream,
                                            counts)
            if packed < len(rows):
                raise wrong_size(router, [attempt, *rows[packed]])
        finally:
            router.emitted += len(rows)
            router.transferred += transferred
            self._executor._trackers[batch.batch_group].count_emitted_per_task(attempt, counts)

    def flush(self) -> None:
        """Send each task its pack of the tuples emitted since the last flush."""
        if not self._packs:
            return
        ex = self._executor
        attempt, packs = self._attempt, self._packs
        self._packs = {}
        emit_direct, anchor = ex.collector.emit_direct, ex._anchor
        for (stream, task), pack in packs.items():
            for start in range(0, len(pack), PACK_MAX_TUPLES):
                part = pack if len(pack) <= PACK_MAX_TUPLES else pack[start:start + PACK_MAX_TUPLES]
                emit_direct(task, [attempt, part], anchors=anchor, stream=pack_stream(stream))

    def drop(self) -> None:
        """Forget what waits to be sent (its batch failed)."""
        self._packs = {}

    def report_error(self, error: BaseException) -> None:
        """See `BatchOutput.report_error`."""
        self._executor.collector.report_error(error)


class TridentBoltExecutor(Bolt):
    """A Trident bolt (Storm's ``TridentBoltExecutor``): runs ``body`` batch by batch.

    It tracks each batch with a `BatchTracker`: a batch finishes (``body.finish_batch``) once
    every upstream task's ``$coord`` count arrived with that many data tuples and, for a
    committer, once the batch's ``$commit`` arrived too. It then sends every task of every
    downstream Trident bolt the count of data tuples it sent that task in the batch, on the
    direct stream ``$coord-<group>``, anchored to the tuple that finished the batch, and acks
    the input it held (a committer: the ``$commit``). A `squall.FailedException` from the body
    fails the batch; the master coordinator replays it with a new attempt id.

    A data stream whose every receiving task is a Trident bolt's is packed: the tuples one call
    of the body sends one task (a spout's batch, a finish's partial aggregates) go as one engine
    tuple on the stream's direct twin ``$pack-<stream>``, anchored to the same input, each task
    chosen by the stream's own grouping; the ``$coord`` counts and the receiver's count are of
    the tuples in the packs. The engine's per-tuple emit, ack and delivery are paid per pack.
    """

    # when a batch was last touched, and whether it is untouched past the message timeout: the
    # engine's clock once it hands it over (`squall_timers`), real time until then (`prepare`)
    _now: Callable[[], float]

    def __init__(self, spec: BoltSpec, body: BatchBody) -> None:
        self.spec = spec
        self.body = body

    @property
    def squall_keeps_task_states(self) -> bool:
        """Whether its tasks keep states by task (a window's store that outlives them: the
        master holds such a bolt to its earlier task count, `squall.state._names.KEEPS_TASK_STATES`)."""
        return bool(getattr(self.body, "squall_keeps_task_states", False))

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Each output stream as ``["$tx", *fields]`` with its direct ``$pack-`` twin
        (``["$tx", "$values"]``), and the direct ``$coord-<group>`` stream of each batch group."""
        for stream, fields in self.spec.outputs:
            declarer.declare_stream(stream, Fields([TX_FIELD, *fields]))
            declarer.declare_stream(pack_stream(stream), Fields([TX_FIELD, PACK_FIELD]), direct=True)
        for group in self.spec.groups():
            declarer.declare_stream(coord_stream(group), Fields(["id", "count"]), direct=True)

    def get_component_configuration(self) -> dict[str, Any] | None:
        """The body's, and ticks every `TICK_SECS` to drop batches whose trees timed out."""
        return {**(self.body.get_component_configuration() or {}), Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: TICK_SECS}

    def component_statistics(self) -> dict[tuple[str, str, str], float]:
        """The figures the body reports of itself (a Trident spout's emitter bolt: the records
        it gave up, `squall.trident.stats.BatchDeadLetters`), read with each heartbeat."""
        report = getattr(self.body, "component_statistics", None)
        return report() if report is not None else {}

    def squall_timers(self, clock: Any) -> list[tuple[float, Any]]:
        """Called by the bolt executor once the task is prepared: take the engine's ``clock``
        (simulated in tests), which times the batches' expiry as it times the message timeouts
        and the ticks that look for it, and hand it to a body that keeps time (a Trident
        window's); no timer."""
        self._now = clock.now
        use_clock = getattr(self.body, "use_clock", None)
        if use_clock is not None:
            use_clock(clock)
        return []

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        """Work out the upstream tasks to hear from and the downstream tasks to report to."""
        super().prepare(conf, context, collector)
        spec = self.spec
        timeout = float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
        this_targets = context.get_this_targets()
        committing = set(spec.committing_groups())
        # per batch group (Storm's CoordCondition each): the upstream tasks to hear from, the
        # downstream tasks to report to, whether a batch waits for its $commit
        self._trackers: dict[str | None, BatchTracker] = {}
        self._coord_targets: dict[str, list[int]] = {}
        self._group_of_stream: dict[str, str] = {}  # an input stream (its $pack- twin, $coord-) -> group
        self._commit_from: dict[str, str] = {}  # a master coordinator -> its group
        for group in spec.groups():
            upstream = {i.component for i in spec.inputs if i.stream != BATCH_STREAM and spec.input_group(i) == group}
            expected = sum(len(context.get_component_tasks(c)) for c in upstream)
            targets = this_targets.get(coord_stream(group), {})
            self._coord_targets[group] = sorted(t for c in targets for t in context.get_component_tasks(c))
            self._trackers[group] = BatchTracker(expected, group in committing, timeout, group)
            self._group_of_stream[coord_stream(group)] = group
            self._commit_from[master_coordinator_id(group)] = group
        for i in spec.inputs:
            group = spec.input_group(i)
            self._group_of_stream[i.stream] = group
            self._group_of_stream[pack_stream(i.stream)] = group
        self.tracker = self._trackers[spec.batch_group]  # the bolt's own group's
        self._anchor: Tuple | None = None
        self._cause: FailureCause | None = None  # why `_answer` fails its tuples, when a FailedException said
        self._now = time.monotonic  # until the engine hands its clock over (`squall_timers`)
        self._output = _Output(self, self._packed_streams())
        self.body.prepare(conf, context, self._output)

    def _packed_streams(self) -> dict[str, Any]:
        # a stream is packed when every task that gets its tuples gets its packs (only Trident
        # bolts unpack; a DRPC stream's return bolt reads plain tuples)
        routers = getattr(self.collector, "routers", None) or {}
        out = {}
        for stream, _ in self.spec.outputs:
            plain, packed = routers.get(stream), routers.get(pack_stream(stream))
            if plain is None or packed is None or plain.silent:
                continue
            if all(packed.direct_targets.get(t) for t in plain.direct_targets):
                out[stream] = plain
        return out

    def execute(self, tup: Tuple) -> None:
        """Route one input to its batch."""
        if is_tick_tuple(tup):
            self._expire()
            return
        stream = tup.source_stream
        if stream == SUCCESS_STREAM:
            self.body.success(tup.values[0])
            self._output.flush()
            self.collector.ack(tup)
            return
        attempt = tup.values[0]
        if stream == COMMIT_STREAM:
            group = self._commit_from.get(tup.source_component, self.spec.batch_group)
        else:
            group = self._group_of_stream.get(stream, self.spec.batch_group)
        tracker = self._trackers[group]
        tracked, replaced = tracker.open(attempt, self._now())
        # who fails (and why) is looked up only when something fails: this runs for every input
        if replaced is not None:
            fail_because(self.collector, replaced, *self._where(), f"Trident batch txid {attempt.txid}: replaced "
                         f"by its attempt {attempt.attempt_id} (the coordinator replays it)")
        if tracked is None:  # an attempt already superseded here: its tree is dead
            fail_because(self.collector, tup, *self._where(), f"{batch_name(attempt)}: a newer attempt of it is "
                         f"under way here")
            return
        try:
            self._anchor = tup
            if not tracked.started and not tracked.failed:
                tracked.started = True
                self.body.init_batch(tracked.info)
            if stream == COMMIT_STREAM and tup.source_component in self._commit_from:
                decision = tracker.commit(tracked, tup)
            elif stream.startswith(COORD_STREAM_PREFIX):
                decision = tracker.coord(tracked, tup.values[1], tup)
            elif stream.startswith(PACK_STREAM_PREFIX):
                pack = tup.values[1]
                decision = tracker.data(tracked, len(pack))
                if not decision.fail_input:
                    self.body.execute_many(tracked.info, stream[len(PACK_STREAM_PREFIX):], pack)
            else:
                decision = tracker.data(tracked)
                if not decision.fail_input:
                    values = tup.values
                    self.body.execute(tracked.info, stream, values[1:] if type(values) is list else list(values[1:]))
            self._output.flush()  # before the input's ack: the packs are anchored to it
            if decision.finish:
                decision = self._finish(tracker, tracked, tup, decision)
        except FailedException as e:
            self._output.drop()
            if isinstance(e, ReportedFailedException):
                self.collector.report_error(e)
            decision = self._failed(tracker, tracked, tup)
            # why, for the spout of the batch (a DRPC caller is told the exception's message) and
            # its master coordinator (a store that is down stalls nothing: `_watch_stall`)
            kind = UNAVAILABLE if isinstance(e, StoreUnavailableException) else EXPLICIT
            self._cause = FailureCause.of_exception(kind, *self._where(), e)
        except BaseException as e:
            self._output.drop()
            if isinstance(e, TridentOperationError):  # an operation's: which batch (its txid only:
                e.at_batch(attempt.txid)  # each attempt's the same text, folded into one counted record)
            # not a FailedException: the engine reports it and fails the input (or crashes the
            # worker under topology.bolt.fail.fast), as a plain bolt's; the batch fails with it,
            # and so does the input it held (a committer's $commit), saying so: failed first,
            # a plain fail's cause would be the one its tree's spout kept, not the exception
            held = tracker.fail(tracked, tup).fail_held
            if held is not None and held is not tup:
                fail_for(self.collector, held, FailureCause.of_exception(EXCEPTION, *self._where(), e))
            raise
        finally:
            self._anchor = None
        self._answer(tup, decision)

    def _finish(self, tracker: BatchTracker, tracked: TrackedBatch, tup: Tuple, decision: Decision) -> Decision:
        self.body.finish_batch(tracked.info)
        self._output.flush()
        group = tracker.batch_group
        assert group is not None  # the executor's trackers each name their group
        coord = coord_stream(group)
        for task in self._coord_targets[group]:
            self.collector.emit_direct(task, [tracked.attempt, tracked.emitted.get(task, 0)],
                                       anchors=tup, stream=coord)
        held = tracker.finished(tracked)
        if held is not None and held is not tup:
            self.collector.ack(held)
            return decision
        if held is tup:
            return Decision(ack_input=True)
        return decision

    def _failed(self, tracker: BatchTracker, tracked: TrackedBatch, tup: Tuple) -> Decision:
        input_held = tracked.held is tup
        decision = tracker.fail(tracked, tup, input_held)
        if input_held:
            return Decision(fail_held=decision.fail_held)
        return decision

    def _answer(self, tup: Tuple, decision: Decision) -> None:
        cause, self._cause = self._cause, None
        if cause is None and decision.reason:
            cause = FailureCause.of_reason(*self._where(), decision.reason)
        fail_with = getattr(self.collector, "fail_with", None)  # the engine's collector has it
        fail = self.collector.fail if cause is None or fail_with is None else (lambda t: fail_with(t, cause))
        if decision.fail_held is not None:
            fail(decision.fail_held)
        if decision.fail_input:
            fail(tup)
        elif decision.ack_input:
            self.collector.ack(tup)

    def _where(self) -> tuple[str, int]:
        """(component, task id): who a failure's cause names."""
        return self.context.get_this_component_id(), self.context.get_this_task_id()

    def _expire(self) -> None:
        now = self._now()
        for tracker in self._trackers.values():
            for held in tracker.expire(now):
                fail_because(self.collector, held, *self._where(), f"{batch_name(held.values[0])}: untouched here "
                             f"for longer than topology.message.timeout.secs ({tracker.timeout_secs:g} s)")

    def cleanup(self) -> None:
        """Clean the body up."""
        self.body.cleanup()
