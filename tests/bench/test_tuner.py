"""``python -m bench tuner`` and ``--max-pending auto``: the table and its verdict from records,
and a tiny W4 run with the tuner (correctness only, never a timing assertion)."""

import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench import tuner, w4_latency
from bench.__main__ import main


def _w1(setting, rate, latency, run="2026-11-24T12:00:00+00:00", final=None):
    return {"workload": "W1", "host": "process", "workers": 2, "max_spout_pending": setting,
            "sentences_per_s": rate, "complete_latency_mean_ms": latency, "correct": True,
            "max_spout_pending_final": final, "tuner_run": run, "squall_commit": "abc1234",
            "timestamp": run}


def _w4(setting, rate, p99, run="2026-11-24T12:00:00+00:00"):
    return {"workload": "W4", "host": "process", "workers": 2, "max_spout_pending": setting, "target_rate": 5000.0,
            "tuples_per_s": rate, "complete_latency_p99_ms": p99, "complete_latency_p50_ms": p99 / 4,
            "correct": True, "max_spout_pending_final": [40], "tuner_run": run, "squall_commit": "abc1234"}


def test_the_table_medians_each_setting_and_judges_auto_against_the_best_hand_picked_one():
    records = [_w1(100, 10_000, 5.0), _w1(1000, 30_000, 20.0), _w1(1000, 32_000, 22.0), _w1(10000, 31_000, 90.0),
               _w1("auto", 28_000, 12.0, final=[700, 650]),
               _w4(100, 4_000, 9.0), _w4(1000, 5_000, 3.0), _w4(10000, 4_990, 2.5), _w4("auto", 5_000, 2.7)]
    text = tuner.table(records)
    assert "| 1000 | 31,000 | 21.000 | - | 2 | yes |" in text  # medians of its two runs
    assert "| auto | 28,000 | 12.000 | [700, 650] | 1 | yes |" in text
    # W1: 1000 is the best (31,000); auto has 90% of it at a lower latency
    assert "auto 28,000 = 90% of 1000's 31,000, latency 12.000 against 21.000: **met**" in text
    # W4: 1000 and 10000 tie on throughput (within 1%): 10000's lower p99 makes it the best,
    # and auto's p99 is worse than it
    assert "**W4** at 5,000 tuples/s" in text
    assert "latency 2.700 against 2.500: **not met**" in text


def test_the_docs_section_shows_the_newest_run_only():
    assert "Not measured yet: `python -m bench tuner`." in tuner.section([])
    old, new = "2026-11-23T09:00:00+00:00", "2026-11-24T12:00:00+00:00"
    text = tuner.section([_w1(1000, 1.0, 1.0, run=old), _w1(1000, 20_000, 5.0, run=new),
                          _w1("auto", 19_000, 4.0, run=new)])
    assert "| 1000 | 20,000 |" in text and "| 1000 | 1 |" not in text


def test_w4_runs_with_the_tuner_and_records_where_it_left_the_spout():
    record = w4_latency.run(rate=500, secs=1, warmup=0.5, max_pending="auto")
    assert record["correct"] is True and record["max_spout_pending"] == "auto"
    final = record["max_spout_pending_final"]
    assert len(final) == 1 and 16 <= final[0] <= 10_000  # the tuner's default bounds


def test_max_pending_takes_a_number_or_auto_and_nothing_else(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "W1", "--acking", "on", "--max-pending", "fast"])
    assert e.value.code == 2
    assert "--max-pending: expected a positive integer or auto, got 'fast'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--settings: expected a positive integer or auto, got '0'"):
        main(["tuner", "--settings", "100,0,auto"])
