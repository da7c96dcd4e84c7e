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
from dataclasses import dataclass

from squall._failure import TIMEOUT, WORKER_DIED, FailureCause
from squall.engine.clock import SimulatedClock
from squall.external.kafka import Committed, MessageId, RetryBackoff, TopicPartition
from squall.external.kafka_charges import read_charges
from squall.external.retry import SUSPECT_GROUPS

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
    while it was in flight alone (after its first death it is a suspect, emitted in a group of
    suspects, then alone after its group died), so it reaches the dead letters after
    max_retries + 1 = 4 such deaths, with a reason saying so;
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
    # 4 deaths alone each, one in each level's group of suspects before it goes alone
    # (SUSPECT_GROUPS), and at most one before it was known a suspect
    grouped = len(SUSPECT_GROUPS) - 1
    assert all(MAX_RETRIES + 1 + grouped <= deaths[v] <= MAX_RETRIES + 2 + grouped for v in POISON), deaths
    again = {v: n for v, n in delivered.items() if n > 1 and v not in POISON}
    assert again, "no good value was beside a poison one when it killed the worker"
    duplicates = sum(out.values()) - len(out)
    assert duplicates <= sum(again.values()) - len(again)   # a duplicate only where delivered again
    for tp in logs:   # every charge deleted with its record, every dead mark committed past
        assert metadata(commits, tp)["charged"] == {} and metadata(commits, tp)["dead"] == {}, commits[tp]
    print(f"{sum(deaths.values())} deaths {dict(deaths)}; {len(again)} good values delivered again, "
          f"{duplicates} duplicates out")


def test_after_a_death_the_records_it_emitted_go_out_in_a_group_then_alone_once_a_group_died():
    """The records a dead task may have emitted (below its ``emittedTo``: the 5 it emitted and
    the 4 after them, within `READ_AHEAD`) go out again in one group of suspects, each one's
    level raised ("0 0 1 <tag>", nothing charged) in a commit before it goes out, nothing else
    beside them. The worker dies with the group out: in its next life each goes alone, charged
    as a death ("1 1 1 <tag>") before it goes out, the charge deleted by its ack before the next
    one goes; a ``close`` with one in flight takes its charge back (its worker did not die; its
    level stays), and brings the mark down to what the task really emitted."""
    tp = TopicPartition("t", 0)
    logs, commits, dead = {tp: [f"v{i}" for i in range(9)]}, {}, []
    clock = SimulatedClock()
    w = Worker(logs, commits, dead, clock)
    for _ in range(5):
        w.spout.next_tuple()
    assert [v for (v,), _ in w.collector.emitted] == ["v0", "v1", "v2", "v3", "v4"]   # together
    assert metadata(commits, tp)["emittedTo"] == 1 + 512   # committed before v0 went out
    w = Worker(logs, commits, dead, clock)   # the first one died
    for i in range(12):
        w.spout.next_tuple()
        charged = metadata(commits, tp)["charged"]
        for _, msg_id in w.collector.emitted:   # each one's mark committed before it went out
            assert charged[str(msg_id.offset)].startswith("0 0 1 "), charged
    assert [v for (v,), _ in w.collector.emitted] == logs[tp]   # one group: all 9 together
    w = Worker(logs, commits, dead, clock)   # it died with the group out: no one charged
    assert all(c.startswith("0 0 1 ") for c in metadata(commits, tp)["charged"].values())
    for value in ("v0", "v1", "v2"):
        for _ in range(3):
            w.spout.next_tuple()
        [((got,), msg_id)] = w.collector.emitted   # nothing beside it
        charged = metadata(commits, tp)["charged"]
        assert got == value and charged[str(msg_id.offset)].startswith("1 1 1 "), charged
        w.spout.ack(msg_id)
        assert str(msg_id.offset) not in metadata(commits, tp)["charged"]   # deleted before anything else goes out
        w.collector.emitted.clear()
    w.spout.next_tuple()
    [((got,), msg_id)] = w.collector.emitted
    assert got == "v3" and metadata(commits, tp)["charged"]["3"].startswith("1 1 1 ")
    w.spout.close()
    # taken back: it was not in flight when its worker died; its level stays (it goes alone again)
    assert metadata(commits, tp)["charged"]["3"].startswith("0 0 1 ")
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
    w.spout.next_tuple()   # "old" goes out in a group of suspects, its level raised: "0 0 1"
    w = Worker({tp: ["old"]}, commits, dead, clock, max_retries=0)   # died with its group
    w.spout.next_tuple()   # "old" goes out alone, charged "1 1 1": past max_retries 0 if it dies
    assert metadata(commits, tp)["charged"]["0"].startswith("1 1 1 ")
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
    w.spout.next_tuple()   # "a" and "b" in a group of suspects
    w = Worker({tp: ["a", "b"]}, commits, dead, clock, max_retries=0)
    w.spout.next_tuple()   # "a" alone, charged: it would be given up at the next restart
    assert metadata(commits, tp)["charged"]["0"].startswith("1 1 1 ")
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
    in flight. In the worker's next life every record of both partitions is a suspect (below
    ``emittedTo``), and one task's group goes out at a time: while task 0's group of 8 is out,
    task 1 emits nothing. The worker dies with that group out: in its next life task 0's 8 go
    alone, one at a time across both tasks, each charged as a death before it goes (were it
    alone only in its own task, the other task's poison record could kill the worker beside it,
    and charge it that death), then task 1's group. Every record is counted: all 16 go out once
    each in the last life, in their partition's order, marked before they go and unmarked after."""
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
    def send(tasks) -> list[tuple[int, str, MessageId]]:
        """What the tasks send before they wait for their tuples' trees (task, value, id)."""
        for _ in range(12):
            clock.advance(0.01)
            for spout, _ in tasks:
                spout.next_tuple()
        out = [(i, v, msg_id) for i, (_, c) in enumerate(tasks) for (v,), msg_id in c.emitted]
        for _, c in tasks:
            c.emitted.clear()
        return out

    tasks = life()   # the worker died: no close, nothing committed since
    sent = send(tasks)
    assert [(i, v) for i, v, _ in sent] == [(0, v) for v in logs[TopicPartition("t", 0)]]   # task 0's group
    assert all(metadata(commits, m.tp)["charged"][str(m.offset)].startswith("0 0 1 ") for _, _, m in sent)
    tasks = life()   # it died with task 0's group out: its 8 go alone now
    out: dict[int, list[str]] = {0: [], 1: []}
    rounds = []
    while sent := send(tasks):
        assert len(rounds) < 20, rounds
        [task] = {i for i, _, _ in sent}   # one task's suspects at a time in the worker
        rounds.append((task, len(sent)))
        for i, value, msg_id in sent:
            spout, _ = tasks[i]
            mark = metadata(commits, msg_id.tp)["charged"][str(msg_id.offset)]
            assert mark.startswith("1 1 1 " if i == 0 else "0 0 1 "), mark   # alone: charged as a death
            spout.ack(msg_id)
            out[i].append(value)
        for _, _, msg_id in sent:   # each mark gone with its ack, committed before the next round
            assert str(msg_id.offset) not in metadata(commits, msg_id.tp)["charged"]
    assert rounds == [(0, 1)] * 8 + [(1, 8)]
    assert out == {p: logs[TopicPartition("t", p)] for p in range(2)}   # each once, in order, none lost
    assert dead == [] and all(metadata(commits, tp)["charged"] == {} for tp in logs)
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


@dataclass
class Drain:
    """What `drain` counted: the rounds of tuple trees, the worker deaths, the values acked (per
    value), the dead letters, and the good values a death left charged (a failure in their mark)."""

    rounds: int
    deaths: int
    out: collections.Counter[str]
    dead: list[tuple[str, str]]
    good_charged: list[str]


def drain(n: int, poison: set[int], max_retries: int = MAX_RETRIES) -> Drain:
    """The spout's worker dies with the ``n`` records of 2 partitions in flight (record i is
    ``poison-i`` if i is in ``poison``, else ``v<i>``); then, life after life, what the spout sends
    before it waits for its tuples' trees is one round (behind a stateful bolt that acks at its
    checkpoint, a checkpoint): a poison record among them kills the worker (no ack, no close:
    what the commits keep stays, as a SIGKILL leaves it), else all are acked. Each record sent as
    a suspect has its mark committed before it went out; checked here."""
    vals = [f"poison-{i}" if i in poison else f"v{i}" for i in range(n)]
    logs, commits, dead = logs_of(vals), {}, []
    clock = SimulatedClock()
    w = Worker(logs, commits, dead, clock, max_retries)
    while len(w.collector.emitted) < n:   # max spout pending n: all in flight together
        w.spout.next_tuple()
    out: collections.Counter[str] = collections.Counter()
    good_charged: list[str] = []
    rounds = deaths = 0
    while True:   # the first worker died with them; each pass is a life
        w = Worker(logs, commits, dead, clock, max_retries)
        died = False
        while not died:
            assert rounds < 5 * n, f"{rounds} rounds, {len(out)} of {n - len(poison)} good values out"
            idle = 0
            while idle < 3:   # what it sends before it waits for the trees out
                clock.advance(0.01)
                before = len(w.collector.emitted)
                w.spout.next_tuple()
                idle = idle + 1 if len(w.collector.emitted) == before else 0
            sent = w.collector.emitted
            w.collector.emitted = []
            if not sent:
                break
            rounds += 1
            for _, msg_id in sent:   # marked before it went out: in a group its level, alone its charge
                assert str(msg_id.offset) in metadata(commits, msg_id.tp)["charged"], msg_id
            if any(v in {vals[i] for i in poison} for (v,), _ in sent):
                deaths += 1
                died = True   # the worker dies with them
                for tp, committed in commits.items():
                    kept = read_charges(committed.metadata)
                    good_charged += [logs[tp][o] for o, c in kept.charged.items()
                                     if c.charge.retries and not logs[tp][o].startswith("poison")] if kept else []
                continue
            for (v,), msg_id in sent:
                out[v] += 1
                w.spout.ack(msg_id)
        if not died:
            break
    clock.advance(1.0)
    w.spout.next_tuple()   # the commit timer: what is acked and dead-lettered is committed
    assert all(commits[tp].offset == len(log) for tp, log in logs.items()), commits
    for tp in logs:   # every mark deleted with its record, every dead mark committed past
        assert metadata(commits, tp)["charged"] == {} and metadata(commits, tp)["dead"] == {}, commits[tp]
    w.spout.close()
    return Drain(rounds, deaths, out, dead, good_charged)


def test_after_its_worker_died_the_records_it_held_drain_in_groups_of_suspects():
    """The spout's worker dies with 250 records of 2 partitions in flight (max spout pending 250;
    behind a stateful bolt that acks only at its checkpoint, each round of trees below is a
    checkpoint). Its next life reads them again below ``emittedTo``, all suspects, and sends
    them in groups of 32 (`SUSPECT_GROUPS`), the partitions' together: each one's level raised
    ("0 0 1 <tag>") in a commit before it goes out, nothing else beside the group, the next group
    once every tree of this one ended (one commit then: the marks deleted, the offsets moved).
    8 rounds; on main each went alone after the one before it: 250 rounds (at Storm's 1 s
    checkpoints, over 4 minutes before a new record flows). Every record counted: each out once
    in the second life, acked, none charged or left marked, none dead-lettered, every offset
    committed."""
    clean = drain(250, set())
    assert (clean.rounds, clean.deaths, clean.dead, clean.good_charged) == (-(-250 // SUSPECT_GROUPS[0]), 0, [], [])
    assert clean.rounds == 8 and clean.out == {f"v{i}": 1 for i in range(250)}


def test_a_poison_record_among_the_suspects_is_isolated_charged_only_alone_and_dead_lettered_once():
    """The same with one record among the 250 that kills the worker each time it is processed:
    its group's death raises the level of the 32 in it, nothing charged; they go alone next,
    and only the poison one is charged, for its deaths alone, and dead-lettered once after
    ``max_retries`` + 1 = 4 of them (5 deaths after the first: one in its group, 4 alone), the
    reason saying so. Every good record is acked (once, or again where a death caught it in
    flight), none is ever charged; the other groups go 32 at a time."""
    poisoned = drain(250, {137})
    assert [v for v, _ in poisoned.dead] == ["poison-137"] and poisoned.good_charged == []
    [(_, why)] = poisoned.dead
    assert why == "failed 4 times (max_retries 3): its worker died each of the 4 times it was in flight alone", why
    assert set(poisoned.out) == {f"v{i}" for i in range(250) if i != 137}
    assert poisoned.deaths == 1 + MAX_RETRIES + 1
    # its group's 31 good ones alone once each, the poison one alone 4 times (the 5th reading
    # dead-letters it, no round); the 218 others in 7 groups, the group that died counted once
    print(f"{poisoned.rounds} rounds, {poisoned.deaths} deaths, {sum(poisoned.out.values()) - len(poisoned.out)} duplicates")
    assert poisoned.rounds == 7 + 1 + 31 + 4, poisoned.rounds


def test_a_groups_marks_end_with_its_members_a_failure_it_caused_charged_any_other_and_close_taking_the_level_back():
    """A group of 6 suspects out (each "0 0 1 <tag>" committed before it went out): one fails as
    a bolt failed it (charged "1 0": one failure it caused, no death, its level back to 0), one
    times out (its mark gone: its level taken back, nothing charged), one fails as worker-died
    (charged, and it goes alone next), the others are acked; the group's end commits all that
    in one commit, with the offsets acked. Then a group out when the spout closes: each one's
    level is taken back (its worker did not die with it), no mark left."""
    tp = TopicPartition("t", 0)
    logs, commits, dead = {tp: [f"v{i}" for i in range(6)]}, {}, []
    clock = SimulatedClock()
    w = Worker(logs, commits, dead, clock)
    for _ in range(6):
        w.spout.next_tuple()
    w = Worker(logs, commits, dead, clock)   # the first one died with all 6 out
    for _ in range(8):
        w.spout.next_tuple()
    sent = {v: msg_id for (v,), msg_id in w.collector.emitted}
    assert list(sent) == logs[tp] and all(c.startswith("0 0 1 ") for c in metadata(commits, tp)["charged"].values())
    calls = len(w.spout.consumer.commit_calls)
    w.spout.fail(sent["v1"])
    w.spout.fail_with(sent["v2"], FailureCause(TIMEOUT))
    w.spout.fail_with(sent["v3"], FailureCause(WORKER_DIED, "count", 4, "", "exit status 7"))
    for v in ("v0", "v4", "v5"):
        w.spout.ack(sent[v])
    assert len(w.spout.consumer.commit_calls) == calls + 1   # one commit, at the group's end
    assert commits[tp].offset == 1   # v0 acked; v1 waits for its retry
    charged = metadata(commits, tp)["charged"]
    assert set(charged) == {"1", "3"} and charged["1"].startswith("1 0 ") and charged["3"].startswith("1 0 "), charged
    w.collector.emitted.clear()
    clock.advance(1.0)
    for _ in range(3):
        w.spout.next_tuple()
    # v1 (level 0) in a group, then v2 joins; v3 (worker-died) waits to go alone
    assert [v for (v,), _ in w.collector.emitted] == ["v1", "v2"]
    assert metadata(commits, tp)["charged"]["1"].startswith("1 0 1 ")
    w.spout.close()
    assert set(metadata(commits, tp)["charged"]) == {"1", "3"}   # the levels taken back, the charges kept
    assert metadata(commits, tp)["charged"]["1"].startswith("1 0 ") and dead == []


def test_a_poison_record_behind_suspects_held_in_a_window_is_the_only_dead_letter():
    """300 records on one partition; record 120 kills the worker each time it is processed,
    upstream of an event-time window that acks a record once one 10 newer went out (in the same
    life). After its deaths beside others and in a group of suspects, each suspect goes alone;
    the window holds it for the message timeout (30 simulated seconds), it is set aside and the
    next goes beside it, until 120 goes and kills the worker. Before, each suspect set aside
    kept the death charged before it went out, so 120's deaths dead-lettered the good records
    set aside beside it too; now only 120 is dead-lettered, after max_retries + 1 deaths alone,
    and every other record is acked and committed."""
    tp = TopicPartition("t", 0)
    logs, commits, dead = {tp: [str(i) for i in range(300)]}, {}, []
    clock = SimulatedClock()
    acked: set[int] = set()
    deaths = 0
    while not (tp in commits and commits[tp].offset == 300):
        assert deaths <= 6, f"{deaths} deaths"
        w = Worker(logs, commits, dead, clock)
        held: dict[int, MessageId] = {}   # emitted in this life, held by the window
        newest = -1
        for _ in range(6000):   # 600 simulated seconds a life at most
            clock.advance(0.1)
            before = len(w.collector.emitted)
            w.spout.next_tuple()
            for (value,), msg_id in w.collector.emitted[before:]:
                held[int(value)] = msg_id
                newest = max(newest, int(value))
            if 120 in held:
                deaths += 1
                break   # the old spout dropped: no close
            for line in [x for x in held if x <= newest - 10 or newest == 299]:
                acked.add(line)   # fired by a record 10 newer, or all at the end of the input
                w.spout.ack(held.pop(line))
        else:
            w.spout.close()
    assert [v for v, _ in dead] == ["120"]
    assert re.fullmatch(r"failed 4 times \(max_retries 3\): its worker died each of the 4 times it was "
                        r"in flight alone", dead[0][1]), dead[0][1]
    assert acked == set(range(300)) - {120}
    assert deaths == 6
    assert metadata(commits, tp)["charged"] == {}
