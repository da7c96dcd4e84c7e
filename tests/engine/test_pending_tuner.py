"""The max spout pending tuner (`squall.engine.pending_tuner`) on synthetic curves.

A curve gives, for a limit L, the acked tuples/s and the mean complete latency of a topology
held by it: a pipeline of capacity C tuples/s whose tuples take b seconds when nothing waits
completes min(L / b, C) tuples/s at latency max(b, L / C) (Little's law). Its knee is L = C x b:
below it more in flight means more throughput, above it only more waiting.
"""

from __future__ import annotations

import random

import pytest

from squall._config import default_conf
from squall.engine.pending_tuner import (
    INTERVAL_KEY,
    MAX_KEY,
    MIN_KEY,
    PendingTuner,
    interval,
    tuners,
)


def knee_curve(capacity: float, base: float):
    return lambda limit: (min(limit / base, capacity), max(base, limit / capacity))


class Feed:
    """Feeds a tuner one interval at a time from a curve, with multiplicative noise."""

    def __init__(self, tuner: PendingTuner, noise: float = 0.0, seed: int = 0, interval: float = 1.0) -> None:
        self.tuner = tuner
        self.noise = noise
        self.rng = random.Random(seed)
        self.interval = interval
        self.now = 0.0
        self.acked = 0
        self.latency_sum = 0.0
        self.limits = [tuner.limit]
        tuner.update(self.now, 0, 0.0, 0)

    def _jitter(self) -> float:
        return 1 + self.rng.uniform(-self.noise, self.noise)

    def run(self, curve, periods: int) -> list[int]:
        for _ in range(periods):
            throughput, latency = curve(self.tuner.limit)
            n = max(1, int(throughput * self._jitter() * self.interval))
            self.now += self.interval
            self.acked += n
            self.latency_sum += latency * self._jitter() * n
            self.limits.append(self.tuner.update(self.now, self.acked, self.latency_sum, self.acked))
        return self.limits


@pytest.mark.parametrize("capacity, base", [(20_000, 0.02), (3_000, 0.05), (50_000, 0.005)])
@pytest.mark.parametrize("seed", range(5))
def test_it_settles_near_the_knee(capacity, base, seed):
    curve = knee_curve(capacity, base)
    tuner = PendingTuner(16, 10_000)
    limits = Feed(tuner, noise=0.03, seed=seed).run(curve, 40)
    throughput, latency = curve(staying(limits))
    assert throughput >= 0.9 * capacity  # it found (nearly) all the throughput there is
    assert latency <= 1.5 * base         # without piling up more than half again in waiting


def staying(limits: list[int]) -> int:
    """Where the tuner stays: its most frequent limit over the last 10 intervals (a settled
    tuner still probes now and then)."""
    last = limits[-10:]
    return max(set(last), key=last.count)


@pytest.mark.parametrize("capacity, half", [(30_000, 50), (5_000, 20)])
@pytest.mark.parametrize("seed", range(3))
def test_on_a_gradual_curve_it_trades_a_little_throughput_for_much_less_latency(capacity, half, seed):
    """Curves bend gradually in practice (batches grow with what is in flight): throughput
    C x L / (L + h), latency (L + h) / C. Against the highest bound (10,000), the tuner keeps
    most of the throughput for a small part of the latency."""
    def curve(limit):
        return capacity * limit / (limit + half), (limit + half) / capacity
    limits = Feed(PendingTuner(16, 10_000), noise=0.03, seed=seed).run(curve, 60)
    throughput, latency = curve(staying(limits))
    top, top_latency = curve(10_000)
    assert throughput >= 0.8 * top
    assert latency <= 0.1 * top_latency


def test_it_raises_the_limit_while_throughput_grows():
    tuner = PendingTuner(16, 10_000)
    limits = Feed(tuner).run(knee_curve(1e9, 0.1), 5)  # the knee is far above the bound
    assert limits[:5] == sorted(limits[:5]) and limits[4] > limits[0]
    assert max(limits) == 10_000


def test_a_probe_with_only_more_latency_is_undone_and_the_limit_goes_lower():
    """Past the knee a higher limit only adds latency: the next limit is below the probe."""
    tuner = PendingTuner(100, 10_000)
    feed = Feed(tuner)
    flat = knee_curve(1_000, 0.01)  # knee at 10 in flight: at 100 the limit is already past it
    feed.run(flat, 1)
    probe = tuner.limit
    assert probe > 100
    feed.run(flat, 3)
    assert tuner.limit < probe


def test_it_backs_off_when_latency_rises_without_a_gain():
    """Settled at the knee, the downstream becomes 4x slower: latency rises, throughput does not;
    the tuner lowers the limit to the new knee."""
    tuner = PendingTuner(16, 10_000)
    feed = Feed(tuner, noise=0.02, seed=1)
    assert 360 <= staying(feed.run(knee_curve(20_000, 0.02), 30)) <= 600
    slower = knee_curve(5_000, 0.02)  # knee at 100
    limit = staying(feed.run(slower, 40))
    throughput, _latency = slower(limit)
    assert limit <= 150
    assert throughput >= 0.9 * 5_000


@pytest.mark.parametrize("capacity, base", [(1e9, 1.0), (100, 0.001)])
def test_it_stays_within_its_bounds(capacity, base):
    tuner = PendingTuner(32, 500)
    limits = Feed(tuner, noise=0.05, seed=3).run(knee_curve(capacity, base), 80)
    assert all(32 <= limit <= 500 for limit in limits)
    assert limits[-1] == (500 if capacity > 1e6 else 32)


def test_a_limit_that_does_not_bind_is_not_raised_for_nothing():
    """A spout that emits 1,000 tuples/s whatever the limit (its own pace): no probe pays, so
    the tuner settles at a low limit."""
    tuner = PendingTuner(16, 10_000)
    limits = Feed(tuner, noise=0.03, seed=2).run(lambda limit: (1_000.0, 0.002), 30)
    assert staying(limits) <= 64


def test_an_interval_in_which_nothing_completed_changes_nothing():
    tuner = PendingTuner(16, 1_000)
    tuner.update(0.0, 0, 0.0, 0)
    tuner.update(1.0, 100, 0.5, 100)
    limit, changes = tuner.limit, tuner.changes
    for t in range(2, 10):
        assert tuner.update(float(t), 100, 0.5, 100) == limit
    assert tuner.changes == changes


def test_timeouts_while_nothing_completes_double_the_limit_within_its_bounds_and_it_climbs_again():
    """A bolt that acks in batches larger than the limit completes nothing under it: the task's
    tuples time out, and the limit doubles on each interval that saw new timeouts (not on one
    that saw none), up to ``high``; once tuples complete, it climbs from there."""
    tuner = PendingTuner(16, 100)
    assert tuner.update(0.0, 0, 0.0, 0) == 16
    assert tuner.update(1.0, 0, 0.0, 0, expired=16) == 32
    assert tuner.update(2.0, 0, 0.0, 0, expired=16) == 32       # no new timeout: no news
    assert tuner.update(3.0, 0, 0.0, 0, expired=48) == 64
    assert tuner.update(4.0, 0, 0.0, 0, expired=112) == 100     # the bound
    assert tuner.update(5.0, 0, 0.0, 0, expired=200) == 100
    assert not tuner.settled
    tuner.update(6.0, 200, 0.1, 200, expired=200)
    tuner.update(7.0, 400, 0.2, 400, expired=200)
    assert 16 <= tuner.limit <= 100                              # climbing again, within bounds


@pytest.mark.parametrize("low, high", [(0, 10), (20, 10)])
def test_bad_bounds_are_refused(low, high):
    with pytest.raises(ValueError, match="low <= high"):
        PendingTuner(low, high)


def test_the_interval_right_after_a_change_counts_only_if_the_change_had_time_to_settle():
    tuner = PendingTuner(16, 1_000)
    tuner.update(0.0, 0, 0.0, 0)
    assert tuner.update(1.0, 100, 0.1, 100) == 64  # 100/s at 16: probe 4x higher
    # the next interval's tuples took 0.5 s: half the interval was the change settling, skipped
    assert tuner.update(2.0, 200, 0.1 + 50.0, 200) == 64 and tuner.changes == 1
    # the one after it counts: 4x the throughput at 64, so on to 256
    assert tuner.update(3.0, 600, 50.1 + 0.4, 600) == 256


def test_the_tuners_of_an_executor_take_the_components_bounds_and_interval():
    conf = {MIN_KEY: 8, MAX_KEY: 300, INTERVAL_KEY: 0.5}
    made = tuners(conf, [3, 4])
    assert sorted(made) == [3, 4] and made[3] is not made[4]
    assert all((t.low, t.high, t.limit) == (8, 300, 8) for t in made.values())
    assert interval(conf) == 0.5
    defaults = default_conf()  # the same bounds as a configuration that lacks the keys
    assert [(t.low, t.high) for t in tuners({}, [1]).values()] == [(defaults[MIN_KEY], defaults[MAX_KEY])]
    assert interval({}) == defaults[INTERVAL_KEY]


def test_held_at_the_limit_with_nothing_acked_the_limit_doubles_before_anything_times_out():
    """A join (Storm's SingleJoinBolt) whose matches are further apart than the limit acks
    nothing under it: held at its limit `stall_intervals` intervals in a row with no ack, the
    tuner doubles its limit, then every interval while that lasts; an interval not held (an idle
    spout) or with an ack resets the count."""
    tuner = PendingTuner(16, 100, stall_intervals=3)
    assert tuner.update(0.0, 0, 0.0, 0, held=True) == 16
    assert [tuner.update(t, 0, 0.0, 0, held=True) for t in (1.0, 2.0)] == [16, 16]
    assert tuner.update(3.0, 0, 0.0, 0, held=False) == 16        # not held: the count starts again
    assert [tuner.update(t, 0, 0.0, 0, held=True) for t in (4.0, 5.0, 6.0)] == [16, 16, 32]
    assert tuner.update(7.0, 0, 0.0, 0, held=True) == 64         # still held, still nothing: again
    assert tuner.update(8.0, 0, 0.0, 0, held=True) == 100        # the bound
    idle = PendingTuner(16, 100, stall_intervals=3)
    assert [idle.update(float(t), 0, 0.0, 0) for t in range(10)] == [16] * 10


def test_the_tuners_stall_intervals_are_half_the_message_timeout_at_most():
    conf = {MIN_KEY: 8, MAX_KEY: 300, INTERVAL_KEY: 1.0}
    assert all(t.stall_intervals == 5 for t in tuners(conf, [1], 30.0).values())
    assert all(t.stall_intervals == 2 for t in tuners(conf, [1], 4.0).values())
    assert all(t.stall_intervals == 1 for t in tuners(conf, [1], 1.0).values())
