"""Exactly once on the Spark host, on ``local-cluster[2,1,1024]`` (a real standalone master and
two executor JVMs, each squall worker a long-running Spark task in its own executor): a
transactional spout into a Redis TransactionalMap and an opaque spout into a Redis OpaqueMap (a
real redis-server), both in one topology, store exactly the input's counts, every word compared,
when the Spark task's Python worker that is in the middle of a commit is SIGKILLed."""

from __future__ import annotations

import os
import signal

import pytest

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..process.test_trident_exactly_once import CONF, exact, prepared
from .conftest import Running, spark_cluster_of

redis = pytest.importorskip("redis")


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    yield from spark_cluster_of("local-cluster[2,1,1024]", tmp_path_factory)


def test_counts_are_exact_after_the_python_worker_in_a_commit_is_sigkilled(spark_cluster, redis_server,  # noqa: F811
                                                                           tmp_path):
    name = "wc-spark-kill"
    p = prepared(redis_server, tmp_path)
    with Running(spark_cluster, name, CONF, p.run.topology) as c:
        pid = p.held_pid()
        victim = next(w for w in c.get_topology_info(name)["workers"] if w["pid"] == pid)
        os.kill(pid, signal.SIGKILL)  # a Spark task's Python worker, in its commit of txid 10
        at_kill = p.totals()
        seen = exact(p, f"Python worker SIGKILLed at {at_kill}", host="Spark host")

        def restarted():
            w = {w["slot"]: w for w in c.get_topology_info(name)["workers"]}[victim["slot"]]
            return w["alive"] and w["pid"] != pid
        assert wait_until(restarted, 30), "the killed worker was not restarted"
    assert min(at_kill.values()) < sum(p.expected.values())
    assert max(r.replayed_batches for r in seen.values()) >= 1, seen
