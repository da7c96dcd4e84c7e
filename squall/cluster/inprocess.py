"""The in-process host's parts: the master called directly, and workers as threads.

`LocalCluster` is a `Master` with a supervisor whose launcher is `InProcessLauncher`, as Storm's
LocalCluster is a nimbus and supervisors in one JVM. The master is called directly
(`DirectMaster`), one call at a time as its RPC server would take them; each worker is the
same `squall.worker.agent.WorkerAgent` a worker process runs, on a thread, with an in-memory
transport on its topology's `InMemoryNetwork` and its own backpressure state. Workers log
through the caller's `logging`; with ``storm.log.dir`` set each also writes its own
``worker.log`` there, as on the process host (docs/logs.md).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._config import Config
from .._errors import RemoteError
from .._nimbus import Assignment
from ..engine.plan import TopologyPlan
from ..engine.serialize import Serializer, source_cache
from ..engine.tracking import tracker_of
from ..engine.transport import InMemoryNetwork, InMemoryTransport, Origin
from ..worker.agent import EXIT_CANNOT_START, WorkerAgent
from . import features  # noqa: F401 (the extension points its executors use: metrics, stateful and windowed bolts)
from .launcher import Launch, Launcher, WorkerExit
from .logs import OneWorkerFilter, worker_log_handler, worker_log_path
from .master import Master
from .server import Keeper

log = logging.getLogger("squall.cluster")

FIRST_PORT = 1024  # in-process slots are numbered from here, as a LocalCluster's worker ports
# A stopping worker gives each of its loops this long to finish its clean stop (``close``,
# ``cleanup``): the engine's own default, which LocalCluster always gave them
STOP_LOOP_SECS = 5.0
# Peers report their addresses within microseconds of each other in one process: ask again soon
PEER_POLL_SECS = 0.005


class Networks:
    """The in-memory wire of each topology, shared by every in-process machine of a cluster (so
    that a topology spread over several reaches all its workers), until the topology is gone."""

    def __init__(self) -> None:
        self._networks: dict[str, InMemoryNetwork] = {}
        self._lock = threading.Lock()

    def of(self, storm_id: str) -> InMemoryNetwork:
        """``storm_id``'s network (a new one the first time)."""
        with self._lock:
            return self._networks.setdefault(storm_id, InMemoryNetwork())

    def forget(self, storm_id: str) -> None:
        """Drop ``storm_id``'s network (the topology is gone; workers still stopping keep theirs)."""
        with self._lock:
            self._networks.pop(storm_id, None)


class DirectMaster:
    """The master, called in this process one call at a time (its RPC server's discipline).

    ``call`` is what a supervisor or worker uses: a failure comes back as `RemoteError`, as over
    RPC. `request` (a verb), `submit`, `tick` and `run` (any of the master's methods that
    change nothing) are for the cluster's own verbs, which raise the master's exceptions
    unchanged. What a verb or tick changed is kept (`squall.cluster.server.Keeper`) before it
    returns, as its server would.
    After every call, ``on_change(storm_id)`` is told of each topology whose news for its
    workers changed (status, readiness, peers, deaths), so that they hear of it at once rather
    than at their next heartbeat. Records pass as they are both ways (`RecordCalls`): a worker's
    `Heartbeat` reaches ``Master.op_heartbeat`` and its `HeartbeatReply` comes back, no map between.
    """

    passes_records = True  # `squall.worker.calls.RecordCalls`

    def __init__(self, master: Master, on_change: Callable[[str], None]) -> None:
        self.master = master
        self.keeper = Keeper(master)
        self.on_change = on_change
        self.lock = threading.RLock()

    def call(self, op: str, **args: Any) -> Any:
        """`MasterCalls.call`: `request`, what the master raises coming back as `RemoteError` naming
        its type, as over RPC."""
        try:
            return self.request(op, **args)
        except Exception as e:
            raise RemoteError(str(e), type(e).__name__) from e

    def request(self, op: str, **args: Any) -> Any:
        """The verb ``op`` (`squall._nimbus.VERBS`): the master's ``op_<op>(**args)`` through `run`,
        once ``args`` passed the verb's checks as over RPC (``get_assignment`` with the master's
        own plan object). The master's exceptions are raised unchanged (`LocalCluster`'s verbs)."""
        if op == "get_assignment":
            return self.run(self._assignment, args)
        return self.run(self.keeper.request, op, args)

    def submit(self, name: str, conf: dict[str, Any] | None, topology: Any, initial_status: str) -> str:
        """`Master.submit` of the topology object itself (no pickled copy in this process), kept; its storm id."""
        return self.run(lambda: self.keeper.keep(self.master.submit(name, conf, topology, initial_status)))

    def tick(self) -> None:
        """The master's timer (`Master.monitor`), its changes kept."""
        self.run(lambda: self.keeper.tick(self.master.monitor()))

    def _assignment(self, args: dict[str, Any]) -> Assignment:
        """``get_assignment`` with the master's own plan object, read in the same call as the
        assignment (workers in this process need no pickled copy; two calls could straddle a
        rebalance and pair old executor indexes with a new plan)."""
        want_plan = args.get("want_plan", True)
        reply: Assignment = self.keeper.request("get_assignment", {**args, "want_plan": False})
        if want_plan:
            return dataclasses.replace(reply, plan=self.master.plan_of(args["storm_id"]))
        return reply

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` under the master's lock, then `on_change` for what changed."""
        with self.lock:
            before = self.master.news_marks()
            try:
                result = fn(*args, **kwargs)
            finally:
                after = self.master.news_marks()
                changed = [sid for sid, mark in after.items() if before.get(sid) != mark]
                changed += [sid for sid in before if sid not in after]
                for storm_id in changed:
                    self.on_change(storm_id)  # only wakes threads: safe under the lock
        return result


@dataclass
class _InProcessWorker:
    """One in-process worker: its agent, the thread running it, and how it ended."""

    launch: Launch
    agent: WorkerAgent
    thread: threading.Thread | None = None
    log: logging.Handler | None = None  # its worker.log, with storm.log.dir
    status: int | None = None  # its exit status, once it ended

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


class InProcessLauncher(Launcher):
    """Workers as threads of this process (`WorkerAgent` on an in-memory transport).

    Its slots grow on demand (`offer`), as Storm's LocalCluster, which a test never has to size.
    ``on_exit`` is called (on the worker's thread) when a worker ends on its own, so the cluster
    can sync at once rather than at its next tick.
    """

    def __init__(self, conf: dict[str, Any], host: str, master: DirectMaster, networks: Networks, clock: Any,
                 seeds: Callable[[], int], on_exit: Callable[[], None], state_home: Any = None) -> None:
        self.conf = conf
        self.state_home = state_home  # the cluster's states, which outlive its workers
        self.host = host
        self.master = master
        self.networks = networks
        self.clock = clock
        self.seeds = seeds
        self.on_exit = on_exit
        self._ports: list[int] = []
        self._workers: dict[int, _InProcessWorker] = {}
        self._lock = threading.Lock()

    def offer(self, n: int) -> None:
        """Offer at least ``n`` slots."""
        with self._lock:
            while len(self._ports) < n:
                self._ports.append(FIRST_PORT + len(self._ports))

    def slots(self) -> list[int]:
        with self._lock:
            return list(self._ports)

    def start(self, port: int, launch: Launch) -> None:
        slot = f"{self.host}:{port}"
        network = self.networks.of(launch.storm_id)

        def make_transport(plan: TopologyPlan, origin: Origin, receive: Callable[[int, Any], None]) -> InMemoryTransport:
            # no bytes cross, but what could not cross processes fails its emit, as on every host
            check = Serializer(plan.conf, source_cache(plan)).emit_check()
            transport = InMemoryTransport(network, slot, check=check)
            transport.set_receiver(receive)
            counts = tracker_of(plan.conf)
            if counts is not None:  # a tracked topology: an item dropped is one never processed
                transport.on_drop = lambda task: counts.lose(plan.task_to_component.get(task, str(task)))
            return transport

        agent = WorkerAgent(self.master, launch.storm_id, slot, launch.launch_id, self.conf,
                            make_transport=make_transport, load_plan=_same, clock=self.clock,
                            peer_poll_secs=PEER_POLL_SECS, stop_loop_secs=STOP_LOOP_SECS, seed=self.seeds(),
                            state_home=self.state_home)
        worker = _InProcessWorker(launch, agent)
        worker.thread = threading.Thread(target=self._run, args=(worker,), name=f"squall-local-worker-{port}",
                                         daemon=True)
        if self.conf.get(Config.STORM_LOG_DIR):  # else its lines go only where the caller's logging sends them
            worker.log = worker_log_handler(worker_log_path(self.conf, launch.storm_id, port), self.conf)
            worker.log.addFilter(OneWorkerFilter(agent, worker.thread))
            logging.getLogger().addHandler(worker.log)
        with self._lock:
            self._workers[port] = worker
        worker.thread.start()

    def _run(self, worker: _InProcessWorker) -> None:
        try:
            worker.status = worker.agent.run()
        except BaseException:  # noqa: B036 - a bug of ours must not pass for a clean stop
            log.exception("in-process worker %s failed", worker.agent.slot)
            worker.status = 1
        if worker.log is not None:
            logging.getLogger().removeHandler(worker.log)
            worker.log.close()
        if not worker.agent.stop_event.is_set():
            self.on_exit()

    def stop(self, port: int) -> None:
        with self._lock:
            worker = self._workers.pop(port, None)
        if worker is None:
            return
        worker.agent.stop()
        if worker.thread is None:
            return
        # its loops each get STOP_LOOP_SECS, then are abandoned: allow for all of them and a beat
        worker.thread.join(STOP_LOOP_SECS * (len(worker.agent.worker.loops) if worker.agent.worker else 1) + 5)
        if worker.thread.is_alive():
            log.warning("in-process worker %s did not stop (user code blocked?); its thread is abandoned and its "
                        "address freed for the next launch", worker.agent.slot)
            if worker.agent.transport is not None:
                worker.agent.transport.close()

    def running(self) -> dict[int, Launch]:
        with self._lock:
            return {port: w.launch for port, w in self._workers.items()}

    def exits(self) -> list[WorkerExit]:
        out = []
        with self._lock:
            ended = [(port, w) for port, w in self._workers.items() if not w.alive()]
            for port, _w in ended:
                del self._workers[port]
        for port, w in ended:
            status = 1 if w.status is None else w.status
            out.append(WorkerExit(w.launch.storm_id, f"{self.host}:{port}", w.launch.launch_id, status,
                                  status != EXIT_CANNOT_START))
        return out

    def threads(self, storm_id: str) -> list[tuple[WorkerAgent, threading.Thread]]:
        """The agents of ``storm_id``'s running workers, each with the thread that runs it (to
        read what it is doing)."""
        with self._lock:
            return [(w.agent, w.thread) for w in self._workers.values()
                    if w.thread is not None and w.thread.is_alive() and w.launch.storm_id == storm_id]

    def agents(self, storm_id: str | None = None) -> list[WorkerAgent]:
        """The agents of the running workers (of ``storm_id`` only, if given)."""
        with self._lock:
            return [w.agent for w in self._workers.values()
                    if w.alive() and (storm_id is None or w.launch.storm_id == storm_id)]


def _same(plan: TopologyPlan) -> TopologyPlan:
    """The plan as `DirectMaster` hands it: the master's own object."""
    return plan
