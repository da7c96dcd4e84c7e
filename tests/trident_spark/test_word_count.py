"""Trident's word count as one Structured Streaming query on local[2,4] (issue 36 items 1-4, 5b,
5c): stored counts equal the input exactly, after a Spark task's Python worker is SIGKILLed
mid-batch and after the query is stopped and started again from its checkpoint (one query's life
shows both), and each micro-batch is Trident batch batchId + 1."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from squall import Config, Fields
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.spark import start
from squall.trident.spout import FixedBatchSpout

from ..conftest import wait_until
from .conftest import delta_counts, expected_counts, is_spark_python_worker, sentences, write_lines
from .ops import Split, delta_counts_factory, plain_spout, word_count

pytestmark = pytest.mark.timeout(300)  # the first test pays the cold SparkSession on a loaded machine


def _batch_ids(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


@pytest.mark.parametrize("in_source", [True, False], ids=["split-in-source", "split-in-mapInArrow"])
def test_a_fixed_batch_spout_word_count_counts_every_word_into_the_drivers_memory_map(spark, tmp_path, in_source):
    # the Split runs in the source's read (the default) or in a mapInArrow of its own; Spark's
    # input rows count the rows the source gives: the Split's partial counts, or the sentences
    lines = sentences(9, seed=1)
    spout = FixedBatchSpout(Fields("sentence"), 5, *[[line] for line in lines])
    factory = MemoryMapState.factory()
    topology = TridentTopology()
    topology.new_stream("fixed", spout).each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).persistent_aggregate(factory, Count(), Fields("count"))
    query = start(topology, spark, str(tmp_path / "checkpoint"), query_name="fixed_word_count",
                  conf={Config.TOPOLOGY_TRIDENT_SPARK_BOLT_IN_SOURCE: in_source})
    try:
        query.processAllAvailable()
        assert query.name == "fixed_word_count"
        inputs = sum(p["numInputRows"] for p in query.recentProgress)
    finally:
        query.stop()
    partials = sum(len(expected_counts(lines[i:i + 5])) for i in (0, 5))
    assert inputs == (partials if in_source else len(lines))
    # a MemoryMapState under Spark is the driver's: read it here, in the driver process
    state = factory.make_state({}, None, 0, 1)
    assert {word: count for word, count in state.get_tuples()} == expected_counts(lines)
    # 9 sentences, 5 a batch: batches 0 and 1 (txid 1 and 2), the third never planned (it is empty)
    assert _batch_ids(tmp_path / "checkpoint" / "offsets") == [0, 1]
    last = (tmp_path / "checkpoint" / "offsets" / "1").read_text().splitlines()[-1]
    assert json.loads(last)["txid"] == 2  # the spout's txid is batchId + 1


def test_a_file_word_count_into_delta_is_exact_after_a_python_worker_is_killed_and_a_stop_and_start(spark, tmp_path):
    data, table, gate = tmp_path / "in", tmp_path / "counts", tmp_path / "gate"
    checkpoint = str(tmp_path / "checkpoint")
    data.mkdir()
    gate.mkdir()
    first = sentences(20, seed=2)
    # the Split of the first batch waits at the gate line, its worker's pid in gate/pid
    write_lines(data / "a.txt", [*first[:3], f"hold:{gate}", *first[3:12]])
    write_lines(data / "b.txt", first[12:])
    query = start(word_count(str(data), delta_counts_factory(str(table)), max_batch_records=12), spark, checkpoint)
    try:
        assert wait_until(lambda: (gate / "pid").exists() or query.exception() is not None, 240, 0.05), \
            "the first batch's Split never reached the gate"
        pid = int((gate / "pid").read_text())
        assert is_spark_python_worker(pid)
        os.kill(pid, signal.SIGKILL)
        (gate / "go").write_text("go")
        query.processAllAvailable()  # Spark retries the killed task (local[2,4]: up to 4 tries)
        assert query.exception() is None and query.isActive
    finally:
        query.stop()
    after_the_worker_kill = delta_counts(table)
    assert after_the_worker_kill == expected_counts(first), "a killed Python worker's batch counted other than once"
    committed = _batch_ids(tmp_path / "checkpoint" / "commits")

    second = sentences(15, seed=3)
    write_lines(data / "a.txt", second[:5])   # a file grows
    write_lines(data / "c.txt", second[5:])   # a file comes
    query = start(word_count(str(data), delta_counts_factory(str(table)), max_batch_records=12), spark, checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert delta_counts(table) == expected_counts(first + second), "counts not exact after a stop and a start"
    resumed = _batch_ids(tmp_path / "checkpoint" / "commits")
    assert resumed[:len(committed)] == committed and resumed[len(committed)] == committed[-1] + 1  # batch ids go on


def test_what_cannot_run_is_refused_at_start_naming_it(spark, tmp_path):
    topology = TridentTopology()
    topology.new_stream("plain", plain_spout()) \
        .each(Fields("sentence"), Split(), Fields("w"))
    with pytest.raises(ValueError, match=r"new_stream\('plain', SentenceSpout\): a plain Spout is at least once"):
        start(topology, spark, str(tmp_path / "checkpoint"))
    assert not spark.streams.active
