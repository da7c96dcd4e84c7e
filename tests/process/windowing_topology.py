"""Components for the process-host windowing test. They record what they see in files under
``test.out.dir`` (the test runs in another process than the workers)."""

import json
from pathlib import Path

from squall import BaseWindowedBolt, Bolt, Duration, Fields, Spout
from tests.written import finished_lines


def _out(conf, name):
    return open(Path(conf["test.out.dir"]) / name, "a")


def windows_recorded(out: Path) -> int:
    """How many windows the `RecordsWindows` tasks writing under ``out`` recorded, all together."""
    return sum(len(finished_lines(f)) for f in out.glob("windows-*.jsonl"))


class ScheduledSpout(Spout):
    """Emits ``(v, ts)`` items with message id ``v``, in order, each once ``after`` windows are
    recorded under ``test.out.dir`` (`windows_recorded`): an event, however fast or slow the
    machine; records acks and fails."""

    def __init__(self, items):
        self.items = items  # [(after, v, ts)]

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("v", "ts"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.todo = list(self.items)
        self.dir = Path(conf["test.out.dir"])
        self.log = _out(conf, f"spout-{context.get_this_task_id()}.jsonl")

    def next_tuple(self):
        if self.todo and (self.todo[0][0] == 0 or windows_recorded(self.dir) >= self.todo[0][0]):
            _after, v, ts = self.todo.pop(0)
            self.collector.emit([v, ts], v)

    def ack(self, msg_id):
        self.log.write(json.dumps({"ack": msg_id}) + "\n")
        self.log.flush()

    def fail(self, msg_id):
        self.log.write(json.dumps({"fail": msg_id}) + "\n")
        self.log.flush()


class RecordsWindows(BaseWindowedBolt):
    """Event-time tumbling windows of 500 ms; records each window's values and bounds, and its
    worker's port (to show the tasks ran in different processes)."""

    def __init__(self):
        super().__init__()
        self.with_tumbling_window(Duration.of(500)).with_timestamp_field("ts") \
            .with_watermark_interval(Duration.of(200)).with_late_tuple_stream("late")

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.log = _out(conf, f"windows-{context.get_this_task_id()}.jsonl")
        self.port = context.get_this_worker_port()

    def execute(self, window):
        self.log.write(json.dumps({"values": [t.get_value(0) for t in window.get()],
                                   "start": window.get_start_timestamp(), "end": window.get_end_timestamp(),
                                   "port": self.port}) + "\n")
        self.log.flush()


class RecordsLate(Bolt):
    """Records each late tuple it gets (the ``late_tuple`` field, a Tuple) and acks it."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.log = _out(conf, f"late-{context.get_this_task_id()}.jsonl")

    def execute(self, tup):
        late = tup.get_value_by_field("late_tuple")
        self.log.write(json.dumps({"values": late.values, "from": late.source_component,
                                   "via": tup.source_task}) + "\n")
        self.log.flush()
        self.collector.ack(tup)
