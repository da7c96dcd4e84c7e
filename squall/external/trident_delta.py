"""`DeltaMapState`: a Trident map state in a Delta table that Spark jobs read (``deltalake``, no
JVM).

One row per key: the key's columns (``key_schema``, the group's fields in order), the value column
(``value_field``), and for a transactional state ``txid`` (the batch that last wrote the row), for
an opaque one ``txid`` and ``prev`` (Storm's `OpaqueValue`: the value before that batch). A Spark
job reads the current value of every key with ``spark.read.format("delta").load(uri)``.

Each state partition writes each batch once: the one ``multi_put`` a batch's
``persistent_aggregate`` makes is one Delta ``MERGE`` (update the rows of existing keys, insert the
new ones), a single atomic commit carrying Delta's application transaction
(``app_id`` = ``<app_id>-<partition index>``, ``version`` = txid), so a reader sees a batch's
rows all at once or not at all, and ``DeltaTable.transaction_version(app_id)`` says the last txid
a partition wrote. Nothing is buffered past the call: a batch that fails after its write leaves
the table, the task's `CachedMap` and the txids stored in the rows agreeing. A replayed txid goes through the same `TransactionalMap`/`OpaqueMap` rules as any
map state (ignored, or recomputed from ``prev``) and its MERGE rewrites the same rows. A MERGE that
loses a race with another writer is retried on the new version; any other failure of the write
fails the batch (`squall.FailedException`), which Trident replays. A write of a txid below the
partition's ``txid`` in the table is refused (`squall.FailedException`): it comes from a stale
copy of the task (a zombie whose worker was taken for dead and resumed, its batch committed by
the task that replaced it), whose values were read before the later batches' writes. An opaque
write whose ``prev`` is not what the table holds before its txid is refused too
(`DeltaMapState._check_prevs`): a zombie at the same txid as its replacement, building on its own
cached version of a txid the replacement replayed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError, DeltaError

from .._config import Config
from .._errors import FailedException
from ..trident.state import IBackingMap, OpaqueValue, StateFactory, TransactionalValue
from ._sink_batch import drops_a_fraction, safe_name
from ._trident_map import StateType, build_map_state

__all__ = ["DeltaMapState", "DeltaMapStateError", "DeltaMapStateFactory"]

TXID, PREV = "txid", "prev"
_MERGE_TRIES = 5


class DeltaMapStateError(ValueError):
    """A table, key or value the Delta map state cannot use (named in the message)."""


def _columns(state_type: StateType, key_schema: pa.Schema, value_field: str, value_type: pa.DataType) -> pa.Schema:
    fields = list(key_schema) + [pa.field(value_field, value_type)]
    if state_type is not StateType.NON_TRANSACTIONAL:
        fields.append(pa.field(TXID, pa.int64()))
    if state_type is StateType.OPAQUE:
        fields.append(pa.field(PREV, value_type))
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise DeltaMapStateError(f"DeltaMapState: the columns {names} repeat a name (the key fields, the value "
                                 f"field and the state's own {TXID!r}/{PREV!r} must differ)")
    return pa.schema(fields)


class DeltaMapState(IBackingMap):
    """The backing map in a Delta table; see the module docstring. Built by its factories."""

    def __init__(self, factory: DeltaMapStateFactory, partition_index: int, app_id: str) -> None:
        self.f = factory
        self.keys = factory.key_schema.names
        self.app_id = safe_name(f"{app_id}-{partition_index}")
        self.txid: int | None = None
        self._ensure_table()

    @staticmethod
    def transactional(table_uri: str | os.PathLike, key_schema: pa.Schema, value_type: pa.DataType,
                      **kwargs: Any) -> DeltaMapStateFactory:
        """A factory of transactional map states in the Delta table at ``table_uri`` (created if
        absent); ``kwargs`` are `DeltaMapStateFactory`'s."""
        return DeltaMapStateFactory(table_uri, StateType.TRANSACTIONAL, key_schema, value_type, **kwargs)

    @staticmethod
    def opaque(table_uri: str | os.PathLike, key_schema: pa.Schema, value_type: pa.DataType,
               **kwargs: Any) -> DeltaMapStateFactory:
        """A factory of opaque map states (columns value, ``txid``, ``prev``)."""
        return DeltaMapStateFactory(table_uri, StateType.OPAQUE, key_schema, value_type, **kwargs)

    @staticmethod
    def non_transactional(table_uri: str | os.PathLike, key_schema: pa.Schema, value_type: pa.DataType,
                          **kwargs: Any) -> DeltaMapStateFactory:
        """A factory of non-transactional map states (the value column only)."""
        return DeltaMapStateFactory(table_uri, StateType.NON_TRANSACTIONAL, key_schema, value_type, **kwargs)

    def _ensure_table(self) -> None:
        f = self.f
        if not DeltaTable.is_deltatable(f.table_uri, storage_options=f.storage_options):
            if "://" not in f.table_uri:
                os.makedirs(f.table_uri, exist_ok=True)
            # the partitions race to create it: "ignore" keeps whichever came first
            DeltaTable.create(f.table_uri, f.schema, mode="ignore", storage_options=f.storage_options)
        existing = pa.schema(self._table().schema().to_arrow())
        if existing.names != f.schema.names:
            raise DeltaMapStateError(f"DeltaMapState: table {f.table_uri} has columns {existing.names}; this "
                                     f"{f.state_type.value} state needs {f.schema.names}")

    def _table(self) -> DeltaTable:
        return DeltaTable(self.f.table_uri, storage_options=self.f.storage_options)

    def _key(self, key: Sequence[Any]) -> tuple:
        key = tuple(key)
        if len(key) != len(self.keys):
            raise DeltaMapStateError(f"DeltaMapState {self.f.table_uri}: a key has {len(key)} values {key!r}, "
                                     f"the table's key columns are {self.keys}")
        return key

    def begin_commit(self, txid: int) -> None:
        """Batch ``txid`` starts updating the state: its writes carry this txid."""
        self.txid = txid

    def commit(self, txid: int) -> None:
        """Batch ``txid`` is done."""
        self.txid = None

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list:
        """The stored values of ``keys`` (None where absent), read from the table's current version."""
        wanted = [self._key(k) for k in keys]
        found = self._read(sorted(set(wanted), key=repr)) if wanted else {}
        return [found.get(k) for k in wanted]

    def _read(self, keys: list[tuple], at: DeltaTable | None = None) -> dict[tuple, Any]:
        """The stored values of ``keys`` in the table's version ``at`` (its current one by default)."""
        first = self.keys[0]
        try:
            # filtered after the read, cast to the state's own schema: MERGE writes strings as
            # string_view, which a filter pushed into the scan cannot compare with the keys
            table = (at or self._table()).to_pyarrow_dataset().to_table().cast(self.f.schema)
            column = table[first]
            rows = table.filter(pc.is_in(column, value_set=pa.array([k[0] for k in keys], column.type))).to_pylist()
        except (OSError, pa.ArrowException, DeltaError) as e:
            raise FailedException(f"DeltaMapState {self.f.table_uri}: reading failed: {e}") from None
        wanted = set(keys)
        out: dict[tuple, Any] = {}
        for row in rows:
            key = tuple(row[n] for n in self.keys)
            if key in wanted:
                if key in out:
                    raise DeltaMapStateError(f"DeltaMapState {self.f.table_uri}: key {key!r} has more than one "
                                             f"row (written by something other than this state)")
                out[key] = self._value(key, row)
        return out

    def _value(self, key: tuple, row: dict) -> Any:
        v = row[self.f.value_field]
        t = self.f.state_type
        if t is StateType.NON_TRANSACTIONAL:
            return v
        if t is StateType.TRANSACTIONAL:
            return TransactionalValue(row[TXID], v)
        return OpaqueValue(row[TXID], v, row[PREV])

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        """Write ``values`` at ``keys`` in one MERGE (see the module docstring)."""
        rows: dict[tuple, Any] = {}
        for k, v in zip(keys, values):
            rows[self._key(k)] = v  # a key twice in one call: the last value, as a map's put
        if rows:
            self._write(rows, self.txid)

    def _row(self, key: tuple, value: Any) -> dict:
        row = dict(zip(self.keys, key))
        t = self.f.state_type
        if t is StateType.NON_TRANSACTIONAL:
            row[self.f.value_field] = value
        elif t is StateType.TRANSACTIONAL:
            row[self.f.value_field], row[TXID] = value.val, value.txid
        else:
            row[self.f.value_field], row[TXID], row[PREV] = value.curr, value.curr_txid, value.prev
        return row

    def _write(self, rows: dict[tuple, Any], txid: int | None) -> None:
        written = [self._row(k, v) for k, v in rows.items()]
        for field in self.f.schema:
            # pyarrow would cut the fraction off without a word (a Sum of decimals into an int64
            # value): refused as a value that does not fit, before anything is written
            bad = next((row for row in written if drops_a_fraction(field.type, row[field.name])), None)
            if bad is not None:
                raise DeltaMapStateError(
                    f"DeltaMapState {self.f.table_uri}: a value does not fit the column {field.name!r} "
                    f"({field.type}): {bad[field.name]!r:.100} has a fraction, which the column would cut off "
                    f"(key {tuple(bad[n] for n in self.keys)!r:.100}); give the state a floating point or "
                    f"decimal value_type")
        try:
            source = pa.Table.from_pylist(written, schema=self.f.schema)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise DeltaMapStateError(f"DeltaMapState {self.f.table_uri}: a value does not fit the column "
                                     f"{self.f.value_field!r} ({self.f.value_type}): {e}") from None
        # null-safe: a None in a key is a key like any other, matched to its row, not inserted again
        on = " AND ".join(f"(t.`{n}` IS NOT DISTINCT FROM s.`{n}`)" for n in self.keys)
        props = CommitProperties(custom_metadata={"squall.app": self.app_id, "squall.txid": str(txid)},
                                 app_transactions=[Transaction(self.app_id, txid)] if txid is not None else None)
        for attempt in range(_MERGE_TRIES):
            table = self._table()
            if txid is not None:
                self._check_not_stale(table, txid)
                if self.f.state_type is StateType.OPAQUE:
                    self._check_prevs(table, rows, source, txid)
            try:
                (table.merge(source, on, source_alias="s", target_alias="t", commit_properties=props)
                 .when_matched_update_all().when_not_matched_insert_all().execute())
                break
            except CommitFailedError as e:
                # another partition's MERGE committed first (or this partition's stale copy's,
                # past which delta-rs does not rebase a commit of the same application id):
                # redo ours on the new version, checked again
                if attempt == _MERGE_TRIES - 1:
                    raise FailedException(f"DeltaMapState {self.f.table_uri}: MERGE of txid {txid} lost "
                                          f"{_MERGE_TRIES} races with other writers: {e}") from None
            except (OSError, DeltaError) as e:
                # the store's failure (a read-only or full disk, an object store that does not
                # answer: deltalake raises those as DeltaError): the batch fails and replays, as
                # the reads' do, rather than the bare DeltaError escaping as an operation's error
                raise FailedException(f"DeltaMapState {self.f.table_uri}: MERGE of txid {txid} failed: "
                                      f"{type(e).__name__}: {e}") from None


    def _check_not_stale(self, table: DeltaTable, txid: int) -> None:
        """Refuse batch ``txid``'s write where the table's transaction of this partition is
        later: Trident commits a partition's batches in txid order, so a later one was
        committed by another copy of this task, and this one is stale: a zombie (its worker
        taken for dead on a machine that hung or lost the master, resumed) whose batch was
        replayed and committed by the task that replaced it. Its values were read before the
        later batches' writes, and would put their counts back."""
        last = table.transaction_version(self.app_id)
        if last is not None and last > txid:
            raise FailedException(
                f"DeltaMapState {self.f.table_uri}: partition {self.app_id} wrote txid {last} already; this "
                f"write of txid {txid} is refused: it comes from a stale copy of the task (a worker taken for "
                f"dead, which resumed, whose batch its replacement committed), or from another topology "
                f"using the app id {self.f.app_id!r} on this table (give each its own)")


    def _check_prevs(self, table: DeltaTable, rows: dict[tuple, Any], source: pa.Table, txid: int) -> None:
        """Refuse opaque batch ``txid``'s write unless each new value's ``prev`` is what the
        table (at the version the MERGE is made on, so a commit in between fails it and this is
        checked again) holds before ``txid``: the ``curr`` of a row of an earlier txid, the
        ``prev`` of a row of ``txid`` itself (a replay), nothing for a new key. Another prev was
        read from a stale copy: a zombie's cache holding its own version of a txid that its
        replacement replayed differently (an opaque spout's replay may), whose write the
        partition's txid check lets through at the same txid, and whose prev would then win
        whichever wrote last (the other building on it). The batch fails; its task's state is
        rebuilt (`CommittingMapState`), so its replay reads the table again.

        Each ``prev`` is compared as its column stores it (``source``, the MERGE's rows in the
        table's schema), not as the task computed it: a task's cache keeps the value it wrote as
        Python made it (0.1 + 0.1, a double), which a float32 column holds rounded, and compared
        so every batch of a healthy task after the first was refused once."""
        stored = self._read(sorted(rows, key=repr), at=table)
        as_stored = source.column(PREV).to_pylist()  # in the order of ``rows`` (`_write`)
        for (key, value), prev in zip(rows.items(), as_stored, strict=True):
            row = stored.get(key)
            before = None if row is None else row.prev if row.curr_txid == txid else row.curr
            if not _same(prev, before) or (row is not None and row.curr_txid is not None and row.curr_txid > txid):
                raise FailedException(
                    f"DeltaMapState {self.f.table_uri}: partition {self.app_id}'s value for txid {txid} of key "
                    f"{key!r:.100} was computed from prev {value.prev!r:.100} but the table holds {before!r:.100} "
                    f"before txid {txid}: refused, it was read from a stale copy (a task's cache written by a "
                    f"copy of it taken for dead, or by one whose batch another copy replayed); the batch's "
                    f"replay reads the table again")


def _same(a: Any, b: Any) -> bool:
    """Equal as stored values: a NaN read back is the NaN written (else a float state holding
    one would refuse every write of its key)."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


class DeltaMapStateFactory(StateFactory):
    """The `StateFactory` `DeltaMapState`'s factories return (picklable).

    ``key_schema``: the key's columns, one per group field (an ungrouped ``persistent_aggregate``
    uses one string column for ``global_key``); ``value_type``: the value column's Arrow type;
    ``value_field``: its name; ``app_id``: the prefix of each partition's Delta application id
    (give each topology writing the same table its own; by default ``squall-trident-<topology
    name>``, `app_id_in`); ``local_cache_size``: `CachedMap`
    entries per task (0: none); ``storage_options`` go to ``deltalake``.
    """

    def __init__(self, table_uri: str | os.PathLike, state_type: StateType, key_schema: pa.Schema,
                 value_type: pa.DataType, *, value_field: str = "value", app_id: str | None = None,
                 local_cache_size: int = 1000, global_key: str = "$DELTA-MAP-STATE-GLOBAL",
                 storage_options: dict[str, str] | None = None) -> None:
        if not isinstance(key_schema, pa.Schema) or len(key_schema) == 0:
            raise DeltaMapStateError(f"DeltaMapState {table_uri}: key_schema must be a pyarrow.Schema of at "
                                     f"least one column (the group's fields)")
        self.table_uri = str(table_uri)
        self.state_type = state_type
        self.key_schema = key_schema
        self.value_type = value_type
        self.value_field = value_field
        self.app_id = app_id
        self.local_cache_size = local_cache_size
        self.global_key = global_key
        self.storage_options = storage_options
        self.schema = _columns(state_type, key_schema, value_field, value_type)

    def app_id_in(self, conf: dict) -> str:
        """The application id prefix of the topology whose ``conf`` this is: ``app_id``, or by
        default ``squall-trident-<topology.name>`` (``squall-trident`` where the conf has no
        name). Per topology, since the refusal of a txid below a partition's last one (a
        zombie's) would otherwise stall another topology writing the table, whose txids start
        again from 1; a topology submitted again under its name goes on from its txids."""
        if self.app_id is not None:
            return self.app_id
        name = conf.get(Config.TOPOLOGY_NAME)
        return f"squall-trident-{name}" if name else "squall-trident"

    def make_state(self, conf: dict, metrics: Any, partition_index: int, num_partitions: int) -> Any:
        """A map state for partition ``partition_index``; see the module docstring."""
        backing = DeltaMapState(self, partition_index, self.app_id_in(conf))
        return build_map_state(backing, self.state_type, self.local_cache_size, self.global_key)
