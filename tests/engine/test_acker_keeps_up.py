"""The acker, and a spout's replies, keep up with the bolts that share their worker's loop.

Each round of a loop drains at most `DRAIN_LIMIT` inputs per bolt task. A bolt with a backlog
completes up to that many tuples a round, and each costs the acker an init and an ack per
tuple of its tree: with the acker at the same share, its inbox grew for as long as the bolt's
backlog lasted, and the spout heard no ack until the backlog was gone (a burst of 100k tuples
into a bolt taking 0.5 ms each: 50 s of work, every tuple timed out at the default 30 s
message timeout, and replayed). Storm's acker has a thread of its own. Likewise a spout's
replies: two bolt tasks on its loop complete up to twice as many trees a round as it drained."""

from __future__ import annotations

from squall import BasicBolt, Fields, LocalCluster, Spout, TopologyBuilder
from squall.engine.loop import DRAIN_LIMIT

from ..acceptance.components import Counter as SharedCount
from ..acceptance.components import Recorder
from ..conftest import wait_until


class BurstSpout(Spout):
    """Emits 0 .. n-1 with message ids in one ``next_tuple`` call; records each ack, and at the
    first one how many inputs ``work`` had executed by then."""

    def __init__(self, n: int, executed: SharedCount, acked: SharedCount, recorder: Recorder) -> None:
        self.n, self.executed, self.acked, self.recorder = n, executed, acked, recorder

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.sent = False
        self.first = True

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            for i in range(self.n):
                self.collector.emit([i], i)

    def ack(self, msg_id):
        self.acked.incr()
        if self.first:
            self.first = False
            self.recorder.record("first-ack", self.executed.value)
        self.recorder.record("ack", msg_id)

    def fail(self, msg_id):
        self.recorder.record("fail", msg_id)


class Work(BasicBolt):
    """Passes its inputs on; counts them in ``executed``, and records how many acks the spout
    had heard (``acked``) when ``executed`` reaches ``n``: the backlog is gone then."""

    def __init__(self, n: int, executed: SharedCount, acked: SharedCount, recorder: Recorder) -> None:
        self.n, self.executed, self.acked, self.recorder = n, executed, acked, recorder

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))

    def execute(self, tup, collector):
        self.executed.incr()
        if self.executed.value == self.n:
            self.recorder.record("backlog-gone", self.acked.value)
        collector.emit([tup[0]])


class Sink(BasicBolt):
    def execute(self, tup, collector):
        pass


def _run(n, parallelism):
    """Spout -> work -> sink, ``parallelism`` tasks each, all in one worker (one loop): a burst
    of ``n`` tuples, every one acked once; returns (how many ``work`` had executed at the first
    ack, how many acks the spout had heard when ``work`` had executed them all)."""
    executed, acked, recorder = SharedCount(), SharedCount(), Recorder()
    b = TopologyBuilder()
    b.set_spout("burst", BurstSpout(n, executed, acked, recorder))
    b.set_bolt("work", Work(n, executed, acked, recorder), parallelism).shuffle_grouping("burst")
    b.set_bolt("sink", Sink(), parallelism).shuffle_grouping("work")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.workers": 1}, b.create_topology())
        assert wait_until(lambda: recorder.count("ack") == n, 60), recorder.count("ack")
    assert sorted(msg_id for _, msg_id in recorder.events("ack")) == list(range(n))  # each once
    assert recorder.events("fail") == []
    [(_, executed_at_first_ack)] = recorder.events("first-ack")
    [(_, acked_when_done)] = recorder.events("backlog-gone")
    return executed_at_first_ack, acked_when_done


def test_a_spout_hears_acks_while_a_bolt_on_its_loop_still_has_a_backlog():
    n = 8 * DRAIN_LIMIT
    executed_at_first_ack, _ = _run(n, 1)
    # the acker answered the first trees while the bolt still had most of the burst queued
    # (it drained them all first before: the first ack came after all n were executed)
    assert executed_at_first_ack <= n // 2, executed_at_first_ack


def test_a_spout_s_acks_keep_up_with_two_bolt_tasks_on_its_loop():
    n = 32 * DRAIN_LIMIT
    _, acked_when_done = _run(n, 2)
    # a tuple's ack reaches the spout two rounds after work executes it (sink, then the acker):
    # 2 tasks x 2 rounds x DRAIN_LIMIT behind at most, and a third round's for good measure
    # (at DRAIN_LIMIT replies a round the spout was half the backlog behind: n / 2)
    assert acked_when_done >= n - 6 * DRAIN_LIMIT, acked_when_done
