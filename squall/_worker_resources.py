"""`WorkerResources`: the objects the tasks of one worker share, each made once, by the first
task that asks for it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


class WorkerResources:
    """What one worker lends all of its tasks (``context.worker_resources``): objects made once
    per worker, by the first task that asks for one by its key, and handed to every task of that
    worker that asks after it. The spouts that keep retry budgets share their
    `squall.external.retry.WorkerGate` through it.

    Storm's nearest is a worker hook's ``WorkerUserContext.setResource``, read by the tasks with
    ``WorkerTopologyContext.getResource``; here the first task that asks makes the object, so no
    hook is needed, and the engine knows nothing of what is shared. One per worker: a worker
    started again (after a crash, a reassignment) starts with none. Thread-safe: tasks on
    different loops of a worker may ask at once, and ``make`` runs once per key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, Any] = {}

    def get_or_make(self, key: str, make: Callable[[], T]) -> T:
        """The object kept under ``key``, made by ``make()`` (under this registry's lock) if no
        task of this worker asked for it before.

        Raises:
            TypeError: ``key`` is not a string.
        """
        if not isinstance(key, str):
            raise TypeError(f"WorkerResources: a key is a string, got {key!r}")
        with self._lock:
            if key not in self._made:
                self._made[key] = make()
            return cast(T, self._made[key])
