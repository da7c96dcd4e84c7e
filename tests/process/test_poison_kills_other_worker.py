"""Poison entries from a Redis stream that kill a worker that is not the spout's, on the process
host (2 worker processes): the bolt that ends its process (``os._exit``) on a poison entry runs
only in the worker without the spout (`Elsewhere` routes every entry there). Each death fails
every entry in flight as a lost worker; the one the bolt was executing when its worker died is
the poison's, and must be charged to its retry budget, the others must not: each poison entry
reaches the dead-letter stream after ``max_retries`` charged deaths, every good entry reaches
the output, none is dead-lettered or charged, and the spout's worker never restarts."""

from __future__ import annotations

import collections
import json
import os
import re

import pytest

from squall import Bolt, Config, CustomStreamGrouping, TopologyBuilder
from squall.external.retry import RetryBackoff

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test

redis_streams = pytest.importorskip("squall.external.redis_streams", reason="needs the redis library")

STREAM, GROUP = "events", "g"
GOOD = 1000
POISON = ("poison-a", "poison-b")
MAX_RETRIES = 1   # a poison entry is dead-lettered after its second charged death


class NotesFailures(redis_streams.RedisStreamSpout):
    """The Redis Streams spout, noting each failure it is told of in the list ``fails``:
    ``<entry id> <kind> <record_caused>``."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        import redis
        self.notes = redis.Redis.from_url(self.url)

    def fail_with(self, msg_id, cause):
        self.notes.rpush("fails", f"{msg_id} {cause.kind} {int(cause.record_caused)}")

        super().fail_with(msg_id, cause)


class Elsewhere(CustomStreamGrouping):
    """Routes each tuple to a target task in another worker than the emitter's (shuffled among
    them), so that no bolt task beside the spout ever gets one."""

    def prepare(self, context, stream, target_tasks):
        here = set(context.get_this_worker_tasks())
        self.targets = [t for t in target_tasks if t not in here]
        if not self.targets:
            raise RuntimeError(f"no task of {target_tasks} outside the emitter's worker {sorted(here)}")
        self.n = 0

    def choose_tasks(self, task_id, values):
        self.n += 1
        return [self.targets[self.n % len(self.targets)]]


class Check(Bolt):
    """Ends its worker's process on a poison value (noting ``<value> <pid>`` in ``deaths``
    first), as a native crash or the kernel's OOM killer would; pushes the others to ``out``."""

    def __init__(self, url: str) -> None:
        self.url = url

    def prepare(self, conf, context, collector):
        import redis
        super().prepare(conf, context, collector)
        self.r = redis.Redis.from_url(self.url, decode_responses=True)

    def execute(self, tup):
        value = tup.values[1]
        if value in POISON:
            self.r.rpush("deaths", f"{value} {os.getpid()}")
            os._exit(7)
        self.r.rpush("out", value)
        self.collector.ack(tup)


def _progress(r, master) -> str:
    deaths = collections.Counter(line.split()[0] for line in r.lrange("deaths", 0, -1))
    return (f"{r.xlen(f'{STREAM}:dead')} dead letters, {len(set(r.lrange('out', 0, -1)))} of {GOOD} good values "
            f"out, deaths per poison entry {dict(deaths)}, {r.xpending(STREAM, GROUP)['pending']} pending, "
            f"restarts per worker {[w['restarts'] for w in master.get_topology_info('poison')['workers']]}")


def poison_topology(url: str, r, good: int) -> tuple[dict, TopologyBuilder]:
    """Writes ``good`` values and the `POISON` ones among them to `STREAM`; returns each entry's
    id -> value, and the topology that reads them (its bolt only in the worker without the
    spout)."""
    values = [str(i) for i in range(good)]
    for k, value in enumerate(POISON):
        values.insert((k + 1) * good // (len(POISON) + 1), value)
    ids = {r.xadd(STREAM, {"payload": v}): v for v in values}
    b = TopologyBuilder()
    b.set_spout("events", NotesFailures(url, STREAM, GROUP, ["payload"], batch_size=50,
                                        backoff=RetryBackoff(0.0, 0.001, MAX_RETRIES, 0.01)))
    b.set_bolt("check", Check(url), 2).custom_grouping("events", Elsewhere())
    return ids, b


def check_poison_outcome(r, ids: dict, good: int) -> tuple[collections.Counter, collections.Counter,
                                                             collections.Counter]:
    """Asserts what a run of `poison_topology` must leave, on any host: every good value out, the
    poison entries alone dead-lettered and charged (each ``MAX_RETRIES + 1`` times, as deaths of
    the bolt's worker); returns the good values' outputs, the deaths and the failures per value."""
    out = collections.Counter(r.lrange("out", 0, -1))
    assert set(out) == {str(i) for i in range(good)}   # every good entry, at least once
    dead = [fields for _, fields in r.xrange(f"{STREAM}:dead")]
    assert sorted(ids[d["id"]] for d in dead) == sorted(POISON)   # never a good one
    for d in dead:
        cause = json.loads(d["cause"])
        assert cause["component"] == "check" and cause["kind"] == "worker-died", cause
        assert re.fullmatch(rf"failed {MAX_RETRIES + 1} times \(max_retries {MAX_RETRIES}\); last: its worker died "
                            rf"while \[check\] task \d+ executed it: exit status 7", d["error"]), d["error"]
    fails = [line.split() for line in r.lrange("fails", 0, -1)]
    charged = collections.Counter(ids[entry] for entry, _kind, caused in fails if caused == "1")
    assert charged == {value: MAX_RETRIES + 1 for value in POISON}, charged   # never a good entry
    assert {kind for _entry, kind, _caused in fails} <= {"worker-died", "worker-lost"}
    deaths = collections.Counter(line.split()[0] for line in r.lrange("deaths", 0, -1))
    emissions = collections.Counter(ids[entry] for entry, _kind, _caused in fails)   # each one ends in a failure
    for value in POISON:
        # every charged failure was a death; a copy of an emission failed as lost before it was
        # delivered (queued for the dead worker, then delivered to its next launch) may kill it
        # too, its root no longer pending: uncharged, and never more deaths than emissions
        assert MAX_RETRIES + 1 <= deaths[value] <= emissions[value], (value, deaths, emissions)
    return out, deaths, emissions


@pytest.mark.timeout(300)  # 4 to 6 crashes of one worker, restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
def test_poison_entries_that_kill_another_worker_are_charged_and_dead_lettered(
        crashing_cluster, redis_server):  # noqa: F811 - fixtures
    r = redis_server.client()
    ids, b = poison_topology(redis_server.url, r, GOOD)
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(300)  # no failure but the deaths
    with crashing_cluster.client() as master:
        master.submit_topology("poison", conf, b.create_topology())
        try:
            done = lambda: (r.xlen(f"{STREAM}:dead") == len(POISON) and r.xpending(STREAM, GROUP)["pending"] == 0
                            and len(set(r.lrange("out", 0, -1))) == GOOD)
            assert wait_until(done, 120), _progress(r, master)
            info = master.get_topology_info("poison")
        finally:
            master.kill_topology("poison", 0)

    out, deaths, emissions = check_poison_outcome(r, ids, GOOD)
    # the bolt's worker died once per death; the spout's never did
    restarts = sorted(w["restarts"] for w in info["workers"])
    assert restarts == [0, sum(deaths.values())], (info["workers"], deaths)
    print(f"deaths {dict(deaths)}, poison emissions {[emissions[v] for v in POISON]}, "
          f"good values out twice or more {sum(n > 1 for n in out.values())}")
