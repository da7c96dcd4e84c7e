"""What `TopologyBuilder` and `submit_topology` reject, each error naming the culprit
(Storm's test-validate-topology-structure and Nimbus's checks, STORM.md section 3)."""

from __future__ import annotations

import pytest

from squall import Bolt, Config, Fields, InvalidTopologyException, Spout, TopologyBuilder
from squall.testing import complete_topology, read_tuples

from ..conftest import wait_until

from .components import (
    BrokenConfBolt, BrokenDeclareBolt, DirectStreamBolt, IdentityBolt, SystemStreamBolt, TestPlannerBolt,
    TestPlannerSpout, TestWordCounter, TestWordSpout, TwiceDeclaringBolt, UnpicklableBolt, UnrebuildableBolt,
    PrepareRaisingGrouping,
)


def word_count_subscribing(subscribe):
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout(True), 3)
    subscribe(builder.set_bolt("2", TestWordCounter(), 4))
    return builder


def test_a_valid_fields_subscription_is_accepted():
    topology = word_count_subscribing(lambda d: d.fields_grouping("1", Fields("word"))).create_topology()

    assert set(topology.get_bolts()) == {"2"}
    assert set(topology.get_spouts()) == {"1"}


def test_fields_grouping_on_an_undeclared_field_names_component_stream_and_field():
    builder = word_count_subscribing(lambda d: d.fields_grouping("1", Fields("non-exists-field")))

    with pytest.raises(InvalidTopologyException) as e:
        builder.create_topology()
    assert str(e.value) == ("Component: [2] subscribes from stream: [default] of component [1] "
                            "with non-existent fields: ['non-exists-field']")


def test_subscribing_to_an_undeclared_stream_names_the_stream_and_component():
    builder = word_count_subscribing(lambda d: d.fields_grouping("1", Fields("word"), "non-exists-stream"))

    with pytest.raises(InvalidTopologyException,
                       match=r"^Component: \[2\] subscribes from non-existent stream: "
                             r"\[non-exists-stream\] of component \[1\]$"):
        builder.create_topology()


def test_subscribing_to_an_unknown_component_names_it():
    builder = word_count_subscribing(lambda d: d.shuffle_grouping("3"))

    with pytest.raises(InvalidTopologyException,
                       match=r"^Component: \[2\] subscribes from non-existent component \[3\]$"):
        builder.create_topology()


def test_direct_grouping_on_a_regular_stream_is_rejected():
    builder = word_count_subscribing(lambda d: d.direct_grouping("1"))

    with pytest.raises(InvalidTopologyException, match=r"\[2\].*\[default\].*\[1\].*direct"):
        builder.create_topology()


def test_a_regular_grouping_on_a_direct_stream_is_rejected():
    builder = TopologyBuilder()
    builder.set_spout("1", TestPlannerSpout(Fields("a")))
    builder.set_bolt("router", DirectStreamBolt()).shuffle_grouping("1")
    builder.set_bolt("2", TestPlannerBolt()).shuffle_grouping("router", "direct")

    with pytest.raises(InvalidTopologyException, match=r"\[2\].*direct stream \[direct\].*\[router\]"):
        builder.create_topology()


def test_a_second_component_with_the_same_id_is_rejected():
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())

    with pytest.raises(InvalidTopologyException, match=r"Duplicate component ids.*\b1\b"):
        builder.set_bolt("1", TestPlannerBolt())
    with pytest.raises(InvalidTopologyException, match="Spout has already been declared for id 1"):
        builder.set_spout("1", TestWordSpout())


@pytest.mark.parametrize("cid", ["__acker", "__system", "__mine"])
def test_component_ids_starting_with_two_underscores_are_reserved(cid):
    builder = TopologyBuilder()

    with pytest.raises(InvalidTopologyException, match=f"^{cid} is not a valid component id."):
        builder.set_spout(cid, TestWordSpout())
    with pytest.raises(InvalidTopologyException, match=f"^{cid} is not a valid component id."):
        builder.set_bolt(cid, TestPlannerBolt())


def test_stream_ids_starting_with_two_underscores_are_reserved():
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())
    builder.set_bolt("bad", SystemStreamBolt()).shuffle_grouping("1")

    with pytest.raises(InvalidTopologyException, match=r"__tick is not a valid stream id.*\[bad\]"):
        builder.create_topology()


@pytest.mark.parametrize("hint", [0, -1])
def test_a_parallelism_hint_below_one_names_the_component(hint):
    builder = TopologyBuilder()

    with pytest.raises(InvalidTopologyException, match=r"\[words\].*Parallelism must be positive"):
        builder.set_spout("words", TestWordSpout(), hint)
    with pytest.raises(InvalidTopologyException, match=r"\[count\].*Parallelism must be positive"):
        builder.set_bolt("count", TestPlannerBolt(), hint)


def test_zero_tasks_names_the_component():
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())

    with pytest.raises(InvalidTopologyException, match=r"\[2\].*number of tasks"):
        builder.set_bolt("2", TestPlannerBolt()).set_num_tasks(0)


def test_zero_tasks_through_add_configuration_is_caught_by_create_topology():
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())
    builder.set_bolt("2", TestPlannerBolt()).shuffle_grouping("1").add_configuration("topology.tasks", 0)

    with pytest.raises(InvalidTopologyException, match=r"\[2\].*number of tasks"):
        builder.create_topology()


def test_a_topology_needs_a_spout():
    builder = TopologyBuilder()
    builder.set_bolt("2", TestPlannerBolt())

    with pytest.raises(InvalidTopologyException, match="spout"):
        builder.create_topology()


def test_set_spout_refuses_a_bolt_and_set_bolt_refuses_a_spout():
    builder = TopologyBuilder()

    with pytest.raises(InvalidTopologyException, match=r"\[s\].*Spout"):
        builder.set_spout("s", TestPlannerBolt())
    with pytest.raises(InvalidTopologyException, match=r"\[b\].*Bolt"):
        builder.set_bolt("b", TestWordSpout())


def test_cycles_are_allowed():
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())
    builder.set_bolt("a", IdentityBolt(Fields("word"))).shuffle_grouping("1").shuffle_grouping("b")
    builder.set_bolt("b", IdentityBolt(Fields("word"))).shuffle_grouping("a")

    assert set(builder.create_topology().get_bolts()) == {"a", "b"}


@pytest.mark.parametrize("name", ["a/b", "a.b", "a:b", "a\\b", ""])
def test_topology_names_with_reserved_characters_are_rejected(cluster, name):
    builder = TopologyBuilder()
    builder.set_spout("1", TestPlannerSpout())

    with pytest.raises(InvalidTopologyException, match="name"):
        cluster.submit_topology(name, {}, builder.create_topology())


def test_a_topology_conf_setting_a_daemon_key_is_rejected_naming_the_key(cluster):
    builder = TopologyBuilder()
    builder.set_spout("1", TestPlannerSpout())

    with pytest.raises(InvalidTopologyException, match="nimbus.task.timeout.secs"):
        cluster.submit_topology("daemon-key", {"nimbus.task.timeout.secs": 5}, builder.create_topology())
    assert "daemon-key" not in [t["name"] for t in cluster.get_cluster_info()["topologies"]]


def test_a_topology_conf_value_of_the_wrong_type_names_the_key(cluster):
    builder = TopologyBuilder()
    builder.set_spout("1", TestPlannerSpout())
    conf = Config()
    conf.set_num_workers(0)

    with pytest.raises(InvalidTopologyException, match="topology.workers"):
        cluster.submit_topology("bad-workers", conf, builder.create_topology())


@pytest.mark.parametrize("bolt, message", [
    (BrokenDeclareBolt(), r"Component \[b\]: declare_output_fields raised AttributeError: no fields here"),
    (BrokenConfBolt(), r"Component \[b\]: get_component_configuration must return a dict"),
    (TwiceDeclaringBolt(), r"Component \[b\] declares stream \[default\] twice"),
])
def test_a_component_that_declares_badly_is_named(bolt, message):
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())
    builder.set_bolt("b", bolt).shuffle_grouping("1")

    with pytest.raises(InvalidTopologyException, match=message):
        builder.create_topology()


def test_a_custom_grouping_must_be_a_custom_stream_grouping():
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())

    with pytest.raises(InvalidTopologyException, match=r"\[b\].*CustomStreamGrouping"):
        builder.set_bolt("b", TestPlannerBolt()).custom_grouping("1", lambda task, values: [task])


def test_a_component_that_cannot_be_copied_to_its_tasks_is_named_at_submit(cluster):
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())
    builder.set_bolt("locked", UnpicklableBolt()).shuffle_grouping("1")

    with pytest.raises(InvalidTopologyException, match=r"Component \[locked\] cannot be serialized"):
        cluster.submit_topology("unpicklable", {}, builder.create_topology())
    assert cluster.get_cluster_info()["topologies"] == []


def test_a_component_that_cannot_be_unpickled_in_its_worker_is_named_in_the_topologys_errors(cluster):
    """Its worker cannot start: the error says which component and why. Before, LocalCluster
    showed only "worker on localhost:1024 exited with status 1 before it started: no output"."""
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())
    builder.set_bolt("reconnecting", UnrebuildableBolt()).shuffle_grouping("1")
    cluster.submit_topology("unrebuildable", {}, builder.create_topology())

    def errors():
        return [e["error"] for e in cluster.get_topology_info("unrebuildable")["errors"]]
    assert wait_until(errors, 10)
    assert errors()[0] == (
        "worker on localhost:1024 cannot start: InvalidTopologyException: Component [reconnecting] cannot be "
        "rebuilt for its tasks from its pickle (RuntimeError: needs the database this process never opened); "
        "squall copies each component per task, so it must unpickle as well as pickle")


def test_a_custom_grouping_whose_prepare_raises_is_named_in_the_topologys_errors(cluster):
    """Its worker cannot start, and says which grouping, where, and what it raised. Before,
    LocalCluster showed only "worker on localhost:1024 exited with status 1 before it started:
    no output"."""
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())
    builder.set_bolt("routed", IdentityBolt(Fields("word"))).custom_grouping("1", PrepareRaisingGrouping())
    cluster.submit_topology("bad-grouping", {}, builder.create_topology())

    def errors():
        return [e["error"] for e in cluster.get_topology_info("bad-grouping")["errors"]]
    assert wait_until(errors, 10)
    assert errors()[0] == (
        "worker on localhost:1024 cannot start: InvalidTopologyException: custom grouping PrepareRaisingGrouping of "
        "[routed] on stream [default] of component [1]: its prepare raised KeyError: 'routes' (for task 1 of [1])")


class StrDeclaringBolt(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare("word")
        declarer.declare_stream("counts", "count")


def test_a_field_name_given_as_a_str_declares_one_field_as_fields_of_it_does():
    """``declarer.declare("word")`` declared four fields, 'w', 'o', 'r' and 'd': an emit of
    one value raised "Expected 4 fields", and a fields grouping on "word" was refused as a
    subscription to a non-existent field."""
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())
    builder.set_bolt("b", StrDeclaringBolt()).shuffle_grouping("1")
    builder.set_bolt("c", IdentityBolt(Fields("word"))).fields_grouping("b", Fields("word"))

    streams = builder.create_topology().components["b"].streams
    assert (streams["default"].fields, streams["counts"].fields) == (Fields("word"), Fields("count"))


def test_a_field_name_given_as_a_str_to_a_shell_bolt_or_a_feeder_spout_is_one_field():
    """As ``declarer.declare("word")``: ``ShellBolt(cmd, "word")`` and ``FeederSpout("word")``
    declared the four fields 'w', 'o', 'r' and 'd'."""
    from squall.multilang import ShellBolt
    from squall.testing import FeederSpout, FixedTupleSpout

    builder = TopologyBuilder()
    builder.set_spout("s", FeederSpout("word"))
    builder.set_spout("t", FixedTupleSpout([["a"]], "word"))
    builder.set_bolt("b", ShellBolt(["cat"], "word")).shuffle_grouping("s")

    components = builder.create_topology().components
    assert [components[c].streams["default"].fields for c in "stb"] == [Fields("word")] * 3


class YieldingBolt(Bolt):
    def execute(self, tup):
        yield self.collector.emit([tup[0]], anchors=tup)


class AsyncBolt(Bolt):
    async def execute(self, tup):
        self.collector.ack(tup)


class YieldingSpout(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))

    def next_tuple(self):
        yield self.collector.emit(["w"], msg_id=1)


@pytest.mark.parametrize("spout, bolt, message", [
    (TestWordSpout(), YieldingBolt(), (r"Component \[b\]: YieldingBolt.execute is a generator function \(it contains "
                                       r"yield\): squall calls it and never iterates or awaits what it returns")),
    (TestWordSpout(), AsyncBolt(), r"Component \[b\]: AsyncBolt.execute is a coroutine function \(async def\)"),
    (YieldingSpout(), IdentityBolt(Fields("word")), r"Component \[s\]: YieldingSpout.next_tuple is a generator"),
])
def test_a_method_whose_body_would_never_run_is_refused_naming_it(spout, bolt, message):
    """Called, a generator or coroutine function returns an object nothing iterates or awaits:
    such a bolt acked and reported nothing, and every tuple timed out and was replayed for ever."""
    builder = TopologyBuilder()
    builder.set_spout("s", spout)
    builder.set_bolt("b", bolt).shuffle_grouping("s")

    with pytest.raises(InvalidTopologyException, match=message):
        builder.create_topology()


class RowsSpout(Spout):
    """A spout with generator helpers of names squall calls on bolts only."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))

    def execute(self, query):
        yield from query.split()

    def next_tuple(self):
        for word in self.execute("a b"):
            self.collector.emit([word])


class OpeningBolt(IdentityBolt):
    async def open(self, path):  # the user's own, never called by squall on a bolt
        return path

    def close(self):
        yield "never a bolt's method"


def test_a_generator_of_a_name_squall_calls_on_the_other_kind_is_the_users_own():
    """squall calls a spout's open/next_tuple/ack/fail/close... and a bolt's prepare/execute/
    cleanup: a spout's helper ``execute`` yielding a query's rows was refused at create_topology."""
    builder = TopologyBuilder()
    builder.set_spout("s", RowsSpout())
    builder.set_bolt("b", OpeningBolt(Fields("word"))).shuffle_grouping("s")

    assert set(builder.create_topology().components) == {"s", "b"}


def test_subscribing_to_a_components_system_stream_is_legal_and_receives_nothing(cluster):
    """Storm gives every component an implicit ``__system`` stream; subscribing to it is
    valid, and nothing is ever emitted on it."""
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout())
    builder.set_bolt("2", IdentityBolt(Fields("word"))).shuffle_grouping("1", "__system")
    builder.set_bolt("3", IdentityBolt(Fields("word"))).shuffle_grouping("1")

    results = complete_topology(cluster, builder.create_topology(), {"1": [["a"], ["b"]]})

    assert read_tuples(results, "2") == []
    assert sorted(read_tuples(results, "3")) == [["a"], ["b"]]
