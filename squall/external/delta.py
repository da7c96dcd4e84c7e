"""`DeltaSinkBolt`: rows appended to a Delta table (the ``deltalake`` package, no JVM) that
Spark reads with ``spark.read.format("delta")``, or with ``spark.read.parquet`` on its active files.

Each batch is one Delta transaction, committed with Delta's own application transaction id
(``txn``: ``app_id`` = this task's name, ``version`` = the batch's sequence number) and the
batch's ids in the commit's ``commitInfo``. The commit is atomic, and after a restart the task
takes its last sequence number from ``txn`` and the ids it committed from the log's recent
``commitInfo``, so a replayed id is not appended twice. A batch commits only on a version whose
``txn`` of its application id is below its sequence number (delta-rs rebases a commit past no
other commit of its application id): a zombie copy of a task and the task that replaced it each
learn of the other's batches instead of appending the ids both hold twice.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError

from ._sink_batch import (
    MAX_COMMIT_TRIES,
    BatchingSinkBolt,
    CommittedBatch,
    CommittedElsewhere,
    SinkWriteError,
    safe_name,
)

__all__ = ["DeltaSinkBolt"]

APP_KEY, SEQ_KEY, IDS_KEY, WRITER_KEY = "squall.app", "squall.seq", "squall.ids", "squall.writer"
"""The ``commitInfo`` keys a batch's commit carries (the writer: a random id of the task's instance)."""

_INVALID_DATA = "Invalid data found"  # how delta-rs's error for rows its constraints refuse begins


class DeltaSinkBolt(BatchingSinkBolt):
    """Append tuples to the Delta table at ``table_uri`` (created with ``schema`` if absent),
    each id exactly once.

    The arguments are `ParquetSinkBolt`'s, plus ``app_id``: the prefix of the Delta
    application id of each task (``<app_id>-<task id>``); give each topology writing the same
    table its own. ``storage_options`` go to ``deltalake`` (object stores).
    """

    def __init__(self, table_uri: str | os.PathLike, schema, id_field: str, batch_size: int = 1000,
                 tick_secs: float | None = 1, dedupe_batches: int = 100,
                 on_bad_row: str = "dead_letter", app_id: str | None = None,
                 storage_options: dict[str, str] | None = None) -> None:
        super().__init__(schema, id_field, batch_size, tick_secs, dedupe_batches, on_bad_row)
        self.table_uri = str(table_uri)
        self.app_prefix = app_id
        self.storage_options = storage_options

    LOCATION_ARGUMENT = "table_uri"

    def _location(self) -> str:
        return self.table_uri

    def _open(self) -> list[CommittedBatch]:
        self.app_id = safe_name(f"{self.app_prefix or 'squall'}-{self.task_name}")
        self.writer = uuid.uuid4().hex
        if not DeltaTable.is_deltatable(self.table_uri, storage_options=self.storage_options):
            if "://" not in self.table_uri:
                os.makedirs(self.table_uri, exist_ok=True)
            # several tasks may race to create it: "ignore" keeps whichever came first
            DeltaTable.create(self.table_uri, self.schema, mode="ignore",
                              storage_options=self.storage_options)
        table = DeltaTable(self.table_uri, storage_options=self.storage_options)
        self._adopt_schema(pa.schema(table.schema().to_arrow()))
        last = table.transaction_version(self.app_id)
        if last is None:
            return []
        batches = self._batches_back_to(table, None)
        if not batches or batches[-1].seq != last:
            batches.append(CommittedBatch(last, []))
        return batches

    def _others_committed(self) -> list[CommittedBatch]:
        # <app_id>-<component>-<task id>: exactly digits after, so not component "sink-1"'s for "sink"
        theirs = re.compile(re.escape(safe_name(f"{self.app_prefix or 'squall'}-{self.component}")) + r"-\d+")
        table = DeltaTable(self.table_uri, storage_options=self.storage_options)
        if table.version() < 1:
            return []  # only its creation: no batch of anyone's
        tasks = len(self.context.get_component_tasks(self.component))
        batches: dict[str, list[CommittedBatch]] = {}
        for commit in table.history(limit=self.dedupe_batches * max(tasks, 1) * 2):  # the recent commits
            app = commit.get(APP_KEY)
            if isinstance(app, str) and app != self.app_id and theirs.fullmatch(app):
                batches.setdefault(app, []).append(self._batch_of(commit))
        return [b for app in sorted(batches)
                for b in sorted(batches[app], key=lambda b: b.seq)[-self.dedupe_batches:]]

    def _batches_back_to(self, table: DeltaTable, seq: int | None) -> list[CommittedBatch]:
        """The batches of this task's name in ``table``'s log, oldest first: the last
        ``dedupe_batches`` of them, or (``seq`` given) those from ``seq`` on, the last
        ``dedupe_batches`` of those."""
        tasks = len(self.context.get_component_tasks(self.component))
        # Other writers (other topologies, Spark jobs, OPTIMIZE) interleave their commits with
        # ours: read further back until the window's batches are found or the log ends
        limit = self.dedupe_batches * max(tasks, 1) * 2
        while True:
            history = table.history(limit=limit)
            batches = [self._batch_of(commit) for commit in history if commit.get(APP_KEY) == self.app_id]
            if seq is not None and any(b.seq < seq for b in batches):
                break  # back to a batch this writer knew
            if len(batches) >= self.dedupe_batches or len(history) < limit:
                break
            limit *= 4
        batches.sort(key=lambda b: b.seq)
        if seq is not None:
            batches = [b for b in batches if b.seq >= seq]
        return batches[-self.dedupe_batches:]

    def _batch_of(self, commit: dict[str, Any]) -> CommittedBatch:
        """The batch one of our commits recorded (its ``commitInfo``), or a clear error."""
        try:
            return CommittedBatch(int(commit[SEQ_KEY]), json.loads(commit[IDS_KEY]))
        except (KeyError, ValueError, TypeError) as e:
            raise SinkWriteError(f"sink {self.component!r}: table {self.table_uri}: commit "
                                 f"{commit.get('version')} of {self.app_id} has unreadable "
                                 f"squall ids ({e})") from e

    def _adopt_schema(self, existing: pa.Schema) -> None:
        """Write with the table's own types; every configured column must be in it."""
        missing = [n for n in self.schema.names if n not in existing.names]
        extra = [n for n in existing.names if n not in self.schema.names]
        if missing or extra:
            raise SinkWriteError(
                f"sink {self.component!r}: table {self.table_uri} has columns "
                f"{', '.join(existing.names)}; missing there: {missing or 'none'}; "
                f"not in the sink's schema: {extra or 'none'}")
        self.schema = pa.schema([existing.field(n) for n in self.schema.names])

    def _refused_for_rows(self, error: Exception) -> bool:
        """The table's CHECK constraints or invariants refused what rows hold (delta-rs's
        ``InvalidData``, "Invalid data found: N rows failed validation check", which deltalake
        raises as a plain ``DeltaError``, as it does a full disk): charged to the batch's rows.
        Any other error (an object store or disk that failed, a conflicting commit) is the
        store's."""
        return _INVALID_DATA in str(error)

    def _commit(self, seq: int, table: pa.Table, ids: list) -> int:
        """Append the batch as Delta transaction ``seq`` of this task's application id, on a
        version of the table whose transaction for it is below ``seq``: another writer of this
        task's name (a zombie, or the task that replaced one) that committed since is
        `CommittedElsewhere`, not a second copy of the ids both batches hold. delta-rs rebases
        a commit past other applications' commits, never past one that carries a transaction
        of its own application id (`CommitFailedError`): then the log is looked at again."""
        props = CommitProperties(
            custom_metadata={APP_KEY: self.app_id, SEQ_KEY: str(seq), IDS_KEY: json.dumps(ids),
                             WRITER_KEY: self.writer},
            app_transactions=[Transaction(self.app_id, seq)])
        for _ in range(MAX_COMMIT_TRIES):
            snapshot = DeltaTable(self.table_uri, storage_options=self.storage_options)
            last = snapshot.transaction_version(self.app_id)
            if last is not None and last >= seq:
                raise CommittedElsewhere(self._batches_back_to(snapshot, seq))
            version = snapshot.version()  # the write moves ``snapshot`` on to its commit
            try:
                write_deltalake(snapshot, table, mode="append", commit_properties=props)
            except CommitFailedError:
                continue  # a commit of this application id since the snapshot (or many others): look again
            except Exception:
                # an error after the commit landed (a lost reply from an object store) must not
                # fail tuples that are durable: the log says whether this writer's commit of
                # ``seq`` is in it
                try:
                    done = self._landed(version, seq)
                except Exception:  # noqa: BLE001 (unknown whether it landed: the write's own error is raised)
                    done = False
                if done:
                    return seq
                raise
            return seq
        raise SinkWriteError(f"sink {self.component!r}: batch {self.app_id}#{seq}: {MAX_COMMIT_TRIES} commits in "
                             f"a row lost their race with other writers of {self.table_uri}")

    def _landed(self, version: int, seq: int) -> bool:
        """Whether this writer's commit of batch ``seq`` is in the log after ``version``."""
        table = DeltaTable(self.table_uri, storage_options=self.storage_options)
        after = table.version() - version
        return after > 0 and any(c.get(WRITER_KEY) == self.writer and c.get(SEQ_KEY) == str(seq)
                                 for c in table.history(limit=after))
