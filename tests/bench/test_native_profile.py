"""`bench.native_profile`: perf's samples read, kept to the workers' timed window, and one worker
compared with two (medians a sentence, ranked by what two workers spend more). The perf runs
themselves are a benchmark's (`python -m bench profile`), not the suite's."""

import sys
from collections import Counter
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench import native_profile as np_  # noqa: E402
from bench.__main__ import main  # noqa: E402

SCRIPT = """\
10672 62854.124019:  ffffffff82250979 _raw_spin_unlock_irqrestore ([kernel.kallsyms])
    0 62854.124123:  ffffffff8224215b pv_native_safe_halt ([kernel.kallsyms])
10720 62862.100000:      7f5e3a1b2c3d _PyEval_EvalFrameDefault (/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0)
10720 62862.200000:      7f5e3a1b2c3e unpack_view.isra.0 (/work/main/squall/_speedups.cpython-311-x86_64-linux-gnu.so)
10722 62862.300000:      7f5e3a1b2c3f [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)
10722 62862.400000:  ffffffff81bacf18 _copy_to_user ([kernel.kallsyms])
10722 62870.000000:      7f5e3a1b2c3d _PyEval_EvalFrameDefault (/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0)
not a sample line
10720 62862.500000: 7f5e3a1b2c40 operator new(unsigned long) (/usr/lib/libstdc++.so.6)
"""


def test_a_script_line_gives_its_process_time_and_symbol_with_the_file_name_of_its_object():
    samples = list(np_.parse_script(SCRIPT.splitlines()))
    assert len(samples) == 8  # every sample line, the idle CPU's (pid 0) too; not the stray text
    assert samples[2] == np_.Sample(10720, 62862.1, "_PyEval_EvalFrameDefault (libpython3.11.so.1.0)")
    assert samples[3].symbol == "unpack_view.isra.0 (_speedups.cpython-311-x86_64-linux-gnu.so)"
    assert samples[4].symbol == "[unknown] (libc.so.6)"
    assert samples[5].symbol == "_copy_to_user ([kernel.kallsyms])"
    assert samples[7].symbol == "operator new(unsigned long) (libstdc++.so.6)"  # spaces in a symbol


def test_only_the_workers_samples_inside_the_timed_window_are_counted():
    samples = list(np_.parse_script(SCRIPT.splitlines()))
    counts = np_.window_counts(samples, [10720, 10722], 62862.0, 62863.0)
    assert counts == Counter({
        "_PyEval_EvalFrameDefault (libpython3.11.so.1.0)": 1,  # the one at 62870 is after the window
        "unpack_view.isra.0 (_speedups.cpython-311-x86_64-linux-gnu.so)": 1,
        "[unknown] (libc.so.6)": 1,
        "_copy_to_user ([kernel.kallsyms])": 1,
        "operator new(unsigned long) (libstdc++.so.6)": 1,
    })  # neither the benchmark's process (10672) nor the idle CPU
    assert np_.by_dso(counts) == Counter({"libpython3.11.so.1.0": 1, "_speedups.cpython-311-x86_64-linux-gnu.so": 1,
                                         "libc.so.6": 1, "[kernel.kallsyms]": 1, "libstdc++.so.6": 1})


def _run(workers, rate, **counts):
    return np_.RunProfile(workers, 1_000_000, rate, Counter({f"{k} (x.so)": v for k, v in counts.items()}))


def test_one_worker_against_two_is_the_median_a_sentence_ranked_by_what_two_spend_more():
    hz = np_.FREQUENCY_HZ
    # samples for 1,000,000 sentences: hz samples are 1 s, so 1 us a sentence
    ones = [_run(1, 150e3, eval=hz, lookup=hz), _run(1, 160e3, eval=3 * hz, lookup=hz), _run(1, 155e3, eval=2 * hz, lookup=hz)]
    twos = [_run(2, 250e3, eval=2 * hz, lookup=hz // 2, unpack=hz // 5), _run(2, 240e3, eval=4 * hz, lookup=hz // 2,
            unpack=hz // 5), _run(2, 245e3, eval=3 * hz, lookup=hz // 2, unpack=hz // 5)]
    assert ones[0].us_per_sentence() == pytest.approx(2.0)
    assert ones[0].us_per_sentence("eval (x.so)") == pytest.approx(1.0)
    result = np_.compare(ones, twos, top=10)
    assert result["total_us"] == {"one": 3.0, "two": pytest.approx(3.7, abs=1e-3)}
    more = {row["name"]: row for row in result["more"]}
    assert [row["name"] for row in result["more"]][:2] == ["eval (x.so)", "unpack (x.so)"]
    assert more["eval (x.so)"]["diff_us"] == pytest.approx(1.0)  # medians 2 and 3 us
    assert more["unpack (x.so)"] == {"name": "unpack (x.so)", "one_us": 0.0, "two_us": pytest.approx(0.2, abs=1e-3),
                                     "diff_us": pytest.approx(0.2, abs=1e-3)}
    assert [row["name"] for row in result["less"]] == ["lookup (x.so)"]
    assert result["less"][0]["diff_us"] == pytest.approx(-0.5, abs=1e-3)
    assert result["by_dso"][0]["name"] == "x.so"
    assert result["rates"] == {"one": [150e3, 160e3, 155e3], "two": [250e3, 240e3, 245e3]}
    text = np_.format_table(result)
    assert "1 worker 3.000, 2 workers 3.700" in text
    assert "eval (x.so)" in text and "+1.000" in text and "-0.500" in text


def test_the_command_refuses_sizes_it_cannot_measure(capsys):
    with pytest.raises(SystemExit, match="at least 10000"):
        main(["profile", "W1", "--n", "100"])
    with pytest.raises(SystemExit, match="--rounds and --top at least 1"):
        main(["profile", "W1", "--rounds", "0"])
