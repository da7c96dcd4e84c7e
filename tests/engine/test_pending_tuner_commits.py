"""The max spout pending tuner (`squall.engine.pending_tuner.PendingTuner`) in front of a stateful
bolt, on a fake clock: the bolt acks its inputs only at its commits, one checkpoint interval
apart, so the acks come in bursts and the complete latency is about one interval.

Measured before (``python -m bench.stateful_pending``, LocalCluster, 10 s runs, Storm's 1 s
checkpoint interval): "auto" 1,033 records/s, the default limit 30,415 (87,000 once it had
climbed). The interval after each change was skipped (its complete latency was over a tenth of
the interval, as it always is there), so the tuner climbed one step every two intervals; and its
ceiling, 10,000 in flight, held the topology at 10,000 records/s at most.
"""

from __future__ import annotations

from collections import deque

from squall._config import default_conf
from squall.engine.pending_tuner import MAX_KEY, MIN_KEY, PendingTuner, tuners


class CommittingBolt:
    """A spout held by its limit in front of a stateful bolt, every tuple counted.

    The spout keeps ``limit`` tuples in flight: it refills at once after each commit and after
    each raise of the limit. The bolt executes up to ``capacity`` tuples a second and acks, at
    each commit (every ``interval`` seconds, at ``phase`` into the tuner's interval), the tuples
    it executed since the last one, oldest first. The tuner is fed every ``tick`` seconds."""

    def __init__(self, tuner: PendingTuner, capacity: float, interval: float = 1.0, tick: float = 1.0,
                 phase: float = 0.5) -> None:
        self.tuner = tuner
        self.capacity = capacity
        self.interval, self.tick = interval, tick
        self.now = 0.0
        self.next_commit = phase
        self.next_tick = tick
        self.in_flight: deque[list[float]] = deque()  # [emit time, count], oldest first
        self.emitted = self.acked = 0
        self.latency_sum = 0.0
        self.acked_at_ticks: list[int] = []  # tuples acked in each tuner interval
        self.limits = [tuner.update(0.0, 0, 0.0, 0)]
        self._fill()

    def pending(self) -> int:
        return sum(n for _, n in self.in_flight)

    def _fill(self) -> None:
        more = self.tuner.limit - self.pending()
        if more > 0:
            self.in_flight.append([self.now, more])
            self.emitted += more

    def _commit(self) -> None:
        todo = int(self.capacity * self.interval)
        while todo and self.in_flight:
            batch = self.in_flight[0]
            n = min(todo, int(batch[1]))
            self.acked += n
            self.latency_sum += n * (self.now - batch[0])
            batch[1] -= n
            todo -= n
            if not batch[1]:
                self.in_flight.popleft()
        self._fill()

    def run(self, ticks: int) -> list[int]:
        """Run ``ticks`` tuner intervals; returns the limit after each (the first: the start)."""
        for _ in range(ticks):
            while self.next_commit < self.next_tick:
                self.now = self.next_commit
                self._commit()
                self.next_commit += self.interval
            self.now = self.next_tick
            acked_before = sum(self.acked_at_ticks)
            self.acked_at_ticks.append(self.acked - acked_before)
            held = self.pending() >= self.tuner.limit
            self.limits.append(self.tuner.update(self.now, self.acked, self.latency_sum, self.acked, 0, held))
            self._fill()
            self.next_tick += self.tick
        return self.limits


def test_before_a_stateful_bolt_the_tuner_climbs_a_step_every_interval():
    """Acks once a second, at commits: each raise shows its gain in the very next interval, and
    the tuner takes it (it skipped that interval, the complete latency being over a tenth of
    it, and reached 4,096 after 8 intervals, where it now reaches its ceiling)."""
    feed = CommittingBolt(PendingTuner(16, 32_768), capacity=1e9)
    limits = feed.run(8)
    assert limits[:7] == [16, 64, 256, 1_024, 4_096, 16_384, 32_768], limits
    assert feed.acked_at_ticks[-1] == 32_768  # a commit acks what the limit let in


def test_before_a_stateful_bolt_the_tuner_settles_at_what_the_bolt_takes_and_stays():
    """A stateful bolt taking 20,000 tuples/s, commits every second: the limit that binds is
    20,000 (what one commit acks). Within 15 intervals the tuner runs at 90% of that at least,
    and once settled it stays: a settled tuner compared with a measurement taken while the
    throughput still rose saw a gain in every interval and climbed again at once."""
    feed = CommittingBolt(PendingTuner(16, 32_768), capacity=20_000)
    limits = feed.run(15)
    assert feed.tuner.settled, limits
    assert sum(feed.acked_at_ticks[-3:]) >= 0.9 * 3 * 20_000, (feed.acked_at_ticks, limits)
    changes = feed.tuner.changes
    feed.run(20)
    assert feed.tuner.changes == changes and feed.tuner.settled, feed.limits[-20:]
    assert sum(feed.acked_at_ticks[-20:]) == 20 * 20_000
    assert feed.acked + feed.pending() == feed.emitted  # every tuple acked or still in flight


def test_with_commits_every_100_ms_the_tuner_climbs_a_step_every_interval_too():
    """A checkpoint interval of 100 ms gave 9.2 commits a second (each waits for the last one's
    round), and complete latencies of 105 ms: still over a tenth of the tuner's interval, and
    the interval after each raise was skipped (measured: 20,124 records/s against 95,173 with
    the default limit)."""
    feed = CommittingBolt(PendingTuner(16, 32_768), capacity=1e9, interval=0.11, phase=0.05)
    assert feed.run(6)[:7] == [16, 64, 256, 1_024, 4_096, 16_384, 32_768]


def test_the_tuners_default_ceiling_holds_a_second_of_a_stateful_bolts_throughput():
    """10,000 in flight capped a topology whose tuples complete at 1 s commits at 10,000
    records/s (the default limit ran 87,000, with nothing to hold it but the spout's own pace).
    Against a stateful bolt taking 120,000 tuples/s, the tuner with the default bounds now
    settles where it runs at 90% of that at least."""
    defaults = default_conf()
    low, high = tuners({}, [1])[1].low, tuners({}, [1])[1].high
    assert (low, high) == (defaults[MIN_KEY], defaults[MAX_KEY]) and high >= 131_072
    feed = CommittingBolt(PendingTuner(low, high), capacity=120_000)
    feed.run(20)
    assert sum(feed.acked_at_ticks[-5:]) >= 0.9 * 5 * 120_000, (feed.acked_at_ticks, feed.limits)
