"""Spouts downstream of a Spark pipeline: `DeltaTableSpout` follows the versions of a Delta table,
`ParquetDirectorySpout` the Parquet files a Spark job writes into a directory.

Both emit one tuple per row of each new Parquet file, with a `RowAt` (file, row index) message
id, and keep `FileSpout`'s guarantees with its machinery (`squall.external.offsets.OffsetManager`, progress files,
`RetryBook`, dead-letter files): per file the committed row (every row before it acked) is
written under ``<storm.local.dir>/<kind>/<spout id>/task-<index>.json``, so a restart resumes
each file at its committed row (at-least-once: rows acked after the first unacked one are
emitted again), a failed row is emitted again up to ``max_retries`` times and then written to a
dead-letter file. Each task reads the files whose path hashes to its index, one at a time.

A Delta table is followed commit by commit, as Spark's ``readStream.format("delta")`` does: the
files a version adds are read in version order; ``OPTIMIZE`` commits (files rewritten, no new
data) are skipped; a commit that removes data (a delete, update, merge or overwrite) stops the
spout with a reported error naming the version, unless ``skip_change_commits`` (Spark's option
of that name) is set. A task's progress also records the version through which all its files
are done (the *mark*), so the progress file stays small and a restart lists the log from there.

A Spark job writes through ``_temporary`` and renames each finished file into the directory, so
a ``part-*.parquet`` file that appears there is complete; with ``require_success`` (default)
nothing is read before the job's ``_SUCCESS`` marker exists. Names starting with ``.`` or ``_``
(and their directories) are skipped, as Spark does; partition directories (``key=value``) are
read, but the partition value is not added to the row.

Local paths only (object stores are not followed yet).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from .._collectors import OutputFieldsDeclarer, SpoutOutputCollector
from .._components import Spout
from .._context import TopologyContext
from .._failure import UNKNOWN, CountsDeadLetters, FailureCause
from .._fields import Fields
from .._private import private_dir
from .._system import DEFAULT_STREAM
from ..engine.clock import Clock
from ._regular import open_regular
from .files import (
    ProgressDoc,
    RetryBook,
    append_dead_letter,
    dump_progress,
    give_up_reason,
    owner_of,
    read_progress,
    spout_files,
    write_durably,
)
from .offsets import OffsetManager
from .retry import spout_backoff

__all__ = ["DeltaTableSpout", "FollowedFile", "ParquetDirectorySpout", "RowAt"]

log = logging.getLogger(__name__)

UNMARKED_WARN_SECS = 60.0
"""How long a `ParquetDirectorySpout` waiting for ``_SUCCESS`` sees finished files in its directory
before it says that it reads nothing until then."""


class RowAt(NamedTuple):
    """A followed row's message id: the file's key (its path in the table or directory) and the
    row's index in the file."""

    file: str
    row: int


class FollowedFile(NamedTuple):
    """A Parquet file to read: its key (path relative to the table or directory), where it is,
    and the table version that added it (0 in a directory)."""

    key: str
    path: str
    version: int


class _Reading:
    """The file a task is reading: its rows from a start row on, a batch at a time."""

    def __init__(self, file: FollowedFile, fields: list[str], start: int, batch_rows: int,
                 follow_links: bool = True) -> None:
        self.file = file
        # not following links: the open itself refuses one (`open_regular`), which a check of
        # the name at the listing left the time to put in the listed file's place
        pf = pq.ParquetFile(file.path if follow_links else open_regular(file.path))
        self.num_rows = pf.metadata.num_rows
        self.missing = [f for f in fields if f not in pf.schema_arrow.names]
        self.next_row = start
        self._rows: Iterator[list] = iter(()) if self.missing or start >= self.num_rows else \
            self._iter(pf, fields, start, batch_rows)

    @staticmethod
    def _iter(pf: pq.ParquetFile, fields: list[str], start: int, batch_rows: int) -> Iterator[list]:
        seen = 0
        for batch in pf.iter_batches(batch_size=batch_rows, columns=fields):
            if seen + batch.num_rows <= start:
                seen += batch.num_rows
                continue
            cols = [batch.column(f).to_pylist() for f in fields]
            for i in range(max(start - seen, 0), batch.num_rows):
                yield [c[i] for c in cols]
            seen += batch.num_rows

    def next(self) -> list | None:
        """The next row's values (its index is ``next_row`` before the call), or None at the end."""
        values = next(self._rows, None)
        if values is not None:
            self.next_row += 1
        return values


class _FollowingSpout(Spout, CountsDeadLetters):
    """The shell both spouts share; a subclass lists the new files of its source (`_new_files`)."""

    kind = "follow"
    follow_links = True  # whether a file of the source may be a symbolic link

    def __init__(self, source: str, fields: Sequence[str], *, stream: str, max_retries: int | None,
                 dead_letter_dir: str | os.PathLike | None, commit_every: int, commit_secs: float,
                 poll_secs: float, batch_rows: int, progress_dir: str | os.PathLike | None,
                 clock: Clock | None) -> None:
        name = type(self).__name__
        if not fields:
            raise ValueError(f"{name}: give the fields (columns) to emit")
        if commit_every < 1 or commit_secs <= 0 or poll_secs < 0 or batch_rows < 1:
            raise ValueError(f"{name}: commit_every and batch_rows must be >= 1, commit_secs > 0, poll_secs >= 0")
        self.backoff = spout_backoff(name, max_retries, None)
        self.source = source
        self.fields = list(fields)
        self.stream, self.max_retries = stream, max_retries
        self.commit_every, self.commit_secs, self.poll_secs = commit_every, commit_secs, poll_secs
        self.batch_rows = batch_rows
        self.clock = clock or Clock()
        # resolved where the topology is built, as FileSpout does (tasks do not see storm.local.dir)
        self.progress_dir = os.path.abspath(progress_dir or "storm-local")
        self.dead_letter_dir = os.path.abspath(dead_letter_dir) if dead_letter_dir else None

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declares ``fields`` on ``stream``."""
        declarer.declare_stream(self.stream, Fields(*self.fields))

    def open(self, conf: dict, context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Loads every progress file of this spout; raises `FileConnectorError` naming one that is
        corrupt or another spout's."""
        super().open(conf, context, collector)
        self.spout_id = context.get_this_component_id()
        self.index = context.get_this_task_index()
        self.tasks = len(context.get_component_tasks(self.spout_id))
        self.kept = spout_files(type(self).__name__, self.spout_id, self.index, self.progress_dir,
                                self.dead_letter_dir)
        state = self.state_dir = private_dir(Path(self.progress_dir) / self.kind / self.spout_id)
        self.progress_path = state / f"task-{self.index}.json"
        if self.dead_letter_dir is None:
            self.dead_letter_dir = str(state / "dead-letter")
        docs = {p.name: read_progress(p, self.spout_id, self.source, type(self).__name__)
                for p in sorted(state.glob("task-*.json"))}
        self.committed_rows: dict[str, int] = {}
        self.version_of: dict[str, int] = {}
        for doc in docs.values():
            for key, row in doc.files.items():
                self.committed_rows[key] = max(row, self.committed_rows.get(key, 0))
        self.mark = start_mark(docs, self.progress_path.name, self.tasks)
        # the tables the progress is about (a Delta table's id; none in a directory's progress,
        # or in one written before squall kept it)
        self.recorded_ids = sorted({d.table_id for d in docs.values() if d.table_id is not None})
        self.listed = -1 if self.mark is None else self.mark
        self.queue: deque[FollowedFile] = deque()
        self.pending_versions: Counter[int] = Counter()
        self.reading: _Reading | None = None
        self.tracker: OffsetManager | None = None
        self.inflight = RetryBook(self.backoff)
        self.acks_since_commit = 0
        self.last_commit = self.last_list = self.clock.now()
        self.polled = False
        self.dead_letters = 0
        self.start_dead_letter_counts()
        self.stopped: str | None = None  # why the source cannot be followed further

    # -- listing and reading

    def _new_files(self) -> list[FollowedFile]:
        raise NotImplementedError

    def _list(self) -> None:
        now = self.clock.now()
        if self.stopped or (self.polled and now - self.last_list < self.poll_secs):
            return
        self.polled, self.last_list = True, now
        for f in self._new_files():
            if owner_of(f.key, self.tasks) == self.index:
                self.queue.append(f)
                self.version_of[f.key] = f.version
                self.pending_versions[f.version] += 1

    def _stop(self, reason: str) -> None:
        """The source cannot be followed past here: say so once; what was listed is still read."""
        self.stopped = reason
        self.collector.report_error(reason)  # which logs it

    def _start_next(self) -> bool:
        while self.queue:
            f = self.queue.popleft()
            start = self.committed_rows.get(f.key, 0)
            try:
                reading = _Reading(f, self.fields, start, self.batch_rows, self.follow_links)
            except (OSError, pa.ArrowException) as e:
                # vacuumed or unreadable: say so durably, the rows cannot be emitted
                self._dead_letter(f, None, f"cannot read the file: {type(e).__name__}: {e}", None)
                self._finished(f, start)
                continue
            if reading.missing:
                self._dead_letter(f, None, f"the file has no column(s) {', '.join(reading.missing)} "
                                           f"(the spout emits {', '.join(self.fields)})", None)
                self._finished(f, reading.num_rows)
                continue
            if start >= reading.num_rows:
                self._finished(f, reading.num_rows)  # done in an earlier run
                continue
            self.reading, self.tracker = reading, OffsetManager(reading.file.key, start)
            self.committed_rows[f.key] = start
            return True
        return False

    def next_tuple(self) -> None:
        """Re-emits a failed row if any, else emits the next row of the current file."""
        again = self.inflight.next_retry(self.clock.now())
        if again is not None and self.reading is not None:
            self.collector.emit(again[1], RowAt(self.reading.file.key, again[0]), self.stream)
            return
        if self.reading is None:
            self._list()
            if not self._start_next():
                self._maybe_commit()
                return
        assert self.reading is not None and self.tracker is not None
        row = self.reading.next_row
        values = self.reading.next()
        if values is None:
            self._maybe_finish()
            self._maybe_commit()
            return
        self.tracker.add_to_emitted(row)
        self.inflight.add(row, values)
        self.collector.emit(values, RowAt(self.reading.file.key, row), self.stream)

    # -- acks

    def ack(self, msg_id: Any) -> None:
        """The row is done: the committed row may move past it."""
        if self._ours(msg_id) and self.inflight.ack(msg_id.row):
            self._done(msg_id.row)

    def fail(self, msg_id: Any) -> None:
        """A failure without a cause: counted as one the row caused (`fail_with`)."""
        self.fail_with(msg_id, UNKNOWN)

    def fail_with(self, msg_id: Any, cause: FailureCause) -> None:
        """Re-emits the row, or after ``max_retries`` re-emits for failures it caused gives it to
        the dead-letter file, with the cause (`squall.FailureCause`)."""
        if not self._ours(msg_id):
            return
        given_up = self.inflight.fail(msg_id.row, cause, now=self.clock.now())
        if given_up is not None:
            assert self.reading is not None
            self._dead_letter(self.reading.file, msg_id.row, give_up_reason(given_up), given_up.values,
                              given_up.cause)
            self._done(msg_id.row)

    def _ours(self, msg_id: Any) -> bool:
        return isinstance(msg_id, RowAt) and self.reading is not None and msg_id.file == self.reading.file.key

    def _done(self, row: int) -> None:
        assert self.tracker is not None
        self.tracker.add_to_acked(row)
        self.acks_since_commit += 1
        self._maybe_finish()
        self._maybe_commit()

    def _dead_letter(self, f: FollowedFile, row: int | None, reason: str, values: list | None,
                     cause: FailureCause | None = None) -> None:
        assert self.dead_letter_dir is not None
        entry = {"source": self.source, "file": f.key, "version": f.version, "row": row, "reason": reason,
                 "values": _jsonable(values), **({"cause": cause.as_dict()} if cause is not None else {})}
        path = append_dead_letter(self.dead_letter_dir, f.key.replace("/", "__"), entry, self.kept.dead_letter)
        self.dead_letters += 1
        self.count_dead_letter(cause)  # None: a file that cannot be read (one entry), unreadable
        where = f"{f.path}" + (f" row {row}" if row is not None else "")
        message = f"{type(self).__name__} {self.spout_id!r}: {reason} in {where}; written to {path}"
        self.collector.report_error(message)  # which logs it

    # -- progress

    def _maybe_finish(self) -> None:
        r = self.reading
        if r is None or self.tracker is None or self.tracker.pending or self.inflight.retrying \
                or r.next_row < r.num_rows:
            return
        self.reading = self.tracker = None
        self.inflight.clear()
        self._finished(r.file, r.num_rows)
        self._commit()

    def _finished(self, f: FollowedFile, rows: int) -> None:
        self.committed_rows[f.key] = rows
        self.pending_versions[f.version] -= 1
        if not self.pending_versions[f.version]:
            del self.pending_versions[f.version]

    def _table_id(self) -> str | None:
        """The id of the table the progress is about, to write with it (None for a directory)."""
        return None

    def _current_mark(self) -> int | None:
        """The version through which every file of this task is done (None for a directory)."""
        if not self.versioned:
            return None
        return min(self.pending_versions) - 1 if self.pending_versions else self.listed

    versioned = False

    def _maybe_commit(self) -> None:
        if self.acks_since_commit >= self.commit_every or (
                self.acks_since_commit and self.clock.now() - self.last_commit >= self.commit_secs):
            self._commit()

    def _commit(self) -> None:
        tracker = self.tracker if self.reading is not None else None
        if tracker is not None:
            committed = self.committed_rows[self.reading.file.key] = tracker.committable  # type: ignore[union-attr]
        mark = self._current_mark()
        mine = {k: r for k, r in self.committed_rows.items() if owner_of(k, self.tasks) == self.index
                and (mark is None or self.version_of.get(k, mark + 1) > mark)}
        if mark is not None:  # files below the mark are remembered by the mark alone
            self.committed_rows = {k: r for k, r in self.committed_rows.items()
                                   if self.version_of.get(k, mark + 1) > mark}
        write_durably(self.progress_path, dump_progress(self.spout_id, self.source, mine, mark, self.tasks,
                                                        table_id=self._table_id()), self.kept.progress)
        if tracker is not None:
            tracker.commit(committed)  # durable: the rows before it are forgotten
        self.acks_since_commit = 0
        self.last_commit = self.clock.now()

    def close(self) -> None:
        """Commits the progress."""
        if getattr(self, "progress_path", None) is not None:
            self._commit()

    def committed(self) -> dict[str, int]:
        """This task's committed row per file not finished below the mark (monitoring, tests)."""
        out = dict(self.committed_rows)
        if self.reading is not None and self.tracker is not None:
            out[self.reading.file.key] = self.tracker.committable
        return out


def _jsonable(values: list | None) -> list | None:
    if values is None:
        return None
    return [v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for v in values]


class ParquetDirectorySpout(_FollowingSpout):
    """Emits the rows of the Parquet files a Spark job (``df.write.parquet(directory)``, also in
    ``append`` mode, run after run) writes into ``directory``, each row once its tree is acked.

    A file is read once it is in the directory under a name ending with ``suffix`` (Spark renames
    finished files in from ``_temporary``) and, with ``require_success``, once ``_SUCCESS`` exists.
    New files are looked for every ``poll_secs``. Files are read in the order they are found (by
    name within one listing). Progress keeps every file read (its row count), so a file is never
    read twice across restarts; a file rewritten under the same name is not read again.

    Args:
        directory: the directory to follow (it may not exist yet).
        fields: the columns to emit, in order (each file must have them).
        max_retries: re-emits of a failed row before it is dead-lettered (None: no limit).
        dead_letter_dir: where ``<file>.dead`` JSON lines go (default: under the progress dir).
        commit_every, commit_secs: progress is committed after this many acks or seconds.
        progress_dir: the cluster's ``storm.local.dir`` (default ``storm-local``).
    """

    kind = "parquetspout"
    follow_links = False  # whoever writes the directory could link in a file only the workers' user may read

    def __init__(self, directory: str | os.PathLike, fields: Sequence[str], *, suffix: str = ".parquet",
                 require_success: bool = True, stream: str = DEFAULT_STREAM, max_retries: int | None = 3,
                 dead_letter_dir: str | os.PathLike | None = None, commit_every: int = 1000,
                 commit_secs: float = 1.0, poll_secs: float = 1.0, batch_rows: int = 1024,
                 progress_dir: str | os.PathLike | None = None, clock: Clock | None = None) -> None:
        super().__init__(os.path.abspath(directory), fields, stream=stream, max_retries=max_retries,
                         dead_letter_dir=dead_letter_dir, commit_every=commit_every, commit_secs=commit_secs,
                         poll_secs=poll_secs, batch_rows=batch_rows, progress_dir=progress_dir, clock=clock)
        self.suffix, self.require_success = suffix, require_success

    def open(self, conf: dict, context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Loads the progress; the files it lists are not queued again."""
        super().open(conf, context, collector)
        self.seen: set[str] = set()
        self.unmarked_since: float | None = None  # when finished files were first seen without _SUCCESS
        self.told_unmarked = False

    def _new_files(self) -> list[FollowedFile]:
        root = self.source
        if not os.path.isdir(root):
            return []
        if self.require_success and not os.path.exists(os.path.join(root, "_SUCCESS")):
            self._waiting_for_success(root)
            return []
        found: list[FollowedFile] = []
        present: set[str] = set()
        failed: list[OSError] = []
        for here, dirs, names in os.walk(root, onerror=failed.append):
            dirs[:] = sorted(d for d in dirs if d[0] not in "._")  # _temporary, .spark-staging
            for name in names:
                # no symbolic link (os.walk lists a link to a file among the names): whoever writes
                # the directory could link in a Parquet file only the workers' user may read
                if name[0] in "._" or not name.endswith(self.suffix) or os.path.islink(os.path.join(here, name)):
                    continue
                key = os.path.relpath(os.path.join(here, name), root)
                present.add(key)
                if key not in self.seen:
                    found.append(FollowedFile(key, os.path.join(here, name), 0))
        if failed:  # a directory not listed (its files are not gone): forget nothing this time
            self.seen |= present
            return sorted(found)
        # a file that left the directory (the job's retention, an overwrite) is forgotten, as
        # FileSpout forgets it: else the progress, rewritten at every commit, and the names seen
        # would hold every file ever written. One of that name written again is a new file
        self.seen = present
        reading = self.reading.file.key if self.reading is not None else None
        for key in [k for k in self.committed_rows if k not in present and k != reading]:
            del self.committed_rows[key]
            self.version_of.pop(key, None)
        return sorted(found)

    def _waiting_for_success(self, root: str) -> None:
        """Say once when ``root`` has held finished files for `UNMARKED_WARN_SECS` and still no
        ``_SUCCESS``: a Spark job writes it when it ends, but a directory squall's own
        `ParquetSinkBolt` (or another writer) fills never gets one, and the spout read nothing,
        without a word, for as long as it ran."""
        if self.told_unmarked:
            return
        try:
            with os.scandir(root) as entries:
                finished = sum(1 for e in entries if e.name[0] not in "._" and e.name.endswith(self.suffix))
        except OSError:
            return
        now = self.clock.now()
        if not finished:
            self.unmarked_since = None
        elif self.unmarked_since is None:
            self.unmarked_since = now
        elif now - self.unmarked_since >= UNMARKED_WARN_SECS:
            self.told_unmarked = True
            log.warning("ParquetDirectorySpout %r: %s has held %d finished %s file(s) for %.0f s and no _SUCCESS, "
                        "which this spout waits for before it reads anything (require_success=True): a Spark job "
                        "writes it when it ends; a directory ParquetSinkBolt or another writer fills never gets "
                        "one: follow it with require_success=False", self.spout_id, root, finished, self.suffix,
                        now - self.unmarked_since)


class DeltaTableSpout(_FollowingSpout):
    """Emits the rows each new version of the Delta table at ``table_uri`` appends, in version
    order (every version from the first, or from the committed progress of an earlier run).

    The progress keeps the table's id: a table deleted and created again at the same path (another
    id, versions from 0), or a progress whose mark is above the table's latest version, stops the
    spout with a reported error naming the table and what to do (remove the progress files).

    Args:
        table_uri: a local Delta table (it may not exist yet).
        fields: the columns to emit, in order (each data file must have them: unpartitioned
            columns).
        skip_change_commits: skip versions that remove data instead of stopping there.
        The others are `ParquetDirectorySpout`'s.
    """

    kind = "deltaspout"
    versioned = True

    def __init__(self, table_uri: str | os.PathLike, fields: Sequence[str], *, skip_change_commits: bool = False,
                 stream: str = DEFAULT_STREAM, max_retries: int | None = 3,
                 dead_letter_dir: str | os.PathLike | None = None, commit_every: int = 1000,
                 commit_secs: float = 1.0, poll_secs: float = 1.0, batch_rows: int = 1024,
                 progress_dir: str | os.PathLike | None = None, clock: Clock | None = None) -> None:
        uri = str(table_uri)
        if "://" in uri and not uri.startswith("file://"):
            raise ValueError(f"DeltaTableSpout: {uri}: only local tables can be followed")
        uri = os.path.abspath(uri.removeprefix("file://"))
        super().__init__(uri, fields, stream=stream, max_retries=max_retries, dead_letter_dir=dead_letter_dir,
                         commit_every=commit_every, commit_secs=commit_secs, poll_secs=poll_secs,
                         batch_rows=batch_rows, progress_dir=progress_dir, clock=clock)
        self.skip_change_commits = skip_change_commits

    def open(self, conf: dict, context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Loads the progress; the table's log is read from the committed mark on."""
        super().open(conf, context, collector)
        self.table: Any = None  # a deltalake.DeltaTable once the table exists (deltalake imported then)
        self.table_id: str | None = None  # its id (metadata().id), once checked against the progress

    def _table_id(self) -> str | None:
        # until the table is checked, the recorded id is kept: a spout stopped because the
        # table changed must stop again after a restart
        return self.table_id or (self.recorded_ids[0] if self.recorded_ids else None)

    def _new_files(self) -> list[FollowedFile]:
        from deltalake import DeltaTable
        if self.table is None:
            if not DeltaTable.is_deltatable(self.source):
                return []
            self.table = DeltaTable(self.source)
        else:
            self.table.update_incremental()
        if self.table_id is None and not self._same_table():
            return []
        found = []
        for version in range(self.listed + 1, self.table.version() + 1):
            try:
                commit = read_commit(self.source, version)
            except (OSError, ValueError) as e:
                self._stop(f"DeltaTableSpout {self.spout_id!r}: cannot read version {version} of {self.source}: {e}")
                break
            if commit.changes and not self.skip_change_commits:
                self._stop(f"DeltaTableSpout {self.spout_id!r}: version {version} of {self.source} "
                           f"({commit.operation}) removes data: the spout follows appends only and stops before "
                           f"it; pass skip_change_commits=True to skip such versions")
                break
            if commit.changes:
                log.warning("DeltaTableSpout %r: skipping version %d of %s (%s): it changes data",
                            self.spout_id, version, self.source, commit.operation)
            else:  # an OPTIMIZE's adds and removes carry dataChange=false and add nothing here
                paths = {p: table_file(self.source, p) for p in commit.added}
                out = next((p for p, path in paths.items() if path is None), None)
                if out is not None:  # "../x.parquet" read a file beside the table
                    self._stop(f"DeltaTableSpout {self.spout_id!r}: version {version} of {self.source} adds {out}, "
                               f"a path out of the table's directory, which the spout does not read")
                    break
                found += [FollowedFile(p, path, version) for p, path in paths.items() if path is not None]
            self.listed = version
        return found

    def _same_table(self) -> bool:
        """Whether the table is the one the progress is about; if not, stops the spout, naming
        the table and what to do (as Spark's Delta source fails with "Delta table ID changed").

        A table deleted and created again at the same path has another id and versions from 0:
        followed from the old table's mark, its first versions would never be emitted. A
        progress written before the id was kept is checked by its mark alone."""
        table_id, version = self.table.metadata().id, self.table.version()
        where = f"DeltaTableSpout {self.spout_id!r}: the Delta table at {self.source}"
        todo = (f"remove the progress files in {self.state_dir} to read it from its first version "
                f"(or give the spout another id)")
        other = [i for i in self.recorded_ids if i != table_id]
        if other:
            self._stop(f"{where} is not the table the spout's progress is about: Delta table ID changed, from "
                       f"{other[0]} to {table_id} (the table was deleted and created again); {todo}")
            return False
        if self.listed > version:
            self._stop(f"{where} is at version {version}, but the spout's progress is at version {self.listed} "
                       f"(the table was deleted and created again, or restored to an older version); {todo}")
            return False
        self.table_id = table_id
        return True


def start_mark(docs: dict[str, ProgressDoc], own_name: str, tasks: int) -> int | None:
    """The version below which this task's files are all done, from the progress ``docs`` (by file
    name) of an earlier run; None to start from the first version.

    With the same parallelism a task owns the same files, so only its own doc says what it finished:
    without one (lost, or the task never committed) it starts over. With another, the files move
    between tasks, so only a version that every task of that run had finished is safe, and only if
    a doc of each of those tasks is there."""
    own = docs.get(own_name)
    if own is not None and own.tasks == tasks:
        return own.mark
    earlier = {d.tasks for d in docs.values()}
    if own is None and (not docs or tasks in earlier):
        return None
    if len(earlier) != 1:
        return None  # docs of different runs: no one run is known whole
    (n,) = earlier
    if n is None or set(docs) != {f"task-{i}.json" for i in range(n)}:
        return None
    marks = [d.mark for d in docs.values() if d.mark is not None]
    return min(marks) if len(marks) == len(docs) else None


class DeltaCommit(NamedTuple):
    """What one version of a Delta table did, from its ``_delta_log`` entry."""
    operation: str | None
    added: list[str]  # files of new data (dataChange=true), in the log's order
    changes: bool  # it removes data (a remove with dataChange=true): a delete, update or overwrite


def table_file(table: str, path: str) -> str | None:
    """The local file an add's ``path`` names in the Delta table at ``table``, or None if it
    leads out of the table's directory.

    The Delta protocol's path is a URI: relative to the table's root (what Spark and deltalake
    write), or absolute, which some writers write for a file in the table (``/data/t/part-0...``,
    ``file:/data/t/part-0...``) and a shallow clone for its source's files. Relative through
    ``..``, or absolute elsewhere, is out: whoever writes the log must not make the spout read
    any Parquet file the workers' user may read."""
    if _SCHEME.match(path):
        uri = urlsplit(path)
        if uri.scheme.lower() != "file" or uri.netloc not in ("", "localhost"):
            return None  # another file system's (a shallow clone's), never this table's directory
        local = unquote(uri.path)
    else:
        local = unquote(path)
    if not os.path.isabs(local):
        return None if ".." in local.split("/") else os.path.join(table, local)
    file = os.path.normpath(local)
    # the table as the writer may have named it: the path given, or through its links
    roots = {os.path.normpath(os.path.abspath(table)), os.path.realpath(table)}
    return file if any(file.startswith(root.rstrip(os.sep) + os.sep) for root in roots) else None


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def read_commit(table: str, version: int) -> DeltaCommit:
    """Reads ``_delta_log/<version>.json`` of ``table``, classing its actions by ``dataChange`` as
    Spark's streaming source does (a snapshot's history() is not used: deltalake labels the latest
    commit with the snapshot's version). Raises ValueError naming the file if it is not JSON lines."""
    path = os.path.join(table, "_delta_log", f"{version:020d}.json")
    operation, added, changes = None, [], False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                action = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {n}: not JSON ({e})") from None
            if not isinstance(action, dict):
                raise ValueError(f"{path}: line {n}: not an action object")  # noqa: TRY004 (a malformed log, as the JSON error above)
            if isinstance(action.get("commitInfo"), dict):
                operation = action["commitInfo"].get("operation")
            add, remove = action.get("add"), action.get("remove")
            if isinstance(add, dict) and add.get("dataChange", True) and isinstance(add.get("path"), str):
                added.append(add["path"])
            if isinstance(remove, dict) and remove.get("dataChange", True):
                changes = True
    return DeltaCommit(operation, added, changes)
