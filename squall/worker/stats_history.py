"""Storm's statistics windows (10 minutes, 3 hours, 1 day, all time) over a worker's tasks.

Storm keeps, per counter, a ring of 20 buckets for each window (bucket = window / 19) and sums
the buckets that the window covers, pro-rating the oldest one partly covered. Here the worker
keeps, per window, the tasks' cumulative counters as they were at each bucket boundary; a
window's value is the counter now minus its value ``window`` seconds ago, read between the two
snapshots around that time by linear interpolation, which is the same pro-rating. Latencies are
cumulative sums and sample counts, so a window's average is the quotient of their differences.

Pure: time comes in as arguments. Like Storm's, the windows start with the worker: a restarted
worker starts from zero, and a restarted master reads them again from the workers' heartbeats.
"""

from __future__ import annotations

import gc
import itertools
import os
import resource
import time
from collections import deque
from typing import Any, NamedTuple

from ..engine.stats import GAUGES, LATENCIES, StatKey

WINDOWS = (600, 10800, 86400)
ALL_TIME = ":all-time"
WINDOW_NAMES = (*(str(w) for w in WINDOWS), ALL_TIME)
NUM_BUCKETS = 20

Snapshot = dict[StatKey, float]


class StatsHistory:
    """Snapshots of every task's cumulative statistics at Storm's bucket boundaries."""

    def __init__(self, start: float) -> None:
        self.start = start
        empty: dict[int, Snapshot] = {}
        # per window: (time, {task: snapshot}), oldest first; the worker starts from nothing
        self._rings: dict[int, deque[tuple[float, dict[int, Snapshot]]]] = {
            w: deque([(start, empty)]) for w in WINDOWS}

    def record(self, now: float, snapshots: dict[int, Snapshot]) -> None:
        """Keep ``snapshots`` (taken at ``now``) where a bucket boundary has passed."""
        for w, ring in self._rings.items():
            if now - ring[-1][0] >= w / (NUM_BUCKETS - 1):
                ring.append((now, snapshots))
                # keep one snapshot at or before the window's start, to interpolate from
                while len(ring) > 2 and ring[1][0] <= now - w:
                    ring.popleft()

    def render(self, now: float, snapshots: dict[int, Snapshot]) -> dict[int, dict[str, list[list[Any]]]]:
        """Every task's windows: ``{task: {window: [[metric, component, stream, value], ...]}}``;
        counts are differences, latencies averages in ms (absent when nothing was sampled),
        gauges (`squall.engine.stats.GAUGES`) their value now."""
        out: dict[int, dict[str, list[list[Any]]]] = {}
        for task, current in snapshots.items():
            windows = {}
            for w, ring in self._rings.items():
                windows[str(w)] = _rows(current, _at(ring, task, now - w, now, current))
            windows[ALL_TIME] = _rows(current, {})
            out[task] = windows
        return out


def _at(ring: deque[tuple[float, dict[int, Snapshot]]], task: int, when: float, now: float,
        current: Snapshot) -> Snapshot:
    """``task``'s counters as they were at ``when``, interpolated between the snapshots around it
    (the newest one is ``current``, at ``now``)."""
    points = [*ring, (now, {task: current})]
    if when <= points[0][0]:
        return points[0][1].get(task, {})
    for (t0, s0), (t1, s1) in itertools.pairwise(points):
        if t0 <= when <= t1:
            a, b = s0.get(task, {}), s1.get(task, {})
            if t1 <= t0:
                return b
            f = (when - t0) / (t1 - t0)
            return {k: a.get(k, 0) + (v - a.get(k, 0)) * f for k, v in b.items()}
    return current


def _rows(current: Snapshot, base: Snapshot) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for (metric, comp, stream), value in current.items():
        if metric.endswith("#n"):
            continue
        if metric in GAUGES:  # a value now, the same in every window
            rows.append([metric, comp, stream, value])
            continue
        delta = value - base.get((metric, comp, stream), 0)
        if metric in LATENCIES:
            key_n = (metric + "#n", comp, stream)
            n = current.get(key_n, 0) - base.get(key_n, 0)
            if n <= 0:
                continue
            delta = delta / n
        else:
            delta = round(delta)
        rows.append([metric, comp, stream, delta])
    return rows


class WorkerFigures(NamedTuple):
    """A worker process's own figures, for Storm's worker rows and Prometheus."""

    uptime_secs: float
    cpu_secs: float          # user + system CPU of the process since it started
    rss_bytes: int           # resident memory now
    gc_collections: int      # the garbage collector's runs, all generations
    pid: int

    @classmethod
    def read(cls, started: float, now: float | None = None) -> WorkerFigures:
        """This process's figures (an in-process worker's are its host process's)."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return cls(uptime_secs=(time.time() if now is None else now) - started,
                   cpu_secs=usage.ru_utime + usage.ru_stime, rss_bytes=rss_bytes(),
                   gc_collections=sum(g["collections"] for g in gc.get_stats()), pid=os.getpid())


def rss_bytes() -> int:
    """This process's resident memory now (bytes; off Linux, its peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux: the peak is what is left
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
