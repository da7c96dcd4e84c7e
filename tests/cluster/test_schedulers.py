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


def test_a_squeezed_topology_spreads_once_slots_free_up_and_then_stays():
    """Storm's needsScheduling counts a topology on fewer slots than it asked for, and its
    DefaultScheduler spreads it again once slots are free; with none free it stays put."""
    s = EvenScheduler()
    s.prepare({})
    t = topo("t-1", "t", 2, 4)
    cluster = SchedulerCluster({"a": [1, 2, 3]}, {"other": {"a:1": [], "a:2": []}})
    s.schedule([t], cluster)
    assert list(cluster.assignments["t-1"]) == ["a:3"]
    s.schedule([t], cluster)  # no slot free: nothing moves
    assert list(cluster.assignments["t-1"]) == ["a:3"]
    del cluster.assignments["other"]  # the other topology is removed
    s.schedule([t], cluster)
    placed = cluster.assignments["t-1"]
    assert len(placed) == 2 and sorted(len(x) for x in placed.values()) == [2, 2]
    before = {slot: list(x) for slot, x in placed.items()}
    s.schedule([t], cluster)  # spread as asked: left as it is
    assert cluster.assignments["t-1"] == before


def test_a_waiting_topology_gets_a_freed_slot_before_a_squeezed_one_grows():
    s = EvenScheduler()
    s.prepare({})
    squeezed, waiting = topo("s-1", "s", 2, 2), topo("w-1", "w", 1, 1)
    cluster = SchedulerCluster({"a": [1, 2]}, {"s-1": {"a:1": [ExecutorSpec("c", (1,)), ExecutorSpec("c", (2,))]}})
    s.schedule([squeezed, waiting], cluster)
    assert list(cluster.assignments["w-1"]) == ["a:2"] and list(cluster.assignments["s-1"]) == ["a:1"]


def test_a_topology_asking_more_workers_than_it_has_executors_is_not_respread():
    s = EvenScheduler()
    s.prepare({})
    t = topo("t-1", "t", 5, 2)
    cluster = SchedulerCluster({"a": [1, 2, 3, 4, 5]}, {})
    s.schedule([t], cluster)
    before = {slot: list(x) for slot, x in cluster.assignments["t-1"].items()}
    assert len(before) == 2
    s.schedule([t], cluster)
    assert cluster.assignments["t-1"] == before


def test_a_squeezed_topology_beside_isolated_ones_spreads_over_the_other_machines_only():
    s = IsolationScheduler()
    s.prepare({"isolation.scheduler.machines": {"vip": 1}})
    vip, other = topo("vip-1", "vip", 1, 1), topo("o-1", "o", 2, 2)
    cluster = SchedulerCluster({"a": [1], "b": [1, 2]}, {"busy": {"b:2": []}})
    s.schedule([vip, other], cluster)
    vip_hosts = cluster.hosts_of("vip-1")
    assert len(cluster.assignments["o-1"]) == 1
    del cluster.assignments["busy"]
    s.schedule([vip, other], cluster)
    assert len(cluster.assignments["o-1"]) == 2 and cluster.hosts_of("o-1").isdisjoint(vip_hosts)
