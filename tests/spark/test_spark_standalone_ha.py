"""squall highly available on a real Spark standalone cluster (a master and two workers started
with pyspark's ``spark-class``, tests/spark/standalone.py): a reliable topology submitted in
cluster deploy mode with ``--supervise`` (``python -m squall.cli.spark_standalone``), so its
driver, and squall's master in it, runs on a Spark worker. It survives the loss of a whole
Spark worker node and of its driver, and every id it emits is acked."""

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from squall import SquallError
from squall._config import cluster_conf
from squall.cluster.client import MasterClient

from ..conftest import wait_until
from ..ports import free_port
from ..process.conftest import FAST_SYNC
from ..process.recovery_topology import acked, stop_and_wait
from .standalone import shared

REPO = Path(__file__).resolve().parents[2]
NAME = "reliable"


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    return shared(tmp_path_factory, workers=2)  # 3 cores a worker (SHARED_CORES)


class Supervised:
    """tests/spark/ha_topology.py submitted as a supervised driver of ``standalone``; its
    ``storm.local.dir`` (the master's durable state) is a directory every driver sees, as a
    shared filesystem would be. Killed at the end, and its driver gone, even if the test fails."""

    def __init__(self, standalone, tmp_path):
        self.standalone = standalone
        self.out = tmp_path / "out"
        self.out.mkdir()
        local_dir = tmp_path / "storm-local"
        settings = {"storm.local.dir": str(local_dir), "nimbus.thrift.port": free_port(), "nimbus.task.timeout.secs": 5,
                    "squall.spark.stop.grace.secs": 3, **FAST_SYNC}
        config = tmp_path / "squall.yaml"
        config.write_text(yaml.safe_dump(settings))
        self.conf = cluster_conf(settings)
        self.secret = local_dir / "secret"
        self._client = None
        argv = [sys.executable, "-m", "squall.cli.spark_standalone", "--master", standalone.url, "--supervise",
                "--driver-memory", "512m", "--conf", "spark.cores.max=2", "--conf", "spark.executor.instances=2",
                "--executor-cores", "1", "--executor-memory", "512m",
                "--", "--config", str(config), "--name", NAME, "-c", f"test.out.dir={self.out}",
                str(REPO / "tests" / "spark" / "ha_topology.py")]
        done = subprocess.run(argv, env={**standalone.env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, check=False)
        found = re.search(r"Driver successfully submitted as (driver-\S+)", done.stdout + done.stderr)
        assert done.returncode == 0 and found, done.stdout + done.stderr
        self.driver_id = found.group(1)

    def info(self):
        """The master's ``info`` of the topology, or None while no master answers."""
        if not self.secret.exists():
            return None  # no master yet: a client would make a secret of its own
        try:
            if self._client is None:
                self._client = MasterClient(self.conf, timeout=5)
            return self._client.get_topology_info(NAME)
        except (SquallError, OSError):  # no master now: it is starting, or dead
            self._drop_client()
            return None

    def _drop_client(self):
        if self._client is not None:
            self._client.close()
            self._client = None

    def workers(self):
        """The topology's workers, once both are alive."""
        info = self.info()
        workers = info["workers"] if info else []
        return workers if len(workers) == 2 and all(w["alive"] and w.get("pid") for w in workers) else None

    def running(self, at_least):
        """Wait until both workers are alive and ``at_least`` ids are acked; return the workers."""
        where = f"{self.standalone.driver_log()}\n{self.standalone.log('master')}"
        assert wait_until(self.workers, 150, 0.5), f"the topology did not start\n{where}"
        assert wait_until(lambda: len(acked(self.out)) >= at_least, 90, 0.5), f"no ids acked\n{where}"
        return self.workers()

    def all_acked(self):
        """Stop the spout, and wait until every id it emitted is acked; fail naming some that are not."""
        stop_and_wait(self.out, timeout=120, why=lambda: f"{self.info()}\n{self.standalone.driver_log()}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # the master's kill ends the driver with status 0, which Spark does not restart
        if self.info() is not None:
            with contextlib.suppress(SquallError, OSError):  # then Spark's kill, below
                self._client.kill_topology(NAME, wait_secs=0)
        self._drop_client()
        if not wait_until(lambda: self.standalone.driver() is None, 60, 0.5):
            subprocess.run([str(self.standalone.home / "bin" / "spark-class"), "org.apache.spark.deploy.Client",
                            "kill", self.standalone.url, self.driver_id], env=self.standalone.env,
                           capture_output=True, timeout=60, check=False)
        # the next test needs the cores back
        wait_until(lambda: not (self.standalone.state() or {}).get("activeapps"), 60, 0.5)


@pytest.mark.timeout(480)
def test_a_supervised_topology_survives_a_dead_spark_worker_node_and_a_killed_driver_losing_nothing(
        standalone, tmp_path):
    """First SIGKILL the Spark worker node without the driver (its Worker JVM, its executor and
    the squall worker in it): the master restarts that squall worker, and Spark runs it in an
    executor on the remaining node. Then SIGKILL the driver's JVM: squall's master, the Python
    process under it, ends too, Spark's standalone worker starts the driver again
    (``--supervise``), and the new master resumes the topology from ``storm.local.dir``, under
    the same id, rather than submitting it again. The reliable topology acks every id. (One test, not two: a driver's
    start costs a minute on a loaded 2-core machine.)"""
    with Supervised(standalone, tmp_path) as topology:
        workers = topology.running(at_least=200)
        storm_id = topology.info()["id"]
        driver_node = standalone.worker_of(standalone.driver()["worker"])
        victim = next(w for w in standalone.workers if w is not driver_node)
        assert [w for w in workers if standalone.node_of(w["pid"]) is victim], \
            "no squall worker ran on the node without the driver"
        standalone.kill(victim)  # the spout runs until all_acked stops it: tuples are in flight

        def all_on_the_remaining_node():
            now = topology.workers()
            return now is not None and all(standalone.node_of(w["pid"]) is driver_node for w in now)
        assert wait_until(all_on_the_remaining_node, 120, 0.5), \
            f"squall's workers did not move to the remaining node: {topology.info()}"
        topology.running(at_least=len(acked(topology.out)) + 100)  # and they process again

        old = standalone.driver_processes()
        assert len(old) >= 2, "no driver JVM with its Python process under the standalone worker"
        os.kill(old[0], signal.SIGKILL)  # the driver's JVM: its Python side (squall's master) must follow
        assert wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in old), 30, 0.2), \
            "the driver's Python process outlived its JVM (it would hold the master's port)"

        def restarted():
            now = standalone.driver_processes()
            driver = standalone.driver()
            return (driver is not None and driver["id"] == topology.driver_id and driver["state"] == "RUNNING"
                    and now and not set(now) & set(old))
        assert wait_until(restarted, 90, 0.5), f"Spark did not restart the driver\n{standalone.driver_log()}"
        topology.running(at_least=len(acked(topology.out)) + 100)  # and it processes again
        assert topology.info()["id"] == storm_id, "the restarted driver submitted the topology again"
        assert "Resumed topology: reliable" in standalone.driver_log()
        topology.all_acked()
