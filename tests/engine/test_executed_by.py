"""`Worker.executed_by`: what a spout's automatic max pending reads of the stateful bolts after
it (squall/engine/pending_tuner.py, `CompletionRateLimit.update`'s ``progress``): the data
inputs their tasks executed from the components named, this worker's tasks' as they count
them, the others' as their workers tell them (squall/engine/stateful_progress.py)."""

from __future__ import annotations

import pytest

from squall import BaseStatefulBolt, Bolt, Config, Fields, TopologyBuilder
from squall._config import topology_conf
from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.stateful_progress import (
    StatefulInput,
    StatefulProgress,
    committed_inputs,
    progress_message,
    progress_of,
)
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import FeederSpout

from ..conftest import wait_until


class Keeps(BaseStatefulBolt):
    """A stateful bolt that acks what it gets (at its commits)."""

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.collector.ack(tup)


class Passes(Bolt):
    def execute(self, tup):
        self.collector.emit(list(tup.values), anchors=[tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))


def _plan(stats: bool = True):
    """feed and other -> sink (a stateful bolt, 2 tasks)."""
    feed, other = FeederSpout(Fields(["x"])), FeederSpout(Fields(["x"]))
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_spout("other", other)
    b.set_bolt("sink", Keeps(), 2).shuffle_grouping("feed").shuffle_grouping("other")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(30)
    conf[Config.TOPOLOGY_STATS_ENABLED] = stats
    return make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf)), feed, other


def _worker(remote_sink_tasks: int, stats: bool = True):
    """This worker runs all but the last ``remote_sink_tasks`` of sink's tasks."""
    plan, feed, other = _plan(stats)
    sink = plan.component_tasks["sink"]
    remote = set(sink[len(sink) - remote_sink_tasks:]) if remote_sink_tasks else set()
    transport = InMemoryTransport(InMemoryNetwork(), "here")
    transport.set_peers({t: "gone" for t in remote})
    local = [e for e in plan.executors if not set(e.tasks) & remote]
    clock = SimulatedClock()
    worker = Worker(plan, 1, local, component_blobs(plan), transport, clock, TopologyActivation(active=True),
                    Backpressure(1000), lambda rec: None, lambda w, rec: None, 7)
    return worker, feed, other, clock


FROM_FEED = [StatefulInput("sink", "feed")]


@pytest.mark.parametrize("stats", [True, False])
def test_a_stateful_bolt_counts_each_data_input_by_its_source(stats):
    """Every input, exactly (not the engine's 1-in-20 sample), with the statistics on or off
    (off, the engine counts nothing, and the limit knew nothing); checkpoints never."""
    worker, feed, other, _clock = _worker(remote_sink_tasks=0, stats=stats)
    assert worker.executed_by(FROM_FEED) == 0  # before the tasks' prepare: none yet
    worker.start()
    try:
        for i in range(40):
            feed.feed([i], i)
        for i in range(7):
            other.feed([i], i)
        assert wait_until(lambda: worker.executed_by(FROM_FEED) == 40, 10), worker.executed_by(FROM_FEED)
        assert wait_until(lambda: worker.executed_by([StatefulInput("sink", "other")]) == 7, 10)
        assert worker.executed_by([*FROM_FEED, StatefulInput("sink", "other")]) == 47
        assert {src for _t, src, _n in worker.stateful_counts()} == {"feed", "other"}  # no checkpoints
        assert sum(n for _t, src, n in worker.stateful_counts() if src == "feed") == 40
    finally:
        worker.stop()
    assert worker.executed_by([]) is None and worker.executed_by([StatefulInput("nowhere", "feed")]) is None


def test_a_stateful_task_in_another_worker_counts_as_its_worker_last_told():
    """Not known until its worker says, then what it said, for `StatefulProgress.EXPIRE_SECS`."""
    worker, _feed, _other, clock = _worker(remote_sink_tasks=1)
    here, there = worker.plan.component_tasks["sink"]
    assert worker.hosts_stateful_tasks()
    assert worker.executed_by(FROM_FEED) is None
    # as a peer's `ProgressLink` sends it, through the message's own check
    worker.stateful_progress.heard(progress_of(progress_message([(there, "feed", 12), (there, "other", 5)])))
    assert worker.executed_by(FROM_FEED) == 12  # this worker's task: none yet
    clock.advance(StatefulProgress.EXPIRE_SECS + 0.1)
    assert worker.executed_by(FROM_FEED) is None  # its worker went silent (died, or stopped saying)
    assert here in worker.inboxes and there not in worker.inboxes


def test_a_peer_naming_tasks_not_in_the_topology_leaves_nothing_behind():
    """Figures of tasks the topology does not have (a peer of another plan, or one that lies)
    are not kept: each new task id a peer named stayed in memory for good (100,000 figures in
    one message: 100,000 kept)."""
    worker, _feed, _other, _clock = _worker(remote_sink_tasks=1)
    _here, there = worker.plan.component_tasks["sink"]
    progress = worker.stateful_progress
    progress.heard(progress_of(progress_message([(10**6 + i, "feed", 1) for i in range(100_000)]
                                                + [(there, "feed", 3)])))
    assert worker.executed_by(FROM_FEED) == 3
    assert set(progress._remote) == {there}, len(progress._remote)


def test_a_malformed_progress_message_is_refused():
    with pytest.raises(TypeError, match="not a stateful progress message"):
        progress_of({"executed": "x"})
    with pytest.raises(TypeError, match="figure"):
        progress_of({"executed": [[1, "feed", -1]]})


def test_a_spout_counts_the_inputs_that_carry_its_tuples_only():
    """``ids`` reaches the stateful ``sum`` through ``batches`` only; ``chatter``, straight."""
    b = TopologyBuilder()
    b.set_spout("chatter", FeederSpout(Fields(["x"])))
    b.set_spout("ids", FeederSpout(Fields(["x"])))
    b.set_bolt("batches", Passes()).shuffle_grouping("ids")
    b.set_bolt("sum", Keeps()).shuffle_grouping("chatter").shuffle_grouping("batches")
    conf = Config()
    conf.set_num_workers(1)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    assert committed_inputs(plan, "ids", ["sum"]) == (StatefulInput("sum", "batches"),)
    assert committed_inputs(plan, "chatter", ["sum"]) == (StatefulInput("sum", "chatter"),)
