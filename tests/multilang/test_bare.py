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
    assert "a tuple from [feed] stream [default] field [value] cannot be written as JSON" in errors[0]["error"]


def test_a_shell_spouts_acks_reach_it_between_its_nexts_as_in_storm(caplog):
    """Storm's spout executor hands a spout its acks before every nextTuple. A shell spout's
    executor called next up to 64 times in a row while each one emitted, so a spout whose next
    takes 50 ms heard of its first ack 3 s late (Storm's randomsentence.js, 100 ms a next: a
    complete latency of 3.5 s, acked 0 for 6 s)."""
    caplog.set_level("INFO", logger="squall.multilang")
    b = TopologyBuilder()
    b.set_spout("slow", ShellSpout([sys.executable, "slow_source.py"], ["n"], resources=BARE))
    b.set_bolt("sink", Sink()).shuffle_grouping("slow")
    conf = Config()
    conf["test.next.secs"] = 0.05
    with LocalCluster() as cluster:
        cluster.submit_topology("slow", conf, b.create_topology())

        def said():  # what the subprocess logged, in its order
            return [m.group(1, 2) for r in list(caplog.records)
                    if (m := re.search(r": (next|ack|fail) (\d+)$", r.getMessage()))]
        assert wait_until(lambda: sum(1 for c, _ in said() if c == "ack") >= 5, 30)
        assert cluster.get_topology_info("slow")["errors"] == []

    lines = said()
    first_ack = next(i for i, (c, _) in enumerate(lines) if c == "ack")
    assert not [c for c, _ in lines if c == "fail"]
    # its first ack came after a few nexts (the tuple's way to the sink and the acker), not 64
    assert sum(1 for c, _ in lines[:first_ack] if c == "next") <= 10, lines[:first_ack + 1]


def test_what_a_subprocess_says_at_the_end_of_its_input_on_shutdown_is_logged_not_reported(caplog):
    """squall closes a shell bolt's input on a clean shutdown (Storm kills the process), and
    storm.py reports 'Read EOF from stdin' as an error: every clean stop of a storm.py bolt
    logged 'ERROR ... [split] task 5 reported an error: Exception: Read EOF from stdin'."""
    caplog.set_level("INFO")
    b, feed, tracker = fed_builder("value")
    b.set_bolt("eof", ShellBolt([sys.executable, "eof_error.py"], resources=BARE)).shuffle_grouping("feed")
    with LocalCluster() as cluster:
        cluster.submit_topology("eof", Config(), b.create_topology())
        for i in range(5):
            feed.feed([i], i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(5)), 30)
        cluster.kill_topology("eof", wait_secs=0)
        assert wait_until(lambda: any("Read EOF from stdin" in r.getMessage() for r in list(caplog.records)), 30)

    said = [r for r in caplog.records if "Read EOF from stdin" in r.getMessage()]
    assert [r.levelname for r in said] == ["INFO"], [(r.name, r.levelname, r.getMessage()) for r in said]
    assert "after squall closed its input" in said[0].getMessage()
