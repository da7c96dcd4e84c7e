"""Nimbus HA for real: three masters on a real ZooKeeper, a supervisor and its worker processes,
and the leader SIGKILLed under a running reliable topology (issue 15, items 1 and 2)."""

import signal
import subprocess
import sys
import time

import pytest
import yaml

from squall._config import cluster_conf
from squall.cluster.client import MasterClient
from squall.ui.storm_json import nimbus_summary
from squall._errors import RemoteError
from squall._wire import Client

from ..conftest import wait_until
from ..ports import free_ports
from .conftest import _squall_processes
from squall import TopologyBuilder

from .recovery_topology import RECOVERY_CONF, DurableSpout, Sink, Slowish, acked, recovery_topology, stop_and_wait
from .semantics_topology import topology_conf

pytest.importorskip("kazoo")

SESSION_MS = 3000
SECRET = "nimbus-ha-test-secret-0123456789"


class PacedSpout(DurableSpout):
    """`DurableSpout` at most ``rate`` ids a second (``n`` None: until the test stops it, so
    that tuples flow before, during and after the failover however long it takes)."""

    def __init__(self, n, rate):
        super().__init__(n)
        self.gap = 1.0 / rate
        self.due = 0.0

    def next_tuple(self):
        now = time.monotonic()
        if now >= self.due:
            self.due = max(self.due + self.gap, now - 0.1)
            super().next_tuple()


def paced_topology(n, rate=500):
    b = TopologyBuilder()
    b.set_spout("source", PacedSpout(n, rate), 1)
    b.set_bolt("work", Slowish(), 2).shuffle_grouping("source")
    b.set_bolt("sink", Sink(), 2).fields_grouping("work", ["id"])
    return b.create_topology()


class HaCluster:
    """Three masters (``squall nimbus --no-supervisor``), each with its own storm.local.dir as on
    its own machine, one supervisor, all sharing the cluster's secret and nimbus.seeds."""

    def __init__(self, tmp_path, zookeeper):
        *self.ports, sup1, sup2 = free_ports(5)
        self.tmp = tmp_path
        self.base = {"squall.secret": SECRET, "storm.zookeeper.servers": [zookeeper.address],
                     "storm.zookeeper.session.timeout": SESSION_MS,
                     "nimbus.seeds": [f"127.0.0.1:{p}" for p in self.ports],
                     "nimbus.task.timeout.secs": 5, "nimbus.monitor.freq.secs": 1,
                     "storm.zookeeper.root": f"/storm-{tmp_path.name}"}
        self.sup_conf = {**self.base, "storm.local.dir": str(tmp_path / "supervisor-host"),
                         "supervisor.slots.ports": [sup1, sup2]}
        self.masters = {}
        for i in range(3):
            self.start_master(i)
        sup_file = tmp_path / "supervisor.yaml"
        sup_file.write_text(yaml.safe_dump(self.sup_conf))
        self.supervisor = subprocess.Popen(
            [sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(sup_file)],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "supervisor.log", "ab"))

    def master_conf(self, i):
        return {**self.base, "storm.local.dir": str(self.tmp / f"master{i}"), "nimbus.thrift.port": self.ports[i]}

    def start_master(self, i):
        conf_file = self.tmp / f"master{i}.yaml"
        conf_file.write_text(yaml.safe_dump(self.master_conf(i)))
        self.masters[i] = subprocess.Popen(
            [sys.executable, "-m", "squall.cli", "nimbus", "--no-supervisor", "--config", str(conf_file)],
            stdout=subprocess.DEVNULL, stderr=open(self.tmp / f"master{i}.log", "ab"))
        assert wait_until(lambda: self.status_of(i) not in (None, "Offline"), 30), f"master {i} did not come up"

    def call(self, i, op, **args):
        c = Client("127.0.0.1", self.ports[i], SECRET.encode(), timeout=5)
        try:
            return c.call(op, **args)
        finally:
            c.close()

    def status_of(self, i):
        """Master ``i``'s status as the running masters see it (None: none answers)."""
        for j in self.masters:
            try:
                rows = self.call(j, "nimbuses")
            except Exception:
                continue
            return next(r["status"] for r in rows if r["port"] == self.ports[i])
        return None

    def leader(self):
        """The index of the master that a running master names as the leader (None: none)."""
        for j, proc in self.masters.items():
            if proc.poll() is not None:
                continue
            try:
                leader = self.call(j, "get_leader")
            except Exception:
                continue
            if leader and leader["port"] in self.ports:
                i = self.ports.index(leader["port"])
                if self.masters[i].poll() is None:
                    return i
        return None

    def client(self):
        return MasterClient(cluster_conf({**self.base, "storm.local.dir": str(self.tmp / "client")}))

    def workers(self):
        return {p for p, c in _squall_processes(str(self.tmp)).items() if "squall.worker" in c}

    def stop(self):
        for proc in [*self.masters.values(), self.supervisor]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*self.masters.values(), self.supervisor]:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        assert wait_until(lambda: not _squall_processes(str(self.tmp)), 15), _squall_processes(str(self.tmp))


@pytest.fixture
def ha_cluster(tmp_path, zookeeper):
    c = HaCluster(tmp_path, zookeeper)
    try:
        yield c
    finally:
        c.stop()


def test_sigkilled_leader_fails_over_without_stopping_workers_or_losing_tuples(ha_cluster, tmp_path):
    """SIGKILL the leader under a reliable topology: another master leads within the ZooKeeper
    session timeout plus a few seconds, the topology is not resubmitted, no worker stops, every
    id is acked; kill, rebalance and a new submission then work through the new leader, a
    follower refuses them naming it, and the old master rejoins as a follower."""
    c = ha_cluster
    assert wait_until(lambda: c.leader() is not None, 20), "no master took the lead"
    first = c.leader()
    assert sorted(c.status_of(i) for i in range(3)) == ["Leader", "Not a Leader", "Not a Leader"]
    out = tmp_path / "out"
    out.mkdir()
    with c.client() as m:
        storm_id = m.submit_topology("ha", topology_conf(out, **RECOVERY_CONF), paced_topology(None))
    assert wait_until(lambda: len(acked(out)) > 200, 60), "the topology did not start processing"
    workers = c.workers()
    assert len(workers) == 2

    c.masters[first].send_signal(signal.SIGKILL)
    killed_at, acked_then = time.monotonic(), len(acked(out))
    assert wait_until(lambda: c.leader() not in (None, first), SESSION_MS / 1000 + 10, interval=0.05), \
        "no other master took the lead"
    took = time.monotonic() - killed_at
    new = c.leader()
    acked_at_new_leader = len(acked(out))
    print(f"\ntime to new leader after SIGKILL: {took:.2f} s (ZooKeeper session timeout {SESSION_MS / 1000:g} s); "
          f"ids acked meanwhile, with no master: {acked_at_new_leader - acked_then}")
    stop_and_wait(out, resume=200)  # once tuples flow under the new leader
    assert c.workers() == workers, "workers were restarted"
    assert c.status_of(first) == "Offline"
    with c.client() as m:  # the UI's nimbus summary, as Storm's shows a dead seed
        rows = nimbus_summary(m.get_cluster_info())["nimbuses"]
    assert {(r["port"], r["status"], r["nimbusUpTimeSeconds"]) for r in rows if r["status"] != "Not a Leader"} == {
        (c.ports[new], "Leader", next(r["nimbusUpTimeSeconds"] for r in rows if r["port"] == c.ports[new])),
        (c.ports[first], "Offline", "Not applicable")}
    with c.client() as m:
        assert m.get_leader().port == c.ports[new]
        [row] = m.list_topologies()
        assert (row["id"], row["status"], row["num_workers"]) == (storm_id, "ACTIVE", 2)  # not resubmitted
        info = m.get_topology_info("ha")
        print(f"tuples replayed across the failover (spout failed count): {info['components']['source']['failed']}; "
              f"worker restarts: {sum(w['restarts'] for w in info['workers'])}")
        assert all(w["restarts"] == 0 for w in info["workers"])

        # a follower refuses a change, naming the leader
        follower = next(i for i in range(3) if i not in (first, new))
        with pytest.raises(RemoteError, match=f"not a leader, current leader is 127.0.0.1:{c.ports[new]}"):
            c.call(follower, "kill", name="ha", wait_secs=0)

        # rebalance, a new submission and kill, through the new leader
        m.rebalance("ha", num_workers=1, wait_secs=0)
        assert wait_until(lambda: m.list_topologies()[0]["num_workers"] == 1 and
                          m.list_topologies()[0]["status"] == "ACTIVE", 15), m.list_topologies()
        out2 = tmp_path / "out2"
        out2.mkdir()
        m.submit_topology("after", topology_conf(out2, workers=1, **RECOVERY_CONF), recovery_topology(100))
        assert wait_until(lambda: acked(out2) >= set(range(100)), 60), "the new submission did not run"
        m.kill_topology("ha", wait_secs=0)
        m.kill_topology("after", wait_secs=0)
        assert wait_until(lambda: not m.list_topologies(), 15), m.list_topologies()

    # the old master comes back as a follower
    c.start_master(first)
    assert wait_until(lambda: c.status_of(first) == "Not a Leader", 20)
    assert c.leader() == new
    listing = subprocess.run([sys.executable, "-m", "squall.cli", "list", "--config", str(c.tmp / f"master{first}.yaml")],
                             capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    assert f"127.0.0.1:{c.ports[new]}" in listing.stdout and "Leader" in listing.stdout
    assert f"127.0.0.1:{c.ports[first]}" in listing.stdout and "Not a Leader" in listing.stdout
