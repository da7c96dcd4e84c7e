"""The messages of Storm's multilang protocol (``docs/Multilang-protocol.md``, 0.7.1 and later
with heartbeats, 0.9.3+), as plain records and pure functions: what a subprocess sends is
checked here, once, into a `ShellMsg`; what squall sends is built here.

A message that breaks the protocol raises `ProtocolError` saying what was wrong with it; the
shell component adds which component, task and command it came from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._error_lines import NO_EXCEPTION, WITHOUT_FRAMES
from .._errors import SquallError
from .._failure import MAX_MESSAGE_CHARS
from .._system import DEFAULT_STREAM, SYSTEM_TASK

if TYPE_CHECKING:
    from .._context import TopologyContext
    from .._grouping import Grouping
    from .._tuple import Tuple

HEARTBEAT_STREAM = "__heartbeat"
"""The stream of the heartbeat tuples a ShellBolt sends its subprocess (Storm's)."""

LOG_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
"""A ``log`` command's ``level`` (Storm's ShellLogLevel: trace, debug, info, warn, error) as
Python's; anything else is info, as Storm's."""


class ProtocolError(SquallError):
    """A subprocess broke the multilang protocol, or a value cannot cross it."""


class MultilangError(SquallError):
    """A shell component's subprocess failed: it could not start, it exited, it stopped
    answering, or it broke the protocol. Raised where the component runs, it is a fault of its
    worker (Storm's ShellBolt/ShellSpout halt theirs): the message names the component, task,
    command, pid and what happened, with the last lines the subprocess wrote to stderr.

    ``failure_message``: the same in one line, with only the last line of that stderr (a
    traceback's exception): what the cause of a tuple failed by it carries to the spout and its
    dead letter (`squall.FailureCause.of_exception`), where a whole traceback would not do.

    ``without_frames``: the message says all of it (the subprocess's death, `ShellProcess.failure`),
    so its record and log line show the message alone, not squall's frames from the executor loop
    down to the pipe's read (`squall._error_lines.WITHOUT_FRAMES`)."""

    def __init__(self, message: str, failure_message: str | None = None, *, without_frames: bool = False) -> None:
        super().__init__(message)
        self.failure_message = failure_message
        setattr(self, WITHOUT_FRAMES, without_frames)


@dataclass(frozen=True)
class ShellMsg:
    """One message from a subprocess (Storm's ``ShellMsg``), checked.

    ``task`` is the direct emit's target, 0 for a regular emit; ``anchors`` the bolt emit's
    anchor ids; ``level`` a log's Python level.
    """

    command: str
    id: Any = None
    anchors: tuple[str, ...] = ()
    stream: str = DEFAULT_STREAM
    task: int = 0
    msg: str = ""
    tuple: list = field(default_factory=list)
    need_task_ids: bool = True
    name: str = ""
    params: Any = None
    level: int = logging.INFO


def parse_shell_msg(obj: Any) -> ShellMsg:
    """``obj`` (a decoded message) as a `ShellMsg`.

    Raises:
        ProtocolError: it is not an object with a command, or a field has the wrong type.
    """
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected an object with a \"command\", got {type(obj).__name__} {_short(obj)}")
    command = obj.get("command")
    if not isinstance(command, str) or not command:
        raise ProtocolError(f"a message without a \"command\": {_short(obj)}")
    stream = obj.get("stream")
    if stream is None:
        stream = DEFAULT_STREAM
    elif not isinstance(stream, str):
        raise ProtocolError(f"{command}: \"stream\" must be a string, got {_short(stream)}")
    task = obj.get("task")
    if task is None:
        task = 0
    elif type(task) is not int:
        raise ProtocolError(f"{command}: \"task\" must be an integer task id, got {_short(task)}")
    need = obj.get("need_task_ids")
    if need is None:
        need = True
    elif not isinstance(need, bool):
        raise ProtocolError(f"{command}: \"need_task_ids\" must be true or false, got {_short(need)}")
    values = obj.get("tuple")
    if command == "emit" and not isinstance(values, list):
        raise ProtocolError(f"emit: \"tuple\" must be a list of values, got {_short(values)}")
    anchors = obj.get("anchors")
    if anchors is None:
        anchors = ()
    elif isinstance(anchors, (str, int)) and not isinstance(anchors, bool):
        anchors = (str(anchors),)
    elif isinstance(anchors, list) and all(isinstance(a, (str, int)) and not isinstance(a, bool) for a in anchors):
        anchors = tuple(str(a) for a in anchors)
    else:
        raise ProtocolError(f"{command}: \"anchors\" must be a list of tuple ids, got {_short(anchors)}")
    msg_id = obj.get("id")
    if msg_id is not None and (not isinstance(msg_id, (str, int, float)) or isinstance(msg_id, bool)):
        raise ProtocolError(f"{command}: \"id\" must be a string or a number, got {_short(msg_id)}")
    if command in ("ack", "fail") and msg_id is None:
        raise ProtocolError(f"{command} without the \"id\" of the tuple: {_short(obj)}")
    msg = obj.get("msg")
    name = obj.get("name")
    level = obj.get("level")
    return ShellMsg(command, msg_id, anchors, stream, task, "" if msg is None else str(msg),
                    values if isinstance(values, list) else [], need,
                    name if isinstance(name, str) else "", obj.get("params"),
                    LOG_LEVELS.get(level, logging.INFO) if type(level) is int else logging.INFO)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 200 else text[:200] + "..."


def bolt_message(tuple_id: str, tup: Tuple) -> dict[str, Any]:
    """The message that hands ``tup`` to a bolt's subprocess under ``tuple_id`` (Storm's BoltMsg)."""
    return {"id": tuple_id, "comp": tup.source_component, "stream": tup.source_stream,
            "task": tup.source_task, "tuple": list(tup.values)}


def heartbeat_message(tuple_id: str) -> dict[str, Any]:
    """A heartbeat tuple: the subprocess must answer it with ``sync`` (Storm 0.9.3+)."""
    return {"id": tuple_id, "comp": None, "stream": HEARTBEAT_STREAM, "task": SYSTEM_TASK, "tuple": []}


def spout_command(command: str, msg_id: Any = "") -> dict[str, Any]:
    """``next``, ``ack``, ``fail``, ``activate`` or ``deactivate`` for a spout's subprocess."""
    return {"command": command, "id": msg_id}


def setup_message(conf: dict[str, Any], context: TopologyContext, pid_dir: str) -> dict[str, Any]:
    """The handshake: the component's configuration, its pid directory and its context (Storm's
    ``TopologyContext.toJSONString``, 0.10.0+ keys). Configuration values the wire cannot
    carry (a class, a function) are given as their text."""
    return {"conf": {str(k): _plain(v) for k, v in conf.items()}, "pidDir": pid_dir, "context": context_json(context)}


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)


# Storm's Thrift Grouping field names (``Grouping.getSetField()``) for squall's kinds: a global
# grouping is Storm's fields grouping on no fields, partial key and custom ones are serialized objects
_GROUPING_TYPES = {"shuffle": "SHUFFLE", "fields": "FIELDS", "partial_key": "CUSTOM_SERIALIZED", "all": "ALL",
                   "global": "FIELDS", "none": "NONE", "direct": "DIRECT", "local_or_shuffle": "LOCAL_OR_SHUFFLE",
                   "custom": "CUSTOM_SERIALIZED"}


def _grouping_json(grouping: Grouping) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _GROUPING_TYPES.get(grouping.kind, grouping.kind.upper())}
    if grouping.kind in ("fields", "global"):
        out["fields"] = list(grouping.fields or ())
    return out


def context_json(context: TopologyContext) -> dict[str, Any]:
    """A task's context as Storm sends it to a shell component."""
    me = context.get_this_component_id()
    streams = context.get_this_streams()
    tasks = {str(t): context.get_component_id(t) for c in context.get_component_ids()
             for t in context.get_component_tasks(c)}
    sources: dict[str, dict[str, Any]] = {}
    source_fields: dict[str, dict[str, list[str]]] = {}
    for gid, grouping in context.get_this_sources().items():
        sources.setdefault(gid.component_id, {})[gid.stream_id] = _grouping_json(grouping)
        try:
            fields = list(context.get_component_output_fields(gid.component_id, gid.stream_id))
        except ValueError:
            fields = []
        source_fields.setdefault(gid.component_id, {})[gid.stream_id] = fields
    return {
        "task->component": tasks,
        "taskid": context.get_this_task_id(),
        "componentid": me,
        "streams": list(streams),
        "stream->outputfields": {s: list(context.get_component_output_fields(me, s)) for s in streams},
        "stream->target->grouping": {s: {c: _grouping_json(g) for c, g in targets.items()}
                                     for s, targets in context.get_this_targets().items()},
        "source->stream->grouping": sources,
        "source->stream->fields": source_fields,
    }


def fail_reason(who: str, tup: Tuple, said: str, reported: str | None) -> str:
    """Why a component's ``fail`` of ``tup`` failed it, for the spout and its dead letter (which
    name the component and task): ``who`` (the kind of component, its subprocess's pid), the
    tuple's source and stream, and what the component said: the fail's own message ``said``
    (squall reads a ``msg`` if given; Storm's protocol has none), else the error it reported
    since its last ack (``reported``: `reported_line` of it, a traceback's ``ValueError: ...``),
    else that it said nothing."""
    head = f"{who} failed a tuple from [{tup.source_component}] stream [{tup.source_stream}]"
    if said:
        return f"{head}: {reported_line(said)}"
    if reported:
        return f"{head} after reporting: {reported}"
    return f"{head} (it reported no error)"


def reported_line(error: str) -> str:
    """What of a component's ``error`` its fails say (`fail_reason`): the last line (`last_line`),
    cut to `squall._failure.MAX_MESSAGE_CHARS`, as far as a failure's message reaches. Made
    once, when the error comes: every fail up to the next ack (a batch's) says it, and taking
    the last line of a multi-MB error again for each made each fail read all of it."""
    line = last_line(error)
    return line if len(line) <= MAX_MESSAGE_CHARS else line[:MAX_MESSAGE_CHARS] + "..."




def last_line(text: str) -> str:
    """The last non-blank line of ``text``, stripped: a traceback's exception and message (but
    not `NO_EXCEPTION`: then pystorm's first line, ``Python ValueError raised while ...``)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and line.strip() != NO_EXCEPTION]
    return lines[-1] if lines else text.strip()
