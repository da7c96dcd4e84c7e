"""Poison entries from a Redis stream under ``topology.bolt.fail.fast`` on the process host (2
worker processes): the bolt task that raises on them shares the spout's worker (local-or-shuffle
grouping), so each time it raises the spout's process dies with the counts it held. The retry
budget, kept beside the stream, outlives it: each poison entry reaches the dead-letter stream
after its death alone, every good entry reaches the output (duplicates counted), none is
dead-lettered or left charged, and the other worker never restarts
(tests/external/test_redis_stream_deaths.py on LocalCluster)."""

from __future__ import annotations

import pytest

from ..conftest import wait_until
from ..external import poison_fail_fast as p
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test

pytest.importorskip("redis", reason="needs the redis library")


@pytest.mark.timeout(300)  # a worker crashing in a row, restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
def test_poison_entries_that_kill_the_spouts_worker_are_dead_lettered_and_good_ones_are_out(
        crashing_cluster, redis_server):  # noqa: F811 - fixtures
    r = redis_server.client()
    ids = p.add_entries(r)
    with crashing_cluster.client() as master:
        master.submit_topology("poison", p.conf(workers=2), p.topology(redis_server.url, local=True))
        try:
            assert wait_until(lambda: p.done(r), 180), p.progress(r)
            info = master.get_topology_info("poison")
        finally:
            master.kill_topology("poison", 0)

    figures = p.check_outcome(r, ids)
    assert figures["good delivered again"] > 0, figures   # good entries were beside a poison one
    # each raise was in the spout's worker, and took it down: one restart of it per poison
    # delivery, none of the other worker
    assert {line.split()[1] for line in r.lrange("raised", 0, -1)} == {"1"}
    assert sum(w["restarts"] for w in info["workers"]) == figures["deaths"], (info["workers"], figures)


@pytest.mark.timeout(300)  # a worker crashing in a row, restarted after 0, 0.002, 0.004 ... s (QUICK_CRASH_BACKOFF)
def test_with_two_spout_tasks_in_one_worker_no_good_entry_is_charged_for_the_other_tasks_poison(
        crashing_cluster, redis_server):  # noqa: F811 - fixtures
    """Two tasks of the spout in one worker process, each with its own consumer: after a death,
    both replay their pending entries as suspects. A suspect goes out alone in the whole worker,
    not only among its own task's entries: were it alone only in its task, one task's good
    suspect would be in flight (or acked by the bolt, its spout's ack not yet in) when the other
    task's poison entry kills the worker, and would be charged that death; with max_retries 0
    that good entry is then dead-lettered. Every value is counted: each good one out, each
    poison one dead-lettered after its one death alone, no good one dead-lettered or charged."""
    r = redis_server.client()
    ids = p.add_entries(r)
    with crashing_cluster.client() as master:
        master.submit_topology("poison", p.conf(workers=1), p.topology(redis_server.url, spout_tasks=2))
        try:
            assert wait_until(lambda: p.done(r), 180), p.progress(r)
            info = master.get_topology_info("poison")
        finally:
            master.kill_topology("poison", 0)

    figures = p.check_outcome(r, ids)
    print("FIGURES", figures)
    assert len(r.xinfo_consumers(p.STREAM, p.GROUP)) == 2   # both tasks read entries
    assert figures["good delivered again"] > 0, figures
    assert sum(w["restarts"] for w in info["workers"]) == figures["deaths"], (info["workers"], figures)
