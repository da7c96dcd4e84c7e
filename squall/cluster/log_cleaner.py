"""The log cleaner: Storm's logviewer ``LogCleaner``, run by the process host's supervisor.

Every ``logviewer.cleanup.interval.secs`` (the first round when the supervisor starts) it looks
at ``<storm.log.dir>/<storm.workers.artifacts.dir>/<topology-id>/<port>/`` on this machine and,
in Storm's order:

1. removes the directory of every worker that is not alive here (not running in one of this
   supervisor's slots) and whose directory and files were all last modified at least
   ``logviewer.cleanup.age.mins`` ago, then its topology's directory if that is left empty;
2. in every worker directory over ``logviewer.max.per.worker.logs.size.mb`` (capped at half the
   total, as Storm does), deletes its oldest files until it is not; an active file (Storm's
   ``.*\\.(log|err|out|current|yaml|pid|metrics)$``: ``worker.log`` itself) is never deleted;
3. while all worker directories together are over ``logviewer.max.sum.worker.logs.size.mb``,
   deletes the oldest files among them: a live worker's rolled files (never its active ones),
   any file of a dead worker but its metadata (``.yaml``, ``.pid``).

What to delete is decided by `plan`, a pure function of a listing (`WorkerDir`), the live
workers and the time; `LogCleaner` lists the directory, deletes what the plan says and logs
every deletion. Only real directories two levels under the root and regular files in them are
considered: a symlink (to a directory or a file) is neither followed nor deleted, so nothing
outside the root is touched.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._config import Config, conf_value

log = logging.getLogger("squall.logcleaner")

ACTIVE_LOG = re.compile(r".*\.(log|err|out|current|yaml|pid|metrics)$")
"""Storm's ``DirectoryCleaner.ACTIVE_LOG_PATTERN``: files a live worker may be writing."""
META_LOG = re.compile(r".*\.(yaml|pid)$")
"""Storm's ``META_LOG_PATTERN``: a worker directory's metadata, kept by the total cap."""

MB = 1024 * 1024


@dataclass(frozen=True)
class LogFile:
    """A regular file in a worker directory: its name, size in bytes and mtime (epoch seconds)."""

    name: str
    size: int
    mtime: float


@dataclass(frozen=True)
class WorkerDir:
    """``<root>/<topology>/<port>/``: its own mtime and its regular files."""

    topology: str
    port: str
    mtime: float
    files: tuple[LogFile, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.topology, self.port)

    @property
    def last_modified(self) -> float:
        """Storm's ``lastModifiedTimeWorkerLogdir``: the newest of the directory and its files."""
        return max([self.mtime, *(f.mtime for f in self.files)])

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class Plan:
    """What one round deletes: whole worker directories, then single files ``(topology, port, name)``."""

    dirs: list[tuple[str, str]] = field(default_factory=list)
    files: list[tuple[str, str, str]] = field(default_factory=list)


def plan(listing: Iterable[WorkerDir], alive: Collection[tuple[str, str]], now: float, age_secs: float,
         per_worker_bytes: int, total_bytes: int) -> Plan:
    """What Storm's ``LogCleaner.run`` deletes from ``listing`` at wall time ``now``; ``alive``:
    the ``(topology, port)`` of the workers running here. See the module docstring."""
    out = Plan()
    cutoff = now - age_secs
    left: list[WorkerDir] = []
    for d in sorted(listing, key=lambda d: d.key):
        if d.key not in alive and d.last_modified <= cutoff:
            out.dirs.append(d.key)
        else:
            left.append(d)
    # per worker: every directory (live or dead) over its cap loses its oldest inactive files
    kept: list[WorkerDir] = []
    for d in left:
        gone = _oldest_while_over([d], per_worker_bytes, lambda _d, f: ACTIVE_LOG.match(f.name) is not None)
        out.files.extend((d.topology, d.port, f.name) for _d, f in gone)
        names = {f.name for _d, f in gone}
        kept.append(WorkerDir(d.topology, d.port, d.mtime, tuple(f for f in d.files if f.name not in names)))
    # in total: a live worker keeps its active files, a dead one its metadata
    gone = _oldest_while_over(kept, total_bytes, lambda d, f: (ACTIVE_LOG if d.key in alive else META_LOG)
                              .match(f.name) is not None)
    out.files.extend((d.topology, d.port, f.name) for d, f in gone)
    return out


def _oldest_while_over(dirs: list[WorkerDir], quota: int,
                       keep: Callable[[WorkerDir, LogFile], bool]) -> list[tuple[WorkerDir, LogFile]]:
    """Storm's ``deleteOldestWhileTooLarge``: the oldest files not kept, in order, until the
    directories' total (kept files included) is at most ``quota``."""
    over = sum(d.size for d in dirs) - quota
    if over <= 0:
        return []
    candidates = sorted(((d, f) for d in dirs for f in d.files if not keep(d, f)),
                        key=lambda df: (df[1].mtime, df[0].key, df[1].name))
    out = []
    for d, f in candidates:
        if over <= 0:
            break
        out.append((d, f))
        over -= f.size
    if over > 0:
        where = f"worker directory {dirs[0].topology}/{dirs[0].port}" if len(dirs) == 1 else "the log root"
        log.warning("no more files may be deleted, but %s is over its quota by %.1f MB", where, over / MB)
    return out


def list_root(root: Path) -> list[WorkerDir]:
    """The worker directories under ``root``: real directories two levels down (symlinks are
    skipped), with their regular files."""
    out: list[WorkerDir] = []
    for topo in _real_dirs(root):
        for port in _real_dirs(topo):
            files = []
            try:
                with os.scandir(port) as it:
                    for e in it:
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if stat.S_ISREG(st.st_mode):
                            files.append(LogFile(e.name, st.st_size, st.st_mtime))
                mtime = os.lstat(port).st_mtime
            except OSError:  # gone meanwhile
                continue
            out.append(WorkerDir(topo.name, port.name, mtime, tuple(files)))
    return out


def _real_dirs(parent: Path) -> list[Path]:
    try:
        with os.scandir(parent) as it:
            return [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


class LogCleaner:
    """Runs `plan` on ``root`` every ``interval_secs`` of ``clock.now()`` (`tick`); ``alive``
    gives the ``(topology, port)`` of the workers running here at each round.

    Args:
        root: the artifacts root (`squall.cluster.logs.artifacts_root`).
        alive: the live workers, read at each round.
        interval_secs: time between rounds (None: never run, as Storm without the key).
        age_mins, per_worker_mb, total_mb: Storm's keys (the per-worker cap at most half the total).
        clock: ``now()`` schedules rounds, ``wall()`` ages files.
    """

    def __init__(self, root: Path, alive: Callable[[], Collection[tuple[str, str]]], interval_secs: float | None,
                 age_mins: float, per_worker_mb: int, total_mb: int, clock: Any = None) -> None:
        from ..engine.clock import Clock
        self.root = Path(root)
        self.alive = alive
        self.interval_secs = interval_secs
        self.age_secs = age_mins * 60.0
        self.total_bytes = int(total_mb) * MB
        self.per_worker_bytes = min(int(per_worker_mb), int(total_mb * 0.5)) * MB
        self.clock = clock or Clock()
        self.next_at: float | None = None  # clock time of the next round (None: at once)
        if interval_secs is None:
            log.warning("logviewer.cleanup.interval.secs is not set: worker logs are never cleaned up")
        else:
            log.info("log cleaner: every %g s in %s; max total size of worker logs: %d MB, per worker: %d MB, "
                     "a dead worker's directory removed after %g min", interval_secs, self.root,
                     self.total_bytes // MB, self.per_worker_bytes // MB, age_mins)

    @classmethod
    def from_conf(cls, conf: dict[str, Any], alive: Callable[[], Collection[tuple[str, str]]],
                  **kwargs: Any) -> LogCleaner:
        from .logs import artifacts_root
        interval = conf_value(conf, Config.LOGVIEWER_CLEANUP_INTERVAL_SECS)
        return cls(artifacts_root(conf), alive, None if interval is None else float(interval),
                   float(conf_value(conf, Config.LOGVIEWER_CLEANUP_AGE_MINS)),
                   int(conf_value(conf, Config.LOGVIEWER_MAX_PER_WORKER_LOGS_SIZE_MB)),
                   int(conf_value(conf, Config.LOGVIEWER_MAX_SUM_WORKER_LOGS_SIZE_MB)), **kwargs)

    def tick(self) -> bool:
        """Run a round if one is due (the first at once); whether one ran."""
        if self.interval_secs is None:
            return False
        now = self.clock.now()
        if self.next_at is not None and now < self.next_at:
            return False
        self.next_at = now + self.interval_secs
        try:
            self.run()
        except Exception:  # never ends the supervisor: said, tried again next round
            log.exception("log cleanup failed")
        return True

    def run(self) -> Plan:
        """One round: list, plan, delete (each deletion logged); the plan."""
        if not self.root.is_dir():
            return Plan()
        listing = list_root(self.root)
        p = plan(listing, set(self.alive()), self.clock.wall(), self.age_secs, self.per_worker_bytes,
                 self.total_bytes)
        sizes = {d.key: d.size for d in listing}
        for topo, port in p.dirs:
            self._remove_dir(topo, port, sizes.get((topo, port), 0))
        for topo, port, name in p.files:
            self._remove_file(topo, port, name)
        return p

    def _inside(self, *parts: str) -> Path | None:
        """``root/parts...`` if every part is a plain name and no directory on the way is a symlink."""
        path = self.root
        for i, part in enumerate(parts):
            if part in ("", ".", "..") or "/" in part or "\0" in part:
                return None
            path = path / part
            if i < len(parts) - 1:
                try:
                    if not stat.S_ISDIR(os.lstat(path).st_mode):
                        return None
                except OSError:
                    return None
        return path

    def _remove_dir(self, topo: str, port: str, size: int) -> None:
        path = self._inside(topo, port)
        if path is None:
            return
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode):
                return
            shutil.rmtree(path)  # does not follow symlinks in it
            log.info("log cleanup: removed %s (a dead worker's, %.1f KB)", path, size / 1024)
        except OSError as e:
            log.error("log cleanup: could not remove %s: %s", path, e)
            return
        top = path.parent
        try:
            top.rmdir()  # only if empty (Storm's cleanupEmptyTopoDirectory)
            log.info("log cleanup: removed %s (empty)", top)
        except OSError:
            pass

    def _remove_file(self, topo: str, port: str, name: str) -> None:
        path = self._inside(topo, port, name)
        if path is None:
            return
        try:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                return
            os.unlink(path)
            log.info("log cleanup: deleted %s, %d bytes, last modified %s", path, st.st_size,
                     _iso(st.st_mtime))
        except OSError as e:
            log.error("log cleanup: could not delete %s: %s", path, e)


def _iso(t: float) -> str:
    import datetime
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
