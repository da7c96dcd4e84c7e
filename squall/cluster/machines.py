"""`Machines`: whether the master hears its machines, and what it does when it does not.

The master hears a machine through its supervisor's syncs, and the machine's workers through
their heartbeats. When those stop, it decides, at each tick of its monitor, between:

- a machine lost: its supervisor silent past ``nimbus.supervisor.timeout.secs``, or one of its
  workers silent past ``nimbus.task.timeout.secs`` with the supervisor silent too: its
  executors move to the other machines (`MachineLost`, `NodeLost`);
- a worker restarted in place: silent past its limit (``nimbus.task.launch.secs`` while it
  starts) on a machine whose supervisor was heard since (`Restart`);
- a machine held: silent, but not taken for lost, because ZooKeeper hears its supervisor
  (only the master's link to it is down: `squall.cluster.liveness`), or because every machine
  fell silent with it (the master's own link cut, or the master paused: `squall.cluster.silence`).
  Nothing moves and nothing restarts; the master says so, once a hold (`Say`);
- a machine reached again after a hold: its workers get their timeout anew (`Renew`), so that
  none is restarted for a silence the master caused.

This is a plain object: no threads, sockets or ZooKeeper calls inside, the time passed in. The
master's shell (`squall.cluster.master.Master`) asks ZooKeeper which silent machines it hears
(`to_ask`, then `squall.cluster.liveness.read_presences`), feeds the answers in, and carries out
the instructions each method returns, in order: it logs and records what to `Say`, moves a
heartbeat's time (`Renew`, `RenewMachine`), drops the slots of a lost machine and schedules
again. The tests of `tests/cluster/test_machines.py` drive it with no master and no cluster.

A machine held because ZooKeeper hears it is held for as long as ZooKeeper does, and that is on
purpose: moved, every executor there would run twice (two copies of a spout reading its source,
two owners of a stateful bolt). Storm does not move it either: its Nimbus reads a supervisor's
liveness from ZooKeeper (Storm 1.x the workers' heartbeats too), and its supervisors read their
assignments there, so a Nimbus cut off from one machine alone loses nothing and says nothing.
Here the assignments go over the master's link, and a machine may be held for hours (a
firewall rule between the master and it; a supervisor whose loop hangs while its ZooKeeper
session pings on), and meanwhile none of the master's decisions reach it: a kill, a rebalance or
a deactivation of its topologies, a restart of a worker of it that hangs. So once a machine has
been unheard for `UNREACHED_REPORT_TIMEOUTS` supervisor timeouts, the master says so again, once
a hold, in its log and in each topology with a worker there, naming the machine and what the
operator can do (`Timeouts.unreached_report`). It still moves nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._config import Config, conf_value
from .ha import ALIVE
from .liveness import HeldByZooKeeper, PresenceReads, PresenceWatch
from .master_records import SupervisorInfo
from .silence import HeardNone, SilenceWatch, silence_grace

UNREACHED_REPORT_TIMEOUTS = 5
"""How many ``nimbus.supervisor.timeout.secs`` a machine ZooKeeper hears may stay unheard by the
master before the master reports it a second time, with what to do (5 minutes at the defaults)."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The master's timeouts, in seconds, as its configuration gives them (`of`)."""

    supervisor: float  # nimbus.supervisor.timeout.secs
    task: float        # nimbus.task.timeout.secs
    launch: float      # nimbus.task.launch.secs
    beat: float        # worker.heartbeat.frequency.secs

    @classmethod
    def of(cls, conf: Mapping[str, Any]) -> Timeouts:
        return cls(float(conf_value(conf, Config.NIMBUS_SUPERVISOR_TIMEOUT_SECS)),
                   float(conf_value(conf, Config.NIMBUS_TASK_TIMEOUT_SECS)),
                   float(conf_value(conf, Config.NIMBUS_TASK_LAUNCH_SECS)),
                   float(conf_value(conf, Config.WORKER_HEARTBEAT_FREQUENCY_SECS)))

    @property
    def unreached_report(self) -> float:
        """How long a machine held because ZooKeeper hears it is unheard before it is reported again."""
        return UNREACHED_REPORT_TIMEOUTS * self.supervisor


# --- what is fed in --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WorkerAt:
    """An assigned worker and the master's monotonic time of its last heartbeat."""

    storm_id: str
    slot: str
    time: float


@dataclass(frozen=True, slots=True)
class WorkerWait:
    """An assigned worker the master waits to hear (not given up, not held back by a backoff):
    ``last``, since when it waits (its last heartbeat, or the end of its backoff); ``starting``,
    it has not beaten since its launch (its limit is ``nimbus.task.launch.secs``)."""

    storm_id: str
    slot: str
    last: float
    starting: bool


# --- what the master does --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Say:
    """Tell the operator: the master logs "this master (its address) ``what``"; unless
    ``logged_only``, each topology with a worker on one of ``slots`` (every topology with workers
    when None) records the error "the master ``what``"."""

    what: str
    slots: frozenset[str] | None = None
    logged_only: bool = False


@dataclass(frozen=True, slots=True)
class Forgotten:
    """ZooKeeper no longer hears a machine held because it did (its supervisor's session ended):
    it is taken for lost as any silent machine is (the master logs it)."""

    held: HeldByZooKeeper


@dataclass(frozen=True, slots=True)
class RenewMachine:
    """Take ``supervisor_id`` for heard at ``seen`` (its timeout runs anew from then)."""

    supervisor_id: str
    seen: float


@dataclass(frozen=True, slots=True)
class Renew:
    """Take the worker on ``slot`` of ``storm_id`` for heard at ``time``; ``starting``: given
    ``nimbus.task.launch.secs`` from then (None: as it was)."""

    storm_id: str
    slot: str
    time: float
    starting: bool | None


@dataclass(frozen=True, slots=True)
class MachineLost:
    """``supervisor_id`` was silent ``silent_for`` seconds, past ``nimbus.supervisor.timeout.secs``,
    and is held by nothing: forget it and move the executors of its slots."""

    supervisor_id: str
    silent_for: float


@dataclass(frozen=True, slots=True)
class Restart:
    """The worker on ``slot`` of ``storm_id`` was silent ``silent_for`` seconds, past its limit
    (``limit``; ``starting``: it never beat), and its machine was heard since: give the slot a
    new launch (its supervisor starts it again)."""

    storm_id: str
    slot: str
    silent_for: float
    limit: float
    starting: bool


@dataclass(frozen=True, slots=True)
class NodeLost:
    """Workers silent past ``nimbus.task.timeout.secs`` on machines whose supervisors are silent
    too: forget ``supervisor_ids`` and move the executors of ``slots`` (theirs included)."""

    supervisor_ids: tuple[str, ...]
    slots: frozenset[str]


Instruction = Say | Forgotten | RenewMachine | Renew | MachineLost | Restart | NodeLost


class Machines:
    """What the master knows of whether it hears its machines (see the module docstring).

    It holds two watches: `SilenceWatch` (every machine silent at once: a spell in which the
    master heard none) and `PresenceWatch` (the machines held because ZooKeeper hears them), and
    which machines ZooKeeper heard at the last tick (``zookeeper_hears``). It changes only
    through its methods; each returns what the master must do, in order. A master's tick calls
    `heard_again`, then `to_ask` and `silent_machines` (with ZooKeeper's answer), then, once it
    has dropped the lost machines and scheduled again, `silent_workers`; a supervisor's sync
    calls `reached` when `holds` it. Not thread-safe: the master calls it on its event loop.

    Args:
        grace: how far apart machines may fall silent and still count as falling silent
            together (`squall.cluster.silence.silence_grace`).
    """

    def __init__(self, grace: float) -> None:
        self.silence = SilenceWatch(grace)
        self.presences = PresenceWatch()
        # the machines ZooKeeper heard (or could not be asked about) at the last tick: not lost
        self.zookeeper_hears: frozenset[str] = frozenset()
        self._reported: set[str] = set()  # held machines reported past `Timeouts.unreached_report`

    @classmethod
    def of(cls, conf: Mapping[str, Any]) -> Machines:
        return cls(silence_grace(conf))

    @property
    def grace(self) -> float:
        return self.silence.grace

    def lead(self) -> None:
        """The master takes the lead: every machine and worker has its timeout anew anyway
        (`squall.cluster.master.Master.lead`), so no spell and no hold carries over."""
        self.silence.spell = None
        self.presences = PresenceWatch()
        self.zookeeper_hears = frozenset()
        self._reported.clear()

    # --- a supervisor syncs ---------------------------------------------------------------------------
    def holds(self, supervisor_id: str) -> bool:
        """Whether ``supervisor_id`` is held because ZooKeeper hears it (`reached` ends that)."""
        return supervisor_id in self.presences.held

    def reached(self, supervisor_id: str, host: str, ports: Iterable[int], now: float,
                workers: Iterable[WorkerAt]) -> list[Instruction]:
        """The supervisor of a machine held because ZooKeeper heard it syncs again (on ``host``
        with ``ports``): its workers (of ``workers``, those on its slots) not heard since it was
        held get ``nimbus.task.launch.secs`` from now to be heard (their heartbeats come back
        over the same healed link), so that none is restarted for it."""
        held = self.presences.heard(supervisor_id)
        self._reported.discard(supervisor_id)
        if held is None:
            return []
        slots = {f"{host}:{p}" for p in ports}
        out: list[Instruction] = [Renew(w.storm_id, w.slot, now, True) for w in workers
                                  if w.slot in slots and w.time < held.since]
        out.append(Say(f"hears supervisor {held.supervisor_id} on {held.host} again after "
                       f"{now - held.since + held.unheard:.0f} s in which only ZooKeeper heard it: its workers have "
                       f"nimbus.task.launch.secs from now to be heard", logged_only=True))
        return out

    # --- the master's tick ----------------------------------------------------------------------------
    def heard_again(self, now: float, supervisors: Mapping[str, SupervisorInfo], workers: Iterable[WorkerAt],
                    t: Timeouts) -> list[Instruction]:
        """A machine is heard again after a spell in which none was: the silence was this
        master's. Every machine and worker not heard since gets its timeout anew from now
        (a worker ``nimbus.task.launch.secs``, as when a master takes the lead), so that none
        is taken for lost, or restarted in place, for the silence the master caused; but a
        worker that had fallen silent before the master did (by more than the grace, or two of
        its heartbeats) keeps what was left of its own timeout, the deaf time not counted, and a
        machine held because ZooKeeper hears it, and its workers, keep theirs (held until reached)."""
        spell = self.silence.ended(supervisors)
        if spell is None:
            return []
        resumed = max(sup.seen for sup in supervisors.values())
        # a machine held because ZooKeeper hears it is silent for its own link, not for the
        # master's silence: it and its workers keep their times and it stays held until it is
        # reached (`reached`). Renewed, it counted as heard: its hold ended unsaid, its silent
        # worker was restarted in place on a machine the master cannot reach, and it was held
        # and said again a timeout later
        held = sorted(sid for sid in self.presences.held if sid in supervisors)
        held_slots = {slot for sid in held for slot in supervisors[sid].slots()}
        out: list[Instruction] = [RenewMachine(sid, now) for sid, sup in supervisors.items()
                                  if sup.seen <= spell.last_heard and sid not in held]
        # a worker already unheard that long when the master last heard a machine fell silent
        # on its own (hung), as a machine is lost on its own (`SilenceWatch.with_the_rest`)
        own = spell.last_heard - max(self.grace, 2 * t.beat)
        for w in workers:
            if w.time >= resumed or w.slot in held_slots:
                continue
            if w.time < own:
                # the deaf time does not count, what it was silent before does: given the
                # launch timeout anew, a hung worker waited it out from the heal (121 s
                # with 3 s timeouts, where it had 1 s left)
                out.append(Renew(w.storm_id, w.slot, w.time + (resumed - spell.last_heard), None))
            else:
                out.append(Renew(w.storm_id, w.slot, now, True))
        out.append(Say(f"hears its machines again after {resumed - spell.last_heard:.0f} s in which it heard none: "
                       "the silence was its own, and no worker is restarted for it; each machine has "
                       "nimbus.supervisor.timeout.secs and each worker nimbus.task.launch.secs from now to be heard"
                       + (f" (but {', '.join(held)}, which only ZooKeeper hears, stay held until heard)" if held else ""),
                       logged_only=True))
        return out

    def to_ask(self, now: float, supervisors: Mapping[str, SupervisorInfo], t: Timeouts) -> list[str]:
        """The supervisors to ask ZooKeeper about: those unheard past the shorter timeout."""
        after = min(t.supervisor, t.task)
        return [sid for sid, sup in supervisors.items() if now - sup.seen > after]

    def silent_machines(self, now: float, supervisors: Mapping[str, SupervisorInfo], reads: PresenceReads | None,
                        t: Timeouts) -> list[Instruction]:
        """Decide on the machines whose supervisors are silent past ``nimbus.supervisor.timeout.secs``:
        held (ZooKeeper hears them, or every machine fell silent with them) or lost.

        Args:
            reads: what ZooKeeper said of the machines `to_ask` named (None: there is no
                ZooKeeper, or none to ask; an empty `PresenceReads`: it could not be asked).
        """
        out: list[Instruction] = []
        alive = self._zookeeper_hears(now, supervisors, reads, t, out)
        self.zookeeper_hears = frozenset(alive)
        silent = [sid for sid, sup in supervisors.items() if now - sup.seen > t.supervisor and sid not in alive]
        # decided before any is dropped: whether each fell silent with all the others
        dead = [sid for sid in silent if not self._held(sid, supervisors, now, out)]
        out += [MachineLost(sid, now - supervisors[sid].seen) for sid in dead]
        return out

    def silent_workers(self, now: float, supervisors: Mapping[str, SupervisorInfo], workers: Iterable[WorkerWait],
                       t: Timeouts) -> list[Instruction]:
        """Decide on the workers silent past their limit (``supervisors``: those left once the
        lost machines of `silent_machines` are dropped). A worker whose machine was heard since
        its limit passed is restarted in place; one silent past ``nimbus.task.timeout.secs`` on
        a machine silent too is lost with its machine, unless that machine is held."""
        out: list[Instruction] = []
        dead: set[str] = set()  # slots whose worker and supervisor both fell silent
        for w in workers:
            limit = t.launch if w.starting else t.task
            if now - w.last > t.task and not _supervised(supervisors, w.slot, now, t.task):
                if not self._on(supervisors, w.slot, self.zookeeper_hears) \
                        and not self._held_slot(w.slot, supervisors, now, out):
                    dead.add(w.slot)
            elif now - w.last > limit and _synced_since(supervisors, w.slot, w.last + limit):
                out.append(Restart(w.storm_id, w.slot, now - w.last, limit, w.starting))
        if dead:
            lost: list[str] = []
            for sid, sup in supervisors.items():
                if sup.slots() & dead:
                    lost.append(sid)
                    dead |= sup.slots()
            out.append(NodeLost(tuple(lost), frozenset(dead)))
        return out

    # --- held because ZooKeeper hears it (`squall.cluster.liveness`) ---------------------------------------
    def _zookeeper_hears(self, now: float, supervisors: Mapping[str, SupervisorInfo], reads: PresenceReads | None,
                         t: Timeouts, out: list[Instruction]) -> set[str]:
        """The supervisors ZooKeeper hears (their node lives and names their host), held back from
        being taken for lost, each newly held said once; and those it could not be asked about
        (held too, unsaid, for this tick: without its answer the master cannot tell a cut link
        from a dead machine, and a leader whose connection is gone loses the lead anyway)."""
        if reads is None:
            self.presences.keep_only(set())
            self._reported.clear()
            return set()
        alive = set()
        for sid, presence in reads.alive.items():
            sup = supervisors[sid]
            if presence.host != sup.host:
                continue
            alive.add(sid)
            held = self.presences.hold(sid, sup.host, now, now - sup.seen)
            if held is not None:
                out.append(Say(_cut_off(held), frozenset(sup.slots())))
        for gone in self.presences.keep_only(alive | set(reads.unanswered)):
            if gone.supervisor_id in supervisors:
                out.append(Forgotten(gone))
        self._reported &= set(self.presences.held)
        for sid in sorted(alive):
            held = self.presences.held[sid]
            unheard = now - held.since + held.unheard
            if sid not in self._reported and unheard >= t.unreached_report:
                self._reported.add(sid)
                out.append(Say(_unreached(held, unheard), frozenset(supervisors[sid].slots())))
        return alive | set(reads.unanswered)

    # --- held because every machine fell silent (`squall.cluster.silence`) -------------------------------
    def _held(self, supervisor_id: str, supervisors: Mapping[str, SupervisorInfo], now: float,
              out: list[Instruction]) -> bool:
        """Whether the silent ``supervisor_id`` is held back from being taken for lost because
        every machine fell silent with it; the first one held says why."""
        was = self.silence.spell
        spell = self.silence.held(supervisor_id, supervisors, now)
        if spell is not None and was is None:
            out.append(Say(_heard_none(spell, now, self.grace)))
        return spell is not None

    def _held_slot(self, slot: str, supervisors: Mapping[str, SupervisorInfo], now: float,
                   out: list[Instruction]) -> bool:
        """Whether the silent worker of ``slot`` is on a machine `_held` back (a slot no
        supervisor offers is not: nothing is heard of its machine at all)."""
        return any(self._held(sid, supervisors, now, out) for sid, sup in supervisors.items() if slot in sup.slots())

    @staticmethod
    def _on(supervisors: Mapping[str, SupervisorInfo], slot: str, supervisor_ids: Iterable[str]) -> bool:
        """Whether one of ``supervisor_ids`` offers ``slot``."""
        return any(slot in supervisors[sid].slots() for sid in supervisor_ids if sid in supervisors)


def _supervised(supervisors: Mapping[str, SupervisorInfo], slot: str, now: float, timeout: float) -> bool:
    """True if a supervisor that synced within ``timeout`` seconds offers ``slot`` (and so can
    restart its worker there)."""
    return any(now - sup.seen <= timeout and slot in sup.slots() for sup in supervisors.values())


def _synced_since(supervisors: Mapping[str, SupervisorInfo], slot: str, since: float) -> bool:
    """True if a supervisor that offers ``slot`` synced after ``since`` (the moment its
    worker's silence passed its limit), or none offers it (nothing to wait for). A worker
    overdue on a machine whose supervisor has not been heard since is not restarted in
    place: the whole machine may be gone (a cut link silences both, and a supervisor that
    syncs more often than its worker beats was heard last after the worker); the next sync
    restarts it, or the supervisor's silence moves its executors (`NodeLost`)."""
    offered = [sup for sup in supervisors.values() if slot in sup.slots()]
    return not offered or any(sup.seen > since for sup in offered)


def _cut_off(held: HeldByZooKeeper) -> str:
    return (f"cannot reach supervisor {held.supervisor_id} on {held.host} (unheard for {held.unheard:.0f} s), but "
            f"ZooKeeper hears it (its session's node {ALIVE}/{held.supervisor_id} lives): only the link between "
            f"this master and that machine is down, so it is not taken for lost. Its executors stay where they "
            f"are and its workers run on (moved, every executor there would run twice); it is heard again once "
            f"the link heals. Check the network between the master and {held.host}")


def _unreached(held: HeldByZooKeeper, unheard: float) -> str:
    return (f"still cannot reach supervisor {held.supervisor_id} on {held.host} after {unheard:.0f} s "
            f"({UNREACHED_REPORT_TIMEOUTS} nimbus.supervisor.timeout.secs), while ZooKeeper hears it: its executors "
            f"stay there, not moved while ZooKeeper hears it (moved, they would run twice), but nothing the master "
            f"decides reaches that machine (a kill, a rebalance or a deactivation of its topologies; a restart of a "
            f"worker of it that hangs). Fix the network between the master and {held.host}; if its supervisor "
            f"hangs (a live process keeps its ZooKeeper session), restart it; to move its executors now, stop the "
            f"supervisor on {held.host}: its ZooKeeper session ends and the master takes the machine for lost")


def _heard_none(spell: HeardNone, now: float, grace: float) -> str:
    return (f"heard none of its {spell.machines} supervisors for {now - spell.last_heard:.0f} s, and they fell silent "
            f"within {grace:g} s of each other: as when this master's own link to them is cut (a Nimbus HA "
            f"leader that still reaches ZooKeeper keeps the lead) or the master was paused, rather than "
            f"{spell.machines} machines failing at once. It takes none of them for lost: it moves no executor and "
            f"restarts no worker, which run on without it; the first machine heard again ends this, and every "
            f"machine and worker then has its timeout anew")
