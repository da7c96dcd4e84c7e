"""Shared state for the test helpers, so that they survive being copied.

squall copies components per task (it pickles them), so a `FeederSpout` fed by a test, or a
tracker a test holds, would otherwise be a different object in each task. Helpers keep their
state in small handles (`SharedLog`, `SharedCounter`, `SharedQueue`, `SharedFlag`) that pickle
as an id, as Storm's testing classes do with their static maps.

By default the state lives in this process's memory: copies in the same process (every task of
a `LocalCluster`) share it. Handles made inside ``with shared_state_dir(path):`` keep it in
files under ``path`` instead and carry the path when pickled, so copies in other processes (the
workers of the process host or of Spark, on this machine or on a shared file system) share it
too. Each file is written by appends and renames only, so concurrent writers need no lock.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle

from .._private import private_dir

_lock = threading.RLock()
_memory: dict[str, Any] = {}
_directory: list[str | None] = [None]  # where new handles keep their state; None: in memory
_sequence = itertools.count()
_LENGTH = struct.Struct(">I")


@contextlib.contextmanager
def shared_state_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Within this block, test helpers made (`FeederSpout`, the trackers, `complete_topology`'s
    spouts and capture bolt) keep their state in files under ``path``, so that they also work
    when the topology's workers are other processes. ``path`` must be reachable from the
    workers (a local directory for the process host or Spark in local mode), owned by this
    user and writable by it alone: what is read back from it is unpickled.

    Raises:
        ValueError: ``path`` is another user's, or others may write in it.
    """
    directory = private_dir(path)  # what is read back is unpickled: only its owner may write there
    st = directory.stat()
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o022:
        raise ValueError(f"squall.testing.shared_state_dir: {directory} must be owned by this user and writable "
                         f"by it alone (what is read from it is unpickled)")
    before = _directory[0]
    _directory[0] = str(directory)
    try:
        yield directory
    finally:
        _directory[0] = before


class _Shared:
    """One piece of shared state: its id, and the directory of its files (None: in memory)."""

    def __init__(self) -> None:
        self.key = uuid.uuid4().hex
        self.directory = _directory[0]
        if self.directory is None:
            with _lock:
                _memory[self.key] = self._new()
        else:
            self._create()

    def _new(self) -> Any:
        raise NotImplementedError

    def _create(self) -> None:
        self._path().touch()

    def _path(self, suffix: str = "") -> Path:
        return Path(self.directory) / f"{self.key}.{type(self).__name__}{suffix}"  # type: ignore[arg-type]

    def _mem(self) -> Any:
        try:
            return _memory[self.key]
        except KeyError:
            raise LookupError(f"squall.testing: no shared state {self.key!r} in this process (a test helper "
                              f"made outside squall.testing.shared_state_dir only works in the process that "
                              f"made it)") from None

    def discard(self) -> None:
        """Forget this state (its memory, or its files): nothing reads it again."""
        if self.directory is None:
            with _lock:
                _memory.pop(self.key, None)
            return
        for suffix in ("", ".taken"):
            path = self._path(suffix)
            if path.is_dir():
                for child in path.iterdir():
                    child.unlink(missing_ok=True)
                path.rmdir()
            else:
                path.unlink(missing_ok=True)

    def __getstate__(self) -> dict[str, Any]:
        return {"key": self.key, "directory": self.directory}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class SharedLog(_Shared):
    """An append-only list of values."""

    def _new(self) -> _IndexedList:
        return _IndexedList()

    def append(self, value: Any) -> None:
        """Add ``value`` at the end (in a directory: pickled, in one write, so that appends from
        several processes do not interleave)."""
        if self.directory is None:
            with _lock:
                self._mem().append(value)
            return
        data = cloudpickle.dumps(value)
        fd = os.open(self._path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, _LENGTH.pack(len(data)) + data)
        finally:
            os.close(fd)

    def items(self) -> list[Any]:
        """The values so far, in the order they were appended."""
        if self.directory is None:
            with _lock:
                return list(self._mem())
        return _decode_log(self._path().read_bytes())


    def contains(self, value: Any) -> bool:
        """Whether ``value`` was appended: in memory, a set lookup (an index of the values kept up
        as they come), not a scan of a copy, so a test may ask it of each of 100,000 ids."""
        if self.directory is None:
            with _lock:
                return self._mem().contains(value)
        return value in self.items()

    def take_all(self) -> list[Any]:
        """The values so far, and the log emptied of them. In memory, an append racing with
        this lands either in what is returned or in the log afterwards; in a directory, call it
        when no one appends (an append already under way to the file taken may be lost)."""
        if self.directory is None:
            with _lock:
                log = self._mem()
                out = list(log)
                log.clear()
                return out
        taken = self._path(f".{uuid.uuid4().hex}.taking")
        try:
            os.rename(self._path(), taken)
        except FileNotFoundError:
            return []
        self._create()
        raw = taken.read_bytes()
        taken.unlink(missing_ok=True)
        return _decode_log(raw)


class _IndexedList(list):
    """A `SharedLog`'s values in memory, with a set of those that hash, brought up to date by
    `contains` (and a list of those that do not: a msg id may be a list)."""

    def __init__(self) -> None:
        super().__init__()
        self._indexed = 0
        self._hashed: set[Any] = set()
        self._unhashable: list[Any] = []

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one of the values (called under the registry's lock)."""
        for v in self[self._indexed:]:
            try:
                self._hashed.add(v)
            except TypeError:
                self._unhashable.append(v)
        self._indexed = len(self)
        try:
            return value in self._hashed
        except TypeError:
            return value in self._unhashable

    def clear(self) -> None:
        super().clear()
        self._indexed = 0
        self._hashed.clear()
        self._unhashable.clear()


def _decode_log(raw: bytes) -> list[Any]:
    """The values of a `SharedLog`'s file, in order (an append still being written left out)."""
    out, at = [], 0
    while at + _LENGTH.size <= len(raw):
        (n,) = _LENGTH.unpack_from(raw, at)
        if at + _LENGTH.size + n > len(raw):
            break  # an append still being written
        out.append(cloudpickle.loads(raw[at + _LENGTH.size:at + _LENGTH.size + n]))
        at += _LENGTH.size + n
    return out


class SharedCounter(_Shared):
    """A counter that only goes up, or back to 0."""

    def _new(self) -> list[int]:
        return [0]

    def incr(self, n: int = 1) -> None:
        """Add ``n`` (>= 0); in a directory, one byte per unit appended to its file."""
        if self.directory is None:
            with _lock:
                self._mem()[0] += n
            return
        fd = os.open(self._path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, b"." * n)
        finally:
            os.close(fd)

    @property
    def value(self) -> int:
        """The count."""
        if self.directory is None:
            return self._mem()[0]
        return self._path().stat().st_size

    def reset(self) -> None:
        """Back to 0."""
        if self.directory is None:
            with _lock:
                self._mem()[0] = 0
        else:
            os.truncate(self._path(), 0)


class SharedQueue(_Shared):
    """A first-in first-out queue; each item is taken by exactly one taker."""

    def _new(self) -> deque:
        return deque()

    def _create(self) -> None:
        self._path().mkdir()
        self._path(".taken").mkdir()

    def put(self, item: Any) -> None:
        """Add ``item`` at the end (in a directory: a file whose name orders it after the items
        this process put before, moved in whole so that no taker sees it half written)."""
        if self.directory is None:
            with _lock:
                self._mem().append(item)
            return
        name = f"{time.time_ns():020d}-{next(_sequence):010d}-{os.getpid()}"
        tmp = self._path(".taken") / f"new-{name}"
        tmp.write_bytes(cloudpickle.dumps(item))
        os.rename(tmp, self._path() / name)

    def take(self) -> Any:
        """Remove and return the first item.

        Raises:
            IndexError: the queue is empty.
        """
        if self.directory is None:
            with _lock:
                return self._mem().popleft()
        queue, taken = self._path(), self._path(".taken")
        for name in sorted(os.listdir(queue)):
            try:
                os.rename(queue / name, taken / name)  # only one taker's rename succeeds
            except FileNotFoundError:
                continue
            data = (taken / name).read_bytes()
            (taken / name).unlink()
            return cloudpickle.loads(data)
        raise IndexError("take from an empty queue")


class SharedFlag(_Shared):
    """A flag a helper may wait on (a `threading.Event` shared by every copy)."""

    def _new(self) -> threading.Event:
        return threading.Event()

    def _create(self) -> None:
        pass  # no file: clear

    def set(self) -> None:
        """Raise the flag."""
        if self.directory is None:
            self._mem().set()
        else:
            self._path().touch()

    def clear(self) -> None:
        """Lower the flag."""
        if self.directory is None:
            self._mem().clear()
        else:
            self._path().unlink(missing_ok=True)

    def is_set(self) -> bool:
        """Whether the flag is raised."""
        if self.directory is None:
            return self._mem().is_set()
        return self._path().exists()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the flag; whether it is raised."""
        if self.directory is None:
            return self._mem().wait(timeout)
        deadline = time.monotonic() + timeout
        while not self.is_set():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True
