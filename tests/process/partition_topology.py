"""Components for the partition tests: a spout and a sink that write down every record they
handle, with the process that handled it, so that a test counts every record sent, every
replay, every copy a sink took, and which process took it (shipped to the workers by value)."""

import os
import time
from collections import Counter
from pathlib import Path

from squall import BasicBolt, Fields, Spout, TopologyBuilder
from tests.written import finished_lines

STOP = "stop"


class LoggedSpout(Spout):
    """Emits ids 0, 1, 2, ... reliably until ``STOP`` exists under ``test.out.dir``; a failed id
    is emitted again. Writes ``e|a|f <id> <pid> <time>`` lines (emit, ack, fail) to
    ``spout.log`` under ``test.out.dir``. A restarted instance (its executors moved) goes on
    after the last id any instance emitted and replays what was emitted and not acked. New
    ids go out at most ``rate`` a second (replays at once), so the logs stay small; with
    ``limit``, only ids below it (a finite set: replays still go out)."""

    def __init__(self, rate=500, limit=None):
        self.rate = rate
        self.limit = limit

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.dir = Path(conf["test.out.dir"])
        self.log = open(self.dir / "spout.log", "a")  # noqa: SIM115 (open for the spout's life)
        emitted, acked, _ = spout_events(self.dir)
        self.next = max(emitted, default=-1) + 1
        self.todo = sorted(set(emitted) - set(acked))
        self.stopped = (self.dir / STOP).exists()
        self.pid = os.getpid()
        self.due = 0.0

    def _write(self, kind, i):
        self.log.write(f"{kind} {i} {self.pid} {time.time():.3f}\n")
        self.log.flush()

    def next_tuple(self):
        if self.todo:
            i = self.todo.pop()
        elif self.stopped or (self.dir / STOP).exists() or (self.limit is not None and self.next >= self.limit):
            self.stopped = True
            return
        else:
            now = time.monotonic()
            if now < self.due:
                return
            self.due = max(self.due, now - 0.1) + 1.0 / self.rate
            i = self.next
            self.next += 1
        self._write("e", i)
        self.collector.emit([i], i)

    def ack(self, msg_id):
        self._write("a", msg_id)

    def fail(self, msg_id):
        self._write("f", msg_id)
        self.todo.append(msg_id)


class LoggedSink(BasicBolt):
    """Writes ``<id> <pid> <time>`` for each tuple to ``sink-<task>.log`` under ``test.out.dir``."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.log = open(Path(conf["test.out.dir"]) / f"sink-{context.get_this_task_id()}.log", "a")  # noqa: SIM115
        self.pid = os.getpid()

    def execute(self, tup, collector):
        self.log.write(f"{tup[0]} {self.pid} {time.time():.3f}\n")
        self.log.flush()


def partition_topology(sinks=4, rate=500, limit=None):
    """`LoggedSpout` (``rate``, ``limit``) -> ``sinks`` `LoggedSink` tasks (shuffle): with two
    workers, about half the tuples cross between them."""
    b = TopologyBuilder()
    b.set_spout("source", LoggedSpout(rate, limit), 1)
    b.set_bolt("sink", LoggedSink(), sinks).shuffle_grouping("source")
    return b.create_topology()


def spout_events(out: Path):
    """(emitted, acked, failed): the ids of every emit, ack and fail, repeats included."""
    emitted, acked, failed = [], [], []
    f = out / "spout.log"
    if f.exists():
        for line in finished_lines(f):
            parts = line.split()
            if len(parts) == 4:  # a line being written has fewer
                {"e": emitted, "a": acked, "f": failed}[parts[0]].append(int(parts[1]))
    return emitted, acked, failed


def spout_lines(out: Path):
    """Every whole line of ``spout.log`` as (kind, id, pid, time)."""
    f = out / "spout.log"
    rows = []
    if f.exists():
        for line in finished_lines(f):
            parts = line.split()
            if len(parts) == 4:
                rows.append((parts[0], int(parts[1]), int(parts[2]), float(parts[3])))
    return rows


def sink_rows(out: Path):
    """Every (id, pid, time) the sinks took."""
    rows = []
    for f in out.glob("sink-*.log"):
        for line in finished_lines(f):
            parts = line.split()
            if len(parts) == 3:
                rows.append((int(parts[0]), int(parts[1]), float(parts[2])))
    return rows


def sink_counts(out: Path) -> Counter:
    return Counter(i for i, _, _ in sink_rows(out))


def stop_spout(out: Path) -> None:
    (out / STOP).write_text("")
