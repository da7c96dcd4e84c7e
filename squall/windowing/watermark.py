"""Watermarks for event-time windows (Storm's ``WaterMarkEventGenerator``), as a plain object:
the owner calls `WatermarkGenerator.next_watermark` every watermark interval.

The watermark is the minimum over the input streams of the newest timestamp seen on each,
minus the lag, once every input stream has delivered something. It only moves forward; a
tuple older than the last watermark is late.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable


class WatermarkGenerator:
    """Tracks the newest timestamp per input stream; see the module docstring."""

    def __init__(self, lag_ms: int, input_streams: Iterable[Hashable]) -> None:
        self.lag_ms = lag_ms
        self.input_streams = frozenset(input_streams)
        self.latest: dict[Hashable, int] = {}
        self.last_watermark = 0

    def track(self, stream: Hashable, ts: int) -> bool:
        """Note ``ts`` arrived on ``stream``; False if the tuple is late (before the last
        watermark)."""
        if ts > self.latest.get(stream, ts - 1):
            self.latest[stream] = ts
        return ts >= self.last_watermark

    def next_watermark(self) -> int | None:
        """The new watermark, or None if it did not move."""
        if not self.latest or len(self.latest) < len(self.input_streams):
            return None  # some input stream has not delivered yet
        ts = min(self.latest.values()) - self.lag_ms
        if ts <= self.last_watermark:
            return None
        self.last_watermark = ts
        return ts

    def get_state(self) -> tuple[list, int]:
        """The newest timestamp per stream and the last watermark, as plain values (streams
        are (component, stream) pairs), for a persistent window."""
        return [[list(s), ts] for s, ts in self.latest.items()], self.last_watermark

    def restore_state(self, state: list) -> None:
        """Resume from what `get_state` returned."""
        latest, self.last_watermark = state
        self.latest = {tuple(s): ts for s, ts in latest}
