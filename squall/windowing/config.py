"""A windowed bolt's settings, read from its configuration, and Storm's checks of them
(``WindowedBoltExecutor.validate``), run at submit so a bad window is refused with the
component's name before anything starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._config import Config, conf_value
from .._errors import InvalidTopologyException
from .._system import CHECKPOINT_STREAM, SYSTEM_STREAM, TICK_STREAM
from ._api import (
    Count,
    Duration,
)

DEFAULT_WATERMARK_INTERVAL_MS = 1000
DEFAULT_MAX_LAG_MS = 0


@dataclass(frozen=True)
class WindowSpec:
    """A windowed bolt's window: length and sliding interval, and for event time the timestamp
    field, lag, watermark interval and late-tuple stream (None: processing time / no stream)."""

    length: Count | Duration
    sliding: Count | Duration
    timestamp_field: str | None = None
    lag_ms: int = DEFAULT_MAX_LAG_MS
    watermark_interval_ms: int = DEFAULT_WATERMARK_INTERVAL_MS
    late_stream: str | None = None
    idle_timeout_ms: int | None = None  # None: the message timeout (`watermark_idle_timeout_ms`)

    @property
    def event_time(self) -> bool:
        """True when windows follow the tuples' timestamps, not their arrival."""
        return self.timestamp_field is not None

    def timer_secs(self) -> float | None:
        """How often the window needs a timer: the watermark interval in event time, the sliding
        interval for a processing-time duration trigger, else None (count triggers need none)."""
        if self.event_time:
            return self.watermark_interval_ms / 1000
        if isinstance(self.sliding, Duration):
            return self.sliding.value / 1000
        return None


def window_spec(conf: Mapping[str, Any], component: str) -> WindowSpec:
    """The window ``conf`` describes (Storm's ``initWindowManager``: a count wins over a duration).

    Raises:
        InvalidTopologyException: no window length, a late-tuple stream without a timestamp
            field, or a value of the wrong type (naming the component and key).
    """
    def number(key: str, minimum: int) -> int | None:
        v = conf.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < minimum:
            what = "a positive" if minimum > 0 else "a non-negative"
            raise InvalidTopologyException(f"Component [{component}]: {key!r} must be {what} number, got {v!r}")
        return int(v)

    if (n := number(Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT, 1)) is not None:
        length: Count | Duration = Count(n)
    elif (ms := number(Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS, 1)) is not None:
        length = Duration(ms)
    else:
        raise InvalidTopologyException(
            f"Component [{component}]: Window length is not specified (with_window or with_tumbling_window)")
    if (n := number(Config.TOPOLOGY_BOLTS_SLIDING_INTERVAL_COUNT, 1)) is not None:
        sliding: Count | Duration = Count(n)
    elif (ms := number(Config.TOPOLOGY_BOLTS_SLIDING_INTERVAL_DURATION_MS, 1)) is not None:
        sliding = Duration(ms)
    else:
        sliding = Count(1)
    field = conf.get(Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME)
    late = conf.get(Config.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM)
    for key, v in ((Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME, field),
                   (Config.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM, late)):
        if v is not None and (not isinstance(v, str) or not v):
            raise InvalidTopologyException(f"Component [{component}]: {key!r} must be a non-empty string, got {v!r}")
    if late is not None and field is None:
        raise InvalidTopologyException(
            f"Component [{component}]: Late tuple stream can be defined only when specifying a timestamp field "
            f"({Config.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM}={late!r} without with_timestamp_field)")
    lag = number(Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS, 0)
    interval = number(Config.TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS, 1)
    idle = number(Config.TOPOLOGY_BOLTS_WATERMARK_IDLE_TIMEOUT_MS, 0)
    return WindowSpec(length, sliding, field, DEFAULT_MAX_LAG_MS if lag is None else lag,
                      DEFAULT_WATERMARK_INTERVAL_MS if interval is None else interval, late, idle)


def watermark_idle_timeout_ms(spec: WindowSpec, conf: Mapping[str, Any]) -> int:
    """How long (ms) a source task may deliver nothing before it no longer holds an event-time
    window's watermark back: the bolt's ``with_watermark_idle_timeout``, else the topology's
    message timeout (``topology.message.timeout.secs``, 30 s by default).

    Why the message timeout: it is the time a Storm user already sized as "this tuple is lost,
    replay it", it is at least the window (Storm refuses a window longer than it), and it is when
    the window warns of a stalled watermark (`STALLED_WATERMARK_TIMEOUTS`): a spout task with no
    partition stalls the first windows for that long once, and a task whose worker died is
    waited for that long, time for its worker to be restarted and replay from where it was (a
    restart is seconds), before the others' windows fire without it. A task that emits behind
    the others but keeps emitting always holds the watermark, however long."""
    if spec.idle_timeout_ms is not None:
        return spec.idle_timeout_ms
    return int(float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS)) * 1000)


def watermark_sources(sources: Mapping[Any, Any], context: Any) -> dict[tuple[str, str], list[int]]:
    """The input streams a watermark waits for (`input_streams`), each with the tasks of its
    component (the bolt's ``context``)."""
    return {(s[0], s[1]): context.get_component_tasks(s[0]) for s in input_streams(sources)}


def check_window(component: str, conf: Mapping[str, Any], streams: Mapping[str, Any],
                 inputs: Mapping[tuple[str, str], Any], persistent: bool = False,
                 spouts: Mapping[str, Mapping[str, Any]] | None = None) -> WindowSpec:
    """Storm's checks of a windowed bolt at submit, with its messages, naming the component.

    ``conf`` is the component's merged configuration; ``streams`` its declared output streams
    (stream -> `StreamInfo`); ``inputs`` maps each (source component, stream) it subscribes to,
    to the `StreamInfo` of that stream (None if undeclared). ``persistent``: the windows are saved
    with the checkpoints and inputs acked at the commit (Storm's ``PersistentWindowedBoltExecutor``),
    so only the checkpoint interval, not the window, must fit in the message timeout.
    ``spouts``: the merged configuration of each spout that feeds the bolt. Storm checks a count
    window against the topology's ``topology.max.spout.pending`` only; a spout's own bound
    (``set_max_spout_pending`` on its declarer) below the window stalls it the same way, so that
    is refused too, naming the spout.

    Raises:
        InvalidTopologyException: the window outlasts the message timeout (duration) or
            ``topology.max.spout.pending`` (count; the topology's or a feeding spout's), or with
            ``persistent`` the checkpoint
            interval outlasts the message timeout; the late-tuple stream is not declared; an
            input stream lacks the timestamp field.
    """
    spec = window_spec(conf, component)
    timeouts = conf_value(conf, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS) is not False
    timeout_ms = conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS) * 1000
    if persistent:
        interval = conf_value(conf, Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL)
        if timeouts and interval > timeout_ms:
            raise InvalidTopologyException(
                f"Component [{component}]: topology.state.checkpoint.interval.ms value {interval} is more than "
                f"topology.message.timeout.secs value {timeout_ms:g} (ms): a persistent window's inputs are "
                f"acked at the commit, and would time out before it")
        _check_streams(component, spec, streams, inputs)
        return spec
    duration = sum(v.value for v in (spec.length, spec.sliding) if isinstance(v, Duration))
    if timeouts and duration > timeout_ms:
        raise InvalidTopologyException(
            f"Component [{component}]: Window duration (length + sliding interval) value {duration} is more "
            f"than topology.message.timeout.secs value {timeout_ms:g} (ms): its tuples would time out "
            f"before they leave the window")
    pending = conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)
    count = sum(v.value for v in (spec.length, spec.sliding) if isinstance(v, Count))
    if type(pending) is int and count > pending:  # "auto" (the tuner) or null: no fixed bound
        raise InvalidTopologyException(
            f"Component [{component}]: Window count (length + sliding interval) value {count} is more than "
            f"topology.max.spout.pending value {pending}: the spouts would stop before the window fills")
    for spout, spout_conf in sorted((spouts or {}).items()):
        own = spout_conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)
        if count and type(own) is int and count > own:
            raise InvalidTopologyException(
                f"Component [{component}]: Window count (length + sliding interval) value {count} is more than "
                f"spout [{spout}]'s topology.max.spout.pending value {own}: the spout would stop before the "
                f"window fills")
    _check_streams(component, spec, streams, inputs)
    return spec


def _check_streams(component: str, spec: WindowSpec, streams: Mapping[str, Any],
                   inputs: Mapping[tuple[str, str], Any]) -> None:
    if spec.late_stream is not None and spec.late_stream not in streams:
        raise InvalidTopologyException(
            f"Component [{component}]: Stream for late tuples [{spec.late_stream}] must be defined with the "
            f"builder method with_late_tuple_stream")
    if spec.event_time:
        for (src, stream), info in sorted(inputs.items()):
            if stream in (SYSTEM_STREAM, TICK_STREAM, CHECKPOINT_STREAM) or info is None:
                continue
            if not info.fields.contains(spec.timestamp_field):
                raise InvalidTopologyException(
                    f"Component [{component}]: timestamp field {spec.timestamp_field!r} is not a field of its "
                    f"input stream [{stream}] of component [{src}] (fields {list(info.fields)})")


def input_streams(sources: Mapping[Any, Any]) -> list[Any]:
    """The input streams a watermark waits for (every source but the checkpoint stream)."""
    return [s for s in sources if s[1] not in (CHECKPOINT_STREAM, SYSTEM_STREAM, TICK_STREAM)]
