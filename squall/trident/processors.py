"""What runs inside a Trident bolt (Storm's ``planner/processor`` and ``SubtopologyBolt``).

The planner fuses the operations between two repartitions into one bolt; there each operation is
a *processor*, and `SubtopologyBody` (the bolt's `BatchBody`) runs them per batch: a tuple that
arrives on an input stream goes to the processors reading that stream, what a processor emits
goes straight to its children in the same bolt and, where an edge leaves the bolt, out on that
edge's stream. Between processors a tuple is its list of values, handed on by a direct call to
the child's *receiver* (bound once, when the bolt is prepared); a `TridentTuple` is made only
where an operation is to see one. At the end of a batch every processor finishes in topological
order, so an aggregate's result flows into the operations after it before they finish.

Processors are built when the topology is, pickled into each task and prepared there; whatever
they keep per batch lives in ``BatchInfo.state`` under the processor's index, so a new attempt of
a batch starts clean. The aggregator wrappers below are Storm's ``operation/impl``: they turn
combiners and reducers into the one `BaseAggregator` interface the aggregate processor runs.
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from .._fields import Fields
from .._native import CountingEmit, combine_rows, view_of
from .builtin import Count
from .executor import BatchBody, BatchInfo, BatchOutput
from .failures import operation_failed, shown_record
from .operation import (
    BaseAggregator,
    BaseFilter,
    BaseFunction,
    CombinerAggregator,
    GroupedMultiReducer,
    MultiReducer,
    ReducerAggregator,
    TridentCollector,
    TridentMultiReducerContext,
    TridentOperationContext,
)
from .state.api import CombinerAggStateUpdater, MapCombinerAggStateUpdater, ReducerAggStateUpdater
from .tuple import TridentTuple

# --- how a processor sees its place in the bolt ---------------------------------------------------


def _not_wired(batch: BatchInfo, values: list) -> None:
    raise RuntimeError("a Trident processor emitted before its bolt wired it (emit in prepare?)")


@dataclass
class ProcessorContext:
    """What a processor is told in ``prepare`` (Storm's ``TridentContext``).

    ``parent_fields`` are the fields of each parent in edge order, ``fields`` this node's output
    fields, ``key`` its slot in ``BatchInfo.state``, ``emit(batch, values)`` sends one output
    tuple on (set once every processor of the bolt is prepared, before `Processor.wire`),
    ``state`` is the `State` the node persists into or queries (else None), and
    ``emit_many(batch, rows)`` is ``emit`` of each row (fresh lists), in one call.
    ``operation`` is what an error of the operation calls it (``each(Parse) named 'parse'``,
    `squall.trident.failures.operation_text`; default ``name``).
    """

    name: str
    parent_fields: list[Fields]
    fields: Fields
    key: int
    emit: Callable[[BatchInfo, list], None]
    report_error: Callable[[BaseException], None]
    state: Any = None
    emit_many: Callable[[BatchInfo, list[list]], None] = _not_wired
    operation: str = ""


Receiver = Callable[[BatchInfo, list], None]
"""What takes one tuple (its values) of one parent: ``receive(batch, values)``."""


class Processor:
    """One operation in a bolt; subclasses are Storm's processors."""

    operation = "operation"

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        """Called once per task, parents first."""
        self.tctx = tctx

    def wire(self) -> None:
        """Called once per task after every processor of the bolt was prepared and ``tctx.emit``
        set, children first: bind what the per-tuple path calls."""

    def receiver(self, parent: int) -> Receiver:
        """The callable the bolt hands each tuple of parent number ``parent`` to (after `wire`)."""
        execute = self.execute

        def receive(batch: BatchInfo, values: list) -> None:
            execute(batch, parent, values)

        return receive

    def start_batch(self, batch: BatchInfo) -> None:
        """A batch starts on this task."""

    def execute(self, batch: BatchInfo, parent: int, values: list) -> None:
        """A tuple (its values) of parent number ``parent`` (edge order)."""
        raise NotImplementedError

    def finish_batch(self, batch: BatchInfo) -> None:
        """Every tuple of the batch was executed (parents already finished)."""

    def cleanup(self) -> None:
        """The task stops."""

    def failed(self, error: Exception, values: list | None = None, parent: int = 0, where: str = "",
               given: Sequence[list] = ()) -> NoReturn:
        """Raise ``error``, which escaped this operation on tuple ``values`` of parent number
        ``parent`` (or ``where`` in the batch, on the tuples ``given`` it: their credentials are
        masked where the exception quotes them), as a `squall.trident.failures.TridentOperationError`
        naming the operation and the tuple (one already, or a `FailedException`, as it is)."""
        tctx = self.tctx
        operation_failed(tctx.operation or tctx.name, error,
                         tctx.parent_fields[parent] if values is not None or given else None, values, where, given)

    def _check_width(self, values: list, what: str) -> list:
        if len(values) != len(self.tctx.fields):
            raise ValueError(
                f"{self.tctx.name}: {what} emitted {len(values)} values {values!r} for the fields "
                f"{self.tctx.fields.to_list()}")
        return values


class _SingleParent(Processor):
    """A processor of one parent: its receiver is its bound ``receive`` (built by `wire`)."""

    def receiver(self, parent: int) -> Receiver:
        return self._receive

    def execute(self, batch: BatchInfo, parent: int, values: list) -> None:
        self._receive(batch, values)

    def _receive(self, batch: BatchInfo, values: list) -> None:
        raise NotImplementedError


class _View(TridentTuple):
    """A `TridentTuple` the bolt makes for an operation from values whose width is right by
    construction (checked where they entered the bolt or were emitted), so it skips the check."""

    __slots__ = ()

    def __init__(self, fields: Fields, values: list) -> None:
        self.values = values
        self._fields = fields


def _indices(fields: Fields, parent: Fields) -> list[int] | None:
    """Positions of ``fields`` in ``parent``, or None when they are all of it in order."""
    if fields == parent:
        return None
    return [parent.index(f) for f in fields]


def _viewer(fields: Fields, idx: list[int] | None) -> Callable[[list], TridentTuple]:
    """Makes the `TridentTuple` of ``fields`` (at ``idx`` of the parent's values) an operation sees."""
    if idx is None:
        return functools.partial(view_of, _View, fields)  # no Python frame per tuple when compiled
    return lambda values: view_of(_View, fields, [values[i] for i in idx])


class _Collector(TridentCollector):
    """The collector an operation emits through: appends to the input tuple, or emits fresh."""

    __slots__ = ("_append", "_emit", "_proc", "_width", "batch", "input")

    def __init__(self, proc: Processor, append: bool) -> None:
        self._proc = proc
        self._append = append
        self._width = -1
        self._emit: Receiver = _not_wired
        # set by the receiver before the operation runs: no None check on the per-tuple path
        self.batch: BatchInfo = None  # type: ignore[assignment]
        self.input: list = []

    def wire(self) -> None:
        """Bind the processor's emit (`Processor.wire`)."""
        self._width = len(self._proc.tctx.fields)
        self._emit = self._proc.tctx.emit

    def emit(self, values: list) -> None:
        out = [*self.input, *values] if self._append else list(values)
        if len(out) != self._width:
            proc = self._proc
            proc._check_width(out, type(getattr(proc, "op", proc)).__name__)
        self._emit(self.batch, out)

    def emit_many(self, rows: list[list]) -> None:
        """`emit` of each of ``rows`` (lists made for this and not kept), handed on in one call."""
        if self._append:
            for values in rows:
                self.emit(values)
            return
        width = self._width
        for values in rows:
            if len(values) != width:
                self.emit(values)  # raises: the wrong number of values
        self._proc.tctx.emit_many(self.batch, rows)

    def report_error(self, error: BaseException) -> None:
        self._proc.tctx.report_error(error)


class _CountingCollector(_Collector):
    """The collector of a function whose every emit goes to a fused grouped `Count` (see
    `_grouped_count`): an emit adds one to its group's count in the batch's groups (the group
    field at ``index`` of ``[*input, *emitted]``) without making the appended tuple. Its ``emit``
    is a `squall._native.CountingEmit` (C when built), whose ``groups`` and ``input`` the
    receiver sets per tuple; what it does not take goes to `_emit_general`."""

    __slots__ = ("_index", "emit")

    def __init__(self, proc: Processor, index: int, input_width: int) -> None:
        super().__init__(proc, append=True)
        self._index = index - input_width  # < 0: the group field is one of the input's
        self.emit = CountingEmit(self._index, self._emit_general)  # type: ignore[assignment]

    def wire(self) -> None:
        super().wire()
        self.emit.nvalues = self._width - len(self._proc.tctx.parent_fields[0])  # type: ignore[attr-defined]

    def _emit_general(self, values: Any) -> None:
        counter: Any = self.emit
        self.input = counter.input
        try:
            n = len(values)
        except TypeError:  # an iterable without a length, which the generic collector takes too
            values = list(values)
            n = len(values)
        if n != counter.nvalues:
            _Collector.emit(self, values)  # raises: the wrong number of values
        i = self._index
        group = (values[i],) if i >= 0 else (self.input[i],)
        groups = counter.groups
        try:
            groups[group] = groups.get(group, 0) + 1
        except TypeError:
            raise ValueError(f"group_by: the group values {list(group)!r} are not hashable") from None


def _op_context(context: Any) -> TridentOperationContext:
    return TridentOperationContext(context)


# --- per-tuple processors -------------------------------------------------------------------------


class EachProcessor(_SingleParent):
    """``each(input_fields, function, function_fields)``: the function's emits are appended."""

    def __init__(self, input_fields: Fields, function: BaseFunction) -> None:
        self.input_fields = input_fields
        self.op = function

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = _indices(self.input_fields, tctx.parent_fields[0])
        self._coll = _Collector(self, append=True)
        self.op.prepare(conf, _op_context(context))

    def wire(self) -> None:
        self._coll.wire()
        view = _viewer(self.input_fields, self._idx)
        fusable = getattr(self.tctx.emit, "fusable", None)
        if type(self.op) is CombinerInitFunction and fusable and fusable[2] == len(self.tctx.parent_fields[0]):
            # a combiner's init whose only reader is its grouped partial aggregate, which takes the
            # value it appends (the last): one receiver does both, with no list made in between
            key, group_idx, _, agg = fusable
            if type(agg) is Count and type(self.op.agg) is Count and len(group_idx) == 1:
                self._receive = _grouped_count(key, group_idx[0], self)  # type: ignore[method-assign, assignment]
            else:
                self._receive = _grouped_combine(key, group_idx, -1, agg, self.op.agg.init, view,  # type: ignore[method-assign, assignment]
                                                 owner=self)
            return
        counting = getattr(self.tctx.emit, "counting", None)
        if counting is not None and type(self.op) is not CombinerInitFunction:
            # the function's emits are only counted by group (a grouped Count after it, fused):
            # its collector counts them, with no tuple made for the Count's init
            key, _ = counting
            coll, execute = _CountingCollector(self, counting[1], len(self.tctx.parent_fields[0])), self.op.execute
            coll.wire()
            self._coll = coll

            counter: Any = coll.emit
            failed = self.failed

            def receive(batch: BatchInfo, values: list) -> None:
                coll.batch, counter.input, counter.groups = batch, values, batch.state[key]
                try:
                    execute(view(values), coll)
                except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                    failed(e, values)

            self._receive = receive  # type: ignore[method-assign]
            return
        if type(self.op) is CombinerInitFunction:
            # a combiner's init appends one value: no collector in between
            init, emit, failed = self.op.agg.init, self.tctx.emit, self.failed

            def receive(batch: BatchInfo, values: list) -> None:
                try:
                    emit(batch, [*values, init(view(values))])
                except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                    failed(e, values)
        else:
            out, execute, failed = self._coll, self.op.execute, self.failed

            def receive(batch: BatchInfo, values: list) -> None:
                out.batch, out.input = batch, values
                try:
                    execute(view(values), out)
                except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                    failed(e, values)

        self._receive = receive  # type: ignore[method-assign]

    def cleanup(self) -> None:
        self.op.cleanup()


class FilterProcessor(_SingleParent):
    """``each(input_fields, filter)``: passes the tuples ``is_keep`` says yes to."""

    def __init__(self, input_fields: Fields, filter: BaseFilter) -> None:
        self.input_fields = input_fields
        self.op = filter

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = _indices(self.input_fields, tctx.parent_fields[0])
        self.op.prepare(conf, _op_context(context))

    def wire(self) -> None:
        view, is_keep, emit = _viewer(self.input_fields, self._idx), self.op.is_keep, self.tctx.emit
        failed = self.failed

        def receive(batch: BatchInfo, values: list) -> None:
            try:
                if is_keep(view(values)):
                    emit(batch, values)
            except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                failed(e, values)

        self._receive = receive  # type: ignore[method-assign]

    def cleanup(self) -> None:
        self.op.cleanup()


class TrueFilter(BaseFilter):
    """Keeps everything: the pass-through the planner puts between two repartitions."""

    def is_keep(self, tuple: TridentTuple) -> bool:
        return True


class MapProcessor(_SingleParent):
    """``map``, ``flat_map`` and ``peek``: the function sees the whole tuple."""

    def __init__(self, kind: str, function: Any, input_fields: Fields) -> None:
        self.kind = kind
        self.op = function
        self.input_fields = input_fields

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self.op.prepare(conf, _op_context(context))

    def _receive(self, batch: BatchInfo, values: list) -> None:
        emit = self.tctx.emit
        tup = _View(self.tctx.parent_fields[0], values)
        try:
            if self.kind == "map":
                emit(batch, self._check_width(list(self.op.execute(tup)), type(self.op).__name__))
            elif self.kind == "flat_map":
                for out in self.op.execute(tup):
                    emit(batch, self._check_width(list(out), type(self.op).__name__))
            else:
                self.op.accept(tup)
                emit(batch, values)
        except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
            self.failed(e, values)

    def cleanup(self) -> None:
        self.op.cleanup()


class ProjectProcessor(_SingleParent):
    """``project(fields)``."""

    def __init__(self, fields: Fields) -> None:
        self.fields = fields

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = [tctx.parent_fields[0].index(f) for f in self.fields]

    def _receive(self, batch: BatchInfo, values: list) -> None:
        self.tctx.emit(batch, [values[i] for i in self._idx])


# --- per-batch processors -------------------------------------------------------------------------


class AggregateProcessor(_SingleParent):
    """``partition_aggregate`` (and every aggregation built on it): one `BaseAggregator` per batch.

    ``init`` runs when the batch starts on the task, so a task that gets no tuple of a batch
    still completes it (a combiner's partial is then its ``zero()``). A combiner's partial
    aggregate (grouped or not) runs without the aggregator wrappers: per tuple one dict update
    (one ``combine`` call), the same calls the wrappers make.
    """

    def __init__(self, input_fields: Fields, aggregator: BaseAggregator, partial: bool = False) -> None:
        self.input_fields = input_fields
        self.op = aggregator
        # the partial step of an aggregate whose combine runs after a repartition: what one
        # partition makes is no result of its own, so an engine may run it over any partitions
        self.partial = partial

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = _indices(self.input_fields, tctx.parent_fields[0])
        self._coll = _Collector(self, append=False)
        self.op.prepare(conf, _op_context(context))

    def wire(self) -> None:
        self._coll.wire()
        parent = self.tctx.parent_fields[0]
        op = self.op
        key = self.tctx.key
        if isinstance(op, GroupedAggregator) and type(op.agg) is CombinerCombineAggregator:
            self._receive = _grouped_combine(  # type: ignore[method-assign, assignment]
                key, [parent.index(f) for f in op.group_fields], parent.index(op.input_fields[0]), op.agg.agg,
                owner=self)
            self._combining = True
            return
        self._combining = False
        if type(op) is CombinerCombineAggregator:  # ungrouped: its state is [value]
            combine, at, failed = op.agg.combine, parent.index(self.input_fields[0]), self.failed

            def receive_combined(batch: BatchInfo, values: list) -> None:
                state = batch.state[key]
                try:
                    state[0] = combine(state[0], values[at])
                except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                    failed(e, values)

            self._receive = receive_combined  # type: ignore[method-assign]
            return
        view, aggregate, coll, failed = _viewer(self.input_fields, self._idx), op.aggregate, self._coll, self.failed

        def receive(batch: BatchInfo, values: list) -> None:
            coll.batch = batch
            try:
                aggregate(batch.state[key], view(values), coll)
            except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                failed(e, values)

        self._receive = receive  # type: ignore[method-assign]

    def start_batch(self, batch: BatchInfo) -> None:
        if self._combining:
            batch.state[self.tctx.key] = {}
            return
        self._coll.batch = batch
        batch.state[self.tctx.key] = self.op.init(batch.attempt, self._coll)

    def finish_batch(self, batch: BatchInfo) -> None:
        if self._combining:
            self.tctx.emit_many(batch, [[*group, value] for group, value in batch.state[self.tctx.key].items()])
            return
        self._coll.batch = batch
        self.op.complete(batch.state[self.tctx.key], self._coll)

    def cleanup(self) -> None:
        self.op.cleanup()


_ABSENT = object()


def _grouped_combine(key: int, group_idx: list[int], value_idx: int, agg: CombinerAggregator,
                     init: Callable[[TridentTuple], Any] | None = None,
                     view: Callable[[list], TridentTuple] | None = None, first_as_is: bool = False,
                     owner: Processor | None = None) -> Receiver:
    """The receiver of a grouped combiner aggregate (`GroupedAggregator` over
    `CombinerCombineAggregator`): each group's value starts at ``zero()`` and combines the
    tuple's value (at ``value_idx``, or ``init(view(values))``: the combiner's init fused in, see
    `EachProcessor.wire`); the batch's state is ``{group values: value}``. With ``first_as_is``
    a group's first value is kept as it is, not combined with ``zero()`` (the persist's
    `MapCombinerAggStateUpdater` rule). The receiver carries its layout as ``fusable`` so that
    the init before it can be fused in. An error of the combiner's is raised as one of ``owner``,
    the processor the receiver runs for (`Processor.failed`)."""
    combine, zero = agg.combine, agg.zero
    single = group_idx[0] if len(group_idx) == 1 else None
    failed = owner.failed if owner is not None else None

    def receive(batch: BatchInfo, values: list) -> None:
        groups = batch.state[key]
        group = (values[single],) if single is not None else tuple([values[i] for i in group_idx])
        try:
            value = values[value_idx] if init is None else init(view(values))  # type: ignore[misc]
            try:
                old = groups.get(group, _ABSENT)
            except TypeError:
                raise ValueError(f"group_by: the group values {list(group)!r} are not hashable") from None
            if old is _ABSENT:
                groups[group] = value if first_as_is else combine(zero(), value)
            else:
                groups[group] = combine(old, value)
        except Exception as e:
            if failed is None:
                raise
            failed(e, values)

    receive.fusable = (key, group_idx, value_idx, agg)  # type: ignore[attr-defined]
    # rows may go in at once (combine_rows): the persist's (first value as it is), and Count's,
    # whose zero() + a partial is the partial (0 + an int)
    if init is None and single is not None and (first_as_is or type(agg) is Count):
        receive.rows = (key, single, value_idx, None if type(agg) is Count else agg.combine)  # type: ignore[attr-defined]
    return receive


def _combine_many(receive: Receiver, width: int) -> Callable[[BatchInfo, Sequence[Any]], int] | None:
    """``receive(batch, values)`` of a batch's rows in one `combine_rows` call when ``receive``
    is a grouped combine that takes rows so (else None): returns how many it took; the caller
    hands the rest (from a row of the wrong width or with an unhashable group) to its own path,
    which raises the error."""
    spec = getattr(receive, "rows", None)
    if spec is None:
        return None
    key, group_index, value_index, combine = spec

    def receive_many(batch: BatchInfo, rows: Sequence[Any]) -> int:
        return combine_rows(rows, batch.state[key], width, group_index, value_index, combine)

    return receive_many


def _grouped_count(key: int, index: int, owner: Processor) -> Receiver:
    """`_grouped_combine` with the built-in `Count`'s init fused in, grouped by one field (at
    ``index``): ``zero()`` is 0, ``init`` 1 and ``combine`` ``+``, so a tuple adds one to its
    group's count. It carries ``counting`` so that the function before it can count its emits
    straight away (`_CountingCollector`). Its error is one of ``owner``'s (`Processor.failed`)."""
    failed = owner.failed

    def receive(batch: BatchInfo, values: list) -> None:
        groups = batch.state[key]
        group = (values[index],)
        try:
            groups[group] = groups.get(group, 0) + 1
        except TypeError:
            failed(ValueError(f"group_by: the group values {list(group)!r} are not hashable"), values)

    receive.counting = (key, index)  # type: ignore[attr-defined]
    return receive


class _StateProcessor(_SingleParent):
    """What partition_persist and state_query share: a state, the fields the operation ``op``
    sees, and a collector whose emits replace the input (``APPEND`` False) or are appended to it."""

    APPEND: bool

    def __init__(self, state_id: str, input_fields: Fields, op: Any) -> None:
        self.state_id = state_id
        self.input_fields = input_fields
        self.op = op

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = _indices(self.input_fields, tctx.parent_fields[0])
        self._coll = _Collector(self, append=self.APPEND)
        self.op.prepare(conf, _op_context(context))

    def start_batch(self, batch: BatchInfo) -> None:
        batch.state[self.tctx.key] = []

    def cleanup(self) -> None:
        self.op.cleanup()


class PartitionPersistProcessor(_StateProcessor):
    """``partition_persist``: buffers the partition's batch, updates the state at its commit.

    The bolt is a committer, so ``finish_batch`` runs once the batch's ``$commit`` arrived, in
    txid order: ``begin_commit(txid)``, ``update_state``, ``commit(txid)``. A task that got no
    tuple does not touch its state (Storm's rule: for a global persist, only one task has any).
    """

    APPEND = False

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        if isinstance(self.op, (CombinerAggStateUpdater, ReducerAggStateUpdater)):
            missing = [m for m in ("get", "update", "set") if not callable(getattr(tctx.state, m, None))]
            if missing:  # else every batch failed on an AttributeError deep in the updater
                raise TypeError(
                    f"persistent_aggregate into state {self.state_id!r} without group_by keeps one global "
                    f"value, so the state must be Snapshottable (get, update, set); its "
                    f"{type(tctx.state).__name__} has no {', '.join(missing)}: wrap a MapState in "
                    f"SnapshottableMap(state, [key]), or group_by before persistent_aggregate")

    def wire(self) -> None:
        self._coll.wire()
        key = self.tctx.key
        self._partials = type(self.op) is MapCombinerAggStateUpdater
        if self._partials:
            # a grouped combiner's persist: the tuples are combined per group as they come (what
            # its update_state does first), so the batch keeps one dict and no tuple views
            op = self.op
            parent = self.tctx.parent_fields[0]
            self._receive = _grouped_combine(  # type: ignore[method-assign, assignment]
                key, [parent.index(f) for f in op.group_fields], parent.index(op.input_fields[0]), op.agg,
                first_as_is=True, owner=self)
            return
        view = _viewer(self.input_fields, self._idx)

        def receive(batch: BatchInfo, values: list) -> None:
            batch.state[key].append(view(values))

        self._receive = receive  # type: ignore[method-assign]

    def start_batch(self, batch: BatchInfo) -> None:
        batch.state[self.tctx.key] = {} if self._partials else []

    def finish_batch(self, batch: BatchInfo) -> None:
        buffer = batch.state[self.tctx.key]
        if not buffer:
            return
        state = self.tctx.state
        txid = batch.attempt.txid
        self._coll.batch = batch
        state.begin_commit(txid)
        if self._partials:
            self.op.update_partials(state, buffer, self._coll)
        else:
            self.op.update_state(state, buffer, self._coll)
        state.commit(txid)


class StateQueryProcessor(_StateProcessor):
    """``state_query``: one ``batch_retrieve`` per partition and batch, then ``execute`` per tuple."""

    APPEND = True

    def wire(self) -> None:
        self._coll.wire()

    def _receive(self, batch: BatchInfo, values: list) -> None:
        batch.state[self.tctx.key].append(values)

    def finish_batch(self, batch: BatchInfo) -> None:
        tuples = batch.state[self.tctx.key]
        if not tuples:
            return
        view = _viewer(self.input_fields, self._idx)
        args = [view(values) for values in tuples]
        try:
            results = self.op.batch_retrieve(self.tctx.state, args)
            if len(results) != len(args):
                raise ValueError(f"state_query: {type(self.op).__name__}.batch_retrieve gave {len(results)} "
                                 f"results for {len(args)} tuples")
        except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
            # one call over the partition's tuples of the batch: which one it raised on is not
            # known, so the first is quoted (a DRPC call's arguments, say); left to the bolt, the
            # error said "the state's update and commit", which a query does not do
            which = "one tuple" if len(tuples) == 1 else f"{len(tuples)} tuples"
            self.failed(e, where=f"in batch_retrieve over the batch's {which} in this partition, "
                                 f"{'' if len(tuples) == 1 else 'the first: '}"
                                 f"{shown_record(self.tctx.parent_fields[0], tuples[0])}", given=tuples)
        coll = self._coll
        coll.batch = batch
        for values, arg, result in zip(tuples, args, results):
            coll.input = values
            try:
                self.op.execute(arg, result, coll)
            except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                self.failed(e, values)


class MultiReduceProcessor(Processor):
    """A node with several parents (``multi_reduce``, and ``merge``, ``join`` and the DRPC
    return built on it): runs a `MultiReducer` (Storm's ``MultiReducerProcessor``).

    ``input_fields[i]`` are what the reducer sees of parent ``i``; its state lives per batch.
    """

    def __init__(self, input_fields: Sequence[Fields], reducer: MultiReducer) -> None:
        self.input_fields = list(input_fields)
        self.op = reducer

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = [_indices(f, p) for f, p in zip(self.input_fields, tctx.parent_fields)]
        self._views = [_viewer(f, i) for f, i in zip(self.input_fields, self._idx)]
        self._coll = _Collector(self, append=False)
        self.op.prepare(conf, TridentMultiReducerContext(self.input_fields, _op_context(context)))

    def wire(self) -> None:
        self._coll.wire()

    def start_batch(self, batch: BatchInfo) -> None:
        self._coll.batch = batch
        batch.state[self.tctx.key] = self.op.init(self._coll)

    def execute(self, batch: BatchInfo, parent: int, values: list) -> None:
        self._coll.batch = batch
        try:
            self.op.execute(batch.state[self.tctx.key], parent, self._views[parent](values), self._coll)
        except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
            self.failed(e, values, parent)

    def finish_batch(self, batch: BatchInfo) -> None:
        self._coll.batch = batch
        self.op.complete(batch.state[self.tctx.key], self._coll)

    def cleanup(self) -> None:
        self.op.cleanup()


class MergeReducer(MultiReducer):
    """``merge``: every tuple of every parent, as it comes (Storm's ``IdentityMultiReducer``)."""

    def init(self, collector: TridentCollector) -> None:
        return None

    def execute(self, state: None, stream_index: int, input: TridentTuple, collector: TridentCollector) -> None:
        collector.emit(input.values)

    def complete(self, state: None, collector: TridentCollector) -> None:
        pass


class GroupedMultiReducerExecutor(MultiReducer):
    """A `GroupedMultiReducer` run as a `MultiReducer` (Storm's ``GroupedMultiReducerExecutor``):
    the tuples of stream ``i`` carry ``group_fields[i]`` and ``input_fields[i]``; per batch, each
    group (its values, whichever stream brought them) gets its own state, ``init`` when the group
    is first seen, and ``complete`` per group, in the order the groups were first seen."""

    def __init__(self, reducer: GroupedMultiReducer, group_fields: Sequence[Fields], input_fields: Sequence[Fields],
                 operation: str = "multi_reduce") -> None:
        if len(group_fields) != len(input_fields):
            raise ValueError(f"{operation}: the group fields and the input fields must be as many")
        self.reducer = reducer
        self.group_fields = list(group_fields)
        self.input_fields = list(input_fields)
        self.operation = operation

    def prepare(self, conf: dict, context: TridentMultiReducerContext) -> None:
        full = context.input_fields
        group_at = [[f.index(n) for n in g] for f, g in zip(full, self.group_fields)]
        input_at = [[f.index(n) for n in i] for f, i in zip(full, self.input_fields)]
        # per stream, its group key and its input values, each taken in one C call where it can
        # be (a join's per-tuple path): a key of one field is the value itself, a tuple otherwise
        self._single = all(len(at) == 1 for at in group_at)
        self._key = [operator.itemgetter(at[0]) if self._single else _tuple_getter(at) for at in group_at]
        self._input = [_list_getter(at) for at in input_at]
        self.reducer.prepare(conf, TridentMultiReducerContext(self.input_fields,
                                                              context.__dict__.get("_operation_context")))

    def init(self, collector: TridentCollector) -> dict:
        return {}

    def execute(self, state: dict, stream_index: int, input: TridentTuple, collector: TridentCollector) -> None:
        values = input.values
        key = self._key[stream_index](values)
        try:
            entry = state.get(key)
        except TypeError:
            raise ValueError(f"{self.operation}: the group values {self._values(key)!r} are not hashable") from None
        if entry is None:
            group = view_of(_View, self.group_fields[stream_index], self._values(key))
            entry = state[key] = (group, self.reducer.init(collector, group), stream_index)
        elif entry[2] == stream_index:
            group = entry[0]
        else:  # each stream's tuples see a group of that stream's own group fields, as Storm's do
            group = view_of(_View, self.group_fields[stream_index], self._values(key))
        self.reducer.execute(entry[1], stream_index, group,
                             view_of(_View, self.input_fields[stream_index], self._input[stream_index](values)), collector)

    def _values(self, key: Any) -> list:
        """The group's values from its key."""
        return [key] if self._single else list(key)

    def complete(self, state: dict, collector: TridentCollector) -> None:
        complete = self.reducer.complete
        for group, value, _ in state.values():
            complete(value, group, collector)

    def cleanup(self) -> None:
        self.reducer.cleanup()


def _tuple_getter(at: list[int]) -> Callable[[list], tuple]:
    """``values`` -> the tuple of ``values[i] for i in at``."""
    if len(at) == 1:
        i = at[0]
        return lambda values: (values[i],)
    if not at:
        return lambda values: ()
    return operator.itemgetter(*at)


def _list_getter(at: list[int]) -> Callable[[list], list]:
    """``values`` -> the list of ``values[i] for i in at``."""
    if at and at == list(range(at[0], at[0] + len(at))):
        return operator.itemgetter(slice(at[0], at[0] + len(at)))
    if len(at) == 1:
        i = at[0]
        return lambda values: [values[i]]
    if not at:
        return lambda values: []
    get = operator.itemgetter(*at)
    return lambda values: list(get(values))


class JoinExecutor(GroupedMultiReducerExecutor):
    """The `GroupedMultiReducerExecutor` of ``join``'s own reducers: the same rows in the same
    order, without the group and input `TridentTuple` made per tuple for a user's reducer (half a
    join's time per tuple)."""

    reducer: JoinerMultiReducer

    def execute(self, state: dict, stream_index: int, input: TridentTuple, collector: TridentCollector) -> None:
        values = input.values
        key = self._key[stream_index](values)
        try:
            entry = state.get(key)
        except TypeError:
            raise ValueError(f"{self.operation}: the group values {self._values(key)!r} are not hashable") from None
        if entry is None:
            entry = state[key] = self.reducer.init(
                collector, view_of(_View, self.group_fields[stream_index], self._values(key)))
        self.reducer.add(entry, stream_index, self._input[stream_index](values), collector)

    def complete(self, state: dict, collector: TridentCollector) -> None:
        complete = self.reducer.complete
        for entry in state.values():
            complete(entry, entry.group, collector)


class _JoinState:
    """One group's tuples of each side (Storm's ``JoinState``)."""

    __slots__ = ("group", "received", "sides")

    def __init__(self, n: int, group: TridentTuple) -> None:
        self.group = group
        self.sides: list[list] = [[], []] if n == 2 else [[] for _ in range(n)]
        self.received = 0


class JoinerMultiReducer(GroupedMultiReducer):
    """``join`` (Storm's ``JoinerMultiReducer``, ``JoinOutFieldsMode.COMPACT``): per join key of a
    batch, once every side has a tuple, each new tuple is emitted joined with every combination
    of the other sides' tuples so far: the join values, then the other values of each side in
    stream order. At the end of the batch a side with no tuple of the key gives one row of Nones
    if it is an outer side (``outer[i]``), and the key's combinations are emitted then; a key an
    inner side lacks gives nothing."""

    def __init__(self, outer: Sequence[bool], num_join: int, side_widths: Sequence[int]) -> None:
        if len(outer) != len(side_widths):
            raise ValueError("join: one join type per stream")
        self.outer = list(outer)
        self.num_join = num_join
        self.side_widths = list(side_widths)

    def init(self, collector: TridentCollector, group: TridentTuple) -> _JoinState:
        return _JoinState(len(self.outer), group)

    def execute(self, state: _JoinState, stream_index: int, group: TridentTuple, input: TridentTuple,
                collector: TridentCollector) -> None:
        self.add(state, stream_index, input.values, collector)

    def add(self, state: _JoinState, stream_index: int, values: list, collector: TridentCollector) -> None:
        """`execute` given the input's values alone (what `JoinExecutor` calls)."""
        side = state.sides[stream_index]
        if not side:
            state.received += 1
        side.append(values)
        if state.received == len(state.sides):
            self._emit_cross(state, collector, stream_index, values)

    def complete(self, state: _JoinState, group: TridentTuple, collector: TridentCollector) -> None:
        sides = state.sides
        if state.received == len(sides):  # every side had a tuple: emitted as they came
            return
        for i, side in enumerate(sides):
            if not side and self.outer[i]:
                state.received += 1
                side.append(None)
        if state.received == len(sides):
            self._emit_cross(state, collector, -1, None)

    def _emit_cross(self, state: _JoinState, collector: TridentCollector, override: int, values: Any) -> None:
        rows = list(state.sides)
        if override >= 0:
            rows[override] = [values]
        for combo in itertools.product(*rows):
            collector.emit(self._row(state.group, combo))

    def _row(self, group: TridentTuple, combo: tuple) -> list:
        out = list(group.values)
        for width, values in zip(self.side_widths, combo):
            out.extend([None] * width if values is None else values)
        return out


class PreservingFieldsOrderJoinerMultiReducer(JoinerMultiReducer):
    """``join(..., mode=JoinOutFieldsMode.PRESERVE)`` (Storm's
    ``PreservingFieldsOrderJoinerMultiReducer``): as `JoinerMultiReducer`, but each row is every
    field of each stream, in the stream's own order, streams in call order; a stream's join
    fields carry the key's values, and an outer side with no tuple of the key gives Nones for all
    its fields, its join fields too."""

    def __init__(self, outer: Sequence[bool], num_join: int, origin_fields: Sequence[Fields],
                 join_fields: Sequence[Fields]) -> None:
        self.origin_widths = [len(f) for f in origin_fields]
        # per stream, per output field: (True, index in the key) or (False, index in its side)
        self.recipes: list[list[tuple[bool, int]]] = []
        for origin, joins in zip(origin_fields, join_fields):
            recipe, k = [], 0
            for name in origin:
                if name in joins:
                    recipe.append((True, joins.index(name)))
                else:
                    recipe.append((False, k))
                    k += 1
            self.recipes.append(recipe)
        super().__init__(outer, num_join, [len(o) - len(j) for o, j in zip(origin_fields, join_fields)])

    def _row(self, group: TridentTuple, combo: tuple) -> list:
        key = group.values
        out: list = []
        for width, recipe, values in zip(self.origin_widths, self.recipes, combo):
            if values is None:
                out.extend([None] * width)
            else:
                out.extend([key[i] if from_key else values[i] for from_key, i in recipe])
        return out


class ReturnResultsReducer(MultiReducer):
    """The end of a DRPC stream (Storm's ``ReturnResultsReducer``): parent 0 carries each call's
    return-info, parent 1 the stream's results. Per batch, each call gets the JSON list of the
    result tuples' values, emitted as ``[result, return_info]`` for the DRPC return bolt."""

    def init(self, collector: TridentCollector) -> tuple[list, list]:
        return [], []

    def execute(self, state: tuple[list, list], stream_index: int, input: TridentTuple,
                collector: TridentCollector) -> None:
        state[stream_index].append(input.values[0] if stream_index == 0 else input.values)

    def complete(self, state: tuple[list, list], collector: TridentCollector) -> None:
        infos, results = state
        if not infos:
            return
        # Storm's JSON writer prints an unknown value with its toString(): str() here
        text = json.dumps(results, default=str)
        for info in infos:
            collector.emit([text, info])


# --- aggregator wrappers (Storm's operation/impl) -------------------------------------------------


class CombinerInitFunction(BaseFunction):
    """Each tuple mapped to ``agg.init(tuple)`` (Storm's ``CombinerAggregatorInitImpl``)."""

    def __init__(self, agg: CombinerAggregator) -> None:
        self.agg = agg

    def prepare(self, conf: dict, context: Any) -> None:
        self.agg.prepare(conf, context)

    def execute(self, tuple: TridentTuple, collector: TridentCollector) -> None:
        collector.emit([self.agg.init(tuple)])

    def cleanup(self) -> None:
        self.agg.cleanup()


class CombinerCombineAggregator(BaseAggregator):
    """Combines the first field of each tuple, from ``zero()`` (Storm's ``CombinerAggregatorCombineImpl``).

    ``owns_lifecycle``: this wrapper prepares and cleans up the combiner. The partial step shares
    its bolt with `CombinerInitFunction`, which does that there; the final step, after the
    repartition, is the combiner's only wrapper in its bolt, so it must (once per task either way).
    """

    def __init__(self, agg: CombinerAggregator, owns_lifecycle: bool = False) -> None:
        self.agg = agg
        self.owns_lifecycle = owns_lifecycle

    def prepare(self, conf: dict, context: Any) -> None:
        if self.owns_lifecycle:
            self.agg.prepare(conf, context)

    def cleanup(self) -> None:
        if self.owns_lifecycle:
            self.agg.cleanup()

    def init(self, batch_id: Any, collector: TridentCollector) -> list:
        return [self.agg.zero()]

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:
        state[0] = self.agg.combine(state[0], tuple.values[0])

    def complete(self, state: list, collector: TridentCollector) -> None:
        collector.emit([state[0]])


class ReducerAggregatorImpl(BaseAggregator):
    """A `ReducerAggregator` as a `BaseAggregator` (Storm's ``ReducerAggregatorImpl``)."""

    def __init__(self, agg: ReducerAggregator) -> None:
        self.agg = agg

    def prepare(self, conf: dict, context: Any) -> None:
        self.agg.prepare(conf, context)

    def init(self, batch_id: Any, collector: TridentCollector) -> list:
        return [self.agg.init()]

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:
        state[0] = self.agg.reduce(state[0], tuple)

    def complete(self, state: list, collector: TridentCollector) -> None:
        collector.emit([state[0]])

    def cleanup(self) -> None:
        self.agg.cleanup()


class _GroupCollector(TridentCollector):
    """Prefixes what a grouped aggregator emits with its group's values."""

    def __init__(self, outer: TridentCollector) -> None:
        self.outer = outer
        self.group: tuple = ()

    def emit(self, values: list) -> None:
        self.outer.emit([*self.group, *values])

    def report_error(self, error: BaseException) -> None:
        self.outer.report_error(error)


class GroupedAggregator(BaseAggregator):
    """Runs ``agg`` once per group of ``group_fields`` (Storm's ``GroupedAggregator``).

    Its input is the union of the group and input fields; each group's aggregator sees only
    ``input_fields`` and what it emits is prefixed with the group's values.
    """

    def __init__(self, agg: BaseAggregator, group_fields: Fields, input_fields: Fields) -> None:
        self.agg = agg
        self.group_fields = group_fields
        self.input_fields = input_fields
        self._layout: tuple[Fields, list[int], list[int]] | None = None

    def prepare(self, conf: dict, context: Any) -> None:
        self.agg.prepare(conf, context)

    def init(self, batch_id: Any, collector: TridentCollector) -> list:
        return [batch_id, _GroupCollector(collector), {}]

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:
        layout = self._layout
        if layout is None or layout[0] is not tuple.fields:
            fields = tuple.fields
            layout = self._layout = (fields, [fields.index(f) for f in self.group_fields],
                                     [fields.index(f) for f in self.input_fields])
        values = tuple.values
        try:
            key = _as_key([values[i] for i in layout[1]])  # ``tuple`` is the argument here
        except TypeError:
            raise ValueError(f"group_by: the group values {[values[i] for i in layout[1]]!r} are not "
                             "hashable") from None
        batch_id, coll, groups = state
        coll.group = key
        if key not in groups:
            groups[key] = self.agg.init(batch_id, coll)
        self.agg.aggregate(groups[key], _View(self.input_fields, [values[i] for i in layout[2]]), coll)

    def complete(self, state: list, collector: TridentCollector) -> None:
        _, coll, groups = state
        for key, value in groups.items():
            coll.group = key
            self.agg.complete(value, coll)

    def cleanup(self) -> None:
        self.agg.cleanup()


class _CaptureCollector(TridentCollector):
    """Keeps what one aggregator of a chain emits (Storm's ``CaptureCollector``), checking that
    each emit has the aggregator's number of fields."""

    def __init__(self, outer: TridentCollector, width: int, name: str) -> None:
        self.outer = outer
        self.width = width
        self.name = name
        self.captured: list[list] = []

    def emit(self, values: Any) -> None:
        values = list(values)
        if len(values) != self.width:
            raise ValueError(f"chained_agg: {self.name} emitted {len(values)} values {values!r} for its "
                             f"{self.width} function field{'s' if self.width != 1 else ''}")
        self.captured.append(values)

    def report_error(self, error: BaseException) -> None:
        self.outer.report_error(error)


class ChainedAggregator(BaseAggregator):
    """Several aggregators over the same tuples (Storm's ``ChainedAggregatorImpl``, what
    ``chained_agg()`` builds): aggregator ``i`` sees ``input_fields[i]`` and emits
    ``widths[i]`` values; at ``complete`` every combination of their emits (one of each, in
    chain order) goes out as one tuple. An aggregator that emitted nothing makes no tuple."""

    def __init__(self, aggs: Sequence[BaseAggregator], input_fields: Sequence[Fields], widths: Sequence[int],
                 names: Sequence[str]) -> None:
        self.aggs = list(aggs)
        self.input_fields = list(input_fields)
        self.widths = list(widths)
        self.names = list(names)
        self._layout: tuple[Fields, list[list[int]]] | None = None

    def prepare(self, conf: dict, context: Any) -> None:
        for agg in self.aggs:
            agg.prepare(conf, context)

    def init(self, batch_id: Any, collector: TridentCollector) -> list:
        captures = [_CaptureCollector(collector, w, n) for w, n in zip(self.widths, self.names)]
        return [[agg.init(batch_id, c) for agg, c in zip(self.aggs, captures)], captures]

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:
        layout = self._layout
        if layout is None or layout[0] is not tuple.fields:
            fields = tuple.fields
            layout = self._layout = (fields, [[fields.index(f) for f in ins] for ins in self.input_fields])
        values = tuple.values
        states, captures = state
        for agg, value, ins, idx, capture in zip(self.aggs, states, self.input_fields, layout[1], captures):
            agg.aggregate(value, _View(ins, [values[i] for i in idx]), capture)

    def complete(self, state: list, collector: TridentCollector) -> None:
        states, captures = state
        for agg, value, capture in zip(self.aggs, states, captures):
            agg.complete(value, capture)
        for combo in itertools.product(*(c.captured for c in captures)):
            collector.emit(list(itertools.chain.from_iterable(combo)))

    def cleanup(self) -> None:
        for agg in self.aggs:
            agg.cleanup()


def _as_key(values: list) -> tuple:
    key = tuple(values)
    hash(key)
    return key


class SingleEmitAggregator(BaseAggregator):
    """A global aggregate's last step (Storm's ``SingleEmitAggregator``): every task of the
    aggregating bolt sees the batch's end, but only one result may come out. A task that got
    tuples completes; one that got none completes (with ``init``'s value, a combiner's
    ``zero()``) only if it is the task the batch was sent to: ``txid % n`` for
    ``batch_global``, the first task for ``global`` (so an empty batch gives one result)."""

    def __init__(self, agg: BaseAggregator, partitioning: str) -> None:
        self.agg = agg
        self.partitioning = partitioning
        self._index = 0
        self._count = 1

    def prepare(self, conf: dict, context: Any) -> None:
        self.agg.prepare(conf, context)
        self._index = context.get_partition_index()
        self._count = context.num_partitions()

    def init(self, batch_id: Any, collector: TridentCollector) -> list:
        return [batch_id, None, False]

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:
        if not state[2]:
            state[1] = self.agg.init(state[0], collector)
            state[2] = True
        self.agg.aggregate(state[1], tuple, collector)

    def complete(self, state: list, collector: TridentCollector) -> None:
        if not state[2]:
            if self._index != batch_partition(self.partitioning, state[0], self._count):
                return
            state[1] = self.agg.init(state[0], collector)
        self.agg.complete(state[1], collector)

    def cleanup(self) -> None:
        self.agg.cleanup()


def batch_partition(partitioning: str, attempt: Any, num_partitions: int) -> int:
    """The task index a whole batch goes to: ``batch_global`` by txid, ``global`` the first.

    The planner's batch-global grouping and `SingleEmitAggregator` must agree, so both use this.
    """
    if partitioning == "global":
        return 0
    return attempt.txid % num_partitions


# --- the bolt's body -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BodyNode:
    """One processor of a fused bolt, as the planner lays it out.

    ``parents`` are, in edge order, ``("node", i)`` for processor ``i`` of the same bolt or
    ``("stream", s)`` for input stream ``s``; ``children`` are ``(i, parent index)`` pairs of
    processors in the bolt; ``outputs`` the streams leaving the bolt from this node;
    ``batch_group`` the batch group of its batches (None: every batch the bolt runs); ``label``
    what its errors call it (``each(Parse) named 'parse'``; empty: ``name``).
    """

    name: str
    processor: Processor
    fields: Fields
    parents: tuple[tuple[str, Any], ...]
    children: tuple[tuple[int, int], ...]
    outputs: tuple[str, ...]
    state_id: str | None = None
    batch_group: str | None = None
    label: str = ""


class SubtopologyBody(BatchBody):
    """The body of a fused Trident bolt (Storm's ``SubtopologyBolt``).

    ``nodes`` are in topological order; ``input_fields`` gives each input stream's fields;
    ``states`` the factories of the states this bolt holds (one `State` per task, made in
    ``prepare`` with the task's partition index and the bolt's task count). A batch starts and
    finishes in the nodes of its batch group only (`BatchInfo.batch_group`; Storm's
    ``SubtopologyBolt`` per batch group): a bolt holding a state's updater and the queries of it
    from another connected part of the graph runs each part's batches on their own.
    """

    def __init__(self, nodes: Sequence[BodyNode], input_fields: dict[str, Fields],
                 states: dict[str, Any]) -> None:
        self.nodes = tuple(nodes)
        self.input_fields = dict(input_fields)
        self.state_factories = dict(states)

    @property
    def squall_keeps_task_states(self) -> bool:
        """Whether an operation of this bolt keeps a store by task (`TridentBoltExecutor`'s)."""
        return any(getattr(node.processor, "squall_keeps_task_states", False) for node in self.nodes)

    def prepare(self, conf: dict, context: Any, output: BatchOutput) -> None:
        self._output = output
        tasks = context.get_component_tasks(context.get_this_component_id())
        index = context.get_this_task_index()
        self._states = {sid: f.make_state(conf, context, index, len(tasks))
                        for sid, f in self.state_factories.items()}
        inputs: dict[str, list[tuple[Processor, int]]] = {}
        contexts = []
        for i, node in enumerate(self.nodes):
            parent_fields = []
            for pi, (kind, ref) in enumerate(node.parents):
                if kind == "node":
                    parent_fields.append(self.nodes[ref].fields)
                else:
                    parent_fields.append(self.input_fields[ref])
                    inputs.setdefault(ref, []).append((node.processor, pi))
            tctx = ProcessorContext(node.name, parent_fields, node.fields, i, _not_wired,
                                    output.report_error,
                                    self._states.get(node.state_id) if node.state_id is not None else None,
                                    operation=getattr(node, "label", "") or node.name)
            contexts.append(tctx)
            node.processor.prepare(conf, context, tctx)
        # children first: a node's emit calls its children's receivers, which wire() binds
        for node, tctx in zip(reversed(self.nodes), reversed(contexts)):
            tctx.emit = self._emitter(node)
            tctx.emit_many = self._many_emitter(node, tctx.emit)
            node.processor.wire()
        self._receivers: dict[str, tuple[int, list[Receiver]]] = {
            stream: (len(self.input_fields[stream]), [proc.receiver(pi) for proc, pi in procs])
            for stream, procs in inputs.items()}
        # a stream whose one reader is a grouped combine: a pack's rows combine in one call
        self._combining: dict[str, Callable[[BatchInfo, Sequence[Any]], int]] = {}
        self._combiner: dict[str, Processor] = {}  # whose combine runs in a stream's _combining
        for stream, (width, receivers) in self._receivers.items():
            many = _combine_many(receivers[0], width) if len(receivers) == 1 else None
            if many is not None:
                self._combining[stream] = many
                self._combiner[stream] = inputs[stream][0][0]

    def _emitter(self, node: BodyNode) -> Receiver:
        receivers = [self.nodes[c].processor.receiver(pi) for c, pi in node.children]
        outputs = node.outputs
        emit_out = self._output.emit
        if len(receivers) == 1 and not outputs:
            return receivers[0]
        if not receivers and len(outputs) == 1:
            stream = outputs[0]

            def emit_one(batch: BatchInfo, values: list) -> None:
                emit_out(batch, stream, values)

            return emit_one

        def emit(batch: BatchInfo, values: list) -> None:
            for receive in receivers:
                receive(batch, values)
            for stream in outputs:
                emit_out(batch, stream, values)

        return emit

    def _many_emitter(self, node: BodyNode, emit: Receiver) -> Callable[[BatchInfo, list[list]], None]:
        if len(node.children) == 1 and not node.outputs:
            many = _combine_many(emit, len(node.fields))  # emit is the one child's receiver
            if many is not None:
                child = self.nodes[node.children[0][0]].processor

                def combine_each(batch: BatchInfo, rows: list[list]) -> None:
                    try:
                        done = many(batch, rows)
                    except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                        child.failed(e, where=f"combining {len(rows)} tuples in one call")
                    for values in rows[done:]:
                        emit(batch, values)  # raises: an unhashable group

                return combine_each
        if not node.children and len(node.outputs) == 1:
            stream, emit_many = node.outputs[0], self._output.emit_many

            def emit_out(batch: BatchInfo, rows: list[list]) -> None:
                emit_many(batch, stream, rows)

            return emit_out

        def emit_each(batch: BatchInfo, rows: list[list]) -> None:
            for values in rows:
                emit(batch, values)

        return emit_each

    def _in_group(self, group: str | None) -> tuple[BodyNode, ...]:
        # the nodes a batch of ``group`` runs in (None, or nodes of no group: all of them)
        cache = self.__dict__.setdefault("_group_nodes", {})
        nodes = cache.get(group)
        if nodes is None:
            nodes = cache[group] = tuple(n for n in self.nodes if group is None
                                         or getattr(n, "batch_group", None) in (None, group))
        return nodes

    def init_batch(self, batch: BatchInfo) -> None:
        for node in self._in_group(batch.batch_group):
            try:
                node.processor.start_batch(batch)
            except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                node.processor.failed(e, where="at the start of the batch")

    def execute(self, batch: BatchInfo, stream: str, values: list) -> None:
        self.execute_many(batch, stream, (values,))

    def execute_many(self, batch: BatchInfo, stream: str, rows: Sequence[Any]) -> None:
        """`execute` of each row (a pack's tuples), with the stream's receivers looked up once."""
        wired = self._receivers.get(stream)
        if wired is None:
            raise ValueError(f"Trident bolt got a tuple on stream {stream!r}, which it does not read")
        width, receivers = wired
        combining = self._combining.get(stream)
        if combining is not None:
            try:
                done = combining(batch, rows)
            except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                self._combiner[stream].failed(e, where=f"combining {len(rows)} tuples of stream {stream!r} in one call")
            if done == len(rows):
                return
            rows = rows[done:]  # the rest, one by one: the first of them raises its error
        for values in rows:
            if type(values) is not list:
                values = list(values)
            if len(values) != width:
                raise ValueError(f"a Trident tuple of fields {self.input_fields[stream].to_list()} on stream "
                                 f"{stream!r} got {len(values)} values: {values!r}")
            for receive in receivers:
                receive(batch, values)

    def finish_batch(self, batch: BatchInfo) -> None:
        for node in self._in_group(batch.batch_group):
            try:
                node.processor.finish_batch(batch)
            except Exception as e:  # noqa: BLE001 (raised again, naming the operation: Processor.failed)
                node.processor.failed(e, where="at the end of the batch (the state's update and commit, for a state)"
                                      if node.state_id is not None else "at the end of the batch")

    def use_clock(self, clock: Any) -> None:
        """Hand the engine's clock to the processors that keep time (a window's)."""
        for node in self.nodes:
            use_clock = getattr(node.processor, "use_clock", None)
            if use_clock is not None:
                use_clock(clock)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.processor.cleanup()


__all__ = [
    "AggregateProcessor", "BodyNode", "EachProcessor", "FilterProcessor",
    "MapProcessor", "MultiReduceProcessor", "PartitionPersistProcessor", "ProjectProcessor",
    "StateQueryProcessor", "SubtopologyBody", "batch_partition",
]
