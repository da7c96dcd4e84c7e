"""The processors a stream bolt runs, one per operation (Storm's ``streams.processors``).

A processor gets each value with ``execute(value, stream_id)`` and hands its results to its
`ProcessorContext` with ``forward``: the context runs the next processor in the same bolt, or
emits. A `BatchProcessor` (aggregations, joins) in a windowed part of the stream keeps what it
gets until ``punctuate`` (the window's end) and then forwards its results and the punctuation;
outside a window it forwards an updated result for each value.
"""

from __future__ import annotations

import abc
from collections import defaultdict
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

from .operations import CombinerAggregator, StateUpdater
from .pair import Pair, as_pair
from .util import PUNCTUATION

if TYPE_CHECKING:
    from .contexts import ProcessorContext


class Processor(abc.ABC):
    """An operation's runtime (Storm's ``Processor``)."""

    @abc.abstractmethod
    def init(self, context: ProcessorContext) -> None:
        """Take the context results are forwarded to (at the bolt's prepare)."""

    @abc.abstractmethod
    def execute(self, input: Any, stream_id: str) -> None:
        """Process one value that came on ``stream_id``."""

    @abc.abstractmethod
    def punctuate(self, stream: str | None) -> None:
        """The window ended on ``stream`` (None: on every stream of the bolt's input)."""


class BatchProcessor:
    """Marks a processor that aggregates over a window (Storm's ``BatchProcessor``)."""


class StatefulProcessor:
    """Marks a processor that keeps its data in the bolt's `squall.KeyValueState` (Storm's
    ``StatefulProcessor``): the bolt is then a stateful bolt, checkpointed."""

    def init_state(self, state: Any) -> None:
        """Take the bolt's state (as last committed), before the first value."""
        raise NotImplementedError


class BaseProcessor(Processor):
    """What every processor shares (Storm's ``BaseProcessor``): ``execute(value)`` without the
    stream, and a punctuation that finishes the window (``finish``) and is passed on once it came
    on every windowed parent stream."""

    def __init__(self) -> None:
        self._punctuated: set[str] = set()
        self.context: Any = None

    def init(self, context: ProcessorContext) -> None:
        """Keep the context."""
        self.context = context

    def execute(self, input: Any, stream_id: str) -> None:
        """``process(input)`` (a processor that tells its streams apart overrides this)."""
        self.process(input)

    def process(self, input: Any) -> None:
        """Process one value (Storm's one-argument ``execute``)."""

    def punctuate(self, stream: str | None) -> None:
        """Finish the window and pass the punctuation on, once it has come on every windowed
        parent stream (None: at once)."""
        if stream is None or self._should_punctuate(stream):
            self.finish()
            self.context.forward(PUNCTUATION)
            self._punctuated.clear()

    def finish(self) -> None:
        """Forward what the window made (a batch processor's results)."""

    def may_be_forward_agg_update(self, result: Callable[[], Any]) -> None:
        """Outside a window, forward the updated aggregate at once (Storm's
        ``mayBeForwardAggUpdate``); in one, ``finish`` does at the window's end."""
        if not self.context.is_windowed():
            self.context.forward(result())

    def _should_punctuate(self, parent_stream: str) -> bool:
        self._punctuated.add(parent_stream)
        return self._punctuated == set(self.context.get_windowed_parent_streams())


class MapProcessor(BaseProcessor):
    """``map``: forwards ``function(value)``."""

    def __init__(self, function: Callable[[Any], Any]) -> None:
        super().__init__()
        self.function = function

    def process(self, input: Any) -> None:
        self.context.forward(self.function(input))


class MapToPairProcessor(MapProcessor):
    """``map_to_pair``: forwards ``function(value)`` as a `Pair`."""

    def process(self, input: Any) -> None:
        self.context.forward(as_pair(self.function(input), "map_to_pair's function"))


class FlatMapProcessor(BaseProcessor):
    """``flat_map``: forwards each of ``function(value)``."""

    def __init__(self, function: Callable[[Any], Any], pairs: bool = False) -> None:
        super().__init__()
        self.function = function
        self.pairs = pairs

    def process(self, input: Any) -> None:
        for res in self.function(input):
            self.context.forward(as_pair(res, "flat_map_to_pair's function") if self.pairs else res)


class FilterProcessor(BaseProcessor):
    """``filter``: forwards the values ``predicate`` passes."""

    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        super().__init__()
        self.predicate = predicate

    def process(self, input: Any) -> None:
        if self.predicate(input):
            self.context.forward(input)


class PeekProcessor(BaseProcessor):
    """``peek``: calls ``consumer(value)`` and forwards the value."""

    def __init__(self, consumer: Callable[[Any], Any]) -> None:
        super().__init__()
        self.consumer = consumer

    def process(self, input: Any) -> None:
        self.consumer(input)
        self.context.forward(input)


class ForEachProcessor(BaseProcessor):
    """``for_each`` and ``print``: calls ``consumer(value)``; forwards nothing."""

    def __init__(self, consumer: Callable[[Any], Any]) -> None:
        super().__init__()
        self.consumer = consumer

    def process(self, input: Any) -> None:
        self.consumer(input)


class BranchProcessor(BaseProcessor):
    """``branch``: forwards each value on the stream of the first predicate it passes (a value
    no predicate passes is dropped)."""

    def __init__(self) -> None:
        super().__init__()
        self.predicates: list[tuple[Callable[[Any], bool], str]] = []

    def add_predicate(self, predicate: Callable[[Any], bool], stream: str) -> None:
        """Values that pass ``predicate`` (and none before it) go on ``stream``."""
        self.predicates.append((predicate, stream))

    def process(self, input: Any) -> None:
        for predicate, stream in self.predicates:
            if predicate(input):
                self.context.forward(input, stream)
                break


class MapValuesProcessor(BaseProcessor):
    """``map_values``: forwards ``(key, function(value))``."""

    def __init__(self, function: Callable[[Any], Any]) -> None:
        super().__init__()
        self.function = function

    def process(self, input: Pair) -> None:
        self.context.forward(Pair(input[0], self.function(input[1])))


class FlatMapValuesProcessor(BaseProcessor):
    """``flat_map_values``: forwards ``(key, r)`` for each ``r`` of ``function(value)``."""

    def __init__(self, function: Callable[[Any], Any]) -> None:
        super().__init__()
        self.function = function

    def process(self, input: Pair) -> None:
        for res in self.function(input[1]):
            self.context.forward(Pair(input[0], res))


class AggregateProcessor(BaseProcessor, BatchProcessor):
    """``aggregate``: one aggregate of every value (per partition; ``emit_aggregate``: forward
    the accumulator, for a merge downstream, not the result)."""

    def __init__(self, aggregator: CombinerAggregator, emit_aggregate: bool = False) -> None:
        super().__init__()
        self.aggregator = aggregator
        self.emit_aggregate = emit_aggregate
        self.state: Any = None
        self.empty = True

    def process(self, input: Any) -> None:
        if self.empty:
            self.state, self.empty = self.aggregator.init(), False
        self.state = self.aggregator.apply(self.state, input)
        self.may_be_forward_agg_update(self._out)

    def _out(self) -> Any:
        return self.state if self.emit_aggregate else self.aggregator.result(self.state)

    def finish(self) -> None:
        if not self.empty:
            self.context.forward(self._out())
            self.state, self.empty = None, True


class MergeAggregateProcessor(BaseProcessor, BatchProcessor):
    """Merges the partitions' accumulators of an ``aggregate`` into the result."""

    def __init__(self, aggregator: CombinerAggregator) -> None:
        super().__init__()
        self.aggregator = aggregator
        self.state: Any = None
        self.empty = True

    def process(self, input: Any) -> None:
        if self.empty:
            self.state, self.empty = self.aggregator.init(), False
        self.state = self.aggregator.merge(self.state, input)
        self.may_be_forward_agg_update(lambda: self.aggregator.result(self.state))

    def finish(self) -> None:
        if not self.empty:
            self.context.forward(self.aggregator.result(self.state))
            self.state, self.empty = None, True


class ReduceProcessor(BaseProcessor, BatchProcessor):
    """``reduce``: ``reducer`` over every value."""

    def __init__(self, reducer: Callable[[Any, Any], Any]) -> None:
        super().__init__()
        self.reducer = reducer
        self.agg: Any = None
        self.empty = True

    def process(self, input: Any) -> None:
        self.agg = input if self.empty else self.reducer(self.agg, input)
        self.empty = False
        self.may_be_forward_agg_update(lambda: self.agg)

    def finish(self) -> None:
        if not self.empty:
            self.context.forward(self.agg)
            self.agg, self.empty = None, True


class AggregateByKeyProcessor(BaseProcessor, BatchProcessor):
    """``aggregate_by_key``, ``count_by_key``, ``group_by_key``: one aggregate per key."""

    def __init__(self, aggregator: CombinerAggregator, emit_aggregate: bool = False) -> None:
        super().__init__()
        self.aggregator = aggregator
        self.emit_aggregate = emit_aggregate
        self.state: dict[Any, Any] = {}

    def process(self, input: Pair) -> None:
        key, val = input
        acc = self.state[key] if key in self.state else self.aggregator.init()
        self.state[key] = self.aggregator.apply(acc, val)
        self.may_be_forward_agg_update(lambda: Pair(key, self._out(self.state[key])))

    def _out(self, acc: Any) -> Any:
        return acc if self.emit_aggregate else self.aggregator.result(acc)

    def finish(self) -> None:
        for key, acc in self.state.items():
            self.context.forward(Pair(key, self._out(acc)))
        self.state.clear()


class MergeAggregateByKeyProcessor(BaseProcessor, BatchProcessor):
    """Merges the partitions' accumulators of an ``aggregate_by_key`` per key."""

    def __init__(self, aggregator: CombinerAggregator) -> None:
        super().__init__()
        self.aggregator = aggregator
        self.state: dict[Any, Any] = {}

    def process(self, input: Pair) -> None:
        key, val = input
        acc = self.state[key] if key in self.state else self.aggregator.init()
        self.state[key] = self.aggregator.merge(acc, val)
        self.may_be_forward_agg_update(lambda: Pair(key, self.aggregator.result(self.state[key])))

    def finish(self) -> None:
        for key, acc in self.state.items():
            self.context.forward(Pair(key, self.aggregator.result(acc)))
        self.state.clear()


class ReduceByKeyProcessor(BaseProcessor, BatchProcessor):
    """``reduce_by_key``: ``reducer`` over each key's values."""

    def __init__(self, reducer: Callable[[Any, Any], Any]) -> None:
        super().__init__()
        self.reducer = reducer
        self.state: dict[Any, Any] = {}

    def process(self, input: Pair) -> None:
        key, val = input
        res = self.reducer(self.state[key], val) if key in self.state else val
        self.state[key] = res
        self.may_be_forward_agg_update(lambda: Pair(key, res))

    def finish(self) -> None:
        for key, val in self.state.items():
            self.context.forward(Pair(key, val))
        self.state.clear()


class JoinType(Enum):
    """A join side's kind (Storm's ``JoinProcessor.JoinType``)."""

    INNER = "inner"
    OUTER = "outer"


class JoinProcessor(BaseProcessor, BatchProcessor):
    """``join`` and the outer joins of two pair streams on their keys: in a window, of the
    window's values at its end; outside one, each value with the other side's values so far.

    Every value of a key is joined with every value of that key on the other side (a relational
    join, as ``PairStream.join``'s javadoc says). Storm's ``JoinProcessor`` took a key's table
    values out (``removeAll``) at the first row with that key, so later rows of the key matched
    nothing: a window with several values of a key on both sides lost all but one row's matches
    (of 2,666 numbers, 13,000 matches in their windows, 1,300 came out)."""

    def __init__(self, left_stream: str, right_stream: str, value_joiner: Callable[[Any, Any], Any],
                 left_type: JoinType = JoinType.INNER, right_type: JoinType = JoinType.INNER) -> None:
        super().__init__()
        self.left_stream = left_stream
        self.right_stream = right_stream
        self.value_joiner = value_joiner
        self.left_type = left_type
        self.right_type = right_type
        # a window's values, joined at its end
        self.left_rows: list[Pair] = []
        self.right_rows: list[Pair] = []
        # outside a window, every value so far by key, kept as it comes: a table rebuilt from
        # the rows at each value made n values cost n * n / 2 steps (20,000 values of 1,001 keys:
        # 17.4 s, against 0.13 s kept so)
        self.left_table: dict[Any, list[Any]] = defaultdict(list)
        self.right_table: dict[Any, list[Any]] = defaultdict(list)

    def get_left_stream(self) -> str:
        """The left stream's id."""
        return self.left_stream

    def get_right_stream(self) -> str:
        """The right stream's id."""
        return self.right_stream

    def execute(self, input: Any, stream_id: str) -> None:
        if stream_id == self.left_stream:
            left = True
        elif stream_id == self.right_stream:
            left = False
        else:
            return
        pair = Pair(input[0], input[1])
        if self.context.is_windowed():
            (self.left_rows if left else self.right_rows).append(pair)
            return
        # the new value with the other side's so far; the other side's unmatched values were
        # forwarded (outer) when they came, not again at each new value
        own, other = (self.left_table, self.right_table) if left else (self.right_table, self.left_table)
        own_type, other_type = (self.left_type, self.right_type) if left else (self.right_type, self.left_type)
        for key, other_value, value in _join(other, [pair], other_type, own_type, table_leftovers=False):
            lv, rv = (value, other_value) if left else (other_value, value)
            self.context.forward(Pair(key, self.value_joiner(lv, rv)))
        own[pair.first].append(pair.second)

    def finish(self) -> None:
        self._join_and_forward(self.left_rows, self.right_rows)
        self.left_rows.clear()
        self.right_rows.clear()

    def _join_and_forward(self, left: list[Pair], right: list[Pair]) -> None:
        # the smaller side makes the table, as Storm's does
        if len(left) < len(right):
            for key, lv, rv in _join(_table(left), right, self.left_type, self.right_type):
                self.context.forward(Pair(key, self.value_joiner(lv, rv)))
        else:
            for key, rv, lv in _join(_table(right), left, self.right_type, self.left_type):
                self.context.forward(Pair(key, self.value_joiner(lv, rv)))


def _table(rows: list[Pair]) -> dict[Any, list[Any]]:
    table: dict[Any, list[Any]] = defaultdict(list)
    for key, value in rows:
        table[key].append(value)
    return table


def _join(table: dict[Any, list[Any]], rows: list[Pair], table_type: JoinType, rows_type: JoinType,
          table_leftovers: bool = True) -> list[tuple[Any, Any, Any]]:
    """(key, table value, row value) for each match: each row with every table value of its key;
    for an outer side, its unmatched values with None on the other side (the table's only with
    ``table_leftovers``)."""
    out: list[tuple[Any, Any, Any]] = []
    matched: set[Any] = set()
    for key, value in rows:
        matches = table.get(key)
        if matches:
            matched.add(key)
            out.extend((key, m, value) for m in matches)
        elif rows_type is JoinType.OUTER:
            out.append((key, None, value))
    if table_type is JoinType.OUTER and table_leftovers:
        out.extend((key, v, None) for key, values in table.items() if key not in matched for v in values)
    return out


class CoGroupByKeyProcessor(BaseProcessor, BatchProcessor):
    """``co_group_by_key``: per key, the pair of the two streams' lists of values (of the window
    at its end; outside a window, of every value so far, forwarded for each value's key)."""

    def __init__(self, first_stream: str, second_stream: str) -> None:
        super().__init__()
        self.first_stream = first_stream
        self.second_stream = second_stream
        self.first: dict[Any, list[Any]] = defaultdict(list)
        self.second: dict[Any, list[Any]] = defaultdict(list)

    def execute(self, input: Any, stream_id: str) -> None:
        key, val = input[0], input[1]
        if stream_id == self.first_stream:
            self.first[key].append(val)
        elif stream_id == self.second_stream:
            self.second[key].append(val)
        else:
            return
        if not self.context.is_windowed():
            # outside a window, the key's updated group, as an aggregation forwards its updated
            # result. Storm's forwarded every key's and took the second stream's values out
            # (``removeAll``) as it did, so each value of the second stream was in one result
            # and then gone: 3 values of a key came out as 1.
            self.context.forward(Pair(key, Pair(list(self.first.get(key, [])), list(self.second.get(key, [])))))

    def finish(self) -> None:
        self._forward_values()
        self.first.clear()
        self.second.clear()

    def _forward_values(self) -> None:
        # at a window's end, as Storm's: the first side's keys with the second's values (taken),
        # then the second's rest
        for key, values in self.first.items():
            self.context.forward(Pair(key, Pair(list(values), self.second.pop(key, []))))
        for key, values in self.second.items():
            self.context.forward(Pair(key, Pair(self.first.pop(key, []), list(values))))


class UpdateStateByKeyProcessor(BaseProcessor, StatefulProcessor):
    """``update_state_by_key``: each key's state, updated with each value and forwarded."""

    def __init__(self, state_updater: StateUpdater) -> None:
        super().__init__()
        self.state_updater = state_updater
        self.key_value_state: Any = None

    def init_state(self, state: Any) -> None:
        self.key_value_state = state

    def process(self, input: Pair) -> None:
        key, val = input
        agg = self.key_value_state.get(key)
        if agg is None:
            agg = self.state_updater.init()
        new = self.state_updater.apply(agg, val)
        self.key_value_state.put(key, new)
        self.context.forward(Pair(key, new))


class StateQueryProcessor(BaseProcessor, StatefulProcessor):
    """``state_query``: forwards ``(key, state)`` for each key whose state the ``stream_state``'s
    bolt has (a key it has not seen forwards nothing)."""

    def __init__(self, stream_state: Any) -> None:
        super().__init__()
        self.stream_state = stream_state
        self.key_value_state: Any = None

    def init_state(self, state: Any) -> None:
        self.key_value_state = state

    def get_stream_state(self) -> Any:
        """The `StreamState` queried."""
        return self.stream_state

    def process(self, input: Any) -> None:
        value = self.key_value_state.get(input)
        if value is not None:
            self.context.forward(Pair(input, value))
