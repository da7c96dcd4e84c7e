"""The Spark host on ``local-cluster[2,1,1024]``: a real standalone master, two executor JVMs
with one core each, so each worker runs in its own executor process, as on a cluster. The
module's tests share one such Spark application (its start costs 20-60 s): the Trident
exactly-once test runs before the test that SIGKILLs an executor, so it has both."""

import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..process.recovery_topology import RECOVERY_CONF, acked, recovery_topology, stop_and_wait
from ..process.semantics_topology import records, task_counts, topology_conf, total, word_count
from ..process.test_trident_exactly_once import CONF, exact, prepared
from .conftest import Running, cmdline, spark_cluster_of

SENTENCES = [f"w{i % 7} w{i % 11} shared" for i in range(300)]


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    yield from spark_cluster_of("local-cluster[2,1,1024]", tmp_path_factory)


def _executor_of(pid: int) -> int:
    """The executor JVM that ``pid`` (a Python worker) runs under."""
    while pid > 1:
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        if "CoarseGrainedExecutorBackend" in cmdline(pid):
            return pid
    raise AssertionError("no executor JVM above the worker")


def test_word_count_is_exact_with_each_worker_in_its_own_executor(spark_cluster, tmp_path):
    with Running(spark_cluster, "wordcount", topology_conf(tmp_path), word_count(SENTENCES)) as c:
        assert wait_until(lambda: len([r for r in records(tmp_path, "spout") if "ack" in r]) == len(SENTENCES), 90)
        pids = [w["pid"] for w in c.get_topology_info("wordcount")["workers"]]
        assert len({_executor_of(p) for p in pids}) == 2, "both workers ran in one executor"
    assert wait_until(lambda: len(list(tmp_path.glob("counts-*.json"))) == 2, 20)
    assert total(task_counts(tmp_path)) == Counter(w for s in SENTENCES for w in s.split())


def test_the_spark_host_writes_the_secret_nowhere(spark_cluster):
    """Its workers get the secret in their task's closure: no configuration file holds it (the
    process host's launcher writes one, owner-only, because its worker processes read it)."""
    local_dir = Path(spark_cluster.conf["storm.local.dir"])
    secret = spark_cluster.conf["squall.secret"].encode()
    files = [f for f in local_dir.rglob("*") if f.is_file()]
    assert not [f for f in files if secret in f.read_bytes() and f.name != "secret"]
    assert not (local_dir / "supervisor").exists()


def test_trident_counts_are_exact_after_the_python_worker_in_a_commit_is_sigkilled(spark_cluster, redis_server,  # noqa: F811
                                                                                  tmp_path):
    """Exactly once on this host: a transactional spout into a Redis TransactionalMap and an
    opaque spout into a Redis OpaqueMap (a real redis-server), both in one topology, store
    exactly the input's counts, every word compared, when the Spark task's Python worker that
    is in the middle of a commit is SIGKILLed."""
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


def test_a_lost_executor_is_survived_and_a_reliable_topology_loses_nothing(spark_cluster, tmp_path):
    """SIGKILL the executor JVM under one worker: Spark's standalone worker starts a new executor,
    the master restarts the lost worker there, and the spout's tuples that were in the lost
    worker time out and replay until every id is acked."""
    # endless, until the test stops it: tuples are in flight when the executor dies
    with Running(spark_cluster, "recover", topology_conf(tmp_path, **RECOVERY_CONF), recovery_topology()) as c:
        assert wait_until(lambda: len(acked(tmp_path)) > 200, 90), "the topology did not start processing"
        victim = {w["slot"]: w for w in c.get_topology_info("recover")["workers"]}["spark:1"]
        os.kill(_executor_of(victim["pid"]), signal.SIGKILL)

        def restarted():
            w = {w["slot"]: w for w in c.get_topology_info("recover")["workers"]}["spark:1"]
            return w["alive"] and w["launch_id"] > victim["launch_id"] and w["pid"] != victim["pid"]
        assert wait_until(restarted, 90), "the lost worker was not restarted"
        stop_and_wait(tmp_path, resume=200)
