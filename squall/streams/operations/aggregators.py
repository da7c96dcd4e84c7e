"""The built-in aggregators (Storm's ``streams.operations.aggregators``)."""

from __future__ import annotations

from typing import Any

from . import CombinerAggregator


class Count(CombinerAggregator):
    """Counts the values (Storm's ``Count``): what ``count`` and ``count_by_key`` use."""

    def init(self) -> int:
        """0."""
        return 0

    def apply(self, accumulator: int, value: Any) -> int:
        """One more."""
        return accumulator + 1

    def merge(self, accum1: int, accum2: int) -> int:
        """The sum of two counts."""
        return accum1 + accum2

    def result(self, accum: int) -> int:
        """The count."""
        return accum


class LongSum(CombinerAggregator):
    """Sums numeric values as integers (Storm's ``LongSum``)."""

    def init(self) -> int:
        """0."""
        return 0

    def apply(self, accumulator: int, value: Any) -> int:
        """``accumulator + int(value)`` (Java's ``longValue()`` truncates too)."""
        return accumulator + int(value)

    def merge(self, accum1: int, accum2: int) -> int:
        """The sum of two sums."""
        return accum1 + accum2

    def result(self, accum: int) -> int:
        """The sum."""
        return accum
