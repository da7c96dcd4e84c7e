"""Components for the process-host recovery tests (shipped to the workers by value)."""

import os
import signal
from pathlib import Path

from squall import BasicBolt, Fields, Spout, TopologyBuilder


class DurableSpout(Spout):
    """Emits ids 0..n-1 reliably, like a replayable source: a failed id is emitted again, and an
    acked id is recorded in ``acked-<task>.txt`` under ``test.out.dir`` and never emitted again,
    even by a restarted instance (a source that commits its offsets)."""

    def __init__(self, n):
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.dir = Path(conf["test.out.dir"])
        self.file = self.dir / f"acked-{context.get_this_task_id()}.txt"
        done = set()
        for f in self.dir.glob("acked-*.txt"):
            done |= {int(x) for x in f.read_text().split()}
        self.todo = [i for i in range(self.n) if i not in done]
        self.out = open(self.file, "a")

    def next_tuple(self):
        if self.todo:
            i = self.todo.pop()
            self.collector.emit([i], i)

    def ack(self, msg_id):
        self.out.write(f"{msg_id}\n")
        self.out.flush()

    def fail(self, msg_id):
        self.todo.append(msg_id)


class Slowish(BasicBolt):
    """Passes ids on, a little slowly, so a run lasts long enough to kill things under it."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def execute(self, tup, collector):
        for _ in range(2000):
            pass
        collector.emit([tup[0]])


class Sink(BasicBolt):
    """Consumes."""

    def execute(self, tup, collector):
        pass


class UnimportableOnWorkers(BasicBolt):
    """Imports, in ``prepare``, a module the workers do not have."""

    def prepare(self, conf, context):
        import not_installed_anywhere  # noqa: F401


def pid_exists(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


class Flood(Spout):
    """Emits unanchored tuples as fast as it may."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))

    def next_tuple(self):
        self.collector.emit([1])


class Sleepy(BasicBolt):
    """Takes a millisecond per tuple."""

    def execute(self, tup, collector):
        import time
        time.sleep(0.001)


def acked(out: Path) -> set[int]:
    """The ids `DurableSpout` recorded as acked under ``out``."""
    ids = set()
    for f in out.glob("acked-*.txt"):
        ids |= {int(x) for x in f.read_text().split()}
    return ids


def recovery_topology(n):
    """`DurableSpout` of ids 0..n-1 -> 2 `Slowish` (shuffle) -> 2 `Sink` (fields on id)."""
    b = TopologyBuilder()
    b.set_spout("source", DurableSpout(n), 1)
    b.set_bolt("work", Slowish(), 2).shuffle_grouping("source")
    b.set_bolt("sink", Sink(), 2).fields_grouping("work", ["id"])
    return b.create_topology()


RECOVERY_CONF = {"topology.message.timeout.secs": 3, "topology.max.spout.pending": 100}
"""What the recovery topology runs with: a short timeout, so lost tuples replay quickly."""


class Chatty(Spout):
    """Prints ``lines`` lines of 100 bytes to stdout (as user code does), then idles."""

    def __init__(self, lines):
        self.lines = lines

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.printed = 0

    def next_tuple(self):
        for _ in range(min(100, self.lines - self.printed)):  # many a call: an idle spout is called slowly
            self.printed += 1
            print(f"chatty line {self.printed:08d} ".ljust(99, "."), flush=True)


def kill_a_worker_without(client, name, component):
    """SIGKILL the Python process of a worker of topology ``name`` that runs no task of
    ``component`` (so the spout stays, and waits on what was lost); return its ``info`` entry."""
    info = client.get_topology_info(name)
    ports = {st["worker"] for st in info["components"][component]["task_stats"].values()}
    victim = next(w for w in info["workers"] if int(w["slot"].rsplit(":", 1)[1]) not in ports)
    os.kill(victim["pid"], signal.SIGKILL)
    return victim
