"""Storm's ``multiReduce`` (a user `MultiReducer` over plain streams, a `GroupedMultiReducer`
over grouped ones), ``join`` with ``JoinOutFieldsMode.PRESERVE`` and ``min``/``max``/``min_by``/
``max_by`` with a comparator, on LocalCluster. Each batch's output is checked exactly against
plain Python over what the spouts emitted in it, with batches failing before and after the
operation, and a grouped multi-reduce's result persisted under failures equals the input's
exactly (DRPC answers)."""

from __future__ import annotations

import collections
import itertools
import json

import pytest

from squall import Fields
from squall.trident import (
    DRPCExecutionException,
    JoinOutFieldsMode,
    JoinType,
    LocalDRPC,
    MapGet,
    MaxWithComparator,
    MemoryMapState,
    MinWithComparator,
    Sum,
    TridentTopology,
)
from squall.trident.spout import FixedBatchSpout

from ..conftest import wait_until
from .multi_ops import PerSide, Tally, by_age_mod_3, by_age_reversed
from .test_join_many import TXIDS, FailFirstAttempt, spouts, through, wait_exact
from .test_trident_local import cluster, record, run, wait_batches  # noqa: F401 (the module's LocalCluster)
from .trident_ops import ListSpout, Record, Split


def tally(txid: int, streams: list[int], last: list[int]) -> list[list]:
    """What `Tally` emits for batch ``txid`` of the spouts ``streams`` (their field ``last[i]``)."""
    batches = [spouts()[s].batch(txid) for s in streams]
    return [[i, len(b), sum(len(str(row[at])) for row in b)] for i, (b, at) in enumerate(zip(batches, last))]


def per_side(txid: int, streams: list[int], key_at: list[int]) -> list[list]:
    """What `PerSide` emits for batch ``txid``: per key of any of the streams, its tuples per stream."""
    counts: dict[str, list[int]] = {}
    for i, s in enumerate(streams):
        for row in spouts()[s].batch(txid):
            counts.setdefault(row[key_at[i]], [0] * len(streams))[i] += 1
    return [[k, *n] for k, n in counts.items()]


def test_user_multi_reducers_over_two_and_three_streams_see_each_batch(cluster) -> None:  # noqa: F811
    """A failed batch (its first attempt, before the multi-reduce) is recorded once, replayed."""
    topo = TridentTopology()
    people, orders, cities = (topo.new_stream(f"mr-plain-{i}", s) for i, s in enumerate(spouts()))
    people = through(people, FailFirstAttempt("mr-plain", {2, 3}))
    two = topo.multi_reduce(Fields("name"), people, Fields("rank"), cities, Tally(), Fields("stream", "n", "size"))
    three = topo.multi_reduce([people, orders, cities], Tally(), Fields("stream", "n", "size"))
    assert three.get_output_fields().to_list() == ["stream", "n", "size"]
    grouped = topo.multi_reduce(people.group_by(Fields("id")), orders.group_by(Fields("who")), PerSide(2),
                                Fields("k", "np", "no")).parallelism_hint(2)
    through(two, Record("mr-two"))
    through(three, Record("mr-three"))
    through(grouped, Record("mr-grouped-two"))
    run(cluster, topo)
    wait_exact("mr-two", {t: tally(t, [0, 2], [1, 2]) for t in TXIDS})
    wait_exact("mr-three", {t: tally(t, [0, 1, 2], [1, 1, 2]) for t in TXIDS})
    wait_exact("mr-grouped-two", {t: per_side(t, [0, 1], [0, 1]) for t in TXIDS})


def test_a_grouped_multi_reducer_runs_per_key_and_persists_exactly_once(cluster) -> None:  # noqa: F811
    """Batches fail before the multi-reduce and after it (in the one task every result passes,
    before they are recorded and persisted); each is recorded once and counted once."""
    with LocalDRPC() as drpc:
        topo = TridentTopology()
        people, orders, cities = (topo.new_stream(f"mr-grouped-{i}", s) for i, s in enumerate(spouts()))
        people = through(people, FailFirstAttempt("mr-grouped", {2, 3}))
        three = topo.multi_reduce([Fields("name"), Fields("item"), Fields("city")],
                                  [people.group_by(Fields("id")), orders.group_by(Fields("who")),
                                   cities.group_by(Fields("pid"))],
                                  PerSide(3), Fields("person", "np", "no", "nc")).parallelism_hint(3)
        three = through(three.global_(), FailFirstAttempt("mr-grouped-after", {4, 5}))
        three = through(three, Record("mr-grouped-three"))
        totals = three.group_by(Fields("person")).persistent_aggregate(
            MemoryMapState.factory(), Fields("no"), Sum(), Fields("orders")).parallelism_hint(2)
        topo.new_drpc_stream("mr-grouped", drpc).each(Fields("args"), Split(), Fields("person")) \
            .group_by(Fields("person")).state_query(totals, Fields("person"), MapGet(), Fields("orders")) \
            .project(Fields("person", "orders"))
        name = run(cluster, topo)
        wait_exact("mr-grouped-three", {t: per_side(t, [0, 1, 2], [0, 1, 0]) for t in TXIDS})
        expected = dict(collections.Counter(who for t in TXIDS for _, who in spouts()[1].batch(t)))

        def stored() -> dict:
            try:
                return dict(json.loads(drpc.execute("mr-grouped", " ".join(sorted(expected)))))
            except DRPCExecutionException:  # a call in a batch that failed
                return {}

        assert wait_until(lambda: stored() == expected, 60), (stored(), expected)
        cluster.kill_topology(name)


def preserved(txid: int, outer: tuple[bool, ...]) -> list[list]:
    """Storm's PreservingFieldsOrderJoinerMultiReducer over batch ``txid`` of the first
    ``len(outer)`` spouts, joined on the person: each stream's whole tuple in its own field order,
    streams in order, an outer side without the key all Nones (its join field too)."""
    batches = [s.batch(txid) for s in spouts()][:len(outer)]
    sides: dict[str, list[list]] = collections.defaultdict(lambda: [[] for _ in outer])
    for i, at in enumerate((0, 1, 0)[:len(outer)]):
        for row in batches[i]:
            sides[row[at]][i].append(list(row))
    out = []
    for rows in sides.values():
        rows = [r or ([[None] * w] if o else []) for r, w, o in zip(rows, (2, 2, 3), outer)]
        out.extend(list(itertools.chain.from_iterable(c)) for c in itertools.product(*rows))
    return out


@pytest.mark.parametrize("kind", ["inner", "outer"])
def test_join_preserve_gives_every_field_of_every_stream_in_its_order(cluster, kind) -> None:  # noqa: F811
    outer = (False, False, False) if kind == "inner" else (False, True, True)
    types = JoinType.INNER if kind == "inner" else [JoinType.INNER, JoinType.OUTER, JoinType.OUTER]
    topo = TridentTopology()
    people, orders, cities = (topo.new_stream(f"preserve-{kind}-{i}", s) for i, s in enumerate(spouts()))
    people = through(people, FailFirstAttempt(f"preserve-{kind}", {2, 3}))
    out = Fields("id", "name", "item", "who", "pid", "city", "rank")
    three = topo.join([people, orders, cities], [Fields("id"), Fields("who"), Fields("pid")], out, types,
                      JoinOutFieldsMode.PRESERVE).parallelism_hint(3)
    assert three.get_output_fields() == out
    through(three, Record(f"preserve-{kind}"))
    # the two-stream form, the mode in the join type's place as in Storm's overload
    two = topo.join(people, Fields("id"), orders, Fields("who"), Fields("id", "name", "item", "who"),
                    JoinOutFieldsMode.PRESERVE)
    through(two, Record(f"preserve2-{kind}"))
    run(cluster, topo)
    wait_exact(f"preserve-{kind}", {t: preserved(t, outer) for t in TXIDS})
    wait_exact(f"preserve2-{kind}", {t: preserved(t, (False, False)) for t in TXIDS})


def test_min_and_max_with_a_comparator_keep_storms_ties(cluster) -> None:  # noqa: F811
    """Storm's MinWithComparator/MaxWithComparator: ``compare(kept, new)`` keeps the kept tuple
    only when it wins strictly, so a tie goes to the later tuple; a None value is skipped."""
    topo = TridentTopology()
    rows = [["a", 4], ["b", None], ["c", 7], ["d", 7], ["e", 1], ["f", 4], ["g", 1], ["h", 2]]
    spout = FixedBatchSpout(Fields("name", "age"), 4, *rows)
    s = topo.new_stream("spout-cmp", spout)
    record(s.min_by("age", by_age_reversed), "cmp-min-by")  # the oldest, the later on a tie
    record(s.max_by("age", by_age_reversed), "cmp-max-by")  # the youngest
    full = topo.new_stream("spout-cmp-full", FixedBatchSpout(Fields("name", "age"), 4,
                                                             *[r for r in rows if r[1] is not None]))
    record(full.min(by_age_mod_3), "cmp-min")
    record(full.max(by_age_mod_3), "cmp-max")
    record(full.partition_aggregate(full.get_output_fields(), MinWithComparator("age", by_age_reversed),
                                    full.get_output_fields()), "cmp-agg")
    run(cluster, topo)
    assert wait_batches("cmp-min-by", 2) == {1: [["d", 7]], 2: [["f", 4]]}
    assert wait_batches("cmp-max-by", 2) == {1: [["a", 4]], 2: [["g", 1]]}
    # ages % 3 of the full spout's batches: a1 c1 d1 e1 | f1 g1 h2
    assert wait_batches("cmp-min", 2) == {1: [["e", 1]], 2: [["g", 1]]}
    assert wait_batches("cmp-max", 2) == {1: [["e", 1]], 2: [["h", 2]]}
    assert wait_batches("cmp-agg", 2) == {1: [["d", 7]], 2: [["f", 4]]}
    assert MaxWithComparator(by_age_mod_3).field is None


def test_the_new_forms_are_checked_when_called() -> None:
    topo = TridentTopology()
    a, b = (topo.new_stream(f"mr-forms-{n}", ListSpout(n, "v")) for n in "ab")
    with pytest.raises(ValueError, match=r"^multi_reduce: over Streams the reducer must be a MultiReducer, got PerSide"):
        topo.multi_reduce(a, b, PerSide(2), Fields("x"))
    with pytest.raises(ValueError, match=r"^multi_reduce: over GroupedStreams the reducer must be a "
                                         r"GroupedMultiReducer, got Tally"):
        topo.multi_reduce(a.group_by(Fields("a")), b.group_by(Fields("b")), Tally(), Fields("x"))
    with pytest.raises(ValueError, match=r"^multi_reduce: the streams must be all GroupedStreams"):
        topo.multi_reduce(a.group_by(Fields("a")), b, Tally(), Fields("x"))
    with pytest.raises(ValueError, match=r"^multi_reduce: field 'w' is not in the stream's fields \['b', 'v'\]"):
        topo.multi_reduce(Fields("v"), a, Fields("w"), b, Tally(), Fields("x"))
    with pytest.raises(ValueError, match=r"^multi_reduce: the output fields are required"):
        topo.multi_reduce(a, b, Tally())
    with pytest.raises(ValueError, match=r"^join: out_fields \['k', 'x', 'y'\] must name 4 fields \(mode PRESERVE\)"):
        topo.join(a, Fields("a"), b, Fields("b"), Fields("k", "x", "y"), mode=JoinOutFieldsMode.PRESERVE)
    with pytest.raises(ValueError, match=r"^min_by: the comparator must be a callable"):
        a.min_by("v", 3)
    with pytest.raises(ValueError, match=r"^max_by: field 'w' is not in the stream's fields"):
        a.max_by("w", by_age_reversed)
    assert topo.join(a, Fields("a"), b, Fields("b"), Fields("a", "v", "b", "w"), JoinType.OUTER,
                     JoinOutFieldsMode.PRESERVE).get_output_fields().to_list() == ["a", "v", "b", "w"]
