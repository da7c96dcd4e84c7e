"""Built-ins in Spark SQL (issue 36 item 3): what the compiled query hands to SQL instead of
Python, and that the stored result is the one squall's engine makes. The batches run through
`BatchRunner` on a static DataFrame of source rows (what foreachBatch gets where no bolt runs
in its spout's source: ``in_sources=False``), on the package's SparkSession: no stream to
start, a few seconds a test."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from squall import Fields
from squall.testing._registry import SharedLog
from squall.trident import BaseFunction, MemoryMapState, TridentTopology
from squall.trident.builtin import Count, Sum
from squall.trident.operation import Consumer
from squall.trident.spark import BatchRunner, compile_topology
from squall.trident.spark.compiler import SqlCombine
from squall.trident.spark.rows import ROW_SCHEMA, dumps
from squall.trident.spout import FixedBatchSpout

from .ops import Split

pytestmark = pytest.mark.timeout(300)  # the first test may pay the package's cold SparkSession


class Size(BaseFunction):
    """A word's length: an int, a float for a word starting with ``f`` (a Sum that SQL leaves
    to the driver's combine)."""

    def execute(self, tuple, collector):
        word = tuple[0]
        collector.emit([float(len(word)) if word.startswith("f") else len(word)])


LINES = ["a bb a", "bb ccc", "a ffff", "ccc a bb", "ffff a", "bb"]


def _source_rows(spark, plan, lines):
    """The micro-batch's DataFrame of source rows in two partitions, the first and the second
    half of ``lines``: each partition sends the driver its own partial of the words in both."""
    [stream] = plan.spouts[0].outputs
    rows = spark.sparkContext.parallelize([(stream, None, dumps([line]), None) for line in lines], 2)  # halves
    return spark.createDataFrame(rows, ROW_SCHEMA)


def _spout():
    return FixedBatchSpout(Fields("sentence"), 3, *[[line] for line in LINES])


def test_a_grouped_counts_partials_are_summed_in_sql_and_the_driver_gets_one_row_per_word(spark):
    factory = MemoryMapState.factory()
    topology = TridentTopology()
    topology.new_stream("s", _spout()).each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).persistent_aggregate(factory, Count(), Fields("count"))
    plan = compile_topology(topology, in_sources=False)
    [persist] = plan.driver_bolts()
    [edge] = persist.inputs
    assert plan.combines == {edge: SqlCombine(edge, (0,), 1)}  # [word, count]: group at 0, partial at 1
    runner = BatchRunner(plan, {})
    words = Counter(w for line in LINES for w in line.split())
    runner(_source_rows(spark, plan, LINES), 0)
    runner(_source_rows(spark, plan, LINES[:2]), 1)  # txid 2 adds to the stored counts
    runner.close()
    # two partitions (["a bb a"], ["bb ccc"]), both with a partial of bb: SQL summed them, one row per word
    assert runner.last_collected == len({"a", "bb", "ccc"})
    expected = words + Counter(w for line in LINES[:2] for w in line.split())
    assert dict(factory.make_state({}, None, 0, 1).get_tuples()) == dict(expected)


def test_a_grouped_sum_adds_its_int_partials_in_sql_and_its_float_ones_on_the_driver(spark):
    factory = MemoryMapState.factory()
    topology = TridentTopology()
    topology.new_stream("s", _spout()).each(Fields("sentence"), Split(), Fields("word")) \
        .each(Fields("word"), Size(), Fields("n")) \
        .group_by(Fields("word")).persistent_aggregate(factory, Fields("n"), Sum(), Fields("total"))
    plan = compile_topology(topology, in_sources=False)
    assert [(c.group, c.value) for c in plan.combines.values()] == [((0,), 1)]
    runner = BatchRunner(plan, {})
    runner(_source_rows(spark, plan, LINES), 0)
    runner.close()
    stored = dict(factory.make_state({}, None, 0, 1).get_tuples())
    words = Counter(w for line in LINES for w in line.split())
    assert stored == {w: n * (float(len(w)) if w.startswith("f") else len(w)) for w, n in words.items()}
    # an int sum stays an int, a float one a float: as Sum's combine makes them on squall's engine
    assert type(stored["bb"]) is int and type(stored["ffff"]) is float
    # the float word's partials (one in each half, both [ffff, 4.0]) reached the driver as they
    # are, a row each (only the int partials are grouped and summed), the int words one row each
    assert runner.last_collected == len(words) + 1


def test_partials_from_one_partition_go_to_the_driver_as_they_are(spark):
    # global_() puts the Split and its partial count in one task: its partials are one per
    # group already, so the driver collects them without a SQL aggregation, and stores the
    # same counts and sums (an int sum an int, a float one a float)
    counts, sums = MemoryMapState.factory(), MemoryMapState.factory()
    topology = TridentTopology()
    words = topology.new_stream("s", _spout()).global_().each(Fields("sentence"), Split(), Fields("word"))
    words.group_by(Fields("word")).persistent_aggregate(counts, Count(), Fields("count"))
    words.each(Fields("word"), Size(), Fields("n")).group_by(Fields("word")) \
        .persistent_aggregate(sums, Fields("n"), Sum(), Fields("total"))
    plan = compile_topology(topology, in_sources=False)
    [task] = plan.executor_bolts()
    assert task.repartition == "single" and len(plan.combines) == 2
    runner = BatchRunner(plan, {})
    runner(_source_rows(spark, plan, LINES), 0)
    collected = runner.last_collected
    runner(_source_rows(spark, plan, LINES[:2]), 1)
    runner.close()
    expected = Counter(w for line in LINES for w in line.split())
    assert collected == 2 * len(expected)  # a partial per word in each of the two persists
    again = expected + Counter(w for line in LINES[:2] for w in line.split())
    assert dict(counts.make_state({}, None, 0, 1).get_tuples()) == dict(again)
    stored = dict(sums.make_state({}, None, 0, 1).get_tuples())
    assert stored == {w: n * (float(len(w)) if w.startswith("f") else len(w)) for w, n in again.items()}
    assert type(stored["bb"]) is int and type(stored["ffff"]) is float


def test_a_reducer_persist_is_not_summed_in_sql():
    from squall.trident import ReducerAggregator

    class Longest(ReducerAggregator):
        def init(self):
            return ""

        def reduce(self, curr, tuple):
            return max(curr, tuple[0], key=len)

    topology = TridentTopology()
    topology.new_stream("s", _spout()).each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).persistent_aggregate(MemoryMapState.factory(), Fields("word"), Longest(),
                                                       Fields("longest"))
    assert compile_topology(topology, in_sources=False).combines == {}


class TaskIndex(BaseFunction):
    """The index of the Spark task running the bolt (its partition)."""

    def prepare(self, conf, context):
        self.index = context.get_this_task_index()

    def execute(self, tuple, collector):
        collector.emit([self.index])


def test_a_bolt_after_the_spouts_own_partitions_runs_in_spark_default_parallelism_tasks(spark):
    factory = MemoryMapState.factory()
    topology = TridentTopology()
    topology.new_stream("s", _spout()).each(Fields("sentence"), TaskIndex(), Fields("task")) \
        .group_by(Fields("task")).persistent_aggregate(factory, Count(), Fields("count"))
    plan = compile_topology(topology, in_sources=False)
    [stream] = plan.spouts[0].outputs
    # six source partitions (a spout's files, say) into a bolt of hint 1, on local[2,4]: its
    # tuples go through max(1, 2) tasks, not one per source partition
    rows = spark.sparkContext.parallelize([(stream, None, dumps([line]), None) for line in LINES], 6)
    runner = BatchRunner(plan, {})
    runner(spark.createDataFrame(rows, ROW_SCHEMA), 0)
    runner.close()
    stored = dict(factory.make_state({}, None, 0, 1).get_tuples())
    assert spark.sparkContext.defaultParallelism == 2
    assert set(stored) <= {0, 1} and sum(stored.values()) == len(LINES)


# --- project, FilterNull and Equals in Spark SQL over typed columns (issue 36 item 3) -------------

TYPES = {"s": {"a": str, "b": float, "c": float, "d": float, "n": int}}
NAN = float("nan")


def _typed_tuples():
    """200 tuples [a, b, c, d, n] with every case the three operations tell apart: a None in a
    or b (FilterNull drops it), a NaN in b (kept), c and d equal, unequal, 0.0 and -0.0 (equal),
    NaN and NaN (not equal), None and None (equal), None and a number (not equal)."""
    import random

    rnd = random.Random(36)
    floats = [0.0, -0.0, 2.0, NAN, None]
    return [[rnd.choice(["x", "y", "z", None]), rnd.choice([1.5, None, NAN]), rnd.choice(floats),
             rnd.choice(floats), i] for i in range(200)]


class _Log(Consumer):
    """Appends every tuple it sees to a shared log."""

    def __init__(self, log):
        self.log = log

    def accept(self, tuple):
        self.log.append(list(tuple.values))


def _typed_topology(factory, spout, log=None):
    """FilterNull(a, b), Equals(c, d), project(a, n), then Sum(n) per a; each batch's new
    totals into ``log``, if given."""
    from squall.trident.builtin import Equals, FilterNull

    topology = TridentTopology()
    totals = topology.new_stream("s", spout).each(Fields("a", "b"), FilterNull()).each(Fields("c", "d"), Equals()) \
        .project(Fields("a", "n")).group_by(Fields("a")) \
        .persistent_aggregate(factory, Fields("n"), Sum(), Fields("total"))
    if log is not None:
        totals.new_values_stream().peek(_Log(log))
    return topology


def _storm_totals(tuples):
    """What Storm's FilterNull, Equals, project and Sum make of ``tuples``, in plain Python."""
    totals: dict = {}
    for a, b, c, d, n in tuples:
        if a is not None and b is not None and c == d:
            totals[a] = totals.get(a, 0) + n
    return totals


def _source_batches(spark, plan):
    """Each batch of the plan's one spout as the squall_trident source reads it (its reader's own
    Arrow batches: typed columns), as the frame of source rows foreachBatch gets: in two
    partitions of an RDD, not a local relation, which Spark's optimizer would evaluate whole."""
    import pyarrow as pa

    from squall.trident.spark.runner import source_frame
    from squall.trident.spark.source import BatchSpoutReader, SpoutSpec

    [s] = plan.spouts
    spec = SpoutSpec(s.txid, s.spout, {}, s.fields, s.typed, keys=s.keys)
    reader = BatchSpoutReader(spec)
    start = reader.initialOffset()
    while (end := reader.latestOffset(start, None)) != start:
        table = pa.Table.from_batches([rb for p in reader.partitions(start, end) for rb in reader.read(p)])
        rows = [tuple(row.values()) for row in table.to_pylist()]
        yield source_frame(spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), spec.schema()), s, None,
                           plan.key_columns)
        start = end


def test_filter_null_equals_and_project_run_in_spark_sql_and_store_what_local_cluster_stores(spark):
    from squall import LocalCluster

    from ..conftest import wait_until

    tuples = _typed_tuples()
    expected = _storm_totals(tuples)
    assert len(expected) == 3 and sum(1 for t in tuples if t[0] is not None and t[1] is not None and t[2] == t[3]) > 20

    # squall's engine: what Storm's operations make of the tuples (each key's last new value)
    log = SharedLog()
    cluster = LocalCluster()
    try:
        cluster.submit_topology("typed", {}, _typed_topology(MemoryMapState.factory(), FixedBatchSpout(
            Fields("a", "b", "c", "d", "n"), 50, *tuples), log).build())
        assert wait_until(lambda: {a: total for a, total in log.items()} == expected, 60), log.items()
    finally:
        cluster.shutdown()

    # Spark's engine: the three operations are SqlOps, out of the bolt's Python
    factory = MemoryMapState.factory()
    plan = compile_topology(_typed_topology(factory, FixedBatchSpout(Fields("a", "b", "c", "d", "n"), 50, *tuples)),
                            TYPES)
    [bolt] = plan.executor_bolts()
    assert [op.kind for op in bolt.sql] == ["not_null", "equals", "project"]
    assert [type(n.processor).__name__ for n in bolt.body.nodes] == ["EachProcessor", "AggregateProcessor"]
    runner = BatchRunner(plan, {})
    frames = list(_source_batches(spark, plan))
    assert len(frames) == 4  # 200 tuples in batches of 50
    sql_frames = runner.frames(frames[0], 1).streams
    projected = sql_frames[bolt.sql[-1].stream]
    executed = projected._jdf.queryExecution().executedPlan().toString()
    # the filters and the projection are Spark's own operators; no Python runs for them
    assert "isnotnull(trident_s0_f0" in executed and "<=>" in executed and "isnan" in executed
    assert not any(word in executed for word in ("Python", "ArrowEval", "MapInArrow", "MapInPandas"))
    # what the projection emits: a and n, from their typed columns, the others dropped
    assert set(projected.columns) >= {"trident_s0_f0", "trident_s0_f4"}
    assert not {"trident_s0_f1", "trident_s0_f2", "trident_s0_f3"} & set(projected.columns)
    for batch_id, frame in enumerate(frames):
        runner(frame, batch_id)
    runner.close()
    assert dict(factory.make_state({}, None, 0, 1).get_tuples()) == expected


def test_an_equals_of_columns_of_two_types_and_a_filter_of_a_pickled_field_stay_in_python():
    from squall.trident.builtin import Equals, FilterNull

    topology = TridentTopology()
    topology.new_stream("s", FixedBatchSpout(Fields("i", "f", "o"), 2, [1, 1.0, None])) \
        .each(Fields("i", "f"), Equals()).each(Fields("o"), FilterNull()) \
        .group_by(Fields("i")).persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    plan = compile_topology(topology, {"s": {"i": int, "f": float}})  # o: pickled
    [bolt] = plan.executor_bolts()
    # 1 == 1.0 in Python; SQL would compare after a cast, so Equals stays; o is no column
    assert bolt.sql == ()
    assert [type(n.processor).__name__ for n in bolt.body.nodes][:2] == ["FilterProcessor", "FilterProcessor"]


@pytest.mark.parametrize(("value", "shown"), [(True, "True (bool)"), ("7", "'7' (str)"), (1 << 70, f"{1 << 70} (int) in it (out of a BIGINT's range)")])
def test_a_value_not_of_its_declared_type_fails_the_batch_naming_spout_field_and_txid(value, shown):
    from squall.trident.spark.source import BatchSpoutReader, SpoutSpec

    plan = compile_topology(_typed_topology(MemoryMapState.factory(), FixedBatchSpout(
        Fields("a", "b", "c", "d", "n"), 1, ["x", 1.0, 1.0, 1.0, 3], ["x", 1.0, 1.0, 1.0, value])), TYPES)
    [s] = plan.spouts
    reader = BatchSpoutReader(SpoutSpec(s.txid, s.spout, {}, s.fields, s.typed))
    first = reader.latestOffset(reader.initialOffset(), None)
    with pytest.raises(ValueError, match=r"new_stream\('s', FixedBatchSpout\): field 'n' is declared int, and "
                                         "txid 2 emitted " + re.escape(shown)):
        reader.latestOffset(first, None)


def test_field_types_that_name_no_field_or_no_column_type_are_refused():
    topology = _typed_topology(MemoryMapState.factory(), FixedBatchSpout(Fields("a", "b", "c", "d", "n"), 1))
    with pytest.raises(ValueError, match=r"new_stream\('s', FixedBatchSpout\): field_types names 'e', which is not"):
        compile_topology(topology, {"s": {"e": str}})
    with pytest.raises(ValueError, match=r"field 'a' declared <class 'list'>: a typed column holds one of str, int"):
        compile_topology(topology, {"s": {"a": list}})
    with pytest.raises(ValueError, match=r"field_types names \['t'\], which are not spouts"):
        compile_topology(topology, {"t": {"a": str}})


def test_a_partition_by_right_after_a_spout_hashes_the_key_its_source_computes_over_the_bolts_tasks(spark):
    words = [[f"w{i}"] for i in range(30)] * 2  # each word twice
    factory = MemoryMapState.factory()
    topology = TridentTopology()
    topology.new_stream("s", FixedBatchSpout(Fields("word"), 60, *words)).partition_by(Fields("word")) \
        .each(Fields("word"), TaskIndex(), Fields("task")).parallelism_hint(2) \
        .group_by(Fields("word", "task")).persistent_aggregate(factory, Count(), Fields("count"))
    plan = compile_topology(topology, {"s": {"word": str}})
    [hashed] = plan.executor_bolts()
    assert (hashed.repartition, hashed.partitions) == ("hash", 2)
    runner = BatchRunner(plan, {})
    [frame] = _source_batches(spark, plan)
    runner(frame, 0)
    runner.close()
    stored = {(w, t): n for w, t, n in factory.make_state({}, None, 0, 1).get_tuples()}
    # every word in one task, twice; both tasks used (a null key column sent all to one)
    assert sorted(w for w, _ in stored) == sorted(w for [w] in words[:30])
    assert set(stored.values()) == {2} and {t for _, t in stored} == {0, 1}
