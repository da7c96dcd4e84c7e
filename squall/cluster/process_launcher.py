"""`ProcessLauncher`: the process host's workers, as processes of this machine.

Each is ``python -m squall.worker``, started with ``PR_SET_PDEATHSIG`` = SIGKILL, so a
SIGKILLed supervisor leaves no orphan. Its stdout and stderr go through a pipe into
``worker-<port>.log``, rotated by size (`squall.cluster.logs`); the last lines go with its exit.
It reads the cluster's configuration, secret included, from an owner-only ``conf.yaml``: the one
launcher that writes the secret down, because its workers are processes that must read it. Each
keeps a sealed copy of its assignment in ``assignment-<port>``, from which `ProcessLauncher.resume`
starts it again while no master answers (`squall.cluster.local_assignment`), and its board of the
inputs its bolts are executing in ``executing-<port>``, read when it dies without ending on its
own (`squall.engine.executing`): its exit names them for the master. Its shell components' tasks
keep their directories and the record of their process groups under ``shell-<port>``, which the
launcher ends and empties once that worker is dead (`squall._children.end_shell_tasks`): what a
SIGKILLed worker's subprocesses started does not outlive it, as Storm's supervisor kills what a
dead worker's pid directory lists.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .._children import SHELL_HOME_ENV, die_with_parent, end_shell_tasks
from .._config import Config, conf_value
from .._errors import SquallError
from .._private import private_dir, write_private
from .._secret import load_or_create_secret
from ..engine.executing import MAX_LINES, board_size, read_board
from ..worker.agent import EXIT_CANNOT_START
from .launcher import Launch, Launcher, WorkerExit
from .local_assignment import AssignmentCopy, copy_path
from .logs import OutputPump, RotatingLog, log_limits
from .stall_watch import STALL_DUMP_SIGNAL, StallWatch, process_stopped, read_progress, stall_limit_secs

log = logging.getLogger("squall.supervisor")

# the most of a board read (a worker's bolt executors, a line of 16 bytes each, far below it)
BOARD_READ_LIMIT = board_size(MAX_LINES)


def write_conf(path: Path, conf: dict[str, Any]) -> None:
    """Write ``conf`` as YAML readable by its owner only: it may hold ``squall.secret``."""
    write_private(path, yaml.safe_dump(dict(conf)))


def stop_process(proc: subprocess.Popen, grace: float) -> None:
    """Stop ``proc`` as Storm's supervisor stops a worker: SIGTERM, so that its close and cleanup
    run, then SIGKILL if it has not ended within ``grace`` seconds
    (``supervisor.worker.shutdown.sleep.secs``)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class _Process:
    launch: Launch
    proc: subprocess.Popen
    output: OutputPump
    stalls: StallWatch


class ProcessLauncher(Launcher):
    """Workers as processes (``python -m squall.worker``) of this machine, their logs and
    configuration in ``directory``; see the module docstring."""

    resumes = True

    def __init__(self, conf: dict[str, Any], host: str, master: Any, directory: Path,
                 secret: bytes | None = None) -> None:
        """``master``: ``(host, port)``, or a link whose ``address`` is the master it reaches now
        (`squall.cluster.seeds.LeaderLink`: a worker starts with the leader its supervisor found).
        ``secret``: the cluster's, which seals the workers' copies of their assignments (default:
        read from ``conf`` as the workers read it)."""
        self.conf = conf
        self.secret = load_or_create_secret(conf) if secret is None else secret
        self.host = host
        self.master = master
        self.dir = private_dir(directory)
        self.conf_file = self.dir / "conf.yaml"
        write_conf(self.conf_file, conf)
        self._ports = [int(p) for p in conf_value(conf, Config.SUPERVISOR_SLOTS_PORTS)]
        self.procs: dict[int, _Process] = {}
        for port in self._ports:
            # what the workers of an earlier supervisor here left (they died with it, SIGKILLed):
            # ended now, not only when a worker starts on that port again, which may never be
            self._end_shell_tasks(port, "a worker of an earlier supervisor")
        self.logs: dict[int, RotatingLog] = {}  # port -> its workers' log, kept across launches

    def slots(self) -> list[int]:
        return list(self._ports)

    def start(self, port: int, launch: Launch) -> None:
        self._start(port, launch, 0)

    def resume(self, port: int, launch: Launch, resumes: int) -> bool:
        """Start ``port``'s worker from the copy of its assignment its last worker kept
        (``assignment-<port>``, `AssignmentCopy`); False if there is none for ``launch``.

        The copy is checked here, as the worker would check it, before a process is started: a
        copy of another launch (the master gave the port a new launch, and its worker ended
        before it kept that one) would make the worker refuse it and exit, and with no limit on
        ``squall.worker.max.launch.attempts`` a doomed process would be started every 30 s until
        a master answers. The slot is held for the master instead."""
        path = copy_path(self.dir, port)
        if not path.exists():
            log.warning("worker %s:%s of %s (launch %s) cannot start again without the master, which will decide: "
                        "no copy of its assignment in %s (its worker kept none, or removed it when the master told it "
                        "to stop)", self.host, port, launch.storm_id, launch.launch_id, path)
            return False
        try:
            AssignmentCopy(path, self.secret).load(launch.storm_id, f"{self.host}:{port}", launch.launch_id)
        except SquallError as e:
            log.warning("worker %s:%s of %s (launch %s) cannot start again without the master, which will decide: %s",
                        self.host, port, launch.storm_id, launch.launch_id, e)
            return False
        self._start(port, launch, resumes)
        return True

    def _start(self, port: int, launch: Launch, resumes: int) -> None:
        mhost, mport = getattr(self.master, "address", self.master)
        cmd = [sys.executable, "-m", "squall.worker", "--master", f"{mhost}:{mport}",
               "--storm-id", launch.storm_id, "--slot", f"{self.host}:{port}",
               "--launch-id", str(launch.launch_id), "--conf", str(self.conf_file),
               "--kept-assignment", str(copy_path(self.dir, port)), "--executing", str(self._board(port)),
               "--progress", str(self._progress(port))]
        if resumes:
            cmd += ["--resume", str(resumes)]
        if port not in self.logs:
            self.logs[port] = RotatingLog(self.dir / f"worker-{port}.log", *log_limits(self.conf))
        self._board(port).unlink(missing_ok=True)  # an earlier worker's: never read for this one
        self._progress(port).unlink(missing_ok=True)  # the same
        # what an earlier supervisor's worker left there (it died with that supervisor)
        self._end_shell_tasks(port, "an earlier worker")
        env = {**os.environ, SHELL_HOME_ENV: str(self._shell_home(port))}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=die_with_parent)  # noqa: PLW1509 (PDEATHSIG is set in the child or not at all)
        assert proc.stdout is not None  # stdout=PIPE
        stalls = StallWatch(stall_limit_secs(self.conf),
                            float(conf_value(self.conf, Config.SUPERVISOR_MONITOR_FREQUENCY_SECS)))
        self.procs[port] = _Process(launch, proc, OutputPump(proc.stdout, self.logs[port]), stalls)
        log.info("started worker %s:%s for %s (launch %s%s), pid %s", self.host, port, launch.storm_id,
                 launch.launch_id, f", local restart {resumes} without the master" if resumes else "", proc.pid)

    def stop(self, port: int) -> None:
        p = self.procs.pop(port, None)
        if p is not None:
            stop_process(p.proc, float(conf_value(self.conf, Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS)))
            self._end_shell_tasks(port, "the stopped worker")  # a SIGKILL after the grace ran no cleanup

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
            self._end_shell_tasks(port, "the dead worker")
            p.output.join(1.0)  # what it wrote last, often why it died
            out.append(WorkerExit(p.launch.storm_id, f"{self.host}:{port}", p.launch.launch_id, rc,
                                  rc != EXIT_CANNOT_START, p.output.tail(), self._executing(port, p.launch)))
        return out

    def _shell_home(self, port: int) -> Path:
        """Where ``port``'s worker keeps its shell tasks' directories (`SHELL_HOME_ENV`)."""
        return self.dir / f"shell-{port}"

    def _end_shell_tasks(self, port: int, whose: str) -> None:
        """End what the shell tasks of ``port``'s worker, dead, left (`end_shell_tasks`)."""
        killed = end_shell_tasks(self._shell_home(port))
        if killed:
            log.warning("worker %s:%s: killed %d processes %s of its shell components left by %s",
                        self.host, port, len(killed), killed, whose)

    def watch(self) -> None:
        """Dumps the stacks of each worker that ran no Python for half ``nimbus.task.timeout.secs``
        (`squall.cluster.stall_watch`), into its log after a line saying why."""
        for port, p in self.procs.items():
            if p.proc.poll() is not None:
                continue
            if p.stalls.seen(read_progress(self._progress(port)), process_stopped(p.proc.pid)):
                why = (f"worker {self.host}:{port} of {p.launch.storm_id} (pid {p.proc.pid}) has run no Python for "
                       f"{stall_limit_secs(self.conf):g} s (user code holding the interpreter?): its threads' stacks "
                       f"follow; the master restarts it once nimbus.task.timeout.secs pass without its heartbeat")
                log.warning("%s", why)
                with contextlib.suppress(OSError):  # a full disk: the dump is lost with the line
                    self.logs[port].write(f"supervisor: {why}\n".encode())
                try:
                    os.kill(p.proc.pid, STALL_DUMP_SIGNAL)
                except ProcessLookupError:
                    pass  # it ended meanwhile: `exits` reports it

    def _progress(self, port: int) -> Path:
        return self.dir / f"progress-{port}"

    def _board(self, port: int) -> Path:
        return self.dir / f"executing-{port}"

    def _executing(self, port: int, launch: Launch) -> tuple[tuple[int, int], ...]:
        """What ``port``'s dead worker of ``launch`` was executing, from its board (what a dead
        worker left is read as hostile, at most `BOARD_READ_LIMIT` bytes: `read_board`)."""
        try:
            with open(self._board(port), "rb") as f:
                data = f.read(BOARD_READ_LIMIT)
        except OSError:
            return ()  # it died before it made one
        return tuple((e.task, e.root) for e in read_board(data, launch.storm_id, launch.launch_id))
