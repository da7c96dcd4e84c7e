"""What a task's `TopologyContext` says, and how tasks and executors are counted
(Storm's StormCommon.stormTaskInfo and ServerUtils.getComponentParallelism)."""

from __future__ import annotations

from squall import Config, Fields, TopologyBuilder
from squall.testing import FeederSpout

from ..conftest import wait_until
from .components import (
    ContextRecorderBolt,
    InputFieldsRecorderBolt,
    Recorder,
    SystemFieldsRecorderBolt,
    TestPlannerBolt,
    TestPlannerSpout,
    TestWordSpout,
    WiringRecorderBolt,
)

COMPONENTS = ["1", "2", "__acker", "bolt", "spout"]


def test_task_ids_follow_java_string_order_of_component_ids(cluster):
    """Digits sort before "__acker", which sorts before lowercase ids, and task ids are
    handed out from 1 in that order; each task knows its index among its component's tasks."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout(), 2)
    builder.set_bolt("1", ContextRecorderBolt(recorder, COMPONENTS)).shuffle_grouping("spout")
    builder.set_bolt("2", ContextRecorderBolt(recorder, COMPONENTS), 3).shuffle_grouping("spout")
    builder.set_bolt("bolt", ContextRecorderBolt(recorder, COMPONENTS), 2).set_num_tasks(4).shuffle_grouping("spout")
    cluster.submit_topology("context", {}, builder.create_topology())

    assert wait_until(lambda: recorder.count("context") == 8)
    expected_tasks = {"1": [1], "2": [2, 3, 4], "__acker": [5], "bolt": [6, 7, 8, 9], "spout": [10, 11]}
    info = cluster.get_topology_info("context")
    seen = set()
    for _kind, component, task, index, tasks, storm_id, port in recorder.events("context"):
        assert tasks == expected_tasks
        assert index == expected_tasks[component].index(task)
        assert storm_id == info["id"]
        assert storm_id.startswith("context-")
        assert port in [w["port"] for w in info["workers"]]
        seen.add(task)
    assert seen == {1, 2, 3, 4, 6, 7, 8, 9}


def test_fewer_executors_than_tasks_run_every_task(cluster):
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout())
    builder.set_bolt("bolt", TestPlannerBolt(), 2).set_num_tasks(5).shuffle_grouping("spout")
    cluster.submit_topology("tasks", {}, builder.create_topology())

    info = cluster.get_topology_info("tasks")
    bolt = info["components"]["bolt"]
    assert (bolt["executors"], bolt["tasks"]) == (2, 5)
    assert sorted(bolt["task_stats"]) == [2, 3, 4, 5, 6]  # "__acker" has task 1
    executors = sorted({tuple(s["executor"]) for s in bolt["task_stats"].values()})
    assert executors == [(2, 4), (5, 6)]  # partition_fixed: larger chunks first
    assert info["num_executors"] == 2 + 1 + 1  # bolt, acker, spout


def test_topology_max_task_parallelism_caps_tasks_and_executors(cluster):
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout(), 3)
    builder.set_bolt("bolt", TestPlannerBolt(), 4).set_num_tasks(6).shuffle_grouping("spout")
    builder.set_bolt("other", TestPlannerBolt(), 4).shuffle_grouping("spout")
    conf = Config()
    conf.set_max_task_parallelism(2)
    cluster.submit_topology("capped", conf, builder.create_topology())

    comps = cluster.get_topology_info("capped")["components"]
    assert (comps["spout"]["executors"], comps["spout"]["tasks"]) == (2, 2)
    assert (comps["bolt"]["executors"], comps["bolt"]["tasks"]) == (2, 2)
    assert (comps["other"]["executors"], comps["other"]["tasks"]) == (2, 2)


def test_a_non_distributed_component_runs_one_task_whatever_its_parallelism(cluster):
    """TestWordSpout(False) caps itself with topology.max.task.parallelism = 1 in its own
    component configuration."""
    builder = TopologyBuilder()
    builder.set_spout("spout", TestWordSpout(False), 3)
    builder.set_bolt("bolt", TestPlannerBolt(), 3).set_max_task_parallelism(1).shuffle_grouping("spout")
    cluster.submit_topology("not-distributed", {}, builder.create_topology())

    comps = cluster.get_topology_info("not-distributed")["components"]
    assert (comps["spout"]["executors"], comps["spout"]["tasks"]) == (1, 1)
    assert (comps["bolt"]["executors"], comps["bolt"]["tasks"]) == (1, 1)


def test_a_task_knows_its_sources_targets_and_neighbours_fields(cluster):
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout(Fields("f1", "f2")))
    builder.set_bolt("mid", WiringRecorderBolt(recorder, "spout")).shuffle_grouping("spout")
    builder.set_bolt("a", TestPlannerBolt()).shuffle_grouping("mid")
    builder.set_bolt("b", TestPlannerBolt()).fields_grouping("mid", Fields("a"), "side").shuffle_grouping("mid")
    cluster.submit_topology("wiring", {}, builder.create_topology())

    assert wait_until(lambda: recorder.count("wiring") == 1)
    [(_kind, sources, targets, fields, component)] = recorder.events("wiring")
    assert sources == [("spout", "default")]
    assert targets == {"default": ["a", "b"], "side": ["b"]}
    assert fields == ["f1", "f2"]
    assert component == "mid"


def test_the_context_knows_the_fields_of_the_system_streams_a_bolt_sees(cluster):
    """Storm's context is the system topology's: it answers the fields of the tick stream of
    ``__system`` (``rate_secs``) and of the ``__system`` stream every component has
    (``event``), so a bolt that asks its context the fields of each input's stream does not
    fail on a tick tuple."""
    recorder = Recorder()
    feeder = FeederSpout(Fields("x"))
    builder = TopologyBuilder()
    builder.set_spout("spout", feeder)
    (builder.set_bolt("bolt", InputFieldsRecorderBolt(recorder), 2).shuffle_grouping("spout")
     .all_grouping("spout", "__system").add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 0.05))
    cluster.submit_topology("system-fields", {}, builder.create_topology())
    for i in range(10):
        feeder.feed([i])

    assert wait_until(lambda: sum(1 for e in recorder.events("input") if e[1]) >= 4
                      and sum(1 for e in recorder.events("input") if not e[1]) == 10)
    events = recorder.events("input")
    data = [e for e in events if not e[1]]
    ticks = [e for e in events if e[1]]
    assert data == [("input", False, "spout", "default", ["x"], ["x"])] * 10
    assert ticks == [("input", True, "__system", "__tick", ["rate_secs"], ["rate_secs"])] * len(ticks)
    assert cluster.get_topology_info("system-fields")["errors"] == []


def test_the_fields_of_a_system_stream_and_of_an_unknown_one(cluster):
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", TestPlannerSpout(Fields("f1", "f2")))
    builder.set_bolt("mid", SystemFieldsRecorderBolt(recorder)).shuffle_grouping("spout")
    cluster.submit_topology("system-streams", {}, builder.create_topology())

    assert wait_until(lambda: recorder.count("fields") == 1)
    [(_kind, tick, system, acker_system, unknown)] = recorder.events("fields")
    assert (tick, system, acker_system) == (["rate_secs"], ["event"], ["event"])
    assert unknown == "component [spout] declares no stream [nope]"
