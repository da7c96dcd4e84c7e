"""`MasterServer` (`squall.cluster.server`): the master as a daemon, apart from the master's state.
A master served from an in-memory store, stopped, and made again from that store answers as the
first did; Nimbus HA's election is driven by the server, not by the master (`test_ha.py` runs it on
a real ZooKeeper)."""

from squall._config import cluster_conf
from squall._nimbus import MasterAddress
from squall.cluster.master import Master
from squall.cluster.store import MemoryStore
from squall.engine.clock import SimulatedClock

from ..process.recovery_topology import recovery_topology
from .test_ha import SECRET, _client, _Running

CONF = cluster_conf({"squall.secret": SECRET, "nimbus.thrift.port": 0})


def test_a_served_master_keeps_its_state_in_its_store_and_a_new_one_resumes_from_it():
    store = MemoryStore.for_conf(CONF)
    clock = SimulatedClock(100.0)
    first = _Running(CONF, Master(CONF, clock=clock, store=store))
    try:
        assert first.master.election is None  # a lone master: no election to drive
        with _client(first) as m:
            m.submit_topology("t", {}, recovery_topology(10), initial_status="INACTIVE")
        assert first.master.op_get_leader() == MasterAddress("127.0.0.1", first.master.port)
    finally:
        first.stop()
    again = _Running(CONF, Master(CONF, clock=clock, store=store))
    try:
        with _client(again) as m:
            assert [(t["name"], t["status"]) for t in m.list_topologies()] == [("t", "INACTIVE")]
            m.activate("t")
        assert store.load().topologies["t"]["status"] == "ACTIVE"
    finally:
        again.stop()
