"""Thousands of failures, timeouts and late acks, replayed until acked, leave none of the
engine's tables behind: on a simulated clock, a worker whose bolts fail 1% of their inputs, hold
0.5% past the message timeout (acking them late), anchor each output to several inputs and emit
to a second stream, ends with every number acked once at its spout and seen by the sink, and
with its acker's pending trees, its spout's pending map, its bolts' held acks and sampled
inputs and its inboxes empty, once the acker has rotated out what the late acks left.

A 9-minute soak of the same shape on the process host (2 workers, 3 s timeout, ~94,000 spout
tuples, ~10% failed or timed out) found these tables flat (acker trees at most ~460 per worker,
spout pending at most its max of 100, held acks 0) and empty once it drained; this is its
property in under a second: 10,000 numbers, ~500 of them failed or timed out, some acked after
the acker had expired their trees."""

from __future__ import annotations

import random
from collections import Counter

from squall import Bolt, Config, Fields, Spout, TopologyBuilder, is_tick_tuple
from squall._config import topology_conf
from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs

from ..conftest import wait_until

N = 10_000
TIMEOUT = 10.0

ACKED: Counter = Counter()  # number -> acks at the spout
FAILED: list[int] = []  # numbers failed at the spout (each replayed)
SEEN: Counter = Counter()  # number -> times it reached the sink
HELD: list[list] = []  # the holding bolt's held inputs, per task


class Numbers(Spout):
    """Emits 0 .. N-1 with the number as message id; replays each failure."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["n"]))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.next = 0
        self.replay: list[int] = []

    def next_tuple(self):
        if self.replay:
            n = self.replay.pop()
        elif self.next < N:
            n, self.next = self.next, self.next + 1
        else:
            return
        self.collector.emit([n], n)

    def ack(self, n):
        ACKED[n] += 1

    def fail(self, n):
        FAILED.append(n)
        self.replay.append(n)


class FailsOrHolds(Bolt):
    """Fails 3% of its inputs, holds 2% until its next tick (past the timeout, often past the
    acker's expiry too), passes the others on anchored and acks them."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["n"]))

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.rng = random.Random(context.get_this_task_id())
        self.held: list = []
        HELD.append(self.held)

    def execute(self, tup):
        if is_tick_tuple(tup):
            for t in self.held:  # late: its tree timed out already, or completes now
                self.collector.emit([t[0]], t)
                self.collector.ack(t)
            self.held.clear()
            self.collector.ack(tup)  # (untracked: only its sample, if it was one, is closed)
            return
        roll = self.rng.random()
        if roll < 0.03:
            self.collector.fail(tup)
        elif roll < 0.05:
            self.held.append(tup)
        else:
            self.collector.emit([tup[0]], tup)
            self.collector.ack(tup)


class GroupsOfThree(Bolt):
    """Emits each input anchored to its whole group of 3 (or what a tick finds), and the group
    on stream "groups" anchored to all of it."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["n"]))
        declarer.declare_stream("groups", Fields(["ns"]))

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.group: list = []

    def execute(self, tup):
        if is_tick_tuple(tup):
            self.collector.ack(tup)
        else:
            self.group.append(tup)
            if len(self.group) < 3:
                return
        group, self.group = self.group, []
        if group:
            for t in group:
                self.collector.emit([t[0]], group)
            self.collector.emit([[t[0] for t in group]], group, stream="groups")
            for t in group:
                self.collector.ack(t)


class Sink(Bolt):
    def execute(self, tup):
        if tup.source_stream == "default":
            SEEN[tup[0]] += 1
        self.collector.ack(tup)


def _worker() -> tuple[Worker, SimulatedClock]:
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("flaky", FailsOrHolds(), 2).shuffle_grouping("numbers").add_configuration(
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, TIMEOUT * 3.5)
    b.set_bolt("groups", GroupsOfThree(), 2).fields_grouping("flaky", ["n"]).add_configuration(
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
    b.set_bolt("sink", Sink(), 2).fields_grouping("groups", ["n"]).shuffle_grouping("groups", "groups")
    conf = Config()
    conf.set_num_workers(1)
    conf.set_num_ackers(2)
    conf.set_message_timeout_secs(TIMEOUT)
    conf.set_max_spout_pending(300)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    clock = SimulatedClock()
    worker = Worker(plan, 1, plan.executors, component_blobs(plan), InMemoryTransport(InMemoryNetwork(), "here"),
                    clock, TopologyActivation(active=True), Backpressure(10_000), lambda rec: None,
                    lambda w, rec: None, 7)
    return worker, clock


def _quiet(worker: Worker) -> bool:
    """Nothing waits in an inbox, and the loops have run the timers due now."""
    now = worker.clock.now()
    return not any(worker.inboxes.values()) and all(lp.timers_run(now) for lp in worker.loops)


def _settled(worker: Worker, spout) -> bool:
    """Quiet twice in a row with the same tuples in flight (the spout has nothing more to do
    until the clock moves)."""
    before = spout.in_flight
    return _quiet(worker) and wait_until(lambda: _quiet(worker) and spout.in_flight == before, 0.05, 0.01)


def test_failures_timeouts_and_late_acks_replayed_until_acked_leave_every_table_empty():
    for table in (ACKED, SEEN):
        table.clear()
    FAILED.clear()
    HELD.clear()
    worker, clock = _worker()
    spout = next(ex for ex in worker.executors if ex.component == "numbers")
    worker.start()
    worker.start_gate.release()
    try:
        steps = 0
        while len(ACKED) < N:
            assert wait_until(lambda: _settled(worker, spout), 10), f"no progress: {len(ACKED)} of {N} acked"
            clock.advance(TIMEOUT / 2)
            steps += 1
            assert steps < 1000, f"{len(ACKED)} of {N} acked after {steps} steps"
        # every tree done: what late acks started at the ackers expires in 3 rotations
        for _ in range(8):
            assert wait_until(lambda: _settled(worker, spout), 10)
            clock.advance(TIMEOUT / 2)
        assert wait_until(lambda: _settled(worker, spout), 10)

        assert set(ACKED) == set(range(N)) and set(ACKED.values()) == {1}, "a number acked twice"
        assert set(SEEN) == set(range(N)), "a number never reached the sink"
        assert len(FAILED) > N // 100, "too few failures to mean anything"
        stats = spout.stats[spout.task_ids[0]]
        assert (stats.acked, stats.failed) == (N, len(FAILED))

        ackers = [a for ex in worker.executors if ex.kind == "acker" for a in ex.ackers.values()]
        assert len(ackers) == 2 and [len(a) for a in ackers] == [0, 0]
        assert len(spout.pending) == 0 and spout.in_flight == 0
        bolts = [ex for ex in worker.executors if ex.kind == "bolt"]
        assert all(not ex.acks for ex in bolts)
        assert sum(len(s.open_samples) for ex in [spout, *bolts] for s in ex.sampled.values()) == 0
        assert not any(worker.inboxes.values()) and not any(HELD)
    finally:
        worker.stop(clean=False)
