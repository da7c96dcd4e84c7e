"""Throwaway clusters for one benchmark run: `ProcessHost` (master + supervisor + N worker
processes) and `SparkHost` (the master in this process, as the Spark driver, and each worker a
Spark task). Both are context managers that yield an object with the verbs the runs need::

    with ProcessHost(workers=2) as host:   # or SparkHost(workers=2, master="local[2]")
        host.submit(name, conf, topology)
        info = host.info(name)          # get_topology_info (heartbeated: ~1 s late)
        host.kill(name, wait_secs=0)

and the same helpers to watch their worker processes (`ProcessHost.worker_pids`,
``wait_workers``, ``wait_no_workers``, ``samples``); `make_host` picks one by name.

`ProcessHost` starts ``squall.cluster.process.run_nimbus`` (the master, which starts its
supervisor) as a subprocess, on free ports and in a fresh temporary ``storm.local.dir`` whose
``supervisor.slots.ports`` are ``workers`` free ports, and waits until the master answers. On
exit it stops the master with SIGTERM (the master stops the supervisor it started, and the
supervisor its workers), then checks that no process of that ``storm.local.dir`` is left: any
that is, is killed and reported as an error (`LeftoverProcessError`). The directory (logs of
the master, supervisor and workers) is removed unless the run failed or ``keep_dir`` is set.

`SparkHost` starts a `squall.cluster.spark.SparkCluster` (a new SparkSession on ``master``,
default ``local[workers]``; ~8 s cold) with a fresh temporary ``storm.local.dir``. Its worker
processes are the Python workers Spark forks from its ``pyspark.daemon`` for the workers' tasks,
found from ``/proc`` under this process; the master and the supervisor are threads of this
process, and Spark's JVM (scheduler and, in local mode, executor) is sampled apart. On exit it
shuts the cluster down (which stops the SparkSession) and checks, as `ProcessHost` does, that
no worker process is left.

Measuring processes from outside (`proc_sample`): ``/proc/<pid>/stat`` gives a process's CPU
seconds (user + system) and ``/proc/<pid>/status`` its resident set now (``VmRSS``) and at its
peak (``VmHWM``). Linux only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class LeftoverProcessError(RuntimeError):
    """A process of the throwaway cluster outlived its stop."""


# --- processes, seen from outside ------------------------------------------------------------------
def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free right now on 127.0.0.1 (a race, as every such helper)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def processes_mentioning(marker: str) -> dict[int, str]:
    """pid -> command line of the squall processes whose command line contains ``marker``."""
    out = {}
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and "squall" in cmd:
            out[int(d.name)] = cmd
    return out


def proc_sample(pid: int) -> dict[str, float] | None:
    """CPU seconds so far, current and peak RSS (MB) of ``pid``; None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; field 3 is fields[0]
    cpu = (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime
    mem = {}
    for line in status.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            mem[key] = int(rest.split()[0]) / 1024.0  # kB
    return {"cpu_s": cpu, "rss_mb": mem.get("VmRSS", 0.0), "peak_rss_mb": mem.get("VmHWM", 0.0)}


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])  # after "pid (comm) state "


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(pid: int) -> list[int]:
    """Pids of every process below ``pid`` (children, their children, ...), from ``/proc``."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            parent = _parent(int(d.name))
            if parent is not None:
                kids.setdefault(parent, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        below = kids.get(todo.pop(), [])
        out += below
        todo += below
    return out


# --- the hosts -----------------------------------------------------------------------------------------
class _Host:
    """What `ProcessHost` and `SparkHost` share: the verbs through a master client (``_client``)
    and waiting for worker processes (``worker_pids``)."""

    name = ""
    worker_start_timeout = 30.0
    root: Path | None = None  # the host's temporary directory
    keep_dir = False
    _client: Any = None

    def worker_pids(self) -> list[int]:
        raise NotImplementedError

    def _workers_hint(self) -> str:
        """Where to look when workers do not start (appended to the error)."""
        return ""

    # --- the verbs ---------------------------------------------------------------------------------------
    def submit(self, name: str, conf: dict[str, Any], topology: Any) -> str:
        return self._client.submit_topology(name, conf, topology)

    def info(self, name: str) -> dict[str, Any]:
        return self._client.get_topology_info(name)

    def get_topology_info(self, name: str) -> dict[str, Any]:  # what harness.wait_until calls
        return self.info(name)

    def get_component_page(self, name: str, component: str) -> dict[str, Any]:  # harness.spout_limits
        return self._client.get_component_page(name, component)

    def kill(self, name: str, wait_secs: float | None = 0) -> None:
        self._client.kill_topology(name, wait_secs=wait_secs)

    # --- its processes -----------------------------------------------------------------------------------
    def wait_workers(self, n: int, timeout: float | None = None) -> list[int]:
        """Waits until ``n`` worker processes run; returns their pids."""
        timeout = self.worker_start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            pids = self.worker_pids()
            if len(pids) >= n:
                return pids
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(pids)} of {n} {self.name} workers started within {timeout} s"
                                   f"{self._workers_hint()}")
            time.sleep(0.02)

    def _reap(self, failed: bool, leftovers: Callable[[], dict[int, str]], what: str) -> None:
        """The end of a stop: wait up to 15 s for ``leftovers()`` (pid -> command line) to end,
        SIGKILL what remains, remove the host's directory unless it is kept, and raise
        `LeftoverProcessError` naming ``what`` outlived the stop (unless the run failed anyway)."""
        deadline = time.monotonic() + 15
        while leftovers() and time.monotonic() < deadline:
            time.sleep(0.05)
        left = leftovers()
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.root is not None and not (failed or left or self.keep_dir):
            shutil.rmtree(self.root, ignore_errors=True)
        elif self.root is not None:
            print(f"[bench] {self.name} host directory kept: {self.root}", file=sys.stderr)
        if left and not failed:
            raise LeftoverProcessError(f"{what} outlived its stop (killed): {left}")

    def wait_no_workers(self, timeout: float = 15.0) -> bool:
        """True once no worker process runs (after a kill)."""
        deadline = time.monotonic() + timeout
        while self.worker_pids():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


class ProcessHost(_Host):
    """A throwaway process-host cluster; see the module docstring.

    Args:
        workers: number of worker slots (``supervisor.slots.ports``).
        conf: extra cluster settings (written to the cluster's ``squall.yaml``).
        keep_dir: keep the ``storm.local.dir`` (and its logs) after a successful run.
        start_timeout: seconds to wait for the master to answer.
    """

    name = "process"

    def __init__(self, workers: int = 1, conf: dict[str, Any] | None = None, keep_dir: bool = False,
                 start_timeout: float = 30.0) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.extra_conf = dict(conf or {})
        self.keep_dir = keep_dir
        self.start_timeout = start_timeout
        self.root: Path | None = None
        self.local_dir: Path | None = None
        self.conf: dict[str, Any] = {}
        self.conf_file: Path | None = None
        self.master: subprocess.Popen | None = None
        self._client: Any = None

    # --- lifecycle ---------------------------------------------------------------------------------------
    def __enter__(self) -> ProcessHost:
        self.root = Path(tempfile.mkdtemp(prefix="squall-bench-host-"))
        self.local_dir = self.root / "storm-local"
        master_port, *slots = free_ports(1 + self.workers)
        self.conf = {"storm.local.dir": str(self.local_dir), "nimbus.host": "127.0.0.1",
                     "nimbus.thrift.port": master_port, "supervisor.slots.ports": slots}
        self.conf.update(self.extra_conf)
        self.conf_file = self.root / "squall.yaml"
        self.conf_file.write_text(yaml.safe_dump(self.conf))
        try:
            self._start_master()
        except BaseException:
            self._stop(failed=True)
            raise
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        self._stop(failed=exc_type is not None)

    def _start_master(self) -> None:
        code = ("import logging, sys; logging.basicConfig(level=logging.INFO);"
                "from squall._config import cluster_conf; from squall.cluster.process import run_nimbus;"
                f"sys.exit(run_nimbus(cluster_conf(None, {str(self.conf_file)!r})))")
        env = dict(os.environ)
        # workers import the benchmark's helpers (bench.corpus) by name: make them importable
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        env.pop("SQUALL_CONF_DIR", None)
        with open(self.root / "master.log", "ab") as log:
            self.master = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=log,
                                           cwd=str(REPO_ROOT), env=env)
        from squall._config import cluster_conf
        from squall.cluster.client import MasterClient
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.master.poll() is not None:
                raise RuntimeError(f"the master exited with status {self.master.returncode}; "
                                   f"see {self.root / 'master.log'}:\n{self._tail('master.log')}")
            try:
                client = MasterClient(cluster_conf(None, self.conf_file))
                client.list_topologies()
                self._client = client
                break
            except Exception:
                with contextlib.suppress(Exception):
                    client.close()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the master did not answer within {self.start_timeout} s; "
                                       f"see {self.root / 'master.log'}") from None
                time.sleep(0.05)
        while self.supervisor_pid() is None:  # started by the master right before it listens
            if time.monotonic() > deadline:
                raise RuntimeError(f"no supervisor started within {self.start_timeout} s; "
                                   f"see {self.local_dir / 'supervisor'}")
            time.sleep(0.05)

    def _tail(self, rel: str, lines: int = 30) -> str:
        try:
            return "\n".join((self.root / rel).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _stop(self, failed: bool) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None
        if self.master is not None and self.master.poll() is None:
            self.master.send_signal(signal.SIGTERM)  # stops the supervisor it started, which stops its workers
            try:
                self.master.wait(30)
            except subprocess.TimeoutExpired:
                self.master.kill()
                self.master.wait()
        marker = None if self.local_dir is None else str(self.local_dir)
        self._reap(failed, lambda: processes_mentioning(marker) if marker else {},
                   "processes of the throwaway cluster")

    def fields(self) -> dict[str, Any]:
        """The record fields that say which host ran."""
        return {"host": self.name}

    # --- its processes -----------------------------------------------------------------------------------
    def worker_pids(self) -> list[int]:
        """Pids of the worker processes running now."""
        return sorted(p for p, c in processes_mentioning(str(self.local_dir)).items() if " -m squall.worker " in c)

    def supervisor_pid(self) -> int | None:
        from squall.cluster.process import running_supervisor
        return running_supervisor(self.local_dir)

    def _workers_hint(self) -> str:
        return f"; see {self.local_dir / 'supervisor'}"

    def samples(self) -> dict[str, Any]:
        """`proc_sample` of every worker (by pid), of the master and of the supervisor, and the
        ``time.perf_counter()`` they were taken at."""
        from .harness import cpu_seconds, machine_busy_seconds
        out: dict[str, Any] = {"t": time.perf_counter(), "machine": machine_busy_seconds(),
                               "self": cpu_seconds(), "workers": {}}
        for pid in self.worker_pids():
            s = proc_sample(pid)
            if s is not None:
                out["workers"][pid] = s
        out["master"] = proc_sample(self.master.pid) if self.master is not None else None
        sup = self.supervisor_pid()
        out["supervisor"] = proc_sample(sup) if sup is not None else None
        return out


class SparkHost(_Host):
    """A throwaway squall cluster on Spark (`squall.cluster.spark.SparkCluster`) with the verbs
    and helpers of `ProcessHost`; see the module docstring.

    Args:
        workers: worker slots the runs need (Spark's task slots; ``local[workers]`` by default).
        master: the Spark master URL for the new SparkSession (default ``local[workers]``).
        conf: extra cluster settings (over the temporary ``storm.local.dir`` and a free port).
        keep_dir: keep the ``storm.local.dir`` after a successful run.
    """

    name = "spark"
    worker_start_timeout = 60.0  # a Spark task starts slower than a process

    def __init__(self, workers: int = 1, master: str | None = None, conf: dict[str, Any] | None = None,
                 keep_dir: bool = False) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.master = master or f"local[{workers}]"
        self.extra_conf = dict(conf or {})
        self.keep_dir = keep_dir
        self.root: Path | None = None
        self.local_dir: Path | None = None
        self.cluster: Any = None
        self.jvm_pid: int | None = None

    # --- lifecycle ---------------------------------------------------------------------------------------
    def __enter__(self) -> SparkHost:
        from squall.cluster.spark import SparkCluster
        self.root = Path(tempfile.mkdtemp(prefix="squall-bench-spark-"))
        self.local_dir = self.root / "storm-local"
        conf = {"storm.local.dir": str(self.local_dir), "nimbus.thrift.port": 0}  # 0: any free port
        conf.update(self.extra_conf)
        try:
            self.cluster = SparkCluster(master=self.master, conf=conf)
        except BaseException:
            self._stop(failed=True)
            raise
        self.jvm_pid = next((p for p in descendants(os.getpid())
                             if _cmdline(p).split(" ", 1)[0].endswith("java")), None)
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        self._stop(failed=exc_type is not None)

    def _stop(self, failed: bool) -> None:
        if self.cluster is not None:
            self.cluster.shutdown()  # cancels the workers' jobs; stops the session it created
            self.cluster = None
        self._reap(failed, lambda: {pid: _cmdline(pid) for pid in self.worker_pids()},
                   "Python workers of the Spark host")

    def fields(self) -> dict[str, Any]:
        """The record fields that say which host ran."""
        import pyspark
        return {"host": self.name, "spark_master": self.master, "spark_version": pyspark.__version__}

    @property
    def _client(self) -> Any:  # SparkCluster is the master client
        return self.cluster

    # --- its processes -----------------------------------------------------------------------------------
    def _daemon_pids(self, depth: int = 0) -> list[int]:
        """The processes with ``pyspark.daemon``'s command line ``depth`` forks below a daemon:
        0 the daemons, 1 the Python workers a daemon forked for its tasks (each task's, which
        only watches its squall worker: `squall.cluster.spark_task.run_watched`), 2 the squall
        workers those forked in turn. A forked process keeps its parent's command line."""
        forked = {p for p in descendants(os.getpid()) if "pyspark.daemon" in _cmdline(p)}
        level = {p for p in forked if _parent(p) not in forked}
        for _ in range(depth):
            level = {p for p in forked if _parent(p) in level}
        return sorted(level)

    def worker_pids(self) -> list[int]:
        """Pids of the worker processes running now: the squall workers that the Spark tasks'
        Python workers forked (one per task; squall's workers are the only tasks)."""
        return self._daemon_pids(depth=2)

    def samples(self) -> dict[str, Any]:
        """As `ProcessHost.samples`; the master (and supervisor) is this process, the driver,
        which also polls for the benchmark, and Spark's JVM is ``spark_jvm``."""
        from .harness import machine_busy_seconds
        out: dict[str, Any] = {"t": time.perf_counter(), "machine": machine_busy_seconds(),
                               "self": None, "workers": {}, "supervisor": None}
        for pid in self.worker_pids():
            s = proc_sample(pid)
            if s is not None:
                out["workers"][pid] = s
        out["master"] = proc_sample(os.getpid())
        out["spark_jvm"] = proc_sample(self.jvm_pid) if self.jvm_pid is not None else None
        # the daemon that forks the Python workers, and the tasks' Python workers that watch the
        # squall workers: the daemon starts with the first task, and its start (imports) and
        # forks cost ~1 s of CPU that would otherwise show as other programs'
        daemons = [proc_sample(p) for p in self._daemon_pids(0) + self._daemon_pids(1)]
        daemons = [d for d in daemons if d is not None]
        out["spark_daemon"] = {"cpu_s": sum(d["cpu_s"] for d in daemons)} if daemons else None
        return out


HOST_CONF_ENV = "SQUALL_BENCH_HOST_CONF"  # JSON: extra cluster settings (``python -m bench run --conf``)
# seconds the process host waits for its master and supervisor to start (`ProcessHost`'s
# start_timeout, 30 unless set): `bench.instructions` runs them under Valgrind, ~50x slower
START_TIMEOUT_ENV = "SQUALL_BENCH_START_TIMEOUT"


def make_host(host: str, workers: int, spark_master: str | None = None) -> ProcessHost | SparkHost:
    """The throwaway host a run asked for by name: ``"process"`` or ``"spark"``, with the extra
    cluster settings of ``$SQUALL_BENCH_HOST_CONF`` (a JSON object), if set."""
    conf = json.loads(os.environ.get(HOST_CONF_ENV) or "{}")
    if host == "process":
        return ProcessHost(workers, conf, start_timeout=float(os.environ.get(START_TIMEOUT_ENV) or 30.0))
    if host == "spark":
        return SparkHost(workers, spark_master, conf)
    raise ValueError(f"unknown host {host!r} (process or spark)")


def usage_between(start: dict[str, Any], end: dict[str, Any],
                  worker_cpu0: dict[int, float] | None = None) -> dict[str, Any]:
    """Record fields for the processes' use of CPU and memory between two `ProcessHost.samples`
    (or `SparkHost.samples`).

    ``cpu_s`` is the CPU seconds of all worker processes together (the master and supervisor
    are given apart), ``peak_rss_mb`` the largest worker's peak resident set (``VmHWM``, since
    it started), and ``worker_*`` the same per worker, in pid order. ``worker_cpu0`` overrides
    the start's CPU per worker pid (W1: read by the components themselves when they opened).
    On the Spark host the master's figures are the driver's (this process: master, supervisor,
    py4j and the benchmark's polling; ``supervisor_cpu_s`` is None), ``spark_jvm_cpu_s`` /
    ``spark_jvm_peak_rss_mb`` are Spark's JVM's and ``spark_daemon_cpu_s`` that of the
    ``pyspark.daemon`` that forks the workers.
    """
    cpu0 = {pid: s["cpu_s"] for pid, s in start.get("workers", {}).items()}
    cpu0.update(worker_cpu0 or {})
    pids = sorted(end["workers"])
    per = [round(end["workers"][p]["cpu_s"] - cpu0.get(p, 0.0), 2) for p in pids]

    def delta(role: str) -> float | None:
        a, b = start.get(role), end.get(role)
        if b and role in start and a is None:  # started in between (the Spark host's daemon)
            return round(b["cpu_s"], 2)
        return round(b["cpu_s"] - a["cpu_s"], 2) if a and b else None

    # what the rest of the machine used meanwhile: all busy CPU less this cluster's and ours
    other = None
    if start.get("machine") is not None and end.get("machine") is not None:
        ours = sum(end["workers"][p]["cpu_s"] - start.get("workers", {}).get(p, {}).get("cpu_s", 0.0)
                   for p in pids)  # a worker started after ``start`` counts from zero
        ours += sum(delta(role) or 0.0 for role in ("master", "supervisor", "spark_jvm", "spark_daemon"))
        if end.get("self") is not None:  # None: this process is the master (the Spark host)
            ours += end["self"] - start["self"]
        other = round(end["machine"] - start["machine"] - ours, 2)  # tick-sampled: can dip below 0
    out = {
        "cpu_s": round(sum(per), 2),
        "cpu_wall_s": round(end["t"] - start["t"], 3) if "t" in start else None,
        "worker_cpu_s": per,
        "worker_peak_rss_mb": [round(end["workers"][p]["peak_rss_mb"], 1) for p in pids],
        "peak_rss_mb": round(max((end["workers"][p]["peak_rss_mb"] for p in pids), default=0.0), 1),
        "master_cpu_s": delta("master"),
        "supervisor_cpu_s": delta("supervisor"),
        "master_peak_rss_mb": round(end["master"]["peak_rss_mb"], 1) if end.get("master") else None,
        "other_cpu_s": other,
    }
    if "spark_jvm" in end:
        out["spark_jvm_cpu_s"] = delta("spark_jvm")
        out["spark_jvm_peak_rss_mb"] = round(end["spark_jvm"]["peak_rss_mb"], 1) if end["spark_jvm"] else None
        out["spark_daemon_cpu_s"] = delta("spark_daemon")
    return out
