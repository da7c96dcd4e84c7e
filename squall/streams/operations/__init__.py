"""The operations a `Stream` applies (Storm's ``org.apache.storm.streams.operations``).

Where Storm takes a functional interface (``Function``, ``Predicate``, ``Consumer``, ...), squall
takes any callable: a lambda, a function, or an instance of the base class of that name here,
whose Storm method (``apply``, ``test``, ``accept``) its ``__call__`` runs. `CombinerAggregator`
and `StateUpdater` have several methods, so they are classes to subclass, or made with ``of``.
The built-in aggregators (`Count`, `LongSum`) are in `squall.streams.operations.aggregators`, the
tuple mappers in `squall.streams.operations.mappers`.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable, Iterable
from typing import Any

from ..pair import Pair


class Operation:
    """The base of every operation (Storm's ``Operation``, a marker)."""


class Function(Operation, abc.ABC):
    """``apply(input) -> result`` (Storm's ``Function``); ``map``'s argument."""

    @abc.abstractmethod
    def apply(self, input: Any) -> Any:
        """The result for ``input``."""

    def __call__(self, input: Any) -> Any:
        return self.apply(input)


class PairFunction(Function):
    """A `Function` that returns a `Pair` (Storm's ``PairFunction``); ``map_to_pair``'s argument."""


class FlatMapFunction(Operation, abc.ABC):
    """``apply(input) -> iterable`` (Storm's ``FlatMapFunction``); ``flat_map``'s argument."""

    @abc.abstractmethod
    def apply(self, input: Any) -> Iterable[Any]:
        """The results for ``input``, zero or more."""

    def __call__(self, input: Any) -> Iterable[Any]:
        return self.apply(input)


class PairFlatMapFunction(FlatMapFunction):
    """A `FlatMapFunction` whose results are `Pair` s (Storm's ``PairFlatMapFunction``)."""


class BiFunction(Operation, abc.ABC):
    """``apply(a, b) -> result`` (Storm's ``BiFunction``)."""

    @abc.abstractmethod
    def apply(self, a: Any, b: Any) -> Any:
        """The result for ``a`` and ``b``."""

    def __call__(self, a: Any, b: Any) -> Any:
        return self.apply(a, b)


class Reducer(BiFunction):
    """``apply(a, b)``: two values of a type into one of it (Storm's ``Reducer``); ``reduce``'s."""


class ValueJoiner(BiFunction):
    """``apply(value1, value2)``: the joined value of two matching values (Storm's
    ``ValueJoiner``); either is None for the missing side of an outer join."""


class PairValueJoiner(ValueJoiner):
    """Joins two values into a `Pair` of them (Storm's ``PairValueJoiner``, the default joiner)."""

    def apply(self, a: Any, b: Any) -> Pair:
        """``Pair(a, b)``."""
        return Pair(a, b)


class Predicate(Operation, abc.ABC):
    """``test(input) -> bool`` (Storm's ``Predicate``); ``filter``'s and ``branch``'s argument."""

    @abc.abstractmethod
    def test(self, input: Any) -> bool:
        """Whether ``input`` passes."""

    def __call__(self, input: Any) -> bool:
        return self.test(input)


class Consumer(Operation, abc.ABC):
    """``accept(input)`` (Storm's ``Consumer``); ``for_each``'s and ``peek``'s argument."""

    @abc.abstractmethod
    def accept(self, input: Any) -> None:
        """Act on ``input``."""

    def __call__(self, input: Any) -> None:
        self.accept(input)


class PrintConsumer(Consumer):
    """Prints each value to stdout (Storm's ``PrintConsumer``, what ``Stream.print`` uses)."""

    def accept(self, input: Any) -> None:
        """``print(input)``."""
        print(input, flush=True)


class IdentityFunction(Function):
    """Returns its input (Storm's ``IdentityFunction``)."""

    def apply(self, input: Any) -> Any:
        """``input``."""
        return input


class CombinerAggregator(Operation, abc.ABC):
    """Aggregates values into an accumulator, merges accumulators, and turns one into the result
    (Storm's ``CombinerAggregator<T, A, R>``). A partition aggregates its values (``init``,
    ``apply``) and a downstream task merges the partitions' accumulators (``merge``) before
    ``result``, so ``apply`` and ``merge`` may get the accumulator they return.
    """

    @staticmethod
    def of(initial_value: Any, accumulator: Callable[[Any, Any], Any],
           combiner: Callable[[Any, Any], Any]) -> CombinerAggregator:
        """Storm's ``CombinerAggregator.of``: ``init`` is (a copy of) ``initial_value``,
        ``apply`` is ``accumulator(agg, value)``, ``merge`` is ``combiner(agg1, agg2)``, the
        result is the accumulator."""
        return _FunctionAggregator(initial_value, accumulator, combiner)

    @abc.abstractmethod
    def init(self) -> Any:
        """A new, empty accumulator."""

    @abc.abstractmethod
    def apply(self, accumulator: Any, value: Any) -> Any:
        """``accumulator`` with ``value`` added."""

    @abc.abstractmethod
    def merge(self, accum1: Any, accum2: Any) -> Any:
        """Two accumulators merged."""

    @abc.abstractmethod
    def result(self, accum: Any) -> Any:
        """The result of an accumulator."""


class _FunctionAggregator(CombinerAggregator):
    def __init__(self, initial_value: Any, accumulator: Callable[[Any, Any], Any],
                 combiner: Callable[[Any, Any], Any]) -> None:
        self.initial_value = initial_value
        self.accumulator = accumulator
        self.combiner = combiner

    def init(self) -> Any:
        # a copy: Java's code hands out one initial object, which a mutable accumulator (a list)
        # would then share between every key
        return copy.deepcopy(self.initial_value)

    def apply(self, accumulator: Any, value: Any) -> Any:
        return self.accumulator(accumulator, value)

    def merge(self, accum1: Any, accum2: Any) -> Any:
        return self.combiner(accum1, accum2)

    def result(self, accum: Any) -> Any:
        return accum


class StateUpdater(Operation, abc.ABC):
    """How ``update_state_by_key`` updates a key's state with a value (Storm's
    ``StateUpdater<T, S>``)."""

    @staticmethod
    def of(initial_value: Any, state_update_fn: Callable[[Any, Any], Any]) -> StateUpdater:
        """Storm's ``StateUpdater.of``: ``init`` is (a copy of) ``initial_value``, ``apply`` is
        ``state_update_fn(state, value)``."""
        return _FunctionStateUpdater(initial_value, state_update_fn)

    @abc.abstractmethod
    def init(self) -> Any:
        """The state of a key not seen before."""

    @abc.abstractmethod
    def apply(self, state: Any, value: Any) -> Any:
        """The new state of a key from its state and a value."""


class _FunctionStateUpdater(StateUpdater):
    def __init__(self, initial_value: Any, state_update_fn: Callable[[Any, Any], Any]) -> None:
        self.initial_value = initial_value
        self.state_update_fn = state_update_fn

    def init(self) -> Any:
        return copy.deepcopy(self.initial_value)

    def apply(self, state: Any, value: Any) -> Any:
        return self.state_update_fn(state, value)


def as_callable(op: Any, method: str, what: str) -> Callable[..., Any]:
    """``op`` as a plain callable: itself if callable, else its Storm method ``method`` (a user
    class written after Storm's interface, with ``apply`` and no ``__call__``); anything else is
    a TypeError naming the operation ``what``."""
    if callable(op):
        return op
    fn = getattr(op, method, None)
    if callable(fn):
        return fn
    raise TypeError(f"{what} needs a callable (or an object with {method}()), got {type(op).__name__}")


__all__ = [
    "BiFunction", "CombinerAggregator", "Consumer", "FlatMapFunction", "Function", "IdentityFunction", "Operation",
    "PairFlatMapFunction", "PairFunction", "PairValueJoiner", "Predicate", "PrintConsumer", "Reducer", "StateUpdater",
    "ValueJoiner", "as_callable",
]
