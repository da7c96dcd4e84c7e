"""``docs/benchmarks.md`` from the results file: pure functions from records to markdown, and the
W4 latency chart.

    python -m bench report --docs docs/benchmarks.md [--results FILE] [--all-commits]

`render_docs` turns a list of records (the lines of ``bench/results/results.jsonl``) into the
whole page; each section has its own function (`w1_table`, `const_table`, `w4_section`,
`memory_section`, `peers_section`, `targets_table`, `profiles_section`) so a test can check one
without the others. `draw_w4_chart` is the only function that needs matplotlib, and imports it
itself: ``python -m bench run`` never loads it. `write_docs` is the only one that reads or
writes files.

Which records count. Runs are grouped by configuration: (workload, host, Spark master, workers,
executors per component) x acking, and for W4 also the rate asked; a group's figures are medians
over its runs. By default a configuration shows only the runs of the squall commit
(``squall_commit``: the last commit that changed ``squall/``) and of the setup (``n``, ``secs``,
``warmup``, ``max_spout_pending``) of its most recent run (newest ``timestamp``); older runs stay
in the results file as history (``all_commits=True`` shows one row per commit and setup).
Records with ``"kind": "median"`` (printed by ``--repeat``, never saved) are ignored.

Field names read (W1-W3: as `bench.w1_wordcount` and `bench.w2_const_null` write them):

- every record: ``workload``, ``host`` ("local", "process", "spark"), ``workers``,
  ``parallelism`` (absent on LocalCluster: 1), ``spark_master``, ``acking`` ("on"/"off"),
  ``squall_commit``, ``timestamp`` (ISO 8601, UTC), ``correct``, ``ratio`` (squall / baseline,
  taken within the run), ``baseline_rate``.
- W1: ``n``, ``sentences_per_s``, ``words_per_s``.
- W2, W3: ``secs``, ``warmup``, ``tuples_per_s`` (acked tuples/s; executed with acking off),
  ``complete_latency_mean_ms``, ``complete_latency_p99_ms``.
- W4 (``"workload": "W4"`` or ``"kind": "W4"``; one record per run at one rate):
  ``target_rate`` (tuples/s asked), ``tuples_per_s`` (achieved: acked tuples/s),
  ``complete_latency_p50_ms``, ``complete_latency_p99_ms``, ``complete_latency_p999_ms``, and,
  for the runs at half of W3's peak, ``peak_fraction`` = 0.5 (absent or null for a fixed rate
  such as 1,000/s). An optional ``rate_label`` (e.g. "1000/s", "half of peak") names the rate;
  runs are grouped by it, else by ``peak_fraction``, else by ``target_rate``.
- MEM (``"workload": "MEM"`` or ``"kind": "MEM"``): any of ``idle_worker_rss_mb``,
  ``idle_cpu_percent`` (percent of one core an idle topology uses), ``acker_bytes_per_pending``,
  ``spout_bytes_per_pending`` (bytes per pending tuple, acker's and spout's), and
  ``acker_bytes_per_spout_tuple`` by tree size k: either a dict ``{"k": bytes}`` in one record
  or one record per k with ``tree_size_k`` and ``acker_bytes_per_spout_tuple`` a number.

`ALIASES` lists other spellings accepted for the W4 and MEM fields.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Record = dict[str, Any]

CHART_NAME = "benchmarks-w4-latency.png"
NOT_MEASURED = "not measured yet"

# Other spellings of the W4 and MEM fields (written while those benchmarks were being built):
# the first name present in a record wins.
ALIASES: dict[str, tuple[str, ...]] = {
    "target_rate": ("target_rate", "rate_asked", "asked_rate", "rate"),
    "tuples_per_s": ("tuples_per_s", "achieved_rate", "rate_achieved"),
    "rate_label": ("rate_label", "rate_name"),
    "peak_fraction": ("peak_fraction", "fraction_of_peak"),
    "idle_worker_rss_mb": ("idle_worker_rss_mb", "idle_rss_mb"),
    "idle_cpu_percent": ("idle_cpu_percent", "idle_cpu_pct", "idle_core_percent"),
    "acker_bytes_per_pending": ("acker_bytes_per_pending", "acker_bytes_per_pending_tuple"),
    "spout_bytes_per_pending": ("spout_bytes_per_pending", "spout_bytes_per_pending_tuple"),
    "acker_bytes_per_spout_tuple": ("acker_bytes_per_spout_tuple", "acker_bytes_by_k"),
    "tree_size_k": ("tree_size_k", "k"),
}


def field(r: Record, name: str) -> Any:
    """``r[name]``, or the first of its `ALIASES` that ``r`` has; None if none."""
    for key in ALIASES.get(name, (name,)):
        if r.get(key) is not None:
            return r[key]
    return None


# --- configurations and selection --------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class Config:
    """Where a run ran: host, Spark master (Spark host only), workers, executors per component."""

    host: str
    workers: int
    parallelism: int
    spark_master: str = ""

    @property
    def label(self) -> str:
        name = {"local": "LocalCluster", "process": "process", "spark": "spark"}.get(self.host, self.host)
        if self.spark_master:
            name += f" {self.spark_master}"
        text = f"{name}, {self.workers} worker{'s' if self.workers != 1 else ''}"
        if self.parallelism != self.workers:
            text += f", {self.parallelism} executors per component"
        return text

    def run_args(self) -> str:
        """The ``python -m bench run`` options that select this configuration."""
        if self.host == "local":
            return ""
        args = f" --host {self.host} --workers {self.workers}"
        if self.parallelism != self.workers:
            args += f" --parallelism {self.parallelism}"
        if self.spark_master and self.spark_master != f"local[{self.workers}]":
            args += f" --spark-master '{self.spark_master}'"
        return args


# The rows every W1-W3 table has, measured or not (BENCHMARKS.md's hosts), in this order.
STANDARD_CONFIGS: tuple[Config, ...] = (
    Config("local", 1, 1),
    Config("process", 1, 1),
    Config("process", 2, 2),
    Config("spark", 2, 2, "local[2]"),
)
ACKINGS = ("on", "off")


def config_of(r: Record) -> Config:
    workers = int(r.get("workers") or 1)
    par = r.get("parallelism")
    return Config(str(r.get("host") or "local"), workers, int(par) if par is not None else workers,
                  str(r.get("spark_master") or ""))


def _setup_of(r: Record) -> tuple:
    """What must match for runs to share one median besides the configuration and commit."""
    return tuple(r.get(k) for k in ("n", "secs", "warmup", "max_spout_pending"))


def is_workload(r: Record, name: str) -> bool:
    """Whether ``r`` is a run of workload ``name`` (not a median line, nor a control such as W1's
    ``--no-crossing``, whose figures are not the workload's)."""
    return (r.get("kind") != "median" and r.get("control") is None
            and (r.get("workload") == name or r.get("kind") == name))


@dataclass
class Group:
    """The runs of one configuration (``key``), one squall commit and one setup."""

    key: tuple
    commit: str
    runs: list[Record]


def select(records: Iterable[Record], key: Callable[[Record], tuple], all_commits: bool = False) -> list[Group]:
    """Groups ``records`` by ``key`` x commit x setup; per key only the commit and setup of its
    newest run (by ``timestamp``) unless ``all_commits``. Sorted by key, then newest first."""
    by_key: dict[tuple, list[Record]] = {}
    for r in records:
        by_key.setdefault(key(r), []).append(r)
    groups = []
    for k, rs in by_key.items():
        parts: dict[tuple, list[Record]] = {}
        for r in rs:
            parts.setdefault((str(r.get("squall_commit") or "?"), _setup_of(r)), []).append(r)
        ordered = sorted(parts.items(), key=lambda kv: max(str(r.get("timestamp", "")) for r in kv[1]),
                         reverse=True)
        for (commit, _), runs in (ordered if all_commits else ordered[:1]):
            groups.append(Group(k, commit, runs))
    groups.sort(key=lambda g: tuple(str(x) for x in g.key))
    return groups


# --- figures --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stat:
    """Median, min and max of one field over runs (those that have it)."""

    median: float
    min: float
    max: float
    n: int


def stat(runs: Sequence[Record], name: str) -> Stat | None:
    vals = [v for v in (field(r, name) for r in runs) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not vals:
        return None
    return Stat(statistics.median(vals), min(vals), max(vals), len(vals))


def median(runs: Sequence[Record], name: str) -> float | None:
    s = stat(runs, name)
    return None if s is None else s.median


def fmt_num(v: float | None, digits: int = 0) -> str:
    """``12,345`` (``digits`` decimals); "-" for None."""
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def fmt_stat(s: Stat | None, digits: int = 0) -> str:
    """``median (min-max)``; the median alone for a single run; "-" for none."""
    if s is None:
        return "-"
    if s.n == 1 or s.min == s.max:
        return fmt_num(s.median, digits)
    return f"{fmt_num(s.median, digits)} ({fmt_num(s.min, digits)}-{fmt_num(s.max, digits)})"


def fmt_ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def fmt_ms(s: Stat | None) -> str:
    if s is None:
        return "-"
    digits = 2 if s.median >= 1 else 3
    return fmt_stat(s, digits)


def _correct(runs: Sequence[Record]) -> str:
    return f"{sum(1 for r in runs if r.get('correct'))}/{len(runs)}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _row_key(r: Record) -> tuple:
    return (config_of(r), str(r.get("acking") or "-"))


def _ordered_rows(groups: list[Group]) -> list[tuple[Config, str, Group | None]]:
    """The standard rows (measured or not) first, then any other configuration measured."""
    out: list[tuple[Config, str, Group | None]] = []
    by_key: dict[tuple, list[Group]] = {}
    for g in groups:
        by_key.setdefault(g.key, []).append(g)
    keys = [(c, a) for c in STANDARD_CONFIGS for a in ACKINGS]
    keys += sorted((k for k in by_key if k not in keys), key=lambda k: (k[0], k[1]))
    for k in keys:
        for g in by_key.get(k, [None]):
            out.append((k[0], k[1], g))
    return out


def _command(workload: str, cfg: Config, acking: str, g: Group | None) -> str:
    cmd = f"python -m bench run {workload} --acking {acking}{cfg.run_args()}"
    r = g.runs[0] if g else {}
    if workload == "W1" and r.get("n") not in (None, 1_000_000):
        cmd += f" --n {r['n']}"
    if workload in ("W2", "W3"):
        if r.get("secs") not in (None, 30, 30.0):
            cmd += f" --secs {r['secs']:g}"
        if r.get("warmup") not in (None, 10, 10.0):
            cmd += f" --warmup {r['warmup']:g}"
    if acking == "on" and r.get("max_spout_pending") not in (None, 1000):
        cmd += f" --max-pending {r['max_spout_pending']}"
    return cmd + " --repeat 3"


def _commands(workload: str, rows: list[tuple[Config, str, Group | None]]) -> str:
    seen: list[str] = []
    for cfg, acking, g in rows:
        cmd = _command(workload, cfg, acking, g)
        if cmd not in seen:
            seen.append(cmd)
    return "Reproduce (each run appends to `bench/results/results.jsonl`):\n\n```\n" + "\n".join(seen) + "\n```"


# --- W1-W3 tables ------------------------------------------------------------------------------------
def w1_table(records: Iterable[Record], all_commits: bool = False) -> str:
    """W1's table: a row per host/workers x acking, then the commands that reproduce it."""
    groups = select([r for r in records if is_workload(r, "W1")], _row_key, all_commits)
    rows = []
    ordered = _ordered_rows(groups)
    for cfg, acking, g in ordered:
        if g is None:
            rows.append([cfg.label, acking, NOT_MEASURED] + ["-"] * 7)
            continue
        n = g.runs[0].get("n")
        rows.append([cfg.label, acking, fmt_num(n), fmt_stat(stat(g.runs, "sentences_per_s")),
                     fmt_stat(stat(g.runs, "words_per_s")), fmt_num(median(g.runs, "baseline_rate")),
                     fmt_ratio(median(g.runs, "ratio")), str(len(g.runs)), _correct(g.runs), f"`{g.commit}`"])
    header = ["host", "acking", "N sentences", "sentences/s median (min-max)", "words/s median (min-max)",
              "baseline sentences/s (median)", "squall/baseline (median)", "runs", "correct", "squall commit"]
    return _table(header, rows) + "\n\n" + _commands("W1", ordered)


def const_table(workload: str, records: Iterable[Record], all_commits: bool = False) -> str:
    """W2's or W3's table: a row per host/workers x acking, then the commands."""
    groups = select([r for r in records if is_workload(r, workload)], _row_key, all_commits)
    rows = []
    ordered = _ordered_rows(groups)
    for cfg, acking, g in ordered:
        if g is None:
            rows.append([cfg.label, acking, NOT_MEASURED] + ["-"] * 8)
            continue
        secs = g.runs[0].get("secs")
        rows.append([cfg.label, acking, "-" if secs is None else f"{secs:g} s",
                     fmt_stat(stat(g.runs, "tuples_per_s")),
                     fmt_ms(stat(g.runs, "complete_latency_mean_ms")),
                     fmt_ms(stat(g.runs, "complete_latency_p99_ms")),
                     fmt_num(median(g.runs, "baseline_rate")), fmt_ratio(median(g.runs, "ratio")),
                     str(len(g.runs)), _correct(g.runs), f"`{g.commit}`"])
    header = ["host", "acking", "window", "tuples/s median (min-max)", "mean complete latency ms",
              "p99 complete latency ms", "baseline tuples/s (median)", "squall/baseline (median)", "runs",
              "correct", "squall commit"]
    return _table(header, rows) + "\n\n" + _commands(workload, ordered)


def peers_section(peer_lines: Sequence[Record]) -> str:
    """The newest ``python -m bench peers`` run of ``peer_lines`` (the lines of
    ``bench/results/peers.jsonl``): when, N, the load, each round's table and the medians."""
    from .peers import median_table, round_table

    stamps = [str(r["timestamp"]) for r in peer_lines if r.get("timestamp")]
    if not stamps:
        return "Not measured yet: `python -m bench peers`."
    run = [r for r in peer_lines if r.get("timestamp") == max(stamps)]
    results = _newest_peer_results(peer_lines)
    skipped = {r["system"]: r["skipped"] for r in run if "skipped" in r}
    first = run[0]
    rounds = sorted({r.round for r in results})
    versions = ", ".join(dict.fromkeys(f"{r.system.split(' (')[0].split(',')[0]} {r.version}" for r in results
                                       if r.version and not r.system.startswith("squall")))
    head = (f"W1, N = {first['n']:,}, {len(rounds)} round(s), run {first['timestamp']} on {first.get('cpus', '?')} "
            f"cores, load average (1 min) {first.get('loadavg_1m_before', '?')} before and "
            f"{first.get('loadavg_1m', '?')} after (other sessions shared the machine); squall commit "
            f"`{first.get('squall_commit')}`; {versions or 'no peer versions'}.")
    parts = [head]
    for n in rounds:
        parts.append(f"Round {n}:\n\n" + round_table([r for r in results if r.round == n]))
    parts.append("Medians over the rounds (the ratio is the median of each round's ratio to that round's "
                 "baseline loop):\n\n" + median_table(results, skipped))
    return "\n\n".join(parts)


# --- W4 ----------------------------------------------------------------------------------------------
def rate_key(r: Record) -> str:
    """The name of a W4 run's rate: its ``rate_label``, else "<f> x W3's peak", else "<rate>/s"."""
    label = field(r, "rate_label")
    if label:
        return str(label)
    frac = field(r, "peak_fraction")
    if frac:
        return "half of W3's peak" if frac == 0.5 else f"{frac:g} x W3's peak"
    rate = field(r, "target_rate")
    return "-" if rate is None else f"{rate:,.0f}/s"


def is_half_peak(r: Record) -> bool:
    frac = field(r, "peak_fraction")
    if frac is not None:
        return abs(float(frac) - 0.5) < 1e-9
    return "half" in str(field(r, "rate_label") or "").lower()


def w4_groups(records: Iterable[Record], all_commits: bool = False) -> list[Group]:
    """W4's runs grouped by configuration x rate (key: (Config, acking, rate name))."""
    runs = [r for r in records if is_workload(r, "W4")]
    return select(runs, lambda r: _row_key(r) + (rate_key(r),), all_commits)


def w4_points(records: Iterable[Record]) -> dict[str, list[tuple[float, float | None, float | None, float | None]]]:
    """Per host/workers label: (achieved tuples/s, p50, p99, p99.9 ms) medians, by achieved rate."""
    out: dict[str, list] = {}
    for g in w4_groups(records):
        x = median(g.runs, "tuples_per_s")
        if x is None:
            continue
        label = g.key[0].label + ("" if g.key[1] in ("on", "-") else f", acking {g.key[1]}")
        out.setdefault(label, []).append((x, median(g.runs, "complete_latency_p50_ms"),
                                          median(g.runs, "complete_latency_p99_ms"),
                                          median(g.runs, "complete_latency_p999_ms")))
    for pts in out.values():
        pts.sort()
    return out


def w4_section(records: Iterable[Record], chart: str | None = None, all_commits: bool = False) -> str:
    """W4's table (rate asked and achieved, p50/p99/p99.9 per host/workers) and the chart's link."""
    groups = w4_groups(records, all_commits)
    if not groups:
        return (f"W4 {NOT_MEASURED}: no W4 record in the results file (a spout emitting at a fixed rate, "
                "1,000/s and half of W3's peak, into the W3 shape; complete latency p50, p99, p99.9).")
    with_base = any(median(g.runs, "ratio") is not None for g in groups)
    rows = []
    for g in groups:
        cfg, acking, rate = g.key
        row = [cfg.label, acking, rate, fmt_stat(stat(g.runs, "target_rate")), fmt_stat(stat(g.runs, "tuples_per_s")),
               fmt_ms(stat(g.runs, "complete_latency_p50_ms")), fmt_ms(stat(g.runs, "complete_latency_p99_ms")),
               fmt_ms(stat(g.runs, "complete_latency_p999_ms"))]
        if with_base:
            row += [fmt_num(median(g.runs, "baseline_rate")), fmt_ratio(median(g.runs, "ratio"))]
        rows.append(row + [str(len(g.runs)), _correct(g.runs), f"`{g.commit}`"])
    header = ["host", "acking", "rate", "asked tuples/s", "achieved tuples/s", "p50 ms median (min-max)",
              "p99 ms median (min-max)", "p99.9 ms median (min-max)"]
    if with_base:
        header += ["baseline tuples/s (median)", "squall/baseline (median)"]
    header += ["runs", "correct", "squall commit"]
    text = _table(header, rows)
    if chart:
        text += (f"\n\n![W4 complete latency (p50, p99, p99.9, log scale) against achieved throughput, "
                 f"per host and workers]({chart})")
    return text


def draw_w4_chart(records: Iterable[Record], path: str | Path) -> bool:
    """Draws W4's complete latency (p50, p99, p99.9; log scale) against achieved throughput, one
    colour per host/workers, into the PNG ``path``. Returns False (and writes nothing) when there
    is no W4 figure to draw. Needs matplotlib (the ``bench`` extra)."""
    points = w4_points(records)
    if not any(any(v is not None for p in pts for v in p[1:]) for pts in points.values()):
        return False
    from matplotlib.figure import Figure  # only here: `python -m bench run` never imports it

    fig = Figure(figsize=(8, 5), dpi=120)
    ax = fig.add_subplot()
    styles = (("p50", 1, "o", "-"), ("p99", 2, "s", "--"), ("p99.9", 3, "^", ":"))
    colours = [f"C{i}" for i in range(10)]
    xs: list[float] = []
    for i, (label, pts) in enumerate(sorted(points.items())):
        for name, col, marker, line in styles:
            sel = [(p[0], p[col]) for p in pts if p[col] is not None and p[col] > 0]
            if not sel:
                continue
            xs += [x for x, _ in sel]
            ax.plot([x for x, _ in sel], [y for _, y in sel], marker=marker, linestyle=line,
                    color=colours[i % len(colours)], label=f"{label}: {name}")
    if xs and min(xs) > 0 and max(xs) / min(xs) > 20:
        ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("achieved throughput (acked tuples/s)")
    ax.set_ylabel("complete latency (ms, log scale)")
    ax.set_title("W4: complete latency against throughput (medians of runs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(str(path), format="png")
    return True


# --- memory --------------------------------------------------------------------------------------------
MEM_FIELDS = (
    ("idle_worker_rss_mb", "idle worker RSS MB", 1),
    ("idle_cpu_percent", "idle topology CPU % of a core", 2),
    ("acker_bytes_per_pending", "acker bytes per pending tuple", 0),
    ("spout_bytes_per_pending", "spout bytes per pending tuple", 0),
)


def _by_k(runs: Sequence[Record]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for r in runs:
        v = field(r, "acker_bytes_per_spout_tuple")
        if isinstance(v, dict):
            for k, b in v.items():
                if isinstance(b, (int, float)):
                    out.setdefault(int(k), []).append(b)
        elif isinstance(v, (int, float)) and field(r, "tree_size_k") is not None:
            out.setdefault(int(field(r, "tree_size_k")), []).append(v)
    return out


def memory_section(records: Iterable[Record], all_commits: bool = False) -> str:
    """Idle worker RSS (and CPU), acker and spout bytes per pending tuple per host/workers, and
    acker bytes per spout tuple by tree size k; "not measured yet" without MEM records."""
    runs = [r for r in records if is_workload(r, "MEM")]
    if not runs:
        return (f"Memory {NOT_MEASURED}: no MEM record in the results file (idle worker RSS, acker and "
                "spout bytes per pending tuple, acker bytes per spout tuple by tree size k).")
    groups = select(runs, lambda r: (config_of(r),), all_commits)
    rows = []
    for g in groups:
        rows.append([g.key[0].label] + [fmt_stat(stat(g.runs, name), digits) for name, _, digits in MEM_FIELDS]
                    + [str(len(g.runs)), f"`{g.commit}`"])
    text = _table(["host"] + [title for _, title, _ in MEM_FIELDS] + ["runs", "squall commit"], rows)
    by_cfg = {g.key[0].label: _by_k(g.runs) for g in groups}
    ks = sorted({k for d in by_cfg.values() for k in d})
    if ks:
        labels = [label for label, d in by_cfg.items() if d]
        k_rows = [[str(k)] + [fmt_num(statistics.median(by_cfg[lab][k])) if k in by_cfg[lab] else "-"
                              for lab in labels] for k in ks]
        text += ("\n\nAcker bytes per spout tuple by tree size k (tuples in the tuple tree), median:\n\n"
                 + _table(["k"] + labels, k_rows))
    else:
        text += f"\n\nAcker bytes per spout tuple by tree size k: {NOT_MEASURED}."
    return text


# --- targets ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TargetRow:
    target: str
    configuration: str
    figure: str
    met: bool | None  # None: not measured yet
    scaled: str = "-"  # W1: the figure carried over to the machine the targets were set on
    met_scaled: bool | None = None


# BENCHMARKS.md's targets were set on a machine where the hand-written W1 loop ran 949k
# sentences/s. This machine's speed varies from day to day (the baseline in the same runs says by
# how much), so W1's figures are also shown as ratio x 949k: the rate squall would have had there.
W1_BASELINE_WHEN_TARGETS_SET = 949_000


def _latest(records: Sequence[Record], workload: str) -> dict[tuple, Group]:
    return {g.key: g for g in select([r for r in records if is_workload(r, workload)], _row_key)}


def _newest_peer_results(peer_lines: Sequence[Record]) -> list:
    """The `bench.peers.Result`s of the newest ``python -m bench peers`` run in ``peer_lines``."""
    from .peers import Result

    stamps = [str(r["timestamp"]) for r in peer_lines if r.get("timestamp")]
    if not stamps:
        return []
    return [Result(r["round"], r["system"], r["sentences_per_s"], r["ratio"], r["correct"], r.get("version"),
                   r.get("note")) for r in peer_lines if r.get("timestamp") == max(stamps) and "round" in r]


def _bytewax_row(peer_lines: Sequence[Record], acking: str, floor: float) -> TargetRow:
    """W1 on one worker (LocalCluster) against Bytewax, from the newest ``python -m bench peers``
    run: the median over its rounds of squall's rate over Bytewax's in the same round."""
    target = f"W1 on one worker, acking {acking}: >= {floor:g} x Bytewax, in the same run"
    by_round: dict[int, dict[str, float]] = {}
    for r in _newest_peer_results(peer_lines):
        if r.sentences_per_s is not None and r.correct:
            by_round.setdefault(r.round, {})[r.system] = r.sentences_per_s
    squall = f"squall LocalCluster, acking {acking}"
    ratios = [rates[squall] / rates[b] for rates in by_round.values() for b in rates
              if b.startswith("Bytewax") and squall in rates]
    if not ratios:
        return TargetRow(target, "LocalCluster, 1 worker", NOT_MEASURED, None)
    ratio = statistics.median(ratios)
    return TargetRow(target, "LocalCluster / Bytewax, 1 worker each",
                     f"{ratio:.2f} x (median of {len(ratios)} round(s))", ratio >= floor)


def target_rows(records: Iterable[Record], peer_lines: Sequence[Record] = ()) -> list[TargetRow]:
    """Each target of BENCHMARKS.md against this report's figures (medians of the latest commit),
    and, for the peers, of the newest ``python -m bench peers`` run (``peer_lines``)."""
    records = list(records)
    w1, w2 = _latest(records, "W1"), _latest(records, "W2")
    one_worker = [c for c in STANDARD_CONFIGS if c.workers == 1]
    out: list[TargetRow] = []

    def at_least(target: str, groups: dict[tuple, Group], cfgs: Sequence[Config], acking: str, name: str,
                 floor: float, unit: str) -> None:
        for cfg in cfgs:
            g = groups.get((cfg, acking))
            v = None if g is None else median(g.runs, name)
            ratio = None if g is None or name != "sentences_per_s" else median(g.runs, "ratio")
            scaled = None if ratio is None else ratio * W1_BASELINE_WHEN_TARGETS_SET
            out.append(TargetRow(target, f"{cfg.label}, acking {acking}",
                                 NOT_MEASURED if v is None else f"{fmt_num(v)} {unit}",
                                 None if v is None else v >= floor,
                                 "-" if scaled is None else f"{fmt_num(scaled)} {unit}",
                                 None if scaled is None else scaled >= floor))

    w3 = _latest(records, "W3")
    for workload, groups, name, floor in (("W1", w1, "sentences_per_s", 1.5), ("W3", w3, "tuples_per_s", 1.8)):
        unit = "sentences/s" if workload == "W1" else "tuples/s"
        target = f"{workload} on 2 workers, acking on: >= {floor:g} x the one-worker figure"
        for two in (c for c in STANDARD_CONFIGS if c.workers == 2):
            # the same host's one-worker figure; LocalCluster's where that host has none
            one = Config(two.host, 1, 1, "local[1]" if two.spark_master else "")
            if (one, "on") not in groups:
                one = Config("local", 1, 1)
            g1, g2 = groups.get((one, "on")), groups.get((two, "on"))
            v2 = None if g2 is None else median(g2.runs, name)
            v1 = None if g1 is None else median(g1.runs, name)
            conf = f"{two.label} / {one.label}"
            if v1 is None or v2 is None:
                out.append(TargetRow(target, conf, NOT_MEASURED, None))
            else:
                machine = median(g2.runs, "machine_parallelism")
                control = "" if machine is None else f"; plain Python in 2 processes at once: {machine:.2f} x"
                out.append(TargetRow(target, conf,
                                     f"{v2 / v1:.2f} x ({fmt_num(v2)} / {fmt_num(v1)} {unit}{control})",
                                     v2 / v1 >= floor))
    for acking, floor in (("on", 1.3), ("off", 2.0)):
        out.append(_bytewax_row(peer_lines, acking, floor))
    at_least("W2 on one worker, one acker: >= 300,000 acked tuples/s", w2, one_worker, "on",
             "tuples_per_s", 300_000, "tuples/s")
    at_least("W2 on one worker, acking off: >= 500,000 tuples/s", w2, one_worker, "off",
             "tuples_per_s", 500_000, "tuples/s")

    half = [g for g in w4_groups(records) if g.key[1] != "off" and any(is_half_peak(r) for r in g.runs)]
    for workers, ceiling in ((1, 2.0), (2, 10.0)):
        target = (f"W4 at half of peak on {workers} worker{'s' if workers > 1 else ''}: "
                  f"p99 complete latency <= {ceiling:g} ms")
        gs = [g for g in half if g.key[0].workers == workers]
        if not gs:
            out.append(TargetRow(target, "-", NOT_MEASURED, None))
        for g in gs:
            v = median(g.runs, "complete_latency_p99_ms")
            out.append(TargetRow(target, g.key[0].label, NOT_MEASURED if v is None else f"{v:.2f} ms",
                                 None if v is None else v <= ceiling))

    idle = [g for g in select([r for r in records if is_workload(r, "MEM")], lambda r: (config_of(r),))
            if median(g.runs, "idle_cpu_percent") is not None]
    if not idle:
        out.append(TargetRow("An idle topology: < 2% of a core", "-", NOT_MEASURED, None))
    for g in idle:
        v = median(g.runs, "idle_cpu_percent")
        out.append(TargetRow("An idle topology: < 2% of a core", g.key[0].label, f"{v:.2f}% of a core", v < 2.0))

    w5 = {}  # host -> its newest W5 run
    for r in sorted((r for r in records if is_workload(r, "W5")), key=lambda r: str(r.get("timestamp", ""))):
        w5[config_of(r).label] = r
    if not w5:
        out.append(TargetRow("W5: throughput back to its level within 5 s of each kill", "-", NOT_MEASURED, None))
        out.append(TargetRow("W5: zero event ids lost", "-", NOT_MEASURED, None))
    for label, r in w5.items():
        times = [k.get("recovery_s") for k in r.get("per_kill", [])]
        if not times or None in times:  # a kill after which the rate never came back
            out.append(TargetRow("W5: throughput back to its level within 5 s of each kill", label,
                                 f"not back after {times.count(None)} of {len(times)} kills", False))
        else:
            out.append(TargetRow("W5: throughput back to its level within 5 s of each kill", label,
                                 f"{max(times):.1f} s (slowest of {len(times)} kills)", max(times) <= 5.0))
        out.append(TargetRow("W5: zero event ids lost", label,
                             f"{r.get('missing')} missing of {r.get('fed'):,} fed", r.get("missing") == 0))
    return out


def targets_table(records: Iterable[Record], peer_lines: Sequence[Record] = ()) -> str:
    def met(v: bool | None) -> str:
        return NOT_MEASURED if v is None else ("met" if v else "**not met**")

    def met_scaled(t: TargetRow) -> str:
        return "-" if t.scaled == "-" else met(t.met_scaled)

    return (_table(["target (BENCHMARKS.md)", "configuration", "our figure", "met",
                    "ratio x 949k (the targets' machine)", "met there"],
                   ([t.target, t.configuration, t.figure, met(t.met), t.scaled, met_scaled(t)]
                    for t in target_rows(records, peer_lines)))
            + "\n\nThe targets were set on a machine where the hand-written W1 loop ran "
              f"{W1_BASELINE_WHEN_TARGETS_SET:,} sentences/s (BENCHMARKS.md). On the days these runs were "
              "made the same loop ran slower here (see the baseline column of the W1 table), so for W1 the "
              "last two columns carry squall's per-run ratio to the baseline over to that machine.")


# --- profiles -------------------------------------------------------------------------------------
def profiles_section(profiles: Sequence[tuple[str, str]]) -> str:
    """The profile notes (``docs/profiles/*.md``: where the time goes for targets not met),
    each included verbatim after a line naming its file."""
    if not profiles:
        return "No profile yet (`docs/profiles/*.md`)."
    parts = []
    for name, text in profiles:
        parts.append(f"From `docs/profiles/{name}`:\n\n{text.rstrip()}\n")
    return "\n".join(parts).rstrip()


# --- the page ----------------------------------------------------------------------------------------
METHOD = """\
- **Machine**: 2 cores and 24 GiB of memory, shared with other work and noisy. Every record
  carries the 1-minute load average (`loadavg_1m`) and, where measured, the CPU seconds the rest
  of the machine used during the run (`other_cpu_s`).
- **Medians**: each figure is the median of N runs (the table's "runs"), with the minimum and
  maximum in brackets. `python -m bench run ... --repeat N` runs each repetition in a fresh
  interpreter.
- **Baselines and ratios**: each run also times the hand-written baseline (a plain Python loop
  doing the same work) on the same input, in the same process run. The ratio squall / baseline
  is taken within each run, and the table gives the median of those per-run ratios, so it is
  not the quotient of the two medians shown beside it: a slow moment of the machine slows both
  halves of one run alike.
- **Which runs**: `squall_commit` is the last commit that changed `squall/` (`+dirty` when it had
  uncommitted changes). Each row shows only the runs of the most recent commit measured for its
  configuration, and of the setup (N, window, max pending) of its newest run; older runs stay in
  `bench/results/results.jsonl` as history (`--all-commits` shows them).
- **What is measured**: W1 from the spout's `open` to its last ack (acking on) or the count
  bolt's last `execute` (acking off); W2/W3 over a window after a warm-up, the rate from the
  spout's acked counter (executed by the last bolt with acking off), the mean complete latency
  from squall's counters and p99 from the spout's own samples of every 16th tuple. See the
  docstrings of `bench/w1_wordcount.py` and `bench/w2_const_null.py`.
- **Hosts**: LocalCluster (1 worker, in the benchmark's process); the process host (a throwaway
  master and supervisor with 1 or 2 worker processes, one executor per component per worker);
  Spark `local[2]` (2 workers, each a Spark task). A dash or "not measured yet" is a figure that
  no run has produced.
- **What the machine gives two processes**: its cores are virtual and shared, and two CPU-bound
  Python processes at once got from 0.97x to 1.78x of one within a minute (2026-11-25). So a
  run on 2 workers also times its baseline in 2 processes at once, right after it
  (`machine_parallelism`: 2.0 when both got a whole core), and the scaling targets show that
  figure beside squall's 2-worker / 1-worker ratio.
- **What two workers give W1 when no word crosses**: `python -m bench run W1 --host process|spark
  --workers 2 --no-crossing` runs the control, the count bolt on a local-or-shuffle grouping
  instead of the fields grouping (each count task counts some of every word; the merged counts
  are checked as W1's). Its rate over one worker's is what the engine's second worker gives
  W1 when the crossings cost nothing: a ceiling for the 2-worker ratio closer than
  `machine_parallelism`. Its records say `"control": "no-crossing"` and stay out of the tables."""


PEERS_METHOD = (
    "`python -m bench peers` runs W1 on the same corpus bytes with every system below, interleaved: in each "
    "round the baseline loop, squall on LocalCluster (acking on, then off), Bytewax and Spark Structured "
    "Streaming (SQL split, then Python UDF split), each in a fresh interpreter; each system's counts are "
    "checked against the corpus's reference counts (a mismatch or a failed run is \"NO\"). The peers' "
    "scripts are the project's own, in `bench/peers/` (each one's docstring says what is timed): Bytewax "
    "emits the running count per word, as squall's count bolt does, one worker; Spark reads the files as "
    "a file stream in micro-batches of 10 files (100,000 sentences), `local[1]`, one shuffle partition, "
    "`groupBy(word).count()` in complete mode to a memory sink, trigger `availableNow`, timed from the "
    "query's start to its end (the JVM is started before the clock; at small N its start-up and warm-up "
    "weigh heavily). squall's figure is `bench.w1_wordcount.run` (from submit to the last count or ack). "
    "Compare systems only within one run: the tables below come from one session, the figures carried "
    "over from other days are gone.")


def render_docs(records: Iterable[Record], profiles: Sequence[tuple[str, str]] = (), chart: str | None = None,
                all_commits: bool = False, results_name: str = "bench/results/results.jsonl",
                peer_lines: Sequence[Record] = (), tuner_lines: Sequence[Record] = ()) -> str:
    """The whole of ``docs/benchmarks.md`` from ``records``; ``profiles`` are (file name, text)
    pairs, ``chart`` the W4 chart's link (None: not drawn), ``peer_lines`` the lines of
    ``bench/results/peers.jsonl``, ``tuner_lines`` those of ``bench/results/tuner.jsonl``."""
    from . import tuner

    records = [r for r in records if r.get("kind") != "median"]
    stamps = [str(r["timestamp"]) for r in records if r.get("timestamp")]
    pythons = sorted({str(r["python_version"]) for r in records if r.get("python_version")})
    newest = f"newest record {max(stamps)}" if stamps else "no record yet"
    sections = [
        "# squall benchmarks",
        f"Generated by `python -m bench report --docs docs/benchmarks.md` from `{results_name}` "
        f"({len(records)} records, {newest}; Python {', '.join(pythons) or '-'}). Do not edit by hand: "
        "edit `bench/report.py` and regenerate. The workloads and targets are those of BENCHMARKS.md.",
        "## How the figures were made\n\n" + METHOD,
        "## W1 wordcount\n\nSentences/s and words/s over N sentences of the W1 corpus (10 words each); the "
        "baseline is one Python loop over the same files (split, dict increment).\n\n" + w1_table(records, all_commits),
        "### Peers in the same run\n\n" + PEERS_METHOD + "\n\n" + peers_section(peer_lines),
        "## W2 const-null\n\nSpout -> bolt that acks (local-or-shuffle). Acked tuples/s with acking on, "
        "executed tuples/s with acking off; latencies with acking on only.\n\n"
        + const_table("W2", records, all_commits),
        "## W3 const-id-null\n\nSpout -> bolt that emits an anchored copy and acks -> bolt that acks. Same "
        "figures as W2.\n\n" + const_table("W3", records, all_commits),
        "## W4 latency\n\nA spout emits at a fixed rate (1,000/s, and half of W3's peak) into the W3 shape; "
        "complete latency p50, p99, p99.9.\n\n" + w4_section(records, chart, all_commits)
        + "\n\nReproduce: see `bench/w4_latency.py`.",
        "## Max spout pending tuner\n\n" + tuner.section(list(tuner_lines)),
        "## Memory\n\n" + memory_section(records, all_commits)
        + "\n\nReproduce: see `bench/memory.py`.",
        "## Targets\n\nEach target of BENCHMARKS.md against the medians above (a benchmark's figures, never a "
        "test's assertion). A 2-worker ratio divides the medians of runs interleaved with each other when they were "
        "made so (`docs/benchmarks.md` says how each was made).\n\n" + targets_table(records, peer_lines),
        "## Profiles\n\nWhere the time goes for targets not met (`docs/profiles/*.md`, included verbatim).\n\n"
        + profiles_section(profiles),
    ]
    return "\n\n".join(sections) + "\n"


def read_profiles(directory: Path) -> list[tuple[str, str]]:
    """(name, text) of each ``*.md`` in ``directory``, by name; none if it does not exist."""
    if not directory.is_dir():
        return []
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.md"))]


def write_docs(records: Sequence[Record], docs: Path, chart: Path | None = None, profiles_dir: Path | None = None,
               all_commits: bool = False, results_name: str = "bench/results/results.jsonl",
               peer_lines: Sequence[Record] = (), tuner_lines: Sequence[Record] = ()) -> list[Path]:
    """Draws the W4 chart (``chart``, default ``CHART_NAME`` beside ``docs``) if there is W4 data,
    then writes the page; returns the paths written. Profiles come from ``profiles_dir`` (default
    ``profiles/`` beside ``docs``)."""
    docs = Path(docs)
    # W5's runs are kept beside the page (docs/resilience.md plots them), not in the results file
    records = list(records) + [json.loads(p.read_text(encoding="utf-8"))
                               for p in sorted(docs.parent.glob("resilience-w5-*.json"))]
    chart = Path(chart) if chart is not None else docs.parent / CHART_NAME
    profiles_dir = Path(profiles_dir) if profiles_dir is not None else docs.parent / "profiles"
    docs.parent.mkdir(parents=True, exist_ok=True)
    written = []
    link = None
    if w4_points(records):
        try:
            drawn = draw_w4_chart(records, chart)
        except ImportError as e:
            raise SystemExit(f"drawing the W4 chart needs matplotlib: pip install -e '.[bench]' ({e})") from e
        if drawn:
            written.append(chart)
            try:
                link = chart.resolve().relative_to(docs.parent.resolve()).as_posix()
            except ValueError:
                link = chart.resolve().as_posix()
    docs.write_text(render_docs(records, read_profiles(profiles_dir), link, all_commits, results_name, peer_lines,
                                tuner_lines), encoding="utf-8")
    written.insert(0, docs)
    return written
