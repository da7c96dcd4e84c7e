"""`Pair`, the element of a `PairStream` (Storm's ``org.apache.storm.streams.Pair``), and the
typed tuples `Tuple3` ... `Tuple10` (Storm's ``streams.tuple``) that `TupleValueMappers` makes."""

from __future__ import annotations

from typing import Any, NamedTuple


class Pair(NamedTuple):
    """A key and a value: ``Pair.of(k, v)``, or ``Pair(k, v)``; ``get_first()`` /
    ``get_second()`` as in Storm, or ``.first`` / ``.second``, or unpacking ``k, v = pair``."""

    first: Any
    second: Any

    @classmethod
    def of(cls, first: Any, second: Any) -> Pair:
        """Storm's ``Pair.of(first, second)``."""
        return cls(first, second)

    def get_first(self) -> Any:
        """The key."""
        return self.first

    def get_second(self) -> Any:
        """The value."""
        return self.second

    def __repr__(self) -> str:
        return f"({self.first!r}, {self.second!r})"  # Storm's Pair prints as (first, second)


def as_pair(value: Any, what: str) -> Pair:
    """``value`` as a `Pair`: a `Pair` as is, any other 2-item sequence converted (a function
    given to ``map_to_pair`` may return a plain tuple); anything else is a ValueError naming
    ``what`` (the operation that made it)."""
    if isinstance(value, Pair):
        return value
    try:
        first, second = value
    except (TypeError, ValueError):
        raise ValueError(f"{what} must give a Pair (or a 2-tuple), got {value!r}") from None
    return Pair(first, second)


class Tuple3(NamedTuple):
    """Three values, ``value1`` to ``value3`` (Storm's ``Tuple3``)."""

    value1: Any
    value2: Any
    value3: Any


class Tuple4(NamedTuple):
    """Four values, ``value1`` to ``value4`` (Storm's ``Tuple4``)."""

    value1: Any
    value2: Any
    value3: Any
    value4: Any


class Tuple5(NamedTuple):
    """Five values, ``value1`` to ``value5`` (Storm's ``Tuple5``)."""

    value1: Any
    value2: Any
    value3: Any
    value4: Any
    value5: Any


class Tuple6(NamedTuple):
    """Six values, ``value1`` to ``value6`` (Storm's ``Tuple6``)."""

    value1: Any
    value2: Any
    value3: Any
    value4: Any
    value5: Any
    value6: Any


class Tuple7(NamedTuple):
    """Seven values, ``value1`` to ``value7`` (Storm's ``Tuple7``)."""

    value1: Any
    value2: Any
    value3: Any
    value4: Any
    value5: Any
    value6: Any
    value7: Any


class Tuple8(NamedTuple):
    """Eight values, ``value1`` to ``value8`` (Storm's ``Tuple8``)."""

    value1: Any
    value2: Any
    value3: Any
    value4: Any
    value5: Any
    value6: Any
    value7: Any
    value8: Any


class Tuple9(NamedTuple):
    """Nine values, ``value1`` to ``value9`` (Storm's ``Tuple9``)."""

    value1: Any
    value2: Any
    value3: Any
    value4: Any
    value5: Any
    value6: Any
    value7: Any
    value8: Any
    value9: Any


class Tuple10(NamedTuple):
    """Ten values, ``value1`` to ``value10`` (Storm's ``Tuple10``)."""

    value1: Any
    value2: Any
    value3: Any
    value4: Any
    value5: Any
    value6: Any
    value7: Any
    value8: Any
    value9: Any
    value10: Any


TYPED_TUPLES: dict[int, type] = {3: Tuple3, 4: Tuple4, 5: Tuple5, 6: Tuple6, 7: Tuple7, 8: Tuple8, 9: Tuple9,
                                 10: Tuple10}
"""The typed tuple class for each number of values."""
