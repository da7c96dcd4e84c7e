"""`KafkaTridentSpoutTransactional` as a Spark source (issue 36 item 2), through its real code path:
the real ``confluent_kafka`` Consumer, on the driver (planning each batch's offsets) and in Spark's
Python workers (reading them again), against a Kafka-protocol broker in another process
(librdkafka's built-in test broker, not Apache Kafka: tests/kafka_broker.py says why). A word count
compiled to one Structured Streaming query on the package's local[2,4] session stores counts equal
to the input exactly, every word compared, after the Python worker running the first batch is
SIGKILLed while it holds a batch (Spark retries the task, which reads the same offsets again) and after the query is
stopped and started again from its checkpoint with more records produced meanwhile."""

from __future__ import annotations

import os
import signal

import pytest

from squall import Fields
from squall.external.kafka import KafkaSpoutConfig
from squall.external.trident_kafka import KafkaTridentSpoutTransactional
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.builtin import Count

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")

from squall.trident.spark import start  # after the skips: it needs pyspark
from squall.trident.spark.restart import run_restarting

from ..conftest import wait_until
from ..kafka_broker import QUIET, kafka_broker, utf8_value  # noqa: F401 (the module-scoped broker fixture)
from .conftest import expected_counts, is_spark_python_worker, sentences
from .ops import Split

pytestmark = pytest.mark.timeout(300)  # the package's first test pays the cold SparkSession on a loaded machine



def kafka_word_count(bootstrap: str, topic: str, factory) -> TridentTopology:
    """The sentences of ``topic`` split into words (ops.Split: a ``hold:<dir>`` line holds its
    worker) and counted into ``factory``'s map."""
    spout = KafkaTridentSpoutTransactional(KafkaSpoutConfig(
        bootstrap, [topic], "spark-wc", poll_timeout_ms=100, translator=utf8_value, output_fields=["sentence"],
        props={**QUIET, "fetch.wait.max.ms": 20}))
    topology = TridentTopology()
    topology.new_stream("kafka", spout).each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).persistent_aggregate(factory, Count(), Fields("count"))
    return topology


def raise_failure(query) -> None:
    """Raise ``query``'s failure, if it failed (`run_restarting` starts it again when that was a
    missed connect-back of Spark's Python source process on a starved machine)."""
    failure = query.exception()
    if failure is not None:
        raise failure


def test_a_kafka_word_count_on_spark_is_exact_after_a_python_worker_kill_and_a_stop_and_start(
        spark, kafka_broker, tmp_path):  # noqa: F811 (the fixture imported above)
    gate = tmp_path / "gate"
    gate.mkdir()
    checkpoint = str(tmp_path / "checkpoint")
    factory = MemoryMapState.factory()  # the driver's: read here, in the driver process

    def counts() -> dict:
        return dict(factory.make_state({}, None, 0, 1).get_tuples())

    def counted_all(query, lines: list[str]) -> dict:
        """The counts once they hold as many words as ``lines`` (more, if some were counted twice)."""
        words = sum(expected_counts(lines).values())
        assert wait_until(lambda: sum(counts().values()) >= words or query.exception() is not None, 120, 0.1), \
            counts()
        raise_failure(query)
        return counts()

    def kill_the_python_worker_at_the_gate(query) -> None:
        assert wait_until(lambda: (gate / "pid").exists() or query.exception() is not None, 240, 0.05), \
            "the first batch's Split never reached the gate"
        raise_failure(query)
        pid = int((gate / "pid").read_text())
        assert is_spark_python_worker(pid)
        os.kill(pid, signal.SIGKILL)
        (gate / "go").write_text("go")
        assert counted_all(query, first) == expected_counts(first), "a killed Python worker's batch counted other than once"

    def word_count():
        return start(kafka_word_count(kafka_broker.bootstrap, "lines", factory), spark, checkpoint)

    first = sentences(40, seed=11)
    # the gate line: the Split of the batch holding it waits there for the kill
    kafka_broker.produce("lines", [f"hold:{gate}", *first])
    run_restarting(word_count, kill_the_python_worker_at_the_gate, name="kafka word count")

    second = sentences(30, seed=12)
    kafka_broker.produce("lines", second)  # while no query runs
    assert run_restarting(word_count, lambda query: counted_all(query, first + second), name="kafka word count") \
        == expected_counts(first + second), "counts not exact after a stop and a start"
    everything = expected_counts(first + second)
    assert counts() == everything  # nothing more came after the query stopped
    ends = kafka_broker.end_offsets("lines")
    print(f"{sum(ends.values())} records over {len(ends)} partitions, {sum(everything.values())} words counted "
          "exactly after a Python worker kill and a stop and start")
