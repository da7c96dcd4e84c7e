"""Message timeouts (Storm's test-timeout, test-reset-timeout) with T = 1 s.

The spout's pending map has 2 buckets rotated every T, so an incomplete tuple fails between T
and 2T after its emission: never before T, and surely by 2T (plus scheduling slack).
"""

from __future__ import annotations

import time

import pytest

from squall import Config, Fields, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout

from ..conftest import wait_until
from .components import (
    AckEveryOtherBolt,
    DropFirstAttemptBolt,
    NeverAckBolt,
    Recorder,
    ReplayingSpout,
    ResetTimeoutBasicBolt,
    ResetTimeoutBolt,
    SlowAckBolt,
)
from .conftest import component_stat, wait_idle

T = 1.0


def feeder_with_tracker():
    feeder = FeederSpout(Fields("field1"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    return feeder, tracker


def conf_with_timeout(secs: float = T) -> Config:
    """A message timeout of ``secs``, on two workers (the bolt's acks cross processes on the
    process and Spark hosts)."""
    conf = Config()
    conf.set_message_timeout_secs(secs)
    conf.set_num_workers(2)
    return conf


@pytest.mark.hosts
def test_an_unacked_tuple_fails_after_the_message_timeout_and_not_before(cluster):
    """Storm's test-timeout: a bolt acks every other tuple; 1 and 3 are acked at once, 2 is
    neither acked nor failed before T, then fails (by 2T)."""
    feeder, tracker = feeder_with_tracker()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", AckEveryOtherBolt()).global_grouping("1")
    cluster.submit_topology("timeout-tester", conf_with_timeout(), builder.create_topology())

    fed_at = time.monotonic()  # before the emission, so fed_at + T is a lower bound of the fail
    feeder.feed(["a"], 1)
    feeder.feed(["b"], 2)
    feeder.feed(["c"], 3)

    assert wait_until(lambda: tracker.is_acked(1) and tracker.is_acked(3))
    assert not wait_until(lambda: tracker.is_failed(2), 0.9 * T - (time.monotonic() - fed_at))
    assert wait_until(lambda: tracker.is_failed(2), 10 * T)
    assert time.monotonic() - fed_at >= 0.9 * T
    assert not tracker.is_acked(2)
    assert not tracker.is_failed(1) and not tracker.is_failed(3)
    assert wait_until(lambda: component_stat(cluster, "timeout-tester", "1", "failed") == 1)


@pytest.mark.hosts
def test_a_tuple_that_times_out_fails_on_its_spout_task_and_its_replay_is_acked(cluster):
    """At-least-once through a timeout: the bolt drops every first attempt, so each tuple
    times out, the spout task that emitted it gets the fail and replays it, and the replay is
    acked. Each id fails once and is acked once."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", ReplayingSpout(3, recorder), 2)
    builder.set_bolt("bolt", DropFirstAttemptBolt(), 2).shuffle_grouping("spout")
    cluster.submit_topology("timeout-replay", conf_with_timeout(), builder.create_topology())

    assert wait_until(lambda: recorder.count("ack") == 6, 20 * T)
    acked, failed = recorder.events("ack"), recorder.events("fail")
    assert sorted(m for _k, _t, m in failed) == sorted(m for _k, _t, m in acked)
    assert len({m for _k, _t, m in acked}) == 6
    assert all(m.startswith(f"{task}-") for _k, task, m in acked + failed)


@pytest.mark.hosts("process")
def test_reset_timeout_keeps_a_tuple_alive_past_the_message_timeout(cluster):
    """Storm's test-reset-timeout: a bolt (on its own thread, since it blocks) holds the tuple
    for 2.5T, calling reset_timeout every T/2, then acks: the tuple is acked, never failed."""
    feeder, tracker = feeder_with_tracker()
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    (builder.set_bolt("2", ResetTimeoutBolt(T / 2, 5, recorder)).global_grouping("1")
     .set_own_thread())
    cluster.submit_topology("reset-timeout", conf_with_timeout(), builder.create_topology())

    feeder.feed(["a"], 1)

    assert wait_until(lambda: tracker.is_acked(1) or tracker.is_failed(1), 10 * T)
    assert tracker.is_acked(1)
    assert not tracker.is_failed(1)
    assert recorder.events("acked") == [("acked", "a")]


@pytest.mark.hosts("process")
def test_a_basic_bolt_resets_the_timeout_of_its_input_through_its_collector(cluster):
    """Storm's ``BasicOutputCollector.resetTimeout``: both tasks of a BasicBolt get the spout
    tuple (all grouping) and hold it for 2.5T, calling ``collector.reset_timeout(tup)`` every T/2
    (before, the collector had no such method: the call raised and crashed the worker). The
    tuple is acked once both return, never failed."""
    feeder, tracker = feeder_with_tracker()
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    (builder.set_bolt("2", ResetTimeoutBasicBolt(T / 2, 5, recorder), 2).all_grouping("1")
     .set_own_thread())
    cluster.submit_topology("basic-reset-timeout", conf_with_timeout(), builder.create_topology())

    feeder.feed(["a"], 1)

    assert wait_until(lambda: tracker.is_acked(1) or tracker.is_failed(1), 20 * T)
    assert tracker.is_acked(1)
    assert not tracker.is_failed(1)
    assert recorder.events("acked") == [("acked", "a"), ("acked", "a")]
    assert wait_until(lambda: component_stat(cluster, "basic-reset-timeout", "1", "acked") == 1)
    assert component_stat(cluster, "basic-reset-timeout", "1", "failed") == 0
    assert cluster.get_topology_info("basic-reset-timeout")["components"]["2"]["errors"] == []


@pytest.mark.hosts("process")
def test_without_reset_timeout_the_slow_bolt_lets_the_tuple_time_out_and_its_late_ack_is_ignored(cluster):
    """The control for the reset test: the same 2.5T hold without resets fails the tuple, and
    the ack that finally comes is ignored (the spout no longer has the tuple pending)."""
    feeder, tracker = feeder_with_tracker()
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    (builder.set_bolt("2", ResetTimeoutBolt(T / 2, 5, recorder, reset=False)).global_grouping("1")
     .set_own_thread())
    cluster.submit_topology("no-reset", conf_with_timeout(), builder.create_topology())

    feeder.feed(["a"], 1)

    assert wait_until(lambda: tracker.is_failed(1), 10 * T)
    assert wait_until(lambda: recorder.count("acked") == 1, 10 * T)
    assert wait_idle(cluster, "no-reset")
    assert not tracker.is_acked(1)
    assert component_stat(cluster, "no-reset", "1", "acked") == 0


def test_with_message_timeouts_disabled_an_unacked_tuple_never_fails(cluster):
    feeder, tracker = feeder_with_tracker()
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", NeverAckBolt(recorder)).global_grouping("1")
    conf = conf_with_timeout()
    conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS] = False
    cluster.submit_topology("no-timeouts", conf, builder.create_topology())

    feeder.feed(["a"], 1)
    assert wait_until(lambda: recorder.count("execute") == 1)

    # With timeouts on it would fail by 2T; wait well past that.
    assert not wait_until(lambda: tracker.is_failed(1) or tracker.is_acked(1), 2.5 * T)


def test_a_slow_bolts_acks_reach_the_spout_while_it_works_through_its_queue(cluster):
    """A bolt on its own thread takes T/10 per tuple and acks each one; 25 tuples are fed at
    once, so working through them takes 2.5T. The first five are acked by the bolt within T/2
    of their emission, so (as Storm sends every ack at once) they must be acked, not timed out
    while the bolt works on the rest. T is 0.5 s here to keep the test short."""
    t = T / 2
    feeder, tracker = feeder_with_tracker()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", SlowAckBolt(t / 10)).shuffle_grouping("1").set_own_thread()
    cluster.submit_topology("slow-acks", conf_with_timeout(t), builder.create_topology())

    for i in range(25):
        feeder.feed([i], i)

    assert wait_until(lambda: all(tracker.is_acked(i) or tracker.is_failed(i) for i in range(5)), 20 * t)
    assert [i for i in range(5) if tracker.is_failed(i)] == []


def test_a_bolt_slow_on_each_input_on_the_shared_loop_lets_the_tuples_past_their_timeout_fail(cluster):
    """A bolt on the shared loop (no own thread) takes 0.25 s per input, below the watchdog's
    1 s, so it is never moved; 24 tuples are fed at once, 6 s of work. Storm's spout executor
    has a thread of its own: tuples the bolt acks past 2T fail, and the first ones are acked.
    Before, one drain of the bolt's inbox held the loop for all 24 inputs: no rotation of the
    pending map and no ack reached the spout for 6 s, then all 24 were acked, none failed (with
    a 0.5 s bolt and 64 tuples, nothing acked nor failed for 32 s, the checkpoint spout's init too)."""
    n = 24
    feeder, tracker = feeder_with_tracker()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", SlowAckBolt(0.25)).shuffle_grouping("1")
    conf = conf_with_timeout()
    conf.set_num_workers(1)  # the spout, the acker and the bolt on one worker's loop
    cluster.submit_topology("slow-shared-loop", conf, builder.create_topology())

    for i in range(n):
        feeder.feed([i], i)

    assert wait_until(lambda: all(tracker.is_acked(i) or tracker.is_failed(i) for i in range(n)), 20)
    acked = [i for i in range(n) if tracker.is_acked(i)]
    failed = [i for i in range(n) if tracker.is_failed(i)]
    assert sorted(acked + failed) == list(range(n))  # each once, acked or failed
    # the bolt acks input i at 0.25 (i + 1) s at the earliest: from i = 8 on, past 2T
    assert [i for i in acked if i >= 8] == []
    assert len(failed) >= n - 8
    assert wait_until(lambda: component_stat(cluster, "slow-shared-loop", "1", "failed") == len(failed))
