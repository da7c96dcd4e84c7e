"""Backpressure across workers: a peer's "over" lasts only while it is renewed."""

from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure


class Loop:
    """A waiting loop: counts its wake-ups."""

    def __init__(self):
        self.woken = 0

    def wake(self):
        self.woken += 1


def test_a_peers_over_that_is_not_renewed_expires():
    """A lost "under", a peer that died while over, or a forged or replayed "over" (a captured
    message of an old topology once stopped a new one's spouts for good) throttles the spouts
    for at most EXPIRE_SECS."""
    clock = SimulatedClock()
    bp = Backpressure(100, clock)
    loop = Loop()
    bp.register(loop)
    bp.set_remote("h:1", True)
    assert bp.throttled
    clock.advance(bp.EXPIRE_SECS - 1)
    bp.expire()
    assert bp.throttled
    bp.set_remote("h:1", True)  # renewed
    clock.advance(bp.EXPIRE_SECS - 1)
    bp.expire()
    assert bp.throttled
    clock.advance(2)
    bp.expire()
    assert not bp.throttled and loop.woken == 1


def test_expiry_keeps_the_peers_that_renew_and_this_workers_own_state():
    clock = SimulatedClock()
    bp = Backpressure(10, clock)
    flips = []
    bp.listener = flips.append
    bp.set_remote("h:1", True)
    clock.advance(3)
    bp.set_remote("h:2", True)
    bp.check(5, 10)  # this worker's own inbox is over: that never expires
    clock.advance(3)
    bp.expire()
    assert bp.throttled and bp.over
    bp.check(5, 0)
    assert bp.throttled  # h:2 was heard 3 s ago
    clock.advance(3)
    bp.expire()
    assert not bp.throttled and flips == [True, False]
