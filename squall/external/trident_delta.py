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
or of a read fails the batch, which Trident replays: a `squall.ReportedFailedException` (logged,
in the topology's errors) naming the table, partition and txid and whether a replay can pass
(`Failure`: a table whose columns changed under the state, a path not writable ... cannot),
counted in `FAILURES_METRIC`. The table's columns are checked before each read and MERGE, which
would write into a changed table without a word. A write of a txid below the
partition's ``txid`` in the table is refused (`squall.ReportedFailedException`, in the
topology's errors, worded as `RedisMapState`'s): it comes from a stale copy of the task (a zombie
whose worker was taken for dead and resumed, its batch committed by the task that replaced it),
whose values were read before the later batches' writes, or on Spark's engine from a query whose
checkpoint went back behind the table. An opaque
write whose ``prev`` is not what the table holds before its txid is refused too
(`DeltaMapState._check_prevs`): a zombie at the same txid as its replacement, building on its own
cached version of a txid the replacement replayed.

The last txid is compared only within one numbering of the txids: Trident numbers a topology's
batches in its transactional state, and where that is gone (the same topology run again on
another `LocalCluster`, which keeps it in its process; a cluster whose store was wiped) they
start from 1 again, which is no stale copy. A state in a topology knows its numbering by an
epoch (`txids_epoch`: a token kept in the topology's transactional state beside its txids, which
a stale copy of a task shares with its replacement), and each write records it beside the
partition's txid: another application transaction, ``<app id>.epoch`` (`EPOCH_APP`), its version
the token. A last txid of another epoch refuses nothing, and the first write of a new epoch
(over another's, or into a partition with no last txid: a run with another parallelism, whose
keys another partition wrote) records ``<app id>.renumbered`` (`RENUMBERED_APP`) too: from then on a row whose txid is above
what this epoch's batches wrote in the partition (a row says no epoch; it keeps its txid until
its key is written again) was written by an earlier one, and is read as a value of no txid, so
the batch of that number applies to it (a transactional state would take it for its own replay
and skip it; an opaque one would build on its ``prev``, or refuse it as written later); one of
exactly that txid is this epoch's only where its commits of the txid name the key (`KEYS_META`,
recorded up to `HORIZON_APP`), which a replay of it reads from the table's history. A table
that records no epoch (written before squall recorded them, or by a state with none) is taken as
written by this one: compared as before, its rows read as they are. Spark reads neither
application transaction (it reads its own streaming queries' only); the epoch is in each
commit's metadata too (``squall.epoch``), which Spark shows in the table's history only.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import secrets
from collections.abc import Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import (
    CommitFailedError,
    DeltaError,
    DeltaProtocolError,
    SchemaMismatchError,
    TableNotFoundError,
)

from .._config import Config, conf_value
from .._errors import ReportedFailedException
from ..metric import MultiCountMetric
from ..trident.state import IBackingMap, OpaqueValue, StateFactory, TransactionalValue
from ._sink_batch import drops_a_fraction, safe_name
from ._trident_map import EpochClaim, Numbering, StateType, build_map_state, kept_epoch

__all__ = ["DeltaMapState", "DeltaMapStateError", "DeltaMapStateFactory", "txids_epoch"]

TXID, PREV = "txid", "prev"
_MERGE_TRIES = 5

FAILURES_METRIC = "DeltaMapState-failures"
"""The metric each task of a `DeltaMapState` registers (`squall.metric.MultiCountMetric`): per
bucket, the failed reads and writes of its batches, under ``"transient"`` (a replay may succeed)
and ``"permanent"`` (every replay fails the same way until someone changes the table or the
store). Every failure is also reported (`squall.ReportedFailedException`: the worker log, the
topology's errors in the UI and REST API)."""

TRANSIENT, PERMANENT = "transient", "permanent"

EPOCHS = "delta-map-state"
"""The topology's transactional state (`squall.TopologyContext.transactional_state`) that keeps
the numbering of each partition's txids (`txids_epoch`)."""

EPOCH_APP = ".epoch"
"""After a partition's application id (``<app id>.epoch``): the Delta application transaction
whose version is the epoch (`txids_epoch`) of the partition's last txid, written in the same
commit as the txid's own transaction. Absent: no epoch recorded (compared as this state's)."""

RENUMBERED_APP = ".renumbered"
"""After a partition's application id: the application transaction whose version is the last
epoch whose first write found the partition's last txid of another epoch, so that the
partition's rows may hold txids of that earlier numbering (`DeltaMapState._value`)."""

HORIZON_APP = ".horizon"
"""After a partition's application id: the application transaction whose version is the highest
txid any row of the table held when the epoch of `RENUMBERED_APP` first wrote the partition (or,
an epoch an older squall renumbered, when this one first wrote for it), a bound of an earlier
numbering's txids there. Up to it, the epoch's commits name the keys they wrote (`KEYS_META`)."""

KEYS_META = "squall.keys"
"""A commit's metadata in a renumbered partition, while its txid is at most `HORIZON_APP`: the
keys it wrote (a JSON list of `_digest`s), so that a replay of the epoch's last txid tells its
own earlier attempt's row of that txid from an earlier numbering's (`Numbering.asks`), which
carries no epoch of its own."""

CLAIM_APP = ".claim"
"""After a partition's application id: the application transaction whose version is the epoch
the partition's first copies of the task agreed on (`DeltaEpochClaim`)."""

# a store's refusal that no replay gets past: the path made read-only or not ours to write
_REFUSED_FOR_GOOD = re.compile(r"permission denied|read-only file system|access denied|forbidden|"
                               rf"os error ({errno.EACCES}|{errno.EPERM}|{errno.EROFS})\b", re.IGNORECASE)


class Failure(NamedTuple):
    """Why a batch's read or write of a `DeltaMapState` failed: ``kind`` (`TRANSIENT` or
    `PERMANENT`), what happened, and for a permanent one what must change before a replay can pass."""

    kind: str
    what: str
    fix: str = ""


class DeltaMapStateError(ValueError):
    """A table, key or value the Delta map state cannot use (named in the message)."""


def txids_epoch(context: Any, state_type: StateType, app_id: str, claim: EpochClaim | None = None) -> int:
    """Which numbering of Trident's txids the partition of application id ``app_id`` writes
    (`squall.external._trident_map.kept_epoch`, under `EPOCHS`): a random positive int64 (a Delta
    transaction's version), a new one when the topology's transactional state is gone (the same
    topology run again on another LocalCluster, its txids from 1); two first copies racing agree
    through ``claim`` (`DeltaEpochClaim`). 0 (none: every last txid compared, as before) for a
    non-transactional state, or a task whose host lends no transactional state (a state made
    outside a topology; Spark's engine)."""
    epoch = kept_epoch(context, state_type, EPOCHS, app_id, lambda: secrets.randbelow(2**63 - 1) + 1,
                       lambda e: isinstance(e, int) and not isinstance(e, bool) and e > 0, claim)
    return 0 if epoch is None else int(epoch)


class DeltaEpochClaim:
    """The epoch the first copies of a partition's task agreed on, in the Delta table
    (`EpochClaim`, `kept_epoch`): the application transaction ``<app id>.claim`` (`CLAIM_APP`),
    committed alone (no rows) from the version its `held` read, which the log refuses if a
    commit of the same application transaction came after that version."""

    def __init__(self, factory: DeltaMapStateFactory, app_id: str) -> None:
        self.f = factory
        self.app = app_id + CLAIM_APP
        self._read: DeltaTable | None = None  # the version `held` read, which `replace` commits on

    def held(self) -> int | None:
        """The claimed epoch (None: none)."""
        self._read = DeltaTable(self.f.table_uri, storage_options=self.f.storage_options)
        return self._read.transaction_version(self.app)

    def replace(self, held: int | None, epoch: int) -> bool:
        """Claim ``epoch`` if no claim was committed after the version `held` read."""
        table = self._read
        assert table is not None and table.transaction_version(self.app) == held
        props = CommitProperties(custom_metadata={"squall.claim": self.app, "squall.epoch": str(epoch)},
                                 app_transactions=[Transaction(self.app, epoch)])
        try:
            table.create_write_transaction([], "append", self.f.schema, commit_properties=props)
        except CommitFailedError:  # "Concurrent transaction failed": another copy's claim came first
            return False
        return True


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

    def __init__(self, factory: DeltaMapStateFactory, partition_index: int, app_id: str,
                 failures: MultiCountMetric | None = None, context: Any = None) -> None:
        self.f = factory
        self.keys = factory.key_schema.names
        self.app_id = safe_name(f"{app_id}-{partition_index}")
        self.txid: int | None = None
        self.failures = failures if failures is not None else MultiCountMetric()
        self._ensure_table()
        # which numbering of the txids this partition writes (`txids_epoch`); 0: none known
        self.epoch = txids_epoch(context, factory.state_type, self.app_id, DeltaEpochClaim(factory, self.app_id))

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

    def _fail(self, doing: str, failure: Failure) -> ReportedFailedException:
        """The batch's failure to raise, counted in `FAILURES_METRIC` and reported: Trident
        replays the batch with the same txid either way (it cannot skip a batch and keep its
        counts exact), but a user must see a replay that can never pass, which used to go on
        without a word."""
        self.failures.scope(failure.kind).incr()
        batch = f"txid {self.txid}" if self.txid is not None else "the batch"  # a query's: no txid
        if failure.kind == PERMANENT:
            then = (f"a permanent failure: every replay of {batch} fails the same way, and the topology's "
                    f"later batches wait behind it, until {failure.fix}")
        else:
            then = f"a transient failure: {batch} is replayed"
        return ReportedFailedException(f"DeltaMapState {self.f.table_uri} (partition {self.app_id}): {doing} of "
                                       f"{batch} failed: {failure.what} ({then})")

    def _schema_changed(self, table: DeltaTable) -> Failure | None:
        """A permanent failure if the table's columns are no longer the state's: changed under a
        running topology (a column added, dropped or of another type), which a MERGE would write
        into without a word (dropping ``txid`` drops what makes a replay exact) and a read cannot cast."""
        try:
            existing = pa.schema(table.schema().to_arrow())
        except (DeltaError, pa.ArrowException, ValueError, TypeError):
            return None
        want = self.f.schema
        if existing.names != want.names:
            return Failure(PERMANENT, f"the table's columns are now {existing.names}; this {self.f.state_type.value} "
                                      f"state needs {want.names}", "the table has the state's columns again")
        for field in want:
            had = existing.field(field.name).type
            if _plain(had) != _plain(field.type):
                return Failure(PERMANENT, f"the table's column {field.name!r} is now {had}; this state needs "
                                          f"{field.type}", "the table has the state's columns again")
        return None

    def _classify(self, e: BaseException, table: DeltaTable | None) -> Failure:
        """Whether ``e``, a read's or a MERGE's, can pass on a replay."""
        what = f"{type(e).__name__}: {e}"
        if isinstance(e, TableNotFoundError):
            return Failure(PERMANENT, what, f"a Delta table is at {self.f.table_uri} again")
        changed = self._schema_changed(table) if table is not None else None
        if changed is not None:
            return Failure(PERMANENT, f"{changed.what} ({what})", changed.fix)
        if isinstance(e, (SchemaMismatchError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)):
            return Failure(PERMANENT, what, "the table's rows fit the state's columns again")
        if isinstance(e, DeltaProtocolError):
            return Failure(PERMANENT, what, "the table's protocol is one deltalake can write")
        if isinstance(e, PermissionError) or _REFUSED_FOR_GOOD.search(str(e)):
            return Failure(PERMANENT, what, f"{self.f.table_uri} can be written again (its permissions, a "
                                            f"read-only mount, the store's credentials)")
        return Failure(TRANSIENT, what)

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
        delta = at
        try:
            if delta is None:
                delta = self._table()
            changed = self._schema_changed(delta)
            if changed is not None:
                raise self._fail("reading", changed)
            # filtered after the read, cast to the state's own schema: MERGE writes strings as
            # string_view, which a filter pushed into the scan cannot compare with the keys
            numbering = self._numbering(delta)
            table = delta.to_pyarrow_dataset().to_table().cast(self.f.schema)
            column = table[first]
            rows = table.filter(pc.is_in(column, value_set=pa.array([k[0] for k in keys], column.type))).to_pylist()
            written = self._written_at_mine(delta, numbering, rows)
        except (OSError, pa.ArrowException, DeltaError) as e:
            raise self._fail("reading", self._classify(e, delta)) from None
        wanted = set(keys)
        out: dict[tuple, Any] = {}
        for row in rows:
            key = tuple(row[n] for n in self.keys)
            if key in wanted:
                if key in out:
                    raise DeltaMapStateError(f"DeltaMapState {self.f.table_uri}: key {key!r} has more than one "
                                             f"row (written by something other than this state)")
                out[key] = self._value(row, numbering, None if written is None else _digest(key) in written)
        return out

    def _written_at_mine(self, table: DeltaTable, numbering: Numbering, rows: list[dict]) -> set[str] | None:
        """The keys (`_digest`s) this epoch's commits wrote at its last txid in the partition
        (`KEYS_META`), asked only where it matters (`Numbering.asks`: this batch replays that
        txid, a row is of it, and an earlier numbering's may be: the txid is within
        `HORIZON_APP`); None where not asked, or where the commits name no keys (written by a
        squall that did not), whose rows are taken for this epoch's, as before."""
        mine = numbering.mine
        if self.f.state_type is StateType.NON_TRANSACTIONAL or not numbering.asks(self.txid) \
                or not any(row[TXID] == mine for row in rows):
            return None
        horizon = table.transaction_version(self.app_id + HORIZON_APP)
        if horizon is not None and mine is not None and mine > horizon:
            return None
        keys: set[str] = set()
        limit, seen = 32, 0
        while True:
            commits = table.history(limit)
            for info in commits[seen:]:  # newest first
                if info.get("squall.app") != self.app_id:
                    continue
                if info.get("squall.epoch") != str(self.epoch) or info.get("squall.txid") != str(mine):
                    return keys  # the commit before this epoch's first of its last txid
                if KEYS_META not in info:
                    return None
                keys.update(json.loads(info[KEYS_META]))
            if len(commits) < limit:
                return keys
            seen, limit = len(commits), limit * 4

    def _value(self, row: dict, numbering: Numbering, written: bool | None = None) -> Any:
        """The stored value of ``row``. A row of an earlier epoch's txid (`RENUMBERED_APP`: above
        what this epoch's batches wrote in the partition, or equal to it where this epoch did not
        write the key then, ``written`` False) is read as of no txid, older than every batch: its
        txid is another numbering's, which says nothing of this one's batches."""
        v = row[self.f.value_field]
        t = self.f.state_type
        if t is StateType.NON_TRANSACTIONAL:
            return v
        txid = numbering.txid(row[TXID], written)
        if t is StateType.TRANSACTIONAL:
            return TransactionalValue(txid, v)
        return OpaqueValue(txid, v, row[PREV])

    def _numbering(self, table: DeltaTable) -> Numbering:
        """What ``table`` (a version of it) says of this partition's txids; see the module docstring."""
        last = table.transaction_version(self.app_id)
        if not self.epoch:
            return Numbering.of(last, None, None, 0)
        return Numbering.of(last, table.transaction_version(self.app_id + EPOCH_APP),
                            table.transaction_version(self.app_id + RENUMBERED_APP), self.epoch)

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
        for attempt in range(_MERGE_TRIES):
            table = None
            try:
                table = self._table()
                # checked before each MERGE, which writes into a changed table without a word
                changed = self._schema_changed(table)
                if changed is not None:
                    raise self._fail("MERGE", changed)
                props = CommitProperties(custom_metadata={"squall.app": self.app_id, "squall.txid": str(txid)})
                if txid is not None:
                    numbering = self._numbering(table)
                    self._check_not_stale(numbering, txid)
                    if self.f.state_type is StateType.OPAQUE:
                        self._check_prevs(table, rows, source, txid)
                    props = self._commit_properties(table, numbering, txid, source)
                (table.merge(source, on, source_alias="s", target_alias="t", commit_properties=props)
                 .when_matched_update_all().when_not_matched_insert_all().execute())
                break
            except CommitFailedError as e:
                # another partition's MERGE committed first (or this partition's stale copy's,
                # past which delta-rs does not rebase a commit of the same application id):
                # redo ours on the new version, checked again
                if attempt == _MERGE_TRIES - 1:
                    raise self._fail("MERGE", Failure(TRANSIENT, f"it lost {_MERGE_TRIES} races with other "
                                                                 f"writers: {e}")) from None
            except (OSError, DeltaError, pa.ArrowException) as e:
                # the store's failure (a read-only or full disk, an object store that does not
                # answer: deltalake raises those as DeltaError), or the table's: the batch fails
                # and replays, as the reads' do, rather than the bare DeltaError escaping as an
                # operation's error; said, and told apart from one a replay can get past
                raise self._fail("MERGE", self._classify(e, table)) from None

    def _commit_properties(self, table: DeltaTable, numbering: Numbering, txid: int,
                           source: pa.Table) -> CommitProperties:
        """The MERGE (of ``source``'s rows into ``table``) of batch ``txid``: its application
        transaction (the partition's last txid, `DeltaTable.transaction_version`), and with an
        epoch the epoch's beside it (`EPOCH_APP`), at an epoch's first write `RENUMBERED_APP`
        and `HORIZON_APP` (or at its first write renumbered with no horizon, an older squall's
        epoch), and while renumbered and within the horizon the keys (`KEYS_META`)."""
        txns = [Transaction(self.app_id, txid)]
        meta = {"squall.app": self.app_id, "squall.txid": str(txid)}
        if self.epoch:
            txns.append(Transaction(self.app_id + EPOCH_APP, self.epoch))
            meta["squall.epoch"] = str(self.epoch)
            if numbering.mine is None:  # this epoch's first write in the partition
                txns.append(Transaction(self.app_id + RENUMBERED_APP, self.epoch))
                highest = self._highest_txid(table)
                txns.append(Transaction(self.app_id + HORIZON_APP, highest))
                horizon: int | None = highest
            elif numbering.renumbered:
                horizon = table.transaction_version(self.app_id + HORIZON_APP)
                if horizon is None:
                    # renumbered by a squall from before the horizon (an upgrade mid-run): bound it
                    # now, by every txid the table holds, else every later commit of the run names
                    # its keys, however far past the earlier numbering's txids it has gone
                    horizon = self._highest_txid(table)
                    txns.append(Transaction(self.app_id + HORIZON_APP, horizon))
            else:
                horizon = 0  # never renumbered: no earlier numbering's txid to tell from
            if horizon is None or txid <= horizon:
                keys = source.select(self.keys).to_pylist()
                meta[KEYS_META] = json.dumps(sorted({_digest(tuple(k[n] for n in self.keys)) for k in keys}))
        return CommitProperties(custom_metadata=meta, app_transactions=txns)

    def _highest_txid(self, table: DeltaTable) -> int:
        """The highest txid of any row of ``table`` (0: none): no earlier numbering's txid in the
        partition is above it (`HORIZON_APP`)."""
        column = table.to_pyarrow_dataset().to_table(columns=[TXID])[TXID]
        highest = pc.max(column).as_py() if len(column) else None
        return int(highest or 0)

    def _check_not_stale(self, numbering: Numbering, txid: int) -> None:
        """Refuse batch ``txid``'s write where the table's transaction of this partition is
        later and of the same epoch (`txids_epoch`): Trident commits a partition's batches in
        txid order, so a later one was committed by another copy of this task, and this one is
        stale: a zombie (its worker taken for dead on a machine that hung or lost the master,
        resumed) whose batch was replayed and committed by the task that replaced it. Its values
        were read before the later batches' writes, and would put their counts back. A later
        txid of another epoch is an earlier numbering's (the topology run before on another
        LocalCluster), and refuses nothing."""
        last = numbering.last
        if numbering.ours and last is not None and last > txid:
            # a topology run again on another LocalCluster has an epoch of its own, unless the
            # table's last txid was written with none, which is taken for this numbering's
            unrecorded = (f"; here the table records no epoch of txid {last} (written before squall recorded "
                          f"epochs, or by a state with none), which is taken for this numbering's"
                          if self.epoch and not numbering.recorded else "")
            raise ReportedFailedException(
                f"DeltaMapState {self.f.table_uri} (partition {self.app_id}): wrote txid {last} already (the "
                f"table's transaction_version({self.app_id!r})); this write of txid {txid} is {self._stale()}. "
                f"(Another topology writing this table under the same app id, or this one numbering its batches "
                f"from 1 again where no epoch tells the numberings apart (a state made outside a topology, Spark's "
                f"engine{unrecorded}), is refused too: give each its own app_id "
                f"(DeltaMapState.transactional(..., app_id=...)) or run it under another topology name)")

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
                raise ReportedFailedException(
                    f"DeltaMapState {self.f.table_uri} (partition {self.app_id}): the value of txid {txid} of key "
                    f"{key!r:.100} was computed from prev {value.prev!r:.100} but the table holds {before!r:.100} "
                    f"before txid {txid}: this write is {self._stale()}")

    def _stale(self) -> str:
        """What a refused write (`_check_not_stale`, `_check_prevs`) comes from and what happens
        to its batch, said as `RedisMapState` says it: the refusal is reported (a plain
        `FailedException` failed the batch without a word in the topology's errors, for ever if
        it was no zombie but a numbering from 1 again)."""
        # on Spark's engine the states run in the driver, one copy, and a lower txid means the
        # query's checkpoint went back (its latest offsets/N removed, an older copy restored)
        return ("refused: it comes from a stale copy of the task (a worker taken for dead, which resumed after "
                "the task that replaced it committed its batch), or, on Spark's engine, from a query whose "
                "checkpoint is behind this table (its latest offsets file removed, or an older copy of it "
                "restored), whose values would undo the later ones; nothing is written, the batch fails, and "
                "its replay reads the table again")


def _plain(t: pa.DataType) -> pa.DataType:
    """``t`` with its string and binary variants as one (MERGE writes strings as string_view)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return t


def _digest(key: tuple) -> str:
    """A short name of ``key`` (as the table stores it) for `KEYS_META`."""
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


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

    def store_location(self) -> str:
        """Its table (`StateFactory.store_location`): a local path made absolute."""
        uri = self.table_uri if "://" in self.table_uri else os.path.abspath(self.table_uri)
        return f"Delta table {uri}"

    def make_state(self, conf: dict, metrics: Any, partition_index: int, num_partitions: int) -> Any:
        """A map state for partition ``partition_index``; see the module docstring."""
        backing = DeltaMapState(self, partition_index, self.app_id_in(conf), _failures_metric(conf, metrics),
                                metrics)
        return build_map_state(backing, self.state_type, self.local_cache_size, self.global_key)


def _failures_metric(conf: dict, metrics: Any) -> MultiCountMetric | None:
    """The task's `FAILURES_METRIC`, registered with ``metrics`` (the task's context, Storm's
    IMetricsContext) every ``topology.builtin.metrics.bucket.size.secs``; one for every Delta
    map state of the task. None where there is no context to register it with."""
    if metrics is None or not callable(getattr(metrics, "register_metric", None)):
        return None
    known = getattr(metrics, "get_registered_metric_by_name", None)
    metric = known(FAILURES_METRIC) if callable(known) else None
    if metric is None:
        bucket = conf_value(conf, Config.TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS)
        metric = metrics.register_metric(FAILURES_METRIC, MultiCountMetric(), int(bucket))
    return metric
