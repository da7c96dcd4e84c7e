"""A topology for killing a Spark task's own Python process (the watcher of the squall worker it
forked: `squall.cluster.spark_task.run_watched`) while that worker's bolt is executing a tuple:
a bounded reliable spout that notes the cause of every failure it is told of (`NotesCauses`), and
a bolt that runs only in the other worker (`Elsewhere`) and writes every id it gets to its sink
file, but holds id `HELD` (its first time only) inside ``execute`` until its worker dies
(`HoldsOne`), so that the test kills the watcher at a known point of a known record."""

from __future__ import annotations

import os
import time
from pathlib import Path

from squall import BasicBolt, TopologyBuilder
from tests.written import finished_lines

from ..process.recovery_topology import DurableSpout
from ..process.test_poison_kills_other_worker import Elsewhere

IDS = 300
HELD = 150  # the id the bolt holds when it first gets it
HOLDING = "holding"  # the file the bolt writes, with its pid, once it holds HELD


class NotesCauses(DurableSpout):
    """`DurableSpout` (ids 0 .. n-1, a failed one emitted again, an acked one never) that writes
    each failure it is told of to ``fails-<task>.txt``: ``<id> <kind> <record caused: 0|1>``."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.fails = open(self.dir / f"fails-{context.get_this_task_id()}.txt", "a")  # noqa: SIM115 (for the task's life)

    def fail_with(self, msg_id, cause):
        self.fails.write(f"{msg_id} {cause.kind} {int(cause.record_caused)}\n")
        self.fails.flush()
        super().fail_with(msg_id, cause)


class HoldsOne(BasicBolt):
    """Writes every id it gets to ``sink-<pid>.txt`` (flushed before the ack), except that on
    `HELD`, the first time (no `HOLDING` file yet), it writes `HOLDING` with its pid and then
    stays in ``execute`` until its process dies."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.dir = Path(conf["test.out.dir"])
        self.out = open(self.dir / f"sink-{os.getpid()}.txt", "a")  # noqa: SIM115 (for the task's life)

    def execute(self, tup, collector):
        if tup[0] == HELD and not (self.dir / HOLDING).exists():
            tmp = self.dir / f"{HOLDING}.tmp"
            tmp.write_text(str(os.getpid()))
            tmp.replace(self.dir / HOLDING)  # whole or absent: the test reads it as soon as it exists
            while True:  # until the test kills this worker's Spark task
                time.sleep(0.05)
        self.out.write(f"{tup[0]}\n")
        self.out.flush()


def watcher_topology():
    """`NotesCauses` -> 2 `HoldsOne`, routed only to the worker without the spout."""
    b = TopologyBuilder()
    b.set_spout("source", NotesCauses(IDS), 1)
    b.set_bolt("hold", HoldsOne(), 2).custom_grouping("source", Elsewhere())
    return b.create_topology()


def sink_ids(out: Path) -> dict[int, list[int]]:
    """Pid -> every id the sink of that worker process wrote, repeats included."""
    return {int(f.stem.split("-")[1]): [int(x) for x in f.read_text().split()] for f in out.glob("sink-*.txt")}


def fails(out: Path) -> list[tuple[int, str, bool]]:
    """Every failure the spout was told of: ``(id, kind, record caused)``."""
    return [(int(i), kind, caused == "1") for f in out.glob("fails-*.txt")
            for i, kind, caused in (line.split() for line in finished_lines(f))]
