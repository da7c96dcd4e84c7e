"""Files in and out: a replayable directory spout and an atomic, rotating file sink.

`FileSpout` is storm-hdfs's ``HdfsSpout`` on a local (or mounted) directory. By default each spout
task owns the files whose name hashes (`stable_hash`) to its task index, so tasks never race for
a file and need no lock directory; with ``claim_files=True`` the tasks claim the next unread file
with HdfsSpout's lock files instead (`squall.external._file_locks`), so a task that keeps up
reads more. It reads its files one at a time, in name order, and remembers per file the
*committed offset*: the byte offset before which every line was acked (the contiguous acked
prefix, kept by the Kafka spout's `squall.external.offsets.OffsetManager`, not HdfsSpout's
tracker that can skip an early unacked line). A restart resumes every file at its committed offset, so every line not acked is
replayed, and so may be acked lines after the first unacked one (at-least-once).

`FileSinkBolt` writes tuples into hidden temporary files (``.name.inprogress``, which Spark and
Hadoop input formats skip), and on rotation fsyncs, renames to the final name and fsyncs the
directory; only then are the tuples in that file acked. A write that fails fails every tuple of
the file, so they replay.

Nothing here needs a third-party library (the ``files`` extra is empty).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import inspect
import json
import logging
import os
import re
import stat
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from .._collectors import OutputCollector, OutputFieldsDeclarer, SpoutOutputCollector
from .._components import Bolt, Spout
from .._config import Config, default_of, setting
from .._context import TopologyContext
from .._errors import SquallError
from .._failure import UNAVAILABLE, UNKNOWN, CountsDeadLetters, FailureCause, fail_all_because, fail_because
from .._fields import Fields
from .._private import FILE_MODE, Kept, disk_error_message, fsync_dir, private_dir, write_failure, write_private
from .._stable_hash import stable_hash_one
from .._system import DEFAULT_STREAM
from .._tuple import Tuple, is_tick_tuple
from ..engine.clock import Clock
from ._arity import arity_error
from ._file_locks import FileLocks
from ._regular import NotRegular, open_regular
from ._writers import open_for_writing
from .offsets import OffsetManager
from .retry import (
    AloneGate,
    Charge,
    RetryBackoff,
    RetrySchedule,
    gate_patience,
    group_size,
    spout_backoff,
    warn_stood_alone,
    worker_gate,
)

log = logging.getLogger("squall.external.files")

PROGRESS_VERSION = 1
IN_PROGRESS = ".inprogress"
_TASK_FILE = re.compile(r"task-[0-9]+\.json")  # a task's progress file, in the spout's state directory
HEAD_BYTES = 4096  # how much of a file's start its progress record fingerprints
# How far past the record it emits a task writes, before it goes out, that it may have read: a
# line below that mark read again after the task died is a suspect, emitted in a group of
# suspects or alone (`AloneGate`), each with a durable write before it (about 3.5 ms a line on a
# local disk), and one after its ack if it went alone. So the
# mark runs READ_AHEAD_LINES lines ahead (as long as the shortest line read since it was last
# written), at most READ_AHEAD bytes: one write of the charges file per that many lines read;
# after a death, at most that many lines that never went out are emitted as suspects once.
READ_AHEAD = 64 << 10
READ_AHEAD_LINES = 512
MAX_RECORD_KEY = Config.TOPOLOGY_FILESPOUT_MAX_RECORD_BYTES
DEFAULT_MAX_RECORD_BYTES = default_of(MAX_RECORD_KEY)
SKIP_CHUNK = 64 << 10  # what an oversized line is skipped by: the memory it takes, whatever its length
# How long a file must have stayed unchanged before `FileSpout` takes it as finished (its last
# line without a newline a record once no process has it open for writing, the file renamed
# done): longer than a logger's pauses
DEFAULT_QUIET_SECS = 5.0
# How often a task asks again whether a quiet file ending in a line without its newline is still
# open for writing (`FileSpout._writer_holds`): how late it sees the writer close it
WRITER_LOOK_SECS = 1.0


class FileConnectorError(SquallError):
    """A file connector cannot go on: a corrupt or foreign progress file, an unusable directory.
    The message names the file."""


class RecordTooLarge(Exception):
    """A reader met a record longer than its limit and moved past it without holding it: the
    file is positioned at the next record. ``size`` is the record's length in bytes."""

    def __init__(self, size: int) -> None:
        super().__init__(f"a record of {size} bytes")
        self.size = size


class LineAt(NamedTuple):
    """A `FileSpout` tuple's message id: the file's name and the byte offset its line starts at."""

    file: str
    offset: int


# ---------------------------------------------------------------------------------------------
# Durable writes


def write_durably(path: Path, data: bytes, kept: Kept) -> None:
    """Replace ``path`` by ``data``, owner-only, atomically and durably: a temporary file, fsync,
    rename, fsync of the directory. After a crash ``path`` holds the old or the new data.

    Raises:
        DiskWriteError: it cannot be written (a full disk...), naming the file, what it holds as
            ``kept`` says, the cause and what to do; ``path`` holds the old data.
    """
    write_private(path, data, kept, durable=True)


# ---------------------------------------------------------------------------------------------
# The spout's pure core: which offsets are committed, and the progress file


class ProgressDoc(NamedTuple):
    """A spout task's progress file: per source file the committed offset (or row), and for a
    spout that follows a versioned source the version through which everything is done."""

    files: dict[str, int]
    mark: int | None = None   # every file of this task at or below this version is done
    tasks: int | None = None  # the spout's parallelism when written (ownership of files depends on it)
    identities: dict[str, FileIdentity] | None = None  # `FileSpout`: which file each offset is about
    table_id: str | None = None  # `DeltaTableSpout`: the id of the table the progress is about
    # `FileSpout`: files this task finished (renamed done) while another task's progress file
    # still held a record of them: that task drops its record silently, not as a file taken away
    finished: dict[str, FileIdentity] | None = None


class FileIdentity(NamedTuple):
    """Which file a `FileSpout` progress record is about, taken when the record was written:
    device and inode, size and mtime, a hash of the file's first ``min(offset, HEAD_BYTES)``
    bytes (the part already read, which an appending writer never changes), and the inode's
    generation number (`file_generation`; None where the file system keeps none, and in a record
    written before squall kept it), which tells a file renamed from a new one on a reused inode."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    head: str
    gen: int | None = None


class FileMark(NamedTuple):
    """A file's committed offset and the identity of the file it was committed for (None in a
    record written before squall kept identities)."""

    offset: int
    identity: FileIdentity | None


def read_progress(path: Path, spout: str, directory: str, kind: str = "FileSpout") -> ProgressDoc:
    """Read a spout task's progress file; an empty `ProgressDoc` if it is absent.

    The file is hostile input: anything but a regular JSON file of this spout and this source
    with non-negative integer offsets is a `FileConnectorError` naming it. ``kind`` names the
    spout class in errors.
    """
    doc = _load_own(path, f"{kind} {spout!r}: progress file {path}", "read the files from their start")
    if doc is None:
        return ProgressDoc({})
    bad = _check_progress(doc, spout, directory, kind)
    if bad:
        raise FileConnectorError(f"{kind} {spout!r}: progress file {path} {bad}")
    identities = finished = None
    if "identity" in doc:
        identities = {name: FileIdentity(**v) for name, v in doc["identity"].items()}
    if "finished" in doc:
        finished = {name: FileIdentity(**v) for name, v in doc["finished"].items()}
    return ProgressDoc(dict(doc["files"]), doc.get("mark"), doc.get("tasks"), identities, doc.get("table_id"),
                       finished)


def _load_own(path: Path, named: str, removed: str) -> Any:
    """The JSON a spout's state file ``path`` holds (None if it is absent), after checking it is
    a regular file of this user that no one else may write; else `FileConnectorError` starting
    with ``named``, saying that removing it would ``removed``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise FileConnectorError(f"{named} is not a regular file")
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o022:
        raise FileConnectorError(f"{named} is another user's or writable by others; remove it if it is not squall's")
    try:
        return json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: "[[[[..." nested too deep
        raise FileConnectorError(f"{named} is corrupt ({type(e).__name__}: {str(e)[:200]}); remove it to "
                                 f"{removed}") from None


def load_progress(path: Path, spout: str, directory: str) -> dict[str, int]:
    """Read a `FileSpout` task's progress file: ``{file name: committed offset}``; {} if absent."""
    return read_progress(path, spout, directory).files


def _check_progress(doc: Any, spout: str, directory: str, kind: str) -> str | None:
    if not isinstance(doc, dict) or doc.get("version") != PROGRESS_VERSION:
        return f"is not a version-{PROGRESS_VERSION} {kind} progress file"
    if doc.get("spout") != spout or doc.get("directory") != directory:
        return (f"belongs to spout {doc.get('spout')!r} reading {doc.get('directory')!r}, not to {spout!r} "
                f"reading {directory!r}; give this spout another id or remove the file")
    files = doc.get("files")
    if not isinstance(files, dict) or not all(
            isinstance(k, str) and type(v) is int and v >= 0 for k, v in files.items()):
        return "has a malformed 'files' map (expected file name -> non-negative integer offset)"
    for key in ("mark", "tasks"):
        if doc.get(key) is not None and type(doc[key]) is not int:
            return f"has a malformed {key!r} (expected an integer)"
    table_id = doc.get("table_id")
    if table_id is not None and not (isinstance(table_id, str) and 0 < len(table_id) <= 200):
        return "has a malformed 'table_id' (expected a Delta table's id, a string)"
    if "finished" in doc:
        bad = _check_identities(doc["finished"], None, "finished")
        if bad:
            return bad
    if "identity" in doc:
        return _check_identities(doc["identity"], files)
    return None


def _check_identities(identities: Any, files: dict | None, key: str = "identity") -> str | None:
    if not isinstance(identities, dict):
        return f"has a malformed {key!r} map (expected file name -> identity)"
    for name, v in identities.items():
        if files is not None and name not in files:
            return f"has an identity for {name!r}, a file it records no offset for"
        # "gen" may be absent: a record of a squall before it, or of a file system without generations
        ok = (isinstance(v, dict) and set(FileIdentity._fields) - {"gen"} <= set(v) <= set(FileIdentity._fields)
              and all(type(v[k]) is int and v[k] >= 0 for k in ("dev", "ino", "size", "mtime_ns"))
              and isinstance(v["head"], str) and len(v["head"]) <= 128
              and (v.get("gen") is None or (type(v["gen"]) is int and 0 <= v["gen"] < 1 << 32)))
        if not ok:
            return (f"has a malformed identity for {name!r} (expected dev, ino, size, mtime_ns as "
                    f"non-negative integers, head as a hash string and gen, if there, an inode "
                    f"generation: an unsigned 32-bit integer)")
    return None


def dump_progress(spout: str, directory: str, files: dict[str, int], mark: int | None = None,
                  tasks: int | None = None, identities: dict[str, FileIdentity] | None = None,
                  table_id: str | None = None, finished: dict[str, FileIdentity] | None = None) -> bytes:
    """The bytes of a progress file (the inverse of `read_progress`)."""
    doc: dict[str, Any] = {"version": PROGRESS_VERSION, "spout": spout, "directory": directory,
                           "files": dict(sorted(files.items()))}
    if mark is not None:
        doc["mark"] = mark
    if tasks is not None:
        doc["tasks"] = tasks
    if identities is not None:
        doc["identity"] = {name: _identity_doc(identities[name]) for name in sorted(identities)}
    if table_id is not None:
        doc["table_id"] = table_id
    if finished:
        doc["finished"] = {name: _identity_doc(finished[name]) for name in sorted(finished)}
    return json.dumps(doc, indent=0).encode()


def _identity_doc(identity: FileIdentity) -> dict[str, Any]:
    """``identity`` as JSON: without ``gen`` where the file system keeps none (as squall wrote it before)."""
    doc = identity._asdict()
    if identity.gen is None:
        del doc["gen"]
    return doc


class TaskProgress(NamedTuple):
    """A `FileSpout` task's progress file: per file name its `FileMark`, and the files it
    finished that another task's progress file still held a record of (`ProgressDoc.finished`)."""

    marks: dict[str, FileMark]
    finished: dict[str, FileIdentity]


def load_task_progress(path: Path, spout: str, directory: str) -> TaskProgress:
    """Read a `FileSpout` task's progress file (empty if absent)."""
    doc = read_progress(path, spout, directory)
    identities = doc.identities or {}
    return TaskProgress({name: FileMark(offset, identities.get(name)) for name, offset in doc.files.items()},
                        doc.finished or {})


def load_marks(path: Path, spout: str, directory: str) -> dict[str, FileMark]:
    """Read a `FileSpout` task's progress file: per file name its `FileMark`; {} if absent."""
    return load_task_progress(path, spout, directory).marks


def dump_marks(spout: str, directory: str, marks: dict[str, FileMark],
               finished: dict[str, FileIdentity] | None = None) -> bytes:
    """The bytes of a `FileSpout` progress file (the inverse of `load_task_progress`)."""
    return dump_progress(spout, directory, {n: m.offset for n, m in marks.items()},
                         identities={n: m.identity for n, m in marks.items() if m.identity is not None},
                         finished=finished)


class FileCharges(NamedTuple):
    """A `FileSpout` task's retry budgets of one file, kept beside its progress across the
    task's deaths: which file (device and inode, and a hash of its first ``head_len`` bytes,
    as `FileIdentity` tells a file from another put in its place), the byte offset its dead worker may have
    emitted records up to (written before a record at or past it goes out: a line below it read
    again after a restart is a suspect, `squall.external.retry.AloneGate`), the `Charge` of
    each record (by byte offset) that has one, and the records given up to the dead-letter file
    whose offset is not committed yet (read again, they count as done without a second entry)."""

    dev: int
    ino: int
    head_len: int
    head: str
    read_to: int
    charged: dict[int, Charge]
    dead: frozenset[int] = frozenset()


def charges_path(state_dir: Path, index: int) -> Path:
    """Task ``index``'s charges file in the spout's state directory (beside ``task-<index>.json``)."""
    return state_dir / f"charges-{index}.json"


def load_charges(path: Path, spout: str, directory: str) -> dict[str, FileCharges]:
    """Read a `FileSpout` task's charges file: per file name its `FileCharges`; {} if absent. As
    hostile as a progress file: anything but this user's regular, well-formed file of this spout
    and directory is a `FileConnectorError` naming it."""
    named = f"FileSpout {spout!r}: charges file {path}"
    doc = _load_own(path, named, "give every record a fresh retry budget")
    if doc is None:
        return {}
    if not isinstance(doc, dict) or doc.get("version") != PROGRESS_VERSION:
        raise FileConnectorError(f"{named} is not a version-{PROGRESS_VERSION} FileSpout charges file")
    if doc.get("spout") != spout or doc.get("directory") != directory:
        raise FileConnectorError(f"{named} belongs to spout {doc.get('spout')!r} reading {doc.get('directory')!r}, "
                                 f"not to {spout!r} reading {directory!r}")
    out: dict[str, FileCharges] = {}
    try:
        for name, v in doc["files"].items():
            if not (isinstance(name, str) and set(v) == {"dev", "ino", "head_len", "head", "read_to", "charged", "dead"}
                    and all(type(v[k]) is int and v[k] >= 0 for k in ("dev", "ino", "head_len", "read_to"))
                    and isinstance(v["head"], str) and len(v["head"]) <= 128):
                raise ValueError(name)
            out[name] = FileCharges(v["dev"], v["ino"], v["head_len"], v["head"], v["read_to"],
                                    {_offset(k): Charge.parse(c) for k, c in v["charged"].items()},
                                    frozenset(_dead_offset(o) for o in v["dead"]))
    except (AttributeError, KeyError, TypeError, ValueError):
        raise FileConnectorError(f"{named} is malformed (expected file name -> dev, ino, head_len, head, read_to, "
                                 f"charged: byte offset -> \"<failures> <deaths> [<level> [<beside>]]\" and dead: byte offsets)") from None
    return out


def _offset(key: str) -> int:
    offset = int(key)
    if offset < 0 or str(offset) != key:
        raise ValueError(key)
    return offset


def _dead_offset(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(value)
    return value


def dump_charges(spout: str, directory: str, files: dict[str, FileCharges]) -> bytes:
    """The bytes of a `FileSpout` charges file (the inverse of `load_charges`)."""
    doc = {"version": PROGRESS_VERSION, "spout": spout, "directory": directory,
           "files": {name: {"dev": c.dev, "ino": c.ino, "head_len": c.head_len, "head": c.head, "read_to": c.read_to,
                            "charged": {str(o): str(c.charged[o]) for o in sorted(c.charged)},
                            "dead": sorted(c.dead)}
                     for name, c in sorted(files.items())}}
    return json.dumps(doc, indent=0).encode()


def head_hash(fd: int, length: int) -> str:
    """A hash (BLAKE2, hex) of the first ``length`` bytes of the open file ``fd`` (fewer if it is
    shorter): what tells a file from another put in its place."""
    h = hashlib.blake2b(digest_size=16)
    at = 0
    while at < length:
        chunk = os.pread(fd, length - at, at)
        if not chunk:
            break
        h.update(chunk)
        at += len(chunk)
    return h.hexdigest()


# FS_IOC_GETVERSION, _IOR('v', 1, long): 0x80087601 where a long is 8 bytes (x86_64)
_FS_IOC_GETVERSION = (2 << 30) | (struct.calcsize("l") << 16) | (ord("v") << 8) | 1


def file_generation(fd: int) -> int | None:
    """The generation number of the open file ``fd``'s inode (``FS_IOC_GETVERSION``): ext4, btrfs
    and xfs draw a new one each time they hand an inode out, so a file deleted and another
    created on its inode (ext4 reuses a freed inode at once) differ here, where device, inode and
    first bytes may all agree. None where the file system keeps none (tmpfs, overlayfs, NFS,
    FUSE answer ENOTTY or the like; not Linux)."""
    try:
        got = fcntl.ioctl(fd, _FS_IOC_GETVERSION, bytes(8))
    except OSError:
        return None
    return int(struct.unpack("=I", got[:4])[0])  # the kernel writes an int (ext4, btrfs, xfs)


def same_file(was: FileIdentity, dev: int, ino: int, gen: int | None) -> bool | None:
    """Whether the file of device ``dev``, inode ``ino`` and generation ``gen`` is the one
    ``was`` was taken of: False if another inode or another generation of it; True if the same
    inode of the same generation; None (unsure) if the same inode and either generation is
    unknown (a file system without them, a record of a squall before them): a file renamed and a
    new file on the reused inode look alike then. The one place that says so: a caller chooses
    what unsure means where it asks, on the side of reading a line twice rather than never."""
    if (was.dev, was.ino) != (dev, ino):
        return False
    if was.gen is None or gen is None:
        return None
    return was.gen == gen


def _same_file(mark: FileMark, identity: FileIdentity) -> bool:
    """Whether ``mark`` is a record of the file ``identity`` is (its device and inode, which the
    file keeps across renames, and generation if both know it: a file that comes back under the
    name is another one)."""
    return mark.identity is not None and same_file(mark.identity, identity.dev, identity.ino, identity.gen) is not False


def _surely(path: str, was: FileIdentity) -> bool:
    """Whether the file at ``path`` is for sure the one ``was`` was taken of (`same_file` True; it
    is opened to read its generation): not a file created on the inode of one deleted since."""
    try:
        with open_regular(path) as f:
            st = os.fstat(f.fileno())
            return same_file(was, st.st_dev, st.st_ino, file_generation(f.fileno())) is True
    except OSError:
        return False  # gone, or a symlink or FIFO put in its place since the listing


def _done_by(task: TaskProgress, name: str, mark: FileMark) -> bool:
    """Whether ``task``'s progress says it acked every record of the file ``mark`` is about: it
    kept it as finished, or its record is at the file's end (a crash came before it was dropped)."""
    if mark.identity is None:
        return False
    if name in task.finished and _same_file(mark, task.finished[name]):
        return True
    theirs = task.marks.get(name)
    return (theirs is not None and theirs.identity is not None and _same_file(theirs, mark.identity)
            and theirs.offset >= theirs.identity.size)


def mismatch(mark: FileMark, fd: int) -> str | None:
    """Why the open file ``fd`` is not the file ``mark`` was committed for (it was replaced,
    truncated or rewritten), or None if it is that file, perhaps grown by appends."""
    st = os.fstat(fd)
    if st.st_size < mark.offset:
        return f"it is {st.st_size} bytes, shorter than its committed offset {mark.offset} (truncated)"
    was = mark.identity
    if was is None:  # a record of an older squall: only the length can be checked
        return None
    # unsure (no generation to compare) counts as the same file here, as before generations: the
    # first bytes are checked below, and taking it for another would read every file of a file
    # system without generations (tmpfs, overlayfs, NFS) again from its start at every restart
    gen = file_generation(fd)
    if same_file(was, st.st_dev, st.st_ino, gen) is False:
        if (st.st_dev, st.st_ino) == (was.dev, was.ino):
            return (f"it is another file on the same inode (device {st.st_dev} inode {st.st_ino} generation "
                    f"{gen}; the progress at offset {mark.offset} was for generation {was.gen}): replaced")
        return (f"it is another file (device {st.st_dev} inode {st.st_ino}; the progress at offset "
                f"{mark.offset} was for device {was.dev} inode {was.ino}): replaced")
    if st.st_size < was.size:
        return f"it shrank from {was.size} to {st.st_size} bytes since its progress was committed (truncated)"
    length = min(mark.offset, HEAD_BYTES)
    if head_hash(fd, length) != was.head:
        return f"its first {length} bytes changed since its progress was committed (rewritten)"
    return None


def resume_offset(marks: Sequence[FileMark], fd: int) -> tuple[int, list[str]]:
    """Where to resume the open file ``fd`` given every task's record of its name: the highest
    committed offset among the records that are about this file (a file's committed offset only
    grows, so the highest is the latest, whichever task wrote it), else 0; with the reasons the
    other records were set aside."""
    start, rejected = 0, []
    for mark in marks:
        why = mismatch(mark, fd)
        if why is None:
            start = max(start, mark.offset)
        else:
            rejected.append(why)
    return start, rejected


_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK})


def rename_no_replace(src: str | os.PathLike, dst: str | os.PathLike) -> bool:
    """Renames ``src`` to ``dst`` unless ``dst`` exists: True if renamed, False (``src`` left as
    it is) if ``dst`` is another file. ``os.replace`` would silently destroy ``dst``.

    A hard link to ``dst`` and the unlink of ``src``: the link fails if ``dst`` exists, so two
    writers racing for one name never both win. A ``dst`` that is already ``src`` (same device
    and inode: a crash came between the link and the unlink) counts as renamed. On a file system
    without hard links (some FUSE or SMB mounts) it checks, then renames: a writer racing for
    the same name between the two can still be replaced there."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        a, b = os.lstat(src), os.lstat(dst)
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
            return False
    except OSError as e:
        if e.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(dst):
            return False
        os.rename(src, dst)
        return True
    # linked is renamed: ``dst`` holds the file. Should ``src`` be gone already, raising would
    # tell the caller the rename failed, and a sink would replay rows that are in place
    with contextlib.suppress(FileNotFoundError):
        os.unlink(src)
    return True


def create_held(path: str | os.PathLike, mode: int = 0o666) -> BinaryIO:
    """``path``, created (it must not exist) for writing, under an exclusive ``flock`` for as long
    as the returned file is open. The lock tells a writer of the same names that starts meanwhile
    (`remove_if_abandoned`) that this hidden file is a live writer's, not a crashed one's.

    Raises:
        FileExistsError: ``path`` exists.
        OSError: it cannot be created, or locked (then it is removed again).
    """
    while True:
        f = os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode), "wb")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            mine = os.path.samestat(os.fstat(f.fileno()), os.stat(path))
        except FileNotFoundError:
            mine = False
        except BaseException:
            # not held (the file system refused the lock): no one would ever clear it but the
            # next start of a writer of these names, and every retry would leave one more
            f.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise
        if mine:
            return f
        f.close()  # a starting writer removed it between its creation and the lock: made again


def remove_if_abandoned(path: str | os.PathLike) -> None:
    """Removes the hidden file ``path`` unless its writer still holds it (`create_held`): a
    writer that crashed released its lock with its process."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        os.unlink(path)  # a symbolic link by that name is no one's file
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # being written, or being put in place: not stale
        # holding the lock: its writer, if it comes to lock it, finds the name gone and makes it again
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                os.unlink(path)
    finally:
        os.close(fd)


def append_dead_letter(directory: str, name: str, entry: dict, kept: Kept | None = None) -> str:
    """Append ``entry`` as a JSON line to ``<directory>/<name>.dead``, durably (owner-only);
    returns the file's path. A record counts as done only after this returns.

    Raises:
        DiskWriteError: the line cannot be written (a full disk...), naming the file, what it
            holds as ``kept`` says, the cause and what to do.
        FileConnectorError: the directory or file is not this user's own (a symlink...).
    """
    path = os.path.join(directory, f"{name}.dead")
    try:
        return _append_line(directory, path, json.dumps(entry).encode() + b"\n")
    except OSError as e:
        raise write_failure(e, path, kept or Kept("a dead-letter file", "the spout's dead_letter_dir"),
                            atomic=False) from e


_APPENDING = threading.Lock()  # `_append_line`'s, between the threads of this process


def _append_line(directory: str, path: str, line: bytes) -> str:
    """Appends ``line`` to ``path`` in ``directory`` (both this user's own, never a symlink) and
    fsyncs it; a failed append is cut off again, so the next line starts on a line of its own.
    Appends to one file take turns (an ``flock``), so that cutting one off never cuts off
    another writer's."""
    private_dir(directory)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise FileConnectorError(f"dead-letter directory {directory} is not a directory of this user "
                                 f"(a symlink or another user's): refusing to write {os.path.basename(path)} there")
    try:  # O_NOFOLLOW: a planted symlink must not redirect the append to another file
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise FileConnectorError(f"dead-letter file {path} is a symlink: refusing to write through it") from None
    try:
        # one append at a time: a failed one is cut back to the size it found, which would cut off
        # an entry another writer of the file appended meanwhile (two spouts sharing the directory
        # and an input file name, a task and a live copy of it). flock for other processes (its
        # lock goes with the descriptor); the lock of this process for its own threads, which
        # flock does not exclude where it is emulated by POSIX locks (NFS)
        with _APPENDING:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, size)  # no half line for the next entry to run into
                raise
    finally:
        os.close(fd)
    return path


class SpoutFiles(NamedTuple):
    """What a file spout task's own files hold and which setting places them, for the
    `DiskWriteError` a failed write raises: its progress, its dead-letter files, its locks."""

    progress: Kept
    dead_letter: Kept
    locks: Kept


def spout_files(kind: str, spout_id: str, index: int, progress_dir: str, dead_letter_dir: str | None) -> SpoutFiles:
    """The `SpoutFiles` of task ``index`` of spout ``spout_id`` (a ``kind``: FileSpout...) keeping
    its progress in ``progress_dir`` and its dead letters in ``dead_letter_dir`` (None: the default
    under ``progress_dir``)."""
    task = f"{kind} {spout_id!r} task {index}"
    where = f"the {kind}'s progress_dir (storm.local.dir where the topology is built; here {progress_dir})"
    return SpoutFiles(Kept(f"the progress of {task}: what is acked of each file", where),
                      Kept(f"the dead-letter records of {task}",
                           f"the {kind}'s dead_letter_dir" if dead_letter_dir else where),
                      Kept(f"a file lock of {task}", where))


class GiveUp(NamedTuple):
    """A record failed more than the retry limit: its values, how many failures it caused and
    the cause of the last (`FailureCause`)."""

    values: list
    tries: int
    cause: FailureCause


class RetryBook:
    """The records of the current file emitted and not yet acked, by offset (or row), with the
    failed ones scheduled to be emitted again by ``backoff`` (`RetryBackoff`, storm-kafka-client's
    formula), up to its ``max_retries`` re-emits after failures the record caused
    (`FailureCause.record_caused`): one after a lost worker or a timeout is emitted again without
    counting. Times are the caller's, in seconds."""

    def __init__(self, backoff: RetryBackoff) -> None:
        self.backoff = backoff
        self._values: dict[int, list] = {}
        self._tries: dict[int, int] = {}
        self._retry: RetrySchedule[int] = RetrySchedule(backoff)

    def add(self, offset: int, values: list, tries: int = 0) -> None:
        """The record at ``offset`` was emitted for the first time (in this task's life: it
        was charged ``tries`` failures before)."""
        self._values[offset] = values
        if tries:
            self._tries[offset] = tries

    def tries(self, offset: int) -> int:
        """The failures charged to the record at ``offset`` so far."""
        return self._tries.get(offset, 0)

    def ack(self, offset: int) -> bool:
        """Forget the record; False if it was not in flight (a late or foreign ack)."""
        self._tries.pop(offset, None)
        self._retry.done(offset)
        return self._values.pop(offset, None) is not None

    def fail(self, offset: int, cause: FailureCause = UNKNOWN, *, now: float) -> GiveUp | None:
        """Schedule the record to be emitted again; or, past the limit of failures it caused,
        forget it and return `GiveUp` (the caller dead-letters it). None also for a record not
        in flight."""
        if offset not in self._values:
            return None
        tries = self._tries.get(offset, 0)
        if not cause.record_caused:
            self._retry.reschedule(offset, tries, now)
        elif self._retry.schedule(offset, tries + 1, now):
            self._tries[offset] = tries + 1
        else:
            self._tries.pop(offset, None)
            return GiveUp(self._values.pop(offset), tries + 1, cause)
        return None

    def next_retry(self, now: float, may: Callable[[int], bool] = lambda offset: True) -> tuple[int, list] | None:
        """The failed record due earliest, if one is due at ``now`` and ``may(offset)``, to emit
        again; or None (a record ``may`` refuses stays scheduled)."""
        while (offset := self._retry.peek_ready(now)) is not None:
            if offset not in self._values:
                self._retry.done(offset)
                continue
            if not may(offset):
                return None
            self._retry.remove(offset)
            return offset, self._values[offset]
        return None

    @property
    def retrying(self) -> bool:
        """Whether failed records wait to be emitted again (due or not)."""
        return len(self._retry) > 0

    def __contains__(self, offset: int) -> bool:
        return offset in self._values

    def clear(self) -> None:
        """Forget everything (the file is finished)."""
        self._values.clear()
        self._tries.clear()
        self._retry.clear()


def give_up_reason(given_up: GiveUp) -> str:
    """A dead-letter entry's reason for a record given up: its failures and the last cause."""
    return f"failed {given_up.tries} times{given_up.cause.reason_suffix()}"


def owner_of(name: str, tasks: int) -> int:
    """The index of the spout task that reads file ``name`` among ``tasks`` tasks."""
    return stable_hash_one(name) % tasks


# ---------------------------------------------------------------------------------------------
# Readers and translators


def read_line(f: BinaryIO, limit: int | None = None) -> bytes:
    """The default record reader: the next line, newline included (b"" at end of file).

    A line longer than ``limit`` bytes (its newline included) is read past in chunks of
    `SKIP_CHUNK` to the next newline, never held whole, and `RecordTooLarge` is raised with the
    file at the next line: memory stays bounded by ``limit`` whatever the line's length.
    """
    if limit is None:
        return f.readline()
    line = f.readline(limit + 1)
    if len(line) <= limit:
        return line
    size = len(line)
    if not line.endswith(b"\n"):
        del line
        while True:
            chunk = f.readline(SKIP_CHUNK)
            size += len(chunk)
            if not chunk or chunk.endswith(b"\n"):
                break
    raise RecordTooLarge(size)


def _takes_limit(reader: Callable[..., bytes]) -> bool:
    """Whether ``reader`` has a parameter named ``limit`` (it is then called ``reader(f,
    limit=...)``), not only ``f``: a reader written before the limit. By name, not by position,
    so that a reader's own optional argument (``def r(f, sep=b"\\0")``) never receives the limit."""
    try:
        return "limit" in inspect.signature(reader).parameters
    except (TypeError, ValueError):  # a builtin without a signature: called the old way, checked after reading
        return False


def translate_text(record: bytes) -> list:
    """The default translator: the record decoded as UTF-8 without its line ending, as ``[line]``;
    undecodable bytes raise `UnicodeDecodeError`."""
    return [record.decode("utf-8").rstrip("\r\n")]


class _Taking:
    """The collector `FileSpout._take` reads lines through: keeps each line's values and message
    id instead of emitting it; anything else (``report_error``) goes to the spout's collector."""

    def __init__(self, collector: SpoutOutputCollector) -> None:
        self.collector = collector
        self.lines: list[tuple[list, LineAt]] = []

    def emit(self, values: list, msg_id: LineAt, stream: str = DEFAULT_STREAM) -> list[int]:
        self.lines.append((values, msg_id))
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.collector, name)


class FileSpout(Spout, CountsDeadLetters):
    """Emits the records of the files in ``directory``, one tuple each, replayably.

    Files are taken in name order, each by one task, and a task reads one file at a time. Which
    task: by default the one whose index is the stable hash of the name modulo the spout's
    parallelism. With ``claim_files=True``, the first task to claim the file, as HdfsSpout's tasks
    do: it creates the file's lock in ``<progress_dir>/filespout/<spout id>/locks`` and appends
    a heartbeat to it every ``lock_timeout_secs / 4``; a lock that another task sees unchanged
    for ``lock_timeout_secs`` (its owner died or stalled), or whose owner it knows to be dead (an
    earlier run of the same task, a process gone from this host), is taken over, and the file
    resumed at its committed offset. A task that stalled past the timeout gives the file up at its next
    heartbeat. Close releases the task's lock. A directory is listed again when a task has no
    file left (at most every ``poll_secs``), so new files are picked up. Names starting with
    ``.`` or ``_`` are skipped, as Spark does.

    A file may still be written while it is read (a logger, ``cat >> f``): the task follows it as
    it grows, and never emits a line before its newline, whatever the ``reader``: a record that
    stops at the file's end without a newline is read again, whole, once the newline is there
    (the committed offset is never inside a line). The file counts as finished, and is renamed
    done, only once every record is acked and it has not changed (size or mtime) for
    ``quiet_secs`` (default 5 s; a file whose mtime is older than that is finished at once) and
    no process has it open for writing (Linux, writers on this host: a writer paused after a whole
    line or mid-line longer than ``quiet_secs``, logged once); then a last line without a newline
    is a record, as files often end so. A quiet file a writer holds open, every record acked, is
    set aside (`_park`) while the task reads its other files, and read on from its committed
    offset at a later listing. A writer that closes the file and appends again later (``echo >>``
    from a cron job) writes into the file renamed done, where no one reads, once it was closed
    for ``quiet_secs``: set it above such a writer's longest pause, or better, write elsewhere and
    move each file in whole (or write it with ``ignore_suffix`` and rename it), with
    ``quiet_secs=0`` (a file is finished at its end at once, its last line a record whatever it
    ends with). A file cut and written again from its start while it is read (logrotate's
    ``copytruncate``) is read again from its start (`_read_again_from_start`); one cut shorter
    is reported (`_say_if_truncated`). A file renamed while it is read (logrotate's ``create``)
    is read on under its new name from where it was (`_renamed_mark`), by the task that read it.

    A record longer than ``max_record_bytes`` (by default ``topology.filespout.max.record.bytes``,
    16 MiB) is not emitted: the default reader reads past it in 64 KiB chunks to the next newline,
    so a huge line without a newline costs no more memory than the limit, and the dead-letter file
    gets an entry naming file, offset and size (not the record's bytes); the spout goes on with the
    next line.

    Each tuple's message id is a `LineAt` (file, byte offset). On ``fail`` the same line is
    emitted again once ``backoff`` (`RetryBackoff`, storm-kafka-client's formula; default its
    delays, 0 s for the first retry, then 4 ms, 8 ms... at most 10 s) says it is due, up to
    ``max_retries`` re-emits (None: without limit; with ``backoff``, its own); then, and for a record
    the translator cannot read (undecodable bytes, or values not one per field), the raw record is appended to the
    dead-letter file ``<dead_letter_dir>/<file>.dead`` as a JSON line naming file, offset and
    reason, logged, reported, and counted as done, so it is never silently dropped.
    ``dead_letter_dir`` defaults to ``<progress_dir>/filespout/<spout id>/dead-letter``, not the
    watched directory (whoever writes the input could plant a symlink there); it must be a real
    directory of this user and a ``.dead`` file that is a symlink is refused. Symlinks in the
    watched directory are not read.

    Progress: per file the committed offset (everything before it acked) is written to
    ``<progress_dir>/filespout/<spout id>/task-<index>.json`` (atomically and fsynced,
    owner-only) after ``commit_every`` acks or ``commit_secs`` seconds, whichever comes first,
    when a file is finished and on close. ``progress_dir`` is the cluster's ``storm.local.dir``
    (default ``storm-local``, resolved where the topology is built, since squall does not show
    tasks the daemons' settings); it must be reachable by the workers running this spout (a
    local or shared directory). A new topology with the same ``progress_dir`` and
    spout id resumes each file at its committed offset: at-least-once, lines acked after the
    committed offset but before the crash are emitted again. Each record also holds the file's
    `FileIdentity`; a file whose identity no longer matches (another inode, shorter, other first
    bytes: replaced, truncated or rewritten) is read from its start, with a warning naming it.
    A task opening a file takes the highest matching offset among every task's progress files
    (also of indexes at or above the parallelism), and keeps the records of files it no longer
    owns until they are finished, so changing the parallelism between runs loses nothing.

    Retry budgets outlive the task's worker: a line that kills it (a bolt beside it under
    ``topology.bolt.fail.fast``, a segfault) is never failed, so the failures charged to each
    line, and how far each file may have been read, are kept in
    ``<progress_dir>/filespout/<spout id>/charges-<index>.json`` (`FileCharges`, written as the
    progress is). A line read again below where a dead task had read to, or failed as being
    executed when another worker died (``worker-died``), is a suspect (`squall.external.retry.AloneGate`, the Redis Streams spout's rules):
    it goes out in a group of suspects, its level raised beforehand, or alone after its worker
    died with it in a group (or after ``worker-died``), charged beforehand as if its worker will
    die with it, so a poison line is dead-lettered after ``max_retries`` deaths alone and the
    good lines beside it are never charged.

    When every line of a file is acked, the file is renamed with ``done_suffix`` (HdfsSpout moves
    it to its archive directory) and forgotten by the progress file. The rename never replaces a
    file: if ``<name><done_suffix>`` exists (an earlier file of the same name), the first free
    ``<name>.<n><done_suffix>`` (n = 1, 2, ...) is taken, with a warning.

    Args:
        directory: the directory to read.
        fields: the output fields (the translator returns one value per field).
        reader: ``(f, limit) -> bytes``: the next raw record from a binary file (b"" at end), raising
            `RecordTooLarge` after moving past a record longer than ``limit``; default lines
            (`read_line`). The limit is passed by name, to a reader with a parameter called
            ``limit``. A reader of ``f`` alone (or with other optional arguments) still works: its records are measured after they
            are read, so it bounds its memory itself.
        translator: ``bytes -> list``: a record's values, a list or tuple of one value per field;
            default the UTF-8 line without its end. A record it raises on, or returns another
            count of values (or no list or tuple) for, goes to the dead-letter file.
        stream: the stream to emit on.
        claim_files: claim files with lock files rather than own them by name hash.
        lock_timeout_secs: with ``claim_files``, how long an unchanged lock stays its owner's
            (HdfsSpout's ``setLockTimeoutSec``, default 300).
        max_record_bytes: the longest record emitted, in bytes (a line's newline included); None:
            the topology's ``topology.filespout.max.record.bytes`` (default 16 MiB).
        quiet_secs: how long a file must stay unchanged (size and mtime) before it counts as
            finished, its last line without a newline then a record once no process has the file
            open for writing (default 5 s); 0: a file is finished at its end at once (files are
            moved in whole). With any reader, a record that stops at the file's end without a
            newline is held back while the file may grow (a reader whose records do not end in
            newlines has its last record wait there too, till the file grows or is finished).
    """

    def __init__(self, directory: str | os.PathLike, fields: Sequence[str] = ("line",), *,
                 reader: Callable[[BinaryIO], bytes] = read_line,
                 translator: Callable[[bytes], Sequence] = translate_text,
                 stream: str = DEFAULT_STREAM, max_retries: int | None = 3,
                 dead_letter_dir: str | os.PathLike | None = None, done_suffix: str = ".done",
                 ignore_suffix: str = ".ignore", commit_every: int = 1000, commit_secs: float = 1.0,
                 poll_secs: float = 1.0, progress_dir: str | os.PathLike | None = None,
                 claim_files: bool = False, lock_timeout_secs: float = 300.0,
                 max_record_bytes: int | None = None, backoff: RetryBackoff | None = None,
                 quiet_secs: float = DEFAULT_QUIET_SECS, clock: Clock | None = None) -> None:
        if not (isinstance(quiet_secs, (int, float)) and not isinstance(quiet_secs, bool) and 0 <= quiet_secs < float("inf")):
            raise ValueError(f"FileSpout: quiet_secs must be a number of seconds >= 0, not {quiet_secs!r}")
        if commit_every < 1 or commit_secs <= 0 or poll_secs < 0:
            raise ValueError("FileSpout: commit_every must be >= 1, commit_secs > 0 and poll_secs >= 0")
        if not lock_timeout_secs > 0:
            raise ValueError(f"FileSpout: lock_timeout_secs must be > 0, not {lock_timeout_secs!r}")
        if claim_files and poll_secs * 2 >= lock_timeout_secs:  # a watcher's scans must not look like a pause
            raise ValueError(f"FileSpout: with claim_files, poll_secs ({poll_secs}) must be under half of "
                             f"lock_timeout_secs ({lock_timeout_secs})")
        self.backoff = spout_backoff("FileSpout", max_retries, backoff)
        if max_record_bytes is not None and not (type(max_record_bytes) is int and max_record_bytes > 0):
            raise ValueError(f"FileSpout: max_record_bytes must be a positive integer or None, not {max_record_bytes!r}")
        self.directory = os.path.abspath(directory)
        self.fields = list(fields)
        self.reader = reader
        self.reader_takes_limit = _takes_limit(reader)
        self.max_record_bytes = max_record_bytes
        self.translator = translator
        self.stream = stream
        self.max_retries = self.backoff.max_retries
        # by default next to the progress (set in open()), not in the watched directory, where
        # whoever writes the input could plant a symlink to it
        self.dead_letter_dir = os.path.abspath(dead_letter_dir) if dead_letter_dir else None
        self.done_suffix = done_suffix
        self.ignore_suffix = ignore_suffix
        self.commit_every = commit_every
        self.commit_secs = commit_secs
        self.poll_secs = poll_secs
        self.quiet_secs = float(quiet_secs)
        # a record that stops at the file's end without a newline is a line still being written,
        # whichever reader cut it: held back while the file may grow (`_ends_whole`)
        self.holds_tail = quiet_secs > 0
        self.claim_files = claim_files
        self.lock_timeout_secs = lock_timeout_secs
        self.clock = clock or Clock()
        # squall keeps storm.local.dir from tasks (docs/configuration.md), so it is resolved here,
        # where the topology is built: squall's default "storm-local", from this directory
        self.progress_dir = os.path.abspath(progress_dir or "storm-local")

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declares ``fields`` on ``stream``."""
        declarer.declare_stream(self.stream, Fields(*self.fields))

    def open(self, conf: dict, context: TopologyContext, collector: SpoutOutputCollector) -> None:
        """Loads every progress file of this spout; raises `FileConnectorError` if one is corrupt
        or another spout's, naming it."""
        super().open(conf, context, collector)
        if not os.path.isdir(self.directory):
            raise FileConnectorError(f"FileSpout: {self.directory} is not a directory")
        self.spout_id = context.get_this_component_id()
        self.index = context.get_this_task_index()
        self.record_limit: int = self.max_record_bytes or setting(
            conf, MAX_RECORD_KEY, where=f"FileSpout {self.spout_id!r}")
        # how long the last records of a file read to its end may wait for their acks before
        # the task says it is held there (`_watch_end`): the time Storm gives a tuple
        self.end_patience: float = setting(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS,
                                           where=f"FileSpout {self.spout_id!r}")
        self.at_end_since: float | None = None  # when the current file was found read to its end, waiting
        self.end_said = False  # whether that wait was reported, once a file
        self.tasks = len(context.get_component_tasks(self.spout_id))
        self.kept = spout_files("FileSpout", self.spout_id, self.index, self.progress_dir, self.dead_letter_dir)
        try:
            state = private_dir(Path(self.progress_dir) / "filespout" / self.spout_id)
        except OSError as e:
            raise write_failure(e, Path(self.progress_dir) / "filespout" / self.spout_id, self.kept.progress,
                                atomic=False) from e
        self.state_dir = state
        self.progress_path = state / f"task-{self.index}.json"
        if self.dead_letter_dir is None:
            self.dead_letter_dir = str(state / "dead-letter")
        # Every task's records, to choose from when a file is opened (the file's owner under this
        # parallelism may find its record in any task's file, also of an index >= the parallelism);
        # and this task's own records, which it writes back until it replaces them: a record of a
        # file another task now owns stays here until that owner has written its own.
        self.marks: dict[str, list[FileMark]] = {}
        self.own: dict[str, FileMark] = {}
        # files this task finished while another task still held a record of them, kept until
        # that record is gone (`_left_unfinished`, `_prune_finished`)
        self.finished: dict[str, FileIdentity] = {}
        for p, loaded in self._progress_files():
            if p == self.progress_path:
                self.own, self.finished = dict(loaded.marks), dict(loaded.finished)
            for name, mark in loaded.marks.items():
                self.marks.setdefault(name, []).append(mark)
        self.locks: FileLocks | None = None
        self.abandoned: deque[str] = deque()
        if self.claim_files:
            self.locks = FileLocks(state / "locks", f"{self.spout_id}[{self.index}]", self.lock_timeout_secs, self.clock,
                                   self.kept.locks)
        self.head: tuple[int, str] | None = None  # the current file's head hash (length, hash), reused
        self.gen: int | None = None  # the current file's inode generation (`file_generation`)
        self.size_seen = 0  # the current file's largest size seen while it is read (`_say_if_truncated`)
        self._watch_new_file()
        self.queue: deque[str] = deque()
        self.file: str | None = None
        self.handle: BinaryIO | None = None
        self.tracker: OffsetManager | None = None
        self.inflight = RetryBook(self.backoff)
        # Retry budgets that outlive this task's worker (FileCharges): what goes out when, the
        # charges of the current file's records, the lines failed as executed when another worker died
        self.charges_path = charges_path(state, self.index)
        self.kept_charges = Kept(f"the retry budgets of FileSpout {self.spout_id!r} task {self.index}: the "
                                 f"failures charged to its records", self.kept.progress.setting)
        self.charges: dict[str, FileCharges] = load_charges(self.charges_path, self.spout_id, self.directory)
        self.charges_dirty = False
        # Acking off (topology.acker.executors 0): at most once, as the Kafka spout's AT_MOST_ONCE
        # and HdfsSpout's no-ack mode. A line is committed before it goes out (`_take`), so a
        # restart never emits it again; nothing is ever failed, so no retry budget is kept either
        # (a line that kills the worker is past the committed offset already).
        self.at_most_once = conf.get(Config.TOPOLOGY_ACKER_EXECUTORS) == 0
        self.taken: deque[tuple[LineAt, list]] = deque()  # committed, not yet emitted
        # shared with every spout task of this worker that keeps charges: its death is theirs too
        self.gate: AloneGate[int] = AloneGate(None if self.at_most_once else self.backoff.max_retries,
                                              worker_gate(context), gate_patience(conf))
        self.read_to: int = 0  # set by `_reset_charges`; declared here, before the methods that read it
        self._reset_charges()
        self.acks_since_commit = 0
        self.last_commit = self.last_list = self.clock.now()
        self.listed = False
        self.dead_letters = 0
        self.start_dead_letter_counts()
        self.unreadable: set[str] = set()  # files reported as unreadable (once each)
        self.held_said: set[str] = set()  # files said to be held open by a writer (`_writer_holds`, once each)
        self.parked: set[str] = set()  # files set aside while a writer holds them (`_park`), not opened again since
        self._finish_aside()

    def _finish_aside(self) -> None:
        """Renames done the files this task's last run took aside to rename them done and died
        before it could (`_rename_done`): without this, a file whose every line was acked stayed
        under a hidden name, neither done nor read. Such a file is the one of this task's
        records at its end (committed before the file is taken aside) with its inode."""
        finished = {(m.identity.dev, m.identity.ino): name for name, m in self.own.items()
                    if m.identity is not None and m.offset >= m.identity.size}
        if not finished:
            return
        for entry in os.scandir(self.directory):
            if not entry.name.startswith(".finishing.") or not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            name = finished.get((st.st_dev, st.st_ino))
            if name is not None:
                log.warning("FileSpout %r task %d: %s, every line of which was acked, was left at %s by a crash "
                            "while it was renamed done; renaming it done now", self.spout_id, self.index,
                            os.path.join(self.directory, name), entry.path)
                self._done_from_aside(entry.path, os.path.join(self.directory, name))

    # -- reading

    def _progress_files(self) -> list[tuple[Path, TaskProgress]]:
        """Every task's progress file of this spout, ``task-<index>.json``, loaded (raises on a
        bad one, naming it). Not another file the pattern would take (an operator's copy,
        ``task-0.bak.json``): no task writes it, and the listing took its name for an index
        (`_renamed_owners`), raising ValueError from every ``next_tuple``."""
        return [(p, load_task_progress(p, self.spout_id, self.directory))
                for p in sorted(self.state_dir.glob("task-*.json")) if _TASK_FILE.fullmatch(p.name)]

    def _others(self) -> list[TaskProgress]:
        """The progress files of this spout's other tasks, as they are now."""
        return [loaded for p, loaded in self._progress_files() if p != self.progress_path]

    def _list(self) -> None:
        now = self.clock.now()
        if self.listed and now - self.last_list < self.poll_secs:
            return
        self.listed, self.last_list = True, now
        skip = (IN_PROGRESS, self.ignore_suffix, self.done_suffix)
        renamed = self._renamed_owners()
        # files set aside while a writer holds them (`_park`) after the others, so that they wait their turn
        names = sorted((e.name for e in os.scandir(self.directory)
                        if e.is_file(follow_symlinks=False) and e.name[0] not in "._" and not e.name.endswith(skip)
                        and (self._may_claim(e, renamed) if self.claim_files else self._owns(e, renamed))),
                       key=lambda name: (name in self.parked, name))
        self.queue = deque(names)
        if self.locks is not None:
            self.abandoned = deque(self.locks.abandoned())

    def _renamed_owners(self) -> dict[int, tuple[int, str, FileIdentity]]:
        """Per inode (of this directory's device) that a task's progress file has a record of,
        that task's index and the name of the record, for `_owns` and `_may_claim` (tasks of
        an index at or above the parallelism only with ``claim_files``, where no index owns)."""
        dev = os.stat(self.directory).st_dev
        out: dict[int, tuple[int, str, FileIdentity]] = {}
        for p, loaded in self._progress_files():
            index = int(p.name[len("task-"):-len(".json")])  # `_progress_files` takes task-<index>.json only
            for name, mark in loaded.marks.items():
                if mark.identity is not None and mark.identity.dev == dev and (self.claim_files or index < self.tasks):
                    out[mark.identity.ino] = (index, name, mark.identity)
        return out

    @staticmethod
    def _renamed_holder(entry: os.DirEntry, renamed: dict[int, tuple[int, str, FileIdentity]]) -> tuple[int, str] | None:
        """The task index and name of the record of the file ``entry`` under another name (it was
        renamed), if there is one and it is for sure about this very file (`_surely`). A record
        of a file deleted since names an inode the file system may have handed to a new file:
        that file went to the record's task, which read it on from the deleted file's offset
        (x.csv read to its header, deleted while the topology was down; y.csv, same header, on
        its inode: 20 of 21 lines). A file system without generations cannot tell: such a file
        goes to its own task, read from its start (its lines at most twice)."""
        holder = renamed.get(entry.inode())
        if holder is None or holder[1] == entry.name or not _surely(entry.path, holder[2]):
            return None
        return holder[0], holder[1]

    def _may_claim(self, entry: os.DirEntry, renamed: dict[int, tuple[int, str, FileIdentity]]) -> bool:
        """With ``claim_files``: whether the file ``entry`` may be claimed now. Not a file a
        task has a record of under another name whose lock is held (renamed while that task
        reads it through its open handle: claimed under its new name meanwhile, its lines from
        the committed offset went out twice, 831 of 10,000 through two rotations); it is
        claimed once that lock is gone (the file finished, set aside, or its holder's lock
        taken over), and read on from the committed offset."""
        holder = self._renamed_holder(entry, renamed)
        if holder is None:
            return True
        assert self.locks is not None
        return not os.path.lexists(self.locks.directory / holder[1])

    def _owns(self, entry: os.DirEntry, renamed: dict[int, tuple[int, str, FileIdentity]]) -> bool:
        """Whether this task reads the file ``entry``: the one whose index its name hashes to,
        unless it is a file a task has a record of under another name (renamed, by logrotate's
        ``create``...): then that task, which may still be reading it through its open handle
        under the old name, reads it on; a second task reading it meanwhile emitted its lines
        from the committed offset twice. (A record under the file's own name is no claim: the
        task its name hashes to resumes it, `_marks_now`; a renamed file's record is moved to its
        new name by the task that opens it, which hands it over, `_hand_over`.)"""
        holder = self._renamed_holder(entry, renamed)
        if holder is not None:
            return holder[0] == self.index
        return owner_of(entry.name, self.tasks) == self.index

    def _start_next(self) -> bool:
        if self.locks is not None:
            return self._claim_next(self.locks)
        while self.queue:
            if self._open(self.queue.popleft()):
                return True
        return False

    def _claim_next(self, locks: FileLocks) -> bool:
        """Takes over an abandoned file first (HdfsSpout does), else claims the next unclaimed one."""
        while self.abandoned:
            name = self.abandoned.popleft()
            if not os.path.lexists(os.path.join(self.directory, name)):
                locks.remove_abandoned(name)  # renamed done by a task that died before removing its lock
                continue
            last = locks.last_line(name)
            why = locks.why_abandoned(name)
            if locks.take_over(name):
                log.warning("FileSpout %r task %d: took over %s, since %s (its lock's last line: %s); "
                            "reading it from its committed offset",
                            self.spout_id, self.index, os.path.join(self.directory, name), why, last)
                if self._open_claimed(locks, name):
                    return True
        while self.queue:
            name = self.queue.popleft()
            if locks.claim(name) and self._open_claimed(locks, name):
                return True
        return False

    def _open_claimed(self, locks: FileLocks, name: str) -> bool:
        if not self._open(name):
            locks.release(name)
            return False
        assert self.tracker is not None
        locks.record(name, "reading", self.tracker.committable)
        return True

    def _marks_now(self, name: str, others: list[TaskProgress]) -> list[FileMark]:
        """The records of ``name`` as they are now (``others``: the other tasks' progress files,
        just read): another task may have read part of it since open (claimed, and died or
        released it; or, by name, read it on after a rename, `_hand_over`); with the ones
        loaded at open, without claims (a task of another parallelism's)."""
        marks = [loaded.marks[name] for loaded in others if name in loaded.marks]
        if self.locks is None:
            marks += self.marks.get(name, ())
        return marks + ([self.own[name]] if name in self.own else [])

    def _open(self, name: str) -> bool:
        """Opens ``name`` at its committed offset as the current file; False if it is gone or is
        not a regular file."""
        path = os.path.join(self.directory, name)
        try:  # a symlink put in the file's place since the listing is not read, nor a FIFO blocked on
            handle = open_regular(path)  # kept open across calls
        except FileNotFoundError:
            return False  # taken away since the listing
        except NotRegular as e:
            if e.errno != errno.ELOOP:  # a symlink is never read, and not said either
                # a FIFO, directory or device put in the listed file's place: its read hung the spout
                # or raised out of next_tuple naming only a descriptor. The listing skips it from now on
                log.warning("FileSpout %r: skipped %s: %s, put in place of the one listed", self.spout_id, path,
                            e.strerror)
            return False
        except OSError as e:
            if name not in self.unreadable:
                self.unreadable.add(name)  # tried again at every listing, reported once
                message = (f"FileSpout {self.spout_id!r}: cannot open {path}: "
                           f"{e.strerror or e}; skipping it until it can be read")
                self.collector.report_error(message)  # which logs it
            return False
        self.unreadable.discard(name)
        self.parked.discard(name)
        others = self._others()
        start, rejected = resume_offset(self._marks_now(name, others), handle.fileno())
        self._move_record_of_renamed(name, handle.fileno())
        if not start:
            moved = self._renamed_mark(name, handle.fileno(), others)
            if moved is not None and self._hand_over(name, moved):
                handle.close()
                return False
            if moved is not None:
                start, rejected = moved.offset, []
        if rejected and not start:
            log.warning("FileSpout %r: reading %s from its start, not at its recorded progress: %s",
                        self.spout_id, os.path.join(self.directory, name), "; ".join(rejected))
        handle.seek(start)
        self.file, self.handle, self.tracker = name, handle, OffsetManager(name, start)
        self.head = None
        self.gen = file_generation(handle.fileno())  # its inode's generation, kept in its record
        self.size_seen = 0
        self._watch_new_file()
        self.at_end_since, self.end_said = None, False
        self.own[name] = FileMark(start, self._identity(start))
        self._load_file_charges(name, handle.fileno(), start, bool(rejected) and not start)
        return True

    def _move_record_of_renamed(self, name: str, fd: int) -> None:
        """This task's record of ``name`` about another file than the one there now (``fd``) goes
        to the name that file has now, if it is still in the directory (logrotate's ``create``
        renamed ``a.log`` to ``a.log.1`` while the topology was down, and the logger started a new
        ``a.log``). ``a.log`` sorts first: opened first, its new record replaced the rotated
        file's, and ``a.log.1`` was read again from its start (of 1,000 lines, 600 acked before a
        restart went out twice)."""
        mark = self.own.get(name)
        if mark is None or mark.identity is None:
            return
        st = os.fstat(fd)
        if (mark.identity.dev, mark.identity.ino) == (st.st_dev, st.st_ino):
            return
        now = self._renamed_to(mark.identity.dev, mark.identity.ino)
        # for sure the file of the record, not a new one on the inode of the record's file deleted since
        if (now is not None and now != name and now not in self.own
                and _surely(os.path.join(self.directory, now), mark.identity)):
            self.own[now] = mark  # `_open` resumes it from there (`resume_offset` checks its first bytes)
            log.info("FileSpout %r task %d: %s is now %s; its record (byte %d) goes with it",
                     self.spout_id, self.index, os.path.join(self.directory, name), now, mark.offset)

    def _renamed_mark(self, name: str, fd: int, others: list[TaskProgress]) -> FileMark | None:
        """The record of the open file ``fd``, listed as ``name``, committed under another
        name: the file was renamed (logrotate's ``create``, a ``mv`` of a file being read: its
        device, inode and generation stay, and `mismatch` checks its first bytes too; a file
        system without generations cannot tell a renamed file from a new one on the reused inode
        of one deleted, `same_file`: such a file is read from its start). From this task's
        records (whose record under the old name goes, the file's being this one now) and the
        other tasks' progress files as they are now (``others``); the highest, None if there is
        none. Before, a renamed file was a new name, read again from its start: of 10,000 lines
        written through two rotations, 16,400 tuples."""
        st = os.fstat(fd)
        gen = file_generation(fd)
        found: list[tuple[str, FileMark, bool]] = []
        for owner in [self.own, *(loaded.marks for loaded in others)]:
            for old, mark in owner.items():
                if (old != name and mark.identity is not None and mark.offset
                        and same_file(mark.identity, st.st_dev, st.st_ino, gen) is True and mismatch(mark, fd) is None):
                    found.append((old, mark, owner is self.own))
        if not found:
            return None
        old, mark, _ = max(found, key=lambda f: f[1].offset)
        for was, _, own in found:
            if own and was != self.file:
                del self.own[was]  # the file is recorded under its new name from now on
        log.info("FileSpout %r task %d: %s is %s renamed; reading it on from byte %d, committed under its old name",
                 self.spout_id, self.index, os.path.join(self.directory, name), old, mark.offset)
        return mark

    def _hand_over(self, name: str, mark: FileMark) -> bool:
        """Without claims: whether the renamed file ``name``, whose record (``mark``, this
        task's under its old name: `_owns` gave it this task) is now this task's under the new
        name, belongs to another task by that name; then the record is committed there, for that
        task to read the file on from it (`_marks_now`), and this one does not read it. Read on
        here, its record under the new name made it that task's at its next listing, which read
        it from its start meanwhile (of 500 lines, 300 acked before a restart, each went out twice)."""
        if self.locks is not None or owner_of(name, self.tasks) == self.index:
            return False
        self.own[name] = mark
        self._commit()
        log.info("FileSpout %r task %d: %s, renamed, is task %d's by its name now; it reads it on from byte %d",
                 self.spout_id, self.index, os.path.join(self.directory, name), owner_of(name, self.tasks), mark.offset)
        return True

    def _watch_new_file(self) -> None:
        """A new current file (or none): not yet looked at for growth (`_still_growing`)."""
        self.seen_stat: tuple[int, int] | None = None  # its (size, mtime_ns) when last looked at
        self.changed_at = 0.0  # when (this task's clock) it was last seen to change
        self.waiting: int | None = None  # its size when found at its end still growing: not read again till it changes
        self.cut = False  # it shrank under the task (truncated): read to its end, never waited for
        self.cut_said = False  # the truncation was reported (once a file)
        self.waiting_tail = False  # what it waits for ends in a line without its newline
        self.end_before = 0  # a size the file had before the record being read was read (`_ends_whole`)
        self.writer_look_at = float("-inf")  # when to ask again whether a writer has it open (`_writer_holds`)
        self.writer_open = False  # the answer last given
        self.held_open = False  # quiet, but a writer has it open: waited for (`_still_growing`), or parked (`_park`)

    def _still_growing(self, unfinished: bool = False) -> bool:
        """Whether the current file, read to the end of what it holds (or, ``unfinished``, up to a
        line without its newline), may still grow: it changed (its size or mtime) within the last
        ``quiet_secs`` by this task's clock; at the first look, within ``quiet_secs`` of its
        mtime, so a file written long ago is finished at once. A quiet file may also still grow
        while a process has it open for writing (`_writer_holds`: a writer paused mid-line, or
        after a whole line, longer than ``quiet_secs``); ``held_open`` says so, and `_park` may
        then set the file aside for the task's other files. A file that shrank was truncated under the
        task: it is never waited for (`_say_if_truncated` reports it). While it grows,
        ``waiting`` keeps the size it was found at: `next_tuple` reads it again only once that
        changed, or once it is quiet and closed."""
        self.waiting = None
        self.held_open = False
        if not self.quiet_secs or self.cut:
            return False
        assert self.handle is not None
        st = os.fstat(self.handle.fileno())
        now = self.clock.now()
        if st.st_size < max(self.size_seen, self.handle.tell()):
            self.cut = True  # a writer that goes on after a truncation writes where this task never reads
            return False
        seen = (st.st_size, st.st_mtime_ns)
        if self.seen_stat is not None and seen != self.seen_stat and self._rewritten():
            # cut and written again past where the task is before it looked (copytruncate and a
            # busy logger): what is there now is not the rest of the lines read
            self.cut = True
            return False
        self.size_seen = st.st_size
        if seen != self.seen_stat:
            if self.seen_stat is None:  # its mtime says how long it has been quiet (at most a quiet time, for a skewed clock)
                self.changed_at = now - min(max(time.time() - st.st_mtime_ns / 1e9, 0.0), self.quiet_secs)
            else:
                self.changed_at = now
            self.seen_stat = seen
        self.end_before = max(self.end_before, st.st_size)
        if now - self.changed_at < self.quiet_secs:
            self.waiting, self.waiting_tail = st.st_size, unfinished
            return True
        if self._writer_holds(now, unfinished):
            self.waiting, self.waiting_tail, self.held_open = st.st_size, unfinished, True
            return True
        return False

    def _rewritten(self) -> bool:
        """Whether the current file's first bytes (hashed at the last commit: `_identity`) are
        gone or changed: it was cut and written again from its start under the task."""
        if self.head is None or not self.head[0]:
            return False
        assert self.handle is not None
        fd = self.handle.fileno()
        return os.fstat(fd).st_size < self.head[0] or head_hash(fd, self.head[0]) != self.head[1]

    def _writer_holds(self, now: float, unfinished: bool) -> bool:
        """Whether a process still has the current file open for writing, asked at most every
        `WRITER_LOOK_SECS` (`squall.external._writers.open_for_writing`; where that cannot be
        told, no: the quiet rule alone decides). A writer that paused longer than
        ``quiet_secs`` after a whole line goes on writing into the file as surely as one paused
        mid-line: before, such a file was renamed done at the pause, and every line after it went
        into the ``.done`` file, read by no one (8,000 of 10,000 lines from four loggers pausing
        1.5 s with ``quiet_secs`` 0.5). Logged once a file by this task (``unfinished``: the
        file ends in a line without its newline)."""
        if now < self.writer_look_at:
            return self.writer_open
        assert self.handle is not None and self.file is not None
        self.writer_look_at = now + WRITER_LOOK_SECS
        self.writer_open = bool(open_for_writing(self.handle.fileno()))
        if self.writer_open and self.file not in self.held_said:
            self.held_said.add(self.file)
            ends = "in a line without its newline" if unfinished else "in a whole line"
            log.warning("FileSpout %r task %d: %s ends %s, unchanged for %.1f s (quiet_secs), and a process "
                        "still has it open for writing: it is not finished until the writer closes it; the task "
                        "reads its other files meanwhile, coming back to this one at each listing (poll_secs)",
                        self.spout_id, self.index, os.path.join(self.directory, self.file), ends, self.quiet_secs)
        return self.writer_open

    def _may_park(self) -> bool:
        """Whether the current file, quiet but held open by a writer (``held_open``), may be set
        aside for another: every record of it is acked (none in flight, none to retry, none
        taken and not emitted), and another file waits for this task (listed again if the
        queue is empty, at most every ``poll_secs``)."""
        if not self.held_open or self.tracker is None or self.tracker.pending or self.inflight.retrying or self.taken:
            return False
        if not self.queue and not self.abandoned:
            self._list()
        return any(name != self.file for name in self.queue) or bool(self.abandoned)

    def _park(self) -> None:
        """Sets the current file, every record of it acked and a writer still holding it, aside:
        its progress is committed (its offset the line the writer is in, or the file's end) and
        its lock released, and the task goes on with its other files; the file stays under its
        name, to be opened again at the next listing and read on from the committed offset. Before,
        a task waited on such a file without reading its other files, however long the writer
        paused."""
        assert self.handle is not None and self.file is not None
        name = self.file
        # nothing past where it is went out: a line read there later is no suspect
        read_to = max(self.handle.tell(), self.read_before)
        if read_to != self.read_to:
            self.read_to = read_to
            self.charges_dirty = True
        assert self.tracker is not None
        own = self.own.get(name)
        if self.acks_since_commit or self.charges_dirty or own is None or own.offset != self.tracker.committable:
            self._commit()  # else set aside again, nothing read since: no write
        self.handle.close()
        self.parked.add(name)
        if self.locks is not None:
            self.locks.release(name)
        self.file = self.handle = self.tracker = None
        self.inflight.clear()
        self._reset_charges()
        self._watch_new_file()
        self.queue = deque(n for n in self.queue if n != name)
        log.debug("FileSpout %r task %d: set %s aside, a writer holding it open, for its next file",
                  self.spout_id, self.index, os.path.join(self.directory, name))

    def _ends_whole(self, record: bytes | None) -> bool | None:
        """Whether the record just read (None: one read past, above the size limit) is whole:
        True if it ends in a newline, or stops before an end the file had before it was read
        (where the reader cut it); False if it stops at the file's end without a newline, which
        is a line still being written for a line-based reader, whichever reader it is (a record
        of a reader that is not line-based, such as fixed-size binary records, waits there too:
        it goes out once the file grows past it or is finished); None if the file grew while
        it was read, so that which it is is not known: it is read again."""
        assert self.handle is not None
        if record is not None and self.reader is read_line:
            return record[-1] == 10  # readline stops without a newline only at the end of the file
        at = self.handle.tell()
        if at < self.end_before:
            return True
        fd = self.handle.fileno()
        ends_line = at > 0 and os.pread(fd, 1, at - 1) == b"\n"  # the file's byte: a reader may strip it
        self.end_before = max(self.end_before, os.fstat(fd).st_size)  # for the next record
        if ends_line:
            return True
        return False if self.end_before <= at else None

    def _reset_charges(self) -> None:
        """No file, or a new one: nothing in flight, no line read before, nothing charged."""
        self.gate.clear()   # the lines of the file before: done, or their acks ignored
        self.read_before = 0   # a line below it was read by a task of this file that died
        self.read_to = 0       # what this task may have emitted up to, as written
        self.shortest = READ_AHEAD   # the shortest line read since read_to was last moved
        self.charged: dict[int, Charge] = {}
        self.suspects: set[int] = set()   # failed as worker-died: emitted alone from now on
        self.dead: set[int] = set()       # dead-lettered, not yet below the committed offset

    def _load_file_charges(self, name: str, fd: int, start: int, replaced: bool) -> None:
        """The charges of the open file ``name`` (resumed at ``start``) that every task's charges
        file keeps for this very file (its device and inode and first bytes; none if its
        progress was set aside, ``replaced``): the furthest any task read it to, and the highest
        charge of each record not yet committed."""
        self._reset_charges()
        st = os.fstat(fd)
        self.charges_head = min(st.st_size, HEAD_BYTES), ""
        if not self.gate.counting:
            return
        self.charges_head = self.charges_head[0], head_hash(fd, self.charges_head[0])
        for p in sorted(self.state_dir.glob("charges-*.json")):
            kept = self.charges if p == self.charges_path else load_charges(p, self.spout_id, self.directory)
            c = kept.get(name)
            if (replaced or c is None or (c.dev, c.ino) != (st.st_dev, st.st_ino) or c.head_len > st.st_size
                    or head_hash(fd, c.head_len) != c.head):
                continue
            self.read_before = max(self.read_before, c.read_to)
            for offset, charge in c.charged.items():
                # the highest charge, then the highest level (a task that read it since raised it)
                was = self.charged.get(offset, Charge())
                if offset >= start and (charge.retries, charge.level, charge.beside) > (was.retries, was.level, was.beside):
                    self.charged[offset] = charge
            self.dead |= {offset for offset in c.dead if offset >= start}
        self.read_to = self.read_before

    def _suspect(self, offset: int) -> bool:
        """Whether the line at ``offset`` goes out as a suspect, in a group or alone (`AloneGate`)."""
        return self.gate.counting and (offset < self.read_before or offset in self.suspects)

    def _group_size(self, offset: int) -> int:
        """How many suspects the line at ``offset`` may go out with, itself included: one failed
        as worker-died alone, else by its level (`squall.external.retry.group_size`)."""
        if offset in self.suspects:
            return 1
        return group_size(self.charged.get(offset, Charge()).level)

    def _charge(self, offset: int) -> Charge:
        """The line's charge as it stands (its failures so far, its deaths alone so far, its
        level, its deaths beside others)."""
        kept = self.charged.get(offset, Charge())
        return Charge(self.inflight.tries(offset), kept.deaths, kept.level, kept.beside)

    def _hold(self, suspect: bool, size: int) -> bool:
        """`AloneGate.hold`; a suspect alone it set aside (others go out beside it from now on)
        has its death charged before it went out made a death beside others, written before
        anything goes out beside it."""
        held = self.gate.hold(suspect, size, self.clock.now())
        aside = self.gate.set_aside_alone()
        if aside:
            warn_stood_alone(log, f"FileSpout {self.spout_id!r} task {self.index}", len(aside), self.gate.patience)
            for offset in aside:
                self.charged[offset] = self.charged[offset].set_aside()
            self._write_charges()
            for offset in aside:
                self.gate.mark_beside(offset)
        return held

    @staticmethod
    def _marked(charge: Charge, size: int) -> Charge:
        """The mark written before a suspect goes out in a group of up to ``size``: alone, its
        charge as dying; in a group, its level raised."""
        return charge.dying() if size == 1 else charge.in_group()

    def _set_charge(self, offset: int, charge: Charge) -> None:
        """Keeps ``charge`` for the line at ``offset`` (none, if it is no mark), to be written."""
        if charge.is_mark:
            self.charged[offset] = charge
        else:
            self.charged.pop(offset, None)
        self.charges_dirty = True

    def _given_up(self, offset: int) -> None:
        """The line at ``offset`` is in the dead-letter file: its charge goes, and until the
        committed offset passes it, a restart that reads it again counts it as done."""
        self.charged.pop(offset, None)
        self.suspects.discard(offset)
        if self.gate.counting:
            self.dead.add(offset)
            self._write_charges()

    def _write_charges(self) -> None:
        """Writes this task's charges file, durably: the current file's read-to mark and charges."""
        if not self.gate.counting:
            return
        if self.file is not None and self.handle is not None:
            st = os.fstat(self.handle.fileno())
            # a dead letter's mark goes once the progress written says the line is done
            committed = self.tracker.committed_offset if self.tracker is not None else 0
            self.dead = {offset for offset in self.dead if offset >= committed}
            self.charges[self.file] = FileCharges(st.st_dev, st.st_ino, *self.charges_head, self.read_to,
                                                  dict(self.charged), frozenset(self.dead))
        write_durably(self.charges_path, dump_charges(self.spout_id, self.directory, self.charges), self.kept_charges)
        self.charges_dirty = False

    def next_tuple(self) -> None:
        """Re-emits a failed line if any, else emits the next record of the current file; with
        acking off, the next line taken and committed (`_take`)."""
        if self.at_most_once:
            if not self.taken:
                self._take()
            if self.taken:
                msg_id, values = self.taken.popleft()
                # acked already (`_take`): the ack emit makes is a late one, ignored
                self.collector.emit(values, msg_id, self.stream)
            return
        self._turn()

    def _turn(self) -> None:
        try:
            self._next_tuple()
        finally:
            self.gate.turn_ended()   # a line let go and not emitted after all, a claim not needed

    def _take(self) -> None:
        """At most once (acking off): reads up to ``commit_every`` lines of the current file as
        `_next_tuple` would emit them, counts them as acked and commits the offset past them,
        durably, before any of them goes out (`taken`). A crash loses the lines taken and not yet
        emitted, never emits one twice: one durable write per ``commit_every`` lines. Before, the
        lines were acked as they went out and committed every ``commit_every`` acks or
        ``commit_secs``, so a restart emitted again up to that many lines its worker had emitted."""
        real, capture = self.collector, _Taking(self.collector)
        self.collector = capture  # type: ignore[assignment]
        try:
            for _ in range(self.commit_every):
                before = len(capture.lines)
                self._turn()
                if len(capture.lines) == before:
                    break   # at the file's end, waiting, or a line set aside: commit what was taken
        finally:
            self.collector = real
        # taken first: the acks below may finish the file, which waits for `taken` (`_maybe_finish`)
        self.taken.extend((msg_id, values) for values, msg_id in capture.lines)
        for _, msg_id in capture.lines:
            self.ack(msg_id)
        if self.acks_since_commit:
            self._commit()

    def _next_tuple(self) -> None:
        if self.locks is not None:
            self._keep_claim(self.locks)
        held = False

        def may(offset: int) -> bool:
            nonlocal held
            held = self._hold(self._suspect(offset), self._group_size(offset))
            return not held

        again = self.inflight.next_retry(self.clock.now(), may)
        if again is not None:
            offset = again[0]
            size = self._group_size(offset)
            alone = self.gate.goes_alone(self._suspect(offset))
            if alone:   # marked beforehand: the death that would end it leaves no one to mark it
                self.charged[offset] = self._marked(self._charge(offset), size)
                self._write_charges()
            self.gate.emitted(offset, alone, size)
            self.collector.emit(again[1], LineAt(self.file, offset), self.stream)  # type: ignore[arg-type]
            return
        if held:   # a suspect waits for what is in flight, and nothing goes out beside one
            self._maybe_commit()
            return
        if self.handle is None:
            self._list()
            if not self._start_next():
                self._maybe_commit()
                return
        assert self.handle is not None and self.tracker is not None
        if self.waiting is not None:
            was = self.waiting
            if self._still_growing(self.waiting_tail) and self.waiting == was:  # nothing new yet at the end of a growing file
                if self._may_park():
                    self._park()
                    return
                self._watch_end()
                self._maybe_commit()
                return
            self.waiting = None  # grown (or quiet): read on
        if self.cut:  # truncated under the task: what is past here is no line of what it read
            self._maybe_finish()
            if self.handle is not None:
                self._watch_end()
            self._maybe_commit()
            return
        offset = self.handle.tell()
        suspect = self._suspect(offset)
        size = self._group_size(offset)
        if self._hold(suspect, size):
            self._maybe_commit()
            return
        try:
            record = self._read()
        except RecordTooLarge as e:
            size = e.size  # read here: the name e ends with the except block
            whole = self._ends_whole(None) if self.holds_tail else True
            if whole is None or (not whole and (self._still_growing(unfinished=True) or self.cut)):
                self.handle.seek(offset)  # still being written: skipped whole once its newline comes
                self._maybe_commit()
                return
            self._set_aside(offset, lambda: self._dead_letter_too_large(offset, size))
            return
        whole = self._ends_whole(record) if record and self.holds_tail else True
        if whole is None:  # the file grew while it was read: read it again
            self.handle.seek(offset)
            self._maybe_commit()
            return
        # a line without its newline at a file cut under the task (`cut`) is a piece of a line: never emitted
        if not record or (not whole and (self._still_growing(unfinished=True) or self.cut)):
            if record:  # a line still being written: read again, whole, once its newline is there
                self.handle.seek(offset)
            self._maybe_finish()
            if self.handle is not None:
                self._watch_end()
            self._maybe_commit()
            return
        if offset in self.dead:   # dead-lettered by a task that died before its commit passed it
            self._set_aside(offset, lambda: None)
            return
        charge = self.charged.get(offset, Charge())
        if suspect and self.gate.gives_up(charge):   # its worker died with it too often (alone, or beside others)
            reason, cause = self.gate.death_reason(charge)

            def write() -> None:
                self._write_dead_letter(offset, reason, {"record": record.decode("utf-8", "backslashreplace"),
                                                         "cause": cause.as_dict()}, cause)
                self._given_up(offset)

            self._set_aside(offset, write)
            return
        try:
            translated = self.translator(record)
        except Exception as e:  # noqa: BLE001 - the user's translator or the decoder: the record is bad, not the spout
            reason = f"unreadable record: {type(e).__name__}: {e}"  # here: the name e ends with the except block
            self._set_aside(offset, lambda: self._dead_letter(offset, record, reason))
            return
        # a wrong count would make emit raise: the worker dies, and its restart reads this record again
        wrong = arity_error(translated, self.fields)
        if wrong is not None:
            self._set_aside(offset, lambda: self._dead_letter(offset, record, f"unreadable record: {wrong}"))
            return
        values = list(translated)
        end = self.handle.tell()
        self.shortest = min(self.shortest, end - offset)
        alone = self.gate.goes_alone(suspect)
        if self.gate.counting and (alone or end > self.read_to):
            # written before it goes out: how far this task may have emitted, and a suspect's
            # mark as if its worker dies with it
            try:
                if end > self.read_to:
                    self.read_to = end + min(READ_AHEAD, READ_AHEAD_LINES * self.shortest)
                    self.shortest = READ_AHEAD
                if alone:
                    self.charged[offset] = self._marked(charge, size)
                self._write_charges()
            except BaseException:
                self.handle.seek(offset)   # read again, not lost
                raise
        self.tracker.add_to_emitted(offset, end)
        # a wait at the file's end for acks is timed from the last record out (`_watch_end`): a
        # line a paused writer finished after a minute is not one unacked for a minute
        self.at_end_since = None
        self.inflight.add(offset, values, charge.retries)
        self.gate.emitted(offset, alone, size)
        self.collector.emit(values, LineAt(self.file, offset), self.stream)  # type: ignore[arg-type]

    def _watch_end(self) -> None:
        """The current file is read to its end and some of its records are not acked: the task
        opens its next file only once they are. Says so, once a file, when no ack came for
        ``topology.message.timeout.secs``: a bolt that acks a record only when later records
        reach it (a count window that is not full, an event-time window waiting for its
        watermark) holds them for good, since the later records are in the next file, and
        squall's windows keep their tuples from timing out. Before, the spout stopped there
        without a word: a tumbling ``Count.of(5)`` window behind it read the first file of each
        task and nothing more, nothing failed, nothing reported."""
        now = self.clock.now()
        if self.at_end_since is None:
            self.at_end_since = now
            return
        if self.end_said or now - self.at_end_since < self.end_patience:
            return
        assert self.tracker is not None and self.file is not None
        if not self.tracker.pending:
            return  # a retry due later, not a wait for acks
        self.end_said = True
        self.collector.report_error(
            f"FileSpout {self.spout_id!r} task {self.index}: {os.path.join(self.directory, self.file)} is read to its end, "
            f"but {self.tracker.pending} of its records have not been acked for {now - self.at_end_since:.0f} s "
            f"({Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS}); the task opens its next file only once they are. A bolt that "
            f"acks a record only when later records reach it (a count window, or an event-time window that is not "
            f"persistent) holds them for good, as the later records are in the next file: make such a window "
            f"persistent (with_persistence(): it acks its inputs at each checkpoint), or use a duration window in "
            f"processing time")

    def _set_aside(self, offset: int, write: Callable[[], None]) -> None:
        """Counts the record read from ``offset`` up to here as done once ``write`` has put it in
        the dead-letter file. If that write fails (a full disk), the file goes back to ``offset``,
        so the record is read again rather than lost, and the error is raised."""
        assert self.handle is not None and self.tracker is not None
        end = self.handle.tell()
        try:
            write()
        except BaseException:
            self.handle.seek(offset)
            raise
        self.tracker.add_to_emitted(offset, end)
        self._done(offset)

    def _read(self) -> bytes:
        """The current file's next record (b"" at its end); `RecordTooLarge`, the file past it,
        for a record above the limit."""
        assert self.handle is not None
        if self.reader_takes_limit:
            return self.reader(self.handle, limit=self.record_limit)  # type: ignore[call-arg]
        record = self.reader(self.handle)
        if len(record) > self.record_limit:
            raise RecordTooLarge(len(record))
        return record

    def activate(self) -> None:
        """Renews the current file's lock at once (a long deactivation lets it age)."""
        if self.locks is not None:
            self._keep_claim(self.locks)

    def _keep_claim(self, locks: FileLocks) -> None:
        """Heartbeats the current file's lock when due; gives the file up if another task took
        it over (this task stalled longer than the timeout)."""
        name = self.file
        if name is None or not locks.due(name):
            return
        assert self.tracker is not None
        if not locks.beat(name, self.tracker.committable):
            self._give_up(name)

    def _give_up(self, name: str) -> None:
        """Drops the current file, whose lock another task now holds: it reads the file from the
        committed offset, and this task's acks still to come for it are ignored."""
        assert self.handle is not None
        log.warning("FileSpout %r task %d: gave up %s: another task took its lock over (this one went "
                    "without a heartbeat for lock_timeout_secs, %ss, or was taken for dead after a restart "
                    "of this task); that task reads it from the committed offset, so the lines not acked "
                    "here are emitted again",
                    self.spout_id, self.index, os.path.join(self.directory, name), self.lock_timeout_secs)
        self._commit()
        self.handle.close()
        self.file = self.handle = self.tracker = None
        self.inflight.clear()
        self._reset_charges()   # its new holder reads them from this task's charges file

    # -- acks

    def ack(self, msg_id: Any) -> None:
        """The line is done: the committed offset may move past it."""
        if self.locks is not None:  # a spout held at max pending gets acks, not next_tuple calls
            self._keep_claim(self.locks)
        if self._ours(msg_id) and self.inflight.ack(msg_id.offset):
            offset = msg_id.offset
            grouped = self.gate.in_group(offset)
            alone = self.gate.ended(offset) and not grouped
            self.suspects.discard(offset)
            if self.charged.pop(offset, None) is not None:
                self.charges_dirty = True
            # its charge as dying gone before anything else goes out; a group's raised levels
            # once its last member ended (one write a group: a level left behind by a death
            # charges nothing, but a file that finishes meanwhile is not written again)
            if alone or (grouped and not self.gate.group):
                self._write_charges()
            self._done(offset)

    def fail(self, msg_id: Any) -> None:
        """A failure without a cause: counted as one the line caused (`fail_with`)."""
        self.fail_with(msg_id, UNKNOWN)

    def fail_with(self, msg_id: Any, cause: FailureCause) -> None:
        """Re-emits the line, or after ``max_retries`` re-emits for failures it caused gives it
        to the dead-letter file, with the cause (`squall.FailureCause`)."""
        if self.locks is not None:
            self._keep_claim(self.locks)
        if not self._ours(msg_id) or msg_id.offset not in self.inflight:
            return
        self.at_end_since = None  # not held: failed, and replayed (a store that is down fails them, at the backoff's pace)
        offset = msg_id.offset
        grouped = self.gate.in_group(offset)
        beside = self.gate.beside(offset)
        marked = self.gate.ended(offset)
        alone = marked and not grouped
        if self.gate.lost_worker(cause):
            self.suspects.add(offset)
        kept = self.charged.get(offset, Charge())
        deaths = kept.deaths - (alone and not beside)   # alone: charged a death beforehand
        level = kept.level - grouped          # in a group: its level raised beforehand
        besides = kept.beside - beside        # set aside: a death beside others, beforehand
        given_up = self.inflight.fail(offset, cause, now=self.clock.now())
        if self.gate.counting and (marked or cause.record_caused):
            # alone, it was charged beforehand as a death: that charge becomes the failure it
            # caused, or is taken back (a timeout, a lost worker, a rollback: this spout lives);
            # in a group, its level raised beforehand is taken back so too, and set aside, its
            # death beside others
            self._set_charge(offset, Charge(self.inflight.tries(offset), deaths, level, besides))
        if given_up is not None:
            record = json.dumps(given_up.values, default=repr).encode()
            self._write_dead_letter(offset, give_up_reason(given_up),
                                    {"record": record.decode("utf-8", "backslashreplace"),
                                     "cause": given_up.cause.as_dict()}, given_up.cause)
            self._given_up(offset)   # after its dead letter: a crash between repeats the entry
        if (alone or (grouped and not self.gate.group)) and self.charges_dirty:   # before the next one goes out
            self._write_charges()
        if given_up is not None:
            self._done(offset)

    def _ours(self, msg_id: Any) -> bool:
        return isinstance(msg_id, LineAt) and msg_id.file == self.file

    def _done(self, offset: int) -> None:
        assert self.tracker is not None
        self.at_end_since = None  # progress: a wait at the file's end is timed from here
        self.tracker.add_to_acked(offset)
        self.acks_since_commit += 1
        self._maybe_finish()
        self._maybe_commit()

    def _dead_letter(self, offset: int, record: bytes, reason: str) -> None:
        """Appends the record to the dead-letter file, durably, before it counts as done."""
        self._write_dead_letter(offset, reason, {"record": record.decode("utf-8", "backslashreplace")})

    def _dead_letter_too_large(self, offset: int, size: int) -> None:
        """Records a record above the limit, by file, offset and size: its bytes were never held."""
        reason = (f"record too large: {size} bytes, above the limit of {self.record_limit} bytes (the "
                  f"FileSpout's max_record_bytes, or {MAX_RECORD_KEY}); skipped")
        self._write_dead_letter(offset, reason, {"size": size, "too_large": True})

    def _write_dead_letter(self, offset: int, reason: str, detail: dict[str, Any],
                           cause: FailureCause | None = None) -> None:
        """Appends an entry naming file, offset, reason and ``detail`` to the dead-letter file,
        durably, before the record counts as done; logs and reports it, and counts it (the
        failure's ``cause``; None: the record was unreadable, never emitted)."""
        where = f"{os.path.join(self.directory, self.file or '?')} at byte offset {offset}"
        entry = {"file": self.file, "offset": offset, "reason": reason, **detail}
        assert self.dead_letter_dir is not None  # open() defaults it
        path = append_dead_letter(self.dead_letter_dir, self.file or "unknown", entry, self.kept.dead_letter)
        self.dead_letters += 1
        self.count_dead_letter(cause)
        message = f"FileSpout {self.spout_id!r}: {reason} in {where}; written to {path}"
        self.collector.report_error(message)  # which logs it

    # -- progress

    def _maybe_finish(self) -> None:
        """A file read to its end with every line done is renamed done and forgotten."""
        if self.handle is None or self.tracker is None or self.tracker.pending or self.inflight.retrying:
            return
        if self.taken:
            return   # at most once: renamed done once its lines are out (`close` goes back to them)
        offset = self.handle.tell()
        if not self.cut:
            try:
                record = self._read()
            except RecordTooLarge:  # next_tuple dead-letters it, or waits for its end
                record = b"\n"
            if record and (not self.holds_tail or self._ends_whole(record) is not False):
                more = True  # a record to emit (or to read again, the file grown meanwhile)
            else:  # at its end, or at a line without its newline: a record once the file is done (files often end so)
                more = self._still_growing(unfinished=bool(record)) or bool(record)
            if more:  # not finished
                self.handle.seek(offset)
                return
        name = self.file
        assert name is not None
        if self._rewritten():
            self._read_again_from_start(name, offset)
            return
        self._say_if_truncated(name, offset)
        # Every line is acked: committed first, at the file's end, so that a crash between the
        # rename done and the next commit leaves a record saying the file was finished. The
        # `.done` file is no proof (an archiver may take it away at once), and a record below
        # the end had the next run report a finished file as taken away unfinished.
        self._commit()
        read = os.fstat(self.handle.fileno())
        if self.locks is None:
            self._rename_done(name, read)
        elif not self.locks.finish(name, lambda: self._rename_done(name, read)):
            self._give_up(name)  # taken over meanwhile: its new holder finishes it
            return
        fsync_dir(self.directory)
        self.handle.close()
        self.held_said.discard(name)
        mark = self.own.pop(name, None)
        if mark is not None:
            self._finished(name, mark, self._others())
        self.marks.pop(name, None)
        if self.charges.pop(name, None) is not None:
            self.charges_dirty = True
        self.file = self.handle = self.tracker = None
        self.inflight.clear()
        self._reset_charges()
        self._commit()

    def _read_again_from_start(self, name: str, end: int) -> None:
        """The current file, every record read of it acked up to ``end``, was cut and written
        again from its start under the task (logrotate's ``copytruncate``, ``: > file``, a
        logger reopening it with ``O_TRUNC``): its lines now are new ones, read from the start,
        as ``tail -F`` does, the file followed on. Reported, with the bytes that were past
        ``end`` when it was cut, read by no one. Before, it was renamed done as read, and the
        logger went on writing into the ``.done`` file: of 7,000 lines written after such a
        cut, none was read."""
        assert self.handle is not None
        seen = self.size_seen
        lost = (f"; the records that were in bytes {end} to {seen} when it was cut are read by no one"
                if seen > end else "")
        self.collector.report_error(
            f"FileSpout {self.spout_id!r} task {self.index}: {os.path.join(self.directory, name)} was cut and written "
            f"again from its start while it was read (logrotate's copytruncate, ': > file'): it is read again from its "
            f"start{lost}. Rotate by renaming the file (logrotate's create) to lose none")
        self.handle.seek(0)
        self.tracker = OffsetManager(name, 0)
        self.inflight.clear()
        self._reset_charges()   # every line of it is new: none read before, none charged
        self.charges.pop(name, None)
        self.charges_dirty = True
        self.head = None
        self.size_seen = 0
        self._watch_new_file()
        self.at_end_since, self.end_said = None, False
        self._commit()   # its record at 0: a restart reads it from its start too

    def _say_if_truncated(self, name: str, end: int) -> None:
        """Reports the file read to its end at ``end`` if it was seen longer while it was read: it
        was truncated (``truncate``, ``: > file``, logrotate's ``copytruncate``) under the task,
        and the records that were past ``end`` are read by no one. Before, the file was renamed
        done as if read whole, without a word: 15,000 of 20,000 lines gone from a file truncated
        to its first 5,000 while the spout was at line 30. So too a file now shorter than what
        was read of it (a writer going on after the cut writes where no one reads), and one whose
        first bytes (hashed at the last commit) changed: cut and written again before the task
        looked, by a logger going on after a ``copytruncate``."""
        if self.cut_said:
            return  # said once, though the rename done is tried again
        assert self.handle is not None
        fd = self.handle.fileno()
        # its size at open, at a commit or while it was followed; the file as it is now, to be sure it shrank
        size = os.fstat(fd).st_size
        seen = max(self.size_seen, size)
        rewritten = self.head is not None and self.head[0] > 0 and head_hash(fd, self.head[0]) != self.head[1]
        if seen <= end and size >= end and not rewritten:
            return
        self.cut_said = True
        if size < end:
            lost = f"the records that were in bytes {end} to {seen} and " if seen > end else ""
            said = (f"it is {size} bytes now, shorter than the {end} bytes read of it; {lost}whatever is written "
                    f"into it from now on is read by no one")
        elif seen > end:
            said = f"it was {seen} bytes, and ends at byte {end} now; the records that were in bytes {end} to {seen} are read by no one"
        else:
            assert self.head is not None
            said = (f"its first {self.head[0]} bytes changed since they were read (it was cut and written again); "
                    f"the records written in place of the {end} bytes read are read by no one")
        self.collector.report_error(
            f"FileSpout {self.spout_id!r} task {self.index}: {os.path.join(self.directory, name)} was truncated while it "
            f"was read: {said} (the file is renamed done as read). Write a file elsewhere and move it in whole, and "
            f"never truncate one the spout may be reading")

    def _rename_done(self, name: str, read: os.stat_result) -> None:
        """Renames the file read (``read``: its stat) with ``done_suffix``, unless it was moved or
        replaced meanwhile: a new file of the same name is for the next listing to read.

        Whatever file has the name is first renamed aside (a hidden name of its own), atomically,
        and only then compared with the file read: a producer moving a new file in under the
        name (``mv``, which replaces) between a check by name and the rename had its new file
        renamed done, or removed, unread. A new file taken aside is put back under its name, and
        so is the file read when its done rename raises (the retry, or the task restarted,
        finishes it)."""
        src = os.path.join(self.directory, name)
        aside = os.path.join(self.directory, f".finishing.{uuid.uuid4().hex}")
        try:
            os.rename(src, aside)
        except FileNotFoundError:
            there = None
        else:
            there = os.lstat(aside)
            if (there.st_dev, there.st_ino) != (read.st_dev, read.st_ino):
                self._put_back(aside, src)
                there = None
        if there is None:
            renamed = self._renamed_to(read.st_dev, read.st_ino)
            if renamed is not None:  # rotated (logrotate's create): renamed done under its new name
                self._rename_done(renamed, read)
                return
            log.warning("FileSpout %r: %s was moved or replaced while it was read; every line read "
                        "is acked, and the file is left as it is", self.spout_id, src)
            return
        self._done_from_aside(aside, src)

    def _renamed_to(self, dev: int, ino: int) -> str | None:
        """The name in the directory that the file ``dev``, ``ino`` has now, if it was renamed to
        one the spout lists (``a.log`` to ``a.log.1`` by logrotate's ``create``): left there
        unfinished, the listing would read it again from its start."""
        skip = (IN_PROGRESS, self.ignore_suffix, self.done_suffix)
        for e in os.scandir(self.directory):
            if e.name[0] in "._" or e.name.endswith(skip) or not e.is_file(follow_symlinks=False):
                continue
            st = e.stat(follow_symlinks=False)
            if (st.st_dev, st.st_ino) == (dev, ino):
                return e.name
        return None

    def _done_from_aside(self, aside: str, src: str) -> None:
        """Renames the finished file, taken aside to ``aside``, done as ``src`` + ``done_suffix``."""
        # never over an earlier file's done name (a name that comes back every day): that archive
        # would be lost. HdfsSpout's rename to its archive directory fails rather than replace.
        done, n = src + self.done_suffix, 0
        try:
            while not rename_no_replace(aside, done):
                n += 1
                done = f"{src}.{n}{self.done_suffix}"
        except OSError as e:
            # not renamed done (an I/O error): back under its name, where the next try (or the
            # task restarted) finishes it, not left for good under the hidden name it was taken to
            try:
                back = rename_no_replace(aside, src)
            except OSError:
                back = False
            if not back:
                log.error("FileSpout %r: %s, read to its end, could not be renamed done (%s) nor put back "
                          "under its name: it is at %s", self.spout_id, src, e, aside)
            raise
        if n:
            log.warning("FileSpout %r: %s is taken (an earlier file of that name, done); renamed %s "
                        "to %s instead", self.spout_id, src + self.done_suffix, src, done)

    def _put_back(self, aside: str, src: str) -> None:
        """Puts the file taken aside, not the one read, back under its name ``src`` (or, should a
        third file have come there meanwhile, ``<src>.<n>``: never replacing one)."""
        back, n = src, 0
        try:
            while not rename_no_replace(aside, back):
                n += 1
                back = f"{src}.{n}"
        except OSError as e:
            log.error("FileSpout %r: a new file came under the name %s while the file read there was renamed done, "
                      "and cannot be put back (%s): it is at %s, unread; move it back to be read",
                      self.spout_id, src, e, aside)
            raise
        if n:
            log.warning("FileSpout %r: %s came under the name %s while the file read there was renamed done, "
                        "and another file came there meanwhile; renamed it %s", self.spout_id, back, src, back)

    def _maybe_commit(self) -> None:
        if self.acks_since_commit >= self.commit_every or (
                self.acks_since_commit and self.clock.now() - self.last_commit >= self.commit_secs):
            self._commit()

    def _identity(self, offset: int) -> FileIdentity:
        """The current file's identity for a record at ``offset``; its head hash is read again only
        while the committed offset is below `HEAD_BYTES` (after that its length stays fixed)."""
        assert self.handle is not None
        fd = self.handle.fileno()
        length = min(offset, HEAD_BYTES)
        if self.head is None or self.head[0] != length:
            self.head = (length, head_hash(fd, length))
        st = os.fstat(fd)
        self.size_seen = max(self.size_seen, st.st_size)
        return FileIdentity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, self.head[1], self.gen)

    def _commit(self, back_to: int | None = None) -> None:
        """Writes the progress durably; ``back_to``: the current file's offset to write instead
        of its committed one (`close`, with lines taken and not emitted)."""
        tracker = self.tracker if self.file is not None else None
        if tracker is not None:
            committed = tracker.committable if back_to is None else back_to
            self.own[self.file] = FileMark(committed, self._identity(committed))  # type: ignore[index]
        present = set(os.listdir(self.directory))
        # a file renamed done after a crash before this commit leaves an entry: drop it. So does
        # a file taken out of the directory unfinished, which is said (`_left_unfinished`). The
        # file being read stays while it is away: it is read on from its open handle, and a
        # crash before its end leaves the entry for the next run to say so.
        gone = [n for n in self.own if n not in present and n != self.file]
        others = self._others() if gone or self.finished else []
        for name in gone:
            mark = self.own.pop(name)
            if mark.identity is not None and mark.offset >= mark.identity.size:
                self._finished(name, mark, others)  # every record acked: only its rename done was left
            else:
                self._left_unfinished(name, mark, present, others)
        self._prune_finished(others)
        write_durably(self.progress_path, dump_marks(self.spout_id, self.directory, self.own, self.finished),
                      self.kept.progress)
        if tracker is not None:
            tracker.commit(committed)  # durable: the lines before it are forgotten
        if self.charges_dirty or not self.charges.keys() <= present:
            self.charges = {n: c for n, c in self.charges.items() if n in present}
            self._write_charges()
        self.acks_since_commit = 0
        self.last_commit = self.clock.now()

    def _finished(self, name: str, mark: FileMark, others: list[TaskProgress]) -> None:
        """``name``, of which this task acked every record (``mark``), is done: its record is
        dropped, but kept as finished while another task (an earlier owner: a take-over, another
        parallelism) still holds a record of it, which this tells the file was finished."""
        if mark.identity is not None and any(
                _same_file(m, mark.identity) for loaded in others for m in [loaded.marks.get(name)] if m):
            self.finished[name] = mark.identity

    def _prune_finished(self, others: list[TaskProgress]) -> None:
        """Forgets the files this task finished that no other task's progress file holds a
        record of any more (each such task dropped its record, durably, having read ours)."""
        for name, identity in list(self.finished.items()):
            if not any(_same_file(m, identity) for loaded in others for m in [loaded.marks.get(name)] if m):
                del self.finished[name]

    def _left_unfinished(self, name: str, mark: FileMark, present: set[str], others: list[TaskProgress]) -> None:
        """Report ``name``, whose progress this task drops since it left the directory, if it
        left before every record was acked (not renamed done; its committed offset, ``mark``,
        below its size then): the records after the offset are read by no one unless the file is
        put back, which the user must hear of. (A file taken away while it is read is read on
        from its open handle; this is the one taken away before a crash, or between two runs.)"""
        done = re.compile(rf"{re.escape(name)}(?:\.\d+)?{re.escape(self.done_suffix)}")
        if any(done.fullmatch(p) for p in present):
            return  # finished: renamed done before the crash let its progress go
        if any(_done_by(loaded, name, mark) for loaded in others):
            return  # finished by another task (a take-over, another parallelism), its .done archived since
        size = f" of {mark.identity.size}" if mark.identity is not None else ""
        self.collector.report_error(
            f"FileSpout {self.spout_id!r} task {self.index}: {os.path.join(self.directory, name)} left the directory "
            f"before every record of it was acked (committed to byte {mark.offset}{size}): its records from byte "
            f"{mark.offset} on are read by no one; put the file back to have it read again (from its start, "
            f"its progress being dropped now)")

    def close(self) -> None:
        """Commits the progress (and takes back the mark of each suspect in flight, alone or in a
        group: its worker did not die with it), closes the current file and releases its lock."""
        if getattr(self, "progress_path", None) is not None:
            for offset, grouped in [(o, g) for o, g in self.gate.marked() if o in self.inflight]:
                kept = self.charged[offset]
                beside = self.gate.beside(offset)
                self._set_charge(offset, Charge(self.inflight.tries(offset),
                                                kept.deaths - (not grouped and not beside),
                                                kept.level - grouped, kept.beside - beside))
            if self.gate.counting and self.handle is not None:
                # what it really read (not the read-ahead), or what a dead task may have
                self.read_to = max(self.handle.tell(), self.read_before)
                self.charges_dirty = True
            # at most once: the lines taken and not emitted are read again by the next run (a
            # kill or a rebalance is no failure, and loses nothing)
            self._commit(self.taken[0][0].offset if self.taken else None)
        if getattr(self, "handle", None) is not None:
            self.handle.close()  # type: ignore[union-attr]
        if getattr(self, "locks", None) is not None:
            self.locks.release_all()  # type: ignore[union-attr]
        if getattr(self, "gate", None) is not None:
            self.gate.clear()   # the worker's other spout tasks no longer wait for its lines

    def committed(self) -> dict[str, int]:
        """The committed offset per file of this task's progress file, the current file's up to
        date (for monitoring and tests)."""
        out = {name: mark.offset for name, mark in self.own.items()}
        if self.file is not None and self.tracker is not None:
            out[self.file] = self.tracker.committable
        return out


# ---------------------------------------------------------------------------------------------
# The sink


def format_tab_line(tup: Tuple) -> bytes:
    """The default sink format: the tuple's values as text, tab-separated, one line."""
    return ("\t".join(str(v) for v in tup.values) + "\n").encode("utf-8")


class FileSinkBolt(Bolt):
    """Writes tuples to rotated files in ``directory``, each visible only when complete.

    A file is written as ``.<name>.inprogress`` (hidden from Spark's and Hadoop's readers) and
    rotated after ``max_records`` tuples or ``max_bytes`` bytes, and on every tick tuple if it
    holds anything (``tick_secs``, Storm's ``topology.tick.tuple.freq.secs``, so that a quiet
    stream is still committed). Rotating fsyncs the file, renames it to
    ``<prefix>-<task index>-<run>-<sequence><suffix>`` and fsyncs the directory; then, and only
    then, are its tuples acked. If a write, fsync or rename fails (disk full, permissions, the
    directory gone) every tuple of that file is failed, so the spout replays it, and the partial
    file is removed; the failure is the disk's (kind ``"unavailable"``), which no retry budget
    charges, unlike a formatter that raises on a tuple. At-least-once: a replayed tuple already
    written is written again.

    Temporary files left by an earlier crashed run of this task are removed in ``prepare``; their
    tuples were never acked, so they are replayed. A file being written is held under an
    ``flock`` until it is renamed: another live writer of the same names (a zombie copy of the
    task, a second topology's sink with the same prefix and task index in the directory)
    starting meanwhile leaves it alone.

    Args:
        directory: where files go (created if missing).
        formatter: ``Tuple -> bytes`` (or ``str``, written as UTF-8): one record; default tab-separated
            values and a newline.
    """

    def __init__(self, directory: str | os.PathLike, *, prefix: str = "part", suffix: str = ".txt",
                 formatter: Callable[[Tuple], bytes | str] = format_tab_line, max_records: int | None = 10000,
                 max_bytes: int | None = 64 << 20, tick_secs: int | None = 10) -> None:
        if max_records is None and max_bytes is None and tick_secs is None:
            raise ValueError("FileSinkBolt: give at least one of max_records, max_bytes or tick_secs")
        if "/" in prefix or "/" in suffix or prefix.startswith((".", "_")):
            raise ValueError(f"FileSinkBolt: prefix {prefix!r} must not contain '/' nor start with '.' or '_'")
        self.directory = os.path.abspath(directory)
        self.prefix, self.suffix, self.formatter = prefix, suffix, formatter
        self.max_records, self.max_bytes, self.tick_secs = max_records, max_bytes, tick_secs

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Asks for tick tuples every ``tick_secs``."""
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.tick_secs} if self.tick_secs else None

    def prepare(self, conf: dict, context: TopologyContext, collector: OutputCollector) -> None:
        """Creates the directory and removes this task's temporary files of a crashed run (not
        those a live writer holds)."""
        super().prepare(conf, context, collector)
        self._where = (context.get_this_component_id(), context.get_this_task_id())
        os.makedirs(self.directory, exist_ok=True)
        self.stem = f"{self.prefix}-{context.get_this_task_index()}-"
        for e in os.scandir(self.directory):
            if e.name.startswith("." + self.stem) and e.name.endswith(IN_PROGRESS):
                remove_if_abandoned(e.path)
        self.run = uuid.uuid4().hex[:8]
        self.sequence = 0
        self.handle: BinaryIO | None = None
        self.temp = ""
        self.held: list[Tuple] = []
        self.size = 0
        self.files_written = 0

    def execute(self, tup: Tuple) -> None:
        """Appends the tuple to the current file (a tick rotates it)."""
        if is_tick_tuple(tup):
            if self.held:
                self._rotate()
            self.collector.ack(tup)
            return
        try:
            record = self.formatter(tup)
            if isinstance(record, str):   # text: written as UTF-8, as the default's is
                record = record.encode("utf-8")
            elif not isinstance(record, (bytes, bytearray, memoryview)):
                raise TypeError(f"it returned {type(record).__name__}, not bytes or str")
        except Exception as e:  # noqa: BLE001 (a user formatter: any error is a poison tuple)
            # Raising would kill the worker and the replay would kill it again: fail only this
            # tuple, so its spout retries it and, past its retry limit, dead-letters it.
            reason = (f"FileSinkBolt: formatter raised {type(e).__name__}: {e} on a tuple from "
                      f"{tup.source_component!r} stream {tup.source_stream!r}")
            self.collector.report_error(f"{reason}; failing it")  # which logs it
            # the reason goes with the failure: past its retries, the record's dead letter says it
            fail_because(self.collector, tup, *self._where, reason)
            return
        try:
            if self.handle is None:
                self.sequence += 1
                self.temp = os.path.join(self.directory, f".{self._name()}{IN_PROGRESS}")
                self.handle = create_held(self.temp)  # kept open, and held, until renamed
                self.size = 0
            self.handle.write(record)
        except OSError as e:
            self.held.append(tup)
            self._abandon(e)
            return
        self.held.append(tup)
        self.size += len(record)
        if ((self.max_records is not None and len(self.held) >= self.max_records)
                or (self.max_bytes is not None and self.size >= self.max_bytes)):
            self._rotate()

    def squall_flush_for_checkpoint(self) -> None:
        """In a stateful topology, a checkpoint waits here for tuples the current file holds (a
        persistent window's results): rotate it now, as a tick would, so that the checkpoint
        passes at once instead of at the file's ``max_records``, ``max_bytes`` or tick
        (`squall.state._bolt.CheckpointTupleForwarder`). Behind such a window a file therefore
        holds at most a checkpoint interval of tuples."""
        if self.held:
            self._rotate()

    def _name(self) -> str:
        return f"{self.stem}{self.run}-{self.sequence:06d}{self.suffix}"

    def _rotate(self) -> None:
        assert self.handle is not None
        final = os.path.join(self.directory, self._name())
        try:
            self.handle.flush()
            os.fsync(self.handle.fileno())
            # renamed while still open, so still held: closed first, it would look abandoned
            # to a writer starting between the close and the rename
            os.replace(self.temp, final)
            handle, self.handle = self.handle, None
            with contextlib.suppress(OSError):  # flushed and fsynced: its data is in place
                handle.close()
            fsync_dir(self.directory)
        except OSError as e:
            self._abandon(e)
            return
        for t in self.held:
            self.collector.ack(t)
        self.held.clear()
        self.files_written += 1

    def _abandon(self, error: OSError) -> None:
        """Fails every tuple of the current file and removes what was written of it."""
        said = disk_error_message(error.errno, error.strerror, self.temp or self.directory,
                                  Kept("the file being written", "the FileSinkBolt's directory"), atomic=False)
        message = f"FileSinkBolt: {said} Failing {len(self.held)} tuple(s) so they replay."
        self.collector.report_error(message)  # which logs it
        if self.handle is not None:
            try:
                self.handle.close()
            except OSError:
                pass  # the data is being thrown away: a failed flush is expected here
            self.handle = None
        try:
            os.unlink(self.temp)
        except OSError:
            pass  # never created, or the directory is gone
        # the disk's fault, not the tuples' (full, read-only, the directory gone): not charged
        # to their retry budgets, or a disk full for a few seconds dead-letters good records
        fail_all_because(self.collector, self.held, *self._where, f"FileSinkBolt: {said}", UNAVAILABLE)
        self.held.clear()

    def cleanup(self) -> None:
        """Commits the current file if it holds anything."""
        if getattr(self, "held", None):
            self._rotate()
