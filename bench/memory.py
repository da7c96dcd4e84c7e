"""MEM: what an idle worker costs, and the acker's and the spout's memory per tuple in flight.

    python -m bench run MEM [--pending 100000] [--ks 1,20] [--idle-secs 5]        (LocalCluster)
    python -m bench run MEM --host process|spark [--workers N] [--idle-secs 5]     (idle worker only)

Each run prints one record (``"workload": "MEM"``); the fields `bench.report` reads are named
below in quotes.

1. An idle topology: an ``IdleSpout`` whose ``next_tuple`` emits nothing -> a bolt, acking on
   (one acker per worker), so the spout's wait strategy, the acker's timers and the host's
   heartbeats all run.
   - Process and Spark hosts: a throwaway host with ``workers`` workers; once every worker
     process runs, its resident set is sampled every 0.25 s until it has moved less than
     0.1 MB for 2 s in a row (settled; at most 20 s), then its CPU is measured over
     ``idle_secs``. ``"idle_worker_rss_mb"`` is the largest worker's ``VmRSS`` (``/proc``) at
     the end, ``"idle_cpu_percent"`` the worker processes' CPU seconds over the window as a
     percentage of one core (all workers together); the master's and supervisor's are given
     apart.
   - LocalCluster: everything runs in this process, so ``rss_before_mb`` is this process's
     ``VmRSS`` with a LocalCluster up and no topology, ``rss_after_mb`` the same once the idle
     topology has settled (the same rule), ``idle_topology_rss_mb`` the difference, and
     ``"idle_worker_rss_mb"`` = ``rss_after_mb`` (the process that is the worker).
     ``"idle_cpu_percent"`` is this process's CPU over ``idle_secs`` (the benchmark's own
     thread only sleeps meanwhile).

2. Bytes per tuple in flight (LocalCluster only; as fresh as possible: run it in a fresh
   interpreter, which the command line does). A ``CountingSpout`` emits ``pending`` (default
   100,000) tuples with message ids 0, 1, 2, ... as fast as it may, then nothing, into a
   ``NeverAckBolt``; max spout pending n (all in flight), message timeout 3600 s (no timeout or rotation
   happens while measuring). Once the spout has emitted them all, the bolt has executed them
   all, the acker has handled every message and the worker is idle, the benchmark walks the
   actual structures: the acker's pending map (``Acker.pending``, a 3-bucket `RotatingMap` of
   root -> `PendingTree` (xor, spout task, start time, failed, reset)) and the spout executor's
   (``SpoutExecutor.pending``, a 2-bucket `RotatingMap` of root -> (msg id, task, stream, start
   time)). `deep_size` adds ``sys.getsizeof`` of the map, its buckets, and every key, value and
   element reachable from them, each object once; ``None``, booleans and the small ints Python
   caches are shared by the whole process and not counted; an object shared by many entries
   (the stream name, or a start time the acker read once for a batch of messages) is counted
   once. Less an empty map of the same kind, divided by ``pending``: ``"acker_bytes_per_pending"``
   and ``"spout_bytes_per_pending"``. On LocalCluster the acker and the spout hold the same int
   object for each root (it travels in memory), so each map's figure counts it, and
   ``shared_bytes_per_pending`` says how much of the two is that same memory; across processes
   each side has its own copy. The message id (an int here) is the user's object, kept alive
   by the spout's map and counted in it.
   The executors are found through LocalCluster's private state (its ``_topologies`` -> the
   workers -> their executors), or by a scan of ``gc.get_objects()`` if that changes: the
   engine has no public hook for this.
   Cross-check, from outside: ``tracemalloc`` runs over this part (started before the
   submission); the allocations still alive at the measurement, made by lines of the engine's
   files (``squall/engine/``), divided by ``pending``, are ``traced_engine_bytes_per_pending``,
   and per file in ``traced_bytes_per_pending_by_file``. They include what the engine keeps
   per pending tuple anywhere, but are attributed to the line that allocated each object (a
   root int made by the spout's collector and kept by the acker counts as spout_executor.py).

3. The same with each spout tuple's tree fanned out (k = 1 and 20 by default): spout ->
   ``FanOutBolt(k)`` (emits k children anchored to its input, then acks the input) ->
   ``NeverAckBolt``. Every tree then waits on its k leaves. ``"acker_bytes_per_spout_tuple"`` is
   ``{"1": bytes, "20": bytes}``: the acker keeps one entry with one 64-bit xor per spout tuple
   whatever the tree's size (Storm's design), so it should not grow with k;
   ``spout_bytes_per_spout_tuple`` is the same for the spout's map (it does not see the tree at
   all). No tracemalloc here (k = 20 means 2,000,000 children).

There is no hand-written baseline: these are the engine's own bookkeeping costs, not a rate.
"""

from __future__ import annotations

import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from squall import Bolt, Config, Fields, LocalCluster, Spout, TopologyBuilder
from squall._native import PendingTreeBase
from squall.engine.acker import Acker, PendingTree
from squall.engine.acker_executor import AckerExecutor
from squall.engine.rotating_map import RotatingMap
from squall.engine.spout_executor import SpoutExecutor

from . import harness

DEFAULT_PENDING = 100_000
DEFAULT_KS = (1, 20)
DEFAULT_IDLE_SECS = 5.0
MESSAGE_TIMEOUT_SECS = 3600
SETTLE_STEP = 0.25
SETTLE_SPAN = 2.0
SETTLE_MB = 0.1
SETTLE_MAX = 20.0
ENGINE_DIR = str(Path(sys.modules[Acker.__module__].__file__).resolve().parent)


# --- components -----------------------------------------------------------------------------------------
class IdleSpout(Spout):
    """Emits nothing, ever."""

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("x"))

    def next_tuple(self) -> None:
        pass


class CountingSpout(Spout):
    """Emits ``[i]`` with message id ``i`` for i = 0 .. n-1 as fast as allowed, then nothing."""

    def __init__(self, n: int) -> None:
        self.n = n

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("x"))

    def open(self, conf, context, collector) -> None:
        super().open(conf, context, collector)
        self._emit = collector.emit
        self._i = 0

    def next_tuple(self) -> None:
        i = self._i
        if i < self.n:
            self._i = i + 1
            self._emit([i], i)


class FanOutBolt(Bolt):
    """Emits ``k`` children anchored to each input, then acks the input."""

    def __init__(self, k: int) -> None:
        self.k = k

    def prepare(self, conf, context, collector) -> None:
        super().prepare(conf, context, collector)
        self._emit = collector.emit
        self._ack = collector.ack

    def execute(self, tup) -> None:
        values = tup.values
        for _ in range(self.k):
            self._emit(values, tup)
        self._ack(tup)

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("x"))


class NeverAckBolt(Bolt):
    """Takes every tuple and never acks it (nor keeps it)."""

    def execute(self, tup) -> None:
        pass

    def declare_output_fields(self, declarer) -> None:
        pass


# --- sizes -------------------------------------------------------------------------------------------
def _process_wide(o: Any) -> bool:
    """Objects the whole process shares: not memory of any one structure."""
    return o is None or type(o) is bool or (type(o) is int and -5 <= o <= 256)


def deep_size(root: Any, seen: set[int] | None = None) -> int:
    """Bytes of ``root`` and of everything reachable from it through dicts, lists, tuples, sets,
    `RotatingMap` buckets and the acker's `PendingTree` records, each object once (``seen``: ids
    already counted, shared across calls); ints, floats, strings and other leaves by
    ``sys.getsizeof``; see `_process_wide`."""
    seen = set() if seen is None else seen
    total = 0
    stack = [root]
    getsizeof = sys.getsizeof
    while stack:
        o = stack.pop()
        i = id(o)
        if i in seen or _process_wide(o):
            continue
        seen.add(i)
        total += getsizeof(o)
        t = type(o)
        if t is dict:
            stack.extend(o.keys())
            stack.extend(o.values())
        elif t in (list, tuple, set, frozenset):
            stack.extend(o)
        elif t is RotatingMap:
            stack.append(o._buckets)  # ``newest`` is _buckets[0]; ``_expire`` is the owner's method
        elif t is PendingTree:  # compiled, only ``xor`` is an object of its own (squall._native)
            stack.extend(getattr(o, name) for name in getattr(PendingTreeBase, "__slots__", ("xor",)))
    return total


def rss_mb(pid: int | str = "self") -> float:
    """``VmRSS`` of a process now, in MB (``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def settle_rss(read, step: float = SETTLE_STEP, span: float = SETTLE_SPAN, tol: float = SETTLE_MB,
               limit: float = SETTLE_MAX) -> tuple[float, float]:
    """Samples ``read()`` (MB) every ``step`` s until it stayed within ``tol`` for ``span`` s (or
    ``limit`` s passed); returns (the last value, seconds waited)."""
    t0 = time.monotonic()
    ref, ref_t = read(), t0
    while True:
        time.sleep(step)
        v = read()
        now = time.monotonic()
        if abs(v - ref) > tol:
            ref, ref_t = v, now
        elif now - ref_t >= span or now - t0 >= limit:
            return v, now - t0


# --- 1. idle ---------------------------------------------------------------------------------------------
def idle_topology(workers: int = 1):
    builder = TopologyBuilder()
    builder.set_spout("spout", IdleSpout(), workers)
    builder.set_bolt("bolt", NeverAckBolt(), workers).shuffle_grouping("spout")
    conf = Config()
    conf.set_num_workers(workers)
    conf.set_num_ackers(workers)
    return builder.create_topology(), conf


def idle_local(idle_secs: float = DEFAULT_IDLE_SECS) -> dict[str, Any]:
    """Part 1 on LocalCluster: this process's RSS before and after an idle topology, and its CPU."""
    with LocalCluster() as cluster:
        gc.collect()
        before, _ = settle_rss(rss_mb, span=1.0)
        topology, conf = idle_topology()
        cluster.submit_topology("mem-idle", conf, topology)
        time.sleep(0.5)
        gc.collect()
        after, waited = settle_rss(rss_mb)
        cpu0, t0 = harness.cpu_seconds(), time.perf_counter()
        time.sleep(idle_secs)
        cpu, wall = harness.cpu_seconds() - cpu0, time.perf_counter() - t0
        info = cluster.get_topology_info("mem-idle")
        cluster.kill_topology("mem-idle", wait_secs=0)
    return {
        "rss_before_mb": round(before, 2),
        "rss_after_mb": round(after, 2),
        "idle_topology_rss_mb": round(after - before, 2),
        "idle_worker_rss_mb": round(after, 2),
        "idle_settle_s": round(waited + 0.5, 2),
        "idle_secs": idle_secs,
        "idle_cpu_s": round(cpu, 3),
        "idle_cpu_percent": round(100.0 * cpu / wall, 3),
        "idle_errors": len(info["errors"]),
    }


def idle_remote(host_name: str, workers: int = 1, idle_secs: float = DEFAULT_IDLE_SECS,
                spark_master: str | None = None) -> dict[str, Any]:
    """Part 1 on the process or Spark host: each idle worker's settled RSS and the workers' CPU."""
    from .hosts import make_host, proc_sample, usage_between

    topology, conf = idle_topology(workers)
    with make_host(host_name, workers, spark_master) as host:
        fields = host.fields()
        t_submit = time.perf_counter()
        host.submit("mem-idle", conf, topology)
        pids = host.wait_workers(workers)
        up = time.perf_counter() - t_submit

        def largest() -> float:
            return max((s["rss_mb"] for s in map(proc_sample, pids) if s is not None), default=0.0)

        _, waited = settle_rss(largest)
        s0 = host.samples()
        time.sleep(idle_secs)
        s1 = host.samples()
        rss = {p: proc_sample(p) for p in pids}
        info = host.info("mem-idle")
        host.kill("mem-idle", wait_secs=0)
        stopped = host.wait_no_workers()
    usage = usage_between(s0, s1)
    wall = s1["t"] - s0["t"]
    pct = (lambda v: None if v is None else round(100.0 * v / wall, 3))
    out = dict(fields)
    out.update({
        "workers": workers,
        "parallelism": workers,
        "workers_up_s": round(up, 3),
        "idle_settle_s": round(waited, 2),
        "idle_secs": idle_secs,
        "idle_worker_rss_mb": round(max(s["rss_mb"] for s in rss.values() if s), 2),
        "worker_rss_mb": [round(rss[p]["rss_mb"], 2) for p in sorted(rss) if rss[p]],
        "worker_peak_rss_mb": usage["worker_peak_rss_mb"],
        "peak_rss_mb": usage["peak_rss_mb"],
        "idle_cpu_s": usage["cpu_s"],
        "idle_cpu_percent": pct(usage["cpu_s"]),
        "worker_idle_cpu_percent": [pct(c) for c in usage["worker_cpu_s"]],
        "master_idle_cpu_percent": pct(usage["master_cpu_s"]),
        "supervisor_idle_cpu_percent": pct(usage["supervisor_cpu_s"]),
        "other_cpu_s": usage["other_cpu_s"],
        "idle_errors": len(info["errors"]),
        "workers_stopped": stopped,
    })
    return out


# --- 2 and 3. bytes per pending tuple -----------------------------------------------------------------
def pending_topology(n: int, k: int):
    """spout (n tuples) -> [FanOutBolt(k) ->] NeverAckBolt; k = 0: no fan-out bolt."""
    builder = TopologyBuilder()
    builder.set_spout("spout", CountingSpout(n), 1)
    if k:
        builder.set_bolt("fan", FanOutBolt(k), 1).shuffle_grouping("spout")
        builder.set_bolt("sink", NeverAckBolt(), 1).shuffle_grouping("fan")
    else:
        builder.set_bolt("sink", NeverAckBolt(), 1).shuffle_grouping("spout")
    conf = Config()
    conf.set_num_workers(1)
    conf.set_num_ackers(1)
    conf.set_message_timeout_secs(MESSAGE_TIMEOUT_SECS)
    conf.set_max_spout_pending(n)  # all n in flight: unset, the automatic limit would hold them back
    return builder.create_topology(), conf


def _executors(cluster: LocalCluster, name: str) -> list[Any]:
    """The executors of topology ``name`` (LocalCluster's private state; a gc scan if it moved)."""
    try:
        return [ex for w in cluster._topologies[name].workers.values() for ex in w.executors]
    except (AttributeError, KeyError):
        return [o for o in gc.get_objects() if isinstance(o, (SpoutExecutor, AckerExecutor))]


def pending_bytes(n: int = DEFAULT_PENDING, k: int = 0, trace: bool = False, timeout: float = 300.0) -> dict[str, Any]:
    """Parts 2 (k = 0) and 3 (k > 0): bytes per pending spout tuple of the acker's and the
    spout's pending maps, with ``n`` spout tuples in flight; see the module docstring."""
    topology, conf = pending_topology(n, k)
    name = f"mem-pending-k{k}"
    sink_expected = n * max(k, 1)
    acker_expected = n if k == 0 else 2 * n  # the inits, and the fan-out bolt's one ack per root
    gc.collect()
    if trace:
        tracemalloc.start(1)
    try:
        t0 = time.perf_counter()
        with LocalCluster() as cluster:
            cluster.submit_topology(name, conf, topology)
            deadline = time.perf_counter() + timeout
            while True:
                info = cluster.get_topology_info(name)
                c = info["components"]
                if [e for e in info["errors"] if e.get("fatal")]:
                    raise RuntimeError(f"MEM topology crashed: {info['errors'][0]['error']}")
                if (c["spout"]["emitted"] >= n and c["sink"]["executed"] >= sink_expected
                        and info["acker"]["executed"] >= acker_expected and cluster.is_idle(name)):
                    break
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"MEM k={k}: not settled in {timeout} s: spout emitted {c['spout']['emitted']}, "
                                       f"sink executed {c['sink']['executed']}, acker {info['acker']['executed']}")
                time.sleep(0.05)
            fill_s = time.perf_counter() - t0
            snapshot = tracemalloc.take_snapshot() if trace else None
            if trace:
                tracemalloc.stop()  # the walk below would be traced too
            executors = _executors(cluster, name)
            spouts = [ex for ex in executors if isinstance(ex, SpoutExecutor)]
            ackers = [a for ex in executors if isinstance(ex, AckerExecutor) for a in ex.ackers.values()]
            spout_n = sum(len(s.pending) for s in spouts)
            acker_n = sum(len(a.pending) for a in ackers)
            in_flight = sum(s.in_flight for s in spouts)
            open_trees = sum(1 for a in ackers for b in a.pending._buckets for e in b.values()
                             if e.xor != 0 and e.spout_task >= 0)
            spout_bytes = sum(deep_size(s.pending) for s in spouts) - len(spouts) * deep_size(RotatingMap(2))
            acker_bytes = sum(deep_size(a.pending) for a in ackers) - len(ackers) * deep_size(RotatingMap(3))
            seen: set[int] = set()
            both = sum(deep_size(s.pending, seen) for s in spouts) + sum(deep_size(a.pending, seen) for a in ackers)
            both -= len(spouts) * deep_size(RotatingMap(2)) + len(ackers) * deep_size(RotatingMap(3))
            failed = info["components"]["spout"]["failed"]
            acked = info["components"]["spout"]["acked"]
            cluster.kill_topology(name, wait_secs=0)
            del executors, spouts, ackers
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
    out: dict[str, Any] = {
        "k": k,
        "spout_tuples": n,
        "fill_s": round(fill_s, 2),
        "spout_pending": spout_n,
        "spout_in_flight": in_flight,
        "acker_pending": acker_n,
        "acker_open_trees": open_trees,
        "acker_bytes_per_pending": round(acker_bytes / n, 1),
        "spout_bytes_per_pending": round(spout_bytes / n, 1),
        "shared_bytes_per_pending": round((acker_bytes + spout_bytes - both) / n, 1),
        "acked": acked,
        "failed": failed,
        "errors": len(info["errors"]),
        "correct": (spout_n == n and acker_n == n and in_flight == n and open_trees == n
                    and failed == 0 and acked == 0 and not info["errors"]),
    }
    if snapshot is not None:
        stats = snapshot.filter_traces([tracemalloc.Filter(True, os.path.join(ENGINE_DIR, "*"))]).statistics("filename")
        by_file = {os.path.basename(s.traceback[0].filename): s.size for s in stats}
        out["traced_engine_bytes_per_pending"] = round(sum(by_file.values()) / n, 1)
        out["traced_bytes_per_pending_by_file"] = {f: round(b / n, 1) for f, b in
                                                  sorted(by_file.items(), key=lambda kv: -kv[1]) if b >= n}
    return out


# --- a run --------------------------------------------------------------------------------------------------
def run(host: str = "local", workers: int = 1, pending: int = DEFAULT_PENDING, ks: tuple[int, ...] = DEFAULT_KS,
        idle_secs: float = DEFAULT_IDLE_SECS, spark_master: str | None = None, trace: bool = True) -> dict[str, Any]:
    """One MEM run: on LocalCluster parts 1-3, on the process or Spark host part 1; the record."""
    if host in ("process", "spark"):
        idle = idle_remote(host, workers, idle_secs, spark_master)
        record = harness.base_record("MEM", True, **idle)
        record["correct"] = idle["idle_errors"] == 0 and idle["workers_stopped"] and idle["idle_worker_rss_mb"] > 0
        return harness.finish_record(record, None)
    if host != "local" or workers != 1:
        raise ValueError(f"host {host!r} with {workers} workers: LocalCluster runs 1 worker")
    idle = idle_local(idle_secs)
    base = pending_bytes(pending, 0, trace=trace)
    by_k = {kk: pending_bytes(pending, kk) for kk in ks}
    record = harness.base_record(
        "MEM", True, **idle,
        pending=pending,
        message_timeout_secs=MESSAGE_TIMEOUT_SECS,
        acker_bytes_per_pending=base["acker_bytes_per_pending"],
        spout_bytes_per_pending=base["spout_bytes_per_pending"],
        shared_bytes_per_pending=base["shared_bytes_per_pending"],
        traced_engine_bytes_per_pending=base.get("traced_engine_bytes_per_pending"),
        traced_bytes_per_pending_by_file=base.get("traced_bytes_per_pending_by_file"),
        tree_sizes=list(ks),
        acker_bytes_per_spout_tuple={str(kk): r["acker_bytes_per_pending"] for kk, r in by_k.items()},
        spout_bytes_per_spout_tuple={str(kk): r["spout_bytes_per_pending"] for kk, r in by_k.items()},
        fill_s={str(kk): r["fill_s"] for kk, r in [(0, base), *by_k.items()]},
        measured_by="object walk (sys.getsizeof) of Acker.pending and SpoutExecutor.pending; tracemalloc cross-check",
        correct=idle["idle_errors"] == 0 and base["correct"] and all(r["correct"] for r in by_k.values()),
        details=[base, *by_k.values()],
    )
    return harness.finish_record(record, None)
