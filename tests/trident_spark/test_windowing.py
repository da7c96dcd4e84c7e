"""Trident windows on Spark's engine give the windows they give on squall's engine.

A window's bolt runs on Spark's driver as the tasks it has on squall's engine, each task index
windowing the rows its input grouping routes to it (``squall/trident/spark/tasks.py``). Every
window's aggregate (its first and last tuple number and its size) is recorded with the txid it
came out in, on LocalCluster and on the package's SparkSession, and both are compared with the
windows computed here from the input: tumbling and sliding count windows straight after the
spout (one task) and after a ``partition_by`` at a hint of 2; a query that fails after its window
took a batch, started again from its checkpoint (Spark runs that batch again) and then stopped and
started again over more input, its windows in a `KeyValueWindowsStoreFactory` over the file state
provider, every tuple counted once; tumbling and sliding duration windows on a simulated clock
handed to ``start``."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import Config, Duration, Fields, LocalCluster
from squall._stable_hash import stable_hash
from squall.engine.clock import SimulatedClock
from squall.external.trident_files import FileTridentSpout
from squall.trident import (
    FeederBatchSpout,
    InMemoryWindowsStoreFactory,
    KeyValueWindowsStoreFactory,
    SlidingDurationWindow,
    TridentTopology,
    TumblingDurationWindow,
)
from squall.trident.spark import compile_topology, start
from squall.trident.spout import FixedBatchSpout

from ..conftest import wait_until
from ..trident.windowing_ops import Span
from . import ops
from .conftest import write_lines
from .ops import FailsOnceFactory, RecordFactory, RecordUpdater, line_number

pytestmark = pytest.mark.timeout(300)  # the first test may pay the package's cold SparkSession

N = 100
SPAN = Fields("first", "last", "n")
# (tag, tumbling or sliding, the window's hint; None: straight after the spout, no partition_by)
VARIANTS = [("tumbling-1", "tumbling", None), ("tumbling-2", "tumbling", 2), ("sliding-1", "sliding", None),
            ("sliding-2", "sliding", 2)]


def _window(stream, kind: str, factory):
    if kind == "tumbling":
        return stream.tumbling_window(10, factory, Fields("i"), Span(), SPAN)
    return stream.sliding_window(10, 5, factory, Fields("i"), Span(), SPAN)


def _record(windowed, tag: str, name: str, factory=None) -> None:
    windowed.each(SPAN, ops.Tag(tag), Fields("op")) \
        .global_().partition_persist(factory or RecordFactory(name), Fields("op", "first", "last", "n"), RecordUpdater())


def _count_windows(name: str) -> TridentTopology:
    """The four `VARIANTS` over one spout of 100 numbers in batches of 25."""
    topology = TridentTopology()
    numbers = topology.new_stream("numbers", FixedBatchSpout(Fields("i"), 25, *[[i] for i in range(N)]))
    for tag, kind, hint in VARIANTS:
        source = numbers if hint is None else numbers.partition_by(Fields("i"))
        windowed = _window(source, kind, InMemoryWindowsStoreFactory())
        if hint is not None:
            windowed.parallelism_hint(hint)
        _record(windowed, tag, name)
    return topology


def windows_of(kind: str, tasks: int, batches: list[list[int]], tag: str) -> list[tuple[int, list]]:
    """``(txid, [tag, first, last, n])`` of each window squall's engine makes of ``batches``
    (batch k is txid k + 1), each task of ``tasks`` windowing the numbers a ``partition_by`` sends
    it (the stable hash modulo the tasks), in order: every 10 (tumbling), or every 5 the last 10
    (sliding)."""
    every = 10 if kind == "tumbling" else 5
    seen: list[list[int]] = [[] for _ in range(tasks)]
    out = []
    for txid, batch in enumerate(batches, 1):
        for i in batch:
            mine = seen[stable_hash([i]) % tasks]
            mine.append(i)
            if len(mine) % every == 0:
                window = mine[-10:]
                out.append((txid, [tag, min(window), max(window), len(window)]))
    return out


def _sorted(records) -> list:
    return sorted(records, key=repr)


def test_count_windows_give_on_spark_the_windows_they_give_on_squalls_engine(spark, tmp_path):
    batches = [list(range(k, min(k + 25, N))) for k in range(0, N, 25)]
    expected = _sorted(w for tag, kind, hint in VARIANTS for w in windows_of(kind, hint or 1, batches, tag))
    assert len(expected) == 10 + 9 + 20 + 19, len(expected)  # tasks of 2: 51 and 49 numbers

    cluster = LocalCluster()
    try:
        cluster.submit_topology("windows-local", {}, _count_windows("windows-local").build())
        # LocalCluster goes on with empty batches (they fire no count window); a batch it
        # replayed records its windows again, with the same txid
        assert wait_until(lambda: len(set(map(repr, ops.RECORDS.get("windows-local", [])))) >= len(expected), 90), \
            ops.RECORDS.get("windows-local")
    finally:
        cluster.shutdown()
    local = {repr(r): r for r in ops.RECORDS["windows-local"]}
    assert _sorted(local.values()) == expected

    query = start(_count_windows("windows-spark"), spark, str(tmp_path / "checkpoint"))
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert _sorted(ops.RECORDS["windows-spark"]) == expected  # each once, in the txid it fired in


def test_a_window_restarted_from_the_checkpoint_counts_every_tuple_once(spark, tmp_path):
    """A window of 2 tasks after partition_by, in the file state provider's store: the query
    fails at the state after the window (txid 2: the window took the batch), is started again
    (Spark runs batch 1, txid 2, again: the window adds nothing and emits its windows again),
    then stopped and started over 24 more numbers (the open windows go on)."""
    from pyspark.errors import StreamingQueryException

    from squall.trident.spark.restart import run_restarting

    data, checkpoint = tmp_path / "in", str(tmp_path / "checkpoint")
    data.mkdir()
    conf = {Config.TOPOLOGY_STATE_PROVIDER: "squall.state.file:FileKeyValueStateProvider",
            Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"directory": str(tmp_path / "states")}}
    recorder = FailsOnceFactory(RecordFactory("restart"), str(tmp_path / "failed"), 2)

    def topology() -> TridentTopology:
        t = TridentTopology()
        numbers = t.new_stream("lines", FileTridentSpout(str(data), ["i"], translator=line_number,
                                                         max_batch_records=12))
        windowed = _window(numbers.partition_by(Fields("i")), "tumbling", KeyValueWindowsStoreFactory())
        _record(windowed.parallelism_hint(2), "restart", "restart", recorder)
        return t

    def run(query) -> None:
        query.processAllAvailable()

    def until_it_died(query) -> None:
        query.awaitTermination()
        pytest.fail("the query ended without failing")

    write_lines(data / "n.txt", [str(i) for i in range(36)])  # txid 1, 2, 3: 12 numbers each
    with pytest.raises(StreamingQueryException, match="the state fails at the begin_commit of txid 2"):
        run_restarting(lambda: start(topology(), spark, checkpoint, conf=conf), until_it_died, name="windows")
    assert (tmp_path / "checkpoint" / "offsets" / "1").exists()
    assert not (tmp_path / "checkpoint" / "commits" / "1").exists()
    assert all(t == 1 for t, _ in ops.RECORDS.get("restart", []))  # nothing of txid 2 reached the recorder

    run_restarting(lambda: start(topology(), spark, checkpoint, conf=conf), run, name="windows")
    assert (tmp_path / "checkpoint" / "commits" / "2").exists()
    write_lines(data / "n.txt", [str(i) for i in range(36, 60)])  # txid 4, 5
    run_restarting(lambda: start(topology(), spark, checkpoint, conf=conf), run, name="windows")

    numbers = list(range(60))
    expected = windows_of("tumbling", 2, [numbers[k:k + 12] for k in range(0, 60, 12)], "restart")
    assert any(t == 2 for t, _ in expected)  # txid 2 fired a window, which came out again
    assert _sorted(ops.RECORDS["restart"]) == _sorted(expected)
    assert sum(w[3] for _, w in expected) == 50  # 30 + 20 numbers in windows of 10; 1 + 9 left open


def _duration_windows(spout, name: str) -> TridentTopology:
    topology = TridentTopology()
    numbers = topology.new_stream("numbers", spout)
    for tag, config in (("tumbling", TumblingDurationWindow.of(Duration.seconds(2))),
                        ("sliding", SlidingDurationWindow.of(Duration.seconds(4), Duration.seconds(2)))):
        _record(numbers.window(config, InMemoryWindowsStoreFactory(), Fields("i"), Span(), SPAN), tag, name)
    return topology


STEPS = [0, 1, 1, 1, 1, 2, 2]  # seconds of the clock before each batch of 5 numbers


def _windows(records) -> Counter:
    """How many times each window was recorded (the txids of the two engines differ: LocalCluster
    runs empty batches between the fed ones)."""
    return Counter(tuple(v) for _, v in records)


def test_duration_windows_on_the_clock_handed_to_start_are_squalls_engines(spark, tmp_path):
    batches = [list(range(5 * k, 5 * k + 5)) for k in range(len(STEPS))]

    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        feeder = FeederBatchSpout(["i"])
        cluster.submit_topology("duration-local", Config(), _duration_windows(feeder, "duration-local").build())
        for step, batch in zip(STEPS, batches):
            cluster.advance_cluster_time(step)
            feeder.feed([[i] for i in batch])
        assert wait_until(lambda: len(_windows(ops.RECORDS.get("duration-local", []))) >= 8, 60), \
            ops.RECORDS.get("duration-local")
        cluster.kill_topology("duration-local", wait_secs=0)
    # a batch LocalCluster replayed records its windows again, with the same txid
    local = Counter(v for _, v in {(t, tuple(v)) for t, v in ops.RECORDS["duration-local"]})

    data = tmp_path / "in"
    data.mkdir()
    clock = SimulatedClock(1_000_000)
    spout = FileTridentSpout(str(data), ["i"], translator=line_number, max_batch_records=5)
    query = start(_duration_windows(spout, "duration-spark"), spark, str(tmp_path / "checkpoint"), clock=clock)
    try:
        for step, batch in zip(STEPS, batches):
            clock.advance(step)
            write_lines(data / "n.txt", [str(i) for i in batch])
            query.processAllAvailable()
    finally:
        query.stop()
    # the windows every 2 s from the first batch (t0), each out at the first batch after its end
    # (a batch at a boundary follows it): Spark plans no empty batch, so each test batch is a fed one
    assert _windows(ops.RECORDS["duration-spark"]) == local == Counter({
        ("tumbling", 0, 9, 10): 1, ("tumbling", 10, 19, 10): 1, ("tumbling", 20, 24, 5): 1,
        ("tumbling", 25, 29, 5): 1,
        ("sliding", 0, 9, 10): 1, ("sliding", 5, 19, 15): 1, ("sliding", 10, 24, 15): 1,
        ("sliding", 20, 29, 10): 1})


def test_a_window_of_several_tasks_after_an_identity_partitioning_is_refused_naming_it(tmp_path):
    topology = TridentTopology()
    topology.new_stream("files", FileTridentSpout(str(tmp_path), ["i"], translator=line_number)) \
        .parallelism_hint(2) \
        .tumbling_window(4, InMemoryWindowsStoreFactory(), Fields("i"), Span(), SPAN)
    with pytest.raises(ValueError, match=r"a window \(TumblingCountWindow\(4\): Stream.window/tumbling_window/"
                                         r"sliding_window\) in bolt b-0 of 2 tasks reads stream s\d+ of spout-files "
                                         r"through an identity partitioning .* task i reads what task i of "
                                         r"spout-files emitted\).* no emitting task .* parallelism_hint of 1"):
        compile_topology(topology)



def test_the_driver_routes_rows_to_a_windows_tasks_as_its_grouping_would():
    from squall._grouping import FieldsGrouping
    from squall.trident.coordinator import TransactionAttempt
    from squall.trident.processors import batch_partition
    from squall.trident.spark.tasks import TaskRoute, route

    rows = [[i, f"w{i % 7}", {"k": i}] for i in range(40)]
    grouping = FieldsGrouping(Fields("i", "w", "d"), Fields("w"))
    grouping.prepare(None, None, [11, 12, 13])  # the task ids of a bolt of 3 tasks; index = place
    routes = {"key": TaskRoute.of("fields", (1,)), "global": TaskRoute.of("global"),
              "batch": TaskRoute.of("batch_global"), "shuffle": TaskRoute.of("shuffle"), "all": TaskRoute.of("all")}
    split = route(routes, dict.fromkeys(routes, rows), list(routes), 5, 3)
    # partition_by: where squall's FieldsGrouping sends each row
    assert [[r[0] for r in t["key"]] for t in split] == \
        [[r[0] for r in rows if grouping.choose_tasks(0, r) == [11 + i]] for i in range(3)]
    assert split[0]["global"] == rows and "global" not in split[1] and "global" not in split[2]
    assert split[batch_partition("batch_global", TransactionAttempt(5, 0), 3)]["batch"] == rows
    assert all(t["all"] == rows for t in split)
    # shuffle: every row once, spread, and the same spread however the rows come (a re-run batch)
    shuffled = [[r[0] for r in t["shuffle"]] for t in split]
    assert sorted(i for s in shuffled for i in s) == list(range(40)) and all(len(s) > 5 for s in shuffled)
    again = route(routes, {"shuffle": rows[::-1]}, ["shuffle"], 5, 3)
    assert [sorted(r[0] for r in t["shuffle"]) for t in again] == [sorted(s) for s in shuffled]
    assert TaskRoute.of("identity") is None and TaskRoute.of("custom") is None
