"""The part the Parquet and Delta sinks share: a bolt that batches rows keyed by the source's id,
commits a batch in one durable step, and acks its tuples only after that step.

Exactly once per id: a batch is named by its task and a sequence number, and the ids of the last
``dedupe_batches`` committed batches are remembered (rebuilt from the sink itself after a
restart), so a replayed tuple whose id was already committed is acked without being written
again. Beyond that window a replay is written again: the guarantee is exactly once within the
window, at least once after it (see docs/connectors.md).
"""

from __future__ import annotations

import logging
import math
import numbers
import re
from collections import deque
from collections.abc import Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from .._collectors import OutputFieldsDeclarer
from .._components import Bolt
from .._config import Config
from .._errors import SquallError
from .._failure import (
    BAD_ROW,
    EXPLICIT,
    UNAVAILABLE,
    CountsDeadLetters,
    cut_text,
    fail_all_because,
    fail_because,
    shown_value,
    shown_values,
)
from .._fields import Fields
from .._private import disk_trouble, errno_of
from .._tuple import Tuple, is_tick_tuple

log = logging.getLogger(__name__)

DEAD_LETTER_STREAM = "dead_letter"
"""The stream a sink emits rows that do not fit its schema on (with ``on_bad_row="dead_letter"``)."""

DEAD_LETTER_FIELDS = Fields("id", "component", "error", "values")


class SinkSchemaError(SquallError):
    """A tuple's value does not fit the sink's column type (or a required column is missing)."""

    def __init__(self, component: str, field: str, value: Any, expected: Any, reason: str) -> None:
        self.component, self.field, self.value, self.expected = component, field, value, expected
        # the value cut (`shown_value`), and the reason (pyarrow's quotes the value too): the
        # error is reported and logged, and is a failure's reason or a dead_letter row's error,
        # where the row's values travel whole beside it
        super().__init__(f"sink {component!r}: field {field!r} = {shown_value(value)} does not fit column type "
                         f"{expected} ({cut_text(reason, 300)})")


_COLOR = re.compile(r"\x1b\[[0-9;]*m")


def plain_text(error: BaseException) -> str:
    """``error``'s text on one line, without terminal color codes: delta-rs's I/O errors come
    as a tree of lines marked by red arrows (``\\x1b[31m↳\\x1b[0m``), unreadable in a log or the UI."""
    return " ".join(_COLOR.sub("", str(error)).split())


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class SinkWriteError(SquallError):
    """A batch could not be made durable; its tuples are failed so that they replay."""


class CommittedBatch(NamedTuple):
    """A batch already durable in the sink: its sequence number and the ids it holds."""

    seq: int
    ids: list


MAX_COMMIT_TRIES = 100
"""Commits a batch tries, each after learning of batches another writer of its task name
committed meanwhile (`CommittedElsewhere`), before its tuples fail and replay."""


class CommittedElsewhere(SquallError):
    """Another writer of this task's name (a zombie copy of the task, whose worker the master
    took for dead, or the task that replaced it) committed ``batches`` since this one last
    looked: the batch was not committed, and is tried again without the ids they hold. One of
    them can be this writer's own: an earlier try whose commit landed although it raised (a
    lost reply) and could not be found then, so its tuples failed and replayed."""

    def __init__(self, batches: list[CommittedBatch]) -> None:
        super().__init__(f"another writer committed batches {[b.seq for b in batches]}")
        self.batches = batches


def as_schema(schema: pa.Schema | list | dict) -> pa.Schema:
    """``schema`` as a pyarrow schema: a ``pa.Schema``, ``[(name, type), ...]`` or ``{name: type}``."""
    if isinstance(schema, pa.Schema):
        return schema
    if isinstance(schema, dict):
        schema = list(schema.items())
    return pa.schema(schema)


def check_id_column(schema: pa.Schema, id_field: str, where: str) -> None:
    """Raise ValueError unless ``id_field`` is a string or integer column of ``schema``."""
    if id_field not in schema.names:
        raise ValueError(f"{where}: id field {id_field!r} is not a column of the schema "
                         f"({', '.join(schema.names)})")
    t = schema.field(id_field).type
    if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
        raise ValueError(f"{where}: id field {id_field!r} must be a string or integer column, not {t}")


def safe_name(text: str) -> str:
    """``text`` with only the characters safe in a file name or Delta app id."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def drops_a_fraction(field_type: pa.DataType, value: Any) -> bool:
    """Whether ``value`` is, or holds, a number with a fraction (12.5, ``Decimal("0.1")``,
    numpy's 2.5) bound for integers: pyarrow converts it by cutting the fraction off, without a
    word (``pa.array([12.5], pa.int64())`` is ``[12]``), so a producer whose field turned from
    integers to decimals would have its values written wrong. A whole number (12.0) fits."""
    return cut_number(field_type, value) is not None


def cut_number(field_type: pa.DataType, value: Any) -> Any:
    """The number with a fraction that ``value`` is or holds (`drops_a_fraction`), or None. The
    items of a list column and the fields of a struct or map are looked at too: pyarrow cuts
    ``[1.5]`` into a ``list<int64>`` column as ``[1]`` just the same."""
    if value is None or type(value) is int or isinstance(value, (str, bytes)):
        return None  # the common case first: a batch's every value passes here
    if pa.types.is_integer(field_type):
        return value if _has_fraction(value) else None
    inner: list[tuple[pa.DataType, Any]]
    try:
        if pa.types.is_list(field_type) or pa.types.is_large_list(field_type) \
                or pa.types.is_fixed_size_list(field_type):
            item_type = field_type.value_type
            if pa.types.is_integer(item_type):  # a list of integers, at the speed of a loop
                return next((v for v in value if type(v) is not int and _has_fraction(v)), None)
            inner = [(item_type, v) for v in value]
        elif pa.types.is_struct(field_type) and isinstance(value, dict):
            inner = [(f.type, value.get(f.name)) for f in field_type]
        elif pa.types.is_map(field_type):
            pairs = value.items() if isinstance(value, dict) else value
            inner = [kv for k, v in pairs for kv in ((field_type.key_type, k), (field_type.item_type, v))]
        else:
            return None
    except (TypeError, ValueError):
        return None  # not a sequence, a map or pairs: pyarrow refuses it itself
    return next((cut for t, v in inner if (cut := cut_number(t, v)) is not None), None)


def _holds_integers(field_type: pa.DataType) -> bool:
    """Whether a column of ``field_type`` holds integers, itself or in its items or fields."""
    if pa.types.is_integer(field_type):
        return True
    return any(_holds_integers(field_type.field(i).type) for i in range(field_type.num_fields))


def _has_fraction(value: Any) -> bool:
    if isinstance(value, int) or not isinstance(value, numbers.Number) or isinstance(value, numbers.Integral):
        return False  # bool is an int: pyarrow refuses it itself
    number: Any = value  # a Number to the type checker, which math.trunc does not take
    try:
        return bool(number != math.trunc(number))
    except (TypeError, ValueError, OverflowError):
        return False  # NaN, an infinity, a complex: pyarrow refuses these itself


def row_error(schema: pa.Schema, row: list, component: str) -> SinkSchemaError | None:
    """Why ``row`` (one value per column of ``schema``) does not fit ``schema``, or None."""
    for field, value in zip(schema, row):
        if value is None:
            if not field.nullable:
                return SinkSchemaError(component, field.name, value, field.type, "missing or None")
            continue
        try:
            pa.array([value], type=field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
            return SinkSchemaError(component, field.name, value, field.type, str(e).splitlines()[0])
        cut = cut_number(field.type, value)
        if cut is not None:
            held = "" if cut is value else f"its {cut!r} "
            return SinkSchemaError(component, field.name, value, field.type,
                                   f"{held or 'it '}has a fraction, which the integer column would cut off: "
                                   f"written as {math.trunc(cut)}")
    return None


def build_table(schema: pa.Schema, rows: dict, component: str) -> tuple[pa.Table, dict]:
    """The rows (``{id: [value per column]}``) that fit ``schema`` as one table, and
    ``{id: SinkSchemaError}`` for those that do not.

    The whole batch is converted at once; only if that fails is each row checked, so the
    common case pays one conversion per column.
    """
    columns: list[Sequence[Any]] = list(zip(*rows.values())) if rows else [[] for _ in schema]
    try:
        arrays = [pa.array(col, type=f.type) for col, f in zip(columns, schema)]
        table = pa.Table.from_arrays(arrays, schema=schema)
        # pyarrow took a number with a fraction into an integer column by cutting it off: each
        # row is checked below, and such a row set aside as one that does not fit
        cut = any(drops_a_fraction(f.type, v) for col, f in zip(columns, schema) if _holds_integers(f.type)
                  for v in col)
        if not cut and not any(table.column(f.name).null_count for f in schema if not f.nullable):
            return table, {}
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    bad = {key: err for key, row in rows.items() if (err := row_error(schema, row, component))}
    good = [row for key, row in rows.items() if key not in bad]
    columns = list(zip(*good)) if good else [[] for _ in schema]
    arrays = [pa.array(col, type=f.type) for col, f in zip(columns, schema)]
    return pa.Table.from_arrays(arrays, schema=schema), bad


class CommittedIds:
    """The ids of the last ``max_batches`` committed batches: what a replay is checked against."""

    def __init__(self, max_batches: int) -> None:
        self._batches: deque[CommittedBatch] = deque()
        self._seq_of: dict[Any, int] = {}
        self.max_batches = max_batches

    def add(self, batch: CommittedBatch) -> None:
        """Remember ``batch``'s ids, forgetting the oldest batch beyond the window."""
        self._batches.append(batch)
        for key in batch.ids:
            self._seq_of[key] = batch.seq
        while len(self._batches) > self.max_batches:
            old = self._batches.popleft()
            for key in old.ids:
                # a later batch may hold the same id again (written after the window): keep it
                if self._seq_of.get(key) == old.seq:
                    del self._seq_of[key]

    def __contains__(self, key: Any) -> bool:
        return key in self._seq_of

    def __len__(self) -> int:
        return len(self._seq_of)


class BatchingSinkBolt(Bolt, CountsDeadLetters):
    """Batches rows by the source's id and commits them on a size or a tick (the shared shell).

    Subclasses give ``_open`` (returns the batches already committed by this task, oldest
    first, and the schema to write with) and ``_commit(seq, table, ids)`` (makes the batch
    durable in one step and returns ``seq``; raises `CommittedElsewhere` with the batches
    another writer of this task's name committed since this one last looked, if any, instead
    of committing; or raises `SinkWriteError` if it is not durable).

    Two writers of one task's name are a zombie and its replacement: a worker that the master
    took for dead (its machine hung, or its link to the master was cut) runs on when it comes
    back, until its supervisor stops it, and its batch (committed on a tick, or by ``cleanup``
    as it stops) holds tuples that timed out and replayed to the task's new instance. Whichever
    commits second learns of the other's batches and writes only the ids they do not hold.

    A batch whose commit raised fails its tuples as ``"unavailable"`` (the store's fault: no
    retry budget charges it), unless `_refused_for_rows` says the rows were refused; a row that
    does not fit the schema is the row's own (``on_bad_row``). A row put on the ``dead_letter``
    stream is counted as the task's dead letter (failed by the sink, `squall._failure.BAD_ROW`):
    the live figures show it as a spout's, where the spout saw only an ack.
    """

    def __init__(self, schema: pa.Schema | list | dict, id_field: str, batch_size: int = 1000,
                 tick_secs: float | None = 1, dedupe_batches: int = 100,
                 on_bad_row: str = "dead_letter") -> None:
        name = type(self).__name__
        self.schema = as_schema(schema)
        check_id_column(self.schema, id_field, name)
        if batch_size < 1:
            raise ValueError(f"{name}: batch_size must be at least 1, not {batch_size}")
        if dedupe_batches < 1:
            raise ValueError(f"{name}: dedupe_batches must be at least 1, not {dedupe_batches}")
        if on_bad_row not in ("dead_letter", "fail"):
            raise ValueError(f"{name}: on_bad_row must be 'dead_letter' or 'fail', not {on_bad_row!r}")
        self.id_field, self.batch_size, self.tick_secs = id_field, batch_size, tick_secs
        self.dedupe_batches, self.on_bad_row = dedupe_batches, on_bad_row

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """The dead-letter stream: ``(id, component, error, values)`` of rows that do not fit."""
        declarer.declare_stream(DEAD_LETTER_STREAM, DEAD_LETTER_FIELDS)

    def get_component_configuration(self) -> dict[str, Any] | None:
        """Tick tuples every ``tick_secs`` so that a partial batch is committed in time."""
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.tick_secs} if self.tick_secs else None

    def prepare(self, conf, context, collector) -> None:
        """Open the sink and rebuild the committed ids and the next sequence number from it."""
        super().prepare(conf, context, collector)
        self.start_dead_letter_counts()  # the rows put on the dead_letter stream, from this launch
        self.component = context.get_this_component_id()
        self.task = context.get_this_task_id()
        self.task_name = safe_name(f"{self.component}-{context.get_this_task_id()}")
        self._rows: dict[Any, list] = {}
        self._tuples: list[Tuple] = []
        # a row put on the dead_letter stream with no bolt reading it is gone once acked: said
        # here, and with each such row (its id and values), so that it is not gone without a trace
        self._letters_read = DEAD_LETTER_STREAM in context.get_this_targets()
        if self.on_bad_row == "dead_letter" and not self._letters_read:
            log.warning("sink %r task %d: no bolt subscribes to its %r stream, where the rows that do not fit "
                        "its schema go (on_bad_row='dead_letter'): such a row is acked and kept only in the "
                        "error reported for it; subscribe a bolt to the stream, or give the sink "
                        "on_bad_row='fail' to have its spout retry and dead-letter it", self.component,
                        self.task, DEAD_LETTER_STREAM)
        self._committed = CommittedIds(self.dedupe_batches)
        try:
            committed = self._open()
        except SinkWriteError:
            raise  # names the sink and what it could not read already
        except Exception as e:
            # deltalake's own error named no table and no sink ("Generic LocalFileSystem error
            # ↳ Unable to copy data to file ↳ No space left on device (os error 28)", in color codes)
            raise self._open_error(e) from e
        for batch in committed[-self.dedupe_batches:]:
            self._committed.add(batch)
        self._seq = committed[-1].seq + 1 if committed else 0
        # The recent batches of the component's other task names. A task's name holds its task
        # id, which is not the same from one submission to the next: ids are given in component
        # order, so a stateful bolt added (its checkpoint spout), another topology.workers (the
        # ackers) or another parallelism of a component before this one moves every id. The
        # records a restart replays then reach a task whose own batches never held them, and
        # were written twice (65 of 21,870 rows in a pipeline resubmitted with a stateful bolt).
        # Any id in them is durable already: acked without being written, until this task has
        # committed a window of its own, by which time the restart's replays are over.
        others = self._others_committed()
        self._inherited: CommittedIds | None = None
        if others:
            self._inherited = CommittedIds(len(others))
            for batch in others:
                self._inherited.add(batch)
            self._inherited_until = self._seq + self.dedupe_batches

    def execute(self, tup: Tuple) -> None:
        """Add ``tup``'s row to the batch (or ack a replay already committed); commit when full."""
        if is_tick_tuple(tup):
            self.collector.ack(tup)
            self.flush()
            return
        try:
            key = tup.get_value_by_field(self.id_field)
        except (KeyError, ValueError):
            self._bad(tup, None, SinkSchemaError(self.component, self.id_field, None, "the id",
                                                 f"stream {tup.get_source_stream_id()!r} of "
                                                 f"{tup.get_source_component()!r} has no such field"))
            return
        if not _hashable(key):  # a list or dict cannot be an id (it raised TypeError here)
            self._bad(tup, None, SinkSchemaError(self.component, self.id_field, key, "the id",
                                                 "an id must be a value such as a str or an int"))
            return
        if key in self._committed or (self._inherited is not None and key in self._inherited):
            self.collector.ack(tup)  # a replay of a row already durable
            return
        self._tuples.append(tup)
        if key not in self._rows:  # a replay of a row still in this batch is written once
            self._rows[key] = [tup.get_value_by_field(f) if tup.contains(f) else None
                               for f in self.schema.names]
        if len(self._rows) >= self.batch_size:
            self.flush()

    def squall_flush_for_checkpoint(self) -> None:
        """In a stateful topology, a checkpoint waits here for rows the batch holds (a
        persistent window's results): commit the batch now, so that the checkpoint passes at
        once instead of at the batch's fill or tick (`squall.state._bolt.CheckpointTupleForwarder`).
        Behind such a window a batch is therefore at most a checkpoint interval of rows."""
        self.flush()

    def flush(self) -> None:
        """Commit the pending batch: ack its tuples if durable, fail them if not."""
        if not self._tuples:
            return
        rows, tuples = self._rows, self._tuples
        self._rows, self._tuples = {}, []
        table, bad = build_table(self.schema, rows, self.component)
        good = []
        refused: dict[Any, list[Tuple]] = {}  # a bad row's tuples: its own and its replays in the batch
        for tup in tuples:
            key = tup.get_value_by_field(self.id_field)
            if key in bad:
                refused.setdefault(key, []).append(tup)
            else:
                good.append(tup)
        for key, copies in refused.items():
            self._bad(copies[0], key, bad[key], copies[1:])
        if table.num_rows:
            ids = [key for key in rows if key not in bad]
            try:
                self._commit_learning(table, ids)
            except Exception as e:  # noqa: BLE001 (any failed write: reported, and its tuples failed to replay)
                err = e if isinstance(e, SinkWriteError) else self._write_error(e, len(ids))
                self.collector.report_error(err)  # which logs it
                # why goes with each: a record given up says it in its dead letter. The rows
                # that do not fit were taken out above: what is left failed for the store's
                # sake (a full disk, an object store that does not answer), which no retry
                # budget charges (`_refused_for_rows` says when the rows were refused)
                fail_all_because(self.collector, good, self.component, self.task, str(err),
                                 EXPLICIT if self._refused_for_rows(e) else UNAVAILABLE)
                return
        for tup in good:
            self.collector.ack(tup)

    def _open_error(self, error: Exception) -> SinkWriteError:
        """The error of a task that could not open its sink (create the table or directory, or
        read what it committed): naming the sink, the task and where it writes, and for a disk's
        trouble what it means and what to do."""
        said = self._disk_said(error)
        return SinkWriteError(f"sink {self.component!r} task {self.task}: cannot open {self._location()} "
                              f"({type(error).__name__}: {plain_text(error)}){said}")

    def _write_error(self, error: Exception, rows: int) -> SinkWriteError:
        """The error of a batch of ``rows`` rows that ``error`` kept from being written: it names
        the sink, the batch and where it writes, and for a disk's trouble (full, a quota,
        read-only, permissions) what that means and what to do. Before, it named only the
        exception: "No space left on device (os error 28)", and no directory to free space on."""
        said = self._disk_said(error)
        return SinkWriteError(f"sink {self.component!r}: batch {self.task_name}#{self._seq} of {rows} rows was not "
                              f"written to {self._location()} ({type(error).__name__}: {plain_text(error)}){said}; its tuples are "
                              f"failed and replay")

    def _disk_said(self, error: Exception) -> str:
        """``": "`` and what a disk's trouble behind ``error`` (full, a quota, read-only,
        permissions) means for where the sink writes and what to do; "" for any other error."""
        trouble = disk_trouble(errno_of(error), self._location(), f"the {type(self).__name__}'s {self.LOCATION_ARGUMENT}")
        return f": {trouble}" if trouble else ""

    LOCATION_ARGUMENT = "path"
    """The constructor argument that says where the sink writes (`_location`), for its errors."""

    def _location(self) -> str:
        """Where the sink writes (a directory, a table's URI), for its errors."""
        raise NotImplementedError

    def _commit_learning(self, table: pa.Table, ids: list) -> None:
        """Commit ``table`` (the rows of ``ids``); where another writer of this task's name
        committed batches meanwhile (`CommittedElsewhere`), remember them and commit only the
        rows of the ids they do not hold, after them (nothing, if they hold every id)."""
        for _ in range(MAX_COMMIT_TRIES):
            try:
                seq = self._commit(self._seq, table, ids)
            except CommittedElsewhere as e:
                for batch in sorted(e.batches, key=lambda b: b.seq):
                    self._committed.add(batch)
                    self._seq = max(self._seq, batch.seq + 1)
                left = [key for key in ids if key not in self._committed]
                if len(left) < len(ids):
                    log.warning("sink %r: %d of the %d ids of batch %s#%d were committed already, by another writer "
                                "of the task name (a zombie copy of this task, or the copy that replaced it) or "
                                "by an earlier try of this one whose commit raised although it landed: acked "
                                "without being written again", self.component, len(ids) - len(left),
                                len(ids), self.task_name, self._seq)
                    column = table.column(self.id_field)
                    table = table.filter(pc.is_in(column, value_set=pa.array(left, column.type)))
                    ids = left
                if not ids:
                    return
                continue
            self._committed.add(CommittedBatch(seq, ids))
            self._seq = seq + 1
            if self._inherited is not None and self._seq >= self._inherited_until:
                self._inherited = None  # a window of its own: the restart's replays are over
            return
        raise SinkWriteError(f"sink {self.component!r}: batch {self.task_name}#{self._seq}: another writer of the "
                             f"task name committed before it {MAX_COMMIT_TRIES} times in a row; give each sink "
                             f"writing this place its own component id")

    def _bad(self, tup: Tuple, key: Any, err: SinkSchemaError, replays: Sequence[Tuple] = ()) -> None:
        """``tup``'s row does not fit (``err``): failed, or put on the ``dead_letter`` stream and
        acked (``on_bad_row``). ``replays``: the other tuples of the batch with its id (its
        record sent again while the batch held it), which go with it: one row on the stream,
        anchored to them all, one dead letter, as a good row replayed within its batch is
        written once."""
        copies = [tup, *replays]
        if self.on_bad_row == "fail":
            self.collector.report_error(err)  # which logs it
            for t in copies:
                fail_because(self.collector, t, self.component, self.task, str(err))
            return
        if self._letters_read:
            self.collector.report_error(err)
        else:  # the report is all that is left of the row: which row, and what it held
            self.collector.report_error(f"{err}; no bolt reads the sink's {DEAD_LETTER_STREAM!r} stream, so the "
                                        f"row is dropped: id {shown_value(key)}, values {shown_values(tup.get_fields(), tup.get_values())}")
        self.collector.emit([key, self.component, str(err), list(tup.get_values())], anchors=copies,
                            stream=DEAD_LETTER_STREAM)
        for t in copies:
            self.collector.ack(t)
        # the spout sees an ack: the sink's own figure is the only one that counts it (each
        # time it is put on the stream: a replay of the tuple after its batch, another tree's
        # failure or a timeout, puts it there again)
        self.count_refused(self.component, BAD_ROW)

    def cleanup(self) -> None:
        """Commit what is pending on a clean shutdown (a crash leaves it to replay)."""
        self.flush()

    def _open(self) -> list[CommittedBatch]:
        raise NotImplementedError

    def _others_committed(self) -> list[CommittedBatch]:
        """The last ``dedupe_batches`` batches of each of the component's other task names in
        the sink (other task ids: an earlier submission's, whose ids were given otherwise)."""
        return []

    def _refused_for_rows(self, error: Exception) -> bool:
        """Whether a commit failed with ``error`` because of what its rows hold (charged to each
        of them), rather than because the store could not take a batch (not charged): never,
        here, as every row left fits the schema; a sink whose store checks rows further says."""
        return False

    def _commit(self, seq: int, table: pa.Table, ids: list) -> int:
        raise NotImplementedError
