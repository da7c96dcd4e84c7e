"""W2 const-null and W3 const-id-null (Storm's storm-perf ConstSpoutNullBoltTopo and
ConstSpoutIdBoltNullBoltTopo), and their hand-written baselines.

    W2:  spout (ConstSpout) --local_or_shuffle--> bolt (DevNullBolt: acks)
    W3:  spout (ConstSpout) --local_or_shuffle--> bolt1 (IdBolt: emits the values anchored, acks)
                            --local_or_shuffle--> bolt2 (DevNullBolt: acks)

The spout emits ``["some data"]`` as fast as it is allowed. With acking on, each tuple carries
an incrementing message id, one acker runs and ``topology.max.spout.pending`` bounds what is in
flight (default 1000, reported in the record). With acking off there is no acker and no message
id; only squall's backpressure (``topology.executor.receive.buffer.size``) throttles the spout.

Measurement: the topology runs ``warmup`` seconds, then ``get_topology_info`` is read at the
start and end of a ``secs`` window. The rate is the window's delta of the spout's ``acked``
(acking on) or of the last bolt's ``executed`` (acking off). Mean complete latency is the
window's delta of the spout tasks' latency sum over their latency count (squall's own
``complete_latency_ms`` counters).

p99 complete latency (squall keeps only a sum and a count): the spout samples it itself. For
every 16th message id it stores ``perf_counter()`` at emit in a dict keyed by the id, and in
``ack`` appends the ack time and the latency to two flat arrays (`harness.Samples`) in a
process-wide registry (`harness.registry_open`) under a key passed in the component configuration (``bench.samples.key``)
— squall copies the spout per task, so a list on the spout object itself would be out of the
benchmark's reach. The benchmark keeps the samples acked inside the window. This works only
where the spout runs in the benchmark's process (LocalCluster). Sampling costs the spout one
``&`` per emit and a dict pop per ack; the sampled latency runs from just before ``emit`` to the
start of ``ack``, the same interval squall's counters measure.

On the process host (``host="process"``) and the Spark host (``host="spark"``: workers as Spark
tasks; both `run_process`, on a `bench.hosts` host), the topology runs in worker processes, so
neither the in-process registry nor ``task_stats`` reach the benchmark: the rate is the window's
delta of the same counters in the master's heartbeated ``get_topology_info`` (workers heartbeat
every ~1 s; the window's edges are aligned on heartbeat arrivals, see `_heartbeat_edge`), the
mean latency is the window's delta of ``complete_latency_ms x acked`` over the delta of
``acked`` (squall counts a latency for every acked tuple), and the spout keeps its samples
itself and writes them on ``close`` as ``latency-<task>.bin`` into ``bench.output.dir``;
``time.perf_counter`` is CLOCK_MONOTONIC, one clock for every process of the machine, so the
benchmark picks the samples acked inside its window. CPU and peak RSS are read per worker
process from ``/proc``. The warm-up counts from the submission, as on LocalCluster, so it
includes the workers' start (``workers_up_s``: until every worker process runs; a few seconds
longer on Spark, where each worker is a Spark job).

Baselines (`baseline_w2`, `baseline_w3`): one plain Python loop doing the equivalent work per
tuple, for as many tuples as squall completed in the window: build the tuple, append it to a
deque, pop it (and, for W3, build the copy and pass it through a second deque), and with acking
on "track" it as a message id inserted into a dict at emit and deleted at the ack.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from array import array
from collections import deque
from pathlib import Path
from typing import Any

from squall import Bolt, Config, Fields, LocalCluster, Spout, TopologyBuilder

from . import harness

DEFAULT_MAX_PENDING = 1000
SAMPLES_KEY = "bench.samples.key"
OUTPUT_DIR_KEY = "bench.output.dir"
SAMPLE_MASK = 15  # sample message ids with (id & 15) == 0: every 16th tuple


def _registry_samples(key: str):
    """The benchmark's sample registry, looked up at run time in this process's ``bench.harness``.

    Not ``harness.registry_get``: the client ships the user's whole package by value to the
    workers (`squall.cluster.client`), and a component whose code names the ``harness`` module
    would drag it, locks and all, into the pickle (and, unpickled in this process, get a fresh
    copy of the registry instead of the benchmark's).
    """
    mod = sys.modules.get("bench.harness")
    return mod.registry_get(key) if mod is not None else None


class _FileSamples:
    """Samples kept by the spout itself and written on close (the process host)."""

    __slots__ = ("times", "values", "path")

    def __init__(self, path: Path) -> None:
        self.times = array("d")
        self.values = array("d")
        self.path = path

    def add(self, t: float, v: float) -> None:
        self.times.append(t)
        self.values.append(v)

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            array("q", [len(self.times)]).tofile(f)
            self.times.tofile(f)
            self.values.tofile(f)
        os.replace(tmp, self.path)  # a reader never sees half a file


def read_sample_file(path: Path) -> harness.Samples:
    """One file written by `_FileSamples`, in the order it was written."""
    out = harness.Samples()
    with open(path, "rb") as fh:
        n = array("q")
        n.fromfile(fh, 1)
        out.times.fromfile(fh, n[0])
        out.values.fromfile(fh, n[0])
    return out


def read_sample_files(directory: Path) -> harness.Samples:
    """Every ``latency-*.bin`` of ``directory`` merged into one time-ordered `harness.Samples`."""
    pairs: list[tuple[float, float]] = []
    for f in sorted(directory.glob("latency-*.bin")):
        one = read_sample_file(f)
        pairs.extend(zip(one.times, one.values))
    pairs.sort()
    out = harness.Samples()
    for t, v in pairs:
        out.add(t, v)
    return out


class ConstSpout(Spout):
    """Emits ``["some data"]`` on every ``next_tuple``; with ``reliable``, with msg ids 0, 1, 2, ..."""

    def __init__(self, reliable: bool, value: str = "some data") -> None:
        self.reliable = reliable
        self.value = value

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("str"))

    def open(self, conf, context, collector) -> None:
        super().open(conf, context, collector)
        self._emit = collector.emit
        self._next_id = 0
        self._sent: dict[int, float] = {}
        key = conf.get(SAMPLES_KEY)
        out = conf.get(OUTPUT_DIR_KEY)
        self._samples = None
        if key:
            self._samples = _registry_samples(key)
        elif out and self.reliable:
            self._samples = _FileSamples(Path(out) / f"latency-{context.get_this_task_id()}.bin")

    def next_tuple(self) -> None:
        if not self.reliable:
            self._emit([self.value])
            return
        mid = self._next_id
        self._next_id = mid + 1
        if not mid & SAMPLE_MASK and self._samples is not None:
            self._sent[mid] = time.perf_counter()
        self._emit([self.value], mid)

    def ack(self, msg_id) -> None:
        if not msg_id & SAMPLE_MASK:
            t0 = self._sent.pop(msg_id, None)
            if t0 is not None:
                now = time.perf_counter()
                self._samples.add(now, now - t0)

    def fail(self, msg_id) -> None:
        self._sent.pop(msg_id, None)

    def close(self) -> None:
        if isinstance(self._samples, _FileSamples):
            self._samples.write()


class DevNullBolt(Bolt):
    """Acks every tuple (storm-perf's DevNullBolt)."""

    def prepare(self, conf, context, collector) -> None:
        super().prepare(conf, context, collector)
        self._ack = collector.ack

    def execute(self, tup) -> None:
        self._ack(tup)

    def declare_output_fields(self, declarer) -> None:
        pass


class IdBolt(Bolt):
    """Emits the input's values anchored to it, then acks it (storm-perf's IdBolt)."""

    def prepare(self, conf, context, collector) -> None:
        super().prepare(conf, context, collector)
        self._emit = collector.emit
        self._ack = collector.ack

    def execute(self, tup) -> None:
        self._emit(tup.values, tup)
        self._ack(tup)

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("str"))


def build(workload: str, acking: bool, samples_key: str | None, max_pending: int | str = DEFAULT_MAX_PENDING,
          workers: int = 1, parallelism: int = 1, output_dir: str | None = None, spout: Spout | None = None):
    """The W2 or W3 topology and its configuration; returns (topology, conf, last bolt id).

    ``parallelism`` executors per component and, with acking on, one acker per worker (Storm's
    default; one in all on one worker). ``output_dir``: the spout writes its latency samples
    there on close (the process host) instead of into the registry under ``samples_key``.
    ``spout``: the spout to run in place of a `ConstSpout` (`bench.instructions`: one that stops).
    """
    builder = TopologyBuilder()
    spout = builder.set_spout("spout", spout or ConstSpout(acking), parallelism)
    if samples_key:
        spout.add_configuration(SAMPLES_KEY, samples_key)
    if output_dir:
        spout.add_configuration(OUTPUT_DIR_KEY, output_dir)
    if workload == "W2":
        builder.set_bolt("bolt", DevNullBolt(), parallelism).local_or_shuffle_grouping("spout")
        last = "bolt"
    elif workload == "W3":
        builder.set_bolt("bolt1", IdBolt(), parallelism).local_or_shuffle_grouping("spout")
        builder.set_bolt("bolt2", DevNullBolt(), parallelism).local_or_shuffle_grouping("bolt1")
        last = "bolt2"
    else:
        raise ValueError(f"unknown workload {workload!r}")
    conf = Config()
    conf.set_num_workers(workers)
    if acking:
        conf.set_num_ackers(workers)
        conf.set_max_spout_pending(max_pending)
    else:
        conf.set_num_ackers(0)
    return builder.create_topology(), conf, last


# --- baselines ---------------------------------------------------------------------------------------
def baseline_w2(n: int, acking: bool) -> int:
    """W2's work in one loop: n tuples built, queued, taken, and (acking) tracked by msg id."""
    q: deque = deque()
    put, take = q.append, q.popleft
    pending: dict[int, float] = {}
    value = "some data"
    done = 0
    if acking:
        for mid in range(n):
            pending[mid] = 0.0           # spout: remember the pending message id
            put(([value], mid))          # emit
            _values, m = take()          # bolt receives
            del pending[m]               # bolt acks -> spout's ack(msg_id)
            done += 1
    else:
        for _ in range(n):
            put([value])
            take()
            done += 1
    return done


def baseline_w3(n: int, acking: bool) -> int:
    """W3's work in one loop: as `baseline_w2`, with the id bolt's copy through a second queue."""
    q1: deque = deque()
    q2: deque = deque()
    put1, take1, put2, take2 = q1.append, q1.popleft, q2.append, q2.popleft
    pending: dict[int, float] = {}
    value = "some data"
    done = 0
    if acking:
        for mid in range(n):
            pending[mid] = 0.0
            put1(([value], mid))
            values, m = take1()          # id bolt
            put2((values, m))            # emits the values anchored (same root)
            _values, m2 = take2()        # null bolt
            del pending[m2]              # the tree completes
            done += 1
    else:
        for _ in range(n):
            put1([value])
            put2(take1())
            take2()
            done += 1
    return done


# --- a run ---------------------------------------------------------------------------------------------
def _window_stats(info: dict, last: str) -> dict[str, float]:
    sp = info["components"]["spout"]
    lat_sum = sum(s["complete_latency_sum"] for s in sp["task_stats"].values())
    lat_n = sum(s["complete_latency_count"] for s in sp["task_stats"].values())
    return {"acked": sp["acked"], "failed": sp["failed"], "emitted": sp["emitted"],
            "executed": info["components"][last]["executed"], "lat_sum": lat_sum, "lat_n": lat_n}


def run(workload: str = "W2", acking: bool = True, secs: float = 30.0, warmup: float = 10.0,
        max_pending: int = DEFAULT_MAX_PENDING, host: str = "local", workers: int = 1,
        parallelism: int | None = None, spark_master: str | None = None, stats: bool = True) -> dict[str, Any]:
    """One W2 or W3 run, then the baseline for as many tuples.

    Args:
        host: ``"local"`` (LocalCluster, 1 worker), ``"process"`` or ``"spark"`` (`run_process`).
        workers: worker processes on the process or Spark host.
        parallelism: executors per component there (default: ``workers``).
        spark_master: the Spark host's master URL (default ``local[workers]``).
        stats: Storm's statistics on (LocalCluster; ``topology.stats.enabled``).

    Returns:
        The run's record (see `harness.finish_record`), not yet printed.
    """
    if host in ("process", "spark"):
        return run_process(workload, acking, secs, warmup, max_pending, workers, parallelism or workers,
                           host, spark_master)
    if host != "local" or workers != 1:
        raise ValueError(f"host {host!r} with {workers} workers: LocalCluster runs 1 worker")
    key = f"{workload}-{uuid.uuid4().hex}"
    samples = harness.registry_open(key)
    topology, conf, last = build(workload, acking, key if acking else None, max_pending)
    if not stats:
        conf["topology.stats.enabled"] = False
    name = f"{workload.lower()}-{'ack' if acking else 'noack'}"
    try:
        with LocalCluster() as cluster:
            total = harness.Meter().start()
            cluster.submit_topology(name, conf, topology)
            time.sleep(warmup)
            meter = harness.Meter().start()
            first = _window_stats(cluster.get_topology_info(name), last)
            time.sleep(secs)
            info = cluster.get_topology_info(name)
            second = _window_stats(info, last)
            meter.stop()
            end_t = time.perf_counter()
            window_start = meter.wall0
            cluster.kill_topology(name, wait_secs=0)
            total.stop()
    finally:
        harness.registry_close(key)

    if acking:
        count = second["acked"] - first["acked"]
        unit = "acked tuples/s"
    else:
        count = second["executed"] - first["executed"]
        unit = "executed tuples/s"
    rate = count / meter.wall
    lat_n = second["lat_n"] - first["lat_n"]
    mean_ms = 1000.0 * (second["lat_sum"] - first["lat_sum"]) / lat_n if lat_n else None
    lats = samples.between(window_start, end_t)
    pct = {q: harness.percentile(lats, q) for q in (50, 99, 99.9)}
    failed = second["failed"]
    errors = info["errors"]

    baseline = baseline_w2 if workload == "W2" else baseline_w3
    n_base = max(int(count), 10_000)
    base_wall, _ = harness.time_baseline(lambda: baseline(n_base, acking))
    base_rate = n_base / base_wall

    def ms(v):
        return None if v is None else round(1000.0 * v, 4)

    record = harness.base_record(
        workload, acking, secs=secs, warmup=warmup,
        max_spout_pending=max_pending if acking else None,
        stats="on" if stats else "off",
        wall_s=round(meter.wall, 3),
        total_wall_s=round(total.wall, 3),
        tuples_per_s=round(rate, 1),
        rate_unit=unit,
        tuples=int(count),
        complete_latency_mean_ms=None if mean_ms is None else round(mean_ms, 4),
        complete_latency_p50_ms=ms(pct[50]),
        complete_latency_p99_ms=ms(pct[99]),
        complete_latency_p999_ms=ms(pct[99.9]),
        latency_samples=len(lats),
        cpu_s=round(meter.cpu, 2),
        other_cpu_s=meter.other_cpu,
        failed=failed,
        errors=len(errors),
        correct=failed == 0 and not errors and count > 0,
        baseline_tuples=n_base,
        baseline_wall_s=round(base_wall, 4),
        baseline_rate=round(base_rate, 1),
        ratio=round(rate / base_rate, 4),
    )
    return harness.finish_record(record, meter)


# --- the process host ----------------------------------------------------------------------------------
def _heartbeat_edge(host: Any, name: str, value, span: float = 0.95, poll: float = 0.02,
                    timeout: float = 15.0) -> tuple[list[float], dict, dict]:
    """One edge of a measuring window on heartbeated counters.

    The master's counters move only when a worker's heartbeat (every ~1 s) arrives. This polls
    ``get_topology_info`` every ``poll`` seconds and notes each time ``value(info)`` changes: one
    arrival, of one worker. It keeps noting for ``span`` (< one heartbeat period, so each worker
    at most once) after the first, and returns (arrival times, the info after the last one,
    ``/proc`` samples of the cluster's processes taken at the first). Aligning both edges of a
    window on arrivals makes the window's delta cover one whole number of each worker's
    heartbeat periods, instead of being off by up to a period.
    """
    deadline = time.perf_counter() + timeout
    prev = value(host.info(name))
    events: list[float] = []
    info: dict = {}
    procs: dict = {}
    while True:
        cur = host.info(name)
        t = time.perf_counter()
        v = value(cur)
        if v != prev:
            if not events:
                procs = host.samples()
            events.append(t)
            info = cur
            prev = v
        if events and t >= events[0] + span:
            return events, info, procs
        if t > deadline:
            raise RuntimeError(f"topology {name}: no heartbeat moved its counters in {timeout} s")
        time.sleep(poll)


def run_process(workload: str, acking: bool, secs: float, warmup: float, max_pending: int, workers: int,
                parallelism: int, host_name: str = "process", spark_master: str | None = None) -> dict[str, Any]:
    """One W2 or W3 run on a throwaway host of ``workers`` worker processes, ``host_name``
    "process" or "spark" (`bench.hosts.make_host`; see the module docstring), then the baseline
    for as many tuples."""
    from .hosts import make_host, usage_between

    output_dir = Path(tempfile.mkdtemp(prefix=f"squall-bench-{workload.lower()}-"))
    try:
        topology, conf, last = build(workload, acking, None, max_pending, workers, parallelism, str(output_dir))
        name = f"{workload.lower()}-{'ack' if acking else 'noack'}"

        def value(info: dict) -> int:
            c = info["components"]
            return c["spout"]["acked"] if acking else c[last]["executed"]

        with make_host(host_name, workers, spark_master) as host:
            host_fields = host.fields()
            t_submit = time.perf_counter()
            host.submit(name, conf, topology)
            host.wait_workers(workers)
            t_workers = time.perf_counter()
            time.sleep(max(0.0, t_submit + warmup - time.perf_counter()))
            ev0, info0, procs0 = _heartbeat_edge(host, name, value)
            time.sleep(max(0.0, ev0[0] + secs - time.perf_counter()))
            ev1, info1, procs1 = _heartbeat_edge(host, name, value)
            for _ in range(3):  # a different number of arrivals: two merged in one poll, or one late
                if len(ev1) == len(ev0):
                    break
                ev1, info1, procs1 = _heartbeat_edge(host, name, value)
            host.kill(name, wait_secs=0)
            files = harness.wait_files(output_dir, "latency-*.bin", parallelism, 20.0) if acking else []
            stopped = host.wait_no_workers()
        samples = read_sample_files(output_dir) if files else harness.Samples()
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)

    # each worker's counters move between its own two arrivals, so the window is the mean of the
    # arrivals at the end less the mean at the start (exact when the workers' rates are equal)
    window = sum(ev1) / len(ev1) - sum(ev0) / len(ev0)
    if len(ev0) == len(ev1):
        alignment = f"mean of {len(ev0)} heartbeat arrivals per edge"
    else:
        alignment = f"approximate: {len(ev0)} vs {len(ev1)} heartbeat arrivals at the edges"
    w_start = sum(ev0) / len(ev0)
    w_end = w_start + window
    v0, v1 = value(info0), value(info1)
    count = v1 - v0
    rate = count / window
    sp0, sp1 = info0["components"]["spout"], info1["components"]["spout"]
    mean_ms = None
    if acking and sp1["acked"] > sp0["acked"]:
        lat_sum = sp1["complete_latency_ms"] * sp1["acked"] - sp0["complete_latency_ms"] * sp0["acked"]
        mean_ms = lat_sum / (sp1["acked"] - sp0["acked"])
    lats = samples.between(w_start, w_end)
    pct = {q: harness.percentile(lats, q) for q in (50, 99, 99.9)}
    failed = sp1["failed"]
    errors = info1["errors"]
    usage = usage_between(procs0, procs1)

    baseline = baseline_w2 if workload == "W2" else baseline_w3
    n_base = max(int(count), 10_000)
    base_wall, _ = harness.time_baseline(lambda: baseline(n_base, acking))
    base_rate = n_base / base_wall
    parallel = (harness.machine_parallelism(lambda: baseline(n_base, acking), workers, base_wall)
                if workers > 1 else None)

    def ms(v):
        return None if v is None else round(1000.0 * v, 4)

    record = harness.base_record(
        workload, acking, **host_fields, workers=workers, parallelism=parallelism,
        ackers=workers if acking else 0, secs=secs, warmup=warmup,
        workers_up_s=round(t_workers - t_submit, 3),
        max_spout_pending=max_pending if acking else None,
        wall_s=round(window, 3),
        window_alignment=alignment,
        tuples_per_s=round(rate, 1),
        rate_unit="acked tuples/s" if acking else "executed tuples/s",
        tuples=int(count),
        complete_latency_mean_ms=None if mean_ms is None else round(mean_ms, 4),
        complete_latency_p50_ms=ms(pct[50]),
        complete_latency_p99_ms=ms(pct[99]),
        complete_latency_p999_ms=ms(pct[99.9]),
        latency_samples=len(lats),
        latency_source="spout's own samples (every 16th id), written on close; mean from heartbeats"
        if acking else None,
        # cross-check of the heartbeated rate, on the workers' own clock: sampled acks x 16
        sampled_rate=round(len(lats) * (SAMPLE_MASK + 1) / window, 1) if acking else None,
        **usage,
        failed=failed,
        errors=len(errors),
        workers_stopped=stopped,
        correct=failed == 0 and not errors and count > 0 and stopped and (not acking or len(files) == parallelism),
        baseline_tuples=n_base,
        baseline_wall_s=round(base_wall, 4),
        baseline_rate=round(base_rate, 1),
        ratio=round(rate / base_rate, 4),
        machine_parallelism=None if parallel is None else round(parallel, 3),
    )
    return harness.finish_record(record, None)
