"""A Nimbus HA leader cut off from every supervisor, not from ZooKeeper (so it keeps the lead):
two machines in network namespaces of their own (`Network`), the leader and a follower in the
root namespace on addresses of their own, a real ZooKeeper there. Each machine's route to the
leader is blackholed; the follower, ZooKeeper (the masters') and the other machine stay
reachable, and the workers pass tuples on without any master. The leader heard no machine for
``nimbus.supervisor.timeout.secs``, took both for lost, and when the link healed gave every slot
a new launch: both workers were stopped and started again (each a few times over, as the
supervisors came back one after the other), their pending tuples replayed, though nothing was
wrong with either (`squall.cluster.silence`). Every record the spout sent is counted
(`partition_topology`, a finite set of ids)."""

import signal
import subprocess
import sys

import pytest
import yaml

from ..conftest import wait_until
from ..ports import free_ports
from .conftest import Cluster
from .cut_runs import start_cut_run
from .nodes import Machine, NetnsUnavailable, Network
from .partition_topology import sink_counts, spout_events

pytest.importorskip("kazoo")

SECRET = "squall-leader-cut-off-secret-0123456789"
TAG = "sqlco"  # leader cut off: its own prefix for the namespaces, apart from other tests'
IDS = 1800  # at 200 a second: the spout still emits for seconds after the heal


def test_a_leader_cut_off_from_every_machine_but_not_from_zookeeper_restarts_no_worker(tmp_path, zookeeper):
    try:
        net = Network(2, tag=TAG)
    except NetnsUnavailable as e:
        pytest.skip(f"network namespaces cannot be made here ({e})")
    follower = None
    try:
        follower_address = net.second_master_address()
        leader_port, follower_port = free_ports(2)
        cluster = Cluster(tmp_path, supervise=False, **{
            "nimbus.host": net.master_address, "nimbus.thrift.port": leader_port, "squall.secret": SECRET,
            "storm.zookeeper.servers": [zookeeper.address], "storm.zookeeper.session.timeout": 3000,
            "storm.zookeeper.root": f"/storm-{tmp_path.name}",
            "nimbus.seeds": [f"{net.master_address}:{leader_port}", f"{follower_address}:{follower_port}"],
            "nimbus.task.timeout.secs": 3, "nimbus.supervisor.timeout.secs": 3})
        try:
            # the leader is up (the cluster's client reached it): a second master follows
            conf_file = cluster.dir / "follower.yaml"
            conf_file.write_text(yaml.safe_dump({**cluster.conf, "nimbus.host": follower_address,
                                                 "nimbus.thrift.port": follower_port,
                                                 "storm.local.dir": str(cluster.dir / "follower")}))
            with open(tmp_path / "follower.log", "ab") as err:
                follower = subprocess.Popen([sys.executable, "-m", "squall.cli", "nimbus", "--no-supervisor",
                                             "--config", str(conf_file)], stdout=subprocess.DEVNULL, stderr=err)
            port = cluster.conf["supervisor.slots.ports"][0]
            machines = [Machine(cluster, f"m{i}", net.addresses[i], net.namespaces[i],
                                **{"supervisor.slots.ports": [port]}) for i in range(2)]

            run = start_cut_run(cluster, machines, tmp_path, [tmp_path / "master.log", tmp_path / "follower.log"], IDS)
            out, info, why = run.out, run.info, run.why
            workers, launches = run.workers(), run.launches()
            assert all(len(pids) == 1 for pids in workers.values()), workers

            for i in range(2):
                net.block(i, net.master_address)
            # past both timeouts: the leader has said what it makes of the silence
            assert wait_until(lambda: [e for e in info()["errors"] if "taken for lost" in e["error"]
                                       or "heard none of its 2 supervisors" in e["error"]], 15), \
                "the leader said nothing of its silent machines\n" + why()
            acked_during = len(spout_events(out)[1])
            for i in range(2):
                net.block(i, net.master_address, unblock=True)

            assert wait_until(lambda: set(range(IDS)) <= set(spout_events(out)[1]), 60), \
                f"ids never acked: {sorted(set(range(IDS)) - set(spout_events(out)[1]))[:20]}\n{why()}"
            emitted, acked, failed = spout_events(out)
            counts = sink_counts(out)
            now = run.workers()
            errors = [e["error"] for e in info()["errors"]]
            assert now == workers, f"workers restarted after the heal: {workers} -> {now}\n{errors}\n{why()}"
            assert run.launches() == launches
            assert not failed, f"{len(failed)} ids failed and were replayed"
            assert sorted(acked) == list(range(IDS)), f"{len(acked)} acks for {IDS} ids"
            assert sorted(emitted) == list(range(IDS)) and sorted(counts) == list(range(IDS)), \
                f"emitted {len(emitted)}, sinks took {sum(counts.values())} of {IDS} ids"
            assert all(c == 1 for c in counts.values()), f"{sum(c > 1 for c in counts.values())} ids taken twice"
            assert acked_during > 200, "nothing was acked while the leader was cut off"
            [said] = errors
            assert "the master heard none of its 2 supervisors" in said and "restarts no worker" in said, said
        finally:
            if follower is not None and follower.poll() is None:
                follower.send_signal(signal.SIGTERM)
                follower.wait(15)
            cluster.stop()
    finally:
        net.remove()
