"""Components for the process-host tests of a window task whose own worker is SIGKILLed with
acking off (shipped to the workers by value): numbered records -> a windowed bolt that sums each
window (plain, stateful, or persistent; event or processing time; tumbling or sliding, by
duration or by count) -> a sink that appends every window result it gets, under
``test.out.dir``.

The spout emits ids 0..n-1 at ``per_sec`` a second, id i stamped ``START_MS + i * STEP_MS``,
then one closing record far ahead that moves the watermark past every window holding an id.
In event time a duration window's ids are known from its bounds (`expected_ids`), so a result
holding fewer is a short window."""

import json
import time
from pathlib import Path

from squall import BaseWindowedBolt, Bolt, Count, Duration, Fields, Spout, TopologyBuilder
from squall.state import BaseStatefulWindowedBolt

from .checkpoint_restart_topology import Numbers as PacedNumbers

START_MS = 1_000_000
STEP_MS = 10
CLOSING_ID = -1

SHAPES = {
    # name: (length, sliding); duration lengths in ms
    "tumbling": (Duration.of(500), Duration.of(500)),
    "sliding": (Duration.of(1000), Duration.of(500)),
    "count-tumbling": (Count.of(50), Count.of(50)),
    "count-sliding": (Count.of(100), Count.of(50)),
}


def expected_ids(start: int, end: int, n: int) -> list[int]:
    """The ids 0..n-1 whose timestamp is in ``(start, end]`` (an event-time duration window)."""
    return [i for i in range(n) if start < START_MS + i * STEP_MS <= end]


class Numbers(PacedNumbers):
    """checkpoint_restart_topology's paced ids, its closing record 500 steps past the last id (past
    every window shape's end and lag here)."""

    def closing_ts(self) -> int:
        return START_MS + (self.n + 500) * STEP_MS


class Scripted(Spout):
    """Emits ``order``'s ids (id i stamped ``START_MS + i * STEP_MS``, in that order: out of
    order where it says so) at ``per_sec`` a second; after the first ``pause_after + 1`` writes
    ``paused`` under ``test.out.dir`` and waits for ``go`` there; at the end the closing record,
    and ``emitted-<task>`` (how many ids it emitted, as `Numbers`)."""

    def __init__(self, order: list[int], pause_after: int, per_sec: int) -> None:
        self.order, self.pause_after, self.per_sec = order, pause_after, per_sec

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.out = Path(conf["test.out.dir"])
        self.emitted = self.out / f"emitted-{context.get_this_task_id()}"
        self.next, self.started, self.resumed = 0, None, False

    def next_tuple(self):
        if self.next > len(self.order):
            return
        now = time.monotonic()
        if self.next == self.pause_after + 1 and not self.resumed:
            if not (self.out / "go").exists():
                (self.out / "paused").touch()
                return
            self.resumed = True
            self.started = now - self.next / self.per_sec  # the pace goes on from here
        if self.started is None:
            self.started = now
        due = min(len(self.order), int((now - self.started) * self.per_sec))
        if self.next <= self.pause_after:
            due = min(due, self.pause_after + 1)
        while self.next < due:
            i = self.order[self.next]
            self.collector.emit([i, START_MS + i * STEP_MS], i)
            self.next += 1
        if self.next == len(self.order):
            self.collector.emit([CLOSING_ID, START_MS + (len(self.order) + 500) * STEP_MS], CLOSING_ID)
            written = self.emitted.with_suffix(".tmp")
            written.write_text(str(self.next))
            written.replace(self.emitted)
            self.next += 1


def _result(window) -> list:
    ids = sorted(t[0] for t in window.get() if t[0] != CLOSING_ID)
    return [window.get_start_timestamp(), window.get_end_timestamp(), ids, sum(ids)]


class PlainSums(BaseWindowedBolt):
    """Emits each window's bounds, ids and sum."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("start", "end", "ids", "sum"))

    def execute(self, window):
        self.collector.emit(_result(window))


class StatefulSums(BaseStatefulWindowedBolt):
    """`PlainSums` as a stateful windowed bolt (persistent or not)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("start", "end", "ids", "sum"))

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        self.collector.emit(_result(window))


class WindowSink(Bolt):
    """Records every window result it gets, with the wall time, to ``sink-<task>.jsonl`` (an
    append: a user's sink)."""

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.log = Path(conf["test.out.dir"]) / f"sink-{context.get_this_task_id()}.jsonl"

    def execute(self, tup):
        if tup[2]:  # a window of the closing record alone
            row = {"start": tup[0], "end": tup[1], "ids": tup[2], "sum": tup[3], "at": time.time()}
            with open(self.log, "a") as f:
                f.write(json.dumps(row) + "\n")
        self.collector.ack(tup)


def topology(n: int, per_sec: int, kind: str, shape: str, event_time: bool, spout: Spout | None = None):
    """numbers -> window (1 task; ``kind`` plain, stateful or persistent) -> sink (1 task);
    ``spout`` instead of `Numbers`."""
    bolt = PlainSums() if kind == "plain" else StatefulSums()
    length, sliding = SHAPES[shape]
    bolt = bolt.with_window(length, sliding)
    if event_time:
        bolt = bolt.with_timestamp_field("ts").with_lag(Duration.of(200)).with_watermark_interval(Duration.of(100))
    if kind == "persistent":
        bolt = bolt.with_persistence()
    b = TopologyBuilder()
    b.set_spout("numbers", spout or Numbers(n, per_sec))
    b.set_bolt("window", bolt).global_grouping("numbers")
    b.set_bolt("sink", WindowSink()).global_grouping("window")
    return b.create_topology()
