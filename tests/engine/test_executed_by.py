"""`Worker.executed_by`: what a spout's automatic max pending reads of the stateful bolts after
it (squall/engine/pending_tuner.py, `CompletionRateLimit.update`'s ``progress``): the inputs
their tasks executed, known only when every task runs in this worker."""

from __future__ import annotations

from squall import Bolt, Config, Fields, TopologyBuilder
from squall._config import topology_conf
from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import FeederSpout

from ..conftest import wait_until


class Acks(Bolt):
    def execute(self, tup):
        self.collector.ack(tup)


def _worker(remote_sink_tasks: int, stats: bool = True):
    """feed -> sink (2 tasks); this worker runs all but the last ``remote_sink_tasks`` of sink's."""
    feed = FeederSpout(Fields(["x"]))
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("sink", Acks(), 2).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(30)
    conf[Config.TOPOLOGY_STATS_ENABLED] = stats
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    sink = plan.component_tasks["sink"]
    remote = set(sink[len(sink) - remote_sink_tasks:]) if remote_sink_tasks else set()
    transport = InMemoryTransport(InMemoryNetwork(), "here")
    transport.set_peers({t: "gone" for t in remote})
    local = [e for e in plan.executors if not set(e.tasks) & remote]
    worker = Worker(plan, 1, local, component_blobs(plan), transport, SimulatedClock(), TopologyActivation(active=True),
                    Backpressure(1000), lambda rec: None, lambda w, rec: None, 7)
    return worker, feed


def test_the_inputs_the_tasks_of_a_component_executed_are_counted_when_all_run_in_this_worker():
    worker, feed = _worker(remote_sink_tasks=0)
    assert worker.executed_by(["sink"]) == 0
    worker.start()
    try:
        for i in range(40):
            feed.feed([i], i)
        assert wait_until(lambda: worker.executed_by(["sink"]) == 40, 10), worker.executed_by(["sink"])
    finally:
        worker.stop()
    assert worker.executed_by([]) is None and worker.executed_by(["nowhere"]) is None


def test_nothing_is_known_of_a_component_with_a_task_in_another_worker():
    worker, _feed = _worker(remote_sink_tasks=1)
    assert worker.executed_by(["sink"]) is None


def test_nothing_is_known_with_the_statistics_off():
    """The engine counts its inputs in its statistics: off, it counts none, and a stateful bolt
    taking tuples would have looked idle to the spouts' max pending, which then doubled."""
    worker, _feed = _worker(remote_sink_tasks=0, stats=False)
    assert worker.executed_by(["sink"]) is None
