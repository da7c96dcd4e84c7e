"""`ShellBolt`: a bolt whose tuples are processed by a subprocess (Storm's ``ShellBolt``).

The bolt protocol is asynchronous, so, as Storm's, each task has a reader thread (what the
subprocess sends: emits, acks, fails, logs, errors, metrics, syncs, each handled as it comes,
through the thread-safe `OutputCollector`) and a writer thread (what it is sent: the task ids of
its emits first, then heartbeats and tuples). ``execute`` only queues a tuple; it waits when
``topology.shellbolt.max.pending`` tuples are queued already.

A subprocess that exits, breaks the protocol or leaves a heartbeat unanswered for
``topology.subprocess.timeout.secs`` is a fault of the worker, as Storm's ShellBolt halts its
worker: the reader or writer thread records the error and kills the subprocess, and the next
heartbeat timer (every second, on the bolt's own thread) or ``execute`` raises it there, which
crashes the worker whatever ``topology.bolt.fail.fast`` says. The host restarts the worker; the
tuples it held are replayed by their spouts.
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
from .._failure import fail_because
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
        output_fields: the fields of the default stream (a list or `Fields`); None declares
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
    squall_fail_fast = True  # its faults crash the worker, as Storm's ShellBolt halts it (see the module docstring)

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
        self._inputs: dict[str, Tuple] = {}
        self._pending = PendingWrites(int(conf_value(conf, Config.TOPOLOGY_SHELLBOLT_MAX_PENDING)))
        self._ids = random.Random()
        self._where = (context.get_this_component_id(), context.get_this_task_id())
        self._reported: str | None = None  # the subprocess's last error (`reported_line`), for the fails after it
        self._death: MultilangError | None = None
        self._running = True
        self._heard = 0  # messages read from the subprocess, any of which is a heartbeat
        self._heard_seen = -1
        self._heard_at = 0.0
        self._now: Callable[[], float] | None = None
        self._threads: list[threading.Thread] = []
        process = self._launch(conf, context)
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

        Raises:
            MultilangError: the subprocess failed (a fault of the worker).
        """
        process = self._process
        assert process is not None
        process.owner = threading.current_thread()
        if self._death is not None:
            raise self._death
        tuple_id = str(self._ids.getrandbits(63))
        try:
            data = process.serializer.encode(bolt_message(tuple_id, tup))
        except ProtocolError as e:
            reason = f"{process.where}: a tuple from [{tup.source_component}] stream [{tup.source_stream}] {e}"
            self.collector.report_error(reason)
            fail_because(self.collector, tup, *self._where, reason)
            return
        self._inputs[tuple_id] = tup
        while not self._pending.put(data, HEARTBEAT_SECS):  # full: wait, as Storm's execute does
            self._check()

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
        """Raise the subprocess's failure, if any: the recorded one, or a heartbeat unanswered
        for longer than the timeout."""
        if self._death is None and self._now is not None:
            now = self._now()
            if self._heard != self._heard_seen:
                self._heard_seen, self._heard_at = self._heard, now
            elif now - self._heard_at > self._timeout and self._process is not None:
                silent = now - self._heard_at
                self._die(self._process.failure(
                    f"it sent nothing, not even a sync for a heartbeat, for {silent:.0f} s "
                    f"(topology.subprocess.timeout.secs {self._timeout:g})"), "its heartbeat timed out")
        if self._death is not None:
            raise self._death

    def _die(self, error: MultilangError, because: str = "") -> None:
        """Record the first failure and end the subprocess; the bolt's thread raises it."""
        if self._death is None:
            self._death = error
        if self._process is not None:
            self._process.kill(because)

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
                self._heard += 1
                self._handle(process, msg)
        except ProtocolError as e:
            self._die(process.protocol_error(e))
        except MultilangError as e:
            if self._running:
                self._die(e)
        except EmitError as e:
            self._die(process.failure(f"its emit was refused: {e}"))
        except Exception as e:  # noqa: BLE001 (any failure here is the subprocess's fault, raised on the bolt's thread)
            self._die(process.failure(f"handling its message raised {type(e).__name__}: {e}"))

    def _write_loop(self, process: ShellProcess) -> None:
        try:
            while self._running:
                item = self._pending.take(HEARTBEAT_SECS)
                if item is None:
                    if not process.running():  # killed (the reaper's, squall.multilang.process)
                        return
                    continue
                if isinstance(item, bytes):
                    process.write_bytes(item)
                else:
                    process.write(item)
        except MultilangError as e:
            if self._running:
                self._die(e)

    def _handle(self, process: ShellProcess, msg: ShellMsg) -> None:
        command = msg.command
        if command == "emit":
            self._emit(msg)
        elif command in ("ack", "fail"):
            tup = self._inputs.pop(str(msg.id), None)
            if tup is None:
                raise ProtocolError(f"{command} of tuple id {msg.id!r}, which it was not given or had "
                                    f"already acked or failed")
            if command == "ack":
                self._reported = None  # an error before an ack was not about the fails after it
                self.collector.ack(tup)
            else:  # the error stands for every fail up to the next ack (a batch's, pystorm's BatchingBolt)
                fail_because(self.collector, tup, *self._where,
                             fail_reason(f"{self.kind} subprocess (pid {process.pid})", tup, msg.msg, self._reported))
        elif command == "sync":
            pass  # a heartbeat's answer: counted as every message is
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
