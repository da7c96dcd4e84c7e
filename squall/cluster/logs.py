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
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .._private import FILE_MODE, open_private_log


def log_limits(conf: dict[str, Any]) -> tuple[int, int]:
    """``(squall.log.max.bytes, squall.log.backup.count)`` of ``conf``."""
    return int(conf.get("squall.log.max.bytes") or 0), int(conf.get("squall.log.backup.count") or 0)


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
        self._file = self._open()
        for i in range(1, backups + 1):  # rotated copies an older run left readable by others
            with contextlib.suppress(FileNotFoundError):
                os.chmod(self._backup(i), FILE_MODE)

    def _open(self) -> IO[bytes]:
        return open_private_log(self.path, buffering=0)

    def write(self, data: bytes) -> None:
        """Append ``data``, rotating as often as it takes."""
        with self._lock:
            while data:
                if self.max_bytes <= 0:
                    self._file.write(data)
                    return
                room = self.max_bytes - self._file.tell()
                if len(data) <= room:
                    self._file.write(data)
                    return
                cut = data.rfind(b"\n", 0, room) + 1 if room > 0 else 0
                if cut == 0 and self._file.tell() == 0:
                    cut = room  # one line longer than a whole file: split it
                self._file.write(data[:cut])
                data = data[cut:]
                self._rotate()

    def _rotate(self) -> None:
        self._file.close()
        if self.backups > 0:
            for i in range(self.backups - 1, 0, -1):
                older = self._backup(i)
                if older.exists():
                    os.replace(older, self._backup(i + 1))
            os.replace(self.path, self._backup(1))
        else:
            self.path.unlink(missing_ok=True)
        self._file = self._open()

    def _backup(self, i: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{i}")

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._file.close()


class OutputPump:
    """Copies a pipe (a child's stdout and stderr) into a `RotatingLog` on a daemon thread
    until the pipe ends, keeping its last ``keep`` bytes for `tail`."""

    def __init__(self, pipe: IO[bytes], log: RotatingLog, keep: int = 4096) -> None:
        self._pipe = pipe
        self._log = log
        self._keep = keep
        self._tail = b""
        self._thread = threading.Thread(target=self._run, name="squall-log-pump", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = self._pipe.fileno()
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                self._tail = (self._tail + chunk)[-self._keep:]
                try:
                    self._log.write(chunk)
                except OSError:
                    pass  # a full disk must not block the child on a full pipe: keep draining
        finally:
            self._pipe.close()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the pipe to end; True if it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines copied so far."""
        return "\n".join(self._tail.decode("utf-8", "replace").splitlines()[-lines:])


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
