"""`KafkaSpout` through its real code path: the real ``confluent_kafka`` Consumer (`ConfluentConsumer`),
against a Kafka-protocol broker in another process (librdkafka's built-in test broker, not Apache
Kafka: tests/kafka_broker.py says why). At least once, every record produced counted: on a
LocalCluster with failed tuples replayed, and on the process host with a worker SIGKILLed while it
holds a record; both end with every record seen and the group's committed offsets at the log end
of every partition (the spout commits only a contiguous acked prefix, so every offset was acked)."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.external.kafka import KafkaSpout, KafkaSpoutConfig, RetryBackoff
from squall.testing import shared_state_dir
from squall.testing._registry import SharedLog

from ..conftest import processes_mentioning, wait_until
from ..kafka_broker import kafka_broker, utf8_value  # noqa: F401 (the module-scoped broker fixture)
from ..process.conftest import Cluster

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")


def spout_config(broker, topic: str, group: str) -> KafkaSpoutConfig:
    """At least once, committing every 100 ms, a failure retried after 50 ms."""
    return KafkaSpoutConfig(broker.bootstrap, [topic], group, offset_commit_period_ms=100,
                            retry=RetryBackoff(initial_delay=0.05), poll_timeout_ms=50,
                            translator=utf8_value, output_fields=["value"], props={"log_level": 0})


def at_log_end(broker, group: str, topic: str) -> bool:
    """Whether ``group`` committed every partition of ``topic`` at its log end."""
    return broker.committed(group, topic) == broker.end_offsets(topic)


class FailFirst(Bolt):
    """Records every value it gets; fails the first delivery of each value in ``fail``, acks the rest."""

    def __init__(self, log: SharedLog, fail: frozenset[str]) -> None:
        self.log = log
        self.fail = fail

    def execute(self, tup):
        value = tup.values[0]
        self.log.append(value)
        if value in self.fail and self.log.items().count(value) == 1:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def test_local_cluster_replays_failed_records_and_commits_every_offset(kafka_broker):  # noqa: F811
    values = [f"v{i}" for i in range(400)]
    kafka_broker.produce("events", values)
    failed = frozenset(values[7::50])  # 8 records, over every partition
    log = SharedLog()
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(spout_config(kafka_broker, "events", "local")), 2)
    builder.set_bolt("rec", FailFirst(log, failed), 2).shuffle_grouping("kafka")
    with LocalCluster() as cluster:
        cluster.submit_topology("k", {"topology.message.timeout.secs": 60}, builder.create_topology())
        assert wait_until(lambda: at_log_end(kafka_broker, "local", "events"), 60, 0.1), \
            (kafka_broker.committed("local", "events"), kafka_broker.end_offsets("events"))
        cluster.kill_topology("k", wait_secs=0)
    seen = Counter(log.items())
    assert set(seen) == set(values)
    # each failure replayed once, and nothing else emitted twice (a restart or timeout would)
    assert {v for v, n in seen.items() if n > 1} == failed and all(seen[v] == 2 for v in failed)
    assert sum(seen.values()) == len(values) + len(failed)


CLAIM, HELD = "claimed", "held"


class HoldOne(Bolt):
    """Records every value it acks in ``log``; the first task to get ``hold`` claims it (a file
    made with O_EXCL under ``directory``), writes its worker's pid to ``held`` and holds the tuple
    (120 s at most) for the test to SIGKILL its worker: the record is then in flight, and the
    tuples queued behind it too. Its replay passes (the claim stays)."""

    def __init__(self, log: SharedLog, hold: str, directory: str) -> None:
        self.log = log
        self.hold = hold
        self.directory = directory

    def execute(self, tup):
        value = tup.values[0]
        if value == self.hold and self._claim():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                time.sleep(0.05)  # until the worker is killed
        self.collector.ack(tup)
        self.log.append(value)

    def _claim(self) -> bool:
        here = Path(self.directory)
        try:
            os.close(os.open(here / CLAIM, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            return False
        (here / f"{HELD}.tmp").write_text(str(os.getpid()))
        os.rename(here / f"{HELD}.tmp", here / HELD)  # whole when seen
        return True



@pytest.mark.timeout(180)
def test_process_host_worker_sigkilled_holding_a_record_every_record_acked_and_committed(kafka_broker, tmp_path):  # noqa: F811
    values = [f"p{i}" for i in range(2000)]
    kafka_broker.produce("orders", values)
    hold = values[601]
    gate = tmp_path / "gate"
    gate.mkdir(mode=0o700)
    with shared_state_dir(tmp_path / "shared"):
        log = SharedLog()
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(spout_config(kafka_broker, "orders", "process")), 2)
    builder.set_bolt("rec", HoldOne(log, hold, str(gate)), 2).shuffle_grouping("kafka")
    cluster = Cluster(tmp_path)
    try:
        with cluster.client() as m:
            conf = Config()
            conf.set_num_workers(2)
            conf.update({"topology.message.timeout.secs": 3, "topology.max.spout.pending": 100})
            m.submit_topology("kafka-kill", conf, builder.create_topology())
            assert wait_until(lambda: (gate / HELD).exists(), 90, 0.05), "no task got the record to hold"
            pid = int((gate / HELD).read_text())
            assert pid in processes_mentioning("squall.worker")  # a worker, not this process
            os.kill(pid, signal.SIGKILL)
            assert wait_until(lambda: at_log_end(kafka_broker, "process", "orders"), 120, 0.2), \
                (kafka_broker.committed("process", "orders"), kafka_broker.end_offsets("orders"))
            m.kill_topology("kafka-kill", wait_secs=0)
    finally:
        cluster.stop()
    seen = Counter(log.items())
    assert set(seen) == set(values), f"{len(set(values) - set(seen))} records never acked"
    print(f"{len(values)} records, {sum(seen.values())} acks ({sum(seen.values()) - len(values)} replays acked "
          "again), every partition committed at its log end")


def test_a_restarted_spout_resumes_at_its_topologys_commit_read_back_with_its_metadata(kafka_broker):  # noqa: F811
    from squall.external.kafka import FirstPollOffsetStrategy

    from .test_kafka import Collector, Context

    kafka_broker.produce("resume", [f"r{i}" for i in range(8)])  # two a partition

    def opened(storm_id):
        config = spout_config(kafka_broker, "resume", "resume")
        config.first_poll_offset_strategy = FirstPollOffsetStrategy.EARLIEST
        spout, collector = KafkaSpout(config), Collector()
        spout.open({}, Context(storm_id), collector)
        return spout, collector

    def emitted(spout, collector, n):
        assert wait_until(lambda: spout.next_tuple() or len(collector.emitted) >= n, 30, 0), collector.emitted
        return collector.emitted

    spout, collector = opened("topo-1")
    first = emitted(spout, collector, 8)
    for _, msg_id in first:
        if msg_id.offset == 0:
            spout.ack(msg_id)  # offset 0 of every partition
    spout.close()  # commits 1 on each partition, with {"topologyId": "topo-1", ...}
    assert kafka_broker.committed("resume", "resume") == {p: 1 for p in range(4)}
    # the same topology again: its own commit is resumed, EARLIEST or not
    spout, collector = opened("topo-1")
    again = emitted(spout, collector, 4)
    spout.close()
    assert sorted(v[0] for v, _ in again) == sorted(f"r{i}" for i in range(4, 8))
    # another topology: EARLIEST starts over
    spout, collector = opened("topo-2")
    anew = emitted(spout, collector, 8)
    spout.close()
    assert sorted(v[0] for v, _ in anew) == sorted(f"r{i}" for i in range(8))


class CountingListings:
    """A `ConfluentConsumer` factory whose consumers count their partition listings."""

    def __init__(self) -> None:
        self.listings = 0

    def __call__(self, props):
        from squall.external.kafka import ConfluentConsumer

        outer = self

        class Counting(ConfluentConsumer):
            def partitions_for(self, topics):
                listing = super().partitions_for(topics)
                outer.listings += 1
                return listing

        return Counting(props)


def driven(spout, collector, until, timeout=30.0) -> bool:
    """Calls ``next_tuple`` (acking what it emits) until ``until()`` holds or ``timeout`` passes."""
    def step():
        spout.next_tuple()
        for _, msg_id in collector.emitted[step.acked:]:
            spout.ack(msg_id)
        step.acked = len(collector.emitted)
        return until()
    step.acked = 0
    return wait_until(step, timeout, 0)


def test_a_missing_topic_does_not_stop_the_other_topics(kafka_broker, caplog):  # noqa: F811
    # a topic not created yet (UNKNOWN_TOPIC_OR_PART) made the partition refresh fail as a whole:
    # the spout counted the broker down and never polled the topic that existed
    from .test_kafka import Collector, Context

    present, later = [f"p{i}" for i in range(8)], [f"l{i}" for i in range(8)]
    kafka_broker.produce("present", present)
    factory = CountingListings()
    config = spout_config(kafka_broker, "present", "missing")
    config.topics = ["present", "later"]
    config.partition_refresh_period_ms = 50
    config.props = {**config.props, "fetch.wait.max.ms": 20}  # the test broker holds a waiting fetch that long
    config.consumer_factory = factory
    spout, collector = KafkaSpout(config), Collector()
    spout.open({}, Context(), collector)
    seen = lambda: Counter(v[0] for v, _ in collector.emitted)
    try:
        assert driven(spout, collector, lambda: len(collector.emitted) >= len(present)), seen()
        listed = factory.listings
        assert driven(spout, collector, lambda: factory.listings >= listed + 3)  # refreshes while it is missing
        assert seen() == Counter(present)
        kafka_broker.produce("later", later)
        assert driven(spout, collector, lambda: len(collector.emitted) >= len(present) + len(later)), seen()
        assert seen() == Counter(present + later)  # each once
        assert driven(spout, collector, lambda: at_log_end(kafka_broker, "missing", "later"))
    finally:
        spout.close()
    warned = [r.getMessage() for r in caplog.records if "'later'" in r.getMessage() and r.levelname == "WARNING"]
    assert len(warned) == 1 and "not found" in warned[0], warned


def test_at_most_once_a_failed_commit_does_not_skip_the_polled_records(kafka_broker):  # noqa: F811
    # the commit before emit failed after the poll had moved the consumer past the records: they
    # were never emitted, and the next poll's commit moved the group past them (40 of 40 lost)
    from squall.external.kafka import ConfluentConsumer, KafkaUnavailable, ProcessingGuarantee

    from .test_kafka import Collector, Context

    failed: list[int] = []  # how many tuples had been emitted when the commit failed
    collector = Collector()

    class FailFirstCommit(ConfluentConsumer):
        def commit(self, offsets, metadata):
            if not failed:
                failed.append(len(collector.emitted))
                raise KafkaUnavailable("commit: Broker: Request timed out")  # as _call wraps it
            super().commit(offsets, metadata)

    values = [f"x{i}" for i in range(40)]
    kafka_broker.produce("amo-commit", values)
    config = spout_config(kafka_broker, "amo-commit", "amo-commit")
    config.processing_guarantee = ProcessingGuarantee.AT_MOST_ONCE
    config.consumer_factory = FailFirstCommit
    config.down_retry_secs = 0.05
    spout = KafkaSpout(config)
    spout.open({}, Context(), collector)
    try:
        assert driven(spout, collector, lambda: len(collector.emitted) >= len(values)), collector.emitted
    finally:
        spout.close()
    assert failed == [0]  # the failed commit came before any emit
    assert Counter(v[0] for v, _ in collector.emitted) == Counter(values)  # each once
    assert at_log_end(kafka_broker, "amo-commit", "amo-commit")


@pytest.mark.parametrize("guarantee", ["AT_MOST_ONCE", "NO_GUARANTEE"])
def test_a_graceful_close_at_most_once_loses_none_of_the_records_polled_and_not_emitted(kafka_broker, guarantee):  # noqa: F811
    """Three lives of the spout (a kill or a rebalance each: ``close``, no crash), each emitting 200
    records of its polls (up to 500 records each), then a fourth reading to the end: each of the
    1,000 records emitted once, and the group committed at the log ends. On main each close left the
    polls' commit past the records not emitted, lost: the fourth life found fewer than 400."""
    from squall.external.kafka import ProcessingGuarantee

    from .test_kafka import Collector, Context

    topic = f"closed-{guarantee.lower().replace('_', '-')}"
    kafka_broker.create_topic(topic, 2)
    values = [str(i) for i in range(1000)]
    kafka_broker.produce(topic, values, 2)
    emitted: Counter[str] = Counter()
    for life in range(4):
        config = spout_config(kafka_broker, topic, topic)
        config.processing_guarantee = ProcessingGuarantee[guarantee]
        spout = KafkaSpout(config)
        collector = Collector()
        spout.open({}, Context(storm_id=f"topo-{life}"), collector)
        try:
            want = 200 if life < 3 else len(values) - sum(emitted.values())
            assert driven(spout, collector, lambda c=collector, n=want: len(c.emitted) >= n, timeout=10), (
                f"life {life}: {len(collector.emitted)} of {want} emitted; before it {sum(emitted.values())}")
        finally:
            spout.close()
        emitted.update(v[0] for v, _ in collector.emitted)
    assert emitted == Counter(values)   # each once: none lost by a close, none emitted twice
    assert kafka_broker.committed(topic, topic, range(2)) == kafka_broker.end_offsets(topic)


def test_a_close_at_most_once_does_not_commit_back_below_what_another_reader_emitted(kafka_broker):  # noqa: F811
    """Topology X is killed with a wait; meanwhile Y is submitted on the same group, starts at X's
    last poll commit, emits 100 records and is killed itself (closed: committed at its first record
    not emitted); then X's wait is over and it closes. X's close committed its partitions back at
    its own first records not emitted, below the 100 Y had emitted, and the next reader Z emitted
    them a second time. At most once, X's close leaves a partition whose commit another reader
    moved: no record is emitted twice (X's unemitted ones are lost, as at most once allows).
    (With no guarantee, Y may emit X's records again anyway: it starts where X last committed.)"""
    from squall.external.kafka import ProcessingGuarantee

    from .test_kafka import Collector, Context

    topic = "two-readers"
    kafka_broker.create_topic(topic, 2)
    values = [str(i) for i in range(3000)]   # X's polls take 1,000 while it emits 200, Y's the next 1,000
    kafka_broker.produce(topic, values, 2)

    def opened(name):
        config = spout_config(kafka_broker, topic, topic)
        config.processing_guarantee = ProcessingGuarantee.AT_MOST_ONCE
        spout, collector = KafkaSpout(config), Collector()
        spout.open({}, Context(storm_id=name), collector)
        return spout, collector

    x, x_out = opened("x-1-1")
    assert driven(x, x_out, lambda: len(x_out.emitted) >= 200, timeout=10), len(x_out.emitted)
    assert any(x.waiting.values())   # its poll brought more than it emitted
    y, y_out = opened("y-2-1")
    assert driven(y, y_out, lambda: len(y_out.emitted) >= 100, timeout=10), len(y_out.emitted)
    y.close()
    x.close()
    z, z_out = opened("z-3-1")
    ends = {values[-2], values[-1]}   # each partition's last record: Z emitted all it was left once both are out
    try:
        assert driven(z, z_out, lambda: bool(z_out.emitted) and z_out.emitted[-1][0][0] in ends
                      and ends <= {v[0] for v, _ in z_out.emitted}, timeout=20), len(z_out.emitted)
    finally:
        z.close()
    emitted = Counter(v[0] for out in (x_out, y_out, z_out) for v, _ in out.emitted)
    twice = sorted((v for v, n in emitted.items() if n > 1), key=int)
    assert not twice, f"{len(twice)} records emitted twice: {twice[:10]}..."
    assert set(emitted) <= set(values) and len(z_out.emitted) > 0
    print(f"X emitted {len(x_out.emitted)}, Y {len(y_out.emitted)}, Z {len(z_out.emitted)}; "
          f"{len(emitted)} of {len(values)} distinct, {len(twice)} twice")

def test_props_asking_for_the_consumer_group_protocol_still_read_every_record(kafka_broker, caplog):  # noqa: F811
    """A user's props with ``group.protocol: consumer`` (KIP-848's protocol, from a shared Kafka
    config, say): librdkafka refuses ``session.timeout.ms`` under it, which the spout's consumer
    set (to bound a commit's wait for an unreachable broker), so every task's ``open`` raised
    ("Failed to create consumer: `session.timeout.ms` is not supported") and the topology read
    none of 400 records, all of which it read before that setting. The protocol is ignored with a
    warning: the spout assigns its partitions itself and never joins the group."""
    from .test_kafka import Collector, Context

    values = [f"g{i}" for i in range(400)]
    kafka_broker.produce("new-protocol", values)
    config = spout_config(kafka_broker, "new-protocol", "new-protocol")
    config.props = {**config.props, "group.protocol": "consumer"}
    spout, collector = KafkaSpout(config), Collector()
    spout.open({}, Context(), collector)
    try:
        assert driven(spout, collector, lambda: at_log_end(kafka_broker, "new-protocol", "new-protocol")), (
            len(collector.emitted), kafka_broker.committed("new-protocol", "new-protocol"))
    finally:
        spout.close()
    assert Counter(v[0] for v, _ in collector.emitted) == Counter(values)   # each once
    assert "group.protocol=consumer ignored" in caplog.text
