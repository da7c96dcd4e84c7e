"""The windowed bolt API (Storm's ``BaseWindowedBolt``, ``BaseWindowedBolt.Count`` and
``.Duration``, ``TupleWindow``) and the configuration keys its builders set.

A windowed bolt is not a `Bolt`: `TopologyBuilder.set_bolt` wraps it in a
`WindowedBoltExecutor` (squall.windowing.executor), as Storm's does, and that wrapper is what
the engine runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from .._config import Config

if TYPE_CHECKING:
    from .._collectors import OutputCollector, OutputFieldsDeclarer
    from .._context import TopologyContext
    from .._tuple import Tuple

# Storm's component keys (Config.TOPOLOGY_BOLTS_*), where the builders store the window

LATE_TUPLE_FIELD = "late_tuple"
"""The one field of the late-tuple stream: the late input `Tuple`."""


@dataclass(frozen=True)
class Count:
    """A window length or sliding interval in tuples (Storm's ``BaseWindowedBolt.Count``)."""

    value: int

    @classmethod
    def of(cls, n: int) -> Count:
        """``n`` tuples."""
        return cls(n)


@dataclass(frozen=True)
class Duration:
    """A window length, sliding interval, lag or watermark interval in milliseconds (Storm's
    ``BaseWindowedBolt.Duration``); ``value`` is the number of milliseconds."""

    value: int

    @classmethod
    def of(cls, ms: int) -> Duration:
        """``ms`` milliseconds."""
        return cls(_millis(ms))

    @classmethod
    def seconds(cls, n: float) -> Duration:
        """``n`` seconds."""
        return cls(_millis(n * 1000))

    @classmethod
    def minutes(cls, n: float) -> Duration:
        """``n`` minutes."""
        return cls(_millis(n * 60_000))

    @classmethod
    def hours(cls, n: float) -> Duration:
        """``n`` hours."""
        return cls(_millis(n * 3_600_000))

    @classmethod
    def days(cls, n: float) -> Duration:
        """``n`` days."""
        return cls(_millis(n * 86_400_000))


def _millis(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"a duration needs a number of milliseconds, got {v!r}")  # noqa: TRY004 (API.md: a bad window setting raises ValueError)
    return round(v)


class TupleWindow:
    """The tuples of one activation of a window (Storm's ``TupleWindow``), handed to
    `BaseWindowedBolt.execute`."""

    __slots__ = ("_end", "_expired", "_new", "_start", "_tuples")

    def __init__(self, tuples: list[Tuple], new: list[Tuple], expired: list[Tuple],
                 start_ts: int | None, end_ts: int | None) -> None:
        self._tuples = tuples
        self._new = new
        self._expired = expired
        self._start = start_ts
        self._end = end_ts

    def get(self) -> list[Tuple]:
        """Every tuple in the window, oldest first (for a persistent window larger than its
        ``with_max_events_in_memory``, a sequence that reads them from the state as it is
        iterated; so are `get_new` and `get_expired`)."""
        return self._tuples

    def get_new(self) -> list[Tuple]:
        """The tuples that were not in the previous activation's window."""
        return self._new

    def get_expired(self) -> list[Tuple]:
        """The tuples that left the window since the previous activation (already acked)."""
        return self._expired

    def get_start_timestamp(self) -> int | None:
        """The window's start, epoch ms (end - length) for a duration window; None for a count
        window."""
        return self._start

    def get_end_timestamp(self) -> int | None:
        """The window's end, epoch ms: the event time it closes at, or for a processing-time
        window the time it fired."""
        return self._end

    def __repr__(self) -> str:
        return (f"TupleWindow({len(self._tuples)} tuples, {len(self._new)} new, "
                f"{len(self._expired)} expired, start={self._start}, end={self._end})")


class BaseWindowedBolt:
    """A bolt that processes windows of tuples (Storm's ``BaseWindowedBolt``).

    Configure it with the builders (each returns the bolt), then give it to
    `TopologyBuilder.set_bolt`. ``execute`` gets a `TupleWindow` each time a window fires (never
    an empty one). Inputs are acked for you when they leave their last window, and an emit
    without anchors is anchored to every tuple of the window, so ``topology.message.timeout.secs``
    must cover the window (length plus sliding interval): squall refuses a topology where it
    does not, as Storm does. See docs/windows.md.
    """

    def __init__(self) -> None:
        self._window_conf: dict[str, Any] = {}

    # --- builders -------------------------------------------------------------------------------

    def with_window(self, window_length: Count | Duration, sliding_interval: Count | Duration | None = None
                    ) -> Self:
        """A sliding window of ``window_length`` that fires every ``sliding_interval`` (a `Count`
        or a `Duration`; default ``Count(1)``, every tuple)."""
        conf = self._conf()
        length_keys = (Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT, Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS)
        sliding_keys = (Config.TOPOLOGY_BOLTS_SLIDING_INTERVAL_COUNT,
                        Config.TOPOLOGY_BOLTS_SLIDING_INTERVAL_DURATION_MS)
        for key in length_keys + sliding_keys:
            conf.pop(key, None)
        conf.update(_length_keys(window_length, *length_keys, "window length"))
        conf.update(_length_keys(Count(1) if sliding_interval is None else sliding_interval, *sliding_keys,
                                 "sliding interval"))
        return self

    def with_tumbling_window(self, length: Count | Duration) -> Self:
        """A tumbling window: each tuple is in exactly one window of ``length``."""
        return self.with_window(length, length)

    def with_timestamp_field(self, name: str) -> Self:
        """Use event time: each input's ``name`` field, epoch milliseconds (an int)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"the timestamp field must be a field name, got {name!r}")
        self._conf()[Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME] = name
        return self

    def with_lag(self, duration: Duration) -> Self:
        """How far behind the newest timestamp a tuple may be and still be in time (default 0)."""
        if not isinstance(duration, Duration) or duration.value < 0:
            raise ValueError(f"the lag must be a non-negative Duration, got {duration!r}")
        self._conf()[Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS] = duration.value
        return self

    def with_watermark_interval(self, duration: Duration) -> Self:
        """How often a watermark is computed and windows up to it fire (default 1 s)."""
        self._conf()[Config.TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS] = _positive(duration, Duration,
                                                                                   "watermark interval")
        return self

    def with_watermark_idle_timeout(self, duration: Duration) -> Self:
        """How long a source task may deliver nothing before the watermark stops waiting for it
        (default: ``topology.message.timeout.secs``). The watermark follows the slowest task of
        each input stream; a task silent this long (a Kafka spout task with no partition, a dead
        worker's) is not waited for until it delivers again. ``Duration.of(0)`` gives Storm's
        watermark back: per input stream, the newest timestamp of any of its tasks."""
        if not isinstance(duration, Duration) or isinstance(duration.value, bool) \
                or not isinstance(duration.value, int) or duration.value < 0:
            raise ValueError(f"the watermark idle timeout must be a non-negative Duration, got {duration!r}")
        self._conf()[Config.TOPOLOGY_BOLTS_WATERMARK_IDLE_TIMEOUT_MS] = duration.value
        return self

    def with_late_tuple_stream(self, stream_id: str) -> Self:
        """Emit tuples that arrive after the watermark passed them on ``stream_id`` (declared
        for you, one field ``late_tuple``), anchored to them, then ack them. Needs
        `with_timestamp_field`."""
        if not isinstance(stream_id, str) or not stream_id:
            raise ValueError(f"the late tuple stream must be a stream id, got {stream_id!r}")
        self._conf()[Config.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM] = stream_id
        return self

    def _conf(self) -> dict[str, Any]:
        if "_window_conf" not in self.__dict__:  # a subclass that did not call __init__
            self._window_conf = {}
        return self._window_conf

    # --- what the user overrides ------------------------------------------------------------------

    def prepare(self, conf: dict, context: TopologyContext, collector: OutputCollector) -> None:
        """Called once per task before any window; stores the arguments on ``self``."""
        self.conf = conf
        self.context = context
        self.collector = collector

    def execute(self, window: TupleWindow) -> None:
        """Process one window. Emits without anchors are anchored to all of ``window.get()``."""

    def cleanup(self) -> None:
        """Called when the task shuts down cleanly (not guaranteed)."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare the streams this bolt emits (the late-tuple stream is declared for you)."""

    def get_component_configuration(self) -> dict[str, Any] | None:
        """The window settings made by the builders (override and merge to add keys)."""
        return dict(self._conf())


def _positive(v: Any, kind: type[Count | Duration], what: str) -> int:
    if not isinstance(v, kind):
        raise ValueError(f"the {what} must be a {kind.__name__}, got {v!r}")  # noqa: TRY004 (API.md: a bad window setting raises ValueError)
    if isinstance(v.value, bool) or not isinstance(v.value, int) or v.value <= 0:
        raise ValueError(f"the {what} must be positive, got {v!r}")
    return v.value


def _length_keys(v: Any, count_key: str, duration_key: str, what: str) -> dict[str, int]:
    if isinstance(v, Count):
        return {count_key: _positive(v, Count, what)}
    if isinstance(v, Duration):
        return {duration_key: _positive(v, Duration, what)}
    raise ValueError(f"the {what} must be a Count or a Duration, got {v!r}")
