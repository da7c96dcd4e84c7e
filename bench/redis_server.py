"""A real ``redis-server`` on loopback, on a free port, in a given directory, stopped by its PID:
what the connector tests (tests/external/conftest.py) and W5 (`bench.w5_resilience`) run
against. Install it with ``scripts/install-system-deps.sh``."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path


def redis_server_binary() -> str | None:
    """The path of ``redis-server``, or None if it is not installed."""
    return shutil.which("redis-server")


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process; `stop` and `start` again on the same port and directory let a
    test take the server down and bring it back."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.dir = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Starts the server and waits until it answers PING."""
        import redis
        # Persistence through an RDB file at shutdown, so a stop/start keeps the data (a real
        # restart, not a wipe); no background saves or AOF.
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "no", "--dbfilename", "dump.rdb", "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if client.ping():
                    client.close()
                    return
            except (redis.ConnectionError, redis.TimeoutError):  # not up yet, or slow to answer on a loaded machine
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} did not answer PING")
            time.sleep(0.05)

    def stop(self) -> None:
        """Saves to disk and stops the server (SHUTDOWN SAVE), then waits for its PID."""
        if self.proc is None or self.proc.poll() is not None:
            return
        import redis
        try:
            redis.Redis.from_url(self.url, socket_timeout=2).execute_command("SHUTDOWN", "SAVE")
        except redis.AuthenticationError:
            # a test set a password (CONFIG SET requirepass): SIGTERM stops it without a save,
            # where waiting for a SHUTDOWN it refused took the 10 s below
            self.proc.terminate()
        except redis.RedisError:
            pass  # the connection drops as the server exits; the wait below tells the truth
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def client(self):
        """A client with string replies."""
        import redis
        return redis.Redis.from_url(self.url, decode_responses=True)
