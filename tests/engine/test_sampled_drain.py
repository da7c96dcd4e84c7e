"""A bolt task's drain with Storm's sampled statistics (`squall._native.drain_inbox`, C when
compiled, and a BasicBolt's ack closing the sample): the same figures on both paths."""

from __future__ import annotations

import functools
import itertools
import random
from collections import deque

import pytest

from squall import Fields, Tuple
from squall._errors import FailedException
from squall._native import BasicExecute, drain_inbox
from squall._tuple import Source
from squall.engine.acker import ACK
from squall.engine.bolt_executor import BasicCollector
from squall.engine.executor import TaskStats
from squall.engine.routing import _NOWHERE
from squall.engine.stats import EXECUTE_LATENCY, EXECUTED, PROCESS_LATENCY, TaskStatistics

SRC = Source("split", "default", 1, Fields("word"))
FREQ = 4


def ticking_clock(step: float = 0.001):
    """``now()`` that advances ``step`` seconds at every call."""
    ticks = itertools.count(1)
    return lambda: next(ticks) * step


def inputs(n: int) -> deque:
    return deque(Tuple([f"w{i}"], SRC) for i in range(n))


def test_one_input_in_every_block_is_timed_and_counted_freq_times():
    sampled = TaskStatistics(FREQ, random.Random(3))
    stats = TaskStats()
    seen: list = []
    q = inputs(100)

    ran = drain_inbox(seen.append, q.popleft, 60, stats, sampled, ticking_clock())
    ran += drain_inbox(seen.append, q.popleft, 40, stats, sampled, ticking_clock())

    assert ran == 100 and stats.executed == 100
    assert [t.values[0] for t in seen] == [f"w{i}" for i in range(100)]  # in order, each once
    ks = sampled.key("split", "default")
    assert ks.executed == 100 and ks.execute_n == 100 // FREQ  # whole blocks: one sample each
    assert ks.execute_ms == pytest.approx(1.0 * ks.execute_n)  # one tick between start and end
    snap = sampled.snapshot({}, {})
    assert snap[(EXECUTED, "split", "default")] == 100
    assert snap[(EXECUTE_LATENCY + "#n", "split", "default")] == 25
    # a plain execute never acks: every sample stays open for an ack to come
    assert len(sampled.open_samples) == 25
    assert all(key == id(tup) and ks is _ks for key, (tup, _start, _ks) in sampled.open_samples.items())


def test_open_samples_are_bounded_oldest_first():
    class Small(TaskStatistics):
        __slots__ = ()
        max_open = 5

    sampled = Small(FREQ, random.Random(4))
    seen: list = []
    drain_inbox(seen.append, inputs(200).popleft, 200, TaskStats(), sampled, ticking_clock())

    assert len(sampled.open_samples) == 5
    kept = [entry[0] for entry in sampled.open_samples.values()]
    assert [seen.index(t) for t in kept] == sorted(seen.index(t) for t in kept)
    assert seen.index(kept[0]) >= 200 - 6 * FREQ  # the newest ones


def _basic_collector() -> BasicCollector:
    """A BasicBolt's collector with no downstream (its emits go nowhere), acking on."""
    basic = BasicCollector.__new__(BasicCollector)
    basic.input, basic._out, basic._routers, basic._deliver = None, None, {}, {}
    basic._rand = functools.partial(random.Random(1).getrandbits, 64)
    basic._tuple_type, basic._nowhere, basic._acking = Tuple, _NOWHERE, True
    return basic


def test_a_basic_bolts_ack_closes_its_sample_with_the_process_latency():
    sampled = TaskStatistics(FREQ, random.Random(5))
    stats = TaskStats()
    basic = _basic_collector()
    acker: list = []
    q = deque(Tuple([f"w{i}"], SRC, (i // 10) * 2 + 1, random.Random(i).getrandbits(64)) for i in range(80))
    held: dict = {}
    now = ticking_clock()
    execute = BasicExecute(lambda tup, collector: None, basic, None, None, FailedException, held, stats,
                           sampled.open_samples, sampled, now, q, [acker.append], ACK)

    assert drain_inbox(execute, q.popleft, 80, stats, sampled, now) == 80

    ks = sampled.key("split", "default")
    assert stats.acked == 80 and ks.acked == 80 and ks.latency_n == 20
    # opened at a tick, closed by the ack at the next, before the execute is timed
    assert ks.latency_ms == pytest.approx(1.0 * 20)
    assert ks.execute_ms == pytest.approx(2.0 * 20)
    assert sampled.open_samples == {}
    assert sampled.snapshot({}, {})[(PROCESS_LATENCY + "#n", "split", "default")] == 20
    assert len(acker) == 8  # ten inputs of a tree in a row: one ack message each


def test_an_input_that_raises_is_counted_where_it_ran_and_the_countdown_is_kept():
    sampled = TaskStatistics(FREQ, random.Random(6))
    stats = TaskStats()
    q = inputs(50)
    sampled_at = sampled.left - 1  # the first sampled input's index

    def execute(tup):
        if tup.values[0] == f"w{sampled_at}":
            raise ValueError("bad word")

    with pytest.raises(ValueError, match="bad word"):
        drain_inbox(execute, q.popleft, 50, stats, sampled, ticking_clock())

    assert stats.executed == sampled_at  # those before it
    ks = sampled.key("split", "default")
    assert ks.executed == FREQ and ks.execute_n == 1  # its figures, as Python's finally: adds them
    assert len(q) == 50 - sampled_at - 1
    assert sampled.left == 1  # the next input is where the countdown stood: sampled again


def test_a_basic_bolts_failed_or_raising_sampled_input_is_not_counted_acked_and_leaves_no_sample():
    sampled = TaskStatistics(FREQ, random.Random(7))
    stats = TaskStats()
    basic = _basic_collector()
    acker: list = []
    q = deque(Tuple([f"w{i}"], SRC, 2 * i + 1, random.Random(i).getrandbits(64)) for i in range(80))
    failed: list = []
    errors: list = []
    now = ticking_clock()

    def user_execute(tup, collector):  # every third input fails, every fifth raises
        i = int(tup.values[0][1:])
        if i % 3 == 0:
            raise FailedException("no")
        if i % 5 == 0:
            raise ValueError("bad")

    execute = BasicExecute(user_execute, basic, None, lambda tup, e: failed.append(tup), FailedException, {},
                           stats, sampled.open_samples, sampled, now, q, [acker.append], ACK)
    sampled_at = []
    while q:
        before = sampled.key("split", "default").execute_n
        tup = q[0]
        drain_inbox(execute, q.popleft, 1, stats, sampled, now, lambda tup, e: errors.append(tup))
        if sampled.key("split", "default").execute_n > before:
            sampled_at.append(int(tup.values[0][1:]))

    ks = sampled.key("split", "default")
    acked = [i for i in sampled_at if i % 3 and i % 5]
    assert len(sampled_at) == 20 and acked and len(acked) < 20
    assert ks.latency_n == len(acked) and ks.acked == FREQ * len(acked)  # only the acked ones
    assert ks.latency_ms == pytest.approx(1.0 * len(acked))  # each closed by its own ack, one tick after its start
    # none acked is left open (compiled, none at all: a BasicBolt's sample is held only for its call)
    assert not {int(t.values[0][1:]) for t, _start, _ks in sampled.open_samples.values()} & set(acked)
    assert stats.acked == len([i for i in range(80) if i % 3 and i % 5])
    assert len(failed) == len([i for i in range(80) if i % 3 == 0])
    assert len(errors) == len([i for i in range(80) if i % 3 and i % 5 == 0])


def _drain_all(sampled: TaskStatistics, n: int, step: int) -> TaskStats:
    """``n`` inputs drained ``step`` at a time into a plain execute."""
    stats = TaskStats()
    q = inputs(n)
    now = ticking_clock()
    while q:
        drain_inbox(lambda tup: None, q.popleft, min(step, len(q)), stats, sampled, now)
    return stats


def test_a_class_that_turns_the_countdown_into_a_property_is_read_and_written_through_it():
    class Watched(TaskStatistics):
        __slots__ = ("reads", "writes")

    sampled = Watched(FREQ, random.Random(8))
    sampled.reads = sampled.writes = 0
    _drain_all(sampled, 40, 40)  # plain slots: nothing to watch yet

    def get_left(self):
        self.reads += 1
        return TaskStatistics.left.__get__(self)

    def set_left(self, value):
        self.writes += 1
        TaskStatistics.left.__set__(self, value)

    Watched.left = property(get_left, set_left)  # the class changes after drains have read the slot
    _drain_all(sampled, 60, 20)

    assert (sampled.reads, sampled.writes) == (3, 3)  # one of each a drain
    ks = sampled.key("split", "default")
    assert ks.executed == 100 and ks.execute_n == 100 // FREQ  # the countdown went on where it stood


def test_each_task_draws_its_own_gaps_when_drains_of_two_tasks_alternate():
    alone = [TaskStatistics(FREQ, random.Random(seed)) for seed in (9, 10)]
    for sampled in alone:
        _drain_all(sampled, 400, 7)
    both = [TaskStatistics(FREQ, random.Random(seed)) for seed in (9, 10)]
    queues = [inputs(400), inputs(400)]
    now = ticking_clock()
    while queues[0]:
        for sampled, q in zip(both, queues):
            drain_inbox(lambda tup: None, q.popleft, min(7, len(q)), TaskStats(), sampled, now)

    assert [s.left for s in both] == [s.left for s in alone]
    assert [len(s.open_samples) for s in both] == [len(s.open_samples) for s in alone] == [100, 100]
    # which inputs were sampled: the same positions, task by task
    for a, b in zip(alone, both):
        assert sorted(t.values[0] for t, _s, _k in a.open_samples.values()) == \
            sorted(t.values[0] for t, _s, _k in b.open_samples.values())


def test_gaps_given_as_any_callable_are_called():
    sampled = TaskStatistics(FREQ, random.Random(11))
    sampled.gaps = lambda: 2  # every second input from the first sample on
    sampled.left = 1
    _drain_all(sampled, 50, 50)
    assert sampled.key("split", "default").execute_n == 25


def test_a_plain_bolts_execute_method_runs_as_itself_and_its_errors_go_to_on_error():
    class Bolt:
        def __init__(self) -> None:
            self.seen: list = []

        def execute(self, tup) -> None:
            if tup.values[0] == "w7":
                raise ValueError("seven")
            self.seen.append(tup.values[0])

    bolt = Bolt()
    errors: list = []
    stats = TaskStats()
    sampled = TaskStatistics(0, random.Random(12))  # statistics off: one plain run
    q = inputs(10)

    assert drain_inbox(bolt.execute, q.popleft, 10, stats, sampled, ticking_clock(),
                       lambda tup, e: errors.append((tup.values[0], str(e)))) == 10

    assert bolt.seen == [f"w{i}" for i in range(10) if i != 7]
    assert errors == [("w7", "seven")] and stats.executed == 10
    with pytest.raises(TypeError):  # a method that takes the wrong arguments says so, as called from Python
        drain_inbox(Bolt.__init__.__get__(bolt), inputs(1).popleft, 1, TaskStats(), sampled, ticking_clock())


def test_each_input_is_counted_executed_as_it_returns_not_at_the_end_of_its_run():
    """At rate 1/100 a run of unsampled inputs is up to 99 long: a bolt slow on each read its
    acks ahead of its ``executed`` for the whole run (acked 31, executed 14 after 16 s at 0.5 s
    an input). Each execute here sees the inputs before it counted."""
    sampled = TaskStatistics(100, random.Random(3))
    stats = TaskStats()
    seen: list[int] = []

    def execute(tup):
        seen.append(stats.executed)

    assert drain_inbox(execute, inputs(150).popleft, 150, stats, sampled, ticking_clock()) == 150
    assert seen == list(range(150))
    assert stats.executed == 150


def test_a_drain_ends_after_the_input_that_returns_once_it_has_run_its_budget():
    """With a budget (seconds), a drain stops after the first input that returns once it has run
    that long, so that a bolt slow on each input does not hold its loop for its whole inbox; at
    least one input runs; what stays is drained next time; the countdown is kept."""
    import time

    sampled = TaskStatistics(FREQ, random.Random(3))
    stats = TaskStats()
    inbox = inputs(40)
    seen: list = []

    def slow(tup):
        seen.append(tup[0])
        time.sleep(0.01)

    assert drain_inbox(slow, inbox.popleft, 40, stats, sampled, ticking_clock(), None, None, 0.0) == 1
    assert seen == ["w0"] and len(inbox) == 39 and stats.executed == 1

    ran = drain_inbox(slow, inbox.popleft, 39, stats, sampled, ticking_clock(), None, None, 0.1)
    assert 1 <= ran < 39 and len(inbox) == 39 - ran and stats.executed == 1 + ran
    assert drain_inbox(slow, inbox.popleft, len(inbox), stats, sampled, ticking_clock(), None, None, None) == 39 - ran
    assert seen == [f"w{i}" for i in range(40)] and stats.executed == 40
    executed_by_key = sum(ks.executed for ks in sampled.keys.values())
    assert executed_by_key == FREQ * (40 // FREQ)  # one sampled in every block of FREQ, across the three drains
