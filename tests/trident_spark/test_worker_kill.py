"""Exactly once across a SIGKILLed Python worker (issue 36 item 5b): the Spark task running the
word count's Split is killed mid-batch; Spark retries the task (local[2,4]: two threads, a task
tried up to 4 times, as a cluster retries one), the batch commits once, and the stored counts
equal the input."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ..conftest import wait_until
from .conftest import delta_counts, expected_counts, sentences, spark_session, write_lines
from .ops import delta_counts_factory, word_count

pytestmark = pytest.mark.timeout(300)  # a cold SparkSession and a few micro-batches on a loaded machine


@pytest.fixture(scope="module")
def spark():
    yield from spark_session("local[2,4]")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_python_worker_killed_mid_batch_is_retried_and_every_word_counts_once(spark, tmp_path):
    from squall.trident.spark import start

    data, table, gate = tmp_path / "in", tmp_path / "counts", tmp_path / "gate"
    data.mkdir()
    gate.mkdir()
    lines = sentences(16, seed=7)
    held = [*lines[:3], f"hold:{gate}", *lines[3:]]  # the Split of the first batch waits there
    write_lines(data / "a.txt", held)
    query = start(word_count(str(data), delta_counts_factory(str(table)), max_batch_records=20), spark,
                  str(tmp_path / "checkpoint"))
    try:
        assert wait_until(lambda: (gate / "pid").exists() or query.exception() is not None, 240, 0.05)
        pid = int((gate / "pid").read_text())
        assert "pyspark" in _cmdline(pid) and pid != os.getpid()  # a Spark Python worker, not this process
        os.kill(pid, signal.SIGKILL)
        (gate / "go").write_text("go")
        query.processAllAvailable()
        assert query.exception() is None and query.isActive
    finally:
        query.stop()
    assert delta_counts(table) == expected_counts(lines)
