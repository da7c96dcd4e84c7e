"""The Trident planner: which operations are fused into which bolt, how the bolts are grouped,
and the StormTopology it declares (Storm's TridentTopology.build)."""

from __future__ import annotations

from squall import Fields
from squall._fields import GlobalStreamId
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.planner import plan

from .trident_ops import (CountAsAggregator, CountCombiner, Get, ListSpout, Split, StringLength, SumCombiner,
                          TrueFilter)


def word_count(topo: TridentTopology):
    return topo.new_stream("tester", ListSpout("sentence")) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .persistent_aggregate(MemoryMapState.factory(), CountCombiner(), Fields("count")) \
        .parallelism_hint(6)


def shape(p) -> list[tuple]:
    return [(b.component, b.parallelism, b.committer, b.operations(),
             [(s.component, s.partitioning.kind) for s in b.subscriptions]) for b in p.bolts]


def test_word_count_partial_counts_before_the_repartition_and_combines_and_persists_after() -> None:
    topo = TridentTopology()
    word_count(topo)
    p = plan(topo)
    [spout] = p.spouts
    assert (spout.component, spout.coordinator, spout.parallelism) == ("spout-tester", "$spoutcoord-spout-tester", 1)
    assert shape(p) == [
        ("b-0", 1, False, ["EachProcessor", "EachProcessor", "AggregateProcessor"], [("spout-tester", "identity")]),
        ("b-1", 6, True, ["AggregateProcessor", "PartitionPersistProcessor"], [("b-0", "fields")]),
    ]
    assert p.bolts[1].subscriptions[0].partitioning.fields == Fields("word")


def test_state_query_runs_in_the_bolt_holding_the_state() -> None:
    topo = TridentTopology()
    counts = word_count(topo)
    topo.new_stream("queries", ListSpout("args")) \
        .each(Fields("args"), Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .state_query(counts, Fields("word"), Get(), Fields("count")) \
        .aggregate(Fields("count"), SumCombiner(), Fields("sum"))
    p = plan(topo)
    assert shape(p) == [
        ("b-0", 1, False, ["EachProcessor", "EachProcessor", "AggregateProcessor"], [("spout-tester", "identity")]),
        # the persisted counts and the query of them: one bolt, 6 tasks, each key on its task
        ("b-1", 6, True, ["AggregateProcessor", "PartitionPersistProcessor", "StateQueryProcessor",
                          "EachProcessor", "AggregateProcessor"], [("b-0", "fields"), ("b-2", "fields")]),
        ("b-2", 1, False, ["EachProcessor"], [("spout-queries", "identity")]),
        # the global sum: every partial of a batch on one task, chosen by txid
        ("b-3", 1, False, ["AggregateProcessor"], [("b-1", "batch_global")]),
    ]


def test_repartitions_split_bolts_and_parallelism_is_the_largest_hint() -> None:
    topo = TridentTopology()
    topo.new_stream("s", ListSpout("args")) \
        .each(Fields("args"), Split(), Fields("word")).parallelism_hint(2) \
        .local_or_shuffle() \
        .shuffle() \
        .each(Fields("word"), TrueFilter()).parallelism_hint(3) \
        .broadcast() \
        .aggregate(CountAsAggregator(), Fields("count")).parallelism_hint(4)
    p = plan(topo)
    # the spout runs in 2 tasks too: its identity partition ties it to the first bolt
    assert p.spouts[0].parallelism == 2
    assert shape(p) == [
        ("b-0", 2, False, ["EachProcessor"], [("spout-s", "identity")]),
        # two repartitions in a row: a pass-through operation between them, in a bolt of its own
        ("b-1", 1, False, ["FilterProcessor"], [("b-0", "local_or_shuffle")]),
        ("b-2", 3, False, ["FilterProcessor"], [("b-1", "shuffle")]),
        # broadcast then the aggregate's batch_global: a pass-through again
        ("b-3", 1, False, ["FilterProcessor"], [("b-2", "all")]),
        ("b-4", 4, False, ["AggregateProcessor"], [("b-3", "batch_global")]),
    ]


def test_a_stream_used_twice_is_fused_and_merged_in_one_bolt() -> None:
    topo = TridentTopology()
    s = topo.new_stream("s", ListSpout("args"))
    a = s.each(Fields("args"), Split(), Fields("word")).project(Fields("word"))
    b = s.each(Fields("args"), StringLength(), Fields("len")).project(Fields("len"))
    topo.merge(a, b)
    p = plan(topo)
    [spout] = p.spouts
    assert len(spout.outputs) == 2  # one stream per edge: each branch has its own identity stream
    assert shape(p) == [("b-0", 1, False, ["EachProcessor", "ProjectProcessor", "EachProcessor",
                                           "ProjectProcessor", "MultiReduceProcessor"],
                         [("spout-s", "identity"), ("spout-s", "identity")])]


def test_grouped_aggregates_with_a_reducer_move_every_tuple_and_names_name_bolts() -> None:
    topo = TridentTopology()
    s = topo.new_stream("s", ListSpout("args")).name("split").each(Fields("args"), Split(), Fields("word"))
    s.name("counting").group_by(Fields("word")).aggregate(CountAsAggregator(), Fields("count"))
    p = plan(topo)
    assert shape(p) == [
        ("b-0-split", 1, False, ["EachProcessor"], [("spout-s", "identity")]),
        ("b-1-counting", 1, False, ["AggregateProcessor"], [("b-0-split", "fields")]),
    ]


def test_ungrouped_persistent_aggregate_goes_global_and_join_partitions_both_sides() -> None:
    topo = TridentTopology()
    left = topo.new_stream("l", ListSpout("k", "a"))
    right = topo.new_stream("r", ListSpout("k", "b"))
    joined = topo.join(left, Fields("k"), right, Fields("k"), Fields("k", "a", "b"))
    joined.persistent_aggregate(MemoryMapState.factory(), CountCombiner(), Fields("total"))
    p = plan(topo)
    assert shape(p) == [
        # each spout's stream goes out partitioned by the join key, straight from its bolt
        ("b-0", 1, False, ["MultiReduceProcessor", "EachProcessor", "AggregateProcessor"],
         [("spout-l", "fields"), ("spout-r", "fields")]),
        ("b-1", 1, True, ["AggregateProcessor", "PartitionPersistProcessor"], [("b-0", "global")]),
    ]


def test_the_storm_topology_has_the_coordinators_and_the_system_streams() -> None:
    topo = TridentTopology()
    word_count(topo)
    t = topo.build()
    assert sorted(t.spouts) == ["$mastercoord-bg0"]
    assert sorted(t.bolts) == ["$spoutcoord-spout-tester", "b-0", "b-1", "spout-tester"]
    inputs = {c: {(g.component_id, g.stream_id): v.kind for g, v in spec.inputs.items()}
              for c, spec in t.bolts.items()}
    assert inputs["$spoutcoord-spout-tester"] == {("$mastercoord-bg0", "$batch"): "global",
                                                  ("$mastercoord-bg0", "$success"): "global"}
    assert inputs["spout-tester"] == {("$spoutcoord-spout-tester", "$batch"): "all",
                                      ("$mastercoord-bg0", "$success"): "all"}
    b0 = {k: v for k, v in inputs["b-0"].items() if not k[1].startswith("$")}
    assert list(b0.values()) == ["custom"] and inputs["b-0"][("spout-tester", "$coord-bg0")] == "direct"
    b1 = inputs["b-1"]
    assert b1[("$mastercoord-bg0", "$commit")] == "all" and b1[("b-0", "$coord-bg0")] == "direct"
    assert [v for k, v in b1.items() if not k[1].startswith("$")] == ["fields"]
    assert t.bolts["b-1"].parallelism == 6
    assert GlobalStreamId("b-0", "$coord-bg0") in t.bolts["b-1"].inputs
    # building twice gives the same shape: build leaves the TridentTopology as it was
    assert sorted(topo.build().bolts) == sorted(t.bolts)


def test_two_states_of_one_batch_group_writing_one_place_are_refused_naming_both() -> None:
    """Two persistent_aggregates of one group_by (a Count and a Sum) into RedisMapStates with the
    default Options write the same Redis keys in the same txids: before, a transactional pair
    stored neither figure with no error (a: [4, 70] for 8 records summing 68, on a real
    redis-server), an opaque pair failed its batches blaming "a stale copy of the task". Now
    build refuses them, naming both and the place; a hash each, a factory each, or states of two
    unconnected streams (their own txids, docs/trident-connectors.md) build."""
    import pytest
    pytest.importorskip("redis")
    from squall.external.trident_redis import Options, RedisMapState
    from squall.trident import Count, Sum

    from .trident_ops import ListSpout

    url = "redis://:secret@127.0.0.1:6390/2"

    def counts_and_sums(first, second) -> TridentTopology:
        topo = TridentTopology()
        grouped = topo.new_stream("s", ListSpout("key", "amount")).group_by(Fields("key"))
        grouped.persistent_aggregate(first, Count(), Fields("count"))
        grouped.name("sums").persistent_aggregate(second, Fields("amount"), Sum(), Fields("sum"))
        return topo

    with pytest.raises(ValueError) as e:
        counts_and_sums(RedisMapState.transactional(url), RedisMapState.opaque(url)).build()
    assert str(e.value).startswith("group_by(key).persistent_aggregate(Count) and group_by(key).persistent_aggregate(Sum) "
                                   "named 'sums' both write redis 127.0.0.1:6390 db 2, its keys (data_type 'string'), "
                                   "in the same batches"), e.value
    assert "secret" not in str(e.value) and "hash_key=" in str(e.value)
    same_hash = Options(data_type="hash", hash_key="counts")
    with pytest.raises(ValueError, match="both write redis 127.0.0.1:6390 db 2, hash 'counts'"):
        counts_and_sums(RedisMapState.opaque(url, same_hash), RedisMapState.opaque(url, same_hash)).build()
    memory = MemoryMapState.factory()
    with pytest.raises(ValueError, match=f"both write MemoryMapState.factory\\(id='{memory.id}'\\)"):
        counts_and_sums(memory, memory).build()

    counts_and_sums(RedisMapState.opaque(url, same_hash),
                    RedisMapState.opaque(url, Options(data_type="hash", hash_key="sums"))).build()
    counts_and_sums(RedisMapState.opaque(url), RedisMapState.opaque("redis://127.0.0.1:6390/3")).build()
    counts_and_sums(MemoryMapState.factory(), MemoryMapState.factory()).build()
    topo = TridentTopology()  # two unconnected streams: two batch groups, each its own txids
    for txid in ("words", "users"):
        topo.new_stream(txid, ListSpout("key")).group_by(Fields("key")) \
            .persistent_aggregate(RedisMapState.transactional(url), Count(), Fields("count"))
    topo.build()


def test_the_refusal_of_two_states_writing_one_place_names_the_fields_each_groups_by() -> None:
    """Two Counts of one stream, by word and by user, into one MemoryMapState factory: the
    refusal named them "persistent_aggregate(Count) and persistent_aggregate(Count)", which
    does not say which two of a topology's Counts to give a place each."""
    import pytest

    from squall.trident import Count

    from .trident_ops import ListSpout

    memory = MemoryMapState.factory()
    topo = TridentTopology()
    posts = topo.new_stream("posts", ListSpout("word", "user"))
    posts.group_by(Fields("word")).persistent_aggregate(memory, Count(), Fields("count"))
    posts.group_by(Fields("user")).persistent_aggregate(memory, Count(), Fields("count"))
    with pytest.raises(ValueError) as e:
        topo.build()
    assert str(e.value).startswith("group_by(word).persistent_aggregate(Count) and "
                                   "group_by(user).persistent_aggregate(Count) both write "
                                   f"MemoryMapState.factory(id='{memory.id}'), in the same batches: where their "
                                   "keys meet"), e.value
