"""Every clock read and timed wait in the engine goes through a `Clock` (Storm's ``Time``).

The engine is handed a clock, so a test can use `SimulatedClock` and move time past a message
timeout without waiting for it.
"""

from __future__ import annotations

import numbers
import threading
import time
from typing import Protocol


class WakeEvent(Protocol):
    """What a loop sleeps on and is woken by: a `threading.Event`, or an event of the
    transport's whose wait also ends when the transport has something for the loop
    (`squall.worker.tcp.LoopEvent`)."""

    def is_set(self) -> bool: ...
    def set(self) -> None: ...
    def clear(self) -> None: ...
    def wait(self, timeout: float | None = None) -> bool: ...


class Clock:
    """Real time: ``now()`` is ``time.monotonic()`` in seconds."""

    now = staticmethod(time.monotonic)
    wall = staticmethod(time.time)

    def wait(self, event: WakeEvent, timeout: float | None) -> bool:
        """Wait for ``event`` up to ``timeout`` seconds of this clock (None: forever)."""
        return event.wait(timeout)

    def register(self, event: WakeEvent) -> None:
        """Ask to have ``event`` set whenever time jumps (only simulated clocks jump)."""

    def unregister(self, event: WakeEvent) -> None:
        """Undo `register`."""


def _seconds(value: float, name: str) -> float:
    """``value`` as float seconds, or a `TypeError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"SimulatedClock: {name} must be a number of seconds, got {value!r}")
    return float(value)


class SimulatedClock(Clock):
    """Time that moves only when a test calls `advance` (Storm's ``SimulatedTime``).

    Waits on a simulated clock return early whenever time advances, so loops re-check their
    timers at once.
    """

    def __init__(self, start: float = 0.0) -> None:
        # kept a float whatever it is given (Storm's users pass whole seconds): the engine's C
        # statistics take a complete latency, now() minus an emit's time, only as a float, and an
        # int clock crashed the worker at the first sampled ack
        self._now = _seconds(start, "start")
        self._lock = threading.Lock()
        self._events: set[WakeEvent] = set()

    def now(self) -> float:  # type: ignore[override]
        return self._now

    def wall(self) -> float:  # type: ignore[override]
        return self._now

    def advance(self, secs: float) -> None:
        """Move time forward and wake every waiter."""
        secs = _seconds(secs, "secs")
        with self._lock:
            self._now += secs
            events = list(self._events)
        for e in events:
            e.set()

    def wait(self, event: WakeEvent, timeout: float | None) -> bool:
        # Real time is irrelevant here, but bound the real wait so a loop re-checks its state.
        return event.wait(None if timeout is None else 0.05)

    def register(self, event: WakeEvent) -> None:
        with self._lock:
            self._events.add(event)

    def unregister(self, event: WakeEvent) -> None:
        with self._lock:
            self._events.discard(event)
