"""Check a query's checkpoint before Spark reads it, so that a damaged file is named.

Why this exists: a Structured Streaming query started again reads the latest file of its
checkpoint's ``offsets/`` and ``commits/`` logs first. One that is truncated, or holds bytes that
are not Spark's text (a disk that filled, an editor, a copy cut short), fails the query inside
Spark's JSON or charset decoder, and what reached the user was that decoder's last words
("squall trident: the query failed: Unexpected end-of-input in field name", "Input length = 1"),
naming neither the file nor the checkpoint nor what to do. The same check here reads those files
as Spark's ``OffsetSeqLog`` and ``CommitLog`` do (a version line ``v<N>``, then one JSON value a
line, ``-`` for a source with no offset) and refuses the start naming the file.

Only a checkpoint on the local file system (a path, or a ``file:`` URI) is read here; on HDFS, S3
and the like Spark's own error is what the user gets.
"""

from __future__ import annotations

import contextlib
import json
import os
from urllib.parse import urlparse


class CheckpointDamaged(ValueError):
    """A file of the query's checkpoint that Spark could not read: the message names the file,
    what is wrong with it and what to do."""


_WHAT_TO_DO = {
    "commits": ("Spark reads it to know batch {n} finished. Remove it and {crc} (Spark then runs batch {n} again "
                "from offsets/{n}, as txid {txid}: a transactional or opaque state takes it once), or restore "
                "both from a backup of the checkpoint."),
    "offsets": ("It holds the spouts' metadata of batch {n} (txid {txid}). Restore it and {crc} from a backup of "
                "the checkpoint. Removing them (and commits/{n}, if any) makes Spark plan batch {n} again after "
                "offsets/{prev}: exact with an opaque state, or when the spout plans the same batch again; a "
                "transactional state that committed txid {txid} skips the keys it already holds at that txid."),
}


def local_path(location: str) -> str | None:
    """The local directory ``location`` names (a path or a ``file:`` URI), else None."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return parsed.path
    if parsed.scheme and len(parsed.scheme) > 1:  # hdfs:, s3a:, ... (a Windows drive letter is a path)
        return None
    return location


def check_checkpoint(location: str) -> None:
    """Raise `CheckpointDamaged` when the latest file of ``offsets/`` or ``commits/`` under
    ``location`` is not one Spark can read; nothing when the checkpoint is new or not local."""
    root = local_path(location)
    if root is None or not os.path.isdir(root):
        return
    for log in ("offsets", "commits"):
        directory = os.path.join(root, log)
        if not os.path.isdir(directory):
            continue
        batches = [int(name) for name in os.listdir(directory) if name.isdigit()]
        if not batches:
            continue
        n = max(batches)
        path = os.path.abspath(os.path.join(directory, str(n)))
        problem = _problem(path, log)
        if problem is not None:
            what = _WHAT_TO_DO[log].format(n=n, txid=n + 1, prev=n - 1, crc=f"{log}/.{n}.crc")
            raise CheckpointDamaged(f"checkpoint {location}: {log}/{n} ({path}) {problem}, so Spark cannot start "
                                    f"the query from it. {what}")


PROBE_BYTES = 64 * 1024
"""What `checkpoint_unwritable` writes: more than the few KiB a batch's offsets and commit files
take, so that a disk with room for the probe had room for Spark's files."""


def checkpoint_unwritable(location: str) -> str | None:
    """Why the local checkpoint at ``location`` cannot be written now (a full disk, a read-only
    file system, no permission), said with what to do; None when a probe file of `PROBE_BYTES`
    could be written there and removed, or the checkpoint is not a local directory.

    Why: a query whose checkpoint write failed (Spark writes each batch's offsets before and its
    commit after it runs) stopped with Spark's one line, "java.io.IOException: No space left on
    device", naming no file, while Spark's own trace above it was 40 lines of Hadoop's writer."""
    root = local_path(location)
    if root is None or not os.path.isdir(root):
        return None
    try:
        _probe(os.path.join(root, f".squall-probe-{os.getpid()}"))
    except OSError as e:
        return (f"the checkpoint {location} cannot be written ({e.strerror or e}): Spark keeps each batch's "
                "offsets and commit there. Make room there (or make it writable), then start the query again: "
                "it resumes after the last batch the checkpoint holds, and a batch Spark ran but could not "
                "commit runs again with the same txid, which the states take once")
    return None


def _probe(path: str) -> None:
    """Write `PROBE_BYTES` to ``path``, to the disk, and remove it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, b"\0" * PROBE_BYTES)
        os.fsync(fd)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)


def _problem(path: str, log: str) -> str | None:
    """What makes ``path`` unreadable as Spark's ``log`` file, or None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"is not text (byte {e.start} is not UTF-8)"
    lines = text.split("\n")
    version = lines[0]
    if not (version.startswith("v") and version[1:].isdigit()):
        return f"does not start with Spark's version line (v1), it starts {version[:40]!r}" if data else "is empty"
    body = [line for line in lines[1:] if line]
    if not body:
        return "holds only its version line (cut short)"
    for i, line in enumerate(body, start=2):
        if log == "offsets" and line == "-":  # a source that had no offset yet
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError as e:
            return f"line {i} is not complete JSON ({e.msg}, column {e.colno}): it was cut short or overwritten"
    return None


__all__ = ["CheckpointDamaged", "check_checkpoint", "checkpoint_unwritable", "local_path"]
