"""Peers in the same run (issue 14, item 4): W1 on the same corpus bytes with the baseline loop,
squall (LocalCluster, acking on and off), Bytewax and Spark Structured Streaming (SQL split and
Python UDF split), interleaved round by round, every run checked against the same reference
counts.

    python -m bench peers [--n N] [--rounds R] [--no-save]

Each system runs in a fresh interpreter per round, in the order of `SYSTEMS`, so a slow moment
of the machine touches a round's systems alike, and no JVM or leftover heap of one run weighs on
the next. squall's runs are `bench.w1_wordcount.run` on the same corpus directory (its wall is
from submit to the last count or ack; its own correctness check); the others are the
project's own scripts in this package (`loop`, `bytewax_w1`, `spark_w1`; each module's docstring
says what is timed), which hand their counts back to this process to be compared with
`bench.corpus.reference_counts`. A system whose library is not installed is left out of every
round with the pip command that installs it. The report is one table per round and a table of
medians: rate in sentences/s, its ratio to the same round's baseline loop (the median of those
per-round ratios), and whether every run was correct.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from .. import harness
from ..corpus import ensure_corpus, reference_counts

PEERS_RESULTS = Path(__file__).resolve().parent.parent / "results" / "peers.jsonl"
_ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class System:
    """One system of the comparison: its row name, how it runs, the module it needs."""

    name: str
    kind: str  # "peer": a script of this package, "squall": `bench.w1_wordcount.run`
    arg: str  # peer: the key of `measure_peer`; squall: the --acking value
    needs: str | None = None  # the importable module it needs
    pip: str | None = None  # the command that installs it


SYSTEMS: tuple[System, ...] = (
    System("baseline loop", "peer", "loop"),
    System("squall LocalCluster, acking on", "squall", "on"),
    System("squall LocalCluster, acking off", "squall", "off"),
    System("Bytewax (count emitted per word, 1 worker)", "peer", "bytewax", "bytewax", "pip install 'bytewax>=0.19'"),
    System("Spark Structured Streaming, SQL split, local[1]", "peer", "spark-sql", "pyspark",
           "pip install 'pyspark>=3.5'"),
    System("Spark Structured Streaming, Python UDF split, local[1]", "peer", "spark-udf", "pyspark",
           "pip install 'pyspark>=3.5'"),
)


@dataclass(frozen=True)
class Result:
    """One system's run in one round."""

    round: int
    system: str
    sentences_per_s: float | None
    ratio: float | None  # to the same round's baseline loop
    correct: bool
    version: str | None = None
    note: str | None = None  # why there is no rate (the run failed)


def measure_peer(key: str, directory: Path) -> tuple[float, dict[str, int], str | None]:
    """Runs one peer script in this process: (seconds, counts, version)."""
    if key == "loop":
        from . import loop
        return loop.measure(directory)
    if key == "bytewax":
        from . import bytewax_w1
        return bytewax_w1.measure(directory)
    if key in ("spark-sql", "spark-udf"):
        from . import spark_w1
        return spark_w1.measure(directory, split=key.split("-")[1])
    raise ValueError(f"peer {key!r}: expected loop, bytewax, spark-sql or spark-udf")


def missing(system: System, find_spec: Callable[[str], object] = importlib.util.find_spec) -> str | None:
    """Why ``system`` cannot run here (its library is not installed, and the pip command), or None."""
    if system.needs is None or find_spec(system.needs) is not None:
        return None
    return f"{system.needs} is not installed: {system.pip}"


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH")) if p)
    return env


def _run_child(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=_ROOT,
                          env=_child_env(), timeout=timeout)


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def run_system(system: System, n: int, directory: Path, reference: dict[str, int],
               timeout: float = 1800.0) -> tuple[float | None, bool, str | None, str | None]:
    """One run of ``system`` in a fresh interpreter: (sentences/s or None, correct, version, note)."""
    with tempfile.TemporaryDirectory(prefix="squall-bench-peers-") as tmp:
        out = Path(tmp) / "out.json"
        key = f"squall-{system.arg}" if system.kind == "squall" else system.arg
        proc = _run_child(["-m", "bench.peers", key, str(directory), str(out)], timeout)
        if proc.returncode != 0 or not out.exists():
            return None, False, None, f"exit {proc.returncode}: {_tail(proc.stderr)}"
        data = json.loads(out.read_text(encoding="utf-8"))
    if system.kind == "squall":
        record = data["record"]
        return record["sentences_per_s"], bool(record.get("correct")), record.get("squall_commit"), None
    return n / data["wall_s"], data["counts"] == reference, data["version"], None


def run(n: int = 1_000_000, rounds: int = 3, systems: tuple[System, ...] = SYSTEMS,
        corpus_dir: str | Path | None = None, echo: Callable[[str], None] | None = print,
        ) -> tuple[list[Result], dict[str, str]]:
    """Every runnable system once per round, interleaved; returns the results and, for each system
    left out, why (its pip command). ``echo`` gets each round's table as it ends."""
    directory = ensure_corpus(n, corpus_dir)
    reference = reference_counts(directory)
    skipped = {s.name: why for s in systems if (why := missing(s)) is not None}
    results: list[Result] = []
    for r in range(1, rounds + 1):
        this_round: list[Result] = []
        base_rate = None
        for system in systems:
            if system.name in skipped:
                continue
            rate, correct, version, note = run_system(system, n, directory, reference)
            if system.kind == "peer" and system.arg == "loop":
                base_rate = rate
            ratio = round(rate / base_rate, 4) if rate is not None and base_rate else None
            this_round.append(Result(r, system.name, None if rate is None else round(rate, 1), ratio, correct,
                                     version, note))
        results.extend(this_round)
        if echo is not None:
            echo(f"\nRound {r} of {rounds}, N = {n:,}\n\n{round_table(this_round)}")
    return results, skipped


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def round_table(results: list[Result]) -> str:
    """One round: system, sentences/s, ratio to that round's loop, correct."""
    rows = [[r.system, _rate(r.sentences_per_s), _ratio(r.ratio), "yes" if r.correct else "NO"
             + (f" ({r.note})" if r.note else "")] for r in results]
    return _table(["system", "sentences/s", "x loop", "correct"], rows)


def median_rows(results: list[Result]) -> list[tuple[str, float | None, float | None, bool, int]]:
    """Per system, in first-seen order: (name, median rate, median per-round ratio, all correct, runs)."""
    names = list(dict.fromkeys(r.system for r in results))
    rows = []
    for name in names:
        mine = [r for r in results if r.system == name]
        rates = [r.sentences_per_s for r in mine if r.sentences_per_s is not None]
        ratios = [r.ratio for r in mine if r.ratio is not None]
        rows.append((name, statistics.median(rates) if rates else None,
                     statistics.median(ratios) if ratios else None, all(r.correct for r in mine), len(mine)))
    return rows


def median_table(results: list[Result], skipped: dict[str, str] | None = None) -> str:
    """The medians over rounds (rate, per-round ratio), every run correct or not, and the systems
    left out with why."""
    rows = [[name, _rate(rate), _ratio(ratio), "yes" if ok else "NO", str(runs)]
            for name, rate, ratio, ok, runs in median_rows(results)]
    rows += [[name, "-", "-", f"not run: {why}", "0"] for name, why in (skipped or {}).items()]
    return _table(["system", "sentences/s (median)", "x loop (median of rounds)", "correct (every round)",
                   "runs"], rows)


def save(results: list[Result], skipped: dict[str, str], n: int, load_before: float,
         path: Path = PEERS_RESULTS) -> None:
    """Appends one line per result, each with the run's common fields (when, where, N, the load)."""
    env = harness.finish_record({"workload": "PEERS", "peak_rss_mb": None})
    common = {k: env[k] for k in ("timestamp", "squall_commit", "python_version", "loadavg_1m")}
    common.update(n=n, cpus=os.cpu_count(), loadavg_1m_before=round(load_before, 2))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        for r in results:
            f.write(json.dumps({**common, **asdict(r)}) + "\n")
        for name, why in skipped.items():
            f.write(json.dumps({**common, "system": name, "skipped": why}) + "\n")


def main(n: int, rounds: int, no_save: bool) -> int:
    """``python -m bench peers``: runs, prints the medians, saves unless ``no_save``."""
    load = os.getloadavg()
    load_before = load[0]
    print(f"W1 peers, N = {n:,}, {rounds} round(s), load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    results, skipped = run(n, rounds)
    for name, why in skipped.items():
        print(f"left out: {name}: {why}")
    print(f"\nMedians over {rounds} round(s), N = {n:,}\n\n{median_table(results, skipped)}")
    load = os.getloadavg()
    print(f"\nload average after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if not no_save:
        save(results, skipped, n, load_before)
    return 0 if all(r.correct for r in results) else 1
