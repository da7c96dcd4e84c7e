"""W4 latency and the MEM measurement, each run once at a tiny size: correctness only (every
tuple acked, percentiles ordered, bytes per tuple positive, the acker's O(1) per spout tuple),
never a timing assertion."""

import json
import sys
from array import array
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench import harness, memory, w4_latency  # noqa: E402
from bench.__main__ import main  # noqa: E402
from squall import _native  # noqa: E402
from squall.engine.acker import INIT, Acker  # noqa: E402

_COMMON = {"workload", "host", "workers", "acking", "wall_s", "cpu_s", "peak_rss_mb", "correct",
           "baseline_rate", "ratio", "squall_version", "python_version", "timestamp"}
_W4 = {"target_rate", "tuples_per_s", "complete_latency_p50_ms", "complete_latency_p99_ms",
       "complete_latency_p999_ms", "peak_fraction", "peak_rate", "secs", "warmup", "max_spout_pending"}


def _check_w4(record, rate=None):
    assert record["workload"] == "W4" and record["acking"] == "on"
    assert _COMMON <= record.keys() and _W4 <= record.keys()
    assert record["correct"] is True
    # every tuple emitted was acked, and its latency recorded
    assert record["failed"] == 0 and record["errors"] == 0
    assert record["acked"] == record["emitted"] == record["latencies_recorded"] > 0
    assert record["latency_samples"] > 0 and record["tuples_per_s"] > 0
    assert 0 < record["complete_latency_p50_ms"] <= record["complete_latency_p99_ms"] \
        <= record["complete_latency_p999_ms"] <= record["complete_latency_max_ms"]
    assert record["emit_lag_p50_ms"] <= record["emit_lag_p99_ms"] <= record["emit_lag_max_ms"]
    assert record["baseline_latency_p50_ms"] <= record["baseline_latency_p99_ms"] \
        <= record["baseline_latency_p999_ms"]
    assert record["baseline_rate"] > 0 and record["ratio"] > 0
    if rate is not None:
        assert record["target_rate"] == rate and record["rate_mode"] == "fixed"
        assert record["peak_rate"] is None and record["peak_fraction"] is None
        # the spout emitted exactly its schedule: (warmup + secs + tail) x rate
        assert record["emitted"] == round((record["warmup"] + record["secs"] + w4_latency.TAIL_SECS) * rate)


def test_w4_local_fixed_rate():
    _check_w4(w4_latency.run(rate=500, secs=1, warmup=0.5), rate=500)


def test_w4_local_half_peak_measures_w3_first():
    record = w4_latency.run(rate="half-peak", secs=0.5, warmup=0.3, probe_secs=0.5, probe_warmup=0.3)
    _check_w4(record)
    assert record["rate_mode"] == "half-peak" and record["peak_fraction"] == 0.5
    assert record["peak_rate"] > 0
    assert record["target_rate"] == pytest.approx(record["peak_rate"] / 2, abs=0.1)


def test_w4_on_the_process_host_with_two_workers():
    """Two spout tasks in two worker processes, each writing its own samples on close."""
    record = w4_latency.run(rate=400, secs=0.5, warmup=0.3, host="process", workers=2)
    _check_w4(record, rate=400)
    assert record["host"] == "process" and record["workers"] == 2 and record["parallelism"] == 2
    assert record["workers_stopped"] is True and len(record["worker_cpu_s"]) == 2


def test_w4_window_figures():
    # one task, 10 tuples emitted at t = 0..9 s, each acked 0.5 s later (the last two 1 s later)
    lats = [0.5] * 8 + [1.0, 1.0]
    emits = [float(i) for i in range(10)]
    acks = [e + v for e, v in zip(emits, lats)]
    lags = [0.001 * i for i in range(10)]
    fig = w4_latency.window_figures([(array("d", acks), array("d", lats), array("d", emits), array("d", lags))],
                                    warmup=2, secs=6)
    assert fig["recorded"] == 10
    assert fig["latencies"] == 6                       # emitted at 2, 3, ..., 7
    assert fig["acked_in_window"] == 6                 # acked at 2.5, ..., 7.5
    assert fig["rate"] == 1.0
    assert fig["p50_ms"] == 500.0 and fig["p999_ms"] == 500.0
    assert fig["lag_max_ms"] == 7.0


def test_w4_baseline_acks_every_tuple():
    fig = w4_latency.baseline_latency(2000, secs=0.3, warmup=0.1)
    assert fig["recorded"] == round((0.1 + 0.3 + w4_latency.TAIL_SECS) * 2000)
    assert fig["latencies"] > 0 and fig["p50_ms"] <= fig["p99_ms"] <= fig["p999_ms"]


def test_w4_cli_appends_a_record(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    assert main(["run", "W4", "--rate", "300", "--secs", "0.4", "--warmup", "0.2", "--results", str(results)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(line)["workload"] == "W4"
    saved = harness.load_results(results)
    assert len(saved) == 1 and saved[0]["target_rate"] == 300 and saved[0]["correct"] is True
    assert main(["report", "--results", str(results)]) == 0
    assert "| W4 | local | 1 | on |" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["run", "W4", "--rate", "fast"],
    ["run", "W4", "--acking", "off"],
    ["run", "MEM", "--ks", "1,x"],
    ["run", "MEM", "--host", "process", "--parallelism", "2"],
    ["run", "W2"],  # W1-W3 still need --acking
])
def test_cli_rejects(argv):
    with pytest.raises(SystemExit):
        main(argv + ["--no-save"])


def test_deep_size_counts_each_object_once():
    a = 10 ** 20
    shared = "x" * 100
    d = {1000 + i: (a, shared, None, True, 5) for i in range(10)}
    size = memory.deep_size(d)
    expected = (sys.getsizeof(d) + sum(sys.getsizeof(k) for k in d) + 10 * sys.getsizeof((a, shared, None, True, 5))
                + sys.getsizeof(a) + sys.getsizeof(shared))
    assert size == expected


def test_deep_size_counts_the_fields_of_the_ackers_pending_trees():
    acker = Acker()
    acker.update(INIT, 10 ** 20, 10 ** 19, 7, now=1.5)
    (tree,) = acker.pending.newest.values()
    size = memory.deep_size(tree)
    # compiled (squall._native), the start time is a C double inside the record, not a float object
    held = [tree.xor] if _native.COMPILED else [tree.xor, tree.start]
    assert size == sys.getsizeof(tree) + sum(map(sys.getsizeof, held))


def test_memory_local_bytes_per_pending_tuple():
    n = 5000
    record = memory.run(pending=n, ks=(1, 20), idle_secs=0.5)
    assert record["workload"] == "MEM" and record["host"] == "local"
    assert record["correct"] is True
    for d in record["details"]:
        assert d["spout_pending"] == d["acker_pending"] == d["acker_open_trees"] == n
        assert d["acked"] == 0 and d["failed"] == 0
    assert record["acker_bytes_per_pending"] > 0 and record["spout_bytes_per_pending"] > 0
    assert record["traced_engine_bytes_per_pending"] > 0
    by_k = record["acker_bytes_per_spout_tuple"]
    assert set(by_k) == {"1", "20"} and by_k["1"] > 0
    assert by_k["20"] <= 2 * by_k["1"]  # O(1) per spout tuple, whatever the tree size
    assert record["idle_worker_rss_mb"] > 0 and record["rss_before_mb"] > 0
    assert record["idle_cpu_percent"] >= 0


def test_memory_idle_worker_on_the_process_host():
    record = memory.run(host="process", idle_secs=0.5)
    assert record["workload"] == "MEM" and record["host"] == "process" and record["workers"] == 1
    assert record["correct"] is True and record["workers_stopped"] is True
    assert record["idle_worker_rss_mb"] > 0 and len(record["worker_rss_mb"]) == 1
    assert record["idle_cpu_percent"] >= 0
