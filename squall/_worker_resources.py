"""`WorkerResources`: the objects the tasks of one worker share, each made once, by the first
task that asks for it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

log = logging.getLogger(__name__)


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
        self._at_end: list[tuple[str, Callable[[], None]]] = []
        self._ended = False

    def at_end(self, what: str, release: Callable[[], None]) -> None:
        """Call ``release()`` when this worker's life ends, however it ends: a stop, a
        reassignment, a crash (no ``close`` then), loops abandoned in user code. ``what`` names
        it in the log if it raises.

        For what a task started that a real worker process takes with it when it dies (a
        thread of its own, a connection it reads on) but that outlives a worker run in the
        host's own process, as `squall.LocalCluster` runs them: there, a crashed worker's
        thread would go on (a Redis Streams spout's read, blocked on its connection, took the
        entries that came next for a task already dead: they waited a minute for a claim). A
        ``release`` registered after the end runs at once."""
        with self._lock:
            ended = self._ended
            if not ended:
                self._at_end.append((what, release))
        if ended:
            self._release(what, release)

    def end(self) -> None:
        """The worker's life ended (`squall.engine.worker.Worker.stop`, after its loops): each
        ``release`` given to `at_end` is called once, in order; one that raises is logged and
        the others still run."""
        with self._lock:
            self._ended = True
            todo, self._at_end = self._at_end, []
        for what, release in todo:
            self._release(what, release)

    @staticmethod
    def _release(what: str, release: Callable[[], None]) -> None:
        try:
            release()
        except Exception:  # a task's cleanup: logged, the others still run
            log.exception("releasing %s at the end of its worker raised", what)

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


LAUNCH = "squall.launch"
"""The key under which a worker run by a cluster's master lends its tasks its `LaunchView`
(``context.worker_resources.get_or_make(LAUNCH, lambda: None)``: None where no master assigns
launches, as on a `LocalCluster`)."""


class LaunchView:
    """Which launch of which slot this worker is, and the master's launch table as this worker
    last heard it: what a state store fences a replaced worker's writes by.

    The master gives a slot a new launch whenever its worker may have died or its executors
    change, and replaces the launch of a machine it takes for lost, whose executors move
    elsewhere. A worker still running there (cut off from the master, not dead: a zombie) keeps
    its old launch and an old table, so the worker that took a task over knows the zombie's
    launch is replaced, while the zombie sees in the newcomer's launch one newer than any it
    knows of that slot. `replaced` is that test; `token` names this worker. Thread-safe: the
    table is replaced whole by the worker's heartbeat thread while tasks read it."""

    def __init__(self, slot: str, launch_id: int, launch_ids: dict[str, int] | None = None,
                 launch_floor: int = 0) -> None:
        self.slot = slot
        self.launch_id = launch_id
        self._table: tuple[dict[str, int], int] = (dict(launch_ids or {}), launch_floor)

    @property
    def token(self) -> str:
        """``<slot>#<launch id>``: this worker, as a store records its writer."""
        return f"{self.slot}#{self.launch_id}"

    def set_launches(self, launch_ids: dict[str, int], launch_floor: int) -> None:
        """The launch table of the master's last answer (replaced whole)."""
        self._table = (dict(launch_ids), launch_floor)

    def replaced(self, token: str) -> bool:
        """Whether the worker ``token`` names (`token`) is a launch the master has replaced, as
        far as this worker knows: below its slot's launch in the table, or, for a slot the table
        does not name (it left the assignment), not above the floor. A token that cannot be read
        is not taken for replaced."""
        slot, _, launch = token.rpartition("#")
        if not slot or not launch.isdigit():
            return False
        table, floor = self._table
        current = table.get(slot)
        if current is None:
            return int(launch) <= floor
        return int(launch) < current
