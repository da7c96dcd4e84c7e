"""`StreamBuilder`: builds a topology from streams of values (Storm's ``StreamBuilder``).

``new_stream(spout)`` starts a `Stream`; its operations add nodes to a graph; ``build()`` walks
the graph in topological order and makes a `squall.StormTopology` on squall's
`squall.TopologyBuilder`: the spouts as they are, each run of operations between two
regroupings fused into one bolt (a `ProcessorBolt`, a `WindowedProcessorBolt` after a window, a
`StatefulProcessorBolt` for ``update_state_by_key`` and ``state_query``), subscribed to the
bolts before it with the grouping the regrouping asks for (and with all grouping to their
punctuation streams), and ``to(bolt)``'s bolts. Components are named ``spout1``, ``bolt1``, ...,
streams ``s1``, ``s2``, ..., as Storm's are.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._components import Spout
from .._grouping import ShuffleGrouping
from .._topology import BoltDeclarer, StormTopology, TopologyBuilder
from ._graph import SHUFFLE, Graph, GroupingInfo, Node, PartitionNode, ProcessorNode, SinkNode, SpoutNode, WindowNode
from .bolts import ProcessorBolt, StatefulProcessorBolt, StreamBolt, WindowedProcessorBolt, is_spout_id
from .contexts import Step
from .operations import as_callable
from .operations.mappers import PairValueMapper
from .processors import StatefulProcessor, StateQueryProcessor, UpdateStateByKeyProcessor
from .stream import PairStream, Stream
from .util import get_punctuation_stream
from .windowing import Window


@dataclass(eq=False)
class _BoltPlan:
    """A stream bolt being built: the bolt, its declarer, its nodes, and which of them take
    each input stream first."""

    bolt: StreamBolt
    declarer: BoltDeclarer
    nodes: list[ProcessorNode]
    stream_to_initial: dict[str, list[ProcessorNode]] = field(default_factory=dict)


def _priority(node: Node) -> int:
    """Storm's order among the nodes ready at a step of the walk: spouts, state updates,
    operations, regroupings, windows, state queries, sinks."""
    if isinstance(node, ProcessorNode):
        if isinstance(node.processor, UpdateStateByKeyProcessor):
            return 1
        if isinstance(node.processor, StateQueryProcessor):
            return 5
        return 2
    return {SpoutNode: 0, PartitionNode: 3, WindowNode: 4, SinkNode: 6}.get(type(node), 1 << 30)


class StreamBuilder:
    """Builds a topology from streams (Storm's ``StreamBuilder``); see the module docstring.

    >>> from squall.streams import StreamBuilder, Pair
    >>> from squall.streams.operations.mappers import ValueMapper
    >>> from squall.testing import TestWordSpout
    >>> builder = StreamBuilder()
    >>> builder.new_stream(TestWordSpout(), ValueMapper(0)).map_to_pair(lambda w: Pair(w, 1)).count_by_key().print()
    >>> sorted(builder.build().components)
    ['bolt1', 'spout1']
    """

    def __init__(self) -> None:
        self.graph = Graph()
        self._stream_ids = itertools.count(1)
        self._bolt_ids = itertools.count(1)
        self._spout_ids = itertools.count(1)
        self._node_grouping_info: dict[tuple[Node, str], GroupingInfo] = {}
        self._window_info: dict[Node, WindowNode] = {}
        self._cur_group: list[ProcessorNode] = []
        self._plans: list[_BoltPlan] = []
        self._stateful_count = 0
        self._timestamp_field: str | None = None

    # --- the user's API -----------------------------------------------------------------------

    def new_stream(self, spout: Spout, mapper: Callable[[Any], Any] | int | None = None,
                   parallelism: int = 1) -> Stream:
        """A stream of ``spout``'s tuples (of its default stream), the spout run with
        ``parallelism`` tasks. With ``mapper`` (a `ValueMapper`, any function of a `squall.Tuple`),
        a stream of ``mapper(tuple)``; with a `PairValueMapper`, a `PairStream`. Storm's
        ``newStream(spout, parallelism)`` is ``new_stream(spout, parallelism)``."""
        if isinstance(mapper, int) and not isinstance(mapper, bool):
            return self.new_stream(spout, None, mapper)
        if not isinstance(spout, Spout):
            raise TypeError(f"new_stream needs a squall Spout, got {type(spout).__name__}")
        if not isinstance(parallelism, int) or parallelism < 1:
            raise ValueError(f"new_stream: the spout's parallelism must be a positive int, got {parallelism!r}")
        node = SpoutNode(spout)
        node.component_id = f"spout{next(self._spout_ids)}"
        node.parallelism = parallelism
        self.graph.add_vertex(node)
        stream = Stream(self, node)
        if mapper is None:
            return stream
        if isinstance(mapper, PairValueMapper):
            return stream.map_to_pair(mapper)
        return stream.map(as_callable(mapper, "apply", "new_stream's mapper"))

    def build(self) -> StormTopology:
        """The topology: give it to ``LocalCluster.submit_topology`` or
        ``StormSubmitter.submit_topology``."""
        self._node_grouping_info.clear()
        self._window_info.clear()
        self._cur_group.clear()
        self._plans = []
        self._stateful_count = 0
        self._timestamp_field = None
        builder = TopologyBuilder()
        for node in self.graph.topological_order(_priority):
            if isinstance(node, SpoutNode):
                assert node.component_id is not None  # new_stream names it
                builder.set_spout(node.component_id, node.spout, node.parallelism)
            elif isinstance(node, ProcessorNode):
                self._handle_processor_node(node, builder)
            elif isinstance(node, PartitionNode):
                self._update_node_grouping_info(node)
                self._process_cur_group(builder)
            elif isinstance(node, WindowNode):
                self._update_window_info(node)
                self._process_cur_group(builder)
            elif isinstance(node, SinkNode):
                self._process_cur_group(builder)
                self._add_sink(builder, node)
        self._process_cur_group(builder)
        for plan in self._plans:
            if self._timestamp_field is not None:
                plan.bolt.set_timestamp_field(self._timestamp_field)
            self._set_steps(plan)
        return builder.create_topology()

    # --- the graph, for Stream ------------------------------------------------------------------

    def next_stream_id(self) -> str:
        """A new stream id, ``s<N>``."""
        return f"s{next(self._stream_ids)}"

    def next_bolt_id(self) -> str:
        """A new bolt id, ``bolt<N>``."""
        return f"bolt{next(self._bolt_ids)}"

    def add_node(self, parent: Node, child: Node, parent_stream: str | None = None,
                 parallelism: int | None = None) -> Node:
        """Add ``child`` under ``parent`` (on its ``parent_stream``, default its first), with
        ``parallelism`` (default the parent's); it inherits the parent's grouping and
        windowing."""
        stream = parent.output_streams[0] if parent_stream is None else parent_stream
        self.graph.add_vertex(child)
        self.graph.add_edge(parent, child)
        child.parallelism = parent.parallelism if parallelism is None else parallelism
        if isinstance(parent, (WindowNode, PartitionNode)):
            child.add_parent_stream(self.parent_node(parent), stream)
        else:
            child.add_parent_stream(parent, stream)
        if not isinstance(child, PartitionNode):
            if child.grouping_info is not None:
                if child.grouping_info != parent.grouping_info:
                    raise ValueError(f"Trying to assign grouping info for node with current grouping info "
                                     f"{child.grouping_info} to {parent.grouping_info}: node {child}")
            else:
                child.grouping_info = parent.grouping_info
        if not isinstance(child, WindowNode) and not child.windowed:
            child.windowed = parent.windowed
        return child

    def insert(self, parent: Node, child: Node) -> Node:
        """Put ``child`` between ``parent`` and its current children."""
        old_children = self.graph.children(parent)
        new_child = self.add_node(parent, child)
        for old in old_children:
            self.graph.remove_edge(parent, old)
            old.remove_parent_streams(parent)
            self.add_node(new_child, old)
        return new_child

    def parent_node(self, node: Node) -> Node:
        """The one processor or spout ``node`` takes its values from (through regroupings and
        windows)."""
        parents = self._parent_nodes(node)
        if len(parents) > 1:
            raise ValueError(f"Node {node} has more than one parent node.")
        if not parents:
            raise ValueError(f"Node {node} has no parent.")
        return next(iter(parents))

    # --- build's steps (Storm's, by name) -----------------------------------------------------------

    def _parent_nodes(self, node: Node) -> list[Node]:
        out: list[Node] = []
        for parent in self.graph.parents(node):
            found = [parent] if isinstance(parent, (ProcessorNode, SpoutNode)) else self._parent_nodes(parent)
            out.extend(p for p in found if p not in out)
        return out

    def _handle_processor_node(self, node: ProcessorNode, builder: TopologyBuilder) -> None:
        if isinstance(node.processor, StatefulProcessor):
            self._stateful_count += 1
            initial = self._initial_processors(self._cur_group or [node])
            windows = self._window_params(initial)
            # one stateful operation per stateful bolt, and none in a windowed bolt
            if self._stateful_count > 1 or windows:
                if self._cur_group:
                    self._process_cur_group(builder)
                elif windows:
                    self._split_stateful_processor(node, builder)
                self._stateful_count = 1
        self._cur_group.append(node)

    def _split_stateful_processor(self, node: ProcessorNode, builder: TopologyBuilder) -> None:
        """A stateful operation right after a window: an identity operation takes the window
        (in a windowed bolt of its own) and the stateful one follows in the next bolt."""
        from .operations import IdentityFunction
        from .processors import MapProcessor
        for parent in self.graph.parents(node):
            identity = ProcessorNode(MapProcessor(IdentityFunction()), self.next_stream_id(), parent.output_fields)
            self.add_node(parent, identity)
            self.graph.remove_edge(parent, node)
            node.remove_parent_streams(parent)
            self.add_node(identity, node)
            self._cur_group.append(identity)
        self._process_cur_group(builder)

    def _update_node_grouping_info(self, node: PartitionNode) -> None:
        if node.grouping_info is not None:
            for parent in self._parent_nodes(node):
                for stream in node.get_parent_streams(parent):
                    self._node_grouping_info[(parent, stream)] = node.grouping_info

    def _update_window_info(self, node: WindowNode) -> None:
        for parent in self._parent_nodes(node):
            self._window_info[parent] = node
        ts = node.window.timestamp_field
        if ts is not None:
            if self._timestamp_field is not None and ts != self._timestamp_field:
                raise ValueError(f"Cannot set different timestamp field names: {self._timestamp_field!r} "
                                 f"and {ts!r}")
            self._timestamp_field = ts

    def _process_cur_group(self, builder: TopologyBuilder) -> None:
        if self._cur_group:
            by_parallelism: dict[int, list[ProcessorNode]] = {}
            for node in self._cur_group:
                by_parallelism.setdefault(node.parallelism, []).append(node)
            for group in by_parallelism.values():
                self._do_process_cur_group(builder, group)
            self._cur_group.clear()

    def _do_process_cur_group(self, builder: TopologyBuilder, group: list[ProcessorNode]) -> None:
        bolt_id = self.next_bolt_id()
        for node in group:
            node.component_id = bolt_id
            node.windowed_parent_streams = self._windowed_parent_streams(node)
        initial = self._initial_processors(group)
        windows = self._window_params(initial)
        if len(windows) > 1:
            raise ValueError(f"More than one window config for the operations of {bolt_id}: {windows}")
        if windows:
            bolt: StreamBolt = WindowedProcessorBolt(bolt_id, next(iter(windows)))
        elif any(isinstance(n.processor, StatefulProcessor) for n in group):
            query = next((n.processor for n in group if isinstance(n.processor, StateQueryProcessor)), None)
            if query is not None:
                # a state query runs in the bolt whose state it reads
                plan = self._stateful_plan(query.stream_state.get_update_state_node())
                for node in group:
                    node.component_id = plan.bolt.get_id()
                plan.nodes.extend(group)
                self._wire_bolt(plan, plan.nodes, initial)
                return
            bolt = StatefulProcessorBolt(bolt_id)
        else:
            bolt = ProcessorBolt(bolt_id)
        plan = _BoltPlan(bolt, builder.set_bolt(bolt_id, bolt, self._parallelism(group)), list(group))
        self._plans.append(plan)
        self._wire_bolt(plan, group, initial)

    def _stateful_plan(self, update_state_node: Node) -> _BoltPlan:
        for plan in self._plans:
            if isinstance(plan.bolt, StatefulProcessorBolt) and update_state_node in plan.nodes:
                return plan
        raise ValueError(f"Could not find the stateful bolt of node {update_state_node}")

    @staticmethod
    def _parallelism(group: list[ProcessorNode]) -> int:
        parallelisms = {n.parallelism for n in group}
        if len(parallelisms) > 1:
            raise ValueError(f"The operations of one bolt do not have the same parallelism: {group}")
        return parallelisms.pop() if parallelisms else 1

    def _window_params(self, initial: list[ProcessorNode]) -> set[Window]:
        windows: set[Window] = set()
        for node in initial:
            for parent in self._parent_nodes(node):
                if parent in self._window_info:
                    windows.add(self._window_info[parent].window)
        return windows

    def _windowed_parent_streams(self, node: ProcessorNode) -> frozenset[str]:
        return frozenset(s for p in self._parent_nodes(node) if isinstance(p, ProcessorNode) and p.windowed
                         for s in p.output_streams)

    def _initial_processors(self, group: list[ProcessorNode]) -> list[ProcessorNode]:
        members = set(group)
        return [n for n in group if any(not isinstance(p, ProcessorNode) or p not in members
                                        for p in self._parent_nodes(n))]

    def _wire_bolt(self, plan: _BoltPlan, group: list[ProcessorNode], initial: list[ProcessorNode]) -> None:
        members = set(group)
        for node in initial:
            for parent in self._parent_nodes(node):
                if parent in members:
                    continue
                for stream in node.get_parent_streams(parent):
                    grouping = self._node_grouping_info.get((parent, stream))
                    assert parent.component_id is not None  # the walk names a parent before its children
                    if isinstance(plan.bolt, WindowedProcessorBolt) and (grouping is None or grouping.kind == SHUFFLE):
                        # round-robin, not load-aware: a task that sees no tuple in a window
                        # sends no punctuation, so the merge after the regrouping waits for it;
                        # a load-aware shuffle keeps every tuple in the emitting worker, and the
                        # other worker's window tasks saw none: with the spouts' tuples held
                        # unacked in the merge, nothing came until the message timeout replayed
                        # them (200 ids every 10 s, with 2 workers)
                        plan.declarer.custom_grouping(parent.component_id, ShuffleGrouping(), stream)
                    else:
                        self._declare_grouping(plan.declarer, parent, stream, grouping)
                    if is_spout_id(parent.component_id):
                        key = parent.component_id + stream  # a spout's stream, told apart from others
                    else:
                        key = stream
                        self._declare_grouping(plan.declarer, parent, get_punctuation_stream(stream),
                                               GroupingInfo.all())
                    plan.stream_to_initial.setdefault(key, []).append(node)

    @staticmethod
    def _declare_grouping(declarer: BoltDeclarer, parent: Node, stream: str, grouping: GroupingInfo | None) -> None:
        assert parent.component_id is not None
        (grouping or GroupingInfo.shuffle()).declare_grouping(declarer, parent.component_id, stream)

    def _add_sink(self, builder: TopologyBuilder, node: SinkNode) -> None:
        assert node.component_id is not None  # `to` names it
        declarer = builder.set_bolt(node.component_id, node.bolt, node.parallelism)
        for parent in self._parent_nodes(node):
            for stream in node.get_parent_streams(parent):
                self._declare_grouping(declarer, parent, stream, self._node_grouping_info.get((parent, stream)))

    def _set_steps(self, plan: _BoltPlan) -> None:
        """Give the bolt its processors as `Step` s: what it needs of the graph at run time,
        without the graph (a bolt is copied to every task)."""
        index = {node: i for i, node in enumerate(plan.nodes)}
        steps: list[Step] = []
        for node in plan.nodes:  # in the walk's order: a node's parents in the bolt come before it
            inside = [c for c in self.graph.children(node) if c in index]
            children: dict[str, list[int]] = {}
            for child in inside:
                for stream in child.get_parent_streams(node):
                    children.setdefault(stream, []).append(index[child])  # type: ignore[index]
            outgoing = any((isinstance(c, ProcessorNode) and c not in inside) or isinstance(c, SinkNode)
                           for c in self._child_nodes(node))
            holds = node.windowed and (node.is_batch or any(
                steps[index[p]].holds_inputs for p in self._parent_nodes(node) if p in index and index[p] < len(steps)))
            steps.append(Step(node.processor, node.get_output_streams(), node.output_fields, node.emits_pair,
                              node.windowed, node.is_batch, frozenset(node.windowed_parent_streams), children,
                              outgoing, holds))
        delegate = plan.bolt.delegate
        delegate.steps = steps
        delegate.stream_to_initial = {s: [index[n] for n in nodes] for s, nodes in plan.stream_to_initial.items()}
        if isinstance(plan.bolt, StatefulProcessorBolt):
            plan.bolt.check()

    def _child_nodes(self, node: Node) -> list[Node]:
        out: list[Node] = []
        for child in self.graph.children(node):
            out.extend(self._child_nodes(child) if isinstance(child, (WindowNode, PartitionNode)) else [child])
        return out


__all__ = ["PairStream", "Stream", "StreamBuilder"]
