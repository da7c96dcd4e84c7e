"""A spout's burst of next_tuple rounds (`squall._native.spout_produce`, C when compiled) against
the worker's real `Backpressure`, and next_tuple given as any callable."""

from __future__ import annotations

import weakref

from squall import _native
from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure


class Executor(_native.SpoutExecutorBase):
    def __init__(self) -> None:
        self.emits = self.in_flight = 0
        self.max_pending, self.current_task = 0, None


def test_a_burst_stops_at_the_round_after_which_the_worker_is_throttled_and_resumes_after():
    bp = Backpressure(high=10, clock=SimulatedClock())
    ex = Executor()
    rounds: list = []

    def next_tuple() -> None:
        rounds.append(bp.throttled)
        ex.emits += 1
        if len(rounds) == 5:
            bp.check(7, 10)  # a bolt's inbox reaches the bound during the fifth round

    assert _native.spout_produce(ex, [(3, next_tuple)], 64, bp) == 5
    assert rounds == [False] * 5 and bp.throttled
    assert _native.spout_produce(ex, [(3, next_tuple)], 64, bp) == 1  # each burst runs one round, then looks
    bp.check(7, 5)  # drained below the low mark
    assert not bp.throttled
    assert _native.spout_produce(ex, [(3, next_tuple)], 3, bp) == 3


def test_the_backpressure_object_still_takes_any_attribute_and_a_weak_reference():
    bp = Backpressure(high=10)
    heard: list = []
    bp.listener = heard.append
    bp.set_remote = lambda source, over: heard.append((source, over))  # a test's stand-in, as tests/cluster do
    bp.set_remote("w2", True)
    bp.check(1, 10)
    assert heard == [("w2", True), True] and weakref.ref(bp)() is bp


def test_next_tuple_is_called_as_whatever_callable_it_is():
    class Spout:
        def __init__(self) -> None:
            self.calls = 0

        def next_tuple(self) -> None:
            self.calls += 1
            ex.emits += 1

    ex = Executor()
    spout, counted = Spout(), []

    def plain() -> None:
        counted.append(ex.current_task)

    calls = [(3, spout.next_tuple), (4, plain), (5, counted.clear)]
    throttle = Backpressure(high=10)
    assert _native.spout_produce(ex, calls, 4, throttle) == 4
    assert spout.calls == 4 and counted == []  # cleared by the third, after the second each round
