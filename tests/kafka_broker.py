"""A Kafka-protocol broker for the tests: librdkafka's built-in Kafka-protocol broker (the client
library's test broker, its "mock cluster"), not Apache Kafka.

Why not Apache Kafka: no Kafka (nor Redpanda) broker can be installed on the project's machines:
none is packaged on PyPI, Debian or npm, and Kafka's JVM distribution cannot be downloaded. The
``confluent-kafka`` wheel (the ``kafka`` and ``test`` extras) bundles librdkafka, whose mock
cluster (``rd_kafka_mock_cluster_new``, what a client made with ``{"test.mock.num.brokers": 1}``
starts; made here through ctypes, `_serve`) is a broker that speaks the Kafka protocol on an
ephemeral 127.0.0.1 port: produce, fetch, list offsets, group offset commits with their metadata,
and topics created on first use with 4 partitions (or with N, `KafkaBroker.create_topic`). Real
``confluent_kafka`` Producers and Consumers in other processes (squall's workers, Spark's Python
workers) reach it over TCP through ``bootstrap.servers``. It does not do what a cluster of
brokers does (replication, a broker process restarted from its log on disk, the CreateTopics
request): the tests here need none of it.

`KafkaBroker` runs it as its own process (this file run as a script: it holds the broker, prints
its bootstrap address, and exits when its standard input closes, so it never outlives the test
process), stopped by its PID. The ``kafka_broker`` fixture gives one per test module.

A broker restart keeping its log (`KafkaBroker.down`, then `KafkaBroker.up`): the process takes
the broker down with librdkafka's mock API (``rd_kafka_mock_broker_set_down``, called through
ctypes in the bundled librdkafka): every client connection is closed and new ones are closed as
they come, as a stopped broker's port refuses them, while the topics, their records and the groups'
committed offsets stay, as a restarted broker finds them in its log directory; ``up`` lets
clients back in on the same address. (Killing the process instead would lose them all: the test
broker keeps everything in memory.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

PARTITIONS = 4
"""How many partitions a topic gets when it is first used (librdkafka's mock default)."""

QUIET = {"log_level": 0}
"""Client properties that keep librdkafka's own log lines (connection chatter) off stderr."""


class KafkaBroker:
    """librdkafka's test broker in a process of its own; `start`, then `stop`."""

    def __init__(self, log_dir: Path) -> None:
        self.log = Path(log_dir) / "kafka-broker.log"
        self.proc: subprocess.Popen | None = None
        self.bootstrap = ""

    def start(self, timeout: float = 30.0) -> KafkaBroker:
        """Start the broker; returns once it printed its address (``host:port``, on loopback)."""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode().strip()  # the script prints its address first
        if not line.startswith("127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"librdkafka's test broker did not start: {line!r} (see {self.log})")
        self.bootstrap = line
        return self

    def _command(self, line: str) -> None:
        """Sends the broker process one command line and waits for its ``ok``."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().decode().strip()
        if answer != "ok":
            raise RuntimeError(f"the test broker refused {line!r}: {answer!r} (see {self.log})")

    def down(self) -> None:
        """Takes the broker down, its log kept (see the module docstring): clients' connections
        close and new ones are refused until `up`."""
        self._command("down")

    def up(self) -> None:
        """Lets clients back in after `down`, on the same address, with the same log."""
        self._command("up")

    def create_topic(self, topic: str, partitions: int) -> None:
        """Creates ``topic`` with ``partitions`` partitions (a topic first used has `PARTITIONS`)."""
        self._command(f"topic {topic} {partitions}")

    def stop(self, timeout: float = 10.0) -> None:
        """Close its standard input (it exits), then SIGKILL its PID if it has not."""
        if self.proc is None or self.proc.poll() is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout)

    # --- what the tests do with it --------------------------------------------------------------

    def client_props(self, **extra: object) -> dict:
        """Properties of a client of this broker."""
        return {"bootstrap.servers": self.bootstrap, **QUIET, **extra}

    def produce(self, topic: str, values: Iterable[bytes | str],
                partitions: int = PARTITIONS) -> list[tuple[int, int]]:
        """Writes ``values`` to ``topic``, the i-th to partition ``i % partitions``, and waits until
        every one is acknowledged; returns each one's (partition, offset), in order."""
        import confluent_kafka as ck

        producer = ck.Producer(self.client_props(**{"linger.ms": 5}))
        placed: list[tuple[int, int] | None] = []
        errors: list[str] = []

        def delivered(i: int):
            def report(err, msg) -> None:
                if err is not None:
                    errors.append(f"value {i}: {err}")
                else:
                    placed[i] = (msg.partition(), msg.offset())
            return report

        for i, value in enumerate(values):
            placed.append(None)
            producer.produce(topic, value=value, partition=i % partitions, on_delivery=delivered(i))
            producer.poll(0)
        left = producer.flush(30)
        assert left == 0 and not errors, f"{left} values of {topic!r} not acknowledged; {errors[:5]}"
        assert all(p is not None for p in placed)
        return [p for p in placed if p is not None]

    def end_offsets(self, topic: str) -> dict[int, int]:
        """partition -> the offset after its last record (the log end)."""
        import confluent_kafka as ck

        consumer = ck.Consumer(self.client_props(**{"group.id": "squall-tests-watermarks"}))
        try:
            parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            return {p: consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in parts}
        finally:
            consumer.close()

    def committed(self, group: str, topic: str, partitions: Sequence[int] = range(PARTITIONS)) -> dict[int, int]:
        """partition -> the offset ``group`` committed (-1001: none)."""
        import confluent_kafka as ck

        consumer = ck.Consumer(self.client_props(**{"group.id": group}))
        try:
            got = consumer.committed([ck.TopicPartition(topic, p) for p in partitions], timeout=10)
            return {tp.partition: tp.offset for tp in got}
        finally:
            consumer.close()

    def committed_metadata(self, group: str, topic: str,
                           partitions: Sequence[int] = range(PARTITIONS)) -> dict[int, str | None]:
        """partition -> the metadata of ``group``'s commit (None: nothing committed)."""
        import confluent_kafka as ck

        consumer = ck.Consumer(self.client_props(**{"group.id": group}))
        try:
            got = consumer.committed([ck.TopicPartition(topic, p) for p in partitions], timeout=10)
            return {tp.partition: (tp.metadata if tp.offset >= 0 else None) for tp in got}
        finally:
            consumer.close()


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory):
    """librdkafka's test broker (not Apache Kafka; see the module docstring), one per test module."""
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka")).start()
    try:
        yield broker
    finally:
        broker.stop()


def utf8_value(record) -> list:
    """A `KafkaSpoutConfig` translator: the record's value as text (one field)."""
    return [record.value.decode()]


BROKER_ID = 1
"""The id of the test cluster's one broker (librdkafka numbers them from 1)."""


def _librdkafka():
    """The librdkafka that ``confluent_kafka`` loads (its wheel bundles one), through ctypes, with
    the signatures of the mock-cluster calls `_serve` makes."""
    import ctypes
    import ctypes.util
    import glob

    import confluent_kafka

    bundled = glob.glob(os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir,
                                     "confluent_kafka.libs", "librdkafka*.so*"))
    path = bundled[0] if bundled else ctypes.util.find_library("rdkafka")
    if path is None:
        raise RuntimeError("librdkafka not found (neither in confluent_kafka's wheel nor on the system)")
    lib = ctypes.CDLL(path)
    ptr, i32 = ctypes.c_void_p, ctypes.c_int32
    lib.rd_kafka_conf_new.restype = ptr
    lib.rd_kafka_new.restype = ptr
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ptr, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ptr
    lib.rd_kafka_mock_cluster_new.argtypes = [ptr, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ptr]
    lib.rd_kafka_mock_broker_set_down.argtypes = [ptr, i32]
    lib.rd_kafka_mock_broker_set_up.argtypes = [ptr, i32]
    lib.rd_kafka_mock_topic_create.argtypes = [ptr, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    return lib


def _serve() -> None:
    """Hold the broker: print its address, then obey the command lines of standard input (``down``,
    ``up``, ``topic <name> <partitions>``; each answered ``ok`` or with why not) until it closes."""
    import ctypes

    lib = _librdkafka()
    errstr = ctypes.create_string_buffer(512)
    # a producer handle owns the cluster (as "test.mock.num.brokers" makes one): it lives as long as it does
    owner = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), errstr, len(errstr))
    if not owner:
        raise RuntimeError(f"rd_kafka_new: {errstr.value.decode()}")
    cluster = lib.rd_kafka_mock_cluster_new(owner, 1)
    if not cluster:
        raise RuntimeError("rd_kafka_mock_cluster_new failed")
    print(lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    for line in sys.stdin:
        match line.split():
            case ["down"]:
                err = lib.rd_kafka_mock_broker_set_down(cluster, BROKER_ID)
            case ["up"]:
                err = lib.rd_kafka_mock_broker_set_up(cluster, BROKER_ID)
            case ["topic", name, partitions]:
                err = lib.rd_kafka_mock_topic_create(cluster, name.encode(), int(partitions), 1)
            case _:
                print(f"unknown command {line.strip()!r}", flush=True)
                continue
        print("ok" if err == 0 else f"librdkafka error code {err}", flush=True)


if __name__ == "__main__":
    _serve()
