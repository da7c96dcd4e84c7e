"""Where a second worker's CPU goes, in time: the workers' native profile, one worker against two.

`bench.instructions` counts what a crossing executes, which this machine's swings cannot move,
but not what it waits for (cache misses, the kernel's network stack, wake-ups), which is most of
a crossing word's native cost (docs/profiles/w1-scaling-model.md). This samples it instead: each
W1 run on the process host under ``perf record`` (the ``cpu-clock`` software event, which this VM
has where it has no hardware counters), its samples kept only for the worker processes and only
inside the run's timed window (the first spout's open to the last ack, read by the spouts on
``CLOCK_MONOTONIC``, which the samples are stamped with), and counted per symbol::

    python -m bench profile W1 [--n 1000000] [--rounds 2] [--home] [--top 40]

Rounds alternate 1 and 2 workers; each symbol's microseconds of worker CPU a sentence are the
median over the rounds, and the table ranks the symbols by what two workers spend beyond one
(positive: the crossing's; negative: what splitting the work saved, such as the count's dict
lookups in a dict half the size). Compiled code has its symbols (squall's ``_speedups``,
libpython, libc, the kernel); Python functions are all in ``_PyEval_EvalFrameDefault``.

A sample is 1 / ``FREQUENCY_HZ`` s of a thread's CPU, so a symbol's figure is good to about
``sqrt(samples)``: at 1,000,000 sentences a symbol of 0.05 us a sentence has some 250 samples a
run. The machine's speed still moves every figure from one run to the next (the rounds say by
how much): compare symbols within a round, not one session's with another's.

Needs ``perf`` (Debian's ``linux-perf``, installed by scripts/install-system-deps.sh) and the
permission to profile the workers (root, or ``kernel.perf_event_paranoid`` at most 1).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from statistics import median
from typing import NamedTuple

from . import hosts, instructions

FREQUENCY_HZ = 4999  # not a multiple of the kernel's tick, so samples do not beat with it
DEFAULT_N = 1_000_000


class Sample(NamedTuple):
    """One line of ``perf script -F pid,time,ip,sym,dso``."""

    pid: int
    time: float
    symbol: str  # "name (dso's file name)"


class RunProfile(NamedTuple):
    """One W1 run's worker samples in its timed window, per symbol."""

    workers: int
    n: int
    sentences_per_s: float
    samples: Counter[str]

    def us_per_sentence(self, symbol: str | None = None) -> float:
        """Worker CPU a sentence, in microseconds: of ``symbol``, or of every symbol (None)."""
        count = sum(self.samples.values()) if symbol is None else self.samples.get(symbol, 0)
        return count / FREQUENCY_HZ / self.n * 1e6


def parse_script(lines: Iterable[str]) -> Iterable[Sample]:
    """The samples of ``perf script -F pid,time,ip,sym,dso`` output: ``pid time: ip sym (dso)``,
    whose symbol may be ``[unknown]`` and may hold spaces; other lines are skipped."""
    for line in lines:
        head, colon, rest = line.partition(":")
        fields = head.split()
        if not colon or len(fields) != 2 or not fields[0].isdigit():
            continue
        try:
            pid, when = int(fields[0]), float(fields[1])
        except ValueError:
            continue
        parts = rest.split(None, 1)  # the ip, then "sym (dso)"
        if len(parts) < 2:
            continue
        sym_dso = parts[1].strip()
        name, _, dso = sym_dso.rpartition(" (")
        dso = os.path.basename(dso.rstrip(")")) if dso else "?"
        yield Sample(pid, when, f"{name or sym_dso} ({dso})")


def window_counts(samples: Iterable[Sample], pids: Sequence[int], start: float, end: float) -> Counter[str]:
    """The samples of processes ``pids`` between ``start`` and ``end``, per symbol."""
    wanted = set(pids)
    return Counter(s.symbol for s in samples if s.pid in wanted and start <= s.time <= end)


def by_dso(counts: Counter[str]) -> Counter[str]:
    """``counts`` summed per shared object (the name in a symbol's brackets)."""
    out: Counter[str] = Counter()
    for symbol, c in counts.items():
        out[symbol.rpartition(" (")[2].rstrip(")")] += c
    return out


def profile_run(workers: int, n: int, home: bool, pythonpath: str | None) -> RunProfile:
    """One W1 run (acking on, the process host) under ``perf record``, its workers' samples in
    its timed window."""
    perf = shutil.which("perf")
    if perf is None:
        raise SystemExit("python -m bench profile needs perf (Debian's linux-perf): run scripts/install-system-deps.sh")
    with tempfile.TemporaryDirectory(prefix="squall-profile-") as tmp:
        data = Path(tmp) / "perf.data"
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        conf = json.loads(env.get(hosts.HOST_CONF_ENV) or "{}")
        if home:
            conf.update(instructions.AT_HOME)
        env[hosts.HOST_CONF_ENV] = json.dumps(conf)
        run = subprocess.run(
            [perf, "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-F", str(FREQUENCY_HZ),
             "-o", str(data), "--", sys.executable, "-m", "bench", "run", "W1", "--acking", "on",
             "--host", "process", "--workers", str(workers), "--n", str(n), "--no-save"],
            env=env, capture_output=True, text=True, check=False)
        out = run.stdout
        if run.returncode != 0 or "{" not in out:
            raise RuntimeError(f"W1 on {workers} worker(s) under perf failed ({run.returncode}): "
                               f"{(run.stderr or out)[-2000:]}")
        record = json.loads(out[out.index("{"):])
        if not record.get("correct"):
            raise RuntimeError(f"W1 on {workers} worker(s) under perf counted wrong: {out[-500:]}")
        start, end = record["timed_window"]
        script = subprocess.run([perf, "script", "-i", str(data), "-F", "pid,time,ip,sym,dso"],
                                capture_output=True, text=True, check=True)
        counts = window_counts(parse_script(script.stdout.splitlines()), record["worker_pids"], start, end)
    return RunProfile(workers, n, record["sentences_per_s"], counts)


def compare(ones: Sequence[RunProfile], twos: Sequence[RunProfile], top: int = 40) -> dict:
    """Median microseconds a sentence per symbol and per shared object on 1 and 2 workers, and
    their difference, largest first (``top`` each way)."""
    def med(runs: Sequence[RunProfile], key: str | None, dso: bool = False) -> float:
        values = []
        for r in runs:
            counts = by_dso(r.samples) if dso else r.samples
            total = sum(counts.values()) if key is None else counts.get(key, 0)
            values.append(total / FREQUENCY_HZ / r.n * 1e6)
        return median(values)

    def rows(keys: set[str], dso: bool) -> list[dict]:
        out = [{"name": k, "one_us": round(med(ones, k, dso), 4), "two_us": round(med(twos, k, dso), 4)} for k in keys]
        for row in out:
            row["diff_us"] = round(row["two_us"] - row["one_us"], 4)
        return sorted(out, key=lambda row: -row["diff_us"])

    symbols = set().union(*(r.samples for r in (*ones, *twos)))
    dsos = set().union(*(by_dso(r.samples) for r in (*ones, *twos)))
    by_symbol = rows(symbols, False)
    return {
        "rates": {"one": [r.sentences_per_s for r in ones], "two": [r.sentences_per_s for r in twos]},
        "total_us": {"one": round(med(ones, None), 3), "two": round(med(twos, None), 3)},
        "by_dso": [row for row in rows(dsos, True) if abs(row["diff_us"]) >= 0.005 or row["two_us"] >= 0.05],
        "more": by_symbol[:top],
        "less": [row for row in by_symbol[-top:] if row["diff_us"] < 0][::-1],
    }


def run(rounds: int = 2, n: int = DEFAULT_N, home: bool = False, top: int = 40) -> dict:
    """``rounds`` alternated pairs of W1 runs on 1 and 2 workers under perf, compared (`compare`)."""
    pythonpath = os.environ.get("PYTHONPATH")
    ones, twos = [], []
    for _ in range(rounds):
        ones.append(profile_run(1, n, home, pythonpath))
        twos.append(profile_run(2, n, home, pythonpath))
    return compare(ones, twos, top)


def format_table(result: dict) -> str:
    """The comparison as text: totals, shared objects, then the symbols two workers spend more
    and less on."""
    def table(title: str, rows: list[dict]) -> list[str]:
        lines = [title, f"{'':72s} {'1 worker':>9s} {'2 workers':>9s} {'2 - 1':>8s}"]
        lines += [f"{r['name'][:72]:72s} {r['one_us']:9.3f} {r['two_us']:9.3f} {r['diff_us']:+8.3f}" for r in rows]
        return lines + [""]

    t = result["total_us"]
    lines = [(f"worker CPU a sentence (us, medians): 1 worker {t['one']:.3f}, 2 workers {t['two']:.3f}, "
              f"2 - 1 {t['two'] - t['one']:+.3f}"),
             f"sentences/s: 1 worker {result['rates']['one']}, 2 workers {result['rates']['two']}", ""]
    lines += table("by shared object", result["by_dso"])
    lines += table("symbols two workers spend more on", result["more"])
    lines += table("symbols two workers spend less on", result["less"])
    return "\n".join(lines)
