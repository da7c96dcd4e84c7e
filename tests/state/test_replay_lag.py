"""The rule docs/windows.md gives for exact event-time windows after a failure: a replay is in
time for its window when the lag covers how long it takes to come back (the message timeout
plus a worker's restart), for events stamped as they happen. Core level, time handed in: a
persistent window commits, its task dies, new events reach the restarted task for ``RECOVERY``
ms, and only then do the uncommitted tuples come back, replayed."""

import pytest

from squall import BaseStatefulWindowedBolt, Duration, Fields
from squall._tuple import Source, Tuple
from squall.state.checkpoint import COMMIT, PREPARE
from squall.state.memory import HostMemory

from .test_core import cp
from .test_persistent_windows import _executor

SRC = Source("clicks", "default", 1, Fields("id", "ts"))
STEP, COMMITTED, CRASH, RECOVERY = 10, 1500, 2000, 3000  # ms: an event every STEP, stamped on arrival


class Distinct(BaseStatefulWindowedBolt):
    """Emits ``[window start, distinct ids in the window]``."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("start", "n"))

    def execute(self, window):
        self.collector.emit([window.get_start_timestamp(), len({t[0] for t in window.get()})])


def _feed(ex, times):
    for t in times:
        ex.execute(Tuple([t, t], SRC))  # id and event time: the arrival time
        ex.bolt.on_timer()  # the watermark moves as time does


def _run(lag_ms):
    """Run the failure with ``lag_ms``; return (the last count per window start, late ids)."""
    def bolt():
        return (Distinct().with_tumbling_window(Duration.of(1000)).with_timestamp_field("ts")
                .with_lag(Duration.of(lag_ms)).with_late_tuple_stream("late").with_persistence())
    mem = HostMemory()
    ex, rec = _executor(bolt(), mem)
    _feed(ex, range(STEP, COMMITTED + 1, STEP))
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    _feed(ex, range(COMMITTED + STEP, CRASH + 1, STEP))  # uncommitted: lost with the task
    again, rec2 = _executor(bolt(), mem)  # the restarted task, from the commit
    back = CRASH + RECOVERY
    _feed(again, range(CRASH + STEP, back + 1, STEP))  # new events, before the replays come back
    _feed(again, range(COMMITTED + STEP, CRASH + 1, STEP))  # the replays
    _feed(again, [back + lag_ms + 1000 + STEP])  # closes every window before it
    counts, late = {}, []
    for stream, values, _ in rec.emitted + rec2.emitted:
        if stream == "default":
            counts[values[0]] = values[1]  # a window that fires again overwrites, as the sink does
        elif stream == "late":
            late.append(values[0][0])
    return counts, late


def _exact():
    return {start: 100 for start in range(0, CRASH + RECOVERY, 1000)}  # 100 events per second


def test_replays_are_in_time_and_every_window_exact_when_the_lag_covers_the_recovery():
    counts, late = _run(RECOVERY + 500)
    assert late == []
    assert counts == _exact()


@pytest.mark.parametrize("lag_ms", [RECOVERY - 500, 1000])
def test_with_a_lag_shorter_than_the_recovery_replays_come_too_late_and_windows_miss_them(lag_ms):
    counts, late = _run(lag_ms)
    # the watermark passed the replays: those older than the newest event less the lag are late
    too_late = [t for t in range(COMMITTED + STEP, CRASH + 1, STEP) if t < CRASH + RECOVERY - lag_ms]
    assert late == too_late and too_late
    assert counts == {**_exact(), 1000: 100 - len(too_late)}
