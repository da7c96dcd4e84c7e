"""A spout told that another worker's tasks were lost fails, at once, the pending tuples that may
have been in it; on a simulated clock, so that no message timeout can be what fails them."""

import threading
from collections import Counter

from squall import Bolt, Config, Fields, LocalCluster, Spout, TopologyBuilder
from squall._config import topology_conf
from squall._failure import TIMEOUT, WORKER_DIED, WORKER_LOST, FailureCause
from squall.engine.clock import SimulatedClock
from squall.engine.dropped_items import DroppedItemsLink, dropped_message
from squall.engine.executing import ExecutingInput
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.remote_backpressure import BackpressureLink
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import AckFailMapTracker, FeederSpout
from squall.testing._registry import SharedLog

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


def test_a_notice_that_comes_after_the_dead_workers_next_launch_took_tuples_fails_only_those_sent_before():
    """The transport says what was sent to the dead worker's tasks for the last 2 s reached its
    next launch (`Transport.loss_age`): the tuples emitted since, answered there, do not fail."""
    worker, clock, feed, tracker, spout, tasks = _worker()
    worker.start()
    try:
        for i in range(3):
            feed.feed([i], f"old{i}")
        assert wait_until(lambda: spout.in_flight == 3)
        clock.advance(3)  # the worker dies, its next launch starts and takes tuples
        for i in range(4):
            feed.feed([i], f"new{i}")
        assert wait_until(lambda: spout.in_flight == 7)
        clock.advance(1)
        assert worker.tasks_lost([tasks["sink"][1]], ago=2.0) == 1
        assert wait_until(lambda: all(tracker.is_failed(f"old{i}") for i in range(3)))
        assert not wait_until(lambda: any(tracker.is_failed(f"new{i}") for i in range(4)), 0.2)
        assert spout.in_flight == 4
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


class NotesCauses(FeederSpout):
    """A feeder spout noting ``(msg_id, cause)`` of each failure in ``log``."""

    def __init__(self, fields, log: SharedLog) -> None:
        super().__init__(fields)
        self.log = log

    def fail_with(self, msg_id, cause):
        self.log.append((msg_id, cause))


def test_the_tuple_a_dead_worker_was_executing_fails_as_worker_died_and_the_others_as_lost():
    """The host read, on the dead worker's board, that the second sink task was executing m2's
    tree: m2 fails as ``worker-died`` (charged to its record), naming the task and how the
    worker ended; the other tuples pending fail as a lost worker. A line naming a task that is
    not the dead worker's, or a root not pending here, changes nothing."""
    log = SharedLog()
    feed = NotesCauses(Fields(["x"]), log)
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("sink", NeverAcks(), 2).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(30)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    tasks = plan.component_tasks
    remote = {tasks["sink"][1]}
    local = [e for e in plan.executors if not set(e.tasks) & remote]
    worker = Worker(plan, 1, local, component_blobs(plan), void(remote), SimulatedClock(),
                    TopologyActivation(active=True), Backpressure(1000), lambda rec: None, lambda w, rec: None, 7)
    spout = next(ex for ex in worker.executors if ex.component == "feed")
    worker.start()
    try:
        for i in range(4):
            feed.feed([i], f"m{i}")
        assert wait_until(lambda: spout.in_flight == 4)
        root = {info[0]: r for bucket in spout.pending._buckets for r, info in bucket.items()}
        executing = [ExecutingInput(tasks["sink"][1], root["m2"]),
                     ExecutingInput(tasks["sink"][0], root["m1"]),   # a task of this worker: not the dead one's
                     ExecutingInput(tasks["sink"][1], 12345)]        # a root not pending here
        assert worker.tasks_lost(remote, executing=executing, how="killed by SIGSEGV") == 1
        assert wait_until(lambda: len(log.items()) == 4)
        causes = dict(log.items())
        assert causes.pop("m2") == FailureCause(WORKER_DIED, "sink", tasks["sink"][1], "", "killed by SIGSEGV")
        assert causes == {f"m{i}": FailureCause(WORKER_LOST) for i in (0, 1, 3)}
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


class ReplaysAtOnce(Spout):
    """Emits the ids 0 .. n-1 once each (the id its message id), and a failed id again at once,
    before any new one, as a replaying spout does; logs ``("emit", id)`` once an emit returned
    (the in-memory transport has delivered or held it by then), ``("ack", id)`` and
    ``("fail", id, kind)`` (`squall.FailureCause.kind`), all on the spout's one thread."""

    def __init__(self, n: int, log: SharedLog) -> None:
        self.n, self.log = n, log

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.todo = list(range(self.n))

    def next_tuple(self):
        if self.todo:
            i = self.todo.pop(0)
            self.collector.emit([i], msg_id=i)
            self.log.append(("emit", i))

    def ack(self, msg_id):
        self.log.append(("ack", msg_id))

    def fail_with(self, msg_id, cause):
        self.log.append(("fail", msg_id, cause.kind))
        self.todo.insert(0, msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["i"]))


class CrashesTwiceAt(Bolt):
    """Logs and acks each id; the first two times it sees ``boom`` it crashes its worker instead."""

    def __init__(self, boom: int, seen: SharedLog, booms: SharedLog) -> None:
        self.boom, self.seen, self.booms = boom, seen, booms

    def execute(self, tup):
        if tup[0] == self.boom and len(self.booms.items()) < 2:
            self.booms.append(tup[0])
            raise RuntimeError("boom")
        self.seen.append(tup[0])
        self.collector.ack(tup)


def _each_failed_id_emitted_after(events: list) -> bool:
    """Whether every id that failed in ``events`` was emitted again after its last failure."""
    last_fail: dict[int, int] = {}
    last_emit: dict[int, int] = {}
    for at, e in enumerate(events):
        if e[0] == "fail":
            last_fail[e[1]] = at
        elif e[0] == "emit":
            last_emit[e[1]] = at
    return all(last_emit.get(i, -1) > at for i, at in last_fail.items())


def _replays_after_the_second_death_sent(log: SharedLog) -> bool:
    """Whether id 100 failed twice (each death of the crashing worker fails it: as
    ``worker-lost`` with the notice, or first as the exception that crashed the worker, when the
    acker's answer comes before the notice: the spout keeps the first), the spout heard the
    master's notice of both deaths, and every id that failed was emitted again after its last
    failure (the spout replays at once; the simulated clock does not move, so the worker is not
    started again meanwhile)."""
    events = log.items()
    if sum(1 for e in events if e[0] == "fail" and e[1] == 100) < 2:
        return False
    # the master's notice of each death fails the pending tuples as worker-lost, in one run:
    # two runs say the second death was taken (and its restart scheduled on this clock)
    notices = sum(1 for at, e in enumerate(events) if e[::2] == ("fail", WORKER_LOST)
                  and (at == 0 or events[at - 1][::2] != ("fail", WORKER_LOST)))
    if notices < 2:
        return False
    return _each_failed_id_emitted_after(events)


def test_local_cluster_takes_what_is_sent_to_a_crashed_worker_to_its_next_launch_with_no_message_timeout():
    """feed (worker 2) -> crash (worker 1), which crashes mid-stream, and again on the replay of
    the id that crashed it. At each notice of a death, feed fails what was pending and replays
    it at once. After the second crash, a quick one, the master starts the worker again only
    after 1 s (simulated: the test moves the clock once the replays are sent). The replays must
    reach the next launch. They were dropped when sent while no endpoint was at the worker's
    address (5 runs of 5 before this fix: 3 lost the replay of 100 after the first crash, the
    others lost every replay after the second), or put in the dead worker's inboxes, and were
    replayed again only at the message timeout (30 s; on this clock, never).
    Now the crashed worker's endpoint leaves the network at the crash, and what is sent to its
    address waits for its next launch, as the process host's TCP wire keeps it."""
    n = 200
    log, seen, booms = SharedLog(), SharedLog(), SharedLog()
    b = TopologyBuilder()
    b.set_spout("feed", ReplaysAtOnce(n, log))
    b.set_bolt("crash", CrashesTwiceAt(100, seen, booms)).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_max_spout_pending(50)
    conf["topology.bolt.fail.fast"] = True
    with LocalCluster(clock=SimulatedClock()) as cluster:
        # inactive while the placement is read: an active crash worker could die (and its slot
        # drop its figures) before the test reads them
        cluster.submit_topology("t", conf, b.create_topology(), initial_status="INACTIVE")
        components = cluster.get_topology_info("t")["components"]
        [feed_at] = {s["worker"] for s in components["feed"]["task_stats"].values()}
        [crash_at] = {s["worker"] for s in components["crash"]["task_stats"].values()}
        assert feed_at != crash_at, "feed and crash must be in different workers"
        cluster.activate("t")

        def acked():
            return [e[1] for e in log.items() if e[0] == "ack"]
        assert wait_until(lambda: _replays_after_the_second_death_sent(log), 15), (
            f"id 100 crashed its worker {len(booms.items())} times; {len(acked())} of {n} ids acked")
        cluster.advance_cluster_time(2)  # past the 1 s the master waits to start it again; far from 30 s
        assert wait_until(lambda: len(acked()) == n, 15), (
            f"{len(acked())} of {n} ids acked; {sum(e[0] == 'fail' for e in log.items())} failures")
        assert sorted(acked()) == list(range(n))  # each id acked once, however often it failed
        assert not [e for e in log.items() if e[0] == "fail" and e[2] == TIMEOUT]  # no message timeout
        assert set(seen.items()) == set(range(n)) and booms.items() == [100, 100]
        [restarted] = [w for w in cluster.get_topology_info("t")["workers"] if w["port"] == crash_at]
        assert restarted["restarts"] == 2


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


class CountsAndCrashesOnce(Bolt):
    """Logs and acks each id; the first time it sees ``boom`` (if given) it crashes its worker
    instead, holding what its inbox had (lost with it)."""

    def __init__(self, seen: SharedLog, boom: int | None = None, booms: SharedLog | None = None) -> None:
        self.seen, self.boom, self.booms = seen, boom, booms

    def execute(self, tup):
        if self.booms is not None and tup[0] == self.boom and not self.booms.items():
            self.booms.append(tup[0])
            raise RuntimeError("boom")
        self.seen.append(tup[0])
        self.collector.ack(tup)


def test_a_worker_that_comes_back_at_a_new_address_gets_the_replays_and_live_branches_see_each_lost_tuple_twice(
        monkeypatch):
    """As on Spark, where a worker's next launch is a Spark task on another port: feed (with
    ``live``, worker A) -> both ``live`` and ``killed`` (worker B), which crashes mid-stream. At
    the master's notice of the death, feed fails what was pending and replays it at once, while
    B's next launch has no address yet (held back here until those replays are sent). The
    replays are held for it and must reach it at its new address; before, the move dropped them
    and feed failed every pending tuple again, so ``live`` took each lost id three times (Spark:
    3,800 emits for 3,000 ids). Now each lost id reaches ``live`` at most twice (the original
    and one replay), ``killed`` gets every id, and every id is acked once, with no message
    timeout (the simulated clock never reaches it)."""
    from squall.cluster import inprocess
    n, boom = 300, 150
    log, live, killed, booms = SharedLog(), SharedLog(), SharedLog(), SharedLog()
    launches: dict[str, int] = {}
    gate = threading.Event()

    def new_address_each_launch(network, slot, check=None):
        launches[slot] = launches.get(slot, 0) + 1
        if launches[slot] > 1:  # a next launch: its address waits until the replays were sent
            assert gate.wait(30), "the test never let the restarted worker report its address"
        return InMemoryTransport(network, f"{slot}#{launches[slot]}", slot=slot, check=check)
    monkeypatch.setattr(inprocess, "InMemoryTransport", new_address_each_launch)
    b = TopologyBuilder()
    b.set_spout("feed", ReplaysAtOnce(n, log))
    b.set_bolt("live", CountsAndCrashesOnce(live)).shuffle_grouping("feed")
    b.set_bolt("killed", CountsAndCrashesOnce(killed, boom, booms)).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_num_ackers(1)
    conf.set_max_spout_pending(50)
    conf["topology.bolt.fail.fast"] = True
    try:
        with LocalCluster(clock=SimulatedClock()) as cluster:
            cluster.submit_topology("t", conf, b.create_topology(), initial_status="INACTIVE")  # as above
            components = cluster.get_topology_info("t")["components"]
            [feed_at], [live_at], [killed_at] = ({s["worker"] for s in components[c]["task_stats"].values()}
                                                 for c in ("feed", "live", "killed"))
            assert killed_at not in (feed_at, live_at), "killed must be alone in its worker"
            cluster.activate("t")
            assert wait_until(lambda: _replays_after_the_death_sent(log), 15), f"{len(log.items())} events"
            gate.set()

            def acked():
                return [e[1] for e in log.items() if e[0] == "ack"]
            assert wait_until(lambda: len(acked()) == n, 15), (
                f"{len(acked())} of {n} ids acked; {sum(e[0] == 'fail' for e in log.items())} failures")
            [restarted] = [w for w in cluster.get_topology_info("t")["workers"] if w["port"] == killed_at]
            assert restarted["restarts"] == 1
    finally:
        gate.set()
    events = log.items()
    assert sorted(acked()) == list(range(n))  # each id acked once: nothing pending at the end
    lost = {e[1] for e in events if e[0] == "fail"}
    assert boom in lost and len(lost) > 1
    assert {e[2] for e in events if e[0] == "fail"} <= {WORKER_LOST, WORKER_DIED, "exception"}, events
    copies = Counter(live.items())
    assert set(copies) == set(range(n))
    assert max(copies.values()) <= 2, f"ids live took three times: {sorted(i for i, k in copies.items() if k > 2)}"
    emits = Counter(e[1] for e in events if e[0] == "emit")
    assert max(emits.values()) == 2, f"ids emitted three times or more: {sorted(i for i, k in emits.items() if k > 2)}"
    assert set(killed.items()) == set(range(n)) and booms.items() == [boom]


def _replays_after_the_death_sent(log: SharedLog) -> bool:
    """Whether feed failed ``boom`` (as the crash's exception or the notice's lost worker), heard
    the master's notice of the death (a run of ``worker-lost`` failures), and emitted again
    every id that failed, after its failure."""
    events = log.items()
    if not any(e[0] == "fail" and e[2] == WORKER_LOST for e in events):
        return False
    return _each_failed_id_emitted_after(events)
