"""`ShellBolt`: a bolt whose tuples are processed by a subprocess (Storm's ``ShellBolt``).

The bolt protocol is asynchronous, so, as Storm's, each task has a reader thread (what the
subprocess sends: emits, acks, fails, logs, errors, metrics, syncs, each handled as it comes,
through the thread-safe `OutputCollector`) and a writer thread (what it is sent: the task ids of
its emits first, then heartbeats and tuples). ``execute`` only queues a tuple; it waits when
``topology.shellbolt.max.pending`` tuples are queued already.

A subprocess that exits, breaks the protocol or leaves a heartbeat unanswered for
``topology.subprocess.timeout.secs`` has failed: the reader or writer thread records the error
and kills the subprocess, and the next heartbeat timer (every second, on the bolt's own thread)
or ``execute`` handles it there (`ShellBolt._recover`). Storm's ShellBolt halts its worker,
and every tuple in flight replays; a record that kills the subprocess each time it is processed
then crash-loops the worker for ever, since nothing tells the spout which record it was (and a
spout in that worker forgets its retry counts at each restart). So, when the death can be put
down to a tuple, squall fails that tuple as an ``exception`` of the bolt (its record charged,
`squall.FailureCause.record_caused`), fails the others the subprocess held as lost (not
charged), reports the error, and starts a new subprocess in the same worker. The tuple is the
first the subprocess was given (its writing started: one it dies reading is its) after its
last ack or fail (a subprocess works through its input in order, as storm.py's and pystorm's
do), unless that last answer was a fail after an
error it reported (pystorm's ``exit_on_exception``: it failed the tuple that raised, then
exited): then that fail charged the record already, or unless it read none of that tuple
(`_never_read`: it died in its start, pystorm's ``initialize`` raising, with tuples waiting in
its pipe). A subprocess that dies before answering anything, a heartbeat included, with no
tuple to put it down to (it cannot start its work at all), is a fault of the worker, as in
Storm: the error crashes it, the host restarts it. One that answered heartbeats and had no
tuple in hand (an idle task, killed from outside) is started again in its worker.
"""

from __future__ import annotations

import collections
import logging
import os
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._components import Bolt
from .._config import Config, conf_value
from .._errors import EmitError
from .._failure import EXCEPTION, FailureCause, fail_because, fail_for, shown_values
from .._fields import Fields
from .._tuple import Tuple
from .component import ShellComponent
from .messages import (
    MultilangError,
    ProtocolError,
    ShellMsg,
    bolt_message,
    fail_reason,
    heartbeat_message,
    reported_line,
)
from .process import CLOSE_WAIT_SECS, ShellProcess

log = logging.getLogger("squall.multilang")

HEARTBEAT_SECS = 1.0  # Storm's: a heartbeat tuple every second, and the timeout checked as often


def _field_not_carried(serializer: Any, tup: Tuple) -> str:
    """`` field [name]`` for the first value of ``tup`` the wire cannot carry, for the error that
    fails it: the encoder's own words (``Out of range float values are not JSON compliant``,
    ``surrogates not allowed``) named no field, and a user with wide tuples guessed which one
    held the NaN or the bytes. Empty if no value alone fails (only an error path pays this)."""
    names = list(tup.fields)
    for i, value in enumerate(tup.values):
        try:
            serializer.encode([value])
        except ProtocolError:
            return f" field [{names[i] if i < len(names) else i}]"
    return ""


class PendingWrites:
    """What the writer thread sends, in order: first the task-id lists and heartbeats (never
    held back: the subprocess may be waiting for them), then tuples, of which at most
    ``capacity`` wait (Storm's ``ShellBoltMessageQueue``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._first: collections.deque[Any] = collections.deque()
        self._tuples: collections.deque[Any] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False

    def close(self) -> None:
        """Wake the writer for good: `take` returns None from now on."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def put(self, item: Any, timeout: float) -> bool:
        """Queue a tuple's message; False if ``capacity`` are still waiting after ``timeout`` s."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._tuples) < self.capacity, timeout):
                return False
            self._tuples.append(item)
            self._cond.notify_all()
            return True

    def put_first(self, item: Any) -> None:
        """Queue a task-id list or a heartbeat, ahead of the tuples."""
        with self._cond:
            self._first.append(item)
            self._cond.notify_all()

    def take(self, timeout: float) -> Any:
        """The next item to write, or None after ``timeout`` s with nothing or once `close`d."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._first or self._tuples or self._closed, timeout) \
                    or self._closed:
                return None
            if self._first:
                return self._first.popleft()
            self._cond.notify_all()  # room for a waiting execute
            return self._tuples.popleft()


class ShellBolt(ShellComponent, Bolt):
    """A bolt run by a subprocess speaking Storm's multilang protocol.

    >>> from squall import TopologyBuilder
    >>> builder = TopologyBuilder()
    >>> _ = builder.set_bolt("split", ShellBolt(["python3", "splitsentence.py"], ["word"]), 4)

    Args:
        command: the program and its arguments (a list of strings), started once per task in
            ``prepare``.
        output_fields: the fields of the default stream (a list, `Fields`, or one name as a str); None declares
            nothing: subclass and override ``declare_output_fields`` for other streams.
        cwd: the subprocess's working directory (None: the worker's, or its resources'; relative:
            inside its resources).
        env: environment variables for it, added to the worker's (``PATH`` is appended).
        resources: a directory whose files travel with the topology to every worker, as a jar's
            ``resources/`` in Storm: each task's subprocess runs in a copy of it (read where the
            component is made, at most 64 MB; permission bits kept).

    ``topology.multilang.serializer`` picks the wire (JSON or MessagePack). The bolt's tasks
    each run on their own thread (its component configuration sets
    ``topology.executor.own.thread``). See docs/multilang.md.
    """

    kind = "ShellBolt"
    squall_fail_fast = True  # what it raises crashes the worker, as Storm's ShellBolt halts it (see the module docstring)

    def __init__(self, command: Sequence[str], output_fields: Sequence[str] | Fields | None = None, *,
                 cwd: str | None = None, env: dict[str, str] | None = None,
                 resources: str | os.PathLike | None = None) -> None:
        super().__init__(command, output_fields, cwd=cwd, env=env, resources=resources)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        """Start the subprocess (handshake with the configuration, context and pid directory)
        and its reader and writer threads.

        Raises:
            MultilangError: it cannot start, or did not answer the handshake in time.
        """
        Bolt.prepare(self, conf, context, collector)
        self._conf = conf
        self._ids = random.Random()
        self._where = (context.get_this_component_id(), context.get_this_task_id())
        self._running = True
        self._now: Callable[[], float] | None = None
        self._threads: list[threading.Thread] = []
        self._start()

    def _start(self) -> None:
        """Launch a subprocess and its reader and writer threads, with a fresh account of what
        it is given (in ``prepare``, and by `_recover` after one died)."""
        self._inputs: dict[str, Tuple] = {}
        # what the subprocess was given, to tell which tuple it was processing if it dies
        # (`_suspect`): each tuple's place in the order queued, which is the order written
        self._places: dict[str, int] = {}
        self._queued = 0
        self._written = 0  # the place of the last tuple whose writing started (the writer's)
        # where each tuple not yet answered began in what its input pipe took (`ShellProcess.sent`)
        self._starts: dict[int, int] = {}
        self._answered = 0  # the latest place it acked or failed (the reader's)
        self._answers = 0
        # heartbeats it answered: a subprocess that synced works, even if it was given no tuple
        self._synced = 0
        self._failed_after_error = False  # its last answer was a fail after an error it reported
        self._pending = PendingWrites(int(conf_value(self._conf, Config.TOPOLOGY_SHELLBOLT_MAX_PENDING)))
        self._reported: str | None = None  # the subprocess's last error (`reported_line`), for the fails after it
        self._death: MultilangError | None = None
        # the place of the last tuple written when its failure was seen (`_fault_seen`): what
        # the writer gave it afterwards, while its error was being made, was not in its hands
        self._written_at_fault: int | None = None
        self._heard = 0  # messages read from the subprocess, any of which is a heartbeat
        self._heard_seen = -1
        self._heard_at = self._now() if self._now is not None else 0.0
        process = self._launch(self._conf, self.context)
        self._reader = threading.Thread(target=self._read_loop, args=(process,), name=f"{process.where} reader",
                                        daemon=True)
        self._writer = threading.Thread(target=self._write_loop, args=(process,), name=f"{process.where} writer",
                                        daemon=True)
        self._threads = [self._reader, self._writer]
        self._reader.start()
        self._writer.start()

    def execute(self, tup: Tuple) -> None:
        """Queue ``tup`` for the subprocess; waits while ``topology.shellbolt.max.pending``
        tuples wait already. A value the wire cannot carry fails ``tup`` and is reported,
        naming the stream (the subprocess is not at fault).

        A subprocess that died since the last call is handled first (`_recover`): ``tup``
        then goes to the new one.

        Raises:
            MultilangError: the subprocess failed and the failure is the worker's (it died
                before answering anything, with no tuple to put it down to), or a new one
                cannot start; ``tup`` fails as lost with it, not charged.
        """
        if self._death is not None:
            self._recover()
        process = self._process
        assert process is not None
        process.owner = threading.current_thread()
        tuple_id = str(self._ids.getrandbits(63))
        try:
            data = process.serializer.encode(bolt_message(tuple_id, tup))
        except ProtocolError as e:
            reason = (f"{process.where}: a tuple from [{tup.source_component}] stream [{tup.source_stream}]"
                      f"{_field_not_carried(process.serializer, tup)} {e}")
            self.collector.report_error(reason)
            fail_because(self.collector, tup, *self._where, reason)
            return
        self._queued += 1
        place = self._queued
        self._inputs[tuple_id] = tup
        self._places[tuple_id] = place
        while not self._pending.put((place, data), HEARTBEAT_SECS):  # full: wait, as Storm's execute does
            self._check_silence()
            if self._death is not None:
                return  # never written: it fails with the others the subprocess held (`_recover`)

    def squall_timers(self, clock: Any) -> list[tuple[float, Callable[[], None]]]:
        """The heartbeat, every second of the cluster's clock, on the bolt's thread."""
        self._now = clock.now
        self._heard_at = clock.now()
        return [(HEARTBEAT_SECS, self._heartbeat)]

    def _heartbeat(self) -> None:
        if self._process is not None:
            self._process.owner = threading.current_thread()
        self._check()
        self._pending.put_first(heartbeat_message(str(self._ids.getrandbits(63))))

    def _check(self) -> None:
        """Handle the subprocess's failure, if any (`_recover`): the recorded one, or a
        heartbeat unanswered for longer than the timeout."""
        self._check_silence()
        if self._death is not None:
            self._recover()

    def _check_silence(self) -> None:
        """Record a heartbeat unanswered for longer than the timeout as the subprocess's failure."""
        if self._death is None and self._now is not None:
            now = self._now()
            if self._heard != self._heard_seen:
                self._heard_seen, self._heard_at = self._heard, now
            elif now - self._heard_at > self._timeout and self._process is not None:
                silent = now - self._heard_at
                self._fault_seen(self._process)
                self._die(self._process, self._process.failure(
                    f"it sent nothing, not even a sync for a heartbeat, for {silent:.0f} s "
                    f"(topology.subprocess.timeout.secs {self._timeout:g}){self._in_hand()}"), "its heartbeat timed out")

    def _fault_seen(self, process: ShellProcess) -> None:
        """Note what ``process`` had been written when its failure was seen, before its error
        is made: `ShellProcess.failure` waits up to half a second for its stderr while it still
        runs (a protocol error), and the writer went on giving it tuples meanwhile. One that
        broke the protocol after answering all it held (an ack twice, an emit anchored to a
        tuple it acked) had the next tuple, written in that half second, charged as the one
        it died on (`_suspect`), its record's retry spent for another's fault."""
        if process is self._process and self._written_at_fault is None:
            self._written_at_fault = self._written

    def _die(self, process: ShellProcess, error: MultilangError, because: str = "") -> None:
        """Record the first failure of ``process`` and end it; the bolt's thread handles it
        (`_recover`). Nothing for a subprocess that was replaced already."""
        if process is not self._process:
            return
        if self._death is None:
            self._death = error
        process.kill(because)

    def _recover(self) -> None:
        """On the bolt's thread, after the subprocess died (`_death`): end its threads (the
        reader first handles what it sent before it died), fail the tuple it died on as an
        exception of this bolt, its record charged, and the others it held as lost, then report
        the error and start a new subprocess (see the module docstring).

        Raises:
            MultilangError: the death is the worker's fault (no tuple to put it down to, and
                nothing answered since it started, not even a heartbeat), or a new subprocess
                cannot start; what it held failed as lost first, and so does the input it is
                raised on.
        """
        error = self._death
        old = self._process
        assert error is not None and old is not None
        self._pending.close()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(CLOSE_WAIT_SECS)
        suspect = self._suspect()
        if suspect is not None and self._never_read(old, suspect):
            # it died before it read a byte of that tuple (in its start: pystorm's initialize
            # raising, its database down), so the tuple is not the cause: charged, it was
            # dead-lettered after as many restarts as its retry budget, for no fault of its own
            log.info("%s: its subprocess died before reading the first tuple it held: not put down to it", old.where)
            suspect = None
        old.close()  # closes its input pipe: measured above
        component, task = self._where
        lost = FailureCause.lost_in(component, task, error)
        held = list(self._inputs.items())
        self._inputs.clear()
        error.squall_input_cause = lost  # type: ignore[attr-defined]  # the bolt executor reads it: the input is not charged
        # A subprocess that answered nothing, not even a heartbeat, cannot do its work: its
        # worker's fault. One that answered heartbeats but had no tuple (a shuffle that keeps
        # tuples in the spout's worker leaves the other worker's task idle) was killed from
        # outside, by the OOM killer or a person: started again here, as a busy one is, where
        # it crashed its worker and every task in it.
        if suspect is None and not self._answers and not self._synced:
            for _tid, tup in held:
                fail_for(self.collector, tup, lost)
            raise error
        charged = FailureCause.of_exception(EXCEPTION, component, task, error)
        for tid, tup in held:
            fail_for(self.collector, tup, charged if tid == suspect else lost)
        log.warning("%s: its subprocess failed; %s, %d other tuple(s) it held failed as lost; starting a new "
                    "subprocess: %s", old.where,
                    "the tuple it was processing failed" if suspect is not None else "no tuple to put it down to",
                    len(held) - (suspect is not None), error.failure_message or error)
        self.collector.report_error(error)
        try:
            self._start()
        except MultilangError as e:
            e.squall_input_cause = FailureCause.lost_in(component, task, e)  # type: ignore[attr-defined]
            raise

    def _suspect(self) -> str | None:
        """The id of the tuple the dead subprocess was processing: the first it was written
        after the latest one it acked or failed, not answered; None if there is none, or if its
        last answer was a fail after an error it reported (it named the tuple itself)."""
        if self._failed_after_error:
            return None
        answered = self._answered
        written = self._written if self._written_at_fault is None else self._written_at_fault
        written = max(written, answered)
        for tid, place in list(self._places.items()):  # in the order queued
            if answered < place <= written and tid in self._inputs:
                return tid
        return None

    def _in_hand(self) -> str:
        """``, processing a tuple from [c] stream [s]: [values]``: the tuple a silent subprocess
        was given last without answering (`_suspect`), its values cut and masked (`shown_values`),
        so that a slow call says which record it was slow on; empty if it held none."""
        tid = self._suspect()
        tup = self._inputs.get(tid) if tid is not None else None
        if tup is None:
            return ""
        return (f", processing a tuple from [{tup.source_component}] stream [{tup.source_stream}]: "
                f"{shown_values(tup.fields, tup.values)}")

    def _never_read(self, process: ShellProcess, tuple_id: str) -> bool:
        """Whether the dead ``process`` read nothing of tuple ``tuple_id``: all its input pipe
        took from that tuple's start on is still in the pipe (what it read is what the pipe took,
        `ShellProcess.sent`, less what is left, `ShellProcess.unread_input`). False when the
        pipe cannot say."""
        start = self._starts.get(self._places.get(tuple_id, -1))
        unread = process.unread_input()
        if start is None or unread is None:
            return False
        return process.sent - unread <= start

    def cleanup(self) -> None:
        """End the subprocess (its input closed, then SIGTERM, then SIGKILL) and its reader and
        writer threads (waiting for each at most ``CLOSE_WAIT_SECS``)."""
        self._running = False
        self._pending.close()
        self._closing_process()
        # Storm's cleanup interrupts its reader and writer threads: these end now (the writer
        # woken above, the reader at the subprocess's end of output), none outlives the task
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(CLOSE_WAIT_SECS)
        self._inputs.clear()

    # --- the threads ---------------------------------------------------------------------------
    def _read_loop(self, process: ShellProcess) -> None:
        try:
            while self._running:
                msg = process.read()
                if process is not self._process:
                    return  # replaced (`_recover`): what it still sends concerns no tuple of the new one
                self._heard += 1
                self._handle(process, msg)
        except ProtocolError as e:
            self._fault_seen(process)
            self._die(process, process.protocol_error(e))
        except MultilangError as e:
            if self._running:
                self._fault_seen(process)
                self._die(process, e)
        except EmitError as e:
            self._fault_seen(process)
            self._die(process, process.failure(f"its emit was refused: {e}"))
        except Exception as e:  # noqa: BLE001 (any failure here is the subprocess's fault, handled on the bolt's thread)
            self._fault_seen(process)
            self._die(process, process.failure(f"handling its message raised {type(e).__name__}: {e}"))

    def _write_loop(self, process: ShellProcess) -> None:
        pending = self._pending
        try:
            while self._running:
                item = pending.take(HEARTBEAT_SECS)
                if item is None:
                    if not process.running():  # killed (the reaper's, squall.multilang.process)
                        return
                    continue
                if isinstance(item, tuple):  # a tuple: (its place, its message)
                    # given from the moment its writing starts: a subprocess that dies reading a
                    # large tuple (out of memory) never takes all of it, and that death is the tuple's
                    self._starts[item[0]] = process.sent
                    self._written = item[0]
                    process.write_bytes(item[1])
                else:
                    process.write(item)
        except MultilangError as e:
            if self._running:
                self._die(process, e)

    def _handle(self, process: ShellProcess, msg: ShellMsg) -> None:
        command = msg.command
        if command == "emit":
            self._emit(msg)
        elif command in ("ack", "fail"):
            tid = str(msg.id)
            tup = self._inputs.pop(tid, None)
            if tup is None:
                raise ProtocolError(f"{command} of tuple id {msg.id!r}, which it was not given or had "
                                    f"already acked or failed")
            place = self._places.pop(tid, 0)
            self._starts.pop(place, None)
            self._answered = max(self._answered, place)
            self._answers += 1
            self._failed_after_error = command == "fail" and self._reported is not None
            if command == "ack":
                self._reported = None  # an error before an ack was not about the fails after it
                self.collector.ack(tup)
            else:  # the error stands for every fail up to the next ack (a batch's, pystorm's BatchingBolt)
                fail_because(self.collector, tup, *self._where,
                             fail_reason(f"{self.kind} subprocess (pid {process.pid})", tup, msg.msg, self._reported))
        elif command == "sync":
            self._synced += 1  # a heartbeat's answer (counted in _heard too, as every message is)
        else:
            if command == "error":
                # Storm's storm.py (and pystorm) report a tuple's exception, then fail the tuple:
                # kept for those fails, so the spout hears what the subprocess said went wrong
                self._reported = reported_line(msg.msg)
            if not self._common(process, msg, self.collector, self.context):
                log.debug("%s: ignored a message with unknown command %r", process.where, command)

    def _emit(self, msg: ShellMsg) -> None:
        anchors = []
        for a in msg.anchors:
            t = self._inputs.get(a)
            if t is None:
                raise ProtocolError(f"emit anchored onto tuple id {a!r}, which it was not given or had "
                                    f"already acked or failed")
            anchors.append(t)
        if msg.task == 0:
            tasks = self.collector.emit(msg.tuple, anchors or None, msg.stream)
            if msg.need_task_ids:
                self._pending.put_first(tasks)
        else:
            self.collector.emit_direct(msg.task, msg.tuple, anchors or None, msg.stream)
