"""`ParquetSinkBolt`: rows into a directory of Parquet files that ``spark.read.parquet`` reads.

Each batch is one file, ``part-<component>-<task>-<seq>.parquet``, written under a hidden name
(Spark and pyarrow skip names starting with ``.``), fsynced, then renamed into place and the
directory fsynced: the rename is the commit, so a reader sees a batch whole or not at all. The
files are also the commit log: after a restart the task finds its last sequence number from
their names and the ids it committed from their id column.

The rename never replaces a file (`rename_no_replace`): two writers can have one task name (two
topologies whose sinks share a component id and a directory, or a zombie copy of a task), and
a committed file is acked rows. The one that finds its name taken reads the ids of the files
the other committed since it last looked, and commits after them the rows of the ids they do
not hold (a zombie's batch holds the tuples that replayed to its replacement). Each writes its
own hidden file (a random name) and holds an ``flock`` on it until the batch is in place; a
task starting clears only the hidden files of its name that no one holds (a crashed
writer's), so a writer starting never removes one that another is committing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from ._sink_batch import BatchingSinkBolt, CommittedBatch, CommittedElsewhere, SinkWriteError, safe_name
from .files import create_held, remove_if_abandoned, rename_no_replace

__all__ = ["ParquetSinkBolt"]

log = logging.getLogger(__name__)


class ParquetSinkBolt(BatchingSinkBolt):
    """Write tuples as rows of Parquet files under ``path``, each id exactly once.

    ``schema``: the columns (a ``pa.Schema``, ``[(name, type)]`` or ``{name: type}``), each
    filled from the tuple's field of the same name. ``id_field``: the column holding the source's
    id (a string or integer); subscribe the sink with ``fields_grouping`` on it so that a replay
    reaches the task that wrote the original. A batch is committed when it holds ``batch_size``
    ids or on a tick every ``tick_secs`` (keep it well below ``topology.message.timeout.secs``).
    The ids of the last ``dedupe_batches`` batches per task are remembered. A row that does not
    fit the schema goes to the ``dead_letter`` stream (``on_bad_row="fail"``: the tuple fails).
    """

    def __init__(self, path: str | os.PathLike, schema, id_field: str, batch_size: int = 1000,
                 tick_secs: float | None = 1, dedupe_batches: int = 100,
                 on_bad_row: str = "dead_letter", compression: str = "snappy") -> None:
        super().__init__(schema, id_field, batch_size, tick_secs, dedupe_batches, on_bad_row)
        self.path = str(path)
        self.compression = compression

    def _location(self) -> str:
        return self.path

    def _file(self, seq: int) -> Path:
        return Path(self.path) / f"part-{self.task_name}-{seq:010d}.parquet"

    def _seqs(self) -> list[int]:
        """The sequence numbers of the committed files of this task's name, sorted."""
        mine = re.compile(rf"part-{re.escape(self.task_name)}-(\d{{10}})\.parquet")
        return sorted(int(m.group(1)) for p in Path(self.path).iterdir() if (m := mine.fullmatch(p.name)))

    def _open(self) -> list[CommittedBatch]:
        root = Path(self.path)
        root.mkdir(parents=True, exist_ok=True)
        # this task's own hidden files only: a glob ".part-sink-1-*" would also take those of
        # component "sink-1" (task names "sink-1-<task>"); so exactly ten digits after the name,
        # then a random part (or ".parquet", an older squall's name)
        stale = re.compile(rf"\.part-{re.escape(self.task_name)}-\d{{10}}\.(?:[0-9a-f]{{32}}|parquet)\.tmp")
        for p in root.iterdir():
            if stale.fullmatch(p.name):
                remove_if_abandoned(p)  # written but never renamed: its tuples replay
        seqs = self._seqs()
        batches = []
        for seq in seqs[-self.dedupe_batches:]:
            batches.append(CommittedBatch(seq, self._ids_of(seq)))
        if seqs and (not batches or batches[-1].seq != seqs[-1]):
            batches.append(CommittedBatch(seqs[-1], []))
        return batches

    def _commit(self, seq: int, table: pa.Table, ids: list) -> int:
        # a random part: another writer of this task name writes its own
        with _hidden_file(Path(self.path), f".part-{self.task_name}-{seq:010d}") as (f, tmp):
            pq.write_table(table, f, compression=self.compression)
            f.flush()
            os.fsync(f.fileno())
            if not rename_no_replace(tmp, self._file(seq)):
                raise self._committed_elsewhere(seq)  # which removes the hidden file
        final = self._file(seq)
        # the rename is durable once the directory is; if that cannot be made sure the file is
        # taken back, so that the failed tuples' replay is not a second copy
        try:
            dir_fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:
            final.unlink(missing_ok=True)
            raise
        return seq

    def _others_committed(self) -> list[CommittedBatch]:
        # part-<component>-<task id>-<seq>: exactly digits between, so not component "sink-1"'s
        # files for component "sink" (theirs have two numbers there)
        name = re.compile(rf"part-{re.escape(safe_name(self.component))}-(\d+)-(\d{{10}})\.parquet")
        seqs: dict[int, list[int]] = {}
        for p in Path(self.path).iterdir():
            m = name.fullmatch(p.name)
            if m and int(m.group(1)) != self.task:
                seqs.setdefault(int(m.group(1)), []).append(int(m.group(2)))
        return [CommittedBatch(seq, self._ids_in(Path(self.path) / f"part-{safe_name(self.component)}-{task}-{seq:010d}.parquet"))
                for task, theirs in sorted(seqs.items()) for seq in sorted(theirs)[-self.dedupe_batches:]]

    def _committed_elsewhere(self, seq: int) -> CommittedElsewhere:
        """The batches another writer of this task name committed from ``seq`` on (this one
        knows those before: it read them at its start, or committed them), the last
        ``dedupe_batches`` of them, as `CommittedElsewhere`."""
        theirs = [s for s in self._seqs() if s >= seq][-self.dedupe_batches:]
        log.warning("sink %r: %s exists already, committed by another writer with the task name %r "
                    "(another topology's sink with the component id %r writing %s, or a live copy of "
                    "this task); committing this batch after its batches %s without the ids they hold",
                    self.component, self._file(seq).name, self.task_name, self.component, self.path,
                    theirs)
        return CommittedElsewhere([CommittedBatch(s, self._ids_of(s)) for s in theirs])

    def _ids_of(self, seq: int) -> list:
        """The ids of the committed file of ``seq``."""
        return self._ids_in(self._file(seq))

    def _ids_in(self, path: Path) -> list:
        """The ids of the committed file ``path``."""
        try:
            return pq.read_table(path, columns=[self.id_field]).column(0).to_pylist()
        except (OSError, pa.ArrowException, KeyError) as e:
            raise SinkWriteError(f"sink {self.component!r}: cannot read the ids of committed file "
                                 f"{path} ({e})") from e


@contextlib.contextmanager
def _hidden_file(directory: Path, prefix: str) -> Iterator[tuple[BinaryIO, Path]]:
    """A new file ``<prefix>.<random>.tmp``, held (`create_held`) for as long as it is open, which
    tells a starting writer of the same task name (`remove_if_abandoned`) that its writer lives.
    Removed on an error; the caller renames it away on success."""
    tmp = directory / f"{prefix}.{uuid.uuid4().hex}.tmp"
    f = create_held(tmp, 0o644)
    try:
        with f:
            yield f, tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
