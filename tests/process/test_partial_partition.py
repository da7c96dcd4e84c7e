"""A Nimbus HA leader that loses its link to ONE machine (a partial partition): three machines in
network namespaces of their own (`Network`), the leader in the root namespace, a real ZooKeeper
there on another address of it. Only the cut machine's route to the leader is blackholed: it
still reaches ZooKeeper and the other machines, and its worker passes tuples on.

Before supervisors published their liveness to ZooKeeper (`squall.cluster.liveness`), the leader
took the cut machine for lost after ``nimbus.supervisor.timeout.secs`` and moved its executors to
the spare machine, while the cut machine's worker, whose supervisor never heard the new
assignment, ran on: every executor of it ran twice (two copies of the spout read the source,
two processes took the sink tasks' tuples), and the ids emitted meanwhile were taken twice.
Storm's Nimbus reads supervisor liveness from ZooKeeper, so one cut off from a supervisor but
not from ZooKeeper does not take it for lost; neither does squall's now. Every record the spout
sent is counted (`partition_topology`, a finite set of ids)."""

from collections import defaultdict

import pytest

from tests.written import finished_lines

from ..conftest import wait_until
from ..ports import free_ports
from ..zookeeper_server import ZooKeeperServer, missing
from .conftest import Cluster
from .cut_runs import start_cut_run
from .nodes import Machine, NetnsUnavailable, Network
from .partition_topology import sink_counts, sink_rows, spout_events, spout_lines

pytest.importorskip("kazoo")

SECRET = "squall-partial-partition-secret-0123456789"
TAG = "sqpp"  # partial partition: its own prefix for the namespaces, apart from other tests'
IDS = 2400  # at 200 a second: the spout still emits for seconds after the heal


def _copies(out):
    """task -> the processes that ran it: the spout (task "source") by the pids of its emits,
    each sink task by the pids that wrote its log."""
    by: dict[str, set[int]] = defaultdict(set)
    for kind, _, pid, _ in spout_lines(out):
        if kind == "e":
            by["source"].add(pid)
    for f in out.glob("sink-*.log"):
        for line in finished_lines(f):
            parts = line.split()
            if len(parts) == 3:
                by[f.stem].add(int(parts[1]))
    return dict(by)


def test_a_leader_cut_off_from_one_machine_that_zookeeper_hears_runs_no_executor_twice(tmp_path):
    why_not = missing()
    if why_not:
        pytest.skip(why_not)
    try:
        net = Network(3, tag=TAG)
    except NetnsUnavailable as e:
        pytest.skip(f"network namespaces cannot be made here ({e})")
    zookeeper = None
    try:
        # ZooKeeper on an address of the root namespace that the machines reach, not the leader's:
        # a machine's route to the leader is cut, its route to ZooKeeper is not
        zookeeper = ZooKeeperServer(tmp_path / "zk", host=net.second_master_address()).start()
        [port] = free_ports(1)
        cluster = Cluster(tmp_path, supervise=False, **{
            "nimbus.host": net.master_address, "nimbus.thrift.port": port, "squall.secret": SECRET,
            "storm.zookeeper.servers": [zookeeper.address], "storm.zookeeper.session.timeout": 3000,
            "storm.zookeeper.root": f"/storm-{tmp_path.name}", "nimbus.seeds": [f"{net.master_address}:{port}"],
            "nimbus.task.timeout.secs": 3, "nimbus.supervisor.timeout.secs": 3})
        try:
            slot_port = cluster.conf["supervisor.slots.ports"][0]
            machines = [Machine(cluster, f"m{i}", net.addresses[i], net.namespaces[i],
                                **{"supervisor.slots.ports": [slot_port]}) for i in range(3)]

            run = start_cut_run(cluster, machines, tmp_path, [tmp_path / "master.log"], IDS)
            out, info, why = run.out, run.info, run.why
            workers, launches = run.workers(), run.launches()
            spout_pid = spout_lines(out)[-1][2]
            [victim] = [i for i, mc in enumerate(machines) if spout_pid in workers[mc.name]]
            victim_host = net.addresses[victim]

            net.block(victim, net.master_address)  # the leader's link to it only
            # past nimbus.supervisor.timeout.secs: the leader has said what it makes of the silence
            assert wait_until(lambda: [e for e in info()["errors"] if victim_host in e["error"]], 15), \
                "the leader said nothing of the silent machine\n" + why()
            # long enough for executors moved to the spare machine to start and run
            wait_until(lambda: len(_copies(out)["source"]) > 1, 5)
            net.block(victim, net.master_address, unblock=True)

            assert wait_until(lambda: set(range(IDS)) <= set(spout_events(out)[1]), 60), \
                f"ids never acked: {sorted(set(range(IDS)) - set(spout_events(out)[1]))[:20]}\n{why()}"
            emitted, acked, failed = spout_events(out)
            counts = sink_counts(out)
            copies = _copies(out)
            errors = [e["error"] for e in info()["errors"]]
            twice = sum(c > 1 for c in counts.values())
            print(f"emitted {len(emitted)} ({len(set(emitted))} ids), acked {len(acked)}, failed {len(failed)}, "
                  f"sinks took {len(sink_rows(out))} ({len(counts)} ids, {twice} twice), processes per task "
                  f"{ {t: len(p) for t, p in sorted(copies.items())} }")
            assert all(len(pids) == 1 for pids in copies.values()), \
                f"executors ran in more than one process: {copies}\n{errors}\n{why()}"
            assert sorted(counts) == list(range(IDS)) and twice == 0, \
                f"sinks took {sum(counts.values())} records of {IDS} ids, {twice} ids twice\n{errors}"
            assert not failed, f"{len(failed)} ids failed and were replayed"
            assert sorted(acked) == list(range(IDS)), f"{len(acked)} acks for {IDS} ids"
            assert run.workers() == workers, "workers restarted or moved"
            assert run.launches() == launches
            [said] = [e for e in errors if victim_host in e]
            assert "ZooKeeper hears it" in said and "not taken for lost" in said, said
            with cluster.client() as m:  # counted as well as kept: `squall list` shows it
                [listed] = [t for t in m.list_topologies() if t["name"] == "cut"]
            assert listed["errors"] >= listed["errors_kept"] >= 1, listed
        finally:
            cluster.stop()
    finally:
        if zookeeper is not None:
            zookeeper.stop()
        net.remove()
