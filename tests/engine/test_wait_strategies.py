"""Wait strategies (`squall.engine.wait`): the one configured is the one an idle loop uses."""

from __future__ import annotations

import collections
import threading

import pytest

from squall import Config, InvalidTopologyException
from squall.engine.clock import Clock, SimulatedClock
from squall.engine.loop import Backpressure, ExecutorLoop, TopologyActivation
from squall.engine.spout_executor import SpoutExecutor
from squall.engine.wait import (
    WaitSituation,
    WaitStrategy,
    WaitStrategyPark,
    WaitStrategyProgressive,
    WaitStrategyUntilWoken,
    wait_strategy,
)


class _IdleSpout(SpoutExecutor):
    """A spout executor that may emit (unless backpressure holds it) and never has anything."""

    def __init__(self, backpressure: Backpressure) -> None:  # the loop's view of a spout only
        self.kind = "spout"
        self.component = "idle"
        self.task_ids = [1]
        self.inboxes: dict = {}
        self.schedule = None
        self.opened = True
        self._backpressure = backpressure
        self.polls = 0

    def timers(self):
        return []

    def set_active(self, active: bool) -> None:
        pass

    def can_emit(self) -> bool:
        return not self._backpressure.throttled

    def produce(self, burst: int) -> int:
        self.polls += 1
        return 0

    def drain(self, limit: int) -> int:
        return 0

    def close(self) -> None:
        pass


class _WaitsRecorded(SimulatedClock):
    """The loop's clock: records each wait's timeout and stops the loop after ``rounds`` waits."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.rounds = rounds
        self.timeouts: list[float | None] = []
        self.loop: ExecutorLoop | None = None
        self.done = threading.Event()

    def wait(self, event, timeout):
        if self.loop is not None and self.loop.state.active:  # a wait of the rounds, not for the activation
            self.timeouts.append(timeout)
            if len(self.timeouts) == self.rounds:
                self.loop.stop()
                self.done.set()
        return False


def _idle_loop(conf: dict, rounds: int, throttled: bool = False) -> tuple[ExecutorLoop, _WaitsRecorded, _IdleSpout]:
    clock = _WaitsRecorded(rounds)
    backpressure = Backpressure(high=10, clock=clock)
    if throttled:
        backpressure.check(task=2, backlog=10)  # a bolt's inbox over its bound
    loop = ExecutorLoop("test-loop", TopologyActivation(active=True), backpressure, clock, conf, lambda *a: None)
    clock.loop = loop
    spout = _IdleSpout(backpressure)
    loop.add(spout)
    loop.start()
    assert clock.done.wait(30)
    assert loop.join(30)
    return loop, clock, spout


def test_a_park_strategy_for_spouts_waits_its_park_time_every_idle_round():
    loop, clock, spout = _idle_loop({Config.TOPOLOGY_SPOUT_WAIT_STRATEGY: "squall.engine.wait:WaitStrategyPark",
                                     Config.TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC: 250}, rounds=5)

    assert isinstance(loop.spout_wait, WaitStrategyPark)
    assert clock.timeouts == [pytest.approx(0.00025)] * 5
    assert spout.polls == 5  # polled once a round, each followed by a wait


def test_storms_class_name_picks_the_same_strategy():
    loop, clock, _ = _idle_loop({Config.TOPOLOGY_SPOUT_WAIT_STRATEGY: "org.apache.storm.policy.WaitStrategyPark",
                                 Config.TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC: 40}, rounds=3)

    assert isinstance(loop.spout_wait, WaitStrategyPark)
    assert clock.timeouts == [pytest.approx(0.00004)] * 3


def test_the_default_spout_strategy_is_progressive_and_doubles_its_sleep_up_to_the_max():
    loop, clock, _ = _idle_loop({Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL1_COUNT: 2,
                                 Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS: 1,
                                 Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_MAX_SLEEP_MILLIS: 8}, rounds=6)

    assert isinstance(loop.spout_wait, WaitStrategyProgressive)
    # the two spinning rounds do not wait at all; then 1, 2, 4, 8 ms, and 8 ms from there on
    assert clock.timeouts == pytest.approx([0.001, 0.002, 0.004, 0.008, 0.008, 0.008])


def test_a_strategy_of_the_users_own_is_made_prepared_and_asked():
    loop, clock, _ = _idle_loop({Config.TOPOLOGY_SPOUT_WAIT_STRATEGY: f"{__name__}:CountingWait"}, rounds=4)

    assert isinstance(loop.spout_wait, CountingWait)
    assert loop.spout_wait.situation is WaitSituation.SPOUT_WAIT
    assert clock.timeouts == pytest.approx([0.01, 0.02, 0.03, 0.04])


class CountingWait(WaitStrategy):
    """Waits idle_count hundredths of a second (a test's own strategy)."""

    def prepare(self, conf, situation):
        self.situation = situation

    def idle(self, idle_count):
        return idle_count / 100


def test_spouts_held_back_by_backpressure_use_the_backpressure_strategy():
    _, clock, spout = _idle_loop({Config.TOPOLOGY_SPOUT_WAIT_STRATEGY: "squall.engine.wait:WaitStrategyPark",
                                  Config.TOPOLOGY_SPOUT_WAIT_PARK_MICROSEC: 250,
                                  Config.TOPOLOGY_BACKPRESSURE_WAIT_STRATEGY: "squall.engine.wait:WaitStrategyPark",
                                  Config.TOPOLOGY_BACKPRESSURE_WAIT_PARK_MICROSEC: 700}, rounds=3, throttled=True)

    assert clock.timeouts == [pytest.approx(0.0007)] * 3
    assert spout.polls == 0  # held back: never asked for tuples


def test_by_default_spouts_held_back_by_backpressure_wait_until_woken():
    loop, clock, _ = _idle_loop({}, rounds=2, throttled=True)

    assert isinstance(loop.backpressure_wait, WaitStrategyUntilWoken)
    assert clock.timeouts == [None, None]  # no timer either: until backpressure ends and wakes the loop


@pytest.mark.parametrize("key", [Config.TOPOLOGY_SPOUT_WAIT_STRATEGY, Config.TOPOLOGY_BACKPRESSURE_WAIT_STRATEGY])
@pytest.mark.parametrize("name", ["squall.engine.wait:NoSuchWait", "no_such_module_here:Wait", "NoColonOrDot",
                                  "squall.engine.wait:wait_strategy"])
def test_a_bad_strategy_name_is_an_error_naming_the_key(key, name):
    with pytest.raises(InvalidTopologyException, match=key.replace(".", r"\.")) as e:
        ExecutorLoop("test-loop", TopologyActivation(), Backpressure(high=10), SimulatedClock(), {key: name},
                     lambda *a: None)

    assert name in str(e.value)


def test_a_strategy_name_that_is_not_a_string_is_an_error_naming_the_key():
    with pytest.raises(InvalidTopologyException, match="topology.spout.wait.strategy"):
        wait_strategy({Config.TOPOLOGY_SPOUT_WAIT_STRATEGY: 42}, WaitSituation.SPOUT_WAIT)


def test_progressive_yields_through_level_two_before_it_sleeps():
    pauses = []
    strategy = WaitStrategyProgressive(pause=pauses.append)
    strategy.prepare({Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL1_COUNT: 1,
                      Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL2_COUNT: 2,
                      Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS: 3},
                     WaitSituation.BACK_PRESSURE_WAIT)

    waits = [strategy.idle(n) for n in range(1, 6)]

    assert waits == pytest.approx([0.0, 0.0, 0.0, 0.003, 0.003])  # backpressure's level 3 does not double
    assert pauses == [0, 0]  # rounds 2 and 3 yielded the thread


# --- a waiting loop is woken by what it waits for, whatever the strategy says --------------------

class _WaitsSeen(Clock):
    """Real time, and an event set once the loop waits."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()
        self.timeouts: list[float | None] = []

    def wait(self, event, timeout):
        self.timeouts.append(timeout)
        self.waiting.set()
        return super().wait(event, timeout)


class _SpoutWithReplies(_IdleSpout):
    """An idle spout whose inbox takes its acker's replies, and which says when it is polled."""

    def __init__(self, backpressure: Backpressure) -> None:
        super().__init__(backpressure)
        self.inboxes = {1: collections.deque()}
        self.drained = threading.Event()
        self.polled = threading.Event()

    def drain(self, limit: int) -> int:
        q = self.inboxes[1]
        n = len(q)
        q.clear()
        if n:
            self.drained.set()
        return n

    def produce(self, burst: int) -> int:
        self.polled.set()
        return super().produce(burst)


def _waiting_loop(conf: dict, throttled: bool = False) -> tuple[ExecutorLoop, _WaitsSeen, _SpoutWithReplies, Backpressure]:
    clock = _WaitsSeen()
    backpressure = Backpressure(high=10, clock=clock)
    if throttled:
        backpressure.check(task=2, backlog=10)
    loop = ExecutorLoop("test-loop", TopologyActivation(active=True), backpressure, clock, conf, lambda *a: None)
    spout = _SpoutWithReplies(backpressure)
    loop.add(spout)
    loop.start()
    assert clock.waiting.wait(30)
    spout.polled.clear()
    return loop, clock, spout, backpressure


def test_a_reply_wakes_a_spout_loop_in_its_progressive_sleep():
    # a ten-minute sleep: only the wake can end it within the test
    loop, clock, spout, _ = _waiting_loop({Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS: 600_000,
                                           Config.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_MAX_SLEEP_MILLIS: 600_000})
    try:
        assert clock.timeouts[0] == pytest.approx(600.0)
        spout.inboxes[1].append(("ack", 7))  # as Worker.receive delivers it
        if loop.sleeping:
            loop.wake()

        assert spout.drained.wait(30)
        assert spout.polled.wait(30)  # and the spout is asked for tuples again
    finally:
        loop.stop()
        assert loop.join(30)


def test_spouts_waiting_until_woken_under_backpressure_are_woken_when_it_ends():
    loop, clock, spout, backpressure = _waiting_loop({}, throttled=True)
    try:
        assert clock.timeouts == [None]  # until woken: no timer, no poll
        backpressure.check(task=2, backlog=0)  # the bolt's inbox drained below its low mark

        assert spout.polled.wait(30)
    finally:
        loop.stop()
        assert loop.join(30)
