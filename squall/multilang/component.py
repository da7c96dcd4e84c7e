"""What `ShellBolt` and `ShellSpout` share: the command, the declared fields, the subprocess's
start, and the commands both kinds of subprocess may send (``log``, ``error``, ``metrics``)."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Sequence
from typing import Any

from .._config import Config, conf_value
from .._fields import Fields
from .messages import ProtocolError, ShellMsg
from .process import ShellProcess, task_directory
from .resources import pack, unpack
from .serializer import serializer_for

log = logging.getLogger("squall.multilang")
# what the components themselves log (``log`` commands: pystorm's ``self.logger`` and
# ``self.log``), apart from squall's own lines about them, so that ``squall local`` and
# ``squall sparse run`` can show these at INFO, as Storm's local mode shows its ShellLog lines,
# while squall's stay at WARNING there (squall.cli._local._squall_logging names this logger)
shell_log = logging.getLogger("squall.multilang.shell_log")

# the most of a ``log`` command's message a log line holds: a component that logged a tuple
# (``self.log(f"got {tup}")``) of several MB made a log line as large, each time; a Python
# traceback pystorm sends through ``log`` (its StormHandler) fits many times over
SHELL_LOG_CHARS = 10_000


def shell_log_text(msg: str) -> str:
    """``msg`` as a log line shows it: at most `SHELL_LOG_CHARS` of it, then how long it was
    (as a stderr line is cut, `squall.multilang.process.STDERR_LINE_CHARS`)."""
    if len(msg) <= SHELL_LOG_CHARS:
        return msg
    return f"{msg[:SHELL_LOG_CHARS]}... ({len(msg)} characters)"


def checked_command(command: Any, kind: str) -> list[str]:
    """``command`` as a list of strings.

    Raises:
        TypeError: it is not a non-empty list of strings (a single string included: which
            words are the program is not guessed).
    """
    if isinstance(command, (str, bytes)) or not isinstance(command, Sequence) or not command \
            or not all(isinstance(c, str) for c in command):
        raise TypeError(f"{kind}: command must be a non-empty list of strings, the program and its arguments, "
                        f"e.g. ['python3', 'splitter.py']; got {command!r}")
    return list(command)


class ShellComponent:
    """The part of a shell component that is not bolt- or spout-specific (see `ShellBolt`)."""

    kind = "Shell component"

    def __init__(self, command: Sequence[str], output_fields: Sequence[str] | Fields | None = None, *,
                 cwd: str | None = None, env: dict[str, str] | None = None,
                 resources: str | os.PathLike | None = None) -> None:
        self.command = checked_command(command, type(self).__name__)
        self.resources = None if resources is None else pack(resources, f"{type(self).__name__} {self.command}")
        self.output_fields = None if output_fields is None else (
            output_fields if isinstance(output_fields, Fields) else Fields(output_fields))  # a str: one field
        self.cwd = cwd
        self.env = dict(env or {})
        self._process: ShellProcess | None = None
        self._closing = False  # set by a clean shutdown (`_closing_process`); the launch sets it back

    def declare_output_fields(self, declarer: Any) -> None:
        """Declare the default stream with ``output_fields``, if given; a subclass declares
        other streams by overriding this."""
        if self.output_fields is not None:
            declarer.declare(self.output_fields)

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Each executor of a shell component runs on its own thread: it waits on its
        subprocess (a spout's ``next`` until ``sync``, a bolt's execute when
        ``topology.shellbolt.max.pending`` tuples wait), and that must not stall other components."""
        return {Config.TOPOLOGY_EXECUTOR_OWN_THREAD: True}

    def _launch(self, conf: dict[str, Any], context: Any) -> ShellProcess:
        where = f"{self.kind} [{context.get_this_component_id()}] task {context.get_this_task_id()}"
        self._timeout = float(subprocess_timeout(conf))
        serializer = serializer_for(conf, where)
        cwd = self.cwd
        owned = task_directory(f"squall-multilang-{context.get_this_component_id()}-")
        if self.resources is not None:  # a directory of its own, as Storm's code directory, unless cwd says otherwise
            try:
                copy = unpack(self.resources, "resources-", owned)
            except OSError:
                shutil.rmtree(owned, ignore_errors=True)
                raise
            cwd = os.path.join(copy, cwd) if cwd else copy
        self._closing = False
        process = ShellProcess(self.command, serializer, where, cwd, self.env, owned)
        process.owner = threading.current_thread()
        pid = process.launch(conf, context, self._timeout)
        log.info("%s: launched subprocess %s with pid %s", where, self.command, pid)
        self._process = process
        return process

    def _closing_process(self) -> None:
        """End the subprocess on a clean shutdown (see `ShellProcess.close`); an ``error`` it
        sends meanwhile is logged, not reported."""
        self._closing = True
        if self._process is not None:
            self._process.close()

    def _common(self, process: ShellProcess, msg: ShellMsg, collector: Any, context: Any) -> bool:
        """Handle ``log``, ``error`` and ``metrics``; False for another command."""
        command = msg.command
        if command == "log":
            shell_log.log(msg.level, "ShellLog %s pid %s: %s", process.where, process.pid, shell_log_text(msg.msg))
        elif command == "error":
            if self._closing:
                # squall closed its input on a clean shutdown, where Storm kills the process:
                # storm.py then reports "Read EOF from stdin", which is no fault of the topology
                log.info("%s pid %s: an error it sent after squall closed its input at shutdown (not "
                         "reported): %s", process.where, process.pid, shell_log_text(msg.msg))
            else:
                collector.report_error(f"Shell Process Exception: {msg.msg}")
        elif command == "metrics":
            update_metric(context, msg)
        else:
            return False
        return True

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_process"] = None  # a running subprocess is the task's, never copied
        return state


def subprocess_timeout(conf: dict[str, Any]) -> float:
    """``topology.subprocess.timeout.secs``, else ``supervisor.worker.timeout.secs`` (Storm's)."""
    secs = conf_value(conf, Config.TOPOLOGY_SUBPROCESS_TIMEOUT_SECS)
    return float(secs if secs is not None else conf_value(conf, Config.SUPERVISOR_WORKER_TIMEOUT_SECS))


def update_metric(context: Any, msg: ShellMsg) -> None:
    """A ``metrics`` command: update the metric the component registered under ``name`` with
    ``params`` (Storm's IShellMetric: a count adds it, or 1 if it is not a number; a reduced
    or combined metric takes it as a value; an assignable one is set to it; a metric with
    ``update_metric_from_rpc`` is handed it).

    Raises:
        ProtocolError: no name, or no metric registered under it.
    """
    if not msg.name:
        raise ProtocolError("metrics without a \"name\"")
    metric = context.get_registered_metric_by_name(msg.name)
    if metric is None:
        raise ProtocolError(f"metrics: no metric is registered under the name {msg.name!r} "
                            f"(register it in the component's prepare/open, before starting the subprocess)")
    params = msg.params
    if hasattr(metric, "update_metric_from_rpc"):
        metric.update_metric_from_rpc(params)
    elif hasattr(metric, "incr_by"):
        metric.incr_by(params if isinstance(params, int) and not isinstance(params, bool) else 1)
    elif hasattr(metric, "update"):
        metric.update(params)
    elif hasattr(metric, "set_value"):
        metric.set_value(params)
    else:
        raise ProtocolError(f"metrics: the metric {msg.name!r} ({type(metric).__name__}) cannot be updated "
                            f"from a subprocess")

