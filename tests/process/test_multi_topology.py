"""Several topologies on one process-host cluster with fewer slots than they ask for: each
counts its own records exactly (they share component and stream names), and a topology placed
on fewer slots than it asked for spreads over the slots a killed one leaves, as Storm's
default scheduler does."""

from collections import Counter

from ..conftest import wait_until
from ..ports import free_ports
from .conftest import Cluster
from .multi_topology import spout_to_sink
from .semantics_topology import records, topology_conf


def _acked(out):
    return Counter(r["ack"] for r in records(out, "spout") if "ack" in r)


def _workers(m, name):
    return next((t["num_workers"], t["workers_wanted"]) for t in m.list_topologies() if t["name"] == name)


def test_a_squeezed_topology_spreads_over_the_slots_a_killed_one_frees_and_every_record_is_counted_once(tmp_path):
    c = Cluster(tmp_path, **{"supervisor.slots.ports": free_ports(3)})
    m = c.client()
    try:
        assert wait_until(lambda: m.get_cluster_info()["slots_total"] == 3, 20)
        outs = {name: tmp_path / name for name in ("alpha", "beta", "alpha-again")}
        for out in outs.values():
            out.mkdir()
        items = {name: [f"{name}:{i}" for i in range(200)] for name in outs}
        m.submit_topology("alpha", topology_conf(outs["alpha"], workers=2), spout_to_sink(items["alpha"]))
        # beta asks for 2 workers, 1 slot is left: it runs on 1 (inactive: its records are sent once it spread)
        m.submit_topology("beta", topology_conf(outs["beta"], workers=2), spout_to_sink(items["beta"]),
                          initial_status="INACTIVE")
        assert _workers(m, "beta") == (1, 2)

        assert wait_until(lambda: sum(_acked(outs["alpha"]).values()) == 200, 60)
        m.kill_topology("alpha", wait_secs=0)
        assert wait_until(lambda: _workers(m, "beta") == (2, 2), 20), m.list_topologies()
        m.activate("beta")
        # the name is free again: a new alpha takes the last slot
        m.submit_topology("alpha", topology_conf(outs["alpha-again"], workers=1), spout_to_sink(items["alpha-again"]))
        assert _workers(m, "alpha") == (1, 1)
        assert wait_until(lambda: sum(_acked(outs["beta"]).values()) == 200
                          and sum(_acked(outs["alpha-again"]).values()) == 200, 60)

        for name, out in outs.items():
            assert _acked(out) == Counter(range(200)), name  # each record acked, once
            sink = records(out, "sink")
            assert Counter(r["x"] for r in sink) == Counter(items[name]), name  # nothing lost, doubled or foreign
            assert {r["topo"] for r in sink} == {name.removesuffix("-again")}
        assert len({r["pid"] for r in records(outs["beta"], "sink")}) == 2  # beta's sinks ran in 2 workers
        for name in ("alpha", "beta"):
            m.kill_topology(name, wait_secs=0)
        assert wait_until(lambda: not c.workers(), 20)
    finally:
        m.close()
        c.stop()
