"""A transactional Trident spout as a Spark source (PySpark's Python Data Source API).

Storm's contract for a transactional spout is Spark's for a replayable source: the same batch for
the same txid, like the same rows for the same offsets. So a spout's batch metadata *is* the
offset. Each micro-batch is one batch of the spout:

- ``latestOffset(start)`` (on the driver) plans the next batch, ``txid = start.txid + 1``: the
  spout's coordinator says whether it is ready and gives the batch's metadata, and the emitter
  emits it once there, counted and digested (a batch of nothing is no micro-batch: the offset
  stays, so Spark runs no empty micro-batch, but the txid is committed on the driver and the next
  plan goes on after it, as Storm commits an empty batch). Spark writes the offset to its checkpoint's write-ahead log
  before the batch runs.
- ``read(partition)`` (in a Spark task) emits the batch again from that metadata; a re-run of the
  micro-batch (a task retried, the driver restarted) reads the same offsets, so the same tuples.
  For a spout whose replay cannot check itself, the tuples' digest must equal the planned one, or
  the task fails naming the spout and the txid: the spout is not transactional.

Kinds: an `IBatchSpout` or an `ITridentSpout` (metadata from its coordinator, one partition); an
`IPartitionedTridentSpout` (Storm's partitions are Spark's input partitions: each partition's
metadata is in the offset, a new txid is planned with ``emit_batch_new`` after the previous
metadata, a task re-emits its partition with ``re_emit_partition_batch``; a batch that emits no
tuple is no micro-batch unless the spout read records in it, dead letters or records its
translator skipped (its emitter's ``covers_records``): then it is one of no rows, its offset past
them). Refused, by
`check_spout`: a plain `Spout` (at least once: a replay is what failed, not the same batch) and
an opaque spout (a replayed txid may hold other records), naming the spout and the reason.

The planning emit reads the batch on the driver and the task reads it again: twice the reading
for a spout over a remote source, and what the spout reads in one batch must fit the driver.

With a head (`SourceHead`: the spout's one reader, ``compiler``'s ``in_source``), ``read`` runs
that bolt on the batch's tuples in the same process (``runner.run_body``), and the source's rows
are what the bolt emits (``rows.ROW_SCHEMA``), not the spout's tuples: one Python process a
batch instead of the read and a ``mapInArrow`` with Arrow between them.

Columns: one typed column per field whose type is declared (`TypedField`: the spout's
``field_types()``, or ``start``'s ``field_types``), ``trident_tuple`` the pickled list of the
other fields (null when there are none). A value that is neither None nor exactly the declared
type (a bool is not an int, an int is not a float) fails the batch with a ValueError naming the
spout, the field and the txid: Spark would otherwise cast it, and the operations after would see
another value than on squall's engine. Then one key column per key a repartition after the
spout (or after Spark SQL over its stream) hashes (``SpoutSpec.keys``): ``rows.key_bytes`` of
those fields, computed here, where the values are, as a bolt computes its output's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from .context import SparkTaskContext
from .rows import INT64, ROW_SCHEMA, SQL_TYPES, TUPLE, digest, dumps, from_offset, from_option, key_bytes, to_offset

if TYPE_CHECKING:
    from ..coordinator import TransactionAttempt

SOURCE_NAME = "squall_trident"


def _attempt(txid: int) -> TransactionAttempt:
    """Trident's first attempt at ``txid``: Trident's coordinator is imported by the readers, at
    their first batch, not with this module, which every Spark process that unpickles the source
    imports (``lookup_data_sources``, ``create_data_source``, ...)."""
    from ..coordinator import TransactionAttempt

    return TransactionAttempt(txid, 0)


class TypedField(NamedTuple):
    """A spout's field that travels in a typed column: its position, name, column and Python type."""

    position: int
    name: str
    column: str
    type: type


@dataclass(frozen=True)
class SourceHead:
    """The Trident bolt a source runs in its read (``compiler``'s ``in_source``): its
    component, its body as built (pickled), the spout's streams it reads, its tasks, and per
    stream it emits the key positions and the partial a SQL sum takes (``runner.run_body``)."""

    component: str
    body: bytes
    inputs: tuple[str, ...]
    tasks: int
    keys: dict[str, tuple[int, ...]]
    combines: dict[str, int]


@dataclass(frozen=True)
class SpoutSpec:
    """What the source is given (pickled in its ``spout`` option): the spout and its txid key,
    its output fields and those of them that travel in typed columns, and the key columns it
    computes (``keys``: a column and the positions of the fields whose ``rows.key_bytes`` it holds)."""

    txid: str
    spout: Any                  # the spout as new_stream got it
    conf: dict
    fields: tuple[str, ...] = ()
    typed: tuple[TypedField, ...] = ()
    # a partitioned spout's partitions go to at most this many Spark input partitions (0: one each)
    tasks: int = 0
    head: SourceHead | None = None  # the bolt the read runs on the batch: its rows are the bolt's
    keys: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def schema(self) -> str:
        """The source's columns: the pickled rest, then each typed field's, then each key
        column; with a ``head``, the rows its bolt emits (``rows.ROW_SCHEMA``)."""
        if self.head is not None:
            return ROW_SCHEMA
        return ", ".join([f"{TUPLE} BINARY"] + [f"{t.column} {SQL_TYPES[t.type]}" for t in self.typed]
                         + [f"{column} BINARY" for column, _ in self.keys])

    def rows(self, batches: Iterator[_Collect], txid: int) -> Iterator[Any]:
        """What a read yields of ``batches`` (the tuples of each spout partition in turn, read
        with `collector`): each as an Arrow batch of the source's columns, or with a ``head``,
        its bolt run over all of them."""
        if self.head is None:
            for collected in batches:
                yield collected.record_batch()
            return
        from .runner import run_body

        head = self.head

        def inputs() -> Iterator[tuple[str, list[list]]]:
            for collected in batches:
                values = collected.values
                assert values is not None  # collector() keeps them for a head
                for k, stream in enumerate(head.inputs):  # each stream its own lists, as decoded rows are
                    yield stream, values if k == 0 else [list(v) for v in values]

        yield from run_body(head.body, head.component, head.tasks, txid, self.conf, head.keys, head.combines, inputs())

    def collector(self, txid: int, checked: bool = False) -> _Collect:
        """Where a read's emits go: the source's columns, or with a ``head`` the tuples as they are."""
        return _Collect(self, txid, checked, keep=self.head is not None)

    def where(self) -> str:
        """The spout as errors name it."""
        return _where(self.txid, self.spout)


def _where(txid: str, spout: Any) -> str:
    """A spout as errors name it: ``new_stream('txid', SpoutClass)``."""
    return f"new_stream({txid!r}, {type(spout).__name__})"


def typed_fields(txid: str, spout: Any, fields: list[str], column_prefix: str,
                 declared: dict[str, type] | None = None) -> tuple[TypedField, ...]:
    """The fields of ``spout`` that get typed columns: those ``declared`` (else the spout's own
    ``field_types()``, when it has one) to hold one of `SQL_TYPES`, or ValueError naming the
    spout and the field."""
    where = _where(txid, spout)
    if declared is None:
        own = getattr(spout, "field_types", None)
        declared = dict(own()) if callable(own) else {}
    typed = []
    for name, kind in declared.items():
        if name not in fields:
            raise ValueError(f"{where}: field_types names {name!r}, which is not one of its fields {fields}")
        if kind not in SQL_TYPES:
            raise ValueError(f"{where}: field {name!r} declared {kind!r}: a typed column holds one of "
                             f"{', '.join(t.__name__ for t in SQL_TYPES)}")
    for i, name in enumerate(fields):
        if name in declared:
            typed.append(TypedField(i, name, f"{column_prefix}_f{i}", declared[name]))
    return tuple(typed)


def check_spout(txid: str, spout: Any) -> str:
    """The kind of reader ``spout`` gets (``partitioned`` or ``batch``), or ValueError naming it.

    Raises:
        ValueError: the spout cannot give the same batch for the same txid (plain, opaque).
    """
    from ..._components import Spout
    from ..partitioned import (
        IOpaquePartitionedTridentSpout,
        IPartitionedTridentSpout,
        OpaquePartitionedTridentSpoutExecutor,
        PartitionedTridentSpoutExecutor,
    )
    from ..spout import IBatchSpout, ITridentSpout, RichSpoutAdapter

    where = _where(txid, spout)
    if isinstance(spout, (Spout, RichSpoutAdapter)):
        raise ValueError(  # noqa: TRY004 (API.md: what start refuses is a ValueError naming it)
            f"{where}: a plain Spout is at least once (a replayed txid re-emits what failed, not "
                         "the same batch), and Spark re-runs a micro-batch from its offsets, which needs the same "
                         "batch for the same txid: use a transactional Trident spout (an IBatchSpout, an "
                         "IPartitionedTridentSpout, an ITridentSpout) or run the topology on squall's engine")
    if isinstance(spout, (IOpaquePartitionedTridentSpout, OpaquePartitionedTridentSpoutExecutor)):
        raise ValueError(  # noqa: TRY004 (API.md: what start refuses is a ValueError naming it)
            f"{where}: an opaque spout may put other records in a replayed txid, and Spark re-runs "
                         "a micro-batch from its offsets, which needs the same batch for the same txid: use the "
                         "spout's transactional form (e.g. KafkaTridentSpoutTransactional) or squall's engine")
    if isinstance(spout, (IPartitionedTridentSpout, PartitionedTridentSpoutExecutor)):
        return "partitioned"
    if isinstance(spout, (IBatchSpout, ITridentSpout)):
        return "batch"
    raise ValueError(f"{where}: not a Trident spout")


# the directory under Spark's files that its streaming source runner (PythonStreamingSourceRunner)
# names to the planning process, fixed whatever the session; `SparkContext.addPyFile` puts files
# in the root above it
_STREAMING_JOB = "streaming_job"


def _with_shipped_files() -> None:
    """Put on ``sys.path`` the files the application shipped (``addPyFile``), where Spark's
    streaming planner missed them: it starts the process that plans the source (the one calling
    `TridentSpoutSource.streamReader` and the reader's ``latestOffset``) with Spark's files at
    ``<root>/streaming_job``, a directory that is not there, ``addPyFile`` having put them in
    ``<root>`` itself (pyspark 4.3). Its path then lacks the user's FILE and modules, and
    unpickling a spout class of theirs failed the query before its first batch with ``No module
    named '<FILE>'``. Here the root goes on the path, and each package shipped (a zip the runner
    put on the path under the missing directory) from the root: as an executor's Python worker
    has them. Nothing else: where the directory is there (other processes, a fixed Spark), or
    outside Spark, this does nothing."""
    import importlib
    import os
    import sys

    try:
        from pyspark.core.files import SparkFiles
    except ImportError:  # pyspark's client only: no files of Spark's here
        return
    missing = SparkFiles._root_directory
    if not missing or os.path.basename(missing) != _STREAMING_JOB or os.path.isdir(missing):
        return
    root = os.path.dirname(missing)
    if not os.path.isdir(root):
        return
    shipped = [os.path.join(root, entry[len(missing) + 1:]) for entry in sys.path
               if entry.startswith(missing + os.sep)]
    added = False
    for path in [root, *shipped]:
        if path not in sys.path and os.path.exists(path):
            sys.path.insert(1, path)
            added = True
    if added:
        importlib.invalidate_caches()


class TridentSpoutSource(DataSource):
    """The Data Source ``squall_trident``: option ``spout`` is a pickled `SpoutSpec` (the user's
    classes in it by reference: `_with_shipped_files` makes them importable where Spark plans)."""

    @classmethod
    def name(cls) -> str:
        """``squall_trident``."""
        return SOURCE_NAME

    def schema(self) -> str:
        """The pickled fields, then a typed column per declared field (`SpoutSpec.schema`)."""
        _with_shipped_files()
        spec: SpoutSpec = from_option(self.options["spout"])
        return spec.schema()

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """The reader for the spout's kind."""
        _with_shipped_files()
        spec: SpoutSpec = from_option(self.options["spout"])
        if check_spout(spec.txid, spec.spout) == "partitioned":
            return PartitionedSpoutReader(spec)
        return BatchSpoutReader(spec)


_ARROW_TYPES = {str: "string", int: "int64", float: "float64", bool: "bool_", bytes: "binary"}


class _Collect:
    """A `TridentCollector` keeping a batch's tuples as the source's columns (see the module
    docstring); ``checked``: also digest each tuple, pickled whole (a replay compares it)."""

    def __init__(self, spec: SpoutSpec, txid: int, checked: bool = False, keep: bool = False) -> None:
        self.spec = spec
        self.txid = txid
        self.count = 0
        # ``keep``: the tuples as they are, for the source's head bolt, in place of the columns
        self.values: list[list] | None = [] if keep else None
        self.typed = [(t.position, t.type) for t in spec.typed]
        self.columns: list[list] = [[] for _ in spec.typed]
        typed = {t.position for t in spec.typed}
        # no fields told (a spec made by hand): every tuple pickled whole, of any width
        self.rest: list[int] | None = [i for i in range(len(spec.fields)) if i not in typed] if spec.fields else None
        self.pickled: list[bytes | None] = []
        self.whole: list[bytes] | None = [] if checked else None
        self.width = len(spec.fields)
        # each key column's values (the key's stable hash: see rows.key_bytes); none without fields told
        self.key_positions = [positions for _, positions in spec.keys] if self.rest is not None else []
        self.keys: list[list[bytes]] = [[] for _ in self.key_positions]

    def digest(self) -> str:
        """The digest of the tuples (a checked collector's)."""
        assert self.whole is not None
        return digest(self.whole)

    def record_batch(self) -> Any:
        """The tuples as one Arrow batch of the source's schema: Spark takes it as it is, where a
        row per tuple would be converted by pyspark one by one."""
        import pyarrow as pa

        arrays = [pa.array(self.pickled, pa.binary())]
        arrays += [pa.array(c, getattr(pa, _ARROW_TYPES[t.type])()) for c, t in zip(self.columns, self.spec.typed)]
        arrays += [pa.array(k, pa.binary()) for k in self.keys]
        return pa.RecordBatch.from_arrays(arrays, names=[TUPLE] + [t.column for t in self.spec.typed]
                                          + [column for column, _ in self.spec.keys])

    def _key(self, rows: list[list]) -> None:
        """Each key column's value for each of ``rows`` (the tuples just taken)."""
        for column, positions in zip(self.keys, self.key_positions):
            column.extend(key_bytes([values[i] for i in positions]) for values in rows)

    def emit(self, values: Any) -> None:
        values = list(values)
        if self.values is not None:
            self._keep([values])
            return
        if self.rest is None:
            self.pickled.append(dumps(values))
            if self.whole is not None:
                self.whole.append(self.pickled[-1])  # type: ignore[arg-type]
            self.count += 1
            return
        if len(values) != self.width:
            raise ValueError(f"{self.spec.where()}: txid {self.txid} emitted {len(values)} values {values!r} for "
                             f"its fields {list(self.spec.fields)}")
        for column, (i, kind) in zip(self.columns, self.typed):
            value = values[i]
            if value is not None and (type(value) is not kind or (kind is int and not INT64[0] <= value <= INT64[1])):  # type: ignore[operator]
                raise ValueError(f"{self.spec.where()}: field {self.spec.fields[i]!r} is declared {kind.__name__}, "
                                 f"and txid {self.txid} emitted {value!r} ({type(value).__name__}) in it"
                                 + (" (out of a BIGINT's range)" if type(value) is int else "")
                                 + ": a typed column takes that type only, or None")
            column.append(value)
        self.pickled.append(dumps([values[i] for i in self.rest]) if self.rest else None)
        if self.keys:
            self._key([values])
        if self.whole is not None:
            self.whole.append(dumps(values))
        self.count += 1

    def emit_many(self, rows: list[list]) -> None:
        """`emit` of each of ``rows``, the typed columns taken whole when every value is of its
        type (a BIGINT's range is checked row by row)."""
        if self.values is not None:
            self._keep(rows)
            return
        n = len(rows)
        if self.rest != [] or any(len(values) != self.width for values in rows) or \
                any(kind is int for _, kind in self.typed):
            for values in rows:
                self.emit(values)
            return
        columns = [[values[i] for values in rows] for i, _ in self.typed]
        for column, (_, kind) in zip(columns, self.typed):
            if not all(type(value) is kind or value is None for value in column):
                for values in rows:
                    self.emit(values)  # raises at the first value that is not of its type
                return
        for column, new in zip(self.columns, columns):
            column.extend(new)
        self.pickled.extend([None] * n)
        if self.keys:
            self._key(rows)
        if self.whole is not None:
            self.whole.extend(dumps(list(values)) for values in rows)
        self.count += n

    def _keep(self, rows: list[list]) -> None:
        """The tuples kept as they are (a head bolt's input: no column, so no column's type)."""
        assert self.values is not None
        if not all(type(values) is list for values in rows):
            rows = [list(values) for values in rows]  # as emit makes them: the digest pickles lists
        if self.spec.fields and any(len(values) != self.width for values in rows):
            for values in rows:
                if len(values) != self.width:
                    raise ValueError(f"{self.spec.where()}: txid {self.txid} emitted {len(values)} values {values!r} "
                                     f"for its fields {list(self.spec.fields)}")
        self.values.extend(rows)
        if self.whole is not None:
            self.whole.extend(dumps(values) for values in rows)
        self.count += len(rows)

    def report_error(self, error: BaseException) -> None:
        raise error


class _Counter:
    """A `TridentCollector` that only counts: a partitioned spout's planning emit, whose tuples
    are not kept (the read's `_Collect` emits them again and checks each value); 40% of the
    planning emit's CPU on W1T went to keeping them."""

    def __init__(self) -> None:
        self.count = 0

    def emit(self, values: Any) -> None:
        self.count += 1

    def emit_many(self, rows: list) -> None:
        self.count += len(rows)

    def report_error(self, error: BaseException) -> None:
        raise error


class _Reader(DataSourceStreamReader):
    """What both readers share: the spec, its context, offsets from txid 0."""

    def __init__(self, spec: SpoutSpec) -> None:
        self.spec = spec
        self._live: dict[str, Any] = {}     # the driver's coordinator and emitter, never pickled

    def __getstate__(self) -> dict:
        return {"spec": self.spec, "_live": {}}

    def _context(self, component: str) -> SparkTaskContext:
        return SparkTaskContext(component, 0, 1, dict(self.spec.conf))

    def initialOffset(self) -> dict:
        """Before txid 1."""
        return {"txid": 0, "spout": self.spec.txid}

    def _owned(self, *offsets: dict) -> None:
        """Refuse an offset of the checkpoint that another spout wrote. Spark hands each source
        the offsets of the source at its position in the checkpoint, not by name: a topology
        whose spouts were renamed, reordered or had one added before them since the checkpoint
        was written got another spout's offsets, silently (a file spout reading another
        directory's byte ranges). An offset written before offsets named their spout passes."""
        for offset in offsets:
            owner = offset.get("spout")
            if owner is not None and owner != self.spec.txid:
                raise ValueError(
                    f"{self.spec.where()}: the checkpoint's offset of txid {offset.get('txid')} is spout {owner!r}'s, "
                    "not this one's: the topology's spouts changed since the checkpoint was written (a stream "
                    "renamed, the new_stream calls reordered, or one added before another), and Spark matches "
                    "a query's sources to the checkpoint's by position. Start the query with its spouts as "
                    "they were, or on a new checkpoint location (each spout then reads from its start: "
                    "with a new state too, or the records already counted are counted again)")

    def stop(self) -> None:
        """Close what the driver opened."""
        for thing in self._live.values():
            close = getattr(thing, "close", None)
            if close is not None:
                close()
        self._live.clear()


@dataclass(frozen=True)
class _EmptyBatch:
    """A txid the driver planned empty: Spark runs no micro-batch for it (its offset stays
    before it), but Storm commits an empty batch like any other, so the txid is used up and
    the next plan goes on from it, its metadata the next one's previous."""

    txid: int
    meta: Any


class BatchSpoutReader(_Reader):
    """An `IBatchSpout` or `ITridentSpout`: one partition a batch, checked against its digest."""

    # the driver's own, never pickled (`_Reader.__getstate__`): the last txid planned empty and
    # the last txid whose ``success`` was called
    _empty: _EmptyBatch | None = None
    _succeeded = 0

    def _spout(self) -> Any:
        from ..planner import _trident_spout

        return _trident_spout(self.spec.spout)

    def _coordinator(self) -> Any:
        if "coordinator" not in self._live:
            self._live["coordinator"] = self._spout().get_coordinator(
                self.spec.txid, self.spec.conf, self._context(f"$spoutcoord-{self.spec.txid}"))
        return self._live["coordinator"]

    def _emitter(self) -> Any:
        if "emitter" not in self._live:
            self._live["emitter"] = self._spout().get_emitter(self.spec.txid, self.spec.conf,
                                                              self._context(self.spec.txid))
        return self._live["emitter"]

    def latestOffset(self, start: dict, limit: Any = None) -> dict:
        """The next txid's metadata, once ready and not empty; else ``start``. A txid that
        emits nothing is committed here (`_EmptyBatch`) and the next call plans the one after:
        asked again, a spout that remembers its batches by txid (Storm's ``FixedBatchSpout``, a
        queue's) would give the same empty batch forever and never read what came after."""
        self._owned(start)
        last, prev = int(start["txid"]), from_offset(start.get("meta"), self.spec.where())
        if self._empty is not None and self._empty.txid > last:
            last, prev = self._empty.txid, self._empty.meta
        txid = last + 1
        if not self._coordinator().is_ready(txid):
            return start
        meta = self._coordinator().initialize_transaction(txid, prev, None)
        out = _Collect(self.spec, txid, checked=True)
        self._emitter().emit_batch(_attempt(txid), meta, out)
        if not out.count:
            # Spark asks for a plan only once the batch ending at ``start`` is committed (its
            # own ``commit`` of it comes when it plans the next batch), so the empty txid is
            # committed after it, in Storm's order; after a driver restart ``start``'s may be
            # called a second time, as Spark's ``commit`` may be
            self._succeed(int(start["txid"]))
            self._succeed(txid)
            self._empty = _EmptyBatch(txid, meta)
            return start
        return {"txid": txid, "spout": self.spec.txid, "meta": to_offset(meta, self.spec.where()), "tuples": out.count,
                "digest": out.digest()}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """The batch ``end`` names, in one partition (none when nothing is new)."""
        self._owned(start, end)
        if int(end["txid"]) == int(start["txid"]):
            return []
        return [InputPartition(end)]

    def read(self, partition: InputPartition) -> Any:
        """Emit the batch again, in a task; its tuples must be the planned ones."""
        end = partition.value
        txid = int(end["txid"])
        out = self.spec.collector(txid, checked=True)
        emitter = self._spout().get_emitter(self.spec.txid, self.spec.conf, self._context(self.spec.txid))
        try:
            emitter.emit_batch(_attempt(txid), from_offset(end.get("meta"), self.spec.where()), out)
        finally:
            emitter.close()
        if out.count != end["tuples"] or out.digest() != end["digest"]:
            raise ValueError(f"{self.spec.where()}: batch txid {txid} "
                             f"was {end['tuples']} tuples when planned and {out.count} other tuples when "
                             "emitted again: the spout is not transactional (the same batch for the same txid)")
        yield from self.spec.rows(iter([out]), txid)

    def commit(self, end: dict) -> None:
        """The batch is committed: the spout's ``success`` (an IBatchSpout's ``ack``)."""
        self._succeed(int(end["txid"]))

    def _succeed(self, txid: int) -> None:
        """``success`` of ``txid`` unless this driver called it already (txid 0 is no batch)."""
        if txid <= self._succeeded:
            return
        self._coordinator().success(txid)
        self._emitter().success(_attempt(txid))
        self._succeeded = txid


def _dead_letters(emitter: Any) -> int:
    """How many records ``emitter`` dead-lettered so far (`CountsDeadLetters`; 0 for a spout
    that does not count them)."""
    counts = getattr(emitter, "dead_letter_counts", None)
    return 0 if counts is None else int(counts.total)


def _covers_records(emitter: Any, metas: dict, parts: dict, where: str) -> bool:
    """Whether a batch of ``emitter``'s with partition metadata ``metas`` moved a partition past
    records: its ``covers_records`` says so (``IPartitionedTridentSpout.Emitter.covers_records``),
    or, for an emitter that does not answer it (the base's default, or none), a partition's
    metadata is not the one in ``parts`` (each partition id's last metadata, as an offset holds
    it). Storm stores every batch's metadata whatever it emitted; a user's spout whose emitter
    filters records, and that never heard of this method, stalled at a batch of filtered records
    only, planned again at every trigger. A plan that read nothing gives the previous batch's end
    again, so such a spout has one micro-batch of no rows after a batch that read (or one every
    trigger, for metadata that changes at every plan: a time, the txid; docs say to answer)."""
    covers = getattr(emitter, "covers_records", None)
    if covers is not None and any(meta is not None and covers(meta) for meta in metas.values()):
        return True
    if covers is not None and not _is_default_covers(covers):
        return False  # the spout answered: trust it
    return any(meta is not None and to_offset(meta, where) != parts.get(_partition_id(partition))
               for partition, meta in metas.items())


def _is_default_covers(covers: Any) -> bool:
    """Whether ``covers`` is `IPartitionedTridentSpout.Emitter.covers_records` itself, not an
    override (told by name: importing Trident's partitioned module here would load the engine
    into every process that plans a batch, `tests/test_lazy_import.py`)."""
    func = getattr(covers, "__func__", None)
    return (getattr(func, "__module__", None) == "squall.trident.partitioned"
            and getattr(func, "__qualname__", None) == "IPartitionedTridentSpout.Emitter.covers_records")


def _partition_id(partition: Any) -> str:
    """A partition's id in an offset (a partition object's ``get_id()``, or the id itself)."""
    return partition if isinstance(partition, str) else partition.get_id()


@dataclass(frozen=True)
class _PartitionTask:
    """One partition of a partitioned spout's batch: what a task re-emits."""

    txid: int
    partition: Any
    meta: Any


def spread(items: list, tasks: int) -> list[list]:
    """``items`` in at most ``tasks`` groups (every ``tasks``-th together; ``tasks`` 0: one
    each): a Spark task per group, where each task costs a Python worker's round trip and a
    full garbage collection after it (pyspark's daemon), whatever its size."""
    if tasks <= 0 or tasks >= len(items):
        return [[item] for item in items]
    return [items[i::tasks] for i in range(tasks)]


class PartitionedSpoutReader(_Reader):
    """An `IPartitionedTridentSpout`: its partitions are Spark's, each one's metadata in the offset."""

    def _raw(self) -> Any:
        from ..partitioned import PartitionedTridentSpoutExecutor

        spout = self.spec.spout
        return spout.get_partitioned_spout() if isinstance(spout, PartitionedTridentSpoutExecutor) else spout

    def _coordinator(self) -> Any:
        if "coordinator" not in self._live:
            self._live["coordinator"] = self._raw().get_coordinator(
                self.spec.conf, self._context(f"$spoutcoord-{self.spec.txid}"))
        return self._live["coordinator"]

    def _emitter(self) -> Any:
        if "emitter" not in self._live:
            self._live["emitter"] = self._raw().get_emitter(self.spec.conf, self._context(self.spec.txid))
        return self._live["emitter"]

    def latestOffset(self, start: dict, limit: Any = None) -> dict:
        """Each partition's next batch after its metadata in ``start``; ``start`` when none emits a
        tuple, dead-letters a record or moves past one (`_covers_records`): a batch that read
        records and emitted no tuple is a micro-batch of no rows."""
        self._owned(start)
        txid = int(start["txid"]) + 1
        coordinator = self._coordinator()
        if not coordinator.is_ready(txid):
            return start
        info = coordinator.get_partitions_for_batch()
        emitter = self._emitter()
        ordered = emitter.get_ordered_partitions(info)
        if self._live.get("info") != info:
            emitter.refresh_partitions(ordered)
            self._live["info"] = info
        parts = dict(start.get("parts", {}))
        prev = {p: from_offset(parts.get(p.get_id()), self.spec.where()) for p in ordered}
        out = _Counter()
        dead_before = _dead_letters(emitter)
        metas = emitter.emit_batch_new(_attempt(txid), out, set(ordered), prev)
        if (not out.count and _dead_letters(emitter) == dead_before
                and not _covers_records(emitter, metas, parts, self.spec.where())):
            return start
        # a batch that read records and emitted none (all dead letters, all skipped by the
        # translator, a Parquet file of no rows) is a micro-batch of no rows: its offset moves
        # the partitions past them, as Storm commits such a batch; kept at ``start`` it was
        # planned again at every trigger, forever, and nothing after it read. In Spark's
        # write-ahead log like any batch, a restarted driver goes on after it, and a task's read
        # of it (retried or not) emits nothing, logs nothing
        batch = []
        for partition, meta in metas.items():
            if meta is None:
                continue
            pid = _partition_id(partition)
            parts.pop(pid, None)  # to the end: the offset's parts go by their last batch
            parts[pid] = to_offset(meta, self.spec.where())
            batch.append(pid)
        # the partitions the source no longer lists keep their metadata (one that comes back
        # resumes there), but only the ones gone last, as on the other hosts: else every offset
        # Spark writes to its checkpoint would hold every file a directory ever had
        from ..partitioned import GONE_PARTITIONS_KEPT
        listed = {p.get_id() for p in ordered}
        gone = [pid for pid in parts if pid not in listed]
        for pid in gone[:max(0, len(gone) - GONE_PARTITIONS_KEPT)]:
            del parts[pid]
        return {"txid": txid, "spout": self.spec.txid, "info": to_offset(info, self.spec.where()), "parts": parts,
                "batch": sorted(batch)}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """The spout partitions that have a range in the batch, in at most ``spec.tasks`` input
        partitions (`spread`)."""
        self._owned(start, end)
        if int(end["txid"]) == int(start["txid"]):
            return []
        ordered = self._emitter().get_ordered_partitions(from_offset(end["info"], self.spec.where()))
        by_id = {p.get_id(): p for p in ordered}
        tasks = [_PartitionTask(int(end["txid"]), by_id[pid], end["parts"][pid]) for pid in end["batch"] if pid in by_id]
        return [InputPartition(tuple(group)) for group in spread(tasks, self.spec.tasks)]

    def read(self, partition: InputPartition) -> Any:
        """The partitions' batch again (``re_emit_partition_batch``: the spout's replay)."""
        tasks: tuple[_PartitionTask, ...] = partition.value
        emitter = self._raw().get_emitter(self.spec.conf, self._context(self.spec.txid))

        def emitted() -> Iterator[_Collect]:
            for task in tasks:
                out = self.spec.collector(task.txid)
                meta = from_offset(task.meta, self.spec.where())
                emitter.re_emit_partition_batch(_attempt(task.txid), out, task.partition, meta)
                if out.count:
                    yield out

        try:
            emitter.refresh_partitions([t.partition for t in tasks])
            if tasks:
                yield from self.spec.rows(emitted(), tasks[0].txid)
        finally:
            emitter.close()


__all__ = ["SOURCE_NAME", "BatchSpoutReader", "PartitionedSpoutReader", "SourceHead", "SpoutSpec", "TridentSpoutSource", "TypedField",
           "check_spout", "spread", "typed_fields"]
