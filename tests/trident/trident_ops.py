"""Operations the Trident compiler tests use: Storm's ``trident.testing`` helpers (Split,
CountAsAggregator, StringLength, TrueFilter) and a plain batch spout for building graphs."""

from __future__ import annotations

from typing import Any

from squall import Fields
from squall.trident.operation import BaseAggregator, BaseFilter, BaseFunction, CombinerAggregator
from squall.trident.spout import IBatchSpout


class Split(BaseFunction):
    """Emits each space-separated word of the first field (Storm's ``Split``)."""

    def execute(self, tuple, collector) -> None:  # noqa: A002
        for word in tuple[0].split(" "):
            if word:
                collector.emit([word])


class StringLength(BaseFunction):
    """The length of the first field (Storm's ``StringLength``)."""

    def execute(self, tuple, collector) -> None:  # noqa: A002
        collector.emit([len(tuple[0])])


class TrueFilter(BaseFilter):
    """Keeps every tuple."""

    def is_keep(self, tuple) -> bool:  # noqa: A002
        return True


class CountAsAggregator(BaseAggregator):
    """Counts the tuples of a batch (Storm's ``CountAsAggregator``)."""

    def init(self, batch_id: Any, collector) -> list:
        return [0]

    def aggregate(self, state: list, tuple, collector) -> None:  # noqa: A002
        state[0] += 1

    def complete(self, state: list, collector) -> None:
        collector.emit([state[0]])


class CountCombiner(CombinerAggregator):
    """Counts tuples as a combiner (Storm's builtin ``Count``)."""

    def init(self, tuple) -> int:  # noqa: A002
        return 1

    def combine(self, val1: int, val2: int) -> int:
        return val1 + val2

    def zero(self) -> int:
        return 0


class SumCombiner(CombinerAggregator):
    """Sums the first field (Storm's builtin ``Sum``)."""

    def init(self, tuple) -> Any:  # noqa: A002
        return tuple[0]

    def combine(self, val1: Any, val2: Any) -> Any:
        return val1 + val2

    def zero(self) -> int:
        return 0


class ListSpout(IBatchSpout):
    """A batch spout of fixed fields for graphs that are only planned, never run."""

    def __init__(self, *fields: str) -> None:
        self.fields = Fields(list(fields))

    def open(self, conf: dict, context: Any) -> None:
        pass

    def emit_batch(self, batch_id: int, collector) -> None:
        pass

    def ack(self, batch_id: int) -> None:
        pass

    def get_output_fields(self) -> Fields:
        return self.fields
