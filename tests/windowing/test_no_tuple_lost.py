"""No tuple is lost by an event-time window (issue 33, item 1): every tuple is in each window its
timestamp belongs to, exactly once, or it is late, and either way it is acked (expired) once.

Two sources (two spout tasks on one stream) whose event times run apart by more than the lag
are the case that lost tuples: the watermark follows the faster one, so the queue, in arrival
order, holds tuples of the fast source far beyond a window's end before tuples of the slow
source that belong to that window. Storm's `WatermarkTimeEvictionPolicy` stops its scan at the
first tuple more than the lag beyond the window's end, so those later tuples were never in their
window, and the next window expired (acked) them. These tests drive the pure core as the
executor does (`WatermarkGenerator.track` decides late or in time; a watermark every few
tuples), then check every tuple against the windows its timestamp belongs to.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import pytest

from squall.windowing import Count, Duration
from squall.windowing.manager import window_manager
from squall.windowing.watermark import WatermarkGenerator

from .test_core import Listener


@dataclass
class Outcome:
    """What a window run did with every event: the windows that fired (end, values), the
    events found late, the events expired (acked), in order, and those still queued."""

    windows: list[tuple[int, list]] = field(default_factory=list)
    late: list = field(default_factory=list)
    expired: list = field(default_factory=list)
    queued: list = field(default_factory=list)


def run_event_time(length: Count | Duration, sliding: Count | Duration, lag: int,
                   arrivals: list[tuple[str, int]], watermark_every: int) -> Outcome:
    """Feed ``arrivals`` ((name, ts), in arrival order, one input stream) to an event-time
    window as `WindowedBoltExecutor` does, a watermark after every ``watermark_every``
    arrivals; then a last watermark past every window, as the end of the input."""
    lis = Listener()
    m = window_manager(lis, length, sliding, event_time=True)
    gen = WatermarkGenerator(lag, {("c", "stream"): [1]}, 30_000)
    out = Outcome()
    for i, (name, ts) in enumerate(arrivals, 1):
        if gen.track(("c", "stream", 1), ts, 0):
            m.add(name, ts)
        else:
            out.late.append(name)
        if i % watermark_every == 0 and (wm := gen.next_watermark(0)) is not None:
            m.add_watermark(wm)
    m.add_watermark(max(ts for _n, ts in arrivals) + length.value + sliding.value)
    out.windows = [(end, values) for values, _new, _exp, end in lis.windows]
    out.expired = lis.expired
    out.queued = [e.value for e in m.queue]
    return out


def windows_of(ts: int, length: int, sliding: int) -> list[int]:
    """The ends of the windows ``ts`` belongs to: multiples of ``sliding`` with end - length < ts <= end."""
    first = -(-ts // sliding) * sliding
    return list(range(first, ts + length, sliding))


def check_every_event(out: Outcome, arrivals: list[tuple[str, int]], length: int, sliding: int) -> None:
    """Each event is late, or in exactly the windows its timestamp belongs to, once each; no
    window holds an event outside its bounds; every event in time is expired exactly once."""
    ts_of = dict(arrivals)
    late = set(out.late)
    seen = Counter((name, end) for end, values in out.windows for name in values)
    for end, values in out.windows:
        outside = [n for n in values if not end - length < ts_of[n] <= end]
        assert not outside, f"window ending {end} holds {outside}"
    missing, twice = [], []
    for name, ts in arrivals:
        expected = [] if name in late else windows_of(ts, length, sliding)
        got = sorted(end for (n, end) in seen if n == name)
        if got != expected:
            missing.append((name, ts, expected, got))
        twice += [(name, end) for end in got if seen[(name, end)] > 1]
    assert not missing, f"{len(missing)} of {len(arrivals)} events not in their windows nor late: {missing[:5]}"
    assert not twice
    assert sorted(out.expired) == sorted(n for n, _ts in arrivals if n not in late)  # each acked once
    assert out.queued == []


def two_sources_apart(seed: int, n: int, lag: int, step: int = 100) -> list[tuple[str, int]]:
    """``n`` events from each of two sources, each in its own order, interleaved in bursts of 1
    to 20 (a spout task emits what one read returned); the slow source's event times fall behind
    the fast one's by a skew that wanders between 0 and twice the lag (two spout tasks reading
    a stream at different paces)."""
    rnd = random.Random(seed)
    fast = [(f"a{i}", 1_000_000 + i * step) for i in range(n)]
    slow, skew = [], 0
    for i in range(n):
        skew = min(2 * lag, max(0, skew + rnd.choice((-1, 1)) * rnd.randrange(0, lag // 4)))
        slow.append((f"b{i}", 1_000_000 + i * step - skew))
    arrivals: list[tuple[str, int]] = []
    while fast or slow:
        src = fast if not slow or (fast and rnd.random() < 0.5) else slow
        burst = rnd.randrange(1, 21)
        arrivals += src[:burst]
        del src[:burst]
    return arrivals


def test_an_event_behind_one_more_than_the_lag_beyond_the_window_end_is_still_in_its_window():
    # tumbling 10 ms, lag 5: "x" (ts 17) arrives before "b" (ts 8); the watermark 12 fires the
    # window (0, 10], whose scan (Storm's) stopped at x, 7 ms beyond its end, more than the lag.
    # b was not late (no watermark yet when it came).
    lis = Listener()
    m = window_manager(lis, Duration(10), Duration(10), event_time=True)
    for name, ts in (("a", 3), ("x", 17), ("b", 8)):
        m.add(name, ts)
    m.add_watermark(12)
    m.add_watermark(20)
    assert lis.got() == [["a", "b"], ["x"]]
    assert lis.expired == ["a", "b"]  # acked after their window, not before


def test_a_tuple_at_the_watermark_is_late_when_the_window_ending_there_has_fired():
    arrivals = [("a", 5), ("b", 10), ("c", 10)]  # the watermark comes between b and c
    out = run_event_time(Duration(10), Duration(10), 0, arrivals, watermark_every=2)
    assert out.windows[0] == (10, ["a", "b"])
    assert out.late == ["c"]  # its only window (0, 10] fired: late, not kept for (10, 20]
    check_every_event(out, arrivals, 10, 10)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("length, sliding", [(5_000, 5_000), (10_000, 5_000), (15_000, 5_000)],
                         ids=["tumbling-5s", "sliding-10s-by-5s", "sliding-15s-by-5s"])
def test_sources_apart_by_more_than_the_lag_lose_no_event(seed, length, sliding):
    lag = 10_000
    arrivals = two_sources_apart(seed, 600, lag)
    out = run_event_time(Duration(length), Duration(sliding), lag, arrivals, watermark_every=100)
    assert out.late and len(out.late) < len(arrivals) // 2  # the case has both kinds
    check_every_event(out, arrivals, length, sliding)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("length, sliding", [(5, 5), (50, 50), (10, 5)],
                         ids=["tumbling-5", "tumbling-50", "sliding-10-by-5"])
def test_count_windows_in_event_time_take_the_events_in_timestamp_order_and_lose_none(seed, length, sliding):
    # Storm's count windows in event time take the events up to the watermark in arrival
    # order: out of order by more than the lag (or less), some events were in no window and
    # some in two tumbling ones. Here: window k holds the in-time events k*sliding - length
    # to k*sliding in timestamp order (arrival order among equal timestamps).
    arrivals = two_sources_apart(seed, 600, 10_000)
    out = run_event_time(Count(length), Count(sliding), 10_000, arrivals, watermark_every=100)
    late = set(out.late)
    assert late and len(late) < len(arrivals) // 2
    ordered = [n for n, _ts in sorted((a for a in arrivals if a[0] not in late), key=lambda a: a[1])]
    expected = [ordered[max(0, k * sliding - length):k * sliding] for k in range(1, len(ordered) // sliding + 1)]
    assert [values for _end, values in out.windows] == expected
    ts_of = dict(arrivals)
    assert [end for end, _values in out.windows] == [ts_of[w[-1]] for w in expected]
    unwindowed = ordered[len(expected) * sliding:]
    assert len(unwindowed) < sliding  # waiting for a window: not acked
    assert sorted(out.expired + out.queued) == sorted(ordered)  # acked once, or still held
    assert set(unwindowed) <= set(out.queued)


def test_events_sharing_a_timestamp_across_count_windows_are_each_counted_once():
    lis = Listener()
    m = window_manager(lis, Count(2), Count(2), event_time=True)
    for name in ("e1", "e2", "e3", "e4", "e5"):
        m.add(name, 5)
    m.add_watermark(5)
    assert lis.got() == [["e1", "e2"], ["e3", "e4"]]  # e5 waits for one more
    m.add("f", 6)
    m.add_watermark(6)
    assert lis.got()[2:] == [["e5", "f"]]
    assert [w[3] for w in lis.windows] == [5, 5, 6]  # each ends at its last event's timestamp
    assert lis.expired == ["e1", "e2", "e3", "e4"]


def test_a_late_processing_time_window_and_the_early_one_after_it_split_the_events_between_them(caplog):
    """A sliding processing-time trigger that fires late by 300 ms lengthens that window; the
    next, on schedule, comes 300 ms early against it and is shortened: every event is in exactly
    one tumbling window, and the logs say late, then early (before, both "off its interval",
    the early one "lengthened" with a negative figure)."""
    import logging

    from squall.windowing.policies import Action, Event, EvictionContext, TimeEvictionPolicy

    policy = TimeEvictionPolicy(1000)
    events = [Event(i, ts) for i, ts in enumerate(range(10, 3001, 10))]
    windows = []
    with caplog.at_level(logging.WARNING, logger="squall.windowing.policies"):
        for end in (1000, 2300, 3000):  # on time, 300 ms late, on schedule again
            policy.set_context(EvictionContext(end, sliding_interval=1000))
            windows.append([e.value for e in events if policy.evict(e) is Action.PROCESS])
    seen = [i for w in windows for i in w]
    assert sorted(seen) == list(range(len(events)))  # each event once
    assert [len(w) for w in windows] == [100, 130, 70]
    said = [r.getMessage() for r in caplog.records]
    assert said == ["window fired 300 ms late (a busy loop or a long execute); that window is lengthened to cover the gap",
                    "window fired 300 ms early, after a late one; that window is shortened to begin where the late "
                    "one ended"], said
