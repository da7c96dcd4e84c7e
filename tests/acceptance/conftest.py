"""Fixtures for the acceptance tests: a LocalCluster per test, and a check that it leaks no
executor threads once shut down."""

from __future__ import annotations

import threading

import pytest

from squall import LocalCluster

from ..conftest import wait_until


def _squall_threads(before: set[threading.Thread]) -> list[str]:
    return [t.name for t in threading.enumerate()
            if t not in before and t.is_alive() and t.name.startswith("squall")]


def _make_cluster(host: str):
    if host == "local":
        return LocalCluster()
    raise ValueError(f"unknown host {host!r}")


@pytest.fixture(params=["local"])
def cluster(request):
    """A fresh cluster of each host kind (only ``local`` so far: the process and Spark hosts
    join this list); after the test it is shut down and must leave no squall thread."""
    before = set(threading.enumerate())
    c = _make_cluster(request.param)
    try:
        yield c
    finally:
        c.shutdown()
    assert wait_until(lambda: not _squall_threads(before), 10), \
        f"threads leaked by the test's topologies: {_squall_threads(before)}"


def wait_idle(cluster: LocalCluster, name: str, timeout: float = 10.0) -> bool:
    """Wait until ``name`` has nothing in flight: every inbox empty and every loop asleep,
    seen three times in a row."""
    streak = [0]

    def idle() -> bool:
        streak[0] = streak[0] + 1 if cluster.is_idle(name) else 0
        return streak[0] >= 3
    return wait_until(idle, timeout, 0.005)


def component_stat(cluster: LocalCluster, name: str, component: str, key: str) -> int:
    """One counter of a component from `get_topology_info` (e.g. ``emitted``, ``acked``)."""
    return cluster.get_topology_info(name)["components"][component][key]
