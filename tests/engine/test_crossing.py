"""What crosses between workers, and what need not: a spout's trees are tracked by an acker of
its own worker when it has one, and a batch from another worker is delivered whole."""

from squall import Bolt, Config, Fields, TopologyBuilder
from squall._config import topology_conf
from squall._tuple import Tuple
from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure, TopologyState
from squall.engine.plan import make_plan
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import FeederSpout

from ..conftest import wait_until


class NeverAcks(Bolt):
    def execute(self, tup):
        pass


def _worker(ackers=2):
    """feed -> sink, ``ackers`` ackers; this worker runs feed, sink and the first acker, the
    others are in a worker whose transport endpoint does not exist (what goes there is dropped
    and counted)."""
    feed = FeederSpout(Fields(["x"]))
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_num_ackers(ackers)
    conf.set_message_timeout_secs(30)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    remote = set(plan.component_tasks["__acker"][1:])
    local = [e for e in plan.executors if not set(e.tasks) & remote]
    transport = InMemoryTransport(InMemoryNetwork(), "here")
    transport.set_peers({t: "gone" for t in remote})
    worker = Worker(plan, 1, local, component_blobs(plan), transport, SimulatedClock(), TopologyState(active=True),
                    Backpressure(1000), lambda rec: None, lambda w, rec: None, 7)
    spout = next(ex for ex in worker.executors if ex.component == "feed")
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
