"""The supervisor: keeps one machine's slots running what the master assigned, for every host.

Every ``supervisor.monitor.frequency.secs`` it syncs with the master (`Master.op_supervisor_sync`):
it registers its slots, reports the workers that ended (`WorkerExit`) and the workers it runs,
and learns which topology and launch each slot must run. A slot whose worker does not match is
stopped and (re)started; a worker that ended is started again once the master says so. If the
master is unreachable the workers keep processing, and the supervisor retries; as Storm's
supervisor does from its local assignment, it holds the launch the master last gave each port
(on the process host, on disk) and starts a worker of it that ends again itself, with the
master's delays, from what the worker kept (`squall.cluster.held_slots`); the master, when it
answers again, finds that launch running, or changes it. How a worker is started, stopped and
watched is its `Launcher`'s business (`squall.cluster.launcher`): worker processes here
(`ProcessLauncher`), Spark tasks (`squall.cluster.spark.SparkLauncher`), threads of a
`LocalCluster` (`squall.cluster.inprocess.InProcessLauncher`).

On the process host (``python -m squall.cluster.supervisor``, or started by ``squall nimbus
--host process``) workers die with their supervisor (``PR_SET_PDEATHSIG``), but not with the
master: its death does not touch them. There it also runs the node's health checks
(`squall.cluster.health`): while they fail it stops its workers, starts none, and says so in its
syncs, so that the master moves them to healthy nodes. And between syncs it cleans its machine's
worker logs as Storm's logviewer does (`squall.cluster.log_cleaner`, ``logviewer.cleanup.*``).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from .._config import Config, cluster_conf, conf_value, setting, unapplied_daemon_keys
from .._errors import RpcError, SquallError
from .._nimbus import RunningWorker, SupervisorSync, WorkerExit
from .._private import hold_lock, lock_held, own_local_dir, private_dir, write_private
from .._redact import redact_logs
from .._secret import load_or_create_secret
from ..worker.calls import MasterCalls, nimbus_of
from .health import HealthCheck, HealthMonitor
from .held_slots import HeldSlots
from .launcher import Launcher
from .liveness import SupervisorPresence, supervisor_presence
from .local_assignment import LocalAssignments, SupervisorIdFile
from .log_cleaner import LogCleaner
from .logs import log_own_output

log = logging.getLogger("squall.supervisor")


class Supervisor:
    """Keeps this machine's slots running what the master assigned; see the module docstring.

    Args:
        conf: the cluster's settings (``supervisor.monitor.frequency.secs``).
        launcher: starts, stops and watches the workers (`squall.cluster.launcher`).
        master: how to reach the master.
        supervisor_id: its id at the master (default: this machine's name and a random suffix).
        health: the node's health checks, read at each sync (`HealthMonitor`; None: always healthy).
        cleaner: cleans the machine's worker logs, ticked after each sync (None: none).
        local: where the launches the master gave are kept across restarts (None: in memory).
        presence: its liveness in ZooKeeper (`squall.cluster.liveness`), ended when it stops
            (None: none, without ``storm.zookeeper.servers``).
    """

    def __init__(self, conf: dict[str, Any], launcher: Launcher, master: MasterCalls,
                 supervisor_id: str | None = None, health: HealthMonitor | None = None,
                 cleaner: LogCleaner | None = None, local: LocalAssignments | None = None,
                 presence: SupervisorPresence | None = None) -> None:
        self.conf = conf
        self.launcher = launcher
        self.master = master
        self.health = health
        self.cleaner = cleaner
        self.presence = presence
        self.id = supervisor_id or new_supervisor_id()
        self.nimbus = nimbus_of(master)  # the verbs, typed (records passed as they are to a master in this process)
        self.exits: list[WorkerExit] = []  # reported at the next sync that reaches the master
        self.held = HeldSlots(launcher, local, conf_value(conf, Config.SQUALL_WORKER_MAX_LAUNCH_ATTEMPTS))
        self._stopping = False
        self._registered = False  # a sync has reached a master
        self._unreachable: tuple[float, float] | None = None  # since, last said (monotonic): no master answers

    @property
    def host(self) -> str:
        return self.launcher.host

    def sync(self) -> bool:
        """One round: collect exits, ask the master, start and stop workers to match. False
        when the master could not be reached (then only the held launches' workers that ended
        are started again: `HeldSlots.without_master`)."""
        ended = self.launcher.exits()
        self.launcher.watch()
        unhealthy = self.health.problem if self.health is not None else None
        if unhealthy is not None and self.launcher.running():
            # Storm's shutdownAllWorkers, before the master hears of it: what the node's checks
            # found (a full disk, a bad link) may be corrupting their work now
            log.error("health checks fail (%s): stopping every worker", unhealthy)
            self.launcher.stop_all()
        # ``running``: a worker the master believes in but that is not here died unseen
        # (while the master was down), and must get a new launch id
        running = tuple(RunningWorker(port, launch.storm_id, launch.launch_id)
                        for port, launch in self.launcher.running().items())
        try:
            reply = self.nimbus.supervisor_sync(SupervisorSync(self.id, self.host, self.launcher.slots(),
                                                               tuple(self.exits + ended), running, unhealthy))
        except RpcError as e:
            self._no_master(e)
            # Storm's slots run on from the local assignment: a held launch's worker that ended
            # is started again here; the other exits wait for the master
            self.exits.extend(self.held.without_master(ended, healthy=unhealthy is None))
            return False
        self.exits = []
        self._reached(reply.master)
        desired = {int(p): launch for p, launch in reply.slots.items()}
        if unhealthy is not None:
            desired = {}  # the master assigns an unhealthy node nothing; an older one might
        self.held.assigned(desired)  # the master's word replaces what was held
        for port, launch in list(self.launcher.running().items()):
            want = desired.get(port)
            if want is None or (want.storm_id, want.launch_id) != (launch.storm_id, launch.launch_id):
                # said, so that a worker ended here (a machine back from a cut whose executors
                # moved away, a rebalance) has a reason in this machine's log
                now = "nothing now" if want is None else f"launch {want.launch_id} of {want.storm_id}"
                log.info("supervisor %s stops worker %s:%s of %s (launch %s): the master assigns this slot %s",
                         self.id, self.host, port, launch.storm_id, launch.launch_id, now)
                self.launcher.stop(port)
        running_now = self.launcher.running()
        for port, want in desired.items():
            if port not in running_now:
                self.launcher.start(port, want)
                self.held.started(port)
        return True

    UNREACHABLE_REPEAT_SECS = 60.0
    """While no master answers, how often the supervisor says so again."""

    def _no_master(self, error: RpcError) -> None:
        """A sync reached no master: say so at once (a wrong ``nimbus.seeds`` or secret, the
        masters down), then once a minute while it lasts; the workers are left running."""
        now = time.monotonic()
        if self._unreachable is None:
            self._unreachable = (now, now)
            log.warning("supervisor %s cannot reach the master: %s; its workers are left running (one that ends "
                        "is started again from its local assignment), and it tries again every %g s",
                        self.id, error, self._frequency())
        elif now - self._unreachable[1] >= self.UNREACHABLE_REPEAT_SECS:
            self._unreachable = (self._unreachable[0], now)
            log.warning("supervisor %s still cannot reach the master, for %.0f s now: %s",
                        self.id, now - self._unreachable[0], error)
        else:
            log.debug("master unreachable (%s); workers left running", error)

    def _reached(self, master: Any) -> None:
        """A sync reached a master: say so the first time, and after it could not."""
        where = f"{master.host}:{master.port}" if master is not None and master.host else "the master"
        if not self._registered:
            self._registered = True
            log.info("supervisor %s registered slots %s on %s with %s", self.id,
                     ",".join(map(str, self.launcher.slots())), self.host, where)
        elif self._unreachable is not None:
            log.info("supervisor %s reached %s again after %.0f s", self.id, where,
                     time.monotonic() - self._unreachable[0])
        self._unreachable = None

    def _frequency(self) -> float:
        return float(conf_value(self.conf, Config.SUPERVISOR_MONITOR_FREQUENCY_SECS))

    def run(self) -> None:
        """Sync every ``supervisor.monitor.frequency.secs`` until `stop`; then stop every worker."""
        try:
            while not self._stopping:
                self.sync()
                if self.cleaner is not None:
                    # on this thread, between syncs: no worker starts while a directory is judged dead
                    self.cleaner.tick()
                time.sleep(self._frequency())
        except KeyboardInterrupt:
            pass
        finally:
            if self.health is not None:
                self.health.stop()
            workers = sorted(self.launcher.running())
            log.info("supervisor %s stopping: stopping its %d workers%s", self.id, len(workers),
                     f" (ports {','.join(map(str, workers))})" if workers else "")
            self.launcher.stop_all()
            if self.presence is not None:
                self.presence.stop()  # after its workers: until then this machine runs them
            log.info("supervisor %s stopped", self.id)

    def stop(self) -> None:
        """Ask `run` to end."""
        self._stopping = True


def new_supervisor_id() -> str:
    """A new supervisor id: this machine's name and a random suffix."""
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


def process_supervisor(conf: dict[str, Any], host: str | None = None) -> Supervisor:
    """The process host's supervisor: worker processes (`ProcessLauncher`) in
    ``<storm.local.dir>/supervisor``, binding ``host`` (default ``storm.local.hostname``, else
    127.0.0.1), the master found as a client finds it (the leader among ``nimbus.seeds``, else
    ``nimbus.host``), over the authenticated RPC channel; the node's health checks run on a thread
    of its own; its worker logs are cleaned up between syncs (`LogCleaner`); the launches the
    master gave are kept, sealed, in that directory's ``local-assignments`` (`LocalAssignments`),
    and its id in ``supervisor-id`` (`SupervisorIdFile`), made at its first start and reused by
    every later one, as Storm's supervisor keeps its id in its local state. With
    ``storm.zookeeper.servers``, it keeps its liveness in ZooKeeper (`squall.cluster.liveness`),
    so that a master cut off from this machine alone does not take it for lost."""
    from .process_launcher import ProcessLauncher
    from .seeds import master_link

    directory = private_dir(own_local_dir(conf) / "supervisor")
    secret = load_or_create_secret(conf)
    host = host or node_address(conf)
    supervisor_id = SupervisorIdFile(directory, secret).load_or_create(host, new_supervisor_id)
    link = master_link(conf, timeout=5)
    launcher = ProcessLauncher(conf, host, link, directory, secret)
    return Supervisor(conf, launcher, link, supervisor_id=supervisor_id,
                      health=HealthMonitor(HealthCheck.from_conf(conf)).start(),
                      cleaner=LogCleaner.from_conf(conf, lambda: live_workers(launcher)),
                      local=LocalAssignments(directory, secret),
                      presence=supervisor_presence(conf, secret, supervisor_id, host, launcher.slots()))


def live_workers(launcher: Launcher) -> set[tuple[str, str]]:
    """``(topology id, port)`` of the workers ``launcher`` runs: their log directories are alive."""
    return {(launch.storm_id, str(port)) for port, launch in launcher.running().items()}


def node_address(conf: dict[str, Any]) -> str:
    """The address this machine's workers bind and their peers reach: ``storm.local.hostname``,
    else 127.0.0.1 (a single machine)."""
    return str(setting(conf, Config.STORM_LOCAL_HOSTNAME) or "127.0.0.1")


def run_process_supervisor(conf: dict[str, Any], host: str | None = None) -> None:
    """Run the process host's supervisor until SIGTERM/SIGINT, leaving its pid in its directory
    (so that a master finds and adopts it: `squall.cluster.process.running_supervisor`)."""
    directory = private_dir(own_local_dir(conf) / "supervisor")
    lock = hold_supervisor_lock(directory)  # held (open) until this process ends
    for warning in unapplied_daemon_keys(conf, "cluster configuration"):  # a storm.yaml's JVM options
        log.warning("%s", warning)
    sup = process_supervisor(conf, host)
    signal.signal(signal.SIGTERM, lambda *_: sup.stop())
    write_private(directory / PID_FILE, str(os.getpid()))
    try:
        sup.run()
    finally:
        os.close(lock)


PID_FILE, LOCK_FILE = "pid", "pid.lock"


def hold_supervisor_lock(directory: Path) -> int:
    """Lock ``directory``'s `LOCK_FILE` for this process's life (its descriptor, returned, is
    not inherited by the workers): the pid file beside it then names a live supervisor of this
    ``storm.local.dir`` only while the lock is held, not a later process that got its pid.

    Raises:
        SquallError: another supervisor holds it.
    """
    fd = hold_lock(directory / LOCK_FILE)
    if fd is None:
        raise SquallError(f"another supervisor runs for {directory.parent} (its lock {directory / LOCK_FILE} "
                          "is held): one supervisor a storm.local.dir")
    return fd


def supervisor_lock_held(directory: Path) -> bool:
    """Whether a live supervisor holds ``directory``'s `LOCK_FILE` (`hold_supervisor_lock`)."""
    return lock_held(directory / LOCK_FILE)


def main(argv: list[str] | None = None) -> int:
    """``python -m squall.cluster.supervisor [--conf FILE]``."""
    p = argparse.ArgumentParser(prog="squall-supervisor")
    p.add_argument("--conf", default=None, help="the cluster's squall.yaml")
    p.add_argument("--host", default=None,
                   help="address workers bind and peers reach (default: storm.local.hostname, else 127.0.0.1)")
    p.add_argument("--log", default=None, help="write stdout and stderr to this file, rotated by size")
    args = p.parse_args(argv)
    try:
        conf = cluster_conf(None, args.conf)
    except SquallError as e:
        print(f"squall supervisor: error: {e}", file=sys.stderr)
        return 1
    finish = log_own_output(Path(args.log), conf) if args.log else None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s supervisor %(levelname)s %(message)s")
    redact_logs()
    try:
        run_process_supervisor(conf, args.host)
    except SquallError as e:
        log.error("%s", e)
        return 1
    except Exception:
        log.exception("supervisor failed")
        return 1
    finally:
        if finish is not None:
            finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
