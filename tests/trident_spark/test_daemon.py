"""squall.trident.spark.daemon (issue 36 item 6): Spark's Python processes import the installed,
compiled pyspark instead of compiling pyspark.zip's source in each process, and the workers it
forks start with squall, pyarrow and pandas imported and frozen out of the garbage collector."""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("pyspark.sql.datasource")

from squall.trident.spark.daemon import installed_first

from ..conftest import wait_until


def test_only_the_installed_pysparks_own_zips_leave_the_path():
    import pyspark

    lib = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    own = [os.path.join(lib, "pyspark.zip"), os.path.join(lib, "py4j-0.10.9.9-src.zip")]
    other = "/opt/spark/python/lib/pyspark.zip"  # another Spark's: must match its JVM, so it stays first
    path = [*own, other, "/work/repo", *[p for p in sys.path if not p.endswith(".zip")]]
    assert installed_first(path) == [other, "/work/repo", *path[4:]]


def test_a_python_worker_under_the_daemon_imports_pyspark_from_the_installed_package(spark):
    # the package's session runs its Python processes through the daemon (conftest's FAST_SPARK)
    assert spark.conf.get("spark.python.daemon.module") == "squall.trident.spark.daemon"

    def where(_):
        import gc
        import sys

        import pyspark

        return pyspark.__file__, {m for m in ("squall.trident", "pyarrow", "pandas") if m in sys.modules}, \
            gc.get_freeze_count()

    [(origin, loaded, frozen)] = spark.sparkContext.parallelize([0], 1).map(where).collect()
    assert ".zip" not in origin and origin.endswith(os.path.join("pyspark", "__init__.py"))
    assert loaded == {"squall.trident", "pyarrow", "pandas"}  # imported once in the daemon, before it forked
    # the daemon's objects are frozen out of the full collection pyspark runs after every task
    assert frozen > 10_000


def test_start_sets_the_python_workers_going_on_a_thread_of_its_own(spark):
    from squall.trident.spark import WARM_JOB_GROUP, _warm_python_workers

    thread = _warm_python_workers(spark, 2)
    thread.join(120)
    assert not thread.is_alive(), "the warm-up job did not end in 120 s"
    tracker = spark.sparkContext.statusTracker()

    def status() -> str | None:
        jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(WARM_JOB_GROUP)]
        return jobs[-1].status if jobs else None

    # the status tracker learns of the job's end from Spark's listener bus, after the job's action
    # returned on the thread: it said RUNNING for a job that had ended, once, at load 9
    assert wait_until(lambda: status() == "SUCCEEDED", 30), status()
    # the job group was set on the warm-up's thread only, not on this one
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") != WARM_JOB_GROUP
