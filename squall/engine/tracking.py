"""What a tracked topology's workers count (Storm's tracked cluster: ``spout-emitted``,
``transferred``, ``processed``), for `squall.testing.TrackedTopology`.

A topology whose configuration names a `TupleCounts` registered in this process (`TRACKED_KEY`,
set by `squall.testing.TrackedTopology` at submission to a `LocalCluster`) has its workers count:

- ``transferred``, per receiving component: every item put into a task's inbox (a tuple, an
  acker message, an acker's reply to a spout, a tick), counted before it is delivered;
- ``processed``, per component: every item taken out of an inbox, counted once its executor has
  run it (and sent all it emitted meanwhile, so those are counted as transferred first);
- ``spout-emitted``: every emit of a spout (Storm's ``SpoutTracker`` counts the same).

``processed`` never passes ``transferred``, and equals it only when no item is waiting, moving
between workers, or being run: the topology has done all it was given. As in Storm, the counts
are kept in this process: tracking works where the workers are threads of the test's process
(`LocalCluster`).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

TRACKED_KEY = "testing.tracked.id"
"""The topology configuration key naming the `TupleCounts` its workers count in (a custom key:
set by `squall.testing.TrackedTopology`, not by users)."""

_registry: dict[str, TupleCounts] = {}
_registry_lock = threading.Lock()


class TupleCounts:
    """The counts of one tracked topology; any thread may add to them, and `wait_for` waits for
    a condition on them without polling (each change that can make one true notifies)."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex
        self.spout_emitted = 0
        self.transferred = 0
        self.processed = 0
        self.transferred_to: dict[str, int] = {}  # by receiving component
        self.processed_by: dict[str, int] = {}    # by component
        self._cond = threading.Condition(threading.Lock())
        with _registry_lock:
            _registry[self.id] = self

    def transfer(self, component: str, n: int = 1) -> None:
        """``n`` items are about to be put into inboxes of ``component``'s tasks (-1: one was not)."""
        with self._cond:
            self.transferred += n
            self.transferred_to[component] = self.transferred_to.get(component, 0) + n
            if n < 0 and self.processed == self.transferred:  # a delivery that raised, taken back
                self._cond.notify_all()

    def process(self, component: str, n: int) -> None:
        """``component``'s executor has run ``n`` items it took from its inboxes."""
        with self._cond:
            self.processed += n
            self.processed_by[component] = self.processed_by.get(component, 0) + n
            if self.processed == self.transferred:
                self._cond.notify_all()

    def spout_emit(self) -> None:
        """A spout emitted a tuple (called after the emit delivered it)."""
        with self._cond:
            self.spout_emitted += 1
            self._cond.notify_all()

    def amounts(self) -> dict[str, int]:
        """``{"spout-emitted": ..., "transferred": ..., "processed": ...}`` (Storm's keys)."""
        with self._cond:
            return {"spout-emitted": self.spout_emitted, "transferred": self.transferred, "processed": self.processed}

    def unprocessed(self) -> dict[str, int]:
        """Per component, the items put into its inboxes and not yet run (only those above 0)."""
        with self._cond:
            return {c: n - self.processed_by.get(c, 0) for c, n in sorted(self.transferred_to.items())
                    if n > self.processed_by.get(c, 0)}

    def wait_for(self, spout_emitted: int, deadline: float) -> bool:
        """Wait until at least ``spout_emitted`` spout emits were counted and every item
        transferred was processed, or ``deadline`` (``time.monotonic()``) passes; whether it
        happened."""
        with self._cond:
            while self.spout_emitted < spout_emitted or self.processed != self.transferred:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def forget(self) -> None:
        """Take these counts out of the registry: workers started later do not count in them."""
        with _registry_lock:
            _registry.pop(self.id, None)


def tracker_of(conf: Mapping[str, Any]) -> TupleCounts | None:
    """The counts a topology of configuration ``conf`` is tracked in, if any (in this process)."""
    key = conf.get(TRACKED_KEY)
    if not isinstance(key, str):
        return None
    with _registry_lock:
        return _registry.get(key)


def counted(counts: TupleCounts, component: str, deliver: Callable[[Any], None]) -> Callable[[Any], None]:
    """``deliver``, counting each item as transferred to ``component`` before it is delivered."""
    transfer = counts.transfer

    def counted_deliver(item: Any) -> None:
        transfer(component)
        try:
            deliver(item)
        except BaseException:  # not delivered (say, a value the wire refuses): not in flight
            transfer(component, -1)
            raise
    return counted_deliver
