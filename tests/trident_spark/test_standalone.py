"""Exactly once on a real Spark standalone cluster (issue 36 items 5a and 5b): a master and a
worker JVM (pyspark's spark-class, as tests/spark's HA tests start them), the driver ``squall
trident --spark-master spark://...`` SIGKILLed between its state's commit and Spark's, started
again as a second ``squall trident`` driver: the stored counts equal the input. That driver then
reads a file whose batch holds in an executor's Python worker, which is SIGKILLed there: Spark
retries the task and the counts still equal the input. SIGTERM stops the driver with exit 0
(item 1). One cluster (shared with tests/spark's standalone tests) and two cold drivers for the
three claims."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ..conftest import wait_until
from ..spark.standalone import shared
from .conftest import delta_counts, expected_counts, sentences, write_lines
from .test_driver_kill import driver, driver_killed_at_the_commit

pytestmark = pytest.mark.timeout(600)  # a master, a worker, two drivers and their executors


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


ONE_EXECUTOR = {"spark.cores.max": "2", "spark.executor.cores": "2"}
"""Each driver's application: one executor of two cores, on one of the shared cluster's workers
(`shared`: the tests of tests/spark that ran before may leave one or two, of 3 cores each)."""


def test_a_driver_killed_at_the_commit_and_a_killed_python_worker_on_a_standalone_cluster_count_every_word_once(
        tmp_path, tmp_path_factory):
    cluster = shared(tmp_path_factory, workers=1)
    root = tmp_path / "run"
    root.mkdir()
    run = driver_killed_at_the_commit(root, cluster.url, cluster.env, conf=ONE_EXECUTOR)
    second = driver(run, cluster.url, cluster.env, ONE_EXECUTOR)
    try:
        # 5a: Spark re-runs batch 1 (txid 2) and commits it: the state must not count it again
        assert wait_until(lambda: (run.checkpoint / "commits" / "1").exists() or second.poll() is not None,
                          300, 0.1), run.tail()
        assert second.poll() is None, run.tail()
        assert delta_counts(run.table) == expected_counts(run.lines), "the re-run batch counted other than once"
        assert not (run.checkpoint / "offsets" / "2").exists()  # nothing more was read: no batch of nothing

        # 5b: the next batch's Split holds in an executor's Python worker, which is SIGKILLed there
        gate = root / "worker-gate"
        gate.mkdir()
        more = sentences(3, seed=6)
        write_lines(run.data / "c.txt", [more[0], f"hold:{gate}", *more[1:]])  # one batch (4 lines a file)
        assert wait_until(lambda: (gate / "pid").exists() or second.poll() is not None, 300, 0.1), run.tail()
        pid = int((gate / "pid").read_text())
        assert "pyspark" in _cmdline(pid) and pid not in (os.getpid(), second.pid), _cmdline(pid)
        os.kill(pid, signal.SIGKILL)
        (gate / "go").write_text("go")
        assert wait_until(lambda: (run.checkpoint / "commits" / "2").exists() or second.poll() is not None,
                          300, 0.1), run.tail()
        assert second.poll() is None, run.tail()  # the task was retried: the query lives on
        assert delta_counts(run.table) == expected_counts(run.lines + more), \
            "a killed Python worker's batch counted other than once"
        assert not (run.checkpoint / "offsets" / "3").exists()

        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=120) == 0, run.tail()
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait()
        run.log.close()
