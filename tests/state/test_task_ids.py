"""A stateful topology submitted again under its name with another `topology.workers`: the
number of ackers follows it (unless topology.acker.executors is set), and ``__acker`` sorts
before ``count``, so the counting bolt's tasks get other ids. Under Storm's namespace
``<component>-<task id>`` each task would read the state of the keys the fields grouping sent
the other task, and its own keys' counts would start again from nothing. Every key's count must
hold every id of that key acked across both runs."""

from collections import Counter

from pathlib import Path

from squall import BaseStatefulBolt, BasicBolt, Config, Fields, LocalCluster, TopologyBuilder

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
        for line in f.read_text().splitlines():
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
