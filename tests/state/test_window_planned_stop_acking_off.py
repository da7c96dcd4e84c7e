"""A persistent window stopped on purpose, with acking off: the topology killed and submitted again
under its name, or rebalanced. Its kill's or rebalance's wait drains it (the checkpoints go on
while the spouts are stopped), so its last commit holds every tuple it took and every window it
fired: the restarted task lost nothing, and must fire every window whole, as it did before the
windows spanning a restart were held back (77580df8). Counted: every id the spout emitted, every
window the sink got and every id in them, against the ids each window's bounds hold.

The spout goes on from where the earlier run stopped (its position in a file, as a Kafka spout's
committed offset), so the window that spans the stop holds ids of both runs."""

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from squall import Bolt, Config, Duration, Fields, LocalCluster, Spout, TopologyBuilder
from squall.state import BaseStatefulWindowedBolt
from tests.written import finished_lines

from ..conftest import wait_until

N, FIRST_RUN, PER_SEC = 1500, 737, 500  # the first run stops mid-window (windows of 50 ids)
START_MS, STEP_MS, WINDOW_MS = 1_000_000, 10, 500
CLOSING_ID = -1
LAST_END = -(-(START_MS + (N - 1) * STEP_MS) // WINDOW_MS) * WINDOW_MS  # the window of the last ids


class Resuming(Spout):
    """Ids from the position in ``position`` (0 at first) at ``per_sec`` a second, to
    `FIRST_RUN` until ``go`` exists under ``test.out.dir``, then to ``n``, then one closing record
    far ahead (it moves the watermark past every window). The position is written after each emit."""

    def __init__(self, n: int, per_sec: int) -> None:
        self.n, self.per_sec = n, per_sec

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.out = Path(conf["test.out.dir"])
        self.position = self.out / "position"
        self.next = int(self.position.read_text()) if self.position.exists() else 0
        self.first, self.started = self.next, None

    def next_tuple(self):
        now = time.monotonic()
        if self.started is None:
            self.started = now
        stop = self.n if (self.out / "go").exists() else FIRST_RUN
        due = min(stop, self.first + int((now - self.started) * self.per_sec))
        if self.next >= due:
            return
        while self.next < due:
            self.collector.emit([self.next, START_MS + self.next * STEP_MS], self.next)
            self.next += 1
        if self.next == self.n:
            self.collector.emit([CLOSING_ID, START_MS + (self.n + 500) * STEP_MS], CLOSING_ID)
        written = self.position.with_suffix(".tmp")
        written.write_text(str(self.next))
        written.replace(self.position)


class Ids(BaseStatefulWindowedBolt):
    """Emits each window's bounds and ids."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("start", "end", "ids"))

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        ids = sorted(t[0] for t in window.get() if t[0] != CLOSING_ID)
        self.collector.emit([window.get_start_timestamp(), window.get_end_timestamp(), ids])


class Sink(Bolt):
    """Appends every window it gets to ``sink.jsonl`` (a user's sink)."""

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.log = Path(conf["test.out.dir"]) / "sink.jsonl"

    def execute(self, tup):
        if tup[2]:  # not the window of the closing record alone
            with open(self.log, "a") as f:
                f.write(json.dumps({"start": tup[0], "end": tup[1], "ids": tup[2]}) + "\n")
        self.collector.ack(tup)


def topology():
    window = Ids().with_tumbling_window(Duration.of(WINDOW_MS)).with_timestamp_field("ts") \
        .with_lag(Duration.of(200)).with_watermark_interval(Duration.of(100)).with_persistence()
    b = TopologyBuilder()
    b.set_spout("numbers", Resuming(N, PER_SEC))
    b.set_bolt("window", window).global_grouping("numbers")
    b.set_bolt("sink", Sink()).global_grouping("window")
    return b.create_topology()


def conf(out: Path) -> Config:
    c = Config()
    c[Config.TOPOLOGY_ACKER_EXECUTORS] = 0
    c[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 200
    c["test.out.dir"] = str(out)
    return c


def sink_rows(out: Path) -> list[dict]:
    log = out / "sink.jsonl"
    return [json.loads(line) for line in finished_lines(log)] if log.exists() else []


def emitted(out: Path) -> int:
    position = out / "position"
    return int(position.read_text()) if position.exists() else 0


def _resubmit(cluster: LocalCluster, out: Path) -> None:
    cluster.kill_topology("planned", wait_secs=2)  # deactivated 2 s (10 checkpoints), then stopped
    (out / "go").write_text("1")
    deadline = time.monotonic() + 30
    while True:  # the name is free once the wait is over
        try:
            cluster.submit_topology("planned", conf(out), topology())
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _rebalance(cluster: LocalCluster, out: Path) -> None:
    cluster.rebalance("planned", num_workers=2, wait_secs=2)  # deactivated 2 s, its workers restarted
    (out / "go").write_text("1")


@pytest.mark.parametrize("stop", [_resubmit, _rebalance], ids=["kill-and-resubmit", "rebalance"])
def test_a_persistent_window_stopped_on_purpose_fires_every_window_whole_with_acking_off(tmp_path, stop):
    """Before, the restarted task took itself for one that had crashed (it resumed from a commit)
    and held back the window spanning the stop, though its commit held all of it: 50 of 1,500
    ids in no window, 1 window of 31 missing, after a kill and resubmission and after a rebalance
    alike. Now every window reaches the sink once, with exactly the ids of its bounds."""
    with LocalCluster() as cluster:
        cluster.submit_topology("planned", conf(tmp_path), topology())
        assert wait_until(lambda: emitted(tmp_path) >= FIRST_RUN, 20, interval=0.1), emitted(tmp_path)
        assert wait_until(lambda: len(sink_rows(tmp_path)) >= 10, 10, interval=0.1), sink_rows(tmp_path)
        stop(cluster, tmp_path)
        done = wait_until(lambda: any(r["end"] == LAST_END for r in sink_rows(tmp_path)), 30, interval=0.1)
        cluster.kill_topology("planned", wait_secs=0)
    rows = sink_rows(tmp_path)
    per_window = Counter((r["start"], r["end"]) for r in rows)
    ids = Counter(i for r in rows for i in r["ids"])
    short = [(r["start"], r["end"], len(r["ids"])) for r in rows
             if r["ids"] != [i for i in range(N) if r["start"] < START_MS + i * STEP_MS <= r["end"]]]
    missing = sorted(set(range(N)) - set(ids))
    said = (f"sent {emitted(tmp_path)} ids; the sink got {len(rows)} windows ({len(per_window)} distinct), "
            f"{len(ids)} distinct ids, {len(missing)} in no window ({missing[:3]}..{missing[-3:]}), "
            f"{len(short)} short: {short}")
    assert done and emitted(tmp_path) == N, said
    assert [w for w, k in per_window.items() if k > 1] == [], said
    assert short == [], said
    assert missing == [] and [i for i, k in ids.items() if k > 1] == [], said
