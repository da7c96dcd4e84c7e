"""Storm's statistics windows (10 minutes, 3 hours, 1 day, all time) over a worker's tasks.

Storm keeps, per counter, a ring of 20 buckets for each window (bucket = window / 19) and sums
the buckets that the window covers, pro-rating the oldest one partly covered. Here the worker
keeps, per window, the tasks' cumulative counters as they were at each bucket boundary; a
window's value is the counter now minus its value at the first boundary at or after the
window's start. Unlike Storm's pro-rating (a linear interpolation across the oldest bucket),
that never counts what happened before the window: 1,000 acks in a worker's first 5 s, then
none, read 688 acks in the 10-minute window at 610 s with the pro-rating, 0 now. The price is
that a window may leave out up to one bucket at its start (`BUCKETS`: 10 s of the 10 minutes,
the 10-minute window that capacity reads having finer buckets than Storm's 31.6 s). Latencies
are cumulative sums and sample counts, so a window's average is the quotient of their
differences.

Pure: time comes in as arguments. Like Storm's, the windows start with the worker: a restarted
worker starts from zero, and a restarted master reads them again from the workers' heartbeats.
"""

from __future__ import annotations

import gc
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
# snapshots kept per window: the boundary a window starts from is at most window / buckets after
# its start, so that much of its start may be left out. Storm's 20 for the long windows (each
# snapshot holds every task's counters: more would cost memory), 60 (10 s) for the 10 minutes
BUCKETS = {600: 60, 10800: NUM_BUCKETS, 86400: NUM_BUCKETS}

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
            if now - ring[-1][0] >= w / BUCKETS[w]:
                ring.append((now, snapshots))
                # a window starts from its first snapshot at or after its start: of those at
                # or before the start only the newest can be that one (when exactly at it)
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
                windows[str(w)] = _rows(current, _at(ring, task, now - w, current))
            windows[ALL_TIME] = _rows(current, {})
            out[task] = windows
        return out


def _at(ring: deque[tuple[float, dict[int, Snapshot]]], task: int, when: float, current: Snapshot) -> Snapshot:
    """``task``'s counters at the first snapshot at or after ``when``, else ``current`` (now):
    the window then counts nothing from before its start. A task that a snapshot does not hold
    had counted nothing by then."""
    for t, snaps in ring:
        if t >= when:
            return snaps.get(task, {})
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
