"""What a Trident user writes: functions, filters, aggregators (Storm's ``trident.operation``).

Every operation is pickled into the bolt that runs it (one copy per task), where the bolt calls
``prepare(conf, context)`` once before the first tuple and ``cleanup()`` when the task stops.
Raising `FailedException` from any method fails the whole batch, which Trident replays with the
same txid; any other exception is a crash of the task, as in a plain bolt.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._errors import FailedException
from .tuple import TridentTuple

if TYPE_CHECKING:
    from .._context import TopologyContext
    from .fluent import Stream


class TridentOperationContext:
    """What an operation's ``prepare`` gets as ``context`` (Storm's ``TridentOperationContext``).

    It answers the plain `TopologyContext` calls (``get_this_task_id()`` and the others, by
    delegation) and says which partition of the operation this copy is.
    """

    def __init__(self, topology_context: TopologyContext) -> None:
        self._context = topology_context

    def num_partitions(self) -> int:
        """How many copies (tasks) of this operation run."""
        return len(self._context.get_component_tasks(self._context.get_this_component_id()))

    def get_partition_index(self) -> int:
        """Which copy this is, from 0."""
        return self._context.get_this_task_index()

    def __getattr__(self, name: str) -> Any:
        # Only called for names not defined here: everything a TopologyContext answers.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._context, name)


class TridentCollector(abc.ABC):
    """Where an operation emits (Storm's ``TridentCollector``)."""

    @abc.abstractmethod
    def emit(self, values: list) -> None:
        """Emit one tuple of ``values`` (the operation's output fields, in order)."""

    @abc.abstractmethod
    def report_error(self, error: BaseException) -> None:
        """Report ``error`` (shown in the topology's errors) without failing the batch."""

    def emit_many(self, rows: list[list]) -> None:
        """Emit each of ``rows`` (lists made for this and not kept), in order: ``emit`` of each
        unless the collector takes them in one call (squall's own do; a spout reading a block
        of records at a time hands them over so)."""
        for values in rows:
            self.emit(values)

    def flush(self) -> None:
        """Storm's ``flush()``: squall's collectors send at once, so there is nothing to do."""


class BaseOperation:
    """Base of every Trident operation: ``prepare`` and ``cleanup`` do nothing by default."""

    def prepare(self, conf: dict, context: TridentOperationContext) -> None:
        """Called once per task before the first tuple; ``conf`` is the topology's configuration."""

    def cleanup(self) -> None:
        """Called once when the task stops."""


class BaseFunction(BaseOperation, abc.ABC):
    """``each(input_fields, function, function_fields)``: what it emits is appended to the input.

    Emitting nothing drops the input tuple; emitting twice makes two tuples.
    """

    @abc.abstractmethod
    def execute(self, tuple: TridentTuple, collector: TridentCollector) -> None:
        """Handle one tuple (the projection on ``input_fields``); emit the function fields' values."""


class BaseFilter(BaseOperation, abc.ABC):
    """``each(input_fields, filter)`` / ``filter(filter)``: keeps the tuples it says yes to."""

    @abc.abstractmethod
    def is_keep(self, tuple: TridentTuple) -> bool:
        """True to keep the tuple."""


class MapFunction(BaseOperation, abc.ABC):
    """``map(function, out_fields=None)``: one tuple in, one out."""

    @abc.abstractmethod
    def execute(self, tuple: TridentTuple) -> list:
        """The output tuple's values."""


class FlatMapFunction(BaseOperation, abc.ABC):
    """``flat_map(function, out_fields=None)``: one tuple in, any number out."""

    @abc.abstractmethod
    def execute(self, tuple: TridentTuple) -> Iterable[list]:
        """The output tuples' values, one list each."""


class Consumer(BaseOperation, abc.ABC):
    """``peek(consumer)``: sees every tuple, which passes on unchanged."""

    @abc.abstractmethod
    def accept(self, tuple: TridentTuple) -> None:
        """Look at one tuple."""


class CombinerAggregator(BaseOperation, abc.ABC):
    """An aggregate built by combining values, so it can be partly computed before repartitioning.

    ``init`` maps one tuple to a value, ``combine`` merges two values, ``zero`` is the value of
    no tuples (what an empty batch or group gives).
    """

    @abc.abstractmethod
    def init(self, tuple: TridentTuple) -> Any:
        """The value of one tuple."""

    @abc.abstractmethod
    def combine(self, val1: Any, val2: Any) -> Any:
        """Two values merged into one."""

    @abc.abstractmethod
    def zero(self) -> Any:
        """The value of no tuples."""


class ReducerAggregator(BaseOperation, abc.ABC):
    """An aggregate folded tuple by tuple from ``init()``; all tuples move to one partition first."""

    @abc.abstractmethod
    def init(self) -> Any:
        """The starting value."""

    @abc.abstractmethod
    def reduce(self, curr: Any, tuple: TridentTuple) -> Any:
        """``curr`` updated with one tuple."""


class BaseAggregator(BaseOperation, abc.ABC):
    """The general aggregator (Storm's ``Aggregator``): any state, emits when it likes.

    Per batch (and per group, after ``group_by``): ``init`` makes the state, ``aggregate`` takes
    each tuple, ``complete`` ends it. Its emits replace the input tuples.
    """

    @abc.abstractmethod
    def init(self, batch_id: Any, collector: TridentCollector) -> Any:
        """The state for one batch (``batch_id`` is its `TransactionAttempt`)."""

    @abc.abstractmethod
    def aggregate(self, state: Any, tuple: TridentTuple, collector: TridentCollector) -> None:
        """Take one tuple into ``state`` (a mutable object, or kept by the aggregator)."""

    @abc.abstractmethod
    def complete(self, state: Any, collector: TridentCollector) -> None:
        """The batch (or group) ended: emit the result."""


class TridentMultiReducerContext:
    """What a `MultiReducer`'s (or `GroupedMultiReducer`'s) ``prepare`` gets as ``context``
    (Storm's ``TridentMultiReducerContext``).

    ``input_fields[i]`` are the fields of what the reducer sees of stream ``i``;
    ``make_projection_factory(i, fields)`` gives a callable that takes such a tuple of stream
    ``i`` and returns the `TridentTuple` of just ``fields`` (Storm's ``ProjectionFactory``).
    The plain `TridentOperationContext` calls (``get_partition_index()`` and the others) are
    answered too.
    """

    def __init__(self, input_fields: list[Any], operation_context: Any = None) -> None:
        self.input_fields = list(input_fields)
        self._operation_context = operation_context

    def make_projection_factory(self, stream_index: int, fields: Any) -> Any:
        from .._fields import Fields

        have = self.input_fields[stream_index]
        want = fields if isinstance(fields, Fields) else Fields(fields)
        for name in want:
            if name not in have:
                raise ValueError(f"make_projection_factory: field {name!r} is not in stream {stream_index}'s "
                                 f"fields {have.to_list()}")
        at = [have.index(n) for n in want]

        def project(tuple: TridentTuple) -> TridentTuple:
            values = tuple.values
            return TridentTuple(want, [values[i] for i in at])

        return project

    def __getattr__(self, name: str) -> Any:
        context = self.__dict__.get("_operation_context")
        if context is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(context, name)


class MultiReducer(abc.ABC):
    """What `TridentTopology.multi_reduce` runs over several streams (Storm's ``MultiReducer``).

    Per partition and batch: ``init`` makes the state, ``execute`` takes each tuple of each
    stream (``stream_index`` is the stream's position in the ``multi_reduce`` call), ``complete``
    ends the batch. Its emits are the output stream (fresh tuples of the ``multi_reduce``'s
    output fields). ``prepare`` gets a `TridentMultiReducerContext`.
    """

    def prepare(self, conf: dict, context: TridentMultiReducerContext) -> None:
        """Called once per task before the first batch."""

    def cleanup(self) -> None:
        """Called when the task stops."""

    @abc.abstractmethod
    def init(self, collector: TridentCollector) -> Any:
        """The state for one batch on this partition."""

    @abc.abstractmethod
    def execute(self, state: Any, stream_index: int, input: TridentTuple, collector: TridentCollector) -> None:
        """One tuple of stream ``stream_index`` (its input fields)."""

    @abc.abstractmethod
    def complete(self, state: Any, collector: TridentCollector) -> None:
        """The batch ended on this partition."""


class GroupedMultiReducer(abc.ABC):
    """What `TridentTopology.multi_reduce` runs over several grouped streams (Storm's
    ``GroupedMultiReducer``): as `MultiReducer`, per group of each batch, where a group is the
    values of each stream's group fields (equal values are one group, whichever stream they
    came on). ``group`` is the `TridentTuple` of the group's values (named as the first stream
    that brought it names them); ``input`` is the tuple's input fields.
    """

    def prepare(self, conf: dict, context: TridentMultiReducerContext) -> None:
        """Called once per task before the first batch."""

    def cleanup(self) -> None:
        """Called when the task stops."""

    @abc.abstractmethod
    def init(self, collector: TridentCollector, group: TridentTuple) -> Any:
        """The state for one group of one batch."""

    @abc.abstractmethod
    def execute(self, state: Any, stream_index: int, group: TridentTuple, input: TridentTuple,
                collector: TridentCollector) -> None:
        """One tuple of stream ``stream_index`` in ``group``."""

    @abc.abstractmethod
    def complete(self, state: Any, group: TridentTuple, collector: TridentCollector) -> None:
        """The batch ended: ``group``'s last call."""


class Assembly(abc.ABC):
    """A reusable piece of a stream (``apply_assembly``): a function from stream to stream."""

    @abc.abstractmethod
    def apply(self, stream: Stream) -> Stream:
        """``stream`` with this assembly's operations added."""


__all__ = [
    "Assembly", "BaseAggregator", "BaseFilter", "BaseFunction", "BaseOperation", "CombinerAggregator",
    "Consumer", "FailedException", "FlatMapFunction", "GroupedMultiReducer", "MapFunction", "MultiReducer",
    "ReducerAggregator", "TridentCollector", "TridentMultiReducerContext", "TridentOperationContext",
]
