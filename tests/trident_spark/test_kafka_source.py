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

from squall.cli._trident import PYTHON_CONNECT_TIMEOUT, START_RETRIES
from squall.trident.spark import start  # after the skips: it needs pyspark

from ..conftest import processes_mentioning, wait_until
from ..kafka_broker import QUIET, kafka_broker, utf8_value  # noqa: F401 (the module-scoped broker fixture)
from .conftest import expected_counts, sentences
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


class Running:
    """The query of ``topology`` from ``checkpoint``, started again from its checkpoint when it
    failed because Spark's Python source process did not connect back within Spark's fixed 10 s
    (a starved machine), as ``squall trident`` does (squall.cli._trident); up to START_RETRIES times."""

    def __init__(self, topology: TridentTopology, spark, checkpoint: str) -> None:
        self.args = (topology, spark, checkpoint)
        self.query = start(*self.args)
        self.restarts = 0

    def failed(self) -> object:
        """The query's failure (None: it runs), after starting it again if it missed the 10 s."""
        failure = self.query.exception()
        if failure is not None and PYTHON_CONNECT_TIMEOUT in str(failure) and self.restarts < START_RETRIES:
            self.restarts += 1
            self.query.stop()
            self.query = start(*self.args)
            return None
        return failure

    def stop(self) -> None:
        """Stops the query."""
        self.query.stop()


def test_a_kafka_word_count_on_spark_is_exact_after_a_python_worker_kill_and_a_stop_and_start(
        spark, kafka_broker, tmp_path):  # noqa: F811 (the fixture imported above)
    gate = tmp_path / "gate"
    gate.mkdir()
    checkpoint = str(tmp_path / "checkpoint")
    factory = MemoryMapState.factory()  # the driver's: read here, in the driver process

    def counts() -> dict:
        return dict(factory.make_state({}, None, 0, 1).get_tuples())

    def counted_all(query: Running, lines: list[str]) -> dict:
        """The counts once they hold as many words as ``lines`` (more, if some were counted twice)."""
        words = sum(expected_counts(lines).values())
        assert wait_until(lambda: sum(counts().values()) >= words or query.failed() is not None, 120, 0.1), \
            (query.failed(), counts())
        assert query.failed() is None
        return counts()

    first = sentences(40, seed=11)
    # the gate line: the Split of the batch holding it waits there for the kill
    kafka_broker.produce("lines", [f"hold:{gate}", *first])
    query = Running(kafka_word_count(kafka_broker.bootstrap, "lines", factory), spark, checkpoint)
    try:
        assert wait_until(lambda: (gate / "pid").exists() or query.failed() is not None, 240, 0.05), \
            f"the first batch's Split never reached the gate: {query.failed()}"
        pid = int((gate / "pid").read_text())
        assert pid in processes_mentioning("pyspark")  # a Spark Python worker, not this process
        os.kill(pid, signal.SIGKILL)
        (gate / "go").write_text("go")
        assert counted_all(query, first) == expected_counts(first), "a killed Python worker's batch counted other than once"
    finally:
        query.stop()

    second = sentences(30, seed=12)
    kafka_broker.produce("lines", second)  # while no query runs
    query = Running(kafka_word_count(kafka_broker.bootstrap, "lines", factory), spark, checkpoint)
    try:
        assert counted_all(query, first + second) == expected_counts(first + second), \
            "counts not exact after a stop and a start"
    finally:
        query.stop()
    everything = expected_counts(first + second)
    assert counts() == everything  # nothing more came after the query stopped
    ends = kafka_broker.end_offsets("lines")
    print(f"{sum(ends.values())} records over {len(ends)} partitions, {sum(everything.values())} words counted "
          "exactly after a Python worker kill and a stop and start")
