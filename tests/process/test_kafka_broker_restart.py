"""The Kafka broker restarted (its log kept) under a running `KafkaSpout` on the process host
(two workers, acking on), against librdkafka's test broker (tests/kafka_broker.py: `down`, `up`):
the outage is named in the workers' logs while it lasts, and every record is counted after it."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from ..conftest import wait_until
from ..external.poison_file_fail_fast import lines
from ..kafka_broker import kafka_broker  # noqa: F401 - the module-scoped broker fixture
from . import kafka_restart_topology as k

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")

FIRST, REST = 600, 600   # produced before the outage, and after it
DOWN_SECS = 6.0


def worker_logs(cluster) -> str:
    return "".join(p.read_text(errors="replace")
                   for p in sorted(cluster.dir.glob("logs/workers-artifacts/*/*/worker.log")))


@pytest.mark.timeout(120)
def test_a_broker_restart_under_the_spout_is_named_while_it_lasts_and_every_record_is_processed_after_it(
        cluster, kafka_broker, tmp_path):  # noqa: F811 - fixtures
    """The broker goes down once the bolt has executed 200 of the first 600 records (tuples in
    flight, acked offsets waiting for their commit, every 200 ms) and comes back 6 s later with its
    log; then 600 more records are produced. While it is down, each spout task's commit fails
    within BROKER_WAIT_MS (2 s) and the worker log names the broker unavailable, and nothing says
    it is back; after, each of the 1,200 records was executed (at least once: counted), and the
    group committed every offset. On main a commit during the outage waited for the group
    coordinator 45 s (librdkafka's session.timeout.ms) inside next_tuple: nothing was logged in
    the 6 s; the spout emitted nothing and took no ack meanwhile."""
    notes = tmp_path / "notes"
    notes.mkdir()
    first = [str(i) for i in range(FIRST)]
    rest = [str(i) for i in range(FIRST, FIRST + REST)]
    kafka_broker.create_topic(k.TOPIC, k.PARTITIONS)
    kafka_broker.produce(k.TOPIC, first, k.PARTITIONS)
    unavailable = re.compile(rf"KafkaSpout {k.GROUP}: broker {re.escape(kafka_broker.bootstrap)} unavailable \(")
    with cluster.client() as master:
        master.submit_topology("restarted", k.conf(), k.topology(kafka_broker.bootstrap, notes))
        try:
            assert wait_until(lambda: len(lines(notes / "seen")) >= 200, 60), "the topology did not start"
            kafka_broker.down()
            down_at = time.monotonic()
            named = wait_until(lambda: len(unavailable.findall(worker_logs(cluster))) >= k.PARTITIONS, DOWN_SECS, 0.1)
            named_after = time.monotonic() - down_at
            time.sleep(max(0.0, DOWN_SECS - named_after))
            while_down = worker_logs(cluster)
            seen_while_down = len(lines(notes / "seen"))
            kafka_broker.up()
            kafka_broker.produce(k.TOPIC, rest, k.PARTITIONS)

            def done() -> bool:
                return (set(lines(notes / "seen")) == set(first + rest)
                        and kafka_broker.committed(k.GROUP, k.TOPIC, range(k.PARTITIONS)) == kafka_broker.end_offsets(k.TOPIC))
            assert wait_until(done, 60, 0.2), (
                f"{len(set(lines(notes / 'seen')))} of {FIRST + REST} executed, committed "
                f"{kafka_broker.committed(k.GROUP, k.TOPIC, range(k.PARTITIONS))} of {kafka_broker.end_offsets(k.TOPIC)}")
            errors = master.get_topology_info("restarted")["errors"]
        finally:
            master.kill_topology("restarted", 0)
    seen = Counter(lines(notes / "seen"))
    print(f"FIGURES outage named after {named_after:.1f} s; {seen_while_down} executed when the broker came back; "
          f"{sum(seen.values())} executions of {len(seen)} records, {sum(n - 1 for n in seen.values())} again")
    assert named, f"no spout task named the broker unavailable within {DOWN_SECS} s of the outage:\n{while_down[-3000:]}"
    assert "broker back" not in while_down, while_down[-3000:]
    assert set(seen) == set(first + rest)
    assert errors == [], errors   # no task reported stuck in user code, nothing crashed
