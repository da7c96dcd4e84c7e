"""Fields, values and global stream ids (Storm's `org.apache.storm.tuple`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

Values = list
"""`Values` is an alias of `list`: ``collector.emit(Values(["a", 1]))`` reads as in Storm."""


class Fields:
    """An ordered list of field names, as declared for a stream or used to group one.

    ``Fields("word", "count")`` and ``Fields(["word", "count"])`` are the same. Names must be
    unique strings; the position of a name is found in O(1).
    """

    __slots__ = ("_index", "_names")

    def __init__(self, *names: str | Iterable[str]) -> None:
        if len(names) == 1 and not isinstance(names[0], str):
            names = tuple(names[0])  # Fields(["a", "b"]) or Fields(some_fields)
        index: dict[str, int] = {}
        for i, name in enumerate(names):
            if not isinstance(name, str):
                raise TypeError(f"field names must be str, got {name!r}")
            if name in index:
                raise ValueError(f"duplicate field name {name!r} in {list(names)}")
            index[name] = i
        self._names: tuple[str, ...] = tuple(index)  # the names, in order: each checked a str above
        self._index = index

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __getitem__(self, i: int) -> str:
        return self._names[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Fields):
            return self._names == other._names
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names)

    def __repr__(self) -> str:
        return f"Fields({list(self._names)!r})"

    def size(self) -> int:
        """Number of fields (Storm's ``size()``)."""
        return len(self._names)

    def get(self, i: int) -> str:
        """The name at position ``i``."""
        return self._names[i]

    def to_list(self) -> list[str]:
        """The names as a new list."""
        return list(self._names)

    def index(self, name: str) -> int:
        """Position of ``name``; raises ``ValueError`` naming the field if it is not here."""
        try:
            return self._index[name]
        except KeyError:
            raise ValueError(f"{name!r} does not exist in {list(self._names)}") from None

    def contains(self, name: str) -> bool:
        """True if ``name`` is one of these fields."""
        return name in self._index

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def select(self, selector: Fields, values: list) -> list:
        """The values of ``selector``'s fields, taken from ``values`` laid out as these fields."""
        return [values[self.index(name)] for name in selector]


class GlobalStreamId(NamedTuple):
    """A stream named globally: the component that emits it and the stream id."""

    component_id: str
    stream_id: str

    def get_component_id(self) -> str:
        """The emitting component."""
        return self.component_id

    def get_stream_id(self) -> str:
        """The stream id within that component."""
        return self.stream_id


class MessageId:
    """The ack-tree identity of a tuple: ``{root id: xor of edge ids}`` (Storm's ``MessageId``).

    Unanchored tuples have an empty map. Users read it, never build it.
    """

    __slots__ = ("_anchors_to_ids",)

    def __init__(self, anchors_to_ids: dict[int, int] | None = None) -> None:
        self._anchors_to_ids = anchors_to_ids or {}

    def get_anchors_to_ids(self) -> dict[int, int]:
        """The map from root id to this tuple's edge value for that root."""
        return dict(self._anchors_to_ids)

    def get_anchors(self) -> set[int]:
        """The root ids this tuple belongs to."""
        return set(self._anchors_to_ids)

    def is_anchored(self) -> bool:
        """True if the tuple belongs to at least one tracked tree."""
        return bool(self._anchors_to_ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageId) and other._anchors_to_ids == self._anchors_to_ids

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._anchors_to_ids.items())))

    def __repr__(self) -> str:
        return f"MessageId({self._anchors_to_ids!r})"


