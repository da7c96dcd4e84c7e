"""A spout told that another worker's tasks were lost fails, at once, the pending tuples that may
have been in it; on a simulated clock, so that no message timeout can be what fails them."""

from squall import Bolt, Config, Fields, LocalCluster, TopologyBuilder
from squall._config import topology_conf
from squall.engine.clock import SimulatedClock
from squall.engine.dropped_items import DroppedItemsLink, dropped_message
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.remote_backpressure import BackpressureLink
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import AckFailMapTracker, FeederSpout

from ..conftest import wait_until


class NeverAcks(Bolt):
    def execute(self, tup):
        pass


def void(tasks):
    """This worker's transport, whose peer hosting ``tasks`` never answers: it has no endpoint,
    so what is sent to it is dropped."""
    transport = InMemoryTransport(InMemoryNetwork(), "here")
    transport.set_peers({t: "gone" for t in tasks})
    return transport


def _worker():
    """feed -> sink (2 tasks), other -> side; 2 ackers. This worker runs the spouts, the first
    acker and the first sink task; the second acker, the second sink task and side are in a
    worker reached through `void`."""
    feed, other = FeederSpout(Fields(["x"])), FeederSpout(Fields(["y"]))
    tracker = AckFailMapTracker()
    feed.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_spout("other", other)
    b.set_bolt("sink", NeverAcks(), 2).shuffle_grouping("feed")
    b.set_bolt("side", NeverAcks()).shuffle_grouping("other")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_num_ackers(2)
    conf.set_message_timeout_secs(30)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    tasks = plan.component_tasks
    remote = {tasks["__acker"][1], tasks["sink"][1], *tasks["side"]}
    local = [e for e in plan.executors if not set(e.tasks) & remote]
    clock = SimulatedClock()
    worker = Worker(plan, 1, local, component_blobs(plan), void(remote), clock, TopologyActivation(active=True),
                    Backpressure(1000), lambda rec: None, lambda w, rec: None, 7)
    spout = next(ex for ex in worker.executors if ex.component == "feed")
    return worker, clock, feed, tracker, spout, tasks


def test_a_lost_downstream_task_fails_the_pending_tuples_emitted_before_and_no_others():
    worker, clock, feed, tracker, spout, tasks = _worker()
    worker.start()
    try:
        for i in range(6):
            feed.feed([i], f"m{i}")
        assert wait_until(lambda: spout.in_flight == 6)
        clock.advance(1)
        # side is downstream of the other spout only: feed's tuples cannot be in it
        assert worker.tasks_lost(tasks["side"]) == 1
        clock.advance(1)
        assert not wait_until(lambda: any(tracker.is_failed(f"m{i}") for i in range(6)), 0.2)
        assert spout.in_flight == 6
        # the second sink task is: every pending tuple may have touched it (or its acker) and fails,
        # whichever task it was routed to, long before the 30 s timeout
        assert worker.tasks_lost([tasks["sink"][1]]) == 1
        assert wait_until(lambda: all(tracker.is_failed(f"m{i}") for i in range(6)))
        assert spout.in_flight == 0
        assert spout.stats[tasks["feed"][0]].failed == 6
        # a tuple emitted after the notice is not failed by it
        clock.advance(1)
        feed.feed([6], "m6")
        assert wait_until(lambda: spout.in_flight == 1)
        assert not wait_until(lambda: tracker.is_failed("m6"), 0.2)
    finally:
        worker.stop(clean=False)


def test_a_lost_acker_task_fails_the_pending_tuples():
    worker, clock, feed, tracker, spout, tasks = _worker()
    worker.start()
    try:
        feed.feed([1], "a")
        assert wait_until(lambda: spout.in_flight == 1)
        clock.advance(1)
        worker.tasks_lost([tasks["__acker"][1]])
        assert wait_until(lambda: tracker.is_failed("a"))
    finally:
        worker.stop(clean=False)


class CrashesOnBoom(Bolt):
    """Holds its tuples (never acks); raises on ``"boom"``, which crashes its worker."""

    def execute(self, tup):
        if tup[0] == "boom":
            raise RuntimeError("boom")


def test_local_cluster_fails_the_other_workers_pending_tuples_when_it_restarts_a_crashed_one():
    """feed (worker 2) -> crash (worker 1): a crash of worker 1 loses what it held; when
    LocalCluster restarts it, feed fails those tuples at once. The simulated clock does not move,
    so no message timeout can be what fails them."""
    feed = FeederSpout(Fields(["x"]))
    tracker = AckFailMapTracker()
    feed.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("crash", CrashesOnBoom()).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    conf["topology.bolt.fail.fast"] = True  # the exception crashes the worker (Storm's fail-fast)
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("t", conf, b.create_topology())
        workers = {c["task_stats"][t]["worker"] for c in [cluster.get_topology_info("t")["components"]["feed"],
                                                           cluster.get_topology_info("t")["components"]["crash"]]
                   for t in c["task_stats"]}
        assert len(workers) == 2, "feed and crash must be in different workers"
        feed.feed(["a"], "a")
        assert wait_until(lambda: cluster.get_topology_info("t")["components"]["crash"]["executed"] == 1)
        feed.feed(["boom"], "boom")
        assert wait_until(lambda: tracker.is_failed("a") and tracker.is_failed("boom"))


class Relay(Bolt):
    """Passes each tuple on, anchored, and acks it."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))

    def execute(self, tup):
        self.collector.emit(list(tup.get_values()), anchors=tup)
        self.collector.ack(tup)


def _three_workers():
    """feed -> relay -> sink (one task each, one acker) over an in-memory network, wired as the
    hosts wire their workers (`BackpressureLink`, `DroppedItemsLink`). Worker "c" runs feed and
    the acker, "b" runs relay; sink's worker has died and restarted elsewhere: "c" already knows
    its new address "v2", "b" still sends to the old one, "v1", where nothing listens."""
    feed = FeederSpout(Fields(["x"]))
    tracker = AckFailMapTracker()
    feed.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("relay", Relay()).shuffle_grouping("feed")
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("relay")
    conf = Config()
    conf.set_num_workers(3)
    conf.set_num_ackers(1)
    conf.set_message_timeout_secs(30)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    tasks = plan.component_tasks
    net, clock = InMemoryNetwork(), SimulatedClock()
    sink_v2 = InMemoryTransport(net, "v2")  # the restarted sink worker's endpoint: reachable, holds nothing
    where = {"c": {"feed", "__acker"}, "b": {"relay"}}
    sink_at = {"c": "v2", "b": "v1"}
    workers, links = {}, []
    for name, comps in where.items():
        transport = InMemoryTransport(net, name)
        peers = {t: n for n, cs in where.items() if n != name for c in cs for t in tasks[c]}
        transport.set_peers({**peers, **{t: sink_at[name] for t in tasks["sink"]}})
        worker = Worker(plan, len(workers), [e for e in plan.executors if e.component in comps],
                        component_blobs(plan), transport, clock, TopologyActivation(active=True), Backpressure(1000),
                        lambda rec: None, lambda w, rec: None, 7)
        transport.set_receiver(worker.receive)
        dropped = DroppedItemsLink(worker.tasks_lost, transport)
        links.append(BackpressureLink(worker.backpressure, transport, others=dropped.heard))
        workers[name] = (worker, transport, dropped)
    spout = next(ex for ex in workers["c"][0].executors if ex.component == "feed")
    return workers, links, clock, feed, tracker, spout, tasks, sink_v2


def test_items_a_peer_drops_for_a_moved_worker_fail_the_spout_of_another_worker_at_once():
    """The race of W5 on Spark: the spout's worker "c" learned the move (and failed what it had
    emitted until then) before "b", through whose bolt its next tuple went to the old address
    and was lost. When "b" learns the move it tells its peers, and "c" fails that tuple at once,
    not after the message timeout (the simulated clock never reaches it)."""
    workers, links, clock, feed, tracker, spout, tasks, _ = _three_workers()
    for worker, _, _ in workers.values():
        worker.start()
    try:
        clock.advance(1)
        workers["c"][2].moved(tasks["sink"])  # "c" learns first: nothing pending yet
        clock.advance(1)
        feed.feed([1], "late")
        # relay sent it on to sink's old address, where it was lost
        assert wait_until(lambda: workers["b"][1].statistics()["dropped"].get("no_endpoint") == 1)
        assert not wait_until(lambda: tracker.is_failed("late"), 0.2)
        clock.advance(1)
        workers["b"][2].moved(tasks["sink"])  # "b" learns it later
        assert wait_until(lambda: tracker.is_failed("late"))
        assert spout.in_flight == 0
    finally:
        for link in links:
            link.stop()
        for worker, _, _ in workers.values():
            worker.stop(clean=False)


def test_a_worker_told_that_items_for_its_own_tasks_were_dropped_fails_its_spouts_tuples():
    """The restarted worker's own spouts' tuples may go out through a peer and back to its own
    tasks at their old address: a peer's notice of items dropped for them fails its tuples too
    (a death notice of its own slot's earlier launch does not)."""
    worker, clock, feed, tracker, spout, tasks = _worker()
    worker.start()
    try:
        feed.feed([1], "a")
        assert wait_until(lambda: spout.in_flight == 1)
        clock.advance(1)
        own = [tasks["sink"][0]]
        assert worker.tasks_lost(own) == 0
        assert not wait_until(lambda: tracker.is_failed("a"), 0.2)
        DroppedItemsLink(worker.tasks_lost, void([])).heard("elsewhere:1", dropped_message(own))
        assert wait_until(lambda: tracker.is_failed("a"))
    finally:
        worker.stop(clean=False)
