"""The windows a `Stream` is cut into (Storm's ``streams.windowing``): `TumblingWindows` and
`SlidingWindows`, of a `squall.Count` of tuples or a `squall.Duration`, in processing time or,
with ``with_timestamp_field``, event time. ``Stream.window(w)`` makes the bolt that runs what
follows a windowed bolt (`squall.BaseWindowedBolt`) configured with ``w``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Self

from ..windowing import Count, Duration


@dataclass(frozen=True)
class Window:
    """A window's settings (Storm's ``Window``/``BaseWindow``): ``window_length`` and
    ``sliding_interval`` (each a `Count` or a `Duration`), and for event time the
    ``timestamp_field``, the ``lag`` and the ``late_tuple_stream``. Windows compare by value:
    a bolt takes one window."""

    window_length: Count | Duration
    sliding_interval: Count | Duration
    timestamp_field: str | None = None
    late_tuple_stream: str | None = None
    lag: Duration | None = None

    def __post_init__(self) -> None:
        for name in ("window_length", "sliding_interval"):
            v = getattr(self, name)
            if not isinstance(v, (Count, Duration)):
                raise TypeError(f"a window's {name} must be a squall Count or Duration, got {v!r}")

    def get_window_length(self) -> Count | Duration:
        """Storm's ``getWindowLength``."""
        return self.window_length

    def get_sliding_interval(self) -> Count | Duration:
        """Storm's ``getSlidingInterval``."""
        return self.sliding_interval

    def get_timestamp_field(self) -> str | None:
        """Storm's ``getTimestampField``."""
        return self.timestamp_field

    def get_late_tuple_stream(self) -> str | None:
        """Storm's ``getLateTupleStream``."""
        return self.late_tuple_stream

    def get_lag(self) -> Duration | None:
        """Storm's ``getLag``."""
        return self.lag

    def with_timestamp_field(self, field_name: str) -> Self:
        """This window in event time: each value's time is the spout tuple's ``field_name``
        (epoch ms), carried through the stream's bolts as an extra last field."""
        return dataclasses.replace(self, timestamp_field=field_name)

    def with_late_tuple_stream(self, stream_id: str) -> Self:
        """Emit the tuples that come after their window fired on ``stream_id``."""
        return dataclasses.replace(self, late_tuple_stream=stream_id)

    def with_lag(self, duration: Duration) -> Self:
        """How far behind the newest timestamp a tuple may be and still be in time."""
        return dataclasses.replace(self, lag=duration)


@dataclass(frozen=True)
class TumblingWindows(Window):
    """Back-to-back windows of one length: each value is in exactly one (Storm's
    ``TumblingWindows``)."""

    @classmethod
    def of(cls, length: Count | Duration) -> TumblingWindows:
        """Windows of ``length`` (a `Count` or a `Duration`)."""
        return cls(length, length)


@dataclass(frozen=True)
class SlidingWindows(Window):
    """Windows of ``window_length`` that start every ``sliding_interval`` (Storm's
    ``SlidingWindows``)."""

    @classmethod
    def of(cls, window_length: Count | Duration, sliding_interval: Count | Duration) -> SlidingWindows:
        """Windows of ``window_length``, one every ``sliding_interval``."""
        return cls(window_length, sliding_interval)
