"""The bench tests' throwaway process-host and Spark clusters sync as the other tests' clusters do.

A benchmark run's host (`bench.hosts.make_host`) takes extra cluster settings from
``$SQUALL_BENCH_HOST_CONF``. With none, it runs on defaults.yaml's intervals: a supervisor syncs
every second, the master's monitor every 10 s, a worker beats every second, so each submit, kill
and "workers gone" of a tiny run waited up to a second or more. These tests check a run's
record (every tuple counted, the workers stopped), never its timings, so they run on the
intervals of tests/process's clusters (`FAST_SYNC`) and of the acceptance hosts' heartbeats. A
test that sets the variable itself (test_workloads' ``--conf`` test) replaces this.
"""

from __future__ import annotations

import json

import pytest

from bench.hosts import HOST_CONF_ENV
from tests.acceptance.hosts import HEARTBEAT_SECS
from tests.process.conftest import FAST_SYNC

TEST_HOST_CONF = {**FAST_SYNC, "worker.heartbeat.frequency.secs": HEARTBEAT_SECS}
"""The cluster settings every bench test's throwaway host gets."""


@pytest.fixture(autouse=True)
def fast_bench_hosts(monkeypatch):
    """``$SQUALL_BENCH_HOST_CONF`` = `TEST_HOST_CONF` for the test."""
    monkeypatch.setenv(HOST_CONF_ENV, json.dumps(TEST_HOST_CONF))
