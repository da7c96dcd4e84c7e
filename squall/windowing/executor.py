"""The bolt that runs a windowed bolt (Storm's ``WindowedBoltExecutor``): `TopologyBuilder.set_bolt`
wraps a `BaseWindowedBolt` in it, and the engine runs it as any other `Bolt`.

It feeds each input to a `WindowManager` (with its arrival time, or in event time its timestamp
field after the `WatermarkGenerator` has checked it is not late: a late one is counted, emitted
on the late-tuple stream or else logged, and acked), keeps the inputs it holds from timing out
(`WindowedBoltExecutor.keep_alive`), acks them when they expire,
and calls the user's ``execute`` with a `TupleWindow` when the window fires. Time comes from the
engine's clock, and the periodic work (a processing-time duration trigger, or the watermark) runs
on the executor's loop as a timer (`squall_timers`), between its inputs: no thread of its own.
"""

from __future__ import annotations

import logging
import math
import time
from itertools import islice
from typing import Any

from .._collectors import OutputCollector, OutputFieldsDeclarer
from .._components import Bolt
from .._config import Config, conf_value
from .._failure import FailureCause, fail_for
from .._fields import Fields
from .._ratelimit import RateLimitedLog
from .._system import DEFAULT_STREAM
from .._tuple import Tuple, is_tick_tuple
from ..metric._api import CountMetric
from ..metric._builtin import BUCKET_KEY
from ._api import LATE_TUPLE_FIELD, BaseWindowedBolt, Count, Duration, TupleWindow
from .config import WindowSpec, check_window, watermark_idle_timeout_ms, watermark_sources, window_spec
from .manager import WindowManager, window_manager
from .restart import PARTIAL_WINDOWS_METRIC, RestartCut
from .watermark import FIRST_WATERMARK, WatermarkGenerator

KEEP_ALIVE_TICKS_PER_TIMEOUT = 6
"""Keep-alive ticks per message timeout (`WindowedBoltExecutor.keep_alive`)."""
KEEP_ALIVE_RESET_TICKS = 3
"""A held tuple's timeout is first reset soon after it entered the window (`FIRST_RESET_SECS`),
then at the keep-alive ticks once this many ticks' worth of time (half a timeout) passed since
its last reset, where the spout times a tuple out at the earliest a whole timeout after it was
emitted or last reset."""
FIRST_RESET_SECS = 0.1
"""At most this long (seconds; a sixth of the message timeout if that is shorter) after a tuple
entered the window, its timeout is reset if the window still holds it
(`WindowedBoltExecutor.reset_arrivals`). The first reset cannot wait for a keep-alive tick: the
window does not know how much of the timeout the tuple already spent upstream. Nor is it made
on arrival: most tuples of a short window (a count window of 100) leave it sooner, and a reset
each (a message to the acker and its answer to the spout) cost a spout feeding such a window
half as much CPU again per tuple (2.95 to 4.4 us, measured)."""

STALLED_WATERMARK_TIMEOUTS = 1
"""An event-time window warns when its watermark has not moved for this many message timeouts
(`topology.message.timeout.secs`) though newer tuples came (`WindowedBoltExecutor.on_timer`),
and again after as long while it stays stuck."""

LATE_TUPLES_METRIC = "__late-tuple-count"
"""The metric an event-time windowed bolt's task counts its late tuples in (every
``topology.builtin.metrics.bucket.size.secs``, as the built-in metrics)."""

log = logging.getLogger("squall.windowing")


class _WallClock:
    """Real time until the engine hands its clock over (`WindowedBoltExecutor.squall_timers`)."""

    wall = staticmethod(time.time)


class _Held:
    """A tuple the window held at the last keep-alive tick, and when (engine clock, seconds) its
    timeout was last reset: by a tick, or for one first seen at this tick, taken as at the tick
    before (it arrived since, and `WindowedBoltExecutor.reset_arrivals` resets it)."""

    __slots__ = ("reset_at", "tup")

    def __init__(self, tup: Tuple, reset_at: float) -> None:
        self.tup = tup  # kept so a new tuple reusing a gone one's id is not taken for it
        self.reset_at = reset_at


class WindowedOutputCollector(OutputCollector):
    """The collector a windowed bolt gets: an emit without anchors during ``execute`` is anchored
    to the whole window, and acks are the window's job."""

    def __init__(self, delegate: OutputCollector) -> None:
        self.delegate = delegate
        self.window: list[Tuple] | None = None  # the tuples of the window being executed

    def emit(self, values: list, anchors: Tuple | list[Tuple] | None = None, stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit, anchored to ``anchors`` or else to every tuple of the current window."""
        return self.delegate.emit(values, self.window if anchors is None else anchors, stream)

    def emit_direct(self, task_id: int, values: list, anchors: Tuple | list[Tuple] | None = None,
                    stream: str = DEFAULT_STREAM) -> None:
        """`emit` to one task."""
        self.delegate.emit_direct(task_id, values, self.window if anchors is None else anchors, stream)

    def ack(self, tup: Tuple) -> None:
        """Does nothing: an input is acked when it leaves its last window, and acking it here
        too would ack it twice."""

    def fail(self, tup: Tuple) -> None:
        """Fail ``tup`` now (its spout tuples fail; it is still acked, to no effect, when it
        leaves the window)."""
        self.delegate.fail(tup)

    def fail_with(self, tup: Tuple, cause: FailureCause) -> None:
        """`fail`, telling the spout why where the collector underneath carries a cause."""
        fail_for(self.delegate, tup, cause)

    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of ``tup``'s spout tuples."""
        self.delegate.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error for this task."""
        self.delegate.report_error(error)


class WindowedBoltExecutor(Bolt):
    """Runs a `BaseWindowedBolt`; see the module docstring."""

    persistent = False
    """True for an executor that saves its windows with the checkpoints (then the message
    timeout need not cover the window: squall.state.PersistentWindowedBoltExecutor)."""

    squall_holds_inputs = True
    """Its inputs complete only once they leave their last window (an event-time window's, when
    later tuples move the watermark past it): the spouts upstream get no automatic
    ``topology.max.spout.pending`` (`squall.engine.pending_tuner.MaxPending`)."""

    # an exception in the user's execute comes from a window, not from the input that fired it,
    # which the window holds and acks at its expiry: failing that input would answer it twice
    # (and the trigger would stay un-reset). So it crashes the worker unless
    # topology.bolt.fail.fast says otherwise, as a time-driven trigger's exception always does.
    squall_fail_fast = True

    def __init__(self, bolt: BaseWindowedBolt) -> None:
        self.bolt = bolt
        self.spec: WindowSpec | None = None
        self.manager: WindowManager | None = None
        self.watermarks: WatermarkGenerator | None = None
        self._clock: Any = _WallClock()
        self._keep_alive_secs: float | None = None  # None: the tuples held need no keep-alive
        self._held: dict[int, _Held] = {}  # id of a held tuple -> it and when its timeout was last reset
        # the tuples that entered since `reset_arrivals`: how many (a window whose queue keeps arrival
        # order, where those still held are its last), else by id those still held (event time)
        self._fresh = 0
        self._arrivals: dict[int, Tuple] = {}
        self._in_arrival_order = True
        self._first_reset_secs = FIRST_RESET_SECS
        self._last_tick = 0.0  # engine clock of the last keep-alive tick (or of the timer's start)
        self._started_ms = 0  # engine clock (ms) when this task's timers started (`squall_timers`)
        self._cut: RestartCut | None = None  # resumed after a crash with acking off (`cut_at_restart`)
        self.partial_total = 0  # windows not fired, spanning such a restart

    def squall_check_at_submit(self, component_id: str, conf: dict[str, Any], streams: dict[str, Any],
                               inputs: dict[Any, Any], spouts: dict[str, dict[str, Any]] | None = None) -> None:
        """Storm's checks of the window at submit (`config.check_window`), called by the plan
        (`squall.engine.plan.SUBMIT_CHECK`), then the bolt's own, if it has one (a `JoinBolt`'s
        checks of its join against its inputs)."""
        check_window(component_id, conf, streams, inputs, self.persistent, spouts)
        own = getattr(self.bolt, "squall_check_at_submit", None)
        if own is not None:
            own(component_id, conf, streams, inputs)

    # --- what the builder and the engine call ---------------------------------------------------

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The late-tuple stream, if any, then the user's streams."""
        late = (self.bolt.get_component_configuration() or {}).get(Config.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM)
        if late is not None:
            declarer.declare_stream(late, Fields(LATE_TUPLE_FIELD))
        self.bolt.declare_output_fields(declarer)

    def get_component_configuration(self) -> dict[str, Any] | None:
        """The user bolt's (its window settings)."""
        return self.bolt.get_component_configuration()

    def squall_timers(self, clock: Any) -> list[tuple[float, Any]]:
        """Called by the bolt executor once this task is prepared, before its first input: take
        the engine's ``clock`` (simulated in tests) and return the window's timer, if it needs
        one, as ``(period_secs, callback)``."""
        self._clock = clock
        self._last_tick = clock.wall()  # before the first input: every tuple arrives after it
        self._started_ms = int(self._last_tick * 1000)  # where this task's processing time begins
        if self.manager is not None and self.spec is not None and not self.spec.event_time:
            self.manager.start(int(self._last_tick * 1000))  # where the windows' ends count from
        secs = self.spec.timer_secs() if self.spec is not None else None
        timers = [] if secs is None else [(secs, self.on_timer)]
        if self._keep_alive_secs is not None:
            timers.append((self._first_reset_secs, self.reset_arrivals))
            timers.append((self._keep_alive_secs, self.keep_alive))
        return timers

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        """Prepare the user's bolt with a `WindowedOutputCollector`, then build the window."""
        self.collector = collector
        self.component = context.get_this_component_id()
        self.task = context.get_this_task_id()
        self.out = WindowedOutputCollector(collector)
        self.bolt.prepare(conf, context, self.out)
        self.spec = window_spec(conf, self.component)
        self.manager = window_manager(self, self.spec.length, self.spec.sliding, self.spec.event_time)
        if not self.persistent and conf_value(conf, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS) is not False:
            timeout = float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
            self._keep_alive_secs = timeout / KEEP_ALIVE_TICKS_PER_TIMEOUT
            self._first_reset_secs = min(FIRST_RESET_SECS, self._keep_alive_secs)
        self._in_arrival_order = not self.spec.event_time  # an event-time queue is sorted by timestamp
        if self.spec.event_time:
            self._idle_timeout_ms = watermark_idle_timeout_ms(self.spec, conf)
            self._sources = context.get_this_sources()
            self._context = context
            # an input stream of a bolt whose tuples' roots name their spout task: followed by
            # those spout tasks (`squall.engine.origins`), as if they fed this window directly
            self._origins = getattr(context, "root_origins", None)
            feeding = self._origins.feeding if self._origins is not None else {}
            self._origin_streams = {(c, s): feeding[c] for c, s in watermark_sources(self._sources, context)
                                    if c in feeding}
            self.watermarks = self.new_watermarks()
            self._stall_secs = STALLED_WATERMARK_TIMEOUTS * float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
            self._watermark_moved: tuple[float, int | None] | None = None  # when (engine clock), newest ts then
            self.late_total = 0
            self.late_log = RateLimitedLog(log)  # this task's: a burst elsewhere does not hide its first
            self.late_tuples = context.register_metric(LATE_TUPLES_METRIC, CountMetric(),
                                                       int(conf_value(conf, BUCKET_KEY)))

    def new_watermarks(self) -> WatermarkGenerator:
        """A watermark afresh, waiting for every task of every input stream."""
        assert self.spec is not None  # prepare() read it
        self._followed: set[tuple[str, str]] = set()  # the streams now followed by their spout tasks
        return WatermarkGenerator(self.spec.lag_ms, watermark_sources(self._sources, self._context),
                                  self._idle_timeout_ms)

    def execute(self, tup: Tuple) -> None:
        """Add ``tup`` to the window (a late one: `late`)."""
        if is_tick_tuple(tup):
            return  # the window keeps its own time; ticks are not data
        spec, manager = self.spec, self.manager
        assert spec is not None and manager is not None, "prepare() builds the window before the first input"
        if not spec.event_time:
            self.add(tup, manager.arrival_ts(int(self._clock.wall() * 1000)))
            return
        ts = self._timestamp(tup)
        if ts is None:
            return
        assert self.watermarks is not None  # prepare() made them: the window keeps event time
        # at the watermark itself it is late only if a window ending there was evaluated (a
        # watermark between two window ends leaves the window that holds it open, as Storm does)
        if self.track(tup, ts) or (
                ts == self.watermarks.last_watermark and not manager.trigger.evaluated_through(ts)):
            cut = self._cut
            if cut is not None:
                src = tup._src
                cut.saw((src.component, src.stream, src.task), ts)
            self.add(tup, ts)
            return
        self.late(tup, ts)

    def track(self, tup: Tuple, ts: int) -> bool:
        """Note ``tup``'s timestamp ``ts`` for the watermark; False if it may be late.

        A tuple from a bolt whose roots name their spout task (`squall.engine.origins`) counts
        for the pair of the bolt task it came from and that spout task, so a spout task behind
        the others holds the watermark through the bolts in front of this window, which mix
        its tuples with theirs, and so does a bolt task behind its siblings (its queue holds
        its share of every spout task's tuples); any other tuple counts for the task it came
        from."""
        watermarks = self.watermarks
        assert watermarks is not None  # prepare() made them: the window keeps event time
        src, root, now = tup._src, tup._root, self._clock.wall()
        stream = (src.component, src.stream)
        spouts = self._origin_streams.get(stream) if root else None
        if spouts is None:
            return watermarks.track((src.component, src.stream, src.task), ts, now)
        if stream not in self._followed:
            watermarks.follow_origins(stream, spouts)
            self._followed.add(stream)
        assert self._origins is not None  # _origin_streams come from it
        origin = self._origins.origin
        if type(root) is dict:  # anchored to several trees: each one's spout task has got this far
            fresh = True
            for r in root:
                fresh = watermarks.track((src.component, src.stream, src.task, origin(r)), ts, now) and fresh
            return fresh
        return watermarks.track((src.component, src.stream, src.task, origin(root)), ts, now)

    def resume_origins(self) -> None:
        """After the watermark's state was restored: follow again by their spout tasks the
        streams that were so followed when it was saved."""
        assert self.watermarks is not None
        for stream, spouts in self._origin_streams.items():
            if stream not in self._followed and self.watermarks.follows_origins(stream):
                self.watermarks.follow_origins(stream, spouts)
                self._followed.add(stream)

    def late(self, tup: Tuple, ts: int) -> None:
        """``tup`` (timestamp ``ts``) came after the windows it belongs to fired: count it (the
        `LATE_TUPLES_METRIC` metric), emit it on the late-tuple stream or else log it (at a
        bounded rate), and ack it."""
        self.late_tuples.incr()
        self.late_total += 1
        assert self.spec is not None and self.watermarks is not None  # only an event-time window has late tuples
        if self.spec.late_stream is not None:
            self.collector.emit([Tuple(tup.values, tup._src)], tup, self.spec.late_stream)
        else:
            self.late_log.warning(
                "Component [%s] task %s: a late tuple from component [%s] stream [%s] (timestamp %d, at or "
                "before the watermark %d) is in no window and there is no late-tuple stream; it is acked "
                "(%d late tuples so far; metric %s)", self.component, self.task, tup.source_component,
                tup.source_stream, ts, self.watermarks.last_watermark, self.late_total, LATE_TUPLES_METRIC)
        self.collector.ack(tup)

    def add(self, tup: Tuple, ts: int) -> None:
        """Put ``tup`` (timestamp ``ts``, ms) in the window (and, if the window keeps its tuples
        alive, among the arrivals whose timeout `reset_arrivals` resets if they stay)."""
        assert self.manager is not None, "prepare() builds the window before the first input"
        if self._keep_alive_secs is not None:
            if self._in_arrival_order:
                self._fresh += 1
            else:
                self._arrivals[id(tup)] = tup
        self.manager.add(tup, ts)

    def _timestamp(self, tup: Tuple) -> int | None:
        """The event time of ``tup``; a value that is not epoch ms is reported (naming the
        component and field) and the tuple failed, not added."""
        assert self.spec is not None and self.spec.timestamp_field is not None  # an event-time window names it
        field = self.spec.timestamp_field
        v = tup.get_value_by_field(field) if tup.fields.contains(field) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return int(v)
        what = "is missing" if not tup.fields.contains(field) else f"is {v!r}, not epoch milliseconds (a number)"
        reason = (f"timestamp field {field!r} {what} in a tuple from component [{tup.source_component}] "
                  f"stream [{tup.source_stream}]")
        self.collector.report_error(f"Component [{self.component}]: {reason}; the tuple is failed")
        # the reason goes with the failure, so a dead-letter entry says why, not only where
        fail_for(self.collector, tup, FailureCause.of_reason(self.component, self.task, reason))
        return None

    def on_timer(self) -> None:
        """Every watermark interval (event time): advance the watermark, or warn if it is stuck
        (`_check_stalled`); every sliding interval (processing-time duration trigger): fire the
        window."""
        if self.manager is None:
            return
        if self.watermarks is not None:
            wm = self.watermarks.next_watermark(self._clock.wall())
            if wm is not None:
                self.advance_watermark(wm)
                self._watermark_moved = (self._clock.wall(), self.watermarks.newest())
            else:
                self._check_stalled()
        else:
            self.time_passed(int(self._clock.wall() * 1000))

    def advance_watermark(self, wm: int) -> None:
        """The watermark moved to ``wm`` (event time): fire the windows that end by then."""
        assert self.manager is not None, "prepare() builds the window before its timer"
        self.manager.add_watermark(wm)

    def time_passed(self, now: int) -> None:
        """The processing-time trigger's timer at ``now`` (ms): fire the windows that ended."""
        assert self.manager is not None, "prepare() builds the window before its timer"
        if not self.manager.on_time(now):
            self.on_empty_window(now)

    def reset_arrivals(self) -> None:
        """Reset the message timeout of each tuple that entered the window since the last call
        (every `FIRST_RESET_SECS`) and is still in it; `keep_alive` resets them later.

        A count or processing-time window's queue keeps arrival order (tuples leave it, none
        moves), so only the number of arrivals is noted (`add`): the last that many events of
        the queue hold every one still there. An event-time window's queue is sorted by
        timestamp at its scans, so its arrivals are noted by id, and forgotten as they leave
        (`on_expiry`)."""
        reset = self.collector.reset_timeout
        fresh = self._fresh
        if fresh:
            # the queue keeps arrival order, less the tuples gone: those of the last ``fresh``
            # arrivals still held are among its last ``fresh`` (with older ones if some went)
            self._fresh = 0
            queue = self.manager.queue if self.manager is not None else ()
            last = list(islice(reversed(queue), fresh))
            for event in reversed(last):  # in arrival order
                reset(event.value)
        arrivals = self._arrivals
        if arrivals:
            self._arrivals = {}
            for tup in arrivals.values():
                reset(tup)

    def _check_stalled(self) -> None:
        """Warn when the watermark has not moved for `STALLED_WATERMARK_TIMEOUTS` message
        timeouts though newer tuples came, or an input stream delivered nothing yet, naming the
        source tasks that hold it back (component, stream, task id).

        The watermark is the oldest of the source tasks' newest timestamps (less the lag; a task
        silent for the idle timeout is not waited for), and there is none until every input
        stream delivered: one stream that stays silent (a join's
        side that sends nothing, a stream declared but unused) or falls behind holds every
        window, while the others' tuples pile up in it. In Storm they timed out and replayed,
        failures for the user to see; kept alive (`keep_alive`), they were held without a word,
        the windows never fired and the memory grew. A stream that paused as a whole (no newer
        tuple on any input, each having delivered) leaves the window waiting quietly, as it
        should; a silent input stream is warned of though nothing newer came, since all the
        input may have come before the first check (a backfill, a file of events)."""
        watermarks, manager = self.watermarks, self.manager
        assert watermarks is not None and manager is not None  # an event-time window's timer
        now = self._clock.wall()
        newest = watermarks.newest()
        if self._watermark_moved is None:  # the first tuples: the wait starts with them
            if newest is not None:
                self._watermark_moved = (now, newest)
            return
        since, newest_then = self._watermark_moved
        if now - since < self._stall_secs or not len(manager):
            return
        silent, slowest = watermarks.held_back_by(now)
        # a pause of every stream is no cause for a warning, but a stream that never delivered
        # is no pause: its window can never fire. A burst of input that all came before the
        # first check (a backfill, a file) left the newest timestamp where it was, and a quiet
        # input held it for good without a word
        if newest == newest_then and not silent:
            return
        # nothing has passed the lag yet (event time that starts near 0): the watermark is not
        # stuck, it has not started (`FIRST_WATERMARK`), whichever task is slowest
        if not silent and newest is not None and newest - watermarks.lag_ms <= FIRST_WATERMARK:
            return
        self._watermark_moved = (now, newest_then)  # warned: again after as long, if still stuck
        tasks = ", ".join(self._source_text(*source) for source in silent or slowest)
        if silent:
            why = f"source task{'s' if len(silent) > 1 else ''} {tasks} delivered nothing yet"
        else:
            why = (f"the newest timestamp of source task{'s' if len(slowest) > 1 else ''} {tasks} is "
                   f"{watermarks.latest[slowest[0]]}")
        last = "none yet" if watermarks.last_watermark is None else watermarks.last_watermark
        log.warning(
            "Component [%s] task %s: the watermark has not moved for %d s (last: %s)%s (newest timestamp %d): "
            "%s, and the watermark is the oldest of its source tasks' newest timestamps less the lag (a task "
            "silent for the idle timeout is not waited for); the "
            "window holds %d tuples, kept from timing out, until it moves", self.component, self.task,
            int(now - since), last, "" if newest == newest_then else " though newer tuples came", newest, why,
            len(manager))

    def _source_text(self, component: str, stream: str, task: int, spout_task: int | None = None) -> str:
        """A source task as the stalled-watermark warning names it: ``[split:default] task 4``;
        for a stream followed by its spout tasks, one of those ``[split:default] from spout
        [events] task 2``, and a pair ``[split:default] task 4 from spout [events] task 2``."""
        if task < 0:
            return f"[{component}:{stream}]"
        if spout_task is not None:
            return f"[{component}:{stream}] task {task} from spout [{self._context.get_component_id(spout_task)}] task {spout_task}"
        if (component, stream) in self._followed and task in self._origin_streams[(component, stream)]:
            return f"[{component}:{stream}] from spout [{self._context.get_component_id(task)}] task {task}"
        return f"[{component}:{stream}] task {task}"

    def keep_alive(self) -> None:
        """Reset the message timeout of each tuple the window holds whenever half a timeout
        passed since its last reset (`KEEP_ALIVE_RESET_TICKS`); `reset_arrivals` made the first
        reset, soon after the tuple entered the window.

        A window holds its inputs until they leave their last window: a count window until
        enough tuples came, an event-time window until later tuples move the watermark. While
        the stream paused for longer than the message timeout (a quiet night), the tuples
        held timed out, though nothing failed: their spouts replayed them, and the window held
        the replays beside the first copies, so it counted them twice (a count window of 5 fed
        3 records, then a 70 s pause with a 30 s timeout: [r0 r1 r2 r0 r1], [r2 r3 ...]). Storm
        asks for a message timeout longer than any such pause. Reset, a held tuple times out
        only when the window holding it is gone with its worker, to be replayed into a new one.

        The first reset is made within `FIRST_RESET_SECS` of the tuple's arrival, not at the next
        tick: its timeout started when its spout emitted it, and it may have spent nearly all of
        it upstream (a slow bolt, a backlog, a worker restart). Reset at the first tick to find
        it, up to a sixth of the timeout after it arrived, one that came with less left timed
        out while held, and its replay went into the window beside it: counted twice, and a
        failure in the spout's figures with nothing wrong. Now only a tuple that reaches the
        window with less than `FIRST_RESET_SECS` left, and stays longer than that, may time
        out while held (as it would in a bolt that took that long to ack it). A tuple first seen
        at a tick is taken as reset at the tick before (it arrived since, and `reset_arrivals`
        resets it if `keep_alive` does not), so it is reset again at most a tick early. The
        later resets are per tuple held across half a timeout, made on the tick.
        A persistent window acks its inputs at the commit and holds none."""
        manager = self.manager
        if manager is None:
            return
        assert self._keep_alive_secs is not None  # the timer is only set with message timeouts on
        now = self._clock.wall()
        due = now - self._keep_alive_secs * KEEP_ALIVE_RESET_TICKS
        arrived_after = self._last_tick  # one not seen at the last tick arrived since: `reset_arrivals` resets it
        before = self._held
        held: dict[int, _Held] = {}
        reset = self.collector.reset_timeout
        for event in manager.queue:
            tup = event.value
            seen = before.get(id(tup))
            if seen is None or seen.tup is not tup:  # arrived since the last tick
                seen = _Held(tup, arrived_after)
            if seen.reset_at <= due:
                reset(tup)
                seen.reset_at = now
            held[id(tup)] = seen
        self._held = held
        self._last_tick = now

    def cleanup(self) -> None:
        """The user's cleanup."""
        self.bolt.cleanup()

    # --- the manager's callbacks ----------------------------------------------------------------

    def on_expiry(self, tuples: list[Any]) -> None:  # Any: a persistent window's are numbers
        """Ack the tuples that left their last window."""
        ack = self.collector.ack
        if not self._arrivals:
            for t in tuples:
                ack(t)
            return
        forget = self._arrivals.pop  # gone before its first reset, it needs none
        for t in tuples:
            ack(t)
            forget(id(t), None)

    def on_activation(self, tuples: list[Any], new: list[Any], expired: list[Any], end_ts: int | None) -> None:
        """Run the user's ``execute`` on the window; unanchored emits anchor to all of it."""
        if self._cut is not None and self.spans_restart(len(tuples), end_ts):
            return
        self.run_window(tuples, new, expired, end_ts, tuples)

    def cut_at_restart(self) -> None:
        """This task resumed after its worker died, with acking off (nothing replays what it
        held): the windows that span the crash are not fired (`spans_restart`). In processing
        time the cut is where this task's time began (its timer's start, before its first
        input): every tuple that reached it since is in its windows, and a window reaching back
        before it, or holding a tuple restored from before it, is partial."""
        assert self.spec is not None, "prepare() reads the window's settings first"
        self._cut = RestartCut(None, self.spec.lag_ms) if self.spec.event_time else RestartCut(self._started_ms)

    def spans_restart(self, count: int, end_ts: int | None) -> bool:
        """Whether the window firing now (``count`` tuples, ending at ``end_ts``) reaches back
        over this task's restart (`RestartCut.partial`): then it is logged and counted, not
        fired. Its tuples expire as any window's."""
        cut, spec, manager = self._cut, self.spec, self.manager
        assert cut is not None and spec is not None and manager is not None  # the caller checked the cut
        length = spec.length
        by_count = isinstance(length, Count)
        start = end_ts - length.value if end_ts is not None and not by_count else None
        oldest = min(e.ts for e in manager.firing)
        if not cut.partial(start, oldest, count, length.value if by_count else None):
            self._cut = None  # every later window lies after the restart
            return False
        self.partial_total += 1
        metric = getattr(self, "partial_windows", None)
        if metric is not None:
            metric.incr()
        span = f"({start}, {end_ts}]" if start is not None else f"of {count} tuples ending at {end_ts}"
        log.warning(
            "Component [%s] task %s: the window %s is not fired: it reaches back over this task's restart, with "
            "acking off (%s 0), and what the task held before it died is lost (nothing replays it), so it holds "
            "only part of its tuples, and may have fired before the crash; %d such windows so far (metric %s)",
            self.component, self.task, span, Config.TOPOLOGY_ACKER_EXECUTORS, self.partial_total,
            PARTIAL_WINDOWS_METRIC)
        return True

    def on_empty_window(self, end_ts: int) -> None:
        """A processing-time window ended at ``end_ts`` with no tuple: the user's ``execute`` is
        not called (Storm's); a bolt that must mark every window's end downstream, as a stream
        bolt's punctuation does, has ``squall_empty_window(end_ts)`` called, its emits
        unanchored: there is no tuple to anchor them to, so in a stateful topology too (where
        other emits must be anchored) they go through the collector underneath, as a
        persistent window's do. What they mark carries no data: lost, nothing is replayed."""
        empty = getattr(self.bolt, "squall_empty_window", None)
        if empty is None:
            return
        out = self.out
        checked = out.delegate
        unchecked = getattr(checked, "unchecked", None)
        out.window = None
        if unchecked is not None:
            out.delegate = unchecked()
        try:
            empty(end_ts)
        finally:
            out.delegate = checked

    def run_window(self, tuples: Any, new: Any, expired: Any, end_ts: int | None, anchors: list[Tuple] | None) -> None:
        """The user's ``execute`` on a `TupleWindow` of these tuples, its unanchored emits
        anchored to ``anchors`` (None: left unanchored)."""
        assert self.spec is not None, "prepare() builds the window before it fires"
        length = self.spec.length
        start = end_ts - length.value if end_ts is not None and isinstance(length, Duration) else None
        self.out.window = anchors
        try:
            self.bolt.execute(TupleWindow(tuples, new, expired, start, end_ts))
        finally:
            self.out.window = None

    def __repr__(self) -> str:
        return f"WindowedBoltExecutor({self.bolt!r})"
