"""The pure windowing core on made-up times (Storm's WindowManagerTest and
WaterMarkEventGeneratorTest are the model): windows, new and expired tuples, expiry (the ack
point), watermarks and late tuples."""

from __future__ import annotations

import pytest

from squall._fields import Fields
from squall._tuple import Source, Tuple
from squall.windowing import BaseWindowedBolt, Count, Duration
from squall.windowing.executor import WindowedBoltExecutor
from squall.windowing.manager import EXPIRE_EVENTS_THRESHOLD, window_manager
from squall.windowing.watermark import WatermarkGenerator


class Listener:
    """Records every activation ``(window, new, expired, end)`` and every expired event."""

    def __init__(self) -> None:
        self.windows: list[tuple[list, list, list, int | None]] = []
        self.expired: list = []

    def on_expiry(self, events):
        self.expired.extend(events)

    def on_activation(self, events, new, expired, end_ts):
        self.windows.append((list(events), list(new), list(expired), end_ts))

    def got(self):
        return [w[0] for w in self.windows]


def test_count_sliding_window_fires_every_sliding_count_over_the_last_length():
    lis = Listener()
    m = window_manager(lis, Count(5), Count(2))
    for i in range(1, 11):
        m.add(i, 1000 + i)
    assert lis.got() == [[1, 2], [1, 2, 3, 4], [2, 3, 4, 5, 6], [4, 5, 6, 7, 8], [6, 7, 8, 9, 10]]
    assert [w[1] for w in lis.windows] == [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]
    assert [w[2] for w in lis.windows] == [[], [], [1], [2, 3], [4, 5]]
    assert lis.windows[-1][3] == 1010  # a count window ends when it fired
    assert lis.expired == [1, 2, 3, 4, 5]  # acked as they leave their last window, not before


def test_count_tumbling_window_puts_each_event_in_one_window():
    lis = Listener()
    m = window_manager(lis, Count(3), Count(3))
    for i in range(1, 10):
        m.add(i, i)
    assert lis.got() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [w[2] for w in lis.windows] == [[], [1, 2, 3], [4, 5, 6]]
    assert lis.expired == [1, 2, 3, 4, 5, 6]


def test_default_sliding_interval_fires_on_every_tuple():
    lis = Listener()
    m = window_manager(lis, Count(2), Count(1))
    for i in range(1, 4):
        m.add(i, i)
    assert lis.got() == [[1], [1, 2], [2, 3]]


def test_processing_time_sliding_window_holds_what_arrived_in_the_last_length():
    lis = Listener()
    m = window_manager(lis, Duration(20), Duration(10))
    for ts in (1, 5, 9):
        m.add(ts, ts)
    m.on_time(10)
    for ts in (12, 19):
        m.add(ts, ts)
    m.on_time(20)
    m.add(25, 25)
    m.on_time(30)
    m.on_time(40)  # 25 is still in (20, 40]
    m.on_time(50)  # nothing in (30, 50]: no call
    assert lis.got() == [[1, 5, 9], [1, 5, 9, 12, 19], [12, 19, 25], [25]]
    assert [w[3] for w in lis.windows] == [10, 20, 30, 40]
    assert [w[2] for w in lis.windows] == [[], [], [1, 5, 9], [12, 19]]
    assert lis.expired == [1, 5, 9, 12, 19, 25]


def test_a_late_timer_lengthens_its_window_so_no_tuple_is_skipped():
    lis = Listener()
    m = window_manager(lis, Duration(10), Duration(10))  # tumbling
    m.add("a", 5)
    m.on_time(10)
    m.add("b", 12)
    m.add("c", 21)
    m.on_time(25)  # fired 5 ms late: (10, 25] rather than (15, 25]
    assert lis.got() == [["a"], ["b", "c"]]


def test_an_event_arriving_in_the_millisecond_after_its_window_fired_is_stamped_into_the_next():
    lis = Listener()
    m = window_manager(lis, Duration(10), Duration(10))  # tumbling
    m.add("a", m.arrival_ts(10))  # before the timer, in its millisecond: in (0, 10]
    m.on_time(10)
    m.add("b", m.arrival_ts(10))  # after it, still at 10: 11, in (10, 20], not in the gone (0, 10]
    m.add("c", m.arrival_ts(7))  # a clock behind the window's end, likewise
    m.add("d", m.arrival_ts(15))
    m.on_time(20)
    assert lis.got() == [["a"], ["b", "c", "d"]]
    assert lis.expired == ["a"]
    assert window_manager(lis, Duration(10), Count(2)).arrival_ts(7) == 7  # count triggers: the clock


def test_count_length_with_time_trigger_and_duration_length_with_count_trigger():
    lis = Listener()
    m = window_manager(lis, Count(2), Duration(10))
    for ts in (1, 2, 3):
        m.add(ts, ts)
    m.on_time(10)
    assert lis.got() == [[2, 3]]

    lis = Listener()
    m = window_manager(lis, Duration(10), Count(2))
    for ts in (1, 2, 15, 16):
        m.add(ts, ts)
    assert lis.got() == [[1, 2], [15, 16]]  # at 16, 1 and 2 are 10 ms or more old


def test_expired_events_leave_the_queue_between_triggers_so_memory_stays_bounded():
    lis = Listener()
    m = window_manager(lis, Count(10), Count(100_000))  # fires rarely: only the periodic scan expires
    for i in range(50_000):
        m.add(i, i)
        assert len(m) <= 10 + EXPIRE_EVENTS_THRESHOLD
    assert lis.windows == []
    assert lis.expired == list(range(len(lis.expired))) and len(lis.expired) >= 50_000 - 10 - EXPIRE_EVENTS_THRESHOLD

    lis = Listener()
    m = window_manager(lis, Duration(1000), Duration(500))
    for i in range(50_000):  # one event per ms, a timer every 500 ms
        m.add(i, i)
        if i % 500 == 0:
            m.on_time(i)
        assert len(m) <= 1000 + 500 + EXPIRE_EVENTS_THRESHOLD


def test_event_time_windows_end_on_multiples_of_the_sliding_interval():
    # Storm's documentation example: length 20 s, sliding 10 s, lag 5 s; events at 6:00:03 ...
    # 6:00:36; the watermark 6:00:31 fires the windows ending 6:00:10, 6:00:20 and 6:00:30.
    lis = Listener()
    m = window_manager(lis, Duration(20_000), Duration(10_000), event_time=True)
    for s in (3, 5, 7, 18, 26, 36):
        m.add(f"e{s}", s * 1000)
    m.add_watermark(31_000)
    assert lis.got() == [["e3", "e5", "e7"], ["e3", "e5", "e7", "e18"], ["e18", "e26"]]
    assert [(w[3] - 20_000, w[3]) for w in lis.windows] == [(-10_000, 10_000), (0, 20_000), (10_000, 30_000)]
    assert [w[1] for w in lis.windows] == [["e3", "e5", "e7"], ["e18"], ["e26"]]
    assert [w[2] for w in lis.windows] == [[], [], ["e3", "e5", "e7"]]
    assert len(m) == 3  # e18, e26 wait for the next window; e36 is beyond the watermark


def test_event_time_window_takes_out_of_order_events_by_timestamp():
    lis = Listener()
    m = window_manager(lis, Duration(10), Duration(10), event_time=True)
    for ts in (12, 3, 15, 8, 21):
        m.add(ts, ts)
    m.add_watermark(20)
    assert lis.got() == [[3, 8], [12, 15]]
    m.add_watermark(30)
    assert lis.got()[-1] == [21]


def test_event_time_skips_empty_windows_to_the_next_event():
    lis = Listener()
    m = window_manager(lis, Duration(10), Duration(10), event_time=True)
    m.add("a", 5)
    m.add("b", 95)
    m.add_watermark(100)
    assert lis.got() == [["a"], ["b"]]
    assert [w[3] for w in lis.windows] == [10, 100]


def test_event_time_count_window_fires_every_count_events_up_to_the_watermark():
    lis = Listener()
    m = window_manager(lis, Count(3), Count(3), event_time=True)
    for ts in (603, 605, 607, 618, 626, 636):
        m.add(ts, ts)
    m.add_watermark(631)
    assert lis.got() == [[603, 605, 607]]
    assert lis.windows[0][3] == 607
    for ts in (640, 650):
        m.add(ts, ts)
    m.add_watermark(700)
    assert lis.got()[1] == [618, 626, 636]
    assert lis.windows[1][2] == [603, 605, 607]


# --- watermarks (Storm's WaterMarkEventGeneratorTest) ---------------------------------------------

S1, S2 = ("c", "s1", 1), ("c", "s2", 1)
IDLE = 30_000  # ms: no task goes idle in these (the clock stays at 0)


def test_watermark_is_the_latest_timestamp_minus_the_lag():
    g = WatermarkGenerator(5, {S1[:2]: [1]}, IDLE)
    g.track(S1, 100, 0)
    g.track(S1, 110, 0)
    assert g.next_watermark(0) == 105
    assert g.next_watermark(0) is None  # it did not move


def test_watermark_ignores_out_of_order_older_timestamps():
    g = WatermarkGenerator(5, {S1[:2]: [1]}, IDLE)
    for ts in (100, 110, 104):
        g.track(S1, ts, 0)
    assert g.next_watermark(0) == 105


def test_watermark_is_the_minimum_over_input_streams_once_all_have_data():
    g = WatermarkGenerator(5, {S1[:2]: [1], S2[:2]: [1]}, IDLE)
    g.track(S1, 100, 0)
    g.track(S1, 110, 0)
    assert g.next_watermark(0) is None  # s2 has delivered nothing yet
    g.track(S2, 95, 0)
    g.track(S2, 98, 0)
    assert g.next_watermark(0) == 93


def test_tuples_at_or_before_the_watermark_are_late():
    g = WatermarkGenerator(5, {S1[:2]: [1]}, IDLE)
    assert g.track(S1, 100, 0) and g.track(S1, 110, 0)
    assert g.next_watermark(0) == 105
    assert g.track(S1, 106, 0)
    assert not g.track(S1, 105, 0)  # at the watermark: the window ending there has fired (Storm: in time)
    assert not g.track(S1, 104, 0)


def test_builders_store_storm_keys_and_refuse_non_positive_values():
    from squall import BaseWindowedBolt

    b = BaseWindowedBolt().with_window(Duration.seconds(30), Duration.of(500)) \
        .with_timestamp_field("ts").with_lag(Duration.seconds(1)).with_watermark_interval(Duration.of(200)) \
        .with_late_tuple_stream("late")
    assert b.get_component_configuration() == {
        "topology.bolts.window.length.duration.ms": 30_000,
        "topology.bolts.window.sliding.interval.duration.ms": 500,
        "topology.bolts.tuple.timestamp.field.name": "ts",
        "topology.bolts.tuple.timestamp.max.lag.ms": 1000,
        "topology.bolts.watermark.event.interval.ms": 200,
        "topology.bolts.late.tuple.stream": "late"}
    assert BaseWindowedBolt().with_tumbling_window(Count.of(4)).get_component_configuration() == {
        "topology.bolts.window.length.count": 4, "topology.bolts.window.sliding.interval.count": 4}
    assert BaseWindowedBolt().with_window(Count(4)).get_component_configuration()[
        "topology.bolts.window.sliding.interval.count"] == 1
    assert Duration.minutes(2).value == 120_000
    for bad in (lambda: BaseWindowedBolt().with_window(Count(0)),
                lambda: BaseWindowedBolt().with_window(Duration(-1)),
                lambda: BaseWindowedBolt().with_window(Count(3), Count(0)),
                lambda: BaseWindowedBolt().with_tumbling_window(5),
                lambda: BaseWindowedBolt().with_watermark_interval(Duration(0)),
                lambda: BaseWindowedBolt().with_lag(Duration(-5))):
        with pytest.raises(ValueError):
            bad()


class _Nothing(BaseWindowedBolt):
    def execute(self, window):
        pass


class _ResetRecorder:
    """The collector a windowed bolt's executor is given: records acks and timeout resets."""

    def __init__(self):
        self.acked, self.resets = [], []

    def ack(self, tup):
        self.acked.append(tup)

    def reset_timeout(self, tup):
        self.resets.append(tup)


class _Clock:
    def wall(self):
        return 1_000.0


class _SettableClock:
    def __init__(self) -> None:
        self.now = 0.0

    def wall(self):
        return self.now


class _Ctx:
    def get_this_component_id(self):
        return "window"

    def get_this_task_id(self):
        return 3

    def get_this_sources(self):
        return {}

    def get_component_tasks(self, component):
        return {"events": [1], "quiet": [2]}.get(component, [])


class _Timers:
    """The executor loop's timers on a settable clock, moved a tenth of a second at a time:
    each timer fires at every step its period has passed since it last fired (the loop's rule)."""

    def __init__(self, clock, timers) -> None:
        self.clock = clock
        self.tenths = 0
        self.periods = [period for period, _cb in timers]
        self.timers = [[clock.now + period, period, cb] for period, cb in timers]

    def step(self) -> None:
        """A tenth of a second later, the timers due then fired."""
        self.move()
        self.fire()

    def move(self) -> None:
        """A tenth of a second later (the timers not fired yet)."""
        self.tenths += 1
        self.clock.now = self.tenths / 10

    def fire(self) -> None:
        """Fire the timers due."""
        for timer in self.timers:
            if self.clock.now >= timer[0] - 1e-9:
                timer[0] = max(timer[0] + timer[1], self.clock.now)
                timer[2]()

    def run_until(self, secs: float) -> None:
        while self.tenths < round(secs * 10):
            self.step()


class _TimedResets(_ResetRecorder):
    """`_ResetRecorder`, noting when (the clock's seconds) each reset was made."""

    def __init__(self, clock) -> None:
        super().__init__()
        self.clock = clock

    def reset_timeout(self, tup):
        self.resets.append((round(self.clock.now, 1), tup[0]))


def test_a_held_tuple_is_reset_soon_after_it_arrives_then_every_half_timeout():
    """A tuple's timeout is first reset within a tenth of a second of its arrival, if the window
    still holds it, then at the keep-alive ticks (every sixth of the message timeout) once half
    a timeout passed since its last reset; one that left its window is not reset."""

    bolt = _Nothing().with_tumbling_window(Count(3))
    ex = WindowedBoltExecutor(bolt)
    clock = _SettableClock()
    out = _TimedResets(clock)
    ex.prepare({**bolt.get_component_configuration(), "topology.message.timeout.secs": 30}, _Ctx(), out)
    loop = _Timers(clock, ex.squall_timers(clock))
    assert loop.periods == [0.1, 5]
    src = Source("feeder", "default", 1, Fields("v"))
    ex.execute(Tuple(["a"], src))  # at 0 s
    loop.run_until(7)
    ex.execute(Tuple(["b"], src))
    loop.run_until(41)
    for v in "cdef":  # the window fires at c; a, b and c leave at f, c before its first reset
        ex.execute(Tuple([v], src))
    assert [t[0] for t in out.acked] == ["a", "b", "c"]
    loop.run_until(75)
    # a at 0.1 s, then (first seen at the tick of 5 s, taken as reset at 0 s) at 15 and 30 s;
    # b at 7.1 s, then (seen at 10 s, taken as at 5 s) at 20 and 35 s; d, e, f at 41.1, 55 and 70 s
    assert out.resets == [(0.1, "a"), (7.1, "b"), (15.0, "a"), (20.0, "b"), (30.0, "a"), (35.0, "b")] + [
        (at, v) for at in (41.1, 55.0, 70.0) for v in "def"]


class _EventTimeCtx(_Ctx):
    def register_metric(self, name, metric, bucket_secs):
        return metric


def test_an_event_time_windows_arrivals_are_reset_unless_gone_before_the_first_reset():
    """An event-time window's queue is sorted by timestamp, so its arrivals are noted one by
    one: each still held a tenth of a second later is reset; one whose window the watermark
    passed before that (it left, acked) is not."""

    bolt = _Nothing().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts")
    ex = WindowedBoltExecutor(bolt)
    clock = _SettableClock()
    out = _TimedResets(clock)
    ex.prepare({**bolt.get_component_configuration(), "topology.message.timeout.secs": 30}, _EventTimeCtx(), out)
    loop = _Timers(clock, ex.squall_timers(clock))
    assert loop.periods == [1.0, 0.1, 5]  # the watermark (fired before the resets when both are due), ...
    src = Source("feeder", "default", 1, Fields("v", "ts"))
    for v, ts in (("a", 5), ("b", 15), ("c", 100)):  # at 0 s, out of order below
        ex.execute(Tuple([v, ts], src))
    loop.run_until(0.9)
    ex.execute(Tuple(["d", 22], src))
    loop.run_until(16)  # at 1 s the watermark, 100, fires the windows to 100: a, b and d leave, c stays
    assert [t[0] for t in out.acked] == ["a", "b", "d"]
    assert out.resets == [(0.1, "a"), (0.1, "b"), (0.1, "c"), (15.0, "c")]


def test_no_keep_alive_without_message_timeouts():

    bolt = _Nothing().with_tumbling_window(Count(3))
    ex = WindowedBoltExecutor(bolt)
    ex.prepare({**bolt.get_component_configuration(), "topology.enable.message.timeouts": False}, _Ctx(),
               _ResetRecorder())
    assert ex.squall_timers(_Clock()) == []


class _SpoutTimeouts:
    """The collector a windowed bolt's executor is given, standing in for the spout's message
    timeouts on a simulated clock: each record is pending with a deadline a message timeout after
    it was emitted (or its tuple's timeout last reset); `expire` times out the records past their
    deadline, as the spout does, so the test replays them. An ack completes the record."""

    def __init__(self, clock, timeout: float) -> None:
        self.clock, self.timeout = clock, timeout
        self.deadline: dict[str, float] = {}  # record -> when the spout may time it out
        self.acked: list[str] = []
        self.timed_out: list[str] = []

    def emitted(self, record: str, at: float) -> None:
        self.deadline[record] = at + self.timeout

    def ack(self, tup):
        self.acked.append(tup[0])
        self.deadline.pop(tup[0], None)  # a timed-out copy's late ack completes nothing

    def reset_timeout(self, tup):
        if tup[0] in self.deadline:  # a timed-out copy's reset is too late
            self.deadline[tup[0]] = self.clock.now + self.timeout

    def expire(self) -> list[str]:
        late = [r for r, d in self.deadline.items() if d <= self.clock.now]
        for r in late:
            del self.deadline[r]
        self.timed_out.extend(late)
        return late


class _WindowLog(BaseWindowedBolt):
    def __init__(self) -> None:
        super().__init__()
        self.windows: list[list[str]] = []

    def execute(self, window):
        self.windows.append([t[0] for t in window.get()])


@pytest.mark.parametrize("delay_in_queues", [0.0, 0.2, 0.42, 0.6, 0.79, 0.9, 0.95, 0.99])
def test_a_tuple_delayed_in_queues_never_times_out_while_the_window_holds_it(delay_in_queues):
    """A tuple that spent part of its message timeout in queues before reaching the window, then
    is held past a pause longer than the timeout, is reset before the spout could time it out:
    never replayed into its window twice. Reset only at the first keep-alive tick to find it
    (up to a sixth of the timeout after it arrived), one delayed over 5/6 of the timeout (0.9,
    0.95, 0.99) timed out while held and was replayed into the windows; reset within a tenth of
    a second of its arrival, none is. Records go out one a tick, each reaching the window
    ``delay_in_queues`` of the timeout after it was emitted; a pause of 4 timeouts follows the
    first 4; then 5 more fill the windows. Every record sent is in exactly one window, once,
    and acked; none timed out."""

    timeout = 30.0
    tick = timeout / 6
    clock = _SettableClock()
    bolt = _WindowLog().with_tumbling_window(Count(3))
    ex = WindowedBoltExecutor(bolt)
    spout = _SpoutTimeouts(clock, timeout)
    ex.prepare({**bolt.get_component_configuration(), "topology.message.timeout.secs": timeout}, _Ctx(), spout)
    loop = _Timers(clock, ex.squall_timers(clock))
    assert loop.periods[-1] == tick  # the keep-alive tick (its last timer)
    src = Source("feeder", "default", 1, Fields("v"))
    records = [f"r{i}" for i in range(9)]
    arrivals: list[tuple[float, str]] = []  # (when it reaches the window, record)
    for i, r in enumerate(records):
        emitted = i * tick + (0 if i < 4 else 4 * timeout)  # r0..r3, a pause, r4..r8
        spout.emitted(r, emitted)
        arrivals.append((emitted + delay_in_queues * timeout + 0.001, r))  # just after a tick
    arrivals.sort()
    replayed: list[str] = []
    end = arrivals[-1][0] + 2 * timeout
    while clock.now < end:  # a tenth of a second at a time: the spout's timeouts, the timers, arrivals
        loop.move()
        for r in spout.expire():  # the spout replays a timed-out record: it reaches the window again
            replayed.append(r)
            spout.emitted(r, clock.now)
            ex.execute(Tuple([r], src))
        loop.fire()  # after the spout's timeouts: a reset made at a record's deadline is too late
        while arrivals and arrivals[0][0] <= clock.now:
            ex.execute(Tuple([arrivals.pop(0)[1]], src))
    assert spout.timed_out == [] and replayed == []
    in_windows = [r for w in bolt.windows for r in w]
    assert sorted(in_windows) == records  # each record in one window, once
    assert sorted(spout.acked) == records[:6]  # the last window's records leave at the next window
