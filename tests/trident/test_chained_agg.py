"""``chained_agg()`` (Storm's ``ChainedAggregatorDeclarer``): several aggregators over the same
batch, their results side by side in one tuple, per partition or per batch, grouped or not;
combiners only aggregate each partition first, a mixed chain moves every tuple; aggregators
emitting several tuples give every combination, one emitting nothing gives none. Each batch's
output is checked exactly against what the spouts emitted in it, with batches failing upstream,
and a grouped chain's results persisted under failures equal the input's figures exactly."""

from __future__ import annotations

import collections
import json
import threading

import pytest

from squall import Config, Fields
from squall.trident import (
    BaseAggregator,
    BaseFunction,
    Count,
    DRPCExecutionException,
    FailedException,
    LocalDRPC,
    MapGet,
    MemoryMapState,
    ReducerAggregator,
    Sum,
    TridentTopology,
)
from squall.trident.spout import FixedBatchSpout

from ..conftest import wait_until
from .test_trident_local import cluster  # noqa: F401 (the module's LocalCluster)
from .trident_ops import Record, Recorded, Split

ROWS = [[f"k{(i * 5) % 4}", i, f"w{i % 3}" * (1 + i % 4)] for i in range(17)]
BATCH = 4
TXIDS = range(1, -(-len(ROWS) // BATCH) + 3)  # every batch with rows, then two empty ones


class _Failed:
    lock = threading.Lock()
    done: set = set()  # noqa: RUF012 (shared by every copy, on purpose)


class FailFirstAttempt(BaseAggregator):
    """Passes every tuple on; the first attempt of each txid of ``txids`` fails (once, over
    every copy in this process)."""

    def __init__(self, key: str, txids: set[int]) -> None:
        self.key, self.txids = key, frozenset(txids)

    def init(self, batch_id, collector):
        with _Failed.lock:
            if batch_id.txid in self.txids and (self.key, batch_id.txid) not in _Failed.done:
                _Failed.done.add((self.key, batch_id.txid))
                raise FailedException(f"induced failure of txid {batch_id.txid}")

    def aggregate(self, state, tuple, collector):
        collector.emit(list(tuple.values))

    def complete(self, state, collector):
        pass


class Longest(ReducerAggregator):
    """The length of the longest first field."""

    def init(self):
        return 0

    def reduce(self, curr, tuple):
        return max(curr, len(tuple[0]))


class Ends(BaseAggregator):
    """Emits the least and the greatest first field (two tuples), nothing for no tuple."""

    def init(self, batch_id, collector):
        return []

    def aggregate(self, state, tuple, collector):
        state.append(tuple[0])

    def complete(self, state, collector):
        if state:
            collector.emit([min(state)])
            collector.emit([max(state)])


class Len(BaseFunction):
    def execute(self, tuple, collector):
        collector.emit([len(tuple[0])])


def spout() -> FixedBatchSpout:
    return FixedBatchSpout(Fields("k", "a", "w"), BATCH, *ROWS)


def flaky(topo: TridentTopology, name: str, fail: set[int]):
    s = topo.new_stream(name, spout())
    f = s.get_output_fields()
    return s.partition_aggregate(f, FailFirstAttempt(name, fail), f)


def record(stream, key: str):
    f = stream.get_output_fields()
    return stream.partition_aggregate(f, Record(key), f)


def wait_exact(key: str, expected: dict[int, list[list]]) -> None:
    """Until the records of every txid of ``expected`` are exactly those (any order)."""
    def per_txid() -> dict[int, list]:
        got: dict[int, list] = collections.defaultdict(list)
        for txid, values in Recorded.get(key):
            got[txid].append(values)
        return got

    def wrong() -> dict:
        got = per_txid()
        return {t: (sorted(got.get(t, []), key=repr), sorted(e, key=repr)) for t, e in expected.items()
                if sorted(got.get(t, []), key=repr) != sorted(e, key=repr)}

    assert wait_until(lambda: not wrong(), 60), wrong()


def batch(txid: int) -> list[list]:
    return spout().batch(txid)


def test_a_chain_of_aggregates_gives_one_tuple_per_batch_of_every_result_side_by_side(cluster) -> None:  # noqa: F811
    topo = TridentTopology()
    s = flaky(topo, "chain-full", {2, 4})
    combiners = s.chained_agg().aggregate(Count(), Fields("n")).aggregate(Fields("a"), Sum(), Fields("s")).chain_end()
    assert combiners.get_output_fields().to_list() == ["n", "s"]
    record(combiners, "chain-combiners")
    mixed = s.shuffle().parallelism_hint(3).chained_agg() \
        .aggregate(Fields("w"), Longest(), Fields("longest")) \
        .aggregate(Count(), Fields("n")) \
        .aggregate(Fields("w"), Ends(), Fields("end")) \
        .chain_end()
    assert mixed.get_output_fields().to_list() == ["longest", "n", "end"]
    record(mixed, "chain-mixed")
    cluster.submit_topology("chain-full", Config({"topology.max.spout.pending": 3}), topo.build())
    wait_exact("chain-combiners", {t: [[len(batch(t)), sum(a for _, a, _ in batch(t))]] for t in TXIDS})
    # Ends emits two tuples (every combination), and nothing for an empty batch (no tuple)
    wait_exact("chain-mixed", {t: [[max(len(w) for *_, w in batch(t)), len(batch(t)), end]
                                   for end in (min(w for *_, w in batch(t)), max(w for *_, w in batch(t)))]
                               if batch(t) else [] for t in TXIDS})
    cluster.kill_topology("chain-full")


def test_a_chain_of_partition_aggregates_gives_one_tuple_per_partition(cluster) -> None:  # noqa: F811
    topo = TridentTopology()
    s = flaky(topo, "chain-part", {3})
    # Storm's Trident-API-Overview example
    per_partition = s.shuffle().chained_agg() \
        .partition_aggregate(Count(), Fields("count")) \
        .partition_aggregate(Fields("a"), Sum(), Fields("sum")) \
        .chain_end().parallelism_hint(2)
    assert per_partition.get_output_fields().to_list() == ["count", "sum"]
    record(per_partition.global_().chained_agg().aggregate(Fields("count"), Sum(), Fields("count"))
           .aggregate(Fields("sum"), Sum(), Fields("sum")).aggregate(Count(), Fields("partitions")).chain_end(),
           "chain-part")
    cluster.submit_topology("chain-part", Config(), topo.build())
    wait_exact("chain-part", {t: [[len(batch(t)), sum(a for _, a, _ in batch(t)), 2]] for t in TXIDS})
    cluster.kill_topology("chain-part")


def test_a_grouped_chain_gives_the_group_then_each_result_and_persists_exactly_once(cluster) -> None:  # noqa: F811
    with LocalDRPC() as drpc:
        topo = TridentTopology()
        s = flaky(topo, "chain-grouped", {1, 3, 4})
        grouped = s.group_by(Fields("k")).chained_agg() \
            .aggregate(Count(), Fields("n")) \
            .aggregate(Fields("a"), Sum(), Fields("s")) \
            .chain_end().parallelism_hint(2)
        assert grouped.get_output_fields().to_list() == ["k", "n", "s"]
        record(grouped, "chain-grouped")
        partitioned = s.group_by(Fields("k")).chained_agg() \
            .partition_aggregate(Fields("w"), Longest(), Fields("longest")) \
            .partition_aggregate(Count(), Fields("n")) \
            .chain_end()
        assert partitioned.get_output_fields().to_list() == ["k", "longest", "n"]
        record(partitioned, "chain-grouped-partition")
        totals = grouped.group_by(Fields("k")).persistent_aggregate(
            MemoryMapState.factory(), Fields("s"), Sum(), Fields("total")).parallelism_hint(2)
        topo.new_drpc_stream("chain-totals", drpc).each(Fields("args"), Split(), Fields("k")) \
            .group_by(Fields("k")).state_query(totals, Fields("k"), MapGet(), Fields("total")) \
            .project(Fields("k", "total"))
        topo.new_drpc_stream("chain-stats", drpc).each(Fields("args"), Split(), Fields("word")) \
            .each(Fields("word"), Len(), Fields("len")) \
            .chained_agg().aggregate(Count(), Fields("n")).aggregate(Fields("len"), Sum(), Fields("total")) \
            .aggregate(Fields("word"), Longest(), Fields("longest")).chain_end()
        cluster.submit_topology("chain-grouped", Config({"topology.max.spout.pending": 2}), topo.build())

        def grouped_of(t: int) -> list[list]:
            n, a = collections.Counter(), collections.Counter()
            for k, v, _ in batch(t):
                n[k] += 1
                a[k] += v
            return [[k, n[k], a[k]] for k in n]

        def partition_of(t: int) -> list[list]:
            longest, n = collections.Counter(), collections.Counter()
            for k, _, w in batch(t):
                longest[k] = max(longest[k], len(w))
                n[k] += 1
            return [[k, longest[k], n[k]] for k in n]

        wait_exact("chain-grouped", {t: grouped_of(t) for t in TXIDS})
        wait_exact("chain-grouped-partition", {t: partition_of(t) for t in TXIDS})
        expected = collections.Counter()
        for k, a, _ in ROWS:
            expected[k] += a
        keys = sorted(expected)

        def stored() -> dict:
            try:
                return dict(json.loads(drpc.execute("chain-totals", " ".join(keys))))
            except DRPCExecutionException:  # a call in a batch that failed (one batch group)
                return {}

        assert wait_until(lambda: stored() == dict(expected), 60), (stored(), dict(expected))
        assert json.loads(drpc.execute("chain-stats", "the cow jumped")) == [[3, 12, 6]]
        assert json.loads(drpc.execute("chain-stats", "")) == [[0, 0, 0]]  # zero(), init()
        cluster.kill_topology("chain-grouped")


def test_a_chain_is_checked_when_it_is_declared() -> None:
    topo = TridentTopology()
    s = topo.new_stream("chain-checks", spout())
    with pytest.raises(ValueError, match=r"^chained_agg.aggregate: field 'x' is not in the stream's fields"):
        s.chained_agg().aggregate(Fields("x"), Sum(), Fields("s"))
    with pytest.raises(ValueError, match=r"^chained_agg.partition_aggregate: a chain is all partition_aggregate "
                                         r"or all aggregate, and this one is aggregate"):
        s.chained_agg().aggregate(Count(), Fields("n")).partition_aggregate(Count(), Fields("m"))
    with pytest.raises(ValueError, match=r"^chained_agg.aggregate: output field 'n' is already an output"):
        s.chained_agg().aggregate(Count(), Fields("n")).aggregate(Fields("a"), Sum(), Fields("n"))
    with pytest.raises(ValueError, match=r"^chained_agg.aggregate: output field 'k' is already an output"):
        s.group_by(Fields("k")).chained_agg().aggregate(Count(), Fields("k"))
    with pytest.raises(ValueError, match=r"^chained_agg.aggregate: a CombinerAggregator gives one field"):
        s.chained_agg().aggregate(Count(), Fields("n", "m"))
    with pytest.raises(ValueError, match=r"^chained_agg.chain_end: no aggregator was chained"):
        s.chained_agg().chain_end()
    chain = s.chained_agg().aggregate(Count(), Fields("n"))
    chain.chain_end()
    with pytest.raises(ValueError, match=r"^chained_agg.chain_end: the chain was already ended"):
        chain.chain_end()
    # an output named as an input field is fine (Storm's aggregate(Fields("a"), Sum(), Fields("a")))
    assert s.chained_agg().aggregate(Fields("a"), Sum(), Fields("a")).aggregate(Count(), Fields("k")) \
        .chain_end().get_output_fields().to_list() == ["a", "k"]
