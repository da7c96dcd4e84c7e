"""The Trident fluent API: each operation's output fields, and Storm's
testStreamProjectionValidation cases (a field an operation names that its input lacks raises
ValueError naming the operation and the field, at the call)."""

from __future__ import annotations

import pytest

from squall import Fields
from squall.trident import TridentTopology
from squall.trident.operation import Consumer, FlatMapFunction, MapFunction
from squall.trident.state import CombinerAggStateUpdater, MemoryMapState

from .trident_ops import (CountAsAggregator, CountCombiner, Get, ListSpout, Split, StringLength, SumCombiner,
                          TrueFilter)


def sentences() -> tuple[TridentTopology, object]:
    topo = TridentTopology()
    return topo, topo.new_stream("tester", ListSpout("sentence"))


# --- output fields -------------------------------------------------------------------------------

def test_each_appends_the_function_fields_and_a_filter_keeps_the_fields() -> None:
    _, s = sentences()
    words = s.each(Fields("sentence"), Split(), Fields("word"))
    assert words.get_output_fields() == Fields("sentence", "word")
    assert words.each(Fields("word"), TrueFilter()).get_output_fields() == Fields("sentence", "word")
    assert words.each(TrueFilter()).get_output_fields() == Fields("sentence", "word")
    assert s.each(Split(), Fields("w")).get_output_fields() == Fields("sentence", "w")


def test_map_flat_map_peek_and_project_fields() -> None:
    class Upper(MapFunction):
        def execute(self, tuple):  # noqa: A002
            return [tuple[0].upper()]

    class Twice(FlatMapFunction):
        def execute(self, tuple):  # noqa: A002
            return [[tuple[0]], [tuple[0]]]

    class Look(Consumer):
        def accept(self, tuple):  # noqa: A002
            pass

    _, s = sentences()
    assert s.map(Upper()).get_output_fields() == Fields("sentence")
    assert s.map(Upper(), Fields("upper")).get_output_fields() == Fields("upper")
    assert s.flat_map(Twice(), Fields("x")).get_output_fields() == Fields("x")
    assert s.peek(Look()).get_output_fields() == Fields("sentence")
    words = s.each(Fields("sentence"), Split(), Fields("word"))
    assert words.project(Fields("word")).get_output_fields() == Fields("word")


def test_aggregations_replace_the_fields() -> None:
    _, s = sentences()
    words = s.each(Fields("sentence"), Split(), Fields("word"))
    assert words.aggregate(CountCombiner(), Fields("count")).get_output_fields() == Fields("count")
    assert words.aggregate(CountAsAggregator(), Fields("n")).get_output_fields() == Fields("n")
    assert words.partition_aggregate(CountCombiner(), Fields("c")).get_output_fields() == Fields("c")
    grouped = words.group_by(Fields("word")).aggregate(CountCombiner(), Fields("count"))
    assert grouped.get_output_fields() == Fields("word", "count")
    lengths = words.each(Fields("word"), StringLength(), Fields("len"))
    assert lengths.aggregate(Fields("len"), SumCombiner(), Fields("len")).get_output_fields() == Fields("len")
    assert lengths.max_by("len").get_output_fields() == Fields("sentence", "word", "len")
    assert lengths.min_by("len").get_output_fields() == Fields("sentence", "word", "len")


def test_state_operations_fields() -> None:
    topo, s = sentences()
    words = s.each(Fields("sentence"), Split(), Fields("word"))
    counts = words.group_by(Fields("word")).persistent_aggregate(MemoryMapState.factory(), CountCombiner(),
                                                                 Fields("count"))
    assert counts.new_values_stream().get_output_fields() == Fields("word", "count")
    total = words.persistent_aggregate(MemoryMapState.factory(), CountCombiner(), Fields("total"))
    assert total.new_values_stream().get_output_fields() == Fields("total")

    queried = words.group_by(Fields("word")).state_query(counts, Fields("word"), Get(), Fields("c"))
    assert queried.get_output_fields() == Fields("sentence", "word", "c")


def test_merge_names_fields_as_the_first_stream_and_join_puts_join_fields_first() -> None:
    topo, s = sentences()
    a = s.each(Fields("sentence"), Split(), Fields("word")).project(Fields("word"))
    b = s.each(Fields("sentence"), StringLength(), Fields("len")).project(Fields("len"))
    assert topo.merge(a, b).get_output_fields() == Fields("word")
    assert topo.merge(a, b, out_fields=Fields("x")).get_output_fields() == Fields("x")

    left = topo.new_stream("l", ListSpout("k", "a"))
    right = topo.new_stream("r", ListSpout("b", "k2", "c"))
    joined = topo.join(left, Fields("k"), right, Fields("k2"), Fields("key", "a", "b", "c"))
    assert joined.get_output_fields() == Fields("key", "a", "b", "c")


# --- validation (Storm's testStreamProjectionValidation and more) ---------------------------------

def raises(operation: str, field: str):
    return pytest.raises(ValueError, match=rf"^{operation}: .*'{field}'")


def test_each_with_a_missing_input_field() -> None:
    _, s = sentences()
    with raises("each", "sentence1"):
        s.each(Fields("sentence1"), Split(), Fields("word"))


def test_group_by_with_a_missing_field() -> None:
    _, s = sentences()
    with raises("group_by", "word1"):
        s.each(Fields("sentence"), Split(), Fields("word")).group_by(Fields("word1"))


def test_aggregate_with_a_missing_field() -> None:
    _, s = sentences()
    with raises("aggregate", "word1"):
        s.each(Fields("sentence"), Split(), Fields("word")).group_by(Fields("word")).aggregate(
            Fields("word1"), CountCombiner(), Fields("count"))
    with raises("aggregate", "word1"):
        s.each(Fields("sentence"), Split(), Fields("word")).aggregate(Fields("word1"), CountCombiner(),
                                                                       Fields("count"))


def test_project_with_a_missing_field() -> None:
    _, s = sentences()
    with raises("project", "sentence1"):
        s.project(Fields("sentence1"))


def test_partition_by_with_a_missing_field() -> None:
    _, s = sentences()
    with raises("partition_by", "sentence1"):
        s.partition_by(Fields("sentence1"))


def test_partition_aggregate_with_a_missing_field() -> None:
    _, s = sentences()
    with raises("partition_aggregate", "word1"):
        s.each(Fields("sentence"), Split(), Fields("word")).partition_aggregate(
            Fields("word1"), CountCombiner(), Fields("count"))


def test_persistent_aggregate_with_a_missing_field() -> None:
    _, s = sentences()
    with raises("persistent_aggregate", "non-existent"):
        s.each(Fields("sentence"), Split(), Fields("word")).group_by(Fields("word")).persistent_aggregate(
            MemoryMapState.factory(), Fields("non-existent"), CountCombiner(), Fields("count"))


def test_partition_persist_with_a_missing_field() -> None:
    _, s = sentences()
    with raises("partition_persist", "non-existent"):
        s.each(Fields("sentence"), Split(), Fields("word")).partition_persist(
            MemoryMapState.factory(), Fields("non-existent"), CombinerAggStateUpdater(CountCombiner()),
            Fields("count"))


def test_state_query_with_a_missing_field() -> None:
    topo, s = sentences()
    counts = s.each(Fields("sentence"), Split(), Fields("word")).group_by(Fields("word")).persistent_aggregate(
        MemoryMapState.factory(), CountCombiner(), Fields("count"))
    other = topo.new_stream("other", ListSpout("args"))
    with raises("state_query", "word1"):
        other.each(Fields("args"), Split(), Fields("word")).group_by(Fields("word")).state_query(
            counts, Fields("word1"), object(), Fields("count"))


def test_min_by_filter_and_join_with_missing_fields() -> None:
    topo, s = sentences()
    with raises("max_by", "len"):
        s.max_by("len")
    with raises("filter", "nope"):
        s.filter(Fields("nope"), TrueFilter())
    other = topo.new_stream("o", ListSpout("k"))
    with raises("join", "key"):
        topo.join(s, Fields("key"), other, Fields("k"), Fields("k", "sentence"))


def test_other_bad_calls_name_the_operation() -> None:
    topo, s = sentences()
    with pytest.raises(ValueError, match="^each: output field 'sentence' is already"):
        s.each(Fields("sentence"), Split(), Fields("sentence"))
    with pytest.raises(ValueError, match="^join: out_fields"):
        topo.join(s, Fields("sentence"), topo.new_stream("o", ListSpout("k")), Fields("k"), Fields("x", "y"))
    with pytest.raises(ValueError, match="^merge: stream of fields"):
        topo.merge(s, s.each(Fields("sentence"), Split(), Fields("w")))
    with pytest.raises(ValueError, match="^new_stream: txid 'tester' is already used"):
        topo.new_stream("tester", ListSpout("x"))
    with pytest.raises(ValueError, match="^new_stream: transactional state txid 'a//b' must have no empty"):
        topo.new_stream("a//b", ListSpout("x"))
    topo.new_stream("clicks of 2026", ListSpout("x"))  # any text names a state, as in Storm
    with pytest.raises(ValueError, match="^parallelism_hint"):
        s.parallelism_hint(0)



def test_a_class_or_a_function_given_for_an_object_is_refused_when_called_saying_which() -> None:
    """Parentheses forgotten. On main ``persistent_aggregate(MemoryMapState.factory, ...)`` (or
    ``RedisMapState.opaque``, or a string) built, and every task of the state then crashed its
    worker with ``AttributeError: 'function' object has no attribute 'make_state'``; ``state_query``
    took the class ``MapGet`` to fail in a worker too; ``new_stream`` with a spout's class raised
    ``TypeError: ... missing 1 required positional argument: 'self'``; and ``each(Split)``,
    ``aggregate(Count)`` said ``ABCMeta is neither a BaseFunction nor a BaseFilter``."""
    from squall.trident.builtin import Count, MapGet
    from squall.trident.state import StateFactory

    topo, s = sentences()
    words = s.each(Fields("sentence"), Split(), Fields("word")).group_by(Fields("word"))
    factory = r" is not a StateFactory \(an object with make_state\(conf, metrics, partition_index, num_partitions\)\)$"
    with pytest.raises(ValueError, match=r"^persistent_aggregate: the function MemoryMapState.factory \(pass what it "
                                         r"returns: MemoryMapState.factory\(...\)\)" + factory):
        words.persistent_aggregate(MemoryMapState.factory, Count(), Fields("count"))
    with pytest.raises(ValueError, match=r"^persistent_aggregate: the class StateFactory \(pass an instance: "
                                         r"StateFactory\(...\)\)" + factory):
        s.persistent_aggregate(StateFactory, CountCombiner(), Fields("count"))
    with pytest.raises(ValueError, match=r"^partition_persist: str" + factory):
        s.partition_persist("redis://localhost:6379", Fields("sentence"), CombinerAggStateUpdater(CountCombiner()))
    with pytest.raises(ValueError, match=r"^new_static_state: NoneType" + factory):
        topo.new_static_state(None)
    counts = words.persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    with pytest.raises(ValueError, match=r"^state_query: the class MapGet \(pass an instance: MapGet\(...\)\) has "
                                         r"no batch_retrieve$"):
        s.state_query(counts, Fields("sentence"), MapGet, Fields("n"))
    with pytest.raises(ValueError, match=r"^new_stream: the class ListSpout \(pass an instance: ListSpout\(...\)\) is "
                                         r"not a Trident spout or a Spout$"):
        topo.new_stream("again", ListSpout)
    with pytest.raises(ValueError, match=r"^each: the class Split \(pass an instance: Split\(...\)\) is neither"):
        s.each(Fields("sentence"), Split, Fields("w"))
    with pytest.raises(ValueError, match=r"^aggregate: the class Count \(pass an instance: Count\(...\)\) is not a "
                                         r"CombinerAggregator"):
        s.aggregate(Count, Fields("n"))

def test_a_missing_field_names_the_stream_and_the_line_that_asked_for_it() -> None:
    # with two spouts and many operations, "each: field 'x' is not in the stream's fields ['a',
    # 'b']" did not say which stream the field was asked of: the error names the user's
    # operation and the line of its call, the spout and the operation that made the stream
    topo, s = sentences()
    words = s.name("split").each(Fields("sentence"), Split(), Fields("word"))
    line = test_a_missing_field_names_the_stream_and_the_line_that_asked_for_it.__code__.co_firstlineno + 8
    with pytest.raises(ValueError) as raised:
        words.each(Fields("wrod"), StringLength(), Fields("n"))
    assert str(raised.value) == (
        f"each: field 'wrod' is not in the stream's fields ['sentence', 'word'] (each(StringLength) named 'split' called at "
        f"test_fluent.py:{line} on the stream of new_stream('tester', ListSpout) after each(Split) named 'split')")
    other = topo.new_stream("other", ListSpout("k", "v"))
    with pytest.raises(ValueError, match=r"^group_by: field 'word' is not in the stream's fields \['k', 'v'\] "
                                         r"\(group_by called at test_fluent.py:\d+ on the stream of "
                                         r"new_stream\('other', ListSpout\)\)$"):
        other.group_by(Fields("word"))
    with pytest.raises(ValueError, match=r"\(each\(Split\) named 'n' called at test_fluent.py:\d+ on the stream of "
                                         r"new_stream\('other', ListSpout\)\)$"):
        other.name("n").each(Fields("sentence"), Split(), Fields("w"))
    with pytest.raises(ValueError, match=r"^aggregate: output field 'word' is already in the stream's fields "
                                         r"\['word'\] \(aggregate\(CountCombiner\) named 'split' called at test_fluent.py:\d+ on the "
                                         r"stream of new_stream\('tester', ListSpout\) after each\(Split\) named "
                                         r"'split', grouped by \['word'\]\)$"):
        words.group_by(Fields("word")).aggregate(CountCombiner(), Fields("word"))
    with pytest.raises(ValueError, match=r"^join: field 'v' is not in the stream's fields \['sentence', 'word'\] "
                                         r"\(join called at test_fluent.py:\d+ on the stream of "
                                         r"new_stream\('tester', ListSpout\) after each\(Split\) named 'split'\)$"):
        topo.join(other, Fields("k"), words, Fields("v"), Fields("k", "v2", "sentence"))
