"""Storm's metrics API v1, after Storm's ``metrics_test.clj``: metrics registered in
prepare/open, read every bucket on the cluster's (simulated) clock, handed to the consumers of
``topology.metrics.consumer.register``."""

from __future__ import annotations

import logging

import pytest

from squall import (
    Bolt, CombinedMetric, Config, CountMetric, DataPoint, Fields, ICombiner, IMetricsConsumer,
    InvalidTopologyException, LocalCluster, LoggingMetricsConsumer, MeanReducer, MultiCountMetric,
    ReducedMetric, TaskInfo, TopologyBuilder,
)
from squall.engine.clock import SimulatedClock
from squall.metric._bolt import NameFilter, expand
from squall.metric._logging import format_line
from squall.testing import FeederSpout
from squall.testing._registry import SharedLog

from ..conftest import wait_until


class FakeMetricConsumer(IMetricsConsumer):
    """Storm's ``FakeMetricConsumer``: every batch it gets goes to the SharedLog its argument is."""

    def prepare(self, conf, registration_argument, context, error_reporter):
        self.log = registration_argument
        self.log.append(("prepared", context.get_this_component_id(), context.get_this_task_id()))

    def handle_data_points(self, task_info, data_points):
        self.log.append((task_info, list(data_points)))


class CountingBolt(Bolt):
    """Counts its inputs in a CountMetric with a 5 s bucket and acks them (metrics_test.clj's)."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.count = context.register_metric("my-custom-metric", CountMetric(), 5)

    def execute(self, tup):
        self.count.incr()
        self.collector.ack(tup)


class LateRegistration(Bolt):
    """Registers a metric in execute, which Storm refuses; records what it got."""

    def __init__(self, log):
        self.log = log

    def execute(self, tup):
        try:
            self.context.register_metric("late", CountMetric(), 5)
        except Exception as e:
            self.log.append(f"{type(e).__name__}: {e}")
        self.collector.ack(tup)


def batches(log):
    return [e for e in log.items() if isinstance(e[0], TaskInfo)]


def sums(log, component, name):
    """Storm's ``assert-metric-data-exists!``-style view: the values of ``name`` at ``component``,
    summed over tasks, bucket by bucket (one entry per task's bucket)."""
    out = []
    for info, points in batches(log):
        if info.src_component_id == component:
            out.extend(p.value for p in points if p.name == name)
    return out


def _topology(bolt, parallelism=1):
    feeder = FeederSpout(Fields("x"))
    b = TopologyBuilder()
    b.set_spout("myspout", feeder)
    b.set_bolt("mybolt", bolt, parallelism).shuffle_grouping("myspout")
    return feeder, b.create_topology()


def _conf(log, **extra):
    conf = Config()
    conf.register_metrics_consumer(FakeMetricConsumer, argument=log)
    conf.update(extra)
    return conf


def _advance_until(cluster, pred, step=5.0, limit=30):
    """Advance simulated time a bucket at a time until ``pred`` (the consumer runs on a thread)."""
    for _ in range(limit):
        if pred():
            return True
        cluster.advance_cluster_time(step)
        wait_until(pred, 0.2)
    return pred()


def test_custom_count_metric_reports_each_5_s_bucket():
    """metrics_test.clj "test-custom-metric": 1 tuple -> 1 after 6 s; buckets go on reporting 0;
    2 more -> 3 in all."""
    log = SharedLog()
    feeder, topo = _topology(CountingBolt())
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("metrics", _conf(log), topo)
        feeder.feed([1])
        assert wait_until(lambda: cluster.get_topology_info("metrics")["components"]["mybolt"]["executed"] == 1)
        assert _advance_until(cluster, lambda: len(sums(log, "mybolt", "my-custom-metric")) >= 1)
        assert sum(sums(log, "mybolt", "my-custom-metric")) == 1
        assert _advance_until(cluster, lambda: len(sums(log, "mybolt", "my-custom-metric")) >= 6)
        assert sum(sums(log, "mybolt", "my-custom-metric")) == 1  # zeros are data points too
        feeder.feed([2])
        feeder.feed([3])
        assert wait_until(lambda: cluster.get_topology_info("metrics")["components"]["mybolt"]["executed"] == 3)
        assert _advance_until(cluster, lambda: sum(sums(log, "mybolt", "my-custom-metric")) == 3)
    info = batches(log)[0][0]
    assert info.update_interval_secs == 5
    assert info.src_component_id == "mybolt"
    assert isinstance(info.timestamp, int) and info.timestamp >= 5  # the simulated clock's seconds
    # prepared once, by the consumer bolt Storm names __metrics_<class>
    prepared = [e for e in log.items() if e[0] == "prepared"]
    assert [p[1] for p in prepared] == [f"__metrics_{__name__}:FakeMetricConsumer"]


def test_custom_metric_with_two_tasks_reports_per_task():
    log = SharedLog()
    feeder, topo = _topology(CountingBolt(), parallelism=2)
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("metrics2", _conf(log), topo)
        for i in range(4):
            feeder.feed([i])
        assert wait_until(lambda: cluster.get_topology_info("metrics2")["components"]["mybolt"]["executed"] == 4)
        assert _advance_until(cluster, lambda: sum(sums(log, "mybolt", "my-custom-metric")) == 4)
        tasks = {info.src_task_id for info, _ in batches(log) if info.src_component_id == "mybolt"}
        assert len(tasks) == 2


def test_register_metric_after_prepare_is_refused():
    log = SharedLog()
    feeder, topo = _topology(LateRegistration(log))
    with LocalCluster() as cluster:
        cluster.submit_topology("late", _conf(SharedLog()), topo)
        feeder.feed([1])
        assert wait_until(lambda: log.items())
    assert log.items()[0].startswith("RuntimeError: TopologyContext.register_metric can only be called")


def _context():
    b = TopologyBuilder()
    b.set_spout("s", FeederSpout(Fields("x")))
    from squall._context import TopologyContext
    return TopologyContext(b.create_topology(), "t-1", {1: "s"}, 1, 6700, [1], {})


def test_register_metric_rules():
    ctx = _context()
    m = ctx.register_metric("a", CountMetric(), 5)
    assert ctx.get_registered_metric_by_name("a") is m
    with pytest.raises(ValueError, match=r"`a` was registered twice.*component \[s\]"):
        ctx.register_metric("a", CountMetric(), 10)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match=r"bucket_secs.*metric 'b' of component \[s\]"):
            ctx.register_metric("b", CountMetric(), bad)
    with pytest.raises(ValueError, match="get_value_and_reset"):
        ctx.register_metric("c", None, 5)
    assert isinstance(ctx.register_metric("mean", MeanReducer(), 5), ReducedMetric)  # Storm's overload
    ctx.seal_metrics()
    with pytest.raises(RuntimeError, match=r"only be called from within.*prepare"):
        ctx.register_metric("d", CountMetric(), 5)


def test_metric_types():
    c = CountMetric()
    c.incr()
    c.incr_by(4)
    c.incr_by(-2)
    assert c.get_value_and_reset() == 3 and c.get_value_and_reset() == 0
    mc = MultiCountMetric()
    mc.scope("a").incr()
    mc.scope("b")
    assert mc.get_value_and_reset() == {"a": 1, "b": 0}
    assert mc.get_value_and_reset() == {"a": 0, "b": 0}  # every key, 0 included
    mean = ReducedMetric(MeanReducer())
    assert mean.get_value_and_reset() is None  # nothing this bucket: no data point
    mean.update(1)
    mean.update(2.0)
    assert mean.get_value_and_reset() == 1.5
    assert mean.get_value_and_reset() is None
    for bad in ("3", True, None):
        with pytest.raises(TypeError, match="MeanReducer::reduce called with unsupported input type"):
            mean.update(bad)

    class Max(ICombiner):
        def identity(self):
            return None

        def combine(self, a, b):
            return b if a is None else max(a, b)
    mx = CombinedMetric(Max())
    mx.update(3)
    mx.update(7)
    mx.update(5)
    assert mx.get_value_and_reset() == 7 and mx.get_value_and_reset() is None


def test_name_filter_and_expansion():
    white = NameFilter(["^__ack", "count$"], [])
    assert white.keep("__ack-count") and white.keep("my-count") and not white.keep("latency")
    black = NameFilter([], ["^__"])
    assert not black.keep("__ack-count") and black.keep("mine")
    assert NameFilter([], []).keep("anything")
    assert expand([DataPoint("m", {"a": 1, "b": None}), DataPoint("n", 2), DataPoint("z", None)], "/") == [
        DataPoint("m/a", 1), DataPoint("n", 2)]


class TwoMetrics(Bolt):
    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.keep = context.register_metric("keep-me", CountMetric(), 5)
        self.drop = context.register_metric("drop-me", CountMetric(), 5)

    def execute(self, tup):
        self.keep.incr()
        self.drop.incr()
        self.collector.ack(tup)


def test_whitelist_keeps_only_matching_names_and_argument_and_parallelism_reach_the_consumer():
    log = SharedLog()
    feeder, topo = _topology(TwoMetrics())
    conf = Config()
    conf["topology.metrics.consumer.register"] = [
        {"class": f"{__name__}:FakeMetricConsumer", "parallelism.hint": 2, "argument": log, "whitelist": ["^keep"]}]
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("white", conf, topo)
        feeder.feed([1])
        assert _advance_until(cluster, lambda: sum(sums(log, "mybolt", "keep-me")) == 1)
        assert wait_until(lambda: len([e for e in log.items() if e[0] == "prepared"]) == 2)
    names = {p.name for _, points in batches(log) for p in points}
    assert names == {"keep-me"}
    prepared = [e for e in log.items() if e[0] == "prepared"]
    assert len({task for _, _, task in prepared}) == 2  # two consumer tasks, each given the argument


@pytest.mark.parametrize("entry, message", [
    ({"class": "x:Y", "whitelist": ["a"], "blacklist": ["b"]}, r"entry 0: give \"whitelist\" or \"blacklist\""),
    ({"class": 3}, r"entry 0: \"class\" must name a class"),
    ({"class": "x:Y", "parallelism.hint": 0}, r"entry 0: \"parallelism.hint\""),
    ({"class": "x:Y", "whitelist": ["("]}, r"entry 0: \"whitelist\" pattern '\(' is not a regular expression"),
    ({"class": "x:Y", "max.retain.metric.tuples": "many"}, r"entry 0: \"max.retain.metric.tuples\""),
    ({"class": "x:Y", "colour": 1}, r"entry 0: unknown field"),
    ("x:Y", r"entry 0 must be a map"),
    ({"class": "x:Y", "expandMapType": "false"}, r"entry 0: \"expandMapType\" must be true or false, got 'false'"),
    ({"class": "org.apache.storm.metrics2.reporters.JmxStormReporter"},
     r"entry 0: \"class\" 'org.apache.storm.metrics2.reporters.JmxStormReporter' is a Java class"),
])
def test_bad_consumer_entries_are_refused_at_submit_naming_the_key_entry_and_field(entry, message):
    _, topo = _topology(CountingBolt())
    conf = Config()
    conf["topology.metrics.consumer.register"] = [entry]
    with LocalCluster() as cluster:
        with pytest.raises(InvalidTopologyException, match="topology.metrics.consumer.register " + message):
            cluster.submit_topology("bad", conf, topo)


def test_same_consumer_class_twice_gets_a_numbered_component():
    from squall.engine.plan import make_plan
    from squall._config import topology_conf
    _, topo = _topology(CountingBolt())
    conf = Config()
    conf.set_num_workers(1)
    conf.register_metrics_consumer(LoggingMetricsConsumer)
    conf.register_metrics_consumer("squall.metric:LoggingMetricsConsumer", parallelism_hint=3)
    plan = make_plan("t", "t-1", topo, topology_conf({}, conf), dict(conf))
    first = "__metrics_squall.metric._logging:LoggingMetricsConsumer"
    second = "__metrics_squall.metric:LoggingMetricsConsumer"
    assert first in plan.component_tasks and len(plan.component_tasks[second]) == 3
    conf.register_metrics_consumer(LoggingMetricsConsumer)
    plan = make_plan("t", "t-1", topo, topology_conf({}, conf), dict(conf))
    assert f"{first}#2" in plan.component_tasks
    # every component's __metrics, shuffled, feeds every consumer; no consumer without a register
    inputs = plan.topology.components[first].inputs
    assert {(g.component_id, g.stream_id) for g in inputs} == {("myspout", "__metrics"), ("mybolt", "__metrics")}
    bare = make_plan("t", "t-1", topo, topology_conf({}, {"topology.workers": 1}), {})
    assert set(bare.topology.components) == {"myspout", "mybolt"}
    assert "__metrics" not in bare.topology.components["mybolt"].streams


def test_logging_metrics_consumer_writes_storms_line_layout(caplog):
    info = TaskInfo("host1", 6700, "mybolt", 7, 1700000000, 60)
    line = format_line(info, DataPoint("my-custom-metric", 3))
    assert line == "1700000000\t          host1:6700\t  7:mybolt     \tmy-custom-metric       \t3"
    long = format_line(info, DataPoint("a-name-longer-than-twenty-three", {"a": 1}))
    assert long.split("\t")[3] == "a-name-longer-than-twen" and long.endswith("\t{a=1}")
    # values as Java writes them: Storm's log parsers read maps (every built-in is one) so
    assert format_line(info, DataPoint("m", {"s:default": 5, "t": [1.5, None, True]})).endswith(
        "\t{s:default=5, t=[1.5, null, true]}")
    with caplog.at_level(logging.INFO, logger="squall.metric.LoggingMetricsConsumer"):
        LoggingMetricsConsumer().handle_data_points(info, [DataPoint("a", 1), DataPoint("b", 2)])
    assert [r.getMessage() for r in caplog.records] == [format_line(info, DataPoint("a", 1)),
                                                        format_line(info, DataPoint("b", 2))]
    assert caplog.records[0].name == "squall.metric.LoggingMetricsConsumer"


def test_a_consumer_class_that_cannot_be_made_is_named():
    from squall.metric._bolt import MetricsConsumerBolt
    from squall.metric._consumers import ConsumerSpec
    bolt = MetricsConsumerBolt(ConsumerSpec("no_such_module:Consumer"))
    ctx = _context()
    with pytest.raises(RuntimeError, match="fully qualified name no_such_module:Consumer"):
        bolt.prepare({}, ctx, None)


def test_task_info_and_data_points_cross_workers():
    from squall._tuple import Source, Tuple
    from squall.engine.serialize import Serializer
    src = Source("b", "__metrics", 3, Fields(["task-info", "data-points"]))
    ser = Serializer({"topology.fall.back.on.pickle": False}, lambda task, stream: src)
    info = TaskInfo("h", 6700, "b", 3, 100, 5)
    points = [DataPoint("m", {"k": 1}), DataPoint("n", 2.5)]
    target, tup = ser.decode_batch(ser.encode_batch([9, Tuple([info, points], src)]))
    assert target == 9 and tup.values == [info, points]


def test_a_slow_consumer_keeps_the_newest_batches():
    """The bolt's queue holds max.retain.metric.tuples batches and drops the oldest."""
    from squall.metric._bolt import MetricsConsumerBolt
    from squall.metric._consumers import ConsumerSpec
    import threading

    gate = threading.Event()
    seen = []

    class Slow(IMetricsConsumer):
        def handle_data_points(self, task_info, data_points):
            gate.wait(5)
            seen.append(task_info.timestamp)

    class Acks:
        def ack(self, tup):
            pass

    bolt = MetricsConsumerBolt(ConsumerSpec("x:Y", max_retain=2))
    bolt.consumer = Slow()
    bolt._filter = NameFilter([], [])
    from collections import deque
    bolt._queue, bolt._ready, bolt._stopping = deque(maxlen=2), threading.Condition(), False
    bolt.collector = Acks()
    bolt._thread = threading.Thread(target=bolt._handle, daemon=True)
    bolt._thread.start()

    class T:
        def __init__(self, ts):
            self.values = [TaskInfo("h", 1, "c", 1, ts, 5), [DataPoint("m", ts)]]
    bolt.execute(T(0))
    assert wait_until(lambda: not bolt._queue)  # the thread took batch 0 and waits in the consumer
    for ts in (1, 2, 3):
        bolt.execute(T(ts))
    gate.set()
    bolt.cleanup()
    assert seen == [0, 2, 3]


def test_a_spout_reports_its_metrics_and_multi_count_reports_every_key():
    log = SharedLog()

    class Spout(FeederSpout):
        def open(self, conf, context, collector):
            super().open(conf, context, collector)
            self.emits = context.register_metric("opened", MultiCountMetric(), 5)
            self.emits.scope("seen").incr()
            self.emits.scope("zero")

    b = TopologyBuilder()
    b.set_spout("myspout", Spout(Fields("x")))
    b.set_bolt("mybolt", CountingBolt()).shuffle_grouping("myspout")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("spoutm", _conf(log), b.create_topology())
        assert _advance_until(cluster, lambda: len(sums(log, "myspout", "opened")) >= 2)
    values = sums(log, "myspout", "opened")
    assert values[:2] == [{"seen": 1, "zero": 0}, {"seen": 0, "zero": 0}]


def test_builtin_metrics_are_per_bucket_differences_of_the_cumulative_statistics():
    from squall.metric._builtin import BuiltinMetrics
    snap = {("acked", "myspout", "default"): 20, ("executed", "myspout", "default"): 40,
            ("emitted", "", "default"): 5, ("execute_latency", "myspout", "default"): 30.0,
            ("execute_latency#n", "myspout", "default"): 2}
    bm = BuiltinMetrics(lambda: dict(snap))
    first = {p.name: p.value for p in bm.data_points()}
    assert first == {"__ack-count": {"myspout:default": 20}, "__execute-count": {"myspout:default": 40},
                     "__emit-count": {"default": 5}, "__execute-latency": {"myspout:default": 15.0}}
    snap[("acked", "myspout", "default")] = 25
    snap[("execute_latency", "myspout", "default")] = 60.0
    snap[("execute_latency#n", "myspout", "default")] = 3
    second = {p.name: p.value for p in bm.data_points()}
    assert second == {"__ack-count": {"myspout:default": 5}, "__execute-count": {"myspout:default": 0},
                      "__emit-count": {"default": 0}, "__execute-latency": {"myspout:default": 30.0}}
    third = {p.name: p.value for p in bm.data_points()}
    assert third["__execute-latency"] == {"myspout:default": 0.0}  # no sample this bucket: Storm's 0.0


class Broken(CountMetric):
    def get_value_and_reset(self):
        raise ZeroDivisionError("no")


class RegistersBroken(Bolt):
    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        context.register_metric("broken", Broken(), 5)


def test_a_metric_that_raises_is_named_in_the_error():
    _, topo = _topology(RegistersBroken())
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("broken", _conf(SharedLog()), topo)

        def errors():
            return [e["error"] for e in cluster.get_topology_info("broken")["errors"]]
        assert _advance_until(cluster, lambda: any("'broken'" in e for e in errors()), limit=4)
        assert any("metric 'broken' of component [mybolt]" in e and "ZeroDivisionError" in e for e in errors())


class AckEveryOther(Bolt):
    """Storm's ``ack-every-other``: acks its 1st, 3rd, ... input and never the others."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.n = 0

    def execute(self, tup):
        self.n += 1
        if self.n % 2:
            self.collector.ack(tup)


def builtin(log, component, name, key):
    """The sum over buckets and tasks of a built-in map metric's ``key``."""
    return sum(v.get(key, 0) for v in sums(log, component, name))


def test_builtin_metrics_reach_the_consumer():
    """metrics_test.clj "test-builtin-metrics-1" and "-2" at sample rate 1.0: the spout's acks,
    emits and transfers by stream, the bolt's acks and executes by source:stream, and a tuple
    never acked is the spout's __fail-count after the message timeout."""
    log = SharedLog()
    feeder, topo = _topology(AckEveryOther())
    conf = _conf(log, **{"topology.stats.sample.rate": 1.0, "topology.builtin.metrics.bucket.size.secs": 5,
                         "topology.message.timeout.secs": 10})
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("builtins", conf, topo)
        feeder.feed(["a"], "m1")
        feeder.feed(["b"], "m2")
        assert wait_until(lambda: cluster.get_topology_info("builtins")["components"]["mybolt"]["executed"] == 2)
        assert _advance_until(cluster, lambda: builtin(log, "myspout", "__ack-count", "default") == 1)
        assert builtin(log, "myspout", "__emit-count", "default") == 2
        assert builtin(log, "myspout", "__transfer-count", "default") == 2
        assert _advance_until(cluster, lambda: builtin(log, "mybolt", "__execute-count", "myspout:default") == 2)
        assert builtin(log, "mybolt", "__ack-count", "myspout:default") == 1
        assert "myspout:default" in sums(log, "mybolt", "__execute-latency")[0]
        assert _advance_until(cluster, lambda: builtin(log, "myspout", "__fail-count", "default") == 1)
        assert builtin(log, "myspout", "__ack-count", "default") == 1
    assert all(info.update_interval_secs == 5 for info, points in batches(log)
               if any(p.name.startswith("__") for p in points))


def test_no_consumer_no_builtins_and_no_metric_timer():
    """Without a consumer, an executor gets no metric timer at all (nothing is read or sent)."""
    from squall.metric._collect import metric_timers

    class Ex:
        contexts = {1: _context()}
        collectors = {1: type("C", (), {"routers": {}})()}
        sampled = {1: object()}
        conf = {}
    assert metric_timers(Ex()) == []


def test_register_metric_takes_bucket_secs_by_name_as_api_md_says():
    import inspect

    from squall._context import TopologyContext
    assert list(inspect.signature(TopologyContext.register_metric).parameters) == ["self", "name", "metric",
                                                                                   "bucket_secs"]


def test_storms_logging_metrics_consumer_is_squalls_twin():
    """The class Storm's docs and storm.yaml examples name passed the submit's check, and then
    every worker failed to make it: the topology ran nothing."""
    from squall.metric._consumers import consumer_specs
    for name in ("org.apache.storm.metric.LoggingMetricsConsumer", "org.apache.storm.metrics.LoggingMetricsConsumer"):
        [spec] = consumer_specs({"topology.metrics.consumer.register": [{"class": name}]})
        assert spec.class_name == "squall.metric:LoggingMetricsConsumer"


class TicksToo(CountingBolt):
    def execute(self, tup):
        if not tup.source_stream == "__tick":
            super().execute(tup)
        else:
            self.collector.ack(tup)


def test_a_topology_wide_tick_reaches_no_system_bolt():
    """Storm's setupTicks gives no ticks to system components: the metrics consumer bolt took a
    tick for a batch of data points and raised, an error in the topology every tick."""
    log = SharedLog()
    feeder, topo = _topology(TicksToo())
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("ticks", _conf(log, **{"topology.tick.tuple.freq.secs": 1}), topo)
        feeder.feed([1])
        assert wait_until(lambda: cluster.get_topology_info("ticks")["components"]["mybolt"]["executed"] >= 1)
        assert _advance_until(cluster, lambda: sum(sums(log, "mybolt", "my-custom-metric")) == 1)
        assert cluster.get_topology_info("ticks")["errors"] == []


class StuckConsumer(IMetricsConsumer):
    """Its writes never return (a remote endpoint that does not answer) until ``release``."""

    release = None

    def prepare(self, conf, registration_argument, context, error_reporter):
        self.log = registration_argument

    def handle_data_points(self, task_info, data_points):
        self.log.append("handling")
        StuckConsumer.release.wait(30)

    def cleanup(self):
        self.log.append("consumer cleanup")


class CleansUp(Bolt):
    def __init__(self, log):
        self.log = log

    def execute(self, tup):
        self.collector.ack(tup)

    def cleanup(self):
        self.log.append("bolt cleanup")


def test_a_stuck_consumer_does_not_keep_its_worker_from_cleaning_up():
    """Each consumer task waited 5 s for its stuck thread, on the loop it shares: two of them
    took the loop's whole stop budget, and the bolts after them were never cleaned up."""
    import threading
    StuckConsumer.release = threading.Event()
    log = SharedLog()
    feeder = FeederSpout(Fields("x"))
    b = TopologyBuilder()
    b.set_spout("spout", feeder)
    b.set_bolt("sink", CleansUp(log)).shuffle_grouping("spout")
    conf = Config()
    conf["topology.builtin.metrics.bucket.size.secs"] = 1
    conf.register_metrics_consumer(StuckConsumer, argument=log, parallelism_hint=2)
    try:
        with LocalCluster() as cluster:
            cluster.submit_topology("stuck", conf, b.create_topology())
            feeder.feed([1])
            assert wait_until(lambda: log.items().count("handling") == 2, 20)
            cluster.kill_topology("stuck", wait_secs=0)
            assert log.items().count("consumer cleanup") == 2 and "bolt cleanup" in log.items(), log.items()
    finally:
        StuckConsumer.release.set()
