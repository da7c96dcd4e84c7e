"""`LocalCluster`: a whole cluster in this process (Storm's ``LocalCluster``).

As Storm's forwards every verb to the nimbus it runs in its JVM, this one is a `Master` (the same
Nimbus as the process and Spark hosts: validation, the scheduler named by ``storm.scheduler``,
the topology state machine, heartbeats, restarts with their backoff, error records) with
in-process supervisors, called directly rather than over RPC (`squall.cluster.inprocess`). Each
worker is the `WorkerAgent` a worker process runs, on a thread, with an in-memory transport and
its own backpressure state. Nothing is written to disk.

``squall.local.supervisors`` (default 1) in-process "machines" offer slots, as many as the
topologies ask for (a test never sizes the cluster); ``isolation.scheduler.machines`` can then
give a topology machines of its own.
"""

from __future__ import annotations

import copy
import functools
import logging
import random
import secrets
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, cast

if TYPE_CHECKING:
    from .._context import TopologyContext
    from ..drpc.local import Crash, LocalDRPC

from .._config import SECRET_KEY, Config, cluster_conf, conf_value, topology_conf
from .._errors import SquallError, WorkerStartTimeoutError
from .._nimbus import LogConfig, nimbus_client
from .._ratelimit import RateLimitedLog
from .._topology import StormTopology
from ..engine.clock import Clock
from ..state import HostMemory, StateHome, get_state, state_key
from .inprocess import DirectMaster, InProcessLauncher, Networks
from .master import Master, check_wait_secs
from .served_ui import statistics_pages
from .starting_workers import starting_workers
from .store import MemoryStore
from .timers import Timers

log = logging.getLogger("squall.cluster")

_TICK_SECS = 0.1  # how often the master looks at its timers and the supervisors sync
STEP_WAIT_SECS = 5.0  # advance_cluster_time: the longest wait at a step for a loop to run its due timers
SUPERVISORS_KEY = Config.SQUALL_LOCAL_SUPERVISORS


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
        clock: the cluster's clock (tests may pass a `squall.engine.clock.SimulatedClock`: message
            timeouts, ticks, kill and rebalance waits and heartbeat timeouts then follow it).
        seed: seed for tuple ids and shuffles (default: random).
        ui_port: serve the UI daemon's REST API (docs/ui.md) for this cluster on
            127.0.0.1:``ui_port`` (0: a free port; needs the ``ui`` extra) until `shutdown`;
            `ui_port` is then the bound port. Its actions need ``squall.secret`` in ``daemon_conf``.
    """

    def __init__(self, daemon_conf: Mapping[str, Any] | None = None, *, conf_file: str | None = None,
                 clock: Clock | None = None, seed: int | None = None, ui_port: int | None = None) -> None:
        # Trident batches every 50 ms, not 500, as Storm's local mode (its LocalCluster sets it
        # over storm.yaml's, below the daemon configuration given)
        self.conf = cluster_conf({Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 50, **(daemon_conf or {})},
                                 conf_file)
        self.clock = clock or Clock()
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        # its workers are threads of this process: no memory cap applies (warned at submission)
        self.master = Master(self.conf, clock=self.clock, store=MemoryStore.for_conf(self.conf),
                             pages=statistics_pages(), memory_capped=False)
        self._direct = DirectMaster(self.master, on_change=self._news)
        self._nimbus = nimbus_client(self._direct.request, typed=True)  # the master's verbs, its records as they are
        self._networks = Networks()
        # stateful bolts' default state lives here, outside the workers, until shutdown (docs/state.md)
        self._state_memory = HostMemory()
        state_home = self._state_home = StateHome(memory=self._state_memory, key=state_key(_state_secret(self.conf)))
        n = int(conf_value(self.conf, SUPERVISORS_KEY))
        hosts = ["localhost"] if n == 1 else [f"localhost-{i}" for i in range(1, n + 1)]
        self._launchers = [InProcessLauncher(self.conf, host, self._direct, self._networks, self.clock, self._seed,
                                             self._exited, state_home) for host in hosts]
        # imported here: `import squall` must not import the module that `python -m
        # squall.cluster.supervisor` runs, or runpy warns and it would run as a second copy
        from .supervisor import Supervisor

        self._supervisors = [Supervisor(self.conf, launcher, self._direct, supervisor_id=f"local-{launcher.host}")
                             for launcher in self._launchers]
        self._sync_lock = threading.Lock()
        self._closed = False
        self._drpc_watched: list[tuple[LocalDRPC, tuple[int, str]]] = []  # `_watch_drpc`
        self._timers = Timers("squall-local-nimbus")  # real time: it only looks at the master's clock
        self._tick_log = RateLimitedLog(log, limit=1, period=60.0)
        self._offer(0)
        self._timers.schedule(_TICK_SECS, self._tick)
        self._ui: Any = None
        if ui_port is not None:
            from .served_ui import serve_local_ui  # loads the UI (the ui extra) only when asked for
            try:
                self._ui = serve_local_ui(self, ui_port)
            except BaseException:
                self.shutdown()
                raise

    @property
    def ui_port(self) -> int | None:
        """The port the UI serves on (None: no UI, or shut down)."""
        return self._ui.port if self._ui is not None else None

    @property
    def direct(self) -> DirectMaster:
        """The master, called in this process one call at a time (`DirectMaster.run`)."""
        return self._direct

    @property
    def closed(self) -> bool:
        """Whether `shutdown` was called."""
        return self._closed

    # --- context manager ----------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # --- the shell around the master ------------------------------------------------------------------
    def _seed(self) -> int:
        with self._rng_lock:
            return self._rng.getrandbits(64)

    def _offer(self, more: int) -> None:
        """Let each machine offer the slots every live topology wants, plus ``more``."""
        wanted = self._direct.run(self.master.workers_wanted)
        for launcher in self._launchers:
            launcher.offer(max(1, wanted + more))

    def _sync(self) -> None:
        """Every supervisor syncs now: exits reported, workers started and stopped to match."""
        with self._sync_lock:
            for sup in self._supervisors:
                sup.sync()

    def _tick(self) -> None:
        if self._closed:
            return
        try:
            self._direct.tick()
            self._sync()
        except Exception:  # noqa: BLE001 (logged: the next tick tries again, as the master's timer does)
            self._tick_log.exception("the local cluster's tick failed")
        self._timers.schedule(_TICK_SECS, self._tick)

    def _exited(self) -> None:
        """A worker ended on its own: report it and start its next launch now, not at the tick."""
        if not self._closed:
            self._timers.schedule(0, self._sync)

    def _news(self, storm_id: str) -> None:
        """The master has news for ``storm_id``'s workers: they heartbeat at once to hear it (or
        the topology is gone: its wire goes with it)."""
        if not self.master.has_topology(storm_id):
            self._networks.forget(storm_id)
        for agent in self._agents(storm_id):
            agent.wake()

    def _agents(self, storm_id: str | None = None) -> list[Any]:
        return [a for launcher in self._launchers for a in launcher.agents(storm_id)]

    def _storm_id(self, name: str) -> str:
        return self._direct.run(self.master.storm_id_of, name)

    def _refresh(self, name: str) -> None:
        """Every worker of ``name`` heartbeats now, from this thread: the master's figures and
        the workers' view of the topology's state are then current when a verb returns."""
        for agent in self._agents(self._storm_id(name)):
            agent.beat()

    # --- submission ---------------------------------------------------------------------------------
    def submit_topology(self, name: str, conf: Mapping[str, Any] | None, topology: StormTopology | Any,
                        initial_status: str = "ACTIVE") -> None:
        """Validate, plan and start ``topology`` under ``name``.

        Args:
            name: the topology's name (no ``/ . : \\``).
            conf: the topology's configuration (a `Config` or dict; only ``topology.*`` and
                custom keys).
            topology: from `TopologyBuilder.create_topology`, or a
                `squall.testing.TrackedTopology` made for this cluster (its workers then count
                what they do, for its ``tracked_wait``).
            initial_status: ``"ACTIVE"`` (default) or ``"INACTIVE"`` (no user code runs until
                `activate`).

        Raises:
            AlreadyAliveException: a topology of that name is running.
            InvalidTopologyException: bad name, configuration or component (named).
        """
        self._check_open()
        given = dict(conf or {})
        tracking = getattr(topology, "squall_tracking", None)  # a squall.testing.TrackedTopology
        if tracking is not None:
            topology, given = tracking(self, name, given)
        try:
            workers = int(conf_value(topology_conf(self.conf, given), Config.TOPOLOGY_WORKERS))
        except Exception:  # noqa: BLE001 (the master names what is wrong with the configuration)
            workers = 1
        self._offer(workers)
        self._sync()  # the new slots are registered before the master places the topology
        storm_id = self._direct.submit(name, given, topology, initial_status)
        self._watch_drpc(storm_id, topology)
        self._sync()
        self._await_workers(name, storm_id)
        log.info("Submitted topology %s (%s)", name, storm_id)

    def _watch_drpc(self, storm_id: str, topology: StormTopology) -> None:
        """Tells each `LocalDRPC` a DRPC spout of ``topology`` serves (its functions') how to ask
        this cluster whether the topology crashed, so that a request waiting on a topology that
        crash-loops (a bolt raising in ``prepare``, a spout dying in ``open``) fails soon, naming
        the component and its error, rather than at ``drpc.request.timeout.secs``."""
        from ..drpc.local import local_drpc

        for function, service_id in sorted(_local_drpc_functions(topology)):
            drpc = local_drpc(service_id)
            if drpc is not None:
                key = (id(self), storm_id)
                drpc.watch(function, key, functools.partial(self._drpc_crash, storm_id))
                self._drpc_watched.append((drpc, key))

    def _unwatch_drpc(self, storm_id: str | None = None) -> None:
        """``storm_id``'s (every topology's, for None) `LocalDRPC` functions are no longer served here."""
        keep = []
        for drpc, key in self._drpc_watched:
            if storm_id is None or key[1] == storm_id:
                drpc.unwatch(key)
            else:
                keep.append((drpc, key))
        self._drpc_watched = keep

    def _drpc_crash(self, storm_id: str) -> Crash | None:
        """The newest crash of ``storm_id`` (`squall.drpc.local.Crash`), or None if its workers
        never died (or it is gone)."""
        from ..drpc.local import Crash

        deaths = self._direct.run(self.master.worker_deaths, storm_id)
        if deaths is None or (deaths.restarts == 0 and deaths.newest is None):
            return None
        e = deaths.newest
        if e is None:
            cause = "its worker died"
        else:
            cause = f"[{e.component}]{f' task {e.task}' if e.task >= 0 else ''}: {e.error}"
        then = ("it is held before its next restart (a crash loop)" if deaths.held
                else "its worker restarts, and may crash again")
        signature = (deaths.restarts,) + ((e.time, e.last_time, e.count) if e is not None else ())
        return Crash(signature, f"topology {deaths.name!r}, which serves it on this LocalCluster, crashed: {cause} "
                                f"(its workers died {deaths.restarts} time{'s' * (deaths.restarts != 1)}; {then})",
                     deaths.held)

    def _await_workers(self, name: str, storm_id: str) -> None:
        """Wait until every worker of ``storm_id`` has built its executors and reported in (or
        ended), as Storm's LocalCluster returns from a submission with its workers up: a test
        may read the statistics of every task, or feed a spout, at once. User code (``open``,
        ``prepare``) runs on the workers' loops and is not waited for.

        Raises:
            WorkerStartTimeoutError: some had not within ``nimbus.task.launch.secs`` (real
                time, whatever the cluster's clock), naming each, its components and what its
                thread was doing. Before, the wait returned as if they were up.
        """
        limit = float(conf_value(self.conf, Config.NIMBUS_TASK_LAUNCH_SECS))
        deadline = time.monotonic() + limit
        while True:
            waiting = self._direct.run(self.master.unready_slots, storm_id)
            starting = [(agent, thread) for launcher in self._launchers for agent, thread in launcher.threads(storm_id)
                        if agent.slot in waiting]
            if not starting:
                return  # each is in, or ended (its exit is the master's business)
            if time.monotonic() >= deadline:
                raise WorkerStartTimeoutError(self._not_started(name, storm_id, starting, limit))
            time.sleep(0.002)  # they report within milliseconds, on threads of this process

    def _not_started(self, name: str, storm_id: str, starting: list[Any], limit: float) -> str:
        """What `_await_workers` raises: the workers not in, and what each was doing."""
        components = self._direct.run(self.master.slot_components, storm_id)
        workers = starting_workers(starting, components)
        restart = ("the master never restarts them, as its nimbus.task.launch.secs runs on the cluster's "
                   "SimulatedClock" if getattr(self.clock, "advance", None) is not None
                   else "the master restarts a worker that stays silent that long")
        return (f"topology {name!r} ({storm_id}): {len(workers)} of its {len(components)} workers did not report in "
                f"within {Config.NIMBUS_TASK_LAUNCH_SECS} ({limit:g} s): "
                + "; ".join(w.describe() for w in workers)
                + f". The topology stays submitted ({restart}); kill_topology({name!r}) or shutdown() stops it")

    # --- the state machine ----------------------------------------------------------------------------
    def activate(self, name: str) -> None:
        """Activate ``name``'s spouts. Raises `NotAliveException`, `IllegalStateTransition`."""
        self._nimbus.activate(name)
        self._refresh(name)

    def deactivate(self, name: str) -> None:
        """Deactivate ``name``'s spouts (``next_tuple`` stops; in-flight tuples complete)."""
        self._nimbus.deactivate(name)
        self._refresh(name)

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Kill ``name``: deactivate it, wait ``wait_secs`` (default: its message timeout), stop it.

        Returns at once unless ``wait_secs`` is 0 (then the workers are stopped before it
        returns); during the wait the name stays taken and the status is ``KILLED``.
        """
        _check_wait(wait_secs)
        storm_id = self._storm_id(name)
        self._unwatch_drpc(storm_id)
        self._nimbus.kill(name, wait_secs)
        for agent in self._agents(storm_id):
            agent.beat()
        self._sync()

    def rebalance(self, name: str, num_workers: int | None = None, executors: Mapping[str, int] | None = None,
                  wait_secs: float | None = None) -> None:
        """Move ``name`` to ``num_workers`` workers and/or new executor counts per component.

        The topology is deactivated for ``wait_secs`` (default: its message timeout), its
        workers are stopped, the executors re-planned over the same tasks (a component cannot
        get more executors than tasks) and dealt over the new workers by the scheduler, and its
        previous status is restored. Returns at once unless ``wait_secs`` is 0.

        Raises:
            NotAliveException: no such topology.
            InvalidTopologyException: unknown component or a count below 1.
        """
        _check_wait(wait_secs)
        if isinstance(num_workers, int) and num_workers > 0:  # else the master names what is wrong
            self._offer(num_workers)
            self._sync()
        self._nimbus.rebalance(name, num_workers, dict(executors or {}), wait_secs)
        self._refresh(name)
        self._sync()
        if wait_secs == 0:
            self._await_workers(name, self._storm_id(name))

    def debug(self, name: str, component: str | None, enable: bool, pct: float) -> dict[str, Any]:
        """Storm's ``debug``: set the debug switch of ``name`` (or of its ``component``: None for
        the whole topology), sampling ``pct`` percent; returns the record kept. The topology and
        component pages show it. Raises `NotAliveException`, `UnknownComponentError`."""
        return self._nimbus.debug(name, component, enable, pct)

    def set_log_config(self, name: str, config: LogConfig) -> LogConfig:
        """Storm's ``setLogConfig``: merge ``config``'s settings into ``name``'s log levels; its
        workers apply them at once (`squall.worker.log_levels`). Returns the topology's `LogConfig`.
        Raises `NotAliveException`, `BadParameterError` (a level or logger name, named)."""
        return self._nimbus.set_log_config(name, config)

    def get_log_config(self, name: str) -> LogConfig:
        """Storm's ``getLogConfig``: ``name``'s log levels. Raises `NotAliveException`."""
        return self._nimbus.get_log_config(name)

    def shutdown(self) -> None:
        """Stop every topology at once (no wait) and the cluster."""
        if self._closed:
            return
        self._closed = True
        if self._ui is not None:
            self._ui.stop()
            self._ui = None
        self._timers.stop()
        self._unwatch_drpc()
        for name in self.get_topology_names():
            try:
                self._nimbus.kill(name, 0)
            except SquallError:
                pass  # removed meanwhile
        self._sync()
        for launcher in self._launchers:
            launcher.stop_all()
        self._state_memory.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this LocalCluster has been shut down")

    # --- information --------------------------------------------------------------------------------------
    def get_topology_names(self) -> list[str]:
        """Names of the topologies on the cluster (killed ones until removed)."""
        return self._direct.run(self.master.topology_names)

    def get_topology_info(self, name: str) -> dict[str, Any]:
        """Status, counts and errors of ``name`` as plain dicts: the master's ``info``, the
        same on every host (see docs/concepts.md), with the workers' figures of this moment.

        Keys: ``id``, ``name``, ``status``, ``uptime_secs``, ``num_workers``, ``num_executors``,
        ``num_tasks``, ``components`` (per component id: ``type``, ``executors``, ``tasks``,
        ``emitted``, ``transferred``, ``acked``, ``failed``, ``executed``, ``dead_lettered`` (a
        spout's records given up to its dead letters, and a Trident spout's emitter bolt's; a
        bolt's, those of them it failed last), ``backlog``, ``complete_latency_ms``, ``errors``,
        and ``task_stats`` per task id, with its ``dead_lettered`` as ``[[component, reason,
        count], ...]`` (a spout task's, or a Trident spout's emitter bolt task's)), ``acker``,
        ``configuration``, ``workers`` (each: slot, port, executors, launch_id, restarts, alive,
        ...) and ``errors`` (each: component, task, time, error, traceback, worker, fatal, count,
        last_time: an error identical to the last of its component counts on that record; the
        newest 10 of each component are kept).
        """
        self._refresh(name)
        # a copy, as over RPC: the caller's edits must not reach the master's figures
        return _copied(self._nimbus.info(name))

    def get_topology_page(self, name: str, window: str | None = None, sys: bool = False) -> dict[str, Any]:
        """Storm's statistics of ``name`` as its UI's topology page has them (docs/ui.md):
        ``window`` is ``"600"``, ``"10800"``, ``"86400"`` or ``":all-time"`` (the default)."""
        self._refresh(name)
        return _copied(self._nimbus.topology_page(name, window, sys))

    def get_component_page(self, name: str, component: str, window: str | None = None,
                           sys: bool = False) -> dict[str, Any]:
        """Storm's statistics of one component of ``name``, per window, executor, task and stream."""
        self._refresh(name)
        return _copied(self._nimbus.component_page(name, component, window, sys))

    def get_cluster_info(self) -> dict[str, Any]:
        """A summary of the cluster and its topologies as plain dicts."""
        return {"host": "local", **self._nimbus.cluster_info()}

    def advance_cluster_time(self, secs: float, step: float = 1.0) -> None:
        """Move a simulated clock forward ``secs`` seconds in steps (Storm's ``advanceClusterTime``).

        Only for a cluster made with ``clock=SimulatedClock()``: message timeouts, ticks, kill
        and rebalance waits, heartbeat timeouts and the delays of repeated crash restarts then
        follow this clock, so a test can pass a timeout without waiting for it. Supervisors and
        workers report at every step, as they would while that much time passed.

        Raises:
            TypeError: the cluster runs on real time.
        """
        advance = getattr(self.clock, "advance", None)
        if advance is None:
            raise TypeError("advance_cluster_time needs LocalCluster(clock=SimulatedClock())")
        # first at today's time: workers still starting hear that their topology is active, and
        # their loops open and schedule their timers from now, before any of that time passes
        self._report_and_wait()
        left = secs
        while left > 0:
            d = min(step, left)
            advance(d)
            left -= d
            self._report_and_wait()

    def _report_and_wait(self) -> None:
        # the supervisors and workers report first: they went on beating while that time passed
        self._sync()
        for agent in self._agents():
            agent.beat()
        self._direct.tick()
        self._sync()
        self._wait_for_timers()

    def _wait_for_timers(self) -> None:
        """Until every loop has run the timers due now (its ticks, timeouts, metrics), as Storm's
        advanceClusterTime waits for idle at each step: a loop busy in a slow tick got one tick
        for several steps. A loop still opening its executors (a slow prepare) is waited for
        too: its timers are scheduled from the time it is done. A loop stuck in user code is
        waited for `STEP_WAIT_SECS` at most."""
        now = self.clock.now()
        deadline = time.monotonic() + STEP_WAIT_SECS
        while time.monotonic() < deadline:
            workers = [a.worker for a in self._agents() if a.worker is not None]
            if all(w.timers_run(now) for w in workers):
                return
            time.sleep(0.001)

    def get_state(self, name: str, namespace: str) -> Any:
        """The `squall.state.KeyValueState` of ``namespace`` (``"<component>-<task>"``) of
        topology ``name``, as the default provider keeps it here, to look at in a test: its
        ``get`` sees a prepared transaction too, its ``committed()`` only the last commit; None
        if there is none."""
        if namespace not in self._state_memory.namespaces(name):
            return None
        # a stand-in context: get_state reads only its state home and names
        return get_state(namespace, {Config.TOPOLOGY_NAME: name}, cast("TopologyContext", _Home(self._state_home)))

    def is_idle(self, name: str) -> bool:
        """True when no tuple waits in any inbox of ``name`` and every loop sleeps."""
        agents = self._agents(self._storm_id(name))
        return all(a.worker is not None and a.worker.is_idle() for a in agents)


def _check_wait(wait_secs: float | None) -> None:
    check_wait_secs(wait_secs)  # here too, before anything else is asked of the master


def _state_secret(conf: Mapping[str, Any]) -> bytes:
    """What authenticates this cluster's states in Redis or files: ``squall.secret`` if set (so
    another LocalCluster with it reads them back), else this cluster's own."""
    given = conf.get(SECRET_KEY)
    return given.encode() if isinstance(given, str) else secrets.token_bytes(32)


class _Home:
    """A context that only lends `LocalCluster.get_state` the cluster's state home."""

    def __init__(self, home: StateHome) -> None:
        self.state_home = home

    def get_this_component_id(self) -> str:
        return "(LocalCluster.get_state)"

    def get_this_task_id(self) -> int:
        return -1


_SHARED = frozenset({str, int, float, bool, type(None)})  # immutable: an answer may share them


def _copied(value: Any) -> Any:
    """A deep copy of plain data (what the master's pages are made of): its dicts and lists
    copied, its strs, numbers and None shared, anything else deep-copied. `copy.deepcopy`'s
    memo of every object made a look at a topology cost about 1 ms."""
    kind = type(value)
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind in _SHARED:
        return value
    return copy.deepcopy(value)


def _local_drpc_functions(topology: StormTopology) -> set[tuple[str, str]]:
    """(function, `LocalDRPC` service id) of every DRPC spout of ``topology`` given a
    `LocalDRPC`: a component itself, or held by one (a Trident DRPC stream's spout, inside its
    emitter), looked for a few objects deep."""
    from ..drpc.components import DRPCSpout

    found: set[tuple[str, str]] = set()
    seen: set[int] = set()

    def walk(obj: Any, depth: int) -> None:
        if depth > 4 or id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, DRPCSpout):
            if obj.local_drpc_id is not None:
                found.add((obj.function, obj.local_drpc_id))
            return
        if isinstance(obj, dict):
            items: Any = obj.values()
        elif isinstance(obj, (list, tuple, set, frozenset)):
            items = obj
        else:
            items = getattr(obj, "__dict__", {}).values()
        if len(items) > 64:  # data (a spout's fixed tuples), not where a component keeps a spout
            return
        for item in items:
            if not isinstance(item, (str, bytes, int, float, bool, type(None))):
                walk(item, depth + 1)

    for spec in topology.components.values():
        walk(spec.obj, 0)
    return found
