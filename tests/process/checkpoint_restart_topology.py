"""Components for the process-host test of a checkpoint spout's restart with acking off
(shipped to the workers by value): a numbered spout -> a persistent window that sums each
window -> a sink that records every window result with its bounds, under ``test.out.dir``.

The spout emits ids 0..n-1 at ``per_sec`` a second, id i stamped ``START_MS + i * STEP_MS``,
then one closing record far ahead that moves the watermark past every window holding an id. A
window of `LENGTH_MS` holds ``LENGTH_MS / STEP_MS`` ids, so with every id the sink's results are
exactly `expected_windows`, each once."""

import json
import time
from pathlib import Path

from squall import Bolt, Config, Duration, Fields, Spout, TopologyBuilder
from squall.state import BaseStatefulWindowedBolt
from tests.written import finished_lines

START_MS = 1_000_000
STEP_MS = 10
LENGTH_MS = 500  # tumbling: 50 ids a window
LAG_MS = 200
CLOSING_ID = -1


def expected_windows(n: int) -> dict[tuple[int, int], list[int]]:
    """(start, end) -> the ids a tumbling event-time window holds (start < ts <= end), for ids
    0..n-1: every window Storm fires once the closing record's watermark passed them."""
    windows: dict[tuple[int, int], list[int]] = {}
    for i in range(n):
        ts = START_MS + i * STEP_MS
        end = -(-ts // LENGTH_MS) * LENGTH_MS
        windows.setdefault((end - LENGTH_MS, end), []).append(i)
    return windows


class Numbers(Spout):
    """Ids 0..n-1 at ``per_sec`` a second (with message ids: with acking off each is acked in
    ``emit``), then the closing record; writes how many it emitted to ``emitted-<task>``."""

    def __init__(self, n: int, per_sec: int) -> None:
        self.n = n
        self.per_sec = per_sec

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.out = Path(conf["test.out.dir"]) / f"emitted-{context.get_this_task_id()}"
        self.started = None
        self.next = 0

    def next_tuple(self):
        now = time.monotonic()
        if self.started is None:
            self.started = now
        due = min(self.n, int((now - self.started) * self.per_sec))
        if self.next >= self.n:
            return
        while self.next < due:
            self.collector.emit([self.next, START_MS + self.next * STEP_MS], self.next)
            self.next += 1
        if self.next == self.n:
            self.collector.emit([CLOSING_ID, self.closing_ts()], CLOSING_ID)
            written = self.out.with_suffix(".tmp")
            written.write_text(str(self.n))
            written.replace(self.out)  # whole or absent: the test reads it as soon as it exists

    def closing_ts(self) -> int:
        """The closing record's time: past the last id's window, and past the lag."""
        return START_MS + (self.n + 50) * STEP_MS + 5 * LENGTH_MS


class WindowSums(BaseStatefulWindowedBolt):
    """Emits each window's bounds, ids and sum; logs each PREPARE it takes (wall time, txid)
    to ``prepares-<task>.jsonl``, so the test sees when the checkpoints come back after a kill."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("start", "end", "ids", "sum"))

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.prepares = Path(conf["test.out.dir"]) / f"prepares-{context.get_this_task_id()}.jsonl"

    def init_state(self, state):
        self.state = state

    def pre_prepare(self, txid):
        with open(self.prepares, "a") as f:
            f.write(json.dumps({"at": time.time(), "txid": txid}) + "\n")

    def execute(self, window):
        ids = sorted(t[0] for t in window.get())
        self.collector.emit([window.get_start_timestamp(), window.get_end_timestamp(), ids, sum(ids)])


class WindowSink(Bolt):
    """Records every window result it gets, with the wall time, to ``sink-<task>.jsonl`` (an append:
    a user's sink)."""

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.log = Path(conf["test.out.dir"]) / f"sink-{context.get_this_task_id()}.jsonl"

    def execute(self, tup):
        row = {"start": tup[0], "end": tup[1], "ids": tup[2], "sum": tup[3], "at": time.time()}
        with open(self.log, "a") as f:
            f.write(json.dumps(row) + "\n")
        self.collector.ack(tup)


def topology(n: int, per_sec: int):
    """numbers -> window (1 task, persistent, tumbling event time) -> sink (1 task)."""
    window = WindowSums().with_tumbling_window(Duration.of(LENGTH_MS)).with_timestamp_field("ts") \
        .with_lag(Duration.of(LAG_MS)).with_watermark_interval(Duration.of(100)).with_persistence()
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(n, per_sec))
    b.set_bolt("window", window).global_grouping("numbers")
    b.set_bolt("sink", WindowSink()).global_grouping("window")
    return b.create_topology()


def conf(out: Path, workers: int, interval_ms: int = 300) -> Config:
    """Acking off, ``workers`` workers, a checkpoint every ``interval_ms``."""
    c = Config()
    c.set_num_workers(workers)
    c[Config.TOPOLOGY_ACKER_EXECUTORS] = 0
    c[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = interval_ms
    c["test.out.dir"] = str(out)
    return c


def emitted(out: Path) -> int | None:
    """How many ids the spout emitted, once it emitted them all (None before)."""
    files = [f for f in out.glob("emitted-*") if f.suffix != ".tmp"]
    return int(files[0].read_text()) if files else None


def sink_rows(out: Path) -> list[dict]:
    """Every window result the sink recorded, in the order it got them."""
    rows: list[dict] = []
    for f in sorted(out.glob("sink-*.jsonl")):
        rows += _lines(f)
    return rows


def prepares(out: Path) -> list[dict]:
    """Every PREPARE the window task took: ``{"at": wall time, "txid": ...}``."""
    rows: list[dict] = []
    for f in out.glob("prepares-*.jsonl"):
        rows += _lines(f)
    return rows


def _lines(f: Path) -> list[dict]:
    """The whole lines of ``f`` (a line being written, read in part, waits for the next read)."""
    return [json.loads(line) for line in finished_lines(f)]
