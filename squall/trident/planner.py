"""Trident's planner: the logical graph of a `TridentTopology` -> a `StormTopology`.

Storm's ``TridentTopology.build``, in three steps:

1. `plan` works on a copy of the graph. A DRPC stream gets its end (the results of each batch
   joined with the calls' return-info, Storm's ``completeDrpc``). Processor nodes are fused
   into groups (one bolt each, ``b-<N>[-names]``) as Storm's ``GraphGrouper`` does: nodes using
   the same state start together, and a group merges with the one group all its children (or
   all its parents) are in, never across a repartition; a plain edge left between two groups,
   and an edge from a spout straight to an operation (a spout's bolt holds only its emitter),
   get an identity repartition. Each group runs in as many
   tasks as the largest ``parallelism_hint`` of its nodes; groups tied by an identity partition
   share the largest.
2. The result is a `Plan` of small records (what each bolt holds, reads and emits), which the
   tests read to check a topology's shape.
3. `materialize` declares it on a `TopologyBuilder`: per batch group its master coordinator
   spout ``$mastercoord-bg<i>``, per Trident spout its coordinator bolt and its emitter bolt, one
   `TridentBoltExecutor` per group of nodes, and a DRPC return bolt per DRPC stream. Every
   repartition edge is a stream of its own (``s<N>``), grouped as the edge says; the system
   streams (``$coord-bg<i>``, ``$commit``, ``$batch``, ``$success``) are the runtime's, added by
   `executor.wire`.

Each connected part of the graph is a batch group of its own (Storm's), ``bg0``, ``bg1``, ...
in the order the parts were made (a topology of one part: ``bg0`` alone): one master coordinator
per group numbers its batches, paces them (``topology.max.spout.pending`` counts each group's
batches) and commits them in its own txid order; a batch holds what each spout of the group
emitted for it, and starts once any spout of the group is ready for it (Storm's rule), so a
`FeederBatchSpout` not fed holds back no spout of another part, and not one it is merged or
joined with (it emits what it has for the batch: nothing, when not fed). A ``state_query``
connects no parts: it runs in the bolt of its state, colocated with the state's updater, and a
bolt holding nodes of several groups runs each group's batches on their own (its inputs,
``$coord-`` reports and ``$commit`` per group), so a DRPC call reading a state another part
writes neither waits for that part's batches nor fails with them. It sees the state as of the
batches of the other part committed when its own batch finishes in the state's bolt.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._config import Config
from .._fields import Fields, GlobalStreamId
from .._grouping import CustomStreamGrouping
from .._topology import StormTopology, TopologyBuilder
from ..drpc import ReturnResults
from .coordinator import BATCH_STREAM, SUCCESS_STREAM, master_coordinator_id, spout_coordinator_id
from .executor import BatchBody, BatchInfo, BatchOutput, BoltSpec, InputSpec
from .failures import operation_text
from .fluent import (
    Node,
    Partitioning,
    PartitionNode,
    ProcessorNode,
    SpoutNode,
    StateNode,
    Stream,
    TridentTopology,
    _Graph,
)
from .processors import BodyNode, ReturnResultsReducer, SubtopologyBody, batch_partition

if TYPE_CHECKING:
    from .._context import TopologyContext

BATCH_GROUP = "bg0"
"""The batch group of a topology's first connected part (of its only one, most often)."""
DRPC_RESULT_FIELDS = Fields("result", "return-info")


# --- groupings the planner adds --------------------------------------------------------------------

class IdentityGrouping(CustomStreamGrouping):
    """Task i of the emitting component sends to task i of the subscriber (Storm's
    ``IdentityGrouping``); the planner gives both the same number of tasks."""

    def prepare(self, context: TopologyContext, stream: GlobalStreamId, target_tasks: list[int]) -> None:
        """Pair the emitter's tasks with the targets, in task order."""
        super().prepare(context, stream, target_tasks)
        sources = context.get_component_tasks(stream.component_id)
        self._to = {task: [target_tasks[i % len(target_tasks)]] for i, task in enumerate(sources)}

    def choose_tasks(self, task_id: int, values: list) -> list[int]:
        """The target with the emitting task's index."""
        return self._to[task_id]


class BatchGlobalGrouping(CustomStreamGrouping):
    """All of one batch to one task, chosen by txid (Storm's ``IndexHashGrouping(0)``): the
    first value of a Trident data tuple is its `TransactionAttempt`."""

    def choose_tasks(self, task_id: int, values: list) -> list[int]:
        """The task ``batch_partition`` names for the tuple's batch."""
        targets = self.target_tasks
        return [targets[batch_partition("batch_global", values[0], len(targets))]]


# --- the plan ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Subscription:
    """A bolt reading ``stream`` of ``component`` with ``partitioning``."""

    component: str
    stream: str
    partitioning: Partitioning


@dataclass(frozen=True)
class SpoutPlan:
    """A Trident spout: its emitter bolt ``component`` and coordinator bolt ``coordinator``."""

    component: str
    coordinator: str
    txid: str
    spout: Any                        # the ITridentSpout
    fields: Fields
    parallelism: int
    outputs: tuple[str, ...]          # the streams its tuples go out on (one per edge)
    drpc_function: str | None = None
    batch_group: str = BATCH_GROUP    # its connected part's batch group (bg<N>)


@dataclass(frozen=True)
class BoltPlan:
    """A fused Trident bolt."""

    component: str
    parallelism: int
    spec: BoltSpec
    body: SubtopologyBody
    subscriptions: tuple[Subscription, ...]

    @property
    def committer(self) -> bool:
        """Whether it holds a state (finishes batches at their commit)."""
        return self.spec.committer

    def operations(self) -> list[str]:
        """The names of its processors' classes, in order (for tests and ``repr``)."""
        return [type(n.processor).__name__ for n in self.body.nodes]


@dataclass(frozen=True)
class ReturnPlan:
    """A DRPC return bolt reading a DRPC stream's results."""

    component: str
    upstream: str
    stream: str


@dataclass(frozen=True)
class Plan:
    """Everything `materialize` declares."""

    spouts: tuple[SpoutPlan, ...]
    bolts: tuple[BoltPlan, ...]
    returns: tuple[ReturnPlan, ...]

    def bolt(self, component: str) -> BoltPlan:
        """The bolt called ``component``."""
        for b in self.bolts:
            if b.component == component:
                return b
        raise KeyError(f"no Trident bolt {component!r}; the bolts are {[b.component for b in self.bolts]}")


# --- planning ------------------------------------------------------------------------------------

class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, x: Any) -> Any:
        self.parent.setdefault(x, x)
        while self.parent[x] is not x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[rb] = ra


def plan(topology: TridentTopology) -> Plan:
    """The `Plan` of ``topology`` (its graph is left as it was)."""
    work = TridentTopology()
    work._graph = topology._graph.copy()
    g = work._graph
    return_nodes = _complete_drpc(work)
    batch_group = _batch_groups(g)
    _refuse_shared_stores(g, batch_group)
    _bridge_spouts(g)
    groups = _groups(g)
    group_of = {n: gi for gi, members in enumerate(groups) for n in members}
    _bridge_groups(g, group_of)
    children: dict[Node, list[Node]] = {n: [] for n in g.nodes}
    for n in g.nodes:
        for p in g.parents[n]:
            if n not in children[p]:  # merge(s, s): one child, reached by two of its edges
                children[p].append(n)

    parallelism = _parallelisms(g, groups, group_of)

    spout_ids = _spout_ids(g)
    bolt_ids = _bolt_ids(groups)

    def emitter_id(node: Node) -> str:
        return spout_ids[node] if isinstance(node, SpoutNode) else bolt_ids[group_of[node]]

    spouts = []
    for s in (n for n in g.nodes if isinstance(n, SpoutNode)):
        outs = tuple(c.stream_id for c in children[s])
        # a DRPC stream's batch is one call, as its return step gives a batch's results to each
        # call in it: one call per emit, in one task (Storm's batch-per-tuple DRPC spout)
        trident_spout = _trident_spout(s.spout, max_batch_size=1) if s.drpc_function else _trident_spout(s.spout)
        spouts.append(SpoutPlan(spout_ids[s], spout_coordinator_id(spout_ids[s]), s.txid, trident_spout,
                                s.fields, parallelism[s], outs, s.drpc_function, batch_group[s]))

    bolts = []
    for gi, members in enumerate(groups):
        procs = sorted((n for n in members if isinstance(n, ProcessorNode)), key=lambda n: n.index)
        position: dict[Node, int] = {n: i for i, n in enumerate(procs)}
        subs: dict[str, Subscription] = {}
        inputs: dict[str, InputSpec] = {}
        body_nodes = []
        for n in procs:
            parents: list[tuple[str, Any]] = []
            for p in g.parents[n]:
                if isinstance(p, PartitionNode):
                    source = g.parents[p][0]
                    component = emitter_id(source)
                    subs[p.stream_id] = Subscription(component, p.stream_id, p.partitioning)
                    inputs[p.stream_id] = InputSpec(component, p.stream_id, p.fields, batch_group[n])
                    parents.append(("stream", p.stream_id))
                else:
                    parents.append(("node", position[p]))
            kids = tuple((position[c], i) for c in children[n] if c in position
                         for i, p in enumerate(g.parents[c]) if p is n)
            outputs = tuple(c.stream_id for c in children[n] if isinstance(c, PartitionNode))
            if n in return_nodes:
                outputs += (n.stream_id,)
            name = n.name or type(n.processor).__name__
            label = operation_text(n.processor.operation, getattr(n.processor, "op", None)
                                   or getattr(n.processor, "aggregator", None), n.name)
            body_nodes.append(BodyNode(name, n.processor, n.fields, tuple(parents), kids, outputs,
                                       getattr(n, "state_id", None), batch_group[n], label))
        state_ids = {sid for n in members if (sid := getattr(n, "state_id", None)) is not None}
        bolt_outputs = tuple((s, bn.fields) for bn in body_nodes for s in bn.outputs)
        committer = any(n.committer for n in procs)
        # the bolt's groups: most often one; a state's bolt also runs the queries of it from
        # other connected parts, each in its own part's batches
        own = batch_group[procs[0]]
        output_groups = tuple((s, batch_group[n]) for n, bn in zip(procs, body_nodes) for s in bn.outputs
                              if batch_group[n] != own)
        spec = BoltSpec(tuple(inputs.values()), bolt_outputs, committer, own, output_groups,
                        tuple(sorted({batch_group[n] for n in procs if n.committer})))
        body = SubtopologyBody(body_nodes, {s: i.fields for s, i in inputs.items()},
                               {sid: g.states[sid].factory for sid in sorted(state_ids)})
        bolts.append(BoltPlan(bolt_ids[gi], parallelism[members[0]], spec, body, tuple(subs.values())))

    returns = []
    for n in sorted(return_nodes, key=lambda n: n.index):
        function = return_nodes[n]
        returns.append(ReturnPlan(f"drpc-return-{function}", emitter_id(n), n.stream_id))
    return Plan(tuple(spouts), tuple(bolts), tuple(returns))


def _complete_drpc(work: TridentTopology) -> dict[Node, str]:
    """Storm's ``completeDrpc``: for each DRPC spout, the calls' return-info and the last node of
    its connected part of the graph meet, batch-global, in a node emitting ``[result,
    return-info]`` per call. Returns those nodes with their DRPC function."""
    g = work._graph
    out: dict[Node, str] = {}
    for component in _connected(g):
        drpc = [n for n in component if isinstance(n, SpoutNode) and n.drpc_function]
        if not drpc:
            continue
        if len(drpc) > 1 or any(isinstance(n, SpoutNode) and not n.drpc_function for n in component):
            raise ValueError("a DRPC stream cannot be merged or joined with another spout's stream "
                             f"(DRPC functions {[n.drpc_function for n in drpc]})")
        last = max(component, key=lambda n: n.index)
        spout = drpc[0]
        infos = Stream(work, spout, None).project(Fields("return-info")).batch_global()
        results = Stream(work, last, None).batch_global()
        end = work._multi_reduce([infos, results], ReturnResultsReducer(), DRPC_RESULT_FIELDS,
                                 [Fields("return-info"), results.get_output_fields()])
        assert spout.drpc_function is not None  # a DRPC stream's spout names its function
        out[end._node] = spout.drpc_function
    return out


def _connected(g: _Graph) -> list[list[Node]]:
    uf = _UnionFind()
    for n in g.nodes:
        uf.find(n)
        for p in g.parents[n]:
            uf.union(p, n)
    parts: dict[Any, list[Node]] = {}
    for n in g.nodes:
        parts.setdefault(uf.find(n), []).append(n)
    return list(parts.values())


def _batch_groups(g: _Graph) -> dict[Node, str]:
    """Each node's batch group (Storm's ``TridentTopology.build``): every connected part of the
    graph has its own, ``bg<i>``, numbered in the order the parts' first nodes were made, so a
    topology of one part keeps ``bg0``. A ``state_query`` joins no part to another: it is
    colocated with its state, not connected to it. A part without a spout (a static state
    nobody queries) comes last; it runs no batch."""
    parts = sorted(_connected(g), key=lambda part: (not any(isinstance(n, SpoutNode) for n in part),
                                                     min(n.index for n in part)))
    return {n: f"bg{i}" for i, part in enumerate(parts) for n in part}


def _refuse_shared_stores(g: _Graph, batch_group: dict[Node, str]) -> None:
    """Refuses two states of one batch group that write one place (`StateFactory.store_location`:
    a Redis database's keys, a hash, a table; a `MemoryMapState` factory given twice). Their
    batches have the same txids, so a transactional state takes the other's write of a txid for
    its own replay and skips its batch, and an opaque one builds on the other's value or refuses
    it as a stale copy's: two ``persistent_aggregate``s (a Count and a Sum) of one ``group_by``
    into ``RedisMapState``s with the default ``Options`` stored neither figure, with no error from
    the transactional one. States of two batch groups (their own txids) are not compared.

    Raises:
        ValueError: naming both operations, the place and how to give each its own.
    """
    seen: dict[tuple[str, str], tuple[str, str]] = {}
    for n in g.nodes:
        if not isinstance(n, ProcessorNode) or not n.committer or n.state_id is None:
            continue
        state_id = n.state_id
        location = getattr(g.states[state_id].factory, "store_location", None)
        place = location() if callable(location) else None
        if place is None:
            continue
        first = seen.setdefault((batch_group[n], place), (state_id, _writer_text(n)))
        if first[0] != state_id:
            raise ValueError(
                f"{first[1]} and {_writer_text(n)} both write {place}, in the same batches: where their keys "
                f"meet, each would take the other's values for its own (a transactional state skips a txid the other wrote, an opaque "
                f"one builds on the other's value), and neither would hold its figures. Give each state a "
                f"place of its own (RedisMapState: Options(data_type='hash', hash_key=...) per state; "
                f"DeltaMapState: a table each; MemoryMapState: a factory() each)")


def _writer_text(n: ProcessorNode) -> str:
    """A state's writer as `_refuse_shared_stores` names it: its operation and, for a grouped
    ``persistent_aggregate``, the fields it groups by, without which two Counts of one stream
    (by word, by user) read alike: "persistent_aggregate(Count) and persistent_aggregate(Count)"."""
    op = getattr(n.processor, "op", None)
    text = operation_text(n.processor.operation, getattr(n.processor, "aggregator", None) or op, n.name)
    group = getattr(op, "group_fields", None)
    return f"group_by({', '.join(group)}).{text}" if group is not None and len(group) else text


def _bridge_spouts(g: _Graph) -> None:
    """An edge from a spout straight to an operation gets an identity repartition: the spout's
    bolt holds only its emitter (Storm's shape), its tuples go out on a stream."""
    for n in list(g.nodes):
        if isinstance(n, PartitionNode):
            continue
        for i, p in enumerate(g.parents[n]):
            if isinstance(p, SpoutNode):
                _insert_identity(g, n, i)


def _groups(g: _Graph) -> list[list[Node]]:
    """Processor and state nodes fused into bolts (Storm's ``GraphGrouper.mergeFully``).

    The nodes of one state start in one group, every other node in its own. A group whose
    children are all in one other group merges with it, and so does a group whose parents are
    all in one other group; a repartition counts as a group of its own that never merges. So
    a group never reaches itself through a repartition: fusing every plain edge instead put
    ``merge(a, a.shuffle().each(f))`` in one bolt reading its own stream, a batch it could not
    finish. A plain edge left between two groups gets an identity partition (`_bridge_groups`).
    """
    members = [n for n in g.nodes if isinstance(n, (ProcessorNode, StateNode))]
    children: dict[Node, list[Node]] = {n: [] for n in g.nodes}
    for n in g.nodes:
        for p in g.parents[n]:
            children[p].append(n)
    groups: list[list[Node]] = []
    placed: set[Node] = set()
    for nodes in g.colocate.values():
        groups.append(list(nodes))
        placed.update(nodes)
    groups += [[n] for n in members if n not in placed]
    group_of: dict[Node, int] = {}
    ids = itertools.count()
    by_id: dict[int, list[Node]] = {}
    for nodes in groups:
        gid = next(ids)
        by_id[gid] = nodes
        group_of.update((n, gid) for n in nodes)

    def neighbours(gid: int, edges: dict[Node, list[Node]]) -> set[int | None]:
        # None stands for a spout or a repartition: never merged with
        return {group_of.get(m) for n in by_id[gid] for m in edges[n]} - {gid}

    merged = True
    while merged:
        merged = False
        for gid in list(by_id):
            for edges in (children, g.parents):
                others = neighbours(gid, edges)
                if len(others) == 1 and None not in others:
                    other = others.pop()
                    nodes = by_id.pop(gid) + by_id.pop(other)  # type: ignore[arg-type]
                    new = next(ids)
                    by_id[new] = nodes
                    group_of.update((n, new) for n in nodes)
                    merged = True
                    break
            if merged:
                break
    # a static state nobody queries has no operation to run: no bolt
    out = [sorted(nodes, key=lambda n: n.index) for nodes in by_id.values()
           if any(isinstance(n, ProcessorNode) for n in nodes)]
    return sorted(out, key=lambda p: p[0].index)


def _bridge_groups(g: _Graph, group_of: dict[Node, int]) -> None:
    """A plain edge between two groups gets an identity partition (Storm's "add identity
    partitions between groups"): it leaves one bolt on a stream of its own, task i to task i."""
    for n in list(g.nodes):
        if n not in group_of:
            continue
        for i, p in enumerate(g.parents[n]):
            if p in group_of and group_of[p] != group_of[n]:
                _insert_identity(g, n, i)


def _insert_identity(g: _Graph, node: Node, edge: int) -> None:
    """Put an identity partition on edge number ``edge`` into ``node``."""
    parent = g.parents[node][edge]
    bridge = PartitionNode(g.next_index(), g.next_stream_id(), parent.name, parent.fields,
                           partitioning=Partitioning("identity"))
    g.add(bridge, [parent])
    g.parents[node][edge] = bridge


def _parallelisms(g: _Graph, groups: list[list[Node]], group_of: dict[Node, int]) -> dict[Node, int]:
    """Each group's and spout's task count: the largest hint; identity partitions tie groups."""
    uf = _UnionFind()
    units: dict[Node, Any] = {}
    for n in g.nodes:
        if isinstance(n, SpoutNode):
            units[n] = ("spout", n)
        elif n in group_of:
            units[n] = ("group", group_of[n])
    for n in g.nodes:
        if isinstance(n, PartitionNode) and n.partitioning.kind == "identity":
            source = g.parents[n][0]
            for c in (c for c in g.nodes if n in g.parents[c]):
                if source in units and c in units:
                    uf.union(units[source], units[c])
    best: dict[Any, int] = {}
    cap: dict[Any, int] = {}
    for n, unit in units.items():
        root = uf.find(unit)
        best[root] = max(best.get(root, 1), n.parallelism or 1)
        if isinstance(n, SpoutNode):
            # a spout that runs in at most k tasks (FixedBatchSpout: 1) caps the bolts tied to
            # it by identity partitions, whose task i reads its task i (Storm's getMaxParallelism)
            conf = n.spout.get_component_configuration() if hasattr(n.spout, "get_component_configuration") else None
            limit = 1 if n.drpc_function else (conf or {}).get(Config.TOPOLOGY_MAX_TASK_PARALLELISM)
            if limit:
                cap[root] = min(cap.get(root, limit), int(limit))
    return {n: min(best[uf.find(unit)], cap.get(uf.find(unit), best[uf.find(unit)])) for n, unit in units.items()}


def _spout_ids(g: _Graph) -> dict[Node, str]:
    ids: dict[Node, str] = {}
    taken: set[str] = set()
    for n in g.nodes:
        if isinstance(n, SpoutNode):
            base = f"spout-drpc-{n.drpc_function}" if n.drpc_function else f"spout-{n.txid}"
            name, k = base, 1
            while name in taken:
                name, k = f"{base}-{k}", k + 1
            taken.add(name)
            ids[n] = name
    return ids


def _bolt_ids(groups: list[list[Node]]) -> list[str]:
    """``b-<N>``, then the names given with ``name()``, in creation order, without repeats."""
    ids = []
    for i, members in enumerate(groups):
        names: list[str] = []
        for n in members:
            if n.name and (not names or names[-1] != n.name) and n.name not in names:
                names.append(n.name)
        ids.append("-".join(["b", str(i), *names]))
    return ids


def _trident_spout(spout: Any, max_batch_size: int | None = None) -> Any:
    """Any spout ``new_stream`` takes, as an `ITridentSpout` (Storm's executors and adapters);
    ``max_batch_size`` pins a plain spout's batch size."""
    from .spout import ITridentSpout

    if isinstance(spout, ITridentSpout):
        return spout
    from . import spout as spouts
    from .spout import IBatchSpout
    if isinstance(spout, IBatchSpout):
        return spouts.BatchSpoutAdapter(spout)
    from .partitioned import (
        IOpaquePartitionedTridentSpout,
        IPartitionedTridentSpout,
        OpaquePartitionedTridentSpoutExecutor,
        PartitionedTridentSpoutExecutor,
    )
    if isinstance(spout, IPartitionedTridentSpout):
        return PartitionedTridentSpoutExecutor(spout)
    if isinstance(spout, IOpaquePartitionedTridentSpout):
        return OpaquePartitionedTridentSpoutExecutor(spout)
    from .._components import Spout
    if isinstance(spout, Spout):
        return spouts.RichSpoutAdapter(spout, max_batch_size)
    raise ValueError(f"new_stream: {type(spout).__name__} is not an IBatchSpout, ITridentSpout, "
                     "partitioned Trident spout or Spout")


# --- materializing -------------------------------------------------------------------------------

def materialize(p: Plan) -> StormTopology:
    """Declare ``p`` on a `TopologyBuilder` and create the topology."""
    from .coordinator import MasterBatchCoordinator, SpoutEmitterBody, TridentSpoutCoordinator
    from .executor import TridentBoltExecutor, wire

    builder = TopologyBuilder()
    # one master coordinator per batch group, numbering its spouts' batches (Storm's
    # TridentTopologyBuilder.buildTopology)
    groups: dict[str, list[SpoutPlan]] = {}
    for s in p.spouts:
        groups.setdefault(s.batch_group, []).append(s)
    for group, members in sorted(groups.items(), key=lambda item: int(item[0][2:])):  # bg<i>
        builder.set_spout(master_coordinator_id(group),
                          MasterBatchCoordinator([s.txid for s in members], [s.spout for s in members]), 1)
    for s in p.spouts:
        master = master_coordinator_id(s.batch_group)
        builder.set_bolt(s.coordinator, TridentSpoutCoordinator(s.txid, s.spout), 1) \
            .global_grouping(master, BATCH_STREAM).global_grouping(master, SUCCESS_STREAM)
        spec = BoltSpec((InputSpec(s.coordinator, BATCH_STREAM, Fields("metadata", "cause")),),
                        tuple((stream, s.fields) for stream in s.outputs), False, s.batch_group)
        body = _FanOut(SpoutEmitterBody(s.spout, _SPOUT_STREAM, s.txid), s.outputs)
        declarer = builder.set_bolt(s.component, TridentBoltExecutor(spec, body), s.parallelism)
        conf = dict(s.spout.get_component_configuration() or {})
        if conf:
            declarer.add_configurations(conf)
        wire(declarer, spec, ())
    for b in p.bolts:
        declarer = builder.set_bolt(b.component, TridentBoltExecutor(b.spec, b.body), b.parallelism)
        for sub in b.subscriptions:
            _subscribe(declarer, sub)
        wire(declarer, b.spec, {sub.component for sub in b.subscriptions})
    for r in p.returns:
        builder.set_bolt(r.component, TridentReturnResults(), 1).local_or_shuffle_grouping(r.upstream, r.stream)
    return builder.create_topology()


def build_topology(topology: TridentTopology) -> StormTopology:
    """`plan` then `materialize`: what `TridentTopology.build` returns."""
    return materialize(plan(topology))


def _subscribe(declarer: Any, sub: Subscription) -> None:
    kind = sub.partitioning.kind
    if kind == "shuffle":
        declarer.shuffle_grouping(sub.component, sub.stream)
    elif kind == "local_or_shuffle":
        declarer.local_or_shuffle_grouping(sub.component, sub.stream)
    elif kind == "all":
        declarer.all_grouping(sub.component, sub.stream)
    elif kind == "fields":
        declarer.fields_grouping(sub.component, sub.partitioning.fields, sub.stream)
    elif kind == "global":
        declarer.global_grouping(sub.component, sub.stream)
    elif kind == "batch_global":
        declarer.custom_grouping(sub.component, BatchGlobalGrouping(), sub.stream)
    elif kind == "identity":
        declarer.custom_grouping(sub.component, IdentityGrouping(), sub.stream)
    elif kind == "custom":
        assert sub.partitioning.custom is not None  # a custom partitioning is made with its grouping
        declarer.custom_grouping(sub.component, _Shifted(sub.partitioning.custom), sub.stream)
    else:
        raise ValueError(f"unknown partitioning {kind!r} of stream {sub.stream}")


class _Shifted(CustomStreamGrouping):
    """A user's grouping sees the operation-visible values, without the leading batch id."""

    def __init__(self, grouping: CustomStreamGrouping) -> None:
        self.grouping = grouping

    def prepare(self, context: TopologyContext, stream: GlobalStreamId, target_tasks: list[int]) -> None:
        """Prepare the user's grouping."""
        self.grouping.prepare(context, stream, target_tasks)

    def choose_tasks(self, task_id: int, values: list) -> list[int]:
        """The user's choice for the values after the batch id."""
        return self.grouping.choose_tasks(task_id, values[1:])


_SPOUT_STREAM = "$spout"


class _FanOut(BatchBody):
    """Wraps a spout's emitter body so that what it emits on its one stream goes out on each of
    the spout's edges (each edge its own stream, so each can be grouped its own way)."""

    def __init__(self, body: BatchBody, outputs: tuple[str, ...]) -> None:
        self.body = body
        self.outputs = outputs

    def prepare(self, conf: dict, context: Any, output: BatchOutput) -> None:
        """Prepare the wrapped body with an output that fans out."""
        self.body.prepare(conf, context, _FanOutOutput(output, self.outputs))

    def init_batch(self, batch: BatchInfo) -> None:
        """The wrapped body's."""
        self.body.init_batch(batch)

    def execute(self, batch: BatchInfo, stream: str, values: list) -> None:
        """The wrapped body's."""
        self.body.execute(batch, stream, values)

    def finish_batch(self, batch: BatchInfo) -> None:
        """The wrapped body's."""
        self.body.finish_batch(batch)

    def success(self, attempt: Any) -> None:
        """The wrapped body's."""
        self.body.success(attempt)

    def cleanup(self) -> None:
        """The wrapped body's."""
        self.body.cleanup()

    def component_statistics(self) -> dict[tuple[str, str, str], float]:
        """The wrapped body's figures (a spout's dead letters: `SpoutEmitterBody`)."""
        report = getattr(self.body, "component_statistics", None)
        return report() if report is not None else {}


class _FanOutOutput(BatchOutput):
    def __init__(self, output: BatchOutput, outputs: tuple[str, ...]) -> None:
        self.output = output
        self.outputs = outputs

    def emit(self, batch: BatchInfo, stream: str, values: list) -> None:
        for s in self.outputs:
            self.output.emit(batch, s, values)

    def emit_many(self, batch: BatchInfo, stream: str, rows: list[list]) -> None:
        last = len(self.outputs) - 1
        for i, s in enumerate(self.outputs):  # each edge's receivers get lists of their own
            self.output.emit_many(batch, s, rows if i == last else [list(values) for values in rows])

    def report_error(self, error: BaseException) -> None:
        self.output.report_error(error)


class TridentReturnResults(ReturnResults):
    """Storm's ``ReturnResults`` reading a Trident stream: the batch id comes first, then
    ``[result, return-info]``."""

    def execute(self, tup: Any) -> None:
        """Answer the call; the tuple's values lose their batch id (nothing else reads them)."""
        tup.values = tup.values[1:]
        super().execute(tup)


__all__ = ["BatchGlobalGrouping", "BoltPlan", "IdentityGrouping", "Plan", "ReturnPlan", "SpoutPlan",
           "Subscription", "TridentReturnResults", "build_topology", "materialize", "plan"]
