"""The one retry backoff every retrying spout uses: storm-kafka-client's
``KafkaSpoutRetryExponentialBackoff`` formula, checked against values computed by hand from its
``nextTime`` (numFails 1: initialDelay; else delayPeriod * 2^(numFails - 1); capped at maxDelay),
and each spout's use of it."""

from __future__ import annotations

import random
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from squall._failure import WORKER_DIED, WORKER_LOST, FailureCause
from squall.engine.clock import SimulatedClock
from squall.external import retry
from squall.external.files import FileSpout, LineAt
from squall.external.redis_streams import ExponentialBackoff, RedisStreamSpout
from squall.external.retry import (
    SUSPECT_GROUPS,
    AloneGate,
    Charge,
    RetryBackoff,
    RetrySchedule,
    WorkerGate,
    group_size,
    worker_gate,
)

from .test_file_progress import Context
from .test_file_record_limit import Collector


def test_storm_default_service_delays():
    # KafkaSpoutConfig.DEFAULT_RETRY_SERVICE: (seconds(0), milliSeconds(2), Integer.MAX_VALUE, seconds(10))
    b = RetryBackoff()
    # Integer.MAX_VALUE is spelt one way, None (as every spout's max_retries): no limit
    assert (b.initial_delay, b.delay_period, b.max_retries, b.max_delay) == (0.0, 0.002, None, 10.0)
    # 0; 2 ms * 2 = 4 ms; 2 ms * 4 = 8 ms; ...; 2 ms * 4096 = 8.192 s; 2 ms * 8192 = 16.384 s -> 10 s
    assert [b.delay(n) for n in (1, 2, 3, 4)] == [0.0, 0.004, 0.008, 0.016]
    assert b.delay(13) == pytest.approx(8.192) and b.delay(14) == 10.0 and b.delay(10**6) == 10.0
    assert not b.gives_up(2**31) and not b.gives_up(10**12)


def test_first_retry_waits_the_initial_delay_and_later_ones_double_the_period():
    # (initial 1 s, period 0.5 s, cap 3 s): n=1 -> 1 s; n=2 -> 0.5*2 = 1 s; n=3 -> 0.5*4 = 2 s; n=4 -> 4 s capped to 3 s
    b = RetryBackoff(initial_delay=1.0, delay_period=0.5, max_retries=3, max_delay=3.0)
    assert [b.delay(n) for n in (1, 2, 3, 4)] == [1.0, 1.0, 2.0, 3.0]
    # Storm's test service createOneSecondWaitRetryService: (1 s, 0 s, 1, 1 s)
    one = RetryBackoff(1.0, 0.0, 1, 1.0)
    assert [one.delay(n) for n in (1, 2)] == [1.0, 0.0] and not one.gives_up(1) and one.gives_up(2)
    assert RetryBackoff(max_retries=None).gives_up(10**9) is False
    assert RetryBackoff(max_retries=0).gives_up(1)


@pytest.mark.parametrize("kw, says", [({"initial_delay": -1}, "initial_delay"), ({"delay_period": "2ms"}, "delay_period"),
                                      ({"max_retries": -1}, "max_retries"), ({"max_delay": float("nan")}, "max_delay")])
def test_bad_arguments_are_named(kw, says):
    with pytest.raises(ValueError, match=f"RetryBackoff: {says}"):
        RetryBackoff(**kw)


def test_the_schedule_gives_due_records_in_due_order_and_forgets_rescheduled_ones():
    s: RetrySchedule[str] = RetrySchedule(RetryBackoff(initial_delay=1.0, delay_period=1.0, max_retries=2, max_delay=10))
    assert s.schedule("a", 2, now=0.0) and s.schedule("b", 1, now=0.0)   # a due at 2, b at 1
    assert s.pop_ready(0.5) is None and s.is_scheduled("a") and not s.is_ready("a", 1.5)
    s.reschedule("b", 1, now=0.5)                                        # b now due at 1.5
    assert s.pop_ready(1.2) is None
    assert s.pop_ready(3.0) == "b" and s.pop_ready(3.0) == "a" and s.pop_ready(3.0) is None and len(s) == 0
    assert not s.schedule("c", 3, now=0.0) and not s.is_scheduled("c")  # past max_retries 2


def test_the_old_redis_backoff_arguments_give_the_same_delays():
    # retry n waited initial * 2^(n-1): Storm's formula with delay_period = initial_delay
    b = ExponentialBackoff(initial_delay=0.5, multiplier=2.0, max_delay=3.0, max_retries=3)
    assert b == RetryBackoff(initial_delay=0.5, delay_period=0.5, max_retries=3, max_delay=3.0)
    with pytest.raises(ValueError, match="multiplier must be 2"):
        ExponentialBackoff(multiplier=3.0)
    assert RedisStreamSpout("redis://localhost", "s", "g").backoff == RetryBackoff(max_retries=3)


def test_a_file_spouts_failed_line_waits_for_its_backoff(tmp_path: Path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.txt").write_text("x\ny\n")
    clock = SimulatedClock()
    spout = FileSpout(src, quiet_secs=0, commit_every=1, poll_secs=0, progress_dir=tmp_path / "local", clock=clock,
                      backoff=RetryBackoff(initial_delay=1.0, delay_period=1.0, max_retries=2, max_delay=10.0))
    out = Collector()
    spout.open({}, Context(0, 1), out)
    spout.next_tuple()
    assert out.emitted == [("x", LineAt("a.txt", 0))]
    spout.fail(LineAt("a.txt", 0))           # first failure: due after initial_delay, 1 s
    spout.next_tuple()                       # not due yet: the next line instead
    clock.advance(0.9)
    spout.next_tuple()                       # nothing more to read, and x is not due
    assert [v for v, _ in out.emitted] == ["x", "y"]
    clock.advance(0.1)
    spout.next_tuple()
    assert [v for v, _ in out.emitted] == ["x", "y", "x"]
    spout.fail(LineAt("a.txt", 0))           # second: 1 s * 2 = 2 s
    clock.advance(1.9)
    spout.next_tuple()
    assert len(out.emitted) == 3
    clock.advance(0.1)
    spout.next_tuple()
    assert [v for v, _ in out.emitted] == ["x", "y", "x", "x"]


def test_a_file_spouts_max_retries_must_agree_with_its_backoff(tmp_path: Path):
    assert FileSpout(tmp_path, max_retries=5).backoff == RetryBackoff(max_retries=5)
    assert FileSpout(tmp_path, backoff=RetryBackoff(max_retries=7)).max_retries == 7
    with pytest.raises(ValueError, match="FileSpout: max_retries=5 disagrees"):
        FileSpout(tmp_path, max_retries=5, backoff=RetryBackoff(max_retries=7))
    with pytest.raises(ValueError, match="FileSpout: max_retries must be >= 0"):
        FileSpout(tmp_path, max_retries=-1)


def test_kafkas_retry_service_holds_memory_for_the_records_scheduled_not_for_every_failure_ever():
    # The Kafka spout asks which records are due (ready) and unschedules each as it emits it
    # again, never popping: 20,000 failures of 50 records, each failed again and again, must not
    # keep an entry per failure. Before, its heap held all 20,000 (about 2.5 MB).
    import tracemalloc

    from squall.external.kafka import MessageId, RetryService

    clock = SimulatedClock()
    service = RetryService(RetryBackoff(initial_delay=0.0, delay_period=0.001, max_retries=None, max_delay=0.01),
                           clock)
    ids = [MessageId("t", 0, offset) for offset in range(50)]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for n in range(20_000):
            m = ids[n % 50]
            assert service.schedule(m, 1 + n // 50 % 5)
            if n % 50 == 49:               # a poll: every record is due and emitted again
                clock.advance(0.01)
                assert service.ready_message_count() == 50
                for m in ids:
                    assert service.is_ready(m) and service.remove(m)
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < 200_000, grown
    # and a schedule rebuilt along the way still gives its records in due order, each once
    s: RetrySchedule[int] = RetrySchedule(RetryBackoff(initial_delay=0.0, delay_period=1.0, max_retries=None,
                                                       max_delay=100.0))
    for n in range(1000):
        s.schedule(n % 10, 1 + n % 7, now=float(n // 10))
    for k in (0, 3, 6, 9):
        s.remove(k)
    due = [s.pop_ready(1e9) for _ in range(10)]
    assert sorted(d for d in due if d is not None) == [1, 2, 4, 5, 7, 8] and len(s) == 0


def test_a_kafka_record_past_its_retries_is_dead_lettered_by_its_place_and_committed_past():
    # 20 records, every third failed by its bolt each time: max_retries 2 lets each such record
    # be emitted 3 times, then dead_letter gets its topic, partition and offset (no contents: the
    # spout keeps none while a record is in flight) and the offset commits as if acked
    from .test_kafka import TP, MemoryConsumer, open_spout

    dead = []
    consumer = MemoryConsumer({TP: [f"r{i}" for i in range(20)]})
    spout, col, clock = open_spout(consumer, retry=RetryBackoff(initial_delay=0.0, delay_period=0.5, max_retries=2,
                                                                max_delay=1.0),
                                   dead_letter=lambda r, why: dead.append((r, why)))
    acked, handled = set(), 0
    for _ in range(500):
        spout.next_tuple()
        for _, msg_id in col.emitted[handled:]:
            if msg_id.offset % 3 == 0:
                spout.fail(msg_id)
            else:
                spout.ack(msg_id)
                acked.add(msg_id.offset)
        handled = len(col.emitted)
        clock.advance(0.25)
    assert sorted(acked) == [o for o in range(20) if o % 3]
    assert sorted(r.offset for r, _ in dead) == [o for o in range(20) if o % 3 == 0]
    assert all((r.topic, r.partition, r.key, r.value) == ("t", 0, None, None) for r, _ in dead)
    assert all(why.startswith("failed 3 times (max_retries 2)") for _, why in dead)
    assert [v[0] for v, m in col.emitted if m.offset == 0] == ["r0"] * 3   # the first emit and 2 retries
    assert consumer.commits[TP].offset == 20                               # every record done


def test_alone_gate_holds_a_suspect_until_nothing_is_in_flight_and_everything_beside_one():
    """The rules both the Redis Streams and file spouts follow: a suspect waits for what is in
    flight, goes alone, and nothing goes out beside it until it ends; a charge reads back as it
    was written, and a malformed one is refused."""
    gate: AloneGate[int] = AloneGate(3)
    assert not gate.hold(False) and not gate.goes_alone(False)
    gate.emitted(1, False)
    assert gate.hold(True) and not gate.hold(False)   # a suspect waits; others go
    assert not gate.ended(1)
    assert not gate.hold(True) and gate.goes_alone(True)
    gate.emitted(2, True)
    assert gate.hold(False) and gate.hold(True)      # nothing beside it
    assert gate.ended(2) and not gate.hold(False)
    assert not AloneGate(None).hold(True) and not AloneGate(None).goes_alone(True)   # no limit, no holding
    # only in flight in a worker that died: not a suspect (being alone would charge it nothing, and
    # sent one tree at a time, a worker's death held every record it had back for minutes)
    assert not AloneGate.lost_worker(FailureCause(WORKER_LOST, "", -1, "", ""))
    assert not AloneGate.lost_worker(FailureCause(WORKER_LOST, "shell", 3, "", ""))   # a process in one
    # a bolt was executing it when its worker died: charged (the record's doing) and a suspect
    died = FailureCause(WORKER_DIED, "check", 4, "", "exit status 7")
    assert AloneGate.lost_worker(died) and died.record_caused
    assert died.describe() == "its worker died while [check] task 4 executed it: exit status 7"
    assert FailureCause.from_wire(died.wire()) == died
    assert Charge.parse(str(Charge(2, 1).dying())) == Charge(3, 2) and Charge.parse(None) == Charge()
    for bad in ("x", "1 2", "-1 0", ""):
        with pytest.raises(ValueError):
            Charge.parse(bad)
    reason, cause = gate.death_reason(Charge(4, 4))
    assert reason == "failed 4 times (max_retries 3): its worker died each of the 4 times it was in flight alone"
    assert cause.kind == WORKER_LOST and cause.message == reason.split(": ", 1)[1]


def test_a_suspect_goes_alone_in_the_whole_worker_not_only_among_its_own_tasks_records():
    """Two spout tasks of one worker (a, b) join its `WorkerGate`. a's suspect waits while b's
    record is in flight, and claims the worker meanwhile: b's next records wait too, so what is
    in flight drains. Once a's suspect is out, nothing of either goes beside it; its end lets
    both go on. Were the rule per task, b's poison record could kill the worker beside a's good
    suspect, and charge a that death."""
    w = WorkerGate()
    a: AloneGate[int] = AloneGate(3, w)
    b: AloneGate[int] = AloneGate(3, w)
    assert not b.hold(False)
    b.emitted(10, False)
    b.turn_ended()
    assert w.in_flight == 1
    assert a.hold(True) and w.owner is a     # b's record is in flight: a's suspect waits, claiming
    a.turn_ended()                           # it waits on: the claim stays
    assert b.hold(False) and b.hold(True)    # b holds back, so what is in flight drains
    b.turn_ended()
    assert not b.ended(10) and w.in_flight == 0
    assert not a.hold(True) and a.goes_alone(True)
    a.emitted(1, True)
    a.turn_ended()
    assert (a.alone, w.owner, w.in_flight) == (1, a, 1)
    assert b.hold(False) and b.hold(True) and a.hold(False) and a.hold(True)   # nothing beside it
    a.turn_ended()
    b.turn_ended()
    assert a.ended(1) and w.owner is None and w.in_flight == 0
    assert not b.hold(False)
    b.emitted(11, False)
    assert not a.hold(False)
    a.emitted(2, False)
    assert w.in_flight == 2
    assert b.ended(11) is False and a.ended(2) is False and w.in_flight == 0


def test_a_task_without_a_limit_counts_for_the_others_suspects_and_waits_for_them():
    """A spout task with ``max_retries`` None keeps no charges and sends no suspect alone, but
    its records may kill the worker as well: a counting task's suspect waits for them, and it
    holds back while that suspect is out."""
    w = WorkerGate()
    counting: AloneGate[int] = AloneGate(0, w)
    unlimited: AloneGate[str] = AloneGate(None, w)
    assert not unlimited.hold(True) and not unlimited.goes_alone(True)   # its own suspects go together
    unlimited.emitted("x", False)
    assert not unlimited.hold(True)
    unlimited.emitted("y", False)
    assert counting.hold(True)
    assert unlimited.hold(False) and unlimited.hold(True)
    unlimited.ended("x")
    unlimited.ended("y")
    assert not counting.hold(True)
    counting.emitted(1, True)
    assert unlimited.hold(False)
    assert counting.ended(1) and not unlimited.hold(False)


def test_a_claim_ends_when_its_task_holds_no_suspect_back_and_a_record_let_go_but_not_sent_stops_counting():
    """What keeps a task from holding the worker back for ever: a claim lasts only while its
    task's suspect is held back in each call (one that left the queue, dead-lettered or taken
    by another consumer, ends it at the call's end), a record `hold` let go and that did not go
    out stops counting at the call's end, and `clear` forgets a task's records."""
    w = WorkerGate()
    a: AloneGate[int] = AloneGate(3, w)
    b: AloneGate[int] = AloneGate(3, w)
    assert not b.hold(False)
    b.emitted(10, False)
    assert a.hold(True) and w.owner is a
    a.turn_ended()                           # held back in this call: the claim stays
    assert w.owner is a
    a.turn_ended()                           # a call that held no suspect back: it ends
    assert w.owner is None and not b.hold(False)
    b.turn_ended()                           # let go, not emitted (dead-lettered, say)
    assert w.in_flight == 1
    assert a.hold(True)
    b.ended(10)
    assert not a.hold(True) and w.owner is a
    a.turn_ended()                           # let go alone, its charge not written: not out
    assert (w.owner, w.in_flight) == (None, 0)
    assert not b.hold(False)
    b.emitted(11, False)
    assert not b.hold(False)
    b.emitted(12, False)
    assert a.hold(True) and w.in_flight == 2
    b.clear()                                # b closes
    assert w.in_flight == 0 and not a.hold(True)
    a.emitted(1, True)
    a.clear()
    assert (w.owner, w.in_flight, a.alone) == (None, 0, None)
    assert not b.hold(False)


def test_spout_tasks_on_several_threads_never_send_a_suspect_beside_another_record():
    """Spout tasks of one worker on loops of their own (``topology.executor.own.thread``) ask
    the gate at the same moments: a suspect is never out beside another record of the worker,
    and the counts end at zero. Each thread plays a task: let go, emitted, noted in ``out``; the
    note is taken back before ``ended``. Each task goes on until it has sent its share (a
    starved task would not: the deadline only bounds a failure), not for a number of turns: a
    task that ran its turns while another's suspect held the worker, on a loaded machine, sent
    nothing without anything being wrong (1 run in 4)."""
    w = WorkerGate()
    share = 600
    deadline = time.monotonic() + 120
    out: dict[tuple[int, int], bool] = {}   # (task, record) -> alone
    out_lock = threading.Lock()
    wrong: list[str] = []
    sent = [0, 0, 0]

    def task(index: int) -> None:
        gate: AloneGate[int] = AloneGate(3, w)
        rng = random.Random(index)
        mine: list[int] = []
        n = 0
        while sent[index] < share and time.monotonic() < deadline:
            n += 1
            suspect = rng.random() < 0.2
            if not gate.hold(suspect):
                alone = gate.goes_alone(suspect)
                with out_lock:
                    if (alone and out) or any(out.values()):
                        wrong.append(f"task {index} record {n} (alone {alone}) beside {dict(out)}")
                    out[index, n] = alone
                gate.emitted(n, alone)
                mine.append(n)
                sent[index] += 1
            gate.turn_ended()
            while mine and (len(mine) > 3 or rng.random() < 0.5):
                done = mine.pop(rng.randrange(len(mine)))
                with out_lock:
                    del out[index, done]
                gate.ended(done)
        for done in mine:
            with out_lock:
                del out[index, done]
            gate.ended(done)
        gate.clear()   # its close: a claim of a suspect held back in its last call ends

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # switch threads as often as Python will
    try:
        threads = [threading.Thread(target=task, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not wrong, wrong[:5]
    assert all(s >= share for s in sent), sent
    assert (w.in_flight, w.owner, out) == (0, None, {})


def test_the_tasks_of_one_worker_get_one_gate_and_a_task_outside_a_worker_its_own():
    from squall._worker_resources import WorkerResources

    class InWorker:
        worker_resources = WorkerResources()

    assert worker_gate(InWorker()) is worker_gate(InWorker())
    assert worker_gate(object()) is not worker_gate(object())   # no worker_resources: its own


@dataclass
class _Drain:
    """What `_drain_suspects` counted: the tree round trips, the worker deaths, the ids acked
    and dead-lettered, and the good ids a death left charged (a failure in their mark)."""

    rounds: int
    deaths: int
    acked: list[int]
    dead: list[int]
    good_charged: list[int]


def _drain_suspects(n: int, poison: set[int], max_retries: int) -> _Drain:
    """Plays a spout whose worker died with ``n`` records pending (ids 0..n-1, each a suspect
    now) through `AloneGate` and `Charge` as the Redis Streams and file spouts use them: each
    life of the worker takes what is pending in order (dead-lettering one whose charge is past
    ``max_retries``), sends what the gate lets go, writing each suspect's mark first (a group of
    one: `Charge.dying`; larger: `Charge.in_group`), and at the end of a round (one tree round
    trip) either a poison id among those out kills the worker (its marks stay, nothing else is
    written) or all are acked (their marks deleted)."""
    marks: dict[int, Charge] = {}      # the durable marks, by id
    pending = list(range(n))
    acked: list[int] = []
    dead: list[int] = []
    good_charged: list[int] = []
    rounds = deaths = 0
    while pending:
        gate: AloneGate[int] = AloneGate(max_retries)   # a new life of the worker
        for i in [i for i in pending if marks.get(i, Charge()).retries > max_retries]:
            dead.append(i)
            pending.remove(i)
            marks.pop(i)
        queue = list(pending)
        alive = True
        while alive and queue:
            out = []
            while queue:
                size = group_size(marks.get(queue[0], Charge()).level)
                if gate.hold(True, size):
                    break
                i = queue.pop(0)
                mark = marks.get(i, Charge())
                marks[i] = mark.dying() if size == 1 else mark.in_group()
                gate.emitted(i, gate.goes_alone(True), size)
                out.append(i)
            gate.turn_ended()
            assert out, "the gate let nothing go with nothing in flight"
            rounds += 1
            if poison & set(out):
                deaths += 1
                alive = False   # the worker dies with them: no ack, no fail, no close
                # what the death leaves charged is charged for good
                good_charged += [i for i, mark in marks.items() if mark.retries and i not in poison]
                continue
            for i in out:
                assert gate.ended(i)
                marks.pop(i)
                acked.append(i)
                pending.remove(i)
    assert not marks, marks   # every mark deleted with its ack or dead letter
    return _Drain(rounds, deaths, acked, dead, good_charged)


def test_suspects_go_out_in_groups_and_a_poison_one_is_isolated_alone_and_charged(monkeypatch):
    """Group testing (`SUSPECT_GROUPS`): 250 suspects pending after their spout's worker died
    (max spout pending 200 plus a read batch of 50) drain in groups of 32 (8 tree round trips,
    with a stateful bolt 8 checkpoints) instead of one at a time (250, as each went alone before
    groups: ~55 s at 200 ms checkpoints). With a poison record among them, its group's death
    raises the level of the 32 in it, nothing charged; they go alone next, and only the poison
    one is charged, for its deaths alone, and dead-lettered after ``max_retries`` + 1 of them.
    Every record counted: each good one acked once, never charged."""
    clean = _drain_suspects(250, set(), max_retries=3)
    assert (clean.rounds, clean.deaths, clean.dead, clean.good_charged) == (8, 0, [], [])
    assert sorted(clean.acked) == list(range(250))

    poisoned = _drain_suspects(250, {137}, max_retries=3)
    assert poisoned.dead == [137] and poisoned.good_charged == []
    assert sorted(poisoned.acked) == [i for i in range(250) if i != 137]
    # one death in its group (128..159), then 4 alone: charged "4 4 1", past max_retries 3
    assert poisoned.deaths == 1 + 4
    # 0..127: 4 groups; 128..159: the group that died; 128..136 alone; 137 alone 4 times; 138..159
    # alone; 160..249: 3 groups
    assert poisoned.rounds == 4 + 1 + 9 + 4 + 22 + 3

    monkeypatch.setattr(retry, "SUSPECT_GROUPS", (1,))   # each alone: the rule before groups
    alone = _drain_suspects(250, {137}, max_retries=3)
    assert (alone.rounds, alone.deaths, alone.dead, alone.good_charged) == (249 + 4, 4, [137], [])


def test_a_mark_keeps_its_level_and_reads_the_text_before_levels_as_level_0():
    """`Charge`'s text: two fields (as written before levels) are level 0; a level is written as
    a third field only when it is not 0, so a spout of before levels reads what this one writes
    unless a group's death raised it. A group's mark raises the level without charging; the
    mark alone charges a death and keeps the level."""
    assert Charge.parse("2 1") == Charge(2, 1, 0) and str(Charge(2, 1)) == "2 1"
    assert Charge.parse("0 0 1") == Charge(0, 0, 1) and str(Charge(0, 0, 1)) == "0 0 1"
    assert Charge(0, 0).in_group() == Charge(0, 0, 1) and Charge(0, 0, 1).dying() == Charge(1, 1, 1)
    assert Charge(0, 0, 1).is_mark and not Charge(0, 0, 0).is_mark and Charge(1, 0).is_mark
    # deaths beside others (a suspect alone set aside): a fourth field, only when not 0; its
    # death charged before it went out taken back
    assert Charge.parse("1 1 0 2") == Charge(1, 1, 0, 2) and str(Charge(1, 1, 0, 2)) == "1 1 0 2"
    assert str(Charge(1, 1, 2, 0)) == "1 1 2" and Charge(0, 0, 0, 1).is_mark
    assert Charge(1, 1, 1).dying().set_aside() == Charge(1, 1, 1, 1)
    for bad in ("1 1 -1", "1 1 1 -1", "1 1 1 1 1", "0 0 x"):
        with pytest.raises(ValueError):
            Charge.parse(bad)
    assert [group_size(level) for level in range(3)] == [SUSPECT_GROUPS[0], SUSPECT_GROUPS[-1], SUSPECT_GROUPS[-1]]
    assert SUSPECT_GROUPS[-1] == 1   # the last level goes alone: only there is a death charged


def test_once_a_group_stood_still_a_suspect_alone_still_waits_for_the_next_groups_trees():
    """``max_retries`` 0: one death charged to a good record dead-letters it. A task's first
    group of suspects stands still for the message timeout (an event-time window holds its
    trees) and is set aside; from then on its groups go out beside what is in flight. Its next
    group (fresh trees, a poison record among them, being processed) is closed as soon as a
    record cannot join it, but its members are still in flight: a suspect to go alone (failed
    as worker-died) waits for them, as for any record in flight. Before, that group's members
    stopped counting at once, the suspect went out "alone" beside them with its death charged
    beforehand, and the poison record's death was charged to it: a good record dead-lettered
    for another's poison. Another task's suspect alone waits for them too."""
    patience = 30.0
    w = WorkerGate()
    gate: AloneGate[int] = AloneGate(0, w, patience)
    other: AloneGate[int] = AloneGate(0, w, patience)
    now = 0.0
    for i in range(32):                       # the first group, all of it out
        assert not gate.hold(True, 32, now)
        gate.emitted(i, gate.goes_alone(True), 32)
        gate.turn_ended()
    for i in range(22):                       # the window acks all but the newest 10
        assert gate.in_group(i) and gate.ended(i)
    while gate.hold(False, 1, now):           # the next line waits for the group to end
        gate.turn_ended()
        now += 0.1
    assert now >= patience                    # it stood still that long: set aside
    gate.emitted(100, False)
    gate.turn_ended()
    for i in range(22, 32):                   # newer lines move the watermark: acked
        assert gate.in_group(i) and gate.ended(i)
    assert gate.ended(100) is False and w.in_flight == 0
    now += 1.0
    for i in (200, 201, 202):                 # the next group, 201 poison: beside nothing
        assert not gate.hold(True, 32, now)
        gate.emitted(i, gate.goes_alone(True), 32)
        gate.turn_ended()
    assert w.in_flight == 3
    # its trees are being processed, not held: a suspect alone waits for them
    assert gate.hold(True, 1, now) and not gate.group   # the group closed: it holds no one back
    gate.turn_ended()
    assert other.hold(False, 1, now + 1.0)    # its claim holds the others back meanwhile
    gate.turn_ended()                         # a call that held no suspect back: it ends
    other.turn_ended()
    assert other.hold(True, 1, now + 1.0)     # another task's suspect alone waits too
    other.turn_ended()
    for i in (200, 201, 202):
        assert gate.in_group(i) and gate.ended(i)
    assert w.in_flight == 0
    assert not other.hold(True, 1, now + 2.0) and other.goes_alone(True)
    other.emitted(300, True)
    other.turn_ended()
    assert other.alone == 300 and w.in_flight == 1
    assert gate.hold(False, 1, now + 2.0) and gate.hold(True, 1, now + 2.0)   # nothing beside it
    gate.turn_ended()
    assert other.ended(300) and (w.in_flight, w.owner) == (0, None)


def test_a_task_held_back_by_a_group_whose_task_went_quiet_goes_on_after_the_message_timeout():
    """Two Kafka spout tasks of one component in one worker, feeding an event-time window (its
    watermark is the newest timestamp of the component's stream, less the lag). After a death,
    a's suspects go out in a group (5 of them: its partitions had no more) and the window holds
    them all until newer records come; b's records, which are those, wait while a's group is
    out. a has nothing more to send, so it never asks the gate again (its queues are empty; a
    task at max spout pending is not asked either): only a task that is held notices that
    nothing moves. Before, b waited for good: a's group was seen standing still only by a's own
    next ``hold``. Now a task held back by another's group (or claim) for the message timeout,
    none of the worker's records ending nor a group opening meanwhile, lets it hold no one back
    any more; its members still count as in flight (a suspect alone waits for them)."""
    patience = 30.0
    w = WorkerGate()
    a: AloneGate[int] = AloneGate(3, w, patience)
    b: AloneGate[int] = AloneGate(3, w, patience)
    now = 0.0
    for i in range(5):
        assert not a.hold(True, 32, now)
        a.emitted(i, a.goes_alone(True), 32)
        a.turn_ended()
    assert a.has_room and w.owner is a
    while b.hold(False, 1, now):              # b's record waits behind the group
        b.turn_ended()
        now += 0.1
        assert now < 3 * patience, "b waits for good behind a group that stood still"
    assert now >= patience                    # it stood still that long
    b.emitted(100, False)
    b.turn_ended()
    assert w.owner is None and w.in_flight == 6
    assert not b.hold(False, 1, now)          # b's next ones go at once
    b.emitted(101, False)
    b.turn_ended()
    assert b.hold(True, 1, now)               # a suspect alone still waits for a's group
    b.turn_ended()
    for i in range(5):                        # newer records moved the watermark: acked
        assert a.in_group(i) and a.ended(i)
    assert not b.ended(100) and not b.ended(101)
    assert (w.in_flight, w.owner, a.group) == (0, b, set())   # its suspect waits, claiming
    assert not b.hold(True, 1, now) and b.goes_alone(True)
    b.emitted(102, True)
    assert a.hold(False, 1, now)              # nothing beside b's suspect alone
    a.turn_ended()
    assert b.ended(102) and (w.in_flight, w.owner) == (0, None)


def test_a_task_held_back_by_a_suspect_just_sent_alone_does_not_count_the_wait_before_it():
    """A task's wait for another's claim restarts when a group of suspects opens: c's suspect
    waited for what was in flight (a's record, held downstream) for the message timeout and
    went out alone beside it; b, held back by c's claim all that time, must not count that
    wait against c's suspect, whose tree has just started (b's poison record beside it would
    charge c's good one)."""
    patience = 30.0
    w = WorkerGate()
    a: AloneGate[int] = AloneGate(3, w, patience)
    b: AloneGate[int] = AloneGate(3, w, patience)
    c: AloneGate[int] = AloneGate(3, w, patience)
    now = 0.0
    assert not a.hold(False, 1, now)
    a.emitted(1, False)
    a.turn_ended()
    while c.hold(True, 1, now):               # c's suspect waits for a's record, claiming
        c.turn_ended()
        assert b.hold(False, 1, now)          # b holds back meanwhile
        b.turn_ended()
        now += 0.1
    assert now >= patience
    c.emitted(2, c.goes_alone(True), 1)       # late: beside a's record, which stood still
    c.turn_ended()
    assert c.alone == 2 and w.owner is c
    for _ in range(int(patience / 0.1) - 5):  # c's tree is fresh: b waits for it
        now += 0.1
        assert b.hold(False, 1, now)
        b.turn_ended()
    assert c.ended(2) and not a.ended(1) and (w.in_flight, w.owner) == (0, None)
