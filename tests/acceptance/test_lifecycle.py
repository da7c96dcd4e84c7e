"""Submitting, killing, activating, deactivating and rebalancing: the topology state machine
(Storm's Nimbus.TOPO_STATE_TRANSITIONS) as LocalCluster users see it."""

from __future__ import annotations

import pytest

from squall import (
    AlreadyAliveException, Config, Fields, IllegalStateTransition, InvalidTopologyException,
    NotAliveException, TopologyBuilder,
)
from squall.testing import AckFailMapTracker, FeederSpout

from ..conftest import wait_until
from .components import AckBolt, Counter, LifecycleSpout, Recorder, TestPlannerBolt, TestPlannerSpout


def planner_topology():
    builder = TopologyBuilder()
    builder.set_spout("1", TestPlannerSpout())
    builder.set_bolt("2", TestPlannerBolt()).shuffle_grouping("1")
    return builder.create_topology()


def lifecycle_topology(recorder, calls):
    builder = TopologyBuilder()
    builder.set_spout("spout", LifecycleSpout(recorder, calls))
    builder.set_bolt("bolt", TestPlannerBolt()).shuffle_grouping("spout")
    return builder.create_topology()


def names(cluster):
    return [t["name"] for t in cluster.get_cluster_info()["topologies"]]


def status(cluster, name):
    return cluster.get_topology_info(name)["status"]


@pytest.mark.hosts
def test_submitting_a_live_name_again_raises_already_alive(cluster):
    cluster.submit_topology("t", {}, planner_topology())

    with pytest.raises(AlreadyAliveException, match="t"):
        cluster.submit_topology("t", {}, planner_topology())


@pytest.mark.hosts
@pytest.mark.parametrize("operation", [
    lambda c: c.kill_topology("ghost"),
    lambda c: c.kill_topology("ghost", wait_secs=0),
    lambda c: c.activate("ghost"),
    lambda c: c.deactivate("ghost"),
    lambda c: c.rebalance("ghost", num_workers=2),
    lambda c: c.get_topology_info("ghost"),
])
def test_operations_on_an_unknown_name_raise_not_alive(cluster, operation):
    with pytest.raises(NotAliveException, match="ghost"):
        operation(cluster)


@pytest.mark.hosts
def test_after_a_kill_without_wait_the_name_is_free_again(cluster):
    cluster.submit_topology("t", {}, planner_topology())
    cluster.kill_topology("t", wait_secs=0)

    assert "t" not in names(cluster)
    with pytest.raises(NotAliveException):
        cluster.get_topology_info("t")
    cluster.submit_topology("t", {}, planner_topology())
    assert status(cluster, "t") == "ACTIVE"


@pytest.mark.hosts
def test_during_a_kill_wait_the_topology_is_killed_and_its_spouts_deactivated(cluster):
    """kill_topology(wait_secs=1): at once KILLED and deactivated (no next_tuple), the name
    still taken; after the wait the topology is removed and the spout closed."""
    recorder, calls = Recorder(), Counter()
    cluster.submit_topology("t", {}, lifecycle_topology(recorder, calls))
    assert wait_until(lambda: recorder.count("activate") == 1 and calls.value > 0)

    cluster.kill_topology("t", wait_secs=1)

    assert status(cluster, "t") == "KILLED"
    with pytest.raises(AlreadyAliveException):
        cluster.submit_topology("t", {}, planner_topology())
    assert wait_until(lambda: recorder.count("deactivate") == 1)
    calls_when_deactivated = calls.value
    assert wait_until(lambda: "t" not in names(cluster), 10)
    assert calls.value == calls_when_deactivated
    assert wait_until(lambda: recorder.count("close") == 1)  # remote hosts: once the worker hears
    with pytest.raises(NotAliveException):
        cluster.get_topology_info("t")


def test_kill_waits_the_message_timeout_by_default(cluster):
    conf = Config()
    conf.set_message_timeout_secs(1)
    cluster.submit_topology("t", conf, planner_topology())

    cluster.kill_topology("t")

    assert status(cluster, "t") == "KILLED"
    assert wait_until(lambda: "t" not in names(cluster), 10)


@pytest.mark.hosts("process")
def test_killing_again_during_the_wait_rearms_the_kill(cluster):
    cluster.submit_topology("t", {}, planner_topology())
    cluster.kill_topology("t", wait_secs=30)

    cluster.kill_topology("t", wait_secs=0)

    assert "t" not in names(cluster)


@pytest.mark.hosts
def test_deactivate_stops_next_tuple_and_activate_resumes_it(cluster):
    recorder, calls = Recorder(), Counter()
    cluster.submit_topology("t", {}, lifecycle_topology(recorder, calls))
    assert wait_until(lambda: recorder.count("activate") == 1 and calls.value > 0)

    cluster.deactivate("t")
    assert status(cluster, "t") == "INACTIVE"
    assert wait_until(lambda: recorder.count("deactivate") == 1)
    frozen = calls.value
    assert not wait_until(lambda: calls.value != frozen, 0.3)

    cluster.activate("t")
    assert status(cluster, "t") == "ACTIVE"
    assert wait_until(lambda: recorder.count("activate") == 2 and calls.value > frozen)
    assert [e[0] for e in recorder.events()] == ["open", "activate", "deactivate", "activate"]


def test_activate_on_active_and_deactivate_on_inactive_are_no_ops(cluster):
    recorder, calls = Recorder(), Counter()
    cluster.submit_topology("t", {}, lifecycle_topology(recorder, calls))
    assert wait_until(lambda: recorder.count("activate") == 1)

    cluster.activate("t")
    cluster.deactivate("t")
    cluster.deactivate("t")

    assert status(cluster, "t") == "INACTIVE"
    assert wait_until(lambda: recorder.count("deactivate") == 1)
    assert recorder.count("activate") == 1


@pytest.mark.hosts("process")
def test_an_inactive_submit_runs_no_user_code_until_activated(cluster):
    """Storm's test-submit-inactive-topology: neither open nor prepare runs while INACTIVE;
    a tuple fed meanwhile is emitted and acked once the topology is activated."""
    recorder, calls = Recorder(), Counter()
    feeder = FeederSpout(Fields("field1"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_spout("2", LifecycleSpout(recorder, calls))
    builder.set_bolt("3", AckBolt()).global_grouping("1")
    cluster.submit_topology("test", {}, builder.create_topology(), initial_status="INACTIVE")

    feeder.feed(["a"], 1)
    assert status(cluster, "test") == "INACTIVE"
    assert not wait_until(lambda: recorder.events() or tracker.is_acked(1), 0.3)
    assert calls.value == 0

    cluster.activate("test")

    assert wait_until(lambda: tracker.is_acked(1))
    assert [e[0] for e in recorder.events()] == ["open", "activate"]


@pytest.mark.hosts("process")
@pytest.mark.parametrize("operation", [
    lambda c: c.activate("t"),
    lambda c: c.deactivate("t"),
    lambda c: c.rebalance("t", num_workers=2, wait_secs=0),
])
def test_user_operations_on_a_killed_topology_have_no_transition(cluster, operation):
    cluster.submit_topology("t", {}, planner_topology())
    cluster.kill_topology("t", wait_secs=30)

    with pytest.raises(IllegalStateTransition, match="No transition for event"):
        operation(cluster)
    assert status(cluster, "t") == "KILLED"


@pytest.mark.hosts("process")
def test_activate_while_rebalancing_has_no_transition(cluster):
    cluster.submit_topology("t", {}, planner_topology())
    cluster.rebalance("t", num_workers=2, wait_secs=30)

    assert status(cluster, "t") == "REBALANCING"
    with pytest.raises(IllegalStateTransition, match="No transition for event: activate"):
        cluster.activate("t")


@pytest.mark.hosts
def test_rebalance_changes_workers_and_executors_but_not_tasks(cluster):
    feeder = FeederSpout(Fields("x"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    builder.set_bolt("bolt", AckBolt(), 1).set_num_tasks(4).shuffle_grouping("spout")
    cluster.submit_topology("t", {}, builder.create_topology())
    before = cluster.get_topology_info("t")
    assert (before["num_workers"], before["components"]["bolt"]["executors"]) == (1, 1)

    cluster.rebalance("t", num_workers=2, executors={"bolt": 4}, wait_secs=0)

    after = cluster.get_topology_info("t")
    assert after["status"] == "ACTIVE"
    assert after["num_workers"] == 2
    assert after["components"]["bolt"]["executors"] == 4
    assert after["components"]["bolt"]["tasks"] == 4
    assert after["num_tasks"] == before["num_tasks"]
    assert after["id"] == before["id"]
    for i in range(20):
        feeder.feed([i], i)
    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(20)))


@pytest.mark.hosts("process")
def test_rebalance_deactivates_for_the_wait_then_restores_the_previous_status(cluster):
    recorder, calls = Recorder(), Counter()
    cluster.submit_topology("t", {}, lifecycle_topology(recorder, calls))
    assert wait_until(lambda: recorder.count("activate") == 1)

    cluster.rebalance("t", executors={"bolt": 1}, wait_secs=0.5)
    assert status(cluster, "t") == "REBALANCING"
    assert wait_until(lambda: recorder.count("deactivate") == 1)
    assert wait_until(lambda: status(cluster, "t") == "ACTIVE", 10)
    assert wait_until(lambda: recorder.count("open") == 2)  # new workers, fresh spout instances

    cluster.deactivate("t")
    cluster.rebalance("t", num_workers=2, wait_secs=0)
    assert status(cluster, "t") == "INACTIVE"
    assert cluster.get_topology_info("t")["num_workers"] == 2


@pytest.mark.hosts("process")
@pytest.mark.parametrize("kwargs, culprit", [
    ({"executors": {"nope": 2}}, "nope"),
    ({"executors": {"bolt": 0}}, "bolt"),
    ({"num_workers": 0}, "workers"),
])
def test_an_invalid_rebalance_names_the_culprit_and_changes_nothing(cluster, kwargs, culprit):
    recorder, calls = Recorder(), Counter()
    cluster.submit_topology("t", {}, lifecycle_topology(recorder, calls))

    with pytest.raises(InvalidTopologyException, match=culprit):
        cluster.rebalance("t", wait_secs=0, **kwargs)
    assert status(cluster, "t") == "ACTIVE"


@pytest.mark.hosts("process")
def test_cluster_info_lists_the_topologies_as_plain_dicts(cluster):
    cluster.submit_topology("a", {}, planner_topology())
    cluster.submit_topology("b", {}, planner_topology(), initial_status="INACTIVE")

    info = cluster.get_cluster_info()
    by_name = {t["name"]: t for t in info["topologies"]}
    assert set(by_name) == {"a", "b"}
    assert by_name["a"]["status"] == "ACTIVE"
    assert by_name["b"]["status"] == "INACTIVE"
    assert by_name["a"]["num_tasks"] == 3  # spout, bolt, acker
    assert type(info) is dict and all(type(t) is dict for t in info["topologies"])


def test_shutdown_stops_every_topology_and_refuses_new_submissions(cluster):
    recorder, calls = Recorder(), Counter()
    cluster.submit_topology("t", {}, lifecycle_topology(recorder, calls))
    assert wait_until(lambda: recorder.count("open") == 1)

    cluster.shutdown()

    assert recorder.count("close") == 1
    with pytest.raises(RuntimeError):
        cluster.submit_topology("u", {}, planner_topology())


@pytest.mark.hosts
def test_a_kill_during_the_rebalance_wait_cancels_the_rebalance(cluster):
    cluster.submit_topology("t", {}, planner_topology())
    cluster.rebalance("t", num_workers=2, wait_secs=30)

    cluster.kill_topology("t", wait_secs=0)

    assert "t" not in names(cluster)
    cluster.submit_topology("t", {}, planner_topology())
    assert cluster.get_topology_info("t")["num_workers"] == 1


def test_killing_a_topology_that_was_never_activated_runs_no_user_code(cluster):
    recorder, calls = Recorder(), Counter()
    cluster.submit_topology("t", {}, lifecycle_topology(recorder, calls), initial_status="INACTIVE")

    cluster.kill_topology("t", wait_secs=0)

    assert "t" not in names(cluster)
    assert recorder.events() == [] and calls.value == 0
