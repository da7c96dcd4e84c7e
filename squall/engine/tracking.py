"""What a tracked topology's workers count (Storm's tracked cluster: ``spout-emitted``,
``transferred``, ``processed``), for `squall.testing.TrackedTopology`.

A topology whose configuration names a `TupleCounts` registered in this process (`TRACKED_KEY`,
set by `squall.testing.TrackedTopology` at submission to a `LocalCluster`) has its workers count:

- ``transferred``, per receiving component: every item put into a task's inbox (a tuple, an
  acker message, an acker's reply to a spout, a tick), counted before it is delivered;
- ``processed``, per component: every item taken out of an inbox, counted once its executor has
  run it (and sent all it emitted meanwhile, so those are counted as transferred first);
- ``spout-emitted``: every emit of a spout (Storm's ``SpoutTracker`` counts the same).

- ``lost``, per component: every item transferred that can no longer be processed: it was in
  the inboxes of a worker that died (or being run there: a crash counts nothing it was running
  as processed), or the transport dropped it (sent to a worker that was gone).

``processed + lost`` never passes ``transferred``, and equals it only when no item is waiting,
moving between workers, or being run: the topology has done all it was given, or all it still
can after a worker died. Each worker counts its own arrivals and runs (`WorkerCounts`), so that
what was left in it when it died is known exactly, whatever it was in the middle of. As in
Storm, the counts are kept in this process: tracking works where the workers are threads of the
test's process (`LocalCluster`).
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
        self.lost = 0
        self.lost_by: dict[str, int] = {}         # by component
        self.workers_died = 0
        self._cond = threading.Condition(threading.Lock())
        with _registry_lock:
            _registry[self.id] = self

    def transfer(self, component: str, n: int = 1) -> None:
        """``n`` items are about to be put into inboxes of ``component``'s tasks (-1: one was not)."""
        with self._cond:
            self._transfer(component, n)

    def _transfer(self, component: str, n: int) -> None:
        self.transferred += n
        self.transferred_to[component] = self.transferred_to.get(component, 0) + n
        if n < 0:  # a delivery that raised, taken back
            self._notify_if_done()

    def process(self, component: str, n: int) -> None:
        """``component``'s executor has run ``n`` items it took from its inboxes."""
        with self._cond:
            self._process(component, n)

    def _process(self, component: str, n: int) -> None:
        self.processed += n
        self.processed_by[component] = self.processed_by.get(component, 0) + n
        self._notify_if_done()

    def lose(self, component: str, n: int = 1) -> None:
        """``n`` items transferred to ``component`` will never be processed (the transport
        dropped them: their worker was gone)."""
        with self._cond:
            self._lose(component, n)

    def _lose(self, component: str, n: int) -> None:
        self.lost += n
        self.lost_by[component] = self.lost_by.get(component, 0) + n
        self._notify_if_done()

    def _done(self) -> bool:
        return self.processed + self.lost == self.transferred

    def _notify_if_done(self) -> None:
        if self._done():
            self._cond.notify_all()

    def worker(self) -> WorkerCounts:
        """The counts of one worker (one launch of one), which it adds to these through."""
        return WorkerCounts(self)

    def spout_emit(self) -> None:
        """A spout emitted a tuple (called after the emit delivered it)."""
        with self._cond:
            self.spout_emitted += 1
            self._cond.notify_all()

    def amounts(self) -> dict[str, int]:
        """``{"spout-emitted": ..., "transferred": ..., "processed": ..., "lost": ...}`` (Storm's
        keys, and the items that can no longer be processed)."""
        with self._cond:
            return {"spout-emitted": self.spout_emitted, "transferred": self.transferred, "processed": self.processed,
                    "lost": self.lost}

    def unprocessed(self) -> dict[str, int]:
        """Per component, the items put into its inboxes and not yet run nor lost (only those above 0)."""
        with self._cond:
            left = {c: n - self.processed_by.get(c, 0) - self.lost_by.get(c, 0)
                    for c, n in sorted(self.transferred_to.items())}
            return {c: n for c, n in left.items() if n > 0}

    def wait_for(self, spout_emitted: int, deadline: float) -> bool:
        """Wait until at least ``spout_emitted`` spout emits were counted and every item
        transferred was processed or lost, or ``deadline`` (``time.monotonic()``) passes; whether
        it happened."""
        with self._cond:
            while self.spout_emitted < spout_emitted or not self._done():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def forget(self) -> None:
        """Take these counts out of the registry: workers started later do not count in them."""
        with _registry_lock:
            _registry.pop(self.id, None)


class WorkerCounts:
    """What one worker (one launch) adds to a topology's `TupleCounts`: the same calls, and its
    own arrivals and runs, so that when it dies (`died`) every item that arrived in it and was
    not run is counted as lost, exactly, and so is whatever arrives or is run there afterwards
    (a run after the death is taken back from the lost). Its workers' loops call it from any
    thread."""

    def __init__(self, counts: TupleCounts) -> None:
        self.counts = counts
        self.arrived: dict[str, int] = {}    # by component: items put into this worker's inboxes
        self.processed: dict[str, int] = {}  # by component: items this worker ran
        self.dead = False

    def transfer(self, component: str, n: int = 1) -> None:
        """``n`` items are about to be put into this worker's own inboxes of ``component`` by
        this worker (a local delivery, a tick; -1: one was not)."""
        counts = self.counts
        with counts._cond:
            counts._transfer(component, n)
            self._arrive(component, n)

    def arrive(self, component: str, n: int = 1) -> None:
        """``n`` items from another worker (counted as transferred by their sender) were put
        into this worker's inboxes of ``component``."""
        with self.counts._cond:
            self._arrive(component, n)

    def _arrive(self, component: str, n: int) -> None:
        self.arrived[component] = self.arrived.get(component, 0) + n
        if self.dead:
            self.counts._lose(component, n)

    def process(self, component: str, n: int) -> None:
        """This worker's executor of ``component`` has run ``n`` items from its inboxes."""
        counts = self.counts
        with counts._cond:
            self.processed[component] = self.processed.get(component, 0) + n
            counts._process(component, n)
            if self.dead:
                counts._lose(component, -n)

    def spout_emit(self) -> None:
        """A spout of this worker emitted a tuple (`TupleCounts.spout_emit`)."""
        self.counts.spout_emit()

    def died(self) -> None:
        """This worker crashed or was stopped: what arrived in it and was not run never will be
        (a second call does nothing)."""
        counts = self.counts
        with counts._cond:
            if self.dead:
                return
            self.dead = True
            counts.workers_died += 1
            for component, n in self.arrived.items():
                left = n - self.processed.get(component, 0)
                if left:
                    counts._lose(component, left)
            counts._cond.notify_all()


def tracker_of(conf: Mapping[str, Any]) -> TupleCounts | None:
    """The counts a topology of configuration ``conf`` is tracked in, if any (in this process)."""
    key = conf.get(TRACKED_KEY)
    if not isinstance(key, str):
        return None
    with _registry_lock:
        return _registry.get(key)


def counted(counts: TupleCounts | WorkerCounts, component: str, deliver: Callable[[Any], None]) -> Callable[[Any], None]:
    """``deliver``, counting each item as transferred to ``component`` before it is delivered
    (with a `WorkerCounts`: as arriving in that worker too, a delivery to its own inboxes)."""
    transfer = counts.transfer

    def counted_deliver(item: Any) -> None:
        transfer(component)
        try:
            deliver(item)
        except BaseException:  # not delivered (say, a value the wire refuses): not in flight
            transfer(component, -1)
            raise
    return counted_deliver
