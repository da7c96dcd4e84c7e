"""The launcher seam: how a supervisor starts, stops and watches the workers of its slots.

A supervisor (`squall.cluster.supervisor.Supervisor`) is one loop for every host: it asks the
master which launch each of its slots must run and makes its `Launcher` match. The launcher is
all that differs between hosts:

- `ProcessLauncher` (the process host): a worker is a ``python -m squall.worker`` process;
- `squall.cluster.spark.SparkLauncher`: a worker is a long-running Spark task;
- `squall.cluster.inprocess.InProcessLauncher` (`LocalCluster`): a worker is a set of threads in
  this process.

Each knows the slots it offers, starts a worker for a `Launch`, stops one (cleanly, within a
bounded time; a stopped worker's end is not an exit to report: it was asked to go), and reports
the workers that ended on their own (`WorkerExit`). Secrets go only where a launcher needs them:
the process launcher writes the cluster's configuration, secret included, to an owner-only file
its worker processes read; the others hand workers what they need in memory.
"""

from __future__ import annotations

import abc
import ctypes
import logging
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from .._private import private_dir, write_private
from ..worker.agent import EXIT_CANNOT_START
from .logs import OutputPump, RotatingLog, log_limits

log = logging.getLogger("squall.supervisor")


@dataclass(frozen=True)
class Launch:
    """What a slot must run: a topology's worker, under the launch id its peers know it by."""

    storm_id: str
    name: str       # the topology's name, for logs
    launch_id: int


@dataclass(frozen=True)
class WorkerExit:
    """A worker that ended on its own (a crash, a failed start, or the master's stop)."""

    storm_id: str
    slot: str        # "host:port"
    launch_id: int
    status: int      # its exit status (0: it was told to stop)
    started: bool    # False: it ended before it could start (EXIT_CANNOT_START)
    output: str = ""  # the last lines it wrote, often why it died

    def as_dict(self) -> dict[str, Any]:
        """As the supervisor sends it to the master (``supervisor_sync``'s ``exits``)."""
        return asdict(self)


class Launcher(abc.ABC):
    """Starts, stops and watches the workers of one supervisor's slots; see the module docstring."""

    host: str  # the slots' host part, and the address peers reach workers at where it matters

    @abc.abstractmethod
    def slots(self) -> list[int]:
        """The ports of the slots offered now (may grow, never shrinks while workers run)."""

    @abc.abstractmethod
    def start(self, port: int, launch: Launch) -> None:
        """Start a worker on ``port`` for ``launch``; returns once it is under way."""

    @abc.abstractmethod
    def stop(self, port: int) -> None:
        """Stop ``port``'s worker, cleanly if it can within a bounded time; no exit is reported."""

    @abc.abstractmethod
    def running(self) -> dict[int, Launch]:
        """The launch each busy port runs (ended workers not yet reported by `exits` included)."""

    @abc.abstractmethod
    def exits(self) -> list[WorkerExit]:
        """Workers that ended on their own since the last call, each reported once."""

    def stop_all(self) -> None:
        """Stop every worker (the supervisor is stopping)."""
        for port in list(self.running()):
            self.stop(port)


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL me when my parent (the supervisor) dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: workers also watch their parent, see squall.worker.process


def write_conf(path: Path, conf: dict[str, Any]) -> None:
    """Write ``conf`` as YAML readable by its owner only: it may hold ``squall.secret``."""
    write_private(path, yaml.safe_dump(dict(conf)))


@dataclass
class _Process:
    launch: Launch
    proc: subprocess.Popen
    output: OutputPump


class ProcessLauncher(Launcher):
    """Workers as processes (``python -m squall.worker``) of this machine.

    Each is started with ``PR_SET_PDEATHSIG`` = SIGKILL, so a SIGKILLed supervisor leaves no
    orphan. Its stdout and stderr go through a pipe into ``worker-<port>.log`` in ``directory``,
    rotated by size (`squall.cluster.logs`); the last lines go with its exit. It reads the
    cluster's configuration, secret included, from ``conf.yaml`` there (owner-only)."""

    def __init__(self, conf: dict[str, Any], host: str, master: tuple[str, int], directory: Path) -> None:
        self.conf = conf
        self.host = host
        self.master = master
        self.dir = private_dir(directory)
        self.conf_file = self.dir / "conf.yaml"
        write_conf(self.conf_file, conf)
        self._ports = [int(p) for p in conf.get("supervisor.slots.ports") or []]
        self.procs: dict[int, _Process] = {}
        self.logs: dict[int, RotatingLog] = {}  # port -> its workers' log, kept across launches

    def slots(self) -> list[int]:
        return list(self._ports)

    def start(self, port: int, launch: Launch) -> None:
        mhost, mport = self.master
        cmd = [sys.executable, "-m", "squall.worker", "--master", f"{mhost}:{mport}",
               "--storm-id", launch.storm_id, "--slot", f"{self.host}:{port}",
               "--launch-id", str(launch.launch_id), "--conf", str(self.conf_file)]
        if port not in self.logs:
            self.logs[port] = RotatingLog(self.dir / f"worker-{port}.log", *log_limits(self.conf))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.procs[port] = _Process(launch, proc, OutputPump(proc.stdout, self.logs[port]))
        log.info("started worker %s:%s for %s (launch %s), pid %s", self.host, port, launch.storm_id,
                 launch.launch_id, proc.pid)

    def stop(self, port: int) -> None:
        p = self.procs.pop(port, None)
        if p is None or p.proc.poll() is not None:
            return
        p.proc.terminate()  # SIGTERM: a clean stop, close and cleanup run
        try:
            p.proc.wait(3)
        except subprocess.TimeoutExpired:
            p.proc.kill()
            p.proc.wait()

    def running(self) -> dict[int, Launch]:
        return {port: p.launch for port, p in self.procs.items()}

    def exits(self) -> list[WorkerExit]:
        out = []
        for port, p in list(self.procs.items()):
            rc = p.proc.poll()
            if rc is None:
                continue
            del self.procs[port]
            log.warning("worker %s:%s of %s exited with status %s", self.host, port, p.launch.storm_id, rc)
            p.output.join(1.0)  # what it wrote last, often why it died
            out.append(WorkerExit(p.launch.storm_id, f"{self.host}:{port}", p.launch.launch_id, rc,
                                  rc != EXIT_CANNOT_START, p.output.tail()))
        return out
