"""A recovery's INITSTATE after a persistent window fired since its last PREPARE: the task rolls
back and takes the tuples since that PREPARE again (989026e4). Taken again, they must go where
they went the first time: a processing-time window's tuple into the window it arrived in (not
the window open at the recovery), an event-time tuple that came late (after the watermark had
passed it, sent on the late-tuple stream) not into a window, and the windows must fire at the
same watermarks. Every record is counted."""

from squall import Duration, Fields
from squall._tuple import Source, Tuple
from squall.state.checkpoint import COMMIT, INITSTATE, PREPARE, ROLLBACK
from squall.state.memory import HostMemory

from .test_core import cp
from .test_persistent_windows import Sums, _acked, _executor


class _Clock:
    def __init__(self, t):
        self.t = t

    def wall(self):
        return self.t


class Ends(Sums):
    """Emits [window end, sum of the window, number of its tuples]."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("end", "sum", "n"))

    def execute(self, window):
        values = [t[0] for t in window.get()]
        self.state.put("windows", self.state.get("windows", 0) + 1)
        self.collector.emit([window.get_end_timestamp(), sum(values), len(values)])


def _results(rec):
    return [tuple(values) for stream, values, _ in rec.emitted if stream == "default"]


def _recover(ex, txid):
    for step in (COMMIT, COMMIT, INITSTATE):   # COMMIT failed with a worker: the recovery
        ex.execute(cp(txid, step))


SRC = Source("values", "default", 1, Fields("v", "ts"))


def test_a_processing_time_window_fired_again_holds_the_tuples_that_arrived_in_it_not_those_at_the_recovery():
    """Tumbling 1 s windows in processing time. After PREPARE 1: records 1 and 2 arrive in
    [100 s, 101 s), which fires (3), record 3 in [101 s, 102 s), which fires (3). The recovery at
    102.5 s. On main the three were taken again at 102.5 s, into the window [102 s, 103 s): it
    fired (6, 3 tuples), so a sink keeping each window's sum counted records 1, 2 and 3 twice
    (3 + 3 + 6 = 12 for 6 sent). A second INITSTATE (the recovery tried again during the
    outage) fires them again the same; a ROLLBACK after fails each record once."""
    clock = _Clock(100.0)
    ex, rec = _executor(Ends().with_tumbling_window(Duration.seconds(1)).with_persistence(), HostMemory())
    ex.bolt._clock = clock
    ex.execute(cp(1, PREPARE))
    sent = []

    def feed(v):
        t = Tuple([v, 0], SRC)
        sent.append(t)
        ex.execute(t)

    clock.t = 100.2
    feed(1)
    clock.t = 100.4
    feed(2)
    clock.t = 101.0
    ex.bolt.on_timer()
    clock.t = 101.5
    feed(3)
    clock.t = 102.0
    ex.bolt.on_timer()
    first = _results(rec)
    assert first == [(101000, 3, 2), (102000, 3, 1)]
    clock.t = 102.5
    _recover(ex, 1)
    clock.t = 103.0
    ex.bolt.on_timer()   # [102 s, 103 s) holds nothing
    again = _results(rec)[len(first):]
    assert again == first, again   # on main: [(103000, 6, 3)]
    assert ex.state.get("windows") == 2
    _recover(ex, 1)   # the recovery tried again, the outage not over
    assert _results(rec)[2 * len(first):] == first and ex.state.get("windows") == 2
    assert not rec.failed and not _acked(rec)   # none held for ever, none acked before its commit
    ex.execute(cp(2, PREPARE))
    ex.execute(cp(2, ROLLBACK))   # the PREPARE failed: each record replays once
    assert rec.failed == sent and not _acked(rec)


def test_an_event_time_tuple_that_came_late_stays_out_of_the_windows_fired_again():
    """Tumbling 100 ms event-time windows, lag 0, a late-tuple stream. After PREPARE 1: 1010,
    1050, 1120 (the watermark 1120 fires [1000, 1100): 1 + 2), then record 4 at 1060, late, sent
    on the late stream, then 1210 (fires [1100, 1200): 3). At the recovery, on main, the tuples
    were executed afresh under the watermark restored as committed (none): record 4 was no longer
    late and went into [1000, 1100), which fired (7, 3 tuples): record 4 counted in a window and
    on the late stream both, and committed so."""
    bolt = (Ends().with_tumbling_window(Duration.of(100)).with_timestamp_field("ts").with_lag(Duration.of(0))
            .with_late_tuple_stream("late").with_persistence())
    ex, rec = _executor(bolt, HostMemory())
    ex.execute(cp(1, PREPARE))
    sent = []

    def feed(v, ts, timer=False):
        t = Tuple([v, ts], SRC)
        sent.append(t)
        ex.execute(t)
        if timer:
            ex.bolt.on_timer()

    feed(1, 1010)
    feed(2, 1050)
    feed(3, 1120, timer=True)   # the watermark 1120: [1000, 1100) fires
    feed(4, 1060)               # late: sent on the late stream
    feed(5, 1210, timer=True)   # the watermark 1210: [1100, 1200) fires
    first = _results(rec)
    late = [v for stream, v, _ in rec.emitted if stream == "late"]
    assert first == [(1100, 3, 2), (1200, 3, 1)] and len(late) == 1
    _recover(ex, 1)
    ex.bolt.on_timer()   # the watermark as it was: nothing more fires
    again = _results(rec)[len(first):]
    assert again == first, again   # on main: [(1100, 7, 3), (1200, 3, 1)]
    assert [v for stream, v, _ in rec.emitted if stream == "late"] == late   # sent late once
    ex.execute(cp(2, PREPARE))
    ex.execute(cp(2, COMMIT))
    assert _acked(rec) == sent and not rec.failed
