"""Poison records from a Kafka topic on the process host (2 worker processes), against a
Kafka-protocol broker (librdkafka's test broker, tests/kafka_broker.py): the bolt task that gets
them shares the `KafkaSpout`'s worker (local-or-shuffle grouping) and ends that process with
``os._exit``, so each time the spout dies with the counts it held. The retry budget, kept in the
metadata of the group's committed offsets, outlives it: each poison record is dead-lettered after
its death alone (after one in a group of suspects), every good record reaches the output (duplicates counted), none is charged, the
group commits every offset, and the worker stops dying once the poison records are given up
(tests/external/test_kafka_deaths.py plays the deaths directly)."""

from __future__ import annotations

import json

import pytest

from ..conftest import wait_until
from ..external import poison_kafka_exit as p
from ..kafka_broker import kafka_broker  # noqa: F401 - the module-scoped broker fixture

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")


@pytest.mark.timeout(300)  # 9 crashes at most, restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
def test_poison_records_that_exit_the_spouts_worker_are_dead_lettered_and_good_ones_are_out(
        crashing_cluster, kafka_broker, tmp_path):  # noqa: F811 - fixtures
    notes = tmp_path / "notes"
    notes.mkdir()
    vals = p.values()
    placed = dict(zip(vals, kafka_broker.produce(p.TOPIC, vals), strict=True))
    with crashing_cluster.client() as master:
        master.submit_topology("poison", p.conf(workers=2), p.topology(kafka_broker.bootstrap, notes, local=True))
        try:
            assert wait_until(lambda: p.done(kafka_broker, notes), 240, 0.2), p.progress(kafka_broker, notes)
            info = master.get_topology_info("poison")
            figures = p.check_outcome(notes, placed)
            # the poison records given up, nothing kills the worker any more
            assert not wait_until(lambda: len(p.lines(notes / "raised")) > figures["deaths"], 3.0)
            after = master.get_topology_info("poison")
        finally:
            master.kill_topology("poison", 0)

    print("FIGURES", figures)
    assert figures["good delivered again"] > 0, figures   # good records were beside a poison one
    # each exit was in the spout's worker and took it down: one restart of it per poison
    # delivery, none of the other worker, and none after the last poison record was given up
    assert {line.split()[1] for line in p.lines(notes / "raised")} == {"1"}
    assert sum(w["restarts"] for w in info["workers"]) == figures["deaths"], (info["workers"], figures)
    assert sum(w["restarts"] for w in after["workers"]) == figures["deaths"], (after["workers"], figures)
    # no charge left in the group's commit metadata: each was deleted with its record
    metadata = kafka_broker.committed_metadata(p.GROUP, p.TOPIC)
    assert all(json.loads(m)["charged"] == {} and json.loads(m)["dead"] == {} for m in metadata.values()), metadata
