"""A core topology a user would run at-least-once, for the Spark failure tests: a reliable spout of
ids 0, 1, 2, ... with message ids (`KeyedSpout`, until the test stops it), fields grouping on
the id's key into a counting bolt (`KeyCount`), and a sink (`RecordingSink`) that writes every
id it receives, repeats included, to a file of its own under ``test.out.dir``. The spout records
each acked id and never emits an acked id again, even after a restart (a source that commits
its offsets), so what the sink wrote against what the spout emitted counts what was lost (must
be none) and what came out twice (at-least-once allows it; the test reports it)."""

import os
import time
from pathlib import Path

from squall import BasicBolt, Fields, TopologyBuilder
from tests.process.recovery_topology import RECOVERY_CONF, DurableSpout

KEYS = 8  # the counting bolt's groups: id % KEYS
PER_SEC = 400  # paced: two executors, a driver and a standalone cluster share 2 cores


class KeyedSpout(DurableSpout):
    """`DurableSpout` emitting ``[id, id % KEYS]``, at most ``per_sec`` a second (replays too)."""

    def __init__(self, per_sec=PER_SEC):
        super().__init__(None)
        self.per_sec = per_sec

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "key"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.next_at = time.monotonic()

    def next_tuple(self):
        now = time.monotonic()
        if now >= self.next_at and (i := self.next_id()) is not None:
            self.next_at = max(self.next_at, now - 0.1) + 1 / self.per_sec
            self.collector.emit([i, i % KEYS], i)


class KeyCount(BasicBolt):
    """Counts the ids of each key (its tasks own disjoint keys: fields grouping); passes each id
    on with its key's count so far."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.counts = {}

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "key", "count"))

    def execute(self, tup, collector):
        key = tup[1]
        self.counts[key] = self.counts.get(key, 0) + 1
        collector.emit([tup[0], key, self.counts[key]])


class RecordingSink(BasicBolt):
    """Writes every id it receives to ``sink-<task>-<pid>.txt``, one line each, flushed before
    the tuple is acked: a SIGKILL after the ack cannot lose the line."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        name = f"sink-{context.get_this_task_id()}-{os.getpid()}.txt"
        self.out = open(Path(conf["test.out.dir"]) / name, "a")  # noqa: SIM115 (held for the task's life)

    def execute(self, tup, collector):
        self.out.write(f"{tup[0]}\n")
        self.out.flush()

    def cleanup(self):
        self.out.close()


def sink_lines(out: Path) -> list[int]:
    """Every id the sinks under ``out`` received, repeats included."""
    return [int(x) for f in out.glob("sink-*.txt") for x in f.read_text().split()]


def counting_topology():
    """`KeyedSpout` -> 2 `KeyCount` (fields on key) -> 2 `RecordingSink` (shuffle)."""
    b = TopologyBuilder()
    b.set_spout("source", KeyedSpout(), 1)
    b.set_bolt("count", KeyCount(), 2).fields_grouping("source", ["key"])
    b.set_bolt("sink", RecordingSink(), 2).shuffle_grouping("count")
    return b.create_topology()


CONF = {**RECOVERY_CONF, "topology.message.timeout.secs": 30, "topology.max.spout.pending": 200}
"""A message timeout the test never waits out: lost tuples must fail at once (the master's notice)."""
