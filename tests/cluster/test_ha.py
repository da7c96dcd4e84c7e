"""Nimbus HA's parts (`squall.cluster.ha`, `master_ha`, `seeds`): masters in this process on a real
ZooKeeper, and the leader discovery on its own."""

import asyncio
import contextlib
import json
import logging
import threading
import time

import pytest

from squall._config import cluster_conf
from squall._errors import NotLeaderException, SquallError
from squall._nimbus import MasterAddress
from squall._sealed import seal
from squall.cluster.client import MasterClient
from squall.cluster.ha import ClusterState, Coordinator, TopologyRecord, read_state, write_state
from squall.cluster.master import Master
from squall.cluster.seeds import LeaderLink, NimbusAddress, parse_seed
from squall.cluster.server import MasterServer
from squall.ui.storm_json import topology_summary
from squall._errors import RemoteError, RpcError
from squall._wire import Client

from ..conftest import wait_until
from ..ports import free_ports
from ..process.recovery_topology import recovery_topology
from ..tcp_proxy import TcpProxy

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


def test_a_seed_that_knows_no_leader_does_not_hide_the_next_ones():
    """A master cut off from ZooKeeper knows no leader; the client asked no further, and never
    reached the master that leads (Storm's NimbusClient goes on to the next seed)."""
    a, b, c = (NimbusAddress("127.0.0.1", p) for p in (1, 2, 3))
    masters = {a: _FakeMaster(a, None), b: _FakeMaster(b, c), c: _FakeMaster(c, c)}
    link = LeaderLink([a, b, c], lambda addr: masters[addr].link())
    assert link.call("kill") == f"kill done by {c}"

    class CutOff(_FakeMaster):
        def call(self, op, **args):
            if op == "get_leader":
                raise RemoteError("this master cannot reach ZooKeeper: it does not know who leads", "NotLeaderException")
            return super().call(op, **args)
    masters[a] = CutOff(a, None)
    link.close()
    assert link.find() == c


def test_a_master_a_call_could_not_reach_is_asked_last_who_leads_now():
    """A partition cuts the leader off, dropping its packets: a call to it times out, and so does
    every connect to it, each after the whole timeout. The link asked the seeds who leads in
    their order, the unreachable master (the first seed) first, and called it again at each
    next call while another master led: a supervisor's syncs reached the new leader only after
    its ``nimbus.supervisor.timeout.secs``, which moved every worker of the cluster, and a
    Trident coordinator's save waited past the message timeout ("stuck?" in user code)."""
    a, b, c = (NimbusAddress("127.0.0.1", p) for p in (1, 2, 3))

    class Partitioned(_FakeMaster):
        def call(self, op, **args):
            if self.down:  # the connection made before the cut: its call times out
                raise RpcError(f"connection to {self.me} lost: timed out")
            return super().call(op, **args)
    masters = {a: Partitioned(a, a), b: _FakeMaster(b, a), c: _FakeMaster(c, a)}
    tried = []

    def connect(address):
        tried.append(address)
        return masters[address].link()
    link = LeaderLink([a, b, c], connect)
    assert link.call("kill") == f"kill done by {a}"
    masters[a].down = True
    # the election is not over: b still names a, which does not answer
    tried.clear()
    with pytest.raises(RpcError, match="cannot reach 127.0.0.1:1"):
        link.call("heartbeat")
    assert tried == [b, a], tried
    # c leads now: a is not waited for again before the seeds that answer name c
    for m in masters.values():
        m.leader = c
    tried.clear()
    assert link.call("kill") == f"kill done by {c}"
    assert tried == [b, c], tried
    tried.clear()
    assert link.call("kill") == f"kill done by {c}"
    assert tried == [], tried


def test_while_no_master_leads_a_call_fails_as_an_unreachable_master_does():
    a, b = NimbusAddress("127.0.0.1", 1), NimbusAddress("127.0.0.1", 2)
    masters = {a: _FakeMaster(a, None), b: _FakeMaster(b, None)}
    link = LeaderLink([a, b], lambda addr: masters[addr].link())
    with pytest.raises(RpcError, match="Could not find a nimbus leader"):
        link.call("heartbeat")


# --- masters on ZooKeeper -------------------------------------------------------------------------
class _Running:
    """A `Master` (``master``, else one of ``conf``) serving in a thread of this process, until `stop`."""

    def __init__(self, conf, master=None):
        self.master = master or Master(conf)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(),), daemon=True)
        self.thread.start()
        assert self._ready.wait(20)

    async def _main(self):
        self.task = asyncio.current_task()
        ready = asyncio.Event()
        serve = asyncio.ensure_future(MasterServer(self.master).serve(ready))
        await ready.wait()
        self._ready.set()
        try:
            await serve
        except asyncio.CancelledError:
            serve.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serve  # its stop: the connections closed, then the election's session

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


def _client(*masters, **settings):
    return MasterClient(cluster_conf({"squall.secret": SECRET, "nimbus.seeds": [str(m.address) for m in masters],
                                      **settings}))


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
        b.master.election.assert_leader()
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


def test_a_follower_leads_with_the_rebalanced_counts_when_the_leader_dies_after_a_rebalance(ha_conf, running):
    """A rebalance made new code that only the leader held: a follower that won the election
    lacked it and left, and no master led until the dead one came back."""
    a = running(ha_conf("a", **{"supervisor.slots.ports": []}))
    assert wait_until(lambda: a.master.leading, 10)
    b = running(ha_conf("b", **{"supervisor.slots.ports": []}))
    assert wait_until(lambda: b.master.ha.in_election, 10)
    with _client(a, b, **{"storm.nimbus.retry.times": 0}) as m:
        m.submit_topology("t", {"topology.min.replication.count": 2, "topology.workers": 1},
                          recovery_topology(10), "INACTIVE")
        m.rebalance("t", num_workers=2, executors={"sink": 1}, wait_secs=0)
    parallelism = a.master.topologies["t"].plan.parallelism
    assert parallelism["sink"] == 1
    a.stop()
    assert wait_until(lambda: b.master.leading, 15), "the follower lacked the code and left the election"
    plan = b.master.topologies["t"].plan
    assert (plan.num_workers, plan.parallelism) == (2, parallelism)
    with _client(b) as m:
        m.kill_topology("t", wait_secs=0)


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


def test_a_submission_waits_for_replication_beyond_the_clients_timeout(ha_conf, running):
    """A submission that waits for replication (``topology.max.replication.wait.time.sec``, with
    too few masters to reach ``topology.min.replication.count``) outlives the client's own
    timeout: the call waits that long beyond it, rather than tell the user the submission failed
    while the topology starts when the wait ends all the same. (The client's timeout is what the
    master's own work after the wait must fit in: 0.5 s flaked on a loaded machine.)"""
    a = running(ha_conf("a"))
    assert wait_until(lambda: a.master.leading, 10)
    conf = cluster_conf({"squall.secret": SECRET, "nimbus.seeds": [str(a.address)]})
    with MasterClient(conf, timeout=2.0) as m:
        started = time.monotonic()
        m.submit_topology("t", {"topology.min.replication.count": 2, "topology.max.replication.wait.time.sec": 3},
                          recovery_topology(10), "INACTIVE")
        assert time.monotonic() - started >= 3.0   # past the client's 2 s: it waited out the replication
        assert [t["name"] for t in m.list_topologies()] == ["t"]


def test_a_master_that_cannot_reach_zookeeper_says_so(tmp_path):
    (port,) = free_ports(1)
    conf = cluster_conf({"squall.secret": SECRET, "storm.zookeeper.servers": [f"127.0.0.1:{port}"],
                         "storm.zookeeper.connection.timeout": 500, "storm.local.dir": str(tmp_path)})
    with pytest.raises(SquallError, match=rf"cannot reach ZooKeeper at 127.0.0.1:{port} \(storm.zookeeper.servers\) "
                                          r"within 0.5 s \(storm.zookeeper.connection.timeout\)"):
        Master(conf)


def test_what_is_read_from_zookeeper_must_carry_the_cluster_seal(ha_conf, caplog):
    """Forged nodes (another secret, no seal, a sealed value moved to another node, one sealed
    without its node's version, an old value in a node made again, a sealed value of the wrong
    shape) are skipped with a warning naming them and why; nothing is unpickled."""
    ha = Coordinator(ha_conf("forge", **{"storm.zookeeper.root": "/forge"}), SECRET.encode())
    try:
        base = {"name": "real", "status": "ACTIVE", "previous": None, "launched": 1.0, "pending_action": None,
                "debug": {}, "code": "abc"}
        write_state(ha, ClusterState(1, {"real-1-1": TopologyRecord("real-1-1", base, {"assignment": {}, "slots": {}},
                                                                    [], {})},
                                     {"sup": {"host": "127.0.0.1", "ports": [6700], "since": 1.0}}))
        data, _ = ha.zk.get(ha.path("storms", "real-1-1"))
        ha.zk.create(ha.path("storms", "moved-1-1"), data)  # a genuine value, under another path
        ha.zk.create(ha.path("storms", "foreign-1-1"),
                     seal(b"x" * 32, b"zk " + ha.path("storms", "foreign-1-1").encode(), b"{}"))
        ha.zk.create(ha.path("storms", "plain-1-1"), b'{"name": "plain"}')
        ha.zk.create(ha.path("storms", "legacy-1-1"),  # as a squall before versions sealed them
                     seal(SECRET.encode(), b"zk " + ha.path("storms", "legacy-1-1").encode(),
                          json.dumps({**base, "name": "legacy"}).encode()))
        ha.write(ha.path("storms", "remade-1-1"), {**base, "name": "remade"})
        remade, _ = ha.zk.get(ha.path("storms", "remade-1-1"))
        ha.zk.delete(ha.path("storms", "remade-1-1"))
        ha.zk.create(ha.path("storms", "remade-1-1"), remade)  # deleted, made again with its old value
        ha.write(ha.path("storms", "shape-1-1"), {**base, "status": "RUNNING"})
        ha.write(ha.path("supervisors", "bad"), {"host": 1, "ports": "x"})
        with caplog.at_level(logging.WARNING, "squall.master"):
            state = read_state(ha)
        assert set(state.topologies) == {"real-1-1"} and set(state.supervisors) == {"sup"}
        for node, why in (("moved-1-1", "a value of node /forge/storms/real-1-1 moved here"),
                          ("foreign-1-1", "its MAC does not match"), ("plain-1-1", "not a sealed squall file"),
                          ("legacy-1-1", "without its node's version"),
                          ("remade-1-1", "an old value replayed: it was sealed for an earlier node at this path"),
                          ("shape-1-1", "not a topology status"), ("supervisors/bad", "not a supervisor's host")):
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


# --- replayed values, ACLs, an unreachable ZooKeeper ---------------------------------------------------
def _outsider(zookeeper, auth=None):
    """A ZooKeeper client that is not one of the cluster's masters (``auth``: its credential, if any)."""
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=zookeeper.address, auth_data=auth or [])
    zk.start(timeout=10)
    return zk


def _status_in_zookeeper(master, storm_id):
    """The status the node ``storms/<storm_id>`` holds now, if its value is sealed for it as it
    is (not `Coordinator.read`, which gives the last good value in place of a refused one)."""
    from kazoo.exceptions import NoNodeError
    path = master.ha.path("storms", storm_id)
    try:
        data, stat = master.ha.zk.get(path)
    except NoNodeError:
        return None
    base = master.ha._open(path, data, stat)
    return base and base["status"]


def _deactivated_with_its_old_value(*masters):
    """Submit topology "t" through ``masters`` (the leader first), keep the sealed value of its
    ``storms`` node while ACTIVE, and deactivate it: its storm id, that node and the old value."""
    leader = masters[0].master
    with _client(*masters) as m:
        m.submit_topology("t", {}, recovery_topology(10))
        storm_id = leader.topologies["t"].plan.storm_id
        path = leader.ha.path("storms", storm_id)
        assert wait_until(lambda: _status_in_zookeeper(leader, storm_id) == "ACTIVE", 10)
        old, _ = leader.ha.zk.get(path)
        m.deactivate("t")
    return storm_id, path, old


def _logged(caplog, path, words):
    return any(path in r.getMessage() and words in r.getMessage() for r in caplog.records)


def test_an_old_value_replayed_over_a_newer_one_is_refused_and_the_newer_state_kept_across_a_failover(
        ha_conf, running, caplog):
    """Someone who may write to ZooKeeper copies a topology's old sealed base (ACTIVE) back over
    the current one (INACTIVE) while the leader hangs: the follower refuses it, saying so, and
    keeps INACTIVE; when the leader's session goes, the follower leads with INACTIVE and writes it
    over the replayed value."""
    a = running(ha_conf("a"))
    assert wait_until(lambda: a.master.leading, 10)
    b = running(ha_conf("b"))
    storm_id, path, old = _deactivated_with_its_old_value(a, b)
    assert wait_until(lambda: "t" in b.master.topologies and b.master.topologies["t"].status == "INACTIVE", 10)
    hang = threading.Event()
    a.loop.call_soon_threadsafe(hang.wait)  # the leader hangs (its ZooKeeper session lives on)
    try:
        with caplog.at_level(logging.WARNING, "squall.master"):
            a.master.ha.zk.set(path, old)  # a writer with the cluster's credential, or before ACLs
            assert wait_until(lambda: _logged(caplog, path, "an old value replayed"), 10), caplog.text
        assert b.master.topologies["t"].status == "INACTIVE"
        a.master.ha.zk.stop()  # the hung leader's session ends: b leads
        assert wait_until(lambda: b.master.leading, 10)
    finally:
        hang.set()
    assert b.master.topologies["t"].status == "INACTIVE"
    assert wait_until(lambda: _status_in_zookeeper(b.master, storm_id) == "INACTIVE", 10)


def test_the_leader_writes_again_a_node_another_writer_changed(ha_conf, running, caplog):
    """The leader watches the nodes it wrote: an old value copied over one, or the node removed,
    and it writes its state there again at once (not only when the state changes)."""
    a = running(ha_conf("a"))
    assert wait_until(lambda: a.master.leading, 10)
    storm_id, path, old = _deactivated_with_its_old_value(a)
    assert wait_until(lambda: _status_in_zookeeper(a.master, storm_id) == "INACTIVE", 10)
    with caplog.at_level(logging.WARNING, "squall.master"):
        a.master.ha.zk.set(path, old)
        assert wait_until(lambda: _logged(caplog, path, "was changed by someone who is not this master: "
                                                        "written again"), 10), caplog.text
    assert wait_until(lambda: _status_in_zookeeper(a.master, storm_id) == "INACTIVE", 10)
    a.master.ha.zk.delete(path)  # removed behind the leader's back: written again too
    assert wait_until(lambda: _status_in_zookeeper(a.master, storm_id) == "INACTIVE", 10)


def test_a_latch_value_copied_to_another_latch_node_does_not_name_a_leader(ha_conf, caplog):
    """The election's values are bound to their own node: a copy of the leader's latch value in
    a node someone else made names no one when that node becomes the lowest."""
    one = Coordinator(ha_conf("one", **{"storm.zookeeper.root": "/latch"}), SECRET.encode())
    two = Coordinator(ha_conf("two", **{"storm.zookeeper.root": "/latch"}), SECRET.encode())
    try:
        one.join(NimbusAddress("127.0.0.1", 1), 1.0, "test")
        data, _ = one.zk.get(one.path("leader-lock", one._latch))
        copy = one.zk.create(one.path("leader-lock", "latch-"), data, ephemeral=True, sequence=True).rsplit("/", 1)[1]
        two.join(NimbusAddress("127.0.0.1", 2), 1.0, "test")
        assert wait_until(lambda: two.leader() == NimbusAddress("127.0.0.1", 1), 10)
        one.quit_election()
        assert wait_until(lambda: two._latch_children and two._latch_children[0] == copy, 10)
        with caplog.at_level(logging.WARNING, "squall.master"):
            assert two.leader() is None
        assert copy in caplog.text
    finally:
        one.delete("/latch")
        one.close()
        two.close()


def test_a_client_without_the_cluster_credential_can_neither_write_nor_read(ha_conf, zookeeper, caplog):
    from kazoo.exceptions import NoAuthError
    with caplog.at_level(1):  # everything kazoo logs, its requests included
        ha = Coordinator(ha_conf("acl", **{"storm.zookeeper.root": "/acl"}), SECRET.encode())
    credential = ha.credential
    assert credential.password not in caplog.text and SECRET not in caplog.text
    assert SECRET not in credential.password and SECRET.encode().hex() not in credential.password
    strangers = [_outsider(zookeeper), _outsider(zookeeper, [("digest", "squall:" + "0" * 64)])]
    try:
        ha.write(ha.path("supervisors", "s"), {"host": "127.0.0.1", "ports": [6700], "since": 1.0})
        for zk in strangers:
            for attempt in (lambda: zk.set(ha.path("supervisors", "s"), b"x"),
                            lambda: zk.get(ha.path("supervisors", "s")),
                            lambda: zk.delete(ha.path("supervisors", "s")),
                            lambda: zk.create(ha.path("storms", "new-1-1"), b"x"),
                            lambda: zk.create(ha.path("leader-lock", "latch-"), b"", ephemeral=True, sequence=True),
                            lambda: zk.get_children(ha.path("storms"))):
                with pytest.raises(NoAuthError):
                    attempt()
    finally:
        for zk in strangers:
            zk.stop()
        ha.delete("/acl")
        ha.close()


def test_nodes_an_older_squall_left_open_get_the_cluster_acl_at_start(ha_conf, zookeeper, caplog):
    from kazoo.exceptions import NoAuthError
    stranger = _outsider(zookeeper)
    try:
        stranger.create("/open/storms/old-1-1", b"x", makepath=True)  # world-writable, as before ACLs
        with caplog.at_level(logging.INFO, "squall.master"):
            ha = Coordinator(ha_conf("open", **{"storm.zookeeper.root": "/open"}), SECRET.encode())
        assert "gave 3 ZooKeeper nodes under /open" in caplog.text, caplog.text
        for attempt in (lambda: stranger.set("/open/storms/old-1-1", b"y"), lambda: stranger.create("/open/x", b""),
                        lambda: stranger.get("/open/storms/old-1-1")):
            with pytest.raises(NoAuthError):
                attempt()
        ha.delete("/open")
        ha.close()
    finally:
        stranger.stop()




def test_no_leader_is_named_while_zookeeper_is_unreachable(own_zookeeper, tmp_path, running):
    """A master that lost ZooKeeper does not know who leads, and says so (clients then ask the
    next seed, and say no leader was found), until ZooKeeper is back and the election has a
    winner again."""
    server = own_zookeeper

    def conf(name):
        return cluster_conf({"squall.secret": SECRET, "storm.zookeeper.servers": [server.address],
                             "storm.zookeeper.session.timeout": 2000, "storm.zookeeper.connection.timeout": 30000,
                             "storm.local.dir": str(tmp_path / name), "nimbus.thrift.port": 0})
    a = running(conf("a"))
    assert wait_until(lambda: a.master.leading, 10)
    b = running(conf("b"))
    assert wait_until(lambda: b.master.op_get_leader() == MasterAddress("127.0.0.1", a.master.port), 10)
    server.stop()
    assert wait_until(lambda: not a.master.ha.connected and not b.master.ha.connected, 20)
    for master in (a.master, b.master):
        with pytest.raises(NotLeaderException, match="cannot reach ZooKeeper: it does not know who leads"):
            master.op_get_leader()
    with pytest.raises(NotLeaderException, match="cannot reach ZooKeeper"):
        b.master.election.assert_leader()
    # asked once: storm.nimbus.retry.times' 5 tries 2 s apart would give the same answer 10 s later
    with pytest.raises(RpcError, match="Could not find a nimbus leader"), \
            _client(a, b, **{"storm.nimbus.retry.times": 0}) as m:
        m.deactivate("t")
    server.start()
    assert wait_until(lambda: a.master.ha.connected and b.master.ha.connected and a.master.op_get_leader() is not None
                      and a.master.op_get_leader() == b.master.op_get_leader(), 30)


def test_a_leader_asks_zookeeper_nothing_while_it_is_gone(own_zookeeper, tmp_path, running):
    """The leader's second (`Election.monitor`: the state written again, the code held) asked
    ZooKeeper while the connection was down; kazoo queued the request until ZooKeeper answered
    again, and as the master runs it on its server's event loop, the leader answered no one
    (clients, supervisors, workers' heartbeats and Trident state) and never said it had lost the
    lead, for the whole outage. Now a request fails at once, naming the servers, and the master
    keeps answering: that it cannot reach ZooKeeper. A client's call that reads ZooKeeper
    (``cluster_info``, which ``squall list`` and the UI make) stopped any master the same way."""
    server = own_zookeeper
    conf = cluster_conf({"squall.secret": SECRET, "storm.zookeeper.servers": [server.address],
                         "storm.zookeeper.session.timeout": 2000, "storm.zookeeper.connection.timeout": 30000,
                         "storm.local.dir": str(tmp_path / "a"), "nimbus.thrift.port": 0})
    a = running(conf)
    assert wait_until(lambda: a.master.leading, 10)
    with _client(a, **{"storm.nimbus.retry.times": 0}) as m:
        m.submit_topology("t", {}, recovery_topology(10), "INACTIVE")
    server.stop()
    assert wait_until(lambda: not a.master.ha.connected, 20)
    second = threading.Thread(target=a.master.election.monitor, args=(0.0,), daemon=True)
    second.start()  # as the server's loop runs it, from a tick that began before the drop
    second.join(5)
    try:
        assert not second.is_alive(), "the leader's second waits for ZooKeeper to come back"
        from kazoo.exceptions import ConnectionLoss
        with pytest.raises(ConnectionLoss, match="not connected to ZooKeeper at 127.0.0.1"):
            a.master.ha.read(a.master.ha.path("counter"))
        c = Client("127.0.0.1", a.master.port, SECRET.encode(), timeout=5)
        try:
            with pytest.raises(RemoteError, match="cannot reach ZooKeeper"):
                c.call("get_leader")
            # squall list and the UI's cluster summary (the masters' list is read from ZooKeeper):
            # an error naming it, not a master that waits for ZooKeeper and answers no one
            with pytest.raises(RemoteError, match="not connected to ZooKeeper at 127.0.0.1"):
                c.call("cluster_info")
            with pytest.raises(RemoteError, match="cannot reach ZooKeeper"):
                c.call("get_leader")
        finally:
            c.close()
    finally:
        server.start()
        second.join(30)
    assert wait_until(lambda: a.master.ha.connected and a.master.leading, 30)


@pytest.fixture
def zk_proxy(zookeeper):
    """A proxy to the module's ZooKeeper, to cut one master off from it (`TcpProxy`)."""
    with TcpProxy(zookeeper.port) as proxy:
        yield proxy


def _cut_off(ha_conf, zk_proxy, running):
    """A leader ``a`` that reaches ZooKeeper through ``zk_proxy``, a follower ``b``, and a
    topology ``t`` both hold."""
    a = running(ha_conf("a", **{"storm.zookeeper.servers": [zk_proxy.address],
                                "storm.zookeeper.connection.timeout": 30000}))
    assert wait_until(lambda: a.master.leading, 10)
    b = running(ha_conf("b"))
    with _client(a, **{"storm.nimbus.retry.times": 0}) as m:
        m.submit_topology("t", {}, recovery_topology(10), "INACTIVE")
    assert wait_until(lambda: "t" in b.master.topologies, 10)
    return a, b


def test_a_leader_cut_off_from_zookeeper_does_not_hide_the_new_one(ha_conf, zk_proxy, running):
    """The cut-off master still answers its clients, but knows no leader; a client, supervisor
    or worker whose first seed it was stopped there and never reached the master that leads."""
    a, b = _cut_off(ha_conf, zk_proxy, running)
    zk_proxy.cut()
    assert wait_until(lambda: b.master.leading, 15)
    with _client(a, b, **{"storm.nimbus.retry.times": 0}) as m:
        m.activate("t")
    assert b.master.topologies["t"].status.value == "ACTIVE"
    assert not a.master.ha.connected


@pytest.mark.parametrize("noticed", [False, True], ids=["before-it-noticed", "after-it-noticed"])
def test_a_kill_the_leader_cannot_write_to_zookeeper_fails_rather_than_being_lost(ha_conf, zk_proxy, running, noticed):
    """The leader's link to ZooKeeper goes silent; a kill that reaches it before its client
    notices was acknowledged though ZooKeeper never had it, and the next leader ran the topology
    on. Now the caller is told (Storm writes the StormBase inside killTopology too). Which of
    the two the kill meets is set here, not left to the machine's speed (kazoo notices a silent
    link in about 1.3 s at the 2 s session timeout; under load the kill came after that, and a
    test that expected the first answer failed): before, the leader never hears kazoo's news
    and its write fails; after, it refuses as one cut off, and the client, whose one seed it
    is, asks it who leads and is told it cannot know."""
    a, b = _cut_off(ha_conf, zk_proxy, running)
    if not noticed:  # kazoo's news of the silent link never reaches the master (it comes late)
        a.master.ha.zk.remove_listener(a.master.ha._on_state)
    zk_proxy.blackhole()
    if noticed:
        assert wait_until(lambda: not a.master.ha.connected, 15)
    told, says = ((RpcError, "Could not find a nimbus leader.* cannot reach ZooKeeper") if noticed
                  else (RemoteError, "cannot write the cluster state to ZooKeeper"))
    with pytest.raises(told, match=says), _client(a, **{"storm.nimbus.retry.times": 0}) as m:
        m.kill_topology("t", wait_secs=0)
    assert wait_until(lambda: b.master.leading, 15)
    assert b.master.topologies["t"].status.value == "INACTIVE"  # as the caller was told: not killed


def test_trident_state_written_as_the_leader_loses_zookeeper_is_sent_again_to_the_next_leader(
        ha_conf, zk_proxy, running):
    """The leader's link to ZooKeeper goes silent while a worker's coordinator writes its
    transactional state: kazoo's ConnectionLoss (which has no message) reached the worker as a
    bare ``RemoteError`` that its MasterBackend does not retry, and the coordinator's worker
    crashed with an empty error. Now the master answers as one cut off from ZooKeeper does
    (not a leader, naming the key and the cause); the worker's link looks for the leader, and
    the write, retried as storm.zookeeper.retry.times says, lands with the next leader."""
    from squall._transactional import MasterBackend
    from squall.cluster.seeds import master_link
    from squall.trident.txstate import BackedTransactionalState

    a = running(ha_conf("a", **{"storm.zookeeper.servers": [zk_proxy.address],
                                "storm.zookeeper.connection.timeout": 30000}))
    assert wait_until(lambda: a.master.leading, 10)
    b = running(ha_conf("b"))
    assert wait_until(lambda: b.master.ha.in_election, 10)
    link = master_link(cluster_conf({"squall.secret": SECRET, "nimbus.seeds": [str(a.address), str(b.address)]}))
    try:
        once = BackedTransactionalState(MasterBackend(link, retries=0), "words", "coordinator")
        once.put("currtx", 41)
        zk_proxy.blackhole()
        with pytest.raises(RpcError, match="ZooKeeper"):
            once.put("currtx", 42)  # in flight as the link goes silent: no leader to send it to yet
        retried = BackedTransactionalState(MasterBackend(link, retries=60, interval=0.25), "words", "coordinator")
        retried.put("currtx", 43)
        assert b.master.leading and retried.get("currtx") == 43
    finally:
        link.close()


# --- Trident's transactional state ---------------------------------------------------------------------
def test_trident_state_is_kept_in_zookeeper_sealed_and_the_new_leader_has_it(ha_conf, running, caplog):
    """A worker's transactional state (`squall.trident.txstate`) goes to the leader, which keeps it
    in ZooKeeper under <root>/transactional/<topology>/<key>; once the leader stops, the new one
    answers with it. A node copied over another key's is refused, as every node is."""
    import base64
    import pickle

    from squall._transactional import Delete, MasterBackend, Put, TransactionalStateError
    from squall.cluster.seeds import master_link
    from squall.trident.txstate import BackedTransactionalState

    a = running(ha_conf("a", **{"storm.zookeeper.session.timeout": 30000}))
    assert wait_until(lambda: a.master.leading, 10)
    b = running(ha_conf("b", **{"storm.zookeeper.session.timeout": 30000}))
    assert wait_until(lambda: b.master.ha.in_election, 10)
    # a worker's link, through the seeds (the follower first: it refuses, and the link finds a)
    link = master_link(cluster_conf({"squall.secret": SECRET, "nimbus.seeds": [str(b.address), str(a.address)]}))
    state = BackedTransactionalState(MasterBackend(link, retries=20, interval=0.5), "words", "coordinator")
    try:
        state.put("currtx", 41)
        state.put("meta/41", {"offset": 4100})
        node = a.master.ha.path("transactional", "words", "coordinator~currtx")
        assert pickle.loads(base64.b64decode(b.master.ha.read(node)["value"])) == 41
        link.close()  # its next call goes to a again, finds it gone, and finds the new leader
        a.stop()
        assert wait_until(lambda: b.master.leading, 10), "the follower did not take the lead"
        assert state.get("currtx") == 41 and state.list() == ["currtx", "meta/41"]
        state.put("currtx", 42)
        state.delete("meta")
        assert state.get("currtx") == 42 and state.list() == ["currtx"]
        # a coordinator's step: one trident_state_write, the same sealed nodes, in order
        state.write([Put("meta/42", 1), Put("currtx", 43), Delete("meta"), Put("meta/43", 2)])
        assert state.list() == ["currtx", "meta/43"] and state.get("meta/43") == 2
        assert pickle.loads(base64.b64decode(b.master.ha.read(node)["value"])) == 43
        # a sealed value copied to another key's node is refused, naming the node: an error, not
        # "none" (a coordinator without its state would start its txids again)
        forged = b.master.ha.path("transactional", "words", "coordinator~forged")
        b.master.ha.zk.create(forged, b.master.ha.zk.get(node)[0], makepath=True)
        with caplog.at_level(logging.WARNING, "squall.master"), pytest.raises(TransactionalStateError) as refused:
            state.get("forged")
        assert f"ZooKeeper node {forged} holds a value this cluster's masters did not write" in str(refused.value)
        assert _logged(caplog, forged, "refused")
    finally:
        link.close()


def test_a_new_leader_keeps_the_count_of_a_slots_worker_restarts(ha_conf, running):
    """A worker died and was given a new launch, then another master took the lead: its
    `info` said 0 restarts for the slot (the REST API's worker rows and Prometheus's
    squall_worker_restarts_total with it), the count having lived only in the old leader's
    memory. It is kept in the slot's record in ZooKeeper now."""
    from squall._nimbus import SupervisorSync, WorkerExit

    a = running(ha_conf("a", **{"supervisor.slots.ports": []}))
    assert wait_until(lambda: a.master.leading, 10)
    b = running(ha_conf("b", **{"supervisor.slots.ports": []}))
    assert wait_until(lambda: b.master.ha.in_election, 10)
    with _client(a, b, **{"storm.nimbus.retry.times": 0}) as m:
        m.nimbus.supervisor_sync(SupervisorSync("s1", "127.0.0.1", [7000]))
        storm_id = m.submit_topology("t", {"topology.min.replication.count": 2, "topology.workers": 1},
                                     recovery_topology(10))
        [slot] = [w["slot"] for w in m.get_topology_info("t")["workers"]]
        launch = a.master.topologies["t"].launch_ids[slot]
        m.nimbus.supervisor_sync(SupervisorSync("s1", "127.0.0.1", [7000], (WorkerExit(storm_id, slot, launch, -9, True),)))
        assert [w["restarts"] for w in m.get_topology_info("t")["workers"]] == [1]
    a.stop()
    assert wait_until(lambda: b.master.leading, 15)
    with _client(b) as m:
        assert [(w["slot"], w["restarts"]) for w in m.get_topology_info("t")["workers"]] == [(slot, 1)]
        m.kill_topology("t", wait_secs=0)


def test_a_new_leader_counts_an_error_batch_once_though_the_old_one_died_between_its_writes(ha_conf, running):
    """The leader keeps a worker's error batch (3 records and 5 errors without one) and writes
    the topology's nodes one by one: its base, its slots' records (the batch's number, which
    keeps a batch sent again from being counted twice) and its errors. It died after the base:
    the error count lived in the base, the batch's number in the slots' record, so the new
    leader had the count with the batch in it but not the number, and the worker's resent batch
    counted again: 16 errors of 8. The count is kept beside the number now, in one node."""
    from kazoo.exceptions import ConnectionLoss

    from squall._nimbus import Heartbeat, SupervisorSync

    a = running(ha_conf("a", **{"supervisor.slots.ports": []}))
    assert wait_until(lambda: a.master.leading, 10)
    b = running(ha_conf("b", **{"supervisor.slots.ports": []}))
    assert wait_until(lambda: b.master.ha.in_election, 10)
    with _client(a, b, **{"storm.nimbus.retry.times": 0}) as m:
        m.nimbus.supervisor_sync(SupervisorSync("s1", "127.0.0.1", [7000]))
        storm_id = m.submit_topology("t", {"topology.min.replication.count": 2, "topology.workers": 1},
                                     recovery_topology(10))
        [slot] = [w["slot"] for w in m.get_topology_info("t")["workers"]]
        launch = a.master.topologies["t"].launch_ids[slot]
        records = [{"component": "count", "task": 1, "time": 1.0 + i, "error": f"ValueError: {i}", "traceback": ""}
                   for i in range(3)]
        batch = Heartbeat(storm_id, slot, launch, errors=records, errors_seq=1, errors_unrecorded=5)
        coordinator = a.master.store.coordinator
        write = coordinator.write

        def dies_after_the_base(path, value, ephemeral=False):
            if "/assignments/" in path:  # the leader's process is gone before this write
                raise ConnectionLoss()
            return write(path, value, ephemeral)
        coordinator.write = dies_after_the_base
        with pytest.raises(Exception, match="cannot write the cluster state to ZooKeeper"):
            m.nimbus.heartbeat(batch)
    a.stop()
    assert wait_until(lambda: b.master.leading, 15)
    with _client(b) as m:
        m.nimbus.heartbeat(batch)  # the worker got no reply: the batch again, number and all
        m.nimbus.heartbeat(batch)  # and once more (this leader's reply lost)
        [row] = m.list_topologies()
        assert (row["errors"], row["errors_kept"]) == (8, 3)  # on main: (16, 3)
        m.kill_topology("t", wait_secs=0)
