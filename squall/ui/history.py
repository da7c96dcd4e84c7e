"""The last minutes of each topology's throughput, kept by the UI daemon for its charts.

Storm's UI shows only windowed totals, so a page opened now cannot draw what happened a minute
ago. The daemon samples every topology's spout totals (acked, failed: topology acks are spout
acks, as in Storm) and complete latency every few seconds into a bounded ring per topology;
``/api/v1/topology/<id>/history`` serves the ring, with each sample's rates against the one
before, so a freshly opened page draws the last ``ui.history.secs`` at once.

The rates are counted per spout task: a worker that restarts (a crash, a ``kill -9``) reports
its tasks' counts from zero again, and a task whose worker launch changed (or whose count went
down) is counted from zero, as ``squall monitor`` counts it, while the other tasks count on.
Rates taken from the topology's totals alone read 0 for every interval in which the spout's
worker restarted, the very moments the failures chart is there to show. What the dead launch
counted between the sample before and its last heartbeat is added too: the master keeps that
last word of each ended launch (`squall.cluster.view.counted_across`); only what it counted
after its last heartbeat is lost. The samples carry the dead letters (the records the spouts
gave up) beside the acks and failures, counted the same way.

A topology first read by a sampler that had read the cluster before without it was submitted
since that reading: everything it counted (every launch of every spout task, ended ones too)
happened between the two, so its first sample's rates are its counts over that time. Before,
the first sample of every topology said 0 per second, so a topology submitted while the daemon
ran showed no acks and no failures for the interval that held its first burst: a pipeline whose
malformed records failed 543 times before its first sample charted none of them. Only a
topology already running when the daemon started (or the sampler's very first reading) has no
such reading before it, and its first sample still says 0 per second.

`History` is the pure core (time is passed in); `HistorySampler` is the thread that feeds it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import NamedTuple

from squall.cluster.view import LaunchCount, counted_across
from squall.engine.clock import Clock

log = logging.getLogger(__name__)


class TaskCounts(NamedTuple):
    """One spout task's all-time acked, failed and dead-lettered counts, as its worker last
    reported them, and that worker's launch (None: not known), whose counts start from zero:
    ``(launch id, slot)`` as `read_totals` gives it (a slot numbers its own launches: a task
    that a rebalance moved to another slot is another launch, even one of the same number)."""

    acked: int
    failed: int
    launch_id: Hashable | None = None
    dead_lettered: int = 0


class Totals(NamedTuple):
    """One reading of a topology's all-time spout figures; ``tasks`` (spout task id -> its
    counts) lets the rates count a task whose worker restarted from zero, and ``ended`` (task
    id -> its counts in the launches that ended, oldest first, as their last heartbeat left
    them) what the dead launch counted since the sample before. Without ``tasks`` the rates
    come from the totals, and a total that went down gives 0."""

    topology_id: str
    acked: int
    failed: int
    complete_latency_ms: float
    tasks: Mapping[int, TaskCounts] | None = None
    dead_lettered: int = 0
    ended: Mapping[int, Sequence[TaskCounts]] | None = None


class HistorySample(NamedTuple):
    """One point of a topology's history, as `/topology/<id>/history` serves it.

    ``time`` is wall-clock seconds; the rates are per second since the previous sample (for a
    topology's first: since the reading before it, which it was not in, or 0 when there was
    none), added up over the spout tasks, a task whose worker restarted (another
    launch, or a count that went down) counted from zero, with what its ended launch counted
    after the sample before, up to its last heartbeat.
    """

    time: float
    acked: int
    failed: int
    acked_per_sec: float
    failed_per_sec: float
    complete_latency_ms: float
    dead_lettered: int = 0
    dead_lettered_per_sec: float = 0.0

    def to_json(self) -> dict[str, float | int]:
        """The sample with the REST API's camelCase field names."""
        return {"time": round(self.time, 3), "acked": self.acked, "failed": self.failed,
                "ackedPerSec": round(self.acked_per_sec, 3),
                "failedPerSec": round(self.failed_per_sec, 3),
                "completeLatency": round(self.complete_latency_ms, 3),
                "deadLettered": self.dead_lettered,
                "deadLetteredPerSec": round(self.dead_lettered_per_sec, 3)}


_FIGURES = ("acked", "failed", "dead_lettered")  # the `TaskCounts` a sample's rates add up
_SEEN_KEPT = 4096  # topologies remembered as read (a daemon up for months sees many submissions)


def _rate(increase: int, secs: float) -> float:
    return increase / secs if secs > 0 else 0.0


class History:
    """A ring of the last ``keep_secs / interval_secs`` samples per topology. Not thread-safe:
    `HistorySampler` and the request handlers share it under the sampler's lock."""

    def __init__(self, interval_secs: float, keep_secs: float) -> None:
        if interval_secs <= 0 or keep_secs < interval_secs:
            raise ValueError(f"ui.history: need 0 < interval ({interval_secs}) <= keep ({keep_secs}) seconds")
        self.interval_secs = interval_secs
        self._size = int(keep_secs // interval_secs) + 1
        self._rings: dict[str, deque[HistorySample]] = {}
        # each topology's spout tasks' counts as last read (a task missing from a reading keeps
        # its last counts, so its restart is still seen when its worker reports again)
        self._tasks: dict[str, dict[int, TaskCounts]] = {}
        # when the last reading was recorded (None: none yet), and the topologies read since
        # this History began, in the order last read (at most _SEEN_KEPT): a topology first
        # read after a reading is new since it, one read before (its ring dropped when a
        # reading missed it) is not, and must not count its all-time figures again
        self._last_reading: float | None = None
        self._seen: dict[str, None] = {}

    def record(self, readings: Iterable[Totals], now: float) -> None:
        """Add one sample per reading taken at wall time ``now``; topologies not read are dropped
        (killed), so the rings never outlive what the master knows. A topology read for the
        first time after an earlier reading was submitted since it: its first sample's rates
        count everything it did over that time."""
        seen = set()
        for t in readings:
            seen.add(t.topology_id)
            ring = self._rings.setdefault(t.topology_id, deque(maxlen=self._size))
            if ring:
                acked, failed, dead = self._increases(t, ring[-1])
                secs = now - ring[-1].time
            elif self._last_reading is not None and t.topology_id not in self._seen:
                acked, failed, dead = self._whole(t)  # submitted since the last reading
                secs = now - self._last_reading
            else:  # running before this History's first reading: no rate yet
                self._increases(t, None)
                acked = failed = dead = 0
                secs = 0.0
            self._remember(t.topology_id)
            ring.append(HistorySample(now, t.acked, t.failed, _rate(acked, secs), _rate(failed, secs),
                                      t.complete_latency_ms, t.dead_lettered, _rate(dead, secs)))
        for gone in set(self._rings) - seen:
            del self._rings[gone]
            self._tasks.pop(gone, None)
        self._last_reading = now

    def _remember(self, topology_id: str) -> None:
        """Keep ``topology_id`` among the topologies read, the one read longest ago forgotten past
        `_SEEN_KEPT`. Moved to the newest at each reading: forgotten by when it was first read, a
        topology running since the daemon started was the first to go once 4,096 others had come
        and gone, and a reading that missed it then charted its all-time figures as one sample's."""
        self._seen.pop(topology_id, None)
        self._seen[topology_id] = None
        if len(self._seen) > _SEEN_KEPT:
            del self._seen[next(iter(self._seen))]

    def _whole(self, t: Totals) -> tuple[int, int, int]:
        """Everything a topology new since the last reading counted: every launch of each spout
        task (the ended ones, as their last heartbeat left them, and the current one), or its
        totals when the reading has no tasks. Records the task counts for the next reading."""
        if t.tasks is None:
            return t.acked, t.failed, t.dead_lettered
        ended = t.ended or {}
        added = [0, 0, 0]
        before = self._tasks[t.topology_id] = {}
        for task in set(t.tasks) | set(ended):
            launches = [*ended.get(task, ()), *([t.tasks[task]] if task in t.tasks else [])]
            for i, figure in enumerate(_FIGURES):
                added[i] += sum(getattr(c, figure) for c in launches)
            before[task] = launches[-1]
        return added[0], added[1], added[2]

    def _increases(self, t: Totals, last: HistorySample | None) -> tuple[int, int, int]:
        """The acks, failures and dead letters since ``last`` (none for a topology's first
        sample), per spout task when the reading has them; records the reading's task counts
        for the next one."""
        if t.tasks is None:
            self._tasks.pop(t.topology_id, None)
            if last is None:
                return 0, 0, 0
            # without tasks, a total that went down cannot be split into restarts: 0
            return (max(0, t.acked - last.acked), max(0, t.failed - last.failed),
                    max(0, t.dead_lettered - last.dead_lettered))
        before = self._tasks.setdefault(t.topology_id, {})
        ended = t.ended or {}
        added = [0, 0, 0]
        for task in set(t.tasks) | set(ended):
            launches = [*ended.get(task, ()), *([t.tasks[task]] if task in t.tasks else [])]
            was = before.get(task)
            for i, figure in enumerate(_FIGURES):
                n, _newest = counted_across(None if was is None else LaunchCount(was.launch_id, getattr(was, figure)),
                                            [LaunchCount(c.launch_id, getattr(c, figure)) for c in launches])
                added[i] += n
            before[task] = launches[-1]
        return (0, 0, 0) if last is None else (added[0], added[1], added[2])

    def samples(self, topology_id: str) -> list[HistorySample]:
        """The topology's samples, oldest first (empty when it has none yet)."""
        return list(self._rings.get(topology_id, ()))


class HistorySampler:
    """Calls ``read()`` every ``interval_secs`` and records what it returns in a `History`.

    ``read`` returns one `Totals` per running topology, or raises when the master cannot be
    reached: that sample is skipped (the rings keep what they had) and the next one is tried.
    """

    def __init__(self, read: Callable[[], Iterable[Totals]], interval_secs: float = 5.0,
                 keep_secs: float = 900.0, clock: Clock | None = None) -> None:
        self.history = History(interval_secs, keep_secs)
        self._read = read
        self._clock = clock or Clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_once(self) -> None:
        """Take one sample now (the thread's step; tests call it directly)."""
        try:
            readings = list(self._read())
        except Exception as e:  # noqa: BLE001 (master down or restarting: keep the old samples, try again later)
            log.debug("history sample skipped: %s", e)
            return
        with self._lock:
            self.history.record(readings, self._clock.wall())

    def samples(self, topology_id: str) -> list[HistorySample]:
        """Thread-safe `History.samples`."""
        with self._lock:
            return self.history.samples(topology_id)

    def start(self) -> None:
        """Start sampling in a daemon thread (first sample at once)."""
        self._thread = threading.Thread(target=self._run, name="squall-ui-history", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        due = self._clock.now()
        while not self._stop.is_set():
            if self._clock.now() >= due:
                self.sample_once()
                due = self._clock.now() + self.history.interval_secs
            self._clock.wait(self._stop, max(0.0, due - self._clock.now()))

    def stop(self) -> None:
        """Stop the thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
