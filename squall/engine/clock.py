"""Every clock read and timed wait in the engine goes through a `Clock` (Storm's ``Time``).

The engine is handed a clock, so a test can use `SimulatedClock` and move time past a message
timeout without waiting for it.
"""

from __future__ import annotations

import threading
import time


class Clock:
    """Real time: ``now()`` is ``time.monotonic()`` in seconds."""

    now = staticmethod(time.monotonic)
    wall = staticmethod(time.time)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Wait for ``event`` up to ``timeout`` seconds of this clock (None: forever)."""
        return event.wait(timeout)

    def register(self, event: threading.Event) -> None:
        """Ask to have ``event`` set whenever time jumps (only simulated clocks jump)."""

    def unregister(self, event: threading.Event) -> None:
        """Undo `register`."""


class SimulatedClock(Clock):
    """Time that moves only when a test calls `advance` (Storm's ``SimulatedTime``).

    Waits on a simulated clock return early whenever time advances, so loops re-check their
    timers at once.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._events: set[threading.Event] = set()

    def now(self) -> float:  # type: ignore[override]
        return self._now

    def wall(self) -> float:  # type: ignore[override]
        return self._now

    def advance(self, secs: float) -> None:
        """Move time forward and wake every waiter."""
        with self._lock:
            self._now += secs
            events = list(self._events)
        for e in events:
            e.set()

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        # Real time is irrelevant here, but bound the real wait so a loop re-checks its state.
        return event.wait(None if timeout is None else 0.05)

    def register(self, event: threading.Event) -> None:
        with self._lock:
            self._events.add(event)

    def unregister(self, event: threading.Event) -> None:
        with self._lock:
            self._events.discard(event)
