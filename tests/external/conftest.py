"""A real ``redis-server`` for the connector tests: started on loopback on a free port in a tmp
dir (no persistence), stopped by its PID. Install it with ``scripts/install-system-deps.sh``."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.redis_server import RedisServer, redis_server_binary


@contextlib.contextmanager
def running_redis(directory: Path) -> Iterator[RedisServer]:
    """A redis-server in ``directory`` for the ``with`` block, stopped by its PID after it (and
    let go on first if a test that failed left it SIGSTOPped); the test is skipped if
    redis-server or the redis library is not installed."""
    binary = redis_server_binary()
    if binary is None:
        pytest.skip("redis-server is not installed: run scripts/install-system-deps.sh")
    pytest.importorskip("redis", reason="the redis library is not installed: pip install -e '.[redis]'")
    server = RedisServer(binary, directory)
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()


@pytest.fixture
def redis_server(tmp_path):
    """A fresh redis-server for one test (`running_redis`)."""
    with running_redis(tmp_path) as server:
        yield server
