"""The topology tests/spark/test_spark_standalone_ha.py submits with ``squall jar`` in a
supervised driver: `PacedSpout` of ids 0, 1, 2, ... until the test stops it (``stop_spouts``)
-> 2 ``Slowish`` (shuffle) -> 2 ``Sink`` (fields on id), on two workers
(tests/process/recovery_topology.py). Each acked id is recorded in a file under
``test.out.dir`` (``-c test.out.dir=...``), and the spout never emits an acked id again, even
after a restart (a source that commits its offsets)."""

import time

from squall import TopologyBuilder
from tests.process.recovery_topology import RECOVERY_CONF, DurableSpout, Sink, Slowish

PER_SEC = 150  # a light load: the test runs two Spark workers and a driver on a 2-core machine
BURST_SECS = 0.1  # what a stalled spout may catch up on at once

conf = {**RECOVERY_CONF, "topology.workers": 2}


class PacedSpout(DurableSpout):
    """`DurableSpout`, emitting (new ids and replays alike) at most ``per_sec`` a second, with
    at most `BURST_SECS` of them at once after a stall."""

    def __init__(self, n, per_sec):
        super().__init__(n)
        self.per_sec = per_sec

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.next_at = time.monotonic()

    def next_tuple(self):
        now = time.monotonic()
        if now >= self.next_at and (i := self.next_id()) is not None:
            self.next_at = max(self.next_at, now - BURST_SECS) + 1 / self.per_sec
            self.collector.emit([i], i)


def build():
    """The topology."""
    b = TopologyBuilder()
    b.set_spout("source", PacedSpout(None, PER_SEC), 1)
    b.set_bolt("work", Slowish(), 2).shuffle_grouping("source")
    b.set_bolt("sink", Sink(), 2).fields_grouping("work", ["id"])
    return b.create_topology()
