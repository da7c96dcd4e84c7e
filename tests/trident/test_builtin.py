"""Trident's built-in operations, each run as its bolt would run it (the aggregators through
init/aggregate/complete per batch, the query functions against real map states), with Storm's
results: Count, Sum, Max, Min, FirstN, Debug, FilterNull, Equals, Negate, MapGet, SnapshotGet,
TupleCollectionGet."""

from __future__ import annotations

from decimal import Decimal

import pytest

from squall import Fields, LocalCluster
from squall.testing._registry import SharedLog
from squall.trident import TridentTopology
from squall.trident.builtin import (
    Count, Debug, Equals, FilterNull, FirstN, MapGet, Max, Min, Negate, SnapshotGet, Sum, TupleCollectionGet,
)
from squall.trident.operation import BaseFilter, Consumer
from squall.trident.state import CombinerValueUpdater, MemoryMapState, OpaqueMap
from squall.trident.spout import FixedBatchSpout
from squall.trident.tuple import TridentTuple

from ..conftest import wait_until

from .test_state import Collector, MemoryBackingMap
from .trident_ops import ListSpout, TrueFilter


def rows(fields, *values):
    f = Fields(fields)
    return [TridentTuple(f, list(v)) for v in values]


def combine_all(agg, tuples, split=2):
    """What Trident does with a combiner: partial aggregates per partition, then combined."""
    parts = [tuples[i::split] for i in range(split)]
    partials = []
    for part in parts:
        acc = agg.zero()
        for t in part:
            acc = agg.combine(acc, agg.init(t))
        partials.append(acc)
    total = agg.zero()
    for p in partials:
        total = agg.combine(total, p)
    return total


def run_aggregator(agg, tuples):
    out = Collector()
    state = agg.init(("batch", 1), out)
    for t in tuples:
        agg.aggregate(state, t, out)
    agg.complete(state, out)
    return out.emitted


# --- aggregators ---------------------------------------------------------------------------------------

def test_count_counts_every_tuple_and_zero_is_an_empty_batch():
    tuples = rows(["w"], *[[f"w{i}"] for i in range(7)])
    assert combine_all(Count(), tuples) == 7
    assert combine_all(Count(), []) == 0


def test_sum_keeps_ints_floats_and_decimals_as_storm_does():
    assert combine_all(Sum(), rows(["n"], [1], [2], [3])) == 6
    assert isinstance(combine_all(Sum(), rows(["n"], [1], [2], [3])), int)
    assert combine_all(Sum(), rows(["n"], [1], [2.5])) == 3.5
    total = combine_all(Sum(), rows(["n"], [Decimal("0.1")], [Decimal("0.2")], [1]))
    assert total == Decimal("1.3") and isinstance(total, Decimal)
    assert Sum().combine(Decimal("1"), 0.5) == Decimal("1.5")


def test_sum_of_a_value_that_is_no_number_names_the_field():
    with pytest.raises(TypeError, match=r"Sum: field 'n' holds 'x' \(str\), not a number"):
        Sum().init(rows(["n"], ["x"])[0])


def test_max_and_min_emit_the_whole_tuple_skip_nones_and_give_ties_to_the_later_tuple():
    tuples = rows(["k", "n"], ["a", 3], ["b", None], ["c", 7], ["d", 1], ["e", 7], ["f", 1])
    assert run_aggregator(Max("n"), tuples) == [["e", 7]]
    assert run_aggregator(Min("n"), tuples) == [["f", 1]]
    assert run_aggregator(Max("n"), []) == [], "an empty batch emitted a tuple"
    assert run_aggregator(Max(None), rows(["a", "b"], [1, 9], [2, 0])) == [[2, 0]]  # whole tuples compared
    with pytest.raises(TypeError, match="Max: the field must be a field name, got 3"):
        Max(3)


def test_first_n_without_a_sort_field_takes_the_first_n_of_each_partition():
    first = FirstN(2)
    tuples = rows(["w"], ["a"], ["b"], ["c"])
    assert run_aggregator(first.agg, tuples) == [["a"], ["b"]]
    assert run_aggregator(first.agg, tuples[:1]) == [["a"]]


def test_first_n_sorted_takes_the_least_or_with_reverse_the_greatest_in_order():
    tuples = rows(["w", "count"], ["a", 5], ["b", 1], ["c", 9], ["d", 3], ["e", 7])
    assert run_aggregator(FirstN(3, "count").agg, tuples) == [["b", 1], ["d", 3], ["a", 5]]
    assert run_aggregator(FirstN(2, "count", reverse=True).agg, tuples) == [["c", 9], ["e", 7]]
    # Trident runs it per partition, then again on one partition after global_(): the same result
    partitions = [tuples[0::2], tuples[1::2]]
    agg = FirstN(2, "count", reverse=True).agg
    partials = [t for p in partitions for t in rows(["w", "count"], *run_aggregator(agg, p))]
    assert run_aggregator(agg, partials) == [["c", 9], ["e", 7]]


def test_first_n_assembly_aggregates_per_partition_then_globally_and_keeps_the_fields():
    topo = TridentTopology()
    s = topo.new_stream("s", ListSpout("w", "count"))
    top = s.apply_assembly(FirstN(3, "count", reverse=True))
    assert top.get_output_fields() == Fields("w", "count")
    with pytest.raises(ValueError, match=r"FirstN: the sort field 'nope' is not in the stream's fields \['w', 'count'\]"):
        s.apply_assembly(FirstN(3, "nope"))
    with pytest.raises(ValueError, match="FirstN: n must be a positive int, got 0"):
        FirstN(0)


# --- filters -------------------------------------------------------------------------------------------

def test_filter_null_keeps_tuples_without_none():
    assert [FilterNull().is_keep(t) for t in rows(["a", "b"], [1, 2], [1, None], [None, None], [0, ""])] == \
        [True, False, False, True]


def test_equals_keeps_tuples_whose_fields_are_all_equal():
    assert [Equals().is_keep(t) for t in rows(["a", "b", "c"], [1, 1, 1], [1, 1, 2], [None, None, None],
                                                [None, 1, 1], ["x", "x", "x"])] == [True, False, True, False, True]
    assert Equals().is_keep(rows(["a"], [5])[0])


class Recording(BaseFilter):
    def __init__(self):
        self.calls = []

    def prepare(self, conf, context):
        self.calls.append("prepare")

    def cleanup(self):
        self.calls.append("cleanup")

    def is_keep(self, tuple):  # noqa: A002
        return tuple[0] > 0


def test_negate_inverts_its_filter_and_passes_prepare_and_cleanup_on():
    inner = Recording()
    neg = Negate(inner)
    neg.prepare({}, None)
    assert [neg.is_keep(t) for t in rows(["n"], [1], [0], [-1])] == [False, True, True]
    neg.cleanup()
    assert inner.calls == ["prepare", "cleanup"]
    with pytest.raises(TypeError, match="Negate: int is not a filter"):
        Negate(3)


def test_debug_prints_each_tuple_with_its_prefix_and_keeps_it(capsys):
    assert Debug().is_keep(rows(["a", "b"], ["x", 1])[0])
    assert Debug("words").is_keep(rows(["a"], ["y"])[0])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("<") and lines[0].endswith("> DEBUG: ['x', 1]")
    assert lines[1].endswith("> DEBUG(words): ['y']")


# --- query functions -----------------------------------------------------------------------------------

def committed_counts(state, counts, txid=1):
    state.begin_commit(txid)
    state.multi_update([[k] for k in counts], [CombinerValueUpdater(Count(), v) for v in counts.values()])
    state.commit(txid)


def query(fn, state, tuples):
    out = Collector()
    results = fn.batch_retrieve(state, tuples)
    assert len(results) == len(tuples)
    for t, r in zip(tuples, results):
        fn.execute(t, r, out)
    return out.emitted


def test_map_get_reads_each_tuples_key_and_none_for_an_absent_one():
    state = OpaqueMap.build(MemoryBackingMap())
    committed_counts(state, {"the": 3, "man": 1})
    assert query(MapGet(), state, rows(["word"], ["the"], ["cow"], ["man"])) == [[3], [None], [1]]


def test_snapshot_get_gives_the_one_value_to_every_tuple():
    state = MemoryMapState.factory().make_state({}, None, 0, 1)
    state.begin_commit(1)
    state.update(CombinerValueUpdater(Count(), 12))
    state.commit(1)
    assert query(SnapshotGet(), state, rows(["args"], ["x"], ["y"])) == [[12], [12]]
    with pytest.raises(TypeError, match="SnapshotGet needs a Snapshottable state, got str"):
        SnapshotGet().batch_retrieve("no state", [])


def test_tuple_collection_get_emits_every_entry_for_every_tuple():
    state = MemoryMapState.factory().make_state({}, None, 0, 1)
    committed_counts(state, {"the": 2, "cow": 1})
    got = query(TupleCollectionGet(), state, rows(["args"], ["q1"], ["q2"]))
    assert sorted(got) == sorted([["the", 2], ["cow", 1]] * 2)
    with pytest.raises(TypeError, match="TupleCollectionGet needs a ITupleCollection state, got OpaqueMap"):
        TupleCollectionGet().batch_retrieve(OpaqueMap.build(MemoryBackingMap()), [])


# --- in a topology -------------------------------------------------------------------------------------

class Log(Consumer):
    """Appends every tuple it sees to a shared log."""

    def __init__(self, log):
        self.log = log

    def accept(self, tuple):  # noqa: A002
        self.log.append(list(tuple.values))


def test_first_n_on_two_partitions_gives_the_top_n_of_the_whole_batch():
    """One batch of 8 words spread over two partitions: FirstN keeps the 3 greatest of the whole
    batch (per partition, then again after global_()), greatest first."""
    words = [["the", 5], ["cow", 2], ["moon", 9], ["man", 1], ["said", 7], ["jumped", 3], ["over", 8], ["a", 4]]
    spout = FixedBatchSpout(Fields("word", "n"), len(words), *words)
    log = SharedLog()
    topo = TridentTopology()
    (topo.new_stream("firstn", spout).shuffle().each(Fields("word"), TrueFilter()).parallelism_hint(2)
     .apply_assembly(FirstN(3, "n", reverse=True)).peek(Log(log)))
    cluster = LocalCluster()
    try:
        cluster.submit_topology("firstn", {}, topo.build())
        assert wait_until(lambda: len(log.items()) >= 3, 60), log.items()
        assert log.items()[:3] == [["moon", 9], ["over", 8], ["said", 7]]
    finally:
        cluster.shutdown()
