"""The window manager (Storm's ``WindowManager``): the queue of events, scanned by an eviction
policy when a trigger policy fires. Pure: timestamps come with the events and the triggers, so
a test drives it with made-up times.

Memory stays bounded: an event leaves the queue when it expires (at the next trigger, or
earlier: every `EXPIRE_EVENTS_THRESHOLD` adds the head of the queue is scanned for expired
events), so the queue holds at most a window plus one sliding interval of events (count
windows: length + max(sliding, 100) events; duration windows: the events of length + sliding ms
of arrival, plus the lag in event time). The previous window's events are also held, to tell
the new ones apart (`TupleWindow.get_new`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ._api import Count, Duration
from .policies import (
    Action,
    CountEvictionPolicy,
    CountTriggerPolicy,
    Event,
    EvictionPolicy,
    TimeEvictionPolicy,
    TimeTriggerPolicy,
    TriggerPolicy,
    WatermarkCountEvictionPolicy,
    WatermarkCountTriggerPolicy,
    WatermarkTimeEvictionPolicy,
    WatermarkTimeTriggerPolicy,
)

EXPIRE_EVENTS_THRESHOLD = 100
"""Adds between two scans of the queue's head for expired events (Storm's)."""


class WindowListener(Protocol):
    """What a `WindowManager` calls back (Storm's ``WindowLifecycleListener``)."""

    def on_expiry(self, events: list[Any]) -> None:
        """``events`` left their last window."""

    def on_activation(self, events: list[Any], new: list[Any], expired: list[Any], end_ts: int | None) -> None:
        """The window fired with ``events`` (never empty)."""


class WindowManager:
    """Tracks the events of one window; see the module docstring."""

    def __init__(self, listener: WindowListener) -> None:
        self.listener = listener
        self.queue: deque[Event] = deque()
        self.expired: list[Any] = []  # expired since the last activation
        self.prev_window: set[Event] = set()
        self.since_expiry = 0
        self.by_timestamp = False  # event time: scans go in timestamp order (`in_timestamp_order`)
        self.out_of_order = False  # an event was added with a timestamp before the queue's last
        self.firing: list[Event] = []  # the window being fired, while the listener runs
        self.eviction: EvictionPolicy = None  # type: ignore[assignment]  # set by `window_manager`
        self.trigger: TriggerPolicy = None  # type: ignore[assignment]

    def add(self, value: Any, ts: int) -> None:
        """Track ``value`` with timestamp ``ts`` (ms); a trigger may fire the window."""
        event = Event(value, ts)
        queue = self.queue
        if queue and ts < queue[-1].ts:
            self.out_of_order = True
        queue.append(event)
        self._track(event)

    def add_watermark(self, ts: int) -> None:
        """All events up to ``ts`` have arrived (event time): fire the windows that end by then."""
        self._track(Event(None, ts, watermark=True))

    def on_time(self, now_ms: int) -> bool:
        """A processing-time trigger's timer went off at ``now_ms``; whether a window fired
        with events (an empty one does not call the listener)."""
        return self.trigger.on_time(now_ms)

    def start(self, now_ms: int) -> None:
        """The window's timer (a processing-time trigger's) starts at ``now_ms``, before the
        first event (`TimeTriggerPolicy.start`)."""
        self.trigger.start(now_ms)

    def arrival_ts(self, now_ms: int) -> int:
        """The timestamp to `add` an event with that arrives at ``now_ms`` in processing time:
        ``now_ms``, but never in a window that already fired (`TimeTriggerPolicy.arrival_ts`)."""
        return self.trigger.arrival_ts(now_ms)

    def _track(self, event: Event) -> None:
        self.eviction.track(event)
        self.trigger.track(event)
        self.since_expiry += 1
        if self.since_expiry >= EXPIRE_EVENTS_THRESHOLD:
            self._scan(full=False)

    def on_trigger(self) -> bool:
        """Fire the window for the eviction policy's context; False if it was empty (then the
        bolt is not called)."""
        window = self._scan(full=True)
        expired, self.expired = self.expired, []
        prev = self.prev_window
        events = [e.value for e in window]
        try:
            if events:
                new = [e.value for e in window if e not in prev]
                self.prev_window = set(window)
                ctx = self.eviction.context
                self.firing = window
                self.listener.on_activation(events, new, expired, ctx.reference_time if ctx is not None else None)
            else:
                self.prev_window = set()
        finally:  # a bolt that raised (fail-fast off) must not shift every later count window
            self.firing = []
            self.trigger.reset()
        return bool(events)

    def _scan(self, full: bool) -> list[Event]:
        """Remove expired events (and call back for them); with ``full`` also return the events
        in the window, else stop at the first one that did not expire."""
        evict = self.eviction.evict
        queue = self.queue
        gone: list[Any] = []
        window: list[Event] = []
        if not full:
            while queue and evict(queue[0]) is Action.EXPIRE:
                gone.append(queue.popleft().value)
        else:
            kept: deque[Event] = deque()
            it = iter(self.in_timestamp_order())
            for event in it:
                action = evict(event)
                if action is Action.EXPIRE:
                    gone.append(event.value)
                    continue
                kept.append(event)
                if action is Action.STOP:
                    kept.extend(it)
                    break
                if action is Action.PROCESS:
                    window.append(event)
            self.queue = kept
        self.since_expiry = 0
        if gone:
            self.expired.extend(gone)
            self.listener.on_expiry(gone)
        return window

    def in_timestamp_order(self) -> deque[Event]:
        """The queue; in event time, first sorted by timestamp (arrival order among equal ones)
        if an event arrived out of order.

        Event-time policies scan in timestamp order: a scan can then stop at the first event
        beyond the window, and a count window takes the last events by timestamp. Arrival order
        is not timestamp order within the lag, nor beyond it when spout tasks whose event times
        run apart feed one stream (the watermark follows the fastest): Storm scans in arrival
        order and stops at the first event more than the lag beyond the window, so events of
        that window arriving after it were never in it and were acked by the next (issue 33).
        The sort is stable and Timsort takes the in-order runs of each source at linear cost.
        """
        if self.by_timestamp and self.out_of_order:
            self.queue = deque(sorted(self.queue, key=_timestamp))
            self.out_of_order = False
        return self.queue

    # --- for the event-time triggers ------------------------------------------------------------

    def get_earliest_event_ts(self, start: int, end: int) -> int | None:
        """The smallest timestamp in ``(start, end]``, or None."""
        return min((e.ts for e in self.queue if start < e.ts <= end), default=None)

    def get_event_count(self, reference_time: int) -> int:
        """Events with timestamp up to ``reference_time``."""
        return sum(1 for e in self.queue if e.ts <= reference_time)

    def get_timestamps(self, start: int | None, end: int) -> list[int]:
        """The timestamps in ``(start, end]`` (None: from the first), in order."""
        return [e.ts for e in self.in_timestamp_order()
                if e.ts <= end and (start is None or e.ts > start)]

    def __len__(self) -> int:
        return len(self.queue)

    # --- for a persistent window (Storm's getState / restoreState) ------------------------------

    def get_state(self) -> list:
        """The manager's progress but not its queue, as plain values: the values of the previous
        window and of the events expired since the last activation (so these must be plain
        values, as a persistent window's event numbers are), and the policies' states."""
        return [self.since_expiry, [e.value for e in self.prev_window], list(self.expired),
                self.eviction.get_state(), self.trigger.get_state()]

    def restore_state(self, state: list, events: Iterable[tuple[Any, int]]) -> None:
        """Resume from what `get_state` returned, with ``events`` ((value, timestamp), in arrival
        order) as the queue, less the events that had expired since the last activation: those
        are saved only for `TupleWindow.get_expired` (a count window's early scans expire its
        oldest events between triggers), and queued again they would be in the next window, and
        expired (in ``get_expired``) a second time."""
        since, prev, expired, eviction, trigger = state
        gone = set(expired)
        self.queue = deque(Event(v, ts) for v, ts in events if v not in gone)
        self.out_of_order = True  # arrival order: sorted by the next event-time scan
        prev = set(prev)
        self.prev_window = {e for e in self.queue if e.value in prev}
        self.expired = list(expired)
        self.since_expiry = since
        self.eviction.restore_state(eviction)
        self.trigger.restore_state(trigger)


def _timestamp(event: Event) -> int:
    return event.ts


def window_manager(listener: WindowListener, length: Count | Duration, sliding: Count | Duration,
                   event_time: bool = False) -> WindowManager:
    """A `WindowManager` with Storm's policies for this window (``WindowedBoltExecutor``'s
    choice): count or time eviction by the length, count or time trigger by the sliding
    interval, their watermark variants in event time."""
    manager = WindowManager(listener)
    if isinstance(length, Count):
        eviction: EvictionPolicy = (WatermarkCountEvictionPolicy if event_time else CountEvictionPolicy)(length.value)
    elif event_time:
        eviction = WatermarkTimeEvictionPolicy(length.value)
    else:
        eviction = TimeEvictionPolicy(length.value)
    if isinstance(sliding, Count):
        trigger_cls: Callable[..., TriggerPolicy] = WatermarkCountTriggerPolicy if event_time else CountTriggerPolicy
    else:
        trigger_cls = WatermarkTimeTriggerPolicy if event_time else TimeTriggerPolicy
    manager.by_timestamp = event_time
    manager.eviction = eviction
    manager.trigger = trigger_cls(sliding.value, manager, eviction)
    return manager
