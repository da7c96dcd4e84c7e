"""pystorm's reliability API in squall's workers: a ReliableSpout's ids are acked once each, its
failed tuples replay (an explicit fail, and an exception under auto_fail); emits anchor to the
inputs (given as Tuples or ids, or auto_anchor), need_task_ids returns the tasks, direct_task
reaches that task, and a component that raised restarts (exit_on_exception) with its error
reported."""

from __future__ import annotations

import re

from streamparse import Bolt, Grouping, ReliableSpout, Stream, Topology

from squall import Config, LocalCluster
from squall.sparse import translate
from squall.testing._registry import SharedLog
from tests.conftest import wait_until

TOTAL = 60


class Numbers(ReliableSpout):
    outputs = ["n"]
    max_fails = 5
    events: SharedLog

    def initialize(self, conf, context):
        self.next = 0
        self.events.append(("splitters", {int(t) for t, c in context["task->component"].items() if c == "splitter"}))

    def next_tuple(self):
        if self.next < TOTAL:
            tasks = self.emit([self.next], tup_id=self.next, need_task_ids=True)
            self.events.append(("tasks", self.next, tuple(tasks)))
            self.next += 1

    def ack(self, tup_id):
        super().ack(tup_id)
        self.events.append(("acked", tup_id))

    def fail(self, tup_id):
        self.events.append(("failed", tup_id))
        super().fail(tup_id)  # ReliableSpout emits it again


class Splitter(Bolt):
    """Acks and anchors by hand; fails each multiple of 3 once."""
    outputs = [Stream(["n", "part"]), Stream(["n", "task"], name="direct", direct=True)]
    auto_ack = False
    auto_anchor = False

    def initialize(self, conf, context):
        self.failed_once = set()
        self.sinks = sorted(int(t) for t, c in context["task->component"].items() if c == "sink")

    def process(self, tup):
        n = tup.values.n  # pystorm names the values by the source's fields
        if n % 3 == 0 and n not in self.failed_once:
            self.failed_once.add(n)
            self.fail(tup)
            return
        self.emit([n, "a"], anchors=[tup])
        self.emit([n, "b"], anchors=[tup.id])
        target = self.sinks[n % len(self.sinks)]
        self.emit([n, target], stream="direct", anchors=[tup], direct_task=target)
        self.ack(tup)


class Checker(Bolt):
    """auto_ack, auto_anchor, auto_fail: raises once on each multiple of 5's part b."""
    outputs = ["n"]
    raised: SharedLog

    def process(self, tup):
        n, part = tup.values
        if part == "b" and n % 5 == 0 and n not in self.raised.items():
            self.raised.append(n)
            raise ValueError(f"boom {n}")
        self.emit([n])


class Sink(Bolt):
    landed: SharedLog

    def process(self, tup):
        self.landed.append((tup.values.task, self.task_id))


class Reliable(Topology):
    numbers = Numbers.spec()
    splitter = Splitter.spec(inputs=[numbers], par=2)
    checker = Checker.spec(inputs={splitter: Grouping.fields("n")}, par=2)
    sink = Sink.spec(inputs={splitter["direct"]: Grouping.DIRECT}, par=3)


def test_failed_tuples_replay_until_every_id_is_acked_once() -> None:
    Numbers.events, Checker.raised, Sink.landed = SharedLog(), SharedLog(), SharedLog()
    t = translate(Reliable)

    with LocalCluster() as cluster:
        cluster.submit_topology("reliable", t.conf, t.topology)
        assert wait_until(lambda: len([e for e in Numbers.events.items() if e[0] == "acked"]) >= TOTAL, 60)
        info = cluster.get_topology_info("reliable")

    events = Numbers.events.items()
    acked = [e[1] for e in events if e[0] == "acked"]
    failed = {e[1] for e in events if e[0] == "failed"}
    assert sorted(acked) == list(range(TOTAL))  # every id, once
    assert failed == {n for n in range(TOTAL) if n % 3 == 0 or n % 5 == 0}  # explicit fails and exceptions
    assert sorted(Checker.raised.items()) == [n for n in range(TOTAL) if n % 5 == 0]
    tasks = [e[2] for e in events if e[0] == "tasks"]
    assert len(tasks) == TOTAL and all(len(ts) == 1 and isinstance(ts[0], int) for ts in tasks)  # shuffle: one
    [splitters] = [e[1] for e in events if e[0] == "splitters"]
    assert len(splitters) == 2 and {ts[0] for ts in tasks} == splitters  # the ids of the tasks it went to
    landed = Sink.landed.items()
    assert landed and all(target == task for target, task in landed)  # direct_task reached that task
    errors = [e for e in info["errors"] if e["component"] == "checker"]
    assert errors and all("ValueError" in e["error"] and "boom" in e["error"] for e in errors)


class Drop(Bolt):
    def process(self, tup):
        pass


class Unacked(Topology):
    numbers = Numbers.spec()
    drop = Drop.spec(inputs=[numbers])


def test_with_acking_off_each_id_is_acked_at_its_emit() -> None:
    Numbers.events = SharedLog()
    t = translate(Unacked)

    with LocalCluster() as cluster:  # squall acks inside the emit: pystorm hears it after its next_tuple
        cluster.submit_topology("unacked", {**t.conf, "topology.acker.executors": 0}, t.topology)
        assert wait_until(lambda: len([e for e in Numbers.events.items() if e[0] == "acked"]) >= TOTAL, 30)
        errors = cluster.get_topology_info("unacked")["errors"]

    events = [e for e in Numbers.events.items() if e[0] in ("tasks", "acked")]
    assert [e[1] for e in events if e[0] == "acked"] == list(range(TOTAL))
    assert all(events[2 * i][:2] == ("tasks", i) and events[2 * i + 1] == ("acked", i) for i in range(TOTAL))
    assert errors == []


class Flaky(ReliableSpout):
    """Raises in its third next_tuple of each life; says hello through log() when it starts."""
    outputs = ["n"]
    lives: SharedLog

    def initialize(self, conf, context):
        self.lives.append(context["taskid"])
        self.log(f"life {len(self.lives.items())}", "warning")
        self.calls = 0

    def next_tuple(self):
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("flaky spout")


class Restarts(Topology):
    flaky = Flaky.spec()
    drop = Drop.spec(inputs=[flaky])


def test_a_spout_that_raises_is_reported_and_started_again(caplog) -> None:
    Flaky.lives = SharedLog()
    t = translate(Restarts)

    with caplog.at_level("WARNING", logger="squall.sparse.flaky"), LocalCluster() as cluster:
        cluster.submit_topology("restarts", t.conf, t.topology)
        assert wait_until(lambda: len(Flaky.lives.items()) >= 3, 30)  # started, raised, started again ...
        assert wait_until(lambda: cluster.get_topology_info("restarts")["errors"], 10)
        errors = cluster.get_topology_info("restarts")["errors"]

    assert len(set(Flaky.lives.items())) == 1  # the same task, a new instance each time
    assert all(e["component"] == "flaky" and "RuntimeError" in e["error"] for e in errors)
    lines = [r.getMessage() for r in caplog.records if r.name == "squall.sparse.flaky"]
    assert "life 1" in lines and "life 2" in lines


class AcksTwice(Bolt):
    """Acks by hand while auto_ack is on: pystorm then acks the same tuple again."""

    def process(self, tup):
        self.ack(tup)


class Twice(Topology):
    numbers = Numbers.spec()
    twice = AcksTwice.spec(inputs=[numbers])


def test_acking_a_tuple_twice_is_an_error_naming_the_component_and_the_id() -> None:
    Numbers.events = SharedLog()
    t = translate(Twice)

    with LocalCluster() as cluster:
        cluster.submit_topology("twice", t.conf, t.topology)
        assert wait_until(lambda: cluster.get_topology_info("twice")["errors"], 30)
        errors = cluster.get_topology_info("twice")["errors"]

    assert errors[0]["component"] == "twice"
    assert "SparseComponentError" in errors[0]["error"] and "[twice] task" in errors[0]["error"]
    # The id named is the tuple being processed (which tuple is first to reach the bolt, and so its
    # id, depends on the run): the error names that tuple's id, not some other.
    named = re.search(r"acked tuple id '([^']+)', which is unknown or already acked or failed", errors[0]["error"])
    assert named is not None, errors[0]["error"]
    assert f"Tuple(id='{named.group(1)}'" in errors[0]["error"]


class Holder(Bolt):
    """Holds its first 4 inputs unacked, then raises on the 5th (auto_fail fails that one):
    the instance that replaces it acks everything."""
    outputs = ["n"]
    auto_ack = False
    lives: SharedLog

    def initialize(self, conf, context):
        self.lives.append(context["taskid"])
        self.held = [] if len(self.lives.items()) == 1 else None

    def process(self, tup):
        if self.held is None:
            self.ack(tup)
        elif len(self.held) < 4:
            self.held.append(tup)
        else:
            raise RuntimeError("holder")


class Held(Topology):
    config = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 600}  # a replay of held tuples must not wait for it
    numbers = Numbers.spec()
    holder = Holder.spec(inputs=[numbers])


def test_the_tuples_a_restarted_bolt_held_are_failed_and_replay_at_once() -> None:
    Numbers.events, Holder.lives = SharedLog(), SharedLog()
    t = translate(Held)

    with LocalCluster() as cluster:
        cluster.submit_topology("held", t.conf, t.topology)
        # before the fix the 4 held ids were dropped with the old instance and replayed only
        # after topology.message.timeout.secs (600 s)
        assert wait_until(lambda: len([e for e in Numbers.events.items() if e[0] == "acked"]) >= TOTAL, 60)

    events = Numbers.events.items()
    assert sorted(e[1] for e in events if e[0] == "acked") == list(range(TOTAL))  # every id, once
    failed = [e[1] for e in events if e[0] == "failed"]
    assert len(Holder.lives.items()) == 2 and len(failed) == 5 and len(set(failed)) == 5  # 4 held + the one raised
