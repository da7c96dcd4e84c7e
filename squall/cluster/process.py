"""The process host: ``squall nimbus --host process`` runs the master here and a supervisor
process that owns the worker processes of ``supervisor.slots.ports``.

The supervisor is started in its own session, so that neither a Ctrl-C in the master's terminal
nor a SIGKILL of the master reaches it: its workers keep processing, and the next master adopts
the running supervisor (found by the pid file in ``storm.local.dir``) instead of starting a
second one. Stopping the master cleanly (Ctrl-C, SIGTERM) stops the supervisor it started, and
the supervisor its workers.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._private import open_private_log, private_dir
from .master import Master
from .supervisor import write_conf

log = logging.getLogger("squall.master")


def running_supervisor(local_dir: Path) -> int | None:
    """The pid of the supervisor running for ``storm.local.dir`` ``local_dir``, if any."""
    pid_file = local_dir / "supervisor" / "pid"
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    args = cmdline.split(b"\0")
    # started by squall nimbus (python -m squall.cluster.supervisor) or by squall supervisor
    ours = b"squall.cluster.supervisor" in args or (
        b"supervisor" in args and any(a.rsplit(b"/", 1)[-1] == b"squall" for a in args))
    return pid if ours else None


def start_supervisor(conf: dict[str, Any]) -> tuple[int, bool]:
    """Start a supervisor for ``conf`` unless one runs; returns ``(pid, started_here)``."""
    local_dir = Path(conf.get("storm.local.dir") or "storm-local")
    pid = running_supervisor(local_dir)
    if pid is not None:
        log.info("adopting the running supervisor (pid %s)", pid)
        return pid, False
    sup_dir = private_dir(local_dir / "supervisor")
    conf_file = sup_dir / "launch.yaml"
    write_conf(conf_file, conf)
    logf = open_private_log(sup_dir / "supervisor.log")
    proc = subprocess.Popen([sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(conf_file)],
                            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    logf.close()
    log.info("started a supervisor (pid %s) for slots %s", proc.pid, conf.get("supervisor.slots.ports"))
    return proc.pid, True


def run_nimbus(conf: dict[str, Any], supervise: bool = True,
               on_ready: Callable[[str, int], None] | None = None) -> int:
    """Run the master until SIGINT/SIGTERM; with ``supervise``, also a supervisor process.
    ``on_ready(host, port)`` is called once the master listens."""
    master = Master(conf)
    sup_pid, started = start_supervisor(conf) if supervise else (None, False)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        listening = asyncio.Event()
        server = asyncio.create_task(master.serve(listening))
        stopped = asyncio.create_task(stop.wait())
        ready = asyncio.create_task(listening.wait())
        await asyncio.wait({server, stopped, ready}, return_when=asyncio.FIRST_COMPLETED)
        if ready.done() and not (server.done() or stopped.done()):
            if on_ready is not None:
                on_ready(str(conf.get("nimbus.host") or "127.0.0.1"), master.port)
            await asyncio.wait({server, stopped}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        stopped.cancel()
        if server.done():
            server.result()  # serve ended by itself: raise why (say, the port is taken)
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server  # closes the listening socket
    try:
        asyncio.run(main())
    finally:
        if started and sup_pid is not None:
            _stop_supervisor(sup_pid)
    return 0


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
