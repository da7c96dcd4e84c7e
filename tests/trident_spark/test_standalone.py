"""Exactly once on a real Spark standalone cluster (issue 36 item 5a): a master and a worker
JVM (pyspark's spark-class, as tests/spark's HA tests start them), the driver ``squall trident
--spark-master spark://...`` SIGKILLed between its state's commit and Spark's, started again as
a second ``squall trident`` driver: the stored counts equal the input, and SIGTERM stops that
driver with exit 0 (item 1)."""

from __future__ import annotations

import os
import signal

import pytest

from ..conftest import wait_until
from ..spark.standalone import StandaloneCluster
from .test_driver_kill import assert_counted_once, driver, driver_killed_at_the_commit

pytestmark = pytest.mark.timeout(600)  # a master, a worker, two drivers and their executors


def test_a_driver_killed_at_the_commit_on_a_standalone_cluster_counts_every_word_once(tmp_path):
    with StandaloneCluster(tmp_path / "standalone", workers=1, cores=2, memory="1g") as cluster:
        root = tmp_path / "run"
        root.mkdir()
        run = driver_killed_at_the_commit(root, cluster.url, cluster.env)
        second = driver(run, cluster.url, cluster.env)
        try:
            # Spark re-runs batch 1 (txid 2) and commits it: the state must not count it again
            assert wait_until(lambda: (run.checkpoint / "commits" / "1").exists() or second.poll() is not None,
                              300, 0.1), run.tail()
            assert second.poll() is None, run.tail()
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=120) == 0, run.tail()
        finally:
            if second.poll() is None:
                os.killpg(second.pid, signal.SIGKILL)
                second.wait()
        assert_counted_once(run)
