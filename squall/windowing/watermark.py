"""Watermarks for event-time windows (Storm's ``WaterMarkEventGenerator``), as a plain object:
the owner calls `WatermarkGenerator.next_watermark` every watermark interval.

The watermark is the minimum over the input streams of the newest timestamp seen on each,
minus the lag, once every input stream has delivered something. It only moves forward. A tuple
before the last watermark is late, as in Storm, and so is one before 0 (Storm's first
watermark). One at the watermark is late only if a window ending there was evaluated (the
owner asks its trigger: Storm counts such a tuple in time, though that window, which held it,
had fired: it then expired with the next window without being in any, issue 33); a watermark
between two window ends leaves the window that holds it open.
"""

from __future__ import annotations

from collections.abc import Iterable

Stream = tuple[str, str]
"""An input stream: (component, stream id)."""


class WatermarkGenerator:
    """Tracks the newest timestamp per input stream; see the module docstring."""

    def __init__(self, lag_ms: int, input_streams: Iterable[Stream]) -> None:
        self.lag_ms = lag_ms
        self.input_streams = frozenset(input_streams)
        self.latest: dict[Stream, int] = {}
        self.last_watermark: int | None = None  # None: no watermark yet

    def track(self, stream: Stream, ts: int) -> bool:
        """Note ``ts`` arrived on ``stream``; False if the tuple may be late (at or before the
        last watermark, or before 0, Storm's first: a negative timestamp was in no window, and
        its tuple expired without a word)."""
        if ts > self.latest.get(stream, ts - 1):
            self.latest[stream] = ts
        return ts >= 0 if self.last_watermark is None else ts > self.last_watermark

    def next_watermark(self) -> int | None:
        """The new watermark, or None if it did not move."""
        if not self.latest or len(self.latest) < len(self.input_streams):
            return None  # some input stream has not delivered yet
        ts = min(self.latest.values()) - self.lag_ms
        if self.last_watermark is not None and ts <= self.last_watermark:
            return None
        self.last_watermark = ts
        return ts

    def newest(self) -> int | None:
        """The newest timestamp seen on any input stream (None: nothing yet)."""
        return max(self.latest.values(), default=None)

    def held_back_by(self) -> tuple[list[Stream], list[Stream]]:
        """What keeps the watermark where it is: the input streams that have delivered nothing
        (it waits for all of them), and those whose newest timestamp is the oldest of all."""
        silent = sorted(self.input_streams - self.latest.keys())
        oldest = min(self.latest.values(), default=None)
        slowest = sorted(s for s, ts in self.latest.items() if ts == oldest) if not silent else []
        return silent, slowest

    def get_state(self) -> tuple[list, int | None]:
        """The newest timestamp per stream and the last watermark, as plain values (streams
        are (component, stream) pairs), for a persistent window."""
        return [[list(s), ts] for s, ts in self.latest.items()], self.last_watermark

    def restore_state(self, state: list) -> None:
        """Resume from what `get_state` returned."""
        latest, self.last_watermark = state
        self.latest = {tuple(s): ts for s, ts in latest}
