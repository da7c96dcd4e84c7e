"""Trident's built-in operations (Storm's ``trident.operation.builtin``).

Aggregators: `Count`, `Sum` (combiners, so partly computed before a repartition), `Max`, `Min`
(the whole tuple with the greatest or least value of a field) and the assembly `FirstN`.
Filters: `Debug`, `FilterNull`, `Equals`, `Negate`. Query functions over a state: `MapGet`,
`SnapshotGet`, `TupleCollectionGet`.
"""

from __future__ import annotations

import datetime
import heapq
import numbers
from collections.abc import Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .operation import (
    Assembly,
    BaseAggregator,
    BaseFilter,
    CombinerAggregator,
    TridentCollector,
    TridentOperationContext,
)
from .state.api import BaseQueryFunction, ITupleCollection, ReadOnlyMapState, Snapshottable, State
from .tuple import TridentTuple

if TYPE_CHECKING:
    from .fluent import Stream


class Count(CombinerAggregator):
    """The number of tuples (Storm's ``Count``); takes no input field."""

    def init(self, tuple: TridentTuple) -> int:
        return 1

    def combine(self, val1: int, val2: int) -> int:
        return val1 + val2

    def zero(self) -> int:
        return 0


class Sum(CombinerAggregator):
    """The sum of the first input field (Storm's ``Sum``): ints stay ints, a float makes a float,
    a `Decimal` makes a `Decimal` (a float turned into one exactly, as Java's ``BigDecimal``)."""

    def init(self, tuple: TridentTuple) -> Any:
        value = tuple.get_value(0)
        if isinstance(value, bool) or not isinstance(value, (numbers.Number, Decimal)):
            name = tuple.get_fields()[0] if len(tuple.get_fields()) else "?"
            raise TypeError(f"Sum: field {name!r} holds {value!r} ({type(value).__name__}), not a number")
        return value

    def combine(self, val1: Any, val2: Any) -> Any:
        if isinstance(val1, Decimal) or isinstance(val2, Decimal):
            return Decimal(val1) + Decimal(val2)
        return val1 + val2

    def zero(self) -> int:
        return 0


class _Best:
    """The tuple kept so far by a `Max` or `Min`."""

    __slots__ = ("tuple",)

    def __init__(self) -> None:
        self.tuple: TridentTuple | None = None


class _Comparison(BaseAggregator):
    """Storm's ``ComparisonAggregator``: per partition and batch (and group), the whole tuple
    whose ``field`` wins the comparison (with no field, the tuple's values are compared); a tuple
    whose value is None is skipped, a tie goes to the later tuple, an empty batch emits nothing."""

    def __init__(self, field: str | None) -> None:
        if field is not None and not isinstance(field, str):
            raise TypeError(f"{type(self).__name__}: the field must be a field name, got {field!r}")
        self.field = field

    def _wins(self, value: Any, best: Any) -> bool:
        raise NotImplementedError

    def _value(self, t: TridentTuple) -> Any:
        return t.values if self.field is None else t.get_value_by_field(self.field)

    def init(self, batch_id: Any, collector: TridentCollector) -> _Best:
        return _Best()

    def aggregate(self, state: _Best, tuple: TridentTuple, collector: TridentCollector) -> None:
        value = self._value(tuple)
        if value is None:
            return
        if state.tuple is None or self._wins(value, self._value(state.tuple)):
            state.tuple = tuple

    def complete(self, state: _Best, collector: TridentCollector) -> None:
        if state.tuple is not None:
            collector.emit(list(state.tuple.values))


class Max(_Comparison):
    """The tuple with the greatest value of ``field`` (Storm's ``Max``), a whole-tuple
    aggregator: ``partition_aggregate(fields, Max("n"), fields)``, what ``max_by`` does."""

    def _wins(self, value: Any, best: Any) -> bool:
        return not best > value


class Min(_Comparison):
    """The tuple with the least value of ``field`` (Storm's ``Min``); see `Max`."""

    def _wins(self, value: Any, best: Any) -> bool:
        return not best < value



class _WithComparator(_Comparison):
    """Storm's ``MinWithComparator``/``MaxWithComparator``: `_Comparison` by ``comparator``, a
    callable of two values returning a negative number, zero or a positive one as the first is
    less than, equal to or greater than the second (a Java ``Comparator``'s ``compare``; see
    ``functools.cmp_to_key``). With a field it compares that field's values (a None is skipped),
    without one the whole `TridentTuple`s. It is called as ``comparator(kept, new)``; the kept
    tuple stays only if it wins strictly, so a tie goes to the later tuple, as in Storm."""

    def __init__(self, field: str | None, comparator: Any = None) -> None:
        if comparator is None and callable(field):
            field, comparator = None, field
        super().__init__(field)
        if not callable(comparator):
            raise TypeError(f"{type(self).__name__}: the comparator must be a callable of two values, got {comparator!r}")
        self.comparator = comparator

    def _value(self, t: TridentTuple) -> Any:
        return t if self.field is None else t.get_value_by_field(self.field)

    def _keeps(self, order: Any) -> bool:
        raise NotImplementedError

    def _wins(self, value: Any, best: Any) -> bool:
        order = self.comparator(best, value)
        try:
            return not self._keeps(order)
        except TypeError:
            raise TypeError(f"{type(self).__name__}: the comparator returned {order!r}, not a number "
                            "(negative, zero or positive)") from None


class MinWithComparator(_WithComparator):
    """The tuple with the least value of ``field`` by ``comparator`` (Storm's
    ``MinWithComparator``), or with no field the least tuple: ``MinWithComparator(cmp)``; what
    ``min_by(field, cmp)`` and ``min(cmp)`` run."""

    def _keeps(self, order: Any) -> bool:
        return order < 0


class MaxWithComparator(_WithComparator):
    """The tuple with the greatest value of ``field`` by ``comparator`` (Storm's
    ``MaxWithComparator``); see `MinWithComparator`."""

    def _keeps(self, order: Any) -> bool:
        return order > 0

class _FirstNAgg(BaseAggregator):
    """The first ``n`` tuples of the partition's batch, as they come (Storm's ``FirstNAgg``)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def init(self, batch_id: Any, collector: TridentCollector) -> list[int]:
        return [0]

    def aggregate(self, state: list[int], tuple: TridentTuple, collector: TridentCollector) -> None:
        if state[0] < self.n:
            collector.emit(list(tuple.values))
            state[0] += 1

    def complete(self, state: list[int], collector: TridentCollector) -> None:
        pass


class _FirstNSortedAgg(BaseAggregator):
    """The ``n`` tuples with the least ``sort_field`` (the greatest with ``reverse``), in that
    order (Storm's ``FirstNSortedAgg``)."""

    def __init__(self, n: int, sort_field: str, reverse: bool) -> None:
        self.n = n
        self.sort_field = sort_field
        self.reverse = reverse

    def init(self, batch_id: Any, collector: TridentCollector) -> list[TridentTuple]:
        return []

    def aggregate(self, state: list[TridentTuple], tuple: TridentTuple, collector: TridentCollector) -> None:
        state.append(tuple)

    def complete(self, state: list[TridentTuple], collector: TridentCollector) -> None:
        pick = heapq.nlargest if self.reverse else heapq.nsmallest
        for t in pick(self.n, state, key=lambda t: t.get_value_by_field(self.sort_field)):
            collector.emit(list(t.values))


class FirstN(Assembly):
    """The first ``n`` tuples of each batch (Storm's ``FirstN``): with ``sort_field``, the ``n``
    with the least value of it (the greatest with ``reverse``), else any ``n``. An assembly:
    ``stream.apply_assembly(FirstN(3, "count", reverse=True))`` takes ``n`` per partition, moves
    them to one partition (``global_()``) and takes ``n`` again; the stream keeps its fields."""

    def __init__(self, n: int, sort_field: str | None = None, reverse: bool = False) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"FirstN: n must be a positive int, got {n!r}")
        self.n = n
        self.sort_field = sort_field
        self.reverse = reverse
        self.agg = _FirstNAgg(n) if sort_field is None else _FirstNSortedAgg(n, sort_field, reverse)

    def apply(self, stream: Stream) -> Stream:
        fields = stream.get_output_fields()
        if self.sort_field is not None and self.sort_field not in fields:
            raise ValueError(f"FirstN: the sort field {self.sort_field!r} is not in the stream's fields "
                             f"{fields.to_list()}")
        return (stream.partition_aggregate(fields, self.agg, fields)
                .global_()
                .partition_aggregate(fields, self.agg, fields))


class Debug(BaseFilter):
    """Prints each tuple to standard output and keeps it (Storm's ``Debug``):
    ``<time> DEBUG: [values]``, or ``<time> DEBUG(prefix): [values]`` with a ``prefix``."""

    def __init__(self, prefix: str = "") -> None:
        self.name = f"DEBUG({prefix}): " if prefix else "DEBUG: "

    def is_keep(self, tuple: TridentTuple) -> bool:
        print(f"<{datetime.datetime.now()}> {self.name}{tuple.values}", flush=True)
        return True


class FilterNull(BaseFilter):
    """Keeps the tuples with no None among its input fields (Storm's ``FilterNull``)."""

    def is_keep(self, tuple: TridentTuple) -> bool:
        return all(v is not None for v in tuple.values)


class Equals(BaseFilter):
    """Keeps the tuples whose input fields are all equal (Storm's ``Equals``)."""

    def is_keep(self, tuple: TridentTuple) -> bool:
        vals = tuple.values
        return all(vals[i] == vals[i + 1] for i in range(len(vals) - 1))


class Negate(BaseFilter):
    """Keeps what ``filter`` drops (Storm's ``Negate``); prepares and cleans up ``filter``."""

    def __init__(self, filter: BaseFilter) -> None:
        if not callable(getattr(filter, "is_keep", None)):
            raise TypeError(f"Negate: {type(filter).__name__} is not a filter (it has no is_keep)")
        self.delegate = filter

    def prepare(self, conf: dict, context: TridentOperationContext) -> None:
        self.delegate.prepare(conf, context)

    def cleanup(self) -> None:
        self.delegate.cleanup()

    def is_keep(self, tuple: TridentTuple) -> bool:
        return not self.delegate.is_keep(tuple)


def _need(state: State, kind: type, query: str) -> None:
    if not isinstance(state, kind):
        raise TypeError(f"{query} needs a {kind.__name__} state, got {type(state).__name__}")


class MapGet(BaseQueryFunction):
    """Each tuple's value in a `ReadOnlyMapState` (every `MapState` is one), its input fields
    being the key (Storm's ``MapGet``); appends one field, None for an absent key."""

    def batch_retrieve(self, state: State, tuples: list[TridentTuple]) -> list[Any]:
        _need(state, ReadOnlyMapState, "MapGet")
        return state.multi_get([t.values for t in tuples])  # type: ignore[attr-defined]

    def execute(self, tuple: TridentTuple, result: Any, collector: TridentCollector) -> None:
        collector.emit([result])


class SnapshotGet(BaseQueryFunction):
    """A `Snapshottable`'s value, for every tuple (Storm's ``SnapshotGet``); appends one field."""

    def batch_retrieve(self, state: State, tuples: list[TridentTuple]) -> list[Any]:
        _need(state, Snapshottable, "SnapshotGet")
        snapshot = state.get()  # type: ignore[attr-defined]
        return [snapshot] * len(tuples)

    def execute(self, tuple: TridentTuple, result: Any, collector: TridentCollector) -> None:
        collector.emit([result])


class TupleCollectionGet(BaseQueryFunction):
    """Everything an `ITupleCollection` state holds, for every tuple (Storm's
    ``TupleCollectionGet``): one output tuple per entry, the key's values then the value."""

    def batch_retrieve(self, state: State, tuples: list[TridentTuple]) -> list[Iterator[list[Any]]]:
        _need(state, ITupleCollection, "TupleCollectionGet")
        return [state.get_tuples() for _ in tuples]  # type: ignore[attr-defined]

    def execute(self, tuple: TridentTuple, result: Iterator[list[Any]], collector: TridentCollector) -> None:
        for values in result:
            collector.emit(list(values))


__all__ = [
    "Count", "Debug", "Equals", "FilterNull", "FirstN", "MapGet", "Max", "MaxWithComparator", "Min",
    "MinWithComparator", "Negate", "SnapshotGet", "Sum",
    "TupleCollectionGet",
]
