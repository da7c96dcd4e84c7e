"""A stateful bolt whose state rolls back, and records that reach the dead letters: only a record
that raised or was failed is charged to its retry budget; a rollback, which fails every record the
state took since its last commit whatever caused it, is not (`FailureCause` kind ``rollback``).
The pipeline of `rollback_pipeline`, against a real redis-server: a Redis Streams spout with
``max_retries`` and a dead-letter stream, a stateful counting bolt keeping its state in Redis, a
Redis sink."""

from __future__ import annotations

from squall import LocalCluster
from squall.state import StateHome, get_state, state_key

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture
from .rollback_pipeline import FlakyPrepare, conf, dead_letters, expected_counts, feed, pipeline

SECRET = "a-secret-of-the-rollback-tests-0123"


class _Reader:
    """A context for reading the bolts' states from the test."""

    state_home = StateHome(key=state_key(SECRET.encode()))

    def get_this_component_id(self):
        return "(test)"

    def get_this_task_id(self):
        return -1


def committed(server, topo_conf: dict) -> dict:
    """Every ``count`` task's committed entries, merged."""
    entries: dict = {}
    for key in server.client().keys("t/count-*"):
        if "$" not in key:
            entries.update(dict(get_state(key[2:], {**topo_conf, "topology.name": "t"}, _Reader()).committed()))
    return entries


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
        failed = cluster.get_topology_page("t")["spouts"][0]["failed"]
        cluster.kill_topology("t", wait_secs=0)
    assert dead_letters(r) == {}
    entries = committed(redis_server, topo_conf)
    assert counts_of(entries) == expected_counts(n, [])  # every record counted exactly once
    assert {k[1] for k in entries if k[0] == "seen"} == set(good)
    assert failed > 0, "no record was rolled back: the hook never failed a checkpoint that held one"
    assert any("the store refused prepare" in e["error"] for e in errors)
