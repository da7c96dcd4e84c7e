"""Schedulers as plain objects: even spreading, isolation of whole machines, loading by name."""

import pytest

from squall.cluster.scheduler import (EvenScheduler, IsolationScheduler, SchedulerCluster,
                                      SchedulerTopology, load_scheduler)
from squall.engine.plan import ExecutorSpec


def topo(tid, name, workers, n_exec):
    return SchedulerTopology(tid, name, workers, [ExecutorSpec("c", (i,)) for i in range(1, n_exec + 1)])


def test_even_scheduler_interleaves_machines_and_deals_executors_round_robin():
    cluster = SchedulerCluster({"a": [1, 2], "b": [1, 2]}, {})
    s = EvenScheduler()
    s.prepare({})
    t = topo("t-1", "t", 2, 4)
    s.schedule([t], cluster)
    placed = cluster.assignments["t-1"]
    assert sorted(placed) == ["a:1", "b:1"]  # one slot per machine first
    assert sorted(len(x) for x in placed.values()) == [2, 2]
    assert not cluster.needs_scheduling(t)


def test_even_scheduler_uses_fewer_workers_when_slots_are_short():
    cluster = SchedulerCluster({"a": [1]}, {"other": {"a:9": []}})
    s = EvenScheduler()
    s.prepare({})
    t = topo("t-1", "t", 3, 3)
    s.schedule([t], cluster)
    assert list(cluster.assignments["t-1"]) == ["a:1"]


def test_isolation_gives_whole_machines_and_keeps_others_off_them():
    cluster = SchedulerCluster({"a": [1, 2], "b": [1, 2], "c": [1, 2]}, {})
    s = IsolationScheduler()
    s.prepare({"isolation.scheduler.machines": {"vip": 2}})
    vip, other = topo("vip-1", "vip", 2, 4), topo("o-1", "o", 4, 4)
    s.schedule([vip, other], cluster)
    vip_hosts = cluster.hosts_of("vip-1")
    assert len(vip_hosts) == 2
    assert cluster.hosts_of("o-1").isdisjoint(vip_hosts)
    assert not cluster.needs_scheduling(other)


def test_an_isolated_topology_waits_when_not_enough_machines_are_empty():
    cluster = SchedulerCluster({"a": [1], "b": [1]}, {"busy": {"a:1": []}})
    s = IsolationScheduler()
    s.prepare({"isolation.scheduler.machines": {"vip": 2}})
    vip = topo("vip-1", "vip", 1, 1)
    s.schedule([vip], cluster)
    assert cluster.needs_scheduling(vip)


def test_load_scheduler_by_name_and_clear_errors():
    assert isinstance(load_scheduler({}), EvenScheduler)
    assert isinstance(load_scheduler({"isolation.scheduler.machines": {"x": 1}}), IsolationScheduler)
    assert isinstance(load_scheduler({"storm.scheduler": "squall.cluster.scheduler:IsolationScheduler"}),
                      IsolationScheduler)
    with pytest.raises(ValueError, match="storm.scheduler"):
        load_scheduler({"storm.scheduler": "nowhere:Nothing"})
    with pytest.raises(ValueError, match="not an IScheduler"):
        load_scheduler({"storm.scheduler": "squall.cluster.scheduler:SchedulerCluster"})
