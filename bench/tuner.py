"""``python -m bench tuner``: the max spout pending tuner against hand-picked values (issue 16).

W1 (acking on, ``--n`` sentences) and W4 (a fixed rate) run with ``topology.max.spout.pending``
at each of ``--settings`` (default 100, 1,000, 10,000 and ``auto``, the tuner), each run in a
fresh interpreter (``python -m bench run ... --no-save``), interleaved round by round since the
machine's speed drifts, on ``--host`` with ``--workers``. W4's rate is the same for every
setting: ``--w4-rate`` tuples/s, or (``half-peak``, the default) half of W3's peak acked rate,
measured once first with max spout pending 1,000 (a short W4 run whose record is only used for
its ``target_rate``).

The records go to ``bench/results/tuner.jsonl`` (``--no-save``: nowhere), and the markdown for
docs/benchmarks.md is printed at the end (`table`): per workload and setting the median
throughput, latency (W1: mean complete latency, the only one it measures; W4: p50 and p99),
where the tuner left each spout executor, and the issue's target: ``auto`` reaches at least 90%
of the best hand-picked throughput with a latency no worse than that setting's (W1: mean, W4:
p99). The best hand-picked setting is the one of highest median throughput; throughputs within
1% of it count as equal, and of those the lowest latency wins (at a fixed W4 rate every setting
that does not hold the spout back achieves the same rate).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from . import harness

RESULTS_FILE = harness.RESULTS_DIR / "tuner.jsonl"
SETTINGS = ("100", "1000", "10000", "auto")
TARGET_SHARE = 0.9   # of the best hand-picked throughput
TIE = 0.01           # throughputs this close count as equal


class Workload(NamedTuple):
    """What the table reads from one workload's records."""

    name: str
    rate_key: str
    rate_unit: str
    latency_key: str      # the latency of the target
    latency_label: str


WORKLOADS = (Workload("W1", "sentences_per_s", "sentences/s", "complete_latency_mean_ms", "mean complete latency ms"),
             Workload("W4", "tuples_per_s", "acked tuples/s", "complete_latency_p99_ms", "p99 complete latency ms"))


def _bench(args: list[str]) -> dict[str, Any]:
    """One ``python -m bench run`` in a fresh interpreter; its record."""
    argv = [sys.executable, "-m", "bench", "run", *args, "--no-save"]
    child = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False, cwd=Path(__file__).resolve().parent.parent)
    lines = [ln for ln in child.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"{' '.join(argv[1:])} printed no record (exit {child.returncode})")
    return json.loads(lines[-1])


def _host_args(host: str, workers: int) -> list[str]:
    return ["--host", host] + (["--workers", str(workers)] if host != "local" else [])


def run(host: str = "process", workers: int = 2, n: int = 1_000_000, w4_rate: str = "half-peak",
        secs: float = 20.0, warmup: float = 10.0, rounds: int = 3, settings: Iterable[str] = SETTINGS,
        results: Path | None = RESULTS_FILE) -> list[dict[str, Any]]:
    """Every run's record, in the order run (see the module docstring)."""
    settings = list(settings)
    where = _host_args(host, workers)
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())  # names this run in the file
    rate = w4_rate
    if rate == "half-peak":
        probe = _bench(["W4", "--rate", "half-peak", "--max-pending", "1000", "--secs", "1", "--warmup", "1", *where])
        rate = f"{probe['target_rate']:g}"
        print(f"W4 rate: {rate} tuples/s (half of W3's peak, {probe['peak_rate']:g})", file=sys.stderr, flush=True)
    records = []
    for r in range(rounds):
        for setting in settings:
            for args in (["W1", "--acking", "on", "--n", str(n)],
                         ["W4", "--rate", rate, "--secs", f"{secs:g}", "--warmup", f"{warmup:g}"]):
                record = _bench([*args, "--max-pending", setting, *where])
                record.update(tuner_run=started, tuner_round=r + 1)
                harness.emit_record(record, results)
                records.append(record)
    return records


def _median(values: list[Any]) -> float | None:
    nums = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(nums) if nums else None


def _fmt(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


class Row(NamedTuple):
    """One workload at one setting: medians over its runs."""

    setting: str
    rate: float | None
    latency: float | None
    p50: float | None
    runs: int
    correct: bool
    finals: list[Any]


def _rows(records: list[dict[str, Any]], w: Workload) -> list[Row]:
    by_setting: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("workload") == w.name:
            by_setting.setdefault(str(r.get("max_spout_pending")), []).append(r)
    return [Row(s, _median([r.get(w.rate_key) for r in rs]), _median([r.get(w.latency_key) for r in rs]),
                _median([r.get("complete_latency_p50_ms") for r in rs]), len(rs),
                all(r.get("correct") for r in rs), [r.get("max_spout_pending_final") for r in rs])
            for s, rs in sorted(by_setting.items(), key=lambda kv: (kv[0] == "auto", len(kv[0]), kv[0]))]


def best_hand_picked(rows: list[Row]) -> Row | None:
    """The hand-picked setting of highest throughput (within `TIE`, of lowest latency)."""
    hand = [r for r in rows if r.setting != "auto" and r.rate is not None]
    if not hand:
        return None
    top = max(r.rate for r in hand)
    tied = [r for r in hand if r.rate >= top * (1 - TIE)]
    return min(tied, key=lambda r: (float("inf") if r.latency is None else r.latency, -r.rate))


def verdict(rows: list[Row]) -> tuple[Row, Row, bool] | None:
    """(auto's row, the best hand-picked row, whether auto meets the target), if both ran."""
    auto = next((r for r in rows if r.setting == "auto"), None)
    best = best_hand_picked(rows)
    if auto is None or best is None or auto.rate is None or best.rate is None:
        return None
    met = (auto.rate >= TARGET_SHARE * best.rate and auto.latency is not None and best.latency is not None
           and auto.latency <= best.latency)
    return auto, best, met


def table(records: list[dict[str, Any]]) -> str:
    """The markdown of the runs: a table per workload and the target's verdict under it."""
    out = []
    first = records[0] if records else {}
    commits = sorted({str(r.get("squall_commit")) for r in records})
    out.append(f"{len(records)} runs on {first.get('host', '?')}"
               + (f", {first['workers']} worker{'s' if first['workers'] != 1 else ''}" if first.get("workers") else "")
               + f", squall commit {', '.join(f'`{c[:7]}`' for c in commits)}, first run {first.get('timestamp', '?')}.")
    for w in WORKLOADS:
        rows = _rows(records, w)
        if not rows:
            continue
        extra = " | p50 ms" if w.name == "W4" else ""
        out += ["", f"**{w.name}**" + (f" at {_records_rate(records)} tuples/s" if w.name == "W4" else "")
                + f" ({w.rate_unit}, medians)", "",
                f"| max spout pending | {w.rate_unit} | {w.latency_label}{extra} | tuner's final limit per executor | runs | correct |",
                "|---|---|---|" + ("---|" if extra else "") + "---|---|---|"]
        for r in rows:
            finals = "; ".join(str(f) for f in r.finals) if r.setting == "auto" else "-"
            p50 = f" | {_fmt(r.p50, 3)}" if extra else ""
            out.append(f"| {r.setting} | {_fmt(r.rate)} | {_fmt(r.latency, 3)}{p50} | {finals} | {r.runs} | "
                       f"{'yes' if r.correct else 'NO'} |")
        v = verdict(rows)
        if v is not None:
            auto, best, met = v
            out += ["", (f"Target (auto >= {TARGET_SHARE:.0%} of the best hand-picked throughput, {w.latency_label} "
                         f"no worse): auto {_fmt(auto.rate)} = {auto.rate / best.rate:.0%} of {best.setting}'s "
                         f"{_fmt(best.rate)}, latency {_fmt(auto.latency, 3)} against {_fmt(best.latency, 3)}: "
                         f"**{'met' if met else 'not met'}**.")]
    return "\n".join(out)


def _records_rate(records: list[dict[str, Any]]) -> str:
    """W4's rate(s) in ``records``, for the table's title."""
    rates = sorted({r.get("target_rate") for r in records if r.get("workload") == "W4"}, key=str)
    return ", ".join(f"{x:,.0f}" if isinstance(x, (int, float)) else str(x) for x in rates)


METHOD = (
    "`python -m bench tuner` runs W1 (acking on) and W4 (a fixed rate, the same for every setting: half of "
    "W3's peak, measured once first) with `topology.max.spout.pending` 100, 1,000, 10,000 and `auto` (the "
    "tuner, [concepts.md](concepts.md#the-max-spout-pending-tuner)), each run in a fresh interpreter, "
    "interleaved round by round, and keeps the records in `bench/results/tuner.jsonl`; this section shows "
    "its newest run (`bench/tuner.py`). The tuner starts each run from `topology.max.spout.pending.auto.min` "
    "(16), so its figures include the climb. The target (issue 16): `auto` reaches at least 90% of the best "
    "hand-picked throughput with a latency no worse than that setting's (W1 measures only the mean complete "
    "latency; W4 the p99).")


def section(lines: list[dict[str, Any]]) -> str:
    """docs/benchmarks.md's section: the newest run of ``lines`` (``bench/results/tuner.jsonl``)."""
    runs = [str(r["tuner_run"]) for r in lines if r.get("tuner_run")]
    if not runs:
        return METHOD + "\n\nNot measured yet: `python -m bench tuner`."
    newest = [r for r in lines if r.get("tuner_run") == max(runs)]
    return METHOD + "\n\n" + table(newest)


def main(host: str, workers: int, n: int, w4_rate: str, secs: float, warmup: float, rounds: int,
         settings: list[str], no_save: bool) -> int:
    """The command: run everything, then print the table."""
    records = run(host, workers, n, w4_rate, secs, warmup, rounds, settings, None if no_save else RESULTS_FILE)
    print()
    print(table(records))
    return 0 if all(r.get("correct") for r in records) else 1
