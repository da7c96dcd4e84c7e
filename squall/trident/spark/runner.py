"""What runs each micro-batch: the Trident bolts in Spark tasks, then the states on the driver.

`BatchRunner` is the query's ``foreachBatch`` function. For micro-batch ``batchId`` it runs
Trident batch ``txid = batchId + 1`` (attempt 0): it builds, on the batch's DataFrame of source
rows, each executor bolt's head in Spark SQL (``compiler.SqlOp``: ``select``/``filter`` over
typed columns), then its ``mapInArrow`` (`run_partition`: one fresh copy of the bolt's body per
Spark task, the tuples of its partition, then ``finish_batch``; a bolt that runs in its spout's
source read, ``SparkBolt.in_source``, is already in the source's rows), collects what the driver bolts
read (the partials of a grouped Count/Sum summed per group in Spark SQL first, see
``compiler.SqlCombine``), and runs those bolts in this process, where their `State` objects live
for the query's life. A state's ``begin_commit(txid)``/``commit(txid)`` run once a batch, in batchId order (Spark
starts a batch after the previous one committed); when Spark re-runs a batch (a restart from the
checkpoint after the state was written but before Spark's commit log was), the same txid reaches
the state again and `TransactionalMap`/`OpaqueMap` apply it once. A bolt holding a window runs
as its tasks (``tasks.DriverTasks``): one copy of it per task index, each given the rows its
input grouping routes to it, so each windows what it would on squall's engine.
"""

from __future__ import annotations

import logging
import pickle
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from ..._errors import StoreUnavailableException
from ..coordinator import TransactionAttempt
from ..executor import BatchInfo, BatchOutput
from ..failures import TridentOperationError, query_stalled_text, query_unavailable_text
from .compiler import SparkBolt, SparkPlan, SparkSpout, SqlCombine, SqlOp
from .context import SparkTaskContext
from .rows import (
    INT64,
    KEY,
    KEY_HASH,
    ROW_SCHEMA,
    STREAM,
    TUPLE,
    VALUE,
    Layout,
    dumps,
    key_bytes,
    key_values,
    loads,
    stream_rows,
)
from .tasks import DriverTasks

log = logging.getLogger("squall.trident.spark")

_FLUSH_ROWS = 4096
_ORDER = "trident_order"  # a collected row's place in its frame (_collect)
_SOLO = "trident_solo"  # what _collect groups a row by besides (stream, key): null for a partial to sum

_quiet_lock = threading.Lock()
_quiet_depth = 0
_quiet_saved: Any = None


@contextmanager
def quiet_call_sites() -> Iterator[None]:
    """Build squall's own DataFrames without pyspark's call-site capture.

    pyspark 4 records, for every ``Column`` method and ``col()``, the Python call site for
    Spark's error messages: three py4j calls each, a failed ``import ipykernel`` where IPython
    is installed without it, and at the first one in a driver an ``import IPython`` (1 s at load 5).
    The call sites of the expressions squall builds name squall's files, never the user's, so
    they are not captured while one of these blocks runs (pyspark's own switch,
    ``spark.python.sql.dataFrameDebugging.enabled``, is read once and held in
    ``pyspark.errors.utils._enable_debugging_cache``; the user's setting is back after the block).
    Blocks nest and may run on several threads (``start`` and ``foreachBatch``); a user thread
    building DataFrames meanwhile loses its call sites for that time, nothing else."""
    global _quiet_depth, _quiet_saved
    try:
        from pyspark.errors import utils
    except ImportError:
        yield
        return
    if not hasattr(utils, "_enable_debugging_cache"):
        yield  # another pyspark: its own behaviour
        return
    with _quiet_lock:
        if _quiet_depth == 0:
            _quiet_saved = utils._enable_debugging_cache
            setattr(utils, "_enable_debugging_cache", False)  # noqa: B010 (typed None in pyspark)
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                setattr(utils, "_enable_debugging_cache", _quiet_saved)  # noqa: B010


class _ArrowOutput(BatchOutput):
    """Where an executor bolt emits: rows of (stream, key, tuple, value), handed out as Arrow
    batches. The key (``rows.key_bytes``, on a stream a repartition or a SQL sum reads) is the
    stable hash of the key fields' values, with them pickled on a stream SQL sums. On such a
    stream (``combines``: the partial's position) an int partial goes in the value column and no
    tuple is pickled: SQL rebuilds nothing but the sum, the driver the row."""

    def __init__(self, keys: dict[str, tuple[int, ...]], combines: dict[str, int], component: str) -> None:
        self.keys = keys
        self.combines = combines
        self.component = component
        self.streams: list[str] = []
        self.key_values: list[bytes | None] = []
        self.tuples: list[bytes | None] = []
        self.values: list[int | None] = []

    def emit(self, batch: BatchInfo, stream: str, values: list) -> None:
        idx = self.keys.get(stream)
        self.streams.append(stream)
        at = self.combines.get(stream)
        self.key_values.append(None if idx is None else key_bytes([values[i] for i in idx], at is not None))
        if at is not None:
            value = values[at]
            if type(value) is int and INT64[0] <= value <= INT64[1]:  # what the BIGINT column holds
                self.tuples.append(None)
                self.values.append(value)
                return
        self.tuples.append(dumps(values))
        self.values.append(None)

    def report_error(self, error: BaseException) -> None:
        log.error("Trident bolt %s reported: %s: %s", self.component, type(error).__name__, error)

    def flush(self) -> Any:
        import pyarrow as pa

        rb = pa.RecordBatch.from_arrays(
            [pa.array(self.streams, pa.string()), pa.array(self.key_values, pa.binary()),
             pa.array(self.tuples, pa.binary()), pa.array(self.values, pa.int64())], names=[STREAM, KEY, TUPLE, VALUE])
        self.streams, self.key_values, self.tuples, self.values = [], [], [], []
        return rb


def run_body(body_bytes: bytes, component: str, tasks: int, txid: int, conf: dict,
             keys: dict[str, tuple[int, ...]], combines: dict[str, int],
             inputs: Iterator[tuple[str, list[list]]]) -> Iterator[Any]:
    """One Spark task's run of an executor bolt for batch ``txid``: a fresh copy of its body
    (``body_bytes``), the tuples of ``inputs`` (``(stream, values of each tuple)``), then
    ``finish_batch``; what it emits, as Arrow batches of frame rows (`ROW_SCHEMA`). ``combines``:
    the streams whose int partials go out in the value column (a stream -> the partial's position)."""
    from pyspark import TaskContext

    task = TaskContext.get()
    index = task.partitionId() if task is not None else 0
    body = pickle.loads(body_bytes)
    out = _ArrowOutput(keys, combines, component)
    body.prepare(conf, SparkTaskContext(component, index, max(tasks, index + 1), conf), out)
    batch = BatchInfo(TransactionAttempt(txid, 0))
    try:
        body.init_batch(batch)
        for stream, rows in inputs:
            body.execute_many(batch, stream, rows)
            if len(out.tuples) >= _FLUSH_ROWS:
                yield out.flush()
        body.finish_batch(batch)
        if out.tuples:
            yield out.flush()
    except TridentOperationError as e:  # which batch: Spark retries the task, then fails the query
        e.at_batch(txid)  # not the task's attempt: each attempt's text is the same, and Spark's log
        raise             # folds the repeats of one failure's text ("[duplicate N]")
    finally:
        body.cleanup()


def run_partition(body_bytes: bytes, component: str, tasks: int, txid: int, conf: dict,
                  keys: dict[str, tuple[int, ...]], combines: dict[str, int] | None = None,
                  layouts: dict[str, Layout] | None = None) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of one executor bolt for batch ``txid`` (`run_body` over the
    partition's rows); ``layouts``: the input streams with typed columns (the others are pickled
    whole)."""
    typed = layouts or {}

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        inputs = (pair for rb in batches for pair in stream_rows(rb, typed))
        yield from run_body(body_bytes, component, tasks, txid, conf, keys, combines or {}, inputs)

    return run


class _ListOutput(BatchOutput):
    """Where a driver bolt emits: the values, by stream, for the driver bolts after it."""

    def __init__(self, rows: dict[str, list[list]], component: str) -> None:
        self.rows = rows
        self.component = component

    def emit(self, batch: BatchInfo, stream: str, values: list) -> None:
        self.rows.setdefault(stream, []).append(values)

    def report_error(self, error: BaseException) -> None:
        log.error("Trident bolt %s reported: %s: %s", self.component, type(error).__name__, error)


class TridentQueryStalled(RuntimeError):
    """A Trident batch failed on Spark's engine (after Spark's task retries): the query stops at
    its txid, and one started again from its checkpoint replays it (`query_stalled_text`)."""


class TridentStoreUnavailable(TridentQueryStalled):
    """A state's store did not answer on the driver (a `StoreUnavailableException` in
    ``foreachBatch``): the query stops at the batch's txid, and one started again once the store
    answers replays it, each transactional or opaque state applying it once
    (`query_unavailable_text`; `squall.trident.spark.restart.run_restarting` starts it again)."""


def _operation_error(error: BaseException) -> str | None:
    """What ``error`` (a micro-batch's failure) says of the Trident operation that raised: a
    `TridentOperationError`'s text, raised here (a driver bolt's) or in a Spark task, whose error
    Spark relays as the text of the Python traceback (its last such line: the last attempt's);
    None when no operation raised."""
    if isinstance(error, TridentOperationError):
        return str(error)
    marker = f"squall.trident.failures.{TridentOperationError.__name__}: "
    found = None
    for line in str(error).splitlines():
        at = line.find(marker)
        if at >= 0:
            found = line[at + len(marker):].strip()
    return found


class BatchFrames(NamedTuple):
    """A batch's DataFrames, not run: each stream's (``streams``: where the driver bolts read),
    the outputs of the bolts whose output nothing reads (``leaves``: run for what they do), each
    frame with the streams its rows can be on (``carried``: a filter to all of them is left out),
    and the frames in one partition (``single``: their partials are one per group already)."""

    streams: dict[str, Any]
    leaves: list[Any]
    carried: list[tuple[Any, frozenset[str]]]
    single: list[Any]


class BatchRunner:
    """The ``foreachBatch`` function of a compiled Trident topology (see the module docstring)."""

    def __init__(self, plan: SparkPlan, conf: dict, clock: Any = None) -> None:
        """``clock``: what the driver's windows read the time from (``clock.wall()``, seconds;
        a ``squall.engine.clock.SimulatedClock`` in tests); None: the wall clock."""
        from pyspark import cloudpickle

        self.plan = plan
        self.conf = dict(conf)
        self.clock = clock
        # pickled before anything is prepared: each task starts from the body as built
        self._bodies = {b.component: cloudpickle.dumps(b.body) for b in plan.executor_bolts() if not b.in_source}
        # a window's bolt runs on the driver as its tasks, each a copy of the body as built
        self._tasks = {b.component: DriverTasks(b.component, b.driver_tasks, cloudpickle.dumps(b.body), b.inputs,
                                                dict(b.routes))
                       for b in plan.driver_bolts() if b.driver_tasks}
        self._rows: dict[str, list[list]] = {}
        self._widths = {s: len(f) for b in plan.driver_bolts() for s, f in b.body.input_fields.items()}
        self._prepared = False
        self.last_txid = 0
        # rows the driver collected in the last batch (a SQL-summed stream: one per group)
        self.last_collected = 0
        self._default_parallelism: int | None = None

    def _prepare_driver(self) -> None:
        for b in self.plan.driver_bolts():
            output = _ListOutput(self._rows, b.component)
            tasks = self._tasks.get(b.component)
            if tasks is not None:
                tasks.prepare(self.conf, output, self.clock)
                continue
            b.body.prepare(self.conf, SparkTaskContext(b.component, 0, 1, self.conf), output)
            if self.clock is not None:
                b.body.use_clock(self.clock)
        self._prepared = True

    def __call__(self, df: Any, batch_id: int) -> None:
        """Run Trident batch ``batch_id + 1`` over ``df``, the micro-batch's source rows."""
        if not self._prepared:
            self._prepare_driver()
        txid = int(batch_id) + 1
        try:
            self._run(df, txid)
        except Exception as e:
            # the query fails here (Spark's rule for foreachBatch), and started again it replays
            # this txid: where an operation raised, say so, naming it and the record
            # (squall.trident.failures); any other failure goes on as it is
            # a TridentOperationError itself was raised here, on the driver (a state, or an
            # operation after one): foreachBatch, which Spark does not retry; a Spark task's
            # reaches here as the text of Spark's error
            if isinstance(e, StoreUnavailableException):
                # a state's store (Redis restarting, say) did not answer: on squall's engine the
                # batch replays until it does; here the query stops, and says it is the store's
                # doing and that a start replays the txid once (before, the exception went on as
                # it was, and its "a stream's batch replays until it is back" was untrue here)
                raise TridentStoreUnavailable(query_unavailable_text(txid, f"{type(e).__name__}: {e}")) from e
            on_driver = isinstance(e, TridentOperationError)
            if isinstance(e, TridentOperationError):
                e.at_batch(txid)
            last = _operation_error(e)
            if last is None:
                raise
            raise TridentQueryStalled(query_stalled_text(txid, last, on_driver)) from e

    def _run(self, df: Any, txid: int) -> None:
        with quiet_call_sites():
            built = self.frames(df, txid)
            for leaf in built.leaves:  # a bolt whose output nothing reads still runs
                leaf.write.format("noop").mode("overwrite").save()
            driver_inputs = tuple(sorted({s for b in self.plan.driver_bolts() for s in b.inputs if s in built.streams}))
            self._rows.clear()
            self.last_collected = 0
            if driver_inputs:
                sources = _distinct(built.streams, driver_inputs)
                single = len(sources) == 1 and any(sources[0] is f for f in built.single)
                self._collect(_input(built.streams, driver_inputs, built.carried), driver_inputs, summed=not single)
        for b in self.plan.driver_bolts():
            tasks = self._tasks.get(b.component)
            if tasks is not None:
                tasks.run(txid, self._rows)
                continue
            batch = BatchInfo(TransactionAttempt(txid, 0))
            b.body.init_batch(batch)
            for s in b.inputs:
                rows = self._rows.get(s)
                if rows:
                    b.body.execute_many(batch, s, rows)
            b.body.finish_batch(batch)
        self._rows.clear()
        self.last_txid = txid

    def frames(self, df: Any, txid: int) -> BatchFrames:
        """The DataFrames of batch ``txid`` over ``df`` (the micro-batch's source rows), not run
        (`BatchFrames`)."""
        frames: dict[str, Any] = {}
        for spout in self.plan.spouts:  # a source that runs its head bolt has that bolt's rows
            head = self.plan.source_head(spout.txid)
            frames.update({s: df for s in (head.outputs if head is not None else spout.outputs)})
        # which streams each frame's rows can be on (a filter to all of them is left out), and
        # the frames in one partition (the partials there are one per group already)
        carried = [(df, frozenset(frames))]
        single = []
        if len(self.plan.spouts) == 1:
            spout = self.plan.spouts[0]
            if self.plan.source_head(spout.txid) is not None and self.plan.source_tasks(spout, self._parallelism(df)) == 1:
                single.append(df)  # the source's tasks, as start gives them
        leaves = []
        for b in self.plan.executor_bolts():
            if b.in_source:
                continue  # run by its spout's source
            for op in b.sql:
                frames[op.stream] = _sql(frames[op.source], op, self.plan.key_columns.get(op.stream))
                carried.append((frames[op.stream], frozenset([op.stream])))
                for o in op.outputs:
                    frames[o] = _relabel(frames[op.stream], o, self.plan.key_columns.get(o))
                    carried.append((frames[o], frozenset([o])))
            if not b.body.nodes:
                continue  # all of it in SQL
            parallelism = self._parallelism(df)
            frame = _repartition(_input(frames, b.inputs, carried), b, parallelism)
            fn = run_partition(self._bodies[b.component], b.component, b.partitions, txid, self.conf, self.plan.keys,
                               {s: self.plan.combines[s].value for s in b.outputs if s in self.plan.combines},
                               {s: self.plan.layouts[s] for s in b.inputs if s in self.plan.layouts})
            out = frame.mapInArrow(fn, ROW_SCHEMA)
            carried.append((out, frozenset(b.outputs)))
            if _partitions(b, parallelism) == 1:
                single.append(out)
            for s in b.outputs:
                frames[s] = out
            if not b.outputs:
                leaves.append(out)
        return BatchFrames(frames, leaves, carried, single)

    def _parallelism(self, df: Any) -> int:
        if self._default_parallelism is None:
            self._default_parallelism = int(df.sparkSession.sparkContext.defaultParallelism)
        return self._default_parallelism

    def _collect(self, frame: Any, streams: tuple[str, ...], summed: bool = True) -> None:
        """The rows of ``streams`` into ``self._rows``, in the frame's order: a partial in the
        value column as its row ``[group..., value]``, every other tuple unpickled. ``summed``:
        Spark SQL first sums the int partials per stream and key (not where ``frame`` is one
        partition, whose partials are one per group already: the driver's combine takes them as
        they are). The key's bytes are the group's stable hash and pickle, and Python-equal
        groups may pickle apart (``1`` and ``1.0``): SQL then sends the driver a partial of each,
        which the driver's combine, grouping by Python's equality, adds up as squall's engine
        does. Every other row passes on its own and in place: SQL's grouping would merge equal
        rows and turn a DOUBLE -0.0 into 0.0."""
        from pyspark.sql import functions as F

        combines = {s: self.plan.combines[s] for s in streams if s in self.plan.combines}
        rows = self._rows
        layouts = {s: self.plan.layouts[s] for s in streams if s in self.plan.layouts}
        typed = sorted({c for layout in layouts.values() for c in layout.columns()})
        if not combines:
            table = frame.select(STREAM, TUPLE, *typed).toArrow()
            self.last_collected = table.num_rows
            for stream, values in stream_rows(table, layouts):
                rows.setdefault(stream, []).extend(values)
            return
        if summed:
            # One pass (a union of two filters would run the tasks twice): each partial to sum
            # groups with the others of its stream and key (decimal: exact, as Python's ints
            # are), each other row with itself alone, and all keep their first place in the
            # frame (monotonically_increasing_id: the partition, then the row in it).
            partial = F.col(STREAM).isin(list(combines)) & F.col(TUPLE).isNull() & F.col(VALUE).isNotNull()
            ordered = frame.withColumn(_ORDER, F.monotonically_increasing_id())
            table = ordered.groupBy(STREAM, KEY, F.when(partial, F.lit(None)).otherwise(F.col(_ORDER)).alias(_SOLO)) \
                .agg(F.sum(F.col(VALUE).cast("decimal(38,0)")).alias(VALUE), F.min(_ORDER).alias(_ORDER),
                     F.first(TUPLE).alias(TUPLE), *[F.first(c).alias(c) for c in typed]).toArrow()
            table = table.sort_by(_ORDER)
        else:
            table = frame.select(STREAM, KEY, TUPLE, VALUE, *typed).toArrow()
        self.last_collected = table.num_rows
        columns = [table.column(c).to_pylist() for c in (STREAM, KEY, TUPLE, VALUE)]
        for r, (stream, key, data, total) in enumerate(zip(*columns)):
            if stream in combines and data is None:
                rows.setdefault(stream, []).append(_partial_row(combines[stream], self._widths[stream],
                                                                key_values(key), int(total)))
                continue
            layout = layouts.get(stream)
            rows.setdefault(stream, []).append(loads(data) if layout is None else layout.decode(table.slice(r, 1))[0])

    def close(self) -> None:
        """Clean up the driver bolts (their operations' ``cleanup``)."""
        if self._prepared:
            for b in self.plan.driver_bolts():
                tasks = self._tasks.get(b.component)
                if tasks is not None:
                    tasks.cleanup()
                else:
                    b.body.cleanup()
            self._prepared = False


def _partial_row(combine: SqlCombine, width: int, group: list, total: int) -> list:
    """The tuple ``[group..., total]`` of a group whose partials SQL summed, its values in place."""
    row: list = [None] * width
    for at, value in zip(combine.group, group):
        row[at] = value
    row[combine.value] = total
    return row


def union(frames: list[Any]) -> Any:
    """The rows of ``frames`` in one DataFrame: by column name, a typed column that one lacks
    (another spout's) null there."""
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other, allowMissingColumns=True)
    return frame


def _columns(stream: str, pickled: bool, typed: list[str], key: str | None = None,
             carry: tuple[str, ...] = ()) -> list[Any]:
    """A frame's columns (``rows.py``) for rows of ``stream``: the key from column ``key`` (a
    source's key column, else null), no value, the pickled ``trident_tuple`` kept (else null),
    then the ``typed`` columns and the source's key columns (``carry``)."""
    from pyspark.sql.functions import col, lit

    return [lit(stream).alias(STREAM), col(key).alias(KEY) if key else lit(None).cast("binary").alias(KEY),
            col(TUPLE) if pickled else lit(None).cast("binary").alias(TUPLE), lit(None).cast("bigint").alias(VALUE),
            *[col(c) for c in typed], *[col(c) for c in carry]]


def source_frame(source: Any, spout: SparkSpout, head: SparkBolt | None = None,
                 key_columns: dict[str, str] | None = None) -> Any:
    """The rows of ``spout``'s streams from ``source``, its Data Source's DataFrame; with
    ``head`` (the bolt the source runs), that bolt's rows, as the source reads them.
    ``key_columns`` (``SparkPlan.key_columns``): the column holding a stream's key, for the
    streams a repartition reads (the source's rows have them: ``SparkSpout.keys``)."""
    if head is not None:
        return source
    typed = [t.column for t in spout.typed]
    keys = key_columns or {}
    carry = tuple(c for c, _ in spout.keys) if keys else ()
    return union([source.select(*_columns(stream, True, typed, keys.get(stream), carry)) for stream in spout.outputs])


def _distinct(frames: dict[str, Any], streams: tuple[str, ...]) -> list[Any]:
    """The frames holding ``streams``, each once."""
    distinct: list[Any] = []
    for s in streams:
        if all(frames[s] is not f for f in distinct):
            distinct.append(frames[s])
    return distinct


def _input(frames: dict[str, Any], streams: tuple[str, ...],
           carried: list[tuple[Any, frozenset[str]]] | None = None) -> Any:
    """The rows of ``streams``: the union of the frames holding them, filtered to them unless
    every one of them carries no other stream (``carried``: frames and the streams their rows
    can be on); each DataFrame built costs the driver a plan's analysis, every batch."""
    from pyspark.sql.functions import col

    distinct = _distinct(frames, streams)
    wanted = set(streams)
    known = carried or []
    if all(any(f is frame and on <= wanted for f, on in known) for frame in distinct):
        return union(distinct)
    return union(distinct).filter(col(STREAM).isin(list(streams)))


def _relabel(frame: Any, stream: str, key: str | None = None) -> Any:
    """``frame``'s rows as stream ``stream``; with ``key``, their key from that column (the
    source's key column of ``stream``)."""
    from pyspark.sql.functions import col, lit

    if key is None:
        return frame.withColumn(STREAM, lit(stream))
    return frame.withColumns({STREAM: lit(stream), KEY: col(key)})


def _sql(frame: Any, op: SqlOp, key: str | None = None) -> Any:
    """The rows ``op`` makes of its source stream's in ``frame``, labelled ``op.stream`` (their
    key from column ``key``, if given)."""
    from functools import reduce

    from pyspark.sql.functions import col, isnan

    rows = frame.filter(col(STREAM) == op.source)
    if op.kind == "project":
        pickled = any(isinstance(s, int) for s in op.layout.slots)
        return rows.select(*_columns(op.stream, pickled, list(dict.fromkeys(op.layout.columns())), key, op.carry))
    if op.kind == "not_null":
        test = [col(c).isNotNull() for c in op.columns]
    else:  # equals: Python's ==, None == None too; NaN equals nothing (SQL's NaN = NaN is true)
        test = [col(a).eqNullSafe(col(b)) for a, b in zip(op.columns, op.columns[1:])]
        if op.nan and len(op.columns) > 1:
            test += [~isnan(col(c)) | col(c).isNull() for c in op.columns]
    if test:
        rows = rows.filter(reduce(lambda a, b: a & b, test))
    return _relabel(rows, op.stream, key)


def _partitions(bolt: SparkBolt, parallelism: int) -> int:
    """How many partitions `_repartition` gives ``bolt``'s input at most."""
    if bolt.repartition in ("hash", "round_robin"):
        return bolt.partitions
    if bolt.repartition == "single":
        return 1
    return bolt.tasks(parallelism)


def _repartition(frame: Any, bolt: SparkBolt, parallelism: int) -> Any:
    """``frame`` partitioned for ``bolt``'s input: a hash repartition on the key's stable hash
    (its first bytes, ``rows.KEY_HASH``: keys equal in Python meet in one partition; a spout's
    source computes it for its rows, ``SparkSpout.keys``). With no repartition before it (an
    identity edge), the source's partitions are coalesced into `SparkBolt.tasks`: the bolt's
    hint or Spark's default parallelism, whichever is more (each Spark task pays a Python round
    trip and a fresh copy of the bolt), or for a bolt whose result depends on its partitions its
    hint (at most: the source reads in no more, `SparkPlan.source_tasks`, and a coalesce never
    adds partitions)."""
    from pyspark.sql.functions import col

    if bolt.repartition == "hash":
        return frame.repartition(bolt.partitions, col(KEY).substr(1, KEY_HASH))
    if bolt.repartition == "single":
        return frame.repartition(1)
    if bolt.repartition == "round_robin":
        return frame.repartition(bolt.partitions)
    return frame.coalesce(bolt.tasks(parallelism))


__all__ = ["BatchFrames", "BatchRunner", "TridentQueryStalled", "TridentStoreUnavailable", "quiet_call_sites", "run_body", "run_partition", "source_frame", "union"]
