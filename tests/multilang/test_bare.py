"""Components written against the protocol with no library (``bare/``): direct emits on a
declared direct stream, a spout's task ids (need_task_ids) matching where its tuples went, and a
value the wire cannot carry failing only its own tuple."""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

from squall import Bolt, Config, Fields, LocalCluster, ShellBolt, ShellSpout, TopologyBuilder

from ..conftest import wait_until
from .feeding import fed_builder

BARE = Path(__file__).parent / "bare"
RECEIVED: list = []  # (sink task, value)
_LOCK = threading.Lock()


class Sink(Bolt):
    def execute(self, tup):
        with _LOCK:
            RECEIVED.append((self.context.get_this_task_id(), tup[0]))
        self.collector.ack(tup)


class Direct(ShellBolt):
    def __init__(self):
        super().__init__([sys.executable, "direct.py"], resources=BARE)

    def declare_output_fields(self, declarer):
        declarer.declare_stream("direct", Fields(["value"]), direct=True)


def test_a_shell_bolt_emits_direct_to_the_tasks_its_context_names():
    RECEIVED.clear()
    b, feed, tracker = fed_builder("value")
    b.set_bolt("direct", Direct()).shuffle_grouping("feed")
    b.set_bolt("sink", Sink(), 2).direct_grouping("direct", "direct")
    with LocalCluster() as cluster:
        cluster.submit_topology("direct", Config(), b.create_topology())
        sinks = cluster.get_topology_info("direct")["components"]["sink"]["task_stats"]
        for i in range(10):
            feed.feed([i], i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(10)), 30)
        assert cluster.get_topology_info("direct")["errors"] == []

    assert sorted(RECEIVED) == sorted((int(t), i) for t in sinks for i in range(10))


def test_a_shell_spouts_task_ids_are_where_its_tuples_went_and_its_acks_come_back(caplog):
    caplog.set_level("INFO", logger="squall.multilang")
    RECEIVED.clear()
    n = 30
    b = TopologyBuilder()
    b.set_spout("numbers", ShellSpout([sys.executable, "numbers.py"], ["n"], resources=BARE))
    b.set_bolt("sink", Sink(), 2).shuffle_grouping("numbers")
    conf = Config()
    conf["test.numbers"] = n
    with LocalCluster() as cluster:
        cluster.submit_topology("numbers", conf, b.create_topology())

        def logged(pattern):
            return [m.groups() for r in caplog.records if (m := re.search(pattern, r.getMessage()))]
        assert wait_until(lambda: len(logged(r": ack (\d+)$")) == n, 30)
        assert cluster.get_topology_info("numbers")["errors"] == []

    assert sorted(int(i) for (i,) in logged(r": ack (\d+)$")) == list(range(n))
    went = {int(i): [int(t)] for i, t in logged(r": emitted (\d+) to \[(\d+)\]$")}
    assert went == {i: [task] for task, i in RECEIVED}


def test_a_value_the_wire_cannot_carry_fails_its_tuple_only_and_is_reported():
    b, feed, tracker = fed_builder("value")
    b.set_bolt("direct", Direct()).shuffle_grouping("feed")
    b.set_bolt("sink", Sink()).direct_grouping("direct", "direct")
    with LocalCluster() as cluster:
        cluster.submit_topology("bytes", Config(), b.create_topology())
        feed.feed([b"\x00"], "bytes")  # JSON has no bytes (msgpack has)
        feed.feed(["text"], "text")
        assert wait_until(lambda: tracker.is_failed("bytes") and tracker.is_acked("text"), 30)
        errors = cluster.get_topology_info("bytes")["errors"]

    assert [(e["component"], e["fatal"]) for e in errors] == [("direct", False)]
    assert "a tuple from [feed] stream [default] cannot be written as JSON" in errors[0]["error"]
