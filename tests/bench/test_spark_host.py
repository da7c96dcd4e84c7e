"""W1 at a tiny size on the Spark host (``local[2]``, 2 workers as Spark tasks): the counts are
exact and no Python worker is left. The run starts (and stops) its own SparkSession, ~10 s."""

import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench import w1_wordcount  # noqa: E402
from bench.hosts import SparkHost  # noqa: E402


def test_w1_on_the_spark_host_with_two_workers_is_correct(tmp_path):
    record = w1_wordcount.run(n=2000, acking=True, corpus_dir=tmp_path / "corpus", timeout=60,
                              host="spark", workers=2)
    assert record["correct"] is True
    assert record["host"] == "spark" and record["spark_master"] == "local[2]"
    assert record["workers"] == 2 and record["parallelism"] == 2
    assert record["failed"] == 0 and record["errors"] == 0 and record["workers_stopped"] is True
    # the two workers are two Python processes, found and measured from /proc
    assert len(record["worker_cpu_s"]) == 2 and len(record["worker_peak_rss_mb"]) == 2
    assert record["spark_jvm_peak_rss_mb"] > 0 and record["spark_daemon_cpu_s"] is not None
    assert record["sentences_per_s"] > 0 and record["wall_s"] > 0
    assert not SparkHost().worker_pids()
