"""Storm's list forms of ``join`` and ``merge``: ``join([s1, s2, s3], [f1, f2, f3], out_fields,
join_type)`` joins three streams within each batch (inner, and outer per stream), its output
the join fields then each stream's other fields in stream order; ``merge(Fields, s1, s2)``
names the merged stream. Each batch's output is checked exactly against a plain-Python join of
what the spouts emitted in it, with batches failing, and a three-way join's counts persisted
under failures equal the input's exactly (DRPC answers)."""

from __future__ import annotations

import collections
import itertools
import json
import threading

import pytest

from squall import Config, Fields
from squall.trident import (
    BaseAggregator,
    Count,
    DRPCExecutionException,
    FailedException,
    JoinType,
    LocalDRPC,
    MapGet,
    MemoryMapState,
    TridentTopology,
)
from squall.trident.spout import FixedBatchSpout

from ..conftest import wait_until
from .test_trident_local import cluster  # noqa: F401 (the module's LocalCluster)
from .trident_ops import ListSpout, Record, Recorded, Split

PEOPLE = [[f"p{i % 5}", f"name{i}"] for i in range(13)]          # id, name
ORDERS = [[f"item{i}", f"p{(i * 3) % 6}"] for i in range(11)]    # item, who
CITIES = [[f"p{(i * 2) % 7}", f"city{i}", i] for i in range(9)]  # pid, city, rank
SIZES = (3, 2, 2)
TXIDS = range(1, 8)


def spouts() -> tuple[FixedBatchSpout, FixedBatchSpout, FixedBatchSpout]:
    return (FixedBatchSpout(Fields("id", "name"), SIZES[0], *PEOPLE),
            FixedBatchSpout(Fields("item", "who"), SIZES[1], *ORDERS),
            FixedBatchSpout(Fields("pid", "city", "rank"), SIZES[2], *CITIES))


def joined(txid: int, outer: tuple[bool, bool, bool]) -> list[list]:
    """The join of the three spouts' batch ``txid`` on the person, computed here: ``[id, name,
    item, city, rank]`` for every combination, None for an outer side without the key."""
    people, orders, cities = (s.batch(txid) for s in spouts())
    sides: dict[str, list[list[list]]] = collections.defaultdict(lambda: [[], [], []])
    for pid, name in people:
        sides[pid][0].append([name])
    for item, who in orders:
        sides[who][1].append([item])
    for pid, city, rank in cities:
        sides[pid][2].append([city, rank])
    out = []
    for key, rows in sides.items():
        rows = [r or ([[None] * w] if o else []) for r, w, o in zip(rows, (1, 1, 2), outer)]
        out.extend([key, *itertools.chain.from_iterable(c)] for c in itertools.product(*rows))
    return out


class _Failed:
    lock = threading.Lock()
    done: set = set()  # noqa: RUF012 (shared by every copy, on purpose)


class FailFirstAttempt(BaseAggregator):
    """Passes every tuple on; the first attempt of each txid of ``txids`` fails."""

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


def through(stream, agg):
    f = stream.get_output_fields()
    return stream.partition_aggregate(f, agg, f)


def wait_exact(key: str, expected: dict[int, list[list]]) -> None:
    def wrong() -> dict:
        got: dict[int, list] = collections.defaultdict(list)
        for txid, values in Recorded.get(key):
            got[txid].append(values)
        return {t: (sorted(got.get(t, []), key=repr), sorted(e, key=repr)) for t, e in expected.items()
                if sorted(got.get(t, []), key=repr) != sorted(e, key=repr)}

    assert wait_until(lambda: not wrong(), 60), wrong()


@pytest.mark.parametrize("kind", ["inner", "outer"])
def test_three_streams_join_within_each_batch_and_persist_exactly_once(cluster, kind) -> None:  # noqa: F811
    outer = (False, False, False) if kind == "inner" else (False, True, True)
    types = JoinType.INNER if kind == "inner" else [JoinType.INNER, JoinType.OUTER, JoinType.OUTER]
    with LocalDRPC() as drpc:
        topo = TridentTopology()
        people, orders, cities = (topo.new_stream(f"join3-{kind}-{i}", s) for i, s in enumerate(spouts()))
        # failing before the join's bolt: none of its tasks finishes the failed attempt
        people = through(people, FailFirstAttempt(f"join3-{kind}", {2, 3}))
        three = topo.join([people, orders, cities], [Fields("id"), Fields("who"), Fields("pid")],
                          Fields("person", "name", "item", "city", "rank"), types).parallelism_hint(3)
        assert three.get_output_fields().to_list() == ["person", "name", "item", "city", "rank"]
        record = through(three, Record(f"join3-{kind}"))
        counts = record.group_by(Fields("person")).persistent_aggregate(
            MemoryMapState.factory(), Count(), Fields("n")).parallelism_hint(2)
        topo.new_drpc_stream(f"join3-{kind}", drpc).each(Fields("args"), Split(), Fields("person")) \
            .group_by(Fields("person")).state_query(counts, Fields("person"), MapGet(), Fields("n")) \
            .project(Fields("person", "n"))
        cluster.submit_topology(f"join3-{kind}", Config({"topology.max.spout.pending": 3}), topo.build())
        wait_exact(f"join3-{kind}", {t: joined(t, outer) for t in TXIDS})
        expected = collections.Counter(row[0] for t in TXIDS for row in joined(t, outer))
        keys = sorted(expected)

        def stored() -> dict:
            try:
                return dict(json.loads(drpc.execute(f"join3-{kind}", " ".join(keys))))
            except DRPCExecutionException:  # a call in a batch that failed (one batch group)
                return {}

        assert wait_until(lambda: stored() == dict(expected), 60), (stored(), dict(expected))
        cluster.kill_topology(f"join3-{kind}")


def test_merge_takes_its_output_fields_first_as_storm_does(cluster) -> None:  # noqa: F811
    topo = TridentTopology()
    people, orders, _ = spouts()
    a = topo.new_stream("merge-fields-a", people).project(Fields("id"))
    b = topo.new_stream("merge-fields-b", orders).project(Fields("who"))
    merged = topo.merge(Fields("person"), a, b)
    assert merged.get_output_fields().to_list() == ["person"]
    assert topo.merge(Fields("x"), [a, b]).get_output_fields().to_list() == ["x"]
    assert topo.merge(["y"], a, b).get_output_fields().to_list() == ["y"]
    through(merged, Record("merge-fields"))
    cluster.submit_topology("merge-fields", Config(), topo.build())
    wait_exact("merge-fields", {t: [[p] for p, _ in people.batch(t)] + [[w] for _, w in orders.batch(t)]
                                for t in TXIDS})
    cluster.kill_topology("merge-fields")


def test_the_list_forms_are_checked_when_called() -> None:
    topo = TridentTopology()
    a, b, c = (topo.new_stream(f"forms-{n}", ListSpout(n, "v")) for n in "abc")
    with pytest.raises(ValueError, match=r"^join: give one join Fields per stream \(3 streams\)"):
        topo.join([a, b, c], [Fields("a"), Fields("b")], Fields("k", "x", "y", "z"))
    with pytest.raises(ValueError, match=r"^join: field 'b' is not in the stream's fields \['c', 'v'\]"):
        topo.join([a, b, c], [Fields("a"), Fields("b"), Fields("b")], Fields("k", "x", "y", "z"))
    with pytest.raises(ValueError, match=r"^join: out_fields \['k'\] must name 4 fields: the join fields \['a'\], "
                                         r"then \['v'\], then \['v'\], then \['v'\]"):
        topo.join([a, b, c], [Fields("a"), Fields("b"), Fields("c")], Fields("k"))
    with pytest.raises(ValueError, match=r"one JoinType per stream \(3\)"):
        topo.join([a, b, c], [Fields("a"), Fields("b"), Fields("c")], Fields("k", "x", "y", "z"),
                  [JoinType.INNER, JoinType.OUTER])
    with pytest.raises(ValueError, match=r"^join: needs at least two streams, got 1"):
        topo.join([a], [Fields("a")], Fields("a", "v"))
    with pytest.raises(ValueError, match=r"^merge: the output fields are given twice"):
        topo.merge(Fields("x"), a, out_fields=Fields("y"))
    with pytest.raises(ValueError, match=r"^merge: 'x' is not a Stream"):
        topo.merge(a, "x")
    # the two-stream form is unchanged
    assert topo.join(a, Fields("a"), b, Fields("b"), Fields("k", "x", "y")).get_output_fields().to_list() \
        == ["k", "x", "y"]
