"""A bolt that never acks some of its inputs (it drops them: they time out and replay) leaves
none of them in its sampled statistics' table of open samples once the trees are over.

The 5-minute soak of 2026-12-07 (process host and LocalCluster, 2 workers, a bolt failing 1 input
in 50 and dropping 1 in 200, a worker killed every minute; 89,070 ids, each acked once at its
spout) found the engine's tables flat but for this one: each sampled input the bolt dropped
stayed in ``TaskStatistics.open_samples``, holding the input, until the table's cap of 16,384
per task pushed it out. A bolt dropping 1 input in 10 at 500 inputs/s, sample rate 1.0, held
1,104, 3,510, 7,109, 12,004 and then 16,384 inputs at 10, 20, 30, 40 and 50 s; now a sample is
forgotten twice the message timeout after it opened, and the table stays at what the last 2 to
3 timeouts opened (3,000 there). Here, on a simulated clock: 4,000 numbers, about 2% of their
attempts dropped, each replayed until acked; once the clock is past every tree's timeout, no
sample is left open (there were as many as the drops before)."""

from __future__ import annotations

import random
from collections import Counter

from squall import Bolt, Config, Fields, Spout, TopologyBuilder
from squall._config import topology_conf
from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs

from ..conftest import wait_until

N = 4_000
TIMEOUT = 10.0

ACKED: Counter = Counter()  # number -> acks at the spout
FAILED: list[int] = []  # numbers failed at the spout (each replayed)
DROPPED: list[int] = []  # numbers the bolt dropped (one entry per dropped attempt)


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


class Drops(Bolt):
    """Drops 2% of its inputs (never acks nor fails them: their trees time out) and acks the rest."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.rng = random.Random(context.get_this_task_id())

    def execute(self, tup):
        if self.rng.random() < 0.02:
            DROPPED.append(tup[0])
            return
        self.collector.ack(tup)


def _worker() -> tuple[Worker, SimulatedClock]:
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("drops", Drops(), 2).shuffle_grouping("numbers")
    conf = Config()
    conf.set_num_workers(1)
    conf.set_num_ackers(1)
    conf.set_message_timeout_secs(TIMEOUT)
    conf.set_max_spout_pending(300)
    conf[Config.TOPOLOGY_STATS_SAMPLE_RATE] = 1.0  # every input sampled: every drop leaves its sample
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
    """Quiet twice in a row with the same tuples in flight."""
    before = spout.in_flight
    return _quiet(worker) and wait_until(lambda: _quiet(worker) and spout.in_flight == before, 0.05, 0.01)


def test_inputs_a_bolt_never_acks_leave_no_open_sample_once_their_trees_timed_out():
    ACKED.clear()
    FAILED.clear()
    DROPPED.clear()
    worker, clock = _worker()
    spout = next(ex for ex in worker.executors if ex.component == "numbers")
    bolts = [ex for ex in worker.executors if ex.component == "drops"]
    assert len(bolts) == 2
    worker.start()
    worker.start_gate.release()
    try:
        steps = 0
        while len(ACKED) < N:
            assert wait_until(lambda: _settled(worker, spout), 10), f"no progress: {len(ACKED)} of {N} acked"
            clock.advance(TIMEOUT / 2)
            steps += 1
            assert steps < 1000, f"{len(ACKED)} of {N} acked after {steps} steps"
        for _ in range(8):  # past 3 timeouts after the last drop: every tree is over, at the acker too
            assert wait_until(lambda: _settled(worker, spout), 10)
            clock.advance(TIMEOUT / 2)
        assert wait_until(lambda: _settled(worker, spout), 10)

        assert set(ACKED) == set(range(N)) and set(ACKED.values()) == {1}, "a number acked twice"
        assert len(DROPPED) > N // 100, "too few drops to mean anything"
        assert len(FAILED) == len(DROPPED), "each drop timed out at the spout once"
        assert len(spout.pending) == 0 and spout.in_flight == 0
        open_samples = sum(len(s.open_samples) for ex in bolts for s in ex.sampled.values())
        assert open_samples == 0, f"{open_samples} samples open after {len(DROPPED)} drops, every tree over"
    finally:
        worker.stop(clean=False)
