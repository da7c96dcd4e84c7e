"""A BasicBolt's collector has Storm's ``resetTimeout`` (``BasicOutputCollector.resetTimeout``):
``collector.reset_timeout(tup)`` restarts the message timeout of ``tup``'s spout tuples, and
with no argument those of the input being executed, as the bolt collector's does (it raised
AttributeError, which failed the input). On the compiled path and the pure-Python twins alike."""

from __future__ import annotations

from squall import BasicBolt, Bolt, Fields, LocalCluster, Spout, TopologyBuilder
from squall.engine.clock import SimulatedClock
from squall.testing._registry import SharedLog, SharedQueue

from ..conftest import wait_until

N = 20
TIMEOUT = 10  # the pending map rotates every 10 s: a tuple not reset fails at the 2nd rotation


class Feed(Spout):
    """Emits what is fed: ``(stream, value)``, tracked with the value as message id."""

    def __init__(self, feed: SharedQueue, log: SharedLog) -> None:
        self.feed, self.log = feed, log

    def next_tuple(self):
        try:
            stream, value = self.feed.take()
        except IndexError:
            return
        self.collector.emit([value], msg_id=value, stream=stream)

    def ack(self, msg_id):
        self.log.append(("ack", msg_id))

    def fail(self, msg_id):
        self.log.append(("fail", msg_id))

    def declare_output_fields(self, declarer):
        for stream in ("default", "reset", "release"):
            declarer.declare_stream(stream, Fields(["v"]))


class Work(BasicBolt):
    """Passes each record on (held downstream), keeping it; a ``reset`` input resets the
    timeout of every record kept (naming them) and its own (no argument)."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.kept = []

    def execute(self, tup, collector):
        if tup.source_stream == "reset":
            for t in self.kept:
                collector.reset_timeout(t)
            collector.reset_timeout()
            return
        self.kept.append(tup)
        collector.emit([tup[0]])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["v"]))


class Hold(Bolt):
    """Holds every record until a ``release`` input, then acks them all."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.held = []

    def execute(self, tup):
        if tup.source_stream == "release":
            for t in self.held:
                self.collector.ack(t)
            self.collector.ack(tup)
            return
        self.held.append(tup)


def test_a_basic_bolt_resets_the_timeout_of_kept_inputs_and_of_its_input_and_nothing_times_out():
    log, feed = SharedLog(), SharedQueue()
    b = TopologyBuilder()
    b.set_spout("feed", Feed(feed, log))
    b.set_bolt("work", Work()).shuffle_grouping("feed").shuffle_grouping("feed", "reset")
    b.set_bolt("hold", Hold()).shuffle_grouping("work").shuffle_grouping("feed", "release")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("t", {"topology.message.timeout.secs": TIMEOUT}, b.create_topology())
        for i in range(N):
            feed.put(("default", i))
        assert wait_until(lambda: cluster.get_topology_info("t")["components"]["hold"]["executed"] == N)
        cluster.advance_cluster_time(TIMEOUT + 1)  # 1st rotation: the records are in the old bucket
        feed.put(("reset", "reset"))
        # the acker answers the resets before the reset input's own ack, to the same spout task
        assert wait_until(lambda: ("ack", "reset") in log.items()), log.items()
        cluster.advance_cluster_time(TIMEOUT)  # 2nd rotation: what was not reset times out
        feed.put(("release", "release"))
        assert wait_until(lambda: len(log.items()) == N + 2), log.items()
        errors = cluster.get_topology_info("t")["errors"]
    assert sorted(log.items(), key=str) == sorted([("ack", i) for i in range(N)] + [("ack", "reset"), ("ack", "release")],
                                                  key=str)
    assert errors == []
