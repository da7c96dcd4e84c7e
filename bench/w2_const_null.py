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

Baselines (`baseline_w2`, `baseline_w3`): one plain Python loop doing the equivalent work per
tuple, for as many tuples as squall completed in the window: build the tuple, append it to a
deque, pop it (and, for W3, build the copy and pass it through a second deque), and with acking
on "track" it as a message id inserted into a dict at emit and deleted at the ack.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from typing import Any

from squall import Bolt, Config, Fields, LocalCluster, Spout, TopologyBuilder

from . import harness

DEFAULT_MAX_PENDING = 1000
SAMPLES_KEY = "bench.samples.key"
SAMPLE_MASK = 15  # sample message ids with (id & 15) == 0: every 16th tuple


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
        self._samples = harness.registry_get(key) if key else None

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


def build(workload: str, acking: bool, samples_key: str | None, max_pending: int = DEFAULT_MAX_PENDING):
    """The W2 or W3 topology and its configuration; returns (topology, conf, last bolt id)."""
    builder = TopologyBuilder()
    spout = builder.set_spout("spout", ConstSpout(acking))
    if samples_key:
        spout.add_configuration(SAMPLES_KEY, samples_key)
    if workload == "W2":
        builder.set_bolt("bolt", DevNullBolt()).local_or_shuffle_grouping("spout")
        last = "bolt"
    elif workload == "W3":
        builder.set_bolt("bolt1", IdBolt()).local_or_shuffle_grouping("spout")
        builder.set_bolt("bolt2", DevNullBolt()).local_or_shuffle_grouping("bolt1")
        last = "bolt2"
    else:
        raise ValueError(f"unknown workload {workload!r}")
    conf = Config()
    conf.set_num_workers(1)
    if acking:
        conf.set_num_ackers(1)
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
        max_pending: int = DEFAULT_MAX_PENDING) -> dict[str, Any]:
    """One W2 or W3 run on LocalCluster (1 worker), then the baseline for as many tuples.

    Returns:
        The run's record (see `harness.finish_record`), not yet printed.
    """
    key = f"{workload}-{uuid.uuid4().hex}"
    samples = harness.registry_open(key)
    topology, conf, last = build(workload, acking, key if acking else None, max_pending)
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
        failed=failed,
        errors=len(errors),
        correct=failed == 0 and not errors and count > 0,
        baseline_tuples=n_base,
        baseline_wall_s=round(base_wall, 4),
        baseline_rate=round(base_rate, 1),
        ratio=round(rate / base_rate, 4),
    )
    return harness.finish_record(record, meter)
