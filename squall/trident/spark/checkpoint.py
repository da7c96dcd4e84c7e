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


__all__ = ["CheckpointDamaged", "check_checkpoint", "local_path"]
