"""Supervisors' liveness in ZooKeeper (`squall.cluster.liveness`) on a real ZooKeeper: a
supervisor's ephemeral node, as a master reads it, and what a master refuses to read there."""

import json
import logging
import re

import pytest

from squall._config import cluster_conf
from squall._sealed import seal
from squall._wire import Client
from squall.cluster.ha import ALIVE, Coordinator, NodeVersion
from squall.cluster.liveness import Presence, PresenceWatch, SupervisorPresence, read_presence, supervisor_presence

from ..conftest import wait_until
from ..tcp_proxy import TcpProxy
from .test_ha import _Running

pytest.importorskip("kazoo")

SECRET = "liveness-unit-test-secret-0123456789"
OTHER_SECRET = b"y" * 32


@pytest.fixture
def conf(tmp_path, zookeeper):
    return cluster_conf({"squall.secret": SECRET, "storm.zookeeper.servers": [zookeeper.address],
                         "storm.zookeeper.root": f"/storm-{tmp_path.name}", "storm.zookeeper.session.timeout": 2000,
                         "storm.local.dir": str(tmp_path / "local"), "supervisor.monitor.frequency.secs": 0.1})


@pytest.fixture
def master_session(conf):
    ha = Coordinator(conf, SECRET.encode())
    try:
        yield ha
    finally:
        ha.delete(ha.root)
        ha.close()


def test_a_master_hears_a_supervisor_while_its_session_lives_and_not_after_it_stops(conf, master_session):
    presence = SupervisorPresence(conf, SECRET.encode(), "sup-a", "10.0.0.2", [6701, 6700]).start()
    try:
        assert wait_until(lambda: read_presence(master_session, "sup-a") is not None, 10)
        assert read_presence(master_session, "sup-a") == Presence("sup-a", "10.0.0.2", (6700, 6701))
        assert read_presence(master_session, "sup-b") is None  # never made
    finally:
        presence.stop()
    assert read_presence(master_session, "sup-a") is None  # the session ended: the node went at once


def test_a_supervisor_makes_its_node_again_when_someone_removes_it(conf, master_session):
    presence = SupervisorPresence(conf, SECRET.encode(), "sup-a", "10.0.0.2", [6700]).start()
    try:
        assert wait_until(lambda: read_presence(master_session, "sup-a") is not None, 10)
        master_session.zk.delete(master_session.path(ALIVE, "sup-a"))
        assert wait_until(lambda: read_presence(master_session, "sup-a") is not None, 10)
    finally:
        presence.stop()


def test_without_zookeeper_servers_a_supervisor_keeps_no_liveness(tmp_path):
    assert supervisor_presence(cluster_conf({"storm.local.dir": str(tmp_path)}), SECRET.encode(), "s", "h", [1]) is None


def test_what_a_master_reads_of_a_supervisors_liveness_must_carry_the_cluster_seal(master_session, caplog):
    """A node not sealed by the cluster, sealed for another node, or sealed but not naming the
    supervisor (its id, host and ports checked before use) does not say the machine lives."""
    ha = master_session

    def sealed_for(path, value, secret=None, czxid=None):
        secret = secret or SECRET.encode()
        _node, stat = ha.zk.create(path, b"", makepath=True, include_data=True)
        kind = NodeVersion(path, stat.czxid if czxid is None else czxid, stat.version + 1).kind()
        ha.zk.set(path, seal(secret, kind, json.dumps(value).encode()), version=stat.version)

    good = {"id": "x", "host": "h", "ports": [6700]}
    ha.zk.create(ha.path(ALIVE, "plain"), json.dumps({**good, "id": "plain"}).encode(), makepath=True)
    sealed_for(ha.path(ALIVE, "foreign"), {**good, "id": "foreign"}, secret=OTHER_SECRET)
    sealed_for(ha.path(ALIVE, "remade"), {**good, "id": "remade"}, czxid=1)
    sealed_for(ha.path(ALIVE, "other-id"), good)
    sealed_for(ha.path(ALIVE, "bad-ports"), {"id": "bad-ports", "host": "h", "ports": ["6700", True]})
    sealed_for(ha.path(ALIVE, "fine"), {**good, "id": "fine"})
    with caplog.at_level(logging.WARNING, "squall.master"):
        for sid in ("plain", "foreign", "remade", "other-id", "bad-ports", "../x", "a/b"):
            assert read_presence(ha, sid) is None, sid
    assert read_presence(ha, "fine") == Presence("fine", "h", (6700,))
    for node, why in (("plain", "not a sealed squall file"), ("foreign", "its MAC does not match"),
                      ("remade", "sealed for an earlier node"), ("other-id", "not a supervisor's id"),
                      ("bad-ports", "not a supervisor's id")):
        assert any(f"{ALIVE}/{node} " in r.getMessage() and why in r.getMessage() for r in caplog.records), \
            (node, caplog.text)


def test_a_machine_held_is_said_once_and_ends_when_heard_or_gone():
    watch = PresenceWatch()
    first = watch.hold("a", "h1", now=10.0, unheard=3.5)
    assert first is not None and first.since == 10.0 and first.unheard == 3.5
    assert watch.hold("a", "h1", now=11.0, unheard=4.5) is None  # already held: not said again
    watch.hold("b", "h2", now=11.0, unheard=3.0)
    assert watch.heard("a") == first and watch.heard("a") is None
    assert [h.supervisor_id for h in watch.keep_only(set())] == ["b"] and not watch.held


def test_a_leader_asks_zookeeper_of_every_machine_it_cannot_hear_in_one_round_trip(conf, zookeeper, master_session,
                                                                                  caplog):
    """The leader asks ZooKeeper, on its server's event loop, whether each machine it has not
    heard for its timeout lives. It asked one machine after another, a round trip each: with
    ZooKeeper 100 ms away (a latency on its replies) and 30 machines held, each of its seconds
    held the loop for 3 s, and a supervisor's sync (a heartbeat likewise) waited up to 3.8 s for
    its answer. All are asked at once now: the loop waits one round trip. The real ZooKeeper,
    100 ms away, answers; the leader's requests and its waits for their answers are recorded in
    order (not timed, so a slow machine cannot move the outcome): each time it asks, every held
    machine's request is sent before it waits for any answer."""
    machines, delay = 50, 0.1
    secret = SECRET.encode()
    with TcpProxy(zookeeper.port) as far:
        leader = _Running({**conf, "storm.zookeeper.servers": [far.address], "storm.zookeeper.session.timeout": 6000,
                           "nimbus.thrift.port": 0, "nimbus.supervisor.timeout.secs": 2, "nimbus.task.timeout.secs": 2})
        presences = []
        client = None
        try:
            assert wait_until(lambda: leader.master.leading, 20)
            client = Client("127.0.0.1", leader.master.port, secret, timeout=30)
            for i in range(machines):
                presences.append(SupervisorPresence(conf, secret, f"sup-{i}", f"10.9.0.{i + 1}", [6700]).start())
            assert wait_until(lambda: all(read_presence(master_session, f"sup-{i}") is not None
                                          for i in range(machines)), 20)
            zk = leader.master.ha.zk
            asked_for = zk.get_async  # the leader's own (fails fast while disconnected)
            events: list[tuple[str, str]] = []  # ("ask" | "wait", path), in the order they happened

            class Answer:
                def __init__(self, path, result):
                    self.path, self.result = path, result

                def get(self, *args, **kwargs):
                    events.append(("wait", self.path))
                    return self.result.get(*args, **kwargs)

            def get_async(path, *args, **kwargs):
                events.append(("ask", path))
                return Answer(path, asked_for(path, *args, **kwargs))
            zk.get_async = get_async
            with caplog.at_level(logging.WARNING, "squall.master"):
                # each machine heard once, then never again; "heard" keeps syncing. Registered
                # before ZooKeeper is far: the leader writes each new one there, a few round trips
                for i in range(machines):
                    client.call("supervisor_sync", supervisor_id=f"sup-{i}", host=f"10.9.0.{i + 1}", ports=[6700])
                client.call("supervisor_sync", supervisor_id="heard", host="10.9.1.1", ports=[6700])
                far.reply_delay = delay

                def all_held():
                    client.call("supervisor_sync", supervisor_id="heard", host="10.9.1.1", ports=[6700])
                    return sum("but ZooKeeper hears it" in r.getMessage() for r in caplog.records) == machines
                assert wait_until(all_held, 20), caplog.text
                # from here every tick asks of all of them (before, a tick could come while only
                # some had been silent for the timeout)
                events.clear()

                def asked_thrice():
                    client.call("supervisor_sync", supervisor_id="heard", host="10.9.1.1", ports=[6700])
                    return sum(1 for e in list(events) if e[0] == "ask") >= 3 * machines
                assert wait_until(asked_thrice, 20), f"{len(events)} requests and waits in 20 s"
            held = [f"sup-{i}" for i in range(machines) if f"sup-{i}" in leader.master.supervisors]
            assert len(held) == machines, "a machine ZooKeeper hears was taken for lost"
            # the recorded order, as runs of asks and waits: each run of asks is a whole tick's
            alive = [e for e in list(events) if "supervisors-alive" in e[1]]
            runs: list[list] = []
            for kind, path in alive:
                if not runs or runs[-1][0] != kind:
                    runs.append([kind, 0])
                runs[-1][1] += 1
            asks = [n for kind, n in runs if kind == "ask"]
            print(f"{len(alive)} requests and waits of the held machines' nodes, asked in runs of {asks}")
            # the first and the last run of asks may be a tick's part: cleared while it asked, or
            # asking still
            inner = runs[1:] if runs and runs[0][0] == "ask" else runs
            inner = inner[:-1] if inner and inner[-1][0] == "ask" else inner
            complete = [n for kind, n in inner if kind == "ask"]
            assert complete and all(n == machines for n in complete), \
                f"the leader waited for an answer before asking of every held machine: runs of asks {asks}"
        finally:
            if client is not None:
                client.close()
            for p in presences:
                p.stop()
            leader.stop()


def test_machines_zookeeper_cannot_be_asked_about_are_unanswered_not_unheard(conf, zookeeper):
    """A leader whose connection to ZooKeeper drops as it asks does not learn that a machine's
    node is gone: those it asked are unanswered (the master takes none of them for lost on that
    tick), apart from the ones ZooKeeper does not hear."""
    from squall.cluster.liveness import read_presences
    presence = SupervisorPresence(conf, SECRET.encode(), "sup-a", "10.0.0.2", [6700]).start()
    with TcpProxy(zookeeper.port) as link:
        ha = Coordinator({**conf, "storm.zookeeper.servers": [link.address]}, SECRET.encode())
        try:
            assert wait_until(lambda: read_presence(ha, "sup-a") is not None, 10)
            reads = read_presences(ha, ["sup-a", "sup-b", "a/b"])
            assert reads.alive == {"sup-a": Presence("sup-a", "10.0.0.2", (6700,))} and not reads.unanswered
            link.cut()
            assert wait_until(lambda: not ha.connected, 10)
            reads = read_presences(ha, ["sup-a", "sup-b", "a/b"])
            assert not reads.alive and sorted(reads.unanswered) == ["sup-a", "sup-b"]
            assert "not connected to ZooKeeper" in str(reads.unanswered["sup-a"])
        finally:
            ha.close()
            presence.stop()


def test_a_leader_whose_zookeeper_link_goes_silent_as_it_asks_takes_no_held_machine_for_lost(conf, zookeeper,
                                                                                              caplog):
    """The leader's link to ZooKeeper goes silent (kazoo notices only after two thirds of the
    session timeout) while it holds a machine ZooKeeper hears. Its next tick asked ZooKeeper, the
    request failed when kazoo gave up on the connection, and the leader took the machine for
    lost at once, saying ZooKeeper no longer heard it ("its session ended"), though the node
    lived on, and rescheduled its slots. Now the machine is unanswered, not lost: held until
    ZooKeeper answers (the session lives on: the leader leads again)."""
    secret = SECRET.encode()
    presence = SupervisorPresence(conf, secret, "sup-a", "10.0.0.2", [6700]).start()
    with TcpProxy(zookeeper.port) as link:
        leader = _Running({**conf, "storm.zookeeper.servers": [link.address], "storm.zookeeper.session.timeout": 10000,
                           "storm.zookeeper.connection.timeout": 30000, "nimbus.thrift.port": 0,
                           "nimbus.supervisor.timeout.secs": 2, "nimbus.task.timeout.secs": 2})
        client = None
        try:
            assert wait_until(lambda: leader.master.leading, 20)
            client = Client("127.0.0.1", leader.master.port, secret, timeout=30)
            with caplog.at_level(logging.WARNING, "squall.master"):
                client.call("supervisor_sync", supervisor_id="sup-a", host="10.0.0.2", ports=[6700])

                def held():  # another machine heard meanwhile: sup-a alone is silent
                    client.call("supervisor_sync", supervisor_id="sup-b", host="10.0.0.3", ports=[6700])
                    return "but ZooKeeper hears it" in caplog.text
                assert wait_until(held, 15), caplog.text
                link.blackhole()
                assert wait_until(lambda: not leader.master.ha.connected, 15)
                link.forward()
                assert wait_until(lambda: leader.master.ha.connected and leader.master.leading, 20), caplog.text
            said = [r.getMessage() for r in caplog.records if "sup-a" in r.getMessage()]
            assert not [m for m in said if "no longer hears" in m or "rescheduling its slots" in m], said
            assert "sup-a" in leader.master.supervisors
            assert any("cannot ask ZooKeeper whether supervisors" in r.getMessage() and "sup-a" in r.getMessage()
                       for r in caplog.records), caplog.text
        finally:
            if client is not None:
                client.close()
            leader.stop()
            presence.stop()


def test_a_machine_only_zookeeper_hears_for_long_is_reported_again_with_what_to_do(conf, zookeeper):
    """The master cannot reach sup-a (10.0.0.2), which runs one of the topology's two workers,
    but ZooKeeper hears it: held, not lost, said once. It stayed held for as long as ZooKeeper
    heard it, with nothing more said: meanwhile no kill or rebalance of the topology reached the
    machine. Now, once sup-a has been unheard for 5 supervisor timeouts (here 5 s), the master
    says so again, once, in the topology's errors: the machine, that its executors stay there,
    and what the operator can do. It still moves nothing."""
    from squall.cluster.client import MasterClient

    from ..process.recovery_topology import recovery_topology

    secret = SECRET.encode()
    presence = SupervisorPresence(conf, secret, "sup-a", "10.0.0.2", [6700]).start()
    leader = _Running({**conf, "nimbus.thrift.port": 0, "nimbus.supervisor.timeout.secs": 1,
                       "nimbus.task.timeout.secs": 1})
    client = m = None
    try:
        assert wait_until(lambda: leader.master.leading, 20)
        client = Client("127.0.0.1", leader.master.port, secret, timeout=30)
        for sid, host in (("sup-a", "10.0.0.2"), ("sup-b", "10.0.0.3")):
            client.call("supervisor_sync", supervisor_id=sid, host=host, ports=[6700])
        m = MasterClient({**conf, "nimbus.seeds": ["127.0.0.1"], "nimbus.thrift.port": leader.master.port})
        m.submit_topology("t", {"topology.workers": 2}, recovery_topology(10))

        def about_sup_a():  # sup-b syncs on; sup-a never again
            client.call("supervisor_sync", supervisor_id="sup-b", host="10.0.0.3", ports=[6700])
            return [e["error"] for e in m.get_topology_info("t")["errors"] if "sup-a" in e["error"]]
        assert wait_until(lambda: len(about_sup_a()) == 2, 15), about_sup_a()  # reported at 5 s unheard
        held, again = about_sup_a()
        assert held.startswith("the master cannot reach supervisor sup-a on 10.0.0.2"), held
        after = re.match(r"the master still cannot reach supervisor sup-a on 10\.0\.0\.2 after (\d+) s "
                         r"\(5 nimbus\.supervisor\.timeout\.secs\)", again)
        assert after and int(after[1]) >= 5, again  # a tick a second: said at the first past 5 s
        for what in ("while ZooKeeper hears it", "a kill, a rebalance or a deactivation of its topologies",
                     "Fix the network between the master and 10.0.0.2",
                     "to move its executors now, stop the supervisor on 10.0.0.2"):
            assert what in again, (what, again)
        wait_until(lambda: len(about_sup_a()) > 2, 2)  # two seconds more: not said again
        assert len(about_sup_a()) == 2, about_sup_a()
        slots = {w["slot"] for w in m.get_topology_info("t")["workers"]}
        assert slots == {"10.0.0.2:6700", "10.0.0.3:6700"}, "a machine ZooKeeper hears was taken for lost"
    finally:
        if m is not None:
            m.close()
        if client is not None:
            client.close()
        leader.stop()
        presence.stop()


def test_a_machine_only_zookeeper_hears_stays_held_and_its_worker_runs_on_when_the_master_hears_again(
        conf, zookeeper, master_session):
    """sup-a (10.0.0.2, one of the topology's two workers) is cut off from the master alone:
    ZooKeeper hears it, so it is held, said once. Then the master hears nothing at all for 2 s
    (as when it is paused; sup-b keeps no ZooKeeper node): a spell of silence, which ends when
    sup-b syncs again. That silence was the master's; sup-a's, before it, was not. Yet the end
    of the spell gave sup-a its timeout anew, as if heard: its hold ended unsaid, its worker was
    restarted in place (a new launch its machine never gets, while the old one runs on) and
    sup-a was held and said again a second later. Now it stays held, said once, its worker
    untouched, and neither worker restarts."""
    from squall._nimbus import Heartbeat, SupervisorSync
    from squall.cluster.client import MasterClient

    from ..process.recovery_topology import recovery_topology

    secret = SECRET.encode()
    presence = SupervisorPresence(conf, secret, "sup-a", "10.0.0.2", [6700]).start()
    leader = _Running({**conf, "nimbus.thrift.port": 0, "nimbus.supervisor.timeout.secs": 1,
                       "nimbus.task.timeout.secs": 1, "nimbus.task.launch.secs": 60,
                       "worker.heartbeat.frequency.secs": 0.1})
    m = None
    try:
        assert wait_until(lambda: read_presence(master_session, "sup-a") is not None, 10)
        assert wait_until(lambda: leader.master.leading, 20)
        m = MasterClient({**conf, "nimbus.seeds": ["127.0.0.1"], "nimbus.thrift.port": leader.master.port})
        hosts = {"sup-a": "10.0.0.2", "sup-b": "10.0.0.3"}
        for sid, host in hosts.items():
            m.nimbus.supervisor_sync(SupervisorSync(sid, host, [6700]))
        storm_id = m.submit_topology("t", {"topology.workers": 2}, recovery_topology(10))
        launches = dict(leader.master.topologies["t"].launch_ids)
        assert set(launches) == {"10.0.0.2:6700", "10.0.0.3:6700"}

        def heard(*sids):  # each supervisor of ``sids`` syncs, then its worker beats
            for sid in sids:
                m.nimbus.supervisor_sync(SupervisorSync(sid, hosts[sid], [6700]))
                slot = f"{hosts[sid]}:6700"
                m.nimbus.heartbeat(Heartbeat(storm_id, slot, launches[slot]))
            return False

        def errors():
            return [e["error"] for e in m.get_topology_info("t")["errors"]]

        def said_of_sup_a():
            return [e for e in errors() if e.startswith("the master cannot reach supervisor sup-a on 10.0.0.2")]

        wait_until(lambda: heard("sup-a", "sup-b"), 1.0, interval=0.1)  # both heard for a second
        assert wait_until(lambda: heard("sup-b") or said_of_sup_a(), 10, interval=0.1)  # sup-a cut off: held
        wait_until(lambda: heard("sup-b"), 1.0, interval=0.1)
        assert wait_until(lambda: any(e.startswith("the master heard none of its 2 supervisors") for e in errors()),
                          10, interval=0.1)  # nothing heard: the spell
        wait_until(lambda: heard("sup-b"), 4.0, interval=0.1)  # sup-b heard again: the spell ends
        workers = {w["slot"]: w for w in m.get_topology_info("t")["workers"]}
        restarts = {slot: w["restarts"] for slot, w in workers.items()}
        assert restarts == {"10.0.0.2:6700": 0, "10.0.0.3:6700": 0}, restarts  # on main: 10.0.0.2:6700 restarted
        assert dict(leader.master.topologies["t"].launch_ids) == launches
        assert len(said_of_sup_a()) == 1, said_of_sup_a()  # on main: 2, the second "unheard for 1 s"
        assert leader.master.machines.holds("sup-a") and "sup-a" in leader.master.supervisors
    finally:
        if m is not None:
            m.close()
        leader.stop()
        presence.stop()
