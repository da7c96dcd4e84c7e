"""Mappers from a spout's `Tuple` to a stream's values (Storm's ``streams.operations.mappers``):
`StreamBuilder.new_stream`'s second argument. A `PairValueMapper` makes a `PairStream`."""

from __future__ import annotations

from typing import Any

from ..._tuple import Tuple
from ..pair import TYPED_TUPLES, Pair
from . import Function, PairFunction


class TupleValueMapper(Function):
    """Maps a `Tuple` to a value (Storm's ``TupleValueMapper``)."""


class ValueMapper(TupleValueMapper):
    """The tuple's value at ``index`` (Storm's ``ValueMapper``)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def apply(self, input: Tuple) -> Any:
        """``input.get_value(index)``."""
        return input.get_value(self.index)


class PairValueMapper(TupleValueMapper, PairFunction):
    """A `Pair` of the tuple's values at ``key_index`` and ``value_index`` (Storm's
    ``PairValueMapper``)."""

    def __init__(self, key_index: int, value_index: int) -> None:
        self.key_index = key_index
        self.value_index = value_index

    def apply(self, input: Tuple) -> Pair:
        """``Pair(input[key_index], input[value_index])``."""
        return Pair(input.get_value(self.key_index), input.get_value(self.value_index))


class ValuesMapper(TupleValueMapper):
    """A list of the tuple's values at ``indices`` (Storm's ``ValuesMapper``)."""

    def __init__(self, *indices: int) -> None:
        self.indices = indices

    def apply(self, input: Tuple) -> list[Any]:
        """``[input[i] for i in indices]``."""
        return [input.get_value(i) for i in self.indices]


class _TypedTupleMapper(TupleValueMapper):
    def __init__(self, indices: tuple[int, ...]) -> None:
        self.indices = indices
        self.cls = TYPED_TUPLES[len(indices)]

    def apply(self, input: Tuple) -> Any:
        return self.cls(*(input.get_value(i) for i in self.indices))


class TupleValueMappers:
    """Storm's ``TupleValueMappers.of(i1, ..., iN)``: a mapper to a typed tuple (`Tuple3` ...
    `Tuple10`, fields ``value1`` ...) of the tuple's values at those indices."""

    @staticmethod
    def of(*indices: int) -> TupleValueMapper:
        """A mapper to the typed tuple of 3 to 10 ``indices``."""
        if len(indices) not in TYPED_TUPLES:
            raise ValueError(f"TupleValueMappers.of takes 3 to 10 indices, got {len(indices)}")
        return _TypedTupleMapper(tuple(indices))
