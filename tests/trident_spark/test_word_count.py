"""Trident's word count as one Structured Streaming query on local[2] (issue 36 items 1-4, 5c):
stored counts equal the input exactly, also after the query is stopped and started again from
its checkpoint, and each micro-batch is Trident batch batchId + 1."""

from __future__ import annotations

import json

import pytest

from squall import Fields
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.spark import start
from squall.trident.spout import FixedBatchSpout

from .conftest import delta_counts, expected_counts, sentences, spark_session, write_lines
from .ops import Split, delta_counts_factory, plain_spout, word_count

pytestmark = pytest.mark.timeout(300)  # a cold SparkSession and a few micro-batches on a loaded machine


@pytest.fixture(scope="module")
def spark():
    yield from spark_session("local[2]")


def test_a_fixed_batch_spout_word_count_counts_every_word_into_the_drivers_memory_map(spark, tmp_path):
    lines = sentences(9, seed=1)
    spout = FixedBatchSpout(Fields("sentence"), 5, *[[line] for line in lines])
    factory = MemoryMapState.factory()
    topology = TridentTopology()
    topology.new_stream("fixed", spout).each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).persistent_aggregate(factory, Count(), Fields("count"))
    query = start(topology, spark, str(tmp_path / "checkpoint"), query_name="fixed_word_count")
    try:
        query.processAllAvailable()
        assert query.name == "fixed_word_count"
    finally:
        query.stop()
    # a MemoryMapState under Spark is the driver's: read it here, in the driver process
    state = factory.make_state({}, None, 0, 1)
    assert {word: count for word, count in state.get_tuples()} == expected_counts(lines)
    # 9 sentences, 5 a batch: batches 0 and 1 (txid 1 and 2), the third never planned (it is empty)
    offsets = sorted(int(p.name) for p in (tmp_path / "checkpoint" / "offsets").iterdir() if p.name.isdigit())
    assert offsets == [0, 1]
    last = (tmp_path / "checkpoint" / "offsets" / "1").read_text().splitlines()[-1]
    assert json.loads(last)["txid"] == 2  # the spout's txid is batchId + 1


def test_a_file_word_count_into_delta_is_exact_after_the_query_is_stopped_and_started_again(spark, tmp_path):
    data, table, checkpoint = tmp_path / "in", tmp_path / "counts", str(tmp_path / "checkpoint")
    data.mkdir()
    first = sentences(20, seed=2)
    write_lines(data / "a.txt", first[:12])
    write_lines(data / "b.txt", first[12:])
    topology = word_count(str(data), delta_counts_factory(str(table)), max_batch_records=12)
    query = start(topology, spark, checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert delta_counts(table) == expected_counts(first)
    committed = sorted(int(p.name) for p in (tmp_path / "checkpoint" / "commits").iterdir() if p.name.isdigit())

    second = sentences(15, seed=3)
    write_lines(data / "a.txt", second[:5])   # a file grows
    write_lines(data / "c.txt", second[5:])   # a file comes
    query = start(word_count(str(data), delta_counts_factory(str(table)), max_batch_records=12), spark, checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert delta_counts(table) == expected_counts(first + second)
    resumed = sorted(int(p.name) for p in (tmp_path / "checkpoint" / "commits").iterdir() if p.name.isdigit())
    assert resumed[:len(committed)] == committed and resumed[len(committed)] == committed[-1] + 1  # batch ids go on


def test_what_cannot_run_is_refused_at_start_naming_it(spark, tmp_path):
    topology = TridentTopology()
    topology.new_stream("plain", plain_spout()) \
        .each(Fields("sentence"), Split(), Fields("w"))
    with pytest.raises(ValueError, match=r"new_stream\('plain', SentenceSpout\): a plain Spout is at least once"):
        start(topology, spark, str(tmp_path / "checkpoint"))
    assert not spark.streams.active
