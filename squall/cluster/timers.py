"""`Timers`: delayed actions on one daemon thread (Nimbus's timer: kill removal, rebalance,
worker restarts)."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from ..engine.clock import Clock

log = logging.getLogger("squall.cluster")


class Timers:
    """Runs callables after a delay, in order, on one thread.

    Delays are in ``clock.now()`` seconds (default: real monotonic time). With a
    `SimulatedClock`, an action runs once the test has advanced the clock past its delay."""

    def __init__(self, name: str = "squall-timers", clock: Clock | None = None) -> None:
        self._clock = clock or Clock()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        # set by `schedule`, `stop` and (on a simulated clock) every jump of time, so the
        # thread re-checks the head of the heap
        self._wake = threading.Event()
        self._stopped = False
        self._clock.register(self._wake)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, delay: float, action: Callable[[], None]) -> None:
        """Run ``action`` after ``delay`` seconds."""
        with self._lock:
            heapq.heappush(self._heap, (self._clock.now() + delay, next(self._seq), action))
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread; pending actions are dropped."""
        with self._lock:
            self._stopped = True
            self._heap.clear()
        self._wake.set()
        self._clock.unregister(self._wake)
        if threading.current_thread() is not self._thread:
            self._thread.join(5)

    def _run(self) -> None:
        while True:
            # cleared before the heap is read: a wake-up that comes after the read is not lost
            self._wake.clear()
            with self._lock:
                if self._stopped:
                    return
                action = None
                timeout = None
                if self._heap:
                    remaining = self._heap[0][0] - self._clock.now()
                    if remaining <= 0:
                        action = heapq.heappop(self._heap)[2]
                    else:
                        timeout = remaining
            if action is None:
                self._clock.wait(self._wake, timeout)
                continue
            try:
                action()
            except Exception:
                log.exception("timer action failed")
