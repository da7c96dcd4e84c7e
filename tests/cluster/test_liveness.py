"""Supervisors' liveness in ZooKeeper (`squall.cluster.liveness`) on a real ZooKeeper: a
supervisor's ephemeral node, as a master reads it, and what a master refuses to read there."""

import json
import logging

import pytest

from squall._config import cluster_conf
from squall._sealed import seal
from squall.cluster.ha import ALIVE, Coordinator, NodeVersion
from squall.cluster.liveness import Presence, PresenceWatch, SupervisorPresence, read_presence, supervisor_presence

from ..conftest import wait_until

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
