"""Logs of the process host's daemons and workers, rotated by size.

A worker's stdout and stderr (its logging, the user's prints, a traceback, whatever a C library
writes) reach its supervisor through a pipe; an `OutputPump` thread copies them into the slot's
`RotatingLog` and keeps the last few KB, which the supervisor reports as the error of a worker
that died before it could report one itself. Reading the pipe in the supervisor, rather than
the worker rotating a file of its own, covers what the worker writes before its Python code
runs (an import error, a bad configuration) and after it stops (a fatal traceback), and needs
nothing of the worker. A supervisor started by ``squall nimbus`` sends its own output through
the same kind of pipe (`log_own_output`): its parent, the master, may die, and must not hold
the supervisor's only way to write.

``squall.log.max.bytes`` (0: never rotate) and ``squall.log.backup.count`` set the size and the
number of rotated files, as Storm's log4j2 ``cluster.xml``/``worker.xml`` do (100 MB, 9 files).

What a worker logs with Python's `logging` goes to its own ``worker.log`` at Storm's place,
``<storm.log.dir>/workers-artifacts/<topology-id>/<port>/worker.log`` (`worker_log_path`),
through a ``RotatingFileHandler`` (`install_worker_logging`); every line names the component
and task whose user code was running (`TaskTagFilter`), as ``[component:task]``, and
`parse_worker_log` reads such files back as records (``squall logs``, docs/logs.md).
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple
from urllib.parse import quote

from .._config import Config, conf_value
from .._private import FILE_MODE, open_private_log
from .._redact import RedactingFilter, redact_text


def log_limits(conf: dict[str, Any]) -> tuple[int, int]:
    """``(squall.log.max.bytes, squall.log.backup.count)`` of ``conf``."""
    return int(conf_value(conf, Config.SQUALL_LOG_MAX_BYTES)), int(conf_value(conf, Config.SQUALL_LOG_BACKUP_COUNT))


class RotatingLog:
    """An append-only log file that, before it would pass ``max_bytes``, is renamed to
    ``FILE.1`` (``FILE.1`` to ``FILE.2``, ... keeping ``backups`` of them) and begun anew, as
    logging's ``RotatingFileHandler`` does. It cuts at a line end when one is in reach, so that
    a line is split across two files only when it alone is longer than ``max_bytes``. Safe to
    write from several threads (the pumps of a slot's old and new worker may overlap)."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = self._open()
        for i in range(1, backups + 1):  # rotated copies an older run left readable by others
            with contextlib.suppress(FileNotFoundError):
                os.chmod(self._backup(i), FILE_MODE)

    def _open(self) -> IO[bytes]:
        return open_private_log(self.path, buffering=0)

    def write(self, data: bytes) -> None:
        """Append ``data``, rotating as often as it takes.

        Raises:
            OSError: the file cannot be written or made again (a full disk, no inodes): the data
                is lost, and the next write tries the file again.
        """
        with self._lock:
            while data:
                if self._file is None:  # it could not be made again at the last rotation
                    self._file = self._open()
                file = self._file
                if self.max_bytes <= 0:
                    file.write(data)
                    return
                room = self.max_bytes - file.tell()
                if len(data) <= room:
                    file.write(data)
                    return
                cut = data.rfind(b"\n", 0, room) + 1 if room > 0 else 0
                if cut == 0 and file.tell() == 0:
                    cut = room  # one line longer than a whole file: split it
                file.write(data[:cut])
                data = data[cut:]
                self._rotate()

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None  # until made again: a write then tries (an admin deleted it, a full disk)
        if self.backups > 0:
            for i in range(self.backups - 1, 0, -1):
                older = self._backup(i)
                if older.exists():
                    os.replace(older, self._backup(i + 1))
            with contextlib.suppress(FileNotFoundError):  # deleted under us: nothing to keep
                os.replace(self.path, self._backup(1))
        else:
            self.path.unlink(missing_ok=True)
        self._file = self._open()

    def _backup(self, i: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{i}")

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if self._file is not None:
                self._file.close()


class OutputPump:
    """Copies a pipe (a child's stdout and stderr) into a `RotatingLog` on a daemon thread
    until the pipe ends, keeping its last ``keep`` bytes for `tail`.

    Credentials are masked line by line as they are copied (`squall._redact.redact_text`: a
    URL's password, ``password=...``), as the logging of every squall process masks its records:
    a worker's prints and tracebacks reach this file raw, and a component that printed the URL
    it connects to left the password in the supervisor's ``worker-<port>.log``. A line is masked
    once whole (a URL cut between two reads would pass half by half), so the start of a line
    waits here for its end, up to `HELD_BYTES`."""

    HELD_BYTES = 65536

    def __init__(self, pipe: IO[bytes], log: RotatingLog, keep: int = 4096) -> None:
        self._pipe = pipe
        self._log = log
        self._keep = keep
        self._tail = b""
        self._held = b""  # the start of a line whose end has not come yet
        self.lost = 0  # bytes the log could not take (kept in `tail` all the same)
        self._thread = threading.Thread(target=self._run, name="squall-log-pump", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = self._pipe.fileno()
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    if self._held:
                        self._copy(self._held)
                        self._held = b""
                    return
                data = self._held + chunk
                end = data.rfind(b"\n") + 1 or (len(data) if len(data) >= self.HELD_BYTES else 0)
                self._held = data[end:]
                if end:
                    self._copy(data[:end])
        finally:
            self._pipe.close()

    def _copy(self, data: bytes) -> None:
        data = _masked(data)
        self._tail = (self._tail + data)[-self._keep:]
        try:
            self._log.write(data)
        except Exception:  # noqa: BLE001 (a full disk, a deleted file: the child must not block on a full pipe, or die on a closed one)
            self.lost += len(data)

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the pipe to end; True if it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines copied so far (with a line not ended yet, masked)."""
        text = (self._tail + _masked(self._held)).decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])


def _masked(data: bytes) -> bytes:
    """``data`` with its credentials masked (`redact_text`); bytes that are not UTF-8 kept as they are."""
    text = data.decode("utf-8", "surrogateescape")
    masked = redact_text(text)
    return data if masked == text else masked.encode("utf-8", "surrogateescape")


def log_own_output(path: Path, conf: dict[str, Any]) -> Callable[[], None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2: logging, prints,
    tracebacks) through a pipe into a `RotatingLog` at ``path``. Returns a function that ends
    it, once everything written so far is in the file."""
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(write, 1)
    os.dup2(write, 2)
    os.close(write)
    pump = OutputPump(os.fdopen(read, "rb", buffering=0), RotatingLog(path, *log_limits(conf)))

    def finish() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)  # the pipe's last writer gone, the pump reads to its end and stops
        os.dup2(null, 2)
        os.close(null)
        pump.join(5)
    return finish


# --- the workers' own logs, at Storm's place -------------------------------------------------------------

WORKER_LOG = "worker.log"
SYSTEM_COMPONENT = "__system"  # Storm's name for a worker's own (not a task's) work, task -1
# Storm's worker.xml pattern (``%d{yyyy-MM-dd HH:mm:ss.SSS} %c{1.} %t [%p] %msg%n``) with the task
WORKER_LOG_FORMAT = "%(asctime)s.%(msecs)03d %(name)s %(threadName)s [%(levelname)s] [%(component)s:%(task)s] %(message)s"
WORKER_LOG_DATEFMT = "%Y-%m-%d %H:%M:%S"
_HANDLER_MARK = "_squall_worker_log"


def log_root(conf: dict[str, Any]) -> Path:
    """``storm.log.dir``: set, or ``<storm.local.dir>/logs`` (Storm's is ``${storm.home}/logs``)."""
    return Path(conf.get(Config.STORM_LOG_DIR) or Path(conf_value(conf, Config.STORM_LOCAL_DIR)) / "logs")


def artifacts_root(conf: dict[str, Any]) -> Path:
    """``storm.workers.artifacts.dir`` (relative: under `log_root`): the logviewer's root, one
    directory per topology id, one below it per worker port."""
    return log_root(conf) / (conf_value(conf, Config.STORM_WORKERS_ARTIFACTS_DIR))


def worker_log_path(conf: dict[str, Any], topology_id: str, port: int) -> Path:
    """``<artifacts root>/<topology-id>/<port>/worker.log``."""
    return artifacts_root(conf) / topology_id / str(int(port)) / WORKER_LOG


def worker_log_file(topology_id: str, port: int) -> str:
    """A worker log's name relative to the artifacts root, as the logviewer's ``file=`` takes it."""
    return f"{topology_id}/{int(port)}/{WORKER_LOG}"


def worker_log_link(topology_id: str, worker_port: int) -> str:
    """The logviewer's link to a worker's log on the UI daemon that serves the pages (the UI's
    ``workerLogLink``/``errorWorkerLogLink``): ``/api/v1/log?file=<topology-id>%2F<port>%2Fworker.log``.
    The daemon serves its own machine's artifacts directory (docs/logs.md)."""
    return f"/api/v1/log?file={quote(worker_log_file(topology_id, worker_port), safe='')}"


class TaskTagFilter(logging.Filter):
    """Sets ``component`` and ``task`` on every record: the executor whose user code the
    logging thread is running, else `SYSTEM_COMPONENT` and -1.

    Nothing is set per tuple: an executor loop already keeps the executor it is calling in
    ``current`` (and each executor the task in ``current_task``), and its thread carries the
    loop as ``squall_loop``; this reads them only when a line is logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        loop = getattr(threading.current_thread(), "squall_loop", None)
        ex = loop.current if loop is not None else None
        if ex is None:
            record.component, record.task = SYSTEM_COMPONENT, -1
        else:
            record.component, record.task = ex.component, ex.current_task
        return True


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Logging's rotating file, each file owner-only: the first and every one a rollover opens
    (logging's own would open those with the umask's mode, readable by others)."""

    def _open(self) -> Any:
        open_private_log(self.baseFilename).close()  # made owner-only (its directories too) before it is opened
        return super()._open()


def worker_log_handler(path: Path, conf: dict[str, Any]) -> logging.Handler:
    """A ``RotatingFileHandler`` on ``path`` (``squall.log.max.bytes``/``squall.log.backup.count``),
    owner-only, in `WORKER_LOG_FORMAT` with `TaskTagFilter`; text UTF-8 cannot encode is
    backslash-escaped."""
    max_bytes, backups = log_limits(conf)
    # backslashreplace: a str that cannot be UTF-8 (a lone surrogate, from bytes decoded with
    # surrogateescape: a file name, an environment value) is written escaped, not lost
    handler = _PrivateRotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8",
                                          errors="backslashreplace")
    handler.setFormatter(logging.Formatter(WORKER_LOG_FORMAT, WORKER_LOG_DATEFMT))
    handler.addFilter(TaskTagFilter())
    handler.addFilter(RedactingFilter())
    setattr(handler, _HANDLER_MARK, True)
    return handler


class OneWorkerFilter(logging.Filter):
    """Passes the records logged by one in-process worker's threads: its own (``thread``) and
    its executor loops' (``agent.worker.loops``), so a LocalCluster worker's file gets its lines
    only, though every worker shares the process's loggers."""

    def __init__(self, agent: Any, thread: threading.Thread) -> None:
        super().__init__()
        self._agent = agent
        self._thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        t = threading.current_thread()
        if t is self._thread:
            return True
        loop = getattr(t, "squall_loop", None)
        worker = self._agent.worker
        return loop is not None and worker is not None and loop in worker.loops

# --- squall's own warnings, whatever user code does to logging ------------------------------------------

_GUARDED: list[logging.Handler] = []  # the worker's own handlers (worker.log, stderr) squall's warnings always reach


def _is_squall(name: str) -> bool:
    return name == "squall" or name.startswith("squall.")


def _set_by_set_log_level(logger: logging.Logger) -> bool:
    """Whether the level ``logger`` logs at comes from ``set_log_level``: the nearest logger up from
    it with a level of its own (the root at last) is one a worker holds for the topology."""
    from ..worker.log_levels import PROCESS_LOGGERS, ROOT
    c: logging.Logger | None = logger
    while c is not None:
        if c.level:
            return PROCESS_LOGGERS.holds(ROOT if c is logging.root else c.name)
        c = c.parent
    return False


class _SquallLogger(logging.Logger):
    """squall's own loggers (``squall``, ``squall.*``) in a worker process, once
    `install_worker_logging` ran: their warnings and errors (a component that raised, a crash,
    a stuck executor, a master out of reach) reach the worker's ``worker.log`` and stderr whatever
    the topology's code did to `logging`, as Storm's worker log is the cluster's to configure:
    ``logging.config.dictConfig``/``fileConfig`` (whose ``disable_existing_loggers``, true by
    default, disables every logger made before), ``logging.disable``, a root logger at CRITICAL,
    the root's handlers removed or replaced (``basicConfig(force=True)``). Only a level set by
    ``squall set_log_level`` (the operator's) holds them back. Below WARNING they follow the
    configuration as any logger does."""

    @property  # type: ignore[override]
    def disabled(self) -> bool:
        return False if _GUARDED else bool(self.__dict__.get("_set_disabled", False))

    @disabled.setter
    def disabled(self, value: bool) -> None:  # dictConfig's disable_existing_loggers sets it: kept, not obeyed
        self.__dict__["_set_disabled"] = value

    def isEnabledFor(self, level: int) -> bool:
        if level < logging.WARNING or not _GUARDED or _set_by_set_log_level(self):
            return super().isEnabledFor(level)
        return True

    def callHandlers(self, record: logging.LogRecord) -> None:
        if not _GUARDED:
            super().callHandlers(record)
            return
        seen: set[logging.Handler] = set()
        c: logging.Logger | None = self
        while c is not None:
            for h in c.handlers:
                seen.add(h)
                if record.levelno >= h.level:
                    h.handle(record)
            if not c.propagate:
                break
            c = c.parent
        if record.levelno >= logging.WARNING:  # the worker's own handlers, if the chain no longer has them
            for h in _GUARDED:
                if h not in seen and record.levelno >= h.level:
                    h.handle(record)


def _guard_squall_loggers(handlers: list[logging.Handler]) -> None:
    """Make squall's loggers, those made so far and those made later (a module imported lazily),
    `_SquallLogger`s writing their warnings to ``handlers`` at least."""
    _GUARDED[:] = handlers
    manager = logging.Logger.manager
    with _logging_lock():
        for name, lg in list(manager.loggerDict.items()):
            if _is_squall(name) and type(lg) is logging.Logger:
                lg.__class__ = _SquallLogger
        if not getattr(manager.loggerClass, "_squall_guard", False):
            def make(name: str) -> logging.Logger:
                return _SquallLogger(name) if _is_squall(name) else logging.getLoggerClass()(name)
            make._squall_guard = True  # type: ignore[attr-defined]
            manager.loggerClass = make  # type: ignore[assignment]


@contextlib.contextmanager
def _logging_lock() -> Iterator[None]:
    lock = getattr(logging, "_lock", None)  # logging's module lock, which getLogger takes
    if lock is None:
        yield
        return
    with lock:
        yield


def stderr_format(slot: str) -> str:
    """The format of the lines a worker on ``slot`` logs to stderr (its errors), which its host
    keeps and gives with its exit: ``2026-12-07 17:12:17,125 worker 127.0.0.1:6700 ERROR ...``."""
    return f"%(asctime)s worker {slot} %(levelname)s %(message)s"


# The first line of a record logged in `stderr_format`: logging's default asctime, the slot, a level
_STDERR_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} worker \S+ [A-Z]+ ")


def is_logged_record(line: str) -> bool:
    """Whether ``line`` (of a worker's stderr) is the first line of a record the worker logged
    (`stderr_format`), not something printed or a native crash's report."""
    return _STDERR_RECORD.match(line) is not None


def install_worker_logging(conf: dict[str, Any], topology_id: str, slot: str) -> Path:
    """Send this process's `logging` to the worker's ``worker.log`` (INFO and up), and its
    errors also to stderr, which the supervisor (or Spark) keeps: the last lines of a worker
    that dies go with its exit. Replaces what an earlier call installed (a reused Spark Python
    worker runs several) and a plain stderr handler (``basicConfig``'s, for errors before the
    configuration was read). squall's own warnings and errors reach both whatever the topology's
    code later does to `logging` (`_SquallLogger`). Returns the log's path."""
    port = int(slot.rsplit(":", 1)[1])
    path = worker_log_path(conf, topology_id, port)
    root = logging.getLogger()
    for h in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False) or type(h) is logging.StreamHandler]:
        root.removeHandler(h)
        h.close()
    err = logging.StreamHandler(sys.stderr)
    try:
        root.addHandler(worker_log_handler(path, conf))
        err.setLevel(logging.ERROR)
    except OSError as e:  # an unwritable storm.log.dir must not stop the worker: all goes to stderr
        print(f"worker {slot}: cannot write its log {path} ({e.strerror or e}); check storm.log.dir; "
              f"logging to stderr", file=sys.stderr, flush=True)
    err.setFormatter(logging.Formatter(stderr_format(slot)))
    err.addFilter(RedactingFilter())
    setattr(err, _HANDLER_MARK, True)
    root.addHandler(err)
    root.setLevel(logging.INFO)
    _guard_squall_loggers([h for h in root.handlers if getattr(h, _HANDLER_MARK, False)])
    return path


# --- reading them back -----------------------------------------------------------------------------------

_RECORD_START = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \S+ .*? \[[A-Z]+\] \[(?P<component>[^\]]*):(?P<task>-?\d+)\] ")


class LogRecordText(NamedTuple):
    """One record of a worker log: its first line's component and task (None for lines before
    the first record, say a file that begins mid-record after rotation) and its text, a
    traceback's lines included."""

    component: str | None
    task: int | None
    text: str


def parse_worker_log(lines: Iterable[str]) -> Iterator[LogRecordText]:
    """The records of a worker log's lines: a line in `WORKER_LOG_FORMAT` begins one, any other
    (a traceback, a multi-line message) continues the one before."""
    component: str | None = None
    task: int | None = None
    text: list[str] = []
    for line in lines:
        m = _RECORD_START.match(line)
        if m:
            if text:
                yield LogRecordText(component, task, "".join(text))
            component, task, text = m["component"], int(m["task"]), [line]
        else:
            text.append(line)
    if text:
        yield LogRecordText(component, task, "".join(text))


def worker_log_files(conf: dict[str, Any], topology_id: str) -> dict[int, list[Path]]:
    """port -> a topology's worker logs on this machine, oldest first (``worker.log.N`` ...
    ``worker.log.1``, ``worker.log``)."""
    out: dict[int, list[Path]] = {}
    top = artifacts_root(conf) / topology_id
    if not top.is_dir():
        return out
    for d in sorted(top.iterdir()):
        if not (d.name.isdigit() and d.is_dir()):
            continue
        rotated = sorted((p for p in d.glob(f"{WORKER_LOG}.*") if p.suffix[1:].isdigit()),
                         key=lambda p: -int(p.suffix[1:]))
        current = d / WORKER_LOG
        files = rotated + ([current] if current.exists() else [])
        if files:
            out[int(d.name)] = files
    return out


def tail_records(files: list[Path], lines: int, component: str | None = None) -> list[str]:
    """The last ``lines`` lines of ``files`` (read in order as one log), of ``component``'s
    records only if given (a record's continuation lines count with it)."""
    out: list[str] = []
    for rec in parse_worker_log(_lines_of(files)):
        if component is None or rec.component == component:
            out.extend(rec.text.splitlines())
            if len(out) > 4 * lines:
                del out[:-lines]
    return out[-lines:] if lines > 0 else []


def _lines_of(files: list[Path]) -> Iterator[str]:
    for p in files:
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                yield from f
        except FileNotFoundError:  # rotated away while reading
            continue
