"""Trident's fluent API: the logical graph a user builds (Storm's ``TridentTopology``, ``Stream``).

Each call adds a node to the `TridentTopology`'s graph and returns a new `Stream` on it; nothing
runs until `TridentTopology.build()` hands the graph to the planner (``planner.py``), which fuses
the nodes between repartitions into bolts. Every operation checks, when it is called, that the
fields it names exist in its input, and raises ``ValueError`` naming the operation and the field
(Storm's ``projectionValidation``), the user's line that called it and the stream it was called
on, so a typo fails where it was written, not in a worker.
"""

from __future__ import annotations

import enum
import inspect
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from .._fields import Fields
from .._grouping import CustomStreamGrouping
from . import processors as P
from .builtin import Max, MaxWithComparator, Min, MinWithComparator
from .failures import operation_text
from .operation import (
    Assembly,
    BaseAggregator,
    BaseFilter,
    BaseFunction,
    CombinerAggregator,
    Consumer,
    FlatMapFunction,
    GroupedMultiReducer,
    MapFunction,
    MultiReducer,
    ReducerAggregator,
)
from .state.api import (
    CombinerAggStateUpdater,
    MapCombinerAggStateUpdater,
    MapReducerAggStateUpdater,
    ReducerAggStateUpdater,
)

if TYPE_CHECKING:
    from .._topology import StormTopology


# --- the logical graph ---------------------------------------------------------------------------

@dataclass(eq=False)
class Node:
    """A vertex of the logical graph: one stream of tuples with ``fields``.

    ``index`` is the creation order (the planner's tie-breaker and Storm's ``creationIndex``);
    ``stream_id`` (``s<N>``) names the stream when it leaves a bolt. Nodes compare by identity.
    """

    index: int
    stream_id: str
    name: str | None
    fields: Fields
    parallelism: int | None = None

    def describe(self) -> str:
        """A short text for error messages."""
        return f"{type(self).__name__}({self.stream_id}{', ' + self.name if self.name else ''})"


@dataclass(eq=False)
class SpoutNode(Node):
    """Where a stream starts: a batch spout (``new_stream``) or a DRPC spout (``new_drpc_stream``)."""

    txid: str = ""
    spout: Any = None
    drpc_function: str | None = None


@dataclass(eq=False)
class ProcessorNode(Node):
    """An operation: runs ``processor`` on each tuple of its parents, in some bolt's task.

    ``committer`` marks a node that updates a state (its bolt finishes a batch at its commit);
    ``state_id`` is the state the node persists into or queries.
    """

    processor: Any = None
    committer: bool = False
    state_id: str | None = None


@dataclass(eq=False)
class PartitionNode(Node):
    """A repartition: how tuples move from one bolt's tasks to the next one's."""

    partitioning: Partitioning = field(kw_only=True)  # every repartition says how


@dataclass(eq=False)
class StateNode(Node):
    """A state made by ``new_static_state``: lives in the tasks of the bolts that query it."""

    state_id: str = ""


@dataclass(frozen=True)
class Partitioning:
    """One repartition: ``kind`` is ``shuffle``, ``local_or_shuffle``, ``all``, ``fields``,
    ``global``, ``batch_global``, ``identity`` or ``custom`` (with ``fields`` or ``custom``)."""

    kind: str
    fields: Fields | None = None
    custom: CustomStreamGrouping | None = None


@dataclass(frozen=True)
class StateSpec:
    """A state as a node needs it: the factory, under the id that colocates its users."""

    state_id: str
    factory: Any


class _Graph:
    """The nodes and ordered parent edges of a `TridentTopology`."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.parents: dict[Node, list[Node]] = {}
        self.states: dict[str, StateSpec] = {}
        # state id -> every node that must run in the same tasks as that state
        self.colocate: dict[str, list[Node]] = {}
        self._streams = 0
        self._state_count = 0

    def copy(self) -> _Graph:
        """A graph the planner may add to without changing this one (nodes are shared)."""
        other = _Graph()
        other.nodes = list(self.nodes)
        other.parents = {n: list(p) for n, p in self.parents.items()}
        other.states = dict(self.states)
        other.colocate = {k: list(v) for k, v in self.colocate.items()}
        other._streams, other._state_count = self._streams, self._state_count
        return other

    def next_stream_id(self) -> str:
        self._streams += 1
        return f"s{self._streams}"

    def next_index(self) -> int:
        return len(self.nodes)

    def next_state_id(self) -> str:
        self._state_count += 1
        return f"state{self._state_count}"

    def add(self, node: Node, parents: list[Node]) -> Node:
        self.nodes.append(node)
        self.parents[node] = list(parents)
        state_id = getattr(node, "state_id", None)
        if state_id:
            self.colocate.setdefault(state_id, []).append(node)
        return node

    def children(self, node: Node) -> list[Node]:
        return [n for n in self.nodes if node in self.parents[n]]


# --- validation ----------------------------------------------------------------------------------

@overload
def _as_fields(fields: Fields | list[str] | tuple[str, ...] | str) -> Fields: ...
@overload
def _as_fields(fields: None) -> None: ...
def _as_fields(fields: Fields | list[str] | tuple[str, ...] | str | None) -> Fields | None:
    """``fields`` as `Fields` (None stays None)."""
    if fields is None or isinstance(fields, Fields):
        return fields
    if isinstance(fields, str):
        return Fields(fields)
    return Fields(list(fields))


def _check(operation: str, wanted: Fields | None, stream: Stream | GroupedStream, op: Any = None,
           on_stream: bool = True) -> None:
    """Storm's ``projectionValidation``: every field of ``wanted`` must be in ``stream``'s
    fields; the error names ``operation`` (with the user's ``op``), the stream (`_asked_of`) and
    the user's line that called it. ``on_stream``: the operation is the stream's own (not a
    topology's join or merge of several), so it takes the stream's name."""
    if wanted is None:
        return
    available = stream.get_output_fields()
    for name in wanted:
        if name not in available:
            raise ValueError(f"{operation}: field {name!r} is not in the stream's fields {available.to_list()} "
                             f"{_asked_of(operation, op, stream, on_stream)}")


def _check_new(operation: str, new: Fields, stream: Stream | GroupedStream, op: Any = None,
               available: Fields | None = None) -> None:
    """Fields an operation appends must not already be in the stream (``available``: the
    fields it keeps of ``stream``, all of them by default); the error as `_check`'s."""
    if available is None:
        available = stream.get_output_fields()
    for name in new:
        if name in available:
            raise ValueError(f"{operation}: output field {name!r} is already in the stream's fields "
                             f"{available.to_list()} {_asked_of(operation, op, stream)}")


def _asked_of(operation: str, op: Any, stream: Stream | GroupedStream, on_stream: bool = True) -> str:
    """``(each(Count) called at topology.py:12 on the stream of new_stream('words', Spout)
    after each(Split) named 'split')``: which operation asked, where the user called it, and of
    which stream: in a topology of several spouts and many operations the fields alone do not
    say it."""
    name = stream.to_stream().get_name() if on_stream else None  # what the operation is named (`Stream.name`)
    return f"({operation_text(operation, op, name)} called at {_user_line()} on {stream._describe()})"


def _user_line() -> str:
    """``file.py:line`` of the innermost call from outside this package: the user's call of the
    operation that asked for a field (a `GroupedStream`'s goes through a `Stream`'s)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and os.path.dirname(frame.f_code.co_filename) == _HERE:
        frame = frame.f_back
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


_HERE = os.path.dirname(__file__)


def _node_text(node: Node) -> str:
    """What made ``node``, as the user wrote it: ``new_stream('words', Spout)``,
    ``each(Split) named 'split'``, ``partition_by(['word'])``."""
    if isinstance(node, SpoutNode):
        if node.drpc_function is not None:
            return f"new_drpc_stream({node.drpc_function!r})"
        return f"new_stream({node.txid!r}, {type(node.spout).__name__})"
    if isinstance(node, ProcessorNode):
        processor = node.processor
        return operation_text(getattr(processor, "operation", type(processor).__name__),
                              getattr(processor, "op", None) or getattr(processor, "aggregator", None), node.name)
    if isinstance(node, PartitionNode):
        by = node.partitioning.fields
        return f"partition_by({by.to_list()})" if by is not None else node.partitioning.kind
    return node.describe()


def _concat(a: Fields, b: Fields) -> Fields:
    return Fields([*a, *b])


def _union(a: Fields, b: Fields | None) -> Fields:
    return Fields([*a, *(n for n in (b or Fields()) if n not in a)])


def _subtract(a: Fields, b: Fields) -> Fields:
    return Fields([n for n in a if n not in b])


# --- the API -------------------------------------------------------------------------------------

class JoinType(enum.Enum):
    """How `TridentTopology.join` treats a key one side has no tuple of (Storm's ``JoinType``):
    ``INNER`` drops it, ``OUTER`` gives that side Nones."""

    INNER = "inner"
    OUTER = "outer"


class JoinOutFieldsMode(enum.Enum):
    """What a `TridentTopology.join` emits (Storm's ``JoinOutFieldsMode``): ``COMPACT`` (the
    default) the join fields once, then the other fields of each stream in stream order;
    ``PRESERVE`` every field of every stream, each stream's in its own order, streams in call
    order (a stream's join fields repeated per stream)."""

    COMPACT = "compact"
    PRESERVE = "preserve"


def _join_types(join_type: JoinType | Sequence[JoinType] | None, n: int = 2) -> list[JoinType]:
    if join_type is None:
        return [JoinType.INNER] * n
    if isinstance(join_type, JoinType):
        return [join_type] * n
    types = list(join_type) if isinstance(join_type, (list, tuple)) else None
    if types is None or len(types) != n or not all(isinstance(t, JoinType) for t in types):
        raise ValueError(f"join: join_type must be a JoinType or one JoinType per stream ({n}), got {join_type!r}")
    return types


class TridentTopology:
    """A Trident topology under construction; `build()` compiles it into a `StormTopology`."""

    def __init__(self) -> None:
        self._graph = _Graph()

    # sources
    def new_stream(self, txid: str, spout: Any) -> Stream:
        """A stream of the batches ``spout`` emits.

        ``txid`` is the spout's stable id: its transaction state (which batch is next, each
        batch's metadata) is kept under it, so it must not change between submissions.
        ``spout`` is an `IBatchSpout`, an `ITridentSpout`, a partitioned or opaque partitioned
        Trident spout, or a plain `Spout` (at-least-once).
        """
        from .txstate import TransactionalStateError, check_name

        try:
            check_name(txid, "txid")  # the spout's transactional state is kept under it
        except TransactionalStateError as e:
            raise ValueError(f"new_stream: {e}") from None
        for n in self._graph.nodes:
            if isinstance(n, SpoutNode) and n.txid == txid and n.spout is not spout:
                raise ValueError(f"new_stream: txid {txid!r} is already used by another spout")
        fields = _spout_fields(spout)
        g = self._graph
        node = g.add(SpoutNode(g.next_index(), g.next_stream_id(), None, fields, txid=txid, spout=spout), [])
        return Stream(self, node, None)

    def new_drpc_stream(self, function: str, local_drpc: Any = None) -> Stream:
        """A stream of the arguments of DRPC calls to ``function`` (one field, ``args``).

        What the stream's last operation emits in a batch is the call's result (its values, as a
        JSON list of lists). With ``local_drpc`` (a `LocalDRPC`) the calls come from it; without,
        from the cluster's DRPC servers (``drpc.servers``).
        """
        from ..drpc import DRPCSpout

        if not isinstance(function, str) or not function:
            raise ValueError(f"new_drpc_stream: function must be a non-empty string, got {function!r}")
        spout = DRPCSpout(function, local_drpc)
        g = self._graph
        node = g.add(SpoutNode(g.next_index(), g.next_stream_id(), None, Fields("args", "return-info"),
                               txid=_drpc_txid(function, g), spout=spout, drpc_function=function), [])
        # the return-info comes back at the end of the stream (planner.complete_drpc)
        return Stream(self, node, None).project(Fields("args"))

    def new_static_state(self, state_factory: Any) -> TridentState:
        """A state nothing in the topology writes, to be read with ``state_query``."""
        _check_factory("new_static_state", state_factory)
        g = self._graph
        state_id = g.next_state_id()
        g.states[state_id] = StateSpec(state_id, state_factory)
        node = g.add(StateNode(g.next_index(), g.next_stream_id(), None, Fields(), state_id=state_id), [])
        return TridentState(self, node)

    # combining streams
    def merge(self, *streams: Any, out_fields: Fields | list[str] | None = None) -> Stream:
        """One stream of every tuple of ``streams`` (named as the first's fields, or ``out_fields``).

        Storm's forms work too: ``merge(s1, s2)``, ``merge([s1, s2])``, and with the output
        fields first, ``merge(Fields("x"), s1, s2)`` or ``merge(Fields("x"), [s1, s2])``.
        """
        if streams and _is_fields_arg(streams[0]):
            if out_fields is not None:
                raise ValueError("merge: the output fields are given twice (first argument and out_fields)")
            out_fields, streams = streams[0], streams[1:]
        if len(streams) == 1 and isinstance(streams[0], (list, tuple)):
            streams = tuple(streams[0])
        if not streams:
            raise ValueError("merge: needs at least one stream")
        for s in streams:
            if not isinstance(s, (Stream, GroupedStream)):
                raise ValueError(f"merge: {s!r} is not a Stream")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        streams = tuple(s.to_stream() for s in streams)
        self._check_own(streams, "merge")
        out = _as_fields(out_fields) or streams[0].get_output_fields()
        for s in streams:
            if len(s.get_output_fields()) != len(out):
                raise ValueError(
                    f"merge: stream of fields {s.get_output_fields().to_list()} has "
                    f"{len(s.get_output_fields())} fields; the merged stream has {len(out)} ({out.to_list()})")
        return self._multi_reduce(list(streams), P.MergeReducer(), out,
                                  [s.get_output_fields() for s in streams], "merge")

    def multi_reduce(self, *args: Any, out_fields: Fields | list[str] | None = None) -> Stream:
        """Run ``reducer`` over the tuples of several streams, per partition and batch (Storm's
        ``multiReduce``, what ``merge`` and ``join`` are built on).

        The forms are Storm's: ``multi_reduce(s1, s2, reducer, out_fields)``,
        ``multi_reduce(input_fields1, s1, input_fields2, s2, reducer, out_fields)``,
        ``multi_reduce([s1, s2, ...], reducer, out_fields)`` and
        ``multi_reduce([input_fields1, ...], [s1, ...], reducer, out_fields)``. With plain
        streams the reducer is a `MultiReducer`: it sees each stream's ``input_fields`` (all its fields
        when not given) and runs in each partition of the node, which the streams reach without
        a repartition of their own. With grouped streams (``s.group_by(fields)``) it is a
        `GroupedMultiReducer`: each stream is partitioned by its group fields, and the reducer
        runs per group of each batch (equal group values from any stream are one group).
        What the reducer emits are the tuples of ``out_fields``.

        Raises:
            ValueError: not those forms, streams of another topology, a reducer of the other
                kind, or input fields that are not the stream's.
        """
        if out_fields is None and args and _is_fields_arg(args[-1]):
            out_fields, args = args[-1], args[:-1]
        if out_fields is None:
            raise ValueError("multi_reduce: the output fields are required (the last argument)")
        if len(args) == 2 and isinstance(args[0], (list, tuple)) and not _is_fields_arg(args[0]):
            streams, inputs, reducer = list(args[0]), None, args[1]
        elif len(args) == 3 and isinstance(args[0], (list, tuple)) and isinstance(args[1], (list, tuple)):
            inputs, streams, reducer = list(args[0]), list(args[1]), args[2]
        elif len(args) == 3:
            streams, inputs, reducer = [args[0], args[1]], None, args[2]
        elif len(args) == 5:
            inputs, streams, reducer = [args[0], args[2]], [args[1], args[3]], args[4]
        else:
            raise ValueError("multi_reduce: give (s1, s2, reducer, out_fields), (input_fields1, s1, input_fields2, "
                             "s2, reducer, out_fields), ([streams], reducer, out_fields) or ([input_fields], "
                             "[streams], reducer, out_fields)")
        if not streams:
            raise ValueError("multi_reduce: needs at least one stream")
        grouped = [isinstance(s, GroupedStream) for s in streams]
        for s in streams:
            if not isinstance(s, (Stream, GroupedStream)):
                raise ValueError(f"multi_reduce: {s!r} is not a Stream")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        if any(grouped) and not all(grouped):
            raise ValueError("multi_reduce: the streams must be all GroupedStreams (for a GroupedMultiReducer) "
                             "or all Streams (for a MultiReducer)")
        if all(grouped):
            if not isinstance(reducer, GroupedMultiReducer):
                raise ValueError(f"multi_reduce: over GroupedStreams the reducer must be a GroupedMultiReducer, "
                                 f"got {_given(reducer)}")
        elif not isinstance(reducer, MultiReducer):
            raise ValueError(f"multi_reduce: over Streams the reducer must be a MultiReducer, got "
                             f"{_given(reducer)}")
        plain = [s.to_stream() for s in streams]
        self._check_own(plain, "multi_reduce")
        if inputs is None:
            ins = [s.get_output_fields() for s in plain]
        else:
            if len(inputs) != len(streams):
                raise ValueError(f"multi_reduce: give one input Fields per stream ({len(streams)} streams), "
                                 f"got {len(inputs)}")
            ins = [_as_fields(f) for f in inputs]
        for s, f in zip(plain, ins):
            _check("multi_reduce", f, s, reducer, on_stream=False)
        out = _as_fields(out_fields)
        if all(grouped):
            return self._grouped_multi_reduce(streams, ins, reducer, out, "multi_reduce")
        return self._multi_reduce(plain, reducer, out, ins)

    def _grouped_multi_reduce(self, streams: list[GroupedStream], inputs: list[Fields], reducer: GroupedMultiReducer,
                              out: Fields, operation: str,
                              executor: type[P.GroupedMultiReducerExecutor] = P.GroupedMultiReducerExecutor) -> Stream:
        """Storm's ``multiReduce(List<Fields>, List<GroupedStream>, ...)``: each stream partitioned
        by its group fields, the reducer run per group by a `GroupedMultiReducerExecutor`."""
        groups = [s.get_group_fields() for s in streams]
        parts = [s.to_stream().partition_by(g) for s, g in zip(streams, groups)]
        full = [_union(g, f) for g, f in zip(groups, inputs)]
        return self._multi_reduce(parts, executor(reducer, groups, inputs, operation), out, full, operation)

    def join(self, stream1: Any, join_fields1: Any, stream2: Any = None, join_fields2: Any = None,
             out_fields: Any = None, join_type: JoinType | Sequence[JoinType] | None = None,
             mode: JoinOutFieldsMode | None = None) -> Stream:
        """The join of two streams within each batch: inner by default; ``join_type``
        `JoinType.OUTER` makes both sides outer, ``[JoinType.INNER, JoinType.OUTER]`` a left
        outer join (Storm's ``List<JoinType>``): a key an outer side has no tuple of gets Nones
        for that side's fields.

        ``join([s1, s2, s3], [fields1, fields2, fields3], out_fields, join_type=None, mode=None)``
        (Storm's ``join(List<Stream>, List<Fields>, Fields, ...)``) joins any number of streams on
        the same number of fields each; ``join_type`` is then one JoinType or one per stream.

        Output (``mode`` `JoinOutFieldsMode.COMPACT`, the default): the join fields (named as
        ``out_fields`` names them), then the other fields of each stream, in stream order. With
        ``mode=JoinOutFieldsMode.PRESERVE``: every field of each stream in its own order, streams
        in order (an outer side without a tuple of the key gives Nones for all its fields). As in
        Storm, the mode may also take the join type's place: ``join(s1, f1, s2, f2, out, mode)``.
        It runs as a grouped `multi_reduce` of Storm's ``JoinerMultiReducer`` (or
        ``PreservingFieldsOrderJoinerMultiReducer``).

        Raises:
            ValueError: fields that are not the streams', ``out_fields`` of the wrong width, or a
                ``join_type`` that is not a JoinType or one per stream.
        """
        if isinstance(stream1, (list, tuple)):
            # Storm's list form: join(streams, join_fields, out_fields[, join_type][, mode])
            if stream2 is not None and out_fields is not None and not isinstance(out_fields, JoinOutFieldsMode):
                raise ValueError("join: the output fields are given twice (third argument and out_fields)")
            if isinstance(out_fields, JoinOutFieldsMode):  # join(streams, fields, out, type, mode)
                if mode is not None:
                    raise ValueError("join: the out-fields mode is given twice")
                out_fields, mode = None, out_fields
            if join_fields2 is not None and join_type is not None:
                raise ValueError("join: the join type is given twice (fourth argument and join_type)")
            given = list(stream1)
            joins_given = list(join_fields1) if isinstance(join_fields1, (list, tuple)) else None
            out_fields = stream2 if stream2 is not None else out_fields
            join_type = join_fields2 if join_fields2 is not None else join_type
            if len(given) < 2:
                raise ValueError(f"join: needs at least two streams, got {len(given)}")
            if joins_given is None or len(joins_given) != len(given) or _is_fields_arg(join_fields1):
                raise ValueError(f"join: give one join Fields per stream ({len(given)} streams), got {join_fields1!r}")
        else:
            given, joins_given = [stream1, stream2], [join_fields1, join_fields2]
        if isinstance(join_type, JoinOutFieldsMode):  # Storm's join(..., outFields, mode)
            if mode is not None:
                raise ValueError("join: the out-fields mode is given twice")
            join_type, mode = None, join_type
        if mode is None:
            mode = JoinOutFieldsMode.COMPACT
        if not isinstance(mode, JoinOutFieldsMode):
            raise ValueError(f"join: mode must be a JoinOutFieldsMode, got {mode!r}")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        for s in given:
            if not isinstance(s, (Stream, GroupedStream)):
                raise ValueError(f"join: {s!r} is not a Stream")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        types = _join_types(join_type, len(given))
        streams = [s.to_stream() for s in given]
        self._check_own(streams, "join")
        joins = [_as_fields(jf) for jf in joins_given]
        out = _as_fields(out_fields)
        for s, jf in zip(streams, joins):
            _check("join", jf, s, on_stream=False)
        for jf in joins[1:]:
            if len(jf) != len(joins[0]):
                raise ValueError(f"join: the join fields {[j.to_list() for j in joins]} differ in number")
        others = [_subtract(s.get_output_fields(), jf) for s, jf in zip(streams, joins)]
        outer = [t is JoinType.OUTER for t in types]
        if mode is JoinOutFieldsMode.PRESERVE:
            origins = [s.get_output_fields() for s in streams]
            width = sum(len(o) for o in origins)
            if out is None or len(out) != width:
                raise ValueError(
                    f"join: out_fields {None if out is None else out.to_list()} must name {width} fields "
                    f"(mode PRESERVE): {', then '.join(str(o.to_list()) for o in origins)}")
            reducer: GroupedMultiReducer = P.PreservingFieldsOrderJoinerMultiReducer(outer, len(joins[0]), origins, joins)
        else:
            width = len(joins[0]) + sum(len(o) for o in others)
            if out is None or len(out) != width:
                then = ", then ".join(str(o.to_list()) for o in others)
                raise ValueError(
                    f"join: out_fields {None if out is None else out.to_list()} must name {width} fields: "
                    f"the join fields {joins[0].to_list()}, then {then}")
            reducer = P.JoinerMultiReducer(outer, len(joins[0]), [len(o) for o in others])
        return self._grouped_multi_reduce([s.group_by(jf) for s, jf in zip(streams, joins)], others, reducer, out,
                                          "join", P.JoinExecutor)

    def build(self) -> StormTopology:
        """The `StormTopology` running this Trident topology (see ``planner.py``)."""
        from .planner import build_topology

        return build_topology(self)

    # internals shared by Stream
    def _check_own(self, streams, operation: str) -> None:
        for s in streams:
            if s._topology is not self:
                raise ValueError(f"{operation}: a stream of another TridentTopology")

    def _multi_reduce(self, streams: list[Stream], reducer: Any, out: Fields, inputs: list[Fields],
                      operation: str = "multi_reduce") -> Stream:
        names = [s._name for s in streams if s._name]
        proc = P.MultiReduceProcessor(inputs, reducer)
        proc.operation = operation  # what its errors call it (squall.trident.failures)
        node = self._add_processor([s._node for s in streams], "-".join(names) or None, out, proc)
        return Stream(self, node, None)

    def _add_processor(self, parents: list[Node], name: str | None, fields: Fields, processor: Any,
                       committer: bool = False, state_id: str | None = None) -> ProcessorNode:
        g = self._graph
        node = ProcessorNode(g.next_index(), g.next_stream_id(), name, fields, processor=processor,
                             committer=committer, state_id=state_id)
        return g.add(node, parents)  # type: ignore[return-value]


def _drpc_txid(function: str, g: _Graph) -> str:
    """A txid key for a DRPC spout (its batches' state): ``_drpc.<function>``, the characters a
    key may not hold replaced, numbered if that is taken."""
    base = "_drpc." + "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in function)[:150]
    taken = {n.txid for n in g.nodes if isinstance(n, SpoutNode)}
    txid, k = base, 1
    while txid in taken:
        txid, k = f"{base}-{k}", k + 1
    return txid


def _is_fields_arg(value: Any) -> bool:
    """Whether ``value`` is a list of field names (a `Fields`, or a list or tuple of strings)."""
    return isinstance(value, Fields) or (isinstance(value, (list, tuple)) and bool(value)
                                         and all(isinstance(v, str) for v in value))


def _given(obj: Any) -> str:
    """What a builder's error says the user passed: the name of its type, or, for a class or a
    function where an object is wanted (its parentheses forgotten: ``Count``,
    ``MemoryMapState.factory``), which one and what to pass instead (where the type's name said
    ``ABCMeta`` or ``function``)."""
    if isinstance(obj, type):
        return f"the class {obj.__name__} (pass an instance: {obj.__name__}(...))"
    if inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj):
        name = getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))
        return f"the function {name} (pass what it returns: {name}(...))"
    return type(obj).__name__


def _check_factory(operation: str, state_factory: Any) -> None:
    """A state factory is refused where the user gives it, not by every task of the state (which
    raised ``AttributeError: 'function' object has no attribute 'make_state'`` in a worker).

    Raises:
        ValueError: ``state_factory`` has no ``make_state``, or is a class.
    """
    factory = callable(getattr(state_factory, "make_state", None))
    if isinstance(state_factory, type) or not factory:
        # a class with no make_state (RedisMapState, whose factories make one) is not to be made
        given = _given(state_factory) if factory or not isinstance(state_factory, type) else \
            f"the class {state_factory.__name__}"
        raise ValueError(f"{operation}: {given} is not a StateFactory (an object with "
                         f"make_state(conf, metrics, partition_index, num_partitions))")


def _spout_fields(spout: Any) -> Fields:
    if isinstance(spout, type) or inspect.isfunction(spout):
        raise ValueError(f"new_stream: {_given(spout)} is not a Trident spout or a Spout")
    get = getattr(spout, "get_output_fields", None)
    if get is not None:
        return _as_fields(get())
    declare = getattr(spout, "declare_output_fields", None)
    if declare is not None:  # a plain Spout: its default stream's fields
        from .._collectors import OutputFieldsDeclarer
        from .._system import DEFAULT_STREAM

        declarer = OutputFieldsDeclarer(type(spout).__name__)
        declare(declarer)
        info = declarer.streams.get(DEFAULT_STREAM)
        if info is None:
            raise ValueError(f"new_stream: spout {type(spout).__name__} declares no default stream")
        return info.fields
    raise ValueError(f"new_stream: {_given(spout)} is not a Trident spout or a Spout")


class Stream:
    """A stream of a `TridentTopology`: every method adds an operation and returns the new stream."""

    def __init__(self, topology: TridentTopology, node: Node, name: str | None) -> None:
        self._topology = topology
        self._node = node
        self._name = name

    # naming and sizing
    def name(self, name: str) -> Stream:
        """This stream, its next operations named ``name`` (in their bolt's id: ``b-0-name``)."""
        return Stream(self._topology, self._node, name)

    def parallelism_hint(self, n: int) -> Stream:
        """Run the operation that made this stream in ``n`` tasks (its bolt takes the largest hint)."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"parallelism_hint: must be an int of at least 1, got {n!r}")
        self._node.parallelism = n
        return self

    def get_output_fields(self) -> Fields:
        """The fields of the stream's tuples."""
        return self._node.fields

    def get_name(self) -> str | None:
        """The name given by ``name()``, if any."""
        return self._name

    def to_stream(self) -> Stream:
        """This stream (a `GroupedStream` answers with its ungrouped stream)."""
        return self

    # plumbing
    def _add(self, operation: str, fields: Fields, processor: Any, *, committer: bool = False,
             state_id: str | None = None) -> ProcessorNode:
        processor.operation = operation  # what its errors call it (squall.trident.failures)
        return self._topology._add_processor([self._node], self._name, fields, processor, committer, state_id)

    def _next(self, node: Node) -> Stream:
        return Stream(self._topology, node, self._name)

    # per-tuple operations
    def each(self, input_fields: Fields | list[str] | None, op: Any = None,
             function_fields: Fields | list[str] | None = None) -> Stream:
        """A `BaseFunction` over ``input_fields`` appending ``function_fields``, or a `BaseFilter`.

        ``each(function, function_fields)`` and ``each(filter)`` use the whole tuple as input.
        """
        if op is None or isinstance(input_fields, (BaseFunction, BaseFilter)):
            input_fields, op, function_fields = None, input_fields, op if op is not None else function_fields
        inputs = _as_fields(input_fields)
        _check("each", inputs, self, op)
        if inputs is None:
            inputs = self.get_output_fields()
        if isinstance(op, BaseFilter):
            if function_fields is not None and len(_as_fields(function_fields)):
                raise ValueError(f"each: a filter ({type(op).__name__}) takes no function fields")
            return self._next(self._add("each", self.get_output_fields(), P.FilterProcessor(inputs, op)))
        if not isinstance(op, BaseFunction):
            raise ValueError(f"each: {_given(op)} is neither a BaseFunction nor a BaseFilter")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        out = _as_fields(function_fields)
        if out is None:
            raise ValueError(f"each: the function {type(op).__name__} needs function_fields")
        _check_new("each", out, self, op)
        return self._next(self._add("each", _concat(self.get_output_fields(), out), P.EachProcessor(inputs, op)))

    def map(self, function: MapFunction, out_fields: Fields | list[str] | None = None) -> Stream:
        """One tuple out per tuple in; with ``out_fields`` the output is only those fields."""
        if not isinstance(function, MapFunction):
            raise ValueError(f"map: {_given(function)} is not a MapFunction")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        out = _as_fields(out_fields) or self.get_output_fields()
        return self._next(self._add("map", out, P.MapProcessor("map", function, self.get_output_fields())))

    def flat_map(self, function: FlatMapFunction, out_fields: Fields | list[str] | None = None) -> Stream:
        """Any number of tuples out per tuple in; with ``out_fields`` the output is only those fields."""
        if not isinstance(function, FlatMapFunction):
            raise ValueError(f"flat_map: {_given(function)} is not a FlatMapFunction")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        out = _as_fields(out_fields) or self.get_output_fields()
        return self._next(self._add("flat_map", out, P.MapProcessor("flat_map", function, self.get_output_fields())))

    def filter(self, input_fields_or_filter: Any, filter: BaseFilter | None = None) -> Stream:
        """``filter(f)`` sees the whole tuple; ``filter(input_fields, f)`` only those fields."""
        if filter is None:
            return self.each(self.get_output_fields(), input_fields_or_filter)
        inputs = _as_fields(input_fields_or_filter)
        _check("filter", inputs, self, filter)
        return self.each(inputs, filter)

    def peek(self, consumer: Consumer) -> Stream:
        """``consumer.accept`` sees every tuple, which passes on unchanged."""
        if not isinstance(consumer, Consumer):
            raise ValueError(f"peek: {_given(consumer)} is not a Consumer")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        fields = self.get_output_fields()
        return self._next(self._add("peek", fields, P.MapProcessor("peek", consumer, fields)))

    def project(self, fields: Fields | list[str]) -> Stream:
        """Keep only ``fields``."""
        keep = _as_fields(fields)
        _check("project", keep, self)
        return self._next(self._add("project", keep, P.ProjectProcessor(keep)))

    # windowing (Storm's Stream.window, tumblingWindow, slidingWindow)
    def window(self, window_config: Any, *args: Any) -> Stream:
        """The results of ``aggregator`` over each window of this stream's tuples (Storm's
        ``window``): ``window(window_config, input_fields, aggregator, function_fields)`` keeps
        the windows in the worker's memory (an `InMemoryWindowsStoreFactory`),
        ``window(window_config, window_store_factory, input_fields, aggregator, function_fields)``
        in the store the factory makes.

        ``window_config`` is a `TumblingCountWindow`, `SlidingCountWindow`,
        `TumblingDurationWindow` or `SlidingDurationWindow` (processing time; there is no event
        time in Trident's windows). Each task of the operation windows the tuples that reach it;
        a batch's tuples join the window when the batch commits there, in txid order, and the
        results of the windows that fired then (a duration window's: since the batch before) are
        emitted in that batch, one aggregate per window. The stream after it is the
        ``function_fields`` only. ``aggregator`` is a `BaseAggregator` (``batch_id`` is the
        window's trigger id), a `CombinerAggregator` or a `ReducerAggregator`. See
        docs/trident.md, "Windows".

        Raises:
            ValueError: another form, a bad window, a field not in the stream, or not an aggregator.
        """
        from .windowing.store import InMemoryWindowsStoreFactory, WindowsStoreFactory

        if len(args) == 3:
            factory: Any = InMemoryWindowsStoreFactory()
            input_fields, aggregator, function_fields = args
        elif len(args) == 4:
            factory, input_fields, aggregator, function_fields = args
            if not isinstance(factory, WindowsStoreFactory):
                raise ValueError(f"window: {_given(factory)} is not a WindowsStoreFactory")
        else:
            raise ValueError("window: give (window_config, input_fields, aggregator, function_fields) or "
                             "(window_config, window_store_factory, input_fields, aggregator, function_fields)")
        return self._window("window", window_config, factory, input_fields, aggregator, function_fields)

    def tumbling_window(self, window: Any, window_store_factory: Any, input_fields: Fields | list[str],
                        aggregator: Any, function_fields: Fields | list[str]) -> Stream:
        """`window` over a tumbling window (Storm's ``tumblingWindow``): ``window`` an int count of
        tuples (`TumblingCountWindow`) or a ``squall.Duration`` (`TumblingDurationWindow`); each
        tuple is in exactly one window."""
        from .windowing.config import TumblingCountWindow, TumblingDurationWindow

        config = TumblingCountWindow.of(window) if isinstance(window, int) else TumblingDurationWindow.of(window)
        return self._window("tumbling_window", config, window_store_factory, input_fields, aggregator,
                            function_fields)

    def sliding_window(self, window: Any, slide: Any, window_store_factory: Any,
                       input_fields: Fields | list[str], aggregator: Any, function_fields: Fields | list[str]) -> Stream:
        """`window` over a sliding window (Storm's ``slidingWindow``): the last ``window`` tuples
        every ``slide`` tuples (ints: `SlidingCountWindow`), or the tuples of the last ``window``
        every ``slide`` (``squall.Duration`` both: `SlidingDurationWindow`)."""
        from .windowing.config import SlidingCountWindow, SlidingDurationWindow

        if isinstance(window, int) and isinstance(slide, int):
            config: Any = SlidingCountWindow.of(window, slide)
        else:
            config = SlidingDurationWindow.of(window, slide)
        return self._window("sliding_window", config, window_store_factory, input_fields, aggregator, function_fields)

    def _window(self, operation: str, window_config: Any, factory: Any, input_fields: Any, aggregator: Any,
                function_fields: Any) -> Stream:
        from .windowing.config import WindowConfig
        from .windowing.processor import WindowTridentProcessor, as_window_aggregator
        from .windowing.store import WindowsStoreFactory

        if not isinstance(window_config, WindowConfig):
            raise ValueError(f"{operation}: {window_config!r} is not a window config (TumblingCountWindow, "  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
                             "SlidingCountWindow, TumblingDurationWindow, SlidingDurationWindow)")
        try:
            window_config.validate()
        except ValueError as e:
            raise ValueError(f"{operation}: {e}") from None
        if not isinstance(factory, WindowsStoreFactory):
            raise ValueError(f"{operation}: {_given(factory)} is not a WindowsStoreFactory")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        inputs = _as_fields(input_fields)
        if inputs is None:
            raise ValueError(f"{operation}: input_fields are required")
        _check(operation, inputs, self, aggregator)
        out = _need_fields(operation, function_fields)
        agg = as_window_aggregator(aggregator, operation)
        g = self._topology._graph
        window_id = f"w{sum(isinstance(getattr(n, 'processor', None), WindowTridentProcessor) for n in g.nodes)}"
        # a committer: its bolt finishes each batch at the batch's commit, in txid order
        # (Storm's window comes with a partitionPersist that makes it one)
        processor = WindowTridentProcessor(window_config, window_id, factory, inputs, agg, out)
        return self._next(self._add(operation, out, processor, committer=True))

    # repartitioning
    def _partition(self, operation: str, partitioning: Partitioning) -> Stream:
        if isinstance(self._node, PartitionNode):
            # two repartitions in a row: a pass-through operation between them (Storm's TrueFilter)
            return self._identity_each()._partition(operation, partitioning)
        g = self._topology._graph
        node = g.add(PartitionNode(g.next_index(), g.next_stream_id(), self._name, self.get_output_fields(),
                                   partitioning=partitioning), [self._node])
        return self._next(node)

    def _identity_each(self) -> Stream:
        return self._next(self._add("each", self.get_output_fields(),
                                    P.FilterProcessor(Fields(), P.TrueFilter())))

    def shuffle(self) -> Stream:
        """Spread tuples evenly over the next operation's tasks."""
        return self._partition("shuffle", Partitioning("shuffle"))

    def local_or_shuffle(self) -> Stream:
        """Prefer tasks in the same worker, else shuffle."""
        return self._partition("local_or_shuffle", Partitioning("local_or_shuffle"))

    def broadcast(self) -> Stream:
        """Every tuple to every task of the next operation."""
        return self._partition("broadcast", Partitioning("all"))

    def partition_by(self, fields: Fields | list[str]) -> Stream:
        """Tuples with equal values of ``fields`` go to the same task."""
        by = _as_fields(fields)
        _check("partition_by", by, self)
        return self._partition("partition_by", Partitioning("fields", fields=by))

    def global_(self) -> Stream:
        """Every batch to the same single task (the lowest task id)."""
        return self._partition("global_", Partitioning("global"))

    def batch_global(self) -> Stream:
        """All of one batch to one task, which may differ between batches (by txid)."""
        return self._partition("batch_global", Partitioning("batch_global"))

    def identity_partition(self) -> Stream:
        """Task i of this operation sends to task i of the next one (equal parallelism)."""
        return self._partition("identity_partition", Partitioning("identity"))

    def partition(self, custom_grouping: CustomStreamGrouping) -> Stream:
        """Repartition with a `CustomStreamGrouping` (it sees the values after a leading batch id)."""
        if not isinstance(custom_grouping, CustomStreamGrouping):
            raise ValueError(f"partition: {_given(custom_grouping)} is not a CustomStreamGrouping")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        return self._partition("partition", Partitioning("custom", custom=custom_grouping))

    def apply_assembly(self, assembly: Assembly) -> Stream:
        """``assembly.apply(self)``."""
        if not isinstance(assembly, Assembly):
            raise ValueError(f"apply_assembly: {_given(assembly)} is not an Assembly")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        return assembly.apply(self)

    # aggregation
    def partition_aggregate(self, input_fields: Fields | list[str] | None, aggregator: Any = None,
                            function_fields: Fields | list[str] | None = None) -> Stream:
        """Aggregate each partition's part of each batch; the output replaces the input tuples."""
        if aggregator is None or not isinstance(input_fields, (Fields, list, tuple, str, type(None))):
            input_fields, aggregator, function_fields = None, input_fields, aggregator
        inputs = _as_fields(input_fields)
        _check("partition_aggregate", inputs, self, aggregator)
        out = _need_fields("partition_aggregate", function_fields)
        return _aggregate(self, "partition_aggregate", inputs, aggregator, out, scope="partition")

    def aggregate(self, input_fields: Fields | list[str] | None, aggregator: Any = None,
                  function_fields: Fields | list[str] | None = None) -> Stream:
        """One aggregate per batch over all partitions (a combiner aggregates partially first)."""
        if aggregator is None or not isinstance(input_fields, (Fields, list, tuple, str, type(None))):
            input_fields, aggregator, function_fields = None, input_fields, aggregator
        inputs = _as_fields(input_fields)
        _check("aggregate", inputs, self, aggregator)
        out = _need_fields("aggregate", function_fields)
        return _aggregate(self, "aggregate", inputs, aggregator, out, scope="batch")

    def chained_agg(self) -> ChainedAggregatorDeclarer:
        """Several aggregators over the same batch, their outputs side by side in one tuple
        (Storm's ``chainedAgg()``): ``chained_agg().partition_aggregate(...)...chain_end()`` per
        partition, ``chained_agg().aggregate(...)...chain_end()`` once per batch."""
        return ChainedAggregatorDeclarer(self, None)

    def min_by(self, field: str, comparator: Any = None) -> Stream:
        """Per partition and batch, the whole tuple with the least value of ``field`` (a tuple
        whose value is None is skipped, a tie goes to the later tuple). With ``comparator``
        (Storm's ``minBy(field, Comparator)``) the values are ordered by it: a callable of two
        values returning a negative number, zero or a positive one (see `MinWithComparator`)."""
        if comparator is None:
            return self._compare("min_by", field, Min(field))
        return self._compare("min_by", field, MinWithComparator(field, _comparator("min_by", comparator)))

    def max_by(self, field: str, comparator: Any = None) -> Stream:
        """Per partition and batch, the whole tuple with the greatest value of ``field``; see
        `min_by` (Storm's ``maxBy``)."""
        if comparator is None:
            return self._compare("max_by", field, Max(field))
        return self._compare("max_by", field, MaxWithComparator(field, _comparator("max_by", comparator)))

    def min(self, comparator: Any) -> Stream:
        """Per partition and batch, the least tuple by ``comparator``, which is given two
        `TridentTuple` objects (Storm's ``min(Comparator<TridentTuple>)``); a tie goes to the later
        tuple."""
        return self._compare("min", None, MinWithComparator(None, _comparator("min", comparator)))

    def max(self, comparator: Any) -> Stream:
        """Per partition and batch, the greatest tuple by ``comparator``; see `min` (Storm's
        ``max(Comparator<TridentTuple>)``)."""
        return self._compare("max", None, MaxWithComparator(None, _comparator("max", comparator)))

    def _compare(self, operation: str, field_name: str | None, aggregator: BaseAggregator) -> Stream:
        # Storm's comparableAggregateStream: a ComparisonAggregator (Nones skipped, ties to the
        # later tuple) over the whole tuple, per partition
        if field_name is not None:
            if not isinstance(field_name, str):
                raise ValueError(f"{operation}: the field must be a field name, got {field_name!r}")
            _check(operation, Fields(field_name), self)
        fields = self.get_output_fields()
        return self._next(self._add(operation, fields, P.AggregateProcessor(fields, aggregator)))

    def group_by(self, fields: Fields | list[str]) -> GroupedStream:
        """Group by ``fields``: the next aggregation runs per group (after ``partition_by(fields)``)."""
        by = _as_fields(fields)
        _check("group_by", by, self)
        return GroupedStream(self, by)

    # state
    def persistent_aggregate(self, state_factory: Any, input_fields: Fields | list[str] | None,
                             aggregator: Any = None, function_fields: Fields | list[str] | None = None
                             ) -> TridentState:
        """Aggregate every batch into one global value of a `Snapshottable` state.

        ``persistent_aggregate(factory, aggregator, function_fields)`` takes the whole tuple.
        """
        _check_factory("persistent_aggregate", state_factory)
        if not isinstance(input_fields, (Fields, list, tuple, str, type(None))):
            input_fields, aggregator, function_fields = None, input_fields, aggregator
        inputs = _as_fields(input_fields)
        _check("persistent_aggregate", inputs, self, aggregator)
        out = _need_fields("persistent_aggregate", function_fields)
        if isinstance(aggregator, CombinerAggregator):
            totals = _aggregate(self, "persistent_aggregate", inputs, aggregator, out, scope="global")
            return totals._persist("persistent_aggregate", state_factory, out, CombinerAggStateUpdater(aggregator), out)
        if isinstance(aggregator, ReducerAggregator):
            if len(out) != 1:
                raise ValueError(f"persistent_aggregate: a reducer gives one field, got {out.to_list()}")
            return self.global_()._persist(
                "persistent_aggregate", state_factory, inputs if inputs is not None else self.get_output_fields(),
                ReducerAggStateUpdater(aggregator), out)
        raise ValueError(f"persistent_aggregate: {_given(aggregator)} is not a CombinerAggregator "
                         "or a ReducerAggregator")

    def partition_persist(self, state_factory: Any, input_fields: Fields | list[str] | None,
                          updater: Any = None, function_fields: Fields | list[str] | None = None
                          ) -> TridentState:
        """Hand each partition's batch to ``updater.update_state(state, tuples, collector)`` at commit.

        What the updater emits (``function_fields``) is `TridentState.new_values_stream()`.
        """
        _check_factory("partition_persist", state_factory)
        if updater is None or not isinstance(input_fields, (Fields, list, tuple, str, type(None))):
            input_fields, updater, function_fields = None, input_fields, updater
        inputs = _as_fields(input_fields)
        _check("partition_persist", inputs, self, updater)
        if inputs is None:
            inputs = self.get_output_fields()
        if isinstance(updater, type) or not callable(getattr(updater, "update_state", None)):
            raise ValueError(f"partition_persist: {_given(updater)} has no update_state")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        return self._persist("partition_persist", state_factory, inputs, updater, _as_fields(function_fields) or Fields())

    def _persist(self, operation: str, state_factory: Any, inputs: Fields, updater: Any, out: Fields) -> TridentState:
        """The state node of a ``partition_persist``, or of a ``persistent_aggregate`` (built on
        one): ``operation`` is what the user called, and what an error of its state is named
        after (`squall.trident.failures`)."""
        g = self._topology._graph
        state_id = g.next_state_id()
        g.states[state_id] = StateSpec(state_id, state_factory)
        node = self._add(operation, out, P.PartitionPersistProcessor(state_id, inputs, updater),
                         committer=True, state_id=state_id)
        return TridentState(self._topology, node)

    def state_query(self, state: TridentState, input_fields: Fields | list[str] | None,
                    query_function: Any = None, function_fields: Fields | list[str] | None = None) -> Stream:
        """Query ``state`` per batch: ``batch_retrieve`` then ``execute`` per tuple, appending fields.

        Runs in the tasks holding the state, so it sees the partition this stream's tuple lands
        on (``group_by(...).state_query`` lands each key on the partition storing it).
        """
        if query_function is None or not isinstance(input_fields, (Fields, list, tuple, str, type(None))):
            input_fields, query_function, function_fields = None, input_fields, query_function
        if not isinstance(state, TridentState) or state._topology is not self._topology:
            raise ValueError("state_query: the state must be a TridentState of the same TridentTopology")
        inputs = _as_fields(input_fields)
        _check("state_query", inputs, self, query_function)
        if inputs is None:
            inputs = self.get_output_fields()
        if isinstance(query_function, type) or not callable(getattr(query_function, "batch_retrieve", None)):
            raise ValueError(f"state_query: {_given(query_function)} has no batch_retrieve")  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
        out = _need_fields("state_query", function_fields)
        _check_new("state_query", out, self, query_function)
        state_id = state._state_id
        node = self._add("state_query", _concat(self.get_output_fields(), out),
                         P.StateQueryProcessor(state_id, inputs, query_function), state_id=state_id)
        return self._next(node)

    def _describe(self) -> str:
        """``the stream of new_stream('words', Spout) after each(Split) named 'split'``: its
        spouts (every one it comes from, for a merge or a join) and the operation that made it."""
        g = self._topology._graph
        spouts: list[str] = []
        seen: set[int] = set()
        todo = [self._node]
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, SpoutNode):
                spouts.append(_node_text(node))
            todo.extend(reversed(g.parents.get(node, [])))
        text = f"the stream of {', '.join(spouts) or 'no spout'}"
        return text if isinstance(self._node, SpoutNode) else f"{text} after {_node_text(self._node)}"

    def __repr__(self) -> str:
        return f"Stream({self.get_output_fields().to_list()})"


def _comparator(operation: str, comparator: Any) -> Any:
    if not callable(comparator):
        msg = (f"{operation}: the comparator must be a callable of two values (negative, zero or positive, "
               f"as a Java Comparator), got {comparator!r}")
        raise ValueError(msg)  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
    return comparator


def _need_fields(operation: str, fields: Any) -> Fields:
    out = _as_fields(fields)
    if out is None:
        raise ValueError(f"{operation}: function_fields are required")
    return out


def _aggregate(stream: Stream, operation: str, inputs: Fields | None, aggregator: Any, out: Fields,
               scope: str, group: Fields | None = None) -> Stream:
    """Storm's ``ChainedAggregatorDeclarer`` for one aggregator.

    ``scope``: ``partition`` (per partition), ``batch`` (one result per batch, on the task
    ``batch_global`` picks) or ``global`` (one result per batch on the lowest task, for a
    persistent aggregate). With ``group`` the aggregation runs per group, after
    ``partition_by(group)``. A combiner aggregates partially before the repartition.
    """
    fields = stream.get_output_fields()
    if isinstance(aggregator, CombinerAggregator):
        if len(out) != 1:
            raise ValueError(f"{operation}: a CombinerAggregator gives one field, got {out.to_list()}")
        # init each tuple into the output field, then combine (Storm's CombinerAggregatorInitImpl);
        # an output field the stream already has (aggregate("count", Sum(), "count")) is renamed
        init_out = out if out[0] not in fields else Fields(f"$init-{out[0]}")
        s = stream._next(stream._add(operation, _concat(fields, init_out),
                                     P.EachProcessor(inputs if inputs is not None else fields,
                                                     P.CombinerInitFunction(aggregator))))
        combine = P.CombinerCombineAggregator(aggregator)
        if scope == "partition":
            return _partition_agg(s, init_out, combine, out, group, operation)
        partial = _partition_agg(s, init_out, combine, init_out, group, operation, partial=True)
        # after the repartition the combiner runs in a bolt of its own, prepared there
        return _final_agg(partial, init_out, P.CombinerCombineAggregator(aggregator, owns_lifecycle=True),
                          out, scope, group, operation)
    if isinstance(aggregator, ReducerAggregator):
        if len(out) != 1:
            raise ValueError(f"{operation}: a ReducerAggregator gives one field, got {out.to_list()}")
        agg: BaseAggregator = P.ReducerAggregatorImpl(aggregator)
    elif isinstance(aggregator, BaseAggregator):
        agg = aggregator
    else:
        raise ValueError(f"{operation}: {_given(aggregator)} is not a CombinerAggregator, "  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
                         "ReducerAggregator or BaseAggregator")
    ins = inputs if inputs is not None else fields
    if scope == "partition":
        return _partition_agg(stream, ins, agg, out, group, operation)
    return _final_agg(stream, ins, agg, out, scope, group, operation)


def _partition_agg(stream: Stream, inputs: Fields, agg: Any, out: Fields, group: Fields | None,
                   operation: str, partial: bool = False) -> Stream:
    # ``operation``: what the user called (aggregate, persistent_aggregate, chained_agg...), which
    # its errors name, not this step of it: a user who wrote group_by().aggregate(Merge()) looked
    # for a partition_aggregate they never wrote
    if group is None:
        return stream._next(stream._add(operation, out, P.AggregateProcessor(inputs, agg, partial)))
    grouped = P.GroupedAggregator(agg, group, inputs)
    return stream._next(stream._add(operation, _concat(group, out),
                                    P.AggregateProcessor(_union(group, inputs), grouped, partial)))


def _final_agg(stream: Stream, inputs: Fields, agg: Any, out: Fields, scope: str, group: Fields | None,
               operation: str) -> Stream:
    if group is not None:
        return _partition_agg(stream.partition_by(group), inputs, agg, out, group, operation)
    moved = stream.batch_global() if scope == "batch" else stream.global_()
    single = P.SingleEmitAggregator(agg, "batch_global" if scope == "batch" else "global")
    return moved._next(moved._add(operation, out, P.AggregateProcessor(inputs, single)))


class GroupedStream:
    """A stream grouped by fields (``Stream.group_by``): aggregations run per group."""

    def __init__(self, stream: Stream, group_fields: Fields) -> None:
        self._stream = stream
        self._group = group_fields

    def get_group_fields(self) -> Fields:
        """The fields grouped by."""
        return self._group

    def get_output_fields(self) -> Fields:
        """The fields of the underlying stream."""
        return self._stream.get_output_fields()

    def to_stream(self) -> Stream:
        """The underlying, ungrouped stream."""
        return self._stream

    def _describe(self) -> str:
        """`Stream._describe`, and the group fields."""
        return f"{self._stream._describe()}, grouped by {self._group.to_list()}"

    def name(self, name: str) -> GroupedStream:
        """Name the next operations (see `Stream.name`)."""
        return GroupedStream(self._stream.name(name), self._group)

    def each(self, input_fields: Any, op: Any = None, function_fields: Any = None) -> GroupedStream:
        """`Stream.each`, keeping the grouping."""
        return GroupedStream(self._stream.each(input_fields, op, function_fields), self._group)

    def _args(self, operation: str, input_fields: Any, aggregator: Any, function_fields: Any):
        if aggregator is None or not isinstance(input_fields, (Fields, list, tuple, str, type(None))):
            input_fields, aggregator, function_fields = None, input_fields, aggregator
        inputs = _as_fields(input_fields)
        _check(operation, inputs, self, aggregator)
        out = _need_fields(operation, function_fields)
        _check_new(operation, out, self, aggregator, self._group)
        return inputs, aggregator, out

    def chained_agg(self) -> ChainedAggregatorDeclarer:
        """`Stream.chained_agg` per group: the output is the group fields, then every
        aggregator's function fields."""
        return ChainedAggregatorDeclarer(self._stream, self._group)

    def partition_aggregate(self, input_fields: Any, aggregator: Any = None, function_fields: Any = None
                            ) -> GroupedStream:
        """Aggregate per group within each partition; output: the group fields, then ``function_fields``."""
        inputs, aggregator, out = self._args("partition_aggregate", input_fields, aggregator, function_fields)
        s = _aggregate(self._stream, "partition_aggregate", inputs, aggregator, out, "partition", self._group)
        return GroupedStream(s, self._group)

    def aggregate(self, input_fields: Any, aggregator: Any = None, function_fields: Any = None) -> Stream:
        """One aggregate per group and batch; output: the group fields, then ``function_fields``."""
        inputs, aggregator, out = self._args("aggregate", input_fields, aggregator, function_fields)
        return _aggregate(self._stream, "aggregate", inputs, aggregator, out, "batch", self._group)

    def persistent_aggregate(self, state_factory: Any, input_fields: Any, aggregator: Any = None,
                             function_fields: Any = None) -> TridentState:
        """Aggregate every batch into a `MapState` keyed by the group's values."""
        _check_factory("persistent_aggregate", state_factory)
        inputs, aggregator, out = self._args("persistent_aggregate", input_fields, aggregator, function_fields)
        if isinstance(aggregator, CombinerAggregator):
            totals = _aggregate(self._stream, "persistent_aggregate", inputs, aggregator, out, "batch", self._group)
            return totals._persist("persistent_aggregate", state_factory, _union(self._group, out),
                                   MapCombinerAggStateUpdater(aggregator, self._group, out), _concat(self._group, out))
        if isinstance(aggregator, ReducerAggregator):
            ins = inputs if inputs is not None else _subtract(self.get_output_fields(), self._group)
            return self._stream.partition_by(self._group)._persist(
                "persistent_aggregate", state_factory, _union(self._group, ins),
                MapReducerAggStateUpdater(aggregator, self._group, ins), _concat(self._group, out))
        raise ValueError(f"persistent_aggregate: {_given(aggregator)} is not a CombinerAggregator "
                         "or a ReducerAggregator")

    def state_query(self, state: TridentState, input_fields: Any, query_function: Any = None,
                    function_fields: Any = None) -> Stream:
        """`Stream.state_query` after ``partition_by(group fields)``."""
        if query_function is None or not isinstance(input_fields, (Fields, list, tuple, str, type(None))):
            input_fields, query_function, function_fields = None, input_fields, query_function
        _check("state_query", _as_fields(input_fields), self, query_function)
        return self._stream.partition_by(self._group).state_query(state, input_fields, query_function,
                                                                  function_fields)


@dataclass(frozen=True)
class _ChainSpec:
    inputs: Fields | None
    aggregator: Any
    out: Fields


class ChainedAggregatorDeclarer:
    """Storm's ``ChainedAggregatorDeclarer`` (``Stream.chained_agg()``,
    ``GroupedStream.chained_agg()``): aggregators declared one after the other with
    `partition_aggregate` or `aggregate` (not both in one chain) run over the same tuples, and
    `chain_end` gives the stream of their results side by side: the group fields (when grouped),
    then each aggregator's ``function_fields`` in chain order. When every aggregator emits one
    tuple, that is one tuple; otherwise every combination of one emit of each (none when one
    emitted nothing). `aggregate` over combiners only aggregates each partition first and moves
    the partials, as a lone combiner's `Stream.aggregate` does; with any other aggregator in the
    chain every tuple moves. Nothing is added to the topology until `chain_end`.
    """

    def __init__(self, stream: Stream, group: Fields | None) -> None:
        self._stream = stream
        self._group = group
        self._specs: list[_ChainSpec] = []
        self._kind: str | None = None  # "partition_aggregate" or "aggregate"
        self._ended = False

    def _add(self, kind: str, input_fields: Any, aggregator: Any, function_fields: Any) -> ChainedAggregatorDeclarer:
        operation = f"chained_agg.{kind}"
        if self._ended:
            raise ValueError(f"{operation}: the chain was already ended (chain_end)")
        if self._kind is not None and self._kind != kind:
            raise ValueError(f"{operation}: a chain is all partition_aggregate or all aggregate, "
                             f"and this one is {self._kind}")
        if aggregator is None or not isinstance(input_fields, (Fields, list, tuple, str, type(None))):
            input_fields, aggregator, function_fields = None, input_fields, aggregator
        inputs = _as_fields(input_fields)
        _check(operation, inputs, self._stream if self._group is None else GroupedStream(self._stream, self._group),
               aggregator)
        out = _need_fields(operation, function_fields)
        if not isinstance(aggregator, (CombinerAggregator, ReducerAggregator, BaseAggregator)):
            raise ValueError(f"{operation}: {_given(aggregator)} is not a CombinerAggregator, "  # noqa: TRY004 (API.md: the builder's bad input raises ValueError naming the operation)
                             "ReducerAggregator or BaseAggregator")
        if isinstance(aggregator, (CombinerAggregator, ReducerAggregator)) and len(out) != 1:
            raise ValueError(f"{operation}: a {'CombinerAggregator' if isinstance(aggregator, CombinerAggregator) else 'ReducerAggregator'} "
                             f"gives one field, got {out.to_list()}")
        taken = [*(self._group or ()), *(n for spec in self._specs for n in spec.out)]
        for name in out:
            if name in taken:
                raise ValueError(f"{operation}: output field {name!r} is already an output of the chain {taken}")
        self._kind = kind
        self._specs.append(_ChainSpec(inputs, aggregator, out))
        return self

    def partition_aggregate(self, input_fields: Any, aggregator: Any = None,
                            function_fields: Any = None) -> ChainedAggregatorDeclarer:
        """Chain an aggregator run per partition (and group) of each batch."""
        return self._add("partition_aggregate", input_fields, aggregator, function_fields)

    def aggregate(self, input_fields: Any, aggregator: Any = None, function_fields: Any = None
                  ) -> ChainedAggregatorDeclarer:
        """Chain an aggregator run once per batch (per group and batch when grouped)."""
        return self._add("aggregate", input_fields, aggregator, function_fields)

    def chain_end(self) -> Stream:
        """The stream of the chain's results."""
        if self._ended:
            raise ValueError("chained_agg.chain_end: the chain was already ended")
        if not self._specs:
            raise ValueError("chained_agg.chain_end: no aggregator was chained")
        self._ended = True
        stream, group = self._stream, self._group
        fields = stream.get_output_fields()
        partition = self._kind == "partition_aggregate"
        operation = f"chained_agg.{self._kind}"
        combiners_only = all(isinstance(s.aggregator, CombinerAggregator) for s in self._specs)
        # a combiner's init appends its value to each tuple first (Storm's CombinerAggregatorInitImpl)
        ins: list[Fields] = []
        for spec in self._specs:
            if isinstance(spec.aggregator, CombinerAggregator):
                now = stream.get_output_fields()
                name = spec.out[0]
                k = 0
                while name in now or name in (group or ()):
                    k += 1
                    name = f"$init-{spec.out[0]}" + (f"-{k}" if k > 1 else "")
                init = Fields(name)
                stream = stream._next(stream._add(
                    operation, _concat(now, init),
                    P.EachProcessor(spec.inputs if spec.inputs is not None else fields,
                                    P.CombinerInitFunction(spec.aggregator))))
                ins.append(init)
            else:
                ins.append(spec.inputs if spec.inputs is not None else fields)
        all_in = Fields([*dict.fromkeys(n for f in ins for n in f)])
        out = Fields([n for s in self._specs for n in s.out])

        def chained(final_bolt: bool) -> P.ChainedAggregator:
            aggs: list[BaseAggregator] = []
            for spec in self._specs:
                agg = spec.aggregator
                if isinstance(agg, CombinerAggregator):
                    # prepared by its init in the bolt the init runs in, else by this step
                    aggs.append(P.CombinerCombineAggregator(agg, owns_lifecycle=final_bolt))
                elif isinstance(agg, ReducerAggregator):
                    aggs.append(P.ReducerAggregatorImpl(agg))
                else:
                    aggs.append(agg)
            return P.ChainedAggregator(aggs, ins, [len(s.out) for s in self._specs],
                                       [type(s.aggregator).__name__ for s in self._specs])

        if partition:
            return _partition_agg(stream, all_in, chained(False), out, group, operation)
        if combiners_only:
            # each partition combines its part first; the partials (named as the init fields) move
            partial = _partition_agg(stream, all_in, chained(False), all_in, group, operation, partial=True)
            return _final_agg(partial, all_in, chained(True), out, "batch", group, operation)
        return _final_agg(stream, all_in, chained(True), out, "batch", group, operation)


class TridentState:
    """A state a topology writes (``persistent_aggregate``, ``partition_persist``) or reads."""

    def __init__(self, topology: TridentTopology, node: Node) -> None:
        self._topology = topology
        self._node = node

    @property
    def _state_id(self) -> str:
        return self._node.state_id  # type: ignore[attr-defined]

    def new_values_stream(self) -> Stream:
        """The stream of what the state's updater emitted (for an aggregate: the new values)."""
        return Stream(self._topology, self._node, None)

    def parallelism_hint(self, n: int) -> TridentState:
        """Keep the state in ``n`` partitions (the tasks of its bolt)."""
        Stream(self._topology, self._node, None).parallelism_hint(n)
        return self

    def __repr__(self) -> str:
        return f"TridentState({self._state_id})"


__all__ = ["ChainedAggregatorDeclarer", "GroupedStream", "JoinOutFieldsMode", "JoinType", "Stream", "TridentState",
           "TridentTopology"]
