"""streamparse's components (pystorm's `Bolt`, `Spout`, `ReliableSpout`, `BatchingBolt`,
`TicklessBatchingBolt` and the user's subclasses) run inside squall's executors, no subprocess.

A pystorm component talks to Storm through one object, its serializer: ``send_message(dict)``
for what it says (``emit``, ``ack``, ``fail``, ``log``, ``error``, ``sync``) and
``read_message()`` for what it hears (a tuple, ``next``, ``ack``, ``fail``, the task ids of an
emit). `_Wire` is that serializer without the pipe: what the component says goes straight to
squall's collector, what it hears is queued by the executor just before it calls the
component's own ``_run()``. So pystorm's logic runs as it does under Storm, unchanged:
auto-anchoring to the current tuples, auto ack and auto fail, `ReliableSpout`'s replays,
`BatchingBolt`'s batches and tick counting, `TicklessBatchingBolt`'s batching thread and lock.

What a subprocess would do differently, and what is done instead:

- pystorm's ``run()`` loop is not used: squall's executor calls ``_run()`` once per tuple or
  spout call, and handles an exception as ``run()`` does (the component's
  ``_handle_run_exception``: the error reported, the current tuples failed when ``auto_fail``).
  A component with ``exit_on_exception`` (the default) would then exit and Storm would start it
  again: here a fresh instance replaces it (``initialize`` again). The inputs the old instance
  held and had not acked or failed (a batch, tuples kept for later) are failed then, as lost
  (`squall.FailureCause.lost_in`: no retry budget counts them, only the tuple that raised is
  charged), so their spouts replay them at once; under Storm they would time out after the
  worker's restart, ``topology.message.timeout.secs`` later, with the same outcome.
- Logging: the component's ``logger`` is pystorm's (``pystorm.component.<component>``, level
  ``pystorm.log.level``), and its records go to squall's worker log; pystorm's StormHandler and
  stdout redirection, made for the pipe, are not installed. ``log()`` writes to
  ``squall.sparse.<component>`` at its level.
- `TicklessBatchingBolt`'s batcher is a thread this module starts and stops (pystorm's signals
  SIGUSR1 to the process on an error, which would hit the whole worker here).
"""

from __future__ import annotations

import atexit
import collections
import difflib
import hashlib
import inspect
import io
import itertools
import logging
import shutil
import sys
import threading
from collections.abc import Callable
from typing import Any

from .._collectors import OutputCollector, OutputFieldsDeclarer, SpoutOutputCollector
from .._components import Bolt, Spout
from .._config import Config
from .._context import TopologyContext
from .._failure import FailureCause, fail_because, fail_for
from .._fields import Fields
from .._system import DEFAULT_STREAM
from .._tuple import Tuple
from ..multilang.messages import fail_reason, last_line, reported_line
from ..multilang.process import task_directory
from ..multilang.resources import Resources, unpack

log = logging.getLogger("squall.sparse")

# pystorm's log levels (STORM-414) as Python's, for ``log(message, level)`` commands
_STORM_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_PYTHON_LEVELS = {"critical": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING,
                  "warn": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG, "trace": logging.DEBUG}

Streams = dict[str, tuple[list[str], bool]]
"""A component's output streams as the DSL declares them: ``{stream: (fields, direct)}``."""


class SparseComponentError(RuntimeError):
    """A streamparse component broke the protocol's rules (acked or failed an unknown tuple,
    anchored to one already acked, sent an unknown command), naming the component and the id."""


class _Wire:
    """pystorm's serializer in process (the module docstring): ``send_message`` hands each
    command to ``handle``; ``read_message`` pops what the executor queued with ``push``."""

    def __init__(self, handle: Callable[[dict[str, Any]], None]) -> None:
        self.send_message = handle
        inbox: collections.deque[Any] = collections.deque()
        self.push = inbox.append
        # what pystorm reads next: a command or tuple dict, or a list of task ids (IndexError
        # if it reads what was never queued: pystorm's read_message called outside _run)
        self.read_message = inbox.popleft
        self.input_stream = self.output_stream = None  # pystorm compares output_stream to sys.stdout


def in_process_problem(cls: type) -> str | None:
    """Why the pystorm class ``cls`` cannot run in process, or None: a TicklessBatchingBolt
    that defines ``__init__`` (its own ``__init__`` is replaced, see `_construct`)."""
    from pystorm.bolt import TicklessBatchingBolt
    if not issubclass(cls, TicklessBatchingBolt):
        return None
    own = [k.__qualname__ for k in cls.__mro__[:cls.__mro__.index(TicklessBatchingBolt)]
           if "__init__" in vars(k) and not k.__module__.startswith(("streamparse.", "pystorm."))]
    if not own:
        return None
    return (f"{cls.__qualname__} is a TicklessBatchingBolt that defines __init__ ({own[0]}), which cannot run in "
            f"process: set it up in initialize(conf, context) instead, or run it with --multilang")


def missing_method_problem(cls: type) -> str | None:
    """Why the pystorm class ``cls`` can do no work, or None: it does not define the method
    pystorm leaves to it (a Spout's ``next_tuple``, a Bolt's ``process``, a BatchingBolt's
    ``process_batch``), whose pystorm version raises a bare ``NotImplementedError``. A bolt
    with ``process`` misspelt failed every tuple, each error saying only "NotImplementedError",
    and a spout called it for ever; the topology ran."""
    from pystorm.bolt import BatchingBolt
    from pystorm.spout import Spout
    name = ("next_tuple" if issubclass(cls, Spout) else
            "process_batch" if issubclass(cls, BatchingBolt) else "process")
    owner = next((k for k in cls.__mro__ if name in vars(k)), None)
    if owner is not None and not owner.__module__.startswith(("pystorm.", "streamparse.")):
        return None
    try:
        where = f" ({inspect.getsourcefile(cls)})"
    except (OSError, TypeError):  # defined where no file is (a REPL, exec)
        where = ""
    own = [k for klass in cls.__mro__ if not klass.__module__.startswith(("pystorm.", "streamparse.", "builtins"))
           for k in vars(klass) if callable(vars(klass)[k])]
    near = difflib.get_close_matches(name, own, n=1)
    hint = f" (it defines {near[0]!r}: misspelt?)" if near else ""
    return (f"{cls.__qualname__}{where} defines no {name}(){hint}: pystorm's raises NotImplementedError, "
            f"so it would do nothing but fail")


def _construct(cls: type) -> Any:
    """An instance of the user's pystorm class, with pipes that are never used and no signal
    handler (pystorm's remote-debugger signal, and TicklessBatchingBolt's SIGUSR1)."""
    from pystorm.bolt import TicklessBatchingBolt
    streams = {"input_stream": io.BytesIO(), "output_stream": io.BytesIO(), "rdb_signal": None}
    if not issubclass(cls, TicklessBatchingBolt):
        return cls(**streams)
    problem = in_process_problem(cls)
    if problem is not None:
        raise TypeError(problem)
    # TicklessBatchingBolt.__init__ but its signal handler and thread (`SparseBolt._batcher`)
    obj: Any = object.__new__(cls)
    super(TicklessBatchingBolt, obj).__init__(**streams)
    obj.exc_info = None
    obj._batch_lock = threading.RLock()
    return obj


def storm_context(context: TopologyContext) -> dict[str, Any]:
    """The context Storm's multilang handshake sends, from squall's `TopologyContext`: the
    task, the component, every task's component, this component's output fields and its
    sources' fields (pystorm names its tuples' values by those)."""
    me = context.get_this_component_id()
    sources: dict[str, dict[str, list[str]]] = {}
    for gsid in context.get_this_sources():
        fields = context.get_component_output_fields(gsid.component_id, gsid.stream_id)
        sources.setdefault(gsid.component_id, {})[gsid.stream_id] = list(fields)
    return {
        "taskid": context.get_this_task_id(),
        "componentid": me,
        "task->component": {str(t): c for c in context.get_component_ids() for t in context.get_component_tasks(c)},
        "stream->outputfields": {s: list(context.get_this_output_fields(s)) for s in context.get_this_streams()},
        "source->stream->fields": sources,
    }


def _set_up(obj: Any, conf: dict[str, Any], context: dict[str, Any]) -> None:
    """pystorm's ``_setup_component`` (the attributes it sets, and a Bolt's tuple types), minus
    what is for the pipe: the StormHandler on the root logger and the stdout redirection."""
    from pystorm.bolt import _IDENTIFIER_RE
    from pystorm.bolt import Bolt as PystormBolt
    obj.topology_name = conf.get(Config.TOPOLOGY_NAME) or ""  # pystorm's is a string
    obj.task_id = context["taskid"]
    obj.component_name = context["componentid"]
    obj.debug = bool(conf.get(Config.TOPOLOGY_DEBUG))
    obj.storm_conf = conf
    obj.context = context
    obj.logger = logging.getLogger(f"pystorm.component.{obj.component_name}")
    level = str(conf.get("pystorm.log.level", "info")).lower()
    obj.logger.setLevel(logging.DEBUG if obj.debug else _PYTHON_LEVELS.get(level, logging.INFO))
    if isinstance(obj, PystormBolt):
        for source, streams in context["source->stream->fields"].items():
            for stream, fields in streams.items():
                name = _IDENTIFIER_RE.sub("_", source.title()) + _IDENTIFIER_RE.sub("_", stream.title()) + "Tuple"
                obj._source_tuple_types[source][stream] = collections.namedtuple(name, fields)


_UNPACKED: dict[str, str] = {}  # a digest of a project's src/ files -> their copy in this process
_UNPACKING = threading.Lock()


def importable(resources: Resources) -> None:
    """Make the project's ``src/`` (``resources``, shipped with the component) importable in
    this process, as Storm's ``streamparse_run`` runs in the jar's ``resources/``: a module
    imported when a task starts (in ``initialize``) or later is found there. In the process
    that loaded the project, ``src/`` is on ``sys.path`` already; elsewhere (a worker, on any
    host) one copy per process is unpacked, put first on ``sys.path`` and removed at exit, or,
    if the worker dies without one (SIGKILL, the OOM killer), by its restarter: the copy is
    made under the worker's shell home, as a shell task's directories are
    (`squall.multilang.process.task_directory`)."""
    if resources.source in sys.path:
        return
    digest = hashlib.sha256(resources.source.encode())
    for rel, mode, data in resources.files:
        digest.update(f"\0{rel}\0{mode}\0{len(data)}\0".encode())
        digest.update(data)
    key = digest.hexdigest()
    with _UNPACKING:
        if key in _UNPACKED:
            return
        owned = task_directory("squall-sparse-src-")
        try:
            path = unpack(resources, "src-", owned)
        except OSError:
            shutil.rmtree(owned, ignore_errors=True)
            raise
        atexit.register(shutil.rmtree, owned, True)
        _UNPACKED[key] = path
        sys.path.insert(0, path)


class _Hosted:
    """What the spout and the bolt adapters share: the user's class, its declared streams, the
    project's ``src/`` (None: none shipped), the instance they run and how it is started,
    stepped and restarted."""

    component_cls: type
    streams: Streams
    resources: Resources | None

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The streams the topology's spec declares (the class's ``outputs``, or ``Stream``s)."""
        for stream, (fields, direct) in self.streams.items():
            declarer.declare_stream(stream, Fields(fields), direct)

    def _start(self, conf: dict[str, Any], context: TopologyContext) -> None:
        if self.resources is not None:
            importable(self.resources)
        self._conf = dict(conf)
        self._storm_context = storm_context(context)
        self._where = (f"streamparse component {self.component_cls.__qualname__} "
                       f"[{context.get_this_component_id()}] task {context.get_this_task_id()}")
        self._task = (context.get_this_component_id(), context.get_this_task_id())
        self._reported: str | None = None  # the component's last error since its last ack (`fail_reason`)
        self._restarted_after = ""  # the exception that replaces the instance, for the inputs it held
        self._logs = logging.getLogger(f"squall.sparse.{context.get_this_component_id()}")
        self._running = False
        self._deferred: list[dict[str, Any]] = []
        self._restart_due = False
        self._new_instance()

    def _new_instance(self) -> None:
        self.obj = obj = _construct(self.component_cls)
        self.wire = _Wire(self._message)
        obj.serializer = self.wire
        _set_up(obj, self._conf, self._storm_context)
        obj.initialize(self._conf, self._storm_context)

    def _step(self, command: dict[str, Any]) -> None:
        """Give the component ``command`` and let its ``_run()`` take it, as pystorm's ``run()``
        loop would; then the commands that arrived meanwhile (an ack squall makes inside an
        emit when acking is off).

        A restart that is due (an exception here, or in a TicklessBatchingBolt's batcher
        thread) happens before the next command is given, never while the instance runs: the
        commands still queued in ``_deferred`` were never delivered, so they are the new
        instance's, not inputs the old one held."""
        self._deferred.append(command)
        if self._running:
            return
        self._running = True
        try:
            while self._deferred:
                if self._restart_due:
                    self._restart()
                command = self._deferred.pop(0)
                obj = self.obj
                self.wire.push(command)
                try:
                    obj._run()
                except Exception as e:  # noqa: BLE001 (pystorm's run(): any exception of the component's)
                    self._raised(obj, e)
        finally:
            self._running = False

    def _raised(self, obj: Any, error: Exception) -> None:
        """pystorm's ``run()`` on an exception: log it, let the component handle it (report,
        fail its current tuples), and, with ``exit_on_exception``, replace the instance (at the
        next command, `_step`)."""
        self._logs.error("Exception in %s.run() (%s)", type(obj).__name__, self._where, exc_info=error)
        try:
            obj._handle_run_exception(error)
        except Exception:  # noqa: BLE001 (as run(): an error while handling one is logged)
            self._logs.exception("While trying to handle previous exception (%s)", self._where)
        if obj.exit_on_exception:
            self._restart_due = True
            self._restarted_after = f"{type(error).__name__}: {last_line(str(error))}"

    def _restart(self) -> None:
        """A fresh instance, as a restarted subprocess would be (initialize runs again)."""
        self._restart_due = False
        self._logs.warning("%s restarts after an exception (exit_on_exception)", self._where)
        self._stop_instance()
        self._fail_inputs()
        self._new_instance()

    def _stop_instance(self) -> None:
        """Hook: stop what the instance runs beside the executor (a batcher thread)."""

    def _fail_inputs(self) -> None:
        """Hook: fail the tuples the old instance held (the module docstring)."""

    def _message(self, msg: dict[str, Any]) -> None:
        """What the component says (pystorm's ``send_message``)."""
        command = msg.get("command")
        if command == "emit":
            self._emit(msg)
        elif command in ("ack", "fail", "sync"):
            self._command(command, msg)
        elif command == "log":
            self._logs.log(_STORM_LEVELS.get(msg.get("level", 2), logging.INFO), "%s", msg.get("msg"))
        elif command == "error":
            # pystorm reports a tuple's exception, then fails the tuple (or a batch's): kept for
            # those fails, so the spout hears what went wrong (`fail_reason`)
            said = str(msg.get("msg"))
            self._reported = reported_line(said)
            self._collector().report_error(said)
        elif command == "metrics":
            self._collector().report_error(
                f"{self._where} reported metric {msg.get('name')!r}: no metric is registered under that name "
                f"(Storm's ShellBolt needs it registered on the JVM side; squall registers none for "
                f"streamparse components)")
        else:
            self._command(command, msg)

    def _collector(self) -> Any:
        raise NotImplementedError

    def _emit(self, msg: dict[str, Any]) -> None:
        raise NotImplementedError

    def _command(self, command: Any, msg: dict[str, Any]) -> None:
        """``ack``, ``fail``, ``sync`` and what else a kind of component may send."""
        if command != "sync":
            raise SparseComponentError(f"{self._where} sent an unknown command {command!r}")


class SparseSpout(_Hosted, Spout):
    """A streamparse/pystorm spout class run as a squall spout (the module docstring)."""

    def __init__(self, component_cls: type, streams: Streams, resources: Resources | None = None) -> None:
        self.component_cls = component_cls
        self.streams = streams
        self.resources = resources

    def open(self, conf: dict, context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Make the instance and run its ``initialize(storm_conf, context)``."""
        self.collector = collector
        self._active = False
        self._start(conf, context)

    def activate(self) -> None:
        """pystorm's ``activate`` command."""
        self._active = True
        self._step({"command": "activate"})

    def deactivate(self) -> None:
        """pystorm's ``deactivate`` command."""
        self._active = False
        self._step({"command": "deactivate"})

    def _restart(self) -> None:
        """A fresh instance, activated first if the topology is active: under Storm the
        restarted worker's executor activates the new spout process, and a spout that emits
        only between ``activate()`` and ``deactivate()`` would otherwise never emit again."""
        super()._restart()
        if self._active:
            self._deferred.insert(0, {"command": "activate"})

    def next_tuple(self) -> None:
        """pystorm's ``next`` command: its ``next_tuple()``."""
        self._step({"command": "next"})

    def ack(self, msg_id: Any) -> None:
        """pystorm's ``ack`` command: its ``ack(tup_id)``."""
        self._step({"command": "ack", "id": msg_id})

    def fail(self, msg_id: Any) -> None:
        """pystorm's ``fail`` command: its ``fail(tup_id)`` (`ReliableSpout` replays)."""
        self._step({"command": "fail", "id": msg_id})

    def _collector(self) -> SpoutOutputCollector:
        return self.collector

    def _emit(self, msg: dict[str, Any]) -> None:
        values, stream = list(msg["tuple"]), msg.get("stream") or DEFAULT_STREAM
        task = msg.get("task")
        if task is not None:
            self.collector.emit_direct(task, values, msg.get("id"), stream)
            return
        tasks = self.collector.emit(values, msg.get("id"), stream)
        if msg.get("need_task_ids", True):
            self.wire.push(list(tasks))


class SparseBolt(_Hosted, Bolt):
    """A streamparse/pystorm bolt class run as a squall bolt (the module docstring). Each input
    gets an id pystorm's messages name it by; acks, fails and anchors find it by that id."""

    def __init__(self, component_cls: type, streams: Streams, resources: Resources | None = None) -> None:
        self.component_cls = component_cls
        self.streams = streams
        self.resources = resources

    def prepare(self, conf: dict, context: TopologyContext, collector: OutputCollector) -> None:
        """Make the instance and run its ``initialize(storm_conf, context)``."""
        self.collector = collector
        self._inputs: dict[str, Tuple] = {}
        self._ids = map(str, itertools.count(1))
        self._stop: threading.Event | None = None
        self._start(conf, context)

    def _new_instance(self) -> None:
        super()._new_instance()
        from pystorm.bolt import TicklessBatchingBolt
        if isinstance(self.obj, TicklessBatchingBolt):
            self._stop = threading.Event()
            thread = threading.Thread(target=self._batcher, args=(self.obj, self._stop), daemon=True,
                                      name=f"{type(self.obj).__name__}:_batcher-thread")
            thread.start()

    def execute(self, tup: Tuple) -> None:
        """Hand ``tup`` to the component as pystorm reads a tuple, and run its ``_run()``."""
        tid = next(self._ids)
        self._inputs[tid] = tup  # before `_step`: the component may ack it in its _run()
        self._step({"id": tid, "comp": tup.source_component, "stream": tup.source_stream,
                    "task": tup.source_task, "tuple": tup.values})

    def cleanup(self) -> None:
        """Stop a TicklessBatchingBolt's batcher."""
        if self._stop is not None:
            self._stop.set()  # not under the batch lock: a batch in progress may not end now
            self._stop = None

    def _batcher(self, obj: Any, stop: threading.Event) -> None:
        """pystorm's ``_batch_entry``: every ``secs_between_batches``, ``process_batches()``
        under the batch lock; an exception is handled as ``_run``'s, then the thread ends.
        ``stop`` is read under the lock, so once `_stop_instance` has set it this thread sends
        nothing more."""
        while not stop.wait(obj.secs_between_batches):
            with obj._batch_lock:
                if stop.is_set():
                    return
                try:
                    obj.process_batches()
                except Exception as e:  # noqa: BLE001 (pystorm's: any exception of process_batch)
                    self._raised(obj, e)
                    return

    def _raised(self, obj: Any, error: Exception) -> None:
        """As `_Hosted._raised`; for a TicklessBatchingBolt under its batch lock, and, when
        the instance is to be replaced, its batcher stopped there: else the batcher could go
        on processing, acking or emitting the batches `_handle_run_exception` just failed, or
        tuples `_restart` fails, naming ids that are no longer known (an error, and another
        restart)."""
        lock = getattr(obj, "_batch_lock", None)
        if lock is None:
            super()._raised(obj, error)
            return
        with lock:
            super()._raised(obj, error)
            if self._restart_due and obj is self.obj:
                self._stop_instance()

    def _stop_instance(self) -> None:
        """Stop a TicklessBatchingBolt's batcher, under its batch lock: not in a batch, and
        sending nothing after this."""
        stop, self._stop = self._stop, None
        if stop is not None:
            with self.obj._batch_lock:
                stop.set()

    def _fail_inputs(self) -> None:
        """Fail the tuples the old instance was given and did not ack or fail; those still
        queued to be given (`_step`'s ``_deferred``: the tuple that arrived as the restart was
        due) go to the new instance instead."""
        queued = {c.get("id") for c in self._deferred if "tuple" in c}
        held = {tid: tup for tid, tup in self._inputs.items() if tid not in queued}
        self._inputs = {tid: tup for tid, tup in self._inputs.items() if tid in queued}
        # lost, not the bolt's fail: the tuple that raised was failed by pystorm (auto_fail) and
        # charged; these only were in the instance, and a retry budget must not count them
        lost = FailureCause.lost_in(*self._task, f"{self._where} was replaced after {self._restarted_after} "
                                                 f"(exit_on_exception) before it acked or failed this tuple")
        for tup in held.values():
            fail_for(self.collector, tup, lost)

    def _collector(self) -> OutputCollector:
        return self.collector

    def _unknown(self, tid: Any, verb: str) -> SparseComponentError:
        return SparseComponentError(f"{self._where} {verb} tuple id {tid!r}, which is unknown or already "
                                    f"acked or failed")

    def _message(self, msg: dict[str, Any]) -> None:
        """What the component says: a bolt's emits, acks and fails are handled here, in one
        call each (they are most of its messages, one per tuple or more); the rest as
        `_Hosted._message` does."""
        command = msg.get("command")
        if command == "emit":
            values, stream = list(msg["tuple"]), msg.get("stream") or DEFAULT_STREAM
            inputs = self._inputs
            try:
                anchors = [inputs[a] for a in msg.get("anchors") or ()]
            except KeyError as e:
                raise self._unknown(e.args[0], "anchored onto") from None
            task = msg.get("task")
            if task is not None:
                self.collector.emit_direct(task, values, anchors, stream)
                return
            tasks = self.collector.emit(values, anchors, stream)
            if msg.get("need_task_ids", True):
                self.wire.push(list(tasks))
        elif command == "ack" or command == "fail":
            tid = msg.get("id")
            tup = self._inputs.pop(tid, None) if isinstance(tid, str) else None
            if tup is None:
                raise self._unknown(tid, f"{command}ed")
            if command == "ack":
                self._reported = None  # an error before an ack was not about the fails after it
                self.collector.ack(tup)
            else:
                said = msg.get("msg")
                fail_because(self.collector, tup, *self._task, fail_reason(
                    f"streamparse component {self.component_cls.__qualname__}", tup,
                    said if isinstance(said, str) else "", self._reported))
        else:
            _Hosted._message(self, msg)


def declared_streams(cls: type) -> Streams:
    """The streams the pystorm class ``cls`` declares with its ``outputs`` (as streamparse's
    ``Bolt.spec`` reads them): field names for the default stream, or streamparse's
    ``Stream(fields, name, direct)`` objects.

    Raises:
        TypeError: ``outputs`` is neither, naming the entry.
    """
    streams: Streams = {}
    for output in getattr(cls, "outputs", None) or ():
        if isinstance(output, str):
            streams.setdefault(DEFAULT_STREAM, ([], False))[0].append(output)
        elif hasattr(output, "fields") and hasattr(output, "name"):  # streamparse.Stream
            streams[output.name] = (list(output.fields), bool(getattr(output, "direct", False)))
        else:
            raise TypeError(f"{cls.__qualname__}.outputs holds {output!r}: expected field names or "
                            f"streamparse Streams")
    return streams


def in_process(cls: type, resources: Resources | None = None) -> SparseSpout | SparseBolt:
    """The squall spout or bolt that runs the streamparse (pystorm) class ``cls`` in process,
    declaring its ``outputs``: what a Flux ``className`` naming such a class gives, where Storm's
    Flux needed a ``FluxShellBolt`` running ``streamparse_run module.Class``. The class is not
    made here: a pystorm component made outside a worker wraps the process's stdout, and closes
    it when it is collected. ``resources``: the project's ``src/`` the class comes from, made
    importable in each worker (`importable`), as `squall sparse run` ships it.

    Raises:
        TypeError: the class could do no work, or cannot run in process, saying why.
    """
    from pystorm.spout import Spout as PystormSpout
    problem = missing_method_problem(cls) or in_process_problem(cls)
    if problem is not None:
        raise TypeError(problem)
    return (SparseSpout if issubclass(cls, PystormSpout) else SparseBolt)(cls, declared_streams(cls), resources)
