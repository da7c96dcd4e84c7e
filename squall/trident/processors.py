"""What runs inside a Trident bolt (Storm's ``planner/processor`` and ``SubtopologyBolt``).

The planner fuses the operations between two repartitions into one bolt; there each operation is
a *processor*, and `SubtopologyBody` (the bolt's `BatchBody`) runs them per batch: a tuple that
arrives on an input stream goes to the processors reading that stream, what a processor emits
goes straight to its children in the same bolt (a call, no tuple) and, where an edge leaves the
bolt, out on that edge's stream. At the end of a batch every processor finishes in topological
order, so an aggregate's result flows into the operations after it before they finish.

Processors are built when the topology is, pickled into each task and prepared there; whatever
they keep per batch lives in ``BatchInfo.state`` under the processor's index, so a new attempt of
a batch starts clean. The aggregator wrappers below are Storm's ``operation/impl``: they turn
combiners and reducers into the one `BaseAggregator` interface the aggregate processor runs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._fields import Fields
from .executor import BatchBody, BatchInfo, BatchOutput
from .operation import (
    BaseAggregator,
    BaseFilter,
    BaseFunction,
    CombinerAggregator,
    ReducerAggregator,
    TridentCollector,
    TridentOperationContext,
)
from .tuple import TridentTuple

# --- how a processor sees its place in the bolt ---------------------------------------------------


@dataclass
class ProcessorContext:
    """What a processor is told in ``prepare`` (Storm's ``TridentContext``).

    ``parent_fields`` are the fields of each parent in edge order, ``fields`` this node's output
    fields, ``key`` its slot in ``BatchInfo.state``, ``emit(batch, values)`` sends one output
    tuple on, ``state`` is the `State` the node persists into or queries (else None).
    """

    name: str
    parent_fields: list[Fields]
    fields: Fields
    key: int
    emit: Callable[[BatchInfo, list], None]
    report_error: Callable[[BaseException], None]
    state: Any = None


class Processor:
    """One operation in a bolt; subclasses are Storm's processors."""

    operation = "operation"

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        """Called once per task, parents first."""
        self.tctx = tctx

    def start_batch(self, batch: BatchInfo) -> None:
        """A batch starts on this task."""

    def execute(self, batch: BatchInfo, parent: int, tup: TridentTuple) -> None:
        """A tuple of parent number ``parent`` (edge order)."""
        raise NotImplementedError

    def finish_batch(self, batch: BatchInfo) -> None:
        """Every tuple of the batch was executed (parents already finished)."""

    def cleanup(self) -> None:
        """The task stops."""

    def _check_width(self, values: list, what: str) -> list:
        if len(values) != len(self.tctx.fields):
            raise ValueError(
                f"{self.tctx.name}: {what} emitted {len(values)} values {values!r} for the fields "
                f"{self.tctx.fields.to_list()}")
        return values


def _indices(fields: Fields, parent: Fields) -> list[int] | None:
    """Positions of ``fields`` in ``parent``, or None when they are all of it in order."""
    if fields == parent:
        return None
    return [parent.index(f) for f in fields]


def _project(tup: TridentTuple, fields: Fields, idx: list[int] | None) -> TridentTuple:
    if idx is None:
        return tup
    values = tup.values
    return TridentTuple(fields, [values[i] for i in idx])


class _Collector(TridentCollector):
    """The collector an operation emits through: appends to the input tuple, or emits fresh."""

    __slots__ = ("_proc", "_append", "batch", "input")

    def __init__(self, proc: Processor, append: bool) -> None:
        self._proc = proc
        self._append = append
        self.batch: BatchInfo | None = None
        self.input: list = []

    def emit(self, values: list) -> None:
        proc = self._proc
        out = [*self.input, *values] if self._append else list(values)
        proc.tctx.emit(self.batch, proc._check_width(out, type(proc.op).__name__))

    def report_error(self, error: BaseException) -> None:
        self._proc.tctx.report_error(error)


def _op_context(context: Any) -> TridentOperationContext:
    return TridentOperationContext(context)


# --- per-tuple processors -------------------------------------------------------------------------


class EachProcessor(Processor):
    """``each(input_fields, function, function_fields)``: the function's emits are appended."""

    def __init__(self, input_fields: Fields, function: BaseFunction) -> None:
        self.input_fields = input_fields
        self.op = function

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = _indices(self.input_fields, tctx.parent_fields[0])
        self._coll = _Collector(self, append=True)
        self.op.prepare(conf, _op_context(context))

    def execute(self, batch: BatchInfo, parent: int, tup: TridentTuple) -> None:
        coll = self._coll
        coll.batch, coll.input = batch, tup.values
        self.op.execute(_project(tup, self.input_fields, self._idx), coll)

    def cleanup(self) -> None:
        self.op.cleanup()


class FilterProcessor(Processor):
    """``each(input_fields, filter)``: passes the tuples ``is_keep`` says yes to."""

    def __init__(self, input_fields: Fields, filter: BaseFilter) -> None:  # noqa: A002
        self.input_fields = input_fields
        self.op = filter

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = _indices(self.input_fields, tctx.parent_fields[0])
        self.op.prepare(conf, _op_context(context))

    def execute(self, batch: BatchInfo, parent: int, tup: TridentTuple) -> None:
        if self.op.is_keep(_project(tup, self.input_fields, self._idx)):
            self.tctx.emit(batch, tup.values)

    def cleanup(self) -> None:
        self.op.cleanup()


class TrueFilter(BaseFilter):
    """Keeps everything: the pass-through the planner puts between two repartitions."""

    def is_keep(self, tuple: TridentTuple) -> bool:  # noqa: A002
        return True


class MapProcessor(Processor):
    """``map``, ``flat_map`` and ``peek``: the function sees the whole tuple."""

    def __init__(self, kind: str, function: Any, input_fields: Fields) -> None:
        self.kind = kind
        self.op = function
        self.input_fields = input_fields

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self.op.prepare(conf, _op_context(context))

    def execute(self, batch: BatchInfo, parent: int, tup: TridentTuple) -> None:
        emit = self.tctx.emit
        if self.kind == "map":
            emit(batch, self._check_width(list(self.op.execute(tup)), type(self.op).__name__))
        elif self.kind == "flat_map":
            for values in self.op.execute(tup):
                emit(batch, self._check_width(list(values), type(self.op).__name__))
        else:
            self.op.accept(tup)
            emit(batch, tup.values)

    def cleanup(self) -> None:
        self.op.cleanup()


class ProjectProcessor(Processor):
    """``project(fields)``."""

    def __init__(self, fields: Fields) -> None:
        self.fields = fields

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = [tctx.parent_fields[0].index(f) for f in self.fields]

    def execute(self, batch: BatchInfo, parent: int, tup: TridentTuple) -> None:
        values = tup.values
        self.tctx.emit(batch, [values[i] for i in self._idx])


# --- per-batch processors -------------------------------------------------------------------------


class AggregateProcessor(Processor):
    """``partition_aggregate`` (and every aggregation built on it): one `BaseAggregator` per batch.

    ``init`` runs when the batch starts on the task, so a task that gets no tuple of a batch
    still completes it (a combiner's partial is then its ``zero()``).
    """

    def __init__(self, input_fields: Fields, aggregator: BaseAggregator) -> None:
        self.input_fields = input_fields
        self.op = aggregator

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = _indices(self.input_fields, tctx.parent_fields[0])
        self._coll = _Collector(self, append=False)
        self.op.prepare(conf, _op_context(context))

    def start_batch(self, batch: BatchInfo) -> None:
        self._coll.batch = batch
        batch.state[self.tctx.key] = self.op.init(batch.attempt, self._coll)

    def execute(self, batch: BatchInfo, parent: int, tup: TridentTuple) -> None:
        self._coll.batch = batch
        self.op.aggregate(batch.state[self.tctx.key], _project(tup, self.input_fields, self._idx), self._coll)

    def finish_batch(self, batch: BatchInfo) -> None:
        self._coll.batch = batch
        self.op.complete(batch.state[self.tctx.key], self._coll)

    def cleanup(self) -> None:
        self.op.cleanup()


class PartitionPersistProcessor(Processor):
    """``partition_persist``: buffers the partition's batch, updates the state at its commit.

    The bolt is a committer, so ``finish_batch`` runs once the batch's ``$commit`` arrived, in
    txid order: ``begin_commit(txid)``, ``update_state``, ``commit(txid)``. A task that got no
    tuple does not touch its state (Storm's rule: for a global persist, only one task has any).
    """

    def __init__(self, state_id: str, input_fields: Fields, updater: Any) -> None:
        self.state_id = state_id
        self.input_fields = input_fields
        self.op = updater

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = _indices(self.input_fields, tctx.parent_fields[0])
        self._coll = _Collector(self, append=False)
        self.op.prepare(conf, _op_context(context))

    def start_batch(self, batch: BatchInfo) -> None:
        batch.state[self.tctx.key] = []

    def execute(self, batch: BatchInfo, parent: int, tup: TridentTuple) -> None:
        batch.state[self.tctx.key].append(_project(tup, self.input_fields, self._idx))

    def finish_batch(self, batch: BatchInfo) -> None:
        buffer = batch.state[self.tctx.key]
        if not buffer:
            return
        state = self.tctx.state
        txid = batch.attempt.txid
        self._coll.batch = batch
        state.begin_commit(txid)
        self.op.update_state(state, buffer, self._coll)
        state.commit(txid)

    def cleanup(self) -> None:
        self.op.cleanup()


class StateQueryProcessor(Processor):
    """``state_query``: one ``batch_retrieve`` per partition and batch, then ``execute`` per tuple."""

    def __init__(self, state_id: str, input_fields: Fields, query_function: Any) -> None:
        self.state_id = state_id
        self.input_fields = input_fields
        self.op = query_function

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = _indices(self.input_fields, tctx.parent_fields[0])
        self._coll = _Collector(self, append=True)
        self.op.prepare(conf, _op_context(context))

    def start_batch(self, batch: BatchInfo) -> None:
        batch.state[self.tctx.key] = []

    def execute(self, batch: BatchInfo, parent: int, tup: TridentTuple) -> None:
        batch.state[self.tctx.key].append(tup)

    def finish_batch(self, batch: BatchInfo) -> None:
        tuples = batch.state[self.tctx.key]
        if not tuples:
            return
        args = [_project(t, self.input_fields, self._idx) for t in tuples]
        results = self.op.batch_retrieve(self.tctx.state, args)
        if len(results) != len(args):
            raise ValueError(f"state_query: {type(self.op).__name__}.batch_retrieve gave {len(results)} "
                             f"results for {len(args)} tuples")
        coll = self._coll
        coll.batch = batch
        for tup, arg, result in zip(tuples, args, results):
            coll.input = tup.values
            self.op.execute(arg, result, coll)

    def cleanup(self) -> None:
        self.op.cleanup()


class MultiReduceProcessor(Processor):
    """A node with several parents (``merge``, ``join``, the DRPC return): Storm's ``MultiReducer``.

    ``input_fields[i]`` are what the reducer sees of parent ``i``.
    """

    def __init__(self, input_fields: Sequence[Fields], reducer: Any) -> None:
        self.input_fields = list(input_fields)
        self.op = reducer

    def prepare(self, conf: dict, context: Any, tctx: ProcessorContext) -> None:
        super().prepare(conf, context, tctx)
        self._idx = [_indices(f, p) for f, p in zip(self.input_fields, tctx.parent_fields)]
        self._coll = _Collector(self, append=False)

    def start_batch(self, batch: BatchInfo) -> None:
        batch.state[self.tctx.key] = self.op.init()

    def execute(self, batch: BatchInfo, parent: int, tup: TridentTuple) -> None:
        self._coll.batch = batch
        self.op.execute(batch.state[self.tctx.key], parent,
                        _project(tup, self.input_fields[parent], self._idx[parent]), self._coll)

    def finish_batch(self, batch: BatchInfo) -> None:
        self._coll.batch = batch
        self.op.complete(batch.state[self.tctx.key], self._coll)


class MergeReducer:
    """``merge``: every tuple of every parent, as it comes."""

    def init(self) -> None:
        return None

    def execute(self, state: None, parent: int, tup: TridentTuple, collector: TridentCollector) -> None:
        collector.emit(tup.values)

    def complete(self, state: None, collector: TridentCollector) -> None:
        pass


class JoinReducer:
    """``join``: the inner join of two (or more) streams on their leading ``num_join`` fields,
    within one batch (Storm's ``JoinerMultiReducer``). Emits the join values, then the other
    values of each side in stream order, for every combination of matching tuples."""

    def __init__(self, num_join: int, side_widths: Sequence[int]) -> None:
        self.num_join = num_join
        self.sides = len(side_widths)

    def init(self) -> dict:
        return {}

    def execute(self, state: dict, parent: int, tup: TridentTuple, collector: TridentCollector) -> None:
        values = tup.values
        try:
            key = tuple(values[: self.num_join])
            sides = state.setdefault(key, [[] for _ in range(self.sides)])
        except TypeError:
            raise ValueError(f"join: the join values {values[: self.num_join]!r} are not hashable") from None
        sides[parent].append(values[self.num_join:])

    def complete(self, state: dict, collector: TridentCollector) -> None:
        for key, sides in state.items():
            for combo in itertools.product(*sides):
                collector.emit([*key, *itertools.chain.from_iterable(combo)])


class ReturnResultsReducer:
    """The end of a DRPC stream (Storm's ``ReturnResultsReducer``): parent 0 carries each call's
    return-info, parent 1 the stream's results. Per batch, each call gets the JSON list of the
    result tuples' values, emitted as ``[result, return_info]`` for the DRPC return bolt."""

    def init(self) -> tuple[list, list]:
        return [], []

    def execute(self, state: tuple[list, list], parent: int, tup: TridentTuple,
                collector: TridentCollector) -> None:
        state[parent].append(tup.values[0] if parent == 0 else tup.values)

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

    def execute(self, tuple: TridentTuple, collector: TridentCollector) -> None:  # noqa: A002
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

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:  # noqa: A002
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

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:  # noqa: A002
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

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:  # noqa: A002
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
        self.agg.aggregate(groups[key], TridentTuple(self.input_fields, [values[i] for i in layout[2]]), coll)

    def complete(self, state: list, collector: TridentCollector) -> None:
        _, coll, groups = state
        for key, value in groups.items():
            coll.group = key
            self.agg.complete(value, coll)

    def cleanup(self) -> None:
        self.agg.cleanup()


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

    def aggregate(self, state: list, tuple: TridentTuple, collector: TridentCollector) -> None:  # noqa: A002
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
    processors in the bolt; ``outputs`` the streams leaving the bolt from this node.
    """

    name: str
    processor: Processor
    fields: Fields
    parents: tuple[tuple[str, Any], ...]
    children: tuple[tuple[int, int], ...]
    outputs: tuple[str, ...]
    state_id: str | None = None


class SubtopologyBody(BatchBody):
    """The body of a fused Trident bolt (Storm's ``SubtopologyBolt``).

    ``nodes`` are in topological order; ``input_fields`` gives each input stream's fields;
    ``states`` the factories of the states this bolt holds (one `State` per task, made in
    ``prepare`` with the task's partition index and the bolt's task count).
    """

    def __init__(self, nodes: Sequence[BodyNode], input_fields: dict[str, Fields],
                 states: dict[str, Any]) -> None:
        self.nodes = tuple(nodes)
        self.input_fields = dict(input_fields)
        self.state_factories = dict(states)

    def prepare(self, conf: dict, context: Any, output: BatchOutput) -> None:
        self._output = output
        tasks = context.get_component_tasks(context.get_this_component_id())
        index = context.get_this_task_index()
        self._states = {sid: f.make_state(conf, context, index, len(tasks))
                        for sid, f in self.state_factories.items()}
        self._receivers: dict[str, list[tuple[Processor, int, Fields]]] = {}
        for i, node in enumerate(self.nodes):
            parent_fields = []
            for pi, (kind, ref) in enumerate(node.parents):
                if kind == "node":
                    parent_fields.append(self.nodes[ref].fields)
                else:
                    fields = self.input_fields[ref]
                    parent_fields.append(fields)
                    self._receivers.setdefault(ref, []).append((node.processor, pi, fields))
            tctx = ProcessorContext(node.name, parent_fields, node.fields, i, self._emitter(node),
                                    output.report_error, self._states.get(node.state_id))
            node.processor.prepare(conf, context, tctx)

    def _emitter(self, node: BodyNode) -> Callable[[BatchInfo, list], None]:
        children = [(self.nodes[c].processor, pi) for c, pi in node.children]
        outputs = node.outputs
        fields = node.fields
        output = self._output

        def emit(batch: BatchInfo, values: list) -> None:
            if children:
                tup = TridentTuple(fields, values)
                for proc, pi in children:
                    proc.execute(batch, pi, tup)
            for stream in outputs:
                output.emit(batch, stream, values)

        return emit

    def init_batch(self, batch: BatchInfo) -> None:
        for node in self.nodes:
            node.processor.start_batch(batch)

    def execute(self, batch: BatchInfo, stream: str, values: list) -> None:
        receivers = self._receivers.get(stream)
        if receivers is None:
            raise ValueError(f"Trident bolt got a tuple on stream {stream!r}, which it does not read")
        for proc, pi, fields in receivers:
            proc.execute(batch, pi, TridentTuple(fields, values))

    def finish_batch(self, batch: BatchInfo) -> None:
        for node in self.nodes:
            node.processor.finish_batch(batch)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.processor.cleanup()


__all__ = [
    "AggregateProcessor", "BodyNode", "EachProcessor", "FilterProcessor",
    "MapProcessor", "MultiReduceProcessor", "PartitionPersistProcessor", "ProjectProcessor",
    "StateQueryProcessor", "SubtopologyBody", "batch_partition",
]
