"""The tuple Trident operations see (Storm's ``TridentTuple``/``TridentTupleView``).

A `TridentTuple` is a list of values with the fields that name them. Unlike a bolt's `Tuple` it
carries no source or ack identity: Trident hides the batch (the `TransactionAttempt`) and the
anchoring from operations, which see only the values of the stream at that point.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._fields import Fields
from .._getters import TypedGetters
from .._native import TridentTupleBase


class TridentTuple(TridentTupleBase, TypedGetters):
    """Values of one Trident tuple and the fields naming them.

    ``t[0]``, ``t["word"]``, ``len(t)`` and iteration work as on the list of values (``t[i]``
    and ``len(t)`` are `squall._native.TridentTupleBase`'s: C when built).
    """

    __slots__ = ()

    def __init__(self, fields: Fields, values: list) -> None:
        if len(values) != len(fields):
            raise ValueError(
                f"a Trident tuple of fields {fields.to_list()} got {len(values)} values: {values!r}")
        self.values = values
        self._fields = fields

    @property
    def fields(self) -> Fields:
        """The fields naming the values."""
        return self._fields

    def get_fields(self) -> Fields:
        """The fields naming the values (Storm's ``getFields()``)."""
        return self._fields

    def get_value(self, i: int) -> Any:
        """The value at position ``i``."""
        return self.values[i]

    def get_value_by_field(self, name: str) -> Any:
        """The value of field ``name``; raises ``ValueError`` naming the field if absent."""
        return self.values[self._fields.index(name)]

    def contains(self, name: str) -> bool:
        """True if the tuple has a field called ``name``."""
        return name in self._fields

    def select(self, fields: Fields) -> list:
        """The values of ``fields``, in their order."""
        return self._fields.select(fields, self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TridentTuple):
            return self.values == other.values and self._fields == other._fields
        if isinstance(other, list):
            return self.values == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # values are a mutable list

    def __repr__(self) -> str:
        return f"TridentTuple({dict(zip(self._fields, self.values))!r})"

    def __reduce__(self):
        return (TridentTuple, (self._fields, self.values))
