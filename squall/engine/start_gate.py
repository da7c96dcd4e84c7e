"""`StartGate`: no tuple runs in a worker before its host has recorded that the worker started.

Why: a host tells a worker that dies before it started (a bad import, a bad configuration, user
code failing in ``open``/``prepare``) from one that crashed after: the first is a failed start,
retried with a growing delay and given up after ``squall.worker.max.launch.attempts``; the
second is a crash, restarted at once and never given up. "Started" is every executor of the
worker opened, and the master learns it from the worker's heartbeat. But the executors open
only once the topology is active, after the worker's first beats, and the next beat came a
heartbeat period (1 s) later: a worker whose first record killed its process at once (a value
that segfaults a C extension, a library's ``os._exit``, the OOM killer's SIGKILL) had run user
code on tuples but was recorded as a failed start, and with a limit set its slot was given up
and the topology stopped for good.

So each of the worker's loops, once its own executors are open, waits here before its first
round: first until every executor of the worker is open (the other loops' ``prepare``), then
until the host says the start is recorded (`release`, after a heartbeat that said so has been
answered), at most ``bound_secs`` of real time: a master that does not answer cannot be told,
and the worker processes rather than wait for it (a death in its first instants then counts as
a failed start, as before). The host is told once, on whichever loop opened last (``on_open``).
Without ``on_open`` (a worker without a master, the engine's own tests) nothing waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .executor import log

_POLL_SECS = 0.05  # how often a waiting loop looks whether it was asked to stop


class StartGate:
    """Holds a worker's loops between opening their executors and their first round; see the
    module docstring. Thread-safe: every loop calls `opened` and `wait`, the host `release`.

    Args:
        is_open: whether every executor of the worker has opened (`squall.engine.worker.Worker.opened`).
        on_open: called once, on the loop that found every executor open: the host records the
            start and then calls `release`. None: nothing waits.
        bound_secs: the longest a loop waits for `release` once every executor is open.
    """

    def __init__(self, is_open: Callable[[], bool], on_open: Callable[[], None] | None, bound_secs: float) -> None:
        self._is_open = is_open
        self._on_open = on_open
        self.bound_secs = bound_secs
        self._all_open = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._deadline = float("inf")  # bound_secs after every executor opened
        if on_open is None:
            self._released.set()

    @property
    def released(self) -> bool:
        """Whether loops may run rounds without waiting (the host recorded the start, or gave up)."""
        return self._released.is_set()

    def opened(self) -> None:
        """A loop's executors are open: if every executor of the worker is, tell the host (once)."""
        with self._lock:
            if self._all_open.is_set() or not self._is_open():
                return
            self._deadline = time.monotonic() + self.bound_secs
            self._all_open.set()
        if self._on_open is not None:
            self._on_open()

    def release(self) -> None:
        """The host recorded the start (or cannot): loops go on to their rounds."""
        self._released.set()

    def wait(self, stopping: Callable[[], bool], name: str) -> None:
        """Block loop ``name`` until `release`, or ``bound_secs`` after every executor opened, or
        ``stopping()``."""
        while not self._all_open.is_set() and not self._released.is_set():
            if stopping():
                return
            self._all_open.wait(_POLL_SECS)
        while not self._released.wait(_POLL_SECS):
            if stopping():
                return
            if time.monotonic() >= self._deadline:
                with self._lock:  # one warning, whichever loop comes first
                    if self._released.is_set():
                        return
                    self._released.set()
                log.warning("%s: the master has not recorded this worker's start within %g s: processing without "
                            "(if it dies before its next heartbeat reaches the master, it is taken for a failed "
                            "start)", name, self.bound_secs)
                return
