"""Trident's state interfaces (Storm's ``org.apache.storm.trident.state``) and the updaters
``persistent_aggregate`` compiles to.

A Trident `State` is told where each batch's updates begin and end (``begin_commit(txid)``,
``commit(txid)``); batches reach it strictly in txid order, and a failed batch comes again with
the same txid. That order is what lets `TransactionalMap` and `OpaqueMap` (`squall.trident.state.map`)
apply every batch exactly once over any `IBackingMap` that can only get and put.

Map keys are lists of the group's values (``["the"]``, ``["nl", 2024]``); a map normalises
them to tuples internally, so every value in a key must be hashable.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

from ..._fields import Fields
from ..operation import BaseOperation, CombinerAggregator, ReducerAggregator, TridentCollector
from ..tuple import TridentTuple


class State(abc.ABC):
    """Where a Trident batch's updates go (Storm's ``State``).

    ``begin_commit(txid)`` comes before a batch's updates, ``commit(txid)`` after them; ``txid``
    is None for updates outside any batch (a ``partition_persist`` off a DRPC stream, Storm's).
    """

    @abc.abstractmethod
    def begin_commit(self, txid: int | None) -> None:
        """The updates of batch ``txid`` follow."""

    @abc.abstractmethod
    def commit(self, txid: int | None) -> None:
        """The updates of batch ``txid`` are done: make them durable."""


class StateFactory(abc.ABC):
    """Makes the `State` of one partition (Storm's ``StateFactory``).

    A factory is pickled with the topology and made into a state in each task that holds the
    state, so it must carry everything the state needs (names, addresses), not the state itself.
    """

    @abc.abstractmethod
    def make_state(self, conf: dict[str, Any], metrics: Any, partition_index: int,
                   num_partitions: int) -> State:
        """The state of partition ``partition_index`` of ``num_partitions``.

        ``metrics`` is the task's `squall.TopologyContext` (Storm passes its context as the
        ``IMetricsContext``), None outside a topology.
        """

    def store_location(self) -> str | None:
        """Where the states this factory makes keep their values: a text that two factories give
        alike when their states write the same keys (a Redis database and key space, a table, a
        `MemoryMapState` factory's id), or None (the default) when it cannot say, which is never
        compared. `TridentTopology.build` refuses two states of one batch group that give the
        same location (squall's, not Storm's)."""
        return None


class ValueUpdater(abc.ABC):
    """Computes a key's new value from its stored one (Storm's ``ValueUpdater``)."""

    @abc.abstractmethod
    def update(self, stored: Any) -> Any:
        """The new value; ``stored`` is None for a key never set."""


class ReadOnlyState(State):
    """A `State` that is only read (Storm's ``ReadOnlyState``): a base for a state made by
    ``new_static_state``, which no batch writes. Its ``begin_commit`` and ``commit`` raise, as
    Storm's do: an update of it (``persistent_aggregate``, ``partition_persist``) is a mistake."""

    def begin_commit(self, txid: int | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} is read-only and does not support updates")

    def commit(self, txid: int | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} is read-only and does not support updates")


class ReadOnlyMapState(State):
    """A key-value `State` that can be read (Storm's ``ReadOnlyMapState``): what `MapGet`
    queries. Every `MapState` is one; a static state (``new_static_state``) need only be this,
    with `ReadOnlyState` for its commits, as Storm's ``TridentReach`` writes its lookup tables."""

    @abc.abstractmethod
    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        """The values of ``keys`` (None where absent), in order."""


class MapState(ReadOnlyMapState):
    """A key-value `State` updated per batch (Storm's ``MapState``)."""

    @abc.abstractmethod
    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> list[Any]:
        """Apply ``updaters[i]`` to the value of ``keys[i]``; returns the new values."""

    @abc.abstractmethod
    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        """Set ``keys[i]`` to ``values[i]``."""


class Snapshottable(State):
    """A `State` holding one value (Storm's ``Snapshottable``): what an ungrouped
    ``persistent_aggregate`` updates."""

    @abc.abstractmethod
    def get(self) -> Any:
        """The value (None if never set)."""

    @abc.abstractmethod
    def update(self, updater: ValueUpdater) -> Any:
        """Apply ``updater`` to the value; returns the new value."""

    @abc.abstractmethod
    def set(self, value: Any) -> None:
        """Set the value."""


class RemovableMapState(State):
    """A `State` whose keys can be removed (Storm's ``RemovableMapState``)."""

    @abc.abstractmethod
    def multi_remove(self, keys: Sequence[Sequence[Any]]) -> None:
        """Remove ``keys``."""


class ITupleCollection(abc.ABC):
    """A state that can list what it holds (Storm's ``ITupleCollection``), for
    `squall.trident.builtin.TupleCollectionGet`."""

    @abc.abstractmethod
    def get_tuples(self) -> Iterator[list[Any]]:
        """Each entry as a list: the key's values, then the value."""


class IBackingMap(abc.ABC):
    """A store that can get and put many keys at once (Storm's ``IBackingMap``): what
    `TransactionalMap`, `OpaqueMap` and `NonTransactionalMap` turn into an exactly-once (or
    plain) `MapState`. It keeps whatever value the map gives it (a `TransactionalValue`, an
    `OpaqueValue` or the bare value) and needs no transactions of its own."""

    @abc.abstractmethod
    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        """The stored values of ``keys`` (None where absent), in order, one per key."""

    @abc.abstractmethod
    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        """Store ``values[i]`` under ``keys[i]``."""


S = TypeVar("S", bound="State")
"""The kind of state an updater takes (a `MapState`, a `Snapshottable`, ...)."""


class StateUpdater(BaseOperation, abc.ABC, Generic[S]):
    """Applies a batch's tuples to a state (Storm's ``StateUpdater``), inside the state's
    ``begin_commit``/``commit``; what it emits goes to ``TridentState.new_values_stream()``.
    ``prepare(conf, context)`` and ``cleanup()`` are a `BaseOperation`'s."""

    @abc.abstractmethod
    def update_state(self, state: S, tuples: list[TridentTuple], collector: TridentCollector) -> None:
        """Apply ``tuples`` (this partition's part of one batch) to ``state``."""


class BaseStateUpdater(StateUpdater[S]):
    """A `StateUpdater` with no-op ``prepare`` and ``cleanup`` (Storm's ``BaseStateUpdater``)."""


class QueryFunction(BaseOperation, abc.ABC):
    """Reads a state for each tuple of a batch (Storm's ``QueryFunction``): ``batch_retrieve``
    once per batch and partition, then ``execute`` per tuple with its result; what ``execute``
    emits is appended to the tuple."""

    @abc.abstractmethod
    def batch_retrieve(self, state: State, tuples: list[TridentTuple]) -> list[Any]:
        """One result per tuple, in order."""

    @abc.abstractmethod
    def execute(self, tuple: TridentTuple, result: Any, collector: TridentCollector) -> None:
        """Emit what ``tuple``'s ``result`` gives (any number of value lists)."""


class BaseQueryFunction(QueryFunction):
    """A `QueryFunction` with no-op ``prepare`` and ``cleanup`` (Storm's ``BaseQueryFunction``)."""


# --- what persistent_aggregate compiles to ------------------------------------------------------------

class CombinerValueUpdater(ValueUpdater):
    """Combines a stored value with one partial aggregate (Storm's ``CombinerValueUpdater``)."""

    def __init__(self, agg: CombinerAggregator, arg: Any) -> None:
        self.agg = agg
        self.arg = arg

    def update(self, stored: Any) -> Any:
        return self.arg if stored is None else self.agg.combine(stored, self.arg)


class ReducerValueUpdater(ValueUpdater):
    """Reduces tuples into a stored value (Storm's ``ReducerValueUpdater``)."""

    def __init__(self, agg: ReducerAggregator, tuples: list[TridentTuple]) -> None:
        self.agg = agg
        self.tuples = tuples

    def update(self, stored: Any) -> Any:
        ret = self.agg.init() if stored is None else stored
        for t in self.tuples:
            ret = self.agg.reduce(ret, t)
        return ret


_ABSENT = object()


def _project(t: TridentTuple, fields: Fields) -> TridentTuple:
    return TridentTuple(fields, t.select(fields))


class _ReducerUpdater(BaseStateUpdater[S]):
    """An updater around a reducer, which it prepares and cleans up: a persisted reducer runs
    nowhere else (in Storm nothing prepares it). A persisted combiner is prepared by the
    aggregation before the repartition, which shares it, so its updaters do not prepare it again."""

    agg: Any

    def prepare(self, conf: dict, context: Any) -> None:
        self.agg.prepare(conf, context)

    def cleanup(self) -> None:
        self.agg.cleanup()


class MapCombinerAggStateUpdater(BaseStateUpdater["MapState"]):
    """A grouped ``persistent_aggregate`` with a ``CombinerAggregator`` (Storm's
    ``MapCombinerAggStateUpdater``): each tuple is a group's values and its partial aggregate
    of the batch (``input_fields``, one field); the map combines it into the stored value and
    the updater emits the group's values and the new value.

    Storm's updater expects one tuple per group (the batch was aggregated before); a group seen
    twice here is combined first, so a repeated key still counts once per tuple.
    """

    def __init__(self, agg: CombinerAggregator, group_fields: Fields, input_fields: Fields) -> None:
        if len(input_fields) != 1:
            raise ValueError(f"a combiner aggregation takes a single input field, got {input_fields.to_list()}")
        self.agg = agg
        self.group_fields = group_fields
        self.input_fields = input_fields

    def update_state(self, state: MapState, tuples: list[TridentTuple], collector: TridentCollector) -> None:
        partial: dict[tuple, Any] = {}
        combine = self.agg.combine
        layout: tuple[Fields | None, list[int], int] = (None, [], 0)
        for t in tuples:
            fields = t.get_fields()
            if fields is not layout[0]:  # a batch's tuples share their fields: look up once
                layout = (fields, [fields.index(f) for f in self.group_fields], fields.index(self.input_fields[0]))
            values = t.values
            key = tuple([values[i] for i in layout[1]])
            arg = values[layout[2]]
            old = partial.get(key, _ABSENT)
            partial[key] = arg if old is _ABSENT else combine(old, arg)
        self.update_partials(state, partial, collector)

    def update_partials(self, state: MapState, partial: dict[tuple, Any], collector: TridentCollector) -> None:
        """`update_state` once the batch's tuples are combined per group: ``partial`` maps each
        group's values (a tuple) to the group's partial aggregate. The persist bolt combines
        as the tuples arrive and calls this at the commit (one dict, no tuple kept)."""
        from .map import inlines_combine  # map.py builds on this module

        if inlines_combine(state):  # the maps of this package: no updater per key
            new = state.combine_partials(list(partial), list(partial.values()), self.agg)
        else:
            keys = [list(k) for k in partial]  # Storm's List<List<Object>>: a backing map may rely on lists
            agg = self.agg
            new = state.multi_update(keys, [CombinerValueUpdater(agg, a) for a in partial.values()])
        rows = [[*key, value] for key, value in zip(partial, new)]
        emit_many = getattr(collector, "emit_many", None)  # the bolt's collector: the rows in one call
        if emit_many is not None:
            emit_many(rows)
            return
        emit = collector.emit
        for row in rows:
            emit(row)


class MapReducerAggStateUpdater(_ReducerUpdater["MapState"]):
    """A grouped ``persistent_aggregate`` with a ``ReducerAggregator`` (Storm's
    ``MapReducerAggStateUpdater``): the batch's tuples are grouped by ``group_fields``, each
    group's ``input_fields`` reduced into its stored value; emits each group's values and its
    new value."""

    def __init__(self, agg: ReducerAggregator, group_fields: Fields, input_fields: Fields | None) -> None:
        self.agg = agg
        self.group_fields = group_fields
        self.input_fields = input_fields if input_fields is not None else Fields()

    def update_state(self, state: MapState, tuples: list[TridentTuple], collector: TridentCollector) -> None:
        grouped: dict[tuple, list[TridentTuple]] = {}
        for t in tuples:
            grouped.setdefault(tuple(t.select(self.group_fields)), []).append(_project(t, self.input_fields))
        keys = [list(k) for k in grouped]
        new = state.multi_update(keys, [ReducerValueUpdater(self.agg, ts) for ts in grouped.values()])
        for key, value in zip(keys, new):
            collector.emit([*key, value])


class CombinerAggStateUpdater(BaseStateUpdater["Snapshottable"]):
    """An ungrouped ``persistent_aggregate`` with a ``CombinerAggregator`` (Storm's
    ``CombinerAggStateUpdater``): the batch's one global partial aggregate is combined into the
    `Snapshottable`'s value; emits the new value."""

    def __init__(self, agg: CombinerAggregator) -> None:
        self.agg = agg

    def update_state(self, state: Snapshottable, tuples: list[TridentTuple], collector: TridentCollector) -> None:
        if len(tuples) != 1:
            raise ValueError(f"a combiner state updater takes one tuple per batch (the batch's aggregate), "
                             f"got {len(tuples)}: {tuples[:5]!r}")
        collector.emit([state.update(CombinerValueUpdater(self.agg, tuples[0][0]))])


class ReducerAggStateUpdater(_ReducerUpdater["Snapshottable"]):
    """An ungrouped ``persistent_aggregate`` with a ``ReducerAggregator`` (Storm's
    ``ReducerAggStateUpdater``): the batch's tuples (all in one partition) are reduced into the
    `Snapshottable`'s value; emits the new value."""

    def __init__(self, agg: ReducerAggregator) -> None:
        self.agg = agg

    def update_state(self, state: Snapshottable, tuples: list[TridentTuple], collector: TridentCollector) -> None:
        collector.emit([state.update(ReducerValueUpdater(self.agg, tuples))])
