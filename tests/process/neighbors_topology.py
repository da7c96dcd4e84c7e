"""Components for two topologies sharing one process-host cluster: A, a healthy counting
pipeline (`healthy`), and B, a neighbour whose user code misbehaves (`neighbour`)."""

import os
import time

from squall import BasicBolt, Fields, Spout, TopologyBuilder

from .recovery_topology import DurableSpout
from .semantics_topology import _out


class CountOnce(BasicBolt):
    """Counts each id it gets (fields-grouped on id) and writes every tuple it saw to
    ``counted-<task>.txt`` under ``test.out.dir``; passes (id, count) on."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.counts = {}
        self.log = _out(conf, f"counted-{context.get_this_task_id()}.txt")

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "n"))

    def execute(self, tup, collector):
        i = tup[0]
        self.counts[i] = self.counts.get(i, 0) + 1
        self.log.write(f"{i}\n")
        self.log.flush()
        collector.emit([i, self.counts[i]])


class WriteSink(BasicBolt):
    """Writes each (id, count) it gets to ``sunk-<task>.txt`` under ``test.out.dir``."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.log = _out(conf, f"sunk-{context.get_this_task_id()}.txt")

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup, collector):
        self.log.write(f"{tup[0]} {tup[1]}\n")
        self.log.flush()


def healthy(n=None):
    """`DurableSpout` (``n`` None: endless) -> 2 `CountOnce` (fields on id) -> 2 `WriteSink` (shuffle)."""
    b = TopologyBuilder()
    b.set_spout("source", DurableSpout(n), 1)
    b.set_bolt("count", CountOnce(), 2).fields_grouping("source", ["id"])
    b.set_bolt("sink", WriteSink(), 2).shuffle_grouping("count")
    return b.create_topology()


class ExitsOnSome(BasicBolt):
    """Ends its process (``os._exit(7)``: no exception, no last word, as a C library's exit or
    a segfault) on an id ending in 7, once its worker has run for ``after`` seconds."""

    def __init__(self, after=1.0):
        self.after = after

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.since = time.monotonic()

    def execute(self, tup, collector):
        if tup[0] % 10 == 7 and time.monotonic() - self.since > self.after:
            os._exit(7)


class Endless(Spout):
    """Ids 0, 1, 2 ... with message ids, for ever."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.i = 0

    def next_tuple(self):
        self.collector.emit([self.i], self.i)
        self.i += 1


def neighbour(bolt, spout=None, tasks=2):
    """``spout`` (default `Endless`) -> ``tasks`` tasks of ``bolt`` (shuffle), named ``bsource`` and ``bad``."""
    b = TopologyBuilder()
    b.set_spout("bsource", spout or Endless(), 1)
    if bolt is not None:
        b.set_bolt("bad", bolt, tasks).shuffle_grouping("bsource")
    return b.create_topology()
