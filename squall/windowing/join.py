"""Joining streams in windows (Storm's ``org.apache.storm.bolt.JoinBolt``, docs/Joins.md).

A `JoinBolt` is a `BaseWindowedBolt`: each time its window fires it hash-joins the window's
tuples, stream by stream in the order the joins were declared, and emits one tuple per joined
record, anchored to the input tuples that made it (one per joined stream), as Storm's does.
The window acks its inputs when they leave their last window, as for any windowed bolt
(docs/windows.md, "Joining streams").

The join follows Storm's ``hashJoin`` exactly: the first stream's tuples are the probe, in window
order; each later stream is hashed on its join field and joined to the records so far on the
field of the stream it names (an inner join drops a record without a match, a left join keeps it
with nothing from that stream; either drops a record whose key is missing). Field paths
``x.y.z`` look into nested mappings; a missing field or path is ``None``. A projection takes, for
each selected field, the first non-None value among the record's tuples (those of the named
stream only, when the field is ``stream:field``).

Beyond Storm, mistakes that Storm turns into empty joins, ``None`` columns or a crash on the
first tuple are refused up front: a stream named twice, a stream joined to one not yet
introduced, a join field with a stream qualifier, no ``select`` (at `create_topology`, naming the
component), and at submit, naming the component: a selected ``stream:field`` whose stream is not
in the join, a joined stream the bolt does not subscribe to, an input not in the join (Storm
throws on its first tuple), a join field its input stream does not declare, a selected field no
stream of the join declares.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import InvalidTopologyException
from .._fields import Fields
from .._system import CHECKPOINT_STREAM, SYSTEM_STREAM, TICK_STREAM
from ._api import BaseWindowedBolt, TupleWindow

if TYPE_CHECKING:
    from .._collectors import OutputCollector, OutputFieldsDeclarer
    from .._context import TopologyContext
    from .._tuple import Tuple


class Selector(enum.Enum):
    """What a `JoinBolt`'s stream names refer to (Storm's ``JoinBolt.Selector``): ``STREAM``, the
    stream id of each input; ``SOURCE``, the component that emitted it."""

    STREAM = "stream"
    SOURCE = "source"


class JoinType(enum.Enum):
    """How a stream is joined (Storm supports these two)."""

    INNER = "inner"
    LEFT = "left"


class FieldSelector:
    """A field of a stream (Storm's ``JoinBolt.FieldSelector``): ``"stream:x.y.z"`` or
    ``"x.y.z"``; ``output_name`` is the descriptor as written (trimmed), the name of the output
    field it makes."""

    __slots__ = ("field", "output_name", "stream")

    def __init__(self, descriptor: str, stream: str | None = None) -> None:
        if not isinstance(descriptor, str):
            raise ValueError(f"a field must be a string, got {descriptor!r}")  # noqa: TRY004 (Storm: IllegalArgumentException)
        pos = descriptor.find(":")
        if stream is not None and pos >= 0:
            raise ValueError(f"Not expecting stream qualifier ':' in {descriptor!r}. Stream name {stream!r} "
                             f"is implicit in this context")
        if pos > 0:  # "stream:x.y.z"
            self.stream: str | None = descriptor[:pos].strip()
            self.output_name = descriptor.strip()
            path = descriptor[pos + 1:]
        else:  # "x.y.z", or ":x.y.z" (Storm drops the empty qualifier)
            self.stream = stream
            self.output_name = descriptor[pos + 1:].strip()
            path = self.output_name
        self.field = [p.strip() for p in path.split(".")]
        if not all(self.field):
            raise ValueError(f"{descriptor!r} is not a field: expected 'field', 'x.y.z' or 'stream:x.y.z'")

    def __repr__(self) -> str:
        return self.output_name


class _JoinInfo:
    """How a stream joins the ones before it (Storm's ``JoinInfo``): its own join ``field``, and
    for every stream but the first, the field of the earlier stream it is matched against
    (``other``) and the join type."""

    __slots__ = ("field", "join_type", "other")

    def __init__(self, field: FieldSelector, other: FieldSelector | None = None,
                 join_type: JoinType | None = None) -> None:
        self.field = field
        self.other = other
        self.join_type = join_type


class JoinBolt(BaseWindowedBolt):
    """Joins streams in windows (Storm's ``JoinBolt``), like SQL's ``select ... from s1 join s2
    on s2.k = s1.k left join s3 on s3.k = s2.k``::

        JoinBolt(Selector.STREAM, "users", "userId") \\
            .join("orders", "userId", "users") \\
            .left_join("payments", "orderId", "orders") \\
            .select("userId, name, orders:price, payments:amount") \\
            .with_tumbling_window(Duration.seconds(10))

    ``JoinBolt(source, field)`` is ``JoinBolt(Selector.SOURCE, source, field)``: the names are
    the upstream components. Each input should be fields-grouped on its join field (with more
    than one task), as in Storm. See docs/windows.md, "Joining streams".
    """

    Selector = Selector  # JoinBolt.Selector.STREAM, as in Storm

    def __init__(self, *args: Any) -> None:
        """``JoinBolt(selector, stream, field)`` or ``JoinBolt(source, field)``: the first stream of
        the join and its join field (``x.y.z`` for a nested one)."""
        super().__init__()
        if len(args) == 2:
            selector: Any = Selector.SOURCE
            stream, field = args
        elif len(args) == 3:
            selector, stream, field = args
        else:
            raise TypeError("JoinBolt(selector, stream, field) or JoinBolt(source_component, field)")
        if isinstance(selector, str) and selector in Selector.__members__:
            selector = Selector[selector]  # by name, as Flux gives a Java enum: "STREAM", "SOURCE"
        if not isinstance(selector, Selector):
            raise ValueError(f"the selector must be Selector.STREAM or Selector.SOURCE, got {selector!r}")  # noqa: TRY004 (Storm: IllegalArgumentException)
        _check_name(stream)
        self.selector = selector
        self.join_criteria: dict[str, _JoinInfo] = {stream: _JoinInfo(FieldSelector(field, stream))}
        self.output_fields: list[FieldSelector] | None = None
        self.output_stream: str | None = None

    # --- the query --------------------------------------------------------------------------------

    def join(self, new_stream: str, field: str, prior_stream: str) -> JoinBolt:
        """Inner join ``new_stream`` on its ``field`` to ``prior_stream``'s join field
        (``prior_stream`` must be introduced already): SQL ``inner join new_stream on
        new_stream.field = prior_stream.<its field>``."""
        return self._join(new_stream, field, prior_stream, JoinType.INNER)

    def left_join(self, new_stream: str, field: str, prior_stream: str) -> JoinBolt:
        """Left join ``new_stream`` on its ``field`` to ``prior_stream``'s join field: a record
        with no match in ``new_stream`` is kept, its fields of that stream ``None``."""
        return self._join(new_stream, field, prior_stream, JoinType.LEFT)

    def _join(self, new_stream: str, field: str, prior_stream: str, join_type: JoinType) -> JoinBolt:
        _check_name(new_stream)
        if new_stream in self.join_criteria:
            raise ValueError(f"{new_stream!r} is already part of join. Cannot join with it more than once.")
        prior = self.join_criteria.get(prior_stream)
        if prior is None:
            raise ValueError(f"Stream {prior_stream!r} was not previously declared (the streams of the join so far: "
                             f"{list(self.join_criteria)})")
        other = FieldSelector(prior.field.output_name, prior_stream)
        self.join_criteria[new_stream] = _JoinInfo(FieldSelector(field, new_stream), other, join_type)
        return self

    def select(self, comma_separated_keys: str) -> JoinBolt:
        """The output fields, e.g. ``"userId, users:city, outer.inner"``: each a field of any stream
        of the join, or ``stream:field`` of that stream; ``x.y`` looks into a mapping. The output
        field names are the names as written (``"users:city"``, ``"outer.inner"``)."""
        if not isinstance(comma_separated_keys, str):
            raise ValueError(f"select takes a comma separated string of fields, got {comma_separated_keys!r}")  # noqa: TRY004
        self.output_fields = [FieldSelector(k) for k in comma_separated_keys.split(",")]
        return self

    def with_output_stream(self, stream_name: str) -> JoinBolt:
        """Emit the joined tuples on ``stream_name`` instead of the default stream."""
        _check_name(stream_name)
        self.output_stream = stream_name
        return self

    # --- the bolt -----------------------------------------------------------------------------------

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The selected fields' output names, on the output stream."""
        fields = Fields(*(f.output_name for f in self._selected()))
        if self.output_stream is not None:
            declarer.declare_stream(self.output_stream, fields)
        else:
            declarer.declare(fields)

    def prepare(self, conf: dict, context: TopologyContext, collector: OutputCollector) -> None:
        """Stores the collector (checks that ``select`` was called)."""
        self._selected()
        super().prepare(conf, context, collector)

    def execute(self, window: TupleWindow) -> None:
        """Join the window's tuples and emit each joined record, anchored to its input tuples."""
        selected = self._selected()
        for tuples in self.hash_join(window.get()):
            values = self._project(tuples, selected)
            if self.output_stream is None:
                self.collector.emit(values, anchors=tuples)
            else:
                self.collector.emit(values, anchors=tuples, stream=self.output_stream)

    def hash_join(self, tuples: list[Tuple]) -> list[list[Tuple]]:
        """The joined records of ``tuples``: each the list of its input tuples, one per joined
        stream (fewer after a left join without a match), in Storm's order."""
        streams = list(self.join_criteria)
        first = streams[0]
        probe: list[list[Tuple]] = []
        hashed: dict[str, dict[Any, list[Tuple]]] = {s: {} for s in streams[1:]}
        for tup in tuples:  # build: the first stream is the probe, the others hashed on their field
            stream = self._stream_of(tup)
            if stream == first:
                probe.append([tup])
                continue
            table = hashed.get(stream)
            if table is None:
                raise ValueError(f"Join information for {stream!r} not found (a tuple from component "
                                 f"[{tup.source_component}] stream [{tup.source_stream}]); the streams of the join "
                                 f"are {streams}. Check the join clauses.")
            key = _key(self._lookup(self.join_criteria[stream].field, tup))
            table.setdefault(key, []).append(tup)
        for stream in streams[1:]:
            info = self.join_criteria[stream]
            assert info.other is not None  # every stream but the first joins an earlier one
            table = hashed[stream]
            joined: list[list[Tuple]] = []
            for rec in probe:
                key = self._record_field(rec, info.other)
                if key is None:  # Storm drops it, in a left join too
                    continue
                matches = table.get(_key(key))
                if matches:
                    joined.extend([*rec, m] for m in matches)
                elif info.join_type is JoinType.LEFT:
                    joined.append(rec)
            probe = joined
        return probe

    # --- helpers ------------------------------------------------------------------------------------

    def _selected(self) -> list[FieldSelector]:
        if self.output_fields is None:
            raise ValueError("Must specify output fields via .select() method.")
        return self.output_fields

    def _stream_of(self, tup: Tuple) -> str:
        return tup.source_stream if self.selector is Selector.STREAM else tup.source_component

    def _lookup(self, selector: FieldSelector, tup: Tuple) -> Any:
        """The value of ``selector`` in ``tup``, or None: another stream's tuple (stream names
        compare ignoring case, as Storm's), a field the tuple lacks, a path that leads nowhere."""
        if selector.stream is not None and selector.stream.lower() != self._stream_of(tup).lower():
            return None
        head, *rest = selector.field
        if not tup.contains(head):
            return None
        cur = tup.get_value_by_field(head)
        for name in rest:
            if not isinstance(cur, Mapping):  # Storm: a ClassCastException; here, as missing
                return None
            cur = cur.get(name)
            if cur is None:
                return None
        return cur

    def _record_field(self, rec: list[Tuple], selector: FieldSelector) -> Any:
        for tup in rec:
            v = self._lookup(selector, tup)
            if v is not None:
                return v
        return None

    def _project(self, rec: list[Tuple], selected: list[FieldSelector]) -> list[Any]:
        return [self._record_field(rec, f) for f in selected]

    # --- checks at submit ---------------------------------------------------------------------------

    def squall_check_at_submit(self, component_id: str, conf: dict[str, Any], streams: dict[str, Any],
                               inputs: dict[Any, Any]) -> None:
        """The join against the bolt's inputs, at submit (called by its `WindowedBoltExecutor`).

        Raises:
            InvalidTopologyException: naming the component, for a selected ``stream:field`` whose
                stream is not in the join, a stream of the join the bolt does not subscribe to,
                an input that is not in the join, a join field an input stream does not
                declare, or a selected field that no input of its stream(s) declares.
        """
        def refuse(msg: str) -> InvalidTopologyException:
            return InvalidTopologyException(f"Component [{component_id}]: JoinBolt: {msg}")

        names = list(self.join_criteria)
        kind = "stream" if self.selector is Selector.STREAM else "source component"
        selected = self._selected()
        for f in selected:
            if f.stream is not None and f.stream.lower() not in {n.lower() for n in names}:
                raise refuse(f"select names {f.output_name!r}, but {kind} {f.stream!r} is not in the join "
                             f"(its {kind}s: {names})")
        by_stream: dict[str, list[tuple[str, str, Any]]] = {n: [] for n in names}
        for (src, stream), info in sorted(inputs.items()):
            if stream in (SYSTEM_STREAM, TICK_STREAM, CHECKPOINT_STREAM):
                continue
            name = stream if self.selector is Selector.STREAM else src
            if name not in by_stream:
                hint = ""
                if self.selector is Selector.STREAM and any(n == s for n in names for s, _st in inputs):
                    hint = ": component names, use Selector.SOURCE"
                elif self.selector is Selector.SOURCE and any(n == st for n in names for _s, st in inputs):
                    hint = ": stream names, use Selector.STREAM"
                raise refuse(f"its input stream [{stream}] of component [{src}] is not in the join (its {kind}s: "
                             f"{names}{hint}); Storm fails on its first tuple")
            by_stream[name].append((src, stream, info))
        for name, ins in by_stream.items():
            if not ins:
                raise refuse(f"{kind} {name!r} of the join is not among its inputs "
                             f"{sorted(f'{s}/{st}' for s, st in inputs)}")
            field = self.join_criteria[name].field
            for src, stream, info in ins:
                if info is not None and not info.fields.contains(field.field[0]):
                    raise refuse(f"join field {field.output_name!r} of {kind} {name!r} is not a field of its "
                                 f"input stream [{stream}] of component [{src}] (fields {list(info.fields)})")
        for f in selected:
            ins = [i for n, group in by_stream.items() if f.stream is None or n.lower() == f.stream.lower()
                   for i in group]
            if all(info is not None and not info.fields.contains(f.field[0]) for _s, _st, info in ins):
                where = f"{kind} {f.stream!r}" if f.stream is not None else "any stream of the join"
                raise refuse(f"select names {f.output_name!r}, but {f.field[0]!r} is not a field of {where} "
                             f"(declared: {sorted({x for _s, _st, i in ins if i is not None for x in i.fields})})")

    def __repr__(self) -> str:
        return f"JoinBolt({self.selector.name}, {list(self.join_criteria)}, select={self.output_fields})"


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a stream or component name must be a non-empty string, got {name!r}")


def _key(v: Any) -> Any:
    """``v`` as a dict key: Storm hashes lists and maps by value; so does this."""
    try:
        hash(v)
    except TypeError:
        if isinstance(v, Mapping):
            return frozenset((k, _key(x)) for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return tuple(_key(x) for x in v)
        if isinstance(v, set):
            return frozenset(v)
        raise
    return v
