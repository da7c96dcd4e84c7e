"""A streamparse bolt (run in squall's executor) that fails a tuple says why, and the reason
reaches the spout's dead letter: the error pystorm reported before its fail (the traceback's
last line, never the whole of it). Before, the fail was plain: a record given up after its
retries was dead-lettered as ``failed 4 times; last: failed in [check] task 2``."""

from __future__ import annotations

import json
import re
from typing import Any

from streamparse import Bolt as StreamparseBolt

from squall import Bolt, LocalCluster, TopologyBuilder
from squall.external.files import FileSpout
from squall.sparse.component import SparseBolt
from squall.testing._registry import SharedLog
from tests.conftest import wait_until

LINES = ["1", "x", "3", "4", "y", "6", "7"]  # N = 7, K = 2 ("x", "y")


class Checker(StreamparseBolt):
    """Emits each value as a number: one that is no number raises (pystorm reports it and fails
    the tuple, and the instance is replaced: exit_on_exception)."""
    outputs = ["n"]  # noqa: RUF012 (streamparse reads the class attribute)

    def process(self, tup: Any) -> None:
        self.emit([int(tup.values[0])])


class Numbers(Bolt):
    """Keeps each number it gets, and acks it."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def execute(self, tup) -> None:
        self.log.append(tup.values[0])
        self.collector.ack(tup)


def test_a_tuple_a_streamparse_bolt_fails_is_dead_lettered_with_the_error_it_reported(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.txt").write_text("".join(f"{x}\n" for x in LINES))
    log = SharedLog()
    b = TopologyBuilder()
    b.set_spout("lines", FileSpout(src, quiet_secs=0, commit_every=1, poll_secs=0.05, progress_dir=tmp_path / "local"))
    b.set_bolt("check", SparseBolt(Checker, {"default": (["n"], False)})).shuffle_grouping("lines")
    b.set_bolt("keep", Numbers(log)).shuffle_grouping("check")
    with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
        cluster.submit_topology("sparse", {"topology.message.timeout.secs": 30}, b.create_topology())
        assert wait_until(lambda: (src / "a.txt.done").exists(), timeout=30), "the file was not finished"
        cluster.kill_topology("sparse", wait_secs=0)
    assert sorted(log.items()) == [1, 3, 4, 6, 7]  # N - K, each once
    dead = [json.loads(x) for x in (tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "a.txt.dead")
            .read_text().splitlines()]
    assert sorted(json.loads(d["record"])[0] for d in dead) == ["x", "y"]  # K, each once
    for d in dead:
        value = json.loads(d["record"])[0]
        why = (r"streamparse component Checker failed a tuple from \[lines\] stream \[default\] after reporting: "
               rf"ValueError: invalid literal for int\(\) with base 10: '{value}'")
        # main: "failed 4 times; last: failed in [check] task 2", the reason only in the errors
        assert re.fullmatch(rf"failed 4 times; last: failed in \[check\] task \d+: {why}", d["reason"]), d["reason"]
        assert re.fullmatch(why, d["cause"]["message"]) and "Traceback" not in json.dumps(d)


class Grouper(StreamparseBolt):
    """Holds its inputs unacked and passes them on as numbers five at a time (and at each
    tick); a value that is no number raises: pystorm fails that tuple (auto_fail) and the
    instance is replaced (exit_on_exception), failing the ones it held."""
    outputs = ["n"]  # noqa: RUF012 (streamparse reads the class attribute)
    auto_ack = False

    def initialize(self, conf: Any, context: Any) -> None:
        self.held: list = []

    def process(self, tup: Any) -> None:
        number = int(tup.values[0])
        self.held.append((tup, number))
        if len(self.held) == 5:
            self.process_tick(None)

    def process_tick(self, tup: Any) -> None:
        for held, number in self.held:
            self.emit([number], anchors=[held])
            self.ack(held)
        self.held = []


class FailsNoted(FileSpout):
    """A FileSpout that notes each failure it is told of: (line, record_caused)."""

    def __init__(self, fails: SharedLog, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fails = fails

    def fail_with(self, msg_id: Any, cause: Any) -> None:
        self.fails.append((msg_id.offset, cause.record_caused))
        super().fail_with(msg_id, cause)


def test_the_tuples_a_replaced_instance_held_are_not_charged_to_their_records(tmp_path):
    """1,000 good lines and 2 bad ones ("x" after 503 good, "y" after 751: the first time,
    3 and 1 good tuples held). Only the bad lines are charged, 4 times each (the first try and
    3 retries), and dead-lettered; the good tuples the replaced instance held fail as lost and
    go through, each once. Before, they failed as the bolt's explicit fail (``was replaced
    after ValueError ...``), charged: 12 good lines charged in a run, and a good line held
    on each of 4 replacements would have been dead-lettered."""
    lines = [str(i) for i in range(1000)]
    lines.insert(503, "x")
    lines.insert(752, "y")
    offsets, at = {}, 0
    for x in lines:
        offsets[at] = x
        at += len(x) + 1
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.txt").write_text("".join(f"{x}\n" for x in lines))
    log, fails = SharedLog(), SharedLog()
    b = TopologyBuilder()
    b.set_spout("lines", FailsNoted(fails, src, commit_every=100, poll_secs=0.05, progress_dir=tmp_path / "local"))
    b.set_bolt("check", SparseBolt(Grouper, {"default": (["n"], False)})).shuffle_grouping("lines") \
        .add_configuration("topology.tick.tuple.freq.secs", 1)
    b.set_bolt("keep", Numbers(log)).shuffle_grouping("check")
    with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
        cluster.submit_topology("sparse", {"topology.message.timeout.secs": 300}, b.create_topology())
        assert wait_until(lambda: (src / "a.txt.done").exists(), timeout=60), "the file was not finished"
        cluster.kill_topology("sparse", wait_secs=0)
    charged = sorted(offsets[offset] for offset, caused in fails.items() if caused)
    assert charged == ["x"] * 4 + ["y"] * 4, charged  # main: good lines too
    assert sorted(log.items()) == list(range(1000))  # every good line, once
    dead = [json.loads(x) for x in (tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "a.txt.dead")
            .read_text().splitlines()]
    assert sorted(json.loads(d["record"])[0] for d in dead) == ["x", "y"]
