"""Exactly once on a real Spark standalone cluster (issue 36 item 5a): a master and a worker
JVM (pyspark's spark-class, as tests/spark's HA tests start them), the driver ``squall trident
--spark-master spark://...`` SIGKILLed between its state's commit and Spark's, started again:
the stored counts equal the input."""

from __future__ import annotations

import pytest

from ..spark.standalone import StandaloneCluster
from .test_driver_kill import driver_killed_at_the_commit

pytestmark = pytest.mark.timeout(600)  # a master, a worker, two drivers and their executors


def test_a_driver_killed_at_the_commit_on_a_standalone_cluster_counts_every_word_once(tmp_path):
    with StandaloneCluster(tmp_path / "standalone", workers=1, cores=2, memory="1g") as cluster:
        run = tmp_path / "run"
        run.mkdir()
        driver_killed_at_the_commit(run, cluster.url, cluster.env)
