"""The Spark host when Spark retries a worker's task on its own (``local[N,F]`` here; on a
cluster ``spark.task.maxFailures`` > 1, or an executor lost for a reason Spark does not count
against the task): the retried copy ended at once, lost, and the master starts a new launch.
Before, the copy ran under the dead one's launch id; its peers, who remember that launch's
message numbers, dropped everything it sent, from 0 again, as replays: acks stopped, with no
error, for about as long as the dead copy had run."""

from __future__ import annotations

import os
import signal

import pytest

from ..conftest import wait_until
from ..process.recovery_topology import RECOVERY_CONF, acked, recovery_topology, stop_and_wait
from ..process.semantics_topology import topology_conf
from .conftest import Running, ended, spark_cluster_of, spark_task_process


@pytest.fixture(scope="module")
def retrying_cluster(tmp_path_factory):
    yield from spark_cluster_of("local[2,4]", tmp_path_factory)  # Spark retries a failed task up to 4 times


def test_a_worker_task_spark_retries_itself_is_started_again_under_a_new_launch(retrying_cluster, tmp_path):
    # endless, until the test stops it: the killed worker had sent many messages before it died
    with Running(retrying_cluster, "retried", topology_conf(tmp_path, **RECOVERY_CONF), recovery_topology()) as c:
        assert wait_until(lambda: len(acked(tmp_path)) > 2000, 90), "the topology did not start processing"
        # the Spark task's Python worker, not the squall worker it runs (whose death the task
        # reports itself): the task fails, and Spark runs it again
        info = c.get_topology_info("retried")
        ports = {st["worker"] for st in info["components"]["source"]["task_stats"].values()}
        victim = next(w for w in info["workers"] if int(w["slot"].rsplit(":", 1)[1]) not in ports)
        task = spark_task_process(victim["pid"])
        os.kill(task, signal.SIGKILL)
        assert wait_until(lambda: ended(victim["pid"]), 10), \
            "the squall worker outlived its Spark task's Python worker"

        def relaunched():
            w = {w["slot"]: w for w in c.get_topology_info("retried")["workers"]}[victim["slot"]]
            return w["alive"] and w["launch_id"] > victim["launch_id"] and w["pid"] != victim["pid"]
        assert wait_until(relaunched, 60), "the killed worker was not started under a new launch"
        stop_and_wait(tmp_path, resume=2000)
        dropped = [w["transport"]["dropped"]["replayed"] for w in c.get_topology_info("retried")["workers"]
                   if w.get("transport")]
        assert dropped == [0] * len(dropped), dropped
