"""Poison records from a Redis stream through a ShellBolt on the process host (2 worker
processes): 1,000 good entries and three that kill the bolt's subprocess each time it is given
them (``os._exit(7)``, SIGSEGV, an uncaught exception; tests/multilang/bare/poison.py). Every
good entry reaches the output once, each poison entry reaches the dead-letter stream after
``max_retries`` with a cause naming the component, the exit code or signal and the last stderr
line, only the poison entries are charged (4 failures each), no worker restarts, and the
spout's failure count on the master is the failures it was told of (tests/multilang/test_poison.py
on LocalCluster)."""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

import pytest

from squall import Bolt, Config, ShellBolt, TopologyBuilder

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test

redis_streams = pytest.importorskip("squall.external.redis_streams", reason="needs the redis library")

BARE = Path(__file__).parent.parent / "multilang" / "bare"
GOOD = 1000
POISON = {
    "exit": r"(it exited|it stopped reading its input \(it exited\)); exit code 7; its stderr ended with: "
            r"poison.py: cannot go on after record 'exit'",
    "segv": r"(it exited|it stopped reading its input \(it exited\)); killed by SIGSEGV; its stderr ended with: "
            r"poison.py: a native call crashed on record 'segv'",
    "raise": r"(it exited|it stopped reading its input \(it exited\)); exit code 1; its stderr ended with: "
             r"RuntimeError: poison record 'raise'",
}


class NotesFailures(redis_streams.RedisStreamSpout):
    """The Redis Streams spout, noting each failure it is told of in the list ``fails``:
    ``<entry id> <record_caused>``."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        import redis
        self.notes = redis.Redis.from_url(self.url)

    def fail_with(self, msg_id, cause):
        self.notes.rpush("fails", f"{msg_id} {int(cause.record_caused)}")
        super().fail_with(msg_id, cause)


class Keep(Bolt):
    """Pushes each number to the list ``out``."""

    def __init__(self, url: str) -> None:
        self.url = url

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        import redis
        self.out = redis.Redis.from_url(self.url)

    def execute(self, tup):
        self.out.rpush("out", tup.values[0])
        self.collector.ack(tup)


def test_poison_entries_reach_the_dead_letter_stream_and_good_ones_the_output_once(
        cluster, redis_server):  # noqa: F811 - fixtures
    r = redis_server.client()
    values = [str(i) for i in range(GOOD)]
    for k, value in enumerate(POISON):
        values.insert((k + 1) * GOOD // (len(POISON) + 1), value)
    ids = {r.xadd("events", {"payload": v}): v for v in values}
    b = TopologyBuilder()
    b.set_spout("events", NotesFailures(redis_server.url, "events", "g", ["payload"], batch_size=50,
                                        backoff=redis_streams.ExponentialBackoff(initial_delay=0.01, max_delay=0.05,
                                                                                 max_retries=3)))
    b.set_bolt("check", ShellBolt([sys.executable, "poison.py"], ["n"], resources=BARE), 2).shuffle_grouping("events")
    b.set_bolt("keep", Keep(redis_server.url), 2).shuffle_grouping("check")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(300)  # no failure but the subprocesses' deaths
    with cluster.client() as master:
        master.submit_topology("poison", conf, b.create_topology())
        try:
            done = lambda: r.xlen("events:dead") == len(POISON) and r.llen("out") >= GOOD \
                and r.xpending("events", "g")["pending"] == 0
            assert wait_until(done, 90), (r.xlen("events:dead"), r.llen("out"))
            told = r.llen("fails")
            spout_failed = lambda: master.get_topology_info("poison")["components"]["events"]["failed"]
            assert wait_until(lambda: spout_failed() == told, 30), (told, spout_failed())
            info = master.get_topology_info("poison")
        finally:
            master.kill_topology("poison", 0)

    assert sorted(int(n) for n in r.lrange("out", 0, -1)) == list(range(GOOD))  # every good entry, once
    dead = [fields for _, fields in r.xrange("events:dead")]
    assert sorted(ids[d["id"]] for d in dead) == sorted(POISON)
    for d in dead:
        how = POISON[ids[d["id"]]]
        assert re.fullmatch(rf"failed 4 times \(max_retries 3\); last: exception in \[check\] task \d+: MultilangError: "
                            rf"ShellBolt \[check\] task \d+: subprocess \[.*'poison.py'\] \(pid \d+\): {how}",
                            d["error"]), d["error"]
        assert json.loads(d["cause"])["component"] == "check"
    notes = [n.split() for n in r.lrange("fails", 0, -1)]
    charged = collections.Counter(ids[entry] for entry, caused in notes if caused == "1")
    assert charged == {value: 4 for value in POISON}  # never a good entry
    assert sum(w["restarts"] for w in info["workers"]) == 0
