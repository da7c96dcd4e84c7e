"""The tuple a bolt receives (Storm's ``Tuple``/``TupleImpl``).

A tuple is the hottest object in squall: one is made per (emit, target task). Its layout is
therefore minimal: the values, one shared `Source` per (component, stream, task) and three ack
slots. ``_root`` is 0 for an untracked tuple, the 64-bit root id for the common case of a tuple in
exactly one tree (``_val`` then holds its edge value), or a ``{root: value}`` dict when anchors
from several trees were merged. This "one root, two ints" fast path avoids a dict per tuple, which
measured 1.95x faster on the acking path (ENGINE-SPEED.md, lesson 3). ``_oav`` is Storm's
``outAckVal``: the xor of the edge ids of the children anchored to this tuple.
"""

from __future__ import annotations

from typing import Any

from ._fields import Fields, MessageId
from ._getters import TypedGetters
from ._native import TupleBase
from ._system import SYSTEM_COMPONENT, TICK_STREAM


class Source:
    """Where tuples come from: one shared, immutable record per (component, stream, task)."""

    __slots__ = ("component", "fields", "stream", "task")

    def __init__(self, component: str, stream: str, task: int, fields: Fields) -> None:
        self.component = component
        self.stream = stream
        self.task = task
        self.fields = fields

    def __repr__(self) -> str:
        return f"Source({self.component!r}, {self.stream!r}, {self.task})"


class Tuple(TupleBase, TypedGetters):
    """A tuple as a bolt receives it: values, their fields, and where it came from.

    ``t[0]``, ``t["word"]`` and ``len(t)`` work as on a list of values. Tuples are made by squall;
    a bolt only reads them, and passes them back to its collector as anchors, acks or fails.
    """

    __slots__ = ()  # TupleBase holds them: values, _src, _root, _val, _oav (squall._native)

    # --- Storm's accessors -------------------------------------------------------------------
    @property
    def fields(self) -> Fields:
        """The stream's declared fields."""
        return self._src.fields

    @property
    def source_component(self) -> str:
        """Id of the component that emitted this tuple."""
        return self._src.component

    @property
    def source_stream(self) -> str:
        """Id of the stream it was emitted on."""
        return self._src.stream

    @property
    def source_task(self) -> int:
        """Task id that emitted it (-1 for system tuples such as ticks)."""
        return self._src.task

    @property
    def message_id(self) -> MessageId:
        """The tuple's ack-tree identity."""
        root = self._root
        if not root:
            return MessageId()
        if type(root) is dict:
            return MessageId(dict(root))
        return MessageId({root: self._val})

    def get_value(self, i: int) -> Any:
        """The value at position ``i``."""
        return self.values[i]

    def get_value_by_field(self, name: str) -> Any:
        """The value of field ``name``; ``ValueError`` naming the field if the stream lacks it."""
        return self.values[self._src.fields.index(name)]

    def select(self, fields: Fields) -> list:
        """The values of ``fields``, in that order."""
        return self._src.fields.select(fields, self.values)

    def contains(self, name: str) -> bool:
        """True if the stream declares field ``name``."""
        return self._src.fields.contains(name)

    def get_fields(self) -> Fields:
        """The stream's declared fields."""
        return self._src.fields

    def get_values(self) -> list:
        """The values."""
        return self.values

    def get_source_component(self) -> str:
        """Id of the component that emitted this tuple."""
        return self._src.component

    def get_source_stream_id(self) -> str:
        """Id of the stream it was emitted on."""
        return self._src.stream

    def get_source_task(self) -> int:
        """Task id that emitted it."""
        return self._src.task

    def get_message_id(self) -> MessageId:
        """The tuple's ack-tree identity."""
        return self.message_id

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            return self.values[self._src.fields.index(key)]
        return self.values[key]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values)

    def __repr__(self) -> str:
        s = self._src
        return f"source: {s.component}:{s.task}, stream: {s.stream}, id: {self.message_id!r}, {self.values!r}"


TICK_FIELDS = Fields("rate_secs")


TICK_SOURCE = Source(SYSTEM_COMPONENT, TICK_STREAM, -1, TICK_FIELDS)
"""The one source of the tick tuples squall makes: a bolt's collector tells a tick by it (``is``)."""


UNROOTED_LINEAGE = 1
"""A tuple's ``_val`` when it descends from an input in no spout's tree that checkpoints wait
for (a persistent window's result) while it is in a spout's tree too: its ``_root`` is then
always a ``{root: value}`` dict, whose values carry the edges, so ``_val`` is free to say so (and
travels between workers with it). A child anchored to such a tuple inherits the mark (the
engine's general emit path, which every dict root takes); `squall.state.CheckpointTupleForwarder`
holds checkpoints behind it as behind the result itself: its spout's replay would not bring the
window's result back. A tuple in no tree whose ``_val`` is this (the forwarder's
`lineage_anchor`, never sent) marks the children of an emit it anchors."""


def has_unrooted_lineage(tup: Tuple) -> bool:
    """Whether ``tup`` is in a spout's tree and descends from an input in no spout's tree that
    checkpoints wait for (`UNROOTED_LINEAGE`)."""
    return type(tup._root) is dict and tup._val == UNROOTED_LINEAGE


def tick_source() -> Source:
    """The source of tick tuples: component ``__system``, task -1, stream ``__tick``
    (`TICK_SOURCE`)."""
    return TICK_SOURCE


def is_tick_tuple(t: Tuple) -> bool:
    """True if ``t`` is a tick tuple (from ``__system`` on stream ``__tick``). Like Storm's
    ``TupleUtils.isTick``, it also reads any object with the tuple's
    ``get_source_component()`` and ``get_source_stream_id()`` (a test's stand-in tuple)."""
    try:
        src = t._src
    except AttributeError:
        return t.get_source_component() == SYSTEM_COMPONENT and t.get_source_stream_id() == TICK_STREAM
    return src.component == SYSTEM_COMPONENT and src.stream == TICK_STREAM
