"""Components for the process-host rebalance test of event-time windows. They record what they
see in files under ``test.out.dir`` (the test runs in another process than the workers)."""

import json
import time
from pathlib import Path

from squall import BaseWindowedBolt, Bolt, Duration, Fields
from tests.written import finished_lines

from .recovery_topology import DurableSpout


def _out(conf, name):
    return open(Path(conf["test.out.dir"]) / name, "a")

TICK_MS = 10
"""Id ``i``'s event time is ``i * TICK_MS``."""
FAR = 10 ** 12
"""The event time of the push that closes every window once the spout stopped."""


class TimedIds(DurableSpout):
    """The endless `DurableSpout`'s ids with their event time, ``(id, ts)``, each emit written
    to ``emitted-<task>.txt`` (as `ReplayingSpout`'s, for `emitted`); once stopped, and
    every id it emitted acked or in flight, a push ``(-1, FAR)`` (no message id) every 50 ms, which
    moves every window task's watermark past its last windows."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.pushed = 0.0
        self.emits = _out(conf, f"emitted-{context.get_this_task_id()}.txt")

    def next_tuple(self):
        i = self.next_id()
        if i is not None:
            self.emits.write(f"{i}\n")
            self.emits.flush()
            self.collector.emit([i, i * TICK_MS], i)
        elif self.limit is not None and time.monotonic() - self.pushed > 0.05:
            self.pushed = time.monotonic()
            self.collector.emit([-1, FAR])


class IdWindows(BaseWindowedBolt):
    """Event-time tumbling windows of 500 ms (50 ids), watermark every 200 ms, late tuples on
    ``late``; writes each window's ids (and its task) to ``windows-<task>.jsonl``."""

    def __init__(self):
        super().__init__()
        self.with_tumbling_window(Duration.of(500)).with_timestamp_field("ts") \
            .with_watermark_interval(Duration.of(200)).with_late_tuple_stream("late")

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.task = context.get_this_task_id()
        self.log = _out(conf, f"windows-{self.task}.jsonl")

    def execute(self, window):
        ids = [t.get_value(0) for t in window.get() if t.get_value(0) >= 0]
        self.log.write(json.dumps({"task": self.task, "start": window.get_start_timestamp(), "ids": ids}) + "\n")
        self.log.flush()


class LateIds(Bolt):
    """Writes each late tuple's id and the window task it came from to ``late-<task>.jsonl``; acks it."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.log = _out(conf, f"late-{context.get_this_task_id()}.jsonl")

    def execute(self, tup):
        late = tup.get_value_by_field("late_tuple")
        self.log.write(json.dumps({"task": tup.source_task, "id": late.values[0]}) + "\n")
        self.log.flush()
        self.collector.ack(tup)


def rows(out: Path, prefix: str) -> list[dict]:
    """The rows written to ``<prefix>-*.jsonl`` under ``out``."""
    return [json.loads(line) for f in sorted(out.glob(f"{prefix}-*.jsonl")) for line in finished_lines(f)]
