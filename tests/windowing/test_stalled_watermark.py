"""An event-time window whose watermark an input stream holds back (silent, or behind the
others) warns, naming that stream, once the watermark has not moved for a message timeout
though newer tuples came; the tuples it holds meanwhile do not time out, and each is in its
windows once the stream delivers. A pause of every stream is no cause for a warning."""

from __future__ import annotations

import logging

import pytest

from squall import Config, Duration, Fields, LocalCluster, TopologyBuilder
from squall._tuple import Source, Tuple
from squall.testing import SimulatedClock
from squall.windowing.executor import WindowedBoltExecutor

from ..conftest import wait_until
from .test_core import _Ctx, _Nothing, _ResetRecorder, _SettableClock, _Timers
from .test_late_in_timeout import RunningSpout
from .test_no_tuple_lost_topology import Parse
from .test_topology import RecordingWindowBolt

TIMEOUT_SECS = 30


def _stalled(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "the watermark has not moved" in r.getMessage()]


@pytest.mark.parametrize("quiet_first, through", [(None, None), (("q0", 2500), None), (("q0", 2500), "parse")],
                         ids=["silent stream", "stream behind", "stream behind, through a bolt"])
def test_a_watermark_held_back_by_one_input_stream_is_reported_naming_it(caplog, quiet_first, through):
    """Two spouts feed an event-time window; "events" sends on, "quiet" sends nothing (or one
    old record). The watermark waits on "quiet": before, the window held the events without a
    word (kept from timing out, they no longer even failed). Now a warning names [quiet:default]
    after a message timeout, once, and the events are still held, none failed; when "quiet"
    delivers, the window fires with every record of it. Then every stream pauses: no warning.
    ``through``: "quiet" reaches the window through a shuffled bolt of two tasks; the warning
    names the spout task behind it (its tuples' roots name it: `squall.engine.origins`)."""
    caplog.set_level(logging.WARNING, logger="squall.windowing")
    events, quiet = RunningSpout(), RunningSpout()
    bolt = RecordingWindowBolt().with_tumbling_window(Duration.seconds(10)).with_timestamp_field("ts")
    b = TopologyBuilder()
    b.set_spout("events", events)
    b.set_spout("quiet", quiet)
    if through:
        b.set_bolt(through, Parse(), 2).shuffle_grouping("quiet")
    b.set_bolt("window", bolt).global_grouping("events").global_grouping(through or "quiet")
    conf = Config()
    conf.set_message_timeout_secs(TIMEOUT_SECS)
    first = [(f"r{i}", 1000 * (i + 1)) for i in range(5)]  # event times 1 .. 5 s
    # through the bolt, "quiet" sends its old record twice: once through each of the bolt's tasks
    # (its shuffle is round-robin, all local), each of which the window waits for, as for any
    # stream's tasks, before it follows the pairs (bolt task, spout task)
    olds = [quiet_first, (quiet_first[0] + "b", quiet_first[1])] if through else [quiet_first] if quiet_first else []
    sent = [r for r, _ts in first] + [r for r, _ts in olds]

    def executed():
        return cluster.get_topology_info("stall")["components"]["window"]["executed"]

    with LocalCluster(clock=SimulatedClock(1_000_000)) as cluster:
        cluster.submit_topology("stall", conf, b.create_topology())
        assert events.running.wait(30) and quiet.running.wait(30)
        for r in first:
            events.queue.put(r)
        for old in olds:
            quiet.queue.put(old)
        assert wait_until(lambda: executed() == len(sent))
        for second in range(1, 41):
            if second == 10:  # a newer event: the others wait on "quiet" though time goes on
                events.queue.put(("r5", 12_000))
                sent.append("r5")
                assert wait_until(lambda: executed() == len(sent))
            cluster.advance_cluster_time(1)
        warned = _stalled(caplog)
        windows_before = list(bolt.windows())
        quiet.queue.put(("q1", 30_000))  # the watermark moves to 12 s: the window to 10 s fires
        sent.append("q1")
        assert wait_until(lambda: executed() == len(sent))
        cluster.advance_cluster_time(1)
        assert wait_until(lambda: len(bolt.windows()) == 1), bolt.windows()
        cluster.advance_cluster_time(40)  # every stream paused: the window waits quietly
        failed = events.failed.items() + quiet.failed.items()
        windows = bolt.windows()
    assert len(warned) == 1, warned
    assert "Component [window] task" in warned[0]
    if through:
        assert ("the newest timestamp of source tasks [parse:default] task 3 from spout [quiet] task 5, "
                "[parse:default] task 4 from spout [quiet] task 5 is 2500") in warned[0]
    elif quiet_first:
        assert "the newest timestamp of source task [quiet:default] task 3 is 2500" in warned[0]
    else:
        assert "source task [quiet:default] task 3 delivered nothing yet" in warned[0]
    assert "the window holds" in warned[0]
    assert windows_before == [] and failed == []
    assert [sorted(w) for w in windows] == [sorted(["r0", "r1", "r2", "r3", "r4"] + [r for r, _ts in olds])]
    assert _stalled(caplog) == warned  # no warning for the pause


class _TwoInputs(_Ctx):
    def get_this_sources(self):
        return {("events", "default"): None, ("quiet", "default"): None}

    def register_metric(self, name, metric, bucket_secs):
        return metric


def test_a_silent_input_stream_is_reported_when_all_the_input_came_in_a_burst(caplog):
    """All of "events" arrives before the window's first check (a backfill, a file), "quiet"
    sends nothing: the watermark can never move. Before, nothing newer came after the first
    check, so the silence passed for a pause of every stream and the window held the 4 tuples
    for good without a word; now it warns after a message timeout, naming [quiet:default], and
    again each timeout. A pause once every stream delivered still warns of nothing."""
    caplog.set_level(logging.WARNING, logger="squall.windowing")
    bolt = _Nothing().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts")
    ex = WindowedBoltExecutor(bolt)
    clock = _SettableClock()
    ex.prepare({**bolt.get_component_configuration(), "topology.message.timeout.secs": 5}, _TwoInputs(),
               _ResetRecorder())
    loop = _Timers(clock, ex.squall_timers(clock))
    events = Source("events", "default", 1, Fields("v", "ts"))
    for i in range(4):
        ex.execute(Tuple([f"e{i}", 10 * i], events))
    loop.run_until(11.5)
    warned = _stalled(caplog)
    assert len(warned) == 2, warned  # after 5 s and 10 s of silence
    assert "Component [window] task 3" in warned[0] and "source task [quiet:default] task 2 delivered nothing yet" in warned[0]
    assert "the window holds 4 tuples" in warned[0] and "newer tuples came" not in warned[0]
    ex.execute(Tuple(["q0", 5], Source("quiet", "default", 2, Fields("v", "ts"))))  # every stream delivered
    loop.run_until(30)
    assert _stalled(caplog) == warned  # now a pause: no warning
