"""A simulated clock keeps float seconds whatever it is given (Storm's users pass whole seconds),
and refuses what is no number of seconds, naming it."""

from __future__ import annotations

import pytest

from squall.engine.clock import SimulatedClock


def test_a_clock_of_whole_seconds_keeps_float_seconds():
    clock = SimulatedClock(1_000_000)
    clock.advance(2)
    assert clock.now() == clock.wall() == 1_000_002.0
    assert type(clock.now()) is float


def test_a_simulated_clock_refuses_what_is_no_number_of_seconds():
    with pytest.raises(TypeError, match=r"SimulatedClock: start must be a number of seconds, got '10'"):
        SimulatedClock("10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"SimulatedClock: secs must be a number of seconds, got None"):
        SimulatedClock().advance(None)  # type: ignore[arg-type]
