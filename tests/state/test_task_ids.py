"""A stateful topology submitted again under its name with another `topology.workers`: the
number of ackers follows it (unless topology.acker.executors is set), and ``__acker`` sorts
before ``count``, so the counting bolt's tasks get other ids. Under Storm's namespace
``<component>-<task id>`` each task would read the state of the keys the fields grouping sent
the other task, and its own keys' counts would start again from nothing. Every key's count must
hold every id of that key acked across both runs."""

from collections import Counter
from pathlib import Path

import pytest

from squall import BaseStatefulBolt, BasicBolt, Config, Fields, LocalCluster, TopologyBuilder
from squall._transactional import MemoryBackend
from squall.state import StateError
from squall.state._names import state_namespace
from tests.written import finished_lines

from ..conftest import wait_until
from .counting import ReplayingSpout, acked, stop_and_wait

KEYS = 37


class KeyOf(BasicBolt):
    """Emits each id's key (``id % KEYS``): the keys repeat, as a word count's words do."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("key"))

    def execute(self, tup, collector):
        collector.emit([tup[0] % KEYS])


class SeenCounts(BaseStatefulBolt):
    """Counts each key in its state, and writes every count it reaches (``seen-<task>.txt``
    under ``test.out.dir``): what the topology saw, whichever state it was kept in."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.seen = open(Path(conf["test.out.dir"]) / f"seen-{context.get_this_task_id()}.txt", "a")

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        count = self.state.get(tup[0], 0) + 1
        self.state.put(tup[0], count)
        self.seen.write(f"{tup[0]} {count}\n")
        self.seen.flush()
        self.collector.ack(tup)


def seen(out):
    """The highest count the topology reached for each key."""
    best: Counter = Counter()
    for f in out.glob("seen-*.txt"):
        for line in finished_lines(f):
            key, count = map(int, line.split())
            best[key] = max(best[key], count)
    return best


def counting():
    b = TopologyBuilder()
    b.set_spout("source", ReplayingSpout(None), 1)
    b.set_bolt("key", KeyOf(), 2).shuffle_grouping("source")
    b.set_bolt("count", SeenCounts(), 2).fields_grouping("key", ["key"])
    return b.create_topology()


def test_a_resubmission_that_renumbers_the_tasks_keeps_each_keys_count(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    base = {"topology.message.timeout.secs": 3, "topology.max.spout.pending": 100,
            "topology.state.checkpoint.interval.ms": 200, "test.out.dir": str(out)}
    with LocalCluster() as cluster:
        cluster.submit_topology("keys", Config({**base, "topology.workers": 1}), counting())
        first = sorted(cluster.get_topology_info("keys")["components"]["count"]["task_stats"])
        assert wait_until(lambda: len(acked(out)) > 400, 60)
        cluster.kill_topology("keys", wait_secs=0)
        cluster.submit_topology("keys", Config({**base, "topology.workers": 2}), counting())
        second = sorted(cluster.get_topology_info("keys")["components"]["count"]["task_stats"])
        assert first != second, "the task ids did not change: the test tests nothing"
        n = stop_and_wait(out, resume=400, timeout=60)
        cluster.kill_topology("keys", wait_secs=0)
    counts = seen(out)
    expected = Counter(i % KEYS for i in range(n))
    short = {k: (counts[k], want) for k, want in expected.items() if counts[k] < want}
    assert not short, f"(highest count, ids of the key acked) of keys counted short: {short}"


class LayoutTask:
    """What `state_namespace` (and a Trident window store's factory) reads of a stateful task's
    context: its component's task ids (``first`` on), its own and its index, and the master's
    transactional state."""

    def __init__(self, backend, tasks: int, index: int, first: int = 3, component: str = "count"):
        self.transactional_home = backend
        self.tasks = list(range(first, first + tasks))
        self.index = index
        self.component = component

    def get_this_component_id(self):
        return self.component

    def get_this_task_id(self):
        return self.tasks[self.index]

    def get_this_task_index(self):
        return self.index

    def get_component_tasks(self, component):
        return self.tasks


def test_a_stateful_component_submitted_again_with_another_task_count_is_refused_naming_it():
    """A fields-grouped stateful component kept its keys in 2 tasks' states; submitted again under
    its name with 3 tasks (or 1), a key would go to a task whose state does not hold it: its
    count split between states or started from nothing (a word count: 33 of 40 words in two
    states after 2 -> 3 -> 1 tasks). Each task of the new count is refused, naming the component,
    the states and what to do; the old count goes on with its states, and
    topology.state.allow.task.count.change lets the new count go on with its own."""
    backend = MemoryBackend()
    conf = {"topology.name": "wc"}
    assert [state_namespace(conf, LayoutTask(backend, 2, i)) for i in range(2)] == ["count-3", "count-4"]
    for tasks in (3, 1):
        for i in range(tasks):
            with pytest.raises(StateError) as refused:
                state_namespace(conf, LayoutTask(backend, tasks, i))
            said = str(refused.value)
            assert f"component [count] task {3 + i}: topology 'wc' kept the states of component [count] in 2 tasks " \
                   f"(states count-3, count-4)" in said, said
            assert f"now has {tasks} task" in said and "set_num_tasks(2)" in said, said
            assert "topology.state.allow.task.count.change: true" in said, said
    assert backend.list("wc", "_squall_task/count/") == ["_squall_task/count/2/0", "_squall_task/count/2/1"]
    assert [state_namespace(conf, LayoutTask(backend, 2, i, first=5)) for i in range(2)] == ["count-3", "count-4"]
    allowed = {**conf, "topology.state.allow.task.count.change": True}
    assert [state_namespace(allowed, LayoutTask(backend, 3, i)) for i in range(3)] == ["count-3", "count-4", "count-5"]
    # once allowed, that count has its own record: it goes on without the setting
    assert state_namespace(conf, LayoutTask(backend, 3, 2)) == "count-5"
