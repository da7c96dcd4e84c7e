"""What crosses between workers, and what need not: a spout's trees are tracked by an acker of
its own worker when it has one, and a batch from another worker is delivered whole."""

from squall import Bolt, Config, Fields, TopologyBuilder
from squall._config import topology_conf
from squall._tuple import Tuple
from squall.engine.clock import SimulatedClock
from squall.engine.loop import SPOUT_BURST, Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import FeederSpout

from ..conftest import wait_until


class NeverAcks(Bolt):
    def execute(self, tup):
        pass


def _one_of_two(b, conf, remote_tasks, transport):
    """This worker of a 2-worker topology built by ``b``: every executor but those of the tasks
    ``remote_tasks(plan)`` picks, which ``transport`` routes to a peer ("gone")."""
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(30)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    remote = set(remote_tasks(plan))
    local = [e for e in plan.executors if not set(e.tasks) & remote]
    transport.set_peers({t: "gone" for t in remote})
    worker = Worker(plan, 1, local, component_blobs(plan), transport, SimulatedClock(), TopologyActivation(active=True),
                    Backpressure(1000), lambda rec: None, lambda w, rec: None, 7)
    spout = next(ex for ex in worker.executors if ex.component == "feed")
    return worker, spout, plan


def _worker(ackers=2):
    """feed -> sink, ``ackers`` ackers; this worker runs feed, sink and the first acker, the
    others are in a worker whose transport endpoint does not exist (what goes there is dropped
    and counted)."""
    feed = FeederSpout(Fields(["x"]))
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_ackers(ackers)
    transport = InMemoryTransport(InMemoryNetwork(), "here")
    worker, spout, plan = _one_of_two(b, conf, lambda plan: plan.component_tasks["__acker"][1:], transport)
    return worker, feed, spout, transport, plan


def test_a_spout_s_trees_are_tracked_by_the_acker_of_its_own_worker():
    worker, feed, spout, transport, plan = _worker(ackers=3)
    worker.start()
    try:
        for i in range(50):  # under the automatic max pending's floor
            feed.feed([i], f"m{i}")
        assert wait_until(lambda: spout.in_flight == 50)
        roots = [root for bucket in spout.pending._buckets for root in bucket]
        assert len(roots) == 50
        # the acker of a root is ``root % ackers`` on every worker: all are the local one (index 0)
        assert {root % 3 for root in roots} == {0}
        assert len(set(roots)) == 50 and all(0 < root < 2 ** 64 for root in roots)
        assert transport.statistics()["dropped"] == {}  # no init went to the other worker's ackers
    finally:
        worker.stop()


def test_a_batch_from_another_worker_is_delivered_whole_and_foreign_tasks_are_dropped():
    worker, feed, spout, transport, plan = _worker()
    sink = plan.component_tasks["sink"][0]
    remote_acker = plan.component_tasks["__acker"][1]
    src = spout.collectors[plan.component_tasks["feed"][0]].routers["default"].src
    items = [sink, Tuple([1], src), remote_acker, (1, 2, 3, 4), sink, Tuple([2], src)]
    assert worker.receive_batch(items) == 2
    assert [t.values for t in worker.inboxes[sink]] == [[1], [2]]


class Relay(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))

    def execute(self, tup):
        self.collector.emit([tup[0]])
        self.collector.ack(tup)


class HeldTransport(InMemoryTransport):
    """An in-memory transport that queues what its senders are given until `flush`, as the
    process host's does, and logs each flush with how many items it sent."""

    def __init__(self, log):
        super().__init__(InMemoryNetwork(), "here")
        self.log = log
        self.held = []

    def sender(self, task_id):
        return lambda item: self.held.append((task_id, item))

    def flush(self):
        if self.held:
            self.log.append(("flush", len(self.held)))
            self.held.clear()


def test_what_bolts_emit_for_another_worker_is_sent_before_the_spouts_next_burst():
    """A round sends the bolts' items for other workers before its spouts emit again: the peer
    gets them a burst sooner (and their Tuples are freed before the burst makes more)."""
    feed = FeederSpout(Fields(["x"]))
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("relay", Relay()).shuffle_grouping("feed")
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("relay")
    conf = Config()
    conf.set_num_ackers(1)
    conf.set_max_spout_pending(1000)
    log = []
    worker, spout, _ = _one_of_two(b, conf, lambda plan: plan.component_tasks["sink"], HeldTransport(log))
    produce = spout.produce

    def logged_produce(budget):
        emitted = produce(budget)
        if emitted:
            log.append(("burst", emitted))
        return emitted
    spout.produce = logged_produce
    n = SPOUT_BURST + 6  # two bursts: the second comes in the round that relays the first
    for i in range(n):
        feed.feed([i], f"m{i}")
    worker.start()
    try:
        assert wait_until(lambda: sum(k for kind, k in log if kind == "flush") == n)
    finally:
        worker.stop()
    assert log == [("burst", SPOUT_BURST), ("flush", SPOUT_BURST), ("burst", 6), ("flush", 6)], log
