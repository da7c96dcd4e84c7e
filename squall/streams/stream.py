"""`Stream` and `PairStream`, the values flowing through a topology built with a `StreamBuilder`
(Storm's ``Stream``, ``PairStream`` and ``StreamState``).

Each operation adds a node to the builder's graph and returns a new stream on it; nothing runs
until ``StreamBuilder.build()``. An operation that needs the values of a key (or of the whole
stream) together regroups the stream first when it runs on more than one task: by key (fields
grouping on ``key``) for the by-key operations, joins and state, globally for ``aggregate`` and
``reduce``. In a window, or when the stream is regrouped, an aggregation aggregates each
partition first and merges the partitions' accumulators after the regrouping, as Storm's does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .._components import BasicBolt, Bolt
from .._fields import Fields
from .._system import DEFAULT_STREAM
from ._graph import GroupingInfo, Node, PartitionNode, ProcessorNode, SinkNode, SpoutNode, WindowNode
from .operations import (
    CombinerAggregator,
    IdentityFunction,
    PairValueJoiner,
    PrintConsumer,
    StateUpdater,
    as_callable,
)
from .operations.aggregators import Count
from .processors import (
    AggregateByKeyProcessor,
    AggregateProcessor,
    BranchProcessor,
    CoGroupByKeyProcessor,
    FilterProcessor,
    FlatMapProcessor,
    FlatMapValuesProcessor,
    ForEachProcessor,
    JoinProcessor,
    JoinType,
    MapProcessor,
    MapToPairProcessor,
    MapValuesProcessor,
    MergeAggregateByKeyProcessor,
    MergeAggregateProcessor,
    PeekProcessor,
    ReduceByKeyProcessor,
    ReduceProcessor,
    StateQueryProcessor,
    UpdateStateByKeyProcessor,
)
from .windowing import Window

if TYPE_CHECKING:
    from .builder import StreamBuilder

KEY = Fields("key")
VALUE = Fields("value")
KEY_VALUE = Fields("key", "value")


def _aggregator(aggregator_or_initial: Any, accumulator: Any, combiner: Any, what: str) -> CombinerAggregator:
    """Storm's two overloads: a `CombinerAggregator`, or an initial value, an accumulator and a
    combiner."""
    if accumulator is None and combiner is None:
        if not isinstance(aggregator_or_initial, CombinerAggregator):
            raise TypeError(f"{what} takes a CombinerAggregator, or an initial value, an accumulator and a "
                            f"combiner; got {type(aggregator_or_initial).__name__} alone")
        return aggregator_or_initial
    if accumulator is None or combiner is None:
        raise TypeError(f"{what} with an initial value needs both an accumulator and a combiner")
    return CombinerAggregator.of(aggregator_or_initial, as_callable(accumulator, "apply", what),
                                 as_callable(combiner, "apply", what))


class Stream:
    """A stream of values (Storm's ``Stream<T>``): what ``StreamBuilder.new_stream`` returns.

    ``node`` is the graph node whose output this stream is, ``stream`` that output's id.
    """

    def __init__(self, stream_builder: StreamBuilder, node: Node, stream: str | None = None) -> None:
        self.stream_builder = stream_builder
        self.node = node
        self.stream = stream if stream is not None else node.output_streams[0]

    # --- operations -------------------------------------------------------------------------------

    def filter(self, predicate: Callable[[Any], bool]) -> Stream:
        """The values ``predicate`` passes."""
        fn = as_callable(predicate, "test", "filter")
        return type(self)._same(self, self._add_processor_node(FilterProcessor(fn), self.node.output_fields, True))

    def map(self, function: Callable[[Any], Any]) -> Stream:
        """``function(value)`` of each value."""
        return Stream(self.stream_builder,
                      self._add_processor_node(MapProcessor(as_callable(function, "apply", "map")), VALUE))

    def map_to_pair(self, function: Callable[[Any], Any]) -> PairStream:
        """A `PairStream` of ``function(value)`` (a `Pair`, or a 2-tuple) of each value."""
        fn = as_callable(function, "apply", "map_to_pair")
        return PairStream(self.stream_builder, self._add_processor_node(MapToPairProcessor(fn), KEY_VALUE))

    def flat_map(self, function: Callable[[Any], Iterable[Any]]) -> Stream:
        """Each of ``function(value)`` (an iterable) of each value."""
        fn = as_callable(function, "apply", "flat_map")
        return Stream(self.stream_builder, self._add_processor_node(FlatMapProcessor(fn), VALUE))

    def flat_map_to_pair(self, function: Callable[[Any], Iterable[Any]]) -> PairStream:
        """A `PairStream` of each of ``function(value)`` (pairs) of each value."""
        fn = as_callable(function, "apply", "flat_map_to_pair")
        return PairStream(self.stream_builder, self._add_processor_node(FlatMapProcessor(fn, pairs=True), KEY_VALUE))

    def window(self, window: Window) -> Stream:
        """This stream cut into ``window`` s (`TumblingWindows`, `SlidingWindows`): the
        aggregations after it aggregate each window, and emit at its end."""
        if not isinstance(window, Window):
            raise TypeError(f"window takes a TumblingWindows or SlidingWindows, got {type(window).__name__}")
        return type(self)._same(self, self._add_node(WindowNode(window, self.stream, self.node.output_fields)))

    def for_each(self, action: Callable[[Any], Any]) -> None:
        """Call ``action(value)`` on each value (a terminal operation)."""
        self._add_processor_node(ForEachProcessor(as_callable(action, "accept", "for_each")), Fields())

    def peek(self, action: Callable[[Any], Any]) -> Stream:
        """Call ``action(value)`` on each value as it passes (for debugging)."""
        fn = as_callable(action, "accept", "peek")
        return type(self)._same(self, self._add_processor_node(PeekProcessor(fn), self.node.output_fields, True))

    def aggregate(self, aggregator: Any, accumulator: Callable[[Any, Any], Any] | None = None,
                  combiner: Callable[[Any, Any], Any] | None = None) -> Stream:
        """One aggregate of all the values (of each window, in a window): ``aggregate(agg)``
        with a `CombinerAggregator`, or ``aggregate(initial_value, accumulator, combiner)``."""
        return self._combine(_aggregator(aggregator, accumulator, combiner, "aggregate"))

    def count(self) -> Stream:
        """The number of values (of each window, in a window)."""
        return self.aggregate(Count())

    def reduce(self, reducer: Callable[[Any, Any], Any]) -> Stream:
        """``reducer`` over all the values (of each window, in a window)."""
        return self._combine_reduce(as_callable(reducer, "apply", "reduce"))

    def repartition(self, parallelism: int) -> Stream:
        """This stream shuffled over ``parallelism`` tasks: the operations after it run on that
        many."""
        if not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(f"Parallelism should be >= 1, got {parallelism!r}")
        if self.node.parallelism == parallelism:
            return self
        node = self.stream_builder.add_node(self.node, PartitionNode(self.stream, self.node.output_fields),
                                            parallelism=parallelism)
        return type(self)._same(self, node)

    def branch(self, *predicates: Callable[[Any], bool]) -> list[Stream]:
        """One stream per predicate: each value goes to the stream of the first predicate it
        passes (a value none passes is dropped)."""
        children: list[Stream] = []
        if not predicates:
            return children
        branch_processor = BranchProcessor()
        branch_node = self._add_processor_node(branch_processor, self.node.output_fields)
        for predicate in predicates:
            child = self._make_processor_node(MapProcessor(IdentityFunction()), self.node.output_fields)
            branch_stream = child.output_streams[0] + "-branch"
            branch_node.add_output_stream(branch_stream)
            self.stream_builder.add_node(branch_node, child, branch_stream)
            children.append(type(self)._same(self, child))
            branch_processor.add_predicate(as_callable(predicate, "test", "branch"), branch_stream)
        return children

    def print(self) -> None:
        """Print each value to stdout."""
        self.for_each(PrintConsumer())

    def to(self, bolt: Bolt | BasicBolt, parallelism: int = 1) -> None:
        """Send the values to ``bolt`` (a `squall.Bolt` or `squall.BasicBolt`, run with
        ``parallelism`` tasks): it gets tuples of field ``value`` (a `PairStream`: ``key``,
        ``value``; a spout's stream: the spout's tuples), shuffled, or grouped as the stream was."""
        if not isinstance(bolt, (Bolt, BasicBolt)):
            raise TypeError(f"to() needs a squall Bolt or BasicBolt, got {type(bolt).__name__}")
        sink = SinkNode(bolt)
        sink.component_id = self.stream_builder.next_bolt_id()
        sink.parallelism = parallelism
        stream = DEFAULT_STREAM if isinstance(self.node, SpoutNode) else self.stream
        self.stream_builder.add_node(self.node, sink, stream, parallelism)

    def state_query(self, stream_state: StreamState) -> PairStream:
        """``(value, state)`` for each value that is a key of ``stream_state`` (what
        ``update_state_by_key`` returned), read from that bolt's state; a key without state
        gives nothing."""
        if not isinstance(stream_state, StreamState):
            raise TypeError(f"state_query takes the StreamState update_state_by_key returns, got "
                            f"{type(stream_state).__name__}")
        # grouped on the value, so that each query reaches the task that has its key
        partitioned = self._partition_by(VALUE, self.node.parallelism)
        node = partitioned._add_processor_node(StateQueryProcessor(stream_state), KEY_VALUE)
        return PairStream(self.stream_builder, node)

    # --- what the builder and PairStream use ------------------------------------------------------

    def get_node(self) -> Node:
        """The node whose output this stream is."""
        return self.node

    def get_stream(self) -> str:
        """The id of the output stream this stream is."""
        return self.stream

    @staticmethod
    def _same(like: Stream, node: Node) -> Any:
        """A stream of the same kind as ``like`` (a `PairStream` stays one) on ``node``."""
        return type(like)(like.stream_builder, node)

    def _add_node(self, child: Node) -> Node:
        return self.stream_builder.add_node(self.node, child)

    def _add_processor_node(self, processor: Any, output_fields: Fields, preserves_key: bool = False) -> Node:
        return self._add_node(self._make_processor_node(processor, output_fields, preserves_key))

    def _make_processor_node(self, processor: Any, output_fields: Fields, preserves_key: bool = False
                             ) -> ProcessorNode:
        return ProcessorNode(processor, self.stream_builder.next_stream_id(), output_fields, preserves_key)

    def _global(self) -> Stream:
        node = self._add_node(PartitionNode(self.stream, self.node.output_fields, GroupingInfo.global_grouping()))
        return Stream(self.stream_builder, node)

    def _partition_by(self, fields: Fields, parallelism: int) -> Any:
        """This stream (of its kind) regrouped on ``fields`` over ``parallelism`` tasks."""
        node = self.stream_builder.add_node(
            self.node, PartitionNode(self.stream, self.node.output_fields, GroupingInfo.fields_grouping(fields)),
            parallelism=parallelism)
        return type(self)._same(self, node)

    def _should_partition(self) -> bool:
        return self.node.parallelism > 1

    def _combine(self, aggregator: CombinerAggregator) -> Stream:
        # when the stream is regrouped, a windowed stream aggregates each partition first
        if self._should_partition():
            if isinstance(self.node, ProcessorNode):
                if self.node.windowed:
                    partial = Stream(self.stream_builder,
                                     self._add_processor_node(AggregateProcessor(aggregator, True), VALUE, True))
                    return partial._global()._merge(aggregator)
            elif isinstance(self.node, WindowNode):
                parents = list(self.node.get_parents())
                if all(p.windowed for p in parents):
                    for p in parents:
                        local = self._make_processor_node(AggregateProcessor(aggregator, True), VALUE, True)
                        self.stream_builder.insert(p, local)
                    return self._global()._merge(aggregator)
            return self._global()._aggregate_partition(aggregator)
        return self._aggregate_partition(aggregator)

    def _combine_reduce(self, reducer: Callable[[Any, Any], Any]) -> Stream:
        if self._should_partition():
            if isinstance(self.node, ProcessorNode):
                if self.node.windowed:
                    return self._reduce_partition(reducer)._global()._reduce_partition(reducer)
            elif isinstance(self.node, WindowNode):
                for p in list(self.node.get_parents()):
                    if p.windowed:
                        self.stream_builder.insert(p, self._make_processor_node(ReduceProcessor(reducer), VALUE))
            return self._global()._reduce_partition(reducer)
        return self._reduce_partition(reducer)

    def _aggregate_partition(self, aggregator: CombinerAggregator) -> Stream:
        return Stream(self.stream_builder, self._add_processor_node(AggregateProcessor(aggregator), VALUE))

    def _merge(self, aggregator: CombinerAggregator) -> Stream:
        return Stream(self.stream_builder, self._add_processor_node(MergeAggregateProcessor(aggregator), VALUE))

    def _reduce_partition(self, reducer: Callable[[Any, Any], Any]) -> Stream:
        return Stream(self.stream_builder, self._add_processor_node(ReduceProcessor(reducer), VALUE))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.stream} of {self.node!r})"


class _MergeValues(CombinerAggregator):
    """``group_by_key``'s aggregator: the values of a key as a list."""

    def init(self) -> list[Any]:
        return []

    def apply(self, accumulator: list[Any], value: Any) -> list[Any]:
        accumulator.append(value)
        return accumulator

    def merge(self, accum1: list[Any], accum2: list[Any]) -> list[Any]:
        return [*accum1, *accum2]

    def result(self, accum: list[Any]) -> list[Any]:
        return accum


class PairStream(Stream):
    """A stream of `Pair` s, a key and a value (Storm's ``PairStream<K, V>``): what
    ``map_to_pair`` returns. Its tuples between bolts have the fields ``key`` and ``value``."""

    def __init__(self, stream_builder: StreamBuilder, node: Node, stream: str | None = None) -> None:
        super().__init__(stream_builder, node, stream)
        node.emits_pair = True

    def map_values(self, function: Callable[[Any], Any]) -> PairStream:
        """``(key, function(value))`` of each pair."""
        fn = as_callable(function, "apply", "map_values")
        return PairStream(self.stream_builder, self._add_processor_node(MapValuesProcessor(fn), KEY_VALUE, True))

    def flat_map_values(self, function: Callable[[Any], Iterable[Any]]) -> PairStream:
        """``(key, r)`` for each ``r`` of ``function(value)`` of each pair."""
        fn = as_callable(function, "apply", "flat_map_values")
        return PairStream(self.stream_builder, self._add_processor_node(FlatMapValuesProcessor(fn), KEY_VALUE, True))

    def aggregate_by_key(self, aggregator: Any, accumulator: Callable[[Any, Any], Any] | None = None,
                         combiner: Callable[[Any, Any], Any] | None = None) -> PairStream:
        """One aggregate per key: with a `CombinerAggregator`, or an initial value, an
        accumulator and a combiner."""
        return self._combine_by_key(_aggregator(aggregator, accumulator, combiner, "aggregate_by_key"))

    def count_by_key(self) -> PairStream:
        """``(key, number of values)`` per key."""
        return self.aggregate_by_key(Count())

    def reduce_by_key(self, reducer: Callable[[Any, Any], Any]) -> PairStream:
        """``reducer`` over the values of each key."""
        return self._combine_reduce_by_key(as_callable(reducer, "apply", "reduce_by_key"))

    def group_by_key(self) -> PairStream:
        """``(key, list of its values)`` per key."""
        return self._partition_by_key()._aggregate_partition_by_key(_MergeValues())

    def group_by_key_and_window(self, window: Window) -> PairStream:
        """``(key, list of its values in the window)`` per key, for each ``window``."""
        return self._partition_by_key().window(window)._aggregate_partition_by_key(_MergeValues())

    def reduce_by_key_and_window(self, reducer: Callable[[Any, Any], Any], window: Window) -> PairStream:
        """``reducer`` over each key's values in each ``window``."""
        return self._partition_by_key().window(window).reduce_by_key(reducer)

    def peek(self, action: Callable[[Any], Any]) -> PairStream:
        """Call ``action(pair)`` on each pair as it passes."""
        return super().peek(action)  # type: ignore[return-value]

    def filter(self, predicate: Callable[[Any], bool]) -> PairStream:
        """The pairs ``predicate`` passes."""
        return super().filter(predicate)  # type: ignore[return-value]

    def window(self, window: Window) -> PairStream:
        """This stream cut into ``window`` s."""
        return super().window(window)  # type: ignore[return-value]

    def repartition(self, parallelism: int) -> PairStream:
        """This stream shuffled over ``parallelism`` tasks."""
        return super().repartition(parallelism)  # type: ignore[return-value]

    def branch(self, *predicates: Callable[[Any], bool]) -> list[PairStream]:  # type: ignore[override]
        """One pair stream per predicate (see `Stream.branch`)."""
        return super().branch(*predicates)  # type: ignore[return-value]

    def join(self, other: PairStream, value_joiner: Callable[[Any, Any], Any] | None = None) -> PairStream:
        """``(key, value_joiner(v, v1))`` for each value ``v`` of this stream and ``v1`` of
        ``other`` with the same key (default joiner: the `Pair` ``(v, v1)``); of each window's
        values, when this stream is windowed."""
        return self._join(other, value_joiner, JoinType.INNER, JoinType.INNER)

    def left_outer_join(self, other: PairStream, value_joiner: Callable[[Any, Any], Any] | None = None
                        ) -> PairStream:
        """`join`, plus ``(key, joiner(v, None))`` for the values of this stream with no match."""
        return self._join(other, value_joiner, JoinType.OUTER, JoinType.INNER)

    def right_outer_join(self, other: PairStream, value_joiner: Callable[[Any, Any], Any] | None = None
                         ) -> PairStream:
        """`join`, plus ``(key, joiner(None, v1))`` for the values of ``other`` with no match."""
        return self._join(other, value_joiner, JoinType.INNER, JoinType.OUTER)

    def full_outer_join(self, other: PairStream, value_joiner: Callable[[Any, Any], Any] | None = None
                        ) -> PairStream:
        """`join`, plus the values of either side with no match, None on the other side."""
        return self._join(other, value_joiner, JoinType.OUTER, JoinType.OUTER)

    def co_group_by_key(self, other: PairStream) -> PairStream:
        """``(key, Pair(values of this stream, values of other))`` per key."""
        left, right = self._join_sides(other)
        node = left._add_processor_node(CoGroupByKeyProcessor(left.stream, right.stream), KEY_VALUE, True)
        self.stream_builder.add_node(right.node, node, parallelism=node.parallelism)
        return PairStream(self.stream_builder, node)

    def update_state_by_key(self, state_updater: Any, state_update_fn: Callable[[Any, Any], Any] | None = None
                            ) -> StreamState:
        """Each key's state in a checkpointed `squall.KeyValueState`, updated with each value
        and emitted as ``(key, state)``: with a `StateUpdater`, or ``(initial_value,
        state_update_fn)``. Returns a `StreamState`, for ``state_query`` and ``to_pair_stream``."""
        if state_update_fn is not None:
            updater = StateUpdater.of(state_updater, as_callable(state_update_fn, "apply", "update_state_by_key"))
        elif isinstance(state_updater, StateUpdater):
            updater = state_updater
        else:
            raise TypeError("update_state_by_key takes a StateUpdater, or an initial value and a function; got "
                            f"{type(state_updater).__name__} alone")
        # regrouped by key even on one task, so that state_query's fields grouping finds the key
        partitioned = self._partition_by(KEY, self.node.parallelism)
        node = partitioned._add_processor_node(UpdateStateByKeyProcessor(updater), KEY_VALUE, True)
        return StreamState(PairStream(self.stream_builder, node))

    # --- internals ----------------------------------------------------------------------------

    def _join(self, other: PairStream, value_joiner: Any, left_type: JoinType, right_type: JoinType) -> PairStream:
        if not isinstance(other, PairStream):
            raise TypeError(f"a join needs another PairStream, got {type(other).__name__}")
        joiner = PairValueJoiner() if value_joiner is None else as_callable(value_joiner, "apply", "join")
        left, right = self._join_sides(other)
        processor = JoinProcessor(left.stream, right.stream, joiner, left_type, right_type)
        node = left._add_processor_node(processor, KEY_VALUE, True)
        self.stream_builder.add_node(right.node, node, parallelism=node.parallelism)
        return PairStream(self.stream_builder, node)

    def _join_sides(self, other: PairStream) -> tuple[PairStream, PairStream]:
        """This stream and ``other`` as a join's (or co-group's) two sides, each grouped by key
        over the join's tasks. A side already grouped by key (a join's or a by-key aggregation's
        output) is not regrouped only while the join runs in its bolt; when the other side is
        regrouped, the join starts a bolt of its own after that regrouping (the walk takes the
        ready operations before the regroupings), and this side reached it shuffled: a second
        join of ``a.join(b).join(c)`` on 2 tasks found half of its matches (2,000 of 4,000)."""
        left = self._partition_by_key()
        right = other._partition_by_key_into(left)
        if left is self and right is not other and self.node.parallelism > 1:
            left = self._partition_by(KEY, self.node.parallelism)
        return left, right

    def _partition_by_key(self) -> PairStream:
        return self._partition_by(KEY, self.node.parallelism) if self._should_partition_by_key() else self

    def _partition_by_key_into(self, left: PairStream) -> PairStream:
        """This stream as the other side of a join (or co-group) that runs after ``left``, in
        its bolt, on its tasks: regrouped by key over them unless it reaches them in the same
        bolt, already grouped by key. Storm's regrouped the other side only by its own
        parallelism: a side of 1 task into a join of several was shuffled (an error at build,
        "Trying to assign grouping info"), and one grouped by key in a bolt of its own reached
        the join's tasks shuffled, so half of a key's values met none of the other side's."""
        parallelism = left.node.parallelism
        if parallelism == 1:
            return self._partition_by_key()
        if self._should_partition_by_key() or _bolt_start(self.node, self.stream_builder) \
                is not _bolt_start(left.node, self.stream_builder):
            return self._partition_by(KEY, parallelism)
        return self

    def _should_partition_by_key(self) -> bool:
        if self.node.parallelism == 1:
            return False
        # already grouped by key, and nothing since changed the key
        if isinstance(self.node, ProcessorNode):
            info = self.node.grouping_info
            if self.node.preserves_key and info is not None and info.fields == KEY:
                return False
        return True

    def _aggregate_partition_by_key(self, aggregator: CombinerAggregator) -> PairStream:
        return PairStream(self.stream_builder,
                          self._add_processor_node(AggregateByKeyProcessor(aggregator), KEY_VALUE, True))

    def _combine_partition_by_key(self, aggregator: CombinerAggregator) -> PairStream:
        return PairStream(self.stream_builder,
                          self._add_processor_node(AggregateByKeyProcessor(aggregator, True), KEY_VALUE, True))

    def _merge_by_key(self, aggregator: CombinerAggregator) -> PairStream:
        return PairStream(self.stream_builder,
                          self._add_processor_node(MergeAggregateByKeyProcessor(aggregator), KEY_VALUE, True))

    def _reduce_partition_by_key(self, reducer: Callable[[Any, Any], Any]) -> PairStream:
        return PairStream(self.stream_builder,
                          self._add_processor_node(ReduceByKeyProcessor(reducer), KEY_VALUE, True))

    def _by_key(self) -> PairStream:
        return self._partition_by(KEY, self.node.parallelism)

    def _combine_by_key(self, aggregator: CombinerAggregator) -> PairStream:
        if self._should_partition_by_key():
            if isinstance(self.node, ProcessorNode):
                if self.node.windowed:
                    return self._combine_partition_by_key(aggregator)._by_key()._merge_by_key(aggregator)
            elif isinstance(self.node, WindowNode):
                parents = list(self.node.get_parents())
                if all(p.windowed for p in parents):
                    for p in parents:
                        local = self._make_processor_node(AggregateByKeyProcessor(aggregator, True), KEY_VALUE, True)
                        self.stream_builder.insert(p, local)
                    return self._by_key()._merge_by_key(aggregator)
            return self._by_key()._aggregate_partition_by_key(aggregator)
        return self._aggregate_partition_by_key(aggregator)

    def _combine_reduce_by_key(self, reducer: Callable[[Any, Any], Any]) -> PairStream:
        if self._should_partition_by_key():
            if isinstance(self.node, ProcessorNode):
                if self.node.windowed:
                    return self._reduce_partition_by_key(reducer)._by_key()._reduce_partition_by_key(reducer)
            elif isinstance(self.node, WindowNode):
                for p in list(self.node.get_parents()):
                    if p.windowed:
                        local = self._make_processor_node(ReduceByKeyProcessor(reducer), KEY_VALUE, True)
                        self.stream_builder.insert(p, local)
            return self._by_key()._reduce_partition_by_key(reducer)
        return self._reduce_partition_by_key(reducer)


class StreamState:
    """The state ``update_state_by_key`` keeps (Storm's ``StreamState<K, V>``): query it with
    ``Stream.state_query``, or go on with its updates as a `PairStream`."""

    def __init__(self, stream: PairStream) -> None:
        self._stream: PairStream | None = stream
        self._update_state_node = stream.node

    def to_pair_stream(self) -> PairStream:
        """The stream of ``(key, new state)`` updates."""
        if self._stream is None:
            raise ValueError("a StreamState inside a running bolt has no stream (it is only the builder's)")
        return self._stream

    def get_update_state_node(self) -> Node:
        """The node of the ``update_state_by_key``."""
        return self._update_state_node

    def __getstate__(self) -> dict[str, Any]:
        # the running bolt needs none of the builder's graph (Java's `transient` stream)
        return {"_stream": None, "_update_state_node": None}


def _bolt_start(node: Node, stream_builder: StreamBuilder) -> Node:
    """Where the bolt that runs ``node`` starts: its nearest ancestor (or itself) that is not an
    operation fused with its one parent (a regrouping, a window, a spout, a join's node)."""
    while isinstance(node, ProcessorNode):
        parents = stream_builder.graph.parents(node)
        if len(parents) != 1:
            break
        node = parents[0]
    return node
