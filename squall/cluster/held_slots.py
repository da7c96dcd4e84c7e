"""`HeldSlots`: what a supervisor does with its slots while no master answers.

Storm's supervisor keeps its local assignment, and each slot's state machine (``Slot``) starts a
worker that died again from it, whether Nimbus is up or not: Nimbus down only stops new
assignments. Here the same: the supervisor holds the launch the master last gave each of its ports
(`HeldSlot`, kept on disk by `LocalAssignments` where the host has one), and while its syncs
reach no master, a held port whose worker ended is started again by its launcher
(`Launcher.resume`: on the process host, from the copy of its assignment the worker kept), under
the same launch id, after the delays the master applies to a slot (`squall.cluster.backoff`):

- a worker that had started and crashed: at once, then after 1, 2, 4 ... 30 s while it keeps
  crashing soon after each start (`crash_backoff`);
- a worker that could not start: after 1, 2, 4 ... 30 s (`launch_backoff`), and not again after
  ``squall.worker.max.launch.attempts`` failed starts in a row (when set): that exit is kept for
  the master, which decides.

The exits of the workers started again this way are not reported to the master: it finds their
launch running when it answers again, and has nothing to undo. When a master answers, its
assignment replaces the held one (`HeldSlots.assigned`): a port it gave another launch or nothing
is changed to match by the supervisor, so the master that reassigned a slot meanwhile wins. A
launcher that cannot start a worker without its master (``Launcher.resumes`` false: Spark,
`LocalCluster`), or a port whose worker kept no assignment, leaves its exits to the master.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from .._errors import SquallError
from .backoff import crash_backoff, launch_backoff
from .launcher import Launch, Launcher, WorkerExit
from .local_assignment import MAX_RESUMES, HeldSlot, LocalAssignments

log = logging.getLogger("squall.supervisor")


@dataclass
class _Restarts:
    """One port's local restarts since a master last answered (the master's `SlotState` rules)."""

    started_at: float | None = None  # monotonic time its current worker was started (None: unknown)
    crashes: int = 0                 # crashes in a row, each soon after its start
    failed_starts: int = 0           # starts in a row that ended before the worker started
    retry_at: float = 0.0            # not started again before this
    given_up: bool = False           # not started again until a master answers
    last_exit: WorkerExit | None = None  # the exit it answered last (the master's to hear if given up)


class HeldSlots:
    """The launches a supervisor holds for its ports, and their restarts while no master answers.

    Args:
        launcher: the supervisor's launcher (its slots, its running workers, `Launcher.resume`).
        store: where the held launches are kept across the supervisor's restarts (None: in memory).
        max_launch_attempts: ``squall.worker.max.launch.attempts`` (None: never given up).
        clock: monotonic seconds.
    """

    def __init__(self, launcher: Launcher, store: LocalAssignments | None, max_launch_attempts: int | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.launcher = launcher
        self.store = store
        self.max_launch_attempts = max_launch_attempts
        self.clock = clock
        self.held: dict[int, HeldSlot] = store.load(launcher.slots()) if store is not None else {}
        if self.held:
            log.info("holding the launches of ports %s from the last run (%s)",
                     ",".join(map(str, sorted(self.held))), store.path if store is not None else "")
        self._restarts: dict[int, _Restarts] = {}
        self._unkept = False  # the master's last assignment is not on disk (`_keep`)

    def assigned(self, desired: dict[int, Launch]) -> None:
        """A master answered with ``desired``: hold it (a port's count of local restarts stays
        while its launch does), and forget the local restarts' delays."""
        held = {port: HeldSlot(launch, self.held[port].resumes if port in self.held
                               and self.held[port].launch == launch else 0)
                for port, launch in desired.items()}
        self._restarts = {port: r for port, r in self._restarts.items() if port in held}
        for r in self._restarts.values():
            r.crashes = r.failed_starts = 0
            r.retry_at, r.given_up = 0.0, False
        if held != self.held or self._unkept:
            self.held = held
            self._keep()

    def _keep(self) -> None:
        """Write the master's assignment down; if it cannot be (a full disk, a read-only file
        system), remove what the file held before (the launches the master replaced: a
        supervisor restarted while no master answers must not start them again), and try again
        at the next answer (said once, not at each sync)."""
        try:
            self._save()
            return
        except SquallError as e:  # the workers run on; only a restart without a master is lost
            said, self._unkept = self._unkept, True
            say = log.debug if said else log.error
            say("could not keep the local assignment: %s", e)
        if self.store is None:
            return
        try:
            self.store.discard()
        except OSError as e:
            say("could not remove %s either (%s): a supervisor restarted while no master answers would start the "
                "launches it names, which the master may have ended", self.store.path, e)
        else:
            say("removed %s: a supervisor restarted while no master answers starts nothing until the master's "
                "assignment is kept again (tried at each sync)", self.store.path)

    def started(self, port: int) -> None:
        """The supervisor started ``port``'s worker for the master (its run is timed from now)."""
        self._restarts[port] = _Restarts(started_at=self.clock())

    def without_master(self, exits: list[WorkerExit], healthy: bool) -> list[WorkerExit]:
        """A sync reached no master: take ``exits`` (the workers that ended since the last
        round) into account and start the held ports' workers whose delay has passed; the exits
        returned are those left for the master (of no held launch, or given up)."""
        if not self.launcher.resumes:
            return exits  # this host's workers need the master to start
        now = self.clock()
        left = [ex for ex in exits if not self._ended(ex, now)]
        if healthy:
            running = self.launcher.running()
            for port, h in sorted(self.held.items()):
                r = self._restarts.setdefault(port, _Restarts())
                if port not in running and not r.given_up and r.retry_at <= now:
                    self._resume(port, h, r, now)
                    if r.given_up and r.last_exit is not None:
                        left.append(r.last_exit)  # it cannot start here: the master hears of its end
        return left

    def _ended(self, ex: WorkerExit, now: float) -> bool:
        """Count ``ex`` against its port's delays; False if it is not a held launch's, or its
        port is given up (the exit is the master's to hear)."""
        port = int(ex.slot.rsplit(":", 1)[1])
        h = self.held.get(port)
        if h is None or (h.launch.storm_id, h.launch.launch_id) != (ex.storm_id, ex.launch_id):
            return False
        r = self._restarts.setdefault(port, _Restarts())
        r.last_exit = ex
        if ex.started:
            ran = 0.0 if r.started_at is None else now - r.started_at
            r.crashes, delay = crash_backoff(r.crashes, ran)
            r.failed_starts = 0
        else:
            r.failed_starts += 1
            if self.max_launch_attempts is not None and r.failed_starts >= self.max_launch_attempts:
                log.error("worker %s of %s failed to start %d times in a row without the master "
                          "(squall.worker.max.launch.attempts): not started again until a master answers",
                          ex.slot, h.launch.name, r.failed_starts)
                r.given_up = True
                return False
            delay = launch_backoff(r.failed_starts)
        r.retry_at = now + delay
        log.warning("worker %s of %s (launch %s) ended with status %s while no master answers: starting it "
                    "again%s", ex.slot, h.launch.name, h.launch.launch_id, ex.status,
                    f" in {delay:.0f} s" if delay else "")
        return True

    def _resume(self, port: int, h: HeldSlot, r: _Restarts, now: float) -> None:
        if h.resumes >= MAX_RESUMES:
            log.error("worker %s of %s was started again %d times without the master: no more until one answers",
                      port, h.launch.name, h.resumes)
            r.given_up = True
            return
        new = replace(h, resumes=h.resumes + 1)
        self.held[port] = new
        try:
            self._save()  # before the start: a number of restarts is never used twice
        except SquallError as e:
            self.held[port] = h
            log.error("worker %s of %s not started again: %s", port, h.launch.name, e)
            r.retry_at = now + launch_backoff(1)
            return
        if self.launcher.resume(port, h.launch, new.resumes):
            r.started_at = now
        else:
            r.given_up = True  # this host cannot: its master starts it when it answers

    def _save(self) -> None:
        if self.store is not None:
            self.store.save(self.held)
        self._unkept = False
