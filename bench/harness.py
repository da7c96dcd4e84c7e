"""What every benchmark run shares: measuring, polling a topology, the sample registry, results.

A run measures one interval with a `Meter` (wall clock, CPU seconds of this process, peak RSS),
builds one flat dict (`base_record` plus the workload's figures), prints it as one JSON line and
appends it to ``bench/results/results.jsonl`` (`emit_record`). `median_record` folds several
runs of one configuration into one line, and `report` prints the table of medians.

Caveats, written into every record where they apply:
- ``cpu_s`` is the CPU time (user + system) of the whole process over the measured interval:
  every squall loop thread plus the main thread's polling, and nothing else (the baseline is
  timed apart). On a busy machine ``cpu_s`` < ``wall_s`` means the loop was waiting for a core.
- ``peak_rss_mb`` is ``ru_maxrss`` read when the measured interval ends: the peak of the whole
  process since it started. ``python -m bench run --repeat`` runs each repetition in a fresh
  interpreter, so it is each run's own; with ``--in-process`` it never goes down from one run
  to the next. W2/W3 with acking on include the latency samples, 16 bytes per sampled tuple.
- On the process host (``host: "process"``, `bench.hosts`) the work runs in worker processes:
  ``cpu_s`` is the sum of their CPU seconds over the measured interval (``worker_cpu_s`` per
  worker; the master's and supervisor's apart) and ``peak_rss_mb`` the largest worker's peak
  (``VmHWM``; ``worker_peak_rss_mb`` per worker), both read from ``/proc``. The same holds on
  the Spark host (``host: "spark"``, with ``spark_master``), whose worker processes are Spark's
  Python workers; its master is the benchmark's own process (the driver), and Spark's JVM is
  given apart (``spark_jvm_cpu_s``, ``spark_jvm_peak_rss_mb``).
- A run on more than one worker process also times its baseline in as many processes at once
  (``machine_parallelism``, `machine_parallelism`): how many times one process's work the
  machine did for plain Python in that round, the ceiling of any 2-worker / 1-worker ratio then.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import gc
import json
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import squall

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "results.jsonl"

POLL_SECS = 0.25
"""How often a run polls `get_topology_info`: rare enough to steal no measurable CPU."""

FINE_POLL_SECS = 0.02
"""Poll interval once a run is nearly done, so the end is detected within ~20 ms, not 250."""

# The thresholds Python started with; baselines run under them (see `default_gc`).
_STARTUP_GC = gc.get_threshold()


# --- measuring ------------------------------------------------------------------------------------
def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all threads)."""
    t = os.times()
    return t.user + t.system


def machine_busy_seconds() -> float | None:
    """CPU seconds every core of the machine has spent busy (not idle, not waiting for I/O) since
    boot, from ``/proc/stat``; None where there is none. The delta over a run, less what the run's
    own processes used, is what other programs took from it (``other_cpu_s``): the machines are
    shared, and a run that other load overlapped shows it there."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def peak_rss_mb() -> float:
    """Peak resident set of this process since it started, in MB (Linux reports ru_maxrss in KB)."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":  # bytes there
        kb /= 1024
    return kb / 1024.0


class Meter:
    """Wall and CPU time of an interval: ``start()``, then ``stop()``; or use as a context manager.

    ``stop()`` also reads the peak RSS (``rss_mb``), so what the benchmark allocates afterwards
    to analyse the run (percentiles, count checks) does not count against this run.
    """

    def __init__(self) -> None:
        self.wall0 = self.cpu0 = 0.0
        self.wall = self.cpu = 0.0
        self.rss_mb = 0.0
        self.machine0: float | None = None
        self.machine: float | None = None

    def start(self) -> Meter:
        self.wall0 = time.perf_counter()
        self.cpu0 = cpu_seconds()
        self.machine0 = machine_busy_seconds()
        return self

    def stop(self) -> Meter:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = cpu_seconds() - self.cpu0
        self.rss_mb = peak_rss_mb()
        end = machine_busy_seconds()
        self.machine = None if end is None or self.machine0 is None else end - self.machine0
        return self

    @property
    def other_cpu(self) -> float | None:
        """CPU seconds the rest of the machine used over the interval (see `machine_busy_seconds`)."""
        return None if self.machine is None else round(max(0.0, self.machine - self.cpu), 2)

    def __enter__(self) -> Meter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class default_gc:
    """Context manager: run under the GC thresholds Python started with, then restore.

    squall's workers raise the process-wide thresholds (``topology.worker.gc.thresholds``) and
    LocalCluster never lowers them again, so without this a baseline timed after a squall run
    would get squall's tuning and one timed before it would not. Baselines are plain Python loops,
    so they always run with Python's defaults.
    """

    def __enter__(self) -> None:
        self._saved = gc.get_threshold()
        gc.collect()
        gc.set_threshold(*_STARTUP_GC)

    def __exit__(self, *exc: object) -> None:
        gc.set_threshold(*self._saved)


def time_baseline(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Runs ``fn`` once under Python's default GC thresholds; returns (seconds, its result)."""
    with default_gc():
        t0 = time.perf_counter()
        result = fn()
        return time.perf_counter() - t0, result


def machine_parallelism(fn: Callable[[], Any], copies: int, alone_s: float) -> float:
    """How many times one process's work this machine does when ``copies`` processes each run
    ``fn`` at once (started together, forked from this one), given ``alone_s``, the seconds
    ``fn`` took alone (`time_baseline`): ``copies * alone_s / (seconds until the last finished)``.

    The control for a scaling figure: this machine's cores are virtual, and two CPU-bound
    processes at once got anywhere from 0.97x to 1.78x of one within a minute (2026-11-25), so
    a topology's 2-worker / 1-worker ratio is read against what the machine gave plain Python in
    the same round.
    """
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(copies + 1)
    walls = ctx.SimpleQueue()
    procs = [ctx.Process(target=_timed_copy, args=(fn, start, walls), daemon=True) for _ in range(copies)]
    for p in procs:
        p.start()
    start.wait()
    longest = max(walls.get() for _ in procs)
    for p in procs:
        p.join()
    return copies * alone_s / longest


def _timed_copy(fn: Callable[[], Any], start: Any, walls: Any) -> None:
    """`machine_parallelism`'s child: wait for the others, run ``fn``, report its seconds."""
    start.wait()
    walls.put(time_baseline(fn)[0])


# --- the sample registry ------------------------------------------------------------------------------
# squall copies each component per task (cloudpickle), so a spout cannot hand the benchmark an
# object. It keeps its samples here instead, under a key the benchmark passes in the component's
# configuration; the benchmark reads them from the same process. This only works where the spout
# runs in the benchmark's process: LocalCluster, which is the only host these runs use.
# Samples are two flat ``array('d')`` (times, values), not a list of tuples: 16 bytes a sample
# instead of about 100, and nothing for the garbage collector to walk (a list of 500k float
# tuples measurably lengthened full collections, and so the p99 it was measuring).
_registry_lock = threading.Lock()
_registry: dict[str, Samples] = {}


class Samples:
    """Timestamped samples: ``add(t, v)`` from the producer's thread; `snapshot` from any other."""

    __slots__ = ("times", "values")

    def __init__(self) -> None:
        self.times = array("d")
        self.values = array("d")

    def add(self, t: float, v: float) -> None:
        self.times.append(t)
        self.values.append(v)

    def between(self, start: float, end: float) -> list[float]:
        """The values whose time lies in [start, end], sorted (times are appended in order)."""
        n = min(len(self.times), len(self.values))  # a producer appending meanwhile is not seen
        times = self.times[:n]
        lo = bisect.bisect_left(times, start)
        hi = bisect.bisect_right(times, end)
        return sorted(self.values[lo:hi])

    def __len__(self) -> int:
        return len(self.values)


def registry_open(key: str) -> Samples:
    """Creates (or resets) the samples kept under ``key`` and returns them."""
    with _registry_lock:
        _registry[key] = Samples()
        return _registry[key]


def registry_get(key: str) -> Samples:
    """The samples under ``key`` (made by `registry_open`); KeyError if there are none."""
    with _registry_lock:
        return _registry[key]


def registry_close(key: str) -> None:
    """Forgets ``key``."""
    with _registry_lock:
        _registry.pop(key, None)


def percentile(sorted_values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of an ascending list, nearest-rank; None if empty."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(-(-q * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


# --- polling a topology ---------------------------------------------------------------------------
def wait_until(cluster: Any, name: str, done: Callable[[dict], float], timeout: float,
               poll: float | None = None) -> dict:
    """Polls ``get_topology_info`` until ``done(info)`` returns a progress of 1.0 or more.

    ``done`` returns the fraction of the work finished; the poll interval is `POLL_SECS` and drops
    to `FINE_POLL_SECS` past 95%, so the end is seen soon after it happens without polling often
    for the whole run; ``poll``: a fixed interval instead (`bench.instructions` looks seldom,
    since each look costs instructions it counts).

    Raises:
        RuntimeError: the topology reported a fatal error (a crash) or ``timeout`` passed.
    """
    deadline = time.perf_counter() + timeout
    while True:
        info = cluster.get_topology_info(name)
        progress = done(info)
        if progress >= 1.0:
            return info
        fatal = [e for e in info["errors"] if e.get("fatal")]
        if fatal:
            raise RuntimeError(f"topology {name} crashed: {fatal[0]['error']}\n{fatal[0]['traceback']}")
        if time.perf_counter() > deadline:
            raise RuntimeError(f"topology {name} did not finish in {timeout} s (progress {progress:.3f})")
        time.sleep(poll if poll is not None else FINE_POLL_SECS if progress >= 0.95 else POLL_SECS)


# --- records ----------------------------------------------------------------------------------------
def spout_limits(cluster: Any, name: str, spout: str) -> list[int | None] | None:
    """The max spout pending of each executor of ``spout`` now (the component page's
    ``maxSpoutPending``: where ``topology.max.spout.pending: auto`` left it); None if the page
    could not be read."""
    try:
        page = cluster.get_component_page(name, spout)
    except Exception:  # noqa: BLE001 - a figure for the record, not a reason to fail the run
        return None
    return [e.get("maxSpoutPending") for e in page.get("executorStats", [])]


def base_record(workload: str, acking: bool, **extra: Any) -> dict[str, Any]:
    """The fields every record starts with (identity of the run and of the environment)."""
    record: dict[str, Any] = {
        "workload": workload,
        "host": "local",
        "workers": 1,
        "acking": "on" if acking else "off",
    }
    record.update(extra)
    return record


def squall_commit() -> str | None:
    """The last git commit that changed the code a run executes: ``squall/`` (the engine) or
    ``bench/`` (the workloads: their spouts and bolts), not the results; ``+dirty`` if that code
    has uncommitted changes.

    Medians must not mix versions, so `report` groups by this. A commit that touches only the
    docs or the saved results does not start a new group; one that changes how a workload reads
    its input (the W1 spouts' claimed files, say) does.
    None when squall is not in a git checkout.
    """
    root = Path(squall.__file__).resolve().parent.parent
    paths = ["--", "squall", "bench", ":(exclude)bench/results"]
    try:
        head = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%h", *paths],
                              capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", *paths],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


# Read once, at import: the code that runs is the code imported then, whatever changes later.
_COMMIT = squall_commit()


def finish_record(record: dict[str, Any], meter: Meter | None = None) -> dict[str, Any]:
    """Adds peak RSS (as ``meter`` saw it at its stop, else now; unless the record has one) and
    the environment fields (versions, time, load) to a record and returns it."""
    if "peak_rss_mb" not in record:  # the process host measured its workers' already
        record["peak_rss_mb"] = round(meter.rss_mb if meter is not None else peak_rss_mb(), 1)
    record.update({
        "squall_version": squall.__version__,
        "squall_commit": _COMMIT,
        "python_version": platform.python_version(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    })
    return record


def emit_record(record: dict[str, Any], results_file: Path | None = RESULTS_FILE) -> None:
    """Prints ``record`` as one JSON line and appends it to ``results_file`` (None: print only)."""
    line = json.dumps(record, sort_keys=False)
    print(line, flush=True)
    if results_file is not None:
        results_file.parent.mkdir(parents=True, exist_ok=True)
        with open(results_file, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def median_record(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One record of medians: numeric fields are medians, others are taken from the first run.

    ``correct`` is True only if every run was correct; ``runs`` says how many were folded and
    ``<main figure>_min`` / ``_max`` keep the spread of the main rate.
    """
    out: dict[str, Any] = {"kind": "median", "runs": len(records)}
    for key in records[0]:
        values = [r.get(key) for r in records]
        if key == "correct":
            out[key] = all(bool(v) for v in values)
        elif all(v == values[0] for v in values):
            out[key] = values[0]
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[key] = round(statistics.median(values), 6)
        else:
            out[key] = values[0]
    main = main_figure(records[0])
    if main:
        vals = [r[main] for r in records]
        out[f"{main}_min"] = min(vals)
        out[f"{main}_max"] = max(vals)
    return out


def main_figure(record: dict[str, Any]) -> str | None:
    """The name of a record's headline rate."""
    for key in ("sentences_per_s", "tuples_per_s"):
        if key in record:
            return key
    return None


# --- report -------------------------------------------------------------------------------------------
def _fmt(v: Any, digits: int = 0) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and digits:
        return f"{v:,.{digits}f}"
    if isinstance(v, (int, float)):
        return f"{v:,.0f}"
    return str(v)


def load_results(path: Path = RESULTS_FILE) -> list[dict[str, Any]]:
    """Every record of a results file (lines that are not JSON are skipped)."""
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def report(records: Iterable[dict[str, Any]], latest: bool = False) -> str:
    """A markdown table of medians (min-max) per configuration and squall commit.

    A configuration is (workload, host (with its Spark master on the Spark host), workers (and
    parallelism, when not the default of one executor per component per worker), acking, size);
    runs of different hosts, or of different
    squall commits, are never mixed in one median. With ``latest``, only the commit of each
    configuration's most recent run is shown. On the process host "CPU s" is the sum over the
    worker processes and "peak RSS MB" the largest worker's (each record also lists them per
    worker: ``worker_cpu_s``, ``worker_peak_rss_mb``).
    """
    def cfg_of(r: dict[str, Any]) -> tuple:
        size = r.get("n") if r.get("n") is not None else f"{r.get('secs')}s"
        workers = r.get("workers")
        par = r.get("parallelism")
        if par is not None and par != workers:
            workers = f"{workers} (p{par})"
        host = r.get("host")
        if r.get("spark_master"):
            host = f"{host} {r['spark_master']}"
        return (r["workload"], host, workers, r.get("acking"), size)

    records = [r for r in records if r.get("kind") != "median"]
    if latest:
        newest: dict[tuple, dict[str, Any]] = {}
        for r in records:
            cfg = cfg_of(r)
            if cfg not in newest or r.get("timestamp", "") >= newest[cfg].get("timestamp", ""):
                newest[cfg] = r
        keep = {(c, n.get("squall_commit")) for c, n in newest.items()}
        records = [r for r in records if (cfg_of(r), r.get("squall_commit")) in keep]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        key = cfg_of(r) + (r.get("squall_commit") or "?",)
        groups.setdefault(key, []).append(r)
    lines = [
        "| workload | host | workers | acking | size | squall commit | runs | rate (median, min-max) | unit | "
        "mean / p99 latency ms | baseline rate | squall/baseline | CPU s | peak RSS MB | correct |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups, key=lambda k: tuple(str(x) for x in k)):
        rs = groups[key]
        main = main_figure(rs[0])
        if main is None:
            continue
        rates = [r[main] for r in rs]

        def med(field: str) -> Any:
            vals = [r[field] for r in rs if isinstance(r.get(field), (int, float))]
            return statistics.median(vals) if vals else None

        unit = "sentences/s" if main == "sentences_per_s" else rs[0].get("rate_unit", "tuples/s")
        lat = "-"
        if med("complete_latency_mean_ms") is not None:
            lat = f"{_fmt(med('complete_latency_mean_ms'), 2)} / {_fmt(med('complete_latency_p99_ms'), 2)}"
        ratio = med("ratio")
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {key[5]} | {len(rs)} | "
            f"{_fmt(statistics.median(rates))} ({_fmt(min(rates))}-{_fmt(max(rates))}) | {unit} | {lat} | "
            f"{_fmt(med('baseline_rate'))} | {'-' if ratio is None else f'{ratio:.3f}'} | "
            f"{_fmt(med('cpu_s'), 1)} | {_fmt(med('peak_rss_mb'), 0)} | "
            f"{all(bool(r.get('correct')) for r in rs)} |")
    return "\n".join(lines)


def wait_files(directory: Path, pattern: str, n: int, timeout: float) -> list[Path]:
    """The files matching ``pattern`` once there are ``n`` (or whatever is there at ``timeout``)."""
    deadline = time.perf_counter() + timeout
    while True:
        files = sorted(directory.glob(pattern))
        if len(files) >= n or time.perf_counter() > deadline:
            return files
        time.sleep(0.05)
