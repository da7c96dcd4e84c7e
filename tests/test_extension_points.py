"""The builder's and the engine's extension points (docs/architecture.md, "Extension points"):
windowed, stateful and metrics bolts attach through them, and so can a package of one's own,
without `squall._topology` or `squall.engine` importing it."""

from __future__ import annotations

from typing import ClassVar

import pytest

import squall._topology as topology_module
import squall.engine.loop as loop_module
import squall.engine.plan as plan_module
import squall.engine.serialize as serialize_module
from squall import Bolt, Fields, InvalidTopologyException, TopologyBuilder
from squall._config import default_conf, topology_conf
from squall._topology import ComponentSpec, register_bolt_kind, register_topology_transform
from squall._tuple import Tuple
from squall.engine.loop import register_executor_timers
from squall.engine.plan import SUBMIT_CHECK, make_plan, register_system_components
from squall.engine.serialize import Serializer, register_record
from squall.metric import DataPoint, TaskInfo
from squall.testing import FeederSpout

from .engine.test_serialize import SOURCES, flat, source_of


@pytest.fixture(autouse=True)
def _own_registries(monkeypatch):
    """Each test registers into copies, so that what it adds is gone after it."""
    monkeypatch.setattr(topology_module, "_BOLT_KINDS", dict(topology_module._BOLT_KINDS))
    monkeypatch.setattr(topology_module, "_TOPOLOGY_TRANSFORMS", list(topology_module._TOPOLOGY_TRANSFORMS))
    monkeypatch.setattr(plan_module, "_SYSTEM_TRANSFORMS", list(plan_module._SYSTEM_TRANSFORMS))
    monkeypatch.setattr(loop_module, "_TIMER_SOURCES", list(loop_module._TIMER_SOURCES))
    monkeypatch.setattr(serialize_module, "_RECORDS", dict(serialize_module._RECORDS))


class Sketch:
    """A bolt kind of one's own: no Bolt, run inside `SketchExecutor`."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def get_component_configuration(self):
        return None


class CountedSketch(Sketch):
    pass


class SketchExecutor(Bolt):
    def __init__(self, sketch):
        self.sketch = sketch

    def declare_output_fields(self, declarer):
        self.sketch.declare_output_fields(declarer)


class Checked(Bolt):
    """A bolt that records its check at submit, or refuses the topology."""

    seen: ClassVar[list] = []

    def __init__(self, refuse: bool = False):
        self.refuse = refuse

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def squall_check_at_submit(self, component_id, conf, streams, inputs):
        if self.refuse:
            raise InvalidTopologyException(f"Component [{component_id}]: refused at submit")
        Checked.seen.append((component_id, conf.get("topology.tick.tuple.freq.secs"), sorted(streams),
                             {tuple(k): info.fields for k, info in inputs.items()}))


def builder_with(bolt) -> TopologyBuilder:
    builder = TopologyBuilder()
    builder.set_spout("words", FeederSpout(Fields("word")))
    builder.set_bolt("b", bolt).shuffle_grouping("words")
    return builder


def plan_of(builder: TopologyBuilder, given: dict | None = None):
    given = dict(given or {})
    return make_plan("t", "t-1-0", builder.create_topology(), topology_conf(default_conf(), given), given)


def test_a_registered_bolt_kind_is_taken_by_set_bolt_and_runs_in_its_executor():
    with pytest.raises(InvalidTopologyException, match=r"Component \[b\]: set_bolt needs a Bolt, .* got Sketch"):
        builder_with(Sketch())

    register_bolt_kind(Sketch, SketchExecutor)
    sketch = CountedSketch()  # a subclass is taken as its registered base is
    built = builder_with(sketch).create_topology().components["b"]

    assert type(built.obj) is SketchExecutor and built.obj.sketch is sketch
    assert built.streams["default"].fields == Fields("n")


def test_a_bolt_kind_registered_without_executor_is_kept_as_given():
    register_bolt_kind(Sketch)
    sketch = Sketch()
    assert builder_with(sketch).create_topology().components["b"].obj is sketch


def test_topology_transforms_run_before_validation_in_their_order():
    calls = []

    def add_spout(components):
        calls.append("add")
        spout = ComponentSpec("extra", FeederSpout(Fields("x")), "spout", 1)
        spout.streams = {}
        return components | {"extra": spout}

    def invalid_subscription(components):
        calls.append("check")
        assert "extra" in components  # the first transform's output
        components["b"].inputs[("extra", "nowhere")] = components["b"].inputs[("words", "default")]
        return components

    register_topology_transform(add_spout)
    register_topology_transform(add_spout)  # twice: once
    assert set(builder_with(SketchExecutor(Sketch())).create_topology().components) == {"words", "b", "extra"}
    register_topology_transform(invalid_subscription)
    calls.clear()
    with pytest.raises(InvalidTopologyException, match=r"non-existent stream: \[nowhere\] of component \[extra\]"):
        builder_with(SketchExecutor(Sketch())).create_topology()
    assert calls == ["add", "check"]


def test_the_plan_calls_a_bolts_check_at_submit_with_its_merged_conf_and_inputs():
    Checked.seen.clear()
    builder = builder_with(Checked())
    builder.set_bolt("c", Checked()).shuffle_grouping("b").add_configuration("topology.tick.tuple.freq.secs", 7)

    plan_of(builder)

    assert sorted(Checked.seen, key=lambda s: s[0]) == [
        ("b", None, ["default"], {("words", "default"): Fields("word")}),
        ("c", 7, ["default"], {("b", "default"): Fields("n")}),
    ]
    assert SUBMIT_CHECK == "squall_check_at_submit"
    with pytest.raises(InvalidTopologyException, match=r"Component \[b\]: refused at submit"):
        plan_of(builder_with(Checked(refuse=True)))


def test_system_components_come_from_the_configuration_before_tasks_are_numbered():
    def one_more(topology, conf):
        if not conf.get("test.extra.bolt"):
            return topology
        extra = ComponentSpec("__extra", SketchExecutor(Sketch()), "bolt", 1)
        extra.inputs = dict(topology.components["b"].inputs)
        return topology.with_components({"__extra": extra})

    register_system_components(one_more)
    builder = builder_with(SketchExecutor(Sketch()))

    assert "__extra" not in plan_of(builder).component_tasks
    plan = plan_of(builder, {"test.extra.bolt": True})
    assert plan.component_tasks["__extra"] == [2]  # numbered with the others: "__acker" < "__extra" < "b"


def test_an_executor_timer_source_is_asked_once_per_executor():
    asked = []
    register_executor_timers(lambda ex: asked.append(ex) or [(5.0, lambda: None)])
    register_executor_timers(metric_source := lambda ex: [])
    register_executor_timers(metric_source)
    ex = object()
    assert loop_module._extra_timers(ex)[0][0] == 5.0 and asked == [ex]
    assert len(loop_module._TIMER_SOURCES) == len(set(map(id, loop_module._TIMER_SOURCES)))


class Reading:
    def __init__(self, value):
        self.value = value


class ReadingSerializer:
    def serialize(self, obj):
        return obj.value * 10

    def deserialize(self, data):
        return Reading(data // 10 + 1)


def test_registered_records_cross_without_pickle_and_metrics_registers_its_own():
    register_record(Reading, ReadingSerializer())
    no_pickle = {"topology.fall.back.on.pickle": False}
    point = DataPoint("n", 1)
    info = TaskInfo("host", 6700, "c", 3, 1, 60)
    values = [Reading(4), point, info]
    data = Serializer(no_pickle, source_of).encode_batch(flat([(1, Tuple(values, SOURCES[(1, "default")]))]))
    _task, back = Serializer(no_pickle, source_of).decode_batch(data)

    reading, point_back, info_back = back.values
    assert type(reading) is Reading and reading.value == 5  # through its serializer, both ways
    assert point_back == point and info_back == info
