"""Trident windowing (`Stream.window`, `tumbling_window`, `sliding_window`) on LocalCluster.

Every window's aggregate (its first and last tuple number and its size) goes, by
``group_by(first, last)``, into a `TransactionalMap` summing the sizes: a window whose result was
emitted in two batches would be stored twice its size, one lost would be missing, so comparing the
stored map whole with the windows the input makes counts every tuple. The runs fail batches on the
way: a `FailedException` in an operation before the window (the batch fails before the window
took it), in the window's aggregator (the window goes back to what its store holds), and in the
map state's commit after the window emitted (the batch is replayed after the window took it, and
must not be added twice, and its results must come out again). Duration windows run on the
cluster's simulated clock."""

from __future__ import annotations

import itertools

import pytest

from squall import Config, Duration, Fields, LocalCluster
from squall.engine.clock import SimulatedClock
from squall.testing._registry import SharedLog
from squall.trident import (
    Count,
    FeederBatchSpout,
    InMemoryWindowsStoreFactory,
    KeyValueWindowsStoreFactory,
    SlidingCountWindow,
    SlidingDurationWindow,
    Sum,
    TridentTopology,
    TumblingCountWindow,
    TumblingDurationWindow,
)

from ..state.test_task_ids import LayoutTask
from .exactly_once import Faults, FlakyMapState, Store, Watched, plain, replays
from .windowing_ops import FlakyPass, Span

N = 100  # tuples numbered 0..99
BATCH = 7
_names = itertools.count()


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster() as c:
        yield c


def run(cluster, window, plan, batches, factory=None, clock_steps=None):
    """``window(stream, factory, aggregator)`` over tuples fed in ``batches`` (lists of
    numbers), the windows summed into a `TransactionalMap`; ``clock_steps[i]`` seconds of the
    cluster's clock pass before batch ``i``. Returns the stored {(first, last): size}, the
    faults and the spout's replays."""
    n = next(_names)
    faults = Faults(f"window-{n}", plan)
    store = Store(f"window-{n}")
    attempts = SharedLog()
    feeder = FeederBatchSpout(["i"])
    topo = TridentTopology()
    stream = topo.new_stream(f"nums{n}", Watched(feeder, attempts)).each(Fields("i"), FlakyPass(faults))
    windowed = window(stream, factory or InMemoryWindowsStoreFactory(), Span(faults))
    windowed.group_by(Fields("first", "last")).persistent_aggregate(
        FlakyMapState("transactional", store, faults, attempts), Fields("n"), Sum(), Fields("total"))
    conf = Config()
    conf["topology.message.timeout.secs"] = 10
    name = f"windows-{n}"
    cluster.submit_topology(name, conf, topo.build())
    try:
        for i, batch in enumerate(batches):
            if clock_steps:
                cluster.advance_cluster_time(clock_steps[i])
            feeder.feed([[v] for v in batch])
    finally:
        cluster.kill_topology(name, wait_secs=0)
    stored = {k: plain("transactional", v) for k, v in store.items().items()}
    return stored, faults, replays(attempts)


def fed(n: int = N, size: int = BATCH) -> list[list[int]]:
    return [list(range(i, min(i + size, n))) for i in range(0, n, size)]


PLAN = {"before": [23], "agg": [3], "commit": [2]}


def check_faults(faults: Faults, seen) -> None:
    assert faults.fired() == faults.planned()  # each induced failure happened
    assert seen.extra_attempts >= 3, seen  # one failed attempt per induced failure


def test_tumbling_count_windows_count_every_tuple_once_under_failed_batches(cluster):
    def window(stream, factory, agg):
        return stream.tumbling_window(10, factory, Fields("i"), agg, Fields("first", "last", "n"))

    stored, faults, seen = run(cluster, window, PLAN, fed())
    assert stored == {(k, k + 9): 10 for k in range(0, N, 10)}
    check_faults(faults, seen)
    print(f"tumbling 10: {N} tuples, {len(stored)} windows of {sum(stored.values())} tuples; "
          f"{seen.replayed_batches} batches replayed")


def test_sliding_count_windows_under_failed_batches(cluster):
    def window(stream, factory, agg):
        return stream.sliding_window(10, 5, factory, Fields("i"), agg, Fields("first", "last", "n"))

    stored, faults, seen = run(cluster, window, PLAN, fed())
    # every 5 tuples, the last 10 (the first window holds the first 5)
    expected = {(0, 4): 5, **{(k - 9, k): 10 for k in range(9, N, 5)}}
    assert stored == expected
    assert sum(stored.values()) == 2 * N - 5  # each tuple in two windows, but the last 5 in one
    check_faults(faults, seen)


def test_window_config_form_and_a_combiner(cluster):
    """``window(config, store_factory, ...)`` with `Count`, the windows' sizes summed."""
    n = next(_names)
    faults = Faults(f"window-{n}", {"commit": [1]})
    store = Store(f"window-{n}")
    attempts = SharedLog()
    feeder = FeederBatchSpout(["i"])
    topo = TridentTopology()
    topo.new_stream(f"nums{n}", Watched(feeder, attempts)) \
        .window(TumblingCountWindow.of(4), InMemoryWindowsStoreFactory(), Fields("i"), Count(), Fields("n")) \
        .group_by(Fields("n")) \
        .persistent_aggregate(FlakyMapState("transactional", store, faults, attempts), Count(), Fields("windows"))
    name = f"windows-{n}"
    cluster.submit_topology(name, Config(), topo.build())
    try:
        for batch in fed(22, 5):
            feeder.feed([[v] for v in batch])
    finally:
        cluster.kill_topology(name, wait_secs=0)
    stored = {k: plain("transactional", v) for k, v in store.items().items()}
    assert stored == {(4,): 5}  # five windows of 4 tuples; the last 2 tuples wait for a window
    assert faults.fired() == faults.planned()


def duration_run(cluster, config, steps):
    def window(stream, factory, agg):
        return stream.window(config, factory, Fields("i"), agg, Fields("first", "last", "n"))

    batches = [list(range(i * 5, i * 5 + 5)) for i in range(len(steps) - 2)] + [[], []]
    return run(cluster, window, {"commit": [2]}, batches, clock_steps=steps)


def test_tumbling_duration_windows_on_the_cluster_clock():
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        # batches of 5 at t0, t0+1, t0+2, t0+3, t0+4, then two empty ones at t0+6, t0+8; the
        # window's boundaries every 2 s from its first batch: t0+2, t0+4, t0+6, t0+8
        stored, faults, _ = duration_run(cluster, TumblingDurationWindow.of(Duration.seconds(2)),
                                         [0, 1, 1, 1, 1, 2, 2])
    # a batch that finishes at a boundary follows it: (t0, t0+2] holds t0 and t0+1's
    assert stored == {(0, 9): 10, (10, 19): 10, (20, 24): 5}
    assert sum(stored.values()) == 25
    assert faults.fired() == faults.planned()


def test_sliding_duration_windows_on_the_cluster_clock():
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        stored, faults, _ = duration_run(cluster, SlidingDurationWindow.of(Duration.seconds(4), Duration.seconds(2)),
                                         [0, 1, 1, 1, 1, 2, 2])
    # every 2 s, the last 4 s, (end - 4 s, end]: t0+2 holds t0 and t0+1's batches (the first
    # window holds all before it), t0+4 those of t0+1..t0+3, t0+6 of t0+2..t0+4, t0+8 of t0+4
    assert stored == {(0, 9): 10, (5, 19): 15, (10, 24): 15, (20, 24): 5}
    assert faults.fired() == faults.planned()


def test_a_key_value_store_keeps_the_windows_in_the_state_provider(cluster):
    """`KeyValueWindowsStoreFactory` (LocalCluster's state provider: the cluster's memory)."""
    def window(stream, factory, agg):
        return stream.tumbling_window(10, factory, Fields("i"), agg, Fields("first", "last", "n"))

    stored, faults, seen = run(cluster, window, PLAN, fed(), factory=KeyValueWindowsStoreFactory())
    assert stored == {(k, k + 9): 10 for k in range(0, N, 10)}
    check_faults(faults, seen)


# --- the builder -------------------------------------------------------------------------------

def test_the_stream_after_a_window_is_its_function_fields():
    s = TridentTopology().new_stream("s", FeederBatchSpout(["a", "b"]))
    w = s.tumbling_window(3, InMemoryWindowsStoreFactory(), Fields("a"), Count(), Fields("n"))
    assert w.get_output_fields().to_list() == ["n"]
    w = s.window(SlidingCountWindow.of(3, 1), Fields("a", "b"), Count(), Fields("n"))
    assert w.get_output_fields().to_list() == ["n"]


def test_bad_windows_are_refused_where_they_are_written():
    s = TridentTopology().new_stream("s", FeederBatchSpout(["a"]))
    f = InMemoryWindowsStoreFactory()
    with pytest.raises(ValueError, match=r"sliding_window: SlidingCountWindow\(3, 5\): the sliding length 5 tuples is "
                                         r"longer than the window length 3"):
        s.sliding_window(3, 5, f, Fields("a"), Count(), Fields("n"))
    with pytest.raises(ValueError, match=r"tumbling_window: .*window length must be a positive"):
        s.tumbling_window(0, f, Fields("a"), Count(), Fields("n"))
    with pytest.raises(ValueError, match=r"tumbling_window: field 'x' is not in the stream's fields \['a'\]"):
        s.tumbling_window(3, f, Fields("x"), Count(), Fields("n"))
    with pytest.raises(ValueError, match=r"window: 'x' is not a window config"):
        s.window("x", Fields("a"), Count(), Fields("n"))
    with pytest.raises(ValueError, match=r"window: object is not a WindowsStoreFactory"):
        s.window(TumblingCountWindow.of(2), object(), Fields("a"), Count(), Fields("n"))
    with pytest.raises(ValueError, match=r"TumblingDurationWindow.of: the window length must be a Duration"):
        s.tumbling_window(2.5, f, Fields("a"), Count(), Fields("n"))


def test_spark_engine_runs_a_window_as_the_tasks_it_has_here():
    """Spark's compiler gives a window's bolt (on the driver) its parallelism and the route of its
    input: the key's positions after a partition_by (tests/trident_spark/test_windowing.py runs it)."""
    pytest.importorskip("pyarrow")
    from squall.trident import FixedBatchSpout
    from squall.trident.spark.compiler import compile_topology
    from squall.trident.spark.tasks import TaskRoute

    topo = TridentTopology()
    topo.new_stream("s", FixedBatchSpout(Fields("a", "b"), 2, [1, 2], [2, 3])).partition_by(Fields("b")) \
        .tumbling_window(3, InMemoryWindowsStoreFactory(), Fields("a"), Count(), Fields("n")).parallelism_hint(2)
    [bolt] = compile_topology(topo).bolts
    assert bolt.on_driver and bolt.driver_tasks == 2
    assert [route for _, route in bolt.routes] == [TaskRoute("key", (1,))]


def test_a_key_value_window_store_with_another_task_count_is_refused():
    """The store is the task index's (`<component>-<index>-<name>`): resubmitted with 1 task
    instead of 2, the tuples index 1 held never reached a window (LocalCluster, 20 records in
    tumbling windows of 4: record 9 in no window); with 3, a window's keys split. Its layout is
    recorded with the master as a stateful bolt's, so another count is refused, naming it."""
    import msgpack

    from squall._transactional import MemoryBackend
    from squall.state import StateError

    backend = MemoryBackend()
    conf = {"topology.name": "tw"}
    factory = KeyValueWindowsStoreFactory()
    for i in range(2):
        factory.create(conf, LayoutTask(backend, 2, i, component="b-0"), "window-w0").put("k", i)
    assert backend.list("tw", "_squall_task/b-0/") == ["_squall_task/b-0/2/0", "_squall_task/b-0/2/1"]
    for tasks in (1, 3):
        with pytest.raises(StateError, match=r"topology 'tw' kept the states of component \[b-0\] in 2 tasks .* "
                                             rf"now has {tasks} task.*parallelism_hint\(2\)"):
            factory.create(conf, LayoutTask(backend, tasks, 0, component="b-0"), "window-w0")
    # the same count goes on, each index with the store it was given: <component>-<index>-<name>
    factory.create(conf, LayoutTask(backend, 2, 1, component="b-0"), "window-w0")
    assert msgpack.unpackb(backend.get("tw", "_squall_task/b-0/2/1")) == "b-0-1"


def test_only_a_bolt_whose_window_store_outlives_it_is_held_to_its_task_count():
    """The master holds a component to an earlier task count only where it keeps states by task
    (`keeps_task_states`): a Trident bolt with a key-value window store does, one with an
    in-memory store keeps nothing across submissions, nor does the spout."""
    from squall.state._names import keeps_task_states
    from squall.trident import KeyValueWindowsStoreFactory

    for factory, expected in ((KeyValueWindowsStoreFactory(), True), (InMemoryWindowsStoreFactory(), False)):
        topo = TridentTopology()
        topo.new_stream("s", FeederBatchSpout(["a"])).tumbling_window(3, factory, Fields("a"), Count(), Fields("n"))
        components = topo.build().components
        assert {cid: keeps_task_states(c.obj) for cid, c in components.items()} == {
            "$mastercoord-bg0": False, "$spoutcoord-spout-s": False, "spout-s": False, "b-0": expected}
