"""The user's pipeline on the process host, two workers, with a worker SIGKILLed mid-run: a Redis
Streams spout (``max_retries`` 3, a dead-letter stream) -> a stateful counter with its state in
Redis that raises on 5 malformed records among 1,200 -> a Redis sink. The kill rolls the
surviving counter's state back and fails what the dead worker held; whichever worker dies (the
spout's too, which starts afresh from the group's pending entries), no good record is
dead-lettered, each bad one is (with its cause), each good one is counted exactly once, and the
topology does not stall."""

from __future__ import annotations

import os
import signal

import pytest

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture
from ..state.rollback_pipeline import conf, feed, pipeline
from ..state.test_rollback_budget import BAD_AT, N, check_run, settled
from .recovery_topology import kill_a_worker_without

IN_FLIGHT = {"topology.max.spout.pending": 200}
"""Both runs keep 200 in flight and `conf`'s checkpoint interval (200 ms) and waits. After the
spout's worker dies, every entry it had pending (200 in flight plus a read batch of 50) comes
back a suspect; the counter acks only at a commit, so each group of suspects takes a whole
checkpoint cycle. Sent alone, one after the other (before `squall.external.retry.SUSPECT_GROUPS`),
that was ~250 suspects at ~0.22 s each, 55 s of the test's 58 (the test then ran with 50 in
flight and 20 ms checkpoints); in groups of 32, about 8 cycles."""


@pytest.mark.parametrize("victim", ["the other worker", "the spout's worker"])
def test_a_worker_sigkilled_mid_run_sends_no_good_record_to_the_dead_letters(cluster, redis_server, victim):  # noqa: F811
    r = redis_server.client()
    good, bad = feed(r, "events", N, BAD_AT)
    topo_conf = conf(redis_server.url, **IN_FLIGHT)
    with cluster.client() as m:
        m.submit_topology("t", topo_conf, pipeline(redis_server.url))
        assert wait_until(lambda: len(r.keys("out:*")) >= 200, 60), "the topology did not start"
        if victim == "the other worker":
            kill_a_worker_without(m, "t", "events")
        else:
            info = m.get_topology_info("t")
            port = next(iter(info["components"]["events"]["task_stats"].values()))["worker"]
            pid = next(w["pid"] for w in info["workers"] if int(w["slot"].rsplit(":", 1)[1]) == port)
            os.kill(pid, signal.SIGKILL)
        written_at_kill = len(r.keys("out:*"))
        assert wait_until(settled(r, N), 120), (r.xpending("events", "g")["pending"], r.xlen("events:dead"),
                                                len(r.keys("out:*")))
        m.kill_topology("t", wait_secs=0)
    assert written_at_kill < len(good), "the kill came after the run"
    check_run(r, redis_server, topo_conf, good, bad, (cluster.dir / "secret").read_bytes().strip())
