"""Shuffle grouping is load-aware (Storm 2's LoadAwareShuffleGrouping): tuples stay with the
target tasks in the emitting worker while those keep up, spill over to every target when they do
not, and ``topology.disable.loadaware.messaging`` restores the plain round-robin."""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest

from squall import Bolt, Fields, InvalidTopologyException, LocalCluster, Spout, TopologyBuilder
from squall._config import topology_conf
from squall._grouping import LoadAwareShuffleGrouping, ShuffleGrouping
from squall.engine.load_mapping import LoadLink
from squall.engine.loop import BUSY_WINDOW_SECS
from squall.testing import FeederSpout

from ..acceptance.components import Counter as SharedCount
from ..acceptance.components import Recorder
from ..conftest import wait_until

EVERY = LoadAwareShuffleGrouping.CHECK_EVERY


class _Context:
    """What a grouping reads of its `TopologyContext`."""

    def __init__(self, worker_tasks, conf=None):
        self._worker_tasks, self._conf = worker_tasks, conf or {}

    def get_this_worker_tasks(self):
        return list(self._worker_tasks)

    def get_storm_conf(self):
        return self._conf


def _grouping(load, conf=None, targets=(1, 2, 3, 4), local=(1, 2), fill=None):
    g = LoadAwareShuffleGrouping(random.Random(3))
    g.use_load(lambda t: load[t], None if fill is None else fill.get)
    g.prepare(_Context([*local, 9], conf), None, list(targets))
    choose = g.chooser(9)
    return g, lambda n: Counter(t for _ in range(n) for t in choose([0]))


def test_with_the_remote_tasks_load_known_tuples_leave_only_a_worker_busier_than_the_others():
    load = {1: 0.95, 2: 0.95, 3: 0.9, 4: 1.0}  # every worker at full load: crossing helps nobody
    g, send = _grouping(load)
    assert set(send(4 * EVERY)) == {1, 2}
    load[3] = load[4] = 0.6  # the other worker has time to spare: spread
    send(EVERY)
    assert send(4 * EVERY) == {1: EVERY, 2: EVERY, 3: EVERY, 4: EVERY}
    load[1] = load[2] = 0.85  # still busier than the others (0.7): stays spread
    load[3] = load[4] = 0.7
    assert send(4 * EVERY) == {1: EVERY, 2: EVERY, 3: EVERY, 4: EVERY}
    load[1] = load[2] = 0.8  # no busier than the others now: back in the worker
    load[3] = load[4] = 0.85
    send(EVERY)
    assert set(send(4 * EVERY)) == {1, 2}
    load[3] = load[4] = None  # their workers stopped telling: the bounds alone decide
    load[1] = load[2] = 0.9
    send(EVERY)
    assert set(send(4 * EVERY)) == {1, 2, 3, 4}


def test_until_the_peers_tell_their_load_only_the_inboxes_fill_sends_tuples_away():
    # a loop at full speed reads 1.0 busy on every worker alike: with nothing known of the
    # others, Storm's own load (the inboxes' fill) decides, not how busy the loop is
    load = {1: 1.0, 2: 1.0, 3: None, 4: None}
    fill = {1: 0.0, 2: 0.1}
    _, send = _grouping(load, fill=fill)
    assert send(4 * EVERY) == {1: 2 * EVERY, 2: 2 * EVERY}
    load[3] = load[4] = 1.0  # the peers say they are as busy: still at home
    assert send(4 * EVERY) == {1: 2 * EVERY, 2: 2 * EVERY}
    load[3] = load[4] = 0.3  # they have time to spare: spread
    send(EVERY)
    assert send(4 * EVERY) == {1: EVERY, 2: EVERY, 3: EVERY, 4: EVERY}
    load[3] = load[4] = None  # they stopped telling, and the inboxes keep up: back at home
    send(EVERY)
    assert set(send(4 * EVERY)) == {1, 2}
    fill[1] = fill[2] = 0.9  # the inboxes fall behind (over the higher bound): spread
    send(EVERY)
    assert set(send(4 * EVERY)) == {1, 2, 3, 4}


def test_load_messages_are_checked_and_a_peer_s_figures_expire():
    from squall.engine.clock import SimulatedClock
    from squall.engine.load_mapping import LoadMapping, load_message, loads_of

    assert loads_of(load_message([(3, 0.25), (4, 1)])) == [(3, 0.25), (4, 1.0)]
    for bad in ({"load": [[3, 1.5]]}, {"load": [["3", 0.1]]}, {"load": "x"}, {"over": True}, [1]):
        with pytest.raises(TypeError):
            loads_of(bad)
    clock = SimulatedClock()
    mapping = LoadMapping(lambda t: 0.5 if t == 1 else None, clock)
    mapping.set_remote([(3, 0.25)])
    assert (mapping.get(1), mapping.get(3), mapping.get(4)) == (0.5, 0.25, None)
    clock.advance(LoadMapping.EXPIRE_SECS + 0.1)
    assert mapping.get(3) is None


def test_tuples_stay_in_the_worker_while_its_tasks_keep_up_and_spill_over_when_they_do_not():
    load = {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0}
    g, send = _grouping(load)
    assert send(4 * EVERY) == {1: 2 * EVERY, 2: 2 * EVERY}  # only the local tasks, evenly
    load[1] = load[2] = 0.9  # the local tasks fall behind: from the next look, every task
    send(EVERY)
    assert send(4 * EVERY) == {1: EVERY, 2: EVERY, 3: EVERY, 4: EVERY}
    load[1] = load[2] = 0.5  # between the bounds: stays spread (hysteresis)
    assert send(4 * EVERY) == {1: EVERY, 2: EVERY, 3: EVERY, 4: EVERY}
    load[1] = load[2] = 0.1  # below the lower bound: back in the worker
    send(EVERY)
    assert send(2 * EVERY) == {1: EVERY, 2: EVERY}
    load[1], load[2] = 1.0, 0.5  # the average is what counts (0.75 <= 0.8)
    assert set(send(2 * EVERY)) == {1, 2}
    assert g.local_scope


def test_the_bounds_are_read_from_the_configuration():
    load = {1: 0.5, 2: 0.5, 3: 0.0}
    _, send = _grouping(load, {"topology.localityaware.higher.bound": 0.4}, targets=(1, 2, 3))
    send(EVERY)  # the first look already sees 0.5 > 0.4
    assert set(send(3 * EVERY)) == {1, 2, 3}


@pytest.mark.parametrize("conf, targets, local, with_load", [
    ({"topology.disable.loadaware.messaging": True}, (1, 2, 3, 4), (1, 2), True),  # disabled
    ({}, (1, 2, 3, 4), (), True),            # no target in this worker
    ({}, (1, 2), (1, 2), True),              # every target in this worker (one worker)
    ({}, (1, 2, 3, 4), (1, 2), False),       # no load source: not in an engine
])
def test_otherwise_it_is_the_plain_round_robin_over_every_target(conf, targets, local, with_load):
    g = LoadAwareShuffleGrouping(random.Random(3))
    if with_load:
        g.use_load(lambda t: 0.0)
    g.prepare(_Context(local, conf), None, list(targets))
    choose = g.chooser(9)
    assert Counter(t for _ in range(10 * len(targets)) for t in choose([0])) == {t: 10 for t in targets}
    assert isinstance(g, ShuffleGrouping)


@pytest.mark.parametrize("conf, named", [
    ({"topology.localityaware.higher.bound": 1.5}, "topology.localityaware.higher.bound"),
    ({"topology.localityaware.lower.bound": "low"}, "topology.localityaware.lower.bound"),
    ({"topology.localityaware.lower.bound": 0.9}, "topology.localityaware.lower.bound"),  # above 0.8
    ({"topology.disable.loadaware.messaging": "yes"}, "topology.disable.loadaware.messaging"),
])
def test_the_keys_are_checked_at_submit(conf, named):
    with pytest.raises(InvalidTopologyException, match=named.replace(".", r"\.")):
        topology_conf({"topology.localityaware.higher.bound": 0.8}, conf)


class WhereFrom(Bolt):
    """Records, per tuple, whether it ran in the spout's worker; sleeps ``delay`` per tuple."""

    def __init__(self, recorder: Recorder, delay: float = 0.0) -> None:
        self.recorder, self.delay = recorder, delay

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.local = context.get_component_tasks("feed")[0] in context.get_this_worker_tasks()

    def execute(self, tup):
        if self.delay:
            time.sleep(self.delay)
        self.recorder.record("got", self.local)


def _run(n, conf, delay=0.0):
    """Feed ``n`` tuples to feed -> shuffle -> 2 WhereFrom tasks on 2 workers; how many ran in
    the spout's worker and how many in the other."""
    feed, recorder = FeederSpout(Fields(["x"])), Recorder()
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("sink", WhereFrom(recorder, delay), 2).shuffle_grouping("feed")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.workers": 2, "topology.acker.executors": 0, **conf},
                                b.create_topology())
        workers = cluster.get_topology_info("t")["workers"]
        assert len(workers) == 2
        for i in range(n):
            feed.feed([i])
        assert wait_until(lambda: recorder.count("got") == n, 30)
    got = Counter(local for _, local in recorder.events("got"))
    return got[True], got[False]


def test_on_two_workers_a_shuffle_keeps_the_tuples_in_the_spouts_worker():
    local, remote = _run(2000, {})
    assert (local, remote) == (2000, 0)


def test_a_slow_local_task_makes_tuples_spill_to_the_other_worker():
    # 1 ms a tuple: the bolt sharing the spout's loop takes all of its time, though its inbox
    # never fills (the loop drains it before the spout emits again)
    local, remote = _run(2500, {}, delay=0.001)
    assert local + remote == 2500 and remote >= 500  # about 850: half of what follows the first look


def test_disabled_it_spreads_evenly_over_both_workers():
    local, remote = _run(2000, {"topology.disable.loadaware.messaging": True})
    assert (local, remote) == (1000, 1000)


class Flood(Spout):
    """Emits 0, 1, 2, ... as fast as it may, without end (no acking)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.sent = 0

    def next_tuple(self):
        self.collector.emit([self.sent])
        self.sent += 1


class Tally(Bolt):
    """Counts the tuples it gets, and those that came from a spout task in another worker."""

    def __init__(self, got: SharedCount, crossed: SharedCount) -> None:
        self.got, self.crossed = got, crossed

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.here = set(context.get_this_worker_tasks())

    def execute(self, tup):
        self.got.incr()
        if tup.get_source_task() not in self.here:
            self.crossed.incr()


def test_two_workers_at_full_speed_keep_their_tuples_at_home_from_the_start():
    # each worker's loop is all work from its first round; before it had measured a window it
    # told its peer 0.0, and the peer, measured at 1.0, sent it 43k-135k tuples in the 2 s below
    n = 100_000
    got, crossed = SharedCount(), SharedCount()
    b = TopologyBuilder()
    b.set_spout("flood", Flood(), 2)
    b.set_bolt("tally", Tally(got, crossed), 2).shuffle_grouping("flood")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.workers": 2, "topology.acker.executors": 0},
                                b.create_topology())
        workers = cluster.get_topology_info("t")["workers"]
        assert len(workers) == 2
        # both spouts never stop, so neither worker ever has time to spare: none may cross, over
        # the first load figures and those that follow
        long_enough = time.monotonic() + 2 * (BUSY_WINDOW_SECS + LoadLink.PERIOD_SECS)
        assert wait_until(lambda: got.value >= n and time.monotonic() >= long_enough, 60)
        assert crossed.value == 0


class BurstOnce(Spout):
    """Emits 0 .. n-1 in one ``next_tuple`` call (no acking) once ``start`` is open, then nothing."""

    def __init__(self, n: int, start) -> None:
        self.n, self.start = n, start

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["x"]))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.done = False

    def next_tuple(self):
        if not self.done and self.start.is_open():
            self.done = True
            for i in range(self.n):
                self.collector.emit([i])


class Held(Bolt):
    """Holds every tuple until the test opens ``gate``, then counts it."""

    def __init__(self, gate, got: SharedCount) -> None:
        self.gate, self.got = gate, got

    def execute(self, tup):
        self.gate.wait(30)
        self.got.incr()


def test_an_overfull_inbox_is_told_to_the_peers_as_full_not_dropped_as_a_malformed_load():
    # an inbox may hold more than topology.executor.receive.buffer.size (backpressure stops
    # the spouts only between their calls): its fill was sent as 1.5, 8.0 ..., which every peer
    # dropped as malformed ("not a (task, load) pair", a warning each time): the busiest task's
    # load went unknown, so the peers' shuffles read it as no figure at all
    from ..acceptance.components import Gate
    n, buffer = 1000, 16
    start, gate, got = Gate(), Gate(), SharedCount()
    b = TopologyBuilder()
    b.set_spout("burst", BurstOnce(n, start))
    b.set_bolt("held", Held(gate, got), 2).shuffle_grouping("burst")
    conf = {"topology.workers": 2, "topology.acker.executors": 0, "topology.executor.receive.buffer.size": buffer}
    with LocalCluster() as cluster:
        try:
            cluster.submit_topology("t", conf, b.create_topology())
            workers = [agent.worker for agent in cluster._agents(cluster._storm_id("t"))]
            spout_w = next(w for w in workers if any(e.component == "burst" for e in w.assignment))
            other = next(w for w in workers if w is not spout_w)
            (task,) = [t for e in other.assignment if e.component == "held" for t in e.tasks]
            # the held task's loop has measured how busy it is: its worker tells its load from then on
            assert wait_until(lambda: other.loop_of_task[task].busy is not None, 10)
            start.open()
            assert wait_until(lambda: len(other.inboxes[task]) > buffer, 10), "the remote inbox did not overfill"
            # its worker's next load message (every LoadLink.PERIOD_SECS) says it is full
            assert wait_until(lambda: spout_w.load_mapping.get(task) == 1.0, 10), spout_w.load_mapping.get(task)
            assert other.task_fill(task) == other.task_load(task) == 1.0
        finally:
            gate.open()
        assert wait_until(lambda: got.value == n, 30), got.value
        assert got.value == n
