"""A real ZooKeeper server for tests: Debian's jars (scripts/install-system-deps.sh installs the
``zookeeper`` package), started with ``java`` on loopback, on a free port, in a temporary
directory, and stopped by its PID. Use the `zookeeper` fixture (tests/conftest.py), or
`ZooKeeperServer` directly; tests skip, saying why, where Java or the jars are missing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.ports import free_port

JARS = Path("/usr/share/java")
# ZooKeeper 3.8's server and what it loads; slf4j-nop keeps its log quiet
_CLASSPATH = ("zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-nop", "netty-handler", "netty-transport",
              "netty-common", "netty-buffer", "netty-codec", "netty-resolver", "netty-transport-native-epoll",
              "netty-transport-native-unix-common", "metrics-core", "commons-cli")


def missing() -> str | None:
    """Why a ZooKeeper server cannot be started here (None: it can)."""
    if shutil.which("java") is None:
        return "no java (scripts/install-system-deps.sh installs zookeeper, which brings it)"
    absent = [j for j in _CLASSPATH if not (JARS / f"{j}.jar").exists()]
    if absent:
        return f"ZooKeeper's jars are missing ({', '.join(absent)}): run scripts/install-system-deps.sh"
    return None


class ZooKeeperServer:
    """One standalone server in ``directory`` on ``host`` (default 127.0.0.1):`port`; `start`, then
    `stop`. Sessions may be as short as 1 s (``tickTime`` 500 ms), so that tests of session expiry
    are quick. ``host``: another address of this machine, for machines in network namespaces of
    their own (`tests.process.nodes.Network`), which cannot reach the root namespace's loopback."""

    def __init__(self, directory: Path, host: str = "127.0.0.1") -> None:
        self.dir = Path(directory)
        self.host = host
        self.port = free_port()  # below the ephemeral range: the JVM binds it a second or more later
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        """``host:port``, as storm.zookeeper.servers takes it."""
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Start the server and wait until it answers ``ruok``."""
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.dir / "zoo.cfg"
        cfg.write_text(f"tickTime=500\ndataDir={self.dir / 'data'}\nclientPort={self.port}\n"
                       f"clientPortAddress={self.host}\nadmin.enableServer=false\nminSessionTimeout=1000\n"
                       f"maxSessionTimeout=60000\n4lw.commands.whitelist=ruok\n")
        classpath = ":".join(str(JARS / f"{j}.jar") for j in _CLASSPATH)
        log = open(self.dir / "zookeeper.log", "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", classpath,
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while not self._ok():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ZooKeeper did not start (see {self.dir / 'zookeeper.log'})")
            time.sleep(0.1)
        return self

    def _ok(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), 0.5) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM the server (SIGKILL if it lingers), by its PID."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
