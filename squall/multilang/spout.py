"""`ShellSpout`: a spout run by a subprocess (Storm's ``ShellSpout``).

The spout protocol is synchronous: each ``next_tuple``, ``ack``, ``fail``, ``activate`` and
``deactivate`` writes one command and reads emits, logs, errors and metrics until the
subprocess writes ``sync``. The read waits at most ``topology.subprocess.timeout.secs`` (real
time: it is a wait on a pipe) for each message; a subprocess silent longer, one that exits or
breaks the protocol is killed and the error raised on the spout's thread, which crashes the
worker, as Storm's ShellSpout halts its worker. The host restarts it, and a spout whose source
replays (its own pending list, a queue's unacknowledged messages) sends again what was in flight.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from .._components import Spout
from .._errors import EmitError
from .._fields import Fields
from .component import ShellComponent
from .messages import MultilangError, ProtocolError, spout_command
from .process import SubprocessTimeout


class ShellSpout(ShellComponent, Spout):
    """A spout run by a subprocess speaking Storm's multilang protocol.

    >>> from squall import TopologyBuilder
    >>> builder = TopologyBuilder()
    >>> _ = builder.set_spout("sentences", ShellSpout(["node", "randomsentence.js"], ["sentence"]))

    Args:
        command: the program and its arguments (a list of strings), started once per task in
            ``open``.
        output_fields: the fields of the default stream (a list or `Fields`); None declares
            nothing: subclass and override ``declare_output_fields`` for other streams.
        cwd: the subprocess's working directory (None: the worker's, or its resources'; relative:
            inside its resources).
        env: environment variables for it, added to the worker's (``PATH`` is appended).
        resources: a directory whose files travel with the topology to every worker, as a jar's
            ``resources/`` in Storm: each task's subprocess runs in a copy of it (read where the
            component is made, at most 64 MB; permission bits kept).

    Like every spout, ``next_tuple`` is called by squall only while the spout is under
    ``topology.max.spout.pending``; the subprocess should sleep a little before its ``sync``
    when it has nothing to emit (Storm's advice). See docs/multilang.md.
    """

    kind = "ShellSpout"

    def __init__(self, command: Sequence[str], output_fields: Sequence[str] | Fields | None = None, *,
                 cwd: str | None = None, env: dict[str, str] | None = None,
                 resources: str | os.PathLike | None = None) -> None:
        super().__init__(command, output_fields, cwd=cwd, env=env, resources=resources)

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        """Start the subprocess (handshake with the configuration, context and pid directory).

        Raises:
            MultilangError: it cannot start, or did not answer the handshake in time.
        """
        Spout.open(self, conf, context, collector)
        self._querying = False  # a query waits for its sync (`_answer`)
        self._deferred: list[tuple[str, Any]] = []  # acks and fails that came meanwhile
        self._launch(conf, context)

    def close(self) -> None:
        """End the subprocess (its input closed, then SIGTERM, then SIGKILL)."""
        self._closing_process()

    def activate(self) -> None:
        """Send ``activate`` and wait for its ``sync``."""
        self._query("activate")

    def deactivate(self) -> None:
        """Send ``deactivate`` and wait for its ``sync``."""
        self._query("deactivate")

    def next_tuple(self) -> None:
        """Send ``next`` and handle what the subprocess emits until its ``sync``."""
        self._query("next")

    def ack(self, msg_id: Any) -> None:
        """Send ``ack`` with the id the subprocess emitted the tuple with."""
        self._answer("ack", msg_id)

    def fail(self, msg_id: Any) -> None:
        """Send ``fail`` with the id the subprocess emitted the tuple with."""
        self._answer("fail", msg_id)

    def _write(self, process: Any, message: Any, command: str) -> None:
        # its output is read on this thread too: a subprocess that writes without reading (the
        # task ids of its emits) fills both pipes, and a write without a limit waits for ever
        try:
            process.write(message, self._timeout)
        except SubprocessTimeout:
            raise process.failure(f"it took nothing of its input for {self._timeout:g} s while answering {command} "
                                  f"(topology.subprocess.timeout.secs): it writes without reading what squall "
                                  f"sends (the task ids of its emits?)") from None

    def _answer(self, command: str, msg_id: Any) -> None:
        # An ack can come while a query waits for its sync: with acking off, the emit itself
        # acks. The subprocess is then busy with that query (storm.py waits for the emit's
        # task ids, holding anything else it reads), so the ack goes after the sync.
        if self._querying:
            self._deferred.append((command, msg_id))
        else:
            self._query(command, msg_id)

    def _query(self, command: str, msg_id: Any = "") -> None:
        process = self._process
        if process is None:
            raise MultilangError(f"{self.kind} {self.command}: {command} before open (or after close)")
        process.owner = threading.current_thread()
        self._querying = True
        try:
            self._exchange(process, command, msg_id)
            while self._deferred:  # in a loop, not nested: a burst of emits defers an ack each
                self._exchange(process, *self._deferred.pop(0))
        finally:
            self._querying = False

    def _exchange(self, process: Any, command: str, msg_id: Any) -> None:
        try:
            self._write(process, spout_command(command, msg_id), command)
            while True:
                try:
                    msg = process.read(self._timeout)
                except SubprocessTimeout:
                    error = process.failure(f"no sync for {command} within {self._timeout:g} s "
                                            f"(topology.subprocess.timeout.secs)")
                    process.kill("")
                    raise error from None
                if msg.command == "sync":
                    return
                if msg.command == "emit":
                    if msg.task == 0:
                        tasks = self.collector.emit(msg.tuple, msg.id, msg.stream)
                        if msg.need_task_ids:
                            self._write(process, tasks, command)
                    else:
                        self.collector.emit_direct(msg.task, msg.tuple, msg.id, msg.stream)
                elif not self._common(process, msg, self.collector, self.context):
                    raise ProtocolError(f"unknown command {msg.command!r}")
        except ProtocolError as e:
            error = process.protocol_error(e, f"answering {command}: ")
            process.kill("")
            raise error from None
        except EmitError as e:
            error = process.failure(f"its emit was refused: {e}")
            process.kill("")
            raise error from None
        except MultilangError:
            process.kill("")
            raise
