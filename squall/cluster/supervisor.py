"""The process host's supervisor: starts, watches and stops the worker processes of its slots.

Every second it syncs with the master (`Master.op_supervisor_sync`): it registers its slots
(``supervisor.slots.ports``), reports workers that exited and the workers it runs, and learns
which topology and launch each slot must run. A slot whose process does not match is killed and (re)started; a worker that
exited is restarted at the next sync. If the master is unreachable the workers are left alone:
they keep processing, and the supervisor retries.

A worker's stdout and stderr come through a pipe into ``worker-<port>.log``, rotated by size
(`squall.cluster.logs`); when a worker exits, the last lines of its output go with the exit to
the master, which shows them as the error of a worker that died before it could report one.

Workers die with their supervisor: each is started with ``PR_SET_PDEATHSIG`` = SIGKILL, so even
a SIGKILLed supervisor leaves no orphan. The master's death, on the other hand, does not touch
them (``python -m squall.cluster.supervisor``, or started by ``squall nimbus --host process``).
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from .._config import cluster_conf
from .._errors import SquallError
from .._private import private_dir, write_private
from ..worker.process import EXIT_CANNOT_START
from ..worker.rpc import Client, RpcError, load_or_create_secret, rpc_settings
from .client import master_address
from .logs import OutputPump, RotatingLog, log_limits, log_own_output

log = logging.getLogger("squall.supervisor")

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


class Supervisor:
    """Keeps this machine's slots running what the master assigned; see the module docstring."""

    def __init__(self, conf: dict[str, Any], host: str = "127.0.0.1") -> None:
        self.conf = conf
        self.host = host
        self.ports = [int(p) for p in conf.get("supervisor.slots.ports") or []]
        self.id = f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.secret = load_or_create_secret(conf)
        self.rpc = rpc_settings(conf)
        self.dir = private_dir(Path(conf.get("storm.local.dir") or "storm-local") / "supervisor")
        self.conf_file = self.dir / "conf.yaml"
        write_conf(self.conf_file, conf)
        self.procs: dict[int, dict[str, Any]] = {}
        self.exits: list[dict[str, Any]] = []
        self.logs: dict[int, RotatingLog] = {}  # port -> its workers' log, kept across launches
        self._client: Client | None = None
        self._stopping = False

    def _master(self) -> tuple[str, int]:
        return master_address(self.conf)  # nimbus.seeds, else nimbus.host, as for a client

    def sync(self) -> None:
        """One round: reap exits, ask the master, start and stop workers to match."""
        self._reap()
        try:
            if self._client is None:
                self._client = Client(*self._master(), self.secret, timeout=5, settings=self.rpc)
            # ``running``: a worker the master believes in but that is not here died unseen
            # (while the master was down), and must get a new launch id
            running = [{"port": port, "storm_id": p["storm_id"], "launch_id": p["launch_id"]}
                       for port, p in self.procs.items()]
            reply = self._client.call("supervisor_sync", supervisor_id=self.id, host=self.host,
                                      ports=self.ports, exits=self.exits, running=running)
            self.exits = []
        except RpcError as e:
            if self._client is not None:
                self._client.close()
            self._client = None
            log.debug("master unreachable (%s); workers left running", e)
            return
        desired = {int(p): d for p, d in reply["slots"].items()}
        for port, proc in list(self.procs.items()):
            want = desired.get(port)
            if want is None or (want["storm_id"], want["launch_id"]) != (proc["storm_id"], proc["launch_id"]):
                self._kill(port)
        for port, want in desired.items():
            if port not in self.procs:
                self._launch(port, want)

    def _launch(self, port: int, want: dict[str, Any]) -> None:
        mhost, mport = self._master()
        cmd = [sys.executable, "-m", "squall.worker", "--master", f"{mhost}:{mport}",
               "--storm-id", want["storm_id"], "--slot", f"{self.host}:{port}",
               "--launch-id", str(want["launch_id"]), "--conf", str(self.conf_file)]
        if port not in self.logs:
            self.logs[port] = RotatingLog(self.dir / f"worker-{port}.log", *log_limits(self.conf))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.procs[port] = {"proc": proc, "storm_id": want["storm_id"], "launch_id": want["launch_id"],
                            "started": time.time(), "output": OutputPump(proc.stdout, self.logs[port])}
        log.info("started worker %s:%s for %s (launch %s), pid %s", self.host, port, want["storm_id"],
                 want["launch_id"], proc.pid)

    def _kill(self, port: int) -> None:
        p = self.procs.pop(port)
        proc = p["proc"]
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _reap(self) -> None:
        for port, p in list(self.procs.items()):
            rc = p["proc"].poll()
            if rc is None:
                continue
            del self.procs[port]
            log.warning("worker %s:%s of %s exited with status %s", self.host, port, p["storm_id"], rc)
            p["output"].join(1.0)  # what it wrote last, often why it died
            self.exits.append({"storm_id": p["storm_id"], "slot": f"{self.host}:{port}", "launch_id": p["launch_id"],
                               "status": rc, "started": rc != EXIT_CANNOT_START, "output": p["output"].tail()})

    def run(self) -> None:
        """Sync every second until SIGTERM/SIGINT; then stop every worker."""
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        write_private(self.dir / "pid", str(os.getpid()))
        try:
            while not self._stopping:
                self.sync()
                time.sleep(float(self.conf.get("supervisor.monitor.frequency.secs") or 1))
        except KeyboardInterrupt:
            pass
        finally:
            for port in list(self.procs):
                self._kill(port)

    def stop(self) -> None:
        """Ask `run` to end."""
        self._stopping = True


def main(argv: list[str] | None = None) -> int:
    """``python -m squall.cluster.supervisor [--conf FILE]``."""
    p = argparse.ArgumentParser(prog="squall-supervisor")
    p.add_argument("--conf", default=None, help="the cluster's squall.yaml")
    p.add_argument("--host", default="127.0.0.1", help="address workers bind and peers reach")
    p.add_argument("--log", default=None, help="write stdout and stderr to this file, rotated by size")
    args = p.parse_args(argv)
    try:
        conf = cluster_conf(None, args.conf)
    except SquallError as e:
        print(f"squall supervisor: error: {e}", file=sys.stderr)
        return 1
    finish = log_own_output(Path(args.log), conf) if args.log else None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s supervisor %(levelname)s %(message)s")
    try:
        Supervisor(conf, args.host).run()
    except Exception:
        log.exception("supervisor failed")
        return 1
    finally:
        if finish is not None:
            finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
