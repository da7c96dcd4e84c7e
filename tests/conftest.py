"""Shared test helpers: polling with a deadline instead of fixed sleeps, finding the processes a
test's cluster started, and a local Spark session for tests that read squall's output."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def wait_until(pred: Callable[[], object], timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll ``pred`` until it is true or ``timeout`` seconds pass; return its last truth value.

    Use it as ``assert wait_until(lambda: tracker.is_acked(1))`` for things that must happen,
    and as ``assert not wait_until(lambda: tracker.is_failed(1), 1.0)`` for things that must
    not happen within a window.
    """
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline:
            return bool(pred())
        time.sleep(interval)


def processes_mentioning(marker: str) -> dict[int, str]:
    """pid -> command line of this machine's processes (other than this one) whose command line
    contains ``marker``, such as a test's own ``storm.local.dir``."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd:
            out[int(d.name)] = cmd
    return out


@pytest.fixture(scope="module")
def spark():
    """A local Spark session (one core) for tests that read what squall wrote as a Spark job
    would; stopped after the module. Skipped without pyspark."""
    pyspark = pytest.importorskip("pyspark.sql")
    session = (pyspark.SparkSession.builder.master("local[1]").appName("squall-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
               .getOrCreate())
    yield session
    session.stop()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    """A real ZooKeeper server (`tests.zookeeper_server`) for a whole module, on a free loopback
    port; stopped after it. Skipped, saying why, where it cannot run."""
    from .zookeeper_server import ZooKeeperServer, missing
    why = missing()
    if why:
        pytest.skip(why)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()
