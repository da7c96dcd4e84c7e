"""`DeltaSinkBolt`: rows appended to a Delta table (the ``deltalake`` package, no JVM) that
Spark reads with ``spark.read.format("delta")``, or with ``spark.read.parquet`` on its active files.

Each batch is one Delta transaction, committed with Delta's own application transaction id
(``txn``: ``app_id`` = this task's name, ``version`` = the batch's sequence number) and the
batch's ids in the commit's ``commitInfo``. The commit is atomic, and after a restart the task
takes its last sequence number from ``txn`` and the ids it committed from the log's recent
``commitInfo``, so a replayed id is not appended twice.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from ._sink_batch import BatchingSinkBolt, CommittedBatch, SinkWriteError, safe_name

__all__ = ["DeltaSinkBolt"]

APP_KEY, SEQ_KEY, IDS_KEY = "squall.app", "squall.seq", "squall.ids"
"""The ``commitInfo`` keys a batch's commit carries."""

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

    def _open(self) -> list[CommittedBatch]:
        self.app_id = safe_name(f"{self.app_prefix or 'squall'}-{self.task_name}")
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
        tasks = len(self.context.get_component_tasks(self.component))
        # Other writers (other topologies, Spark jobs, OPTIMIZE) interleave their commits with
        # ours: read further back until the window's batches are found or the log ends
        limit = self.dedupe_batches * max(tasks, 1) * 2
        while True:
            history = table.history(limit=limit)
            batches = [self._batch_of(commit) for commit in history if commit.get(APP_KEY) == self.app_id]
            if len(batches) >= self.dedupe_batches or len(history) < limit:
                break
            limit *= 4
        batches.sort(key=lambda b: b.seq)
        if not batches or batches[-1].seq != last:
            batches.append(CommittedBatch(last, []))
        return batches

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
        props = CommitProperties(
            custom_metadata={APP_KEY: self.app_id, SEQ_KEY: str(seq), IDS_KEY: json.dumps(ids)},
            app_transactions=[Transaction(self.app_id, seq)])
        try:
            write_deltalake(self.table_uri, table, mode="append", commit_properties=props,
                            storage_options=self.storage_options)
        except Exception:
            # an error after the commit landed (a lost reply from an object store) must not
            # fail tuples that are durable: Delta's txn says whether it did
            try:
                done = DeltaTable(self.table_uri, storage_options=self.storage_options) \
                    .transaction_version(self.app_id)
            except Exception:  # noqa: BLE001 (unknown whether it landed: the write's own error is raised)
                done = None
            if done is not None and done >= seq:
                return seq
            raise
        return seq
