"""Nimbus HA's parts (`squall.cluster.ha`, `master_ha`, `seeds`): masters in this process on a real
ZooKeeper, and the leader discovery on its own."""

import asyncio
import logging
import threading

import pytest

from squall._config import cluster_conf
from squall._errors import NotLeaderException, SquallError
from squall._sealed import seal
from squall.cluster.client import MasterClient
from squall.cluster.ha import ClusterState, Coordinator, TopologyState, read_state, write_state
from squall.cluster.master import Master
from squall.cluster.seeds import LeaderLink, NimbusAddress, parse_seed
from squall.worker.calls import RemoteError, RpcError

from squall.ui.storm_json import topology_summary

from ..conftest import wait_until
from ..process.conftest import _free_ports
from ..process.recovery_topology import recovery_topology

SECRET = "ha-unit-test-secret-0123456789ab"


# --- finding the leader (no ZooKeeper) ----------------------------------------------------------
class _FakeMaster:
    """A master as `LeaderLink` sees it: answers get_leader with ``leader``; a follower refuses changes."""

    def __init__(self, me, leader, down=False):
        self.me, self.leader, self.down, self.calls = me, leader, down, []

    def link(self):
        if self.down:
            raise RpcError(f"cannot reach {self.me}: Connection refused")
        return self

    def call(self, op, **args):
        self.calls.append(op)
        if op == "get_leader":
            return None if self.leader is None else {"host": self.leader.host, "port": self.leader.port}
        if self.leader != self.me:
            raise RemoteError(f"not a leader, current leader is {self.leader}", "NotLeaderException")
        return f"{op} done by {self.me}"

    def close(self):
        pass


def test_a_seed_is_a_host_or_host_and_port():
    assert parse_seed("nimbus1", 6627) == ("nimbus1", 6627)
    assert parse_seed("localhost:7000", 6627) == ("127.0.0.1", 7000)
    with pytest.raises(ValueError, match="'x:http'"):
        parse_seed("x:http", 6627)


def test_the_leader_is_found_through_the_seeds_and_a_refusal_is_sent_to_it():
    a, b, c = (NimbusAddress("127.0.0.1", p) for p in (1, 2, 3))
    masters = {a: _FakeMaster(a, c, down=True), b: _FakeMaster(b, c), c: _FakeMaster(c, c)}
    link = LeaderLink([a, b, c], lambda addr: masters[addr].link())
    assert link.call("kill") == f"kill done by {c}"  # a is down, b names c
    assert link.address == c
    # the leader moves to b: c refuses, naming b, and the call goes to b
    for m in masters.values():
        m.leader = b
    assert link.call("kill") == f"kill done by {b}"
    # every seed down: Storm's message, naming the seeds
    for m in masters.values():
        m.down = True
    link.close()
    with pytest.raises(RpcError, match=r"Could not find leader nimbus from seed hosts \['127.0.0.1:1'"):
        link.find()


def test_while_no_master_leads_a_call_fails_as_an_unreachable_master_does():
    a, b = NimbusAddress("127.0.0.1", 1), NimbusAddress("127.0.0.1", 2)
    masters = {a: _FakeMaster(a, None), b: _FakeMaster(b, None)}
    link = LeaderLink([a, b], lambda addr: masters[addr].link())
    with pytest.raises(RpcError, match="Could not find a nimbus leader"):
        link.call("heartbeat")


# --- masters on ZooKeeper -------------------------------------------------------------------------
class _Running:
    """A `Master` serving in a thread of this process, until `stop`."""

    def __init__(self, conf):
        self.master = Master(conf)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(),), daemon=True)
        self.thread.start()
        assert self._ready.wait(20)

    async def _main(self):
        self.task = asyncio.current_task()
        ready = asyncio.Event()
        serve = asyncio.ensure_future(self.master.serve(ready))
        await ready.wait()
        self._ready.set()
        try:
            await serve
        except asyncio.CancelledError:
            serve.cancel()

    @property
    def address(self):
        return NimbusAddress("127.0.0.1", self.master.port)

    def stop(self):
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(15)


@pytest.fixture
def ha_conf(tmp_path, zookeeper):
    def conf(name, **extra):
        return cluster_conf({"squall.secret": SECRET, "storm.zookeeper.servers": [zookeeper.address],
                             "storm.zookeeper.root": f"/storm-{tmp_path.name}", "storm.zookeeper.session.timeout": 2000,
                             "storm.local.dir": str(tmp_path / name), "nimbus.thrift.port": 0, **extra})
    return conf


@pytest.fixture
def running():
    started = []

    def start(conf):
        started.append(_Running(conf))
        return started[-1]
    yield start
    for r in started:
        r.stop()


def _client(*masters):
    return MasterClient(cluster_conf({"squall.secret": SECRET, "nimbus.seeds": [str(m.address) for m in masters]}))


def test_a_master_that_lacks_code_does_not_take_the_lead_until_it_fetched_it(ha_conf, running):
    """The only master that holds a topology's code stops; a new master wins the election alone
    but lacks the code, so it leaves the election (no leader, changes refused); once a master
    that holds the code is back, it leads, and the new one fetches the code and follows."""
    a = running(ha_conf("a"))
    assert wait_until(lambda: a.master.leading, 10)
    with _client(a) as m:
        m.submit_topology("t", {}, recovery_topology(10), initial_status="INACTIVE")
    a.stop()
    b = running(ha_conf("b"))
    assert wait_until(lambda: not b.master.ha.in_election, 10), "it stayed in the election without the code"
    # b learns of a's latch node going (a's session closed) by a ZooKeeper watch, which may come
    # a moment after b left the election itself: until then b still names a as the leader
    assert wait_until(lambda: b.master.op_get_leader() is None, 10), b.master.op_get_leader()
    assert not b.master.leading
    with pytest.raises(NotLeaderException, match="no master leads yet"):
        b.master._assert_leader()
    a2 = running(ha_conf("a"))  # the same storm.local.dir: it holds the code
    assert wait_until(lambda: a2.master.leading, 10)
    assert wait_until(lambda: b.master.ha.in_election and "t" in b.master.topologies, 10)
    assert not b.master.leading
    assert [n["status"] for n in sorted(b.master.op_nimbuses(), key=lambda n: n["port"] != a2.master.port)][:2] \
        == ["Leader", "Not a Leader"]
    with _client(b, a2) as m:  # b first: the client asks it, and goes to the leader it names
        assert [t["name"] for t in m.list_topologies()] == ["t"]
        m.kill_topology("t", wait_secs=0)
    assert wait_until(lambda: not b.master.topologies and not list((b.master.local_dir).glob("*.plan")), 10)


def test_a_submission_waits_until_enough_masters_hold_its_code(ha_conf, running, caplog):
    a = running(ha_conf("a", **{"topology.max.replication.wait.time.sec": 1}))
    assert wait_until(lambda: a.master.leading, 10)
    with caplog.at_level(logging.WARNING, "squall.master"), _client(a) as m:
        m.submit_topology("alone", {"topology.min.replication.count": 2}, recovery_topology(10), "INACTIVE")
    assert "is on 1 of the 2 masters" in caplog.text  # waited its second, then started anyway
    b = running(ha_conf("b"))
    assert wait_until(lambda: b.master.ha.in_election, 10)
    with _client(a) as m:
        storm_id = m.submit_topology("replicated", {"topology.min.replication.count": 2,
                                                    "topology.max.replication.wait.time.sec": -1},
                                     recovery_topology(10), "INACTIVE")
    assert len(a.master.ha.holders(storm_id, a.master.topologies["replicated"].code)) == 2
    assert (b.master.local_dir / f"{storm_id}.plan").exists()
    rows = topology_summary(a.master.op_cluster_info())["topologies"]  # the UI's replicationCount
    assert {t["name"]: t["replicationCount"] for t in rows} == {"alone": 2, "replicated": 2}


def test_a_master_that_cannot_reach_zookeeper_says_so(tmp_path):
    (port,) = _free_ports(1)
    conf = cluster_conf({"squall.secret": SECRET, "storm.zookeeper.servers": [f"127.0.0.1:{port}"],
                         "storm.zookeeper.connection.timeout": 500, "storm.local.dir": str(tmp_path)})
    with pytest.raises(SquallError, match=rf"cannot reach ZooKeeper at 127.0.0.1:{port} \(storm.zookeeper.servers\) "
                                          r"within 0.5 s \(storm.zookeeper.connection.timeout\)"):
        Master(conf)


def test_what_is_read_from_zookeeper_must_carry_the_cluster_seal(ha_conf, caplog):
    """Forged nodes (another secret, no seal, a sealed value moved to another node, a sealed
    value of the wrong shape) are skipped with a warning naming them; nothing is unpickled."""
    ha = Coordinator(ha_conf("forge", **{"storm.zookeeper.root": "/forge"}), SECRET.encode())
    try:
        base = {"name": "real", "status": "ACTIVE", "previous": None, "launched": 1.0, "pending_action": None,
                "debug": {}, "code": "abc"}
        write_state(ha, ClusterState(1, {"real-1-1": TopologyState("real-1-1", base, {"assignment": {}, "slots": {}},
                                                                    [], {})},
                                     {"sup": {"host": "127.0.0.1", "ports": [6700], "since": 1.0}}))
        data, _ = ha.zk.get(ha.path("storms", "real-1-1"))
        ha.zk.create(ha.path("storms", "moved-1-1"), data)  # a genuine value, under another path
        ha.zk.create(ha.path("storms", "foreign-1-1"),
                     seal(b"x" * 32, b"zk " + ha.path("storms", "foreign-1-1").encode(), b"{}"))
        ha.zk.create(ha.path("storms", "plain-1-1"), b'{"name": "plain"}')
        ha.zk.create(ha.path("storms", "shape-1-1"),
                     ha._seal(ha.path("storms", "shape-1-1"), {**base, "status": "RUNNING"}))
        ha.zk.create(ha.path("supervisors", "bad"), ha._seal(ha.path("supervisors", "bad"), {"host": 1, "ports": "x"}))
        with caplog.at_level(logging.WARNING, "squall.master"):
            state = read_state(ha)
        assert set(state.topologies) == {"real-1-1"} and set(state.supervisors) == {"sup"}
        for node, why in (("moved-1-1", "sealed as"), ("foreign-1-1", "its MAC does not match"),
                          ("plain-1-1", "not a sealed squall file"), ("shape-1-1", "not a topology status"),
                          ("supervisors/bad", "not a supervisor's host")):
            assert any(node in r.getMessage() and why in r.getMessage() for r in caplog.records), (node, caplog.text)
    finally:
        ha.delete("/forge")
        ha.close()


def test_a_leader_stopped_cleanly_hands_the_lead_over_at_once(ha_conf, running):
    """Stopping the leader ends its ZooKeeper session, so the follower leads without waiting for
    the session timeout; writes go to it through the seeds, and reads work on it."""
    a = running(ha_conf("a", **{"storm.zookeeper.session.timeout": 30000}))
    assert wait_until(lambda: a.master.leading, 10)
    b = running(ha_conf("b", **{"storm.zookeeper.session.timeout": 30000}))
    with _client(a, b) as m:
        m.submit_topology("t", {}, recovery_topology(10), "INACTIVE")
    assert wait_until(lambda: "t" in b.master.topologies, 10)
    a.stop()
    assert wait_until(lambda: b.master.leading, 10), "the follower waited for the 30 s session timeout"
    with _client(a, b) as m:
        m.activate("t")
        assert m.list_topologies()[0]["status"] == "ACTIVE"
