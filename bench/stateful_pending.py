"""Max spout pending before a stateful bolt: records/s at each setting, every record counted.

A spout of ids (message id = the id, key = id % 1000) -> a stateful bolt counting by key in its
`KeyValueState` (``plain``), or a persistent window (``window``: tumbling 1,000 tuples, adding
each window's keys into its state). The spout emits as fast as it may for ``--secs``, then stops
and waits until every id it emitted is acked; the bolt writes its committed total once idle.
Figures over the emitting time after a warm-up (``--warmup``, 1 s; longer for a steady rate, after
a limit that climbs, as ``auto``'s does, has reached where it stays): acked records/s, mean complete latency
(the spout's own clock, every tuple), commits/s, CPU µs per record (the process running the
spout and the bolt: this one on LocalCluster, the one worker on the process host); and the
count checks: ids acked once each, the state's total equal to the ids emitted.

Settings run interleaved (A B C A B C ...), so that a machine shared with other work weighs on
all alike::

    python -m bench.stateful_pending --host local --bolt plain --interval 1000 \\
        --settings null,1000,5000,20000,auto --repeat 3 --secs 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from squall import (
    BaseStatefulBolt,
    BaseStatefulWindowedBolt,
    Config,
    Count,
    Fields,
    LocalCluster,
    Spout,
    TopologyBuilder,
)

KEYS = 1000
WARMUP = 1.0
SAMPLE = 0.25


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


class IdSpout(Spout):
    """Emits ids 0, 1, ... for ``secs`` from its first emit, then stops; replays a failed id.
    Writes ``spout.json`` under ``bench.out.dir`` once every emitted id is acked."""

    def __init__(self, secs: float, warmup: float = WARMUP) -> None:
        self.secs = secs
        self.warmup = warmup

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("key", "id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.out = Path(conf["bench.out.dir"])
        self.next_id = 0
        self.sent: dict[int, float] = {}
        self.acked_ids: set[int] = set()
        self.dup = self.failed = 0
        self.replay: list[int] = []
        self.t0: float | None = None
        # acks by SAMPLE-long bin since t0 (acks come in bursts at the commits: counted each, by
        # when it came), their latency sums, and the CPU seconds at the warm-up's and the run's end
        self.bins: dict[int, list[float]] = {}
        self.cpu: list[float] = []
        self.written = False

    def next_tuple(self):
        now = time.perf_counter()
        if self.t0 is None:
            self.t0 = now
        if self.replay:
            i = self.replay.pop()
        elif now - self.t0 < self.secs or self.next_id % KEYS:  # (whole windows of KEYS ids)
            i = self.next_id
            self.next_id += 1
            self._mark_cpu(now)
        else:
            self._mark_cpu(now)
            self._maybe_done(now)
            return
        self.sent[i] = now
        self.collector.emit([i % KEYS, i], i)

    def ack(self, msg_id):
        now = time.perf_counter()
        started = self.sent.pop(msg_id, None)
        if msg_id in self.acked_ids:
            self.dup += 1
        self.acked_ids.add(msg_id)
        b = self.bins.setdefault(int((now - self.t0) / SAMPLE), [0, 0.0])
        b[0] += 1
        if started is not None:
            b[1] += now - started
        self._mark_cpu(now)
        self._maybe_done(now)

    def _mark_cpu(self, now):
        if len(self.cpu) < 2 and now - self.t0 >= (self.warmup, self.secs)[len(self.cpu)]:
            self.cpu.append(_cpu())

    def fail(self, msg_id):
        self.failed += 1
        self.sent.pop(msg_id, None)
        self.replay.append(msg_id)

    def _maybe_done(self, now):
        if (self.written or self.t0 is None or now - self.t0 < self.secs or self.next_id % KEYS or self.sent
                or self.replay):
            return
        self.written = True
        figures = {"emitted": self.next_id, "acked": len(self.acked_ids), "dup": self.dup, "failed": self.failed,
                   "t0": self.t0, "done": now, "bins": self.bins, "cpu": self.cpu}
        tmp = self.out / "spout.json.tmp"
        tmp.write_text(json.dumps(figures))
        tmp.rename(self.out / "spout.json")


class _Committing:
    """What both bolts share: commit times, and the state's total once nothing new came."""

    def _setup(self, state):
        self.state = state
        self.out = Path(self.conf_dir)
        self.executed = 0
        self.commits: list[float] = []
        self.last_written = -1

    def pre_commit(self, txid):
        self.commits.append(time.perf_counter())
        if self.executed and self.executed == self.last_seen and self.executed != self.last_written:
            total = sum(self.state.get(k, 0) for k in range(KEYS))
            self.last_written = self.executed
            tmp = self.out / "bolt.json.tmp"
            tmp.write_text(json.dumps({"executed": self.executed, "total": total, "commits": self.commits}))
            tmp.rename(self.out / "bolt.json")
        self.last_seen = self.executed


class CountByKey(_Committing, BaseStatefulBolt):
    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.conf_dir = conf["bench.out.dir"]
        self.last_seen = -1

    def init_state(self, state):
        self._setup(state)

    def execute(self, tup):
        k = tup[0]
        self.state.put(k, self.state.get(k, 0) + 1)
        self.executed += 1
        self.collector.ack(tup)


class WindowCount(_Committing, BaseStatefulWindowedBolt):
    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.conf_dir = conf["bench.out.dir"]
        self.last_seen = -1

    def init_state(self, state):
        self._setup(state)

    def execute(self, window):
        counts: dict[int, int] = {}
        for t in window.get():
            counts[t[0]] = counts.get(t[0], 0) + 1
        for k, n in counts.items():
            self.state.put(k, self.state.get(k, 0) + n)
        self.executed += len(window.get())


def topology(bolt: str, secs: float, warmup: float = WARMUP):
    b = TopologyBuilder()
    b.set_spout("ids", IdSpout(secs, warmup))
    obj = CountByKey() if bolt == "plain" else \
        WindowCount().with_window(Count(KEYS), Count(KEYS)).with_persistence()
    b.set_bolt("count", obj).shuffle_grouping("ids")
    return b.create_topology()


def _setting(text: str) -> int | str | None:
    return None if text == "null" else text if text == "auto" else int(text)


def run_one(host: str, bolt: str, interval: int, setting: str, secs: float, cluster: Any = None,
            warmup: float = WARMUP) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="squall-pending-"))
    conf = Config()
    conf["bench.out.dir"] = str(out)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = interval
    conf.set_max_spout_pending(_setting(setting))
    name = f"sp{time.monotonic_ns()}"
    topo = topology(bolt, secs, warmup)
    deadline = None
    if host == "local":
        ctx: Any = LocalCluster()
        cl = ctx.__enter__()
        submit, kill = cl.submit_topology, cl.kill_topology
    else:
        ctx = None
        submit, kill = cluster.submit, cluster.kill
    try:
        submit(name, conf, topo)
        deadline = time.monotonic() + secs + 120
        while not ((out / "spout.json").exists() and (out / "bolt.json").exists()
                   and json.loads((out / "bolt.json").read_text())["executed"]
                   >= json.loads((out / "spout.json").read_text())["emitted"]):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{setting}: not done within {secs + 120} s")
            time.sleep(0.05)
        kill(name, wait_secs=0)
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    sp = json.loads((out / "spout.json").read_text())
    bo = json.loads((out / "bolt.json").read_text())
    t0 = sp["t0"]
    lo, hi = round(warmup / SAMPLE), round(secs / SAMPLE)
    window = [v for k, v in sp["bins"].items() if lo <= int(k) < hi]
    acked = sum(v[0] for v in window)
    dt = secs - warmup
    commits = [c for c in bo["commits"] if t0 + warmup <= c < t0 + secs]
    cpu = sp["cpu"][1] - sp["cpu"][0] if len(sp["cpu"]) == 2 else float("nan")
    return {"setting": setting, "rate": acked / dt, "latency_ms": 1000 * sum(v[1] for v in window) / max(1, acked),
            "commits_s": len(commits) / dt, "cpu_us": 1e6 * cpu / max(1, acked),
            "emitted": sp["emitted"], "acked": sp["acked"], "dup": sp["dup"], "failed": sp["failed"],
            "total": bo["total"], "exact": sp["acked"] == sp["emitted"] and bo["total"] == sp["emitted"]
            and sp["dup"] == 0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", choices=["local", "process"], default="local")
    p.add_argument("--bolt", choices=["plain", "window"], default="plain")
    p.add_argument("--interval", type=int, default=1000, help="topology.state.checkpoint.interval.ms")
    p.add_argument("--settings", default="null,1000,5000,20000,auto")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--secs", type=float, default=6.0)
    p.add_argument("--warmup", type=float, default=WARMUP, help="seconds left out of the figures at the start")
    args = p.parse_args(argv)
    settings = args.settings.split(",")
    rows: dict[str, list[dict[str, Any]]] = {s: [] for s in settings}
    cluster: Any = None
    if args.host == "process":
        from bench.hosts import ProcessHost
        cluster = ProcessHost(workers=1).__enter__()
    try:
        for r in range(args.repeat):
            for s in settings:
                row = run_one(args.host, args.bolt, args.interval, s, args.secs, cluster, args.warmup)
                rows[s].append(row)
                print(f"[{r}] {args.host} {args.bolt} {args.interval} ms {s:>6}: {row['rate']:9.0f} rec/s "
                      f"latency {row['latency_ms']:7.1f} ms, {row['commits_s']:5.2f} commits/s, "
                      f"{row['cpu_us']:5.1f} µs CPU/rec; emitted {row['emitted']}, acked {row['acked']}, dup "
                      f"{row['dup']}, failed {row['failed']}, state total {row['total']}, exact {row['exact']}",
                      flush=True)
    finally:
        if cluster is not None:
            cluster.__exit__(None, None, None)
    print("median (min-max):")
    for s, rs in rows.items():
        def f(key, fmt, rs=rs):
            v = [x[key] for x in rs]
            return f"{statistics.median(v):{fmt}} ({min(v):{fmt}}-{max(v):{fmt}})"
        print(f"  {s:>6}: {f('rate', '.0f')} rec/s, latency {f('latency_ms', '.0f')} ms, "
              f"commits/s {f('commits_s', '.1f')}, CPU {f('cpu_us', '.1f')} µs/rec, all exact "
              f"{all(x['exact'] for x in rs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
