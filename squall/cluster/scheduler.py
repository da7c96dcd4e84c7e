"""Schedulers: which worker slot runs which executors (Storm's ``IScheduler``).

A scheduler is a plain object: `prepare(conf)` once, then `schedule(topologies, cluster)`
whenever something may need placing. It reads the topologies' needs and the cluster's free
slots and calls `SchedulerCluster.assign`; it does no I/O, so tests drive it directly.

- `EvenScheduler` (the default, Storm's ``DefaultScheduler``: its ``EvenScheduler`` plus the
  respreading of squeezed topologies): a topology that needs scheduling gets
  ``min(topology.workers, free slots)`` slots, interleaved across machines, and its executors,
  sorted by first task, are dealt round-robin over them. A topology that lost some of its slots
  (a machine lost or unhealthy) keeps the others whose executor count fits an even spread (their
  workers run on) and its executors left are dealt over as many free slots as it lacks, so a
  lost worker's executors move together; where that deal would split an old worker's
  executors over slots, the whole topology is placed afresh instead (a worker that runs on
  sends to each peer worker's tasks through one connection). A topology placed on fewer slots than
  it asked for (only some were free) is spread again over more once slots free up, as Storm's
  ``Cluster.needsScheduling`` counts it as needing scheduling while it runs "squeezed".
- `IsolationScheduler` (``isolation.scheduler.machines: {topology name: machines}``): each listed
  topology gets that many whole machines to itself, used by no other topology; the others are
  placed evenly on the remaining machines.

``storm.scheduler`` names the class to use (``"module:Class"``); default `EvenScheduler`.
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass, field
from typing import Any

from .._config import Config
from ..engine.plan import ExecutorSpec


@dataclass
class SchedulerTopology:
    """What a scheduler needs to know about one topology."""

    id: str
    name: str
    num_workers: int
    executors: list[ExecutorSpec]
    conf: dict[str, Any] = field(default_factory=dict)


class SchedulerCluster:
    """Machines, their slots, and the current assignments; schedulers change it by `assign`."""

    def __init__(self, machines: dict[str, list[int]], assignments: dict[str, dict[str, list[ExecutorSpec]]]) -> None:
        self.machines = {host: sorted(ports) for host, ports in machines.items()}
        self.assignments = {tid: dict(a) for tid, a in assignments.items()}

    def slots(self) -> list[str]:
        """Every slot, as ``"host:port"``."""
        return [f"{h}:{p}" for h, ports in sorted(self.machines.items()) for p in ports]

    def used_slots(self) -> set[str]:
        """Slots that run some topology."""
        return {s for a in self.assignments.values() for s in a}

    def available_slots(self, hosts: set[str] | None = None) -> list[str]:
        """Free slots (optionally on ``hosts`` only), interleaved across machines as Storm does:
        the first free slot of each machine, then the second of each, ..."""
        used = self.used_slots()
        per_host = [[f"{h}:{p}" for p in ports if f"{h}:{p}" not in used]
                    for h, ports in sorted(self.machines.items(), key=lambda kv: kv[0])
                    if hosts is None or h in hosts]
        per_host.sort(key=len, reverse=True)
        out = []
        for i in range(max((len(x) for x in per_host), default=0)):
            out += [x[i] for x in per_host if i < len(x)]
        return out

    def needs_scheduling(self, topology: SchedulerTopology) -> bool:
        """True if some executor of ``topology`` has no slot."""
        placed = {e for execs in self.assignments.get(topology.id, {}).values() for e in execs}
        return any(e not in placed for e in topology.executors)

    def squeezed(self, topology: SchedulerTopology, hosts: set[str] | None = None) -> bool:
        """True if ``topology`` runs on fewer slots than it asked for (``topology.workers``, at
        most one per executor) while some slot (of ``hosts``, if given) is free to take more:
        Storm's ``Cluster.needsScheduling`` counts such a topology as needing scheduling, and its
        ``DefaultScheduler`` spreads it again over the freed slots."""
        have = len(self.assignments.get(topology.id, {}))
        want = min(topology.num_workers, len(topology.executors))
        return 0 < have < want and bool(self.available_slots(hosts))

    def assign(self, slot: str, topology_id: str, executors: list[ExecutorSpec]) -> None:
        """Run ``executors`` of ``topology_id`` on ``slot``."""
        if slot in self.used_slots() and slot not in self.assignments.get(topology_id, {}):
            raise ValueError(f"slot {slot} is already used by another topology")
        self.assignments.setdefault(topology_id, {}).setdefault(slot, []).extend(executors)

    def hosts_of(self, topology_id: str) -> set[str]:
        """Machines running part of ``topology_id``."""
        return {s.rsplit(":", 1)[0] for s in self.assignments.get(topology_id, {})}


class IScheduler(abc.ABC):
    """Storm's scheduler interface."""

    def prepare(self, conf: dict[str, Any]) -> None:
        """Called once with the master's configuration."""
        self.conf = conf

    @abc.abstractmethod
    def schedule(self, topologies: list[SchedulerTopology], cluster: SchedulerCluster) -> None:
        """Assign the executors of every topology that needs it."""


def even_schedule(executors: list[ExecutorSpec], slots: list) -> dict:
    """Deal ``executors`` round-robin onto ``slots``; every slot gets a list.

    >>> from squall.engine.plan import ExecutorSpec
    >>> es = [ExecutorSpec("a", (1,)), ExecutorSpec("a", (2,)), ExecutorSpec("b", (3,))]
    >>> {p: [e.tasks for e in x] for p, x in even_schedule(es, [1024, 1025]).items()}
    {1024: [(1,), (3,)], 1025: [(2,)]}
    """
    out: dict = {p: [] for p in slots}
    for i, e in enumerate(sorted(executors, key=lambda e: e.tasks[0])):
        out[slots[i % len(slots)]].append(e)
    return out


def spread_squeezed(topologies: list[SchedulerTopology], cluster: SchedulerCluster, hosts: set[str] | None) -> None:
    """Place (on free slots of ``hosts``, if given) first every topology with executors that
    have no slot (new, or whose machine died), then every topology that runs squeezed
    (`SchedulerCluster.squeezed`) while slots are free: a topology that waits with nothing
    running gets the freed slots before one that runs on fewer than it asked for grows."""
    waiting = {t.id for t in topologies if cluster.needs_scheduling(t)}
    for topo in topologies:
        if topo.id in waiting:
            EvenScheduler.schedule_one(topo, cluster, hosts)
    for topo in topologies:
        if topo.id not in waiting and cluster.squeezed(topo, hosts):
            EvenScheduler.schedule_one(topo, cluster, hosts)


class EvenScheduler(IScheduler):
    """Spread each topology evenly over free slots; see the module docstring."""

    def schedule(self, topologies: list[SchedulerTopology], cluster: SchedulerCluster) -> None:
        spread_squeezed(topologies, cluster, None)

    @staticmethod
    def schedule_one(topo: SchedulerTopology, cluster: SchedulerCluster, hosts: set[str] | None) -> None:
        """Place ``topo`` on free slots (of ``hosts`` if given), as Storm's ``DefaultScheduler``
        does: a slot it runs on whose executor count fits an even spread over the slots it will
        use keeps its executors (`bad_slots`: its worker runs on untouched), the other slots are
        freed, and the executors left (a lost machine's, a freed slot's) are dealt round-robin
        over as many free slots as it needs more. So a lost worker's executors move together to
        one new slot while the others' workers run on: placing everything afresh, as squall
        did, restarted every worker of the topology on a new mix of executors, split the lost
        worker's executors over several slots and moved the survivors' tasks, whose in-memory
        state went and whose file states, on another machine, were refused."""
        existing = set(cluster.slots())
        before = cluster.assignments.pop(topo.id, {})
        alive = {slot: execs for slot, execs in before.items()
                 if slot in existing and (hosts is None or slot.rsplit(":", 1)[0] in hosts)}
        free = [s for s in cluster.available_slots(hosts) if s not in alive]
        wanted = min(topo.num_workers, len(topo.executors), len(alive) + len(free))
        if wanted == 0:
            return
        placed = {e for execs in alive.values() for e in execs}
        bad = set()
        if wanted != len(alive) or placed != set(topo.executors):
            bad = set(bad_slots(alive, len(topo.executors), wanted))
        keep = {slot: execs for slot, execs in alive.items() if slot not in bad}
        kept = {e for execs in keep.values() for e in execs}
        left = [e for e in topo.executors if e not in kept]
        # the freed slots are free again, in Storm's order (interleaved across machines)
        free = [s for s in cluster.available_slots(hosts) if s not in keep]
        dealt = even_schedule(left, free[:wanted - len(keep)]) if left and wanted > len(keep) else {}
        if keep and _splits_a_worker(before, keep, dealt):
            # A worker that runs on sends to each peer worker's tasks through one connection,
            # keyed by that worker (`squall.worker.batching`): a peer's tasks dealt over several
            # slots would all still go to one of them, and every tuple for the others be dropped
            # there, its replays too. Placed afresh instead, every worker restarts.
            keep, dealt = {}, even_schedule(topo.executors, cluster.available_slots(hosts)[:wanted])
        for slot, execs in keep.items():
            cluster.assign(slot, topo.id, list(execs))
        for slot, execs in dealt.items():
            if execs:
                cluster.assign(slot, topo.id, execs)


def _splits_a_worker(before: dict[str, list[ExecutorSpec]], keep: dict[str, list[ExecutorSpec]],
                     dealt: dict[str, list[ExecutorSpec]]) -> bool:
    """Whether the executors of a slot of ``before`` not kept (lost or freed) are dealt over
    more than one slot of ``dealt``."""
    where = {e: slot for slot, execs in dealt.items() for e in execs}
    return any(len({where[e] for e in execs if e in where}) > 1
               for slot, execs in before.items() if slot not in keep)


def integer_partitions(total: int, pieces: int) -> dict[int, int]:
    """Storm's ``integer-divided``: ``total`` split into ``pieces`` as even as they go, as
    ``{size: how many pieces}``.

    >>> integer_partitions(7, 2)
    {3: 1, 4: 1}
    >>> integer_partitions(6, 3)
    {2: 3}
    """
    base, extra = divmod(total, pieces)
    return {base: pieces - extra} if extra == 0 else {base: pieces - extra, base + 1: extra}


def bad_slots(alive: dict[str, list[ExecutorSpec]], executors: int, workers: int) -> list[str]:
    """Storm's ``DefaultScheduler.bad-slots``: the slots of ``alive`` to free because their
    executor counts do not fit ``executors`` spread evenly over ``workers`` slots; the others
    keep what they run (the first slots in order, while the spread has room for their count)."""
    if workers == 0:
        return []
    room = integer_partitions(executors, workers)
    bad = []
    for slot, execs in alive.items():
        if room.get(len(execs), 0) > 0:
            room[len(execs)] -= 1
        else:
            bad.append(slot)
    return bad


class IsolationScheduler(IScheduler):
    """Whole machines for the topologies of ``isolation.scheduler.machines``."""

    def schedule(self, topologies: list[SchedulerTopology], cluster: SchedulerCluster) -> None:
        wanted: dict[str, int] = dict(self.conf.get(Config.ISOLATION_SCHEDULER_MACHINES) or {})
        isolated_hosts: set[str] = set()
        for topo in topologies:  # keep isolated topologies that are already placed
            if topo.name in wanted and not cluster.needs_scheduling(topo):
                isolated_hosts |= cluster.hosts_of(topo.id)
        for topo in topologies:
            if topo.name not in wanted or not cluster.needs_scheduling(topo):
                continue
            used = cluster.used_slots()
            empty = [h for h, ports in sorted(cluster.machines.items())
                     if h not in isolated_hosts and not any(f"{h}:{p}" in used for p in ports)]
            hosts = set(empty[:wanted[topo.name]])
            if len(hosts) < wanted[topo.name]:
                continue  # not enough empty machines: it waits, as in Storm
            EvenScheduler.schedule_one(topo, cluster, hosts)
            isolated_hosts |= hosts
        others = set(cluster.machines) - isolated_hosts
        spread_squeezed([t for t in topologies if t.name not in wanted], cluster, others)


def load_scheduler(conf: dict[str, Any]) -> IScheduler:
    """The scheduler ``storm.scheduler`` names (default `EvenScheduler`), prepared.

    Raises:
        ValueError: naming the key when the class cannot be loaded or is not an `IScheduler`.
    """
    name = conf.get(Config.STORM_SCHEDULER)
    if not name:
        cls: type = IsolationScheduler if conf.get(Config.ISOLATION_SCHEDULER_MACHINES) else EvenScheduler
    else:
        module, _, qual = str(name).partition(":")
        try:
            cls = getattr(importlib.import_module(module), qual)
        except (ImportError, AttributeError, ValueError) as e:
            raise ValueError(f"storm.scheduler: cannot load {name!r} ({e})") from e
        if not (isinstance(cls, type) and issubclass(cls, IScheduler)):
            raise ValueError(f"storm.scheduler: {name!r} is not an IScheduler")
    scheduler = cls()
    scheduler.prepare(conf)
    return scheduler
