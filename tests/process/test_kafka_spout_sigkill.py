"""The `KafkaSpout`'s own worker SIGKILLed on the process host with many records pending behind
a bolt that acks slowly (a stateful bolt: its acks take effect at its checkpoint), against a
Kafka-protocol broker (librdkafka's test broker, tests/kafka_broker.py). Every record the dead
worker may have emitted comes back a suspect; they go out in groups of 32
(`squall.external.retry.SUSPECT_GROUPS`), a checkpoint each, not one checkpoint per record
(tests/external/test_kafka_deaths.py plays the rounds directly)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from ..conftest import wait_until
from ..external.poison_file_fail_fast import lines
from ..kafka_broker import kafka_broker  # noqa: F401 - the module-scoped broker fixture
from . import kafka_slow_acks as k

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")

N = 800            # 200 in each of the topic's 4 partitions: all below emittedTo (READ_AHEAD 512)
MAX_PENDING = 200


@pytest.mark.timeout(300)
def test_the_kafka_spouts_worker_sigkilled_behind_a_checkpointing_bolt_drains_its_suspects_in_groups(
        cluster, kafka_broker, tmp_path):  # noqa: F811 - fixtures
    """The worker (the spout and the stateful bolt, checkpoints every 100 ms) is SIGKILLed once
    the bolt has executed 300 records: up to 200 in flight, and every record of the topic not
    yet committed below the spout's ``emittedTo``. Its next life reads them all again as
    suspects. Every record is counted: each of the 800 executed at least once, none
    dead-lettered, every offset committed, no mark left in the group's commit metadata. The
    rounds (checkpoints that acked something) of the new life: 11 to 21 over 7 runs, 2.5-4.3 s
    from the kill to the last commit (272 to 600 suspects, 32 a checkpoint, then the records past
    them freely); on main each suspect went alone after the one before it, one checkpoint each:
    602 rounds, 78.5 s (the test's 11 s are mostly the cluster's start)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    values = [str(i) for i in range(N)]
    kafka_broker.produce(k.TOPIC, values)
    with cluster.client() as master:
        master.submit_topology("slow", k.conf(MAX_PENDING), k.topology(kafka_broker.bootstrap, notes))
        try:
            assert wait_until(lambda: len(lines(notes / "seen")) >= 300, 60), "the topology did not start"
            [worker] = master.get_topology_info("slow")["workers"]
            os.kill(worker["pid"], signal.SIGKILL)
            killed_at = time.monotonic()
            seen_at_kill = len(lines(notes / "seen"))

            def done() -> bool:
                return (set(lines(notes / "seen")) == set(values)
                        and kafka_broker.committed(k.GROUP, k.TOPIC) == kafka_broker.end_offsets(k.TOPIC))
            assert wait_until(done, 240, 0.2), (
                f"{len(set(lines(notes / 'seen')))} of {N} executed, committed {kafka_broker.committed(k.GROUP, k.TOPIC)}, "
                f"{len([r for r in k.rounds(notes) if r[0] != worker['pid']])} rounds since the kill")
            recovered = time.monotonic() - killed_at
        finally:
            master.kill_topology("slow", 0)
    assert seen_at_kill < N, "the kill came after the run"
    assert lines(notes / "dead") == []   # no record charged: the kill had a group out, or none
    metadata = kafka_broker.committed_metadata(k.GROUP, k.TOPIC)
    assert all(json.loads(m)["charged"] == {} and json.loads(m)["dead"] == {} for m in metadata.values()), metadata
    after = [n for pid, n, _ in k.rounds(notes) if pid != worker["pid"]]
    again = sum(after)   # executed in the worker's next life: the suspects, and anything after them
    print(f"FIGURES {seen_at_kill} executed at the kill; {again} in {len(after)} rounds after it, "
          f"{recovered:.1f} s; rounds {after}")
    assert again >= N - len(set(lines(notes / "seen")[:seen_at_kill]))   # each one not done at the kill
    # in groups of up to 32 (SUSPECT_GROUPS), a few not full where a partition's suspects ran
    # out; one at a time this was `again` rounds
    assert len(after) <= again / 16, after
