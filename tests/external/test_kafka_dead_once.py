"""A Kafka record given up to the dead letters is given up once, though the spout's worker dies
before the group's committed offset passes it (a record before it still in flight: a stateful
bolt acks at its checkpoint). Its dead mark goes into the commit metadata at once, as a
suspect's does (`squall.external.kafka_charges`), so the next life of the task skips it. Before,
the next life read it again from the committed offset and gave it up a second time: on the
process host, 31 malformed records among 3,000 made 36 dead letters over 6 worker SIGKILLs
(tests/process/test_kafka_stateful_sigkill.py). Driven directly over an in-memory consumer whose
commits outlive it, as tests/external/test_kafka_deaths.py does: a "death" is a spout dropped
without ``close`` and a new one opened on the same commits."""

from __future__ import annotations

import json

import pytest

from squall.engine.clock import SimulatedClock
from squall.external.kafka import MalformedRecord, RetryBackoff, TopicPartition
from squall.external.kafka_charges import METADATA_MAX_BYTES

from .test_kafka import MemoryConsumer, open_spout

TP = TopicPartition("t", 0)


def parse(record) -> list:
    if record.value.startswith("bad"):
        raise MalformedRecord(f"not a value: {record.value!r}")
    return [record.value]


def life(logs, commits, dead, clock, max_retries):
    """One life of the spout's worker over the group's ``commits``."""
    spout, collector, _ = open_spout(MemoryConsumer(logs, commits), clock=clock, translator=parse,
                                     retry=RetryBackoff(0.0, 0.001, max_retries, 0.01),
                                     dead_letter=lambda r, why: dead.append((r.offset, why)))
    return spout, collector


def drain(spout, collector, logs, commits, clock, fails=(), steps=2000):
    """next_tuple until every offset committed (or ``steps`` calls), 10 ms apart, acking each
    tuple (failing the values in ``fails``)."""
    seen = 0
    for _ in range(steps):
        clock.advance(0.01)
        spout.next_tuple()
        for (value,), msg_id in collector.emitted[seen:]:
            (spout.fail if value in fails else spout.ack)(msg_id)
        seen = len(collector.emitted)
        if TP in commits and commits[TP].offset == len(logs[TP]):
            break


def run_to_the_end(spout, collector, logs, commits, clock, fails=()):
    """Emits everything, acking each tuple (failing those whose value is in ``fails``), until
    the group committed every offset."""
    drain(spout, collector, logs, commits, clock, fails)
    spout.close()
    assert commits[TP].offset == len(logs[TP]), commits


@pytest.mark.parametrize("max_retries", [3, None])
def test_a_malformed_record_is_dead_lettered_once_though_the_worker_died_before_its_commit(max_retries):
    """``v0`` goes out and stays in flight; ``bad-1`` is malformed, dead-lettered; ``v2`` goes
    out; the worker dies. Its next life reads from offset 0 again: ``v0`` and ``v2`` go out
    again (at least once), ``bad-1`` does not go to the dead letters again. With a retry limit
    and without (Storm's default), whose metadata then carries the dead marks only while one
    waits for the commit."""
    logs, commits, dead = {TP: ["v0", "bad-1", "v2", "v3"]}, {}, []
    clock = SimulatedClock()
    spout, collector = life(logs, commits, dead, clock, max_retries)
    for _ in range(2):   # one tuple each: bad-1 is skipped on the way to v2
        spout.next_tuple()
    assert [v for (v,), _ in collector.emitted] == ["v0", "v2"]
    assert [o for o, _ in dead] == [1]
    assert commits.get(TP) is None or commits[TP].offset == 0   # nothing acked: v0 holds the offset back
    spout, collector = life(logs, commits, dead, clock, max_retries)   # the first one died
    run_to_the_end(spout, collector, logs, commits, clock)
    assert [v for (v,), _ in collector.emitted] == ["v0", "v2", "v3"]
    assert [o for o, _ in dead] == [1], dead   # once: the second life skipped it
    assert "malformed record: not a value: 'bad-1'" in dead[0][1]
    if max_retries is None:   # past its commit no dead mark is left: the metadata is Storm's again
        assert json.loads(commits[TP].metadata) == {"topologyId": "topo-1", "taskId": 0}, commits[TP].metadata
    else:
        assert json.loads(commits[TP].metadata)["dead"] == {}


def test_a_record_failed_past_its_budget_is_dead_lettered_once_though_the_worker_died_before_its_commit():
    """``v1`` is failed by a bolt each time it goes out (max_retries 1: given up at its second
    failure) while ``v0`` stays in flight; the worker dies. Its next life reads ``v1`` again
    and skips it, rather than giving it a fresh budget and up a second time."""
    logs, commits, dead = {TP: ["v0", "v1", "v2"]}, {}, []
    clock = SimulatedClock()
    spout, collector = life(logs, commits, dead, clock, 1)
    for _ in range(50):
        clock.advance(0.01)
        spout.next_tuple()
        for (value,), msg_id in collector.emitted:
            if value == "v1" and msg_id in spout.emitted:
                spout.fail(msg_id)
        if dead:
            break
    assert [o for o, _ in dead] == [1]
    assert dead[0][1].startswith("failed 2 times (max_retries 1)"), dead
    spout, collector = life(logs, commits, dead, clock, 1)   # the first one died, v0 in flight
    run_to_the_end(spout, collector, logs, commits, clock, fails={"v1"})
    assert "v1" not in [v for (v,), _ in collector.emitted]
    assert [o for o, _ in dead] == [1], dead


def test_a_run_of_malformed_records_behind_one_in_flight_commits_the_dead_marks_that_fit_once_each():
    """``v0`` stays in flight (a stateful bolt acks it at its checkpoint) while 600 malformed
    records follow it: each goes to the dead letters once, and its dead mark waits in the commit
    metadata for the offset to pass it. Only the marks of the lowest offsets fit in Kafka's 4,096
    bytes, so a commit is made for each of those, not one per record: before, every malformed
    record committed all the marks since ``v0`` again, the metadata rebuilt once per mark dropped
    (600 records: 600 commits; 1,600: 299 s of ``next_tuple`` before ``v-end`` went out). A death
    then: the next life skips the records whose marks were committed, and dead-letters the others
    a second time (the documented limit of the metadata), every record counted."""
    n = 600
    logs, commits, dead = {TP: ["v0"] + [f"bad-{i}" for i in range(n)] + ["v-end"]}, {}, []
    clock = SimulatedClock()
    consumer = MemoryConsumer(logs, commits)
    spout, collector, _ = open_spout(consumer, clock=clock, translator=parse,
                                     retry=RetryBackoff(0.0, 0.001, None, 0.01),
                                     dead_letter=lambda r, why: dead.append((r.offset, why)))
    for _ in range(n + 10):
        spout.next_tuple()
        if len(collector.emitted) == 2:
            break
    assert [v for (v,), _ in collector.emitted] == ["v0", "v-end"]
    assert sorted(o for o, _ in dead) == list(range(1, n + 1))   # each once
    assert commits[TP].offset == 0   # v0 in flight holds the offset back
    metadata = commits[TP].metadata
    marked = {int(o) for o in json.loads(metadata)["dead"]}
    assert len(metadata.encode()) <= METADATA_MAX_BYTES and marked == set(range(1, len(marked) + 1))
    assert 150 < len(marked) < n
    # a mark takes 15 bytes at least: at most 273 fit, one commit each (on main: 600)
    assert len(consumer.commit_calls) <= METADATA_MAX_BYTES // 15 + 1, len(consumer.commit_calls)

    spout, collector = life(logs, commits, dead, clock, None)   # the first one died, v0 in flight
    run_to_the_end(spout, collector, logs, commits, clock)
    assert [v for (v,), _ in collector.emitted] == ["v0", "v-end"]
    again = sorted(o for o, _ in dead[n:])
    assert again == list(range(len(marked) + 1, n + 1)), again[:5]   # those whose marks did not fit
    assert len(dead) == n + (n - len(marked))
