"""Pickling a topology for the master (user modules by value, for that call only), and where
clients and supervisors find the master."""

import logging
import sys
import textwrap

import cloudpickle

from squall import LocalCluster, TopologyBuilder
from squall._config import cluster_conf
from squall.cluster.client import master_address
from squall.cluster.shipping import pickle_topology
from squall.cluster.supervisor import process_supervisor

LOCKED = """
    import threading

    from squall import Fields, Spout

    LOCK = threading.Lock()


    class Guarded(Spout):
        def declare_output_fields(self, declarer):
            declarer.declare(Fields("x"))

        def next_tuple(self):
            with LOCK:
                pass
"""

PLAIN = """
    from squall import Fields, Spout


    class Plain(Spout):
        def declare_output_fields(self, declarer):
            declarer.declare(Fields("x"))
"""


def _package(tmp_path, name, text):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "parts.py").write_text(textwrap.dedent(text))
    sys.path.insert(0, str(tmp_path))
    return __import__(f"{name}.parts").parts


def test_user_modules_go_by_value_only_for_that_call(tmp_path):
    parts = _package(tmp_path, "plainpkg", PLAIN)
    b = TopologyBuilder()
    b.set_spout("s", parts.Plain())
    topo = b.create_topology()
    try:
        blob = pickle_topology(topo)
        assert b"plainpkg" in blob and b"declare_output_fields" in blob  # the code is inside
        assert "plainpkg" not in cloudpickle.list_registry_pickle_by_value()
    finally:
        sys.path.remove(str(tmp_path))


def test_a_module_whose_state_cannot_be_pickled_falls_back_to_import_by_name(tmp_path, caplog):
    """A module-level lock cannot travel by value: the topology goes by reference, with a
    warning, and the process is left as it was (a LocalCluster still runs the topology)."""
    parts = _package(tmp_path, "lockpkg", LOCKED)
    b = TopologyBuilder()
    b.set_spout("s", parts.Guarded())
    topo = b.create_topology()
    try:
        with caplog.at_level(logging.WARNING, logger="squall.client"):
            blob = pickle_topology(topo)
        assert any("could not ship lockpkg by value" in r.getMessage() for r in caplog.records)
        assert cloudpickle.loads(blob).components["s"].obj.__class__ is parts.Guarded
        with LocalCluster() as cluster:
            cluster.submit_topology("locked", {}, topo)
            assert cluster.get_topology_info("locked")["status"] == "ACTIVE"
    finally:
        sys.path.remove(str(tmp_path))


def test_nimbus_seeds_defaults_to_nimbus_host_for_clients_and_supervisors(tmp_path):
    """A squall.yaml that sets only nimbus.host serves the master and everyone who reaches it
    (nimbus.seeds was ["localhost"] whatever nimbus.host said)."""
    conf = cluster_conf({"nimbus.host": "10.1.2.3", "storm.local.dir": str(tmp_path)})
    assert master_address(conf) == ("10.1.2.3", 6627)
    sup = process_supervisor(conf, host="127.0.0.1")
    assert sup.master.address == ("10.1.2.3", 6627)           # where it syncs
    assert sup.launcher.master.address == ("10.1.2.3", 6627)  # and where its workers go
    seeded = {**conf, "nimbus.seeds": ["master.example", "other.example:6700"]}
    assert master_address(seeded) == ("master.example", 6627)
    sup = process_supervisor(seeded, host="127.0.0.1")
    # several seeds (Nimbus HA): the leader is whichever of them says so (seeds.LeaderLink)
    assert sup.master.seeds == [("master.example", 6627), ("other.example", 6700)]
    assert sup.launcher.master is sup.master
