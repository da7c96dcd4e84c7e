"""The window of a Trident window operation (Storm's ``org.apache.storm.trident.windowing.config``).

Four kinds, each made with Storm's ``of``: `TumblingCountWindow.of(n)`,
`SlidingCountWindow.of(n, slide)`, `TumblingDurationWindow.of(Duration)` and
`SlidingDurationWindow.of(Duration, Duration)` (``squall.Duration``, Storm's
``BaseWindowedBolt.Duration``). Counts are of tuples, durations of processing time: Trident's
windowing has no event time, as Storm's has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...windowing._api import Count, Duration


@dataclass(frozen=True)
class WindowConfig:
    """A window's length and sliding length (Storm's ``WindowConfig``): tuples for the count
    kinds, milliseconds for the duration kinds. Use a subclass's ``of``."""

    window_length: int
    sliding_length: int

    kind: ClassVar[str] = "window"
    by_count: ClassVar[bool] = True

    def get_window_length(self) -> int:
        """The window's length (tuples, or ms)."""
        return self.window_length

    def get_sliding_length(self) -> int:
        """How far the window moves each time it fires (tuples, or ms)."""
        return self.sliding_length

    def validate(self) -> None:
        """Storm's check: the lengths are positive, the slide at most the window.

        Raises:
            ValueError: naming the window and the length at fault.
        """
        unit = "tuples" if self.by_count else "ms"
        for name, value in (("window length", self.window_length), ("sliding length", self.sliding_length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{self}: the {name} must be a positive number of {unit}, got {value!r}")
        if self.sliding_length > self.window_length:
            raise ValueError(f"{self}: the sliding length {self.sliding_length} {unit} is longer than the window "
                             f"length {self.window_length} {unit} (tuples would be in no window)")

    def lengths(self) -> tuple[Count | Duration, Count | Duration]:
        """The window length and sliding interval as squall's windowing takes them."""
        if self.by_count:
            return Count(self.window_length), Count(self.sliding_length)
        return Duration(self.window_length), Duration(self.sliding_length)

    def __str__(self) -> str:
        unit = "" if self.by_count else " ms"
        if self.window_length == self.sliding_length and self.kind.startswith("Tumbling"):
            return f"{self.kind}({self.window_length}{unit})"
        return f"{self.kind}({self.window_length}{unit}, {self.sliding_length}{unit})"


def _count(n: object, what: str, kind: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"{kind}.of: the {what} must be an int number of tuples, got {n!r}")  # noqa: TRY004 (API.md: a bad window setting raises ValueError)
    return n


def _ms(d: object, what: str, kind: str) -> int:
    if not isinstance(d, Duration):
        raise ValueError(f"{kind}.of: the {what} must be a Duration (squall.Duration), got {d!r}")  # noqa: TRY004 (API.md: a bad window setting raises ValueError)
    return d.value


@dataclass(frozen=True)
class TumblingCountWindow(WindowConfig):
    """Fires every ``window_length`` tuples over those tuples: each tuple in one window."""

    kind: ClassVar[str] = "TumblingCountWindow"

    @classmethod
    def of(cls, window_count: int) -> TumblingCountWindow:
        """A window of ``window_count`` tuples."""
        n = _count(window_count, "window count", cls.kind)
        return cls(n, n)


@dataclass(frozen=True)
class SlidingCountWindow(WindowConfig):
    """Fires every ``sliding_length`` tuples over the last ``window_length`` tuples."""

    kind: ClassVar[str] = "SlidingCountWindow"

    @classmethod
    def of(cls, window_count: int, sliding_count: int) -> SlidingCountWindow:
        """A window of the last ``window_count`` tuples, every ``sliding_count`` tuples."""
        return cls(_count(window_count, "window count", cls.kind), _count(sliding_count, "sliding count", cls.kind))


@dataclass(frozen=True)
class TumblingDurationWindow(WindowConfig):
    """Fires every ``window_length`` ms over the tuples added in that time: each tuple in one window."""

    kind: ClassVar[str] = "TumblingDurationWindow"
    by_count: ClassVar[bool] = False

    @classmethod
    def of(cls, window_length: Duration) -> TumblingDurationWindow:
        """A window of ``window_length``."""
        ms = _ms(window_length, "window length", cls.kind)
        return cls(ms, ms)


@dataclass(frozen=True)
class SlidingDurationWindow(WindowConfig):
    """Fires every ``sliding_length`` ms over the tuples added in the last ``window_length`` ms."""

    kind: ClassVar[str] = "SlidingDurationWindow"
    by_count: ClassVar[bool] = False

    @classmethod
    def of(cls, window_length: Duration, sliding_interval: Duration) -> SlidingDurationWindow:
        """A window of ``window_length``, every ``sliding_interval``."""
        return cls(_ms(window_length, "window length", cls.kind), _ms(sliding_interval, "sliding interval", cls.kind))


__all__ = ["SlidingCountWindow", "SlidingDurationWindow", "TumblingCountWindow", "TumblingDurationWindow",
           "WindowConfig"]
