"""The watermark waits for every source task of each input stream (`WatermarkGenerator`), as
Flink's minimum over input channels: kept per stream (Storm's ``WaterMarkEventGenerator``, and
squall's before), it followed the fastest of several spout tasks, and the others' tuples came
late with nothing failing (a Kafka backlog read by 2 and 4 tasks: 53 and 159 of 1,200 records).
A task silent for the idle timeout is not waited for until it delivers again."""

from __future__ import annotations

import pytest

from squall import BaseWindowedBolt, Duration, InvalidTopologyException
from squall.windowing.config import watermark_idle_timeout_ms, window_spec
from squall.windowing.watermark import WatermarkGenerator

STREAM = ("kafka", "default")
A, B, C = ("kafka", "default", 1), ("kafka", "default", 2), ("kafka", "default", 3)
LAG, IDLE = 1_000, 30_000  # ms


def test_two_tasks_apart_by_more_than_the_lag_nothing_late():
    """Task 1 runs 5 s ahead of task 2 (the lag is 1 s): the watermark follows task 2, and every
    tuple of both is in time. Per stream, task 2's tuples after the first watermark were late."""
    g = WatermarkGenerator(LAG, {STREAM: [1, 2]}, IDLE)
    late = []
    for i in range(100):
        now = i * 0.1
        for source, ts in ((A, 5_000 + i * 100), (B, i * 100)):
            if not g.track(source, ts, now):
                late.append((source, ts))
        wm = g.next_watermark(now)
        assert wm is None or wm == i * 100 - LAG  # the slow task's newest less the lag
    assert late == []
    assert g.last_watermark == 99 * 100 - LAG
    assert g.held_back_by(10.0) == ([], [B])


def test_an_idle_task_stops_holding_after_the_timeout_and_holds_again_when_it_delivers():
    g = WatermarkGenerator(LAG, {STREAM: [1, 2]}, IDLE)
    g.track(A, 10_000, 0.0)
    g.track(B, 2_000, 0.0)
    assert g.next_watermark(0.0) == 1_000
    g.track(A, 20_000, 29.0)
    assert g.next_watermark(29.9) is None  # task 2 silent 29.9 s: still waited for
    assert g.held_back_by(29.9) == ([], [B])
    assert g.next_watermark(30.0) == 19_000  # silent 30 s: task 1 alone
    assert not g.track(B, 18_000, 31.0)  # before the watermark: late (it moved on while task 2 was idle)
    g.track(A, 40_000, 31.0)
    assert g.next_watermark(31.0) is None  # task 2 holds again, at 18 s: the watermark stays
    assert g.track(B, 25_000, 32.0)
    assert g.next_watermark(32.0) == 24_000


def test_a_task_never_heard_of_holds_until_the_idle_timeout():
    """A spout with more tasks than partitions: task 3 never emits. The watermark waits for it
    from the first call for one idle timeout, then goes on without it; every stream once it
    delivered, as Storm."""
    g = WatermarkGenerator(LAG, {STREAM: [1, 2, 3]}, IDLE)
    assert g.next_watermark(100.0) is None  # the wait starts here
    g.track(A, 5_000, 101.0)
    g.track(B, 6_000, 101.0)
    assert g.next_watermark(129.9) is None
    assert g.held_back_by(129.9) == ([C], [])
    assert g.next_watermark(130.0) == 4_000
    g.track(C, 7_000, 131.0)  # it delivers: held by it again, and by the oldest of the three
    g.track(A, 9_000, 131.0)
    g.track(B, 9_000, 131.0)
    assert g.next_watermark(131.0) == 6_000


def test_a_stream_none_of_whose_tasks_delivered_is_waited_for_as_in_storm():
    """A join's side that sends nothing holds every window (the stalled-watermark warning names
    its tasks): an idle timeout does not fire windows without a whole input stream."""
    g = WatermarkGenerator(0, {STREAM: [1], ("quiet", "default"): [4]}, IDLE)
    g.track(A, 5_000, 0.0)
    assert g.next_watermark(100.0) is None
    assert g.held_back_by(100.0) == ([("quiet", "default", 4)], [])


def test_the_watermark_only_moves_forward_and_an_idle_timeout_of_0_is_storms_per_stream_rule():
    g = WatermarkGenerator(0, {STREAM: [1, 2]}, IDLE)
    g.track(A, 10_000, 0.0)
    g.track(B, 9_000, 0.0)
    assert g.next_watermark(0.0) == 9_000
    g.track(B, 12_000, 40.0)  # task 1 idle now, task 2 alone
    assert g.next_watermark(40.0) == 12_000
    g.track(A, 11_000, 41.0)  # task 1 back, behind: the watermark stays, never back
    assert g.next_watermark(41.0) is None and g.last_watermark == 12_000
    storm = WatermarkGenerator(LAG, {STREAM: [1, 2]}, 0)
    storm.track(A, 10_000, 0.0)
    assert storm.next_watermark(0.0) == 9_000  # the stream's newest: task 2 not waited for
    storm.track(B, 2_000, 0.0)
    assert not storm.track(B, 8_000, 0.0)  # behind task 1 by more than the lag: late, as in Storm


def test_the_state_round_trips_and_a_state_of_the_per_stream_format_restores():
    g = WatermarkGenerator(LAG, {STREAM: [1, 2]}, IDLE)
    g.track(A, 10_000, 0.0)
    g.track(B, 4_000, 0.0)
    assert g.next_watermark(0.0) == 3_000
    state = g.get_state()
    again = WatermarkGenerator(LAG, {STREAM: [1, 2]}, IDLE)
    again.restore_state(state)
    assert (again.latest, again.last_watermark) == (g.latest, 3_000)
    assert again.get_state() == state
    again.track(B, 6_000, 50.0)  # restored tasks count as heard of at the first call: task 1 holds
    assert again.next_watermark(50.0) == 5_000
    # written before the watermark was kept per task: [[component, stream], ts] per stream
    old = WatermarkGenerator(LAG, {STREAM: [1, 2]}, IDLE)
    old.restore_state([[[["kafka", "default"], 10_000]], 3_000])
    assert old.last_watermark == 3_000 and old.latest == {}  # its stream newest is no task's
    assert not old.track(B, 2_500, 0.0)
    old.track(A, 12_000, 0.0)
    assert old.next_watermark(0.0) is None  # task 2 not heard of since: waited for
    old.track(B, 8_000, 0.0)
    assert old.next_watermark(0.0) == 7_000


def test_the_idle_timeout_is_set_on_the_bolt_defaults_to_the_message_timeout_and_is_checked():
    bolt = BaseWindowedBolt().with_tumbling_window(Duration.seconds(10)).with_timestamp_field("ts")
    conf = {**bolt.get_component_configuration(), "topology.message.timeout.secs": 45}
    assert watermark_idle_timeout_ms(window_spec(conf, "win"), conf) == 45_000
    conf = {**bolt.with_watermark_idle_timeout(Duration.seconds(5)).get_component_configuration()}
    assert watermark_idle_timeout_ms(window_spec(conf, "win"), conf) == 5_000
    with pytest.raises(ValueError, match="watermark idle timeout must be a non-negative Duration"):
        bolt.with_watermark_idle_timeout(Duration.of(-1))
    with pytest.raises(InvalidTopologyException,
                       match=r"Component \[win\]: 'topology.bolts.watermark.idle.timeout.ms' must be a non-negative"):
        window_spec({**conf, "topology.bolts.watermark.idle.timeout.ms": "soon"}, "win")
