"""RECOVERY: how long a reliable topology takes to get its throughput back after one of its
worker processes is SIGKILLed, on the process or the Spark host.

    spout (ReplayingSpout, paced) --shuffle--> work (IdBolt) --fields(id)--> sink (DevNullBolt)

One spout task emits new ids at ``rate`` tuples/s (paced as W4's spout: a tuple is due every
``1 / rate`` s, and the loop's wait strategy sleeps between) and re-emits every failed id at once
(a replayable source). ``work`` and ``sink`` have one executor per worker, and each worker one
acker (Storm's default), so about three in four tuple trees touch any one worker. Acking on,
``topology.max.spout.pending`` (default 1000) and ``topology.message.timeout.secs`` (default 30,
Storm's) as given.

The run. After ``warmup`` seconds of steady processing, the benchmark SIGKILLs the Python process
of a worker that does not run the spout (on Spark: the Python worker of that worker's task, the
pid the worker heartbeats), and watches until the killed worker is back and the acked rate has
stayed at 80% or more of its rate before the kill for ``SETTLE_SECS`` seconds, or for at most
``observe`` seconds.

What the spout records. Every ``MARK_SECS`` at most, from ``next_tuple``, ``ack`` or ``fail``,
the spout appends ``wall time, acked, failed, emitted, replayed`` (cumulative) to
``timeline-<task>.txt`` in ``bench.output.dir``; the benchmark reads it (the same machine's
clock as its own). A spout held at max spout pending is not called at all: the file then has a
gap, which reads as no acks.

The figures. ``rate_before`` is the acked rate over the ``BEFORE_SECS`` before the kill. A
1-second window ending at ``t`` is good if its acked rate is at least ``RECOVERED_FRACTION`` of
``rate_before`` (checked every 0.1 s). ``recovery_s`` is from the kill to the end of the first
good window after the first bad one (0 if none was bad): when the rate came back.
``settled_s`` is from the kill to the end of the first good window after which every window is
good (on a busy machine, later dips of its own make it longer); ``below_s`` adds up the bad
windows' time and ``min_rate`` is the worst window's rate.
``failed`` is what the spout's ``fail`` was told after the kill (timeouts, and since the
lost-worker notices, the tuples failed at once), ``replayed`` the failed ids it emitted again.
``correct``: the rate came back within ``observe`` and no component reported an error.
"""

from __future__ import annotations

import bisect
import os
import shutil
import signal
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from squall import Config, Fields, Spout, TopologyBuilder

from . import harness
from .w2_const_null import DEFAULT_MAX_PENDING, OUTPUT_DIR_KEY, DevNullBolt, IdBolt

DEFAULT_RATE = 1000.0
DEFAULT_TIMEOUT = 30
MARK_SECS = 0.05
BEFORE_SECS = 5.0
WINDOW_SECS = 1.0
RECOVERED_FRACTION = 0.8
SETTLE_SECS = 10.0
MAX_DEBT_SECS = 1.0
"""A spout held back catches up on at most this much of its schedule: the load stays steady."""


class ReplayingSpout(Spout):
    """Emits new ids at ``rate`` tuples/s and every failed id again at once; writes its
    cumulative counts to ``timeline-<task>.txt`` (module docstring)."""

    def __init__(self, rate: float) -> None:
        self.rate = float(rate)

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector) -> None:
        super().open(conf, context, collector)
        self._emit = collector.emit
        self._period = 1.0 / self.rate
        self._due: float | None = None
        self._next_id = 0
        self._replay: deque[int] = deque()
        self.acked = self.failed = self.replayed = 0
        path = Path(conf[OUTPUT_DIR_KEY]) / f"timeline-{context.get_this_task_id()}.txt"
        self._out = open(path, "a", buffering=1)
        self._marked = 0.0

    def _mark(self) -> None:
        now = time.time()
        if now - self._marked >= MARK_SECS:
            self._marked = now
            self._out.write(f"{now:.3f} {self.acked} {self.failed} {self._next_id} {self.replayed}\n")

    def next_tuple(self) -> None:
        self._mark()
        if self._replay:
            self.replayed += 1
            i = self._replay.popleft()
            self._emit([i], i)
            return
        now = time.monotonic()
        if self._due is None or now - self._due > MAX_DEBT_SECS:
            self._due = now
        if now < self._due:
            return  # not due: the engine's wait strategy sleeps
        self._due += self._period
        i = self._next_id
        self._next_id = i + 1
        self._emit([i], i)

    def ack(self, msg_id) -> None:
        self.acked += 1
        self._mark()

    def fail(self, msg_id) -> None:
        self.failed += 1
        self._replay.append(msg_id)
        self._mark()

    def close(self) -> None:
        self._out.close()


def build(rate: float, workers: int, max_pending: int, timeout: int, output_dir: str):
    """The topology and its configuration (module docstring)."""
    b = TopologyBuilder()
    b.set_spout("spout", ReplayingSpout(rate), 1).add_configuration(OUTPUT_DIR_KEY, output_dir)
    b.set_bolt("work", IdBolt(), workers).shuffle_grouping("spout")
    b.set_bolt("sink", DevNullBolt(), workers).fields_grouping("work", ["str"])
    return b.create_topology(), kill_run_conf(workers, max_pending, timeout)


def kill_run_conf(workers: int, max_pending: int, timeout: float) -> Config:
    """The configuration of a run that kills workers: ``workers`` workers and as many ackers,
    ``max_pending`` spout tuples in flight, a ``timeout``-second message timeout."""
    conf = Config()
    conf.set_num_workers(workers)
    conf.set_num_ackers(workers)
    conf.set_max_spout_pending(max_pending)
    conf.set_message_timeout_secs(timeout)
    return conf


# --- the timeline ------------------------------------------------------------------------------------
class Timeline:
    """The spout's cumulative counts over time, read from its file."""

    def __init__(self, rows: list[tuple[float, int, int, int, int]]) -> None:
        self.rows = rows  # (wall time, acked, failed, emitted, replayed), in time order
        self._times = [row[0] for row in rows]

    @classmethod
    def read(cls, path: Path) -> Timeline:
        """The timeline the spout wrote so far (a line being written is skipped)."""
        rows = []
        if path.exists():
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 5:
                    rows.append((float(parts[0]), *map(int, parts[1:])))
        return cls(rows)

    def at(self, t: float) -> tuple[float, int, int, int, int]:
        """The last row written at or before ``t`` (the first row if none)."""
        i = bisect.bisect_right(self._times, t)
        return self.rows[max(i - 1, 0)]

    def acked_rate(self, a: float, b: float) -> float:
        """Acks per second between wall times ``a`` and ``b``."""
        return (self.at(b)[1] - self.at(a)[1]) / (b - a)


def recovery(tl: Timeline, t_kill: float, t_end: float) -> dict[str, Any]:
    """The figures of the module docstring, from the timeline between the kill and ``t_end``."""
    before = tl.acked_rate(t_kill - BEFORE_SECS, t_kill)
    good_from = None
    back_at = None  # the first good window after the first bad one
    dipped = False
    below = 0.0
    worst = None
    step = 0.1
    t = t_kill + step
    while t <= t_end:
        rate = tl.acked_rate(t - WINDOW_SECS, t)
        worst = rate if worst is None else min(worst, rate)
        if rate >= RECOVERED_FRACTION * before:
            if good_from is None:
                good_from = t
            if dipped and back_at is None:
                back_at = t
        else:
            good_from = None
            dipped = True
            below += step
        t += step
    k, end = tl.at(t_kill), tl.at(t_end)

    def since_kill(at: float | None) -> float | None:
        return None if at is None else round(at - t_kill, 2)
    return {"rate_before": round(before, 1),
            "recovery_s": since_kill(back_at) if dipped else 0.0,
            "settled_s": since_kill(good_from),
            "below_s": round(below, 1), "min_rate": None if worst is None else round(worst, 1),
            "failed": end[2] - k[2], "replayed": end[4] - k[4]}


def _good_for(tl: Timeline, now: float, secs: float, before: float) -> bool:
    """Whether every 1-second window of the last ``secs`` seconds was good."""
    t = now - secs
    while t <= now:
        if tl.acked_rate(t - WINDOW_SECS, t) < RECOVERED_FRACTION * before:
            return False
        t += 0.1
    return True


def _slot_port(slot: str) -> int:
    return int(slot.rsplit(":", 1)[1])


def run(host: str = "process", workers: int = 2, rate: float = DEFAULT_RATE, warmup: float = 10.0,
        observe: float = 100.0, max_pending: int = DEFAULT_MAX_PENDING, timeout: int = DEFAULT_TIMEOUT,
        spark_master: str | None = None) -> dict[str, Any]:
    """One run on a throwaway ``host`` ("process" or "spark") of ``workers`` workers (at least 2)."""
    from .hosts import make_host

    if workers < 2:
        raise ValueError("RECOVERY kills a worker that does not run the spout: it needs --workers 2 or more")
    out = Path(tempfile.mkdtemp(prefix="squall-bench-recovery-"))
    name = "recovery"
    try:
        topology, conf = build(rate, workers, max_pending, timeout, str(out))
        with make_host(host, workers, spark_master) as h:
            host_fields = h.fields()
            h.submit(name, conf, topology)
            h.wait_workers(workers)
            path = out / f"timeline-{_spout_task(h, name)}.txt"
            deadline = time.monotonic() + 60
            while not Timeline.read(path).rows or Timeline.read(path).rows[-1][1] == 0:
                if time.monotonic() > deadline:
                    raise RuntimeError("the spout acked nothing within 60 s")
                time.sleep(0.2)
            time.sleep(warmup)
            info = h.info(name)
            spout_port = next(iter(info["components"]["spout"]["task_stats"].values()))["worker"]
            victim = next(w for w in info["workers"] if _slot_port(w["slot"]) != spout_port and w["pid"])
            t_kill = time.time()
            os.kill(victim["pid"], signal.SIGKILL)
            before = Timeline.read(path).acked_rate(t_kill - BEFORE_SECS, t_kill)
            back_at = None
            while time.time() - t_kill < observe:
                time.sleep(0.5)
                if back_at is None:
                    w = {w["slot"]: w for w in h.info(name)["workers"]}.get(victim["slot"])
                    if w and w["alive"] and w["launch_id"] > victim["launch_id"]:
                        back_at = time.time()
                now = time.time()
                if back_at is not None and now - t_kill > SETTLE_SECS + WINDOW_SECS and \
                        _good_for(Timeline.read(path), now, SETTLE_SECS, before):
                    break
            t_end = time.time()
            errors = h.info(name)["errors"]
            h.kill(name, wait_secs=0)
            h.wait_no_workers()
        figures = recovery(Timeline.read(path), t_kill, t_end)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    record = harness.base_record(
        "RECOVERY", True, **host_fields, workers=workers, target_rate=rate, max_spout_pending=max_pending,
        message_timeout_secs=timeout, warmup=warmup, killed_slot=victim["slot"],
        restarted_after_s=None if back_at is None else round(back_at - t_kill, 2),
        watched_s=round(t_end - t_kill, 1), **figures, errors=len(errors),
        correct=figures["settled_s"] is not None and not errors)
    return harness.finish_record(record, None)


def _spout_task(h: Any, name: str) -> int:
    """The spout's task id (from the plan the master reports)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stats = h.info(name)["components"]["spout"]["task_stats"]
        if stats:
            return int(next(iter(stats)))
        time.sleep(0.2)
    raise RuntimeError("the spout's task never heartbeated")
