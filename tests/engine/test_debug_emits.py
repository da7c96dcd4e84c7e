"""``topology.debug`` logs every emitted tuple (docs/configuration.md), as Storm's collectors
do: a BasicBolt's emits and every ``emit_direct`` too, not only a spout's and a plain bolt's
``emit``. On the compiled path and the pure-Python twins alike."""

from __future__ import annotations

import logging

from squall import BasicBolt, Bolt, Fields, LocalCluster, Spout, TopologyBuilder
from squall.testing._registry import SharedLog

from ..conftest import wait_until

N = 5


class Ids(Spout):
    """Emits 0..N-1 (tracked), each also directly to the first task of ``sink``."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.i = 0
        self.sink = context.get_component_tasks("sink")[0]

    def next_tuple(self):
        if self.i < N:
            self.collector.emit([self.i], msg_id=self.i)
            self.collector.emit_direct(self.sink, [f"s{self.i}"], stream="d")
            self.i += 1

    def ack(self, msg_id):
        self.log.append(msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))
        declarer.declare_stream("d", Fields(["x"]), direct=True)


class Plus(BasicBolt):
    def execute(self, tup, collector):
        collector.emit([tup[0] + 100])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))


class Relay(Bolt):
    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.sink = context.get_component_tasks("sink")[0]

    def execute(self, tup):
        self.collector.emit_direct(self.sink, [tup[0] + 100], tup, stream="d")
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare_stream("d", Fields(["x"]), direct=True)


class Sink(Bolt):
    def execute(self, tup):
        self.collector.ack(tup)


def test_debug_logs_every_emit_a_basic_bolts_and_every_emit_direct_included(caplog):
    acked = SharedLog()
    b = TopologyBuilder()
    b.set_spout("ids", Ids(acked))
    b.set_bolt("plus", Plus()).shuffle_grouping("ids")
    b.set_bolt("relay", Relay()).shuffle_grouping("plus")
    b.set_bolt("sink", Sink(), 2).direct_grouping("relay", "d").direct_grouping("ids", "d")
    with caplog.at_level(logging.INFO, "squall.debug"), LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.debug": True}, b.create_topology())
        assert wait_until(lambda: len(acked.items()) == N)
    logged = {r.getMessage().split(" task ")[0] + " " + r.getMessage().rsplit(": ", 1)[1]
              for r in caplog.records if r.name == "squall.debug"}
    for i in range(N):
        assert f"Emitting: ids [{i}]" in logged
        assert f"Emitting: ids ['s{i}']" in logged        # a spout's emit_direct
        assert f"Emitting: plus [{i + 100}]" in logged    # a BasicBolt's emit
        assert f"Emitting: relay [{i + 200}]" in logged   # a bolt's emit_direct
    assert sorted(acked.items()) == list(range(N))
