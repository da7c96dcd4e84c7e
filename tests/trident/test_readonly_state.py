"""Read-only states (Storm's ``ReadOnlyState`` and ``ReadOnlyMapState``): what `MapGet` reads,
every `MapState` being one; a read-only state refuses commits as Storm's does."""

from __future__ import annotations

import pytest

from squall.trident import MapGet, MapState, MemoryMapState, ReadOnlyMapState, ReadOnlyState


class Table(ReadOnlyState, ReadOnlyMapState):
    def __init__(self, table):
        self.table = table

    def multi_get(self, keys):
        return [self.table.get(tuple(k)) for k in keys]


class Row:
    """The little of a TridentTuple MapGet reads: its values."""

    def __init__(self, *values):
        self.values = list(values)


def test_map_get_reads_a_read_only_map_state_and_every_map_state_is_one():
    assert MapGet().batch_retrieve(Table({("a",): 1}), [Row("a"), Row("b")]) == [1, None]
    assert issubclass(MapState, ReadOnlyMapState)
    memory = MemoryMapState.factory().make_state({}, None, 0, 1)
    assert isinstance(memory, ReadOnlyMapState)


def test_a_read_only_state_refuses_commits_naming_its_class():
    with pytest.raises(NotImplementedError, match="Table is read-only"):
        Table({}).begin_commit(1)
    with pytest.raises(NotImplementedError, match="Table is read-only"):
        Table({}).commit(1)


def test_map_get_on_a_state_that_cannot_be_read_by_key_names_both():
    class NotAMap(ReadOnlyState):
        pass
    with pytest.raises(TypeError, match="MapGet needs a ReadOnlyMapState state, got NotAMap"):
        MapGet().batch_retrieve(NotAMap(), [Row("a")])
