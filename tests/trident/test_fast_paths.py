"""The fast paths of issue 34 item 7 against the generic ones they stand for (a review).

- A grouped combiner's commit (`MapCombinerAggStateUpdater.update_partials`) takes the inlined
  `combine_partials` only on this package's own maps: a map whose ``multi_update`` a user
  overrode, or a user's wrapper that forwards other names to one of them, is updated through its
  ``multi_update`` with `CombinerValueUpdater`s, as Storm's updater does.
- The built-in `Count` after a function counts its emits per group in the function's collector:
  on LocalCluster every batch's new values are the running counts Storm gives, whatever the
  function emits (several fields, none, None, a group field of its input) and whether or not the
  function's stream also feeds other operations (another each, a merge).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import pytest

from squall import Fields
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.operation import BaseFunction, TridentCollector
from squall.trident.processors import (
    AggregateProcessor,
    BodyNode,
    CombinerCombineAggregator,
    CombinerInitFunction,
    EachProcessor,
    GroupedAggregator,
    SubtopologyBody,
)
from squall.trident.spout import FixedBatchSpout
from squall.trident.state import (
    MapState,
    OpaqueMap,
    SnapshottableMap,
    TransactionalMap,
    ValueUpdater,
)
from squall.trident.state.api import MapCombinerAggStateUpdater
from squall.trident.state.memory import MemoryMapState as MemoryMap

from .test_processors import Context, Output, run_batch
from .test_state import CountCombiner, MemoryBackingMap
from .test_trident_local import by_txid, cluster, record, run  # noqa: F401 (fixture)
from .trident_ops import Recorded

# --- the commit's dispatch -------------------------------------------------------------------------


class Emitted(TridentCollector):
    """Keeps what the updater emits."""

    def __init__(self) -> None:
        self.rows: list[list] = []

    def emit(self, values: list) -> None:
        self.rows.append(list(values))

    def report_error(self, error: BaseException) -> None:
        raise error


class Calls:
    """The ``multi_update`` calls a map saw: (keys, each updater's type)."""

    def __init__(self) -> None:
        self.seen: list[tuple[list, list[str]]] = []

    def add(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> None:
        self.seen.append(([list(k) for k in keys], [type(u).__name__ for u in updaters]))


class AuditedOpaque(OpaqueMap):
    """A user's OpaqueMap that audits every update."""

    def __init__(self, backing: Any) -> None:
        super().__init__(backing)
        self.calls = Calls()

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> list[Any]:
        self.calls.add(keys, updaters)
        return super().multi_update(keys, updaters)


class AuditedSnapshottable(SnapshottableMap):
    """A user's SnapshottableMap that audits every update."""

    def __init__(self, delegate: MapState) -> None:
        super().__init__(delegate, ["$g"])
        self.calls = Calls()

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> list[Any]:
        self.calls.add(keys, updaters)
        return super().multi_update(keys, updaters)


class AuditedMemoryMap(MemoryMap):
    """A user's MemoryMapState that audits every update."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.calls = Calls()

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> list[Any]:
        self.calls.add(keys, updaters)
        return super().multi_update(keys, updaters)


class Forwarding(MapState):
    """A user's wrapper that audits updates and forwards every other name to the map it wraps."""

    def __init__(self, inner: MapState) -> None:
        self.inner = inner
        self.calls = Calls()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        return self.inner.multi_get(keys)

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> list[Any]:
        self.calls.add(keys, updaters)
        return self.inner.multi_update(keys, updaters)

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        self.inner.multi_put(keys, values)

    def begin_commit(self, txid: int | None) -> None:
        self.inner.begin_commit(txid)

    def commit(self, txid: int | None) -> None:
        self.inner.commit(txid)


def _memory_map(cls: type) -> Any:
    state = MemoryMapState.factory().make_state({}, None, 0, 1)
    return cls(state._backing.store, state._backing.codec)


@pytest.mark.parametrize("make", [
    lambda: AuditedOpaque(MemoryBackingMap()),
    lambda: AuditedSnapshottable(OpaqueMap.build(MemoryBackingMap())),
    lambda: _memory_map(AuditedMemoryMap),
    lambda: Forwarding(OpaqueMap.build(MemoryBackingMap())),
    lambda: Forwarding(TransactionalMap.build(MemoryBackingMap())),
    lambda: Forwarding(MemoryMapState.factory().make_state({}, None, 0, 1)),
], ids=["opaque-subclass", "snapshottable-subclass", "memory-map-subclass", "forwarding-opaque",
        "forwarding-transactional", "forwarding-memory-map"])
def test_a_grouped_combiner_commit_updates_a_users_map_through_its_multi_update(make) -> None:
    """What a user's ``multi_update`` does (here: audit each update) is not skipped by the
    inlined commit; the stored values and the new values are those of the generic path."""
    state = make()
    updater = MapCombinerAggStateUpdater(CountCombiner(), Fields("w"), Fields("n"))
    out = Emitted()
    # a new key, a later batch, a replay of it (the same txid again), a partial of None
    batches = [(1, {("a",): 2, ("b",): 1}), (2, {("a",): 3}), (2, {("a",): 3}), (3, {("n",): None})]
    for txid, partial in batches:
        state.begin_commit(txid)
        updater.update_partials(state, partial, out)
        state.commit(txid)
    assert state.calls.seen == [([["a"], ["b"]], ["CombinerValueUpdater"] * 2),
                                ([["a"]], ["CombinerValueUpdater"]), ([["a"]], ["CombinerValueUpdater"]),
                                ([["n"]], ["CombinerValueUpdater"])]
    assert out.rows == [["a", 2], ["b", 1], ["a", 5], ["a", 5], ["n", None]]
    state.begin_commit(4)
    assert state.multi_get([["a"], ["b"], ["n"]]) == [5, 1, None]


def test_the_packages_own_maps_still_take_the_inlined_commit() -> None:
    """The dispatch keeps the fast path where it is right: OpaqueMap, MemoryMapState."""
    for state in (OpaqueMap.build(MemoryBackingMap()), MemoryMapState.factory().make_state({}, None, 0, 1)):
        seen: list = []
        inner = state.delegate if isinstance(state, SnapshottableMap) else state
        inner.multi_update = lambda keys, updaters, seen=seen: seen.append(keys)  # would be the slow path
        state.begin_commit(1)
        out = Emitted()
        MapCombinerAggStateUpdater(CountCombiner(), Fields("w"), Fields("n")).update_partials(
            state, {("a",): 2}, out)
        state.commit(1)
        assert seen == [] and out.rows == [["a", 2]], type(state).__name__


# --- the built-in Count after a function, on LocalCluster ---------------------------------------------

SENTENCES = [["the cow the"], [""], ["a - cow"], ["- -"], ["sky"], ["the a a"], ["- x"]]


class SplitLen(BaseFunction):
    """Each word and its length; ``-`` is a word of None (length 0); an empty sentence emits nothing."""

    def execute(self, tuple, collector) -> None:
        for word in tuple[0].split(" "):
            if word:
                w = None if word == "-" else word
                collector.emit((w, 0 if w is None else len(w)))


class Upper(BaseFunction):
    def execute(self, tuple, collector) -> None:
        collector.emit([None if tuple[0] is None else tuple[0].upper()])


class SubCount(Count):
    """A Count subclass: the generic combiner path."""


def _words(sentence: str) -> list[Any]:
    return [None if w == "-" else w for w in sentence.split(" ") if w]


def _spout() -> FixedBatchSpout:
    return FixedBatchSpout(Fields("sentence"), 2, *SENTENCES)


def _running(per_batch: list[list[Any]]) -> dict[int, list]:
    """Storm's new values of a grouped persistent Count: per batch, each group it saw and its
    running count."""
    running: collections.Counter = collections.Counter()
    want = {}
    for txid, groups in enumerate(per_batch, start=1):
        running.update(groups)
        if groups:
            want[txid] = sorted(([g, running[g]] for g in set(groups)), key=repr)
    return want


def test_a_builtin_count_after_a_function_counts_as_storm_whatever_else_reads_the_stream(cluster) -> None:  # noqa: F811 (the fixture)
    topo = TridentTopology()
    batches = [SENTENCES[i:i + 2] for i in range(0, len(SENTENCES), 2)]
    words = [[w for (s,) in b for w in _words(s)] for b in batches]
    expect: dict[str, dict[int, list]] = {}

    def counted(key: str, stream: Any, group: str, agg: Any, want: list[list[Any]]) -> None:
        counts = stream.group_by(Fields(group)).persistent_aggregate(MemoryMapState.factory(), agg, Fields("count"))
        record(counts.new_values_stream(), key)
        expect[key] = _running(want)

    # the function's emits only counted: by its first emitted field, its second, and its input's
    s1 = topo.new_stream("spout-cnt-1", _spout()).each(Fields("sentence"), SplitLen(), Fields("word", "len"))
    counted("by-word", s1, "word", Count(), words)
    s2 = topo.new_stream("spout-cnt-2", _spout()).each(Fields("sentence"), SplitLen(), Fields("word", "len"))
    counted("by-len", s2, "len", Count(), [[0 if w is None else len(w) for w in b] for b in words])
    s3 = topo.new_stream("spout-cnt-3", _spout()).each(Fields("sentence"), SplitLen(), Fields("word", "len"))
    counted("by-sentence", s3, "sentence", Count(),
            [[s for (s,) in b for _ in _words(s)] for b in batches])
    # the function's stream also read by another each, and merged with another stream
    s4 = topo.new_stream("spout-cnt-4", _spout()).each(Fields("sentence"), SplitLen(), Fields("word", "len"))
    counted("shared", s4, "word", Count(), words)
    record(s4.each(Fields("word"), Upper(), Fields("up")).project(Fields("up")), "shared-upper")
    other = topo.new_stream("spout-cnt-5", _spout()).each(Fields("sentence"), SplitLen(), Fields("word", "len"))
    counted("merged", topo.merge(s4, other), "word", Count(), [w + w for w in words])
    # not exactly Count: the generic path, same counts
    s6 = topo.new_stream("spout-cnt-6", _spout()).each(Fields("sentence"), SplitLen(), Fields("word", "len"))
    counted("subclass", s6, "word", SubCount(), words)
    run(cluster, topo)

    n = len(batches)
    nonempty = {key: max(want) for key, want in expect.items()}
    seen = {key: by_txid(Recorded.wait_for(key, lambda r, last=last: any(t >= last for t, _ in r)))
            for key, last in nonempty.items()}
    for key, want in expect.items():
        got = {t: sorted(rows, key=repr) for t, rows in seen[key].items()}
        assert got == want, key
    upper = by_txid(Recorded.wait_for("shared-upper", lambda r: any(t >= n for t, _ in r)))
    for txid, ws in enumerate(words, start=1):
        assert sorted(upper.get(txid, []), key=repr) == sorted(
            ([None if w is None else w.upper()] for w in ws), key=repr), txid


# --- the counting collector against the generic path, in one bolt's body --------------------------------


def count_body(function: BaseFunction, count: Count) -> SubtopologyBody:
    """A function, then ``count``'s init and grouped partial by the function's first field."""
    sentence, words = Fields("sentence"), Fields("sentence", "word", "len")
    nodes = [
        BodyNode("split", EachProcessor(sentence, function), words, (("stream", "s0"),), ((1, 0),), ()),
        BodyNode("init", EachProcessor(Fields("word"), CombinerInitFunction(count)),
                 Fields("sentence", "word", "len", "count"), (("node", 0),), ((2, 0),), ()),
        BodyNode("partial", AggregateProcessor(Fields("word", "count"), GroupedAggregator(
            CombinerCombineAggregator(count), Fields("word"), Fields("count"))),
            Fields("word", "count"), (("node", 1),), (), ("s1",)),
    ]
    return SubtopologyBody(nodes, {"s0": sentence}, {})


class EmitsAnyIterable(BaseFunction):
    """Emits each word with its length as a generator, a tuple, then a list, in turn."""

    def execute(self, tuple, collector) -> None:
        for i, word in enumerate(tuple[0].split(" ")):
            row = [word, len(word)]
            collector.emit((v for v in row) if i % 3 == 0 else tuple_(row) if i % 3 == 1 else row)


tuple_ = tuple


def test_the_counting_collector_takes_what_the_generic_collector_takes() -> None:
    """A function may emit any iterable of its values (the generic collector unpacks it): the
    built-in Count's counting collector counts the same groups as the path of any other Count."""
    fast, slow = count_body(EmitsAnyIterable(), Count()), count_body(EmitsAnyIterable(), SubCount())
    outs = []
    for body in (fast, slow):
        out = Output()
        body.prepare({}, Context(), out)
        run_batch(body, ["a b a", "c a b b", "d"])
        outs.append(out.emitted)
    assert type(fast.nodes[0].processor._coll).__name__ == "_CountingCollector"
    assert type(slow.nodes[0].processor._coll).__name__ == "_Collector"
    assert outs[0] == outs[1] == [("s1", ["a", 3]), ("s1", ["b", 3]), ("s1", ["c", 1]), ("s1", ["d", 1])]
