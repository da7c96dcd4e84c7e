"""Keys and partitions on Spark's engine as on squall's: group_by/partition_by/join keys equal in
Python meet in one partition (1 == 1.0 == True; two equal strings however pickle writes them),
a repartition straight after a spout spreads over its hint, a partition_aggregate of hint 1 runs
in one partition, and a driver state gets its tuples' values as they are (a -0.0 stays -0.0).
Each test runs the topology on LocalCluster and on the package's SparkSession and compares."""

from __future__ import annotations

import math

import pytest

from squall import Fields, LocalCluster
from squall.external.trident_files import FileTridentSpout
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.spark import compile_topology
from squall.trident.spout import FixedBatchSpout

from ..conftest import wait_until
from . import ops
from .ops import KeepAll, Pair, PartIndex, RecordFactory, RecordUpdater, Split

pytestmark = pytest.mark.timeout(300)  # the first test may pay the package's cold SparkSession


def _records(name: str, txid: int | None = None) -> list:
    return [v for t, v in ops.RECORDS.get(name, []) if txid is None or t == txid]


def _on_local_cluster(topology: TridentTopology, name: str, done) -> list:
    """What ``name``'s recorder got on LocalCluster once ``done(records)`` holds."""
    cluster = LocalCluster()
    try:
        cluster.submit_topology(name, {}, topology.build())
        assert wait_until(lambda: done(_records(name)), 60), _records(name)
    finally:
        cluster.shutdown()
    return _records(name)


def _on_spark(spark, tmp_path, topology: TridentTopology, name: str, **options) -> list:
    """What ``name``'s recorder got from a query of ``topology`` run until its spouts are done."""
    from squall.trident.spark import start

    query = start(topology, spark, str(tmp_path / name), **options)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return _records(name)


MIXED = [[1], [1.0], [True], [2], [2.0], [3], [3.0], [4], [4.0], [5], [5.0]]


def _mixed_counts(name: str) -> TridentTopology:
    topology = TridentTopology()
    topology.new_stream("mixed", FixedBatchSpout(Fields("k"), 20, *MIXED)) \
        .shuffle().each(Fields("k"), KeepAll()).parallelism_hint(2) \
        .group_by(Fields("k")).aggregate(Fields("k"), Count(), Fields("c")).parallelism_hint(2) \
        .global_().partition_persist(RecordFactory(name), Fields("k", "c"), RecordUpdater())
    return topology


def test_group_by_keys_equal_in_python_are_one_group_as_on_squalls_engine(spark, tmp_path):
    # 1 == 1.0 == True: squall's engine routes them by one stable hash; Spark hashed their
    # pickles, which differ, and counted [1]: 1, [1.0]: 1, [True]: 1
    expected = {1: 3, 2: 2, 3: 2, 4: 2, 5: 2}
    local = _on_local_cluster(_mixed_counts("mixed-local"), "mixed-local", lambda r: sum(c for _, c in r) == 11)
    assert len(local) == 5 and dict(local) == expected
    got = _on_spark(spark, tmp_path, _mixed_counts("mixed-spark"), "mixed-spark")
    assert sum(c for _, c in got) == len(MIXED), got  # every tuple counted
    assert len(got) == 5 and dict(got) == expected, f"Python-equal keys split into groups: {got}"


def _join(name: str) -> TridentTopology:
    topology = TridentTopology()
    left = topology.new_stream("left", FixedBatchSpout(Fields("id", "a"), 20, *[[i, f"a{i}"] for i in range(1, 9)]))
    right = topology.new_stream("right", FixedBatchSpout(Fields("id2", "b"), 20,
                                                          *[[float(i), f"b{i}"] for i in range(1, 9)]))
    topology.join(left.each(Fields("id"), KeepAll()), Fields("id"), right.each(Fields("id2"), KeepAll()),
                  Fields("id2"), Fields("id", "a", "b")).parallelism_hint(2) \
        .global_().partition_persist(RecordFactory(name), Fields("id", "a", "b"), RecordUpdater())
    return topology


def test_a_join_of_an_int_key_and_an_equal_float_key_matches_every_pair(spark, tmp_path):
    expected = sorted([i, f"a{i}", f"b{i}"] for i in range(1, 9))
    local = _on_local_cluster(_join("join-local"), "join-local", lambda r: len(r) == 8)
    assert sorted(local) == expected
    got = _on_spark(spark, tmp_path, _join("join-spark"), "join-spark")
    assert sorted(got) == expected, f"Spark's join matched {len(got)} of 8: {sorted(got)}"


NAMES = ["alice", "bobby", "carol", "dave1", "erin2", "frank", "grace", "heidi"]


def _pairs(name: str) -> TridentTopology:
    lines = [[n] for n in NAMES] + [[f"{n} {n}"] for n in NAMES]  # each self-loop twice, made two ways
    topology = TridentTopology()
    topology.new_stream("edges", FixedBatchSpout(Fields("line"), 40, *lines)) \
        .shuffle().each(Fields("line"), Pair(), Fields("src", "dst")).parallelism_hint(2) \
        .group_by(Fields("src", "dst")).aggregate(Fields("src"), Count(), Fields("c")).parallelism_hint(2) \
        .global_().partition_persist(RecordFactory(name), Fields("src", "dst", "c"), RecordUpdater())
    return topology


def test_a_two_field_key_of_equal_strings_is_one_group_however_pickle_writes_it(spark, tmp_path):
    # [s, s] of one str object pickles to other bytes than [s, t] of two equal ones (pickle's memo)
    expected = sorted([n, n, 2] for n in NAMES)
    local = _on_local_cluster(_pairs("pairs-local"), "pairs-local", lambda r: sum(v[2] for v in r) == 16)
    assert sorted(local) == expected
    got = _on_spark(spark, tmp_path, _pairs("pairs-spark"), "pairs-spark")
    assert sorted(got) == expected, f"equal string keys split into groups: {sorted(got)}"


WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def _spread(name: str, project: bool) -> TridentTopology:
    topology = TridentTopology()
    stream = topology.new_stream(name, FixedBatchSpout(Fields("word", "n"), 20, *[[w, i] for i, w in enumerate(WORDS)]))
    if project:  # typed columns, then a project that Spark SQL runs: no Python before the repartition
        stream = stream.project(Fields("word"))
    stream.partition_by(Fields("word")).each(Fields("word"), PartIndex(), Fields("p")).parallelism_hint(4) \
        .global_().partition_persist(RecordFactory(name), Fields("word", "p"), RecordUpdater())
    return topology


def test_partition_by_straight_after_a_spout_spreads_over_its_parallelism(spark, tmp_path):
    # the spout's rows had no key (null), so the repartition put every word in one partition
    plain = _on_spark(spark, tmp_path, _spread("spread-plain", False), "spread-plain")
    typed = _on_spark(spark, tmp_path, _spread("spread-typed", True), "spread-typed",
                      field_types={"spread-typed": {"word": str, "n": int}})
    for got in (plain, typed):
        assert sorted(w for w, _ in got) == sorted(WORDS)  # every word once
        assert len({p for _, p in got}) > 1, f"12 words after partition_by(...).parallelism_hint(4) ran in {got}"
    # the same key goes to the same partition, whichever way its rows reached the repartition
    assert dict(plain) == dict(typed)


def _files(directory, name: str) -> TridentTopology:
    topology = TridentTopology()
    topology.new_stream(name, FileTridentSpout(str(directory), ["line"], max_batch_records=100)) \
        .partition_aggregate(Fields("line"), Count(), Fields("n")).parallelism_hint(1) \
        .global_().partition_persist(RecordFactory(name), Fields("n"), RecordUpdater())
    return topology


def test_a_partition_aggregate_of_hint_one_runs_in_one_partition_as_on_squalls_engine(spark, tmp_path):
    directory = tmp_path / "in"
    directory.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (directory / name).write_text("".join(f"{name} {i}\n" for i in range(5)))
    local = _on_local_cluster(_files(directory, "pa-local"), "pa-local", lambda r: sum(n for [n] in r) == 15)
    assert local == [[15]]
    got = _on_spark(spark, tmp_path, _files(directory, "pa-spark"), "pa-spark")
    assert got == [[15]], f"partition_aggregate ran over several partitions: {got}"


def test_only_operations_that_depend_on_their_partitions_run_in_exactly_their_hint():
    topology = TridentTopology()
    words = topology.new_stream("s", FixedBatchSpout(Fields("line"), 3, ["a b"])).each(Fields("line"), Split(),
                                                                                      Fields("w"))
    words.group_by(Fields("w")).persistent_aggregate(MemoryMapState.factory(), Count(), Fields("c"))  # a partial step
    other = TridentTopology()
    other.new_stream("s", FixedBatchSpout(Fields("line"), 3, ["a b"])).each(Fields("line"), PartIndex(), Fields("p")) \
        .each(Fields("p"), KeepAll())
    plan, partitioned = compile_topology(topology), compile_topology(other)
    [counted] = plan.executor_bolts()
    [indexed] = partitioned.executor_bolts()
    assert not counted.exact and counted.tasks(2) == 2  # the word count keeps Spark's default parallelism
    assert indexed.exact and indexed.tasks(2) == 1  # its operation reads its partition index: its hint
    assert partitioned.source_tasks(partitioned.spouts[0], 2) == 1


def test_a_minus_zero_reaches_a_driver_state_as_minus_zero_and_in_order(spark, tmp_path):
    # the driver's input was grouped whole for the SQL sum of the Count's partials, and SQL's
    # grouping turns a DOUBLE -0.0 into 0.0 (and merged equal rows, in any order)
    temps = [["oslo", -0.0], ["rome", 1.5], ["oslo", -0.0], ["nuuk", 0.0]]
    counts = MemoryMapState.factory()
    topology = TridentTopology()
    topology.new_stream("temps", FixedBatchSpout(Fields("city", "t"), 10, *temps)) \
        .partition_persist(RecordFactory("zero"), Fields("city", "t"), RecordUpdater())
    topology.new_stream("lines", FixedBatchSpout(Fields("line"), 10, ["a b a"])) \
        .each(Fields("line"), Split(), Fields("w")) \
        .group_by(Fields("w")).persistent_aggregate(counts, Count(), Fields("c"))
    got = _on_spark(spark, tmp_path, topology, "zero", field_types={"temps": {"city": str, "t": float}})
    assert got == temps and [math.copysign(1.0, t) for _, t in got] == [-1.0, 1.0, -1.0, 1.0], got
    assert dict(counts.make_state({}, None, 0, 1).get_tuples()) == {"a": 2, "b": 1}


PEOPLE = [[i, f"p{i}"] for i in range(1, 13)]
ORDERS = [[1 + (i * 7) % 15, f"o{i}"] for i in range(30)]  # who: 1-15, some no person has, some many


def _multi(name: str) -> TridentTopology:
    """A grouped multi-reduce, a plain one and a PRESERVE outer join over the same two streams,
    each recorded with its txid on the driver."""
    from squall.trident import JoinOutFieldsMode, JoinType

    from ..trident.multi_ops import PerSide, Tally

    topology = TridentTopology()
    people = topology.new_stream("people", FixedBatchSpout(Fields("id", "name"), 5, *PEOPLE))
    orders = topology.new_stream("orders", FixedBatchSpout(Fields("who", "item"), 11, *ORDERS))
    topology.multi_reduce(people.group_by(Fields("id")), orders.group_by(Fields("who")), PerSide(2),
                          Fields("k", "np", "no")).parallelism_hint(2) \
        .each(Fields("k", "np", "no"), ops.Tag("grouped"), Fields("op")) \
        .global_().partition_persist(RecordFactory(name), Fields("op", "k", "np", "no"), RecordUpdater())
    topology.multi_reduce(people, orders, Tally(), Fields("stream", "n", "size")) \
        .each(Fields("stream", "n", "size"), ops.Tag("tally"), Fields("op")) \
        .global_().partition_persist(RecordFactory(name), Fields("op", "stream", "n", "size"), RecordUpdater())
    topology.join(people, Fields("id"), orders, Fields("who"), Fields("id", "name", "who", "item"),
                  [JoinType.INNER, JoinType.OUTER], JoinOutFieldsMode.PRESERVE).parallelism_hint(2) \
        .each(Fields("id", "name", "who", "item"), ops.Tag("preserve"), Fields("op")) \
        .global_().partition_persist(RecordFactory(name), Fields("op", "id", "name", "who", "item"),
                                     RecordUpdater())
    return topology


def _multi_expected() -> list:
    """What the three operations give per batch, in plain Python: batch t holds people
    [5(t-1), 5t) and orders [11(t-1), 11t)."""
    out = []
    for t in (1, 2, 3):
        people, orders = PEOPLE[5 * (t - 1):5 * t], ORDERS[11 * (t - 1):11 * t]
        if not people and not orders:
            continue
        sides: dict = {}
        for i, rows in enumerate((people, orders)):
            for row in rows:
                sides.setdefault(row[0], [0, 0])[i] += 1
        out += [(t, ["grouped", k, *n]) for k, n in sides.items()]
        out += [(t, ["tally", i, len(rows), sum(len(str(r[1])) for r in rows)])
                for i, rows in enumerate((people, orders))]
        out += [(t, ["preserve", *p, *o]) for p in people for o in ORDERS[11 * (t - 1):11 * t] if o[0] == p[0]]
        out += [(t, ["preserve", *p, None, None]) for p in people if not any(o[0] == p[0] for o in orders)]
    return sorted(out, key=repr)


def test_multi_reduce_and_a_preserve_outer_join_give_on_spark_what_they_give_on_squalls_engine(spark, tmp_path):
    expected = _multi_expected()
    rows = len(expected)

    def txids(name: str) -> list:
        # LocalCluster goes on with empty batches (the plain multi-reduce emits for them too);
        # Spark never plans an empty one
        return sorted(((t, v) for t, v in ops.RECORDS.get(name, []) if t <= 3), key=repr)

    _on_local_cluster(_multi("multi-local"), "multi-local", lambda _: len(txids("multi-local")) >= rows)
    assert txids("multi-local") == expected
    _on_spark(spark, tmp_path, _multi("multi-spark"), "multi-spark")
    assert txids("multi-spark") == expected
