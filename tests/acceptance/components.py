"""Storm's test components (storm-client ``testing/*`` and integration_test.clj's bolts), ported.

squall copies every component per task (cloudpickle), so these are defined at module level and
keep anything a test must observe in `Recorder`s, `Counter`s and `Gate`s: small handles on
squall.testing's shared state, which pickle as an id (and, for the process and Spark hosts, the
directory of their files: see `squall.testing.shared_state_dir`), like Storm's testing classes
do with static maps.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from squall import (
    BasicBolt,
    Bolt,
    CustomStreamGrouping,
    FailedException,
    Fields,
    ReportedFailedException,
    SerializationError,
    Spout,
    is_tick_tuple,
)
from squall.testing import (  # Storm's testing components, which squall.testing has as Storm does  # noqa: F401
    AckEveryOtherBolt,
    NGrouping,
    TestAggregatesCounter,
    TestConfBolt,
    TestGlobalCount,
    TestPlannerBolt,
    TestPlannerSpout,
    TestWordCounter,
    TestWordSpout,
)
from squall.testing._registry import SharedCounter, SharedFlag, SharedLog


class Recorder:
    """An append-only event log shared by every copy of a component (and the test)."""

    def __init__(self) -> None:
        self.log = SharedLog()

    def record(self, *event: Any) -> None:
        """Append ``event`` (a tuple; its first item names the kind)."""
        self.log.append(event)

    def events(self, kind: str | None = None) -> list[tuple]:
        """The events so far, optionally only those whose first item is ``kind``."""
        evs = self.log.items()
        return evs if kind is None else [e for e in evs if e[0] == kind]

    def count(self, kind: str) -> int:
        """How many events of ``kind``."""
        return len(self.events(kind))


class Counter:
    """A shared integer (for events too frequent to log, such as ``next_tuple`` calls)."""

    def __init__(self) -> None:
        self.counter = SharedCounter()

    def incr(self) -> None:
        self.counter.incr()

    @property
    def value(self) -> int:
        return self.counter.value


class Gate:
    """A shared `threading.Event` a component can block on until the test opens it."""

    def __init__(self) -> None:
        self.flag = SharedFlag()

    def open(self) -> None:
        self.flag.set()

    def close(self) -> None:
        self.flag.clear()

    def is_open(self) -> bool:
        return self.flag.is_set()

    def wait(self, timeout: float) -> bool:
        return self.flag.wait(timeout)


# --- Storm's testing spouts ---------------------------------------------------------------------



class LifecycleSpout(Spout):
    """Records open/activate/deactivate/close and counts ``next_tuple`` calls; emits nothing."""

    def __init__(self, recorder: Recorder, calls: Counter) -> None:
        self.recorder = recorder
        self.calls = calls

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.recorder.record("open", context.get_this_task_id())

    def activate(self):
        self.recorder.record("activate")

    def deactivate(self):
        self.recorder.record("deactivate")

    def close(self):
        self.recorder.record("close")

    def next_tuple(self):
        self.calls.incr()


# --- Storm's testing bolts ----------------------------------------------------------------------

class IdentityBolt(BasicBolt):
    """Re-emits its input's values (anchored), on the given fields (default "num")."""

    def __init__(self, fields: Fields | None = None) -> None:
        self.fields = fields if fields is not None else Fields("num")

    def execute(self, tup, collector):
        collector.emit(list(tup.values))

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields)


class AckBolt(Bolt):
    """Acks every input."""

    def execute(self, tup):
        self.collector.ack(tup)


class NeverAckBolt(Bolt):
    """Receives tuples and neither acks nor fails them."""

    def __init__(self, recorder: Recorder | None = None) -> None:
        self.recorder = recorder

    def execute(self, tup):
        if self.recorder is not None:
            self.recorder.record("execute", list(tup.values))


class FailBolt(Bolt):
    """Fails every input."""

    def execute(self, tup):
        self.collector.fail(tup)


class BranchingBolt(Bolt):
    """Emits ``n`` children anchored to the input, then acks it (integration_test's branching-bolt)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def execute(self, tup):
        for i in range(self.n):
            self.collector.emit([i], tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("num"))


class FailHoldOrBranchBolt(Bolt):
    """By its input's number ``n``: fails it when ``n % 5 == 0``; else holds it, never acked
    (it times out), when ``n % 7 == 0``; else emits ``[n, 0]`` and ``[n, 1]`` anchored to it
    and acks it."""

    def execute(self, tup):
        n = tup.get_value(0)
        if n % 5 == 0:
            self.collector.fail(tup)
        elif n % 7:
            self.collector.emit([n, 0], tup)
            self.collector.emit([n, 1], tup)
            self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("num", "branch"))


class FailBranchOneOfElevenBolt(Bolt):
    """Fails branch 1 of a number ``n % 11 == 0`` (of `FailHoldOrBranchBolt`), acks the rest."""

    def execute(self, tup):
        if tup.get_value(0) % 11 == 0 and tup.get_value(1) == 1:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


class AggBolt(Bolt):
    """Collects ``n`` inputs, then emits one tuple anchored to all of them and acks them
    (integration_test's agg-bolt: a fan-in with anchors from several trees)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.seen: list = []

    def execute(self, tup):
        self.seen.append(tup)
        if len(self.seen) == self.n:
            self.collector.emit([1], self.seen)
            for t in self.seen:
                self.collector.ack(t)
            self.seen = []

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("num"))


class DupAnchorBolt(Bolt):
    """Emits one child anchored twice to the same input, then acks the input."""

    def execute(self, tup):
        self.collector.emit([1], [tup, tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("num"))


class TaskBolt(Bolt):
    """Emits ``[this task id, this task index, *input values]`` anchored, then acks."""

    def __init__(self, input_fields: tuple[str, ...] = ("word",)) -> None:
        self.input_fields = input_fields

    def execute(self, tup):
        ctx = self.context
        self.collector.emit([ctx.get_this_task_id(), ctx.get_this_task_index(), *tup.values], tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("task", "index", *self.input_fields))


class LocalityBolt(Bolt):
    """Emits ``[source task, this task, whether the source task runs in this worker]``."""

    def execute(self, tup):
        local = tup.get_source_task() in self.context.get_this_worker_tasks()
        self.collector.emit([tup.get_source_task(), self.context.get_this_task_id(), local], tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("source", "task", "local"))


class DirectEmitBolt(Bolt):
    """For input ``[index, value]`` emits ``[value]`` directly to task ``index`` of ``target``."""

    def __init__(self, target: str) -> None:
        self.target = target

    def execute(self, tup):
        tasks = self.context.get_component_tasks(self.target)
        self.collector.emit_direct(tasks[tup.get_value(0)], [tup.get_value(1)], tup, stream="direct")
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare_stream("direct", Fields("value"), direct=True)


class RegularEmitToDirectBolt(Bolt):
    """Wrongly emits with ``emit`` on its direct stream (Storm raises)."""

    def execute(self, tup):
        self.collector.emit([tup.get_value(0)], tup, stream="direct")
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare_stream("direct", Fields("value"), direct=True)


class TickRecorderBolt(Bolt):
    """Records every tuple it gets as ``("tuple", is_tick, component, stream, task, values)``."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def execute(self, tup):
        self.recorder.record("tuple", is_tick_tuple(tup), tup.get_source_component(),
                             tup.get_source_stream_id(), tup.get_source_task(), list(tup.values))
        self.collector.ack(tup)


class ContextRecorderBolt(Bolt):
    """Records what its TopologyContext says in ``prepare``."""

    def __init__(self, recorder: Recorder, components: list[str]) -> None:
        self.recorder = recorder
        self.components = components

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.recorder.record(
            "context", context.get_this_component_id(), context.get_this_task_id(),
            context.get_this_task_index(), {c: context.get_component_tasks(c) for c in self.components},
            context.get_storm_id(), context.get_this_worker_port())


class CrashingBolt(Bolt):
    """Raises on input "crash"; acks anything else. Records each prepare with an instance id."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.instance = uuid.uuid4().hex
        self.recorder.record("prepare", self.instance)

    def execute(self, tup):
        if tup.get_value(0) == "crash":
            raise RuntimeError("boom: deliberate crash in execute")
        self.recorder.record("execute", self.instance, tup.get_value(0))
        self.collector.ack(tup)


class AlwaysCrashingBolt(Bolt):
    """Raises the same error on every input (a value it can never handle), ``secs`` after it
    arrives; records each prepare."""

    def __init__(self, recorder: Recorder, secs: float = 0.0) -> None:
        self.recorder = recorder
        self.secs = secs

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.recorder.record("prepare")

    def execute(self, tup):
        time.sleep(self.secs)
        raise ValueError("cannot handle this value")


class UnprintableError(Exception):
    """A user's exception whose ``__str__`` itself raises."""

    def __str__(self):
        raise RuntimeError("__str__ of the user's exception raised")


class UnprintableErrorBolt(BasicBolt):
    """Raises `UnprintableError` on input "bad"; passes anything else through."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))

    def execute(self, tup, collector):
        if tup.get_value(0) == "bad":
            raise UnprintableError()
        collector.emit([tup.get_value(0)])


class FailingBasicBolt(BasicBolt):
    """Raises ``FailedException`` (or ``ReportedFailedException`` when ``reported``) on "fail"."""

    def __init__(self, reported: bool = False) -> None:
        self.reported = reported

    def execute(self, tup, collector):
        if tup.get_value(0) == "fail":
            if self.reported:
                raise ReportedFailedException("reported failure of the input")
            raise FailedException("plain failure of the input")
        collector.emit([tup.get_value(0)])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))


class ReportingBolt(Bolt):
    """Reports an error for every input, then acks it."""

    def execute(self, tup):
        self.collector.report_error(ValueError(f"odd input {tup.get_value(0)!r}"))
        self.collector.ack(tup)


class ResetTimeoutBolt(Bolt):
    """Holds each input for ``times * interval`` seconds, calling ``reset_timeout`` every
    ``interval`` (unless ``reset`` is false), then acks it. Blocks, so it needs its own thread."""

    def __init__(self, interval: float, times: int, recorder: Recorder, reset: bool = True) -> None:
        self.interval = interval
        self.times = times
        self.recorder = recorder
        self.reset = reset

    def execute(self, tup):
        for _ in range(self.times):
            time.sleep(self.interval)
            if self.reset:
                self.collector.reset_timeout(tup)
        self.collector.ack(tup)
        self.recorder.record("acked", tup.get_value(0))


class ResetTimeoutBasicBolt(BasicBolt):
    """`ResetTimeoutBolt` as a `BasicBolt`: holds each input for ``times * interval`` seconds,
    calling its collector's ``reset_timeout`` every ``interval`` (Storm's
    ``BasicOutputCollector.resetTimeout``); the input is acked when ``execute`` returns."""

    def __init__(self, interval: float, times: int, recorder: Recorder) -> None:
        self.interval = interval
        self.times = times
        self.recorder = recorder

    def execute(self, tup, collector):
        for _ in range(self.times):
            time.sleep(self.interval)
            collector.reset_timeout(tup)
        self.recorder.record("acked", tup.get_value(0))


class BlockingBolt(Bolt):
    """Blocks in ``execute`` until the test opens ``gate`` (at most 10 s), then acks."""

    def __init__(self, gate: Gate, recorder: Recorder) -> None:
        self.gate = gate
        self.recorder = recorder

    def execute(self, tup):
        self.recorder.record("start", tup.get_value(0))
        self.gate.wait(10)
        self.recorder.record("end", tup.get_value(0))
        self.collector.ack(tup)


class SlowPrepareBolt(Bolt):
    """Sleeps ``secs`` in ``prepare`` (recorded as "prepared" once done), then acks every input."""

    def __init__(self, recorder: Recorder, secs: float) -> None:
        self.recorder = recorder
        self.secs = secs

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        time.sleep(self.secs)
        self.recorder.record("prepared", context.get_this_component_id())

    def execute(self, tup):
        self.collector.ack(tup)


class PrepareRecordingBolt(Bolt):
    """Records "prepared" in ``prepare``; acks every input, failing the test's tuple (by a
    crash) if it was never prepared."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.ready = True
        self.recorder.record("prepared", context.get_this_component_id())

    def execute(self, tup):
        if not getattr(self, "ready", False):
            raise RuntimeError("execute before prepare")
        self.collector.ack(tup)


class SqliteBolt(Bolt):
    """Opens an sqlite3 connection in ``prepare`` (sqlite3 refuses to use it from another
    thread), stores each input's first value and acks it."""

    def prepare(self, conf, context, collector):
        import sqlite3
        super().prepare(conf, context, collector)
        self.db = sqlite3.connect(":memory:")
        self.db.execute("create table seen (x)")

    def execute(self, tup):
        self.db.execute("insert into seen values (?)", (tup.get_value(0),))
        self.collector.ack(tup)


class ThreadRecordingSpout(Spout):
    """Emits ``[i]`` with message id ``i`` every 5 ms; records each change of the thread its
    methods run on ("thread", ident), each ack ("acked", i), and a call that starts while
    another is still running ("overlap")."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self._busy, self._thread, self.i, self.last = False, None, 0, 0.0
        self._enter()
        self._busy = False

    def _enter(self) -> None:
        if self._busy:
            self.recorder.record("overlap")
        self._busy = True
        ident = threading.get_ident()
        if ident != self._thread:
            self._thread = ident
            self.recorder.record("thread", ident)

    def next_tuple(self):
        self._enter()
        now = time.monotonic()
        if now - self.last >= 0.005:
            self.last = now
            self.i += 1
            self.collector.emit([self.i], self.i)
        self._busy = False

    def ack(self, msg_id):
        self._enter()
        self.recorder.record("acked", msg_id)
        self._busy = False

    def fail(self, msg_id):
        self._enter()
        self._busy = False

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))


class UndeclaredStreamBolt(Bolt):
    """Emits on stream "nowhere", which it never declared (Storm: "Unknown stream ID")."""

    def execute(self, tup):
        self.collector.emit([tup.get_value(0)], tup, stream="nowhere")
        self.collector.ack(tup)


class DirectStreamBolt(Bolt):
    """Declares a direct stream "direct" (and emits nothing)."""

    def declare_output_fields(self, declarer):
        declarer.declare_stream("direct", Fields("value"), direct=True)


class SystemStreamBolt(Bolt):
    """Wrongly declares the system stream "__tick"."""

    def declare_output_fields(self, declarer):
        declarer.declare_stream("__tick", Fields("value"))


class WiringRecorderBolt(Bolt):
    """Records its sources, targets and a source's output fields as its context gives them."""

    def __init__(self, recorder: Recorder, source: str) -> None:
        self.recorder = recorder
        self.source = source

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.recorder.record(
            "wiring",
            sorted((g.component_id, g.stream_id) for g in context.get_this_sources()),
            {stream: sorted(subs) for stream, subs in context.get_this_targets().items()},
            list(context.get_component_output_fields(self.source)),
            context.get_component_id(context.get_this_task_id()))

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("out"))
        declarer.declare_stream("side", Fields("a", "b"))


class CrashOnceSpout(Spout):
    """Raises from ``next_tuple`` once the test opens ``trigger`` (closing it again, so the
    restarted instance runs normally); reports an error when ``report`` is open."""

    def __init__(self, trigger: Gate, report: Gate, recorder: Recorder) -> None:
        self.trigger = trigger
        self.report = report
        self.recorder = recorder

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.recorder.record("open", uuid.uuid4().hex)

    def next_tuple(self):
        if self.report.is_open():
            self.report.close()
            self.collector.report_error("spout noticed something")
        if self.trigger.is_open():
            self.trigger.close()
            raise KeyError("spout crash in next_tuple")


class PrepareCrashBolt(Bolt):
    """Raises from ``prepare``, every time."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def prepare(self, conf, context, collector):
        self.recorder.record("prepare")
        raise RuntimeError("cannot prepare")


class WrongSizeBolt(Bolt):
    """Emits two values on its one-field stream."""

    def execute(self, tup):
        self.collector.emit([tup.get_value(0), "extra"], tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("only"))


NOT_VALUES = ["xy", {"a": 1, "b": 2}, b"ab", None, 5]
"""What a careless emit passes for a two-field stream's values: a str, dict or bytes of its length
too, which a length check alone lets through."""


def try_bad_emits(recorder: Recorder, who: str, emit: Any) -> None:
    """Call ``emit`` with each of `NOT_VALUES`, recording what each raised."""
    for values in NOT_VALUES:
        try:
            emit(values)
            recorder.record("accepted", who, repr(values))
        except Exception as e:  # noqa: BLE001 (the test reads what was raised)
            recorder.record("refused", who, f"{type(e).__name__}: {e}")


class NotValuesSpout(Spout):
    """Tries to emit each of `NOT_VALUES` once, then emits one good tuple, acked."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.done = False

    def next_tuple(self):
        if not self.done:
            self.done = True
            try_bad_emits(self.recorder, "spout", lambda v: self.collector.emit(v, "bad"))
            self.collector.emit(["a", "b"], "good")

    def ack(self, msg_id):
        self.recorder.record("ack", msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("a", "b"))


class NotValuesBolt(Bolt):
    """Tries each of `NOT_VALUES` anchored to its input, then passes the input on."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def execute(self, tup):
        try_bad_emits(self.recorder, "bolt", lambda v: self.collector.emit(v, tup))
        self.collector.emit(list(tup.values), tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("a", "b"))


class NotValuesBasicBolt(BasicBolt):
    """`NotValuesBolt` as a BasicBolt (the compiled BasicBolt emit)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def execute(self, tup, collector):
        try_bad_emits(self.recorder, "basic", collector.emit)
        collector.emit(list(tup.values))

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("a", "b"))


class ByValueGrouping(CustomStreamGrouping):
    """A careless custom grouping: the value names its choice (``"acker"``: task 1, an acker's;
    ``"unknown"``: 999; ``"tuple"``: a tuple, not a list; anything else: the lowest target)."""

    def prepare(self, context, stream, target_tasks):
        self.lowest = min(target_tasks)

    def choose_tasks(self, task_id, values):
        return {"acker": [1], "unknown": [999], "tuple": (self.lowest,)}.get(values[0], [self.lowest])


class ListedSpout(Spout):
    """Emits each of ``values`` once (its own message id), recording what each emit raised."""

    def __init__(self, recorder: Recorder, values: list) -> None:
        self.recorder = recorder
        self.values = values

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.left = list(self.values)

    def next_tuple(self):
        if self.left:
            v = self.left.pop(0)
            try:
                self.collector.emit([v], v)
            except Exception as e:  # noqa: BLE001 (the test reads what was raised)
                self.recorder.record("refused", v, f"{type(e).__name__}: {e}")

    def ack(self, msg_id):
        self.recorder.record("ack", msg_id)

    def fail(self, msg_id):
        self.recorder.record("fail", msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("v"))


class EmitReturnBolt(Bolt):
    """Records the task ids ``emit`` says it sent each tuple to, then acks."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def execute(self, tup):
        targets = self.collector.emit(list(tup.values), tup)
        self.recorder.record("emit", tup.get_value(0), sorted(targets))
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))


class AsyncAckBolt(Bolt):
    """Hands every input to a thread of its own, which emits a child and acks the input
    about ``delay`` seconds later (the collector is thread-safe)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        import queue
        self.pending: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True, name="test-async-acker").start()

    def _run(self):
        while True:
            tup = self.pending.get()
            time.sleep(self.delay)
            self.collector.emit([tup.get_value(0)], tup)
            self.collector.ack(tup)

    def execute(self, tup):
        self.pending.put(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("num"))


class DirectSpout(Spout):
    """Emits each ``(component, index, value)`` directly to that task of ``component`` on its
    direct stream, with ``value`` as message id."""

    def __init__(self, emits: list) -> None:
        self.emits = emits

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.todo = list(self.emits)

    def next_tuple(self):
        if self.todo:
            component, index, value = self.todo.pop(0)
            task = self.context.get_component_tasks(component)[index]
            self.collector.emit_direct(task, [value], value, stream="direct")

    def declare_output_fields(self, declarer):
        declarer.declare_stream("direct", Fields("value"), direct=True)


class ReplayingSpout(Spout):
    """Emits ``count`` tuples per task with ids ``"<task>-<i>"``, re-emits a tuple when it
    fails, and records every ack and fail with the task that received it."""

    def __init__(self, count: int, recorder: Recorder) -> None:
        self.count = count
        self.recorder = recorder

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.task = context.get_this_task_id()
        self.todo = [(f"{self.task}-{i}", 0) for i in range(self.count)]
        self.attempts: dict[str, int] = {}

    def next_tuple(self):
        if self.todo:
            msg_id, attempt = self.todo.pop(0)
            self.attempts[msg_id] = attempt
            self.collector.emit([msg_id, attempt], msg_id)

    def ack(self, msg_id):
        self.recorder.record("ack", self.task, msg_id)

    def fail(self, msg_id):
        self.recorder.record("fail", self.task, msg_id)
        self.todo.append((msg_id, self.attempts[msg_id] + 1))

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "attempt"))


class FailFirstAttemptBolt(Bolt):
    """Fails a tuple whose "attempt" is 0 and acks it otherwise."""

    def execute(self, tup):
        if tup.get_value_by_field("attempt") == 0:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


class DropFirstAttemptBolt(Bolt):
    """Neither acks nor fails a tuple whose "attempt" is 0 (it times out); acks it otherwise."""

    def execute(self, tup):
        if tup.get_value_by_field("attempt") != 0:
            self.collector.ack(tup)


class BatchAckBolt(Bolt):
    """Acks its inputs only in batches of ``size``, once it holds that many (a bolt that writes
    batches to a store, then acks them)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.held: list = []

    def execute(self, tup):
        self.held.append(tup)
        if len(self.held) >= self.size:
            for t in self.held:
                self.collector.ack(t)
            self.held = []


class EndlessReplayingSpout(Spout):
    """Emits ``[i]`` with message id ``i`` for i = 0, 1, 2, ... without end, a failed id again
    before any new one; records the ack or fail of each id below ``watched``."""

    def __init__(self, recorder: Recorder, watched: int) -> None:
        self.recorder = recorder
        self.watched = watched

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.next = 0
        self.failed: list[int] = []

    def next_tuple(self):
        if self.failed:
            i = self.failed.pop()
        else:
            i, self.next = self.next, self.next + 1
        self.collector.emit([i], i)

    def ack(self, msg_id):
        if msg_id < self.watched:
            self.recorder.record("ack", msg_id)

    def fail(self, msg_id):
        if msg_id < self.watched:
            self.recorder.record("fail", msg_id)
        self.failed.append(msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("i"))


class FloodSpout(Spout):
    """Emits ``[1]`` unanchored on every ``next_tuple``, as fast as it is allowed to."""

    def next_tuple(self):
        self.collector.emit([1])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))


class ReliableFloodSpout(Spout):
    """Emits ``[i]`` with message id ``i`` on every ``next_tuple``, as fast as it is allowed to."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.i = 0

    def next_tuple(self):
        self.i += 1
        self.collector.emit([self.i], self.i)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))


class SlowBolt(Bolt):
    """Takes ``secs`` per input (sleeping, as a bolt waiting on I/O does), and ``first_secs``
    for its first input (a stall, say a connection being opened)."""

    def __init__(self, secs: float, first_secs: float | None = None) -> None:
        self.secs = secs
        self.first_secs = first_secs

    def execute(self, tup):
        if self.first_secs is not None:
            time.sleep(self.first_secs)
            self.first_secs = None
        else:
            time.sleep(self.secs)


class SlowAckBolt(Bolt):
    """Takes ``secs`` per input, then acks it."""

    def __init__(self, secs: float) -> None:
        self.secs = secs

    def execute(self, tup):
        time.sleep(self.secs)
        self.collector.ack(tup)


class BrokenDeclareBolt(Bolt):
    """``declare_output_fields`` raises."""

    def declare_output_fields(self, declarer):
        raise AttributeError("no fields here")


class BrokenConfBolt(Bolt):
    """``get_component_configuration`` returns a list instead of a dict."""

    def get_component_configuration(self):
        return ["not", "a", "dict"]


class TwiceDeclaringBolt(Bolt):
    """Declares the default stream twice."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("a"))
        declarer.declare(Fields("b"))


class UnpicklableBolt(Bolt):
    """Holds a lock, which cannot be copied to tasks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


def _cannot_rebuild():
    raise RuntimeError("needs the database this process never opened")


class UnrebuildableBolt(Bolt):
    """Pickles, but its unpickling raises (a ``__reduce__`` that reconnects to something)."""

    def __reduce__(self):
        return (_cannot_rebuild, ())


class PrepareRaisingGrouping(CustomStreamGrouping):
    """A custom grouping whose ``prepare`` raises."""

    def prepare(self, context, stream, target_tasks):
        raise KeyError("routes")

    def choose_tasks(self, task_id, values):
        return []


class DirectOnRegularStreamBolt(Bolt):
    """``emit_direct`` on its regular default stream, to task index ``index`` of ``target``."""

    def __init__(self, target: str, index: int = 0) -> None:
        self.target = target
        self.index = index

    def execute(self, tup):
        task = self.context.get_component_tasks(self.target)[self.index]
        self.collector.emit_direct(task, [tup.get_value(0)], tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("value"))


class Point:
    """A user type, equal by value, for tuples that cross workers."""

    def __init__(self, x, y) -> None:
        self.x, self.y = x, y

    def __eq__(self, other) -> bool:
        return type(other) is Point and (self.x, self.y) == (other.x, other.y)

    def __hash__(self) -> int:
        return hash((self.x, self.y))


class PointSerializer:
    """`Point`'s registered serializer (Storm's Kryo registration)."""

    def serialize(self, p):
        return [p.x, p.y]

    def deserialize(self, data):
        return Point(*data)


class UnpicklableValueSpout(Spout):
    """Emits ``n`` tuples holding a lock, which cannot be serialized, catching each emit's
    `SerializationError` and recording its message ("error", message); an emit that returns
    is recorded as ("emitted",)."""

    def __init__(self, n: int, recorder: Recorder) -> None:
        self.n = n
        self.recorder = recorder

    def next_tuple(self):
        if self.n:
            self.n -= 1
            try:
                self.collector.emit([threading.Lock()])
            except SerializationError as e:
                self.recorder.record("error", str(e))
            else:
                self.recorder.record("emitted")

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("lock"))


class BasicMisuseBolt(BasicBolt):
    """A BasicBolt emitting as its input says: ``wrong-size``, ``tuple-as-values``, or a word to
    pass on by keyword to stream ``side`` (the compiled emit hands the first two to the Python
    collector, which names the error)."""

    def execute(self, tup, collector):
        how = tup.get_value(0)
        if how == "wrong-size":
            collector.emit([how, "extra"])
        elif how == "tuple-as-values":
            collector.emit(tup)
        else:
            collector.emit(values=[how], stream="side")

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("only"))
        declarer.declare_stream("side", Fields("word"))


class InputFieldsRecorderBolt(Bolt):
    """Records, for every input (tick tuples included), the fields its context gives for the
    input's source component and stream, beside the tuple's own; acks it."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def execute(self, tup):
        fields = self.context.get_component_output_fields(tup.get_source_component(), tup.get_source_stream_id())
        self.recorder.record("input", is_tick_tuple(tup), tup.get_source_component(), tup.get_source_stream_id(),
                             list(fields), list(tup.get_fields()))
        self.collector.ack(tup)


class SystemFieldsRecorderBolt(Bolt):
    """Records in ``prepare`` the fields its context gives for system streams, and the error for
    a stream nobody declares."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        try:
            context.get_component_output_fields("spout", "nope")
            unknown = None
        except ValueError as e:
            unknown = str(e)
        self.recorder.record("fields", list(context.get_component_output_fields("__system", "__tick")),
                             list(context.get_component_output_fields("spout", "__system")),
                             list(context.get_component_output_fields("__acker", "__system")), unknown)


class TickCountingBasicBolt(BasicBolt):
    """Passes each data tuple on (anchored, as a BasicBolt does); counts the ticks it gets."""

    def __init__(self, ticks: Counter) -> None:
        self.ticks = ticks

    def execute(self, tup, collector):
        if is_tick_tuple(tup):
            self.ticks.incr()
            return
        collector.emit(list(tup.values))

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("x"))


class TickCountingBolt(Bolt):
    """Acks each data tuple; counts the ticks it gets and acks every other one, failing the rest."""

    def __init__(self, ticks: Counter) -> None:
        self.ticks = ticks
        self.seen = 0

    def execute(self, tup):
        if not is_tick_tuple(tup):
            self.collector.ack(tup)
            return
        self.ticks.incr()
        self.seen += 1
        (self.collector.ack if self.seen % 2 else self.collector.fail)(tup)


class ConfClaimingBolt(Bolt):
    """In ``prepare``, claims key ``"claimed.by"`` of its configuration for its task unless
    another claimed it first, and records who holds it (its context's conf is the same map)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        conf.setdefault("claimed.by", context.get_this_task_id())
        self.recorder.record("claim", context.get_this_task_id(), conf["claimed.by"],
                             context.get_storm_conf()["claimed.by"])


class RecordingFailBolt(Bolt):
    """Records each input as ``("got", this task, values)``, then fails it."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def execute(self, tup):
        self.recorder.record("got", self.context.get_this_task_id(), list(tup.values))
        self.collector.fail(tup)


class IteratorAnchorBolt(Bolt):
    """Emits one child anchored to its input given as an iterator (a generator for input "gen",
    a list's iterator for "iter"), or as a set ("set"); then acks the input."""

    def execute(self, tup):
        how = tup.get_value(0)
        anchors = {"gen": lambda: (t for t in [tup]), "iter": lambda: iter([tup]), "set": lambda: {tup}}[how]()
        self.collector.emit([how], anchors)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("how"))


class DirectTaskIdBolt(Bolt):
    """For input ``[how, index]`` emits ``[how]`` directly to task ``index`` of ``target`` on
    "direct", passing the task id as ``how`` says: "int", "str" (its str), "none" (None), or
    "index" (an object with ``__index__``, as a numpy integer); then acks the input."""

    def __init__(self, target: str) -> None:
        self.target = target

    def execute(self, tup):
        how, index = tup.get_value(0), tup.get_value(1)
        task = self.context.get_component_tasks(self.target)[index]
        task_id = {"int": task, "str": str(task), "none": None, "index": IndexOnly(task)}[how]
        self.collector.emit_direct(task_id, [how], tup, stream="direct")
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare_stream("direct", Fields("how"), direct=True)


class IndexOnly:
    """An integer only by ``__index__`` (as numpy's are): no int's hash or equality."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


class DirectTaskIdSpout(Spout):
    """Emits each ``(how, index)`` of ``emits`` directly to task ``index`` of ``target`` on
    "direct" with message id ``how`` (the task id passed as `DirectTaskIdBolt` says), recording
    what each emit raised; records acks and fails."""

    def __init__(self, recorder: Recorder, target: str, emits: list) -> None:
        self.recorder, self.target, self.emits = recorder, target, emits

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.todo = list(self.emits)

    def next_tuple(self):
        if not self.todo:
            return
        how, index = self.todo.pop(0)
        task = self.context.get_component_tasks(self.target)[index]
        task_id = {"int": task, "str": str(task), "none": None, "index": IndexOnly(task)}[how]
        try:
            self.collector.emit_direct(task_id, [how], how, stream="direct")
        except Exception as e:  # noqa: BLE001 (the test reads what was raised)
            self.recorder.record("refused", how, f"{type(e).__name__}: {e}")

    def ack(self, msg_id):
        self.recorder.record("ack", msg_id)

    def fail(self, msg_id):
        self.recorder.record("fail", msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare_stream("direct", Fields("how"), direct=True)


class EqOnlyKey:
    """A key whose class defines ``__eq__`` and no ``__hash__`` (so Python makes it unhashable),
    as a pydantic model's is."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other):
        return isinstance(other, EqOnlyKey) and other.name == self.name

    def __repr__(self) -> str:
        return f"EqOnlyKey({self.name!r})"


class KeyEmitBolt(Bolt):
    """For input ``[how]`` emits ``[key]`` anchored, then acks: on stream "default" for "plain"
    (a str key) and "eq-only" (an `EqOnlyKey`), on stream "pk" for "eq-only-pk"."""

    def execute(self, tup):
        how = tup.get_value(0)
        key = "plain-key" if how == "plain" else EqOnlyKey(how)
        self.collector.emit([key], tup, stream="pk" if how.endswith("-pk") else "default")
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("key"))
        declarer.declare_stream("pk", Fields("key"))
