"""A spout executor's max spout pending, set by ``topology.max.spout.pending``: `MaxPending`, the
one place that reads that key and decides which of the three limits applies.

- **A number**: that many pending tuples per spout task, fixed (Storm's setting).
- **null** (the default), with acking and message timeouts on: the limit follows the completion
  rate (`CompletionRateLimit`), so that a slow bolt holds the spout back before tuples time out:
  by Little's law a new tuple completes after about ``pending / completion rate`` seconds, so
  every `CompletionRateLimit.period` the limit becomes ``completions per second x PENDING_BUDGET
  x message timeout`` (the rate over a sliding window of `RATE_WINDOW` periods), never below
  `AUTO_PENDING_FLOOR` per task, and at most halving per period, so one slow period does not
  starve the topology. But when nothing completes over the window while the spout is held at
  its limit, or tuples time out while none completes, the limit is what holds the topology back:
  a bolt that acks its inputs in batches (say every 1,000) completes nothing until it has a
  batch, and a join (Storm's ``SingleJoinBolt``) acks a tuple only once its match from the
  other stream came, which may be more than the limit's worth of tuples later; under such a
  limit every tuple timed out (and was lost, or replayed forever), where Storm (no limit) runs.
  Then the limit and its floor double: held at the limit, after a window without a completion
  (at most half the timeout: before any tuple times out) and then every period until one
  completes, unless tuples completed under that limit before (a bolt that pauses holds them
  then, not the limit, and the doubled limit filled the queues behind the pause with more than
  could be worked off within the timeout); on timeouts, at most once per message timeout; up to ``topology.executor.receive.buffer.size`` per
  task (what backpressure lets a bolt queue anyway): the floor stays raised, since below it
  nothing completed, until tuples time out in a window in which others complete too: that is
  a queue too long for the timeout again (a bolt that was stalled and is now slow), and the
  floor is back to `AUTO_PENDING_FLOOR` per task, or to what the topology completes in the
  budget if that is less (at least 1 per task): a bolt that completes fewer than the floor within
  the budget (a slow service's 100 ms calls, a 2 s timeout) kept a queue longer than the timeout
  under it, every replay behind its timed-out copy, and none completed again. Timeouts under a
  limit tuples completed under are likewise a queue's, and double nothing. Before a stateful
  bolt, which acks its inputs at its commits on a timer, timeouts never double it, and being
  held doubles it only after ``COMMIT_WAIT_INTERVALS`` checkpoint intervals in which no tuple
  completed and the stateful bolts executed none of the spout's tuples as well (on the inputs
  that carry them, in whatever worker: `squall.engine.stateful_progress`; then once per as many), if that
  is less than half the timeout, and not once tuples timed out with none completed (a queue in
  front of the checkpoints): a join or a batch gives the stateful bolt nothing until more are
  in flight, a slow bolt gives it a few at a time. A bolt that is merely
  slow never raises it. Measured (a 1 ms/tuple bolt in another worker, message timeout 3 s):
  Storm's unlimited default timed 30,032 tuples out in 8 s; this limit, none. Without acking or
  timeouts: no limit, as Storm.
- **"auto"**, with acking on: a `PendingTuner` per task, the tuner described next; the
  executor's limit is the sum of theirs.

Every limit is updated from counters the executor keeps anyway (tuples acked, failed, timed out,
complete latencies) on a timer; the per-tuple cost is nil.

The max spout pending tuner (``topology.max.spout.pending: auto``), as Storm @Twitter plans it.

Storm @Twitter (section 3.3.3) found that setting max spout pending by hand was an operational
burden and planned a tuner that raises the limit while the acked throughput grows and lowers it
when the complete latency rises without a gain. Open-source Storm never shipped one. Here it is a
hill climber on one spout task's limit, fed every ``topology.max.spout.pending.auto.interval.secs``
with the task's cumulative acked count and complete-latency sum (exact counters the executor keeps
anyway, so it costs nothing per tuple); each interval gives one `Measurement`: acked tuples/s and
mean complete latency at the limit of that interval.

- **Climbing.** From ``.auto.min`` it probes a limit `STEP` times higher. A probe that is better
  (see `PendingTuner._better`: throughput up by a share of the step, or, for a lower limit, the
  throughput held at a clearly lower latency) becomes the reference and the next probe goes on the same way with the same
  factor: the limit grows geometrically while throughput grows (a slow start). A probe that is
  not better (no gain, and the latency did not fall: past the knee the latency rises with the
  limit) is dropped: the next probe starts from the reference, the other way, with the square
  root of the factor. So the probes close in on the knee of the throughput curve, where more in
  flight only adds waiting, until the factor is below `MIN_STEP`: the tuner settles on the
  reference. A measurement below the best throughput seen by more than `PEAK_LOSS` is never better,
  so small losses cannot add up over many probes.
- **Settled.** It keeps the limit and compares each interval with a base: the interval it
  settled on, then an average that ordinary intervals move by `BASE_WEIGHT`. After
  `CHANGE_PERIODS` intervals in a row of latency up by more than `LATENCY_RISE` without a gain
  (a slower downstream) it climbs again, downwards first; after as many of throughput up by more
  than `GAIN` (more offered load, more capacity), upwards; and every `REPROBE_PERIODS` intervals it
  probes upwards once, in case capacity grew without the throughput showing it.
- **Transients.** A changed limit takes about one complete latency to show in the throughput; the
  interval after a change is used only if its latency is below `WARM_FRACTION` of the interval,
  or if it was a raise whose gain shows already (a transient delays a gain, it never makes one:
  `PendingTuner._shows_gain`; before a stateful bolt, whose tuples complete at its commits, the
  complete latency is about the checkpoint interval, and skipping every such interval halved the
  climb), else it is skipped. An interval in which nothing completed says nothing and changes nothing,
  unless the task's tuples timed out meanwhile, or the spout was held at its limit for
  `RATE_WINDOW` intervals in a row (half the message timeout if shorter) with nothing acked,
  at a limit above every one under which tuples were acked (else a bolt that pauses holds them):
  then the limit is what holds the topology back (a bolt that acks in batches larger than it
  completes nothing, and a join whose matches are further apart than it; their tuples would time
  out, and replay forever), so it doubles (within its bounds), every interval while that lasts,
  and the tuner climbs again once tuples complete. But tuples that time out with none acked under
  a limit tuples were acked under, or under one that timed them out so before, waited in a queue
  longer than the timeout (a probe above what a slow bolt works off within it): the limit halves,
  and probes stay below the lowest such limit, until the topology completes more than it within
  half the timeout (an outage's halvings do not cap the tuner for good).

The limit stays within ``[low, high]``.

Pure: time and counters are passed in.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .._config import Config, conf_value

if TYPE_CHECKING:
    from .transport import PeerReach

log = logging.getLogger(__name__)

AUTO = "auto"
MIN_KEY = Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MIN
MAX_KEY = Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_MAX
INTERVAL_KEY = Config.TOPOLOGY_MAX_SPOUT_PENDING_AUTO_INTERVAL_SECS

STEP = 4.0            # the first probe's factor (the slow start)
RESTART_STEP = 2.0    # the factor when a settled tuner climbs again
MIN_STEP = 1.1        # settle once the factor would be below this
GAIN = 0.05           # throughput changes smaller than this share are noise
THROUGHPUT_SHARE = 0.1   # a probe k times the limit moved the throughput if by more than k ** this
PEAK_LOSS = 0.1       # climbing: a throughput below the best seen by this share is never better
LATENCY_GAIN = 0.1    # a lower limit must lower the latency by this share at least
LATENCY_RISE = 0.25   # settled: a latency higher by this share is a rise
CHANGE_PERIODS = 3    # settled: intervals in a row that must show a change before it climbs again
REPROBE_PERIODS = 30  # settled: probe upwards once every this many intervals
BASE_WEIGHT = 0.25    # settled: how far each ordinary interval moves the base it is compared with
WARM_FRACTION = 0.1   # the interval after a change counts if its latency is below this share of it

# The limit that follows the completion rate (null): a tuple emitted now should expect to
# complete within this fraction of the message timeout (timeouts fire between T and 2T).
PENDING_BUDGET = 0.5
# Pending tuples per task that limit always allows: the limit before any rate is known, and while
# nothing completes. Small, because a tuple may fan out (1000 sentences of 10 words into a 1 ms/word
# bolt are 10 s of work); the limit grows from it within a period, because a fast topology
# completes many times the floor per period.
AUTO_PENDING_FLOOR = 64
# Periods of the completion rate's sliding window (half the timeout when the timeout is 10 s or less).
RATE_WINDOW = 5
# Checkpoint intervals that a spout before a stateful bolt, held at the limit, waits for a
# completion before the limit doubles (`CompletionRateLimit`): a commit comes at least once an
# interval, and acks what the stateful bolt got before the prepare; the third allows for a slow one.
COMMIT_WAIT_INTERVALS = 3


class Measurement(NamedTuple):
    """One interval at one limit: acked tuples/s and mean complete latency in seconds (None:
    nothing was timed)."""

    limit: int
    throughput: float
    latency: float | None


class PendingTuner:
    """The limit of one spout task (see the module docstring): call `update` every interval."""

    def __init__(self, low: int, high: int, *, step: float = STEP, min_step: float = MIN_STEP,
                 stall_intervals: int = RATE_WINDOW, timeout_secs: float | None = None) -> None:
        """``timeout_secs``: the message timeout, by which a cap that timeouts set (`update`) is
        raised again once the topology completes more within half of it (None: never raised)."""
        if not 1 <= low <= high:
            raise ValueError(f"bounds must be 1 <= low <= high, got {low} and {high}")
        if not step > min_step > 1:
            raise ValueError(f"factors must be step > min_step > 1, got {step} and {min_step}")
        self.low, self.high = low, high
        self.min_step = min_step
        self.limit = low
        self.settled = False
        self.changes = 0   # times the limit changed
        self._step = step
        self._direction = 1
        self._ref: Measurement | None = None  # the best limit known while climbing
        self._ref_early = False  # it was measured right after its change (`_shows_gain`): a lower bound
        self._peak = 0.0                      # the best throughput seen while climbing
        self._base: Measurement | None = None  # settled: what an interval is compared with (a slow average)
        self._deviation = 0                   # settled: +n intervals of gain in a row, -n of rising latency
        self._settled_periods = 0
        self._last: tuple[float, int, float, int] | None = None
        self._expired = 0  # the task's tuples timed out, as last seen
        self._fresh = False  # the limit changed at the last update
        self.stall_intervals = stall_intervals  # intervals held at the limit with no ack before it doubles
        self._held = 0  # intervals in a row held at the limit with no ack
        self._worked = 0  # the highest limit an interval with an ack was run under (`update`)
        self._over = high + 1  # the lowest limit tuples timed out in a queue under (`update`)
        self.timeout_secs = timeout_secs

    def update(self, now: float, acked: int, latency_sum: float, latency_count: int, expired: int = 0,
               held: bool = False) -> int:
        """Feed the task's cumulative counters at ``now`` (seconds): tuples acked, the sum
        (seconds) and number of complete latencies measured, tuples timed out, and whether the
        spout is held at its limit. Returns the limit to apply."""
        last = self._last
        timed_out, self._expired = expired > self._expired, expired
        if last is not None and (now <= last[0] or acked <= last[1]):
            # nothing completed: no news (an idle spout, a stalled topology), unless tuples
            # timed out meanwhile, or the spout was held at the limit `stall_intervals` in a row
            # (a join waiting for matches more than the limit's worth away): the limit may be
            # what holds everything (see the module docstring)
            self._held = self._held + 1 if held else 0
            # but not at a limit under which tuples were acked before: then it is not the limit
            # that holds them (a bolt that pauses, not a join); doubled, the spout filled the
            # queues behind the pause with more than could be worked off within the timeout
            stuck = self._held >= self.stall_intervals and self.limit > self._worked
            if stuck:
                self._held -= 1  # held the next interval too: double again then
            # timeouts likewise: under a limit tuples were acked under, tuples that time out
            # while none completes wait in a queue longer than the timeout (a probe that put more
            # in flight than a slow bolt works off within it); doubled, every replay queued behind
            # its timed-out copy and none was acked again. Then the limit halves instead
            queue = timed_out and (self.limit <= self._worked or self.limit >= self._over)
            if (timed_out or stuck) and not queue and self.limit < self.high:
                self._restart_at(self._clamp(2 * self.limit))
            elif queue:
                self._over = min(self._over, self.limit)  # probes stay below it from now on
                self._restart_at(self._clamp(self.limit / 2))
            return self.limit
        self._last = (now, acked, latency_sum, latency_count)
        self._held = 0
        if last is not None:
            self._worked = max(self._worked, self.limit)  # acks came under this limit
        if last is None:
            return self.limit
        dt = now - last[0]
        # the cap timeouts set is what the topology completed within the timeout then. Set by
        # each halving of a series, it falls with them while the limit halves only because the
        # tuples emitted before still time out: a store down for 10 s left a tuner that had
        # run at 1,024 capped at 16 for the task's life (20,000 tuples/s before, 320 after).
        # It rises to what is completed now within half the timeout, as `CompletionRateLimit`
        # allows: no higher, so a bolt still slow keeps it (and its probes) where they queue
        # no tuple past the timeout
        if self.timeout_secs is not None and self._over <= self.high:
            completes = int((acked - last[1]) / dt * PENDING_BUDGET * self.timeout_secs)
            self._over = max(self._over, min(completes, self.high) + 1)
        n = latency_count - last[3]
        latency = (latency_sum - last[2]) / n if n > 0 else None
        m = Measurement(self.limit, (acked - last[1]) / dt, latency)
        early = False
        if self._fresh:
            self._fresh = False
            if latency is None or latency > WARM_FRACTION * dt:
                if not self._shows_gain(m):
                    return self.limit  # the interval was partly the last change's transient
                early = True
        if self.settled:
            self._watch(m)
        else:
            self._climb(m, early)
        return self.limit

    def _restart_at(self, limit: int) -> None:
        """Climb again from ``limit`` (the last measurements are no reference there)."""
        self._set(limit)
        self.settled = False
        self._ref = None
        self._peak = 0.0
        self._step = STEP
        self._direction = 1

    # --- climbing --------------------------------------------------------------------------------------
    def _climb(self, m: Measurement, early: bool = False) -> None:
        ref = self._ref
        if ref is None or m.limit == ref.limit or self._better(m, ref):
            self._ref, self._ref_early = m, early
            self._peak = max(self._peak, m.throughput)
        else:  # no gain and no lower latency: back to the reference, the other way, finer
            self._turn()
        self._probe()

    def _shows_gain(self, m: Measurement) -> bool:
        """Whether ``m``, measured in the interval right after a probe, is already better than the
        reference below it. After a raise, the tuples emitted under the new limit complete one
        complete latency later: the transient only delays the gain, it never makes one, so an
        interval that shows it counts, whatever its latency. Else a topology whose tuples take
        most of an interval to complete (acks in bursts an interval apart: a stateful bolt acks
        its inputs at its commits, once a checkpoint interval) had every interval after a change
        skipped, and climbed one step every two intervals or more: from 16, before a stateful
        bolt at Storm's 1 s checkpoint interval, it reached 4,096 in flight after 8 s, and 10 s
        runs acked 1,033 records/s where the default limit acked 30,415 (measured with
        ``python -m bench.stateful_pending``). No gain (or a lower limit, whose transient drains
        what the higher one let in): skipped, as before."""
        ref = self._ref
        return not self.settled and ref is not None and m.limit > ref.limit and self._better(m, ref)

    def _better(self, m: Measurement, ref: Measurement) -> bool:
        """Whether ``m`` is better than ``ref``, judged by which side of the knee explains it.

        With the limit ``k`` times the reference's (in logs), a topology held by its limit (far
        below the knee) moves its throughput by about ``k`` at the same latency; past the knee
        the throughput stays and the latency moves by ``k``. Real curves bend gradually (more in
        flight also means bigger batches, so latency grows below the knee too), so raising is
        better if throughput rose by more than `THROUGHPUT_SHARE` of ``k`` (and by `GAIN` at
        least: noise must not decide), and lowering is better if throughput fell by less than
        that share of ``k`` while latency fell by more than half of it."""
        if m.throughput < self._peak * (1 - PEAK_LOSS) or m.throughput <= 0 or ref.throughput <= 0:
            return False
        k = math.log(m.limit / ref.limit)
        gain = math.log(m.throughput / ref.throughput)
        if k > 0:
            return gain > max(k * THROUGHPUT_SHARE, math.log1p(GAIN))
        if m.latency is None or ref.latency is None or m.latency <= 0 or ref.latency <= 0:
            return False
        return gain > k * THROUGHPUT_SHARE and math.log(m.latency / ref.latency) < min(k / 2, math.log1p(-LATENCY_GAIN))

    def _turn(self) -> None:
        self._direction = -self._direction
        self._step = math.sqrt(self._step)

    def _probe(self) -> None:
        """Set the next probe from the reference, or settle on it once the factor is too small."""
        assert self._ref is not None
        base = self._ref.limit
        while self._step >= self.min_step:
            target = self._clamp(base * self._step ** self._direction)
            if target != base:
                self._set(target)
                return
            self._turn()  # at a bound: the other way
        self._settle()

    def _clamp(self, x: float) -> int:
        return max(self.low, min(self.high, self._over - 1, round(x)))

    def _set(self, limit: int) -> None:
        if limit != self.limit:
            self.limit = limit
            self.changes += 1
            self._fresh = True

    # --- settled ---------------------------------------------------------------------------------------
    def _settle(self) -> None:
        assert self._ref is not None
        self._set(self._ref.limit)
        self.settled = True
        # (not a measurement taken right after its change: the throughput was still rising, and
        # measured against it every settled interval looked like a gain, which sent the tuner
        # climbing again at once)
        self._base = self._ref if self._ref.limit == self.limit and not self._ref_early else None
        self._deviation = 0
        self._settled_periods = 0

    def _watch(self, m: Measurement) -> None:
        base = self._base
        if base is None:  # the first interval at the settled limit is the one to compare with
            self._base = m
            return
        self._settled_periods += 1
        gained = m.throughput > base.throughput * (1 + GAIN)
        rose = (not gained and m.latency is not None and base.latency is not None
                and m.latency > base.latency * (1 + LATENCY_RISE))
        if gained:
            self._deviation = max(self._deviation, 0) + 1
        elif rose:
            self._deviation = min(self._deviation, 0) - 1
        else:  # an ordinary interval: the base follows slowly, so one noisy interval weighs little
            self._deviation = 0
            self._base = _blend(base, m, BASE_WEIGHT)
        if self._deviation <= -CHANGE_PERIODS:
            self._restart(m, -1, RESTART_STEP)
        elif self._deviation >= CHANGE_PERIODS:
            self._restart(m, 1, RESTART_STEP)
        elif self._settled_periods >= REPROBE_PERIODS:
            self._restart(m, 1, math.sqrt(RESTART_STEP))

    def _restart(self, m: Measurement, direction: int, step: float) -> None:
        self.settled = False
        self._ref, self._ref_early = m, False
        self._peak = m.throughput
        self._direction = direction
        self._step = step
        self._probe()


def _blend(old: Measurement, new: Measurement, weight: float) -> Measurement:
    """``old`` moved ``weight`` of the way to ``new`` (an exponentially weighted average)."""
    latency = new.latency if old.latency is None else old.latency if new.latency is None else (
        old.latency + weight * (new.latency - old.latency))
    return Measurement(old.limit, old.throughput + weight * (new.throughput - old.throughput), latency)


def tuners(conf: Mapping[str, Any], tasks: Iterable[int], timeout_secs: float = 30.0) -> dict[int, PendingTuner]:
    """One tuner per task, with the bounds of ``conf`` (the component's validated configuration);
    held at its limit with no ack for `RATE_WINDOW` intervals, or half the message timeout if
    shorter, a tuner doubles its limit."""
    low = int(conf_value(conf, MIN_KEY))
    high = int(conf_value(conf, MAX_KEY))
    stall = max(1, min(RATE_WINDOW, int(PENDING_BUDGET * timeout_secs / interval(conf))))
    return {t: PendingTuner(low, max(low, high), stall_intervals=stall, timeout_secs=timeout_secs) for t in tasks}


def interval(conf: Mapping[str, Any]) -> float:
    """Seconds between two updates of the tuners."""
    return float(conf_value(conf, INTERVAL_KEY))


class CompletionRateLimit:
    """The limit of ``topology.max.spout.pending: null`` for ``tasks`` spout tasks (see the module
    docstring): call `update` every `period` seconds with the tuples completed so far. Acks come
    in bursts (a bolt in another worker flushes them once per loop round, which is a second for a
    bolt taking 1 ms per tuple), hence the rate over a window of periods."""

    def __init__(self, tasks: int, timeout_secs: float, ceiling: int | None = None, commits: bool = False,
                 checkpoint_secs: float | None = None) -> None:
        """``commits``: the spout's tuples complete only at a stateful bolt's commit (see `update`),
        which comes every ``checkpoint_secs`` (``topology.state.checkpoint.interval.ms``; None:
        unknown, and then the limit never doubles for want of completions)."""
        self.tasks = tasks
        self.commits = commits
        # held at the limit this long with no completion, the commits are not what holds the
        # spout's tuples: one came at least every interval and then acked what the stateful bolt
        # had. None: no such time is short enough to tell (see `update`)
        wait = None if checkpoint_secs is None else COMMIT_WAIT_INTERVALS * checkpoint_secs
        self.commit_wait = wait if commits and wait is not None and wait < PENDING_BUDGET * timeout_secs else None
        self.floor = self.base_floor = AUTO_PENDING_FLOOR * tasks
        self.budget = PENDING_BUDGET * timeout_secs
        self.timeout = timeout_secs
        self.period = min(1.0, timeout_secs / 10)  # a tenth of the timeout, at most 1 s
        # how high doubling on timeouts goes (see `update`); None: no bound
        self.ceiling = None if ceiling is None else max(self.floor, ceiling)
        self.limit = self.floor
        self._raised_at = float("-inf")  # when timeouts last doubled the floor
        self._climbing = False  # the last doubling was for a spout held at the limit, and none completed since
        self._worked = 0  # the highest limit a period with a completion was run under
        self._quiet_since = float("-inf")  # the start of the window, or the last completion (commits)
        self._queued = False  # commits: tuples timed out with none completed since (a queue's)
        self._progress: int | None = None  # commits: the stateful bolts' executions of this spout's inputs, as last told
        self._progress_at = float("-inf")  # commits: when they last moved (or were not told)
        self._samples: deque[tuple[float, int, int]] = deque(maxlen=RATE_WINDOW + 1)

    def update(self, now: float, completed: int, expired: int = 0, held: bool = False,
               progress: int | None = None, in_flight: int = 0) -> int:
        """Feed the tuples completed (acked or failed, not by a timeout) by ``now``, and those
        that timed out by then, and whether the spout is held at the limit now; the first call
        only starts the window. ``progress``: where the tuples complete at commits, the inputs
        the stateful bolts executed so far (None: not known). Returns the limit to apply: the
        rate's, or, when none completed over the window while the spout is held at the limit, or
        tuples timed out over it while none completed, the limit doubled, which becomes the
        floor (see the module docstring). ``in_flight``: the spout's tuples pending now, which
        may be more than the limit (a limit lowered while none completed); read before a
        stateful bolt only (``commits``)."""
        # any change is a move: the counts only grow, but a stateful task that restarted (its
        # worker's) counts again from 0, and took tuples meanwhile
        if progress is None or self._progress is None or progress != self._progress:
            self._progress_at = now
            self._progress = progress
        samples = self._samples
        if samples:
            t0, done0, expired0 = samples[0]
            if completed > samples[-1][1]:
                self._worked = max(self._worked, self.limit)  # completions came under this limit
            timed_out = expired > expired0 and now >= self._raised_at + self.timeout
            # held at the limit a whole window, or a period since the last such raise: nothing
            # completed yet, so the limit goes on doubling every period (a join that needs
            # 4,000 tuples in flight is reached in 5 + 6 periods, not 6 windows). Not at a
            # limit under which tuples completed before: it is not what holds them then (a
            # bolt that pauses, not a join), and doubled every period of the pause, it filled
            # the queues behind it with more than could be worked off within the timeout.
            # Where the tuples complete only at a stateful bolt's commit, that comes on a timer,
            # not once more tuples are in flight, and when none comes the checkpoints may wait
            # behind a queue (a slow bolt before the stateful one) that a doubled limit only
            # makes longer: no checkpoint went through again (measured: a 10 tuples/s bolt,
            # timeout 2 s, not one commit in 90 s). So there it doubles only once, for a few
            # checkpoint intervals too, nothing completed and the stateful bolts executed
            # nothing (`_commits_not_the_cause`), and
            # never on timeouts, which are a queue's (below). Never doubled, a join of 1,000 ids
            # in opposite orders before a stateful bolt completed nothing at 64 a task, and
            # after the timeouts was held at 1 a task for good
            # (what the spout runs under is what it has in flight: a limit the completion rate
            # raised after a commit's burst, then lowered while none of those tuples completed,
            # left more in flight than any limit tuples completed under, waiting for more in
            # front of a stateful bolt: 959 for a batch of 200 while its spout was held at 512,
            # the limit tuples completed under, and it never doubled again: 64 of 30,000 ids acked).
            # Only there: without commits, in flight above every limit tuples completed under,
            # none completing, is a bolt that paused just after the rate raised the limit, and
            # doubled from it every period of the pause, the limit filled its queue up to the
            # receive buffer (a bolt completing 1,000 tuples a second, its rate rising, paused
            # 10 s: 15,183 timed out, where the limit alone kept none from timing out)
            level = max(self.limit, in_flight) if self.commits else self.limit
            stuck = (held and (len(samples) >= RATE_WINDOW or self._climbing) and level > self._worked
                     and (not self.commits or self._commits_not_the_cause(now)))
            # timeouts double it on the same condition: under a limit tuples completed under,
            # tuples that time out while none completes wait in a queue longer than the timeout
            # (a bolt slower than the limit's worth per timeout), and doubled, the limit let the
            # spout pile replays behind the copies that had timed out (measured: a 10 tuples/s
            # bolt, timeout 2 s, the limit doubled up to the receive buffer; none completed)
            too_low = timed_out and self.limit > self._worked and not self.commits
            if completed == done0 and (too_low or stuck):
                raised = 2 * (level if stuck else self.limit)
                self.floor = self.limit = raised if self.ceiling is None else max(self.limit, min(raised, self.ceiling))
                self._raised_at = now
                self._climbing = stuck
                samples.clear()  # the timeouts seen so far are answered: a new window
            elif now > t0:
                if completed > done0:
                    self._climbing = self._queued = False
                rate = (completed - done0) / (now - t0)
                if expired > expired0 and (completed > done0 or self.limit <= self._worked or self.commits):
                    # timeouts beside completions, or under a limit tuples completed under: a
                    # queue, not a batch. The floor is what the topology completes in the budget,
                    # if that is less: a floor above it keeps a queue longer than the timeout, in
                    # which every tuple times out and its replay joins the queue behind its
                    # timed-out copy: none completes again (a 10 tuples/s bolt, timeout 2 s, 64 in
                    # flight). The limit then halves, a period at a time, down to it
                    self.floor = min(self.base_floor, max(self.tasks, int(rate * self.budget)))
                    # (and before a stateful bolt the limit no longer doubles while none completes:
                    # the queue is what held its tuples, not the limit)
                    self._queued = self._queued or (self.commits and completed == done0)
                self.limit = max(self.floor, int(rate * self.budget), self.limit // 2)
        if not samples or completed > samples[-1][1]:
            self._quiet_since = now
        samples.append((now, completed, expired))
        return self.limit

    def _commits_not_the_cause(self, now: float) -> bool:
        """Whether a spout held at its limit, none of whose tuples completed, waits on the limit
        rather than on a stateful bolt's commits (`update`): for `commit_wait` (a few checkpoint
        intervals) no tuple completed and the stateful bolts executed nothing, and its tuples
        have not timed out without a completion since the last one.

        Both are needed. With no completion for a few intervals, a commit came meanwhile (one
        comes every interval) and acked nothing, or no checkpoint could pass a bolt before the
        stateful one: squall's forwarders pass a checkpoint only once the bolt settled the
        inputs it took before it. A join holds its inputs until their matches come, a batching
        bolt until it has a batch: they settle none, and give the stateful bolt nothing, until
        more are in flight. But a bolt that is merely slow settles its inputs a few at a time,
        and the checkpoints wait behind it too: it passes them on to the stateful bolt, which
        executes them, and doubling the limit only lengthened the queue behind it (measured: a
        bolt passing on 5 tuples a second, 400 ids, message timeout 30 s: doubled on the silence
        alone, 111 acked in 200 s, 656 timeouts, 367 ids counted twice in the state; at 64 in
        flight, all 400 in 80 s, none failed). Only the stateful bolts' inputs that carry this
        spout's tuples count (`squall.engine.stateful_progress`): another spout's, fed to the
        same bolt straight, kept it looking busy. Not known (``progress`` None: a stateful task
        whose worker has not told its counts within a few seconds): never. Nor after timeouts
        with none completed (a queue in front of the checkpoints then, which a higher limit
        only lengthens)."""
        # (commit_wait None: the interval is too long to tell a commit's wait from the limit's
        # within half the timeout, where tuples begin to time out)
        if self.commit_wait is None or self._queued or self._progress is None:
            return False
        return now - max(self._quiet_since, self._raised_at, self._progress_at) >= self.commit_wait


class TaskCounters(Protocol):
    """A spout task's cumulative counters the tuner reads (the executor's `TaskStats`)."""

    acked: int
    latency_sum: float
    latency_count: int


class MaxPending:
    """One spout executor's max spout pending (see the module docstring): ``limit`` is the
    executor's (0: none); `period` is how often `update` must be called (None: never, the
    limit is fixed)."""

    def __init__(self, conf: Mapping[str, Any], tasks: Sequence[int], *, acking: bool, timeouts_on: bool,
                 timeout_secs: float, held_by: Sequence[str] = (), paced: bool = False,
                 committed_by: Sequence[str] = ()) -> None:
        """``paced``: the spout is one of squall's own, which keep their own few tuples in flight
        whatever the limit (the checkpoint spout one step at a time, Trident's master coordinator
        its batches): its timeouts are never a replay storm the limit lets in (`replay_storm`).
        ``committed_by``: the stateful bolts downstream, which ack their inputs at their commits
        (`CompletionRateLimit`'s ``commits``)."""
        msp = conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)
        self.paced = paced
        self.tasks = list(tasks)
        self.acking = acking
        # a bolt downstream that holds its inputs in windows completes them only as the windows
        # move on, an event-time one only once more tuples move its watermark: a limit that
        # follows the completions (null's, or the tuner's) would hold the spout below a window's
        # worth, and stall it
        self.tuners = tuners(conf, tasks, timeout_secs) if msp == AUTO and acking and not held_by else {}
        buffer = int(conf_value(conf, Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE))
        # (at least 100 ms, as the checkpoint spout runs it: Storm's floor)
        checkpoint_secs = max(100.0, float(conf_value(conf, Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL))) / 1000 \
            if committed_by else None
        self.rate = CompletionRateLimit(len(self.tasks), timeout_secs, buffer * len(self.tasks),
                                        commits=bool(committed_by), checkpoint_secs=checkpoint_secs) \
            if timeouts_on and not msp and not held_by else None
        bolts = f"bolt{'s' if len(held_by) > 1 else ''} [{'], ['.join(held_by)}]"
        if msp == AUTO and acking and held_by:
            log.warning("topology.max.spout.pending: auto cannot tune spout tasks %s: %s hold%s their inputs in "
                        "windows, which complete only as the windows move on; no limit instead (set a number to "
                        "bound the tuples in flight)", self.tasks, bolts, "" if len(held_by) > 1 else "s")
        elif timeouts_on and not msp and held_by:
            log.info("no automatic topology.max.spout.pending for spout tasks %s: %s hold%s their inputs in windows "
                     "(Storm's default: no limit; set one to bound the tuples in flight)",
                     self.tasks, bolts, "" if len(held_by) > 1 else "s")
        self.period: float | None = None
        # (named by `replay_storm` when no limit applies)
        self.held_by = (f"{bolts} hold{' their' if len(held_by) > 1 else 's its'} inputs in windows"
                        if held_by else "")
        self.timeout_secs = timeout_secs
        self._seen = (0, 0)  # completed and expired at the last `replay_storm` call
        self._warned = False
        self._blamed = -1  # the breaks counted by the `PeerReach` when a warning last named its peers
        if self.tuners:
            self.limit = sum(t.limit for t in self.tuners.values())
            self.period = interval(conf)
        elif self.rate is not None:
            self.limit, self.period = self.rate.limit, self.rate.period
        elif msp and msp != AUTO:
            self.limit = msp * len(self.tasks)
        else:
            self.limit = 0

    def start(self, now: float, completed: int, expired: int = 0) -> None:
        """The limit's timer starts at ``now``: the completion rate is measured from here."""
        if self.rate is not None:
            self.rate.update(now, completed, expired)

    def update(self, now: float, stats: Mapping[int, TaskCounters], completed: int, expired: int = 0,
               expired_by_task: Mapping[int, int] | None = None, held: bool = False,
               progress: int | None = None, in_flight: int = 0) -> int:
        """Feed the counters at ``now``: each task's, the tuples completed (acked or failed,
        not by a timeout) by all of them, those that timed out (in all, and by task), whether
        the executor is held at its limit now, the inputs the stateful bolts downstream
        executed so far (None: not known; `CompletionRateLimit.update`), and the tuples it has
        in flight. Returns the executor's limit."""
        if self.tuners:
            by_task = expired_by_task or {}
            self.limit = sum(tuner.update(now, stats[t].acked, stats[t].latency_sum, stats[t].latency_count,
                                          by_task.get(t, 0), held)
                             for t, tuner in self.tuners.items())
        elif self.rate is not None:
            self.limit = self.rate.update(now, completed, expired, held, progress, in_flight)
        return self.limit

    def replay_storm(self, completed: int, expired: int, reach: PeerReach | None = None) -> str | None:
        """Call at every timeout rotation with the executor's cumulative counters: tuples
        completed (acked or failed by the topology) and timed out. A fixed limit (a number) under
        which more tuples timed out since the last call than completed lets more wait than the
        topology completes within the message timeout: their replays queue behind copies that
        already failed, and may never complete (Storm's replay storm; measured, 0 acks in 150 s
        while the bolt worked). Returns the warning to log, naming the settings that end it
        (the first such rotation only), else None. The other limits follow the completions.

        But while a peer worker was unreachable within the message timeout (``reach``: this
        worker's wire's), the tuples that crossed to it timed out for that, whatever the limit:
        the warning names the peer instead (once per break), and the limit's stays due."""
        (done_before, expired_before), self._seen = self._seen, (completed, expired)
        done, timed_out = completed - done_before, expired - expired_before
        if self.paced or self.rate is not None or self.tuners or timed_out <= done:
            return None
        peers = reach.recent(self.timeout_secs) if reach is not None else []
        if peers:
            assert reach is not None
            if reach.breaks == self._blamed:
                return None
            self._blamed = reach.breaks
            return (f"{timed_out} tuples timed out in the last {self.timeout_secs:g} s and {done} completed while "
                    f"this worker could not reach {'; '.join(peers)}: what crossed to it fails at "
                    f"{Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS} and replays once it is reached again "
                    f"(not a matter of {Config.TOPOLOGY_MAX_SPOUT_PENDING})")
        if self._warned:
            return None
        self._warned = True
        if not self.limit:
            # no limit (null before a windowed bolt, Storm's default; or 0): the same storm,
            # which a slow bolt before the window started and nothing named (measured: 14 of 200
            # records acked in 60 s, 2,790 timeouts)
            held = f" ({self.held_by})" if self.held_by else ""
            return (f"{timed_out} tuples timed out in the last {self.timeout_secs:g} s and {done} completed, with no "
                    f"{Config.TOPOLOGY_MAX_SPOUT_PENDING}{held}: the spout emits more than the topology completes "
                    f"within {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS} ({self.timeout_secs:g} s), and the replays queue "
                    f"behind copies that already failed (a replay storm: they may never complete). Set "
                    f"{Config.TOPOLOGY_MAX_SPOUT_PENDING} to at most what the slowest bolt completes in half the "
                    f"message timeout (and at least a window's worth of tuples), or raise "
                    f"{Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS}")
        per_task = self.limit // len(self.tasks)
        return (f"{timed_out} tuples timed out in the last {self.timeout_secs:g} s and {done} completed: "
                f"{Config.TOPOLOGY_MAX_SPOUT_PENDING} {per_task} (per task) lets more tuples wait than the topology "
                f"completes within {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS} ({self.timeout_secs:g} s), and their "
                f"replays queue behind copies that already failed (a replay storm: they may never complete). "
                f"Leave {Config.TOPOLOGY_MAX_SPOUT_PENDING} null (a limit that follows the completion rate), set it "
                f"to at most what the slowest bolt completes in half the message timeout, or raise "
                f"{Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS}")

    def task_limit(self, task: int) -> int:
        """Task ``task``'s share of the limit now, for its statistics (0: no limit applies)."""
        if not self.acking:
            return 0
        if self.tuners:
            return self.tuners[task].limit
        return self.limit // len(self.tasks)
