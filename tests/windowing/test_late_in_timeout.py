"""Windowed bolts on a LocalCluster (simulated clock) fed tuples that arrive late in their message
timeout: held upstream (a slow bolt, a backlog, a worker restart) for most of it, then held by
the window for longer than the timeout. None times out, none is replayed, and every record is in
exactly the windows Storm puts it in, for count and processing-time windows and event-time
windows with a lag, tumbling and sliding, and a stateful windowed bolt's count window."""

from __future__ import annotations

import pytest

from squall import Bolt, Config, Count, Duration, Fields, LocalCluster, TopologyBuilder, is_tick_tuple
from squall.state import BaseStatefulWindowedBolt, StatefulWindowedBoltExecutor
from squall.testing import SimulatedClock
from squall.testing._registry import SharedCounter, SharedFlag, SharedLog
from squall.windowing.executor import WindowedBoltExecutor

from ..conftest import wait_until
from .test_topology import RecordingWindowBolt, ReplayingSpout

TIMEOUT_SECS = 30
"""The message timeout. The spout's pending tuples rotate every timeout from the submit (the
simulated clock stands still until the test moves it), so a tuple emitted 29 s in is timed out
at 60 s; the window's keep-alive ticks come every 5 s from the submit too, at 55 s and 60 s."""
EMIT_AT = 29  # seconds after the submit: the records' spout tuples are timed out at 60 s
RELEASE_AT = 57  # 28 s of their 30 s timeout upstream: they reach the window with 3 s left
FRESH_AT = 90  # two more records, through at once, fill the windows (event time: move the watermark)
END_AT = 111  # past the processing-time windows of the fresh records

DELAYED = [(f"r{i}", 1000 * (i + 1)) for i in range(6)]  # (id, event time ms): 1 s .. 6 s
FRESH = [("r6", 12_000), ("r7", 25_000)]  # event time: watermark 25 s - 5 s lag = 20 s


class RunningSpout(ReplayingSpout):
    """`ReplayingSpout`, telling the test once its loop runs: the loop set its timers (the
    spout's timeouts, the ticks, the window's) at the submit's time, before its first round."""

    def __init__(self) -> None:
        super().__init__()
        self.running = SharedFlag()

    def next_tuple(self):
        self.running.set()
        super().next_tuple()


class HeldUpstream(Bolt):
    """A bolt upstream of the window that holds each input (a slow bolt, a backlog) until the
    test opens its gate, then passes the held ones on (anchored) at its next tick, and later
    ones at once; counts its ticks (one a second of the cluster's clock)."""

    def __init__(self) -> None:
        self.gate = SharedFlag()
        self.ticks = SharedCounter()

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.held = []

    def execute(self, tup):
        if is_tick_tuple(tup):
            self.ticks.incr()
            if self.gate.is_set():
                for held in self.held:
                    self._pass(held)
                self.held = []
        elif self.gate.is_set() and not self.held:
            self._pass(tup)
        else:
            self.held.append(tup)

    def _pass(self, tup):
        self.collector.emit(tup.values, [tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))

    # in a stateful topology, checkpoints pass it at once (Storm's rule), not behind what it holds
    squall_holds_inputs = True


class RecordingStatefulWindowBolt(BaseStatefulWindowedBolt):
    """A stateful windowed bolt (its state checkpointed, its windows not) recording each
    window's ids, as `RecordingWindowBolt.windows` does."""

    def __init__(self) -> None:
        super().__init__()
        self.log = SharedLog()

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        self.log.append([t.values[0] for t in window.get()])

    def windows(self):
        return self.log.items()


class _CountsInputs:
    """Counts the records a windowed bolt's executor takes (not its ticks or checkpoints)."""

    inputs: SharedCounter

    def execute(self, tup):
        if tup.source_component == "slow":
            self.inputs.incr()
        super().execute(tup)  # type: ignore[misc]  # the executor's, after this mixin


class CountingExecutor(_CountsInputs, WindowedBoltExecutor):
    """The windowed bolt's executor, counting its records."""

    def __init__(self, bolt) -> None:
        super().__init__(bolt)
        self.inputs = SharedCounter()


class CountingStatefulExecutor(_CountsInputs, StatefulWindowedBoltExecutor):
    """The stateful windowed bolt's executor (run inside the checkpoint protocol's), counting its records."""

    def __init__(self, bolt) -> None:
        super().__init__(bolt)
        self.inputs = SharedCounter()


EVENT_TIME = {"lag": Duration.seconds(5)}

# the windows Storm puts the records in (ids in arrival order); r0..r5 arrive at 57 s, r6 and r7 at 90 s
KINDS = {
    "count tumbling": (lambda b: b.with_tumbling_window(Count(4)), None,
                       [["r0", "r1", "r2", "r3"], ["r4", "r5", "r6", "r7"]]),
    # its inputs acked once out of their last window and committed
    "stateful count tumbling": (lambda b: b.with_tumbling_window(Count(4)), None,
                                [["r0", "r1", "r2", "r3"], ["r4", "r5", "r6", "r7"]]),
    "count sliding": (lambda b: b.with_window(Count(4), Count(2)), None,
                      [["r0", "r1"], ["r0", "r1", "r2", "r3"], ["r2", "r3", "r4", "r5"], ["r4", "r5", "r6", "r7"]]),
    # windows of 20 s every 10 s from the submit: r0..r5 in those ending 60 s and 70 s, r6 r7 100 s and 110 s
    "processing-time sliding": (lambda b: b.with_window(Duration.seconds(20), Duration.seconds(10)), None,
                                [["r0", "r1", "r2", "r3", "r4", "r5"]] * 2 + [["r6", "r7"]] * 2),
    # windows (end - 10 s, end] to the watermark, 20 s: r7 (25 s) waits for a later one
    "event-time tumbling": (lambda b: b.with_tumbling_window(Duration.seconds(10)), EVENT_TIME,
                            [["r0", "r1", "r2", "r3", "r4", "r5"], ["r6"]]),
    # windows of 10 s every 5 s, ending 5, 10, 15 and 20 s
    "event-time sliding": (lambda b: b.with_window(Duration.seconds(10), Duration.seconds(5)), EVENT_TIME,
                           [["r0", "r1", "r2", "r3", "r4"], ["r0", "r1", "r2", "r3", "r4", "r5"], ["r5", "r6"],
                            ["r6"]]),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_tuples_reaching_a_window_late_in_their_timeout_are_held_without_a_replay(kind):
    """Six records spend 28 s of their 30 s message timeout upstream, then the window holds
    them past it (with two more records, 33 s in all for a count window). Reset only at the
    first keep-alive tick to find them (60 s, as the spout timed them out), every one timed
    out and was replayed into the windows beside itself: counted twice, and six failures in the
    spout's figures with nothing wrong. Reset on arrival, none fails and each record is emitted
    once and is in exactly its windows."""
    shape, event_time, expected = KINDS[kind]
    spout = RunningSpout()
    upstream = HeldUpstream()
    stateful = kind.startswith("stateful")
    bolt = shape(RecordingStatefulWindowBolt() if stateful else RecordingWindowBolt())
    if event_time is not None:
        bolt = bolt.with_timestamp_field("ts").with_lag(event_time["lag"])
    window = (CountingStatefulExecutor if stateful else CountingExecutor)(bolt)
    b = TopologyBuilder()
    b.set_spout("records", spout)
    b.set_bolt("slow", upstream).global_grouping("records").add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
    b.set_bolt("window", window).global_grouping("slow")
    conf = Config()
    conf.set_message_timeout_secs(TIMEOUT_SECS)

    at = [0]  # seconds since the submit

    def advance_to(cluster, second):
        """Move the clock a second at a time, each once the upstream bolt took its tick."""
        while at[0] < second:
            cluster.advance_cluster_time(1)
            at[0] += 1
            assert wait_until(lambda: upstream.ticks.value >= at[0]), (upstream.ticks.value, at[0])

    def executed():
        return window.inputs.value

    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology(kind.replace(" ", "-"), conf, b.create_topology())
        assert spout.running.wait(30)  # before the clock moves: the timers run from the submit
        advance_to(cluster, EMIT_AT)
        for r in DELAYED:
            spout.queue.put(r)
        assert wait_until(lambda: len(spout.emitted.items()) == len(DELAYED))
        advance_to(cluster, RELEASE_AT - 1)
        upstream.gate.set()
        advance_to(cluster, RELEASE_AT)
        assert wait_until(lambda: executed() == len(DELAYED)), executed()
        advance_to(cluster, FRESH_AT)
        for r in FRESH:
            spout.queue.put(r)
        assert wait_until(lambda: executed() >= len(DELAYED) + len(FRESH)), executed()
        advance_to(cluster, END_AT)
        assert wait_until(lambda: len(bolt.windows()) >= len(expected)), bolt.windows()
        failed, emitted, windows, inputs = spout.failed.items(), spout.emitted.items(), bolt.windows(), executed()
    assert failed == []
    assert sorted(emitted) == sorted(r for r, _ts in DELAYED + FRESH)
    assert inputs == len(DELAYED) + len(FRESH)
    assert windows == expected
