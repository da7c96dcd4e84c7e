"""W5, the Storm @Twitter paper's resilience run (section 3.4), on Redis Streams.

The source. The benchmark starts its own ``redis-server`` (`bench.redis_server`: a free loopback
port, a temporary directory, stopped by its PID at the end) and a feeder thread that ``XADD``s
client events ``{event_id, user_id, event, ts}`` to the stream ``w5:events`` at a steady
``rate`` per second (in small batches every ``FEED_TICK`` s). A feeder, not a pre-filled stream:
the source keeps producing while a worker is down, as a real one does, so a kill shows as a dip
and then a catch-up on the backlog, and the events wait in Redis, not in the spout.

The topology (acking on). `RedisStreamSpout` (consumer group ``w5``, retries without limit so
nothing is dead-lettered) -> ``distributor`` (shuffle) -> ``user_count`` (fields ``user_id``:
events per user per second) -> ``aggregator`` (fields ``ts``: events per second) ->
`RedisStreamSinkBolt` in stream mode keyed by ``event_id``: it ``XADD``s an event to
``w5:out`` only if ``SADD w5:out:written <event_id>`` added it (one Lua script), so a replayed
event is not written twice. Every tuple is anchored; every component has ``parallelism``
executors (default: one per worker), and each worker an acker.

The run. The feeder XADDs one event and starts its schedule once that event is acked (else
what it fed while the workers were still opening their spouts is a backlog the first seconds
drain at max spout pending). After ``kill_every`` seconds of steady processing the benchmark SIGKILLs a worker
process, ``kills`` times, every ``kill_every`` seconds, taking the live workers in slot order in
turn (with the default parallelism every worker runs a spout task, so each kill also loses a
spout's in-flight entries, which its restarted task replays from its pending list), then watches ``kill_every``
seconds more, stops the feeder, and waits (at most ``DRAIN_SECS`` + the message timeout) until
every event fed has been acked.

The figures. Every ``SAMPLE_SECS`` the benchmark reads the group's ``entries-read`` and pending
count (``XINFO GROUPS``): acked = read - pending is the entries the spout has ``XACK``ed, i.e.
whose tuple trees completed. Every second it reads the master's per-task complete-latency sums
(a restarted task starts again from zero) for the mean complete latency of that second. Per
kill, `bench.recovery.recovery` gives the time until the acked rate was back to 80% of its rate
over the 5 s before the kill (``recovery_s``) and more (see there). ``end_to_end_ms`` is the mean
time from the source's ``XADD`` to the sink's (both entry ids are millisecond times).

Steady state: the spout is `TimedSpout`, the product's spout with each tuple's complete latency
(emit to ack, on the spout task, as the engine's own mean) kept per tuple and pushed to the list
``w5:latency`` once a second; ``steady_latency_{mean,p50,p99}_ms`` are of the tuples acked from
``STEADY_SKIP_SECS`` after the first ack until the first kill (the end of the watch if none), and
``steady_cpu_ms_per_event`` the workers' CPU over that window per event acked in it.

The proof (``correct``): the set of event ids in ``w5:out`` equals the set fed, with no id
twice; ``w5:out:written`` holds exactly the ids fed; the group has nothing pending and the
dead-letter stream is empty; every kill recovered; no component reported an error other than
the lost-worker notices.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from squall import Bolt, Fields, TopologyBuilder

from . import harness
from .recovery import Timeline, kill_run_conf, recovery

STREAM = "w5:events"
GROUP = "w5"
OUT = "w5:out"
DEAD = "w5:events:dead"
USERS = 1000
FEED_TICK = 0.02
SAMPLE_SECS = 0.1
DRAIN_SECS = 60.0
DEFAULT_RATE = 1000.0
DEFAULT_KILL_EVERY = 20.0
DEFAULT_KILLS = 3
DEFAULT_TIMEOUT = 30
DEFAULT_MAX_PENDING = 1000
LATENCY = "w5:latency"
STEADY_SKIP_SECS = 5.0


# --- the topology ------------------------------------------------------------------------------------
class Distributor(Bolt):
    """Passes each event on (the paper's shuffle stage)."""

    def declare_output_fields(self, declarer) -> None:
        """The event's fields."""
        declarer.declare(Fields(["entry", "event_id", "user_id", "ts"]))

    def execute(self, tup) -> None:
        """Emits the event anchored, then acks it."""
        self.collector.emit(list(tup.get_values()), anchors=tup)
        self.collector.ack(tup)


class UserCount(Bolt):
    """Counts events per user per second (fields ``user_id``); keeps the last ``KEEP_SECS``."""

    KEEP_SECS = 10

    def declare_output_fields(self, declarer) -> None:
        """The event with its user's count so far in its second."""
        declarer.declare(Fields(["entry", "event_id", "ts", "user_count"]))

    def prepare(self, conf, context, collector) -> None:
        """Empty counts."""
        super().prepare(conf, context, collector)
        self.counts: Counter[tuple[str, int]] = Counter()
        self.newest = 0

    def execute(self, tup) -> None:
        """Counts, emits anchored, acks."""
        entry, event_id, user_id, ts = tup.get_values()
        ts = int(ts)
        self.counts[(user_id, ts)] += 1
        if ts > self.newest:
            self.newest = ts
            if len(self.counts) > 4 * USERS:  # forget seconds long gone
                self.counts = Counter({k: v for k, v in self.counts.items() if k[1] > ts - self.KEEP_SECS})
        self.collector.emit([entry, event_id, ts, self.counts[(user_id, ts)]], anchors=tup)
        self.collector.ack(tup)


class Aggregator(Bolt):
    """Counts events per second (fields ``ts``)."""

    def declare_output_fields(self, declarer) -> None:
        """The event with its second's total so far."""
        declarer.declare(Fields(["entry", "event_id", "ts", "total"]))

    def prepare(self, conf, context, collector) -> None:
        """Empty totals."""
        super().prepare(conf, context, collector)
        self.totals: Counter[int] = Counter()

    def execute(self, tup) -> None:
        """Adds, emits anchored, acks."""
        entry, event_id, ts, _ = tup.get_values()
        self.totals[ts] += 1
        if len(self.totals) > 100:
            self.totals = Counter({k: v for k, v in self.totals.items() if k > ts - 10})
        self.collector.emit([entry, event_id, ts, self.totals[ts]], anchors=tup)
        self.collector.ack(tup)


class _EmitTimes:
    """A spout's collector that keeps the time of each tracked emit (everything else is the
    collector's own)."""

    def __init__(self, inner: Any, times: dict[Any, float]) -> None:
        self._inner = inner
        self._times = times

    def emit(self, values: list, msg_id: Any = None, stream: str = "default") -> list[int]:
        """Notes the emit's time, then emits."""
        if msg_id is not None:
            self._times[msg_id] = time.monotonic()
        return self._inner.emit(values, msg_id=msg_id, stream=stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def timed_spout(url: str, *args: Any, **kw: Any) -> Any:
    """`RedisStreamSpout` whose every complete latency (ms, with its ack's wall time) goes to
    the list ``LATENCY`` (module docstring): built as a subclass here so that this module
    imports without the ``redis`` extra."""
    import redis

    from squall.external.redis_streams import RedisStreamSpout

    class TimedSpout(RedisStreamSpout):
        """`RedisStreamSpout` recording complete latencies (see `timed_spout`)."""

        def open(self, conf, context, collector) -> None:
            """Wraps the collector to note emit times."""
            self._times: dict[Any, float] = {}
            self._latencies: list[str] = []
            self._lat_client = redis.Redis.from_url(self.url, decode_responses=True)
            self._push_at = time.monotonic() + 1.0
            super().open(conf, context, _EmitTimes(collector, self._times))

        def ack(self, msg_id: Any) -> None:
            """Records the tuple's complete latency, then acks."""
            now = time.monotonic()
            t = self._times.pop(msg_id, None)
            if t is not None:
                self._latencies.append(f"{time.time():.3f} {1000.0 * (now - t):.3f}")
            if now >= self._push_at and self._latencies:
                self._push_at = now + 1.0
                self._lat_client.rpush(LATENCY, *self._latencies)
                self._latencies = []
            super().ack(msg_id)

        def fail_with(self, msg_id: Any, cause: Any) -> None:
            """Forgets the emit time (a replay's emit starts its own)."""
            self._times.pop(msg_id, None)
            super().fail_with(msg_id, cause)

    return TimedSpout(url, *args, **kw)


def latencies(client: Any, t0: float, t1: float) -> list[float]:
    """The complete latencies (ms, ascending) of the tuples acked in ``[t0, t1)`` wall time."""
    out = []
    for row in client.lrange(LATENCY, 0, -1):
        at, ms = row.split()
        if t0 <= float(at) < t1:
            out.append(float(ms))
    return sorted(out)


def build(url: str, workers: int, parallelism: int, max_pending: int, timeout: int):
    """The topology and its configuration (module docstring)."""
    from squall.external.redis_streams import (
        ExponentialBackoff,
        RedisStreamSinkBolt,
    )

    b = TopologyBuilder()
    spout = timed_spout(url, STREAM, GROUP, ("event_id", "user_id", "ts"), id_field="entry",
                             backoff=ExponentialBackoff(max_retries=None), dead_letter_stream=DEAD)
    b.set_spout("events", spout, parallelism)
    b.set_bolt("distributor", Distributor(), parallelism).shuffle_grouping("events")
    b.set_bolt("user_count", UserCount(), parallelism).fields_grouping("distributor", ["user_id"])
    b.set_bolt("aggregator", Aggregator(), parallelism).fields_grouping("user_count", ["ts"])
    b.set_bolt("sink", RedisStreamSinkBolt(url, OUT, mode="stream", id_field="event_id"),
               parallelism).shuffle_grouping("aggregator")
    return b.create_topology(), kill_run_conf(workers, max_pending, timeout)


# --- the source ---------------------------------------------------------------------------------------
class Feeder(threading.Thread):
    """XADDs events at ``rate`` per second until stopped; ``fed`` counts them (ids ``e0`` ...)."""

    def __init__(self, client: Any, rate: float, seed: int = 5) -> None:
        super().__init__(name="w5-feeder", daemon=True)
        self.client = client
        self.rate = rate
        self.fed = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._rng = random.Random(seed)

    def feed_one(self) -> None:
        """XADDs the next event now (before `start`: the probe that the topology is up)."""
        self._feed(self.fed + 1)

    def run(self) -> None:
        """Feeds on schedule: at each tick, every event due since the start."""
        try:
            start, before = time.monotonic(), self.fed
            while not self._halt.wait(FEED_TICK):
                due = before + int((time.monotonic() - start) * self.rate)
                if due > self.fed:
                    self._feed(due)
        except BaseException as e:  # noqa: BLE001 - reported by the run
            self.error = e

    def _feed(self, due: int) -> None:
        now = int(time.time())
        with self.client.pipeline(transaction=False) as p:
            for i in range(self.fed, due):
                p.xadd(STREAM, {"event_id": f"e{i}", "user_id": f"u{self._rng.randrange(USERS)}",
                                "event": "click", "ts": now})
            p.execute()
        self.fed = due
    def stop(self) -> None:
        """Stops feeding and waits for the thread."""
        self._halt.set()
        self.join(10)


class Sampler:
    """The spout's cumulative acks over time, from the group's counters, as a `Timeline`."""

    def __init__(self, client: Any, feeder: Feeder) -> None:
        self.client = client
        self.feeder = feeder
        self.rows: list[tuple[float, int, int, int, int]] = []

    def group(self) -> tuple[int, int]:
        """(entries read, pending) of the group; (0, 0) before the spout created it."""
        if not self.client.exists(STREAM):
            return 0, 0
        for g in self.client.xinfo_groups(STREAM):
            if g["name"] == GROUP:
                return int(g.get("entries-read") or 0), int(g["pending"])
        return 0, 0

    def sample(self) -> int:
        """Records one row; returns the acked count."""
        read, pending = self.group()
        acked = read - pending
        self.rows.append((time.time(), acked, 0, self.feeder.fed, 0))
        return acked

    def timeline(self) -> Timeline:
        """The rows so far."""
        return Timeline(list(self.rows))


class LatencyMeter:
    """Mean complete latency per second from the master's per-task sums of the spout."""

    def __init__(self) -> None:
        self.last: dict[Any, tuple[float, int]] = {}
        self.points: list[tuple[float, float | None]] = []

    def sample(self, info: dict[str, Any]) -> None:
        """Adds the mean of the latencies completed since the last sample (None: none)."""
        total, n = 0.0, 0
        for task, st in info["components"]["events"]["task_stats"].items():
            s, c = st["complete_latency_sum"], st["complete_latency_count"]
            s0, c0 = self.last.get(task, (0.0, 0))
            if c < c0:  # the task was restarted: its counts began again
                s0, c0 = 0.0, 0
            total += s - s0
            n += c - c0
            self.last[task] = (s, c)
        self.points.append((time.time(), 1000.0 * total / n if n else None))


# --- the figures --------------------------------------------------------------------------------------
def per_second(tl: Timeline, lat: list[tuple[float, float | None]], t0: float, t1: float
               ) -> list[tuple[int, float, float | None]]:
    """(second since ``t0``, acked tuples/s, mean complete latency ms) for each whole second."""
    out = []
    for s in range(int(t1 - t0)):
        a, b = t0 + s, t0 + s + 1
        lats = [v for t, v in lat if a <= t < b and v is not None]
        out.append((s, round(tl.acked_rate(a, b), 1), round(sum(lats) / len(lats), 2) if lats else None))
    return out


def prove(client: Any, fed: int) -> dict[str, Any]:
    """What the sink and the group hold against the ``fed`` ids ``e0 .. e<fed-1>``."""
    written: Counter[str] = Counter()
    e2e_sum, e2e_n = 0, 0
    last = "-"
    while True:
        batch = client.xrange(OUT, min=last if last == "-" else f"({last}", max="+", count=10_000)
        if not batch:
            break
        for entry_id, fields in batch:
            written[fields["event_id"]] += 1
            e2e_sum += int(entry_id.split("-")[0]) - int(fields["entry"].split("-")[0])
            e2e_n += 1
        last = batch[-1][0]
    expected = {f"e{i}" for i in range(fed)}
    ids = set(written)
    pending = client.xpending(STREAM, GROUP)["pending"]
    return {"fed": fed, "written": sum(written.values()), "distinct_written": len(ids),
            "duplicates": sum(c - 1 for c in written.values() if c > 1),
            "missing": len(expected - ids), "unexpected": len(ids - expected),
            "written_set": client.scard(f"{OUT}:written"), "pending_at_end": pending,
            "dead_lettered": client.xlen(DEAD) if client.exists(DEAD) else 0,
            "end_to_end_ms": round(e2e_sum / e2e_n, 1) if e2e_n else None}


def plot(series: list[tuple[int, float, float | None]], kills: list[float], path: Path, title: str) -> None:
    """The per-second acked rate and mean complete latency, the kills as vertical lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    secs = [s for s, _, _ in series]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9, 5.5))
    top.plot(secs, [r for _, r, _ in series], color="tab:blue")
    top.set_ylabel("acked tuples/s")
    top.set_ylim(bottom=0)
    bottom.plot([s for s, _, l in series if l is not None], [l for _, _, l in series if l is not None],
                color="tab:orange")
    bottom.set_ylabel("mean complete latency (ms)")
    bottom.set_yscale("log")
    bottom.set_xlabel("seconds")
    for i, k in enumerate(kills):
        for ax in (top, bottom):
            ax.axvline(k, color="tab:red", linestyle="--", linewidth=1,
                       label="worker SIGKILLed" if i == 0 and ax is top else None)
    if kills:
        top.legend(loc="lower right")
    top.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- the run ------------------------------------------------------------------------------------------
def _victim(info: dict[str, Any], k: int) -> dict[str, Any]:
    """The ``k``-th kill's victim: the live workers in slot order, in turn."""
    workers = sorted((w for w in info["workers"] if w["alive"] and w["pid"]), key=lambda w: w["slot"])
    if not workers:
        raise RuntimeError("W5: no live worker to kill")
    return workers[k % len(workers)]


def run(host: str = "process", workers: int = 4, parallelism: int | None = None,
        rate: float = DEFAULT_RATE, kill_every: float = DEFAULT_KILL_EVERY, kills: int = DEFAULT_KILLS,
        max_pending: int = DEFAULT_MAX_PENDING, timeout: int = DEFAULT_TIMEOUT,
        spark_master: str | None = None, plot_path: Path | None = None, quiet: bool = False
        ) -> dict[str, Any]:
    """One W5 run on a throwaway ``host``; prints the per-second table unless ``quiet``."""
    from .hosts import make_host
    from .redis_server import RedisServer, redis_server_binary

    binary = redis_server_binary()
    if binary is None:
        raise RuntimeError("W5 needs redis-server: run scripts/install-system-deps.sh")
    parallelism = parallelism or workers
    name = "w5"
    with tempfile.TemporaryDirectory(prefix="squall-bench-w5-") as tmp:
        server = RedisServer(binary, Path(tmp))
        server.start()
        feeder = None
        try:
            client = server.client()
            feeder = Feeder(server.client(), rate)
            sampler = Sampler(client, feeder)
            latency = LatencyMeter()
            topology, conf = build(server.url, workers, parallelism, max_pending, timeout)
            with make_host(host, workers, spark_master) as h:
                host_fields = h.fields()
                h.submit(name, conf, topology)
                h.wait_workers(workers)
                # one event first, and the feed only once it is acked: what the feeder fed
                # while the workers were still opening their spouts would be a backlog that
                # the run's first seconds drain at max spout pending, not a steady state
                feeder.feed_one()
                deadline = time.monotonic() + 60
                while sampler.sample() == 0:
                    if time.monotonic() > deadline:
                        raise RuntimeError("W5: the spout acked nothing within 60 s")
                    time.sleep(SAMPLE_SECS)
                feeder.start()
                t0 = time.time()
                steady_from = t0 + STEADY_SKIP_SECS
                steady_until = t0 + kill_every  # the first kill, or the end of the watch
                cpu_start: dict[str, Any] | None = None
                cpu_end: dict[str, Any] | None = None
                kill_times: list[float] = []
                killed: list[dict[str, Any]] = []
                next_kill = t0 + kill_every
                watch_until = t0 + kill_every * (kills + 1)
                next_lat = t0
                while time.time() < watch_until:
                    time.sleep(SAMPLE_SECS)
                    sampler.sample()
                    now = time.time()
                    if cpu_start is None and now >= steady_from:
                        cpu_start, acked_start = h.samples(), sampler.rows[-1][1]
                    if cpu_end is None and now >= steady_until - SAMPLE_SECS:
                        cpu_end, acked_end = h.samples(), sampler.rows[-1][1]
                    if now >= next_lat:
                        next_lat += 1.0
                        info = h.info(name)
                        latency.sample(info)
                        if len(kill_times) < kills and now >= next_kill:
                            victim = _victim(info, len(kill_times))
                            os.kill(victim["pid"], signal.SIGKILL)
                            kill_times.append(time.time())
                            killed.append(victim)
                            next_kill += kill_every
                t_watched = time.time()
                feeder.stop()
                if feeder.error is not None:
                    raise RuntimeError(f"W5: the feeder failed: {feeder.error!r}")
                drain_deadline = time.monotonic() + DRAIN_SECS + timeout
                while sampler.sample() < feeder.fed or sampler.group()[1]:
                    if time.monotonic() > drain_deadline:
                        break
                    time.sleep(SAMPLE_SECS)
                drained_s = round(time.time() - t_watched, 1)
                info = h.info(name)
                # the deaths it caused aside: a worker lost by its host, or SIGKILLed by it
                errors = [e for e in info["errors"]
                          if not any(w in str(e.get("error", "")).lower() for w in ("lost", "killed by sigkill"))]
                h.kill(name, wait_secs=0)
                h.wait_no_workers()
            proof = prove(client, feeder.fed)
            steady = latencies(client, steady_from, steady_until)
            client.close()
        finally:
            try:
                if feeder is not None and feeder.is_alive():
                    feeder.stop()
            finally:  # the server goes whatever else failed
                server.stop()
    tl = sampler.timeline()
    ends = kill_times[1:] + [t_watched]
    per_kill = [dict(killed_slot=v["slot"], at_s=round(t - t0, 1), **_rate_figures(recovery(tl, t, end)))
                for v, t, end in zip(killed, kill_times, ends)]
    series = per_second(tl, latency.points, t0, t_watched)
    if not quiet:
        _print_table(series, [t - t0 for t in kill_times], per_kill, proof)
    if plot_path is not None:
        plot(series, [t - t0 for t in kill_times], plot_path,
             f"W5 on the {host} host: {workers} workers, {rate:g} events/s, a worker SIGKILLed "
             f"every {kill_every:g} s")
    exactly_once = (proof["duplicates"] == 0 and proof["missing"] == 0 and proof["unexpected"] == 0
                    and proof["written"] == proof["fed"] == proof["written_set"]
                    and proof["pending_at_end"] == 0 and proof["dead_lettered"] == 0)
    recovered = len(per_kill) == kills and all(k["recovery_s"] is not None for k in per_kill)
    rates = [r for _, r, _ in series]
    cpu_ms = None
    if cpu_start is not None and cpu_end is not None and acked_end > acked_start:
        from .hosts import usage_between
        cpu_ms = round(1000.0 * usage_between(cpu_start, cpu_end)["cpu_s"] / (acked_end - acked_start), 3)
    steady_figures = {
        "steady_latency_n": len(steady),
        "steady_latency_mean_ms": round(sum(steady) / len(steady), 2) if steady else None,
        "steady_latency_p50_ms": harness.percentile(steady, 50),
        "steady_latency_p99_ms": harness.percentile(steady, 99),
        "steady_cpu_ms_per_event": cpu_ms}
    if not quiet:
        print(f"steady state ({len(steady)} tuples acked from {STEADY_SKIP_SECS:g} s until "
              f"{round(steady_until - t0, 1)} s): complete latency mean "
              f"{steady_figures['steady_latency_mean_ms']} ms, p50 {steady_figures['steady_latency_p50_ms']} ms, "
              f"p99 {steady_figures['steady_latency_p99_ms']} ms; workers' CPU {cpu_ms} ms per event")
    record = harness.base_record(
        "W5", True, **host_fields, workers=workers, parallelism=parallelism, target_rate=rate,
        kill_every_s=kill_every, kills=kills, max_spout_pending=max_pending, message_timeout_secs=timeout,
        mean_acked_per_s=round(sum(rates) / len(rates), 1) if rates else 0.0, drained_s=drained_s,
        per_kill=per_kill, **proof, exactly_once=exactly_once, recovered=recovered, errors=len(errors),
        **steady_figures, per_second=series, correct=exactly_once and recovered and not errors)
    return harness.finish_record(record, None)


def _rate_figures(figures: dict[str, Any]) -> dict[str, Any]:
    """`recovery`'s figures without its spout counters (failed, replayed), which W5's timeline
    does not have: the Redis spout's retries are not counted outside it."""
    return {k: v for k, v in figures.items() if k not in ("failed", "replayed")}


def _print_table(series, kill_secs, per_kill, proof) -> None:
    out = sys.stdout
    marks = {int(k) for k in kill_secs}
    out.write("  s  acked/s  latency ms\n")
    for s, r, lat in series:
        out.write(f"{s:3d}  {r:7.1f}  {'-' if lat is None else f'{lat:9.2f}':>10}"
                  f"{'  <- worker SIGKILLed' if s in marks else ''}\n")
    for i, k in enumerate(per_kill, 1):
        out.write(f"kill {i} at {k['at_s']} s ({k['killed_slot']}): rate before {k['rate_before']}/s, "
                  f"back to 80% after {k['recovery_s']} s, settled after {k['settled_s']} s, "
                  f"{k['below_s']} s below, worst {k['min_rate']}/s\n")
    out.write(f"fed {proof['fed']}, written {proof['written']} ({proof['distinct_written']} distinct, "
              f"{proof['duplicates']} duplicates, {proof['missing']} missing), written set "
              f"{proof['written_set']}, pending {proof['pending_at_end']}, dead-lettered "
              f"{proof['dead_lettered']}, end-to-end {proof['end_to_end_ms']} ms\n")
    out.flush()
