"""A Kafka record that kills the worker its `KafkaSpout` runs in: its retry budget outlives the
spout (kept in the metadata of the group's committed offset of its partition), so it reaches the
dead letters after ``max_retries``, and the good records in flight beside it at each death are
delivered again, never charged. Driven directly over an in-memory consumer whose commits
(offsets and metadata) outlive it, as the group's do: a "worker death" is what a real one leaves
behind, a spout dropped without ``close`` (nothing committed since its last commit) and a new one
opened on the same commits. tests/process/test_poison_kafka_exit.py runs the same on the process
host against a Kafka-protocol broker, with a bolt that calls ``os._exit``."""

from __future__ import annotations

import collections
import json
import logging
import re

from squall.engine.clock import SimulatedClock
from squall.external.kafka import Committed, RetryBackoff, TopicPartition

from .test_kafka import MemoryConsumer, open_spout

GOOD = 1000
POISON = ("poison-a", "poison-b", "poison-c")
PARTITIONS = 2
IN_FLIGHT = 20        # tuples of the spout in flight at once (its max spout pending)
MAX_RETRIES = 3


def values() -> list[str]:
    """The good values with the poison ones among them."""
    out = [str(i) for i in range(GOOD)]
    for k, value in enumerate(POISON):
        out.insert((k + 1) * GOOD // (len(POISON) + 1), value)
    return out


def logs_of(vals: list[str]) -> dict[TopicPartition, list[str]]:
    """The i-th value to partition i % PARTITIONS, as the test broker's producer places them."""
    return {TopicPartition("t", p): vals[p::PARTITIONS] for p in range(PARTITIONS)}


def metadata(commits, tp) -> dict:
    return json.loads(commits[tp].metadata)


class Worker:
    """One life of the spout's worker: a spout task over the group's ``commits``, and bolts that
    take its tuples `IN_FLIGHT` at a time, oldest first."""

    def __init__(self, logs, commits, dead: list, clock, max_retries=MAX_RETRIES) -> None:
        self.spout, self.collector, _ = open_spout(
            MemoryConsumer(logs, commits), clock=clock, retry=RetryBackoff(0.0, 0.001, max_retries, 0.01),
            dead_letter=lambda r, why: dead.append((r.value, why)))
        self.in_flight: collections.deque[tuple[object, str]] = collections.deque()


def test_a_record_that_kills_its_spouts_worker_each_time_is_dead_lettered_after_its_budget():
    """1,003 records over 2 partitions, three of which kill the worker each time they are
    processed (the spout dies with the bolt). Each poison record is charged only for the deaths
    while it was in flight alone (after its first death it is a suspect, emitted alone), so it
    reaches the dead letters after max_retries + 1 = 4 such deaths, with a reason saying so;
    the good records in flight or read beside it are delivered again (counted) and each reaches
    the output; none is dead-lettered or left charged, and the group commits every offset."""
    logs, commits, dead = logs_of(values()), {}, []
    clock = SimulatedClock()
    delivered: collections.Counter[str] = collections.Counter()   # emits, per value
    out: collections.Counter[str] = collections.Counter()         # processed and acked, per value
    deaths: collections.Counter[str] = collections.Counter()      # worker deaths, per poison value
    w = Worker(logs, commits, dead, clock)

    def done() -> bool:
        return not w.in_flight and all(tp in commits and commits[tp].offset == len(log) for tp, log in logs.items())

    steps = 0
    try:
        while not done():
            steps += 1
            assert steps < 200_000 and sum(deaths.values()) < 40, (
                f"not done: {sum(deaths.values())} deaths {dict(deaths)}, {len(dead)} dead letters, "
                f"{len(out)} of {GOOD} good values out")
            clock.advance(0.01)   # the spout commits every simulated second
            before = len(w.collector.emitted)
            w.spout.next_tuple()
            emitted = w.collector.emitted[before:]
            for (value,), msg_id in emitted:
                delivered[value] += 1
                w.in_flight.append((msg_id, value))
            if w.in_flight and (len(w.in_flight) >= IN_FLIGHT or not emitted):
                msg_id, value = w.in_flight.popleft()
                if value in POISON:
                    deaths[value] += 1
                    w = Worker(logs, commits, dead, clock)   # the old one dropped: no close
                    continue
                out[value] += 1
                w.spout.ack(msg_id)
    finally:
        w.spout.close()

    assert set(out) == {str(i) for i in range(GOOD)}   # every good value reached the output
    assert sorted(v for v, _ in dead) == sorted(POISON)   # never a good one, each poison once
    for _, why in dead:
        assert re.fullmatch(r"failed 4 times \(max_retries 3\): its worker died each of the 4 times it was "
                            r"in flight alone", why), why
    # 4 deaths alone each, and at most one before it was known a suspect
    assert all(MAX_RETRIES + 1 <= deaths[v] <= MAX_RETRIES + 2 for v in POISON), deaths
    again = {v: n for v, n in delivered.items() if n > 1 and v not in POISON}
    assert again, "no good value was beside a poison one when it killed the worker"
    duplicates = sum(out.values()) - len(out)
    assert duplicates <= sum(again.values()) - len(again)   # a duplicate only where delivered again
    for tp in logs:   # every charge deleted with its record, every dead mark committed past
        assert metadata(commits, tp)["charged"] == {} and metadata(commits, tp)["dead"] == {}, commits[tp]
    print(f"{sum(deaths.values())} deaths {dict(deaths)}; {len(again)} good values delivered again, "
          f"{duplicates} duplicates out")


def test_after_a_death_the_records_it_emitted_go_out_one_at_a_time_each_charged_while_alone():
    """The records a dead task emitted are emitted again one at a time, each once the one before
    it ended, with its charge ("1 1 <tag>": one failure, a death) committed before it goes out
    and deleted by its ack; a ``close`` with one in flight takes its charge back (its worker did
    not die), and brings the mark down to what the task really emitted."""
    tp = TopicPartition("t", 0)
    logs, commits, dead = {tp: [f"v{i}" for i in range(9)]}, {}, []
    clock = SimulatedClock()
    w = Worker(logs, commits, dead, clock)
    for _ in range(5):
        w.spout.next_tuple()
    assert [v for (v,), _ in w.collector.emitted] == ["v0", "v1", "v2", "v3", "v4"]   # together
    assert metadata(commits, tp)["emittedTo"] == 1 + 512   # committed before v0 went out
    w = Worker(logs, commits, dead, clock)   # the first one died
    for value in ("v0", "v1", "v2"):
        for _ in range(3):
            w.spout.next_tuple()
        [((got,), msg_id)] = w.collector.emitted   # nothing beside it
        charged = metadata(commits, tp)["charged"]
        assert got == value and list(charged) == [str(msg_id.offset)] and charged[str(msg_id.offset)].startswith("1 1 ")
        w.spout.ack(msg_id)
        assert metadata(commits, tp)["charged"] == {}   # deleted before anything else goes out
        w.collector.emitted.clear()
    w.spout.next_tuple()
    [((got,), msg_id)] = w.collector.emitted
    assert got == "v3" and list(metadata(commits, tp)["charged"]) == ["3"]
    w.spout.close()
    assert metadata(commits, tp)["charged"] == {}   # taken back: it was not in flight when its worker died
    assert metadata(commits, tp)["emittedTo"] == 1 + 512   # what the dead task may have emitted stays


def test_a_charge_written_for_another_record_at_the_offset_is_dropped_not_charged():
    """The topic deleted and created again under offsets the group kept: the charge at an offset
    was written for the old record there, so the new one is not dead-lettered by it (a good
    record charged past max_retries would be), and a warning names the partition and offset."""
    tp = TopicPartition("t", 0)
    commits, dead = {}, []
    clock = SimulatedClock()
    w = Worker({tp: ["old"]}, commits, dead, clock, max_retries=0)
    w.spout.next_tuple()
    w = Worker({tp: ["old"]}, commits, dead, clock, max_retries=0)   # died with "old" in flight
    w.spout.next_tuple()   # "old" goes out alone, charged "1 1": past max_retries 0 if it dies
    assert list(metadata(commits, tp)["charged"]) == ["0"]
    # it dies again; the topic is recreated with another record at offset 0
    w = Worker({tp: ["new"]}, commits, dead, clock, max_retries=0)
    for _ in range(3):
        w.spout.next_tuple()
    assert [v for (v,), _ in w.collector.emitted] == ["new"] and dead == []


def test_offsets_reset_without_metadata_start_every_record_afresh():
    """``kafka-consumer-groups --reset-offsets`` commits without metadata: the budgets go with
    it, and a record that had a charge past max_retries is emitted as any other."""
    tp = TopicPartition("t", 0)
    commits, dead = {}, []
    clock = SimulatedClock()
    w = Worker({tp: ["a", "b"]}, commits, dead, clock, max_retries=0)
    w.spout.next_tuple()
    w = Worker({tp: ["a", "b"]}, commits, dead, clock, max_retries=0)
    w.spout.next_tuple()   # "a" alone, charged: it would be given up at the next restart
    assert list(metadata(commits, tp)["charged"]) == ["0"]
    commits[tp] = Committed(0, "")   # the reset
    w = Worker({tp: ["a", "b"]}, commits, dead, clock, max_retries=0)
    for _ in range(3):
        w.spout.next_tuple()
    assert [v for (v,), _ in w.collector.emitted] == ["a", "b"] and dead == []   # together, not suspects


def test_malformed_budgets_in_the_metadata_are_ignored_with_a_warning_naming_the_partition(caplog):
    """Hostile or corrupt commit metadata with the budgets' keys: the partition is resumed at its
    committed offset, its records start with fresh budgets (a crash loop over the metadata would
    stop the partition), a warning names the group, topic and partition and says what is wrong,
    and the next commit replaces the metadata."""
    tp = TopicPartition("t", 1)
    bad = json.dumps({"topologyId": "topo-1", "taskId": 0, "emittedTo": 9, "charged": {"1": "9 9 nothex!"}, "dead": {}})
    commits, dead = {tp: Committed(1, bad)}, []
    clock = SimulatedClock()
    w = Worker({tp: ["a", "b", "c"]}, commits, dead, clock, max_retries=0)
    with caplog.at_level(logging.WARNING, "squall.external.kafka"):
        for _ in range(3):
            w.spout.next_tuple()
    assert [v for (v,), _ in w.collector.emitted] == ["b", "c"] and dead == []   # from the commit, together
    [warning] = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert "KafkaSpout g: topic 't' partition 1" in warning and "'nothex!'" in warning, warning
    for _, msg_id in w.collector.emitted:
        w.spout.ack(msg_id)
    clock.advance(1.0)
    w.spout.next_tuple()
    assert commits[tp].offset == 3 and metadata(commits, tp)["charged"] == {}


def test_without_a_retry_limit_nothing_is_counted_written_or_held_back():
    """``max_retries`` None (Storm's default): the metadata stays storm-kafka-client's, and the
    records a dead task emitted go out again together."""
    tp = TopicPartition("t", 0)
    commits, dead = {}, []
    clock = SimulatedClock()
    w = Worker({tp: ["a", "b", "c"]}, commits, dead, clock, max_retries=None)
    for _ in range(3):
        w.spout.next_tuple()
    w.spout.ack(w.collector.emitted[0][1])
    clock.advance(1.0)
    w.spout.next_tuple()
    assert metadata(commits, tp) == {"topologyId": "topo-1", "taskId": 0}
    w = Worker({tp: ["a", "b", "c"]}, commits, dead, clock, max_retries=None)
    for _ in range(2):
        w.spout.next_tuple()
    assert [v for (v,), _ in w.collector.emitted] == ["b", "c"]


def test_two_tasks_in_one_worker_send_their_suspects_alone_in_the_worker_not_only_in_their_task():
    """Two tasks of the spout in one worker (a partition each) die together with 5 records each
    in flight. In the worker's next life every one of them is a suspect, and they go out one at
    a time across both tasks: while one task's suspect is out, the other emits nothing (were it
    alone only in its own task, the other task's poison record could kill the worker beside it,
    and charge it that death). Every record is counted: all 16 go out once each after the death,
    in their partition's order, charged before they go and uncharged after."""
    from squall._worker_resources import WorkerResources

    from .test_kafka import Context

    class WorkerContext(Context):
        """A task's context in a worker: with the worker's resources, as the engine lends them."""

        def __init__(self, index: int, tasks: int, resources) -> None:
            super().__init__(index=index, tasks=tasks)
            self.worker_resources = resources

    logs = {TopicPartition("t", p): [f"{'ab'[p]}{i}" for i in range(8)] for p in range(2)}
    commits: dict = {}
    dead: list = []
    clock = SimulatedClock()

    def life():
        resources = WorkerResources()   # a new worker: its gate starts empty
        return [open_spout(MemoryConsumer(logs, commits), clock=clock,
                           context=WorkerContext(index, 2, resources),
                           retry=RetryBackoff(0.0, 0.001, MAX_RETRIES, 0.01),
                           dead_letter=lambda r, why: dead.append((r.value, why)))[:2]
                for index in range(2)]

    tasks = life()
    for spout, _ in tasks:
        for _ in range(5):
            spout.next_tuple()
    assert [[v for (v,), _ in c.emitted] for _, c in tasks] == [logs[TopicPartition("t", p)][:5] for p in range(2)]
    tasks = life()   # the worker died: no close, nothing committed since
    out: dict[int, list[str]] = {0: [], 1: []}
    for _ in range(400):
        clock.advance(0.01)
        for spout, _ in tasks:
            spout.next_tuple()
        in_flight = [(i, v, msg_id) for i, (_, c) in enumerate(tasks) for (v,), msg_id in c.emitted]
        assert len(in_flight) <= 1, in_flight   # a suspect is alone in the worker
        for i, value, msg_id in in_flight:
            spout, collector = tasks[i]
            tp = msg_id.tp
            if value in logs[tp][:5]:   # the dead task's: charged as a death before it went out
                assert metadata(commits, tp)["charged"][str(msg_id.offset)].startswith("1 1 ")
            spout.ack(msg_id)
            assert metadata(commits, tp)["charged"] == {}
            collector.emitted.clear()
            out[i].append(value)
        if sum(map(len, out.values())) == 16:
            break
    assert out == {p: logs[TopicPartition("t", p)] for p in range(2)}   # each once, in order, none lost
    assert dead == []
    for spout, _ in tasks:
        spout.close()


def test_records_of_a_revoked_partition_stop_counting_in_the_workers_gate():
    """A partition taken from a counting task (gone from the topic's listing, or moved to another
    task) takes its records in flight with it: their acks will be ignored, so they stop counting
    in the worker's gate at once. Left counted, every other spout task of the worker would hold
    its suspects back for ever, waiting for acks that no one will ask about."""
    from squall._worker_resources import WorkerResources

    from .test_kafka import Context

    class WorkerContext(Context):
        def __init__(self, resources) -> None:
            super().__init__()
            self.worker_resources = resources

    gone, kept = TopicPartition("t", 0), TopicPartition("t", 1)
    consumer = MemoryConsumer({gone: [f"a{i}" for i in range(9)], kept: [f"b{i}" for i in range(9)]}, {})
    spout, collector, clock = open_spout(consumer, context=WorkerContext(WorkerResources()),
                                         retry=RetryBackoff(0.0, 0.001, MAX_RETRIES, 0.01),
                                         partition_refresh_period_ms=1000)
    for _ in range(8):
        spout.next_tuple()
    in_flight = collections.Counter(msg_id.tp for _, msg_id in collector.emitted)
    assert in_flight[gone] and in_flight[kept]
    assert spout.gate.worker.in_flight == len(collector.emitted)
    del consumer.logs[gone]   # the partition is no longer listed: revoked at the next refresh
    clock.advance(2.0)
    spout.next_tuple()
    kept_now = [msg_id for _, msg_id in collector.emitted if msg_id.tp == kept]
    assert spout.gate.worker.in_flight == len(kept_now) == len(spout.gate.in_flight)
    for msg_id in kept_now:
        spout.ack(msg_id)
    assert spout.gate.worker.in_flight == 0
    spout.close()
