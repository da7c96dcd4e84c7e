"""What each Trident operation sees and emits on LocalCluster, against Storm's semantics (a
review of the compiler): a stream merged with itself, min_by/max_by over Nones and ties, the
lifecycle of a combiner in every bolt it runs in, partition_persist with its own updater and
new values, reducers persisted grouped and ungrouped, each repartition's routing, join field
order, project after a grouped aggregate, an operation's report_error and FailedException.
Every batch's output is checked exactly against what the spout emitted in it."""

from __future__ import annotations

import collections
from typing import Any

from squall import Fields
from squall._grouping import CustomStreamGrouping
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.operation import (
    BaseAggregator,
    BaseFunction,
    CombinerAggregator,
    FailedException,
    ReducerAggregator,
)
from squall.trident.spout import FixedBatchSpout
from squall.trident.state import BaseStateUpdater, State, StateFactory

from ..conftest import wait_until
from .test_trident_local import batches, cluster, record, run, wait_batches  # noqa: F401 (fixture)
from .trident_ops import Recorded, Split, TrueFilter

WORDS = [["the cow the"], ["a cow"], ["moon the sky"], ["a a a"], ["sky"]]


def words_spout(batch_size: int = 2) -> FixedBatchSpout:
    return FixedBatchSpout(Fields("sentence"), batch_size, *WORDS)


def batch_words(spout: FixedBatchSpout, txid: int) -> list[str]:
    return [w for (s,) in spout.batch(txid) for w in s.split(" ") if w]


class Lifecycle:
    """Calls of prepare and cleanup, per (what, component, task), shared by every copy."""

    calls: collections.Counter = collections.Counter()

    @classmethod
    def add(cls, what: str, context: Any) -> None:
        cls.calls[(what, context.get_this_component_id(), context.get_this_task_id())] += 1

    @classmethod
    def of(cls, what: str) -> dict[tuple[str, int], int]:
        return {(c, t): n for (w, c, t), n in cls.calls.items() if w == what}


def test_a_stream_merged_with_itself_gives_each_tuple_once_per_edge(cluster) -> None:
    topo = TridentTopology()
    spout = FixedBatchSpout(Fields("w"), 2, ["a"], ["b"], ["c"])
    s = topo.new_stream("spout-selfmerge", spout).each(Fields("w"), TrueFilter())
    record(topo.merge(s, s), "selfmerge")
    run(cluster, topo)
    seen = wait_batches("selfmerge", 2)
    assert sorted(seen[1]) == [["a"], ["a"], ["b"], ["b"]]
    assert seen[2] == [["c"], ["c"]]


def test_min_by_and_max_by_skip_nones_and_give_ties_to_the_later_tuple(cluster) -> None:
    """Storm's ComparisonAggregator: a null value is skipped, compare() keeping value2 on a tie."""
    topo = TridentTopology()
    spout = FixedBatchSpout(Fields("name", "age"), 4, ["a", None], ["b", 5], ["c", 5], ["d", 9],
                            ["e", 1], ["f", None], ["g", 1])
    s = topo.new_stream("spout-minmax-none", spout)
    record(s.max_by("age"), "maxnone")
    record(s.min_by("age"), "minnone")
    run(cluster, topo)
    assert wait_batches("maxnone", 2) == {1: [["d", 9]], 2: [["g", 1]]}
    assert wait_batches("minnone", 2) == {1: [["c", 5]], 2: [["g", 1]]}


class PreparedCount(CombinerAggregator):
    """Counts, with a step set in prepare (a combiner using its prepare in combine)."""

    def prepare(self, conf, context) -> None:
        Lifecycle.add("count-prepare", context)
        self.step = 1

    def init(self, tuple) -> int:  # noqa: A002
        return self.step

    def combine(self, val1: int, val2: int) -> int:
        return val1 + val2 * self.step

    def zero(self) -> int:
        return 0


def test_a_combiner_is_prepared_once_in_each_task_of_every_bolt_it_runs_in(cluster) -> None:
    topo = TridentTopology()
    spout = words_spout(2)
    s = topo.new_stream("spout-prepared-count", spout).shuffle().name("split") \
        .each(Fields("sentence"), Split(), Fields("word")).parallelism_hint(2)
    total = s.name("total").aggregate(PreparedCount(), Fields("n")).parallelism_hint(3)
    record(total, "prepcount")
    counts = s.name("counts").group_by(Fields("word")) \
        .persistent_aggregate(MemoryMapState.factory(), PreparedCount(), Fields("count")).parallelism_hint(2)
    record(counts.new_values_stream().name("check").global_().each(Fields("word"), TrueFilter()), "prepgrouped")
    name = run(cluster, topo)
    n = batches(spout)
    seen = wait_batches("prepcount", n)
    assert {t: seen[t] for t in range(1, n + 1)} == {t: [[len(batch_words(spout, t))]] for t in range(1, n + 1)}
    seen = wait_batches("prepgrouped", n)
    running: collections.Counter = collections.Counter()
    for txid in range(1, n + 1):
        running.update(batch_words(spout, txid))
        assert sorted(seen[txid]) == sorted([w, running[w]] for w in set(batch_words(spout, txid)))
    components = cluster.get_topology_info(name)["components"]
    # names name the bolts: the split (with both combiners' init and partial), the total, the counts
    assert sorted(c for c in components if c.startswith("b-")) == [
        "b-0-split-total-counts", "b-1-total", "b-2-counts", "b-3-check"]
    prepared = Lifecycle.of("count-prepare")
    for bolt, times in (("b-0-split-total-counts", 2), ("b-1-total", 1), ("b-2-counts", 1)):
        mine = {task: k for (c, task), k in prepared.items() if c == bolt}
        assert len(mine) == components[bolt]["tasks"] and set(mine.values()) == {times}, (bolt, mine)
    cluster.kill_topology(name)
