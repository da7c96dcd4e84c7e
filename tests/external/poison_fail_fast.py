"""The topology of the poison tests under ``topology.bolt.fail.fast`` (tests/external/
test_redis_stream_deaths.py on LocalCluster, tests/process/test_poison_fail_fast.py on the
process host): a Redis Streams spout (one task, or several in one worker), and a bolt that notes each value it is given in
the list ``seen``, raises on a poison one (its worker dies, the spout with it) and pushes the
others to the list ``out``; and the checks of what came out."""

from __future__ import annotations

import collections
import json
import re

from squall import Bolt, TopologyBuilder
from squall.external.redis_streams import RedisStreamSpout, charges_key
from squall.external.retry import SUSPECT_GROUPS, RetryBackoff

from . import poison_file_fail_fast

conf = poison_file_fail_fast.conf   # the cluster's conf, one for both spouts

STREAM, GROUP = "events", "g"
GOOD = 1000
POISON = ("poison-a", "poison-b", "poison-c")
# No retry after a death alone: each further quick crash of the worker waits 1, 2, 4 ... s
# before its restart (squall.cluster.backoff), so a poison entry costs 3 crashes here, its
# first delivery among others, one in a group of suspects (SUSPECT_GROUPS) and one alone (tests/external/test_redis_stream_deaths.py has
# max_retries 3 without a cluster)
MAX_RETRIES = 0


class Check(Bolt):
    """Notes each value in ``seen``; raises on a poison one (noting it in ``raised`` with 1 if
    the spout's task is in this worker, else 0), else pushes it to ``out`` and acks."""

    def __init__(self, url: str) -> None:
        self.url = url

    def prepare(self, conf, context, collector):
        import redis
        super().prepare(conf, context, collector)
        self.r = redis.Redis.from_url(self.url, decode_responses=True)
        # whether the spout's task runs in this worker: then a raise here takes it down too
        self.beside_spout = bool(set(context.get_this_worker_tasks()) & set(context.get_component_tasks("events")))

    def execute(self, tup):
        value = tup.values[1]
        self.r.rpush("seen", value)
        if value in POISON:
            self.r.rpush("raised", f"{value} {int(self.beside_spout)}")
            raise RuntimeError(f"poison entry {value!r}")
        self.r.rpush("out", value)
        self.collector.ack(tup)


def add_entries(r) -> dict[str, str]:
    """Adds the good and poison values to the stream: entry id -> value."""
    values = [str(i) for i in range(GOOD)]
    for k, value in enumerate(POISON):
        values.insert((k + 1) * GOOD // (len(POISON) + 1), value)
    return {r.xadd(STREAM, {"payload": v}): v for v in values}


def topology(url: str, local: bool = False, spout_tasks: int = 1):
    """``spout_tasks`` tasks of the spout and 2 of the bolt (``local``: local-or-shuffle grouped)."""
    b = TopologyBuilder()
    b.set_spout("events", RedisStreamSpout(url, STREAM, GROUP, ["payload"], batch_size=50,
                                           backoff=RetryBackoff(0.0, 0.001, MAX_RETRIES, 0.01)), spout_tasks)
    bolt = b.set_bolt("check", Check(url), 2)
    (bolt.local_or_shuffle_grouping if local else bolt.shuffle_grouping)("events")
    return b.create_topology()


def dead_values(r) -> list[str]:
    """The values in the dead-letter stream, in its order."""
    return [json.loads(fields["fields"])["payload"] for _, fields in r.xrange(f"{STREAM}:dead")]


def done(r) -> bool:
    """Every value out or dead-lettered (`check_outcome` tells which should be which), nothing
    pending."""
    settled = set(r.lrange("out", 0, -1)) | set(dead_values(r))
    return len(settled) == GOOD + len(POISON) and r.xpending(STREAM, GROUP)["pending"] == 0


def progress(r) -> str:
    return (f"{r.xlen(f'{STREAM}:dead')} dead letters, {len(set(r.lrange('out', 0, -1)))} of {GOOD} good values "
            f"out, {r.llen('seen')} deliveries")


def check_outcome(r, ids: dict[str, str]) -> dict[str, int]:
    """Every good value out at least once, each poison one dead-lettered for its death alone,
    none charged still; returns the figures: duplicates out, good values delivered again,
    deaths."""
    out = collections.Counter(r.lrange("out", 0, -1))
    missing = {str(i) for i in range(GOOD)} - set(out)
    assert not missing, f"{len(missing)} good values never out: {sorted(missing, key=int)[:20]}"
    seen = collections.Counter(r.lrange("seen", 0, -1))
    dead = [fields for _, fields in r.xrange(f"{STREAM}:dead")]
    good_dead = sorted(ids[d["id"]] for d in dead if ids[d["id"]] not in POISON)
    assert not good_dead, f"{len(good_dead)} good values dead-lettered: {good_dead}"
    assert sorted(ids[d["id"]] for d in dead) == sorted(POISON)
    for d in dead:
        said = re.fullmatch(rf"failed {MAX_RETRIES + 1} times \(max_retries {MAX_RETRIES}\): delivered (\d+) times; "
                            rf"its worker died each of the {MAX_RETRIES + 1} times it was in flight alone", d["error"])
        assert said, d["error"]
        assert json.loads(d["cause"])["kind"] == "worker-lost"
        assert json.loads(d["fields"]) == {"payload": ids[d["id"]]}
        # its deaths: one alone, at most one in each level's group of suspects before it goes
        # alone (SUSPECT_GROUPS: none if another poison entry of its group killed the worker
        # first), and at most one among others (none if the first death, of another poison
        # entry, found it read and not yet emitted)
        assert MAX_RETRIES + 1 <= seen[ids[d["id"]]] <= MAX_RETRIES + 2 + len(SUSPECT_GROUPS) - 1, seen
    assert r.hlen(charges_key(STREAM, GROUP)) == 0   # every charge deleted with its entry
    again = {v for v, n in seen.items() if n > 1 and v not in POISON}
    return {"duplicates": sum(out.values()) - len(out), "good delivered again": len(again),
            "deaths": sum(seen[p] for p in POISON)}
