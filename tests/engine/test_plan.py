"""Task numbering and executor planning (Storm's StormCommon.stormTaskInfo and
Utils.partitionFixed, STORM.md section 0)."""

from __future__ import annotations

import pytest

from squall import Config, Fields, InvalidTopologyException, TopologyBuilder
from squall._config import default_conf, topology_conf
from squall.engine.plan import ExecutorSpec, make_plan, partition_fixed

from ..acceptance.components import TestPlannerBolt, TestPlannerSpout


@pytest.mark.parametrize("executors, tasks, sizes", [
    (3, 5, [2, 2, 1]),
    (8, 12, [2, 2, 2, 2, 1, 1, 1, 1]),
    (5, 9, [2, 2, 2, 2, 1]),
    (3, 1, [1]),
    (1, 4, [4]),
    (4, 4, [1, 1, 1, 1]),
])
def test_partition_fixed_gives_larger_chunks_first(executors, tasks, sizes):
    chunks = partition_fixed(executors, list(range(1, tasks + 1)))

    assert [len(c) for c in chunks] == sizes
    assert [t for c in chunks for t in c] == list(range(1, tasks + 1))  # contiguous, in order


def test_partition_fixed_of_nine_tasks_over_five_executors_matches_storm():
    assert partition_fixed(5, list(range(1, 10))) == [[1, 2], [3, 4], [5, 6], [7, 8], [9]]


def test_partition_fixed_of_no_tasks_is_no_executors():
    assert partition_fixed(3, []) == []


def plan_of(builder, conf=None, name="t"):
    given = dict(conf or {})
    merged = topology_conf(default_conf(), given)
    return make_plan(name, f"{name}-1-0", builder.create_topology(), merged, given)


def test_task_ids_are_numbered_in_java_string_order_of_component_ids():
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout(), 2)
    builder.set_bolt("bolt", TestPlannerBolt(), 2).shuffle_grouping("spout")
    builder.set_bolt("2", TestPlannerBolt(), 2).shuffle_grouping("spout")
    builder.set_bolt("1", TestPlannerBolt()).shuffle_grouping("spout")
    builder.set_bolt("Zeta", TestPlannerBolt()).shuffle_grouping("spout")
    conf = Config()
    conf.set_num_workers(2)

    plan = plan_of(builder, conf)

    assert plan.component_tasks == {
        "1": [1], "2": [2, 3], "Zeta": [4], "__acker": [5, 6], "bolt": [7, 8], "spout": [9, 10],
    }
    assert plan.task_to_component[5] == "__acker"
    assert plan.acking and plan.acker_tasks == [5, 6]


def test_executors_cover_each_components_tasks_in_contiguous_ranges():
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout())
    builder.set_bolt("bolt", TestPlannerBolt(), 3).set_num_tasks(5).shuffle_grouping("spout")

    plan = plan_of(builder)

    assert plan.executors == [
        ExecutorSpec("__acker", (1,)),
        ExecutorSpec("bolt", (2, 3)), ExecutorSpec("bolt", (4, 5)), ExecutorSpec("bolt", (6,)),
        ExecutorSpec("spout", (7,)),
    ]
    assert plan.executors[1].id == (2, 3)


def test_zero_ackers_means_no_acker_component_and_no_acking():
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout())

    plan = plan_of(builder, {Config.TOPOLOGY_ACKER_EXECUTORS: 0})

    assert "__acker" not in plan.component_tasks
    assert not plan.acking


def test_ackers_default_to_one_per_worker_and_can_be_set():
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout())

    assert plan_of(builder, {Config.TOPOLOGY_WORKERS: 3}).acker_tasks == [1, 2, 3]
    assert plan_of(builder, {Config.TOPOLOGY_WORKERS: 3, Config.TOPOLOGY_ACKER_EXECUTORS: 1}).acker_tasks == [1]


def test_max_task_parallelism_caps_tasks_and_executors():
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout(False), 4)  # its own conf caps it at 1
    builder.set_bolt("bolt", TestPlannerBolt(), 4).set_num_tasks(8).shuffle_grouping("spout")
    builder.set_bolt("capped", TestPlannerBolt(), 4).set_max_task_parallelism(3).shuffle_grouping("spout")

    plan = plan_of(builder)

    assert len(plan.component_tasks["spout"]) == 1
    assert len(plan.component_tasks["bolt"]) == 8
    assert len(plan.component_tasks["capped"]) == 3
    assert plan.parallelism["capped"] == 3


def test_rebalance_keeps_tasks_and_replans_executors():
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout())
    builder.set_bolt("bolt", TestPlannerBolt(), 1).set_num_tasks(4).shuffle_grouping("spout")
    plan = plan_of(builder)

    new = plan.with_parallelism(2, {"bolt": 3})

    assert new.component_tasks == plan.component_tasks
    assert [e.tasks for e in new.executors if e.component == "bolt"] == [(2, 3), (4,), (5,)]
    assert new.num_workers == 2
    more = plan.with_parallelism(None, {"bolt": 10})  # more executors than tasks: one per task
    assert len([e for e in more.executors if e.component == "bolt"]) == 4
    assert more.num_workers == plan.num_workers


@pytest.mark.parametrize("workers, executors, culprit", [
    (None, {"nope": 1}, r"\[nope\]"),
    (None, {"bolt": 0}, r"\[bolt\]"),
    (0, None, "workers"),
])
def test_an_invalid_rebalance_plan_names_the_culprit(workers, executors, culprit):
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout())
    builder.set_bolt("bolt", TestPlannerBolt()).shuffle_grouping("spout")
    plan = plan_of(builder)

    with pytest.raises(InvalidTopologyException, match=culprit):
        plan.with_parallelism(workers, executors)


def test_each_component_gets_its_merged_configuration():
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout(Fields("a")))
    builder.set_bolt("bolt", TestPlannerBolt()).shuffle_grouping("spout").add_configuration("custom", 1)

    plan = plan_of(builder, {"shared": 2})

    assert plan.component_confs["bolt"]["custom"] == 1
    assert "custom" not in plan.component_confs["spout"]
    assert plan.component_confs["spout"]["shared"] == plan.component_confs["bolt"]["shared"] == 2


def test_topology_tasks_in_the_topology_config_applies_to_components_that_do_not_set_it():
    """Storm's getComponentParallelism merges the topology conf under the component's."""
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout())
    builder.set_bolt("bolt", TestPlannerBolt(), 2).shuffle_grouping("spout")
    builder.set_bolt("own", TestPlannerBolt()).set_num_tasks(2).shuffle_grouping("spout")

    plan = plan_of(builder, {"topology.tasks": 4})

    assert len(plan.component_tasks["spout"]) == 4
    assert len(plan.component_tasks["bolt"]) == 4
    assert len(plan.component_tasks["own"]) == 2
    assert len([e for e in plan.executors if e.component == "bolt"]) == 2


def test_a_rebalance_naming_no_component_lists_those_there_are():
    """A Trident topology's components are the planner's: a user who names the stream
    (``-e records=2``) learns which ids there are, and where the stream's spout runs."""
    from squall.trident import TridentTopology
    from squall.trident.builtin import Count
    from squall.trident.spout import FeederBatchSpout
    from squall.trident.state import MemoryMapState

    topology = TridentTopology()
    topology.new_stream("records", FeederBatchSpout(["key"])).group_by(Fields("key")) \
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")).parallelism_hint(2)
    plan = make_plan("rb", "rb-1", topology.build(), topology_conf(default_conf(), {}), {})

    with pytest.raises(InvalidTopologyException) as e:
        plan.with_parallelism(None, {"records": 2})
    assert str(e.value) == ("rebalance: topology 'rb' has no component [records] (its components: "
                            "$mastercoord-bg0, $spoutcoord-spout-records, b-0, b-1, spout-records; "
                            "a Trident stream's spout runs in spout-records)")
    with pytest.raises(InvalidTopologyException, match=r"has no component \[nope\] \(its components: "
                                                       r"\$mastercoord-bg0, \$spoutcoord-spout-records, b-0, b-1, "
                                                       r"spout-records\)$"):
        plan.with_parallelism(None, {"nope": 2})
