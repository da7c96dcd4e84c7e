"""A real ``redis-server`` for the connector tests: started on loopback on a free port in a tmp
dir (no persistence), stopped by its PID. Install it with ``scripts/install-system-deps.sh``."""

from __future__ import annotations

import pytest

from bench.redis_server import RedisServer, redis_server_binary


@pytest.fixture
def redis_server(tmp_path):
    """A fresh redis-server for one test (skipped if redis-server or the redis library is not
    installed)."""
    binary = redis_server_binary()
    if binary is None:
        pytest.skip("redis-server is not installed: run scripts/install-system-deps.sh")
    pytest.importorskip("redis", reason="the redis library is not installed: pip install -e '.[redis]'")
    server = RedisServer(binary, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
