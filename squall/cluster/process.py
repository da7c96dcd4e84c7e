"""The process host: ``squall nimbus --host process`` runs the master here and a supervisor
process that owns the worker processes of ``supervisor.slots.ports``.

The supervisor is started in its own session, so that neither a Ctrl-C in the master's terminal
nor a SIGKILL of the master reaches it: its workers keep processing, and the next master adopts
the running supervisor (found by the pid file in ``storm.local.dir``) instead of starting a
second one. Stopping the master cleanly (Ctrl-C, SIGTERM) stops the supervisor, started or
adopted, and the supervisor its workers.

While it runs, the master watches the supervisor (`SupervisorKeeper`): one that dies (a
SIGKILL, a crash; its workers die with it) is started again, at once the first time, then after
a delay that doubles while it keeps dying (1 s, 2 s, 4 s, ... up to 30 s); the new one starts
the slots' workers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from .._children import process_start
from .._config import Config, conf_value, unapplied_daemon_keys
from .._private import open_private_log, own_local_dir, private_dir
from .backoff import STEADY_SECS, crash_backoff
from .master import Master
from .process_launcher import write_conf
from .served_ui import statistics_pages
from .server import MasterServer
from .store import hold_master_lock, name_master_lock
from .supervisor import PID_FILE, supervisor_lock_held

log = logging.getLogger("squall.master")


def running_supervisor(local_dir: Path) -> int | None:
    """The pid of the supervisor running for ``storm.local.dir`` ``local_dir``, if any: one
    that holds the directory's lock (a pid file left by a supervisor killed may name a pid the
    system gave since to another process, even another cluster's supervisor)."""
    directory = local_dir / "supervisor"
    if not supervisor_lock_held(directory):
        return None
    pid_file = directory / PID_FILE
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    args = cmdline.split(b"\0")
    # started by squall nimbus (python -m squall.cluster.supervisor) or by squall supervisor, in
    # any of its spellings: the ``squall`` script, ``python -m squall``, ``python -m squall.cli``
    ours = b"squall.cluster.supervisor" in args or (
        b"supervisor" in args and any(a.rsplit(b"/", 1)[-1] in (b"squall", b"squall.cli") for a in args))
    return pid if ours else None


def start_supervisor(conf: dict[str, Any]) -> tuple[int, bool]:
    """Start a supervisor for ``conf`` unless one runs; returns ``(pid, started_here)``."""
    local_dir = Path(conf_value(conf, Config.STORM_LOCAL_DIR))
    pid = running_supervisor(local_dir)
    if pid is not None:
        log.info("adopting the running supervisor (pid %s)", pid)
        return pid, False
    sup_dir = private_dir(own_local_dir(conf) / "supervisor")
    conf_file = sup_dir / "launch.yaml"
    write_conf(conf_file, conf)
    log_file = sup_dir / "supervisor.log"
    logf = open_private_log(log_file)  # until it sends its output through its own rotated log
    proc = subprocess.Popen([sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(conf_file),
                             "--log", str(log_file)], stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    logf.close()
    log.info("started a supervisor (pid %s) for slots %s", proc.pid, conf.get(Config.SUPERVISOR_SLOTS_PORTS))
    return proc.pid, True


class SupervisorKeeper:
    """The supervisor of ``squall nimbus --host process``: started or adopted at once, restarted
    by `check` when it has died, stopped by `stop`. ``clock`` gives monotonic seconds."""

    STEADY_SECS = STEADY_SECS  # a supervisor that ran this long before it died starts again at once

    def __init__(self, conf: dict[str, Any], clock: Any = time.monotonic) -> None:
        self.conf = conf
        self.local_dir = Path(conf_value(conf, Config.STORM_LOCAL_DIR))
        self.clock = clock
        self.pid, self.child = start_supervisor(conf)
        self.since = clock()
        self.deaths = 0                       # quick deaths in a row
        self.restart_at: float | None = None  # set while it is dead

    def _exit_status(self) -> str | None:
        """None while the supervisor runs; else how it ended."""
        if self.child:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return "unknown status"
            if not done:
                return None
            if os.WIFSIGNALED(status):
                return f"signal {os.WTERMSIG(status)}"
            return f"status {os.waitstatus_to_exitcode(status)}"
        return None if running_supervisor(self.local_dir) == self.pid else "unknown status"

    def check(self) -> None:
        """Restart the supervisor if it died and its delay has passed."""
        now = self.clock()
        if self.restart_at is None:
            how = self._exit_status()
            if how is None:
                return
            self.deaths, delay = crash_backoff(self.deaths, now - self.since, self.STEADY_SECS)
            log.warning("the supervisor (pid %s) died (%s), and its workers with it; starting a new one%s",
                        self.pid, how, f" in {delay:.0f} s" if delay else "")
            self.restart_at = now + delay
        if now >= self.restart_at:
            self.pid, self.child = start_supervisor(self.conf)
            self.since, self.restart_at = now, None

    def stop(self) -> None:
        """Stop the supervisor (and so its workers), whether this master started or adopted it."""
        if self.restart_at is not None:
            return  # dead, not restarted yet
        if self.child:
            _stop_supervisor(self.pid)
        else:
            log.info("stopping the adopted supervisor (pid %s)", self.pid)
            _stop_adopted(self.pid, self.local_dir)


def run_nimbus(conf: dict[str, Any], supervise: bool = True,
               on_ready: Callable[[str, int], None] | None = None) -> int:
    """Run the master until SIGINT/SIGTERM; with ``supervise``, also a supervisor process.
    ``on_ready(host, port)`` is called once the master listens."""
    lock = hold_master_lock(conf)  # held until this process ends
    for warning in unapplied_daemon_keys(conf, "cluster configuration"):  # a storm.yaml's JVM options
        log.warning("%s", warning)
    master = Master(conf, pages=statistics_pages())
    nimbus = MasterServer(master)
    keeper: SupervisorKeeper | None = None

    async def main() -> None:
        nonlocal keeper
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        listening = asyncio.Event()
        server = asyncio.create_task(nimbus.serve(listening))
        stopped = asyncio.create_task(stop.wait())
        ready = asyncio.create_task(listening.wait())
        waiting = {server, stopped, ready}
        while not (server.done() or stopped.done()):
            await asyncio.wait(waiting, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
            if ready in waiting and ready.done() and not (server.done() or stopped.done()):
                waiting.discard(ready)  # announce once, then wake only for a stop or the keeper
                # the port it took (nimbus.thrift.port 0 names none): a second master's error names it
                name_master_lock(lock, str(conf_value(conf, Config.NIMBUS_HOST)), master.port)
                if supervise:
                    # started once the master listens, and told the port it took: with
                    # nimbus.thrift.port 0 the configured port says nothing a supervisor can use
                    keeper = SupervisorKeeper({**conf, Config.NIMBUS_THRIFT_PORT: master.port})
                if on_ready is not None:
                    assert master.port is not None  # it listens
                    on_ready(str(conf_value(conf, Config.NIMBUS_HOST)), master.port)
            if keeper is not None:
                keeper.check()
        ready.cancel()
        stopped.cancel()
        await asyncio.wait({ready, stopped})  # ended here: `_run_to_the_end` leaves no task to end
        if stop.is_set():
            # where the next start finds the topologies: ZooKeeper under Nimbus HA, else the local dir
            kept = ("in ZooKeeper (Nimbus HA)" if conf.get(Config.STORM_ZOOKEEPER_SERVERS)
                    else f"in {conf_value(conf, Config.STORM_LOCAL_DIR)}")
            with_supervisor = "" if keeper is None else \
                f", with the supervisor it {'started' if keeper.child else 'adopted'} and its workers"
            log.info("squall nimbus stopping (signal received)%s; the topologies stay %s for its next start",
                     with_supervisor, kept)
        if server.done():
            server.result()  # serve ended by itself: raise why (say, the port is taken)
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server  # closes the listening socket, then every connection, within a bound
    try:
        _run_to_the_end(main())
    finally:
        if keeper is not None:
            keeper.stop()
        if lock is not None:
            os.close(lock)
    log.info("squall nimbus stopped")
    return 0


def _run_to_the_end(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` in a new event loop and close the loop: `asyncio.run` without its last
    wait. asyncio.run cancels the tasks ``main`` left and waits for them with no bound, so one
    that did not end (a connection whose cancel Python 3.11's ``wait_for`` lost) kept a master
    sent SIGTERM alive for good. ``main`` ends its own tasks, the server its connections within a
    bound (`squall.cluster.server.MasterServer`); one left after that, logged there, is dropped
    with the loop."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def _stop_supervisor(pid: int, timeout: float = 15.0) -> None:
    """SIGTERM the supervisor we started and reap it: it stops its workers before it exits, so
    once this returns (within ``timeout``) none of them is left."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.05)
    log.warning("supervisor (pid %s) did not stop within %.0f s", pid, timeout)


def _stop_adopted(pid: int, local_dir: Path, timeout: float = 15.0) -> None:
    """SIGTERM a supervisor another master started, and wait until it is gone (it is not our
    child: its pid file tells whether it still runs)."""
    start = process_start(pid)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    # its pid file goes before the process does (the interpreter's exit comes after): wait for
    # both, so that "stopped" means no process of it is left
    while running_supervisor(local_dir) == pid or (start is not None and process_start(pid) == start):
        if time.monotonic() > deadline:
            log.warning("supervisor (pid %s) did not stop within %.0f s", pid, timeout)
            return
        time.sleep(0.05)
