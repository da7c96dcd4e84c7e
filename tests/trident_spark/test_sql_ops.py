"""Built-ins in Spark SQL (issue 36 item 3): what the compiled query hands to SQL instead of
Python, and that the stored result is the one squall's engine makes. The batches run through
`BatchRunner` on a static DataFrame of source rows (what foreachBatch gets), on the package's
SparkSession: no stream to start, a few seconds a test."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import Fields
from squall.trident import BaseFunction, MemoryMapState, TridentTopology
from squall.trident.builtin import Count, Sum
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
    plan = compile_topology(topology)
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
    plan = compile_topology(topology)
    assert [(c.group, c.value) for c in plan.combines.values()] == [((0,), 1)]
    runner = BatchRunner(plan, {})
    runner(_source_rows(spark, plan, LINES), 0)
    runner.close()
    stored = dict(factory.make_state({}, None, 0, 1).get_tuples())
    words = Counter(w for line in LINES for w in line.split())
    assert stored == {w: n * (float(len(w)) if w.startswith("f") else len(w)) for w, n in words.items()}
    # an int sum stays an int, a float one a float: as Sum's combine makes them on squall's engine
    assert type(stored["bb"]) is int and type(stored["ffff"]) is float
    # the float word's partials (one in each half, both [ffff, 4.0]) reached the driver as one
    # tuple counted twice, the int words one row each
    assert runner.last_collected == len(words)


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
    assert compile_topology(topology).combines == {}


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
    plan = compile_topology(topology)
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
