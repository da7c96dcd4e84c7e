"""An emit given Storm's Java order, ``emit(streamId, values)``, puts a list where squall's
stream goes: the error names the component, the task, what it got and squall's order (it was
``TypeError: unhashable type: 'list'``, naming nothing). On the compiled path and the pure-Python
twins alike; the input fails, as with any exception escaping ``execute``, and is reported."""

from __future__ import annotations

from squall import BasicBolt, Fields, LocalCluster, Spout, TopologyBuilder
from squall.testing._registry import SharedLog

from ..conftest import wait_until

N = 5


class Ids(Spout):
    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.i = 0

    def next_tuple(self):
        if self.i < N:
            self.collector.emit([self.i], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id):
        self.log.append(("ack", msg_id))

    def fail(self, msg_id):
        self.log.append(("fail", msg_id))

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["n"]))


class JavaOrder(BasicBolt):
    def execute(self, tup, collector):
        if tup[0] % 2:
            collector.emit("other", [tup[0]])  # Storm's emit(streamId, values)
        else:
            collector.emit([tup[0]], "other")  # squall's order: fine

    def declare_output_fields(self, declarer):
        declarer.declare_stream("other", Fields(["n"]))


def test_storms_emit_order_fails_the_input_with_an_error_naming_the_bolt_and_the_order():
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("ids", Ids(log))
    b.set_bolt("java", JavaOrder()).shuffle_grouping("ids")
    with LocalCluster() as cluster:
        cluster.submit_topology("order", {}, b.create_topology())
        assert wait_until(lambda: len(log.items()) == N)
        errors = cluster.get_topology_info("order")["errors"]
    assert sorted(log.items()) == [("ack", 0), ("ack", 2), ("ack", 4), ("fail", 1), ("fail", 3)]
    texts = [e["error"] for e in errors if e["component"] == "java"]
    assert texts, errors
    assert all("emit's stream must be a stream id (a str), got list [" in t and "(component [java], task" in t
               and "emit(values, stream=streamId)" in t for t in texts), texts
