"""The load of every task of a topology, as a worker's load-aware shuffles see it (Storm 2's
``LoadMapping``).

A worker knows its own tasks' load (`squall.engine.worker.Worker.task_load`); the others' it
learns from their workers: each broadcasts its bolt tasks' loads every `LoadLink.PERIOD_SECS`
(``{"load": [[task, load], ...]}``, `Transport.broadcast`), as Storm 2's workers send theirs to
each other. A peer's figure older than `LoadMapping.EXPIRE_SECS` (its worker died, or stopped
saying) is forgotten. With both, `LoadAwareShuffleGrouping` moves tuples off a worker only
while its tasks are busier than the remote ones, not merely busy: two workers both at full
load keep their tuples at home, where they cost no crossing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from .clock import Clock
from .transport import Transport

_KEY = "load"


def load_message(loads: Iterable[tuple[int, float]]) -> dict[str, list[list[Any]]]:
    """The control message carrying this worker's ``(task, load)`` figures."""
    return {_KEY: [[int(t), round(float(load), 3)] for t, load in loads]}


def is_load_message(message: Any) -> bool:
    """Whether a control message is a `load_message`."""
    return isinstance(message, dict) and _KEY in message


def loads_of(message: Any) -> list[tuple[int, float]]:
    """The ``(task, load)`` pairs of a `load_message`.

    Raises:
        TypeError: ``message`` is not one, or a figure is not a task id and a load from 0 to 1
            (the transport drops it and counts it).
    """
    pairs = message.get(_KEY) if isinstance(message, dict) else None
    if not isinstance(pairs, list):
        raise TypeError(f"not a load message: {message!r:.80}")
    out = []
    for pair in pairs:
        if (not isinstance(pair, list) or len(pair) != 2 or type(pair[0]) is not int
                or type(pair[1]) not in (int, float) or not 0.0 <= pair[1] <= 1.0):
            raise TypeError(f"not a (task, load) pair in a load message: {pair!r:.80}")
        out.append((pair[0], float(pair[1])))
    return out


class LoadMapping:
    """Every task's load: this worker's from ``local`` (None for a task not here), the others'
    as their workers last said, for `EXPIRE_SECS`; and this worker's tasks' inbox fill from
    ``local_fill`` (`fill`). Time is ``clock``'s."""

    EXPIRE_SECS = 3.0

    def __init__(self, local: Callable[[int], float | None], clock: Clock | None = None,
                 local_fill: Callable[[int], float | None] | None = None) -> None:
        self._local = local
        self._local_fill = local_fill or local
        self.clock = clock or Clock()
        self._remote: dict[int, tuple[float, float]] = {}  # task -> (load, when heard)

    def set_remote(self, pairs: Iterable[tuple[int, float]]) -> None:
        """A peer's figures arrived."""
        now = self.clock.now()
        for task, load in pairs:
            self._remote[task] = (load, now)

    def fill(self, task: int) -> float | None:
        """This worker's ``task``'s inbox fill (0.0 empty .. 1.0 full), Storm's own load; None
        for a task not here."""
        return self._local_fill(task)

    def get(self, task: int) -> float | None:
        """``task``'s load (0.0 idle .. 1.0 full), or None if nobody said lately."""
        load = self._local(task)
        if load is not None:
            return load
        heard = self._remote.get(task)
        if heard is None or self.clock.now() - heard[1] > self.EXPIRE_SECS:
            return None
        return heard[0]


class LoadLink:
    """Sends this worker's bolt tasks' loads (``loads()``) to its peers every `PERIOD_SECS`, on a
    daemon thread, until `stop`; `heard` records a peer's in ``mapping``."""

    PERIOD_SECS = 0.5

    def __init__(self, mapping: LoadMapping, loads: Callable[[], list[tuple[int, float]]], transport: Transport,
                 name: str = "squall-load") -> None:
        self.mapping = mapping
        self.loads = loads
        self.transport = transport
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._send, name=name, daemon=True)
        self._thread.start()

    def heard(self, sender: Any, message: Any) -> None:
        """A peer's load message (raises TypeError for a malformed one)."""
        self.mapping.set_remote(loads_of(message))

    def _send(self) -> None:
        while not self._done.wait(self.PERIOD_SECS):
            loads = self.loads()
            if loads:
                self.transport.broadcast(load_message(loads))

    def stop(self, timeout: float = 2.0) -> None:
        """Stop sending."""
        self._done.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
