"""LocalCluster's in-process workers each keep their own activity and backpressure, as worker
processes do, so backpressure crosses workers in memory the way it crosses processes: the slow
bolt's worker goes over its bound, and its "over" reaches the spout's worker through the
transport, which throttles its spout."""

from squall import Config, LocalCluster, TopologyBuilder

from ..acceptance.components import FloodSpout, SlowBolt
from ..conftest import wait_until

BUFFER = 100


def _workers(cluster, name):
    """The engine `Worker` objects of topology ``name`` (LocalCluster's internals)."""
    return [agent.worker for agent in cluster._agents(cluster._storm_id(name))]


def _hosting(workers, component):
    return next(w for w in workers if any(e.component == component for e in w.assignment))


def _listen(bp):
    """Record what ``bp``'s worker is told by the others: ``[(sender, over)]``."""
    heard = []
    set_remote = bp.set_remote
    bp.set_remote = lambda sender, over: (heard.append((sender, over)), set_remote(sender, over))
    return heard


def test_the_slow_bolts_worker_throttles_the_spout_in_another_worker_through_the_transport():
    builder = TopologyBuilder()
    builder.set_spout("flood", FloodSpout())
    builder.set_bolt("slow", SlowBolt(0.001)).shuffle_grouping("flood")
    conf = Config()
    conf.set_num_workers(2)
    conf["topology.executor.receive.buffer.size"] = BUFFER
    with LocalCluster() as cluster:
        cluster.submit_topology("flood", conf, builder.create_topology(), initial_status="INACTIVE")
        workers = _workers(cluster, "flood")
        spout_w, bolt_w = _hosting(workers, "flood"), _hosting(workers, "slow")
        assert spout_w is not bolt_w
        assert spout_w.backpressure is not bolt_w.backpressure and spout_w.state is not bolt_w.state

        heard, heard_by_bolt = _listen(spout_w.backpressure), _listen(bolt_w.backpressure)
        cluster.activate("flood")
        assert all(w.state.active for w in workers)
        bp = spout_w.backpressure
        # throttled while its own inboxes are not over: by the bolt's worker's backpressure
        assert wait_until(lambda: bp.throttled and not bp.over, 10, 0.001)
        assert (True in (over for _, over in heard)) and len({sender for sender, _ in heard}) == 1
        assert True not in (over for _, over in heard_by_bolt)  # the spout's worker is never over
        cluster.deactivate("flood")
        assert not any(w.state.active for w in workers)
