"""Each benchmark workload runs once at a tiny size, to prove it still works (no timing checks)."""

import json
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench import harness, w1_wordcount, w2_const_null  # noqa: E402
from bench.__main__ import main  # noqa: E402

_COMMON = {"workload", "host", "workers", "acking", "wall_s", "cpu_s", "peak_rss_mb", "correct",
           "baseline_rate", "ratio", "squall_version", "python_version", "timestamp"}


@pytest.mark.parametrize("acking", [True, False], ids=["acking-on", "acking-off"])
def test_w1_counts_are_correct(tmp_path, acking):
    record = w1_wordcount.run(n=2000, acking=acking, corpus_dir=tmp_path / "corpus", timeout=30)
    assert record["correct"] is True
    assert record["baseline_correct"] is True
    assert record["failed"] == 0 and record["errors"] == 0
    assert _COMMON <= record.keys()
    assert record["n"] == 2000 and record["acking"] == ("on" if acking else "off")
    assert record["sentences_per_s"] > 0 and record["ratio"] > 0


def test_w1_on_the_process_host_with_two_workers_is_correct(tmp_path):
    """A throwaway master + supervisor with 2 worker processes: the count tasks, one per worker,
    write their counts on cleanup and the merged counts match; no worker process is left."""
    record = w1_wordcount.run(n=2000, acking=True, corpus_dir=tmp_path / "corpus", timeout=30,
                              host="process", workers=2)
    assert record["correct"] is True
    assert record["host"] == "process" and record["workers"] == 2 and record["parallelism"] == 2
    assert record["failed"] == 0 and record["errors"] == 0 and record["workers_stopped"] is True
    assert len(record["worker_cpu_s"]) == 2 and len(record["worker_peak_rss_mb"]) == 2
    assert _COMMON <= record.keys()
    assert record["sentences_per_s"] > 0 and record["wall_s"] > 0
    assert record["machine_parallelism"] > 0  # the control: the baseline in 2 processes at once
    # what bench.native_profile keeps of perf's samples: these two processes, in this span
    assert len(record["worker_pids"]) == 2 and all(isinstance(p, int) for p in record["worker_pids"])
    start, end = record["timed_window"]
    assert end - start == pytest.approx(record["wall_s"], abs=0.002)


def test_w1_s_no_crossing_control_counts_every_word_and_stays_out_of_w1_s_tables(tmp_path):
    """The control: count on a local-or-shuffle grouping, so each count task counts some of
    every word; the merged counts still match the corpus, every sentence is acked, and the
    report does not take its figures for W1's."""
    from bench import report
    record = w1_wordcount.run(n=2000, acking=True, corpus_dir=tmp_path / "corpus", timeout=30,
                              host="process", workers=2, no_crossing=True)
    assert record["correct"] is True and record["failed"] == 0 and record["errors"] == 0
    assert record["control"] == "no-crossing"
    assert not report.is_workload(record, "W1")
    assert report.is_workload({k: v for k, v in record.items() if k != "control"}, "W1")
    with pytest.raises(SystemExit):
        main(["run", "W1", "--acking", "on", "--no-crossing"])  # one worker: nothing to cross
    with pytest.raises(ValueError, match="process or Spark host"):
        w1_wordcount.run(n=2000, corpus_dir=tmp_path / "corpus", no_crossing=True)


def test_machine_parallelism_runs_the_copies_at_once():
    """Three copies of a 0.3 s wait, started together, end about 0.3 s later: 3 x the work of one
    in the time of one (a wait, so that the machine's cores do not matter)."""
    import time
    assert 2.0 < harness.machine_parallelism(lambda: time.sleep(0.3), 3, 0.3) <= 3.0


@pytest.mark.parametrize("workload", ["W2", "W3"])
@pytest.mark.parametrize("acking", [True, False], ids=["acking-on", "acking-off"])
def test_const_workloads_run(workload, acking):
    record = w2_const_null.run(workload, acking=acking, secs=1, warmup=0)
    assert record["correct"] is True
    assert record["tuples"] > 0 and record["tuples_per_s"] > 0
    assert _COMMON <= record.keys()
    if acking:
        assert record["complete_latency_mean_ms"] > 0
        assert record["latency_samples"] > 0
        assert record["complete_latency_p99_ms"] >= record["complete_latency_p50_ms"] > 0
    else:
        assert record["complete_latency_p99_ms"] is None


def test_cli_appends_and_reports(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    assert main(["run", "W2", "--acking", "on", "--secs", "0.3", "--warmup", "0", "--repeat", "2", "--in-process",
                 "--results", str(results)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3  # two runs and their median
    assert json.loads(lines[-1])["kind"] == "median"
    assert len(harness.load_results(results)) == 2  # the median line is not saved
    assert main(["report", "--results", str(results)]) == 0
    table = capsys.readouterr().out
    assert "| W2 | local | 1 | on |" in table


def test_percentile_is_nearest_rank():
    values = [float(i) for i in range(1, 101)]
    assert harness.percentile(values, 50) == 50.0
    assert harness.percentile(values, 99) == 99.0
    assert harness.percentile(values, 100) == 100.0
    assert harness.percentile([], 99) is None


def test_spark_master_is_only_for_the_spark_host():
    with pytest.raises(SystemExit):
        main(["run", "W1", "--acking", "on", "--host", "process", "--spark-master", "local[2]"])


def test_conf_settings_reach_the_process_and_spark_hosts(monkeypatch):
    from bench.__main__ import _host_conf
    from bench.hosts import HOST_CONF_ENV, make_host

    assert _host_conf(["squall.encryption=true", "a.b=[1, 2]"]) == {"squall.encryption": True, "a.b": [1, 2]}
    monkeypatch.setenv(HOST_CONF_ENV, json.dumps({"squall.encryption": True}))
    assert make_host("process", 2).extra_conf == {"squall.encryption": True}
    assert make_host("spark", 2).extra_conf == {"squall.encryption": True}
    with pytest.raises(SystemExit):
        main(["run", "W1", "--acking", "on", "--conf", "squall.encryption=true"])
