"""Storm's testing spouts and trackers: `FeederSpout`, `FixedTupleSpout`, the trackers and the
capture bolt `complete_topology` adds."""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any

from .._collectors import OutputFieldsDeclarer
from .._components import Bolt, Spout
from .._fields import Fields
from ._registry import SharedCounter, SharedLog, SharedQueue


class AckTracker:
    """Counts acks it is told about (Storm's ``AckTracker``); shared by all copies."""

    def __init__(self) -> None:
        self._acks = SharedCounter()

    def ack(self, msg_id: Any) -> None:
        """Count one ack."""
        self._acks.incr()

    def fail(self, msg_id: Any) -> None:
        """Fails are not counted."""

    def get_num_acks(self) -> int:
        """Acks counted so far."""
        return self._acks.value

    def reset_num_acks(self) -> None:
        """Start counting from 0."""
        self._acks.reset()


class AckFailMapTracker:
    """Remembers which message ids were acked and which failed; shared by all copies."""

    def __init__(self) -> None:
        self._acked = SharedLog()
        self._failed = SharedLog()

    def ack(self, msg_id: Any) -> None:
        """Record ``msg_id`` as acked."""
        self._acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        """Record ``msg_id`` as failed."""
        self._failed.append(msg_id)

    def is_acked(self, msg_id: Any) -> bool:
        """True once ``msg_id`` was acked."""
        return msg_id in self._acked.items()

    def is_failed(self, msg_id: Any) -> bool:
        """True once ``msg_id`` failed."""
        return msg_id in self._failed.items()


class FeederSpout(Spout):
    """A spout that emits what the test feeds it (Storm's ``FeederSpout``).

    ``feed`` may be called before or after submission; every task of the spout takes from the
    same queue. Acks and fails go to the delegate set with `set_ack_fail_delegate`.
    """

    def __init__(self, fields: Fields | list[str]) -> None:
        self._fields = fields if isinstance(fields, Fields) else Fields(list(fields))
        self._queue = SharedQueue()
        self._delegate: Any = None

    def set_ack_fail_delegate(self, tracker: Any) -> None:
        """Forward ``ack``/``fail`` to ``tracker`` (an `AckTracker`, `AckFailMapTracker`, ...)."""
        self._delegate = tracker

    def feed(self, values: list, msg_id: Any = None) -> None:
        """Queue ``values`` for emission with ``msg_id`` (default: a random UUID string).

        Raises:
            TypeError: ``values`` is not a list or tuple (a string would be fed as its characters).
            ValueError: ``values`` has not one value per field of the spout.
        """
        if not isinstance(values, (list, tuple)):
            raise TypeError(f"FeederSpout.feed takes a list of values, got {type(values).__name__} {values!r}")
        if len(values) != len(self._fields):
            # checked here, in the test's frame: emitted, it would crash the spout's worker, and
            # the test would only see its wait run out
            raise ValueError(f"FeederSpout.feed: {list(values)!r} has {len(values)} values for the "
                             f"{len(self._fields)} fields {list(self._fields)} of the spout")
        if msg_id is None:
            msg_id = str(uuid.uuid4())
        self._queue.put((list(values), msg_id))

    def feed_no_wait(self, values: list, msg_id: Any = None) -> None:
        """Same as `feed` (squall's feed never blocks)."""
        self.feed(values, msg_id)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(self._fields)

    def next_tuple(self) -> None:
        try:
            values, msg_id = self._queue.take()
        except IndexError:
            return
        self.collector.emit(values, msg_id)

    def ack(self, msg_id: Any) -> None:
        if self._delegate is not None:
            self._delegate.ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        if self._delegate is not None:
            self._delegate.fail(msg_id)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("collector", None)
        state.pop("context", None)
        return state


class FixedTupleSpout(Spout):
    """Emits a fixed list of ``(stream, values)`` once, each with a message id.

    Task k of n emits tuples k, k+n, k+2n, ... Failed tuples are not replayed. It is exhausted
    when acks plus fails, over all its tasks, equal the number of tuples.
    """

    def __init__(self, tuples: list[tuple[str, list]]) -> None:
        self.tuples = [(s, list(v)) for s, v in tuples]
        self._completed = SharedCounter()

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        tasks = context.get_component_tasks(context.get_this_component_id())
        k = context.get_this_task_index()
        self._mine = deque(self.tuples[k::len(tasks)])

    def next_tuple(self) -> None:
        if self._mine:
            stream, values = self._mine.popleft()
            self.collector.emit(values, uuid.uuid4().hex, stream)

    def ack(self, msg_id):
        self._completed.incr()

    def fail(self, msg_id):
        self._completed.incr()

    def completed(self) -> int:
        """Tuples acked or failed so far, over all tasks."""
        return self._completed.value

    def is_exhausted(self) -> bool:
        """True when every tuple was acked or failed."""
        return self.completed() >= len(self.tuples)

    def clean(self) -> None:
        """Forget the shared count (Storm's ``CompletableSpout.clean``)."""
        self._completed.discard()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for k in ("_mine", "collector", "context"):
            state.pop(k, None)
        return state


class TupleCaptureBolt(Bolt):
    """Records every tuple it receives, per source component, and acks it."""

    def __init__(self) -> None:
        self._captured = SharedLog()

    def execute(self, tup) -> None:
        self._captured.append((tup.source_component, tup.source_stream, list(tup.values)))
        self.collector.ack(tup)

    def results(self) -> dict[str, list[tuple[str, list]]]:
        """``{component: [(stream, values), ...]}`` in arrival order."""
        return _by_component(self._captured.items())

    def get_results(self) -> dict[str, list[tuple[str, list]]]:
        """What was captured so far (Storm's ``getResults``): ``{component: [(stream, values),
        ...]}``, for `read_tuples`."""
        return self.results()

    def get_and_clear_results(self) -> dict[str, list[tuple[str, list]]]:
        """What was captured so far, which the capture then forgets: the next call returns only
        what arrives after this one (Storm's ``getAndClearResults``)."""
        return _by_component(self._captured.take_all())

    def get_and_remove_results(self) -> dict[str, list[tuple[str, list]]]:
        """What was captured, and the capture's shared state removed (Storm's
        ``getAndRemoveResults``): call it once the topology is done with."""
        out = self.results()
        self.discard()
        return out

    def discard(self) -> None:
        """Forget what was captured (Storm's ``getAndRemoveResults``, once read)."""
        self._captured.discard()

    def __getstate__(self) -> dict:
        return {"_captured": self._captured}


def _by_component(captured: list[tuple[str, str, list]]) -> dict[str, list[tuple[str, list]]]:
    out: dict[str, list[tuple[str, list]]] = {}
    for component, stream, values in captured:
        out.setdefault(component, []).append((stream, values))
    return out
