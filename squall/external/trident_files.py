"""`FileTridentSpout`: a transactional Trident spout over the files of a directory.

Each file is a partition (its id: the file's name). The coordinator lists the directory for each
batch (hidden files, ``.inprogress`` files and directories are skipped); each task of the spout's
bolt reads the files whose name hashes to it, so no file changes task as files come and go. A batch of a file is up to
``max_batch_records`` complete lines (ending in a newline) after the previous batch's end; its
metadata is the byte range ``{"start", "end"}`` it read, so a replayed txid reads exactly the same
bytes again and emits the same tuples. The metadata also names the file: its inode and a hash of
its first ``min(end, HEAD_BYTES)`` bytes (`FileSpout`'s identity, without the device, which is
not the same on every host that mounts a shared directory, and a Spark task may replay a batch
on another host than the one that planned it). Lines are read with `squall.external.files`' reader
(``read_line``, bounded by ``topology.filespout.max.record.bytes``) and turned into values by a
translator (default: the line as UTF-8, ``["line"]``); a line that is too long, that the
translator refuses or turns into values that are not one per field is a dead letter: skipped the
same way on every replay, counted at each attempt for the emitter bolt (which keeps the last
attempt's count per txid), and logged once, when its txid first reads it, naming the txid, the
file and the offset. A replay (``re_emit_partition_batch``: Storm's, and every Spark task's read,
retried or not) logs nothing; a txid planned again on Spark's driver logs only the lines past
what it logged before. A line the translator turns into None is skipped: no tuple, no dead
letter. A batch that read lines is a batch whatever it emitted (``covers_records``: on Spark's
engine a batch of only skipped lines or dead letters is a micro-batch of no rows past them). A
line being written (no newline yet) waits for a later batch.

Files must only grow: a file that is shorter than a batch's range when the batch is replayed,
that is another file than the batch read, or that changed within it, raises `FileConnectorError`
naming the file and the txid. A new batch of a file that is not the file the batch before read (a
new file put in place under a finished file's name: another inode, or other first bytes) or that
is shorter than where that batch ended is read from its start, with a warning naming the file:
the partition keeps the last metadata of a file that left the directory (one of the 1,000 gone
last: `squall.trident.partitioned.GONE_PARTITIONS_KEPT`), so a new file of the same name would
otherwise be read from the old one's end offset.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

from .._config import setting
from .._failure import CountsDeadLetters
from .._fields import Fields
from .._stable_hash import stable_hash_one
from ..trident.coordinator import max_active_batches
from ..trident.partitioned import IPartitionedTridentSpout
from ._arity import arity_error
from ._regular import NotRegular as _NotRegular
from ._regular import open_regular as _open_regular
from .files import (
    HEAD_BYTES,
    IN_PROGRESS,
    MAX_RECORD_KEY,
    FileConnectorError,
    RecordTooLarge,
    head_hash,
    read_line,
    translate_text,
)

__all__ = ["FileTridentSpout"]

log = logging.getLogger("squall.external.trident_files")

_BLOCK = 64 << 10  # what a batch is read by: whole lines of it at a time


@dataclass(frozen=True)
class FilePartition:
    """One file of the directory, by name."""

    name: str

    def get_id(self) -> str:
        """The file's name."""
        return self.name


class _FirstRead(NamedTuple):
    """A txid's first read of a file's range: its dead letters from byte ``since`` on are logged
    (before it, an earlier plan of the same txid logged them)."""

    txid: int
    since: int


class _ReadKey(NamedTuple):
    """One txid's range of one file: the txid, the file's name and inode, where the range starts."""

    txid: int
    name: str
    ino: int
    start: int


class _Coordinator(IPartitionedTridentSpout.Coordinator):
    def __init__(self, directory: str) -> None:
        self.directory = directory

    def get_partitions_for_batch(self) -> list[str]:
        """The names of the directory's readable files, sorted."""
        try:
            with os.scandir(self.directory) as entries:
                # regular files only: not a symbolic link (`_open_regular` says why), nor a FIFO
                names = [e.name for e in entries if e.is_file(follow_symlinks=False)]
        except OSError as e:
            raise FileConnectorError(f"FileTridentSpout: cannot list {self.directory}: {e}") from None
        return sorted(n for n in names if not n.startswith(".") and not n.endswith(IN_PROGRESS))


class _Emitter(IPartitionedTridentSpout.Emitter, CountsDeadLetters):
    def __init__(self, spout: FileTridentSpout, conf: dict) -> None:
        self.spout = spout
        self.start_dead_letter_counts()  # read by the emitter bolt around each batch
        self.limit = int(setting(conf or {}, MAX_RECORD_KEY))
        self.max_pending = max_active_batches(conf or {})
        # per txid's range of a file, the byte up to which its first reads logged its dead
        # letters: a txid read anew (planned again on Spark's driver; a Storm batch whose
        # metadata was not stored) logs only the lines past it
        self.logged: dict[_ReadKey, int] = {}

    def get_ordered_partitions(self, all_partition_info: Any) -> list[FilePartition]:
        """The files, by name."""
        return [FilePartition(n) for n in sorted(all_partition_info)]

    def get_partitions_for_task(self, task_index: int, num_tasks: int, ordered: list) -> list:
        """The files whose name hashes to this task. Not Storm's every n-th of the sorted list:
        files come and go, and a file that changed task would be read from where its new task
        finds it stored while its old task may not yet have stored where an earlier batch in
        flight ended there (its lines emitted twice)."""
        return [p for p in ordered if stable_hash_one(p.name) % num_tasks == task_index]

    def _path(self, partition: FilePartition) -> str:
        return os.path.join(self.spout.directory, partition.name)

    def _read(self, f: BinaryIO, path: str, start: int, end: int | None, collector: Any,
              first: _FirstRead | None) -> tuple[int, str]:
        """Emits the complete lines from ``start`` (at most ``max_batch_records`` of them, or up
        to ``end``); returns where it stopped and a digest of the bytes read.

        The lines are taken a block at a time (`_take_block`), each one read on its own
        (`_take_line`) only where a block has no whole line or one over the limit: a batch is
        read twice on Spark's engine (planned, then emitted in a task), and line by line that
        was most of the planning's time. Dead letters are logged under ``first`` only (None: a
        replay, which logs none)."""
        sha = hashlib.sha256()
        cap = self.spout.max_batch_records
        f.seek(start)
        at, count = start, 0
        while (end is None and count < cap) or (end is not None and at < end):
            taken = self._take_block(f, path, at, end, None if end is not None else cap - count, sha, collector,
                                     first)
            if not taken:
                f.seek(at)
                taken = self._take_line(f, path, at, sha, collector, first)
                if not taken:
                    break  # end of file, or a line still being written
            at += taken[0]
            count += taken[1]
            f.seek(at)
        return at, sha.hexdigest()[:32]

    def _take_block(self, f: Any, path: str, at: int, end: int | None, most: int | None, sha: Any,
                    collector: Any, first: _FirstRead | None) -> tuple[int, int] | None:
        """Emits the whole lines of the next block of up to `_BLOCK` bytes before the first one
        over the limit (at most ``most``, none past ``end``); (bytes, lines) taken, or None when
        it has none."""
        block = f.read(_BLOCK if end is None else min(_BLOCK, end - at))
        lines = block.split(b"\n") if most is None else block.split(b"\n", most)
        lines.pop()  # what follows the last newline (or the ``most``-th)
        if not lines:
            return None
        if max(map(len, lines)) >= self.limit:  # a line and its newline over the limit: read alone
            lines = lines[:next(i for i, line in enumerate(lines) if len(line) >= self.limit)]
            if not lines:
                return None
        size = sum(map(len, lines)) + len(lines)
        data = block[:size]
        sha.update(data)
        if self.spout.translator is translate_text and len(self.spout.fields) == 1:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                pass  # a line that is not UTF-8 is a dead letter: each line on its own below
            else:
                words = text.split("\n")
                words.pop()
                _emit_rows(collector, [[line] for line in (words if "\r" not in text else [w.rstrip("\r") for w in words])])
                return size, len(lines)
        offset = at
        for line in lines:
            self._emit(collector, path, offset, line + b"\n", first)
            offset += len(line) + 1
        return size, len(lines)

    def _take_line(self, f: Any, path: str, at: int, sha: Any, collector: Any,
                   first: _FirstRead | None) -> tuple[int, int] | None:
        """Emits the next line, or skips it as a dead letter when it is over the limit; (bytes,
        lines) taken, or None at the end of the file or before a line still being written."""
        try:
            line = read_line(f, self.limit)
        except RecordTooLarge as e:
            after = f.tell()
            f.seek(after - 1)
            if f.read(1) != b"\n":
                return None  # the long line is still being written: a later batch skips it whole
            # skipped the same way every time: the range covers it, no tuple comes of it
            self._dead_letter(first, path, at, f"a line of {e.size} bytes is over {MAX_RECORD_KEY}={self.limit}")
            return after - at, 1
        if not line.endswith(b"\n"):
            return None
        sha.update(line)
        self._emit(collector, path, at, line, first)
        return len(line), 1

    def _dead_letter(self, first: _FirstRead | None, path: str, offset: int, why: str) -> None:
        """Counts the line at ``offset`` of ``path`` as a dead letter at every attempt (the
        emitter bolt keeps the last attempt's count per txid), and logs it at its txid's first
        read only: a replay reads the same lines, and a line per attempt told a user counting
        the log more dead letters than there were."""
        if first is not None and offset >= first.since:
            log.error("FileTridentSpout dead letter: txid %s: %s offset %d: %s", first.txid, path, offset, why)
        self.count_dead_letter(None)

    def _emit(self, collector: Any, path: str, offset: int, line: bytes, first: _FirstRead | None) -> None:
        try:
            values = self.spout.translator(line)
        except Exception as e:  # noqa: BLE001 (a user translator: any error is a poison line, as the Kafka spout's)
            self._dead_letter(first, path, offset, f"{type(e).__name__}: {e}")
            return
        if values is None:
            return
        # a wrong count fails the batch, and every replay of it again: the file would stall for good
        wrong = arity_error(values, self.spout.fields)
        if wrong is not None:
            self._dead_letter(first, path, offset, wrong)
            return
        collector.emit(list(values))

    def emit_batch_new(self, tx: Any, collector: Any, partitions: set, last_partition_meta: Mapping) -> dict:
        """Each file's next lines after the previous batch's range; from its start if it is not
        the file that batch read (`changed_since`). Dead letters are logged past what an
        earlier read of the txid's range logged (`_FirstRead`)."""
        for done in [k for k in self.logged if k.txid <= tx.txid - self.max_pending]:
            del self.logged[done]  # committed: no attempt of it comes again
        metas = {}
        for p in sorted(partitions, key=FilePartition.get_id):
            last = last_partition_meta.get(p)
            path = self._path(p)
            try:
                f = _open_regular(path)  # closed below; one handle for identity and lines
            except FileNotFoundError:
                continue  # gone since the listing: it has no range in this batch
            except _NotRegular as e:  # put in the file's place since the listing, which skips it from now on
                log.warning("FileTridentSpout: skipped %s: %s", path, e.strerror)
                continue
            with f:
                start = int(last["end"]) if last else 0
                why = changed_since(last, f.fileno()) if last else None
                if why is not None:
                    log.warning("FileTridentSpout: reading %s from its start, not from byte %d where the batch "
                                "before ended: %s", path, start, why)
                    start, last = 0, None
                key = _ReadKey(tx.txid, p.name, os.fstat(f.fileno()).st_ino, start)
                first = _FirstRead(tx.txid, self.logged.get(key, start))
                end, digest = self._read(f, path, start, None, collector, first)
                self.logged[key] = max(first.since, end)
                metas[p] = {"start": start, "end": end, "sha256": digest, **file_identity(f.fileno(), end, last)}
        return metas

    def covers_records(self, partition_meta: Any) -> bool:
        """Whether the batch read lines of its file (a range of bytes), tuples or not: lines the
        translator skipped (None) or refused move the file on as lines it turned into tuples."""
        return int(partition_meta["end"]) > int(partition_meta["start"])

    def re_emit_partition_batch(self, tx: Any, collector: Any, partition: Any, partition_meta: Any) -> None:
        """The same byte range of the same file again; a file that is gone, another file, or
        changed there is an error naming it. Its dead letters were logged at the first read."""
        start, end = int(partition_meta["start"]), int(partition_meta["end"])
        if start == end:
            return
        path = self._path(partition)
        try:
            f = _open_regular(path)  # closed below
        except OSError as e:  # _NotRegular among them
            raise FileConnectorError(f"FileTridentSpout: replaying txid {tx.txid}: {path} cannot be read ({e}); the "
                                     f"batch read bytes {start}..{end} of it") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            if size < end:
                raise FileConnectorError(f"FileTridentSpout: replaying txid {tx.txid}: {path} has {size} bytes, the "
                                         f"batch read bytes {start}..{end}: the file was truncated or replaced")
            why = changed_since(partition_meta, f.fileno())
            if why is not None:
                raise FileConnectorError(f"FileTridentSpout: replaying txid {tx.txid}: {path} is not the file the "
                                         f"batch read bytes {start}..{end} of: {why}")
            buffered = _Buffer()
            stop, digest = self._read(f, path, start, end, buffered, None)  # logged at the first read
        if stop != end or digest != partition_meta.get("sha256", digest):
            raise FileConnectorError(f"FileTridentSpout: replaying txid {tx.txid}: bytes {start}..{end} of {path} "
                                     f"changed since the batch first read them")
        _emit_rows(collector, buffered.values)


def file_identity(fd: int, end: int, last: Mapping | None) -> dict[str, Any]:
    """The metadata that names the open file ``fd`` read up to ``end``: its inode and a hash of
    its first ``min(end, HEAD_BYTES)`` bytes (JSON values: on Spark the metadata is JSON). The
    hash of ``last`` (the batch before, of this file) is reused while it covers as many bytes."""
    length = min(end, HEAD_BYTES)
    if last is not None and "head" in last and min(int(last["end"]), HEAD_BYTES) == length:
        head = last["head"]
    else:
        head = head_hash(fd, length)
    return {"ino": os.fstat(fd).st_ino, "head": head}


def changed_since(meta: Mapping, fd: int) -> str | None:
    """Why the open file ``fd`` is not the file a batch with metadata ``meta`` read (another
    inode, fewer bytes than the batch's end, other first bytes), or None if it is that file,
    perhaps grown. Metadata without an identity (an older squall's) is checked by length only."""
    st = os.fstat(fd)
    end = int(meta["end"])
    if st.st_size < end:
        return f"it has {st.st_size} bytes, fewer than the {end} the batch had read (truncated or replaced)"
    if "ino" in meta and st.st_ino != meta["ino"]:
        return f"it is another file (inode {st.st_ino}; the batch read inode {meta['ino']}): replaced"
    if "head" in meta and head_hash(fd, min(end, HEAD_BYTES)) != meta["head"]:
        return f"its first {min(end, HEAD_BYTES)} bytes changed since the batch read them (rewritten or replaced)"
    return None


def _emit_rows(collector: Any, rows: list[list]) -> None:
    """``rows`` emitted in order, in one call where the collector takes them so (a Storm
    collector has ``emit`` only)."""
    emit_many = getattr(collector, "emit_many", None)
    if emit_many is not None:
        emit_many(rows)
    else:
        for values in rows:
            collector.emit(values)


class _Buffer:
    """Holds a replay's tuples until its bytes are known unchanged."""

    def __init__(self) -> None:
        self.values: list[list] = []

    def emit(self, values: list) -> None:
        self.values.append(values)

    def emit_many(self, rows: list[list]) -> None:
        self.values.extend(rows)


class FileTridentSpout(IPartitionedTridentSpout):
    """A transactional Trident spout over the files of ``directory``; see the module docstring.

    ``fields``: the tuples' fields; ``translator(line_bytes) -> values`` (a list or tuple of one
    value per field; None: skip the line; ValueError, or values of another count: a dead letter);
    ``max_batch_records``: lines per file per batch.
    """

    def __init__(self, directory: str | os.PathLike, fields: Sequence[str] = ("line",), *,
                 translator: Callable[[bytes], list | None] = translate_text,
                 max_batch_records: int = 1000) -> None:
        if max_batch_records < 1:
            raise ValueError(f"FileTridentSpout({directory}): max_batch_records must be >= 1")
        self.directory = str(directory)
        self.fields = list(fields)
        self.translator = translator
        self.max_batch_records = max_batch_records

    def get_coordinator(self, conf: dict, context: Any) -> IPartitionedTridentSpout.Coordinator:
        """Lists the directory."""
        if not os.path.isdir(self.directory):
            raise FileConnectorError(f"FileTridentSpout: {self.directory} is not a directory")
        return _Coordinator(self.directory)

    def get_emitter(self, conf: dict, context: Any) -> IPartitionedTridentSpout.Emitter:
        """Reads the task's files."""
        return _Emitter(self, conf)

    def get_output_fields(self) -> Fields:
        """``fields``."""
        return Fields(self.fields)

    def field_types(self) -> dict[str, type]:
        """The field whose type every tuple keeps: the default translator's line, a str (on
        Spark's engine it travels in a typed column); none for another translator."""
        return {self.fields[0]: str} if self.translator is translate_text and len(self.fields) == 1 else {}
