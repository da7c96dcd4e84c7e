"""Exactly once on the process host (`squall nimbus --host process` as a subprocess, 2 workers):
two Trident word counts in one topology, a transactional spout into a TransactionalMap and an
opaque spout into an OpaqueMap, both over a real redis-server, store exactly the input's counts,
every word compared, when the worker in the middle of a commit (after the state's writes) is
SIGKILLed, and when the master is SIGKILLed during that commit and started again. A `HeldCommit`
state holds the commit until the test has killed, so the kill always lands inside a batch. The
coordinator's progress and the spouts' metadata live in the master's transactional state, so a
restarted worker resumes at its txid."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from squall.testing import shared_state_dir

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..trident.exactly_once import (
    RedisRun,
    Replays,
    counted,
    held_pid,
    redis_counts,
    redis_word_counts,
    replays,
    totals,
)

redis = pytest.importorskip("redis")

CONF = {"topology.workers": 2, "topology.max.spout.pending": 3, "topology.message.timeout.secs": 5,
        "topology.trident.batch.emit.interval.millis": 50}


@dataclass(frozen=True)
class Prepared:
    """A `redis_word_counts` run made for a test: the run, a client of its Redis, the expected
    counts and the directory of its held commit."""

    run: RedisRun
    client: Any
    expected: dict[str, int]
    hold: Path

    def held_pid(self) -> int:
        """The pid of the worker holding its commit of txid 10, once one does."""
        assert wait_until(lambda: held_pid(self.hold) is not None, 60), redis_counts(self.client)
        return held_pid(self.hold)

    def totals(self) -> dict[str, int]:
        """Words stored per state now."""
        return totals(redis_counts(self.client))


def prepared(redis_server, tmp_path) -> Prepared:  # noqa: F811 - the fixture
    """`redis_word_counts` into ``redis_server``, its shared files under ``tmp_path``."""
    hold = tmp_path / "hold"
    hold.mkdir()
    with shared_state_dir(tmp_path / "shared"):
        run = redis_word_counts(redis_server.url, hold)
    return Prepared(run, redis.Redis.from_url(redis_server.url), counted(run.text), hold)


def started(cluster, redis_server, tmp_path, name):  # noqa: F811 - the fixture
    """`prepared`, submitted as ``name``; returns it and the pid holding the commit, once held."""
    p = prepared(redis_server, tmp_path)
    with cluster.client() as m:
        m.submit_topology(name, CONF, p.run.topology)
    return p, p.held_pid()


def exact(p: Prepared, what: str, host: str = "process host") -> dict[str, Replays]:
    """Wait until both states hold every word, then compare them whole; print the figures and
    return each spout's `Replays`."""
    client, expected, run = p.client, p.expected, p.run
    total = sum(expected.values())
    assert wait_until(lambda: min(totals(redis_counts(client)).values()) >= total, 120), \
        (totals(redis_counts(client)), total)
    counts = redis_counts(client)
    assert counts == {"transactional": expected, "opaque": expected}
    seen = {kind: replays(log) for kind, log in run.attempts.items()}
    for kind, r in seen.items():
        print(f"{host}, {what}: {kind} spout -> {kind} map: {total} words sent, {sum(counts[kind].values())} "
              f"stored; {r.batches} batches, {r.replayed_batches} replayed ({r.extra_attempts} extra attempts)")
    return seen


def test_counts_are_exact_after_the_persisting_worker_is_sigkilled_in_a_commit(cluster, redis_server,  # noqa: F811
                                                                                tmp_path):
    p, pid = started(cluster, redis_server, tmp_path, "wc-worker-kill")
    with cluster.client() as m:
        victim = next(w for w in m.get_topology_info("wc-worker-kill")["workers"] if w["pid"] == pid)
        os.kill(pid, signal.SIGKILL)  # in the middle of its commit of txid 10, after the writes
        at_kill = p.totals()
        seen = exact(p, f"persisting worker SIGKILLed at {at_kill}")
        after = {w["slot"]: w for w in m.get_topology_info("wc-worker-kill")["workers"]}[victim["slot"]]
        assert after["pid"] != pid, "the killed worker was not restarted"
        m.kill_topology("wc-worker-kill", wait_secs=0)
    assert min(at_kill.values()) < sum(p.expected.values())
    assert max(r.replayed_batches for r in seen.values()) >= 1, seen


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


GIVE_UP_SOON = {"storm.zookeeper.retry.times": 2, "storm.zookeeper.retry.interval": 500}
"""The workers' tries of a master that does not answer (`squall._transactional.MasterBackend`):
3 over 1 s instead of the default 6 over 5 s, which the master-kill test waited for."""


def test_counts_are_exact_after_the_master_is_sigkilled_and_started_again(redis_server, tmp_path):  # noqa: F811
    """The master SIGKILLed while a commit is held; then the commit goes on, and the master
    coordinator, which saves its progress with the master before it emits, cannot: its worker
    stops (after storm.zookeeper.retry.times, here `GIVE_UP_SOON`). The master started again,
    that worker is restarted, resumes at the txid it had not recorded as committed, and replays it."""
    from .conftest import Cluster
    cluster = Cluster(tmp_path, **GIVE_UP_SOON)
    try:
        p, _ = started(cluster, redis_server, tmp_path, "wc-master-kill")
        with cluster.client() as m:
            info = m.get_topology_info("wc-master-kill")
        coordinator_ports = {st["worker"] for st in info["components"]["$mastercoord-bg0"]["task_stats"].values()}
        coordinator = next(w["pid"] for w in info["workers"] if w["port"] in coordinator_ports)
        cluster.master.send_signal(signal.SIGKILL)
        cluster.master.wait(5)
        at_kill = p.totals()
        (tmp_path / "hold" / "release").write_text("")
        assert wait_until(lambda: not alive(coordinator), 60), "the coordinator went on without the master"
        cluster.start_master()
        seen = exact(p, f"master SIGKILLed at {at_kill}")
        with cluster.client() as m:
            m.kill_topology("wc-master-kill", wait_secs=0)
    finally:
        cluster.stop()
    assert min(at_kill.values()) < sum(p.expected.values())
    assert max(r.replayed_batches for r in seen.values()) >= 1, seen
