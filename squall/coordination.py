"""Storm's ``org.apache.storm.coordination``: `CoordinatedBolt`, the batch bolts (`IBatchBolt`,
`BaseBatchBolt`, `BatchOutputCollector`, `BatchBoltExecutor`) and `FinishedCallback`, on which
`squall.drpc.LinearDRPCTopologyBuilder` builds (docs/drpc.md, "Linear DRPC topologies").

A `CoordinatedBolt` wraps a bolt and tells it when it has received every tuple of a request
(the first value of every tuple is the request's id). Each task of the bolt before it counts the
tuples it emitted to each task of this bolt for an id and, once itself finished with that id,
sends each task the count on the direct stream `COORDINATED_STREAM_ID` (``["id", "count"]``).
A task is finished with an id when it has the reports of every task before it (one, with
`SourceArgs.single`), has received and acked as many tuples as they reported, and, when it has
an `IdStreamSpec`, has received the id on that stream. Then it calls the wrapped bolt's
`FinishedCallback.finished_id`, reports its own counts downstream, and acks the coordination
tuples it held. A failed tuple fails them, so the request's tree fails at once.

`BatchBoltExecutor` runs an `IBatchBolt`: a fresh copy of the bolt per id (``prepare`` with the
id, ``execute`` per tuple, ``finish_batch`` when the id is finished).

squall's differences from Storm's source, each where Storm's would crash or hang a worker: an
exception a `finished_id` (``finish_batch``) raises fails the request's held tuples and is
reported, as `FailedException` is in Storm; an exception from the wrapped bolt's ``execute``
fails the request's held tuples before it goes on to fail the input (squall fails an input
whose ``execute`` raised, where Storm's worker dies); a tick tuple goes to the wrapped bolt
untracked; an ack made after ``execute`` returned (from a thread of the bolt's) may finish an
id, where Storm raises ``IllegalStateException``; a failed id's batch is dropped at once
(`TimeoutCallback.timeout_id`), where Storm's stays open. Ids not finished within
``topology.message.timeout.secs`` are dropped (Storm's ``TimeCacheMap``: `TimeoutCallback`)
between that timeout and 1.5 times it, by a timer of the engine's on the task's own thread
(`CoordinatedBolt.squall_timers`; Storm's map has a cleaner thread), whether or not another
tuple comes; the tuples it held for the id fail then (a `TIMEOUT`), so the request fails at
once, where Storm's leave them to the spout's own timeout.
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any

from ._collectors import BasicOutputCollector, OutputCollector, OutputFieldsDeclarer
from ._components import BasicBolt, Bolt, _Component
from ._config import Config, conf_value
from ._errors import FailedException, ReportedFailedException
from ._failure import EXCEPTION, EXPLICIT, TIMEOUT, FailureCause, fail_for
from ._fields import Fields, GlobalStreamId
from ._system import DEFAULT_STREAM
from ._tuple import Tuple, is_tick_tuple
from .engine.rotating_map import TimeCacheMap

log = logging.getLogger("squall.coordination")

__all__ = ["COORDINATED_STREAM_ID", "BaseBatchBolt", "BasicBoltExecutor", "BatchBoltExecutor",
           "BatchOutputCollector", "CoordinatedBolt", "FinishedCallback", "IBatchBolt", "IdStreamSpec",
           "SourceArgs", "TimeoutCallback"]

COORDINATED_STREAM_ID = "squall.coordination.CoordinatedBolt/coord-stream"
"""The direct stream of the tuple counts (Storm's ``Constants.COORDINATED_STREAM_ID``, its
class name followed by ``/coord-stream``): fields ``["id", "count"]``."""


class FinishedCallback:
    """A bolt a `CoordinatedBolt` wraps that wants to hear when an id is finished."""

    def finished_id(self, id: Any) -> None:
        """Every tuple of request ``id`` has been received and acked (Storm's ``finishedId``).
        Raising fails the request (`FailedException`, as in Storm, or any other exception,
        which is also reported)."""
        raise NotImplementedError


class TimeoutCallback:
    """A bolt a `CoordinatedBolt` wraps that wants to hear when an id it tracked was dropped
    unfinished after ``topology.message.timeout.secs``."""

    def timeout_id(self, id: Any) -> None:
        """Request ``id`` was not finished in time (Storm's ``timeoutId``)."""
        raise NotImplementedError


class SourceArgs:
    """How many count reports a `CoordinatedBolt` waits for from one source component:
    `single` (one, whichever task sent it) or `all` (one from each of its tasks)."""

    __slots__ = ("single_count",)

    def __init__(self, single_count: bool) -> None:
        self.single_count = single_count

    @staticmethod
    def single() -> SourceArgs:
        return SourceArgs(True)

    @staticmethod
    def all() -> SourceArgs:
        return SourceArgs(False)

    def __getstate__(self) -> bool:
        return self.single_count

    def __setstate__(self, state: bool) -> None:
        self.single_count = state

    def __repr__(self) -> str:
        return f"<Single: {self.single_count}>"


class IdStreamSpec:
    """The stream whose tuples tell a `CoordinatedBolt` that an id exists (Storm's
    ``IdStreamSpec.makeDetectSpec``): until that id arrives, the id is not finished."""

    __slots__ = ("id",)

    def __init__(self, component: str, stream: str) -> None:
        self.id = GlobalStreamId(component, stream)

    @staticmethod
    def make_detect_spec(component: str, stream: str) -> IdStreamSpec:
        return IdStreamSpec(component, stream)

    def get_global_stream_id(self) -> GlobalStreamId:
        return self.id

    def __getstate__(self) -> tuple[str, str]:
        return (self.id.component_id, self.id.stream_id)

    def __setstate__(self, state: tuple[str, str]) -> None:
        self.id = GlobalStreamId(*state)


class _TrackingInfo:
    __slots__ = ("ack_tuples", "expected_tuple_count", "failed", "finished", "received_id", "received_tuples",
                 "report_count", "task_emitted_tuples")

    def __init__(self) -> None:
        self.report_count = 0
        self.expected_tuple_count = 0
        self.received_tuples = 0
        self.failed = False
        self.task_emitted_tuples: dict[int, int] = {}
        self.received_id = False
        self.finished = False
        self.ack_tuples: list[Tuple] = []

    def __repr__(self) -> str:
        return (f"reportCount: {self.report_count}, expectedTupleCount: {self.expected_tuple_count}, "
                f"receivedTuples: {self.received_tuples}, failed: {self.failed}, {self.task_emitted_tuples}")


_REGULAR, _ID, _COORD = "regular", "id", "coord"


class CoordinatedBolt(Bolt):
    """Wraps ``delegate`` (a `Bolt`, or a `BasicBolt`, run by `BasicBoltExecutor`) and tracks
    each request id's tuples across tasks (Storm's ``CoordinatedBolt``; see the module docstring).

    ``source_args``: source component id -> `SourceArgs`, the components whose counts this bolt
    waits for (none: every id is finished as soon as a tuple of it is acked, as the first bolt of
    a linear DRPC topology's is). ``id_stream_spec``: the stream that announces each id (the last
    bolt's, when it is a `FinishedCallback`)."""

    def __init__(self, delegate: Any, source_args: dict[str, SourceArgs] | None = None,
                 id_stream_spec: IdStreamSpec | None = None) -> None:
        if isinstance(delegate, BasicBolt):
            delegate = BasicBoltExecutor(delegate)
        if not isinstance(delegate, Bolt):
            raise TypeError(f"CoordinatedBolt wraps a Bolt or a BasicBolt, got {type(delegate).__name__}")
        self.source_args: dict[str, SourceArgs] = dict(source_args or {})
        self.delegate: Any = delegate  # a Bolt, maybe a FinishedCallback or TimeoutCallback too
        self.id_stream_spec = id_stream_spec

    # (prepare's state is per task: a fresh copy is prepared on each)
    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self._lock = threading.RLock()  # Storm's synchronized (tracked)
        timeout = float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
        self._tracked = TimeCacheMap(timeout, self._timed_out)
        self._count_out_tasks: list[int] = []
        for component in context.get_this_targets().get(COORDINATED_STREAM_ID, {}):
            self._count_out_tasks += context.get_component_tasks(component)
        self._num_source_reports = sum(1 if args.single_count else len(context.get_component_tasks(source))
                                       for source, args in self.source_args.items())
        self.delegate.prepare(conf, context, _CoordinatedOutputCollector(self, collector))

    def squall_timers(self, clock: Any) -> list[tuple[float, Any]]:
        """Called by the bolt executor once this task is prepared, before its first input: take
        the engine's ``clock`` (simulated in tests) for the ids' expiry and return its timer,
        every half message timeout (the map's rotation), with the wrapped bolt's own timers."""
        with self._lock:
            self._tracked.use_clock(clock.now)
        own = getattr(self.delegate, "squall_timers", None)
        return [(self._tracked.period, self.expire_due), *(own(clock) if own is not None else [])]

    def expire_due(self) -> None:
        """Drop the ids not finished within the message timeout (`TimeoutCallback`): the engine's
        timer calls it, and so does each input."""
        with self._lock:
            self._tracked.expire_due()

    def _timed_out(self, id_: Any, track: _TrackingInfo) -> None:
        """An id expired unfinished (under the lock: expire_due runs inside it): the tuples held
        for it fail, and a `TimeoutCallback` delegate drops its batch."""
        track.failed = True
        if track.finished:
            return
        cause = FailureCause(TIMEOUT)
        for t in track.ack_tuples:
            fail_for(self.collector, t, cause)
        track.ack_tuples = []
        if isinstance(self.delegate, TimeoutCallback):
            self.delegate.timeout_id(id_)

    def _tuple_type(self, tup: Tuple) -> str:
        spec = self.id_stream_spec
        if spec is not None and tup.source_component == spec.id.component_id and tup.source_stream == spec.id.stream_id:
            return _ID
        if self.source_args and tup.source_stream == COORDINATED_STREAM_ID:
            return _COORD
        return _REGULAR

    def _check_finish_id(self, tup: Tuple, kind: str, cause: FailureCause | None = None) -> bool:
        """Storm's ``checkFinishId``: finish or fail ``tup``'s id if it is due; True if it failed.
        ``cause``: why the id failed, if a tuple of it just did (passed on to the spout)."""
        id_ = tup.values[0]
        failed = False
        collector = self.collector
        with self._lock:
            track = self._tracked.get(id_)
            if track is None:
                if kind != _REGULAR:
                    collector.fail(tup)
                return False
            delayed = False
            if (self.id_stream_spec is None and kind == _COORD) or (self.id_stream_spec is not None and kind == _ID):
                track.ack_tuples.append(tup)
                delayed = True
            if track.failed:
                failed = True
                for t in track.ack_tuples:
                    fail_for(collector, t, cause)
                self._drop(id_, track)
            elif track.received_id and (not self.source_args or (
                    track.report_count == self._num_source_reports
                    and track.expected_tuple_count == track.received_tuples)):
                if isinstance(self.delegate, FinishedCallback):
                    try:
                        self.delegate.finished_id(id_)
                    except Exception as e:  # noqa: BLE001 (the batch fails, whatever finish_batch raised)
                        self._finish_failed(tup, kind, delayed, track, e)
                        return True
                for task in self._count_out_tasks:
                    collector.emit_direct(task, [id_, track.task_emitted_tuples.get(task, 0)], tup,
                                          COORDINATED_STREAM_ID)
                for t in track.ack_tuples:
                    collector.ack(t)
                track.finished = True
                self._tracked.remove(id_)
            if not delayed and kind != _REGULAR:
                if track.failed:
                    fail_for(collector, tup, cause)
                else:
                    collector.ack(tup)
        return failed

    def _finish_failed(self, tup: Tuple, kind: str, delayed: bool, track: _TrackingInfo, e: Exception) -> None:
        """``finished_id`` raised: the id's held tuples fail (Storm's catch of `FailedException`;
        any other exception is also reported, where Storm's worker dies)."""
        collector = self.collector
        component, task = self.context.get_this_component_id(), self.context.get_this_task_id()
        explicit = isinstance(e, FailedException)
        if not explicit or isinstance(e, ReportedFailedException):
            collector.report_error(e)  # which logs it, with its traceback: not logged here too
        else:
            log.error("Failed to finish batch %r in [%s] task %s: %s: %s", tup.values[0], component, task,
                      type(e).__name__, e)
        cause = FailureCause.of_exception(EXPLICIT if explicit else EXCEPTION, component, task, e)
        track.failed = True
        for t in track.ack_tuples:
            fail_for(collector, t, cause)
        if not delayed and kind != _REGULAR:
            fail_for(collector, tup, cause)
        self._drop(tup.values[0], track)

    def execute(self, tup: Tuple) -> None:
        """Count, track and pass on ``tup`` (Storm's ``execute``)."""
        if is_tick_tuple(tup):
            self.delegate.execute(tup)
            return
        id_ = tup.values[0]
        kind = self._tuple_type(tup)
        with self._lock:
            self._tracked.expire_due()  # (the engine's timer does too; this serves a bolt run without it)
            track = self._tracked.get(id_)
            if track is None:
                track = _TrackingInfo()
                if self.id_stream_spec is None:
                    track.received_id = True
                self._tracked.put(id_, track)
        if kind == _ID:
            with self._lock:
                track.received_id = True
            self._check_finish_id(tup, kind)
        elif kind == _COORD:
            count = tup.values[1]
            with self._lock:
                track.report_count += 1
                track.expected_tuple_count += count
            self._check_finish_id(tup, kind)
        else:
            with self._lock:
                try:
                    self.delegate.execute(tup)
                except Exception as e:
                    # squall fails an input whose execute raised (Storm's worker dies): the
                    # request's held tuples fail with it, at once
                    self._fail_id(id_, FailureCause.of_exception(
                        EXCEPTION, self.context.get_this_component_id(), self.context.get_this_task_id(), e))
                    raise

    def _fail_id(self, id_: Any, cause: FailureCause) -> None:
        track = self._tracked.get(id_)
        if track is not None:
            track.failed = True
            for t in track.ack_tuples:
                fail_for(self.collector, t, cause)
            self._drop(id_, track)

    def _drop(self, id_: Any, track: _TrackingInfo) -> None:
        """Forget failed ``id_``; a `TimeoutCallback` delegate drops its batch (Storm's keeps it
        until its id's next tuples time out, if any come)."""
        self._tracked.remove(id_)
        if not track.finished and isinstance(self.delegate, TimeoutCallback):
            self.delegate.timeout_id(id_)

    def cleanup(self) -> None:
        self.delegate.cleanup()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.delegate.declare_output_fields(declarer)
        declarer.declare_stream(COORDINATED_STREAM_ID, Fields(["id", "count"]), direct=True)

    def get_component_configuration(self) -> dict[str, Any] | None:
        return self.delegate.get_component_configuration()




class _CoordinatedOutputCollector(OutputCollector):
    """The collector a `CoordinatedBolt` gives its delegate (Storm's ``CoordinatedOutputCollector``):
    counts each id's tuples per target task, and finishes or fails the id as its tuples are acked
    or failed."""

    def __init__(self, bolt: CoordinatedBolt, delegate: OutputCollector) -> None:
        self._bolt = bolt
        self._delegate = delegate

    def emit(self, values: list, anchors: Tuple | list[Tuple] | None = None,
             stream: str = DEFAULT_STREAM) -> list[int]:
        tasks = self._delegate.emit(values, anchors, stream)
        self._update_task_counts(values[0], tasks)
        return tasks

    def emit_direct(self, task_id: int, values: list, anchors: Tuple | list[Tuple] | None = None,
                    stream: str = DEFAULT_STREAM) -> None:
        self._update_task_counts(values[0], (task_id,))
        self._delegate.emit_direct(task_id, values, anchors, stream)

    def ack(self, tup: Tuple) -> None:
        bolt = self._bolt
        if is_tick_tuple(tup):
            self._delegate.ack(tup)
            return
        with bolt._lock:
            track = bolt._tracked.get(tup.values[0])
            if track is not None:
                track.received_tuples += 1
        if bolt._check_finish_id(tup, _REGULAR):
            self._delegate.fail(tup)
        else:
            self._delegate.ack(tup)

    def fail(self, tup: Tuple) -> None:
        self.fail_with(tup, None)

    def fail_with(self, tup: Tuple, cause: FailureCause | None) -> None:
        """`fail`, telling the spout why (squall's `squall.FailureCause`)."""
        bolt = self._bolt
        if not is_tick_tuple(tup):
            with bolt._lock:
                track = bolt._tracked.get(tup.values[0])
                if track is not None:
                    track.failed = True
            bolt._check_finish_id(tup, _REGULAR, cause)
        fail_for(self._delegate, tup, cause)

    def reset_timeout(self, tup: Tuple) -> None:
        self._delegate.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        self._delegate.report_error(error)

    def _update_task_counts(self, id_: Any, tasks: Any) -> None:
        bolt = self._bolt
        with bolt._lock:
            track = bolt._tracked.get(id_)
            if track is not None:
                counts = track.task_emitted_tuples
                for task in tasks:
                    counts[task] = counts.get(task, 0) + 1


class BasicBoltExecutor(Bolt):
    """A `BasicBolt` run as a `Bolt` (Storm's ``BasicBoltExecutor``): emits anchored to the
    input, the input acked after ``execute``, failed on `FailedException`."""

    def __init__(self, bolt: BasicBolt) -> None:
        self.bolt = bolt

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self._basic = _BasicCollector(collector)
        self.bolt.prepare(conf, context)

    def execute(self, tup: Tuple) -> None:
        self._basic.input = tup
        try:
            self.bolt.execute(tup, self._basic)
        except FailedException as e:
            if isinstance(e, ReportedFailedException):
                self.collector.report_error(e)
            fail_for(self.collector, tup, FailureCause.of_exception(
                EXPLICIT, self.context.get_this_component_id(), self.context.get_this_task_id(), e))
            return
        self.collector.ack(tup)

    def cleanup(self) -> None:
        self.bolt.cleanup()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.bolt.declare_output_fields(declarer)

    def get_component_configuration(self) -> dict[str, Any] | None:
        return self.bolt.get_component_configuration()


class _BasicCollector(BasicOutputCollector):
    def __init__(self, out: OutputCollector) -> None:
        self._out = out
        self.input: Tuple | None = None

    def emit(self, values: list, stream: str = DEFAULT_STREAM) -> list[int]:
        return self._out.emit(values, self.input, stream)

    def emit_direct(self, task_id: int, values: list, stream: str = DEFAULT_STREAM) -> None:
        self._out.emit_direct(task_id, values, self.input, stream)

    def reset_timeout(self, tup: Tuple | None = None) -> None:
        self._out.reset_timeout(self.input if tup is None else tup)  # type: ignore[arg-type]

    def report_error(self, error: BaseException | str) -> None:
        self._out.report_error(error)


class BatchOutputCollector:
    """What an `IBatchBolt` emits through (Storm's ``BatchOutputCollector``). Its emits are
    unanchored, as Storm's: the request's tree is held open by the coordination tuples."""

    def __init__(self, collector: OutputCollector) -> None:
        self._collector = collector

    def emit(self, values: list, stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` on ``stream``; returns the task ids it went to."""
        return self._collector.emit(values, None, stream)

    def emit_direct(self, task_id: int, values: list, stream: str = DEFAULT_STREAM) -> None:
        """Emit to one task of a component subscribed to ``stream`` with direct grouping."""
        self._collector.emit_direct(task_id, values, None, stream)

    def flush(self) -> None:
        """Nothing to flush: squall sends emits as they are made."""

    def report_error(self, error: BaseException | str) -> None:
        """Record an error for this task (the topology's errors); processing goes on."""
        self._collector.report_error(error)

    def ack(self, tup: Tuple) -> None:
        self._collector.ack(tup)

    def fail(self, tup: Tuple) -> None:
        self._collector.fail(tup)


class IBatchBolt(_Component):
    """A bolt that sees one request's (batch's) tuples and then hears that the batch is complete
    (Storm's ``IBatchBolt``). A fresh copy of the bolt, as given, serves each id: state kept on
    ``self`` is the batch's."""

    def prepare(self, conf: dict, context: Any, collector: BatchOutputCollector, id: Any) -> None:
        """Called once per batch, before its first tuple, with the batch's ``id``."""

    def execute(self, tup: Tuple) -> None:
        """One tuple of the batch. Raise `FailedException` to fail it (and the request)."""

    def finish_batch(self) -> None:
        """Every tuple of the batch has been executed (Storm's ``finishBatch``): emit results."""


class BaseBatchBolt(IBatchBolt):
    """The base class of batch bolts (Storm's ``BaseBatchBolt``): subclass it and define
    ``prepare``, ``execute``, ``finish_batch`` and ``declare_output_fields``."""


class BatchBoltExecutor(Bolt, FinishedCallback, TimeoutCallback):
    """Runs an `IBatchBolt` as a `Bolt` (Storm's ``BatchBoltExecutor``): a copy of ``bolt`` per
    id, ``finish_batch`` on `finished_id`, dropped on `timeout_id`. A `FailedException` from
    ``execute`` fails the tuple; an id's tuples are acked after ``execute``."""

    def __init__(self, bolt: IBatchBolt) -> None:
        self.bolt = bolt

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        super().prepare(conf, context, collector)
        self._batch_collector = BatchOutputCollector(collector)
        self._open: dict[Any, IBatchBolt] = {}

    def execute(self, tup: Tuple) -> None:
        bolt = self._batch_bolt(tup.values[0])
        try:
            bolt.execute(tup)
        except FailedException as e:
            if isinstance(e, ReportedFailedException):
                self.collector.report_error(e)  # which logs it: not logged here too
            else:
                log.error("Failed to process tuple in batch: %s", e)
            fail_for(self.collector, tup, FailureCause.of_exception(
                EXPLICIT, self.context.get_this_component_id(), self.context.get_this_task_id(), e))
            return
        self.collector.ack(tup)

    def finished_id(self, id: Any) -> None:
        bolt = self._batch_bolt(id)
        self._open.pop(id, None)
        bolt.finish_batch()

    def timeout_id(self, id: Any) -> None:
        self._open.pop(id, None)

    def cleanup(self) -> None:
        pass

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        copy.deepcopy(self.bolt).declare_output_fields(declarer)

    def get_component_configuration(self) -> dict[str, Any] | None:
        return copy.deepcopy(self.bolt).get_component_configuration()

    def _batch_bolt(self, id_: Any) -> IBatchBolt:
        bolt = self._open.get(id_)
        if bolt is None:
            bolt = copy.deepcopy(self.bolt)
            bolt.prepare(self.conf, self.context, self._batch_collector, id_)
            self._open[id_] = bolt
        return bolt
