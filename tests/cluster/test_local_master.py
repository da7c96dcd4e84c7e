"""LocalCluster is the master with in-process supervisors: the same Nimbus as the other hosts
(its scheduler, its error records, its info), writing nothing to disk."""

from __future__ import annotations

import os
import time

import cloudpickle
import pytest

from squall import InvalidTopologyException, LocalCluster, TopologyBuilder
from squall._config import cluster_conf
from squall.cluster.scheduler import IScheduler
from squall.engine.executor import MAX_ERRORS_PER_COMPONENT, ErrorRecord, add_error
from squall.testing import AckFailMapTracker, FeederSpout

from ..acceptance.components import AckBolt, Recorder
from ..conftest import wait_until
from .served import served


def _topology(bolts: int = 2):
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    b.set_bolt("sink", AckBolt(), bolts).shuffle_grouping("feed")
    return b.create_topology()


class OneSlotScheduler(IScheduler):
    """Puts every topology on the first free slot, whatever ``topology.workers`` asks."""

    def schedule(self, topologies, cluster):
        for topo in topologies:
            if not cluster.assignments.get(topo.id) and cluster.available_slots():
                cluster.assign(cluster.available_slots()[0], topo.id, topo.executors)


def test_local_cluster_places_topologies_with_the_scheduler_storm_scheduler_names():
    with LocalCluster({"storm.scheduler": f"{__name__}:OneSlotScheduler"}) as cluster:
        cluster.submit_topology("one", {"topology.workers": 3}, _topology())
        info = cluster.get_topology_info("one")
        assert info["num_workers"] == 1
        assert len(info["workers"][0]["executors"]) == info["num_executors"]  # every executor on that one


def test_the_isolation_scheduler_gives_a_topology_in_process_machines_of_its_own():
    conf = {"squall.local.supervisors": 3, "isolation.scheduler.machines": {"isolated": 1}}
    with LocalCluster(conf) as cluster:
        cluster.submit_topology("isolated", {"topology.workers": 2}, _topology())
        cluster.submit_topology("other", {"topology.workers": 3}, _topology())
        hosts = {name: {w["slot"].rsplit(":", 1)[0] for w in cluster.get_topology_info(name)["workers"]}
                 for name in ("other", "isolated")}
        assert len(hosts["isolated"]) == 1 and not hosts["isolated"] & hosts["other"]
        assert cluster.get_cluster_info()["supervisors"] == 3
        for name in ("other", "isolated"):  # and both run
            assert wait_until(lambda name=name: cluster.get_topology_info(name)["status"] == "ACTIVE", 5)


def test_every_host_keeps_the_newest_ten_errors_of_each_component():
    errors: list[ErrorRecord] = []
    for i in range(MAX_ERRORS_PER_COMPONENT + 5):
        add_error(errors, ErrorRecord("bolt", 3, float(i), f"error {i}", ""))
        add_error(errors, ErrorRecord("other", 4, float(i), f"other {i}", ""))
    assert MAX_ERRORS_PER_COMPONENT == 10
    assert [e.error for e in errors if e.component == "bolt"] == [f"error {i}" for i in range(5, 15)]
    assert len(errors) == 20


def test_a_repeated_error_is_one_record_also_with_other_errors_between_its_repeats():
    """A stalled Trident batch's attempts raise the same error again and again, and a store's
    timeouts may come between them. Before, only a repeat of the component's last record was
    folded: each timeout between split the stall's record, and under load the stall test read
    4 records of it, where the bolt's 10 kept records are meant for different errors."""
    errors: list[ErrorRecord] = []
    for i in range(MAX_ERRORS_PER_COMPONENT + 5):
        add_error(errors, ErrorRecord("bolt", 3, float(i), "stalled at txid 5", ""))
        if i % 2:
            add_error(errors, ErrorRecord("bolt", 4, float(i), "Redis timed out", ""))
    add_error(errors, ErrorRecord("other", 4, 99.0, "stalled at txid 5", ""))  # another component's own
    assert [(e.component, e.error, e.count) for e in errors] == [
        ("bolt", "Redis timed out", 7), ("bolt", "stalled at txid 5", 15), ("other", "stalled at txid 5", 1)]
    assert errors[1].last_time == float(MAX_ERRORS_PER_COMPONENT + 4)


def test_a_local_cluster_writes_nothing_to_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {}, _topology())
        cluster.kill_topology("t", wait_secs=0)
    assert os.listdir(tmp_path) == []


def test_local_cluster_info_is_the_masters_info(tmp_path):
    """One info for every host: LocalCluster's is the master's ``op_info``."""
    m = served(cluster_conf({"storm.local.dir": str(tmp_path)}))
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001])
    m.op_submit(name="t", conf={}, topology=cloudpickle.dumps(_topology()))
    remote = m.op_info(name="t")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {}, _topology())
        local = cluster.get_topology_info("t")
    assert set(local) == set(remote)
    assert set(local["components"]["sink"]) == set(remote["components"]["sink"])
    assert set(local["workers"][0]) == set(remote["workers"][0])


def test_what_a_caller_does_to_an_answer_reaches_no_other_answer():
    """As over RPC: the info and pages are the caller's own, down to the per-task figures."""
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"x.custom": [1, {"deep": "a"}]}, _topology())
        assert wait_until(lambda: cluster.get_topology_info("t")["components"]["sink"]["task_stats"], 10)
        info = cluster.get_topology_info("t")
        before = repr(cluster.get_topology_info("t")["configuration"])
        info["configuration"]["x.custom"][1]["deep"] = "changed"
        info["configuration"]["topology.workers"] = 99
        for stats in info["components"]["sink"]["task_stats"].values():
            stats.clear()
        info["workers"].clear()
        again = cluster.get_topology_info("t")
        assert repr(again["configuration"]) == before
        assert all(again["components"]["sink"]["task_stats"].values())
        assert again["workers"]
        page = cluster.get_component_page("t", "sink")
        page.clear()
        assert cluster.get_component_page("t", "sink")


def test_the_masters_news_reaches_in_process_workers_without_waiting_for_their_heartbeat():
    """Heartbeats every minute: the workers still all learn at once that the topology is active
    (once the last one reported in), then deactivated and activated again, since the master in
    their process tells them of each change rather than waiting for their next beat."""
    with LocalCluster({"worker.heartbeat.frequency.secs": 60}) as cluster:
        cluster.submit_topology("news", {"topology.workers": 3}, _topology(bolts=3))
        agents = cluster._agents(cluster._storm_id("news"))
        assert len(agents) == 3
        assert wait_until(lambda: all(a.state.active for a in agents), 10)
        cluster.deactivate("news")
        assert not any(a.state.active for a in agents)
        cluster.activate("news")
        assert all(a.state.active for a in agents)


class SlowCleanupBolt(AckBolt):
    """Takes ``secs`` in ``cleanup`` and records that it finished; takes ``prepare_secs`` in
    ``prepare`` (as one preempted on a loaded machine) and records that it finished."""

    def __init__(self, recorder: Recorder, secs: float, prepare_secs: float = 0.0) -> None:
        self.recorder, self.secs, self.prepare_secs = recorder, secs, prepare_secs

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        time.sleep(self.prepare_secs)
        self.recorder.record("prepared")

    def cleanup(self):
        time.sleep(self.secs)
        self.recorder.record("cleaned")


def test_tuples_cross_in_process_machines():
    """With several in-process machines the even scheduler spreads a topology over them: its
    workers reach each other all the same."""
    feeder = FeederSpout(["x"])
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("sink", AckBolt(), 4).shuffle_grouping("feed")
    with LocalCluster({"squall.local.supervisors": 2}) as cluster:
        cluster.submit_topology("spread", {"topology.workers": 2}, b.create_topology())
        hosts = {w["slot"].rsplit(":", 1)[0] for w in cluster.get_topology_info("spread")["workers"]}
        assert hosts == {"localhost-1", "localhost-2"}
        for i in range(100):
            feeder.feed([i], i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(100)), 20)


def test_a_kill_without_wait_returns_once_every_cleanup_ran():
    """Two bolts on one loop each take 1.2 s to clean up: 2.4 s in all, longer than a process
    worker's 2 s per loop; a LocalCluster still waits for them, as it always has."""
    recorder = Recorder()
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]))
    b.set_bolt("slow", SlowCleanupBolt(recorder, 1.2, prepare_secs=0.3), 2).shuffle_grouping("feed")
    with LocalCluster() as cluster:
        cluster.submit_topology("slow", {}, b.create_topology())
        # submit returns before the loops run prepare, and only a bolt that prepared is cleaned
        # up (Storm's order): the kill comes once both have (held 0.3 s each, as under load)
        assert wait_until(lambda: recorder.count("prepared") == 2)
        cluster.kill_topology("slow", wait_secs=0)
        assert recorder.count("cleaned") == 2
        assert "slow" not in cluster.get_topology_names()


def test_a_bad_rebalance_or_initial_status_is_named_not_a_deep_error():
    with LocalCluster() as cluster:
        with pytest.raises(InvalidTopologyException, match="initial_status"):
            cluster.submit_topology("t", {}, _topology(), initial_status="KILLED")
        cluster.submit_topology("t", {}, _topology())
        with pytest.raises(InvalidTopologyException, match="workers"):
            cluster.rebalance("t", num_workers="x", wait_secs=0)
        assert cluster.get_topology_info("t")["status"] == "ACTIVE"


@pytest.mark.parametrize("wait", [float("nan"), float("inf"), -5, "2", True, 2**31])
def test_a_wait_that_is_no_number_of_seconds_is_refused_by_the_master_itself(wait):
    """NaN killed at once, infinity left the topology KILLED (its name taken) for ever, a
    negative wait killed at once over RPC, a string raised from deep in a comparison."""
    from squall._errors import BadParameterError
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {}, _topology())
        for verb in (cluster.master.op_kill, cluster.master.op_rebalance):
            with pytest.raises(BadParameterError, match=r"wait_secs must be a number of seconds from 0 to 2147483647"):
                verb("t", wait_secs=wait)
        with pytest.raises(ValueError, match="wait_secs"):
            cluster.kill_topology("t", wait_secs=wait)
        assert cluster.get_topology_info("t")["status"] == "ACTIVE"
