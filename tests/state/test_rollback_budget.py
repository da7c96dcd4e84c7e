"""A stateful bolt whose state rolls back, and records that reach the dead letters: only a record
that raised or was failed is charged to its retry budget; a rollback, which fails every record the
state took since its last commit whatever caused it, is not (`FailureCause` kind ``rollback``).
The pipeline of `rollback_pipeline`, against a real redis-server: a Redis Streams spout with
``max_retries`` and a dead-letter stream, a stateful counting bolt keeping its state in Redis, a
Redis sink."""

from __future__ import annotations

import os
import signal

from bench.redis_server import RedisServer, redis_server_binary
from squall import LocalCluster
from squall.state import StateHome, get_state, state_key

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture
from .rollback_pipeline import KEYS, FlakyPrepare, conf, dead_letters, expected_counts, feed, pipeline

SECRET = "a-secret-of-the-rollback-tests-0123"


class _Reader:
    """A context for reading the bolts' states from the test, under the cluster's ``secret``."""

    def __init__(self, secret: bytes) -> None:
        self.state_home = StateHome(key=state_key(secret))

    def get_this_component_id(self):
        return "(test)"

    def get_this_task_id(self):
        return -1


def committed(server, topo_conf: dict, secret: bytes = SECRET.encode()) -> dict:
    """Every ``count`` task's committed entries, merged."""
    entries: dict = {}
    for key in server.client().keys("t/count-*"):
        if "$" not in key:
            reader = _Reader(secret)
            entries.update(dict(get_state(key[2:], {**topo_conf, "topology.name": "t"}, reader).committed()))
    return entries


def events_failed(cluster) -> int:
    """How many tuples the Redis spout saw fail (its statistics)."""
    return next(s["failed"] for s in cluster.get_topology_page("t")["spouts"] if s["spoutId"] == "events")


def counts_of(entries: dict) -> dict:
    return {k[1]: v for k, v in entries.items() if k[0] == "count"}


def test_rollbacks_do_not_use_up_a_good_records_retry_budget(redis_server):  # noqa: F811
    """Three checkpoints fail (a state hook raises), each after the counter took records: each
    rolls the state back and fails those records, which replay. With ``max_retries`` 1, a
    record rolled back twice was past its budget: on main 50 to 64 of the 300 good records went
    to the dead letters in three runs ("failed 2 times (max_retries 1); last: failed in [count]
    task 5: the state of [count] task 5 rolled back ...")."""
    r = redis_server.client()
    n = 300
    good, _ = feed(r, "events", n, [])
    topo_conf = conf(redis_server.url, **{"topology.state.checkpoint.interval.ms": 100})
    with LocalCluster({"squall.secret": SECRET}) as cluster:
        cluster.submit_topology("t", topo_conf, pipeline(redis_server.url, max_retries=1, counter=FlakyPrepare(3)))

        def done():
            return (r.xpending("events", "g")["pending"] == 0
                    and len(dead_letters(r)) + len(r.keys("out:*")) >= n)
        assert wait_until(done, 60), (r.xpending("events", "g")["pending"], len(dead_letters(r)))
        errors = cluster.get_topology_info("t")["errors"]
        assert wait_until(lambda: events_failed(cluster) > 0, 30), "no record was rolled back"
        cluster.kill_topology("t", wait_secs=0)
    assert dead_letters(r) == {}
    entries = committed(redis_server, topo_conf)
    assert counts_of(entries) == expected_counts(n, [])  # every record counted exactly once
    assert {k[1] for k in entries if k[0] == "seen"} == set(good)
    assert any("the store refused prepare" in e["error"] for e in errors)


N = 1200
BAD_AT = [100, 400, 650, 900, 1100]
RAISED = "ValueError: invalid literal for int() with base 10: 'not-a-number'"


def check_run(r, server, topo_conf: dict, good: list[str], bad: list[str], secret: bytes = SECRET.encode()) -> None:
    """What must hold once every entry was acked or dead-lettered: each bad record dead-lettered
    once, with its cause; no good one; each good one written by the sink and counted once."""
    dead = dead_letters(r)
    assert set(dead) == set(bad), f"good records dead-lettered: {sorted(set(dead) & set(good))[:10]}"
    for entry, d in dead.items():
        assert d["error"].startswith("failed 4 times (max_retries 3); last: exception in [count] task "), d
        assert d["error"].endswith(RAISED) and d["fields"]["payload"] == "not-a-number"
        assert (d["cause"]["kind"], d["cause"]["component"], d["cause"]["error"]) == \
            ("exception", "count", "ValueError"), d
    assert {k.split(":", 1)[1] for k in r.keys("out:*")} == set(good)
    entries = committed(server, topo_conf, secret)
    assert counts_of(entries) == expected_counts(N, BAD_AT)  # each good record counted exactly once
    assert {k[1] for k in entries if k[0] == "seen"} == set(good)


def settled(r, n: int):
    """Nothing pending in the group and every entry written or dead-lettered."""
    return lambda: (r.xpending("events", "g")["pending"] == 0
                    and len(r.keys("out:*")) + r.xlen("events:dead") >= n)


def test_malformed_records_among_1200_are_dead_lettered_alone_and_each_good_one_is_counted_once(redis_server):  # noqa: F811
    """The user's pipeline on LocalCluster, two workers: 5 malformed records among 1,200. The
    counter raises on each, after changing its state. On main the exception crashed the worker
    (stateful bolts were fail-fast): the spout shared it, so its retry counts restarted with it
    and the malformed record never reached max_retries; the worker crash-looped with a growing
    backoff (13 crashes in 168 s), 0 of the 5 were dead-lettered and 684 of 1,195 good records
    were written. Now the execute's changes are undone, the record fails with its cause, and
    nothing else fails: 5 x 4 failures."""
    r = redis_server.client()
    good, bad = feed(r, "events", N, BAD_AT)
    topo_conf = conf(redis_server.url)
    with LocalCluster({"squall.secret": SECRET}) as cluster:
        cluster.submit_topology("t", topo_conf, pipeline(redis_server.url))
        assert wait_until(settled(r, N), 60), (r.xpending("events", "g")["pending"], r.xlen("events:dead"),
                                               len(r.keys("out:*")))
        # the statistics come a little later
        assert wait_until(lambda: events_failed(cluster) >= 4 * len(bad), 30), events_failed(cluster)
        crashes = [e for e in cluster.get_topology_info("t")["errors"] if e.get("fatal")]
        assert events_failed(cluster) == 4 * len(bad) and crashes == []
        cluster.kill_topology("t", wait_secs=0)
    check_run(r, redis_server, topo_conf, good, bad)


def test_a_state_store_that_stops_answering_charges_no_record(redis_server, tmp_path):  # noqa: F811
    """The counter's state lives on a Redis server of its own, which stops answering (SIGSTOP)
    while 14 good records arrive: every ``state.get`` in ``execute`` times out, so every record
    raises, again and again until the server answers (SIGCONT). The records are not at fault:
    no retry budget may count those failures. On main the savepoint path failed each as an
    ``"exception"`` of the counter, charged: with ``max_retries`` 1 the records went to the dead
    letters (4 to 5 of the 14 in three runs); Storm's crash charges none. Now the input fails as a ``"rollback"`` (what it changed is undone, as the
    state could not be read), and once the server answers each record is counted once."""
    binary = redis_server_binary()
    state_server = RedisServer(binary, tmp_path)  # the stream's server stays up: only the state stops
    state_server.start()
    try:
        r = redis_server.client()
        n = 14
        r.xgroup_create("events", "g", id="0", mkstream=True)
        topo_conf = {**conf(redis_server.url), "topology.state.provider.config": {"url": state_server.url,
                                                                                  "timeout": 200}}
        state = state_server.client()
        with LocalCluster({"squall.secret": SECRET}) as cluster:
            cluster.submit_topology("t", topo_conf, pipeline(redis_server.url, max_retries=1))
            # both counter tasks initialized and committed once: the state answered them
            assert wait_until(lambda: len(state.keys("t/count-*$txid")) == 2, 60), state.keys()
            os.kill(state_server.proc.pid, signal.SIGSTOP)
            try:
                good = [r.xadd("events", {"key": f"k{i % KEYS}", "payload": str(i)}) for i in range(n)]
                # more failures than the records' budgets hold (2 each): charged, some record
                # would be dead-lettered by now
                assert wait_until(lambda: events_failed(cluster) > 2 * n or r.xlen("events:dead") > 0, 60), \
                    events_failed(cluster)
            finally:
                os.kill(state_server.proc.pid, signal.SIGCONT)
            assert wait_until(settled(r, n), 60), (r.xpending("events", "g")["pending"], r.xlen("events:dead"))
            errors = [e["error"] for e in cluster.get_topology_info("t")["errors"]]
            cluster.kill_topology("t", wait_secs=0)
        assert dead_letters(r) == {}
        assert {k.split(":", 1)[1] for k in r.keys("out:*")} == set(good)
        entries = committed(state_server, topo_conf)
        assert counts_of(entries) == expected_counts(n, [])  # each record counted exactly once
        assert {k[1] for k in entries if k[0] == "seen"} == set(good)
        assert any("failed to read state" in e for e in errors), errors
    finally:
        state_server.stop()
