"""Lock files for `FileSpout`'s claiming mode: storm-hdfs's ``HdfsSpout`` file locks, on a local or
shared directory.

A task claims a file by creating ``<locks>/<file name>`` with ``O_CREAT | O_EXCL`` (exactly one task
of all the processes sharing the directory succeeds) and keeps its lease by appending a line to
it (HdfsSpout's heartbeat: ``<epoch ms>,<owner>,<event>,<committed offset>``). A lock whose
inode, size and mtime a task has seen unchanged for ``timeout`` seconds of its *own* clock is
abandoned: its owner died, or stalled that long. Judging by what one task saw change, never by
comparing the lock's mtime with this machine's time, is HdfsSpout's ``clocksInSync = false``
rule, so the machines sharing the directory need no common clock.

Taking over an abandoned lock renames it away and creates a fresh one. Two tasks may judge the
same lock abandoned at once, so a take-over runs under ``<locks>/.dirlock`` (``flock``, released by
the kernel if its holder dies, unlike HdfsSpout's ``DIRLOCK`` file) and checks again, holding it,
that the lock is still the one it watched; a claim by creation needs no such lock, since it
cannot replace a lock that exists. An owner that stalled past the timeout finds at its next
heartbeat that the lock at its path is no longer its own, and gives the file up. A release
(the check that the lock is still its own, then its removal) runs under ``.dirlock`` too, so it
never removes a lock another task has just taken over.

A lock whose owner is known to be dead is taken over at once, without waiting for the timeout:
its owner is an earlier run of this very task (a task runs once at a time, so a restarted task,
in a new worker or in the same one as `LocalCluster` restarts them, replaces it; the run ids
start with their start time, so of two runs only the later one takes over), or it ran on this
host (by name) in a process that is gone. The owner is ``<task>@<host>:<pid>:<run>``, in each
line of its lock. Should the earlier run live on after all (a worker cut off rather than
dead), it finds its lock taken at its next heartbeat and gives the file up, as a stalled owner
does.

A lock counts as unchanged only over time this task was watching: when its own scans were further
apart than half the timeout (the topology was deactivated, held back, or the machine paused), what
it watched starts again. Its owner was most likely paused by the same cause, and beats at its
first call after it.

On a directory shared over NFS, keep ``timeout`` well above the attribute cache's lifetime
(``acregmax``, 60 s by default), so that a watcher's cached stamp is not taken for an owner's
silence; whether a lock is still a task's own is decided by its first line, which names the task's
run, not only by the inode number, which an NFS server may reuse.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from .._private import Kept, private_dir, write_failure
from ..engine.clock import Clock

DIRLOCK = ".dirlock"
_GRAVE = ".taken-"  # a taken-over lock, renamed away before it is removed
# flock excludes other open files of the same process too, but on NFS it is emulated with POSIX
# locks, which do not; tasks of one worker then exclude each other with this
_PROCESS_LOCK = threading.Lock()


class LockStamp(NamedTuple):
    """What a lock file looked like: any change means its owner is alive."""

    ino: int
    size: int
    mtime_ns: int


class Watched(NamedTuple):
    """A lock of another task, and since when (this task's clock) it has looked the same; and
    why its owner is known to be dead (None: it is not)."""

    stamp: LockStamp
    since: float
    dead: str | None


class Owner(NamedTuple):
    """Who holds a lock, as its lines say: ``<task>@<host>:<pid>:<run>``; a run id is
    ``<start, epoch ms>-<random>``."""

    task: str
    host: str
    pid: int
    run: str

    def __str__(self) -> str:
        return f"{self.task}@{self.host}:{self.pid}:{self.run}"

    @property
    def started(self) -> int | None:
        """When the run started (epoch ms, by its machine's clock); None if its id does not say."""
        start = self.run.split("-", 1)[0]
        return int(start) if start.isdigit() else None

    @classmethod
    def parse(cls, line: bytes) -> Owner | None:
        """The owner named in a lock's line ``<ms>,<owner>,<event>,<offset>``; None if the line is
        not one (a lock's contents are only trusted to say who to wait for)."""
        try:
            owner = line.decode("utf-8").split(",", 1)[1].rsplit(",", 2)[0]
            task, where = owner.rsplit("@", 1)
            host, pid, run = where.rsplit(":", 2)
            return cls(task, host, int(pid), run)
        except (UnicodeDecodeError, IndexError, ValueError):
            return None


def why_dead(owner: Owner, me: Owner) -> str | None:
    """Why ``owner`` is known to be gone, seen from task ``me``: it is an earlier run of the same
    task, or it ran on this host in a process that no longer exists; None if that is not known
    (the timeout decides)."""
    theirs, mine = owner.started, me.started
    if owner.task == me.task and theirs is not None and mine is not None and theirs < mine:
        return "its owner was an earlier run of this task"
    if owner.host != me.host or owner.pid == me.pid or owner.pid <= 0:  # 0, -n: process groups
        return None
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return "its owner's process is gone"
    except PermissionError:
        return None  # another user's process: alive
    except OverflowError:
        return None  # past any pid (garbage, another tool's line): not known dead, the timeout decides
    return None


class FileLocks:
    """The lock files of one spout (``directory``, shared by all its tasks): the ones this task
    holds, and the others it watches for abandonment.

    Args:
        directory: the lock directory, made owner-only if missing.
        task: which task this is (``<spout>[<index>]``), written into its locks with this host,
            process and a new run id as its `Owner`.
        timeout: seconds a lock must look unchanged before it counts as abandoned; a holder
            appends a heartbeat every quarter of it.
        clock: this task's clock (`Clock.now` for leases, `Clock.wall` for the lines' time).
        kept: what a lock is, with the setting that places ``directory``, for the `DiskWriteError`
            a failed write of a lock raises.
    """

    def __init__(self, directory: str | os.PathLike, task: str, timeout: float, clock: Clock,
                 kept: Kept | None = None) -> None:
        self.kept = kept or Kept(f"a file lock of {task}", "the spout's progress_dir")
        try:
            self.directory = private_dir(directory)
        except OSError as e:
            raise write_failure(e, Path(directory), self.kept, atomic=False) from e
        run = f"{int(clock.wall() * 1000)}-{uuid.uuid4().hex[:8]}"
        self.owner = Owner(task, socket.gethostname(), os.getpid(), run)
        self.timeout = timeout
        self.clock = clock
        self._held: dict[str, int] = {}  # file name -> the lock's open descriptor
        self._firsts: dict[str, bytes] = {}  # file name -> the first line this task wrote to its lock
        self._beaten: dict[str, float] = {}
        self._watched: dict[str, Watched] = {}
        self._scanned: float | None = None

    def claim(self, name: str, offset: int = 0) -> bool:
        """Creates the lock of file ``name``; False if another task holds it (or held it and has
        not released it)."""
        try:
            fd = os.open(self.directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND,
                         0o600)
        except FileExistsError:
            return False
        except OSError as e:
            raise write_failure(e, self.directory / name, self.kept, atomic=False) from e
        self._held[name] = fd
        try:
            self._firsts[name] = self._write(name, "claimed", offset)
        except OSError:
            os.unlink(self.directory / name)  # a lock without its claim line could never be known as ours
            self._forget(name)
            raise
        return True

    def holds(self, name: str) -> bool:
        """Whether the lock at ``name``'s path is still the one this task created (the same inode,
        starting with this task's claim line); False also if it cannot be read."""
        fd = self._held.get(name)
        if fd is None:
            return False
        first = self._firsts[name]
        try:
            at_path = os.open(self.directory / name, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return False  # gone, replaced by a symlink, or a stale NFS handle: not ours to keep
        try:
            return os.fstat(at_path).st_ino == os.fstat(fd).st_ino and os.pread(at_path, len(first), 0) == first
        except OSError:
            return False
        finally:
            os.close(at_path)

    def due(self, name: str) -> bool:
        """Whether the lease of a held file wants a heartbeat (every quarter of the timeout)."""
        return self.clock.now() - self._beaten.get(name, 0.0) >= self.timeout / 4

    def beat(self, name: str, offset: int) -> bool:
        """Renews the lease of ``name`` with its committed offset; False, and the lock forgotten,
        if another task took it over meanwhile."""
        if not self.holds(name):
            self._forget(name)
            return False
        self._write(name, "heartbeat", offset)
        return True

    def release(self, name: str) -> None:
        """Removes the lock of ``name`` if it is still this task's, and forgets it."""
        if name in self._held:
            self.finish(name, lambda: None)

    def finish(self, name: str, done: Callable[[], None]) -> bool:
        """Runs ``done`` (the file's rename to done) and removes the lock, if the lock is still
        this task's, under ``.dirlock`` so no take-over comes between; returns whether it ran.
        The lock is forgotten either way."""
        try:
            with self._dirlock(wait=True):
                if not self.holds(name):
                    return False
                done()
                os.unlink(self.directory / name)
                return True
        finally:
            self._forget(name)

    def release_all(self) -> None:
        """Releases every lock this task holds (on close: other tasks may claim the files at once)."""
        for name in list(self._held):
            self.release(name)

    def abandoned(self) -> list[str]:
        """Looks at every other task's lock; returns, in name order, those whose owner is known to
        be dead and those this task has seen unchanged for the timeout."""
        now = self.clock.now()
        if self._scanned is not None and now - self._scanned > self.timeout / 2:
            self._watched = {}  # this task was not watching meanwhile: neither, maybe, were the owners
        self._scanned = now
        seen: dict[str, Watched] = {}
        out = []
        for entry in os.scandir(self.directory):
            if entry.name.startswith(".") or entry.name in self._held:
                continue
            stamp = _stamp(self.directory / entry.name)
            if stamp is None:
                continue
            was = self._watched.get(entry.name)
            if was is None or was.stamp != stamp:
                was = Watched(stamp, now, self._why_dead(entry.name))
            seen[entry.name] = was
            if was.dead is not None or now - was.since >= self.timeout:
                out.append(entry.name)
        self._watched = seen
        return sorted(out)

    def take_over(self, name: str, offset: int = 0) -> bool:
        """Claims the abandoned lock of ``name`` (one `abandoned` returned); False if another task
        is taking over locks now, or the lock changed or went since it was watched."""
        return self._replace(name, claim=True, offset=offset)

    def remove_abandoned(self, name: str) -> bool:
        """Removes the abandoned lock of a file that no longer exists (its owner renamed the
        file done and died before removing the lock)."""
        return self._replace(name, claim=False, offset=0)

    def owner_of(self, name: str) -> Owner | None:
        """The owner named in the first line of ``name``'s lock; None if it cannot be read."""
        try:
            fd = os.open(self.directory / name, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            return Owner.parse(os.pread(fd, 512, 0).split(b"\n", 1)[0])
        except OSError:
            return None
        finally:
            os.close(fd)

    def why_abandoned(self, name: str) -> str:
        """Why the last `abandoned` counted the lock of ``name`` as abandoned."""
        watched = self._watched.get(name)
        if watched is not None and watched.dead is not None:
            return watched.dead
        return f"its lock was unchanged for {self.timeout}s"

    def _why_dead(self, name: str) -> str | None:
        owner = self.owner_of(name)
        return None if owner is None else why_dead(owner, self.owner)

    def last_line(self, name: str) -> str:
        """The last line of ``name``'s lock (for a message; its contents are only ever shown)."""
        try:
            with open(self.directory / name, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 512))
                tail = f.read(512)
        except OSError:
            return "?"
        lines = tail.decode("utf-8", "replace").strip().splitlines()
        return lines[-1][:200] if lines else "(empty)"

    def record(self, name: str, event: str, offset: int) -> None:
        """Appends a line about a held file (``reading`` from a committed offset, say) to its lock."""
        self._write(name, event, offset)

    def _replace(self, name: str, *, claim: bool, offset: int) -> bool:
        watched = self._watched.get(name)
        if watched is None:
            return False
        with self._dirlock(wait=False) as got:
            if not got:
                return False  # another task is taking over or releasing locks; try at the next listing
            for leftover in self.directory.glob(f"{_GRAVE}*"):  # only made under this lock: a crash's
                leftover.unlink(missing_ok=True)
            del self._watched[name]
            if _stamp(self.directory / name) != watched.stamp:
                return False  # its owner came back, or another task took it over and released it
            grave = self.directory / f"{_GRAVE}{uuid.uuid4().hex}"
            try:
                os.rename(self.directory / name, grave)
            except FileNotFoundError:
                return False
            os.unlink(grave)
            return self.claim(name, offset) if claim else True

    @contextlib.contextmanager
    def _dirlock(self, *, wait: bool) -> Iterator[bool]:
        """Holds ``.dirlock`` (yields True), or yields False at once if ``wait`` is False and
        another task holds it."""
        with _PROCESS_LOCK:
            fd = os.open(self.directory / DIRLOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as e:
                    if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                    yield False
                    return
                yield True
            finally:
                os.close(fd)  # releases the flock

    def _write(self, name: str, event: str, offset: int) -> bytes:
        line = f"{int(self.clock.wall() * 1000)},{self.owner},{event},{offset}\n".encode()
        try:
            os.write(self._held[name], line)
        except OSError as e:
            raise write_failure(e, self.directory / name, self.kept, atomic=False) from e
        self._beaten[name] = self.clock.now()
        return line

    def _forget(self, name: str) -> None:
        fd = self._held.pop(name, None)
        if fd is not None:
            os.close(fd)
        self._firsts.pop(name, None)
        self._beaten.pop(name, None)


def _stamp(path: Path) -> LockStamp | None:
    """The lock's stamp; None if it is gone or is not a regular file (never followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return LockStamp(st.st_ino, st.st_size, st.st_mtime_ns)
