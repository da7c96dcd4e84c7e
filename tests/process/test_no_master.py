"""The process host's supervisor while no master answers: as Storm's supervisor restarts a dead
worker from its local assignment whether Nimbus is up or not, a worker SIGKILLed while the master
is down (and, under Nimbus HA, while no master leads) is started again by its supervisor alone,
data flows through it again, and once a master answers every id the spout emitted is acked
(Storm's at-least-once: what the dead worker held timed out and was replayed).

The topology (`recovery_topology`: spout, 2 ``work`` tasks on a shuffle, 2 ``sink`` tasks on a
fields grouping by id) runs on 2 workers; the one killed runs a ``sink`` task and not the spout,
so ids whose sink task it runs are acked only if its restarted worker processes them.
"""

import os
import signal
import subprocess
import sys

import pytest

from squall import StormSubmitter
from squall._errors import SquallError

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture
from .conftest import Cluster, topology_errors
from .recovery_topology import (
    RECOVERY_CONF,
    acked,
    recovery_topology,
    stop_and_wait,
    stop_spouts,
    stopped_at,
    wait_started,
)
from .semantics_topology import topology_conf

NO_MASTER_CONF = {**RECOVERY_CONF, "topology.message.timeout.secs": 2}
"""`RECOVERY_CONF` with a message timeout of 2 s: with no master to tell the peers of a
SIGKILLed worker, the tuples it held fail only by timing out (between T and 2T), and until then
they fill the spout's pending and hold it back (`stop_spouts` is seen, and the ids acked, only
after): each such test waited 3 to 6 s for them, now 2 to 4."""


def _victim(info):
    """The worker entry of ``info`` that runs a ``sink`` task and not the spout."""
    def ports(component):
        return {st["worker"] for st in info["components"][component]["task_stats"].values()}
    spout, sinks = ports("source"), ports("sink")
    victim = next(w for w in info["workers"] if (p := int(w["slot"].rsplit(":", 1)[1])) not in spout and p in sinks)
    return victim


def _ids_all_acked_without_a_master(out, workers, why):
    """With no master answering: stop the spout and wait until every id it emitted is acked
    (the restarted worker's sink task included); return how many it emitted."""
    stop_spouts(out)
    assert wait_until(lambda: stopped_at(out) is not None, 30), f"the spout did not stop\n{why()}"
    n = stopped_at(out)
    assert wait_until(lambda: acked(out) >= set(range(n)), 60), \
        f"{len(set(range(n)) - acked(out))} of {n} ids not acked without a master, e.g. " \
        f"{sorted(set(range(n)) - acked(out))[:20]}\n{why()}"
    return n


def _logs(cluster_dir, tail=3000):
    parts = []
    for log in [cluster_dir.parent / "master.log", *sorted((cluster_dir / "supervisor").glob("*.log"))]:
        if log.exists():
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-tail:]}")
    return "\n".join(parts)


def _kill_the_master_then_the_worker(cluster, pid):
    """SIGKILL the master, then the worker ``pid``; its supervisor starts it again, without a master."""
    cluster.master.send_signal(signal.SIGKILL)
    cluster.master.wait(5)
    os.kill(pid, signal.SIGKILL)
    # one look per try: two could see the victim alive, then gone before its restart
    assert wait_until(lambda: len(w := cluster.workers()) == 2 and pid not in w, 20), \
        f"the killed worker was not started again without the master\n{_logs(cluster.dir)}"


def test_a_supervisor_started_while_the_master_is_down_starts_its_held_workers(tmp_path):
    """A supervisor SIGKILLed while the master is down takes its workers with it; started again
    (as systemd would), with still no master, it reads its sealed local assignment and starts
    both workers from what they kept, and they run the topology on: the endless spout's ids
    keep being acked; a forged ``local-assignments`` file is refused, naming the file."""
    cluster = Cluster(tmp_path)
    try:
        out = tmp_path / "out"
        out.mkdir()
        with StormSubmitter.using_conf(cluster.conf):
            StormSubmitter.submit_topology("held", topology_conf(out, **RECOVERY_CONF), recovery_topology())
        wait_started(out, why=lambda: _logs(cluster.dir) + topology_errors(cluster.client, "held"))
        held = cluster.dir / "supervisor" / "local-assignments"
        cluster.master.send_signal(signal.SIGKILL)
        cluster.master.wait(5)
        (supervisor,) = cluster.supervisors()
        old = cluster.workers()
        os.kill(supervisor, signal.SIGKILL)
        assert wait_until(lambda: not set(cluster.workers()) & set(old), 10), "workers outlived their supervisor"

        with open(tmp_path / "supervisor2.log", "ab") as log:
            sup = subprocess.Popen([sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(cluster.file)],
                                   stdout=subprocess.DEVNULL, stderr=log)
            try:
                assert wait_until(lambda: len(cluster.workers()) == 2, 20), \
                    (tmp_path / "supervisor2.log").read_text()[-3000:]
                before = len(acked(out))
                assert wait_until(lambda: len(acked(out)) > before + 100, 30), \
                    "no id acked by the workers its supervisor started without a master\n" + \
                    (tmp_path / "supervisor2.log").read_text()[-3000:]
            finally:
                sup.send_signal(signal.SIGTERM)
                sup.wait(20)
            assert not cluster.workers()

            held.write_bytes(b"squall-sealed/1 supervisor-local-assignments\n" + b"\0" * 32 + b"[]")
            sup = subprocess.Popen([sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(cluster.file)],
                                   stdout=subprocess.DEVNULL, stderr=log)
            try:
                assert wait_until(lambda: "ignored" in (tmp_path / "supervisor2.log").read_text(), 20)
                text = (tmp_path / "supervisor2.log").read_text()
                assert f"ignored {held}: not a local assignment this cluster's supervisor wrote" in text
            finally:
                sup.send_signal(signal.SIGTERM)
                sup.wait(20)
            assert not cluster.workers()
        cluster.start_master()
        stop_and_wait(out, resume=50)
    finally:
        cluster.stop()



def test_a_supervisor_restarted_while_no_master_leads_keeps_its_id_and_the_leader_keeps_its_workers(
        tmp_path, zookeeper):
    """Nimbus HA on ZooKeeper, every master SIGKILLed, then the supervisor (its workers die with
    it); the supervisor started again with no leader starts both workers from its local
    assignment, and ids are acked again. Then a master starts and leads: it knows the
    supervisor's id from ZooKeeper, and the supervisor registers under that id (kept, sealed, in
    its directory), so the leader finds the workers it started running their launches and keeps
    them (same pids, no relaunch), and the spout runs on to the end with every id acked. Under a
    new id the leader took the supervisor for another one replacing a dead one on that machine,
    and gave each of its slots a new launch: both workers restarted once more, for nothing."""
    pytest.importorskip("kazoo")
    from .test_nimbus_ha import HaCluster
    c = HaCluster(tmp_path, zookeeper)
    log_path = tmp_path / "supervisor.log"

    def why():
        return log_path.read_text(errors="replace")[-3000:]
    try:
        assert wait_until(lambda: c.leader() is not None, 20), "no master took the lead"
        out = tmp_path / "out"
        out.mkdir()
        with c.client() as m:
            m.submit_topology("sameid", topology_conf(out, **RECOVERY_CONF), recovery_topology())
            wait_started(out, 60, why=lambda: why() + topology_errors(c.client, "sameid"))
            [before] = m.nimbus.supervisors()
        for proc in c.masters.values():
            proc.send_signal(signal.SIGKILL)
        for proc in c.masters.values():
            proc.wait(5)
        old = c.workers()
        c.supervisor.send_signal(signal.SIGKILL)
        c.supervisor.wait(5)
        assert wait_until(lambda: not c.workers() & old, 10), "workers outlived their supervisor"

        with open(log_path, "ab") as log:
            c.supervisor = subprocess.Popen(
                [sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(tmp_path / "supervisor.yaml")],
                stdout=subprocess.DEVNULL, stderr=log)
        assert wait_until(lambda: len(c.workers()) == 2, 20), why()
        restarted = c.workers()
        flowing = len(acked(out))
        assert wait_until(lambda: len(acked(out)) > flowing + 100, 30), \
            f"no id acked by the workers the supervisor started while no master leads\n{why()}"

        c.start_master(0)
        assert wait_until(lambda: c.status_of(0) == "Leader", 30), "the master started again did not lead"
        # the new supervisor's first sync with the leader (the old one's is in the log too),
        # where a new id made the leader give its slots new launches
        assert wait_until(lambda: why().count(" registered slots ") == 2, 20), why()

        def alive():
            try:
                with c.client() as m:
                    workers = m.get_topology_info("sameid")["workers"]
            except SquallError:  # the leader loads the topologies from ZooKeeper as it takes the lead
                return None
            return workers if all(w["alive"] for w in workers) else None
        assert wait_until(alive, 30), f"the workers are not all alive under the new leader\n{why()}"
        workers = alive()
        assert {w["pid"] for w in workers} == restarted == c.workers(), \
            f"the leader restarted the workers the supervisor started: {workers}\n{why()}"
        with c.client() as m:
            assert [s["id"] for s in m.nimbus.supervisors()] == [before["id"]]
        n = stop_and_wait(out, resume=50, why=why)  # every id the spout emitted, 0 to n-1, acked
        assert n > 200 and c.workers() == restarted  # and no worker restarted since
    finally:
        c.stop()


def test_under_nimbus_ha_a_worker_killed_while_no_master_leads_is_restarted(tmp_path, zookeeper):
    """Nimbus HA on ZooKeeper, every master SIGKILLed (no leader): a worker SIGKILLed then is
    started again by its supervisor alone, every id emitted is acked with no leader, and the
    master that leads next keeps the restarted worker's launch."""
    pytest.importorskip("kazoo")
    from .test_nimbus_ha import HaCluster
    c = HaCluster(tmp_path, zookeeper)
    try:
        assert wait_until(lambda: c.leader() is not None, 20), "no master took the lead"
        out = tmp_path / "out"
        out.mkdir()
        with c.client() as m:
            m.submit_topology("noleader", topology_conf(out, **NO_MASTER_CONF), recovery_topology())
            wait_started(out, 60, why=lambda: (tmp_path / "supervisor.log").read_text(errors="replace")[-3000:]
                         + topology_errors(c.client, "noleader"))
            victim = _victim(m.get_topology_info("noleader"))
        workers = c.workers()
        assert victim["pid"] in workers and len(workers) == 2
        for proc in c.masters.values():
            proc.send_signal(signal.SIGKILL)
        for proc in c.masters.values():
            proc.wait(5)
        os.kill(victim["pid"], signal.SIGKILL)

        def why():
            return (tmp_path / "supervisor.log").read_text(errors="replace")[-3000:]
        assert wait_until(lambda: len(w := c.workers()) == 2 and victim["pid"] not in w, 20), \
            f"the killed worker was not started again while no master leads\n{why()}"
        restarted = c.workers() - workers
        n = _ids_all_acked_without_a_master(out, workers, why)

        c.start_master(0)
        assert wait_until(lambda: c.status_of(0) == "Leader", 30), "the master started again did not lead"

        def alive():
            try:
                with c.client() as m:
                    workers = m.get_topology_info("noleader")["workers"]
            except SquallError:  # the leader loads the topologies from ZooKeeper as it takes the lead
                return None
            return {w["pid"] for w in workers} if all(w["alive"] for w in workers) else None
        assert wait_until(alive, 30), f"the workers are not all alive under the new leader\n{why()}"
        pids = alive()
        assert restarted <= pids and c.workers() == pids, "the new leader restarted the supervisor's worker"
        assert acked(out) >= set(range(n))
    finally:
        c.stop()


def _storm_ids(workers):
    """The ``--storm-id`` of each worker command line in ``workers`` (pid -> command line)."""
    return sorted(cmd.split("--storm-id ", 1)[1].split()[0] for cmd in workers.values())


@pytest.mark.parametrize("order", ["kill", "rebalance"])
def test_a_worker_the_master_told_to_stop_is_not_started_again_while_no_master_answers(tmp_path, order):
    """The master kills the topology (or rebalances it onto one worker, giving each slot a new
    launch); its workers hear it from their heartbeats and end before their supervisor's next sync
    (here the supervisor is SIGSTOPped meanwhile, a sync period made as long as it takes); then the
    master is SIGKILLed. The supervisor, whose syncs now reach no master, must not start those
    workers again from their kept copies: the master's word ended them. Before, it took their ends
    for crashes and started both again under their old launches: the killed topology ran, spout
    and all, acking new ids with no topology left to run it. The master started again then has its
    way (no worker for a kill; one, the new launch, for the rebalance), and the ids are counted:
    every id the spout emitted is acked, and no worker runs beside another of its topology's."""
    cluster = Cluster(tmp_path)
    try:
        out = tmp_path / "out"
        out.mkdir()
        with cluster.client() as m:
            storm_id = m.submit_topology("told", topology_conf(out, **RECOVERY_CONF), recovery_topology())
        wait_started(out, why=lambda: _logs(cluster.dir) + topology_errors(cluster.client, "told"))
        (supervisor,) = cluster.supervisors()
        sup_log = cluster.dir / "supervisor" / "supervisor.log"
        old = cluster.workers()
        assert len(old) == 2
        os.kill(supervisor, signal.SIGSTOP)  # it syncs no more: only the workers hear the master now
        try:
            with cluster.client() as m:
                if order == "kill":
                    m.kill_topology("told", wait_secs=0)
                else:
                    m.rebalance("told", num_workers=1, wait_secs=0)
            assert wait_until(lambda: not cluster.workers(), 30), \
                f"the workers did not end as the master told them\n{_logs(cluster.dir)}"
            cluster.master.send_signal(signal.SIGKILL)
            cluster.master.wait(5)
            acked_then = acked(out)
        finally:
            os.kill(supervisor, signal.SIGCONT)
        # the supervisor's first sync after SIGCONT reaches no master; it decides then about both ports
        assert wait_until(lambda: sup_log.read_text().count("cannot start again without the master") >= 2, 20), \
            f"the supervisor did not hold the ports for the master\n{_logs(cluster.dir)}"
        assert not cluster.workers(), f"workers the master stopped were started again\n{_logs(cluster.dir)}"
        assert "local restart" not in sup_log.read_text()
        assert acked(out) == acked_then, f"{len(acked(out) - acked_then)} ids acked after the master stopped the topology"

        cluster.start_master()
        if order == "kill":
            with cluster.client() as m:  # resubmitted, with another topology.workers
                storm_id = m.submit_topology("told", topology_conf(out, workers=1, **RECOVERY_CONF),
                                             recovery_topology())
        assert wait_until(lambda: len(cluster.workers()) == 1, 30), _logs(cluster.dir)
        assert _storm_ids(cluster.workers()) == [storm_id]
        n = stop_and_wait(out, resume=50, why=lambda: _logs(cluster.dir))
        assert n > 150 and acked(out) == set(range(n))  # every id once in the set, none beyond what was emitted
        assert _storm_ids(cluster.workers()) == [storm_id], "a worker ran beside the master's"
    finally:
        cluster.stop()


@pytest.mark.parametrize(("provider", "wire"), [("redis", "tcp"), ("file", "zmq")])
def test_a_worker_killed_while_the_master_is_down_is_restarted_with_its_states_and_kept_by_the_master(
        tmp_path, request, provider, wire):
    """The counting topology (`tests.state.counting`: a stateful ``count`` bolt, checkpointed;
    its state in Redis, or in the process host's default file store): master SIGKILLed, then a
    worker that runs a ``count`` task and not the spout. Its supervisor starts it again within a
    few syncs, and its ``count`` task goes on with the state namespace the master gave it before
    (and a file state with the check of its copy this launch made), kept in its sealed copy of
    the assignment: every id the spout emitted is acked with no master at all, and every id's
    committed count is at least 1 and at most the times it was emitted (Storm's at-least-once
    for stateful bolts, docs/state.md). The master started again finds the restarted worker's
    launch running and keeps it (no restart of its own). On either wire (ZeroMQ reconnects to
    the restarted worker by itself: the other worker's ``work`` tasks send to its ``count``
    task). Before, the task asked the master for its namespace (a file state also for the record
    of its last write), and its worker crash-looped ("cannot read from the master which state
    this task keeps its keys in") until a master answered. (One test for the stateless and the
    stateful claims: a cluster and a topology each, per wire, cost ~8 s.)"""
    from squall.state import StateHome, get_state, state_key

    from ..state.counting import check_counts, counting_topology
    cluster = Cluster(tmp_path, **{"squall.transport.wire": wire})
    try:
        out = tmp_path / "out"
        out.mkdir()
        if provider == "redis":
            state_conf = {"topology.state.provider": "squall.state.redis:RedisKeyValueStateProvider",
                          "topology.state.provider.config": {"url": request.getfixturevalue("redis_server").url}}
        else:
            state_conf = {"topology.state.provider": "squall.state:FileKeyValueStateProvider"}
        conf = topology_conf(out, **RECOVERY_CONF, **state_conf, **{"topology.state.checkpoint.interval.ms": 300})
        with StormSubmitter.using_conf(cluster.conf):
            StormSubmitter.submit_topology("counted", conf, counting_topology(None))
        assert wait_until(lambda: len(acked(out)) > 100, 30), f"the topology did not start\n{_logs(cluster.dir)}"
        with cluster.client() as m:
            info = m.get_topology_info("counted")
        tasks = info["components"]["count"]["task_stats"]
        spout = {st["worker"] for st in info["components"]["source"]["task_stats"].values()}
        counters = {st["worker"] for st in tasks.values()}
        victim = next(w for w in info["workers"] if (p := int(w["slot"].rsplit(":", 1)[1])) not in spout
                      and p in counters)
        workers = cluster.workers()
        assert victim["pid"] in workers and len(workers) == 2

        _kill_the_master_then_the_worker(cluster, victim["pid"])
        restarted = set(cluster.workers()) - set(workers)
        assert len(restarted) == 1
        n = _ids_all_acked_without_a_master(out, workers, lambda: _logs(cluster.dir))
        assert n > 100
        sup_log = (cluster.dir / "supervisor" / "supervisor.log").read_text(errors="replace")
        assert "cannot start again without the master" not in sup_log, _logs(cluster.dir)

        # every id counted in the committed states, read as the workers wrote them
        home = StateHome(directory=cluster.dir / "state", key=state_key((cluster.dir / "secret").read_bytes().strip()))

        class Reader:
            state_home = home

            def get_this_component_id(self):
                return "(test)"

            def get_this_task_id(self):
                return -1

        def counts():
            found = {}
            for task in tasks:
                found.update(dict(get_state(f"count-{task}", {"topology.name": "counted", **state_conf},
                                            Reader()).committed()))
            return found
        # the acked ids' updates are committed at the next checkpoint after their ack
        assert wait_until(lambda: set(counts()) >= set(range(n)), 30), \
            f"{len(set(range(n)) - set(counts()))} of {n} ids not committed\n{_logs(cluster.dir)}"
        twice, replayed = check_counts(counts(), n, out)
        print(f"stateful worker restarted without a master: {n} ids, {twice} updates applied twice, "
              f"{replayed} tuples replayed")

        cluster.start_master()
        with cluster.client() as m:
            assert wait_until(lambda: all(w["alive"] for w in m.get_topology_info("counted")["workers"]), 20), \
                f"{m.get_topology_info('counted')['workers']}\n{_logs(cluster.dir)}"
            pids = {w["pid"] for w in m.get_topology_info("counted")["workers"]}
        assert restarted <= pids and set(cluster.workers()) == pids, "the master restarted the supervisor's worker"
        assert acked(out) >= set(range(n))
    finally:
        cluster.stop()
