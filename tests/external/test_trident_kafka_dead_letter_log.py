"""The records the Kafka Trident spouts (transactional and opaque) cannot read are logged once
each, naming their txid, however often their batch is replayed, on a LocalCluster with the
Kafka-protocol broker of tests/kafka_broker.py and a real redis-server: 60 good records and 7 the
translator refuses, every txid's first attempt failed: 7 log lines, one per refused record, every
good record counted once, 7 dead letters in the figures.

Before: each attempt logged its batch's dead letters again (14 lines for the 7 records), without
the txid."""

from __future__ import annotations

import logging
import re

import pytest

pytest.importorskip("redis")

from squall import LocalCluster

from ..conftest import wait_until
from ..kafka_broker import kafka_broker  # noqa: F401 (the module-scoped broker fixture)
from . import trident_dead_letters as t


def _messages(caplog, marker: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if marker in r.getMessage()]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_a_kafka_trident_spouts_refused_records_are_logged_once_each_through_replays(
        tmp_path, redis_server, kafka_broker, kind, caplog):  # noqa: F811
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")
    caplog.set_level(logging.ERROR)
    topic = f"log-{kind}"
    values = t.kafka_values(60, 7)
    placed = kafka_broker.produce(topic, values)
    bad = {(partition, offset) for (partition, offset), v in zip(placed, values) if v.startswith("bad-")}
    assert len(bad) == 7
    good = {v: 1 for v in values if v.startswith("good-")}
    with LocalCluster() as cluster:
        cluster.submit_topology("kdlog", t.conf(), t.kafka_topology(kafka_broker.bootstrap, topic, redis_server.url, kind))
        assert wait_until(lambda: t.stored(redis_server.url, kind) == good, 90), t.stored(redis_server.url, kind)
        dead = {(t.KAFKA_SPOUT, "", "unreadable"): 7}
        assert wait_until(lambda: t.figures(cluster.get_topology_info("kdlog")) == dead, 30), \
            t.figures(cluster.get_topology_info("kdlog"))
        cluster.kill_topology("kdlog", wait_secs=0)
    assert t.stored(redis_server.url, kind) == good
    # every line naming a refused record of the topic, whichever logger wrote it
    logged = [m for m in _messages(caplog, "dead letter") if f"topic {topic!r}" in m]
    assert len(logged) == len(bad), logged  # once each: every txid's first attempt failed
    spout = "KafkaTridentSpoutTransactional" if kind == "transactional" else "KafkaTridentSpoutOpaque"
    shape = re.compile(rf"{spout} dead letter: txid (\d+): topic '{topic}' partition (\d+) offset (\d+): "
                       rf"malformed record: unreadable test record 'bad-k\d+'")
    matched = [shape.fullmatch(m) for m in logged]
    assert all(matched), logged
    assert {(int(m.group(2)), int(m.group(3))) for m in matched if m} == bad
