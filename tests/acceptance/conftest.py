"""Fixtures for the acceptance tests: a ``cluster`` per test, and a check that a LocalCluster
leaks no executor threads once shut down.

Every test gets a LocalCluster. A test marked ``@pytest.mark.hosts`` runs again, the same code,
on the process host and on Spark (``@pytest.mark.hosts("process")``: on the process host only):
the behaviours that can differ once workers are separate processes (groupings across workers,
acking and replay, timeouts, kill and rebalance, serialization), so the hosts cannot drift
apart. Those hosts are shared by the package's tests (one master with its supervisor, one
SparkSession on ``local[2]``); each test's topologies are killed after it, and the test helpers
it makes keep their state in files of the test's own directory (`shared_state_dir`).
"""

from __future__ import annotations

import threading

import pytest

from squall import LocalCluster
from squall.testing import shared_state_dir

from ..conftest import wait_until
from .hosts import HEARTBEAT_SECS, RemoteCluster

REMOTE_HOSTS = ("process", "spark")


def _squall_threads(before: set[threading.Thread]) -> list[str]:
    return [t.name for t in threading.enumerate()
            if t not in before and t.is_alive() and t.name.startswith("squall")]


def pytest_configure(config):
    config.addinivalue_line("markers", "hosts(*names): run the test on the process host and Spark "
                                       "too (or only on the hosts named), besides LocalCluster")


def pytest_generate_tests(metafunc):
    if "cluster" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("hosts")
    hosts = ["local"]
    if marker is not None:
        unknown = set(marker.args) - set(REMOTE_HOSTS)
        assert not unknown, f"unknown hosts {sorted(unknown)} in the hosts marker of {metafunc.definition.name}"
        hosts += list(marker.args or REMOTE_HOSTS)
    metafunc.parametrize("cluster", hosts, indirect=True)


@pytest.fixture
def cluster(request, tmp_path):
    """A cluster of the host the test is parametrised with. ``local``: a fresh LocalCluster,
    shut down after the test, which must leave no squall thread. ``process``, ``spark``: the
    package's shared host behind LocalCluster's verbs; the test's topologies are killed after it."""
    if request.param != "local":
        remote = request.getfixturevalue(f"{request.param}_host")
        with shared_state_dir(tmp_path / "shared"):
            try:
                yield remote
            finally:
                remote.clear()
        return
    before = set(threading.enumerate())
    c = LocalCluster()
    try:
        yield c
    finally:
        c.shutdown()
    assert wait_until(lambda: not _squall_threads(before), 10), \
        f"threads leaked by the test's topologies: {_squall_threads(before)}"


@pytest.fixture(scope="package")
def process_host(tmp_path_factory):
    """One process-host cluster (a master, its supervisor, 2 worker slots) for the package."""
    from ..process.conftest import Cluster
    c = Cluster(tmp_path_factory.mktemp("process-host"), **{"worker.heartbeat.frequency.secs": HEARTBEAT_SECS})
    client = c.client()
    try:
        yield RemoteCluster(client, "process", lambda: not c.workers())
    finally:
        client.close()
        c.stop()


@pytest.fixture(scope="package")
def spark_host(tmp_path_factory):
    """One SparkCluster on ``local[2]`` (2 task slots) for the package; stopped before
    tests/spark starts sessions of its own."""
    pytest.importorskip("pyspark")
    from ..spark.conftest import spark_cluster_of
    clusters = spark_cluster_of("local[2]", tmp_path_factory, **{"worker.heartbeat.frequency.secs": HEARTBEAT_SECS})
    spark = next(clusters)
    tracker = spark.spark.sparkContext.statusTracker()
    try:
        yield RemoteCluster(spark, "spark", lambda: not tracker.getActiveJobsIds())
    finally:
        clusters.close()


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
