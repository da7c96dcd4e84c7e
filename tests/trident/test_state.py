"""Trident's map states (Storm's StateTest and what the maps promise): the opaque and
transactional update rules, replays, a batch behind the state, CachedMap's LRU, the
non-transactional map, the updaters persistent_aggregate compiles to, and MemoryMapState
shared by every copy of its factory and kept by LocalCluster across a worker restart."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from squall import BasicBolt, Fields, LocalCluster, TopologyBuilder
from squall.state import StateError
from squall.testing import FeederSpout
from squall.testing._registry import SharedLog
from squall.trident.operation import CombinerAggregator, ReducerAggregator
from squall.trident.state import (
    CachedMap, CombinerAggStateUpdater, CombinerValueUpdater, IBackingMap, MapCombinerAggStateUpdater,
    MapReducerAggStateUpdater, MemoryMapState, NonTransactionalMap, OpaqueMap, OpaqueValue, ReducerAggStateUpdater,
    SnapshottableMap, TransactionalMap, TransactionalValue,
)
from squall.trident.state.memory import namespace_of
from squall.trident.tuple import TridentTuple

from ..conftest import wait_until


class MemoryBackingMap(IBackingMap):
    """Storm's testing MemoryBackingMap, counting the calls that reach it."""

    def __init__(self) -> None:
        self.vals: dict[tuple, Any] = {}
        self.gets: list[list[tuple]] = []
        self.puts: list[list[tuple]] = []

    def multi_get(self, keys):
        self.gets.append([tuple(k) for k in keys])
        return [self.vals.get(tuple(k)) for k in keys]

    def multi_put(self, keys, values):
        self.puts.append([tuple(k) for k in keys])
        for k, v in zip(keys, values):
            self.vals[tuple(k)] = v


class CountCombiner(CombinerAggregator):
    """Storm's Count as a combiner (what StateTest updates with)."""

    def init(self, t):
        return 1

    def combine(self, a, b):
        return a + b

    def zero(self):
        return 0


class Collector:
    def __init__(self) -> None:
        self.emitted: list[list] = []

    def emit(self, values):
        self.emitted.append(list(values))

    def report_error(self, error):
        raise AssertionError(error)


def single_get(m, key):
    return m.multi_get([[key]])[0]


def single_update(m, key, amt):
    return m.multi_update([[key]], [CombinerValueUpdater(CountCombiner(), amt)])[0]


# --- StateTest ------------------------------------------------------------------------------------------

def test_opaque_value_get_and_update_follow_storm():
    v = OpaqueValue(8, "v1", "v0")
    up_same = v.update(8, "v2")
    up_next = v.update(9, "v2")
    assert v.get(None) == "v1"
    assert v.get(100) == "v1"
    assert v.get(9) == "v1"
    assert v.get(8) == "v0"
    assert (v.get_prev(), v.get_curr(), v.get_curr_txid()) == ("v0", "v1", 8)
    assert (up_same.prev, up_same.curr, up_same.curr_txid) == ("v0", "v2", 8)
    assert (up_next.prev, up_next.curr, up_next.curr_txid) == ("v1", "v2", 9)
    assert up_same != v and up_next != v


def test_the_opaque_rule_has_one_home_that_every_opaque_update_and_the_compiled_commit_agree_with():
    """`OpaqueValue.for_batch`: what a batch builds on and keeps as prev, given whether the value
    is the batch's own write (Storm's CachedBatchReadsMap); OpaqueMap's updates and
    `opaque_commit`'s pure twin call it, and the compiled commit gives the same values."""
    from squall import _native

    v = OpaqueValue(8, 10, 4)
    assert v.for_batch(9, False) == (10, 10) and v.for_batch(None, False) == (10, 10)
    assert v.for_batch(8, False) == (4, 4), "a replay builds on prev"
    assert v.for_batch(8, True) == (10, 4), "the batch's own write: builds on it, keeps its prev"
    with pytest.raises(StateError, match=r"Current batch \(7\) is behind"):
        v.for_batch(7, False)
    for commit in [_native.opaque_commit]:  # compiled, or the pure twin under SQUALL_PURE_PYTHON=1
        committed = {("a",): OpaqueValue(8, 10, 4), ("b",): OpaqueValue(5, 1, None)}
        written: dict = {}
        ret, left, encode = commit(committed, written, [("a",), ("b",), ("c",), ("a",)], [1, 2, 3, 5], 8, None,
                                   OpaqueValue)
        assert (ret, left, encode) == ([5, 3, 3, 10], [], []), commit
        assert committed == {("a",): OpaqueValue(8, 10, 4), ("b",): OpaqueValue(8, 3, 1), ("c",): OpaqueValue(8, 3)}
    m = OpaqueMap.build(MemoryBackingMap())
    m.begin_commit(8)
    single_update(m, "a", 1)
    m.commit(8)
    m.begin_commit(8)  # a replay: built on prev (None), then on its own write
    assert single_update(m, "a", 2) == 2 and single_update(m, "a", 3) == 5


def test_a_batch_behind_the_state_is_an_error_naming_both_txids():
    v = OpaqueValue(8, "v1", "v0")
    with pytest.raises(StateError, match=r"Current batch \(7\) is behind state's batch.*curr_txid=8"):
        v.get(7)
    with pytest.raises(StateError, match=r"Current batch \(7\) is behind state's batch"):
        v.update(7, "x")
    m = OpaqueMap.build(MemoryBackingMap())
    m.begin_commit(5)
    single_update(m, "a", 1)
    m.commit(5)
    m.begin_commit(4)
    with pytest.raises(StateError, match=r"Current batch \(4\) is behind"):
        single_update(m, "a", 1)


def test_opaque_map_replay_recomputes_from_prev():
    m = OpaqueMap.build(MemoryBackingMap())
    m.begin_commit(1)
    assert single_get(m, "a") is None
    assert single_update(m, "a", 1) == 1   # within a batch, what it wrote counts (intra-batch cache)
    assert single_get(m, "a") == 1
    assert single_update(m, "a", 2) == 3
    assert single_get(m, "a") == 3
    m.commit(1)
    m.begin_commit(1)                      # txid 1 again: a replay, maybe with other tuples
    assert single_get(m, "a") is None
    assert single_update(m, "a", 2) == 2
    m.commit(1)
    m.begin_commit(2)
    assert single_get(m, "a") == 2
    assert single_update(m, "a", 3) == 5
    assert single_update(m, "a", 1) == 6
    m.commit(2)


def test_transactional_map_ignores_a_replayed_txid():
    backing = MemoryBackingMap()
    m = TransactionalMap.build(backing)
    m.begin_commit(1)
    assert single_get(m, "a") is None
    assert single_update(m, "a", 1) == 1
    assert single_update(m, "a", 2) == 3
    m.commit(1)
    puts = len(backing.puts)
    m.begin_commit(1)
    assert single_get(m, "a") == 3
    assert single_update(m, "a", 1) == 3   # the replay's update is in already
    assert single_update(m, "a", 2) == 3
    assert len(backing.puts) == puts, "a replayed txid wrote to the backing map"
    m.commit(1)
    m.begin_commit(2)
    assert single_get(m, "a") == 3
    assert single_update(m, "a", 3) == 6
    assert single_update(m, "a", 1) == 7
    m.commit(2)
    assert backing.vals[("a",)] == TransactionalValue(2, 7)


def test_opaque_map_stores_curr_and_prev_with_the_txid():
    backing = MemoryBackingMap()
    m = OpaqueMap.build(backing)
    for txid, amt in [(1, 5), (2, 3)]:
        m.begin_commit(txid)
        single_update(m, ("k"), amt)
        m.commit(txid)
    assert backing.vals[("k",)] == OpaqueValue(2, 8, 5)
    m.begin_commit(3)
    m.multi_put([["k"]], [100])
    m.commit(3)
    assert backing.vals[("k",)] == OpaqueValue(3, 100, 8)


def test_non_transactional_map_applies_a_replay_again():
    m = NonTransactionalMap.build(MemoryBackingMap())
    for _ in range(2):
        m.begin_commit(1)
        single_update(m, "a", 2)
        m.commit(1)
    assert single_get(m, "a") == 4
    m.multi_put([["b"]], [9])
    assert m.multi_get([["a"], ["b"], ["c"]]) == [4, 9, None]


@pytest.mark.parametrize("build", [TransactionalMap.build, OpaqueMap.build, NonTransactionalMap.build])
def test_each_map_is_snapshottable_over_one_global_key(build):
    backing = MemoryBackingMap()
    m = build(backing)
    for txid in (1, 2, 2, 3):  # 2 replayed: once for the exact maps, twice for the plain one
        m.begin_commit(txid)
        assert m.update(CombinerValueUpdater(CountCombiner(), 10)) == m.get()
        m.commit(txid)
    want = 40 if build == NonTransactionalMap.build else 30
    assert m.get() == want
    assert list(backing.vals) == [("$MAP-STATE-GLOBAL$",)]
    m.begin_commit(4)
    m.set(1)
    m.commit(4)
    assert m.get() == 1


def test_snapshottable_map_delegates_with_its_own_key():
    backing = MemoryBackingMap()
    m = SnapshottableMap(OpaqueMap.build(backing), ["$GLOBAL$"])
    m.begin_commit(1)
    assert m.update(CombinerValueUpdater(CountCombiner(), 4)) == 4
    m.multi_put([["x"]], [1])
    m.commit(1)
    assert set(backing.vals) == {("$GLOBAL$",), ("x",)}
    assert m.get() == 4 and m.multi_get([["x"]]) == [1]


def test_maps_reject_a_backing_map_that_returns_the_wrong_number_of_values():
    class Short(MemoryBackingMap):
        def multi_get(self, keys):
            return []

    with pytest.raises(StateError, match=r"Short.multi_get returned 0 values for 2 keys"):
        OpaqueMap.build(Short()).multi_get([["a"], ["b"]])
    with pytest.raises(ValueError, match="2 keys and 1 updaters"):
        OpaqueMap.build(MemoryBackingMap()).multi_update([["a"], ["b"]], [CombinerValueUpdater(CountCombiner(), 1)])


# --- CachedMap -------------------------------------------------------------------------------------------

def test_cached_map_serves_reads_from_its_lru_and_writes_through():
    backing = MemoryBackingMap()
    backing.vals = {("a",): 1, ("b",): 2, ("c",): 3}
    c = CachedMap(backing, 2)
    assert c.multi_get([["a"], ["b"], ["a"]]) == [1, 2, 1]
    assert backing.gets == [[("a",), ("b",)]], "a key asked twice was fetched twice"
    assert c.multi_get([["a"]]) == [1]       # cached: no call, and "a" is now the most recent
    assert len(backing.gets) == 1
    assert c.multi_get([["c"]]) == [3]       # evicts "b", the least recently used
    assert list(c.cached_keys()) == [("a",), ("c",)]
    c.multi_put([["d"]], [4])                # written through, evicts "a"
    assert backing.vals[("d",)] == 4 and list(c.cached_keys()) == [("c",), ("d",)]
    assert c.multi_get([["d"], ["b"]]) == [4, 2]
    assert backing.gets[-1] == [("b",)]
    assert c.multi_get([["zz"]]) == [None]
    gets = len(backing.gets)
    assert c.multi_get([["zz"]]) == [None]
    assert len(backing.gets) == gets, "an absent key is not cached as absent (Storm's CachedMap caches it)"


def test_cached_map_under_an_opaque_map_keeps_exactly_once():
    backing = MemoryBackingMap()
    m = OpaqueMap.build(CachedMap(backing, 10))
    for txid, amt in [(1, 1), (1, 5), (2, 2)]:   # txid 1 replayed with other tuples
        m.begin_commit(txid)
        single_update(m, "w", amt)
        m.commit(txid)
    assert backing.vals[("w",)] == OpaqueValue(2, 7, 5)


def test_a_write_the_store_refused_is_not_served_from_the_cache():
    """A TransactionalMap over a CachedMap whose store fails the write: the batch fails, and its
    replay with the same txid applies the update (a cache that took the value before the store
    did made the replay skip it as applied, and the store kept 1 where the count was 2)."""
    class Flaky(MemoryBackingMap):
        fail_next = False

        def multi_put(self, keys, values):
            if self.fail_next:
                self.fail_next = False
                raise ConnectionError("store down")
            super().multi_put(keys, values)

    backing = Flaky()
    m = TransactionalMap.build(CachedMap(backing, 10))
    m.begin_commit(1)
    single_update(m, "w", 1)
    m.commit(1)
    backing.fail_next = True
    m.begin_commit(2)
    single_update(m, "w", 1)
    with pytest.raises(ConnectionError):
        m.commit(2)  # where a transactional map writes
    m.begin_commit(2)  # the replay
    single_update(m, "w", 1)
    m.commit(2)
    assert backing.vals[("w",)] == TransactionalValue(2, 2)


class FailingPuts(MemoryBackingMap):
    """Fails its ``n``-th ``multi_put`` (counted from 1) after writing the first ``keep`` keys of it."""

    def __init__(self, n: int = 0, keep: int = 0) -> None:
        super().__init__()
        self.n, self.keep = n, keep

    def multi_put(self, keys, values):
        super().multi_put(keys[:self.keep] if len(self.puts) + 1 == self.n else keys,
                          values[:self.keep] if len(self.puts) + 1 == self.n else values)
        if len(self.puts) == self.n:
            raise ConnectionError("store down")


class PerTuple:
    """A ``partition_persist`` updater's way: one ``multi_update`` a tuple, raising at the tuple
    ``fail_at`` (an error in the updater between two updates of one key)."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at

    def update_state(self, m, words):
        for i, w in enumerate(words):
            if i == self.fail_at:
                raise ValueError("updater failed")
            single_update(m, w, 1)


class ReadThenPut:
    """An updater that reads each key and puts it back plus one (no ``multi_update``)."""

    def update_state(self, m, words):
        keys = [[w] for w in words]
        m.multi_put(keys, [(v or 0) + 1 for v in m.multi_get(keys)])


@pytest.mark.parametrize("build", [TransactionalMap.build, OpaqueMap.build])
@pytest.mark.parametrize("fails", ["in the updater", "in the store's write", "after the commit"])
def test_a_replay_counts_each_update_once_whatever_the_failed_attempt_stored(build, fails):
    """A batch updates a key twice (one update a tuple) and fails: in the updater between the
    two, in the store's write (a TransactionalMap's at the commit, part-way: the first key
    stored, the second not), or after the commit (another partition's failed). Its replay must
    leave each key counted once a tuple. A TransactionalMap that wrote at each update was
    replayed onto half its update: 'the' counted once."""
    backing = FailingPuts()
    m = build(backing)
    m.begin_commit(1)
    PerTuple().update_state(m, ["x"])
    m.commit(1)
    words = ["the", "a", "the"]
    m.begin_commit(2)
    if fails == "in the updater":
        with pytest.raises(ValueError):
            PerTuple(fail_at=2).update_state(m, words)
    elif fails == "in the store's write":
        # a TransactionalMap's one write, at the commit (its first key stored, the other not);
        # an OpaqueMap's third (it writes at each update)
        transactional = build == TransactionalMap.build
        backing.n, backing.keep = len(backing.puts) + (1 if transactional else 3), int(transactional)
        with pytest.raises(ConnectionError):
            PerTuple().update_state(m, words)
            m.commit(2)
    else:
        PerTuple().update_state(m, words)
        m.commit(2)
    m.begin_commit(2)  # the replay: the same tuples (a transactional spout)
    PerTuple().update_state(m, words)
    m.commit(2)
    m.begin_commit(3)
    assert m.multi_get([["the"], ["a"], ["x"]]) == [2, 1, 1]


@pytest.mark.parametrize("build", [TransactionalMap.build, OpaqueMap.build])
@pytest.mark.parametrize("committed", [False, True])
def test_a_replay_of_a_read_then_put_updater_counts_once(build, committed):
    """An updater that reads a key and puts it back plus one, in a batch that fails before or
    after its commit: the replay must not read the failed attempt's write as the value before."""
    m = build(MemoryBackingMap())
    m.begin_commit(1)
    ReadThenPut().update_state(m, ["w"])
    m.commit(1)
    m.begin_commit(2)
    ReadThenPut().update_state(m, ["w"])
    if committed:
        m.commit(2)  # this partition's commit went through; the batch failed in another
    m.begin_commit(2)
    ReadThenPut().update_state(m, ["w"])
    m.commit(2)
    m.begin_commit(3)
    assert m.multi_get([["w"]]) == [2]


def test_a_transactional_map_writes_the_keys_as_they_were_and_a_failed_commit_ends_the_batch():
    """The batch's writes wait for its commit: a caller that reuses its key list afterwards must
    not change what is written; and a commit whose write failed still ends the batch, so that a
    put outside any batch goes to the store at once, not into a batch that never commits."""
    backing = FailingPuts()
    m = TransactionalMap.build(backing)
    m.begin_commit(1)
    key = ["a"]
    m.multi_put([key], [1])
    key[0] = "b"
    m.commit(1)
    assert backing.vals == {("a",): TransactionalValue(1, 1)}
    m.begin_commit(2)
    m.multi_put([["c"]], [2])
    backing.n = len(backing.puts) + 1
    with pytest.raises(ConnectionError):
        m.commit(2)
    m.multi_put([["d"]], [3])  # outside any batch
    assert backing.vals[("d",)] == TransactionalValue(None, 3) and ("c",) not in backing.vals


def test_cached_map_rejects_a_size_below_one():
    with pytest.raises(ValueError, match="cache_size must be a positive int, got 0"):
        CachedMap(MemoryBackingMap(), 0)


# --- the updaters persistent_aggregate compiles to ------------------------------------------------------

def _tuples(fields, *rows):
    f = Fields(fields)
    return [TridentTuple(f, list(r)) for r in rows]


def test_map_combiner_updater_combines_each_groups_partial_and_emits_the_new_values():
    m = OpaqueMap.build(MemoryBackingMap())
    u = MapCombinerAggStateUpdater(CountCombiner(), Fields("word"), Fields("count"))
    out = Collector()
    m.begin_commit(1)
    u.update_state(m, _tuples(["word", "count"], ["the", 2], ["man", 1]), out)
    m.commit(1)
    m.begin_commit(2)
    u.update_state(m, _tuples(["word", "count"], ["the", 3], ["the", 1]), out)
    m.commit(2)
    assert out.emitted == [["the", 2], ["man", 1], ["the", 6]]
    assert m.multi_get([["the"], ["man"]]) == [6, 1]
    with pytest.raises(ValueError, match=r"single input field, got \['a', 'b'\]"):
        MapCombinerAggStateUpdater(CountCombiner(), Fields("w"), Fields("a", "b"))


class SumReducer(ReducerAggregator):
    def init(self):
        return 0

    def reduce(self, curr, t):
        assert t.get_fields() == Fields("n"), "the reducer saw more than its input fields"
        return curr + t["n"]


def test_map_reducer_updater_reduces_each_group_into_its_value():
    m = TransactionalMap.build(MemoryBackingMap())
    u = MapReducerAggStateUpdater(SumReducer(), Fields("k"), Fields("n"))
    out = Collector()
    m.begin_commit(1)
    u.update_state(m, _tuples(["k", "n", "x"], ["a", 1, "-"], ["b", 10, "-"], ["a", 2, "-"]), out)
    m.commit(1)
    assert out.emitted == [["a", 3], ["b", 10]]


def test_ungrouped_updaters_update_the_snapshot():
    m = OpaqueMap.build(MemoryBackingMap())
    out = Collector()
    m.begin_commit(1)
    CombinerAggStateUpdater(CountCombiner()).update_state(m, _tuples(["c"], [4]), out)
    ReducerAggStateUpdater(SumReducer()).update_state(m, _tuples(["n"], [1], [2]), out)
    m.commit(1)
    assert out.emitted == [[4], [7]]
    with pytest.raises(ValueError, match="one tuple per batch"):
        CombinerAggStateUpdater(CountCombiner()).update_state(m, _tuples(["c"], [1], [2]), out)


# --- MemoryMapState ----------------------------------------------------------------------------------------

def test_memory_map_state_removes_a_key_once_a_newer_batch_begins():
    """Storm's testMemoryMapStateRemove: a removed key reads as absent, a replay of the batch that
    removed it still finds its value before, and a newer batch finds it gone."""
    m = MemoryMapState.factory().make_state({}, None, 0, 1)
    m.begin_commit(1)
    m.multi_put([["a"], ["b"]], [1, 2])
    m.commit(1)
    m.begin_commit(2)
    m.multi_remove([["a"]])
    assert m.multi_get([["a"], ["b"]]) == [None, 2]
    m.commit(2)
    m.begin_commit(2)
    assert m.multi_get([["a"], ["b"]]) == [1, 2]
    m.multi_remove([["a"]])
    m.commit(2)
    m.begin_commit(3)
    assert m.multi_get([["a"], ["b"]]) == [None, 2]
    assert sorted(m.get_tuples()) == [["b", 2]]
    m.commit(3)


def test_memory_map_state_is_opaque_and_snapshottable():
    m = MemoryMapState.factory().make_state({}, None, 0, 1)
    for txid, amt in [(1, 1), (1, 5), (2, 2)]:  # txid 1 replayed with other tuples
        m.begin_commit(txid)
        single_update(m, "w", amt)
        m.update(CombinerValueUpdater(CountCombiner(), amt))
        m.commit(txid)
    assert single_get(m, "w") == 7 and m.get() == 7
    assert sorted(m.get_tuples()) == [["$MEMORY-MAP-STATE-GLOBAL$", 7], ["w", 7]]


def test_memory_map_state_is_shared_by_every_copy_of_its_factory_and_by_nothing_else():
    factory, other = MemoryMapState.factory(), MemoryMapState.factory()
    a = factory.make_state({}, None, 0, 2)
    a.begin_commit(1)
    single_update(a, "w", 3)
    a.commit(1)
    copy = pickle.loads(pickle.dumps(factory))  # what each task gets
    b = copy.make_state({}, None, 0, 2)
    b.begin_commit(2)
    assert single_update(b, "w", 1) == 4
    b.commit(2)
    assert single_get(a, "w") == 4
    assert single_get(copy.make_state({}, None, 1, 2), "w") is None, "partitions share one map"
    assert single_get(other.make_state({}, None, 0, 2), "w") is None, "two factories share one map"
    assert single_get(factory.make_state({"topology.name": "t2"}, None, 0, 2), "w") is None, \
        "two topologies share one map"


def test_memory_map_state_keeps_values_that_cannot_change_and_copies_the_others():
    """Plain values and keys are kept as they are (no serializing per commit); a value that can
    change is stored serialized, so neither the writer nor a reader can change what is stored;
    keys equal in Python (1, 1.0, True) are one key, the int, as a group_by groups them
    (`squall._equal_keys`)."""
    m = MemoryMapState.factory().make_state({}, None, 0, 1)
    store = m._backing.store
    m.begin_commit(1)
    counts = {"x": [1]}
    m.multi_put([["w"], ["t"], ["d"], [1.0], [("a", 2)]], [7, ("a", 1.5, None), counts, "one", b"tuple"])
    m.commit(1)
    assert type(store.get(("w",))) is OpaqueValue and store.get(("w",)).curr == 7
    assert store.get(("t",)).curr == ("a", 1.5, None)
    assert type(store.get(("d",))) is bytes, "a dict value is stored serialized"
    counts["x"].append(2)
    read = m.multi_get([["d"]])[0]
    assert read == {"x": [1]}
    read["x"].append(3)
    assert m.multi_get([["d"]])[0] == {"x": [1]}
    assert m.multi_get([[1], [1.0], [True], [("a", 2)], [("a", 2.0)]]) == ["one", "one", "one", b"tuple", b"tuple"]
    assert store.get((1,)).curr == "one", "kept as the int, a plain key"
    assert sorted(map(repr, m.get_tuples())) == sorted(map(repr, [
        ["w", 7], ["t", ("a", 1.5, None)], ["d", {"x": [1]}], [1, "one"], [("a", 2), b"tuple"]]))
    m.begin_commit(2)
    assert single_update(m, "w", 2) == 9
    m.commit(2)
    assert m.multi_get([["w"]]) == [9]


def test_a_memory_map_state_value_that_cannot_be_serialized_names_the_state():
    m = MemoryMapState.factory().make_state({"topology.fall.back.on.pickle": False}, None, 3, 4)
    m.begin_commit(1)
    with pytest.raises(Exception, match=r"MemoryMapState \w+ partition 3"):
        m.multi_put([["k"]], [object()])


class UpdateMemoryMap(BasicBolt):
    """Adds 1 to ``word`` in a MemoryMapState as batch ``txid``, logging each new value; the first
    tuple with ``crash`` set crashes the worker after its commit, once (in the first instance)."""

    def __init__(self, factory, log, prepared):
        self.factory, self.log, self.prepared = factory, log, prepared

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.state = self.factory.make_state(conf, context, context.get_this_task_index(), 1)
        self.prepared.append(context.get_this_task_id())

    def execute(self, tup, collector):
        txid, word, crash = tup.values
        self.state.begin_commit(txid)
        new = single_update(self.state, word, 1)
        self.state.commit(txid)
        self.log.append((txid, word, new))
        if crash and len(self.prepared.items()) == 1:
            raise RuntimeError("crash on purpose, after the commit")


def test_memory_map_state_lives_in_local_cluster_and_survives_a_worker_restart():
    spout = FeederSpout(["txid", "word", "crash"])
    log, prepared = SharedLog(), SharedLog()
    factory = MemoryMapState.factory()
    b = TopologyBuilder()
    b.set_spout("feed", spout)
    b.set_bolt("update", UpdateMemoryMap(factory, log, prepared)).shuffle_grouping("feed")
    cluster = LocalCluster()
    try:
        cluster.submit_topology("mms", {"topology.workers": 1, "topology.bolt.fail.fast": True}, b.create_topology())
        spout.feed([1, "a", False])
        spout.feed([2, "a", True])
        assert wait_until(lambda: len(log.items()) == 2 and len(prepared.items()) == 2, 60), \
            f"the worker did not crash and come back: {log.items()}, prepared {len(prepared.items())} times"
        spout.feed([3, "a", False])
        spout.feed([3, "b", False])
        assert wait_until(lambda: len(log.items()) == 4, 30), log.items()
        # a state kept in the worker would have started again from nothing: 1, not 3
        assert log.items() == [(1, "a", 1), (2, "a", 2), (3, "a", 3), (3, "b", 1)]
        assert namespace_of(factory.id, 0) in cluster._state_memory.namespaces("mms"), \
            "the state is not kept by the cluster"
    finally:
        cluster.shutdown()


def _opaque_memory_map():
    return MemoryMapState.factory().make_state({}, None, 0, 1)


@pytest.mark.parametrize("make", [
    lambda: OpaqueMap.build(MemoryBackingMap()), lambda: TransactionalMap.build(MemoryBackingMap()),
    lambda: NonTransactionalMap.build(MemoryBackingMap()), _opaque_memory_map,
    lambda: SnapshottableMap(OpaqueMap.build(MemoryBackingMap()), ["$g"]),
], ids=["opaque", "transactional", "non-transactional", "memory-map-state", "snapshottable"])
def test_combine_partials_stores_and_returns_what_multi_update_with_combiner_updaters_does(make):
    """The commit's inlined path (`combine_partials`, no updater per key) against the generic one
    on a twin map, over new keys, a later batch, a replay of a batch (the same txid again), two
    updates of a key within one batch, and a value of None."""
    fast, slow = make(), make()
    agg = CountCombiner()
    batches = [(1, [("a",), ("b",)], [2, 1]), (2, [("a",), ("c",)], [3, 1]), (2, [("a",), ("c",)], [3, 1]),
               (3, [("a",), ("b",)], [1, 1]), (4, [("n",)], [None])]
    for txid, ks, args in batches:
        for m in (fast, slow):
            m.begin_commit(txid)
        got = fast.combine_partials(ks, args, agg)
        if txid == 3:  # a second update of the same keys in one batch builds on the first
            got = fast.combine_partials(ks, args, agg)
        want = slow.multi_update([list(k) for k in ks], [CombinerValueUpdater(agg, a) for a in args])
        if txid == 3:
            want = slow.multi_update([list(k) for k in ks], [CombinerValueUpdater(agg, a) for a in args])
        assert got == want
        for m in (fast, slow):
            m.commit(txid)
    keys = [["a"], ["b"], ["c"], ["n"]]
    assert fast.multi_get(keys) == slow.multi_get(keys)
    fast.begin_commit(5)
    slow.begin_commit(5)
    assert fast.multi_get(keys) == slow.multi_get(keys)


def test_combine_partials_of_a_batch_behind_the_state_fails_as_multi_update_does():
    m = OpaqueMap.build(MemoryBackingMap())
    m.begin_commit(5)
    m.combine_partials([("a",)], [1], CountCombiner())
    m.commit(5)
    m.begin_commit(4)
    with pytest.raises(StateError, match=r"Current batch \(4\) is behind state's batch"):
        m.combine_partials([("a",)], [1], CountCombiner())
