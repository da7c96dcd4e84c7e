"""Persistent stateful windows (``with_persistence()``, Storm 2's ``PersistentWindowedBoltExecutor``):
the windows are saved with each checkpoint, inputs are acked at the commit, and after a rollback
or a restart the windows resume as committed, so committed tuples are not replayed."""

import threading

import pytest

from squall import (
    BaseStatefulWindowedBolt,
    Config,
    Count,
    Duration,
    Fields,
    InvalidTopologyException,
    LocalCluster,
    TopologyBuilder,
)
from squall._tuple import Source, Tuple
from squall.state import StateHome
from squall.state._bolt import StatefulBoltExecutor
from squall.state._windowed import (
    PersistentWindowedBoltExecutor,
    StatefulWindowedBoltExecutor,
)
from squall.state.checkpoint import COMMIT, INITSTATE, PREPARE, ROLLBACK
from squall.state.memory import HostMemory
from squall.testing import FeederSpout

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture
from .test_core import BoltCtx, Recorder, cp

SRC = Source("values", "default", 1, Fields("v", "ts"))
ACKING_OFF = {"topology.acker.executors": 0}


class Sums(BaseStatefulWindowedBolt):
    """Emits [sum of the window, number of its tuples, sum of its new tuples]; counts windows in
    its own state (whose keys must not clash with the window's)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("sum", "n", "new"))

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        values = [t[0] for t in window.get()]
        self.state.put("windows", self.state.get("windows", 0) + 1)
        self.collector.emit([sum(values), len(values), sum(t[0] for t in window.get_new())])


class _KeyedCtx(BoltCtx):
    """A context whose host lends a key (for Redis) and no memory."""

    def __init__(self):
        super().__init__(None, {"$checkpointspout": [9]})
        self.state_home = StateHome(key=b"k" * 32)


def _executor(bolt, mem, conf=None):
    ex = StatefulBoltExecutor(PersistentWindowedBoltExecutor(bolt))
    rec = Recorder()
    ctx = _KeyedCtx() if mem is None else BoltCtx(mem, {"$checkpointspout": [9]})
    ex.prepare({**bolt.get_component_configuration(), "topology.name": "t", **(conf or {})}, ctx, rec)
    ex.execute(cp(-1, INITSTATE))
    return ex, rec


def _feed(ex, values, timer=False):
    tuples = [Tuple([v, 1000 + 10 * v], SRC) for v in values]
    for t in tuples:
        ex.execute(t)
        if timer:
            ex.bolt.on_timer()
    return tuples


def _acked(rec):
    return [t for t in rec.acked if t.source_stream != "$checkpoint"]


def _sums(rec):
    return [tuple(values) for stream, values, _ in rec.emitted if stream == "default"]


WINDOWS = {
    "count sliding": lambda: Sums().with_window(Count(5), Count(2)),
    "count tumbling": lambda: Sums().with_tumbling_window(Count(4)),
    "event time": lambda: Sums().with_window(Duration.of(60), Duration.of(20)).with_timestamp_field("ts")
    .with_lag(Duration.of(15)),
}


@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_a_restarted_task_resumes_the_committed_windows_and_only_the_uncommitted_tuples_replay(kind):
    """The windows after a crash are those of a run without one: the committed tuples come back
    from the state (not replayed), the uncommitted ones are replayed by the spout."""
    timer = kind == "event time"
    ref, ref_rec = _executor(WINDOWS[kind]().with_persistence(), HostMemory())
    _feed(ref, range(1, 31), timer)

    mem = HostMemory()
    ex, rec = _executor(WINDOWS[kind]().with_persistence(), mem)
    committed = _feed(ex, range(1, 14), timer)
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    assert _acked(rec) == committed and not rec.failed  # acked at the commit, still in windows
    before = len(_sums(rec))
    _feed(ex, range(14, 19), timer)  # not committed: the crash loses them, the spout replays them
    assert _sums(ref_rec)[:len(_sums(rec))] == _sums(rec)

    again, rec2 = _executor(WINDOWS[kind]().with_persistence(), mem)  # the restarted task
    assert len(again.bolt.manager) > 0  # the committed tuples are back in the window
    _feed(again, range(14, 31), timer)
    assert _sums(rec2) == _sums(ref_rec)[before:]


def test_a_rollback_keeps_the_committed_tuples_in_the_window_and_fails_the_others():
    mem = HostMemory()
    ex, rec = _executor(Sums().with_tumbling_window(Count(4)).with_persistence(), mem)
    first = _feed(ex, [1, 2, 3, 4, 5])  # a window [1..4] fired; 5 waits for the next
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    later = _feed(ex, [6, 7])
    ex.execute(cp(1, PREPARE))
    ex.execute(cp(1, ROLLBACK))
    assert rec.failed == later and _acked(rec) == first
    # as committed: 1..4 (they leave at the next window, as in Storm's count windows) and 5
    assert [ex.bolt.store.tuple(e.value)[0] for e in ex.bolt.manager.queue] == [1, 2, 3, 4, 5]
    _feed(ex, [6, 7, 8])  # the replays
    assert _sums(rec) == [(10, 4, 10), (26, 4, 26)]
    assert ex.state.get("windows") == 2 and dict(ex.state)  # the user's keys are its own
    assert all(not str(k).startswith(("p", "meta")) or k == "windows" for k, _ in ex.state)


def test_a_live_window_that_fired_since_its_last_prepare_fires_again_when_the_spout_recovers():
    """A window fires between PREPARE 1 and COMMIT 1 and its result goes to a sink whose worker
    dies; the checkpoint spout, its COMMIT 1 failed with the worker, commits 1 again and sends
    INITSTATE. The window rolls back to commit 1, where it had not fired, and the task executes
    the tuples it took since PREPARE 1 again: the window fires again, its result sent before the
    INITSTATE passes on, and no tuple is failed. Before cd9a9fe5, INITSTATE changed nothing in a
    live task: PREPARE 2 passed the restarted sink (which never got the result), COMMIT 2
    recorded the window as fired, and its result was lost for good (on the process host, 2 or 3
    of 121 (window, key) results in 4 of 26 runs with 6 worker SIGKILLs each: the longer runs
    tests/process/test_kafka_stateful_sigkill.py describes)."""
    ex, rec = _executor(Sums().with_tumbling_window(Count(4)).with_persistence(), HostMemory())
    first = _feed(ex, [1, 2])
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    ex.execute(cp(1, PREPARE))
    later = _feed(ex, [3, 4])   # the window [1..4] fires
    assert _sums(rec) == [(10, 4, 10)]
    ex.execute(cp(1, COMMIT))
    ex.execute(cp(1, COMMIT))     # the recovery commits 1 again (a no-op here) ...
    ex.execute(cp(1, INITSTATE))  # ... and initializes the states again
    assert _sums(rec) == [(10, 4, 10), (10, 4, 10)]   # fired again: its result is sent again
    assert not rec.failed and _acked(rec) == first
    assert ex.state.get("windows") == 1   # the user's state rolled back under the window fired again
    ex.execute(cp(2, PREPARE))
    ex.execute(cp(2, COMMIT))
    assert _acked(rec) == first + later   # each once
    _feed(ex, [5])
    ex.execute(cp(2, INITSTATE))  # a recovery with no window fired since the last prepare
    assert not rec.failed and _sums(rec) == [(10, 4, 10), (10, 4, 10)]   # nothing rolled back


@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_with_acking_off_a_live_window_ignores_the_initstate_of_a_restarted_checkpoint_spout(kind):
    """With acking off the checkpoint spout recovers only when its worker restarted (no failure
    reaches it): its INITSTATE finds this task live, with nothing to roll back (Storm ignores a
    later INITSTATE). Rolled back and run again as with acking on, the windows fired since
    PREPARE 1 fired again, and a sink got their results twice
    (tests/process/test_checkpoint_spout_restart.py). Here every window fires once, as in a run
    without the recovery, and the state keeps what the task did since PREPARE 1."""
    timer = kind == "event time"
    ref, ref_rec = _executor(WINDOWS[kind]().with_persistence(), HostMemory(), ACKING_OFF)
    _feed(ref, range(1, 31), timer)

    ex, rec = _executor(WINDOWS[kind]().with_persistence(), HostMemory(), ACKING_OFF)
    _feed(ex, range(1, 9), timer)
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    ex.execute(cp(1, PREPARE))
    ex.execute(cp(1, COMMIT))
    before = len(_sums(rec))
    _feed(ex, range(9, 19), timer)
    assert len(_sums(rec)) > before and ex.bolt.fired_since_prepare
    windows = ex.state.get("windows")
    ex.execute(cp(1, INITSTATE))   # the restarted checkpoint spout's recovery
    if timer:
        ex.bolt.on_timer()
    assert ex.state.get("windows") == windows   # nothing rolled back
    _feed(ex, range(19, 31), timer)
    ex.execute(cp(2, PREPARE))
    ex.execute(cp(2, COMMIT))
    assert _sums(rec) == _sums(ref_rec)   # on main: the windows fired since PREPARE 1, twice
    assert not rec.failed


@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_with_acking_off_a_live_window_fires_each_window_once_through_a_rollback_of_the_restarted_spout(kind):
    """With acking off the checkpoint spout rolls a PREPARING txid back only when it restarted
    (or could not save its COMMITTING phase) inside the PREPARE's emit, acked as emitted. The
    rollback put the live window back to its last commit: the windows fired since fired again
    (an event-time window reached the sink twice) and what it took since was dropped, with
    nothing to replay it. Now the task keeps its windows: every window fires once, as in a run
    without the recovery, and the next commit holds what it took."""
    timer = kind == "event time"
    ref, ref_rec = _executor(WINDOWS[kind]().with_persistence(), HostMemory(), ACKING_OFF)
    _feed(ref, range(1, 31), timer)

    mem = HostMemory()
    ex, rec = _executor(WINDOWS[kind]().with_persistence(), mem, ACKING_OFF)
    _feed(ex, range(1, 9), timer)
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    ex.execute(cp(1, PREPARE))
    before = len(_sums(rec))
    _feed(ex, range(9, 19), timer)
    assert len(_sums(rec)) > before   # windows fired since PREPARE 1
    for txid, action in ((1, ROLLBACK), (0, INITSTATE)):   # the restarted spout found txid 1 PREPARING
        ex.execute(cp(txid, action))
    if timer:
        ex.bolt.on_timer()
    _feed(ex, range(19, 31), timer)
    ex.execute(cp(1, PREPARE))
    ex.execute(cp(1, COMMIT))
    assert _sums(rec) == _sums(ref_rec)   # on main: windows fired twice or differently, ids dropped
    assert not rec.failed
    again, rec2 = _executor(WINDOWS[kind]().with_persistence(), mem, ACKING_OFF)   # the committed windows
    _feed(again, range(31, 41), timer)
    _feed(ref, range(31, 41), timer)
    assert _sums(rec2) == _sums(ref_rec)[len(_sums(rec)):]


@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_a_recovery_fails_no_tuple_of_a_live_window_that_fired_its_results_are_those_of_a_run_without_it(kind):
    """The recovery's INITSTATE after windows fired since the last PREPARE: the task runs the
    tuples it took since that PREPARE again instead of failing them. Failed (cd9a9fe5), each
    replayed from its spout, and the other tuples of its record, which other tasks had taken
    and kept (a sibling window task of a fields grouping that had not fired since its PREPARE,
    a stateful bolt upstream), were taken a second time: counted twice there, and committed
    so. Here no tuple is failed, each is acked once, at the next commit, and the windows that
    fire after the recovery are those of a run without it, those fired since the PREPARE
    fired again first."""
    timer = kind == "event time"
    ref, ref_rec = _executor(WINDOWS[kind]().with_persistence(), HostMemory())
    _feed(ref, range(1, 31), timer)

    ex, rec = _executor(WINDOWS[kind]().with_persistence(), HostMemory())
    committed = _feed(ex, range(1, 9), timer)
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    ex.execute(cp(1, PREPARE))
    before = len(_sums(rec))
    since = _feed(ex, range(9, 19), timer)
    fired = _sums(rec)[before:]
    assert fired and ex.bolt.fired_since_prepare
    ex.execute(cp(1, COMMIT))
    ex.execute(cp(1, INITSTATE))   # the recovery: a worker died
    if timer:
        ex.bolt.on_timer()   # the watermark, restored as committed, moves with the tuples again
    assert not rec.failed, [t.values for t in rec.failed]   # on main: the 10 tuples since PREPARE 1
    assert _sums(rec)[before + len(fired):] == fired   # fired again, the same results
    rest = _feed(ex, range(19, 31), timer)
    ex.execute(cp(2, PREPARE))
    ex.execute(cp(2, COMMIT))
    assert _sums(rec)[:before] + _sums(rec)[before + len(fired):] == _sums(ref_rec)
    assert _acked(rec) == committed + since + rest and not rec.failed   # each once


def test_a_recovery_does_not_count_a_record_twice_in_a_sibling_window_task_that_had_not_fired():
    """Each record splits into a tuple for window task A (``r``) and one for task B (``100 + r``),
    as a fields grouping sends the words of a sentence. Records 3 and 4 come after PREPARE 1:
    A's window [1..4] fires, B's (5 tuples) does not. A worker dies; the recovery's INITSTATE.
    With cd9a9fe5 A failed 3 and 4, their spout replayed records 3 and 4, and B, live and not
    rolled back, took 103 and 104 a second time: its first window summed 101, 102, 103, 104, 103
    (513), not 101..105 (515), and committed so. Here the spout replays what a task fails
    (none)."""
    a, rec_a = _executor(Sums().with_tumbling_window(Count(4)).with_persistence(), HostMemory())
    b, rec_b = _executor(Sums().with_tumbling_window(Count(5)).with_persistence(), HostMemory())

    def records(rs):
        for r in rs:
            _feed(a, [r])
            _feed(b, [100 + r])
    records([1, 2])
    for ex in (a, b):
        ex.execute(cp(1, PREPARE))
    records([3, 4])
    assert _sums(rec_a) == [(10, 4, 10)] and _sums(rec_b) == []
    for step in (COMMIT, COMMIT, INITSTATE):   # COMMIT 1 failed with a worker: the recovery
        for ex in (a, b):
            ex.execute(cp(1, step))
    replayed = sorted({t[0] % 100 for t in rec_a.failed + rec_b.failed})   # what the spout replays
    records(replayed)
    records([5])
    assert _sums(rec_b) == [(515, 5, 515)], replayed   # on main: [(513, 5, 513)], replayed [3, 4]
    for ex in (a, b):
        ex.execute(cp(2, PREPARE))
        ex.execute(cp(2, COMMIT))
    assert len(_acked(rec_a)) == len(_acked(rec_b)) == 5 and not rec_a.failed and not rec_b.failed


def test_a_non_persistent_window_still_fails_what_it_holds_on_rollback():
    bolt = Sums().with_tumbling_window(Count(4))
    ex = StatefulBoltExecutor(StatefulWindowedBoltExecutor(bolt))
    rec = Recorder()
    ex.prepare({**bolt.get_component_configuration(), "topology.name": "t"},
               BoltCtx(HostMemory(), {"$checkpointspout": [9]}), rec)
    ex.execute(cp(-1, INITSTATE))
    held = _feed(ex, [1, 2, 3])
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    assert _acked(rec) == []  # held until they leave the window
    ex.execute(cp(1, ROLLBACK))
    assert rec.failed == held and len(ex.bolt.manager) == 0


class _Clock:
    """The engine's clock as a windowed bolt reads it, at a time the test sets (ms)."""

    def __init__(self, ms):
        self.ms = ms

    def wall(self):
        return self.ms / 1000


def _timed(mem):
    """A persistent `Sums` in tumbling 300 ms processing-time windows whose timer started at
    999,700 ms on a `_Clock` now at 1,000,000 ms (its first firing), and its timer."""
    ex, rec = _executor(Sums().with_tumbling_window(Duration.of(300)).with_persistence(), mem)
    clock = _Clock(1_000_000 - 300)
    [(_, fire)] = ex.squall_timers(clock)
    clock.ms += 300  # the engine fires it one interval after its start
    return ex, rec, clock, fire


def test_a_tuple_that_arrives_in_the_millisecond_its_window_fired_is_in_the_next_window():
    """The timer fires the window (.., t] and, still in millisecond t, a tuple arrives: it is
    acked at the next commit, so it must be in the next window. Stamped t, it was before the
    next window (t, t + 300] and left unevaluated: lost after its ack (1 run in 6 of
    tests/process/test_state_sigkill.py, when a burst came in the timer's millisecond)."""
    ex, rec, clock, fire = _timed(HostMemory())
    [a] = _feed(ex, [1])
    fire()
    [b] = _feed(ex, [2])  # the same millisecond, after the window fired
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))
    assert _acked(rec) == [a, b]
    clock.ms += 300
    fire()
    assert _sums(rec) == [(1, 1, 1), (2, 1, 2)]


def test_after_a_restart_on_a_clock_behind_the_committed_window_new_tuples_are_in_the_next_window():
    """The window as committed ended at t by the clock of the worker that fired it; the
    restarted task's clock (another host's) is behind t: its tuples still go to the next
    window, not before the window that fired (where the next one would expire them)."""
    mem = HostMemory()
    ex, _, _, fire = _timed(mem)
    _feed(ex, [1])
    fire()
    ex.execute(cp(0, PREPARE))
    ex.execute(cp(0, COMMIT))

    again, rec2 = _executor(Sums().with_tumbling_window(Duration.of(300)).with_persistence(), mem)
    clock = _Clock(1_000_000 - 50)
    [(_, fire)] = again.squall_timers(clock)
    [b] = _feed(again, [2])
    again.execute(cp(1, PREPARE))
    again.execute(cp(1, COMMIT))
    assert _acked(rec2) == [b]
    clock.ms += 300
    fire()
    assert _sums(rec2) == [(2, 1, 2)]


class Contents(BaseStatefulWindowedBolt):
    """Emits each window's values: [get(), get_new(), get_expired()]."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("window", "new", "expired"))

    def execute(self, window):
        self.collector.emit([[t[0] for t in part] for part in
                             (window.get(), window.get_new(), window.get_expired())])


EARLY_SCAN_WINDOWS = {  # count windows that fire after 150 and 300 tuples
    "count length, duration sliding": lambda: Contents().with_window(Count(5), Duration.of(1000)),
    "count length, count sliding": lambda: Contents().with_window(Count(5), Count(150)),
}


@pytest.mark.parametrize("recovery", ["restart", "rollback"])
@pytest.mark.parametrize("kind", sorted(EARLY_SCAN_WINDOWS))
def test_tuples_expired_before_the_checkpoint_are_not_back_in_the_window_after_a_restart(kind, recovery):
    """Between two triggers a count window expires its oldest tuples every 100 adds (after the
    100th, 0..94 here); they are saved with the checkpoint only for the next window's
    get_expired(). A task restarted (or rolled back) to that checkpoint put them back in its
    queue: its next window held 100 tuples (50..149) instead of 5, and get_expired() listed
    0..49 twice. Every record is counted: the windows are those of a run without a restart."""
    n, checkpoint_at = 300, 120

    def run(restart):
        mem = HostMemory()
        ex, rec = _executor(EARLY_SCAN_WINDOWS[kind]().with_persistence(), mem)
        clock = _Clock(1_000_000)
        windows = []
        for v in range(n):
            if v == checkpoint_at:
                ex.execute(cp(0, PREPARE))
                ex.execute(cp(0, COMMIT))
                if restart and recovery == "restart":  # the committed window in a new task
                    windows += _contents(rec)
                    ex, rec = _executor(EARLY_SCAN_WINDOWS[kind]().with_persistence(), mem)
                elif restart:  # a live task rolls back to the commit (nothing since: nothing replays)
                    ex.execute(cp(1, ROLLBACK))
            timers = ex.squall_timers(clock)
            clock.ms += 1
            ex.execute(Tuple([v, 0], SRC))
            if timers and v + 1 in (150, 300):
                clock.ms += 1
                ex.bolt.on_timer()
        return windows + _contents(rec)

    expected = [(list(range(145, 150)), list(range(145, 150)), list(range(145))),
                (list(range(295, 300)), list(range(295, 300)), list(range(145, 295)))]
    assert run(False) == expected
    assert run(True) == expected


def _contents(rec):
    return [tuple(values) for stream, values, _ in rec.emitted if stream == "default"]


@pytest.mark.parametrize("provider", ["memory", "redis"])
def test_at_most_max_events_in_memory_are_held_and_windows_read_the_rest_from_the_state(provider, request):
    if provider == "redis":
        server = request.getfixturevalue("redis_server")
        mem, conf = None, {"topology.state.provider": "squall.state.redis:RedisKeyValueStateProvider",
                           "topology.state.provider.config": {"url": server.url}}
    else:
        mem, conf = HostMemory(), {}
    bolt = Sums().with_window(Count(300), Count(50)).with_persistence().with_max_events_in_memory(40)
    ex, rec = _executor(bolt, mem, conf)
    store = ex.bolt.store
    for k in range(10):
        _feed(ex, range(1 + 50 * k, 51 + 50 * k))
        ex.execute(cp(k, PREPARE))
        ex.execute(cp(k, COMMIT))
        assert len(store.tuples) + store.loaded <= 40
    ref, ref_rec = _executor(Sums().with_window(Count(300), Count(50)).with_persistence(), HostMemory())
    _feed(ref, range(1, 501))
    assert _sums(rec) == _sums(ref_rec) and _sums(rec)[-1][:2] == (sum(range(201, 501)), 300)
    again, rec2 = _executor(Sums().with_window(Count(300), Count(50)).with_persistence()
                            .with_max_events_in_memory(40), mem, conf)
    assert len(again.bolt.manager) == 300 and len(again.bolt.store.tuples) + again.bolt.store.loaded <= 40
    _feed(again, range(501, 551))
    _feed(ref, range(501, 551))
    assert _sums(rec2) == _sums(ref_rec)[-1:]


def test_a_window_value_that_cannot_be_saved_is_reported_naming_component_and_field():
    ex, rec = _executor(Sums().with_tumbling_window(Count(2)).with_persistence(), HostMemory(),
                        {"topology.fall.back.on.pickle": False})
    bad = Tuple([1, threading.Lock()], SRC)
    ex.execute(bad)
    assert rec.failed == [bad] and len(ex.bolt.manager) == 0
    [error] = rec.errors
    assert "component [count]" in error and "in field 'ts'" in error and "component [values]" in error
    assert "topology.fall.back.on.pickle" in error


def test_the_builders_return_the_bolt_and_check_their_argument():
    bolt = Sums()
    assert bolt.with_persistence() is bolt and bolt.with_max_events_in_memory(10) is bolt
    assert bolt.is_persistent() and bolt.max_events_in_memory() == 10
    assert not Sums().is_persistent()
    with pytest.raises(ValueError):
        Sums().with_max_events_in_memory(0)


# --- on a cluster ---------------------------------------------------------------------------------------------

def _topology(bolt, n, feeder=None):
    feeder = feeder or FeederSpout(Fields("v", "ts"))
    b = TopologyBuilder()
    b.set_spout("values", feeder)
    b.set_bolt("sums", bolt).shuffle_grouping("values")
    return feeder, b.create_topology()


def test_a_persistent_window_longer_than_the_message_timeout_is_accepted():
    conf = {"topology.message.timeout.secs": 5}
    def long():
        return Sums().with_window(Duration.seconds(30), Duration.seconds(5))
    with LocalCluster() as cluster:
        cluster.submit_topology("ok", conf, _topology(long().with_persistence(), 0)[1])
        with pytest.raises(InvalidTopologyException) as err:
            cluster.submit_topology("bad", conf, _topology(long(), 0)[1])
        assert "Window duration (length + sliding interval) value 35000" in str(err.value)
        with pytest.raises(InvalidTopologyException) as err:  # the commit must still come in time
            cluster.submit_topology("slow", {**conf, "topology.state.checkpoint.interval.ms": 6000},
                                    _topology(long().with_persistence(), 0)[1])
        assert "Component [sums]" in str(err.value) and "topology.state.checkpoint.interval.ms" in str(err.value)


class WindowIds(BaseStatefulWindowedBolt):
    """Counts each id of every window in its state and writes each window's ids, one line per
    window, to ``windows.txt`` under ``test.out.dir``; the first time a window holds ``crash_at``
    it raises instead, which crashes its worker."""

    def __init__(self, crash_at):
        super().__init__()
        self.crash_at = crash_at

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        from pathlib import Path
        self.out = Path(conf["test.out.dir"])

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        ids = [t[0] for t in window.get()]
        with open(self.out / "windows.txt", "a") as f:
            f.write(" ".join(map(str, ids)) + "\n")
        if self.crash_at in ids and not (self.out / "crashed").exists():
            (self.out / "crashed").write_text("1")
            raise RuntimeError("crash on purpose")
        for i in ids:
            self.state.put(i, self.state.get(i, 0) + 1)


def test_a_crashed_worker_resumes_its_windows_from_the_state_and_committed_tuples_are_not_replayed(tmp_path):
    """Window 50 > max spout pending 20: only possible because inputs are acked at the commits."""
    from .counting import ReplayingSpout, acked, check_counts, emitted
    n, size, pending = 400, 50, 20
    b = TopologyBuilder()
    b.set_spout("source", ReplayingSpout(n))
    b.set_bolt("sums", WindowIds(crash_at=150).with_tumbling_window(Count(size)).with_persistence()) \
        .global_grouping("source")
    conf = Config()
    conf.set_max_spout_pending(pending)
    conf.set_message_timeout_secs(5)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    conf["test.out.dir"] = str(tmp_path)
    with LocalCluster() as cluster:
        cluster.submit_topology("windows", conf, b.create_topology())
        assert wait_until(lambda: acked(tmp_path) >= set(range(n)), 60), \
            f"ids never acked: {sorted(set(range(n)) - acked(tmp_path))[:20]}"
        assert (tmp_path / "crashed").exists()
        # a stateful bolt's exception crashes its worker by default (topology.bolt.fail.fast null)
        assert any("crash on purpose" in e["error"] and e["fatal"]
                   for e in cluster.get_topology_info("windows")["errors"])
        cluster.kill_topology("windows", wait_secs=0)
        [ns] = [s for s in cluster._state_memory.namespaces("windows") if s.startswith("sums-") and
                not s.endswith("-window")]
        counts = dict(cluster.get_state("windows", ns).committed())
    twice, replayed = check_counts(counts, n, tmp_path)
    windows = [[int(x) for x in line.split()] for line in (tmp_path / "windows.txt").read_text().splitlines()]
    crashed = next(i for i, w in enumerate(windows) if 150 in w)
    emits = emitted(tmp_path)
    # tuples of the crashed window that came back from the state into a later window, never re-emitted
    restored = [i for i in windows[crashed] if emits[i] == 1 and any(i in w for w in windows[crashed + 1:])]
    assert restored, "no committed tuple came back from the state"
    assert replayed <= pending, f"{replayed} tuples replayed: more than could be uncommitted at the crash"
    before = {i for w in windows[:crashed] for i in w}  # each id in one window after, none twice
    assert sorted(i for w in windows[crashed + 1:] for i in w) == sorted(set(range(n)) - before)
    print(f"LocalCluster crash: {len(restored)} of the crashed window's {len(windows[crashed])} tuples restored "
          f"from the state, {replayed} tuples replayed, {twice} updates applied twice")
