"""One module decides a spout executor's max spout pending (squall/engine/pending_tuner.py's
MaxPending): a fixed number per task, the limit that follows the completion rate (null, with
acking and timeouts on), or the tuner ("auto"). Pure: time and counters passed in."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from squall.engine.pending_tuner import (
    AUTO_PENDING_FLOOR,
    INTERVAL_KEY,
    MIN_KEY,
    CompletionRateLimit,
    MaxPending,
    PendingTuner,
    tuners,
)
from squall.engine.transport import PeerReach

MSP = "topology.max.spout.pending"


def limit(conf: dict, *, acking: bool = True, timeouts_on: bool = True, timeout: float = 30.0) -> MaxPending:
    return MaxPending(conf, [1, 2], acking=acking, timeouts_on=timeouts_on, timeout_secs=timeout)


def test_a_number_is_per_task_and_fixed():
    m = limit({MSP: 100})
    assert (m.limit, m.period, m.task_limit(1)) == (200, None, 100)


def test_null_follows_the_completion_rate_only_with_acking_and_timeouts():
    m = limit({MSP: None}, timeout=3.0)
    assert isinstance(m.rate, CompletionRateLimit) and not m.tuners
    assert (m.limit, m.period) == (2 * AUTO_PENDING_FLOOR, 0.3)        # a tenth of the timeout
    assert limit({MSP: None}, timeout=30.0).period == 1.0                # at most 1 s
    for off in (limit({MSP: None}, timeouts_on=False), limit({MSP: None}, acking=False, timeouts_on=False)):
        assert (off.limit, off.period, off.rate) == (0, None, None)     # Storm's unlimited null


def test_null_sets_no_limit_for_spouts_before_a_bolt_that_holds_its_inputs_in_windows():
    """A window completes its inputs only as it moves on (an event-time one when later tuples
    move the watermark): a limit following the completions would stall it. Storm's null then."""
    m = MaxPending({MSP: None}, [1, 2], acking=True, timeouts_on=True, timeout_secs=30.0, held_by=["window"])
    assert (m.limit, m.period, m.rate) == (0, None, None)
    fixed = MaxPending({MSP: 100}, [1, 2], acking=True, timeouts_on=True, timeout_secs=30.0, held_by=["window"])
    assert (fixed.limit, fixed.period) == (200, None)                  # a number set stays
    tuned = MaxPending({MSP: "auto"}, [1, 2], acking=True, timeouts_on=True, timeout_secs=30.0, held_by=["window"])
    assert (tuned.limit, tuned.period, tuned.tuners) == (0, None, {})  # the tuner would stall as well


def test_auto_is_a_tuner_per_task_and_the_limit_their_sum():
    m = limit({MSP: "auto", MIN_KEY: 8, INTERVAL_KEY: 0.5})
    assert sorted(m.tuners) == [1, 2] and all(isinstance(t, PendingTuner) for t in m.tuners.values())
    assert (m.limit, m.period, m.task_limit(2)) == (16, 0.5, 8)
    assert (limit({MSP: "auto"}, acking=False).limit, limit({MSP: "auto"}, acking=False).task_limit(1)) == (0, 0)
    stats = {t: SimpleNamespace(acked=0, latency_sum=0.0, latency_count=0) for t in (1, 2)}
    m.start(0.0, 0)
    assert m.update(0.5, stats, 0) == 16                                  # nothing completed: no news


def test_the_rate_limit_is_completions_times_half_the_timeout_never_below_the_floor_nor_halved_past():
    # 2 tasks, timeout 10 s: floor 128, budget 5 s of completions, a window of 5 periods of 1 s
    r = CompletionRateLimit(2, 10.0)
    assert (r.floor, r.budget, r.period, r.limit) == (128, 5.0, 1.0, 128)
    assert r.update(0.0, 0) == 128                     # starts the window
    assert r.update(1.0, 1000) == 5000                 # 1000/s x 5 s
    assert r.update(2.0, 1000) == 2500                 # 500/s over [0, 2]: 2500, and not below half of 5000
    assert r.update(3.0, 1000) == 1666                 # 333/s -> 1666 (half of 2500 is 1250)
    # the window is 5 periods: until t=6 it still reaches back to t=0 (1000 in 4, 5, 6 s)
    assert [r.update(t, 1000) for t in (4.0, 5.0, 6.0)] == [1250, 1000, 833]
    # from t=7 it starts after the burst: nothing completes, so the limit halves down to the floor
    assert [r.update(t, 1000) for t in (7.0, 8.0, 9.0, 10.0)] == [416, 208, 128, 128]


def test_the_rate_limit_doubles_its_floor_when_tuples_time_out_and_none_completes():
    """A bolt that acks in batches larger than the limit completes nothing under it: the
    limit (and with it the floor) doubles on such timeouts, at most once per message timeout,
    up to the ceiling; a slow bolt, which still completes some, does not raise it."""
    r = CompletionRateLimit(1, 2.0, ceiling=300)   # floor 64, periods of 0.2 s
    assert [r.update(t, 0, 0) for t in (0.0, 0.2)] == [64, 64]
    assert r.update(4.0, 0, 64) == 128             # 64 timed out, nothing completed
    assert r.update(4.2, 0, 64) == 128             # no new timeout: the floor holds
    assert r.update(5.0, 0, 128) == 128            # within a timeout of the last doubling
    assert r.update(6.0, 0, 192) == 256
    assert [r.update(t, 0, 192) for t in (6.2, 7.0, 7.8)] == [256, 256, 256]  # never halves below
    assert r.update(8.0, 0, 320) == 300            # the ceiling
    assert r.update(10.0, 0, 600) == 300
    assert r.update(10.2, 60_000, 600) == 300_000  # batches flow: the rate (300,000/s x 1 s) decides again
    assert r.floor == 300                          # and the raised floor stays
    assert r.update(12.0, 60_010, 700) == 150_000  # timeouts beside completions: a queue again,
    assert r.floor == 64                           # so the floor is back to 64 (the limit halves)
    slow = CompletionRateLimit(1, 2.0, ceiling=300)
    assert slow.update(0.0, 0, 0) == 64
    assert slow.update(4.0, 10, 64) == 32          # some completed: the timeouts are the queue's, so
    assert slow.floor == 2                         # the floor is what completes in 1 s (2.5/s), and the
    assert slow.update(4.2, 10, 64) == 16          # limit halves down to it, a period at a time


def test_the_ceiling_of_the_rate_limit_is_the_receive_buffer_per_task():
    m = MaxPending({MSP: None, "topology.executor.receive.buffer.size": 500}, [1, 2], acking=True,
                   timeouts_on=True, timeout_secs=2.0)
    assert m.rate is not None and m.rate.ceiling == 1000


def test_the_rate_limit_doubles_while_the_spout_is_held_at_it_and_nothing_completes():
    """A join (Storm's SingleJoinBolt) acks a tuple only when its match from the other stream
    comes, which may be more than the limit's worth of tuples later: nothing completes, and under
    the limit every tuple would time out. Held at the limit a whole window with no completion,
    the limit doubles, before any tuple times out, then every period until one completes."""
    r = CompletionRateLimit(1, 10.0, ceiling=1000)  # floor 64, periods of 1 s, a window of 5
    assert r.update(0.0, 0, held=True) == 64
    assert [r.update(t, 0, held=True) for t in (1.0, 2.0, 3.0, 4.0)] == [64] * 4  # not yet a window
    assert r.update(5.0, 0, held=True) == 128      # a window held, nothing completed: double
    assert r.update(6.0, 0, held=True) == 256      # still nothing: double every period now
    assert r.update(7.0, 0, held=False) == 256     # the spout is not at its limit: no need to grow
    assert r.update(8.0, 0, held=True) == 512
    assert r.update(9.0, 0, held=True) == 1000     # the ceiling
    assert r.update(10.0, 5000, held=True) == 25000  # the joins flow: the rate decides again
    assert r.floor == 1000
    assert r.update(11.0, 5000, held=True) == 12500  # no completion this period, but one in the
    #                                                  window: the limit halves, it does not double
    idle = CompletionRateLimit(1, 10.0)
    assert [idle.update(float(t), 0) for t in range(12)] == [64] * 12  # not held: an idle spout keeps 64
    busy = CompletionRateLimit(1, 10.0)
    assert [busy.update(float(t), 10 * t, held=True) for t in range(7)][-1] == 64 * 1  # completing: no doubling


def _paused_bolt(update, limit_of, *, rate: int, pause: tuple[float, float], timeout: float = 30.0,
                 until: float = 300.0, ramp_secs: float = 0.0) -> tuple[int, int]:
    """A spout held at its limit over one bolt completing ``rate`` tuples a second in arrival
    order (rising from 0 over the first ``ramp_secs``), which pauses from ``pause[0]`` to
    ``pause[1]`` (a lock in its database, say); every 0.1 s the spout fills up to the limit,
    tuples older than ``timeout`` time out, the bolt works; every second ``update(now,
    completed, expired, held, in_flight)`` gives the limit. Returns (completed, timed out)."""
    from collections import deque
    waiting: deque[float] = deque()  # emit times, oldest first
    completed = expired = 0
    step, tick, now = 0.1, 0, 0.0
    update(0.0, 0, 0, False, 0)
    while now < until:
        while len(waiting) < limit_of():
            waiting.append(now)
        held = len(waiting) >= limit_of()
        while waiting and now - waiting[0] >= timeout:
            waiting.popleft()
            expired += 1
        if not pause[0] <= now < pause[1]:
            now_rate = rate * min(1.0, now / ramp_secs) if ramp_secs else rate
            for _ in range(min(len(waiting), int(now_rate * step))):
                waiting.popleft()
                completed += 1
        tick += 1
        now = tick * step
        if tick % 10 == 0:
            update(now, completed, expired, held, len(waiting))
    return completed, expired


def test_a_bolt_that_pauses_makes_no_tuple_time_out_after_it():
    """A bolt that completed its tuples at a steady rate pauses for 10 s (shorter than the
    timeout): the spout is held at its limit with nothing completing, which also is what a join
    waiting for its matches looks like, and the limit doubled every second from the fifth
    (up to the receive buffer) and stayed raised as its floor. The spout filled the queue with
    all that, which the bolt could not work off within the message timeout once it went on:
    1,000 tuples a second, 6,000 timed out (replayed, or lost for a spout that does not
    replay); 100 a second, 2,700. Before the held rule, none. The limit a completion was seen
    under is not what holds the topology back: it does not climb there."""
    for rate in (1000, 100):
        r = CompletionRateLimit(1, 30.0, ceiling=32768)
        done, expired = _paused_bolt(lambda now, c, e, held, in_flight: r.update(now, c, e, held, in_flight=in_flight),
                                     lambda: r.limit, rate=rate, pause=(100.0, 110.0))
        assert expired == 0, (rate, expired, r.limit)
        assert done >= rate * 280 * 0.95, (rate, done)
    # the tuner (max spout pending auto), whose limit the same rule doubles
    tuner = PendingTuner(16, 10_000, stall_intervals=5)
    done, expired = _paused_bolt(lambda now, c, e, held, _in_flight: tuner.update(now, c, 0.0, 0, e, held),
                                 lambda: tuner.limit, rate=100, pause=(100.0, 110.0))
    assert expired == 0, (expired, tuner.limit)


def test_a_bolt_that_pauses_while_its_rate_rises_makes_no_tuple_time_out_after_it():
    """The same pause while the bolt's completion rate still rises (from 0 to its rate over a
    minute), the spout's tuples in flight given to the limit as the spout gives them: the rate
    had just raised the limit, none completed under it, and what was in flight, above every
    limit tuples completed under, doubled it every second of the pause up to the receive buffer
    (1,000 tuples a second: 15,183 timed out; 100 a second: 9,100). In flight counts only
    before a stateful bolt, whose tuples complete at its commits."""
    for rate in (1000, 100):
        for start in (20.0, 30.0, 40.0):
            r = CompletionRateLimit(1, 30.0, ceiling=32768)
            done, expired = _paused_bolt(
                lambda now, c, e, held, in_flight, r=r: r.update(now, c, e, held, in_flight=in_flight),
                lambda r=r: r.limit, rate=rate, pause=(start, start + 10.0), ramp_secs=60.0)
            assert expired == 0, (rate, start, expired, r.limit)
            assert done >= rate * 250 * 0.95, (rate, start, done)


def _replaying_slow_bolt(r: Any, *, service: float, timeout: float, until: float,
                         step: float = 0.01) -> tuple[int, int]:
    """A spout that replays each tuple that times out (its pending map a 2-bucket `RotatingMap`
    rotated every ``timeout``), into one bolt taking ``service`` s a tuple in arrival order,
    whose inbox keeps the copies that timed out: the bolt works on them all the same (Storm's
    replay storm). Every period ``r`` gives the limit. Returns (completed, timed out) over the
    second half of the run."""
    from collections import deque

    from squall.engine.rotating_map import RotatingMap
    expired_now: list[int] = []
    pending = RotatingMap(2, lambda root, _emitted: expired_now.append(root))
    inbox: deque[int] = deque()
    completed = expired = next_root = tick = 0
    half = (0, 0)
    work = 0.0
    r.update(0.0, 0, 0, False)
    period, rotation, end = round(r.period / step), round(timeout / step), round(until / step)
    while tick < end:
        while len(pending) < r.limit:
            pending.put(next_root, tick)
            inbox.append(next_root)
            next_root += 1
        held = len(pending) >= r.limit
        work += step
        while inbox and work >= service:
            work -= service
            if pending.remove(inbox.popleft()) is not None:  # else a copy that timed out: work lost
                completed += 1
        if not inbox:
            work = 0.0
        tick += 1
        if tick % rotation == 0:
            pending.rotate()
            expired += len(expired_now)
            expired_now.clear()
        if tick % period == 0:
            r.update(tick * step, completed, expired, held)
        if tick == end // 2:
            half = (completed, expired)
    return completed - half[0], expired - half[1]


def test_a_bolt_slower_than_the_floor_per_timeout_completes_its_tuples_without_a_replay_storm():
    """A bolt calling a slow service (10 and 5 tuples/s) under a 2 s and a 5 s message
    timeout: the floor of 64 in flight is more than it works off within the timeout, so every
    tuple timed out in its inbox, none completed, and the limit, taking that for a batch it was
    too low for, doubled up to the receive buffer: every replay queued behind its timed-out
    copy, and nothing completed again (on LocalCluster: 14 of 200 records acked, 3,970
    timeouts in 90 s). Under a limit tuples completed under, timeouts are a queue's: the floor
    drops to what completes in half the timeout, and every tuple completes."""
    for service, timeout in ((0.1, 2.0), (0.2, 5.0)):
        r = CompletionRateLimit(1, timeout, ceiling=32768)
        done, expired = _replaying_slow_bolt(r, service=service, timeout=timeout, until=40 * timeout)
        assert expired == 0, (service, expired, r.limit)
        assert done >= 0.95 * 20 * timeout / service, (service, done)
        assert r.limit < 64, (service, r.limit)


class _Tuned:
    """A `PendingTuner` as `_replaying_slow_bolt` drives a limit (no latencies timed)."""

    period = 1.0  # topology.max.spout.pending.auto.interval.secs

    def __init__(self, tuner: PendingTuner) -> None:
        self.tuner = tuner

    @property
    def limit(self) -> int:
        return self.tuner.limit

    def update(self, now: float, completed: int, expired: int, held: bool) -> int:
        return self.tuner.update(now, completed, 0.0, 0, expired, held)


def test_the_tuner_halves_when_its_probe_times_tuples_out_in_a_queue():
    """max spout pending auto over a bolt of 10 tuples/s, timeout 2 s: the tuner's probe of 64
    in flight timed tuples out in the bolt's inbox, none was acked, and it doubled the limit as
    for a batch it was too low for, up to its maximum: 100,000 timeouts, none acked. Timeouts
    under a limit tuples were acked under, or at one that timed them out so before, halve it,
    and its probes stay below that one."""
    tuned = _Tuned(PendingTuner(16, 10_000, stall_intervals=1))
    done, expired = _replaying_slow_bolt(tuned, service=0.1, timeout=2.0, until=80.0)
    assert expired == 0, (expired, tuned.limit)
    assert done >= 0.95 * 400, done


def test_the_tuner_climbs_back_after_an_outage_that_timed_tuples_out():
    """max spout pending auto at 1,024 (20,000 tuples/s, 50 ms each), its store down 10 s:
    tuples timed out with none acked, and each interval's halving also lowered the cap on
    probes, to 16, for the task's life: 320 tuples/s after the store was back. The cap now
    rises again to what is completed within half the timeout."""
    tuner = tuners({MSP: "auto"}, [1], timeout_secs=30.0)[1]
    acked = expired = 0
    latency = 0.0
    limits = []
    for s in range(1, 400):
        if 120 <= s < 130:  # the store is down: what is in flight times out
            expired += tuner.limit
        else:
            n = int(min(tuner.limit / 0.05, 20_000))
            acked += n
            latency += n * max(0.05, tuner.limit / 20_000)
        limits.append(tuner.update(float(s), acked, latency, acked, expired, held=True))
    assert limits[110] >= 1_000 and limits[125] < 100, limits  # climbed, then halved in the outage
    assert min(limits[-60:]) >= 500, limits[-60:]  # (the re-probes go down too; 16 before)


def test_a_fixed_limit_under_which_tuples_time_out_faster_than_they_complete_is_named_as_a_replay_storm():
    """A spout capped at 5,000 ids/s into a sink taking 2 ms an id, message timeout 5 s, max
    spout pending 100,000 (as Storm's unlimited default): 4,404 ids acked in the first 8 s, then
    none in 150 s while the sink worked on copies already failed, and nothing said why. The
    first rotation that times out more tuples than completed names the settings that end it;
    once only. A limit that follows the completions (null, auto) is never named."""
    m = limit({MSP: 100_000}, timeout=5.0)
    assert m.replay_storm(completed=2_000, expired=0) is None  # a slow start: nothing timed out
    assert m.replay_storm(completed=4_404, expired=300) is None  # fewer timed out than completed
    warning = m.replay_storm(completed=4_404, expired=20_903)
    assert warning is not None
    for named in ("20603 tuples timed out in the last 5 s and 0 completed", "topology.max.spout.pending 100000",
                  "topology.message.timeout.secs (5 s)", "replay storm", "null"):
        assert named in warning, (named, warning)
    assert m.replay_storm(completed=4_404, expired=40_000) is None  # said once
    for conf in ({}, {MSP: "auto"}):
        follows = limit(conf, timeout=5.0)
        assert follows.replay_storm(0, 0) is None and follows.replay_storm(0, 20_000) is None


def test_the_rate_limit_of_a_spout_before_a_stateful_bolt_never_doubles_and_lowers_its_floor_on_timeouts():
    """A stateful bolt acks its inputs at its commits, on a timer, not once more tuples are in
    flight. Behind a slow bolt before it, every checkpoint waited in that bolt's queue and timed
    out, so nothing completed; the limit, held with no completion and then timed out, doubled
    up to the receive buffer, and the queue that held the checkpoints only grew: on LocalCluster
    (10 tuples/s bolt, timeout 2 s) not one commit in 90 s. Now it never doubles there, and
    timeouts with no completion are a queue's: the floor drops and the limit halves, the queue
    drains, a checkpoint goes through (200 of 200 records acked in 45 s)."""
    r = CompletionRateLimit(1, 2.0, ceiling=300, commits=True)   # floor 64, periods of 0.2 s
    assert [r.update(t / 5, 0, 0, held=True) for t in range(12)] == [64] * 12  # held, nothing completed
    assert r.update(2.6, 0, 64, held=True) == 32     # timed out: a queue, not a limit too low
    assert r.floor == 1
    assert [r.update(t, 0, 64, held=True) for t in (2.8, 3.0)] == [16, 8]
    # the commits flow, 2 tuples every 0.2 s: the rate decides (10/s x 1 s)
    assert [r.update(3.0 + t / 5, 2 * t, 64, held=True) for t in range(1, 11)][-1] in (9, 10)  # (rounded down)
    m = MaxPending({}, [1], acking=True, timeouts_on=True, timeout_secs=2.0, committed_by=["count"])
    assert m.rate is not None and m.rate.commits


def test_a_stateful_bolt_says_its_inputs_complete_at_its_commits():
    from squall.state import StatefulBoltExecutor
    assert StatefulBoltExecutor.squall_acks_at_commit


def test_a_replay_storm_with_no_limit_before_a_windowed_bolt_is_named_too():
    """A slow bolt before a windowed one: null sets no limit there (Storm's default), every
    tuple timed out in the slow bolt's inbox and replayed behind its timed-out copy: 14 of 200
    records acked in 60 s, 2,790 timeouts on LocalCluster, and nothing said why (the warning
    was for a fixed limit only). Now the first such rotation names it, once."""
    m = MaxPending({}, [1], acking=True, timeouts_on=True, timeout_secs=2.0, held_by=["window"])
    assert m.limit == 0 and m.rate is None
    assert m.replay_storm(completed=10, expired=5) is None  # fewer timed out than completed
    warning = m.replay_storm(completed=10, expired=200)
    assert warning is not None
    for named in ("195 tuples timed out in the last 2 s and 0 completed", "with no topology.max.spout.pending",
                  "bolt [window] holds its inputs in windows", "replay storm", "a window's worth"):
        assert named in warning, (named, warning)
    assert m.replay_storm(completed=10, expired=400) is None  # said once


def test_tuples_that_time_out_while_a_peer_is_unreachable_name_the_peer_not_max_spout_pending():
    """Two workers cut off from each other for 25 s on the ZeroMQ wire (message timeout 10 s,
    max spout pending 50): the only line the user saw blamed topology.max.spout.pending for a
    replay storm, and named no worker. The wire notes the peers it cannot reach (`PeerReach`,
    on an injected clock); a rotation that times out more than completes while one is, or was
    within the message timeout, names it instead, once per break; the limit's warning stays due
    for a real storm after."""
    clock = [100.0]
    reach = PeerReach(lambda: clock[0])
    reach.components = lambda tasks: ["sink"]
    peer = reach.describe("10.0.0.3:6700", [4, 3])
    assert peer == "the worker at 10.0.0.3:6700 (tasks 3, 4: sink)"
    assert reach.made("k") is None  # a first connection is no recovery
    assert reach.broke("k", peer) and not reach.broke("k", peer)  # said once per break
    assert reach.breaks == 1 and reach.away() == ["k"]
    m = limit({MSP: 50}, timeout=10.0)
    clock[0] = 112.0
    warning = m.replay_storm(completed=50, expired=100, reach=reach)
    assert warning is not None
    for named in ("100 tuples timed out in the last 10 s and 50 completed", "could not reach", peer,
                  "unreachable for 12 s now", "not a matter of topology.max.spout.pending"):
        assert named in warning, (named, warning)
    assert "replay storm" not in warning
    assert m.replay_storm(completed=50, expired=200, reach=reach) is None  # this break was named
    assert reach.made("k") == 12.0 and reach.away() == [] and reach.made("k") is None
    clock[0] = 121.0  # back 9 s ago, within the timeout: what timed out still crossed to it
    assert reach.recent(10.0) == [f"{peer} (unreachable until 9 s ago)"]
    clock[0] = 130.0  # back 18 s ago: not the cause any more; the limit is named, once
    assert reach.recent(10.0) == []
    storm = m.replay_storm(completed=50, expired=300, reach=reach)
    assert storm is not None and "replay storm" in storm and "topology.max.spout.pending 50 (per task)" in storm
    assert reach.broke("k", peer)  # a second break is named again
    assert m.replay_storm(completed=50, expired=400, reach=reach) is not None
    reach.forget("k")
    assert reach.away() == [] and reach.recent(10.0) == []


def test_the_rate_limit_of_a_spout_before_a_stateful_bolt_doubles_when_neither_a_commit_nor_the_bolt_moved():
    """A join (or a bolt that acks in batches) in front of a stateful bolt settles nothing, and
    gives the stateful bolt nothing, until more than the limit's worth of tuples is in flight; the
    commits, every checkpoint interval, ack nothing. Held at 64 a task, a join of 1,000 ids in
    opposite orders acked none, its tuples timed out, and the limit fell to 1 a task for good.
    Held with no completion for a window and three checkpoint intervals, while the stateful bolts
    executed nothing, the limit doubles now, then every three intervals until one completes."""
    r = CompletionRateLimit(1, 30.0, ceiling=32768, commits=True, checkpoint_secs=1.0)  # periods of 1 s
    assert r.commit_wait == 3.0
    assert [r.update(float(t), 0, held=True, progress=7) for t in range(5)] == [64] * 5
    assert r.update(5.0, 0, held=True, progress=7) == 128     # a window, 3 intervals, the bolt still
    assert [r.update(t, 0, held=True, progress=7) for t in (6.0, 7.0)] == [128, 128]  # a commit may come
    assert r.update(8.0, 0, held=True, progress=7) == 256     # three intervals more with none
    assert r.update(9.0, 0, held=False, progress=7) == 256    # not held: no need to grow
    assert r.update(10.0, 0, held=True, progress=31) == 256   # some joined, and reached the stateful bolt:
    assert r.update(12.0, 0, held=True, progress=31) == 256   # its commit may come yet
    assert r.update(13.0, 0, held=True, progress=31) == 512   # three intervals and it did not
    assert r.update(14.0, 900, held=True, progress=900) == 13500  # the commits ack: the rate decides
    assert r.floor == 512
    assert [r.update(t, 900 * (t - 13), held=True, progress=900) for t in (15.0, 16.0)] == [13500, 13500]
    # at a limit tuples completed under, held with none completing is a pause, not the limit
    after = [r.update(float(t), 2700, held=True, progress=2700) for t in range(17, 45)]
    assert after == sorted(after, reverse=True) and after[-1] == 512  # halves down to the floor, never doubles


def test_the_rate_limit_of_a_spout_before_a_stateful_bolt_never_doubles_behind_a_bolt_that_is_merely_slow():
    """A slow bolt before the stateful one holds the checkpoints behind the inputs it has not
    settled, so nothing completes for as long as it works off the limit's worth; but it passes
    tuples on, and the stateful bolt executes them. Doubled as for a join (a bolt passing on 5
    tuples a second, 400 ids, timeout 30 s), the queue outgrew the timeout: none of 400 acked,
    all timed out. Nor does it double when the stateful bolts' executions are not known (a task
    in another worker), after timeouts with none completed (a queue), or when three intervals
    are not shorter than half the timeout (a long interval, a short timeout)."""
    slow = CompletionRateLimit(1, 30.0, ceiling=32768, commits=True, checkpoint_secs=1.0)
    assert {slow.update(float(t), 0, held=True, progress=5 * t) for t in range(30)} == {64}
    unknown = CompletionRateLimit(1, 30.0, ceiling=32768, commits=True, checkpoint_secs=1.0)
    assert {unknown.update(float(t), 0, held=True, progress=None) for t in range(30)} == {64}
    q = CompletionRateLimit(1, 30.0, ceiling=32768, commits=True, checkpoint_secs=1.0)
    assert [q.update(float(t), 0, expired=64 if t >= 4 else 0, held=True, progress=0) for t in range(12)][-1] == 1
    assert q.floor == 1
    for timeout, interval in ((30.0, 5.0), (2.0, 1.0)):
        late = CompletionRateLimit(1, timeout, ceiling=32768, commits=True, checkpoint_secs=interval)
        assert late.commit_wait is None
        assert {late.update(t * late.period, 0, held=True, progress=0) for t in range(100)} == {64}


def test_max_pending_gives_the_rate_limit_of_a_spout_before_a_stateful_bolt_its_checkpoint_interval():
    m = MaxPending({"topology.state.checkpoint.interval.ms": 500}, [1], acking=True, timeouts_on=True,
                   timeout_secs=30.0, committed_by=["sum"])
    assert m.rate is not None and m.rate.commits and m.rate.commit_wait == 1.5
    floor = MaxPending({"topology.state.checkpoint.interval.ms": 10}, [1], acking=True, timeouts_on=True,
                       timeout_secs=30.0, committed_by=["sum"])
    assert floor.rate is not None and round(floor.rate.commit_wait, 9) == 0.3  # the checkpoint spout's 100 ms at least
    assert limit({}).rate.commit_wait is None                        # no stateful bolt downstream


def test_a_stateful_task_counting_again_from_zero_has_taken_tuples():
    """The stateful bolts count their data inputs exactly, so the counts only grow; but a task
    that restarted (its worker did) counts again from 0: a count that fell took tuples as much
    as one that rose, and the three intervals start again from it."""
    r = CompletionRateLimit(1, 30.0, ceiling=32768, commits=True, checkpoint_secs=1.0)
    told = [7, 7, 7, 2, 2, 2, 2]
    assert [r.update(float(t), 0, held=True, progress=p) for t, p in enumerate(told)] == [64] * 6 + [128]


def test_a_limit_lowered_below_what_is_in_flight_before_a_stateful_bolt_still_doubles():
    """A bolt acking every 200 inputs before a stateful bolt in another worker (the process
    host, 30,000 ids): the limit doubled up to 512, the first commit acked 64 tuples, and the
    completion rate of that burst raised it to 960 for a period; 959 were in flight when it fell
    back to 512, the limit those 64 completed under. The batching bolt held the last 59 of them,
    and the checkpoint waited behind them: nothing completed, the stateful bolt took nothing,
    and, 512 being a limit tuples completed under, it never doubled again (64 of 30,000 acked,
    959 timed out). What the spout runs under is what it has in flight: 959, under which none
    completed, so it doubles from there."""
    r = CompletionRateLimit(1, 30.0, ceiling=32768, commits=True, checkpoint_secs=1.0)
    r.update(0.0, 0)
    limits = []
    for t in range(1, 30):
        done = 64 if t >= 14 else 0  # the first commit
        progress = 0 if t < 10 else 200 if t < 14 else 400 if t == 14 else 1000  # batches the stateful bolt took
        in_flight = 959 if t >= 14 else r.limit
        limits.append(r.update(float(t), done, held=in_flight >= r.limit, progress=progress, in_flight=in_flight))
    assert limits[12:16] == [512, 960, 512, 512]  # the burst's rate, then back to the floor
    assert limits[-1] == 1918  # 3 intervals later: twice what is in flight
