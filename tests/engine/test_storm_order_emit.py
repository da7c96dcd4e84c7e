"""An emit given Storm's Java order, ``emit(streamId, values)``, puts a list where squall's
stream goes: the error names the component, the task, what it got and squall's order (it was
``TypeError: unhashable type: 'list'``, naming nothing). On the compiled path and the pure-Python
twins alike; the input fails, as with any exception escaping ``execute``, and is reported."""

from __future__ import annotations

from squall import BasicBolt, Fields, LocalCluster, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout

from ..conftest import wait_until

N = 5


class JavaOrder(BasicBolt):
    def execute(self, tup, collector):
        if tup[0] % 2:
            collector.emit("other", [tup[0]])  # Storm's emit(streamId, values)
        else:
            collector.emit([tup[0]], "other")  # squall's order: fine

    def declare_output_fields(self, declarer):
        declarer.declare_stream("other", Fields(["n"]))


def test_storms_emit_order_fails_the_input_with_an_error_naming_the_bolt_and_the_order():
    feeder, tracker = FeederSpout(Fields("n")), AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("ids", feeder)
    b.set_bolt("java", JavaOrder()).shuffle_grouping("ids")
    with LocalCluster() as cluster:
        cluster.submit_topology("order", {}, b.create_topology())
        for i in range(N):
            feeder.feed([i], i)
        assert wait_until(lambda: all(tracker.is_acked(i) or tracker.is_failed(i) for i in range(N)))
        errors = cluster.get_topology_info("order")["errors"]
    assert [i for i in range(N) if tracker.is_acked(i)] == [0, 2, 4]
    assert [i for i in range(N) if tracker.is_failed(i)] == [1, 3]
    texts = [e["error"] for e in errors if e["component"] == "java"]
    assert texts, errors
    assert all("emit's stream must be a stream id (a str), got list [" in t and "(component [java], task" in t
               and "emit(values, stream=streamId)" in t for t in texts), texts
