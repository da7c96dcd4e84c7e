"""Trident exactly once on a Nimbus HA process cluster: three masters (``squall nimbus
--no-supervisor``) on a real ZooKeeper, a supervisor and two worker processes, and the two
word counts of `redis_word_counts` (a transactional spout into a TransactionalMap, an opaque
one into an OpaqueMap, over a real redis-server) whose commit of txid 10 is held until the test
has made the cluster fail: the leader SIGKILLed, ZooKeeper stopped, the leader cut off from
ZooKeeper. Every word of both states is compared with the input's counts afterwards."""

from __future__ import annotations

import signal
import time

import pytest

from squall._errors import RemoteError
from squall.testing import shared_state_dir

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - a real redis-server per test
from ..tcp_proxy import TcpProxy
from ..trident.exactly_once import counted, held_pid, redis_counts, redis_word_counts, totals
from .test_nimbus_ha import HaCluster

redis = pytest.importorskip("redis")
pytest.importorskip("kazoo")

CONF = {"topology.workers": 2, "topology.max.spout.pending": 3, "topology.message.timeout.secs": 5,
        "topology.trident.batch.emit.interval.millis": 50}




class Run:
    """`redis_word_counts` submitted as ``wc`` to ``cluster``, its commit of txid 10 held."""

    def __init__(self, cluster, redis_url, tmp_path) -> None:
        self.cluster = cluster
        self.hold = tmp_path / "hold"
        self.hold.mkdir()
        with shared_state_dir(tmp_path / "shared"):
            self.run = redis_word_counts(redis_url, self.hold)
        self.client = redis.Redis.from_url(redis_url)
        self.expected = counted(self.run.text)
        assert wait_until(lambda: cluster.leader() is not None, 20), "no master took the lead"
        with cluster.client() as m:
            m.submit_topology("wc", CONF, self.run.topology)
        assert wait_until(lambda: held_pid(self.hold) is not None, 90), redis_counts(self.client)
        self.at_hold = totals(redis_counts(self.client))

    def release(self) -> None:
        (self.hold / "release").write_text("")

    def exact(self, what: str) -> list[int]:
        """Wait until both states hold every word, compare them whole, and return each worker's
        restarts."""
        total = sum(self.expected.values())
        started = time.monotonic()
        assert wait_until(lambda: min(totals(redis_counts(self.client)).values()) >= total, 120), \
            (totals(redis_counts(self.client)), total)
        assert redis_counts(self.client) == {"transactional": self.expected, "opaque": self.expected}
        assert min(self.at_hold.values()) < total  # the failure came before the last batch
        with self.cluster.client() as m:
            restarts = [w["restarts"] for w in m.get_topology_info("wc")["workers"]]
        print(f"\nNimbus HA, {what}: {total} words sent, both states exact "
              f"{time.monotonic() - started:.1f} s after; worker restarts {restarts}")
        return restarts


def _cannot_reach_zookeeper(cluster, i) -> bool:
    """Whether master ``i`` answers at once that it cannot reach ZooKeeper."""
    try:
        cluster.call(i, "get_leader")
    except RemoteError as e:
        return "cannot reach ZooKeeper" in str(e)
    except Exception:  # noqa: BLE001 (no answer within the call's timeout)
        return False
    return False


def test_counts_are_exact_when_the_leader_is_sigkilled_mid_commit(tmp_path, zookeeper, redis_server):  # noqa: F811
    c = HaCluster(tmp_path, zookeeper)
    try:
        r = Run(c, redis_server.url, tmp_path)
        first = c.leader()
        c.masters[first].send_signal(signal.SIGKILL)
        c.masters[first].wait(5)
        r.release()
        r.exact("the leader SIGKILLed in a commit")
        assert c.leader() not in (None, first)
    finally:
        c.stop()


def test_counts_are_exact_when_zookeeper_stops_mid_commit_and_every_master_answers_meanwhile(
        tmp_path, own_zookeeper, redis_server):  # noqa: F811
    """ZooKeeper stopped while a commit is held, then the commit released: every master, the
    leader included, answers at once that it cannot reach ZooKeeper (the leader's event loop
    used to wait in a ZooKeeper request for as long as ZooKeeper was away, answering no one)
    and the leader logs that it lost the lead; ZooKeeper started again, both counts are exact."""
    c = HaCluster(tmp_path, own_zookeeper)
    try:
        r = Run(c, redis_server.url, tmp_path)
        leader = c.leader()
        own_zookeeper.stop()
        r.release()
        for i in range(3):
            assert wait_until(lambda i=i: _cannot_reach_zookeeper(c, i), 15), f"master {i} does not answer"
        assert wait_until(lambda: "lost the lead" in (tmp_path / f"master{leader}.log").read_text(), 15)
        own_zookeeper.start()
        r.exact("ZooKeeper stopped in a commit and started again")
    finally:
        c.stop()


def test_counts_are_exact_and_no_worker_restarts_when_the_leader_is_cut_off_from_zookeeper_mid_commit(
        tmp_path, zookeeper, redis_server):  # noqa: F811
    """The leader's link to ZooKeeper goes silent (a proxy drops every byte) while a commit is
    held, then the commit released: the master coordinator's next save, in flight on the leader
    as its link fails, goes to the next leader (it used to reach the worker as a bare
    RemoteError, and crashed it); no worker restarts and both counts are exact."""
    class Proxied(HaCluster):
        """Master 0, the first up and so the leader, reaches ZooKeeper through ``proxy``."""

        def master_conf(self, i):
            conf = super().master_conf(i)
            return {**conf, "storm.zookeeper.servers": [proxy.address]} if i == 0 else conf

    with TcpProxy(zookeeper.port) as proxy:
        c = Proxied(tmp_path, zookeeper)
        try:
            r = Run(c, redis_server.url, tmp_path)
            assert c.leader() == 0
            proxy.blackhole()
            r.release()
            restarts = r.exact("the leader cut off from ZooKeeper in a commit")
            assert c.leader() not in (None, 0)
            assert restarts == [0, 0]
        finally:
            c.stop()
