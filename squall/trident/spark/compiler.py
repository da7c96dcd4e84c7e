"""A `TridentTopology` -> what one Structured Streaming query runs (`SparkPlan`).

The compiler starts from the planner's `Plan` (``squall/trident/planner.py``), so the operations
are fused into the same bolts, with the same processors, as on squall's engine, and the same
code runs them (``SubtopologyBody``). Then each piece gets its place under Spark:

- each Trident spout -> one source of the query (``source.py``; refused here if not
  transactional);
- each Trident bolt without a state -> one ``mapInArrow`` over the DataFrame of its input streams,
  in Spark tasks (one per partition, Arrow batches in and out, its operations run per tuple in the
  task's Python worker);
- each repartition -> a Spark exchange: ``partition_by`` hashes the pickled key
  (``repartition(n, key)``), ``global``/``batch_global`` one partition, ``shuffle`` round robin
  over ``n`` (the bolt's parallelism); an identity edge keeps the partitions;
- each bolt holding a state (``persistent_aggregate``, ``partition_persist``, a ``state_query`` of
  that state) and every bolt after one -> the driver, in ``foreachBatch``, as one partition: its
  input is collected and its `State` gets ``begin_commit(txid)``, the updates and
  ``commit(txid)``;
- a grouped ``persistent_aggregate`` (or ``aggregate``) of the built-in `Count` or `Sum` on the
  driver (`SqlCombine`): the partials the tasks send it (one per group and partition) are summed
  in Spark SQL,
  ``groupBy(stream, key).agg(sum(value))``, so the driver gets one row per group; a partial that
  is not an int (a float or Decimal sum) goes on pickled, and the driver combines it as before.

What cannot run raises ValueError naming the operation, here, before any query starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..builtin import Count, Sum
from ..fluent import SpoutNode, TridentTopology
from ..planner import BoltPlan, plan
from ..processors import AggregateProcessor, CombinerCombineAggregator, GroupedAggregator, SubtopologyBody
from .source import check_spout


@dataclass(frozen=True)
class SparkSpout:
    """A spout: its txid key, the spout, the streams its tuples go out on."""

    txid: str
    spout: Any
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class SparkBolt:
    """A Trident bolt under Spark.

    ``repartition``: ``hash`` (on the key column, over ``partitions``), ``single``,
    ``round_robin`` (over ``partitions``) or ``none``; ``on_driver``: runs in ``foreachBatch``.
    """

    component: str
    body: SubtopologyBody
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    repartition: str
    partitions: int
    on_driver: bool


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

    def executor_bolts(self) -> list[SparkBolt]:
        """The bolts that run in Spark tasks."""
        return [b for b in self.bolts if not b.on_driver]

    def driver_bolts(self) -> list[SparkBolt]:
        """The bolts that run on the driver."""
        return [b for b in self.bolts if b.on_driver]


def _describe(kind: str, partitioning: Any) -> str:
    if kind == "all":
        return "broadcast()"
    custom = partitioning.custom
    return f"partition({type(custom).__name__})"


def compile_topology(topology: TridentTopology) -> SparkPlan:
    """The `SparkPlan` of ``topology``.

    Raises:
        ValueError: a DRPC stream, a non-transactional spout, a broadcast or custom repartition
            into operations that run in Spark tasks (naming each, and why).
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
    spouts = tuple(SparkSpout(s.txid, raw[s.txid], s.outputs) for s in p.spouts)
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
        bolts.append(SparkBolt(b.component, b.body, tuple(sorted(fields)), outputs, repartition,
                               partitions, on_driver))
    combines = {c.stream: c for b in bolts if b.on_driver for c in _sql_combines(b)}
    for c in combines.values():
        keys[c.stream] = c.group  # the key SQL groups by is the group's values
    return SparkPlan(spouts, tuple(bolts), keys, combines)


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


__all__ = ["SparkBolt", "SparkPlan", "SparkSpout", "SqlCombine", "compile_topology"]
