"""A real Spark standalone cluster for tests: a master and workers, each a JVM started with
pyspark's own ``bin/spark-class`` (``org.apache.spark.deploy.master.Master`` and
``worker.Worker``), in the foreground, on 127.0.0.1 and free ports, with every directory
(``SPARK_WORKER_DIR``, ``SPARK_LOCAL_DIRS``, ``SPARK_LOG_DIR``, an empty ``SPARK_CONF_DIR``)
in a temp dir, and stopped by PID, with everything they started.

Use it from a module-scoped fixture (a master and two workers take 10-15 s to come up, 20 s
at load 12)::

    @pytest.fixture(scope="module")
    def standalone(tmp_path_factory):
        with StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2) as cluster:
            yield cluster

or share one with the other tests that can use the same one (`shared`): tests/spark's
test_spark_standalone_* and tests/trident_spark/test_standalone.py run one after the other in
the suite's Spark group, on one cluster.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..conftest import wait_until
from ..ports import free_port
from .conftest import _descendants, cmdline

LOOPBACK = "127.0.0.1"
_REPO = Path(__file__).resolve().parents[2]  # the checkout: where `tests` imports from


# Spark's Utils.startServiceOnPort, in a daemon's log: the port a service really bound
_STARTED = re.compile(r"Successfully started service '(\w+)' on port (\d+)\.")


@dataclass
class Daemon:
    """A master or worker JVM (spark-class execs java, so the Popen's pid is the JVM's)."""

    name: str
    proc: subprocess.Popen
    port: int
    """The port asked for: a worker's, until `StandaloneCluster.ensure_workers` reads the one it bound."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None


class StandaloneCluster:
    """A standalone master and ``workers`` workers of ``cores`` cores and ``memory`` each
    (the numbers Spark schedules by; nothing is reserved). The JVM daemons get a small heap
    (``SPARK_DAEMON_MEMORY``)."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 3, memory: str = "2g") -> None:
        import pyspark
        self.home = Path(pyspark.__file__).parent
        self.root = root
        self.cores, self.memory = cores, memory
        (root / "conf").mkdir(parents=True, exist_ok=True)
        # every JVM spark-class and the workers start (daemons, drivers, executors) reads these:
        # the client compiler only and the serial collector start a JVM on half the CPU
        # and their files go under root, not /tmp, where a JVM the test SIGKILLs would leave them
        (root / "tmp").mkdir(exist_ok=True)
        (root / "conf" / "java-opts").write_text(f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.io.tmpdir={root / 'tmp'}")
        self.env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": LOOPBACK,
                    "SPARK_CONF_DIR": str(root / "conf"), "SPARK_LOCAL_DIRS": str(root / "local"),
                    "SPARK_LOG_DIR": str(root / "logs"), "SPARK_DAEMON_MEMORY": "256m",
                    # a worker is lost when its connection drops (a dead node): the heartbeat
                    # timeout (60 s) only ever fired on a starved machine, losing a live worker
                    "SPARK_MASTER_OPTS": "-Dspark.worker.timeout=600 -Dspark.master.rest.enabled=false",
                    "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                    # the test topologies import tests.*: the driver Spark starts on a worker
                    # runs them from its own directory, so the repository must be on the path
                    "PYTHONPATH": os.pathsep.join(p for p in (str(_REPO), os.environ.get("PYTHONPATH")) if p)}
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://{LOOPBACK}:{self.port}"
        self.master: Daemon | None = None
        self.workers: list[Daemon] = []
        self._count = 0
        self._wanted = workers

    # --- life -------------------------------------------------------------------------------------------
    def __enter__(self) -> StandaloneCluster:
        try:
            self.master = self._start("master", self.port, "org.apache.spark.deploy.master.Master", "--host",
                                      LOOPBACK, "--port", str(self.port), "--webui-port", str(self.ui_port))
            self.port = self.master.port = self.bound_port("master", "sparkMaster")
            self.ui_port = self.bound_port("master", "MasterUI")
            self.url = f"spark://{LOOPBACK}:{self.port}"
            self.ensure_workers(self._wanted)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def ensure_workers(self, n: int, timeout: float = 90) -> None:
        """Start workers until ``n`` are alive, and wait until the master counts them."""
        self.workers = [w for w in self.workers if w.alive()]
        while len(self.workers) < n:
            self._count += 1
            port = free_port()
            work = self.root / f"worker{self._count}"
            work.mkdir()
            self.workers.append(self._start(
                f"worker{self._count}", port, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                "--port", str(port), "--webui-port", str(free_port()), "--cores", str(self.cores),
                "--memory", self.memory, "--work-dir", str(work), self.url))
        assert wait_until(lambda: (self.state() or {}).get("aliveworkers") == n, timeout, 0.5), \
            f"the standalone workers did not register: {self.state()}\n{self.log('master')}"
        for worker in self.workers:  # registered, so bound: their ids end with the port they bound
            worker.port = self.bound_port(worker.name, "sparkWorker")

    def bound_port(self, name: str, service: str, timeout: float = 120) -> int:
        """The port daemon ``name``'s ``service`` (``sparkMaster``, ``MasterUI``, ``sparkWorker``)
        bound, from its log. A port `free_port` picked was free only then: any process's outgoing
        connection may take it as its own port meanwhile, and Spark then binds the next port up
        (``spark.port.maxRetries``), where this cluster must look for it (a master's ``/json/``
        asked at the picked port once answered another daemon's HTML page)."""
        found: list[int] = []

        def started() -> bool:
            for match in _STARTED.finditer(self.log(name, lines=None)):
                if match.group(1) == service:
                    found.append(int(match.group(2)))
                    return True
            return False

        assert wait_until(started, timeout, 0.2), f"{name} did not start {service} within {timeout} s:\n{self.log(name)}"
        return found[0]

    def _start(self, name: str, port: int, *args: str) -> Daemon:
        with open(self.root / f"{name}.out", "wb") as out:
            proc = subprocess.Popen([str(self.home / "bin" / "spark-class"), *args], env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        # spark-class execs java: the pid is the JVM's
        return Daemon(name, proc, port)

    def stop(self) -> None:
        """SIGKILL every daemon and what it started (executors, drivers, Python workers), by PID."""
        for daemon in [*self.workers, *([self.master] if self.master else [])]:
            self.kill(daemon)
        self.workers = []

    def kill(self, daemon: Daemon) -> list[int]:
        """SIGKILL ``daemon`` and its descendants, as when its machine dies; return their pids.
        They are all stopped (SIGSTOP) first, until the tree stops growing, so that none
        starts a process that outlives the kill (a driver being restarted, say)."""
        frozen: list[int] = []
        while daemon.alive():
            new = [p for p in [daemon.pid, *_descendants(daemon.pid)] if p not in frozen]
            if not new:
                break
            _signal(new, signal.SIGSTOP)
            frozen += new
        _signal(frozen, signal.SIGKILL)
        daemon.proc.wait(10)
        return frozen

    # --- looking ----------------------------------------------------------------------------------------
    def state(self) -> dict | None:
        """The master's ``/json/`` page (workers, apps, drivers), or None if it does not answer."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui_port}/json/", timeout=5) as r:
                return json.load(r)
        except OSError:
            return None

    def driver(self) -> dict | None:
        """The one active driver in the master's page (id, state, worker), if any."""
        drivers = (self.state() or {}).get("activedrivers") or []
        return drivers[0] if drivers else None

    def worker_of(self, worker_id: str) -> Daemon:
        """Our worker daemon of the master's worker id (``worker-<date>-<host>-<port>``)."""
        return next(w for w in self.workers if worker_id.endswith(f"-{w.port}"))

    def node_of(self, pid: int) -> Daemon | None:
        """The worker daemon that ``pid`` runs under (an executor, a driver, a Python worker)."""
        return next((w for w in self.workers if w.alive() and (pid == w.pid or pid in _descendants(w.pid))), None)

    def driver_processes(self) -> list[int]:
        """The pids of the running drivers' JVMs (``DriverWrapper``) and of the processes under them."""
        out = []
        for w in self.workers:
            for pid in _descendants(w.pid):
                if "org.apache.spark.deploy.worker.DriverWrapper" in cmdline(pid):
                    out += [pid, *_descendants(pid)]
        return out

    def log(self, name: str, lines: int | None = 40) -> str:
        """The last ``lines`` lines a daemon wrote (None: all of them)."""
        try:
            text = (self.root / f"{name}.out").read_text(errors="replace")
        except OSError:
            return ""
        return text if lines is None else "\n".join(text.splitlines()[-lines:])

    def driver_log(self) -> str:
        """The last lines of every driver's stderr and stdout (in its worker's work dir)."""
        out = []
        for f in sorted(self.root.glob("worker*/driver-*/std*")):
            out.append(f"--- {f.relative_to(self.root)}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-30:]))
        return "\n".join(out)


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


# --- one cluster for the tests that can share it --------------------------------------------------
SHARED_CORES, SHARED_MEMORY = 3, "2g"
"""The shared cluster's workers: 3 cores, for the supervised driver of test_spark_standalone_ha
(one core) and its two executors on one node once the other is killed; an application that
wants fewer asks for fewer (``spark.cores.max``)."""

_shared: StandaloneCluster | None = None


def shared(tmp_path_factory, workers: int) -> StandaloneCluster:
    """This process's shared cluster (`SHARED_CORES` cores and `SHARED_MEMORY` a worker), started
    on first use: a master and each test's own start cost 10-20 s three times in the suite's
    Spark group. A test that kills a worker leaves the cluster with fewer: each test gets at
    least ``workers`` alive (started again as needed), and no application or driver of an earlier
    test still running. `stop_shared` stops it (tests/conftest.py, after the last Spark test)."""
    global _shared
    if _shared is not None and not (_shared.master and _shared.master.alive()):
        stop_shared()
    if _shared is None:
        cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=workers, cores=SHARED_CORES,
                                    memory=SHARED_MEMORY)
        _shared = cluster.__enter__()
        return _shared
    cluster = _shared

    def idle() -> bool:
        state = cluster.state()
        return state is not None and not state.get("activeapps") and not state.get("activedrivers")
    assert wait_until(idle, 60, 0.5), f"an earlier test's application or driver still runs: {cluster.state()}"
    cluster.ensure_workers(max(workers, len([w for w in cluster.workers if w.alive()])))
    return cluster


def stop_shared() -> None:
    """Stop the shared cluster, if one runs."""
    global _shared
    if _shared is not None:
        cluster, _shared = _shared, None
        cluster.stop()
