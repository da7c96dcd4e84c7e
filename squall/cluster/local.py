"""`LocalCluster`: a whole cluster in this process (Storm's ``LocalCluster``).

It plays Nimbus and the supervisors for in-process workers: it validates and plans a submitted
topology, deals its executors evenly over ``topology.workers`` workers, runs the topology state
machine, restarts a worker whose user code crashed (with fresh component instances, as a real
supervisor relaunches the process; one that keeps crashing soon after its start waits longer
each time, as on the process host: `crash_backoff`), and reports statistics and errors as
plain dicts (an error that repeats the last of its component counts on its record).
Each worker has its own `TopologyState` and `Backpressure`, as a worker process does, and its
own `InMemoryTransport` endpoint on the topology's `InMemoryNetwork` (no serialization, no
sockets), through which its backpressure reaches the other workers (`BackpressureLink`).
"""

from __future__ import annotations

import itertools
import logging
import random
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from .._config import cluster_conf, topology_conf
from .._errors import AlreadyAliveException, InvalidTopologyException, NotAliveException
from .._system import ACKER_COMPONENT
from .._topology import StormTopology
from ..engine.clock import Clock
from ..engine.executor import ErrorRecord, add_error
from ..engine.loop import Backpressure, TopologyState
from ..engine.plan import TopologyPlan, make_plan
from ..engine.remote_backpressure import BackpressureLink
from ..engine.transport import InMemoryNetwork, InMemoryTransport
from ..engine.worker import Worker, component_blobs
from .backoff import crash_backoff
from .scheduler import even_schedule
from .state import (ACTIVATE, DO_REBALANCE, INACTIVATE, KILL, REBALANCE, REMOVE, TopologyStatus,
                    transition)
from .timers import Timers

log = logging.getLogger("squall.cluster")

_NAME_RE = re.compile(r"^[^/.:\\]+$")
_MAX_ERRORS_PER_COMPONENT = 10
_FIRST_PORT = 1024
_STALL_CHECK_SECS = 0.5


class _Topology:
    """What the cluster keeps about one running topology."""

    def __init__(self, plan: TopologyPlan, status: TopologyStatus, blobs: dict[str, bytes]) -> None:
        self.plan = plan
        self.status = status
        self.previous: TopologyStatus | None = None
        self.blobs = blobs
        self.launched = time.time()
        self.active = status == TopologyStatus.ACTIVE  # what every worker's TopologyState says
        self.network = InMemoryNetwork()
        self.peers: dict[int, str] = {}  # task -> the address of the worker hosting it
        self.workers: dict[int, Worker] = {}
        self.links: dict[int, BackpressureLink] = {}  # port -> its worker's link to the others
        self.restarts: dict[int, int] = {}
        self.started_at: dict[int, float] = {}  # port -> when its worker started (time.monotonic)
        self.crashes: dict[int, int] = {}       # port -> crashes in a row soon after a start
        self.errors: list[ErrorRecord] = []
        self.generation = 0  # bumped by kill and rebalance, so stale restarts are ignored
        self.lock = threading.RLock()


class LocalCluster:
    """An in-process cluster for development and tests; a context manager.

    >>> from squall import LocalCluster, TopologyBuilder, Fields
    >>> from squall.testing import FeederSpout
    >>> builder = TopologyBuilder()
    >>> _ = builder.set_spout("feed", FeederSpout(Fields("x")))
    >>> with LocalCluster() as cluster:
    ...     cluster.submit_topology("demo", {}, builder.create_topology())
    ...     cluster.get_topology_info("demo")["status"]
    'ACTIVE'

    Args:
        daemon_conf: cluster settings overlaid on the defaults and the ``squall.yaml`` found
            (see `squall._config.find_conf_file`).
        conf_file: an explicit ``squall.yaml`` to read instead of searching.
        clock: the engine's clock (tests may pass a `squall.engine.clock.SimulatedClock`).
        seed: seed for tuple ids and shuffles (default: random).
    """

    def __init__(self, daemon_conf: Mapping[str, Any] | None = None, *, conf_file: str | None = None,
                 clock: Clock | None = None, seed: int | None = None) -> None:
        self.conf = cluster_conf(daemon_conf, conf_file)
        self.clock = clock or Clock()
        self._rng = random.Random(seed)
        self._topologies: dict[str, _Topology] = {}
        self._lock = threading.RLock()
        self._counter = itertools.count(1)
        self._free_ports: list[int] = []
        self._next_port = _FIRST_PORT
        self._timers = Timers("squall-local-nimbus")
        self._closed = False
        self._timers.schedule(_STALL_CHECK_SECS, self._check_stalls)

    # --- context manager ----------------------------------------------------------------------------
    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # --- submission ---------------------------------------------------------------------------------
    def submit_topology(self, name: str, conf: Mapping[str, Any] | None, topology: StormTopology,
                        initial_status: str = "ACTIVE") -> None:
        """Validate, plan and start ``topology`` under ``name``.

        Args:
            name: the topology's name (no ``/ . : \\``).
            conf: the topology's configuration (a `Config` or dict; only ``topology.*`` and
                custom keys).
            topology: from `TopologyBuilder.create_topology`.
            initial_status: ``"ACTIVE"`` (default) or ``"INACTIVE"`` (no user code runs until
                `activate`).

        Raises:
            AlreadyAliveException: a topology of that name is running.
            InvalidTopologyException: bad name, configuration or component (named).
        """
        self._check_open()
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise InvalidTopologyException(f"Topology name {name!r} is invalid: it must match ^[^/.:\\\\]+$")
        if not isinstance(topology, StormTopology):
            raise InvalidTopologyException(
                f"submit_topology needs a StormTopology (from TopologyBuilder.create_topology()), "
                f"got {type(topology).__name__}")
        status = TopologyStatus(initial_status)
        given = dict(conf or {})
        merged = topology_conf(self.conf, given)
        with self._lock:
            if name in self._topologies:
                raise AlreadyAliveException(f"Topology with name `{name}` already exists on cluster")
            storm_id = f"{name}-{next(self._counter)}-{int(time.time())}"
            merged["topology.name"] = name
            plan = make_plan(name, storm_id, topology, merged, given)
            blobs = component_blobs(plan)
            topo = _Topology(plan, status, blobs)
            self._topologies[name] = topo
        with topo.lock:
            self._start_workers(topo)
        log.info("Submitted topology %s (%s), %d workers", name, storm_id, plan.num_workers)

    def _start_workers(self, topo: _Topology) -> None:
        plan = topo.plan
        ports = self._take_ports(plan.num_workers)
        assignment = even_schedule(plan.executors, ports)
        topo.peers = {t: _address(port) for port, execs in assignment.items() for e in execs for t in e.tasks}
        # Build every worker and register its tasks before starting any: a spout that emits at
        # once must not send to a worker that does not exist yet (its tuples would be dropped).
        # Storm's workers likewise activate only once all their connections are ready.
        built = [self._launch(topo, port, execs, start=False)
                 for port, execs in assignment.items() if execs]
        for w in built:
            w.start()
        for port in ports:
            if port not in topo.workers:
                self._release_ports([port])

    def _launch(self, topo: _Topology, port: int, execs, start: bool = True) -> Worker:
        address = _address(port)
        transport = InMemoryTransport(topo.network, address)
        transport.set_peers({t: a for t, a in topo.peers.items() if a != address})
        # real time, as its renewal and expiry (BackpressureLink) run on
        bp = Backpressure(topo.plan.conf["topology.executor.receive.buffer.size"])
        w = Worker(topo.plan, port, execs, topo.blobs, transport, self.clock, TopologyState(active=topo.active),
                   bp, lambda rec, topo=topo: self._record_error(topo, rec),
                   lambda worker, rec, topo=topo, gen=topo.generation: self._worker_crashed(topo, gen, worker),
                   self._rng.getrandbits(64))
        transport.set_receiver(w.receive)
        topo.links[port] = BackpressureLink(bp, transport, name=f"squall-backpressure-{port}")
        topo.workers[port] = w
        topo.started_at[port] = time.monotonic()
        if start:
            w.start()
        return w

    def _take_ports(self, n: int) -> list[int]:
        with self._lock:
            ports = []
            while len(ports) < n:
                if self._free_ports:
                    ports.append(self._free_ports.pop(0))
                else:
                    ports.append(self._next_port)
                    self._next_port += 1
            return sorted(ports)

    def _release_ports(self, ports) -> None:
        with self._lock:
            self._free_ports.extend(ports)
            self._free_ports.sort()

    def _stop_workers(self, topo: _Topology, clean: bool) -> None:
        workers = list(topo.workers.values())
        topo.workers.clear()
        links = list(topo.links.values())
        topo.links.clear()
        for link in links:  # nothing more reaches the workers, nor leaves them
            link.transport.close()
        for w in workers:
            w.stop(clean=clean)
        for link in links:
            link.stop()
        self._release_ports([w.port for w in workers])

    def _set_active(self, topo: _Topology, active: bool) -> None:
        """Activate or deactivate the spouts of every worker of ``topo`` (and of those started later)."""
        topo.active = active
        for w in topo.workers.values():
            w.state.set_active(active)

    # --- crashes --------------------------------------------------------------------------------------
    def _record_error(self, topo: _Topology, record: ErrorRecord) -> None:
        with topo.lock:
            add_error(topo.errors, record)
            mine = [e for e in topo.errors if e.component == record.component]
            if len(mine) > _MAX_ERRORS_PER_COMPONENT:
                topo.errors.remove(mine[0])

    def _worker_crashed(self, topo: _Topology, generation: int, worker: Worker) -> None:
        with topo.lock:
            # Real time, as the restart's delay waits on (`Timers`): on a simulated clock, a
            # worker would seem to run as long as the test moves time, not as long as it did.
            now = time.monotonic()
            ran = now - topo.started_at.get(worker.port, now)
            topo.crashes[worker.port], delay = crash_backoff(topo.crashes.get(worker.port, 0), ran)
        if delay:
            log.warning("worker %s of %s crashed %d times in a row, each soon after it started: restarting it "
                        "in %.0f s", worker.port, topo.plan.name, topo.crashes[worker.port], delay)
        self._timers.schedule(delay, lambda: self._restart(topo, generation, worker))

    def _restart(self, topo: _Topology, generation: int, dead: Worker) -> None:
        with topo.lock:
            if topo.generation != generation or topo.workers.get(dead.port) is not dead:
                return  # killed or rebalanced since: nothing to restart
            dead.stop(clean=False, timeout=1.0)  # (its forgotten inboxes tell the others it is not over)
            link = topo.links.pop(dead.port)
            link.stop()
            link.transport.close()
            topo.restarts[dead.port] = topo.restarts.get(dead.port, 0) + 1
            log.warning("restarting worker %s of %s after a crash", dead.port, topo.plan.name)
            new = self._launch(topo, dead.port, dead.assignment)
            # what the others sent to the dead worker until the new one took its tasks is lost:
            # their spouts fail it now, as the master has them do (see squall.cluster.master)
            for w in topo.workers.values():
                if w is not new:
                    w.tasks_lost(dead.tasks)

    # --- the state machine ----------------------------------------------------------------------------
    def _get(self, name: str) -> _Topology:
        with self._lock:
            topo = self._topologies.get(name)
        if topo is None:
            raise NotAliveException(f"Topology {name!r} is not alive")
        return topo

    def activate(self, name: str) -> None:
        """Activate ``name``'s spouts. Raises `NotAliveException`, `IllegalStateTransition`."""
        topo = self._get(name)
        with topo.lock:
            topo.status = transition(topo.status, ACTIVATE)
            self._set_active(topo, True)

    def deactivate(self, name: str) -> None:
        """Deactivate ``name``'s spouts (``next_tuple`` stops; in-flight tuples complete)."""
        topo = self._get(name)
        with topo.lock:
            topo.status = transition(topo.status, INACTIVATE)
            self._set_active(topo, False)

    def _wait_secs(self, topo: _Topology, wait_secs: float | None) -> float:
        if wait_secs is None:
            return float(topo.plan.conf["topology.message.timeout.secs"])
        if wait_secs < 0:
            raise ValueError(f"wait_secs must be >= 0, got {wait_secs}")
        return float(wait_secs)

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Kill ``name``: deactivate it, wait ``wait_secs`` (default: its message timeout), stop it.

        Returns at once unless ``wait_secs`` is 0 (then the workers are stopped before it
        returns); during the wait the name stays taken and the status is ``KILLED``.
        """
        topo = self._get(name)
        wait = self._wait_secs(topo, wait_secs)
        with topo.lock:
            topo.status = transition(topo.status, KILL)
            self._set_active(topo, False)
            topo.generation += 1
            generation = topo.generation
        if wait == 0:
            self._remove(name, topo, generation)
        else:
            self._timers.schedule(wait, lambda: self._remove(name, topo, generation))

    def _remove(self, name: str, topo: _Topology, generation: int) -> None:
        with topo.lock:
            if topo.generation != generation:
                return  # a later kill re-armed the timer
            transition(topo.status, REMOVE)
            self._stop_workers(topo, clean=True)
        with self._lock:
            if self._topologies.get(name) is topo:
                del self._topologies[name]
        log.info("Killed topology: %s", name)

    def rebalance(self, name: str, num_workers: int | None = None, executors: Mapping[str, int] | None = None,
                  wait_secs: float | None = None) -> None:
        """Move ``name`` to ``num_workers`` workers and/or new executor counts per component.

        The topology is deactivated for ``wait_secs`` (default: its message timeout), its
        workers are stopped, the executors re-planned over the same tasks (a component cannot
        get more executors than tasks) and dealt over the new workers, and its previous status is
        restored. Returns at once unless ``wait_secs`` is 0.

        Raises:
            NotAliveException: no such topology.
            InvalidTopologyException: unknown component or a count below 1.
        """
        topo = self._get(name)
        wait = self._wait_secs(topo, wait_secs)
        new_plan = topo.plan.with_parallelism(num_workers, dict(executors or {}))
        if ACKER_COMPONENT in (executors or {}):
            raise InvalidTopologyException("rebalance: the acker's executors cannot be changed")
        with topo.lock:
            previous = topo.status
            topo.status = transition(topo.status, REBALANCE)
            topo.previous = previous
            self._set_active(topo, False)
            topo.generation += 1
            generation = topo.generation
        if wait == 0:
            self._do_rebalance(topo, generation, new_plan)
        else:
            self._timers.schedule(wait, lambda: self._do_rebalance(topo, generation, new_plan))

    def _do_rebalance(self, topo: _Topology, generation: int, plan: TopologyPlan) -> None:
        with topo.lock:
            if topo.generation != generation:
                return
            status = transition(topo.status, DO_REBALANCE, topo.previous)
            self._stop_workers(topo, clean=True)
            topo.plan = plan
            topo.generation += 1
            topo.status = status
            self._set_active(topo, status == TopologyStatus.ACTIVE)
            self._start_workers(topo)
        log.info("Rebalanced topology %s: %d workers", plan.name, plan.num_workers)

    def _check_stalls(self) -> None:
        """The watchdog: unblock worker loops held by one component's user code (see
        `Worker.find_stalls`, which logs what it moves); reschedules itself."""
        if self._closed:
            return
        with self._lock:
            topos = list(self._topologies.values())
        now = time.monotonic()
        for topo in topos:
            threshold = float(topo.plan.conf.get("topology.executor.blocking.warn.millis") or 1000) / 1000.0
            for w in list(topo.workers.values()):
                w.find_stalls(now, threshold)
        self._timers.schedule(_STALL_CHECK_SECS, self._check_stalls)

    def shutdown(self) -> None:
        """Stop every topology at once (no wait) and the cluster."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            topos = list(self._topologies.items())
            self._topologies.clear()
        for _name, topo in topos:
            with topo.lock:
                topo.generation += 1
                self._set_active(topo, False)
                self._stop_workers(topo, clean=True)
        self._timers.stop()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this LocalCluster has been shut down")

    # --- information --------------------------------------------------------------------------------------
    def get_topology_names(self) -> list[str]:
        """Names of the topologies on the cluster (killed ones until removed)."""
        with self._lock:
            return sorted(self._topologies)

    def get_topology_info(self, name: str) -> dict[str, Any]:
        """Status, counts and errors of ``name`` as plain dicts (see docs/concepts.md).

        Keys: ``id``, ``name``, ``status``, ``uptime_secs``, ``num_workers``, ``num_executors``,
        ``num_tasks``, ``components`` (per component id: ``type``, ``executors``, ``tasks``,
        ``emitted``, ``transferred``, ``acked``, ``failed``, ``executed``,
        ``complete_latency_ms``, ``errors``, and ``task_stats`` per task id), ``workers`` and
        ``errors`` (each: component, task, time, error, traceback, worker, fatal, count, last_time:
        an error identical to the last of its component counts on that record).
        """
        topo = self._get(name)
        with topo.lock:
            return _topology_info(topo)

    def get_cluster_info(self) -> dict[str, Any]:
        """A summary of the cluster and its topologies as plain dicts."""
        with self._lock:
            topos = list(self._topologies.values())
        summaries = []
        for topo in topos:
            with topo.lock:
                info = _topology_info(topo)
            summaries.append({k: info[k] for k in ("id", "name", "status", "uptime_secs", "num_workers",
                                                    "num_executors", "num_tasks")})
        return {"host": "local", "slots_used": sum(t["num_workers"] for t in summaries),
                "topologies": summaries}

    def advance_cluster_time(self, secs: float, step: float = 1.0) -> None:
        """Move a simulated clock forward ``secs`` seconds in steps (Storm's ``advanceClusterTime``).

        Only for a cluster made with ``clock=SimulatedClock()``: message timeouts and ticks then
        follow this clock, so a test can pass a timeout without waiting for it.

        Raises:
            TypeError: the cluster runs on real time.
        """
        advance = getattr(self.clock, "advance", None)
        if advance is None:
            raise TypeError("advance_cluster_time needs LocalCluster(clock=SimulatedClock())")
        left = secs
        while left > 0:
            d = min(step, left)
            advance(d)
            left -= d
            time.sleep(0.01)  # let the loops see each step, as Storm waits for idle between steps

    def is_idle(self, name: str) -> bool:
        """True when no tuple waits in any inbox of ``name`` and every loop sleeps."""
        topo = self._get(name)
        with topo.lock:
            return all(w.is_idle() for w in topo.workers.values())


def _address(port: int) -> str:
    """The in-memory address of a topology's worker on ``port``."""
    return f"local:{port}"


def _topology_info(topo: _Topology) -> dict[str, Any]:
    plan = topo.plan
    tasks: dict[int, dict[str, Any]] = {}
    for w in topo.workers.values():
        tasks.update(w.statistics())
    components: dict[str, dict[str, Any]] = {}
    for cid, spec in plan.topology.components.items():
        ctasks = plan.component_tasks[cid]
        stats = [tasks[t] for t in ctasks if t in tasks]
        lat_sum = sum(s["complete_latency_sum"] for s in stats)
        lat_n = sum(s["complete_latency_count"] for s in stats)
        components[cid] = {
            "type": spec.kind,
            "executors": sum(1 for e in plan.executors if e.component == cid),
            "tasks": len(ctasks),
            "emitted": sum(sum(s["emitted"].values()) for s in stats),
            "transferred": sum(sum(s["transferred"].values()) for s in stats),
            "acked": sum(s["acked"] for s in stats),
            "failed": sum(s["failed"] for s in stats),
            "executed": sum(s["executed"] for s in stats),
            "complete_latency_ms": (1000.0 * lat_sum / lat_n) if lat_n else 0.0,
            "errors": [e.as_dict() for e in topo.errors if e.component == cid],
            "task_stats": {t: tasks[t] for t in ctasks if t in tasks},
        }
    ackers = [tasks[t] for t in plan.acker_tasks if t in tasks]
    return {
        "id": plan.storm_id,
        "name": plan.name,
        "status": str(topo.status),
        "uptime_secs": time.time() - topo.launched,
        "num_workers": len(topo.workers),
        "num_executors": len(plan.executors),
        "num_tasks": len(plan.task_to_component),
        "components": components,
        "acker": {"tasks": len(plan.acker_tasks), "executed": sum(s["executed"] for s in ackers)},
        "workers": [{"port": w.port, "executors": [list(e.id) for e in w.assignment],
                     "restarts": topo.restarts.get(w.port, 0)} for w in topo.workers.values()],
        "errors": [e.as_dict() for e in topo.errors],
        "configuration": dict(plan.conf),
    }
