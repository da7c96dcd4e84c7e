"""``ack``, ``fail`` and ``reset_timeout`` of something that is no input Tuple raise a TypeError
naming the call, what it got, the component and the task (it was ``AttributeError: 'NoneType'
object has no attribute '_root'``); as any exception escaping ``execute``, it fails that input
and is reported. On the compiled path and the pure-Python twins alike."""

from __future__ import annotations

from squall import Bolt, Fields, LocalCluster, Spout, TopologyBuilder
from squall.testing._registry import SharedLog

from ..conftest import wait_until

CALLS = ["ack", "fail", "reset_timeout"]
GIVEN = [None, [7], "x"]
N = 9  # records 0..8: each call with each wrong argument, in turn


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


class Confused(Bolt):
    def execute(self, tup):
        i = tup[0]
        getattr(self.collector, CALLS[i % 3])(GIVEN[i // 3])
        self.collector.ack(tup)  # not reached


def test_a_call_on_something_that_is_no_input_fails_the_input_with_a_clear_error():
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("ids", Ids(log))
    b.set_bolt("confused", Confused()).shuffle_grouping("ids")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.message.timeout.secs": 300,
                                      "topology.max.error.report.per.interval": 100}, b.create_topology())
        assert wait_until(lambda: len(log.items()) == N), log.items()
        errors = cluster.get_topology_info("t")["errors"]
    assert sorted(log.items()) == [("fail", i) for i in range(N)]
    texts = sorted(e["error"] for e in errors for _ in range(e["count"]))
    want = sorted(f"TypeError: {CALLS[i % 3]} takes an input Tuple, got {type(GIVEN[i // 3]).__name__} "
                  f"{GIVEN[i // 3]!r} (component [confused], task {errors[0]['task']})" for i in range(N))
    assert texts == want, texts
