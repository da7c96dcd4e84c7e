"""Storm's testing spouts and trackers: `FeederSpout`, `FixedTupleSpout` and its `FixedTuple`,
the trackers and the capture bolt `complete_topology` adds."""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable
from typing import Any

from .._collectors import OutputFieldsDeclarer
from .._components import Bolt, Spout
from .._fields import Fields
from .._system import DEFAULT_STREAM
from ._registry import SharedCounter, SharedFlag, SharedLog, SharedQueue


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
        return self._acked.contains(msg_id)

    def is_failed(self, msg_id: Any) -> bool:
        """True once ``msg_id`` failed."""
        return self._failed.contains(msg_id)


class FeederSpout(Spout):
    """A spout that emits what the test feeds it (Storm's ``FeederSpout``).

    ``feed`` may be called before or after submission; every task of the spout takes from the
    same queue. Acks and fails go to the delegate set with `set_ack_fail_delegate`.
    """

    def __init__(self, fields: Fields | list[str]) -> None:
        self._fields = fields if isinstance(fields, Fields) else Fields(fields)  # a str: one field
        self._queue = SharedQueue()
        self._delegate: Any = None
        self._read = SharedFlag()  # raised by the first next_tuple of any of its tasks

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

    def wait_for_reader(self, timeout_secs: float = 10.0) -> None:
        """Wait until a task of the spout has asked for a tuple: the topology runs it (Storm's
        ``waitForReader``, which Storm's ``feed`` calls; squall's ``feed`` does not wait, it
        queues).

        Raises:
            TimeoutError: no task asked within ``timeout_secs`` (real time).
        """
        if not self._read.wait(timeout_secs):
            raise TimeoutError(f"FeederSpout.wait_for_reader: no task of the spout asked for a tuple within "
                               f"{timeout_secs} s (is its topology submitted and active, its worker up?)")

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(self._fields)

    def next_tuple(self) -> None:
        if not getattr(self, "_reading", False):  # once per task: wait_for_reader's flag
            self._reading = True
            self._read.set()
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
        for k in ("collector", "context", "_reading"):
            state.pop(k, None)
        return state


class FixedTuple:
    """One tuple of a `FixedTupleSpout` or of `MockedSources`: its stream and its values (Storm's
    ``FixedTuple``). As Storm's two constructors: ``FixedTuple(values)`` is on the default
    stream, ``FixedTuple(stream, values)`` on ``stream``.

    Raises:
        TypeError: the values are not a list or tuple, or the stream not a str.
    """

    __slots__ = ("stream", "values")

    def __init__(self, stream_or_values: str | list | tuple, values: list | tuple | None = None) -> None:
        stream: object
        vals: object
        if values is None:
            stream, vals = DEFAULT_STREAM, stream_or_values
        else:
            stream, vals = stream_or_values, values
        if not isinstance(stream, str):
            raise TypeError(f"FixedTuple: the stream must be a str, got {type(stream).__name__} {stream!r}")
        if not isinstance(vals, (list, tuple)):
            raise TypeError(f"FixedTuple: the values must be a list or tuple, got {type(vals).__name__} {vals!r}")
        self.stream = stream
        self.values = list(vals)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedTuple) and (self.stream, self.values) == (other.stream, other.values)

    __hash__ = None  # type: ignore[assignment]  # its values are a list, which may change

    def __repr__(self) -> str:
        return f"FixedTuple({self.stream!r}, {self.values!r})"


def fixed_tuple(item: Any, where: str) -> FixedTuple:
    """``item`` as a `FixedTuple`: one already, or a list or tuple of values (on the default
    stream), as Storm's ``FixedTupleSpout`` and ``MockedSources`` take them.

    Raises:
        TypeError: anything else, named with ``where``.
    """
    if isinstance(item, FixedTuple):
        return item
    if isinstance(item, (list, tuple)):
        return FixedTuple(item)
    raise TypeError(f"{where} must be lists of values or FixedTuples, got {type(item).__name__} {item!r}")


class FixedTupleSpout(Spout):
    """Emits a fixed list of tuples once, each with a message id (Storm's ``FixedTupleSpout``).

    ``tuples``: each a list (or tuple) of values, emitted on the default stream, or a
    `FixedTuple` naming its stream. ``fields``: the default stream's fields, which the spout
    then declares (without them it declares nothing, as Storm's: `complete_topology` gives the
    spouts it mocks the original's streams). Task k of n emits tuples k, k+n, k+2n, ... Failed
    tuples are not replayed. It is exhausted when acks plus fails, over all its tasks, equal the
    number of tuples.

    >>> FixedTupleSpout([["nathan"], FixedTuple("other", ["bob", 1])], Fields("word")).tuples
    [FixedTuple('default', ['nathan']), FixedTuple('other', ['bob', 1])]

    Raises:
        TypeError: a tuple that is neither a list or tuple of values nor a `FixedTuple`.
    """

    def __init__(self, tuples: Iterable[FixedTuple | list | tuple],
                 fields: Fields | Iterable[str] | None = None) -> None:
        self.tuples = [fixed_tuple(t, "FixedTupleSpout: the tuples") for t in tuples]
        self.fields = fields if fields is None or isinstance(fields, Fields) else Fields(fields)  # a str: one field
        self._completed = SharedCounter()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        if self.fields is not None:
            declarer.declare(self.fields)

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        component = context.get_this_component_id()
        streams = set(context.get_this_streams())
        for t in self.tuples:  # here, naming the mistake, rather than at the emit that crashes
            if t.stream not in streams:
                raise ValueError(f"FixedTupleSpout [{component}]: tuple {t.values!r} is on stream [{t.stream}], "
                                 f"which the spout does not declare: give the default stream's fields, "
                                 f"FixedTupleSpout(tuples, Fields(...)), or override declare_output_fields")
            fields = context.get_this_output_fields(t.stream)
            if len(t.values) != len(fields):
                raise ValueError(f"FixedTupleSpout [{component}]: tuple {t.values!r} has {len(t.values)} values "
                                 f"for the {len(fields)} fields {list(fields)} of stream [{t.stream}]")
        tasks = context.get_component_tasks(component)
        k = context.get_this_task_index()
        self._mine = deque(self.tuples[k::len(tasks)])

    def next_tuple(self) -> None:
        if self._mine:
            t = self._mine.popleft()
            self.collector.emit(t.values, uuid.uuid4().hex, t.stream)

    def ack(self, msg_id):
        self._completed.incr()

    def fail(self, msg_id):
        self._completed.incr()

    def completed(self) -> int:
        """Tuples acked or failed so far, over all tasks."""
        return self._completed.value

    def get_completed(self) -> int:
        """`completed` (Storm's ``getCompleted``)."""
        return self.completed()

    def get_source_tuples(self) -> list[FixedTuple]:
        """The tuples it emits (Storm's ``getSourceTuples``)."""
        return self.tuples

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
