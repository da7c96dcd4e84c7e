"""No tuple is lost by an event-time windowed bolt on a LocalCluster (issue 33, item 1): two
spout tasks whose event times run apart by more than the lag feed one windowed bolt with a
late-tuple stream; every record sent is in exactly its windows, and acked. The watermark waits
for the slower task (`WatermarkGenerator` keeps it per source task): none is late. Kept per
stream (Storm's, and squall's before), it followed the faster task and 168 of the 1,200 records
came late with nothing failing. Without a late stream, a late tuple is logged, counted in a
metric, and acked.

The test moves the watermark itself (a simulated clock): it feeds a round of records, waits
until the windowed bolt has taken all of them, advances the clock one watermark interval, and
waits for the window the watermark must fire, so what is late is known exactly.
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from squall import (
    BaseWindowedBolt,
    BasicBolt,
    Bolt,
    Config,
    CustomStreamGrouping,
    Duration,
    Fields,
    LocalCluster,
    Spout,
    TopologyBuilder,
)
from squall.testing import AckFailMapTracker, FeederSpout, SimulatedClock, TupleCaptureBolt
from squall.testing._registry import SharedCounter, SharedLog, SharedQueue
from squall.windowing.executor import LATE_TUPLES_METRIC, WindowedBoltExecutor

from ..conftest import wait_until
from ..metric.test_metrics import _advance_until, _conf, sums
from .test_no_tuple_lost import windows_of

LAG = 10_000
T0 = 1_000_000_000  # event times, ms (a multiple of the window sizes)
STEP, PER_ROUND = 100, 200  # each source: 200 records 100 ms apart per round (20 s of event time)
SKEWS = (15_000, 25_000, 12_000)  # how far the slow source's event times run behind, per round


class TwoSourceSpout(Spout):
    """Each task emits what the test puts in its own queue (task index 0 or 1), with the record's
    id as message id; acks and fails are recorded."""

    def __init__(self) -> None:
        self.queues = [SharedQueue(), SharedQueue()]
        self.acked = SharedLog()
        self.failed = SharedLog()

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.queue = self.queues[context.get_this_task_index()]

    def next_tuple(self):
        try:
            rid, ts = self.queue.take()
        except IndexError:
            return
        self.collector.emit([rid, ts], rid)

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id):
        self.failed.append(msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))


class WindowLog(BaseWindowedBolt):
    """Records each window as (end, ids); emits nothing (its inputs are acked as they expire)."""

    def __init__(self) -> None:
        super().__init__()
        self.log = SharedLog()

    def execute(self, window):
        self.log.append((window.get_end_timestamp(), [t.get_value_by_field("id") for t in window.get()]))

    def declare_output_fields(self, declarer):
        pass


class CountingWindowExecutor(WindowedBoltExecutor):
    """The windowed bolt's executor, counting the inputs it took, so the test moves the
    watermark once a round has arrived."""

    def __init__(self, bolt) -> None:
        super().__init__(bolt)
        self.arrived = SharedCounter()

    def execute(self, tup):
        super().execute(tup)
        self.arrived.incr()


def _rounds() -> list[list[tuple[int, str, int]]]:
    """Per round, the records (task index, id, ts): the fast source's first (so they tend to
    arrive first), then the slow one's."""
    rounds = []
    for r, skew in enumerate(SKEWS):
        base = T0 + r * PER_ROUND * STEP
        rounds.append([(0, f"a{r}-{i}", base + i * STEP) for i in range(PER_ROUND)]
                      + [(1, f"b{r}-{i}", base + i * STEP - skew) for i in range(PER_ROUND)])
    return rounds


class Parse(BasicBolt):
    """Passes each record on, as a parsing bolt in front of a window does."""

    def execute(self, tup, collector):
        collector.emit(tup.values)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))


@pytest.mark.parametrize("length, sliding, through", [(5_000, 5_000, None), (10_000, 5_000, None),
                                                      (5_000, 5_000, "parse")],
                         ids=["tumbling", "sliding", "tumbling-behind-a-shuffle-bolt"])
def test_two_spout_tasks_apart_by_more_than_the_lag_every_record_in_its_windows_none_late(length, sliding, through):
    """``through``: the spout's tasks reach the window through a bolt of two tasks, shuffled,
    which mixes both spout tasks' tuples on each of its tasks: the window follows the spout
    tasks its tuples' roots name (`squall.engine.origins`). Followed by the bolt's tasks, the
    watermark followed the faster spout task: 166 of the 1,200 records came late in one run."""
    spout = TwoSourceSpout()
    bolt = WindowLog().with_window(Duration(length), Duration(sliding)).with_timestamp_field("ts") \
        .with_lag(Duration(LAG)).with_late_tuple_stream("late")
    window = CountingWindowExecutor(bolt)
    late = TupleCaptureBolt()
    b = TopologyBuilder()
    b.set_spout("source", spout, 2)
    if through:
        b.set_bolt(through, Parse(), 2).shuffle_grouping("source")
    b.set_bolt("window", window).global_grouping(through or "source")
    b.set_bolt("late", late).global_grouping("window", "late")
    conf = Config()
    conf.set_max_spout_pending(10_000)  # inputs complete only as windows expire them
    rounds = _rounds()
    sent = {rid: ts for rnd in rounds for _t, rid, ts in rnd}
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("apart", conf, b.create_topology())
        fed = 0
        for rnd in rounds:
            for task, rid, ts in rnd:
                spout.queues[task].put((rid, ts))
            fed += len(rnd)
            assert wait_until(lambda: window.arrived.value == fed, 30), (window.arrived.value, fed)
            watermark = max(ts for t, _r, ts in rnd if t == 1) - LAG  # the slow source's newest minus the lag
            last_end = watermark // sliding * sliding  # the last window it fires (each source fills each)
            cluster.advance_cluster_time(1)  # one watermark interval
            assert wait_until(lambda: any(end == last_end for end, _ids in window.bolt.log.items()), 30)
        # the end of the input: records far ahead on each task fire every window (two, so that
        # behind the bolt one passes each of its tasks: its shuffle is round-robin, all local)
        for task in (0, 1):
            for n in (0, 1):
                spout.queues[task].put((f"end{task}-{n}", T0 + 10 * len(rounds) * PER_ROUND * STEP))
        assert wait_until(lambda: window.arrived.value == fed + 4, 30)
        cluster.advance_cluster_time(1)
        assert wait_until(lambda: set(spout.acked.items()) >= set(sent), 60), \
            f"{len(set(sent) - set(spout.acked.items()))} of {len(sent)} records never acked"
        assert spout.failed.items() == []
    late_ids = [values[0].get_value_by_field("id") for _stream, values in late.results().get("window", [])]
    windows = window.bolt.log.items()
    in_windows = Counter((rid, end) for end, ids in windows for rid in ids)
    assert {rid for rid, _end in in_windows} <= set(sent)  # the end records fired no window
    wrong = []
    for rid, ts in sent.items():
        expected = [] if rid in late_ids else windows_of(ts, length, sliding)
        got = sorted(end for (r, end) in in_windows if r == rid)
        if got != expected or any(in_windows[(rid, end)] != 1 for end in got):
            wrong.append((rid, ts, expected, got))
    assert not wrong, f"{len(wrong)} of {len(sent)} records not in exactly their windows nor late: {wrong[:5]}"
    # kept per stream, the watermark followed the fast source: the slow source's records before
    # the watermark of the round before (rounds 2 and 3) came late, 150 + 20 - 2
    assert late_ids == []
    if length == sliding:
        assert sum(len(ids) for _end, ids in windows) + len(late_ids) == len(sent) == 1_200


class ByLane(CustomStreamGrouping):
    """Records whose id starts with "a" go to the first task, the others to the second."""

    def choose_tasks(self, task_id, values):
        return [self.target_tasks[0 if values[0].startswith("a") else 1]]


class HoldingParse(Bolt):
    """Passes each record on, anchored, except that its second task holds what it gets until
    `release` is set (as a parse task in a slow or busy worker lets its queue grow): then it
    passes on what it held, in order, at its next input (which it drops)."""

    def __init__(self) -> None:
        self.release = SharedCounter()

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.slow = context.get_this_task_index() == 1
        self.held = []

    def execute(self, tup):
        if self.slow and not self.release.value:
            self.held.append(tup)
            return
        for t in [*self.held, tup]:
            if t.get_value_by_field("id") != "b-release":
                self.collector.emit(t.values, t)
            self.collector.ack(t)
        self.held = []

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))


class TickingWindowExecutor(CountingWindowExecutor):
    """`CountingWindowExecutor` that also counts its watermark timer's runs."""

    def __init__(self, bolt) -> None:
        super().__init__(bolt)
        self.ticks = SharedCounter()

    def on_timer(self):
        super().on_timer()
        self.ticks.incr()


def test_a_bolt_task_in_front_of_the_window_behind_its_sibling_makes_none_of_its_tuples_late():
    """One spout task's records reach the window through a bolt of two tasks, half through
    each; the second holds its half (its queue grows, as in a slow or busy worker) while the
    first passes the other half on, 20 s of event time. Followed by the spout task alone, the
    watermark ran as far as the first bolt task got, and the held records before it came late
    once released. Followed per bolt task and spout task (each a FIFO channel of the spout
    task's order), it waits for the held half: none late, each record in its window."""
    spout = TwoSourceSpout()
    parse = HoldingParse()
    window = TickingWindowExecutor(WindowLog().with_tumbling_window(Duration(5_000)).with_timestamp_field("ts")
                                   .with_lag(Duration(LAG)).with_late_tuple_stream("late"))
    late = TupleCaptureBolt()
    b = TopologyBuilder()
    b.set_spout("source", spout, 1)
    b.set_bolt("parse", parse, 2).custom_grouping("source", ByLane())
    b.set_bolt("window", window).global_grouping("parse")
    b.set_bolt("late", late).global_grouping("window", "late")
    conf = Config()
    conf.set_max_spout_pending(10_000)
    sent = {f"{'a' if i % 2 == 0 else 'b'}{i}": T0 + i * STEP for i in range(PER_ROUND)}
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("slow-bolt-task", conf, b.create_topology())
        for rid, ts in sent.items():
            spout.queues[0].put((rid, ts))
        assert wait_until(lambda: window.arrived.value == PER_ROUND // 2, 30)  # the first task's half
        ticks = window.ticks.value
        cluster.advance_cluster_time(1)  # a watermark interval, the second task's half held
        assert wait_until(lambda: window.ticks.value > ticks, 30)
        parse.release.incr()
        spout.queues[0].put(("b-release", T0))
        assert wait_until(lambda: window.arrived.value == PER_ROUND, 30)
        end = T0 + 10 * PER_ROUND * STEP
        for rid in ("a-end", "b-end"):  # far ahead through each bolt task: fires every window
            spout.queues[0].put((rid, end))
        assert wait_until(lambda: window.arrived.value == PER_ROUND + 2, 30)
        cluster.advance_cluster_time(1)
        assert wait_until(lambda: set(spout.acked.items()) >= set(sent), 60), \
            f"{len(set(sent) - set(spout.acked.items()))} of {len(sent)} records never acked"
    late_ids = [values[0].get_value_by_field("id") for _stream, values in late.results().get("window", [])]
    assert late_ids == [], f"{len(late_ids)} of {len(sent)} records late: {late_ids[:5]}"
    ends = {rid: [end for end, ids in window.bolt.log.items() for r in ids if r == rid] for rid in sent}
    wrong = [(rid, ts, got) for rid, ts in sent.items() if (got := ends[rid]) != windows_of(ts, 5_000, 5_000)]
    assert not wrong, f"{len(wrong)} of {len(sent)} records not in exactly their window: {wrong[:5]}"
    assert sum(len(ids) for _end, ids in window.bolt.log.items()) == len(sent)  # the end records in none fired


def test_without_a_late_stream_a_late_tuple_is_logged_counted_in_a_metric_and_acked(caplog):
    log = SharedLog()
    feeder = FeederSpout(Fields("id", "ts"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    window = CountingWindowExecutor(WindowLog().with_tumbling_window(Duration(10)).with_timestamp_field("ts"))
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("window", window).global_grouping("feeder")
    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster, caplog.at_level(logging.WARNING, "squall.windowing"):
        cluster.submit_topology("late", _conf(log, **{"topology.builtin.metrics.bucket.size.secs": 5}),
                                b.create_topology())
        for rid, ts in (("a", 101), ("b", 130)):
            feeder.feed([rid, ts], rid)
        assert wait_until(lambda: window.arrived.value == 2)
        cluster.advance_cluster_time(1)  # watermark 130: the windows (100, 110] and (120, 130] fire
        assert wait_until(lambda: window.bolt.log.items() == [(110, ["a"]), (130, ["b"])])
        feeder.feed(["old", 110], "old")  # its window has fired: late
        feeder.feed(["edge", 130], "edge")  # at the watermark, the end of a window that fired: late too
        assert wait_until(lambda: tracker.is_acked("old") and tracker.is_acked("edge"))
        assert _advance_until(cluster, lambda: sum(sums(log, "window", LATE_TUPLES_METRIC)) == 2)
    lines = [r.getMessage() for r in caplog.records if r.name == "squall.windowing" and "late tuple" in r.getMessage()]
    assert len(lines) == 2
    assert "Component [window]" in lines[0] and "component [feeder] stream [default]" in lines[0]
    assert "timestamp 110" in lines[0] and "watermark 130" in lines[0] and LATE_TUPLES_METRIC in lines[0]
    assert window.bolt.log.items() == [(110, ["a"]), (130, ["b"])]  # neither late tuple entered a window
