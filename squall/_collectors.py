"""What components receive to declare and emit: the declarer and the three collectors.

The collectors are interfaces here; the engine implements them (`squall.engine`). Their
documentation is the contract user code relies on.
"""

from __future__ import annotations

import abc
from typing import Any

from ._errors import InvalidTopologyException
from ._fields import Fields
from ._system import DEFAULT_STREAM, is_system_id
from ._tuple import Tuple


class StreamInfo:
    """A declared stream: its fields and whether it is direct."""

    __slots__ = ("direct", "fields")

    def __init__(self, fields: Fields, direct: bool = False) -> None:
        self.fields = fields
        self.direct = direct

    def __repr__(self) -> str:
        return f"StreamInfo({self.fields!r}, direct={self.direct})"


class OutputFieldsDeclarer:
    """Collects the streams a component declares in ``declare_output_fields``."""

    def __init__(self, component_id: str = "?") -> None:
        self._component_id = component_id
        self.streams: dict[str, StreamInfo] = {}

    def declare(self, fields: Fields | list[str], direct: bool = False) -> None:
        """Declare the default stream with these fields."""
        self.declare_stream(DEFAULT_STREAM, fields, direct)

    def declare_stream(self, stream_id: str, fields: Fields | list[str], direct: bool = False) -> None:
        """Declare stream ``stream_id`` with these fields; ``direct`` makes it a direct stream."""
        if not isinstance(stream_id, str) or not stream_id:
            raise InvalidTopologyException(
                f"Component [{self._component_id}] declares a stream with an invalid id {stream_id!r}")
        if is_system_id(stream_id):
            raise InvalidTopologyException(f"{stream_id} is not a valid stream id. "
                                           f"(declared by component [{self._component_id}])")
        if stream_id in self.streams:
            raise InvalidTopologyException(
                f"Component [{self._component_id}] declares stream [{stream_id}] twice")
        if not isinstance(fields, Fields):
            fields = Fields(fields)  # a str is one field, as Fields("word") is (list("word") made four)
        self.streams[stream_id] = StreamInfo(fields, bool(direct))


class SpoutOutputCollector(abc.ABC):
    """A spout's collector. Call it only from the spout's own methods (one thread)."""

    @abc.abstractmethod
    def emit(self, values: list, msg_id: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` on ``stream``; returns the task ids it was sent to.

        With a ``msg_id`` (and acking on) the tuple is tracked: the spout's ``ack(msg_id)`` or
        ``fail(msg_id)`` is called once its tree completes, fails or times out. With acking off
        (``topology.acker.executors = 0``) ``ack(msg_id)`` is called at once, inside ``emit``.
        Raises `EmitError` for an undeclared stream or a direct stream. The returned list must
        not be modified.
        """

    @abc.abstractmethod
    def emit_direct(self, task_id: int, values: list, msg_id: Any = None,
                    stream: str = DEFAULT_STREAM) -> None:
        """Emit to one task of a component that subscribes to ``stream`` with direct grouping."""

    @abc.abstractmethod
    def report_error(self, error: BaseException | str) -> None:
        """Record an error for this task (shown in the topology's info); processing goes on.
        As in Storm, an executor reports at most ``topology.max.error.report.per.interval``
        errors per ``topology.error.throttle.interval.secs`` (its exceptions included), and
        drops the rest."""

    def wake(self) -> None:
        """Tell the spout's loop that ``next_tuple`` has something to emit now. The one method
        any thread may call: a spout whose source is read by a thread of its own calls it when
        data arrives, so the loop, which may be waiting out the spout wait strategy's sleep,
        calls ``next_tuple`` at once instead of at its next poll. Does nothing by default."""


class OutputCollector(abc.ABC):
    """A bolt's collector. Thread-safe: a bolt may emit and ack from its own threads."""

    @abc.abstractmethod
    def emit(self, values: list, anchors: Tuple | list[Tuple] | None = None,
             stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` on ``stream``, anchored to ``anchors`` (a tuple, a list, or None).

        Anchored tuples join their anchors' trees: the spout tuple is complete only when they
        are acked too. Returns the task ids the tuple went to (do not modify the list).
        """

    @abc.abstractmethod
    def emit_direct(self, task_id: int, values: list, anchors: Tuple | list[Tuple] | None = None,
                    stream: str = DEFAULT_STREAM) -> None:
        """Emit to one task of a component that subscribes to ``stream`` with direct grouping."""

    @abc.abstractmethod
    def ack(self, tup: Tuple) -> None:
        """Mark ``tup`` processed. Every input must be acked or failed exactly once."""

    @abc.abstractmethod
    def fail(self, tup: Tuple) -> None:
        """Fail ``tup``: its spout tuples fail at once (they are not left to time out)."""

    @abc.abstractmethod
    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of ``tup``'s spout tuples (for long work on one input)."""

    @abc.abstractmethod
    def report_error(self, error: BaseException | str) -> None:
        """Record an error for this task (shown in the topology's info); processing goes on.
        As in Storm, an executor reports at most ``topology.max.error.report.per.interval``
        errors per ``topology.error.throttle.interval.secs`` (its exceptions included), and
        drops the rest."""


class BasicOutputCollector(abc.ABC):
    """A `BasicBolt`'s collector: emits are anchored to the input being executed."""

    @abc.abstractmethod
    def emit(self, values: list, stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` on ``stream``, anchored to the current input."""

    @abc.abstractmethod
    def emit_direct(self, task_id: int, values: list, stream: str = DEFAULT_STREAM) -> None:
        """Emit to one task, anchored to the current input."""

    @abc.abstractmethod
    def report_error(self, error: BaseException | str) -> None:
        """Record an error for this task; processing goes on (throttled as
        `OutputCollector.report_error`)."""

    def reset_timeout(self, tup: Tuple | None = None) -> None:
        """Restart the message timeout of ``tup``'s spout tuples, by default those of the input
        being executed (Storm's ``BasicOutputCollector.resetTimeout``): for long work on one
        input, call it before the timeout passes."""
        raise NotImplementedError(f"{type(self).__name__} does not implement reset_timeout")
