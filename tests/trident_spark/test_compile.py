"""What the compiler does with a Trident topology before any Spark query exists (issue 36
items 2-3): where each bolt runs, and the ValueError naming what cannot run on Spark's engine."""

from __future__ import annotations

import pytest

from squall import Fields
from squall.trident import LocalDRPC, MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.spark import compile_topology
from squall.trident.spout import FixedBatchSpout

from .ops import Split, plain_spout

pytest.importorskip("pyspark.sql.datasource")


class _Len(Split.__mro__[1]):
    def execute(self, tuple, collector):
        collector.emit([len(tuple[0])])


def _sentences():
    return FixedBatchSpout(Fields("sentence"), 2, ["a b"], ["b c"])


def test_the_word_counts_split_runs_in_spark_tasks_and_its_state_on_the_driver():
    topology = TridentTopology()
    topology.new_stream("s", _sentences()).each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")) \
        .parallelism_hint(3)
    plan = compile_topology(topology)
    [split], [persist] = plan.executor_bolts(), plan.driver_bolts()
    assert "EachProcessor" in [type(n.processor).__name__ for n in split.body.nodes]
    assert "PartitionPersistProcessor" in [type(n.processor).__name__ for n in persist.body.nodes]
    assert persist.repartition == "hash" and persist.partitions == 1  # on the driver: one partition
    # the partial counts go out keyed by the word: its place in [sentence, word] -> [word, count]
    [edge] = persist.inputs
    assert plan.keys[edge] == (0,)


def test_a_drpc_stream_is_refused_naming_its_function():
    topology = TridentTopology()
    with LocalDRPC() as drpc:
        topology.new_drpc_stream("words", drpc).each(Fields("args"), Split(), Fields("word"))
        with pytest.raises(ValueError, match=r"new_drpc_stream\('words'\): a DRPC stream cannot run on Spark's engine"):
            compile_topology(topology)


def test_a_plain_spout_is_refused_naming_it_and_why():
    topology = TridentTopology()
    topology.new_stream("plain", plain_spout()).each(Fields("sentence"), Split(), Fields("word"))
    with pytest.raises(ValueError, match=r"new_stream\('plain', SentenceSpout\): a plain Spout is at least once"):
        compile_topology(topology)


def test_an_opaque_spout_is_refused_naming_it_and_why():
    from squall.external.trident_kafka import KafkaTridentSpoutOpaque
    from squall.trident.spark import check_spout

    spout = KafkaTridentSpoutOpaque.__new__(KafkaTridentSpoutOpaque)  # no broker: only its kind is read
    with pytest.raises(ValueError, match=r"new_stream\('kafka', KafkaTridentSpoutOpaque\): an opaque spout"):
        check_spout("kafka", spout)


def test_a_broadcast_into_operations_in_spark_tasks_is_refused_naming_it():
    topology = TridentTopology()
    topology.new_stream("s", _sentences()).broadcast().each(Fields("sentence"), Split(), Fields("word"))
    with pytest.raises(ValueError, match=r"broadcast\(\) before b-\d+ \(EachProcessor\): Spark has no exchange"):
        compile_topology(topology)


def test_a_global_aggregate_runs_in_one_spark_partition_whatever_its_hint():
    from squall.trident.builtin import Sum

    topology = TridentTopology()
    topology.new_stream("s", _sentences()).each(Fields("sentence"), Split(), Fields("word")).parallelism_hint(4) \
        .each(Fields("word"), _Len(), Fields("n")).aggregate(Fields("n"), Sum(), Fields("total")).parallelism_hint(3) \
        .each(Fields("total"), Split(), Fields("w"))
    plan = compile_topology(topology)
    partial, total = plan.bolts
    # the partial sums per partition, then every partial to one Spark partition (hint 3 or not)
    assert [type(n.processor).__name__ for n in total.body.nodes] == ["AggregateProcessor", "EachProcessor"]
    assert (total.repartition, total.partitions, total.on_driver) == ("single", 1, False)
    assert partial.outputs == total.inputs


def test_a_state_query_of_the_state_the_query_writes_runs_with_it_on_the_driver():
    from squall.trident.builtin import MapGet

    topology = TridentTopology()
    words = topology.new_stream("s", _sentences()).each(Fields("sentence"), Split(), Fields("word"))
    counts = words.group_by(Fields("word")).persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    words.group_by(Fields("word")).state_query(counts, Fields("word"), MapGet(), Fields("stored"))
    plan = compile_topology(topology)
    [state_bolt] = [b for b in plan.bolts
                    if "StateQueryProcessor" in [type(n.processor).__name__ for n in b.body.nodes]]
    assert state_bolt.on_driver
    assert "PartitionPersistProcessor" in [type(n.processor).__name__ for n in state_bolt.body.nodes]


def test_a_spouts_one_reader_runs_in_its_source_where_nothing_moves_its_tuples_first():
    from squall.trident.builtin import FilterNull

    def word_count(stream):
        return stream.each(Fields("sentence"), Split(), Fields("word")).group_by(Fields("word")) \
            .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))

    topology = TridentTopology()
    word_count(topology.new_stream("s", _sentences()))
    plan = compile_topology(topology)
    [split] = plan.executor_bolts()
    assert split.in_source == "s" and plan.source_head("s") is split
    assert compile_topology(topology, in_sources=False).executor_bolts()[0].in_source == ""

    # a repartition first (the source's partitions are not the bolt's), a head of Spark SQL
    # (a filter over a typed column), two readers of the spout: each stays a mapInArrow
    moved = TridentTopology()
    word_count(moved.new_stream("s", _sentences()).partition_by(Fields("sentence")))
    typed = TridentTopology()
    word_count(typed.new_stream("s", _sentences()).each(Fields("sentence"), FilterNull()))
    two = TridentTopology()
    stream = two.new_stream("s", _sentences())
    word_count(stream)
    stream.each(Fields("sentence"), _Len(), Fields("n")).each(Fields("n"), Split(), Fields("w"))
    for other, types in [(moved, None), (typed, {"s": {"sentence": str}}), (two, None)]:
        plan = compile_topology(other, types)
        assert plan.source_head("s") is None
        assert all(not b.in_source for b in plan.bolts)


def test_the_bolt_in_source_setting_is_checked_before_anything_starts():
    from squall import Config
    from squall._errors import InvalidTopologyException
    from squall.trident.spark import start

    topology = TridentTopology()
    topology.new_stream("s", _sentences()).each(Fields("sentence"), Split(), Fields("word"))
    with pytest.raises(InvalidTopologyException, match="topology.trident.spark.bolt.in.source.*true or false"):
        start(topology, None, "/nonexistent", conf={Config.TOPOLOGY_TRIDENT_SPARK_BOLT_IN_SOURCE: "yes"})


def test_multi_reduce_runs_in_exactly_its_hint_when_ungrouped_and_join_preserve_compiles():
    """A user MultiReducer over plain streams runs per partition, so its bolt keeps exactly its
    hint (as a partition_aggregate's); a grouped one and a PRESERVE join are per key."""
    from squall.trident import JoinOutFieldsMode

    from ..trident.multi_ops import PerSide, Tally

    topology = TridentTopology()
    a = topology.new_stream("a", FixedBatchSpout(Fields("k", "x"), 2, ["a", 1]))
    b = topology.new_stream("b", FixedBatchSpout(Fields("j", "y"), 2, ["a", 2]))
    topology.multi_reduce(a, b, Tally(), Fields("stream", "n", "size")).parallelism_hint(2)
    plan = compile_topology(topology)
    [bolt] = [b for b in plan.executor_bolts() if "MultiReduceProcessor" in
              [type(n.processor).__name__ for n in b.body.nodes]]
    assert bolt.exact
    topology = TridentTopology()
    a = topology.new_stream("a", FixedBatchSpout(Fields("k", "x"), 2, ["a", 1]))
    b = topology.new_stream("b", FixedBatchSpout(Fields("j", "y"), 2, ["a", 2]))
    topology.multi_reduce(a.group_by(Fields("k")), b.group_by(Fields("j")), PerSide(2), Fields("g", "n1", "n2"))
    topology.join(a, Fields("k"), b, Fields("j"), Fields("k", "x", "j", "y"), JoinOutFieldsMode.PRESERVE)
    plan = compile_topology(topology)
    reducing = [b for b in plan.executor_bolts() if "MultiReduceProcessor" in
                [type(n.processor).__name__ for n in b.body.nodes]]
    assert reducing and not any(b.exact for b in reducing) and all(b.repartition == "hash" for b in reducing)
