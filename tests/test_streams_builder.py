"""The Streams API's builder and processors without a cluster: Storm's StreamBuilderTest (the
topology ``build()`` makes: bolts, parallelism, groupings), JoinProcessorTest and
CoGroupByKeyProcessorTest, and the ProcessorBolt's acking of what it processed."""

from __future__ import annotations

import random

import pytest

from squall import DEFAULT_STREAM, Bolt, Count, Duration, Fields, Grouping, Spout, StormTopology
from squall.streams import Pair, PairValueMapper, StreamBuilder, TumblingWindows, ValueMapper
from squall.streams._graph import ProcessorNode, SpoutNode
from squall.streams.bolts import ProcessorBolt, StatefulProcessorBolt, WindowedProcessorBolt
from squall.streams.contexts import ProcessorContext
from squall.streams.operations import PairValueJoiner
from squall.streams.operations.aggregators import Count as CountAgg
from squall.streams.processors import BranchProcessor, CoGroupByKeyProcessor, JoinProcessor, JoinType
from squall.testing import test_tuple

SHUFFLE, ALL, GLOBAL = Grouping("shuffle"), Grouping("all"), Grouping("global", Fields())
BY_KEY = Grouping("fields", Fields("key"))


class NewSpout(Spout):
    """Declares one stream, ``stream``, of field ``value`` (Storm's test's ``newSpout``)."""

    def __init__(self, stream: str = DEFAULT_STREAM) -> None:
        self.stream = stream

    def declare_output_fields(self, declarer):
        declarer.declare_stream(self.stream, Fields("value"))


class NewBolt(Bolt):
    """A bolt that declares nothing (Storm's test's ``newBolt``)."""


def unwrap(obj):
    """The builder's bolt inside the executors squall wraps it in (a window's, a checkpoint
    forwarder's)."""
    while not isinstance(obj, (ProcessorBolt, WindowedProcessorBolt, StatefulProcessorBolt)) and hasattr(obj, "bolt"):
        obj = obj.bolt
    return obj


def inputs(topology: StormTopology, bolt: str) -> dict[tuple[str, str], Grouping]:
    return {(g.component_id, g.stream_id): grouping for g, grouping in topology.bolts[bolt].inputs.items()}


def test_spout_no_default_stream():
    with pytest.raises(ValueError, match="does not declare any fields for the stream 'default'"):
        StreamBuilder().new_stream(NewSpout("test"))


def test_spout_to_bolt():
    builder = StreamBuilder()
    builder.new_stream(NewSpout()).to(NewBolt())
    topology = builder.build()
    assert len(topology.spouts) == 1 and len(topology.bolts) == 1
    (spout_id,) = topology.spouts
    (bolt_id,) = topology.bolts
    assert inputs(topology, bolt_id) == {(spout_id, "default"): SHUFFLE}


def test_branch():
    builder = StreamBuilder()
    streams = builder.new_stream(NewSpout()).branch(lambda x: True)
    topology = builder.build()
    assert len(topology.spouts) == 1 and len(topology.bolts) == 1
    (spout_id,) = topology.spouts
    assert inputs(topology, "bolt1") == {(spout_id, "default"): SHUFFLE}
    assert len(streams) == 1
    node = streams[0].node
    assert len(node.get_output_streams()) == 1
    parent_stream = node.get_output_streams()[0] + "-branch"
    (branch_node,) = node.get_parents(parent_stream)
    assert isinstance(branch_node, ProcessorNode) and isinstance(branch_node.processor, BranchProcessor)
    assert isinstance(next(iter(branch_node.get_parents("default"))), SpoutNode)


def test_join():
    builder = StreamBuilder()
    streams = builder.new_stream(NewSpout(), ValueMapper(0)).branch(lambda x: x % 2 == 0, lambda x: x % 3 == 0)
    s1 = streams[0].map_to_pair(lambda x: Pair(x, 1))
    s2 = streams[1].map_to_pair(lambda x: Pair(x, 1))
    sj = s1.join(s2)
    assert sj.node.get_parents(s1.stream) == {s1.node}
    assert sj.node.get_parents(s2.stream) == {s2.node}


def test_group_by():
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), PairValueMapper(0, 1), 2) \
        .window(TumblingWindows.of(Count(10))).aggregate_by_key(CountAgg())
    topology = builder.build()
    assert len(topology.bolts) == 2
    assert set(inputs(topology, "bolt1").values()) == {SHUFFLE}
    assert inputs(topology, "bolt2")[("bolt1", "s1")] == BY_KEY
    assert isinstance(unwrap(topology.bolts["bolt2"].obj), WindowedProcessorBolt)


def test_global_aggregate():
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0), 2).aggregate(CountAgg())
    topology = builder.build()
    assert len(topology.bolts) == 2
    (spout_id,) = topology.spouts
    assert inputs(topology, "bolt1") == {(spout_id, "default"): SHUFFLE}
    assert inputs(topology, "bolt2") == {("bolt1", "s1"): GLOBAL, ("bolt1", "s1__punctuation"): ALL}


def test_repartition():
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0)).repartition(3).filter(lambda x: True) \
        .repartition(2).filter(lambda x: True).aggregate(CountAgg())
    topology = builder.build()
    assert list(topology.spouts) == ["spout1"] and topology.spouts["spout1"].parallelism == 1
    assert {b: c.parallelism for b, c in topology.bolts.items()} == {"bolt1": 1, "bolt2": 3, "bolt3": 2, "bolt4": 2}


def test_branch_and_join():
    builder = StreamBuilder()
    streams = builder.new_stream(NewSpout(), ValueMapper(0), 2).branch(lambda x: x % 2 == 0, lambda x: x % 2 == 1)
    joined = streams[0].map_to_pair(lambda x: Pair(x, 1)).join(streams[1].map_to_pair(lambda x: Pair(x, 1)))
    assert isinstance(joined.get_node(), ProcessorNode)
    assert len(builder.build().bolts) == 2


def test_multi_partition_by_key():
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0)).map_to_pair(lambda x: Pair(x, x)) \
        .window(TumblingWindows.of(Count(10))).reduce_by_key(lambda x, y: x + y) \
        .reduce_by_key(lambda x, y: 0).print()
    assert len(builder.build().bolts) == 2


def test_multi_partition_by_key_with_repartition():
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0)).map_to_pair(lambda x: Pair(x, x)) \
        .window(TumblingWindows.of(Count(10))).reduce_by_key(lambda x, y: x + y) \
        .repartition(10).reduce_by_key(lambda x, y: 0).print()
    topology = builder.build()
    assert len(topology.bolts) == 3
    assert inputs(topology, "bolt3") == {("bolt2", "s3"): BY_KEY, ("bolt2", "s3__punctuation"): ALL}


def test_partition_by_key_single_partition():
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0)).map_to_pair(lambda x: Pair(x, x)) \
        .reduce_by_key(lambda x, y: x + y).print()
    assert len(builder.build().bolts) == 1


def test_update_state_by_key_and_its_query_share_one_stateful_bolt():
    builder = StreamBuilder()
    state = builder.new_stream(NewSpout(), ValueMapper(0), 2).map_to_pair(lambda w: Pair(w, 1)) \
        .update_state_by_key(0, lambda count, _v: count + 1)
    builder.new_stream(NewSpout(), ValueMapper(0)).state_query(state).print()
    topology = builder.build()
    stateful = [b for b, c in topology.bolts.items() if isinstance(unwrap(c.obj), StatefulProcessorBolt)]
    assert len(stateful) == 1
    got = inputs(topology, stateful[0])
    assert got[("bolt1", "s2")] == BY_KEY  # the updates, grouped by key
    assert got[("bolt2", "s4")] == Grouping("fields", Fields("value"))  # the queries, grouped the same way


def test_a_window_on_the_stateful_updates_input_splits_them_into_two_bolts():
    # Storm's splitStatefulProcessor: the window's operations and the state update are not one bolt
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), PairValueMapper(0, 1)).window(TumblingWindows.of(Count(2))) \
        .update_state_by_key(0, lambda s, v: s + v)
    kinds = {type(unwrap(c.obj)).__name__ for c in builder.build().bolts.values()}
    assert kinds == {"ProcessorBolt", "WindowedProcessorBolt", "StatefulProcessorBolt"}


def test_event_time_window_carries_the_timestamp_field_on_every_stream_bolt():
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0), 2) \
        .window(TumblingWindows.of(Count(2)).with_timestamp_field("ts")).count().print()
    topology = builder.build()
    assert topology.bolts["bolt1"].streams["s1"].fields == Fields("value", "ts")
    streams = topology.bolts["bolt2"].streams
    assert streams["s2"].fields == Fields("value", "ts") and streams["s2__punctuation"].fields.get(1) == "ts"


class ListContext(ProcessorContext):
    """Collects what a processor forwards (the Java tests' anonymous context)."""

    def __init__(self, windowed: bool = True) -> None:
        self.res: list = []
        self.windowed = windowed

    def forward(self, input, stream=None):
        self.res.append(input)

    def is_windowed(self):
        return self.windowed

    def get_windowed_parent_streams(self):
        return frozenset()


LEFT = [Pair(2, 4), Pair(5, 25), Pair(7, 49)]
RIGHT = [Pair(1, 1), Pair(2, 8), Pair(5, 125), Pair(6, 216)]


def run_join(left_type: JoinType, right_type: JoinType) -> list:
    join = JoinProcessor("left", "right", PairValueJoiner(), left_type, right_type)
    ctx = ListContext()
    join.init(ctx)
    for kv in LEFT:
        join.execute(kv, "left")
    for kv in RIGHT:
        join.execute(kv, "right")
    join.finish()
    return ctx.res


def test_inner_join():
    assert run_join(JoinType.INNER, JoinType.INNER) == [Pair(2, Pair(4, 8)), Pair(5, Pair(25, 125))]


def test_left_outer_join():
    assert run_join(JoinType.OUTER, JoinType.INNER) == [Pair(2, Pair(4, 8)), Pair(5, Pair(25, 125)),
                                                        Pair(7, Pair(49, None))]


def test_right_outer_join():
    assert run_join(JoinType.INNER, JoinType.OUTER) == [Pair(1, Pair(None, 1)), Pair(2, Pair(4, 8)),
                                                        Pair(5, Pair(25, 125)), Pair(6, Pair(None, 216))]


def test_full_outer_join():
    assert run_join(JoinType.OUTER, JoinType.OUTER) == [Pair(1, Pair(None, 1)), Pair(2, Pair(4, 8)),
                                                        Pair(5, Pair(25, 125)), Pair(6, Pair(None, 216)),
                                                        Pair(7, Pair(49, None))]


def test_co_group_by_key():
    cogroup = CoGroupByKeyProcessor("first", "second")
    ctx = ListContext()
    cogroup.init(ctx)
    for kv in [Pair(2, 4), Pair(5, 25), Pair(7, 49), Pair(7, 87)]:
        cogroup.execute(kv, "first")
    for kv in [Pair(1, 1), Pair(2, 8), Pair(2, 9), Pair(5, 125), Pair(6, 216)]:
        cogroup.execute(kv, "second")
    cogroup.finish()
    assert sorted(ctx.res) == [Pair(1, Pair([], [1])), Pair(2, Pair([4], [8, 9])), Pair(5, Pair([25], [125])),
                               Pair(6, Pair([], [216])), Pair(7, Pair([49, 87], []))]


class RecordingCollector:
    """An OutputCollector that records emits (with their anchors), acks and timeout resets (a
    window resets each input's on arrival)."""

    def __init__(self) -> None:
        self.emitted: list = []
        self.acked: list = []
        self.resets: list = []

    def emit(self, values, anchors=None, stream=DEFAULT_STREAM):
        self.emitted.append((stream, values, anchors))
        return []

    def ack(self, tup):
        self.acked.append(tup)

    def reset_timeout(self, tup):
        self.resets.append(tup)


class Context:
    """A TopologyContext with one source stream of one task."""

    def __init__(self, sources):
        self.sources = sources

    def get_this_sources(self):
        return self.sources

    def get_component_tasks(self, component_id):
        return [1]


def prepared(builder: StreamBuilder, input_stream: str) -> tuple[ProcessorBolt, RecordingCollector]:
    """The ProcessorBolt that takes ``input_stream``, prepared with a `RecordingCollector`."""
    topology = builder.build()
    (spec,) = [c for c in topology.bolts.values()
               if isinstance(c.obj, ProcessorBolt) and input_stream in {g.stream_id for g in c.inputs}]
    bolt = spec.obj
    collector = RecordingCollector()
    bolt.prepare({}, Context(spec.inputs), collector)
    return bolt, collector


def test_processor_bolt_emits_anchored_to_its_input_and_acks_it_after_processing():
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0)).filter(lambda x: x % 2 == 0).map(lambda x: x * 10) \
        .repartition(2).print()
    bolt, collector = prepared(builder, "default")
    t1, t2 = (test_tuple([n], component="spout1", fields=["value"]) for n in (1, 2))
    bolt.execute(t1)
    bolt.execute(t2)
    assert collector.emitted == [("s3", [20], [t2])]
    assert collector.acked == [t1, t2]


def test_processor_bolt_holds_a_windows_inputs_until_its_punctuation_from_every_task():
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0), 2).window(TumblingWindows.of(Count(2))) \
        .map_to_pair(lambda x: Pair(x % 2, x)).count_by_key().map_values(lambda c: c * 10).to(NewBolt())
    bolt, collector = prepared(builder, "s3")
    inputs_ = [test_tuple(list(kv), component="bolt3", stream="s3", fields=["key", "value"])
               for kv in [(0, 2), (1, 1), (0, 2)]]
    for t in inputs_:
        bolt.execute(t)
    assert collector.acked == [] and collector.emitted == []  # the merge emits at the window's end
    punctuation = test_tuple(["__punctuation"], component="bolt3", stream="s3__punctuation",
                             fields=["__punctuation"])
    bolt.execute(punctuation)
    # map_values after the merge, in the same bolt: its results too are anchored to the window
    assert sorted(values for stream, values, _ in collector.emitted if stream == "s5") == [[0, 40], [1, 10]]
    assert all(anchors == [*inputs_, punctuation] for stream, _, anchors in collector.emitted if stream == "s5")
    assert collector.acked == [*inputs_, punctuation]


class TwoTaskContext(Context):
    """Every source component has two tasks."""

    def get_component_tasks(self, component_id):
        return [1, 2]


def punctuation_from(component: str, stream: str, task: int = 1):
    return test_tuple(["__punctuation"], component=component, stream=stream + "__punctuation",
                      fields=["__punctuation"], task=task)


def test_a_punctuation_waiting_for_the_other_tasks_one_is_acked_when_the_window_ends():
    # Storm's kept only the last punctuation input, and never acked the first (nor, through
    # its anchors, the inputs of the upstream window it closed)
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0), 2).window(TumblingWindows.of(Count(2))).map(lambda x: x + 1) \
        .repartition(3).map(lambda x: x * 2).to(NewBolt())
    topology = builder.build()
    (spec,) = [c for c in topology.bolts.values() if isinstance(c.obj, ProcessorBolt) and c.parallelism == 3]
    bolt, collector = spec.obj, RecordingCollector()
    bolt.prepare({}, TwoTaskContext(spec.inputs), collector)
    value = test_tuple([1], component="bolt3", stream="s2", fields=["value"])
    first, second = punctuation_from("bolt3", "s2", task=1), punctuation_from("bolt3", "s2", task=2)
    bolt.execute(value)
    bolt.execute(first)
    assert collector.acked == [value]  # the window has not ended on the other task yet
    bolt.execute(second)
    assert collector.acked == [value, first, second]
    assert [(s, v) for s, v, _ in collector.emitted] == [("s3", [2]), ("s3__punctuation", ["__punctuation"])]


def test_a_merge_ends_its_window_once_each_upstream_task_punctuated_not_at_two_from_one():
    """A merge after a regrouping, 2 tasks upstream. Task 1's window ends twice (a window-end
    burst, or a task restarted after its worker died) before task 2's ends once. Storm's counts
    punctuations: at task 1's second it ended the window without task 2's counts, and from then on
    every window ended one punctuation early, task 2's counts waiting a window more (a window
    late: on the process host, with the spout's pending tuples held there, until the message
    timeout). Each window now ends once every upstream task punctuated since the last end."""
    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0), 2).window(TumblingWindows.of(Count(2))) \
        .map_to_pair(lambda x: Pair(x % 2, x)).count_by_key().to(NewBolt())
    topology = builder.build()
    (spec,) = [c for c in topology.bolts.values()
               if isinstance(c.obj, ProcessorBolt) and "s3" in {g.stream_id for g in c.inputs}]
    bolt, collector = spec.obj, RecordingCollector()
    bolt.prepare({}, TwoTaskContext(spec.inputs), collector)

    def counts(key, n, task):
        return test_tuple([key, n], component="bolt3", stream="s3", fields=["key", "value"], task=task)

    def results():
        return sorted(v for s, v, _ in collector.emitted if s == "s4")

    rounds = []
    for r in range(3):
        collector.emitted.clear()
        first = [counts(0, 1, 1), punctuation_from("bolt3", "s3", 1), counts(1, 2, 1), punctuation_from("bolt3", "s3", 1)]
        for t in first:
            bolt.execute(t)
        assert results() == [], f"round {r}: the window ended without task 2's punctuation"
        assert not [t for t in first if any(a is t for a in collector.acked)], f"round {r}: acked before its window ended"
        second = [counts(0, 4, 2), punctuation_from("bolt3", "s3", 2)]
        for t in second:
            bolt.execute(t)
        rounds.append(results())
        assert all(a is t for a, t in zip(collector.acked[-6:], first + second, strict=True)), f"round {r}: not acked"
        assert [s for s, _, _ in collector.emitted].count("s4__punctuation") == 1
    assert rounds == [[[0, 5], [1, 2]]] * 3


class _Clock:
    """The engine's clock as a windowed bolt reads it, at a time the test sets (ms)."""

    def __init__(self, ms):
        self.ms = ms

    def wall(self):
        return self.ms / 1000


class WindowContext(Context):
    """A windowed bolt's task 7 of component bolt2."""

    def get_this_component_id(self):
        return "bolt2"

    def get_this_task_id(self):
        return 7


def test_a_window_task_punctuates_an_empty_processing_time_window_unanchored():
    """A window with no tuple does not fire (Storm's), and Storm's stream window task sent no
    punctuation for it, so a merge after the regrouping waited on an idle task while the other
    tasks' windows held the spouts' tuples. Its end now goes downstream all the same, a
    punctuation anchored to nothing; a window with tuples still ends with its results and the
    punctuation, anchored to the window."""
    from squall.windowing.executor import WindowedBoltExecutor

    builder = StreamBuilder()
    builder.new_stream(NewSpout(), ValueMapper(0)).repartition(2).window(TumblingWindows.of(Duration.of(300))) \
        .map_to_pair(lambda x: Pair(x % 2, x)).count_by_key().to(NewBolt())
    topology = builder.build()
    (spec,) = [c for c in topology.bolts.values() if isinstance(unwrap(c.obj), WindowedProcessorBolt)]
    executor = spec.obj
    assert isinstance(executor, WindowedBoltExecutor)
    collector = RecordingCollector()
    executor.prepare(dict(executor.get_component_configuration()), WindowContext(spec.inputs), collector)
    clock = _Clock(1_000_000)
    # the window's trigger, its inputs' first timeout reset, its keep-alive
    [(period, fire), (_first, _reset_arrivals), (_secs, _keep_alive)] = executor.squall_timers(clock)
    assert period == 0.3
    value = test_tuple([3], component="bolt1", stream="s1", fields=["value"])
    executor.execute(value)
    clock.ms += 300
    fire()
    assert collector.emitted == [("s3", [1, 1], [value]), ("s3__punctuation", ["__punctuation"], [value])]
    collector.emitted.clear()
    for _ in range(2):
        clock.ms += 300
        fire()
    assert collector.emitted == [("s3__punctuation", ["__punctuation"], None)] * 2


class DictState:
    """A KeyValueState's get and put."""

    def __init__(self):
        self.d = {}

    def get(self, key, default=None):
        return self.d.get(key, default)

    def put(self, key, value):
        self.d[key] = value


def test_a_punctuation_is_not_held_by_a_state_query_it_never_reaches():
    builder = StreamBuilder()
    state = builder.new_stream(NewSpout(), ValueMapper(0)).window(TumblingWindows.of(Count(2))) \
        .map_to_pair(lambda w: Pair(w, 1)).count_by_key().update_state_by_key(0, lambda t, n: t + n)
    state.to_pair_stream().to(NewBolt())
    builder.new_stream(NewSpout(), ValueMapper(0)).state_query(state).to(NewBolt())
    topology = builder.build()
    (spec,) = [c for c in topology.bolts.values() if isinstance(unwrap(c.obj), StatefulProcessorBolt)]
    bolt, collector = unwrap(spec.obj), RecordingCollector()
    bolt.prepare({}, Context({g: v for g, v in spec.inputs.items() if g.stream_id != "$checkpoint"}), collector)
    bolt.init_state(DictState())
    assert {g.stream_id for g in spec.inputs} >= {"s3", "s3__punctuation", "s5"}  # updates from bolt4, queries
    counts = test_tuple(["cow", 2], component="bolt4", stream="s3", fields=["key", "value"])
    end = punctuation_from("bolt4", "s3")
    bolt.execute(counts)
    bolt.execute(end)
    assert collector.acked == [counts, end]
    assert [v for s, v, _ in collector.emitted if not s.endswith("__punctuation")] == [["cow", 2]]


@pytest.mark.parametrize("left_type", [JoinType.INNER, JoinType.OUTER])
@pytest.mark.parametrize("right_type", [JoinType.INNER, JoinType.OUTER])
def test_a_join_outside_a_window_matches_each_value_with_the_other_sides_so_far(left_type, right_type):
    # 1,000 values of 37 keys in a seeded random order of sides: each value comes out joined with
    # every earlier value of its key on the other side, or alone (outer) when there is none
    rng = random.Random(7)
    values = [(rng.choice("lr"), Pair(rng.randrange(37), i)) for i in range(1000)]
    join = JoinProcessor("l", "r", PairValueJoiner(), left_type, right_type)
    ctx = ListContext(windowed=False)
    join.init(ctx)
    expected = []
    for n, (side, pair) in enumerate(values):
        join.execute(pair, side)
        others = [p.second for s, p in values[:n] if s != side and p.first == pair.first]
        if side == "l":
            expected += [Pair(pair.first, Pair(pair.second, o)) for o in others]
            if not others and left_type is JoinType.OUTER:
                expected.append(Pair(pair.first, Pair(pair.second, None)))
        else:
            expected += [Pair(pair.first, Pair(o, pair.second)) for o in others]
            if not others and right_type is JoinType.OUTER:
                expected.append(Pair(pair.first, Pair(None, pair.second)))
    assert ctx.res == expected
    assert len(expected) > 1000 * 2  # every key has values on both sides: many matches each
