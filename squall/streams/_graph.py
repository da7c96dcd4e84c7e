"""The logical graph a `StreamBuilder` builds (Storm's ``Node`` and its kinds, ``GroupingInfo``,
and the directed graph JGraphT keeps for Storm).

Every ``Stream`` call adds a node: a `SpoutNode` where a stream starts, a `ProcessorNode` per
operation, a `PartitionNode` where the stream is regrouped (by key, globally, or shuffled to
another parallelism), a `WindowNode` where it is windowed, a `SinkNode` for a user's bolt. At
``build()`` the builder walks the graph in topological order and fuses consecutive processor
nodes into one bolt, cutting at the partition and window nodes.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Any

from .._collectors import OutputFieldsDeclarer
from .._fields import Fields
from .._system import DEFAULT_STREAM

SHUFFLE, FIELDS, GLOBAL, ALL = "shuffle", "fields", "global", "all"


@dataclass(frozen=True)
class GroupingInfo:
    """How a node's stream is grouped into the next bolt (Storm's ``GroupingInfo``): ``kind``
    is shuffle, fields, global or all; ``fields`` the key fields of a fields grouping."""

    kind: str
    fields: Fields | None = None

    @classmethod
    def shuffle(cls) -> GroupingInfo:
        """Shuffle grouping."""
        return cls(SHUFFLE)

    @classmethod
    def fields_grouping(cls, fields: Fields) -> GroupingInfo:
        """Fields grouping on ``fields`` (Storm's ``GroupingInfo.fields``)."""
        return cls(FIELDS, fields)

    @classmethod
    def global_grouping(cls) -> GroupingInfo:
        """Global grouping (Storm's ``GroupingInfo.global``)."""
        return cls(GLOBAL)

    @classmethod
    def all(cls) -> GroupingInfo:
        """All grouping."""
        return cls(ALL)

    def declare_grouping(self, declarer: Any, component_id: str, stream_id: str) -> None:
        """Subscribe the bolt of ``declarer`` to ``component_id``'s ``stream_id`` this way."""
        if self.kind == FIELDS:
            assert self.fields is not None  # a fields grouping is made with its fields
            declarer.fields_grouping(component_id, self.fields, stream_id)
        elif self.kind == GLOBAL:
            declarer.global_grouping(component_id, stream_id)
        elif self.kind == ALL:
            declarer.all_grouping(component_id, stream_id)
        else:
            declarer.shuffle_grouping(component_id, stream_id)


class Node:
    """A vertex of the graph: its output streams (ids) and their fields, the parent streams it
    subscribes to, and what the builder decides about it (component id, parallelism, grouping,
    whether it is windowed, whether it emits `Pair` s). Nodes compare by identity."""

    def __init__(self, output_stream: str, output_fields: Fields, grouping_info: GroupingInfo | None = None) -> None:
        self.output_streams: list[str] = [output_stream]
        self.output_fields = output_fields
        self.parent_streams: dict[Node, list[str]] = {}
        self.grouping_info = grouping_info
        self.component_id: str | None = None
        self.parallelism = 1
        self.windowed = False
        self.emits_pair = False

    def add_parent_stream(self, parent: Node, stream_id: str) -> None:
        """Subscribe to ``parent``'s ``stream_id``."""
        self.parent_streams.setdefault(parent, []).append(stream_id)

    def remove_parent_streams(self, parent: Node) -> None:
        """Drop every subscription to ``parent``."""
        self.parent_streams.pop(parent, None)

    def get_parent_streams(self, parent: Node) -> list[str]:
        """The streams of ``parent`` this node subscribes to."""
        return list(self.parent_streams.get(parent, ()))

    def get_parents(self, stream: str | None = None) -> set[Node]:
        """The parents this node subscribes to (on ``stream``, if given)."""
        return {p for p, streams in self.parent_streams.items() if stream is None or stream in streams}

    def get_output_streams(self) -> list[str]:
        """The ids of this node's output streams (one, or a branch's several)."""
        return list(self.output_streams)

    def add_output_stream(self, stream_id: str) -> None:
        """Add an output stream (a branch adds one per predicate)."""
        self.output_streams.append(stream_id)

    def is_windowed(self) -> bool:
        """Whether this node runs on windows (it is, or follows, a `WindowNode`)."""
        return self.windowed

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(streams={self.output_streams}, fields={list(self.output_fields)}, "
                f"component={self.component_id}, parallelism={self.parallelism}, windowed={self.windowed})")


def declared_fields(component: Any, stream_id: str) -> Fields:
    """The fields ``component`` declares for ``stream_id`` (empty if it does not declare it)."""
    declarer = OutputFieldsDeclarer(type(component).__name__)
    component.declare_output_fields(declarer)
    info = declarer.streams.get(stream_id)
    return info.fields if info is not None else Fields()


class SpoutNode(Node):
    """Where a stream starts: a spout, whose default stream the stream is."""

    def __init__(self, spout: Any) -> None:
        fields = declared_fields(spout, DEFAULT_STREAM)
        if len(fields) == 0:
            raise ValueError(f"Spout {type(spout).__name__} does not declare any fields for the stream "
                             f"'{DEFAULT_STREAM}': a stream starts from a spout's default stream")
        super().__init__(DEFAULT_STREAM, fields)
        self.spout = spout

    def add_output_stream(self, stream_id: str) -> None:
        """A spout node's one stream is its spout's default stream."""
        raise ValueError("Cannot add output streams to a spout node")


class SinkNode(Node):
    """A user's bolt a stream ends in (``Stream.to``)."""

    def __init__(self, bolt: Any) -> None:
        super().__init__(DEFAULT_STREAM, declared_fields(bolt, DEFAULT_STREAM))
        self.bolt = bolt


class PartitionNode(Node):
    """Where the stream is regrouped: by key, globally, or shuffled (``repartition``)."""

    def __init__(self, output_stream: str, output_fields: Fields, grouping_info: GroupingInfo | None = None) -> None:
        super().__init__(output_stream, output_fields, grouping_info or GroupingInfo.shuffle())


class WindowNode(Node):
    """Where the stream is windowed: the bolt of the operations after it is windowed."""

    def __init__(self, window: Any, output_stream: str, output_fields: Fields) -> None:
        super().__init__(output_stream, output_fields)
        self.windowed = True
        self.window = window


class ProcessorNode(Node):
    """An operation: runs ``processor`` on each value of its parent streams, in the bolt the
    builder fuses it into. ``preserves_key``: a by-key operation after it needs no new
    partitioning by key."""

    def __init__(self, processor: Any, output_stream: str, output_fields: Fields, preserves_key: bool = False) -> None:
        super().__init__(output_stream, output_fields)
        self.processor = processor
        self.preserves_key = preserves_key
        self.windowed_parent_streams: frozenset[str] = frozenset()

    @property
    def is_batch(self) -> bool:
        """Whether the processor aggregates (a `BatchProcessor`): in a window, it emits at the
        window's end."""
        from .processors import BatchProcessor
        return isinstance(self.processor, BatchProcessor)

    def get_processor(self) -> Any:
        """Storm's ``getProcessor``."""
        return self.processor


class Graph:
    """A directed graph of nodes, at most one edge from one node to another, kept in the order
    nodes and edges were added (JGraphT's ``DefaultDirectedGraph`` for Storm)."""

    def __init__(self) -> None:
        self._order: dict[Node, int] = {}
        self._children: dict[Node, list[Node]] = {}
        self._parents: dict[Node, list[Node]] = {}
        self._seq = itertools.count()

    def add_vertex(self, node: Node) -> None:
        """Add ``node`` (nothing if it is there)."""
        if node not in self._order:
            self._order[node] = next(self._seq)
            self._children[node] = []
            self._parents[node] = []

    def add_edge(self, parent: Node, child: Node) -> None:
        """Add the edge ``parent -> child`` (nothing if it is there)."""
        if child not in self._children[parent]:
            self._children[parent].append(child)
            self._parents[child].append(parent)

    def remove_edge(self, parent: Node, child: Node) -> None:
        """Remove the edge ``parent -> child``."""
        self._children[parent].remove(child)
        self._parents[child].remove(parent)

    def vertices(self) -> list[Node]:
        """Every node, in the order added."""
        return list(self._order)

    def children(self, node: Node) -> list[Node]:
        """The nodes ``node`` has an edge into."""
        return list(self._children[node])

    def parents(self, node: Node) -> list[Node]:
        """The nodes with an edge into ``node``."""
        return list(self._parents[node])

    def topological_order(self, priority: Any) -> list[Node]:
        """Every node after all its parents; of the nodes ready at a step, the one of lowest
        ``priority(node)`` first, then the one added first (JGraphT's ``TopologicalOrderIterator``
        with Storm's comparator)."""
        indegree = {n: len(p) for n, p in self._parents.items()}
        ready = [(priority(n), self._order[n], n) for n, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        out: list[Node] = []
        while ready:
            _, _, node = heapq.heappop(ready)
            out.append(node)
            for child in self._children[node]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    heapq.heappush(ready, (priority(child), self._order[child], child))
        return out
