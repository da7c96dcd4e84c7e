"""A core topology at-least-once on a real Spark standalone cluster (a master and two worker JVMs
started with pyspark's ``spark-class``, tests/spark/standalone.py), this test process its
client-mode driver with two executors of one core each, one on each Spark worker: a reliable
spout, fields grouping into a counting bolt, a sink that records every id it gets
(tests/spark/counting_topology.py). Under a SIGKILL of one squall worker's Python process, and
of a whole Spark worker (its JVM, its executor and the squall worker in it), every id the spout
emitted reaches the sink (duplicates counted and printed: at-least-once allows them), and what
the master reports agrees with what happened: the lost worker's slot counts a restart in
``get_topology_info`` and in the REST API's worker rows, and the spout counts the tuples it
failed for it. test_spark_local_cluster.py kills an executor JVM on ``local-cluster``, whose
Spark workers live in the driver's JVM and so cannot be killed alone; test_spark_standalone_ha.py
kills a Spark worker under a supervised driver and counts only acks."""

import json
import os
import time
import urllib.request

import pytest

from ..conftest import wait_until
from ..process.conftest import FAST_SYNC
from ..process.recovery_topology import acked, kill_a_worker_without, stop_and_wait
from ..process.semantics_topology import topology_conf
from .conftest import Running
from .counting_topology import CONF, counting_topology, sink_lines
from .standalone import LOOPBACK, shared

pytest.importorskip("uvicorn")  # the REST API
pytestmark = pytest.mark.timeout(240)  # the module's cluster and session start in the first test


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    # the application takes one core of each worker (spark.cores.max 2), and the remaining
    # worker has a core for the executor that replaces a lost one
    return shared(tmp_path_factory, workers=2)


@pytest.fixture(scope="module")
def spark_cluster(standalone, tmp_path_factory):
    from squall.cluster.spark import SparkCluster, spark_session
    saved = os.environ.get("SPARK_LOCAL_IP")
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # the driver's JVM, which starts here, binds loopback only
    session = spark_session(standalone.url, settings={
        "spark.cores.max": "2", "spark.executor.cores": "1", "spark.executor.instances": "2",
        "spark.executor.memory": "512m", "spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false", "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.executorEnv.PYTHONPATH": standalone.env["PYTHONPATH"]})
    conf = {"storm.local.dir": str(tmp_path_factory.mktemp("spark") / "storm-local"), "nimbus.thrift.port": 0,
            "nimbus.task.timeout.secs": 5, "squall.spark.stop.grace.secs": 3, **FAST_SYNC}
    try:
        cluster = SparkCluster(spark=session, conf=conf, ui_port=0)
        try:
            yield cluster
        finally:
            cluster.shutdown()
    finally:
        session.stop()
        if saved is None:
            os.environ.pop("SPARK_LOCAL_IP", None)
        else:
            os.environ["SPARK_LOCAL_IP"] = saved


def _rest_workers(cluster, storm_id):
    """Port -> restarts, from the REST API's topology page (``GET /api/v1/topology/:id``)."""
    url = f"http://{LOOPBACK}:{cluster.ui_port}/api/v1/topology/{storm_id}"
    with urllib.request.urlopen(url, timeout=10) as r:
        return {w["port"]: w["restarts"] for w in json.load(r)["workers"]}


def _running(c, name, out):
    """Wait until ids flow and the master has the spout's figures from a heartbeat sent after
    every executor opened; return the topology's info."""
    assert wait_until(lambda: len(acked(out)) > 300, 120), "the topology did not start processing"
    assert wait_until(lambda: c.get_topology_info(name)["components"]["source"]["acked"] > 300, 30)
    return c.get_topology_info(name)


def _after_the_kill(c, name, out, victim, killed):
    """Wait until the victim's slot runs a new launch and ids flow again; check what the master
    and the REST API report; stop the spout and count what the sink got. Returns a line to print."""
    def restarted():
        w = {w["slot"]: w for w in c.get_topology_info(name)["workers"]}[victim["slot"]]
        return w["alive"] and w["launch_id"] > victim["launch_id"] and w["pid"] not in (None, victim["pid"])
    assert wait_until(restarted, 90), f"the lost worker was not restarted: {c.get_topology_info(name)['workers']}"
    back = time.monotonic() - killed
    n = stop_and_wait(out, resume=200, timeout=90)
    info = c.get_topology_info(name)
    workers = {w["slot"]: w for w in info["workers"]}
    assert [workers[s]["restarts"] for s in sorted(workers)] == \
        [1 if s == victim["slot"] else 0 for s in sorted(workers)], workers
    assert _rest_workers(c, info["id"]) == {int(s.rsplit(":", 1)[1]): workers[s]["restarts"] for s in workers}
    # the spout's worker lived: the tuples it failed for the lost one are counted
    assert wait_until(lambda: c.get_topology_info(name)["components"]["source"]["failed"] > 0, 10), \
        "the spout reports no failed tuple"
    failed = c.get_topology_info(name)["components"]["source"]["failed"]
    lines = sink_lines(out)
    lost = set(range(n)) - set(lines)
    assert not lost, f"{len(lost)} of {n} ids never reached the sink, e.g. {sorted(lost)[:20]}"
    assert set(lines) <= set(range(n)), "the sink got ids the spout never emitted"
    return (f"{n} ids sent, {len(lines)} received by the sink ({len(lines) - len(set(lines))} twice or more), "
            f"0 lost; spout failed {failed}; the slot restarted {workers[victim['slot']]['restarts']} time; "
            f"its new launch alive {back:.1f} s after the kill")


def test_a_sigkilled_python_worker_loses_no_id_and_shows_as_a_restart_and_failed_tuples(spark_cluster, tmp_path):
    name = "pykill"
    with Running(spark_cluster, name, topology_conf(tmp_path, **CONF), counting_topology()) as c:
        _running(c, name, tmp_path)
        victim = kill_a_worker_without(c, name, "source")
        line = _after_the_kill(c, name, tmp_path, victim, time.monotonic())
    print(f"standalone, Python worker SIGKILLed: {line}")


def test_a_killed_spark_worker_jvm_loses_no_id_and_shows_as_a_restart_and_failed_tuples(
        spark_cluster, standalone, tmp_path):
    name = "nodekill"
    with Running(spark_cluster, name, topology_conf(tmp_path, **CONF), counting_topology()) as c:
        info = _running(c, name, tmp_path)
        spout_ports = {st["worker"] for st in info["components"]["source"]["task_stats"].values()}
        victim = next(w for w in info["workers"] if int(w["slot"].rsplit(":", 1)[1]) not in spout_ports)
        node = standalone.node_of(victim["pid"])
        assert node is not None and node is not standalone.node_of(
            next(w for w in info["workers"] if w is not victim)["pid"]), "both squall workers ran on one Spark worker"
        killed = time.monotonic()
        standalone.kill(node)  # the Worker JVM, its executor and the squall worker in it
        line = _after_the_kill(c, name, tmp_path, victim, killed)
    print(f"standalone, Spark worker JVM SIGKILLed: {line}")
