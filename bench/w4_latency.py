"""W4 latency (BENCHMARKS.md): a spout emits at a fixed rate into the W3 shape; complete latency
p50, p99 and p99.9 of every tuple, and the acked tuples/s achieved.

    spout (PacedSpout) --local_or_shuffle--> bolt1 (IdBolt: emits the values anchored, acks)
                       --local_or_shuffle--> bolt2 (DevNullBolt: acks)

Acking is always on: every tuple has a message id, one acker per worker (Storm's default) and
``topology.max.spout.pending`` (default 1000, as W3) bound what is in flight.

The rate. ``rate`` tuples/s in all (``--rate N``, default 1,000), each of the spout's
``parallelism`` tasks emitting ``rate / parallelism``; or ``--rate half-peak``: first a short W3
(acking on, the same host, workers and executors, on the same throwaway cluster: ``probe_warmup``
seconds (default 2) after the submission, on the process and Spark hosts after its workers
started, then acked tuples/s over ``probe_secs`` (default 3), measured as `bench.w2_const_null`
does) gives the peak acked rate, and W4 then runs at half of it. The record keeps both:
``peak_rate`` (the W3 probe's acked tuples/s) and ``target_rate`` (the rate asked), with
``peak_fraction`` 0.5; for a fixed rate ``peak_fraction`` and ``peak_rate`` are null.

Pacing. A task's n-th tuple is due at ``t0 + n / task_rate`` (``time.monotonic``; ``t0`` is its
first ``next_tuple``, so the warm-up counts from the first emit, not from the submission).
``next_tuple`` emits one tuple if one is due, and otherwise returns without emitting, so that
squall's spout wait strategy puts the loop to sleep (1 ms, doubling while nothing is due): it
never spins and never sleeps itself. (A sleep inside ``next_tuple`` holds the worker's loop,
which also runs the bolts and the acker, and the engine calls ``next_tuple`` up to 64 times in
a row while it emits: tried on LocalCluster at half of the peak, sleeping until a tuple due
within 0.5 ms gave a p50 of 3.2 ms, against 0.07 ms without.) A task thus emits what is due,
and catches up on what is overdue, in bursts between the loop's sleeps. How late each emit was
against its schedule is recorded too (``emit_lag_*``): latency is measured from the actual
emit, so a spout held back (by max spout pending or backpressure) would hide waiting that only
the schedule shows. A task emits ``(warmup + secs + TAIL_SECS) x task_rate`` tuples, then
nothing.

Latency, per tuple, in the spout: ``next_tuple`` keeps the emit time per message id (a dict),
and ``ack`` takes ``now - emit time`` and appends (ack time, latency) to two flat arrays; ack and
emit times are kept relative to the task's ``t0``. On LocalCluster the arrays live in the
process-wide sample registry (`harness.registry_open`, as W2's samples; the key is passed in
the component configuration); on the process and Spark hosts the spout writes them on ``close``
as ``latency-<task>.bin`` and ``lag-<task>.bin`` into ``bench.output.dir``.

The window. The figures cover ``secs`` seconds after ``warmup`` seconds of each task's own
schedule: the percentiles are of the tuples emitted in ``[warmup, warmup + secs)`` (each one's
emit-to-ack time; every one is acked before the run ends), the achieved rate is the number of
acks that arrived in ``[warmup, warmup + secs]``, summed over the spout's tasks, over ``secs``.
Percentiles are nearest-rank (`harness.percentile`). After its last emit the run waits until
every tuple is acked (``get_topology_info``; heartbeated, ~1 s late, on the process and Spark
hosts), then kills the topology. Correct means: no tuple failed, no error, and one latency was
recorded for every tuple emitted (so every emitted tuple was acked).

CPU: the work's CPU seconds over ``secs`` seconds that start ``warmup`` seconds after the
benchmark first saw the spout emit: on LocalCluster the process's (`harness.Meter`); on the
process and Spark hosts the worker processes' (`bench.hosts.usage_between`), whose first emit
is seen only with a heartbeat (up to ~1 s late), so there the CPU window is approximate.

Baseline (`baseline_latency`): the same three-stage pipeline as plain Python threads and queues
at the same rate, for ``min(warmup, 1) + secs + TAIL_SECS`` seconds, in the benchmark's process
under Python's default GC thresholds: the calling thread is the spout; it emits on the same
schedule, keeps the emit time per id in a dict and, between emits, blocks on its ack queue
(``SimpleQueue.get`` with a timeout up to the next due emit; never a spin); a second thread
takes each tuple from a queue and puts a copy on the next queue (the id bolt), a third takes it
and puts its id on the ack queue (the null bolt). Its figures use the same window rule (after its own warm-up):
``baseline_rate`` (achieved acked tuples/s) and ``baseline_latency_p50_ms`` / ``_p99_ms`` /
``_p999_ms``. ``ratio`` is squall's achieved rate over the baseline's (as in the other
workloads' records; about 1 while both keep up with the rate asked) and ``latency_ratio_p99``
squall's p99 over the baseline's.

Each record carries what a latency-against-throughput chart needs: ``target_rate`` (asked),
``tuples_per_s`` (achieved), ``complete_latency_p50_ms`` / ``_p99_ms`` / ``_p999_ms``.
"""

from __future__ import annotations

import math
import queue
import shutil
import tempfile
import threading
import time
import uuid
from array import array
from pathlib import Path
from typing import Any

from squall import Config, Fields, LocalCluster, Spout, TopologyBuilder

from . import harness
from .w2_const_null import (DEFAULT_MAX_PENDING, OUTPUT_DIR_KEY, SAMPLES_KEY, DevNullBolt, IdBolt, _FileSamples,
                            _heartbeat_edge, _registry_samples, read_sample_file)
from .w2_const_null import build as build_const

DEFAULT_RATE = 1000.0
HALF_PEAK = "half-peak"
PEAK_FRACTION = 0.5
TAIL_SECS = 0.25
"""The spout keeps emitting this long after the window, so the window's end is in steady state."""
LAG_SUFFIX = "/lag"
PROBE_WARMUP = 2.0
PROBE_SECS = 3.0


# --- the topology -----------------------------------------------------------------------------------
class PacedSpout(Spout):
    """Emits ``["some data"]`` with message ids 0, 1, 2, ... at ``rate`` tuples/s in all (each of
    the component's tasks ``rate / tasks``) for ``duration`` seconds of its own schedule, then
    nothing; records each tuple's emit-to-ack latency and how late each emit was (module
    docstring)."""

    def __init__(self, rate: float, duration: float, value: str = "some data") -> None:
        self.rate = float(rate)
        self.duration = float(duration)
        self.value = value

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("str"))

    def open(self, conf, context, collector) -> None:
        super().open(conf, context, collector)
        self._emit = collector.emit
        tasks = len(context.get_component_tasks(context.get_this_component_id()))
        task_rate = self.rate / tasks
        self._period = 1.0 / task_rate
        self._total = int(round(self.duration * task_rate))
        self._n = 0
        self._t0: float | None = None
        self._sent: dict[int, float] = {}
        key = conf.get(SAMPLES_KEY)
        out = conf.get(OUTPUT_DIR_KEY)
        if key:
            self._acks = _registry_samples(key)
            self._lags = _registry_samples(key + LAG_SUFFIX)
        else:
            task = context.get_this_task_id()
            self._acks = _FileSamples(Path(out) / f"latency-{task}.bin")
            self._lags = _FileSamples(Path(out) / f"lag-{task}.bin")

    def next_tuple(self) -> None:
        n = self._n
        if n >= self._total:
            return
        now = time.monotonic()
        t0 = self._t0
        if t0 is None:
            t0 = self._t0 = now
        due = t0 + n * self._period
        if now < due:
            return  # not due: the engine's wait strategy sleeps
        self._n = n + 1
        self._sent[n] = now
        self._lags.add(now - t0, now - due)
        self._emit([self.value], n)

    def ack(self, msg_id) -> None:
        now = time.monotonic()
        self._acks.add(now - self._t0, now - self._sent.pop(msg_id))

    def fail(self, msg_id) -> None:
        self._sent.pop(msg_id, None)  # counted by squall (the spout's ``failed``)

    def close(self) -> None:
        for s in (self._acks, self._lags):
            if isinstance(s, _FileSamples):
                s.write()


def build(rate: float, duration: float, max_pending: int | str = DEFAULT_MAX_PENDING, workers: int = 1,
          parallelism: int = 1, samples_key: str | None = None, output_dir: str | None = None):
    """The W4 topology (W3's shape with a paced spout) and its configuration."""
    if not samples_key and not output_dir:
        raise ValueError("W4's spout needs a samples key (LocalCluster) or an output directory")
    builder = TopologyBuilder()
    spout = builder.set_spout("spout", PacedSpout(rate, duration), parallelism)
    if samples_key:
        spout.add_configuration(SAMPLES_KEY, samples_key)
    if output_dir:
        spout.add_configuration(OUTPUT_DIR_KEY, output_dir)
    builder.set_bolt("bolt1", IdBolt(), parallelism).local_or_shuffle_grouping("spout")
    builder.set_bolt("bolt2", DevNullBolt(), parallelism).local_or_shuffle_grouping("bolt1")
    conf = Config()
    conf.set_num_workers(workers)
    conf.set_num_ackers(workers)
    conf.set_max_spout_pending(max_pending)
    return builder.create_topology(), conf


# --- LocalCluster with the verbs of bench.hosts ----------------------------------------------------
class LocalHost:
    """A LocalCluster with the verbs of `bench.hosts.ProcessHost` that W4 uses."""

    name = "local"

    def __enter__(self) -> LocalHost:
        self.cluster = LocalCluster()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.shutdown()

    def fields(self) -> dict[str, Any]:
        return {"host": "local"}

    def submit(self, name: str, conf: dict, topology: Any) -> None:
        self.cluster.submit_topology(name, conf, topology)

    def info(self, name: str) -> dict[str, Any]:
        return self.cluster.get_topology_info(name)

    def get_component_page(self, name: str, component: str) -> dict[str, Any]:
        return self.cluster.get_component_page(name, component)

    def kill(self, name: str, wait_secs: float | None = 0) -> None:
        self.cluster.kill_topology(name, wait_secs=wait_secs)  # 0: stopped when it returns


# --- the peak (a short W3) -----------------------------------------------------------------------------
def probe_peak(host: Any, remote: bool, workers: int, parallelism: int, max_pending: int | str,
               warmup: float = PROBE_WARMUP, secs: float = PROBE_SECS) -> float:
    """W3's acked tuples/s (acking on) on ``host``: ``warmup`` seconds after the submission (on a
    remote host: after its workers started), then over ``secs`` (on a remote host between
    heartbeat arrivals, as `w2_const_null.run_process`)."""
    topology, conf, _last = build_const("W3", True, None, max_pending, workers, parallelism)
    name = "w4-peak-w3"

    def acked(info: dict) -> int:
        return info["components"]["spout"]["acked"]

    host.submit(name, conf, topology)
    try:
        if remote:
            host.wait_workers(workers)
            time.sleep(warmup)
            ev0, info0, _ = _heartbeat_edge(host, name, acked)
            time.sleep(max(0.0, ev0[0] + secs - time.perf_counter()))
            ev1, info1, _ = _heartbeat_edge(host, name, acked)
            window = sum(ev1) / len(ev1) - sum(ev0) / len(ev0)
        else:
            time.sleep(warmup)
            t0, info0 = time.perf_counter(), host.info(name)
            time.sleep(secs)
            t1, info1 = time.perf_counter(), host.info(name)
            window = t1 - t0
        errors = [e for e in info1["errors"] if e.get("fatal")]
        if errors:
            raise RuntimeError(f"the W3 probe crashed: {errors[0]['error']}")
    finally:
        host.kill(name, wait_secs=0)
        if remote:
            host.wait_no_workers()
    rate = (acked(info1) - acked(info0)) / window
    if rate <= 0:
        raise RuntimeError("the W3 probe acked no tuple: no peak to take half of")
    return rate


# --- the baseline ------------------------------------------------------------------------------------
def baseline_latency(rate: float, secs: float, warmup: float = 1.0, value: str = "some data") -> dict[str, Any]:
    """The W3 shape as three Python threads (this one the spout) and three queues at ``rate``
    tuples/s for ``warmup + secs + TAIL_SECS`` seconds; the figures of the window after
    ``warmup`` (module docstring). Runs under Python's default GC thresholds."""
    q1: queue.SimpleQueue = queue.SimpleQueue()
    q2: queue.SimpleQueue = queue.SimpleQueue()
    acks: queue.SimpleQueue = queue.SimpleQueue()

    def id_stage() -> None:
        get, put = q1.get, q2.put
        while True:
            item = get()
            if item is None:
                put(None)
                return
            values, mid = item
            put((list(values), mid))  # the anchored copy

    def null_stage() -> None:
        get, put = q2.get, acks.put
        while True:
            item = get()
            if item is None:
                return
            put(item[1])  # ack

    period = 1.0 / rate
    total = int(round((warmup + secs + TAIL_SECS) * rate))
    sent: dict[int, float] = {}
    ack_times, lats, lag_times, lags = array("d"), array("d"), array("d"), array("d")
    with harness.default_gc():
        threads = [threading.Thread(target=f, name=f"w4-baseline-{f.__name__}", daemon=True)
                   for f in (id_stage, null_stage)]
        for t in threads:
            t.start()
        put, get, empty = q1.put, acks.get, queue.Empty
        n = done = 0
        t0 = time.monotonic()
        while done < total:
            now = time.monotonic()
            while n < total and t0 + n * period <= now:  # emit what is due
                t = time.monotonic()
                sent[n] = t
                lag_times.append(t - t0)
                lags.append(t - (t0 + n * period))
                put(([value], n))
                n += 1
            timeout = max(0.0, t0 + n * period - time.monotonic()) if n < total else 5.0
            try:
                mid = get(timeout=timeout)  # blocks until an ack or the next emit is due
            except empty:
                if n >= total:
                    raise RuntimeError(f"baseline: {total - done} tuples never came back") from None
                continue
            while True:
                t = time.monotonic()
                ack_times.append(t - t0)
                lats.append(t - sent.pop(mid))
                done += 1
                try:
                    mid = acks.get_nowait()
                except empty:
                    break
        q1.put(None)
        for t in threads:
            t.join(5)
    return window_figures([(ack_times, lats, lag_times, lags)], warmup, secs)


# --- figures -----------------------------------------------------------------------------------------
def window_figures(tasks: list[tuple[Any, Any, Any, Any]], warmup: float, secs: float) -> dict[str, Any]:
    """The window's figures from each spout task's (ack times, latencies, emit times, emit lags),
    all in seconds relative to that task's first emit: acked tuples/s in ``[warmup, warmup +
    secs]``, the latency percentiles of the tuples emitted in ``[warmup, warmup + secs)``, and
    the lag percentiles of those emits."""
    start, end = warmup, warmup + secs
    window_lats: list[float] = []
    window_lags: list[float] = []
    acked = total = 0
    for ack_times, lats, emit_times, lags in tasks:
        total += len(lats)
        for t, v in zip(ack_times, lats):
            if start <= t <= end:
                acked += 1
            if start <= t - v < end:
                window_lats.append(v)
        window_lags.extend(v for t, v in zip(emit_times, lags) if start <= t < end)
    window_lats.sort()
    window_lags.sort()

    def ms(v: float | None) -> float | None:
        return None if v is None else round(1000.0 * v, 4)

    return {
        "rate": acked / secs if secs > 0 else 0.0,
        "acked_in_window": acked,
        "latencies": len(window_lats),
        "recorded": total,
        "p50_ms": ms(harness.percentile(window_lats, 50)),
        "p99_ms": ms(harness.percentile(window_lats, 99)),
        "p999_ms": ms(harness.percentile(window_lats, 99.9)),
        "mean_ms": ms(sum(window_lats) / len(window_lats)) if window_lats else None,
        "max_ms": ms(window_lats[-1]) if window_lats else None,
        "lag_p50_ms": ms(harness.percentile(window_lags, 50)),
        "lag_p99_ms": ms(harness.percentile(window_lags, 99)),
        "lag_max_ms": ms(window_lags[-1]) if window_lags else None,
    }


# --- a run -----------------------------------------------------------------------------------------------
def parse_rate(text: str | float) -> float | str:
    """``--rate``: a number of tuples/s (> 0), or "half-peak"."""
    if isinstance(text, str) and text.strip().lower() in (HALF_PEAK, "half"):
        return HALF_PEAK
    try:
        rate = float(text)
    except ValueError:
        rate = float("nan")
    if not rate > 0 or math.isinf(rate):
        raise ValueError(f"rate must be a positive number of tuples/s or {HALF_PEAK!r}, got {text!r}")
    return rate


def run(rate: float | str = DEFAULT_RATE, secs: float = 30.0, warmup: float = 10.0,
        max_pending: int | str = DEFAULT_MAX_PENDING, host: str = "local", workers: int = 1,
        parallelism: int | None = None, spark_master: str | None = None,
        probe_secs: float = PROBE_SECS, probe_warmup: float = PROBE_WARMUP,
        timeout: float = 60.0) -> dict[str, Any]:
    """One W4 run at ``rate`` tuples/s (or ``"half-peak"``), then its baseline; the record.

    Args:
        host: ``"local"`` (LocalCluster, 1 worker), ``"process"`` or ``"spark"`` (`bench.hosts`).
        workers, parallelism, spark_master: as `bench.w2_const_null.run`.
        probe_secs, probe_warmup: the W3 probe of ``"half-peak"`` (its window and warm-up).
        timeout: seconds to wait, after the last emit is due, for every tuple to be acked.
    """
    rate = parse_rate(rate)
    remote = host in ("process", "spark")
    if not remote and (host != "local" or workers != 1 or parallelism not in (None, 1)):
        raise ValueError(f"host {host!r} with {workers} workers: LocalCluster runs 1 worker, parallelism 1")
    parallelism = (parallelism or workers) if remote else 1
    duration = warmup + secs + TAIL_SECS
    key = None if remote else f"W4-{uuid.uuid4().hex}"
    output_dir = Path(tempfile.mkdtemp(prefix="squall-bench-w4-")) if remote else None
    name = "w4-latency"
    if remote:
        from .hosts import make_host, usage_between
        host_cm: Any = make_host(host, workers, spark_master)
    else:
        host_cm = LocalHost()
    try:
        if key:
            acks, lags = harness.registry_open(key), harness.registry_open(key + LAG_SUFFIX)
        with host_cm as h:
            host_fields = h.fields()
            peak = None
            if rate == HALF_PEAK:
                peak = probe_peak(h, remote, workers, parallelism, max_pending, probe_warmup, probe_secs)
                target = peak * PEAK_FRACTION
            else:
                target = rate
            topology, conf = build(target, duration, max_pending, workers, parallelism, key,
                                   str(output_dir) if output_dir else None)
            tasks = int(round(duration * target / parallelism))
            expected = tasks * parallelism
            t_submit = time.perf_counter()
            h.submit(name, conf, topology)
            if remote:
                h.wait_workers(workers)
            t_workers = time.perf_counter()
            poll = 0.1 if remote else harness.FINE_POLL_SECS
            while True:  # the spout's first emit (on a remote host: its first heartbeat after it)
                info = h.info(name)
                _check_fatal(info)
                if info["components"]["spout"]["emitted"] > 0:
                    break
                if time.perf_counter() > t_workers + timeout:
                    raise RuntimeError(f"W4: the spout emitted nothing within {timeout} s of the workers' start")
                time.sleep(poll)
            t_first = time.perf_counter()
            time.sleep(max(0.0, t_first + warmup - time.perf_counter()))
            meter = harness.Meter().start()
            procs0 = h.samples() if remote else None
            time.sleep(max(0.0, t_first + warmup + secs - time.perf_counter()))
            procs1 = h.samples() if remote else None
            meter.stop()
            deadline = t_first + duration + timeout
            while True:  # every tuple acked (or failed)
                info = h.info(name)
                _check_fatal(info)
                sp = info["components"]["spout"]
                if sp["acked"] + sp["failed"] >= expected:
                    break
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"W4: {expected - sp['acked'] - sp['failed']} of {expected} tuples neither "
                                       f"acked nor failed {timeout} s after the last was due")
                time.sleep(harness.POLL_SECS if remote else harness.FINE_POLL_SECS)
            limits = harness.spout_limits(h, name, "spout")
            h.kill(name, wait_secs=0)
            stopped = True
            if remote:
                harness.wait_files(output_dir, "lag-*.bin", parallelism, 20.0)
                harness.wait_files(output_dir, "latency-*.bin", parallelism, 20.0)
                stopped = h.wait_no_workers()
        if remote:
            per_task = []
            for f in sorted(output_dir.glob("latency-*.bin")):
                lag_file = f.with_name("lag-" + f.name[len("latency-"):])
                a = read_sample_file(f)
                g = read_sample_file(lag_file) if lag_file.exists() else harness.Samples()
                per_task.append((a.times, a.values, g.times, g.values))
        else:
            per_task = [(acks.times, acks.values, lags.times, lags.values)]
    finally:
        if key:
            harness.registry_close(key)
            harness.registry_close(key + LAG_SUFFIX)
        if output_dir is not None:
            shutil.rmtree(output_dir, ignore_errors=True)

    fig = window_figures(per_task, warmup, secs)
    sp = info["components"]["spout"]
    failed = sp["failed"]
    errors = info["errors"]

    base_warmup = min(warmup, 1.0)
    base_wall, base = harness.time_baseline(lambda: baseline_latency(target, secs, base_warmup))

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 4) if a is not None and b else None

    extra: dict[str, Any] = {}
    if remote:
        extra.update(workers=workers, parallelism=parallelism, ackers=workers,
                     workers_up_s=round(t_workers - t_submit, 3),
                     cpu_window="approximate: from the first heartbeat showing an emit, + warmup",
                     **usage_between(procs0, procs1))
    else:
        extra.update(cpu_s=round(meter.cpu, 2), other_cpu_s=meter.other_cpu)
    record = harness.base_record(
        "W4", True, **host_fields, **extra,
        secs=secs, warmup=warmup,
        max_spout_pending=max_pending,
        max_spout_pending_final=limits,
        rate_mode="half-peak" if peak is not None else "fixed",
        target_rate=round(target, 1),
        peak_fraction=PEAK_FRACTION if peak is not None else None,
        peak_rate=round(peak, 1) if peak is not None else None,
        peak_probe=(f"W3 acking on, same host: {probe_warmup:g} s warm-up, {probe_secs:g} s window"
                    + (" (heartbeat-aligned)" if remote else "")
                    if peak is not None else None),
        wall_s=round(meter.wall, 3),
        tuples_per_s=round(fig["rate"], 1),
        rate_unit="acked tuples/s",
        tuples=fig["acked_in_window"],
        complete_latency_p50_ms=fig["p50_ms"],
        complete_latency_p99_ms=fig["p99_ms"],
        complete_latency_p999_ms=fig["p999_ms"],
        complete_latency_mean_ms=fig["mean_ms"],
        complete_latency_max_ms=fig["max_ms"],
        latency_samples=fig["latencies"],
        latency_source="every tuple: the spout's emit time per msg id, latency at ack",
        emit_lag_p50_ms=fig["lag_p50_ms"],
        emit_lag_p99_ms=fig["lag_p99_ms"],
        emit_lag_max_ms=fig["lag_max_ms"],
        emitted=expected,
        acked=sp["acked"],
        latencies_recorded=fig["recorded"],
        failed=failed,
        errors=len(errors),
        workers_stopped=stopped,
        correct=(failed == 0 and not errors and stopped and sp["acked"] == expected
                 and fig["recorded"] == expected and fig["latencies"] > 0),
        baseline="3 Python threads + queues, same rate and schedule",
        baseline_wall_s=round(base_wall, 3),
        baseline_rate=round(base["rate"], 1),
        baseline_latency_p50_ms=base["p50_ms"],
        baseline_latency_p99_ms=base["p99_ms"],
        baseline_latency_p999_ms=base["p999_ms"],
        baseline_latency_samples=base["latencies"],
        ratio=ratio(fig["rate"], base["rate"]),
        latency_ratio_p99=ratio(fig["p99_ms"], base["p99_ms"]),
    )
    return harness.finish_record(record, None if remote else meter)


def _check_fatal(info: dict) -> None:
    fatal = [e for e in info["errors"] if e.get("fatal")]
    if fatal:
        raise RuntimeError(f"W4 crashed: {fatal[0]['error']}\n{fatal[0].get('traceback', '')}")
