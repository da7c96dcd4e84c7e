"""Trident topologies on LocalCluster: word count into a MemoryMapState, and Storm's
TridentIntegrationTest scenarios (count per batch, split and merge, several groupings of one
stream, repartitions in a row, joins, partition aggregates, functions emitting 0 or 2 tuples).
Every batch's output is recorded with its txid and checked exactly against what the spout
emitted in that batch."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterator

import pytest

from squall import Config, Fields, LocalCluster
from squall.trident import BaseFunction, MemoryMapState, TridentTopology
from squall.trident.spout import FixedBatchSpout

from ..conftest import wait_until
from .trident_ops import (
    CountAsAggregator,
    CountCombiner,
    Record,
    Recorded,
    Split,
    StringLength,
    SumCombiner,
    TrueFilter,
    latest,
)

SENTENCES = [["the cow jumped over the moon"], ["the man went to the store and bought some candy"],
             ["four score and seven years ago"], ["how many apples can you eat"],
             ["to be or not to be the person"], [""], ["the the the"]]
_names = itertools.count()


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as c:
        yield c


def run(cluster: LocalCluster, topo: TridentTopology) -> str:
    name = f"trident-{next(_names)}"
    cluster.submit_topology(name, Config(), topo.build())
    return name


def record(stream, key: str):
    fields = stream.get_output_fields()
    return stream.partition_aggregate(fields, Record(key), fields)


def by_txid(records) -> dict[int, list]:
    out: dict[int, list] = collections.defaultdict(list)
    for txid, values in records:
        out[txid].append(values)
    return out


def wait_batches(key: str, txids: int, per_batch: int = 1) -> dict[int, list]:
    """The records of txids 1..txids, once each has ``per_batch`` recording tasks' worth."""
    def done(records) -> bool:
        tasks = collections.Counter(t for t, _ in records)
        return all(tasks[t] >= per_batch for t in range(1, txids + 1))

    return by_txid(Recorded.wait_for(key, done))


def sentence_spout(batch_size: int = 2) -> FixedBatchSpout:
    return FixedBatchSpout(Fields("sentence"), batch_size, *SENTENCES)


def words_of(spout: FixedBatchSpout, txid: int) -> list[str]:
    return [w for (s,) in spout.batch(txid) for w in s.split(" ") if w]


def batches(spout: FixedBatchSpout) -> int:
    return -(-len(spout.outputs) // spout.max_batch_size)


def test_word_count_into_a_memory_map_state(cluster) -> None:
    topo = TridentTopology()
    spout = sentence_spout(3)
    counts = topo.new_stream("spout1", spout) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .persistent_aggregate(MemoryMapState.factory(), CountCombiner(), Fields("count")) \
        .parallelism_hint(3)
    record(counts.new_values_stream(), "wc")
    run(cluster, topo)
    expected = collections.Counter(w for (s,) in SENTENCES for w in s.split(" ") if w)
    Recorded.wait_for("wc", lambda r: latest(r) == dict(expected))
    # each batch's new values are the running counts after that batch, exactly
    running: collections.Counter = collections.Counter()
    seen = by_txid(Recorded.get("wc"))
    for txid in range(1, batches(spout) + 1):
        running.update(words_of(spout, txid))
        assert sorted(seen[txid]) == sorted([w, running[w]] for w in set(words_of(spout, txid)))


def test_ungrouped_persistent_aggregate_sums_every_batch_into_one_value(cluster) -> None:
    topo = TridentTopology()
    spout = sentence_spout(2)
    total = topo.new_stream("spout-total", spout) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .each(Fields("word"), StringLength(), Fields("len")).parallelism_hint(2) \
        .persistent_aggregate(MemoryMapState.factory(), Fields("len"), SumCombiner(), Fields("total"))
    record(total.new_values_stream(), "total")
    run(cluster, topo)
    n = batches(spout)
    seen = wait_batches("total", n)
    running = 0
    for txid in range(1, n + 1):
        running += sum(len(w) for w in words_of(spout, txid))
        if words_of(spout, txid):
            assert seen[txid] == [[running]]


def test_ungrouped_persistent_aggregate_into_a_state_that_is_not_snapshottable_says_so(cluster) -> None:
    """Every batch failed on an AttributeError deep in the state updater (``'X' object has no
    attribute 'update'``), and the topology stalled; the bolt's prepare now says what is wrong
    and what to do."""
    from squall.trident.state import MapState, StateFactory

    class Plain(MapState):
        def multi_get(self, keys):
            return [None for _ in keys]

        def multi_update(self, keys, updaters):
            return [u.update(None) for u in updaters]

        def multi_put(self, keys, values):
            pass

        def begin_commit(self, txid):
            pass

        def commit(self, txid):
            pass

    class Plainly(StateFactory):
        def make_state(self, conf, metrics, partition_index, num_partitions):
            return Plain()

    topo = TridentTopology()
    topo.new_stream("spout-plain", sentence_spout(2)).persistent_aggregate(Plainly(), CountCombiner(), Fields("n"))
    name = run(cluster, topo)

    def errors() -> list[str]:
        return [e["error"] for e in cluster.get_topology_info(name)["errors"]]
    assert wait_until(errors, 20)
    assert errors()[0] == (
        "TypeError: persistent_aggregate into state 'state1' without group_by keeps one global value, so the state "
        "must be Snapshottable (get, update, set); its Plain has no get, update, set: wrap a MapState in "
        "SnapshottableMap(state, [key]), or group_by before persistent_aggregate")


def test_count_agg_gives_one_count_per_batch_and_zero_for_an_empty_batch(cluster) -> None:
    """Storm's testCountAgg: aggregate with parallelism 2 (the batch_global step)."""
    topo = TridentTopology()
    spout = sentence_spout(1)
    counts = topo.new_stream("spout-countagg", spout) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .aggregate(CountAsAggregator(), Fields("count")).parallelism_hint(2)
    record(counts.project(Fields("count")), "countagg")
    run(cluster, topo)
    n = batches(spout)
    seen = wait_batches("countagg", n + 2)  # two batches past the spout's end: empty
    for txid in range(1, n + 3):
        assert seen[txid] == [[len(words_of(spout, txid))]], txid
    assert seen[6] == [[0]] and seen[n + 1] == [[0]]


def test_combiner_aggregate_with_parallelism_counts_each_batch_once(cluster) -> None:
    topo = TridentTopology()
    spout = sentence_spout(2)
    counts = topo.new_stream("spout-combine", spout) \
        .each(Fields("sentence"), Split(), Fields("word")).parallelism_hint(1) \
        .shuffle().each(Fields("word"), TrueFilter()).parallelism_hint(3) \
        .aggregate(CountCombiner(), Fields("count")).parallelism_hint(2)
    record(counts, "combine")
    run(cluster, topo)
    n = batches(spout)
    seen = wait_batches("combine", n + 1)
    for txid in range(1, n + 2):
        assert seen[txid] == [[len(words_of(spout, txid))]], txid


def test_split_merge(cluster) -> None:
    """Storm's testSplitMerge: one stream split into two, merged again."""
    topo = TridentTopology()
    spout = sentence_spout(2)
    s = topo.new_stream("spout-merge", spout)
    s1 = s.each(Fields("sentence"), Split(), Fields("word")).project(Fields("word"))
    s2 = s.each(Fields("sentence"), StringLength(), Fields("len")).project(Fields("len"))
    record(topo.merge(s1, s2), "merge")
    run(cluster, topo)
    n = batches(spout)
    seen = wait_batches("merge", n)
    for txid in range(1, n + 1):
        expected = [[w] for w in words_of(spout, txid)] + [[len(s)] for (s,) in spout.batch(txid)]
        assert sorted(map(str, seen[txid])) == sorted(map(str, expected))


def test_multiple_groupings_same_stream(cluster) -> None:
    """Storm's testMultipleGroupingsSameStream: one stream grouped twice, merged."""
    topo = TridentTopology()
    spout = sentence_spout(2)
    s = topo.new_stream("spout-groupings", spout).each(Fields("sentence"), Split(), Fields("word")) \
        .each(Fields("word"), TrueFilter())
    s1 = s.group_by(Fields("word")).aggregate(CountAsAggregator(), Fields("count"))
    s2 = s.group_by(Fields("word")).aggregate(CountAsAggregator(), Fields("count"))
    record(topo.merge(s1, s2).parallelism_hint(1), "groupings")
    run(cluster, topo)
    n = batches(spout)
    seen = wait_batches("groupings", n)
    for txid in range(1, n + 1):
        counts = collections.Counter(words_of(spout, txid))
        assert sorted(seen[txid]) == sorted([[w, c] for w, c in counts.items()] * 2)


def test_multi_repartition(cluster) -> None:
    """Storm's testMultiRepartition: local_or_shuffle then shuffle then a count."""
    topo = TridentTopology()
    spout = sentence_spout(2)
    counts = topo.new_stream("spout-repart", spout) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .local_or_shuffle().shuffle() \
        .aggregate(CountAsAggregator(), Fields("count"))
    record(counts, "repart")
    run(cluster, topo)
    n = batches(spout)
    seen = wait_batches("repart", n)
    for txid in range(1, n + 1):
        assert seen[txid] == [[len(words_of(spout, txid))]]


def test_join_within_each_batch(cluster) -> None:
    topo = TridentTopology()
    people = FixedBatchSpout(Fields("id", "name"), 2, [1, "ann"], [2, "bob"], [3, "cy"], [4, "di"])
    orders = FixedBatchSpout(Fields("item", "who"), 3, ["pen", 1], ["ink", 1], ["cup", 2],
                             ["mug", 4], ["hat", 3], ["car", 9])
    joined = topo.join(topo.new_stream("people", people), Fields("id"),
                       topo.new_stream("orders", orders), Fields("who"), Fields("id", "name", "item"))
    record(joined, "join")
    run(cluster, topo)
    seen = wait_batches("join", 2)
    # batch 1: people 1, 2 with orders pen, ink, cup; batch 2: people 3, 4 with mug, hat, car
    assert sorted(seen[1]) == [[1, "ann", "ink"], [1, "ann", "pen"], [2, "bob", "cup"]]
    assert sorted(seen[2]) == [[3, "cy", "hat"], [4, "di", "mug"]]


@pytest.mark.parametrize("kind", ["left", "full"])
def test_an_outer_join_gives_a_side_without_the_key_nones(cluster, kind) -> None:
    """Storm's JoinType.OUTER: per side, a key that side has no tuple of gets nulls for its
    fields; an inner side still drops the key."""
    from squall.trident import JoinType
    topo = TridentTopology()
    people = FixedBatchSpout(Fields("id", "name"), 3, [1, "ann"], [2, "bob"], [5, "eve"])
    orders = FixedBatchSpout(Fields("item", "who"), 3, ["pen", 1], ["ink", 1], ["car", 9])
    types = [JoinType.INNER, JoinType.OUTER] if kind == "left" else JoinType.OUTER
    joined = topo.join(topo.new_stream(f"people-{kind}", people), Fields("id"),
                       topo.new_stream(f"orders-{kind}", orders), Fields("who"), Fields("id", "name", "item"),
                       join_type=types)
    record(joined, f"outer-{kind}")
    run(cluster, topo)
    want = [[1, "ann", "ink"], [1, "ann", "pen"], [2, "bob", None], [5, "eve", None]]
    if kind == "full":
        want.append([9, None, "car"])
    seen = wait_batches(f"outer-{kind}", 1, per_batch=len(want))
    assert sorted(seen[1], key=repr) == sorted(want, key=repr)
    with pytest.raises(ValueError, match="join_type must be a JoinType or one JoinType per stream"):
        topo.join(topo.new_stream(f"p2-{kind}", people), Fields("id"), topo.new_stream(f"o2-{kind}", orders),
                  Fields("who"), Fields("id", "name", "item"), join_type="outer")


def test_partition_aggregate_runs_per_partition(cluster) -> None:
    topo = TridentTopology()
    spout = sentence_spout(2)
    counts = topo.new_stream("spout-partagg", spout) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .shuffle() \
        .partition_aggregate(Fields("word"), CountAsAggregator(), Fields("count")).parallelism_hint(3)
    record(counts, "partagg")
    run(cluster, topo)
    n = batches(spout)
    seen = wait_batches("partagg", n, per_batch=3)
    for txid in range(1, n + 1):
        assert len(seen[txid]) == 3  # every partition ends every batch, empty or not
        assert sum(c for (c,) in seen[txid]) == len(words_of(spout, txid))


class Repeat(BaseFunction):
    """Emits its input's length as many times as the word says: 'none' 0, 'two' 2, else 1."""

    def execute(self, tuple, collector) -> None:
        times = {"none": 0, "two": 2}.get(tuple[0], 1)
        for _ in range(times):
            collector.emit([len(tuple[0])])


def test_each_with_a_function_emitting_zero_or_two_tuples(cluster) -> None:
    topo = TridentTopology()
    spout = FixedBatchSpout(Fields("word"), 3, ["none"], ["two"], ["one"], ["two"], ["none"])
    out = topo.new_stream("spout-repeat", spout).each(Fields("word"), Repeat(), Fields("len"))
    record(out, "repeat")
    run(cluster, topo)
    seen = wait_batches("repeat", 2)
    assert sorted(seen[1]) == [["one", 3], ["two", 3], ["two", 3]]
    assert sorted(seen[2]) == [["two", 3], ["two", 3]]


def test_max_by_and_min_by_per_partition(cluster) -> None:
    topo = TridentTopology()
    spout = FixedBatchSpout(Fields("name", "age"), 3, ["a", 30], ["b", 12], ["c", 44], ["d", 7], ["e", 9])
    s = topo.new_stream("spout-minmax", spout)
    record(s.max_by("age"), "max")
    record(s.min_by("age"), "min")
    run(cluster, topo)
    seen = wait_batches("max", 2)
    assert seen[1] == [["c", 44]] and seen[2] == [["e", 9]]
    seen = wait_batches("min", 2)
    assert seen[1] == [["b", 12]] and seen[2] == [["d", 7]]


def test_drpc_count_agg_and_split_merge(cluster) -> None:
    """Storm's testCountAgg and testSplitMerge through a LocalDRPC: each call is its own batch,
    answered with the JSON of its results (no committer on the way)."""
    from squall.trident import LocalDRPC

    with LocalDRPC() as drpc:
        topo = TridentTopology()
        topo.new_drpc_stream("numwords", drpc) \
            .each(Fields("args"), Split(), Fields("word")) \
            .aggregate(CountAsAggregator(), Fields("count")).parallelism_hint(2) \
            .project(Fields("count"))
        s = topo.new_drpc_stream("splitter", drpc)
        topo.merge(s.each(Fields("args"), Split(), Fields("word")).project(Fields("word")),
                   s.each(Fields("args"), StringLength(), Fields("len")).project(Fields("len")))
        name = run(cluster, topo)
        for _ in range(20):
            assert drpc.execute("numwords", "the") == "[[1]]"
        assert drpc.execute("numwords", "") == "[[0]]"
        assert drpc.execute("numwords", "1 2 3 4 5 6 7 8") == "[[8]]"
        import json
        assert sorted(map(str, json.loads(drpc.execute("splitter", "the man")))) == sorted(
            map(str, [[7], ["the"], ["man"]]))
        cluster.kill_topology(name)


def test_feeding_one_of_two_merged_feeders_runs_a_batch_of_its_own(cluster):
    """Storm starts a batch when any spout is ready: a feed of one of two merged feeders waited
    for the other to be fed, and timed out."""
    from squall.trident.builtin import Count
    from squall.trident.spout import FeederBatchSpout
    topo = TridentTopology()
    a, b = FeederBatchSpout(["x"]), FeederBatchSpout(["x"])
    merged = topo.merge(topo.new_stream("any-a", a), topo.new_stream("any-b", b))
    record(merged.aggregate(Count(), Fields("n")), "any-merged")
    run(cluster, topo)
    a.feed([[1], [2], [3]], timeout=30)
    b.feed([[4]], timeout=30)
    assert [v for _t, (v,) in sorted(Recorded.get("any-merged"))] == [3, 1]


def test_a_fixed_spout_merged_with_a_feeder_never_fed_goes_on(cluster):
    from squall.trident.spout import FeederBatchSpout
    topo = TridentTopology()
    fixed = FixedBatchSpout(Fields("x"), 2, [1], [2], [3], [4])
    merged = topo.merge(topo.new_stream("any-fixed", fixed), topo.new_stream("any-idle", FeederBatchSpout(["x"])))
    record(merged, "any-fixed-idle")
    run(cluster, topo)
    assert wait_until(lambda: len(Recorded.get("any-fixed-idle")) == 4, 30)
    assert dict(by_txid(Recorded.get("any-fixed-idle"))) == {1: [[1], [2]], 2: [[3], [4]]}


def test_a_topology_wide_task_cap_does_not_lift_a_components_own_one_of_one_task(cluster) -> None:
    """A Config with ``topology.tasks: 3`` and ``topology.max.task.parallelism: 4`` replaced the
    Trident master coordinator's, the spout coordinator's and FixedBatchSpout's own cap of one
    task (the topology's Config wins over a component's keys): three coordinators each started
    every batch, three spout tasks each emitted it, and every word reached the bolts 9 times.
    Both caps now hold, as Storm's component cap holds; every record arrives exactly once."""
    topo = TridentTopology()
    spout = sentence_spout(2)
    words = topo.new_stream("capped", spout).each(Fields("sentence"), Split(), Fields("word"))
    record(words, "capped")
    conf = Config()
    conf[Config.TOPOLOGY_TASKS] = 3
    conf.set_max_task_parallelism(4)
    cluster.submit_topology("trident-capped", conf, topo.build())
    tasks = {cid: c["tasks"] for cid, c in cluster.get_topology_info("trident-capped")["components"].items()}
    assert {cid: n for cid, n in tasks.items() if cid.startswith(("$mastercoord", "$spoutcoord", "spout-"))} == {
        "$mastercoord-bg0": 1, "$spoutcoord-spout-capped": 1, "spout-capped": 1}, tasks
    n = batches(spout)
    expected = sum(len(words_of(spout, txid)) for txid in range(1, n + 1))
    Recorded.wait_for("capped", lambda r: len(r) >= expected)
    seen = by_txid(Recorded.get("capped"))
    for txid in range(1, n + 1):
        assert sorted(w for _sentence, w in seen.get(txid, [])) == sorted(words_of(spout, txid)), txid
    assert len(Recorded.get("capped")) == expected
    cluster.kill_topology("trident-capped", 0)
