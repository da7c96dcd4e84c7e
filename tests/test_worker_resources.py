"""`squall._worker_resources.WorkerResources`, the objects one worker's tasks share, and the
engine's `Worker` handing one to each of its tasks (``context.worker_resources``): the same to
the tasks of a worker, a fresh one to another worker's."""

from __future__ import annotations

import threading

import pytest

from squall import Bolt, Config, TopologyBuilder
from squall._config import topology_conf
from squall._worker_resources import WorkerResources
from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import FeederSpout


def test_an_object_is_made_once_per_key_by_the_first_asker_and_handed_to_every_later_one():
    resources = WorkerResources()
    made: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    first = resources.get_or_make("gate", make)
    assert resources.get_or_make("gate", make) is first and made == [first]
    other = resources.get_or_make("other", make)
    assert other is not first and made == [first, other]
    assert WorkerResources().get_or_make("gate", make) is not first   # another worker's: its own
    with pytest.raises(TypeError, match="a key is a string, got 3"):
        resources.get_or_make(3, make)  # type: ignore[arg-type]


def test_tasks_asking_at_once_from_several_threads_get_one_object():
    """Spout tasks of one worker may open on different loops: ``make`` runs once however many
    ask at the same moment."""
    resources = WorkerResources()
    calls: list[int] = []
    start = threading.Barrier(8)
    got: list[object] = []

    def make() -> object:
        calls.append(1)
        return object()

    def ask() -> None:
        start.wait()
        got.append(resources.get_or_make("gate", make))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 8 and all(g is got[0] for g in got)


class Sink(Bolt):
    def execute(self, tup):
        self.collector.ack(tup)


def test_a_worker_hands_its_tasks_one_registry_and_another_worker_another():
    """Two workers of one plan, each with two tasks of a spout and one of a bolt: every context
    of a worker carries that worker's registry, and the two registries differ."""
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 4)
    b.set_bolt("sink", Sink(), 2).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_num_ackers(0)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    executors = [e for e in plan.executors if e.component != "__acker"]
    halves = [executors[0::2], executors[1::2]]
    assert [sorted(e.component for e in half) for half in halves] == [["feed", "feed", "sink"]] * 2
    network = InMemoryNetwork()
    workers = []
    for port, assignment in enumerate(halves, 1):
        transport = InMemoryTransport(network, f"w{port}")
        transport.set_peers({t: f"w{3 - port}" for e in halves[2 - port] for t in e.tasks})
        workers.append(Worker(plan, port, assignment, component_blobs(plan), transport, SimulatedClock(),
                              TopologyActivation(active=False), Backpressure(1000), lambda rec: None,
                              lambda w, rec: None, 7))
    seen = []
    for w in workers:
        contexts = [c for ex in w.executors for c in getattr(ex, "contexts", {}).values()]
        assert len(contexts) == sum(len(e.tasks) for e in w.assignment)   # every task's, the bolt's too
        assert {id(c.worker_resources) for c in contexts} == {id(w.resources)}
        seen.append(w.resources)
    assert seen[0] is not seen[1]


def test_what_a_task_gives_at_end_is_released_once_in_order_and_one_that_raises_spares_the_others(caplog):
    """``at_end`` releases run at the worker's end, once each, in the order given; one that
    raises is logged naming it and the next still runs; one given after the end runs at once."""
    resources = WorkerResources()
    released: list[str] = []

    def broken() -> None:
        released.append("broken")
        raise OSError("connection already gone")

    resources.at_end("first", lambda: released.append("first"))
    resources.at_end("the broken one", broken)
    resources.at_end("third", lambda: released.append("third"))
    assert released == []
    resources.end()
    assert released == ["first", "broken", "third"]
    assert any("releasing the broken one at the end of its worker raised" in r.getMessage() for r in caplog.records)
    resources.end()
    assert released == ["first", "broken", "third"]   # once each
    resources.at_end("late", lambda: released.append("late"))
    assert released == ["first", "broken", "third", "late"]


def test_a_worker_stopped_without_close_still_releases_what_its_tasks_gave_at_end():
    """A crashed worker's loops stop without ``close`` (``clean=False``); what its tasks gave
    ``at_end`` (a Redis Streams spout's reading thread) is released all the same, once."""
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    b.set_bolt("sink", Sink(), 1).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(1)
    conf.set_num_ackers(0)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    executors = [e for e in plan.executors if e.component != "__acker"]
    w = Worker(plan, 1, executors, component_blobs(plan), InMemoryTransport(InMemoryNetwork(), "w1"),
               SimulatedClock(), TopologyActivation(active=False), Backpressure(1000), lambda rec: None,
               lambda w, rec: None, 7)
    released: list[str] = []
    contexts = [c for ex in w.executors for c in getattr(ex, "contexts", {}).values()]
    for c in contexts:
        c.worker_resources.at_end(f"task {c.get_this_task_id()}", lambda c=c: released.append(c.get_this_component_id()))
    assert w.stop(clean=False, timeout=1.0)
    assert sorted(released) == ["feed", "sink"]
    w.stop(clean=False, timeout=1.0)
    assert sorted(released) == ["feed", "sink"]
