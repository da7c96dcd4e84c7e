"""A `TridentTopology` -> what one Structured Streaming query runs (`SparkPlan`).

The compiler starts from the planner's `Plan` (``squall/trident/planner.py``), so the operations
are fused into the same bolts, with the same processors, as on squall's engine, and the same
code runs them (``SubtopologyBody``). Then each piece gets its place under Spark:

- each Trident spout -> one source of the query (``source.py``; refused here if not
  transactional);
- each Trident bolt without a state -> one ``mapInArrow`` over the DataFrame of its input streams,
  in Spark tasks (one per partition, Arrow batches in and out, its operations run per tuple in the
  task's Python worker); but a spout's one reader, with no repartition or SQL before it, runs in
  the spout's source read (``in_source``, `_in_sources`: the process that reads the batch runs
  the bolt on its tuples, and the source's rows are the bolt's);
- each repartition -> a Spark exchange: ``partition_by`` hashes the key's stable hash
  (``repartition(n, key)``, ``rows.key_bytes``: keys equal in Python meet, as on squall's
  engine; a spout's source computes it for the streams a repartition reads, `SparkSpout.keys`),
  ``global``/``batch_global`` one partition, ``shuffle`` round robin over ``n`` (the bolt's
  parallelism); an identity edge keeps the partitions, coalesced into the bolt's hint or Spark's
  default parallelism, or into exactly its hint where the bolt holds an operation whose result
  depends on its partitions (``SparkBolt.exact``);
- each bolt holding a state (``persistent_aggregate``, ``partition_persist``, a ``state_query`` of
  that state) and every bolt after one -> the driver, in ``foreachBatch``, as one partition: its
  input is collected and its `State` gets ``begin_commit(txid)``, the updates and
  ``commit(txid)``;
- a bolt holding a window (``Stream.window``, a committer) -> the driver too, but as the tasks it
  has on squall's engine (``SparkBolt.driver_tasks``, ``tasks.py``): each task index windows the
  rows its input grouping would route to it (`_window_tasks`);
- at the head of a bolt in tasks (with no hash repartition before it), ``project``, ``FilterNull``
  and ``Equals`` on a stream whose fields they read are in typed columns (a spout's, see
  ``rows.py``) -> Spark SQL (`SqlOp`: a ``select``, an ``isNotNull`` or a null-safe equality
  ``filter``), taken out of the bolt's Python; what they emit is a typed stream again, so the
  ones after them can go too. A bolt left with nothing runs no Python stage;
- a grouped ``persistent_aggregate`` (or ``aggregate``) of the built-in `Count` or `Sum` on the
  driver (`SqlCombine`): the partials the tasks send it (one per group and partition) are summed
  in Spark SQL,
  ``groupBy(stream, key).agg(sum(value))``, so the driver gets one row per group; a partial that
  is not an int (a float or Decimal sum) goes on pickled, and the driver combines it as before.

What cannot run raises ValueError naming the operation, here, before any query starts.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..builtin import Count, Equals, FilterNull, Sum
from ..fluent import SpoutNode, TridentTopology
from ..planner import BoltPlan, plan
from ..processors import (
    AggregateProcessor,
    BodyNode,
    CombinerCombineAggregator,
    FilterProcessor,
    GroupedAggregator,
    GroupedMultiReducerExecutor,
    MergeReducer,
    MultiReduceProcessor,
    PartitionPersistProcessor,
    ProjectProcessor,
    StateQueryProcessor,
    SubtopologyBody,
)
from ..windowing.processor import WindowTridentProcessor
from .rows import Layout
from .source import TypedField, check_spout, typed_fields
from .tasks import FIRST, KEY, TaskRoute


@dataclass(frozen=True)
class SparkSpout:
    """A spout: its txid key, the spout, the streams its tuples go out on, its fields and those
    of them in typed columns."""

    txid: str
    spout: Any
    outputs: tuple[str, ...]
    fields: tuple[str, ...] = ()
    typed: tuple[TypedField, ...] = ()
    # the key columns its source computes: (column, the positions of the fields it hashes)
    keys: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def layout(self) -> Layout:
        """Where its fields are in the source's rows: a typed column, else the pickled rest."""
        columns = {t.position: t.column for t in self.typed}
        rest = iter(range(len(self.fields)))
        return Layout(tuple(columns[i] if i in columns else next(rest) for i in range(len(self.fields))))


@dataclass(frozen=True)
class SqlOp:
    """An operation Spark SQL runs instead of a bolt's Python (see the module docstring).

    ``kind``: ``project`` (keeps the columns of ``layout``), ``not_null`` or ``equals`` (over
    ``columns``; ``nan``: they are DOUBLE, and NaN equals nothing, as in Python). Reads stream
    ``source``; its rows are stream ``stream`` (``layout``), and again ``outputs`` (streams that
    leave the bolt from it). ``carry``: the key columns of its spout's source, which a
    ``project`` keeps for the repartitions after it (`SparkSpout.keys`).
    """

    operation: str
    kind: str
    source: str
    stream: str
    layout: Layout
    columns: tuple[str, ...] = ()
    nan: bool = False
    outputs: tuple[str, ...] = ()
    carry: tuple[str, ...] = ()


@dataclass(frozen=True)
class SparkBolt:
    """A Trident bolt under Spark.

    ``repartition``: ``hash`` (on the key column, over ``partitions``), ``single``,
    ``round_robin`` (over ``partitions``) or ``none``; ``on_driver``: runs in ``foreachBatch``;
    ``in_source``: runs in the read of that spout's source, on the tuples it reads; ``exact``: it
    holds an operation whose result depends on its partitions (`_partition_sensitive`), so with
    no repartition before it, it runs in exactly ``partitions`` tasks (Storm's meaning of the
    parallelism hint), never more.
    """

    component: str
    body: SubtopologyBody
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    repartition: str
    partitions: int
    on_driver: bool
    sql: tuple[SqlOp, ...] = ()  # its head, in Spark SQL, before ``body`` (which may then be empty)
    in_source: str = ""  # the txid of the spout whose source runs it in its read (`_in_sources`)
    exact: bool = False
    # a bolt holding a window: the driver runs it as this many tasks (its parallelism on squall's
    # engine), each input stream's rows routed to them as its grouping would (``tasks.py``); 0:
    # once, as one partition
    driver_tasks: int = 0
    routes: tuple[tuple[str, TaskRoute], ...] = ()

    def tasks(self, parallelism: int) -> int:
        """How many Spark tasks run it with no repartition before it: its hint when ``exact``,
        else its hint or ``parallelism`` (Spark's default), whichever is more (each task costs a
        Python round trip and a fresh copy of the bolt, so no fewer than Spark's default)."""
        return self.partitions if self.exact else max(self.partitions, parallelism)


@dataclass(frozen=True)
class SqlCombine:
    """A stream into the driver whose one reader is a grouped `Count`/`Sum` persist: its tuples
    are partials ``[group..., value]``, which Spark SQL sums per group (the key column holds the
    group's values, at ``group``) when the value (at ``value``) is an int."""

    stream: str
    group: tuple[int, ...]
    value: int


@dataclass(frozen=True)
class SparkPlan:
    """The spouts, the bolts in an order where every bolt comes after those it reads, per
    stream the positions of the fields its reader partitions it by (the key column), and the
    streams whose partials Spark SQL sums before the driver (`SqlCombine`)."""

    spouts: tuple[SparkSpout, ...]
    bolts: tuple[SparkBolt, ...]
    keys: dict[str, tuple[int, ...]]
    combines: dict[str, SqlCombine] = field(default_factory=dict)
    layouts: dict[str, Layout] = field(default_factory=dict)  # the streams with typed columns
    # the streams of a spout (or of SQL over one) that a repartition reads -> the column of the
    # source's rows holding their key (`SparkSpout.keys`)
    key_columns: dict[str, str] = field(default_factory=dict)

    def executor_bolts(self) -> list[SparkBolt]:
        """The bolts that run in Spark tasks."""
        return [b for b in self.bolts if not b.on_driver]

    def driver_bolts(self) -> list[SparkBolt]:
        """The bolts that run on the driver."""
        return [b for b in self.bolts if b.on_driver]

    def source_head(self, txid: str) -> SparkBolt | None:
        """The bolt that spout ``txid``'s source runs in its read (``SparkBolt.in_source``), if any."""
        return next((b for b in self.bolts if b.in_source == txid), None)

    def source_tasks(self, spout: SparkSpout, parallelism: int) -> int:
        """How many Spark input partitions ``spout``'s source may spread a batch over (a
        partitioned spout's; a batch spout's is one): the most its readers run in
        (`SparkBolt.tasks`), and when one of them is ``exact`` with no repartition before it,
        the largest hint of its readers, as squall's engine gives the spout the largest task
        count of the bolts it feeds (the planner's ``_parallelisms``)."""
        own = set(spout.outputs)
        readers = [b for b in self.executor_bolts() if (set(b.inputs) | {op.source for op in b.sql}) & own]
        if any(b.exact and b.repartition == "none" for b in readers):
            return max(b.partitions for b in readers)
        return max([parallelism, *(b.partitions for b in readers)])


def _describe(kind: str, partitioning: Any) -> str:
    if kind == "all":
        return "broadcast()"
    custom = partitioning.custom
    return f"partition({type(custom).__name__})"


def compile_topology(topology: TridentTopology,
                     field_types: Mapping[str, Mapping[str, type]] | None = None, *,
                     in_sources: bool = True) -> SparkPlan:
    """The `SparkPlan` of ``topology``; ``field_types``: per spout (its txid key), the Python
    type of each field that travels in a typed column (default: the spout's ``field_types()``);
    ``in_sources``: a spout's one reader runs in its source's read where it can (`_in_sources`;
    False: in a ``mapInArrow`` of its own, as for a `BatchRunner` given the spouts' rows).

    Raises:
        ValueError: a DRPC stream, a non-transactional spout, a broadcast or custom repartition
            into operations that run in Spark tasks, a window of more than one task after an
            identity or custom partitioning, a field type no column holds (naming each, and why).
    """
    for node in topology._graph.nodes:
        if isinstance(node, SpoutNode) and node.drpc_function:
            raise ValueError(f"new_drpc_stream({node.drpc_function!r}): a DRPC stream cannot run on Spark's engine: "
                             "a DRPC call waits for its own result, and a micro-batch query has no way back to the "
                             "caller; run this topology on squall's engine (LocalCluster, the process or Spark host)")
        if isinstance(node, SpoutNode):
            check_spout(node.txid, node.spout)
    p = plan(topology)
    raw = {n.txid: n.spout for n in topology._graph.nodes if isinstance(n, SpoutNode)}
    declared = dict(field_types or {})
    unknown = set(declared) - set(raw)
    if unknown:
        raise ValueError(f"field_types names {sorted(unknown)}, which are not spouts of the topology {sorted(raw)}")
    spouts = tuple(SparkSpout(s.txid, raw[s.txid], s.outputs, tuple(s.fields),
                              typed_fields(s.txid, raw[s.txid], list(s.fields), f"trident_s{k}",
                                           dict(declared[s.txid]) if s.txid in declared else None))
                   for k, s in enumerate(p.spouts))
    layouts = {stream: s.layout() for s in spouts if s.typed for stream in s.outputs}
    types = {t.column: t.type for s in spouts for t in s.typed}
    by_id = {b.component: b for b in p.bolts}
    driver: set[str] = set()
    ordered: list[BoltPlan] = []
    placed: set[str] = set()
    while len(ordered) < len(p.bolts):
        progress = False
        for b in p.bolts:
            ups = {s.component for s in b.subscriptions if s.component in by_id}
            if b.component in placed or not ups <= placed:
                continue
            ordered.append(b)
            placed.add(b.component)
            progress = True
            if b.committer or ups & driver:
                driver.add(b.component)
        if not progress:  # the planner never makes a cycle; say so rather than loop
            raise ValueError(f"Trident bolts {sorted(set(by_id) - placed)} read each other in a cycle")
    keys: dict[str, tuple[int, ...]] = {}
    bolts = []
    for b in ordered:
        fields = {i.stream: i.fields for i in b.spec.inputs}
        kinds = {s.partitioning.kind for s in b.subscriptions}
        on_driver = b.component in driver
        for sub in b.subscriptions:
            kind = sub.partitioning.kind
            if kind in ("all", "custom") and not on_driver:
                raise ValueError(f"{_describe(kind, sub.partitioning)} before {b.component} "
                                 f"({', '.join(b.operations())}): Spark has no exchange that sends a row to "
                                 f"{'every partition' if kind == 'all' else 'the partitions a custom grouping picks'}; "
                                 "use partition_by, global_, batch_global or shuffle on Spark's engine")
            if kind == "fields" and sub.partitioning.fields is not None:
                keys[sub.stream] = tuple(fields[sub.stream].index(f) for f in sub.partitioning.fields)
        if "fields" in kinds:
            repartition = "hash"
        elif kinds and kinds <= {"global", "batch_global"}:
            repartition = "single"
        elif kinds & {"shuffle", "local_or_shuffle"}:
            repartition = "round_robin"
        else:
            repartition = "none"
        outputs = tuple(stream for stream, _ in b.spec.outputs)
        partitions = 1 if repartition == "single" or on_driver else b.parallelism
        bolt = SparkBolt(b.component, b.body, tuple(sorted(fields)), outputs, repartition, partitions, on_driver,
                         exact=not on_driver and _partition_sensitive(b.body))
        windows = [n.processor for n in b.body.nodes if isinstance(n.processor, WindowTridentProcessor)]
        if windows:
            bolt = replace(bolt, driver_tasks=b.parallelism, routes=_window_tasks(b, windows, keys))
        if not on_driver and repartition != "hash":  # a filter before a hash repartition would move its key
            bolt = _sql_head(bolt, layouts, types)
        bolts.append(bolt)
    if in_sources:
        bolts = _in_sources(spouts, bolts)
    combines = {c.stream: c for b in bolts if b.on_driver for c in _sql_combines(b)}
    for c in combines.values():
        keys[c.stream] = c.group  # the key SQL groups by is the group's values
    spouts, bolts, key_columns = _source_keys(spouts, bolts, keys, layouts)
    return SparkPlan(spouts, tuple(bolts), keys, combines, layouts, key_columns)


def _window_tasks(b: BoltPlan, windows: list[WindowTridentProcessor],
                  keys: dict[str, tuple[int, ...]]) -> tuple[tuple[str, TaskRoute], ...]:
    """How each input stream of window bolt ``b`` reaches its tasks on the driver (`TaskRoute`).

    Raises:
        ValueError: with more than one task, an input whose grouping the driver cannot follow: an
            identity partitioning (task i reads what task i upstream emitted, and a row collected
            on the driver has no emitting task) or a custom grouping (it is given that task too).
    """
    routes = []
    for sub in b.subscriptions:
        kind = sub.partitioning.kind
        route = TaskRoute.of(kind, keys.get(sub.stream, ()))
        if route is None or (route.kind == KEY and sub.stream not in keys):
            if b.parallelism == 1:
                route = TaskRoute(FIRST)  # one task: everything is its, as on squall's engine
            else:
                how = (f"a custom grouping ({type(sub.partitioning.custom).__name__}), which is given the "
                       "emitting task" if kind == "custom" else
                       "an identity partitioning (Trident's where no repartition comes before an operation: task "
                       f"i reads what task i of {sub.component} emitted)")
                raise ValueError(
                    f"a window ({windows[0].window_config}: Stream.window/tumbling_window/sliding_window) "
                    f"in bolt {b.component} of {b.parallelism} tasks reads stream {sub.stream} of {sub.component} "
                    f"through {how}: on Spark's engine the window's tasks run on the driver, where a row has no "
                    "emitting task to route it by, so its windows would not be the ones squall's engine makes; put "
                    "partition_by, global_ or shuffle before the window, or give it a parallelism_hint of 1")
        routes.append((sub.stream, route))
    return tuple(routes)


def _source_keys(spouts: tuple[SparkSpout, ...], bolts: list[SparkBolt], keys: dict[str, tuple[int, ...]],
                 layouts: dict[str, Layout]) -> tuple[tuple[SparkSpout, ...], list[SparkBolt], dict[str, str]]:
    """The key columns each spout's source computes (`SparkSpout.keys`), and which stream's key
    each holds: for every stream of a spout, or of Spark SQL over one (``project``/``FilterNull``/
    ``Equals``, which run no Python), that a bolt in tasks partitions by fields. Such rows meet no
    Python before the repartition, and the key must be the same stable hash of the values that a
    bolt's output carries (``rows.key_bytes``), so the source's read, which has the values,
    computes it. ``SqlOp.carry`` is set to the columns of its spout, for a ``project`` to keep."""
    origin = {o: k for k, s in enumerate(spouts) for o in s.outputs}  # a stream -> its spout's index
    for b in bolts:
        for op in b.sql:
            if op.source in origin:
                for s in (op.stream, *op.outputs):
                    origin[s] = origin[op.source]
    wanted = sorted({s for b in bolts if b.repartition == "hash" and not b.on_driver for s in b.inputs
                     if s in keys and s in origin})
    columns: list[dict[tuple[int, ...], str]] = [{} for _ in spouts]
    key_columns: dict[str, str] = {}
    for stream in wanted:
        k = origin[stream]
        layout = layouts.get(stream)
        positions = keys[stream] if layout is None else tuple(_spout_position(spouts[k], layout.slots[i])
                                                              for i in keys[stream])
        key_columns[stream] = columns[k].setdefault(positions, f"trident_s{k}_k{'_'.join(map(str, positions))}")
    spouts = tuple(replace(s, keys=tuple((c, p) for p, c in columns[k].items())) for k, s in enumerate(spouts))
    carried = [tuple(columns[k].values()) for k in range(len(spouts))]
    bolts = [replace(b, sql=tuple(replace(op, carry=carried[origin[op.source]]) if op.source in origin else op
                                  for op in b.sql)) if b.sql else b for b in bolts]
    return spouts, bolts, key_columns


def _spout_position(spout: SparkSpout, slot: str | int) -> int:
    """The position among ``spout``'s fields of the field at ``slot`` of a `Layout` of its rows."""
    if isinstance(slot, str):
        return next(t.position for t in spout.typed if t.column == slot)
    typed = {t.position for t in spout.typed}
    return [i for i in range(len(spout.fields)) if i not in typed][slot]


# What an operation calls to learn which partition it is, or how many there are
# (`TridentOperationContext`, the `TopologyContext` it wraps).
_PARTITION_CALLS = frozenset({"get_partition_index", "num_partitions", "get_this_task_index", "get_this_task_id",
                              "get_component_tasks"})


def _partition_sensitive(body: SubtopologyBody) -> bool:
    """Whether ``body`` holds an operation whose result depends on how its input is split into
    partitions: a ``partition_aggregate`` (or ``min``/``max``/``min_by``/``max_by``; not the
    partial step of an ``aggregate``, whose combine after the repartition makes the result), a
    ``multi_reduce`` of your `MultiReducer` over ungrouped streams (run per partition; a
    grouped one, ``join`` and ``merge`` give the same per key or per tuple), a state (a
    ``partition_persist``, a ``state_query``: made per partition), or an operation of the user's
    whose code reads its partition's index or count (`_reads_partition`)."""
    for node in body.nodes:
        proc = node.processor
        if isinstance(proc, AggregateProcessor) and not proc.partial:
            return True
        if isinstance(proc, MultiReduceProcessor) and not isinstance(proc.op, (MergeReducer,
                                                                               GroupedMultiReducerExecutor)):
            return True
        if node.state_id is not None or isinstance(proc, (PartitionPersistProcessor, StateQueryProcessor)):
            return True
        if _reads_partition(proc, set(), 0):
            return True
    return False


def _reads_partition(obj: Any, seen: set[int], depth: int) -> bool:
    """Whether ``obj`` (an operation, or what a processor wraps, a few levels down) is of a user
    class whose methods name one of `_PARTITION_CALLS`: squall's own wrappers are looked into,
    not at (a global aggregate's last step reads its index, and runs in one partition)."""
    if depth > 4 or id(obj) in seen or not hasattr(obj, "__dict__") or isinstance(obj, (type, types.ModuleType)):
        return False
    seen.add(id(obj))
    for klass in type(obj).__mro__:
        if klass.__module__.split(".")[0] in ("squall", "builtins", "abc"):
            continue
        for member in vars(klass).values():
            code = getattr(getattr(member, "__func__", member), "__code__", None)
            if code is not None and _names(code) & _PARTITION_CALLS:
                return True
    return any(_reads_partition(v, seen, depth + 1) for v in vars(obj).values())


def _names(code: types.CodeType) -> set[str]:
    """The attribute and global names ``code`` and the functions nested in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _in_sources(spouts: tuple[SparkSpout, ...], bolts: list[SparkBolt]) -> list[SparkBolt]:
    """``bolts``, each that is the one reader of a spout's streams, in Spark tasks, on the
    spout's partitions as they are (no repartition, no SQL head) and with an output, marked to
    run in that spout's source (``in_source``): the task's Python process that reads the
    batch then runs the bolt on it, where it would otherwise hand the tuples over Arrow to the
    JVM and on to a second Python process (W1T on Spark: 60-80 ms of a 0.6 s batch)."""
    marked = list(bolts)
    for spout in spouts:
        own = set(spout.outputs)
        readers = [i for i, b in enumerate(marked) if own & ({*b.inputs} | {op.source for op in b.sql})]
        if len(readers) != 1:
            continue
        b = marked[readers[0]]
        if b.on_driver or b.repartition != "none" or b.sql or not b.body.nodes or not b.outputs \
                or not set(b.inputs) <= own:
            continue
        marked[readers[0]] = replace(b, in_source=spout.txid)
    return marked


def _sql_head(bolt: SparkBolt, layouts: dict[str, Layout], types: dict[str, type]) -> SparkBolt:
    """``bolt`` with the operations at its head that Spark SQL can run (`SqlOp`) taken out of its
    body, in order; each one's rows become a stream of their own, with its layout in ``layouts``."""
    body = bolt.body
    nodes = list(body.nodes)
    input_fields = dict(body.input_fields)
    ops: list[SqlOp] = []
    peeled: set[int] = set()
    progress = True
    while progress:
        progress = False
        for i, node in enumerate(nodes):
            if i in peeled or node.state_id is not None or len(node.parents) != 1 or node.parents[0][0] != "stream":
                continue
            source = node.parents[0][1]
            layout = layouts.get(source)
            if layout is None:
                continue
            stream = f"{bolt.component}-sql{len(ops)}"
            op = _as_sql(node, input_fields[source], layout, types, source, stream)
            if op is None:
                continue
            ops.append(replace(op, outputs=node.outputs))
            layouts[stream] = op.layout
            for o in node.outputs:
                layouts[o] = op.layout
            input_fields[stream] = node.fields
            peeled.add(i)
            for child, pi in node.children:  # its children read the SQL's rows as a stream now
                parents = list(nodes[child].parents)
                parents[pi] = ("stream", stream)
                nodes[child] = replace(nodes[child], parents=tuple(parents))
            progress = True
    if not ops:
        return bolt
    keep = [i for i in range(len(nodes)) if i not in peeled]
    index = {old: new for new, old in enumerate(keep)}
    remaining = []
    for i in keep:
        n = nodes[i]
        remaining.append(replace(n, parents=tuple((k, index[r]) if k == "node" else (k, r) for k, r in n.parents),
                                 children=tuple((index[c], pi) for c, pi in n.children)))
    read = {r for n in remaining for k, r in n.parents if k == "stream"}
    new_body = SubtopologyBody(remaining, {s: f for s, f in input_fields.items() if s in read}, body.state_factories)
    return replace(bolt, body=new_body, inputs=tuple(sorted(read)), sql=tuple(ops))


def _as_sql(node: BodyNode, fields: Any, layout: Layout, types: dict[str, type], source: str,
            stream: str) -> SqlOp | None:
    """``node`` (reading ``source``, of ``fields`` at ``layout``; ``types``: each typed column's
    Python type) as Spark SQL, if it is a
    projection, or a FilterNull or Equals of fields all in typed columns (Equals: of one
    type, a DOUBLE's NaN equal to nothing); else None."""
    proc = node.processor
    if type(proc) is ProjectProcessor:
        return SqlOp(node.name, "project", source, stream,
                     Layout(tuple(layout.slots[fields.index(f)] for f in proc.fields)))
    if type(proc) is not FilterProcessor or type(proc.op) not in (FilterNull, Equals):
        return None
    slots = [layout.slots[fields.index(f)] for f in proc.input_fields]
    if not all(isinstance(c, str) for c in slots):
        return None
    columns = tuple(str(c) for c in slots)
    if type(proc.op) is FilterNull:
        return SqlOp(node.name, "not_null", source, stream, layout, columns)
    kinds = {types[c] for c in columns}
    if len(kinds) > 1:
        return None  # 1 == 1.0 == True in Python; SQL would cast one side
    return SqlOp(node.name, "equals", source, stream, layout, columns, nan=kinds == {float})


def _sql_combines(bolt: SparkBolt) -> list[SqlCombine]:
    """The input streams of driver bolt ``bolt`` that Spark SQL can sum before it: read by one
    node, the grouped combine of the partials of the built-in Count or Sum (the first step of
    their ``persistent_aggregate``, whose combine is ``+``, so the sum of the int partials in any
    order is what it would make of them). Only the streams the driver collects from Spark tasks
    go through SQL; one from another driver bolt is in memory."""
    readers: dict[str, int] = {}
    for node in bolt.body.nodes:
        for kind, ref in node.parents:
            if kind == "stream":
                readers[ref] = readers.get(ref, 0) + 1
    found = []
    for node in bolt.body.nodes:
        proc = node.processor
        if len(node.parents) != 1 or node.parents[0][0] != "stream" or type(proc) is not AggregateProcessor:
            continue
        stream = node.parents[0][1]
        op = proc.op
        if readers[stream] != 1 or type(op) is not GroupedAggregator or type(op.agg) is not CombinerCombineAggregator \
                or type(op.agg.agg) not in (Count, Sum):
            continue
        fields = bolt.body.input_fields[stream]
        found.append(SqlCombine(stream, tuple(fields.index(f) for f in op.group_fields),
                                fields.index(op.input_fields[0])))
    return found


__all__ = ["SparkBolt", "SparkPlan", "SparkSpout", "SqlCombine", "SqlOp", "compile_topology"]
