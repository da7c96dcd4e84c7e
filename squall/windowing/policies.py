"""Eviction and trigger policies (Storm's ``org.apache.storm.windowing`` policies), as plain
objects: time is handed in (an event's timestamp, a trigger's reference time), nothing reads a
clock or starts a thread.

An eviction policy decides, for each event of a `WindowManager`'s queue, whether it has left the
window (`Action.EXPIRE`), is in it (``PROCESS``), is not yet in it (``KEEP``) or ends the scan
(``STOP``: an event-time tuple beyond the window's end; event-time scans go in timestamp
order, `WindowManager.in_timestamp_order`). A trigger policy decides when the window fires and
sets the eviction policy's `EvictionContext` (the reference time) first.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .manager import WindowManager

log = logging.getLogger("squall.windowing")


class Action(enum.Enum):
    """What an eviction policy says of one event."""

    EXPIRE = "expire"    # left the window: remove it and ack it
    PROCESS = "process"  # in the current window
    KEEP = "keep"        # not in the current window, but in a later one
    STOP = "stop"        # beyond the window, as is every later event (timestamp order): stop scanning


@dataclass(frozen=True)
class EvictionContext:
    """What a trigger tells the eviction policy before a scan (Storm's ``DefaultEvictionContext``).

    ``reference_time`` is the window's end (epoch ms); ``current_count`` the events up to it
    (event-time count windows); ``sliding_count`` and ``sliding_interval`` the trigger's period.
    """

    reference_time: int
    current_count: int | None = None
    sliding_count: int | None = None
    sliding_interval: int | None = None


class _Stateful:
    """A policy whose progress a persistent window saves (Storm's ``getState``/``restoreState``):
    the attributes named in ``_saved``, as a list of plain values."""

    _saved: tuple[str, ...] = ()

    def get_state(self) -> list:
        """The policy's progress, as plain values (saved with the window's checkpoint)."""
        return [_plain(getattr(self, a)) for a in self._saved]

    def restore_state(self, state: list) -> None:
        """Resume from what `get_state` returned."""
        for a, v in zip(self._saved, state):
            setattr(self, a, EvictionContext(*v) if a == "context" and v is not None else v)


def _plain(v: Any) -> Any:
    return list(dataclasses.astuple(v)) if isinstance(v, EvictionContext) else v


class Event:
    """One tracked input (or a watermark, which is never queued) and its timestamp in ms."""

    __slots__ = ("ts", "value", "watermark")

    def __init__(self, value: Any, ts: int, watermark: bool = False) -> None:
        self.value = value
        self.ts = ts
        self.watermark = watermark

    def __repr__(self) -> str:
        return f"Watermark({self.ts})" if self.watermark else f"Event({self.value!r}, {self.ts})"


# --- eviction -------------------------------------------------------------------------------------

class EvictionPolicy(_Stateful):
    """Base: keeps the context the trigger set."""

    _saved: tuple[str, ...] = ("context",)

    def __init__(self) -> None:
        self.context: EvictionContext | None = None

    def evict(self, event: Event) -> Action:
        """The fate of ``event`` for the current context."""
        raise NotImplementedError

    def track(self, event: Event) -> None:
        """Called for every added event and watermark."""

    def set_context(self, context: EvictionContext) -> None:
        """Set before the trigger scans the window."""
        self.context = context


class CountEvictionPolicy(EvictionPolicy):
    """Keeps the last ``threshold`` events (Storm's ``CountEvictionPolicy``)."""

    _saved: tuple[str, ...] = ("context", "current_count")

    def __init__(self, threshold: int) -> None:
        super().__init__()
        self.threshold = threshold
        self.current_count = 0

    def evict(self, event: Event) -> Action:
        if self.current_count > self.threshold:
            self.current_count -= 1
            return Action.EXPIRE
        return Action.PROCESS

    def track(self, event: Event) -> None:
        if not event.watermark:
            self.current_count += 1


class WatermarkCountEvictionPolicy(CountEvictionPolicy):
    """The last ``threshold`` events, by timestamp, up to the reference time (Storm's
    ``WatermarkCountEvictionPolicy``, which takes them in arrival order: out of order, some
    were in no window and some in two tumbling ones); later events are kept for later windows."""

    _saved = ("context", "current_count", "processed")

    def __init__(self, threshold: int) -> None:
        super().__init__(threshold)
        self.processed = 0

    def evict(self, event: Event) -> Action:
        if self.context is None:
            return Action.KEEP
        if event.ts > self.context.reference_time:
            return Action.STOP  # timestamp order: so are the events after it
        if self.processed < self.current_count:
            action = super().evict(event)
            if action is Action.PROCESS:
                self.processed += 1
            return action
        return Action.KEEP

    def track(self, event: Event) -> None:
        pass  # counted from the queue when a window fires (set_context)

    def set_context(self, context: EvictionContext) -> None:
        super().set_context(context)
        if context.current_count is not None:
            self.current_count = context.current_count
        else:
            self.current_count = self.processed + (context.sliding_count or 0)
        self.processed = 0


class TimeEvictionPolicy(EvictionPolicy):
    """Keeps the events of the last ``window_length`` ms: ``end - length < ts <= end``
    (Storm's ``TimeEvictionPolicy``).

    A processing-time trigger that fires late by ``d`` ms lengthens that window by ``d``
    (Storm's ``delta``), so no event falls between two windows; the first window takes every
    event since the start.
    """

    _saved = ("context", "delta")

    def __init__(self, window_length: int) -> None:
        super().__init__()
        self.window_length = window_length
        self.delta = 0

    def evict(self, event: Event) -> Action:
        if self.context is None:  # nothing fired yet: nothing can have left a window
            return Action.KEEP
        diff = self.context.reference_time - event.ts
        if diff >= self.window_length + self.delta:
            return Action.EXPIRE
        if diff < 0:  # beyond the window's end
            return Action.KEEP
        return Action.PROCESS

    def set_context(self, context: EvictionContext) -> None:
        prev = self.context
        super().set_context(context)
        if context.sliding_interval is not None:
            if prev is None:
                self.delta = 1 << 62  # the first window: every event so far
            else:
                self.delta = context.reference_time - prev.reference_time - context.sliding_interval
                if self.delta > 100:
                    log.warning("window fired %d ms late (a busy loop or a long execute); that window "
                                "is lengthened to cover the gap", self.delta)
                elif self.delta < -100:
                    # the trigger keeps its schedule: the window after a late one comes early, and
                    # is shortened to begin where that one ended (no event in both)
                    log.warning("window fired %d ms early, after a late one; that window is shortened to "
                                "begin where the late one ended", -self.delta)


class WatermarkTimeEvictionPolicy(TimeEvictionPolicy):
    """`TimeEvictionPolicy` for event time (Storm's ``WatermarkTimeEvictionPolicy``): the scan
    stops at the first event beyond the window's end; it and the later ones wait for later
    windows. The scan goes in timestamp order, so none of the later ones is in this window
    (Storm's goes in arrival order and stops only an event more than the lag beyond the end,
    which loses tuples: `WindowManager.in_timestamp_order`)."""

    def evict(self, event: Event) -> Action:
        ref = self.context.reference_time if self.context is not None else 0
        if event.ts > ref:
            return Action.STOP
        return super().evict(event)


# --- triggers -------------------------------------------------------------------------------------

class TriggerPolicy(_Stateful):
    """Base: fires ``manager.on_trigger`` when its condition holds."""

    def __init__(self, manager: WindowManager, eviction: EvictionPolicy) -> None:
        self.manager = manager
        self.eviction = eviction

    def track(self, event: Event) -> None:
        """Called for every added event and watermark."""

    def reset(self) -> None:
        """Called after each trigger."""

    def evaluated_through(self, ts: int) -> bool:
        """Whether a window an event at ``ts`` (the watermark's time) would be in was evaluated
        (event time): such an event is late."""
        return True

    def on_time(self, now_ms: int) -> bool:
        """Called by a timer every sliding interval (processing-time duration windows only);
        whether a window fired with events."""
        return False

    def arrival_ts(self, now_ms: int) -> int:
        """The timestamp of an event that arrives at ``now_ms`` in processing time: ``now_ms``."""
        return now_ms

    def start(self, now_ms: int) -> None:
        """The window's timer starts at ``now_ms``, before the first event arrives."""


class CountTriggerPolicy(TriggerPolicy):
    """Fires every ``count`` events (Storm's ``CountTriggerPolicy``); the window's end is the
    arrival time of the event that fired it."""

    _saved = ("current",)

    def __init__(self, count: int, manager: WindowManager, eviction: EvictionPolicy) -> None:
        super().__init__(manager, eviction)
        self.count = count
        self.current = 0

    def track(self, event: Event) -> None:
        if not event.watermark:
            self.current += 1
            if self.current >= self.count:
                self.eviction.set_context(EvictionContext(event.ts))
                self.manager.on_trigger()

    def reset(self) -> None:
        self.current = 0


class TimeTriggerPolicy(TriggerPolicy):
    """Fires every ``duration`` ms of processing time (Storm's ``TimeTriggerPolicy``), when its
    timer calls `on_time`.

    A window ends at the millisecond it fires, so an event that arrives after it fired is
    stamped after that end (`arrival_ts`), not with the clock as is (Storm's way): stamped with
    the same millisecond (a burst right after the timer), it would belong to the window that
    already fired, and the next window would expire it unevaluated, though it is acked (at its
    expiry, or with persistence at the commit). The same when the clock is behind the end of a
    window that a persistent window restored (fired by a worker on a clock ahead).
    """

    def __init__(self, duration: int, manager: WindowManager, eviction: EvictionPolicy) -> None:
        super().__init__(manager, eviction)
        self.duration = duration
        self.started: int | None = None  # when the timer started (`start`)

    def on_time(self, now_ms: int) -> bool:
        self.eviction.set_context(EvictionContext(now_ms, sliding_interval=self.duration))
        return self.manager.on_trigger()

    def start(self, now_ms: int) -> None:
        """The timer starts at ``now_ms``: the end of a window that never fires (the windows end
        every ``duration`` from here), which `arrival_ts` stamps events after, as after a window
        that fired. An event stamped with that very millisecond (on a simulated clock, every
        event that arrives before the clock moves) was on the boundary of the window ending
        ``length`` after it, which it is not in: a sliding window of 10 s every 5 s had it in one
        window, not two."""
        self.started = now_ms

    def arrival_ts(self, now_ms: int) -> int:
        """``now_ms``, or one ms after the end of the last window fired (or after the timer's
        start, `start`) if that is later (see the class docstring)."""
        ctx = self.eviction.context  # set by `on_time` only (and restored with it)
        end = ctx.reference_time if ctx is not None else self.started
        if end is not None and now_ms <= end:
            return end + 1
        return now_ms


class WatermarkTimeTriggerPolicy(TriggerPolicy):
    """On each watermark, fires every window whose end (a multiple of the sliding interval)
    the watermark reached (Storm's ``WatermarkTimeTriggerPolicy``); windows with no event are
    skipped by jumping to the next aligned end after the earliest event."""

    _saved = ("next_window_end",)

    def __init__(self, sliding_ms: int, manager: WindowManager, eviction: EvictionPolicy) -> None:
        super().__init__(manager, eviction)
        self.sliding_ms = sliding_ms
        self.next_window_end = 0

    def track(self, event: Event) -> None:
        if not event.watermark:
            return
        watermark = event.ts
        end = self.next_window_end
        while end <= watermark:
            self.eviction.set_context(EvictionContext(end, self.manager.get_event_count(end)))
            if self.manager.on_trigger():
                end += self.sliding_ms
                continue
            nxt = self._next_aligned_end(end, watermark)
            if nxt is None:
                break
            end = nxt
        self.next_window_end = end

    def evaluated_through(self, ts: int) -> bool:
        # only a window ending at ``ts`` holds it and has been evaluated; between two ends, the
        # window that holds it ends later and is still open
        return ts % self.sliding_ms == 0 and self.next_window_end > ts

    def _next_aligned_end(self, start: int, end: int) -> int | None:
        ts = self.manager.get_earliest_event_ts(start, end)
        if ts is None or ts % self.sliding_ms == 0:
            return ts
        return ts + (self.sliding_ms - ts % self.sliding_ms)


class WatermarkCountTriggerPolicy(TriggerPolicy):
    """On each watermark, fires once per ``count`` events up to it, in timestamp order (Storm's
    ``WatermarkCountTriggerPolicy``); a window ends at the timestamp of its last event.

    The events a watermark adds to the count are those after the previous one (any other is
    late), and ``pending`` carries what was counted towards the next window. Storm's counts the
    events after the last window's end instead, so an event sharing the end's timestamp was
    counted for no window, and the later windows ended one event late.
    """

    _saved = ("last_watermark", "pending")

    def __init__(self, count: int, manager: WindowManager, eviction: EvictionPolicy) -> None:
        super().__init__(manager, eviction)
        self.count = count
        self.last_watermark: int | None = None
        self.pending = 0

    def track(self, event: Event) -> None:
        if not event.watermark:
            return
        n = self.pending
        for ts in self.manager.get_timestamps(self.last_watermark, event.ts):
            n += 1
            if n == self.count:
                self.eviction.set_context(EvictionContext(ts, None, self.count))
                self.manager.on_trigger()
                n = 0
        self.pending = n
        self.last_watermark = event.ts
