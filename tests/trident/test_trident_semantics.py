"""What each Trident operation sees and emits on LocalCluster, against Storm's semantics (a
review of the compiler): a stream merged with itself, min_by/max_by over Nones and ties, the
lifecycle of a combiner in every bolt it runs in, partition_persist with its own updater and
new values, reducers persisted grouped and ungrouped, each repartition's routing, join field
order, project after a grouped aggregate, an operation's report_error and FailedException.
Every batch's output is checked exactly against what the spout emitted in it."""

from __future__ import annotations

import collections
from typing import Any

from squall import Fields
from squall._grouping import CustomStreamGrouping
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.operation import (
    BaseAggregator,
    BaseFilter,
    BaseFunction,
    CombinerAggregator,
    Consumer,
    FailedException,
    FlatMapFunction,
    MapFunction,
    ReducerAggregator,
)
from squall.trident.spout import FixedBatchSpout
from squall.trident.state import BaseQueryFunction, BaseStateUpdater, State, StateFactory

from ..conftest import wait_until
from .test_trident_local import batches, by_txid, cluster, record, run, wait_batches  # noqa: F401 (fixture)
from .trident_ops import Recorded, Split, TrueFilter

WORDS = [["the cow the"], ["a cow"], ["moon the sky"], ["a a a"], ["sky"]]


def words_spout(batch_size: int = 2) -> FixedBatchSpout:
    return FixedBatchSpout(Fields("sentence"), batch_size, *WORDS)


def batch_words(spout: FixedBatchSpout, txid: int) -> list[str]:
    return [w for (s,) in spout.batch(txid) for w in s.split(" ") if w]


class Lifecycle:
    """Calls of prepare and cleanup, per (what, component, task), shared by every copy."""

    calls: collections.Counter = collections.Counter()

    @classmethod
    def add(cls, what: str, context: Any) -> None:
        cls.calls[(what, context.get_this_component_id(), context.get_this_task_id())] += 1

    @classmethod
    def of(cls, what: str) -> dict[tuple[str, int], int]:
        return {(c, t): n for (w, c, t), n in cls.calls.items() if w == what}


def test_a_stream_merged_with_itself_gives_each_tuple_once_per_edge(cluster) -> None:
    topo = TridentTopology()
    spout = FixedBatchSpout(Fields("w"), 2, ["a"], ["b"], ["c"])
    s = topo.new_stream("spout-selfmerge", spout).each(Fields("w"), TrueFilter())
    record(topo.merge(s, s), "selfmerge")
    run(cluster, topo)
    seen = wait_batches("selfmerge", 2)
    assert sorted(seen[1]) == [["a"], ["a"], ["b"], ["b"]]
    assert seen[2] == [["c"], ["c"]]


def test_min_by_and_max_by_skip_nones_and_give_ties_to_the_later_tuple(cluster) -> None:
    """Storm's ComparisonAggregator: a null value is skipped, compare() keeping value2 on a tie."""
    topo = TridentTopology()
    spout = FixedBatchSpout(Fields("name", "age"), 4, ["a", None], ["b", 5], ["c", 5], ["d", 9],
                            ["e", 1], ["f", None], ["g", 1])
    s = topo.new_stream("spout-minmax-none", spout)
    record(s.max_by("age"), "maxnone")
    record(s.min_by("age"), "minnone")
    run(cluster, topo)
    assert wait_batches("maxnone", 2) == {1: [["d", 9]], 2: [["g", 1]]}
    assert wait_batches("minnone", 2) == {1: [["c", 5]], 2: [["g", 1]]}


class PreparedCount(CombinerAggregator):
    """Counts, with a step set in prepare (a combiner using its prepare in combine)."""

    def prepare(self, conf, context) -> None:
        Lifecycle.add("count-prepare", context)
        self.step = 1

    def init(self, tuple) -> int:  # noqa: A002
        return self.step

    def combine(self, val1: int, val2: int) -> int:
        return val1 + val2 * self.step

    def zero(self) -> int:
        return 0


def test_a_combiner_is_prepared_once_in_each_task_of_every_bolt_it_runs_in(cluster) -> None:
    topo = TridentTopology()
    spout = words_spout(2)
    s = topo.new_stream("spout-prepared-count", spout).shuffle().name("split") \
        .each(Fields("sentence"), Split(), Fields("word")).parallelism_hint(2)
    total = s.name("total").aggregate(PreparedCount(), Fields("n")).parallelism_hint(3)
    record(total, "prepcount")
    counts = s.name("counts").group_by(Fields("word")) \
        .persistent_aggregate(MemoryMapState.factory(), PreparedCount(), Fields("count")).parallelism_hint(2)
    record(counts.new_values_stream().name("check").global_().each(Fields("word"), TrueFilter()), "prepgrouped")
    name = run(cluster, topo)
    n = batches(spout)
    seen = wait_batches("prepcount", n)
    assert {t: seen[t] for t in range(1, n + 1)} == {t: [[len(batch_words(spout, t))]] for t in range(1, n + 1)}
    seen = wait_batches("prepgrouped", n)
    running: collections.Counter = collections.Counter()
    for txid in range(1, n + 1):
        running.update(batch_words(spout, txid))
        assert sorted(seen[txid]) == sorted([w, running[w]] for w in set(batch_words(spout, txid)))
    components = cluster.get_topology_info(name)["components"]
    # names name the bolts: the split (with both combiners' init and partial), the total, the counts
    assert sorted(c for c in components if c.startswith("b-")) == [
        "b-0-split-total-counts", "b-1-total", "b-2-counts", "b-3-check"]
    prepared = Lifecycle.of("count-prepare")
    for bolt, times in (("b-0-split-total-counts", 2), ("b-1-total", 1), ("b-2-counts", 1)):
        mine = {task: k for (c, task), k in prepared.items() if c == bolt}
        assert len(mine) == components[bolt]["tasks"] and set(mine.values()) == {times}, (bolt, mine)
    cluster.kill_topology(name)


def settled(key: str, txids: int) -> dict[int, list]:
    """The records of txids 1..txids once a later txid recorded something: batches run one at a
    time (max.spout.pending 1), so by then every task has recorded all of those batches."""
    return by_txid(Recorded.wait_for(key, lambda r: any(t > txids for t, _ in r)))


def cycling(fields: str, batch_size: int, *rows: list) -> FixedBatchSpout:
    spout = FixedBatchSpout(Fields(fields.split()), batch_size, *rows)
    spout.set_cycle(True)
    return spout


class Where(BaseFunction):
    """Appends the partition (task index) this copy runs in."""

    def prepare(self, conf, context) -> None:
        Lifecycle.add("where-prepare", context)
        self.index = context.get_partition_index()

    def execute(self, tuple, collector) -> None:  # noqa: A002
        collector.emit([self.index])


class ByParity(CustomStreamGrouping):
    """Even numbers to the first task, odd ones to the second (sees the values without the batch id)."""

    def choose_tasks(self, task_id: int, values: list) -> list[int]:
        return [self.target_tasks[values[0] % 2]]


def test_each_repartition_routes_as_storms(cluster) -> None:
    topo = TridentTopology()
    spout = cycling("n", 4, *[[i] for i in range(10)])
    s = topo.new_stream("spout-routes", spout)
    record(s.broadcast().each(Fields("n"), Where(), Fields("p")).parallelism_hint(3), "broadcast")
    record(s.partition(ByParity()).each(Fields("n"), Where(), Fields("p")).parallelism_hint(2), "custom")
    record(s.global_().each(Fields("n"), Where(), Fields("p")).parallelism_hint(3), "global")
    record(s.batch_global().each(Fields("n"), Where(), Fields("p")).parallelism_hint(3), "batchglobal")
    pairs = s.shuffle().each(Fields("n"), Where(), Fields("p1")).parallelism_hint(2) \
        .identity_partition().each(Fields("n"), Where(), Fields("p2"))
    record(pairs, "identity")
    record(s.local_or_shuffle().each(Fields("n"), TrueFilter()).parallelism_hint(2), "local")
    name = run(cluster, topo)
    n = 3
    broadcast, custom, glob, batch_glob = (settled(k, n) for k in ("broadcast", "custom", "global", "batchglobal"))
    identity, local = settled("identity", n), settled("local", n)
    for txid in range(1, n + 1):
        values = [v for (v,) in spout.batch(txid)]
        assert sorted(broadcast[txid]) == sorted([v, p] for v in values for p in range(3))
        assert sorted(custom[txid]) == sorted([v, v % 2] for v in values)
        assert sorted(glob[txid]) == sorted([v, 0] for v in values)
        assert sorted(v for v, _ in batch_glob[txid]) == sorted(values)
        assert len({p for _, p in batch_glob[txid]}) == 1  # the whole batch on one partition
        assert sorted(v for v, _, _ in identity[txid]) == sorted(values)
        assert all(p1 == p2 for _, p1, p2 in identity[txid])  # task i to task i
        assert sorted(local[txid]) == sorted([v] for v in values)
    assert {p for t in range(1, n + 1) for _, p, _ in identity[t]} == {0, 1}  # both tasks were used
    cluster.kill_topology(name)


class BufferState(State):
    """A partition's state: what was committed, under which txids."""

    log: list = []

    def __init__(self, partition: int) -> None:
        self.partition = partition

    def begin_commit(self, txid: int) -> None:
        BufferState.log.append(("begin", self.partition, txid))

    def commit(self, txid: int) -> None:
        BufferState.log.append(("commit", self.partition, txid))


class BufferFactory(StateFactory):
    def make_state(self, conf, metrics, partition_index, num_partitions) -> State:
        return BufferState(partition_index)


class CountWordsUpdater(BaseStateUpdater):
    """Emits each word of the partition's batch with how often it came, and its partition."""

    def update_state(self, state, tuples, collector) -> None:
        for word, k in sorted(collections.Counter(t["word"] for t in tuples).items()):
            collector.emit([word, k, state.partition])


def test_partition_persist_hands_each_partition_its_batch_and_emits_the_new_values_stream(cluster) -> None:
    topo = TridentTopology()
    spout = cycling("sentence", 2, *WORDS)
    persisted = topo.new_stream("spout-persist", spout) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .partition_by(Fields("word")) \
        .partition_persist(BufferFactory(), Fields("word"), CountWordsUpdater(), Fields("word", "k", "p")) \
        .parallelism_hint(2)
    record(persisted.new_values_stream().global_().each(Fields("word"), TrueFilter()), "persist")
    name = run(cluster, topo)
    n = 3
    seen = settled("persist", n)
    for txid in range(1, n + 1):
        counts = collections.Counter(batch_words(spout, txid))
        assert sorted([w, k] for w, k, _ in seen[txid]) == sorted(map(list, counts.items()))
        assert len({(w, p) for w, _, p in seen[txid]}) == len(counts)
        # each partition that got words began and committed that txid, in that order
        partitions = {p for _, _, p in seen[txid]}
        for p in partitions:
            assert [e for e, q, t in BufferState.log if q == p and t == txid] == ["begin", "commit"]
    cluster.kill_topology(name)


class LengthSum(ReducerAggregator):
    """Sums the lengths of the words (a reducer)."""

    def init(self) -> int:
        return 0

    def reduce(self, curr: int, tuple) -> int:  # noqa: A002
        return curr + len(tuple["word"])


def test_reducers_persisted_grouped_and_ungrouped_give_running_values(cluster) -> None:
    topo = TridentTopology()
    spout = cycling("sentence", 2, *WORDS)
    words = topo.new_stream("spout-reducers", spout).shuffle() \
        .each(Fields("sentence"), Split(), Fields("word")).parallelism_hint(2)
    grouped = words.group_by(Fields("word")).persistent_aggregate(
        MemoryMapState.factory(), Fields("word"), LengthSum(), Fields("len")).parallelism_hint(2)
    total = words.persistent_aggregate(MemoryMapState.factory(), Fields("word"), LengthSum(), Fields("total"))
    record(grouped.new_values_stream().global_().each(Fields("word"), TrueFilter()), "rgrouped")
    record(total.new_values_stream(), "rtotal")
    name = run(cluster, topo)
    n = batches(spout) + 2  # once round, and again
    seen_grouped, seen_total = settled("rgrouped", n), settled("rtotal", n)
    per_word: collections.Counter = collections.Counter()
    running = 0
    for txid in range(1, n + 1):
        ws = batch_words(spout, txid)
        per_word.update({w: len(w) * k for w, k in collections.Counter(ws).items()})
        running += sum(len(w) for w in ws)
        assert sorted(seen_grouped[txid]) == sorted([w, per_word[w]] for w in set(ws))
        assert seen_total[txid] == [[running]]
    cluster.kill_topology(name)


def test_join_puts_the_join_fields_first_then_each_sides_others_in_stream_order(cluster) -> None:
    topo = TridentTopology()
    left = cycling("a k b", 2, ["a1", 1, "b1"], ["a2", 2, "b2"])
    right = cycling("c d k2", 2, ["c1", "d1", 1], ["c2", "d2", 1], ["c3", "d3", 3])
    joined = topo.join(topo.new_stream("join-left", left), Fields("k"),
                       topo.new_stream("join-right", right), Fields("k2"), Fields("key", "a", "b", "c", "d"))
    assert joined.get_output_fields().to_list() == ["key", "a", "b", "c", "d"]
    record(joined, "joinorder")
    name = run(cluster, topo)
    n = 4
    seen = settled("joinorder", n)
    for txid in range(1, n + 1):
        expected = [[k, a, b, c, d] for a, k, b in left.batch(txid) for c, d, k2 in right.batch(txid) if k == k2]
        assert sorted(seen.get(txid, [])) == sorted(expected), txid
    cluster.kill_topology(name)


def test_project_after_a_grouped_aggregate_keeps_the_named_fields(cluster) -> None:
    topo = TridentTopology()
    spout = cycling("sentence", 2, *WORDS)
    counts = topo.new_stream("spout-project", spout) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")).aggregate(Fields("word"), LengthSum(), Fields("len")) \
        .project(Fields("len"))
    assert counts.get_output_fields().to_list() == ["len"]
    record(counts.global_().each(Fields("len"), TrueFilter()), "project")
    name = run(cluster, topo)
    seen = settled("project", 3)
    for txid in range(1, 4):
        ws = collections.Counter(batch_words(spout, txid))
        assert sorted(seen[txid]) == sorted([len(w) * k] for w, k in ws.items())
    cluster.kill_topology(name)


class Faulty:
    """Which (where, txid) failed already, and every batch attempt the aggregator began."""

    failed: set = set()
    attempts: list = []


class FailOnValue(BaseFunction):
    """Passes each tuple on; fails its batch the first time it sees ``value``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def execute(self, tuple, collector) -> None:  # noqa: A002
        if tuple[0] == self.value and ("fn", self.value) not in Faulty.failed:
            Faulty.failed.add(("fn", self.value))
            raise FailedException(f"first sight of {self.value}")
        collector.emit([tuple[0]])


class FailAtComplete(BaseAggregator):
    """Passes the batch on at its end; fails the first attempt of ``txid`` there."""

    def __init__(self, txid: int) -> None:
        self.txid = txid

    def init(self, batch_id, collector) -> list:
        Faulty.attempts.append((batch_id.txid, batch_id.attempt_id))
        return [batch_id, []]

    def aggregate(self, state, tuple, collector) -> None:  # noqa: A002
        state[1].append(list(tuple.values))

    def complete(self, state, collector) -> None:
        if state[0].txid == self.txid and ("agg", self.txid) not in Faulty.failed:
            Faulty.failed.add(("agg", self.txid))
            raise FailedException(f"batch {state[0]} at its end")
        for values in state[1]:
            collector.emit(values)


class FailingUpdater(BaseStateUpdater):
    """Emits every tuple it persists; fails the first commit holding ``value``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def update_state(self, state, tuples, collector) -> None:
        if any(t[0] == self.value for t in tuples) and ("update", self.value) not in Faulty.failed:
            Faulty.failed.add(("update", self.value))
            raise FailedException(f"commit holding {self.value}")
        for t in tuples:
            collector.emit(list(t.values))


def test_a_failed_exception_from_a_function_an_aggregator_or_an_updater_replays_the_same_txid(cluster) -> None:
    topo = TridentTopology()
    spout = cycling("n", 3, *[[i] for i in range(12)])
    out = topo.new_stream("spout-faults", spout) \
        .each(Fields("n"), FailOnValue(4), Fields("m")) \
        .partition_aggregate(Fields("n", "m"), FailAtComplete(3), Fields("n", "m")) \
        .global_() \
        .partition_persist(BufferFactory(), Fields("n", "m"), FailingUpdater(10), Fields("n", "m"))
    record(out.new_values_stream(), "faults")
    name = run(cluster, topo)
    n = 4
    seen = settled("faults", n)
    for txid in range(1, n + 1):  # each batch once, whole: no lost or doubled tuple
        assert sorted(seen[txid]) == sorted([v, v] for (v,) in spout.batch(txid)), txid
    assert Faulty.failed == {("fn", 4), ("agg", 3), ("update", 10)}
    attempts = collections.defaultdict(list)
    for txid, attempt in Faulty.attempts:
        attempts[txid].append(attempt)
    # batches 2, 3 and 4 failed once each and came again as the same txid, a later attempt
    assert [attempts[t][0] for t in (1, 2, 3, 4)] == [0, 0, 0, 0]
    assert all(len(set(attempts[t])) == 2 for t in (2, 3, 4)), dict(attempts)
    cluster.kill_topology(name)


class Reporting(BaseFunction):
    """Reports an error for the word 'moon' and passes every word on."""

    def execute(self, tuple, collector) -> None:  # noqa: A002
        if tuple[0] == "moon":
            collector.report_error(ValueError("no moons here"))
        collector.emit([len(tuple[0])])


def test_report_error_shows_the_error_on_the_bolt_and_fails_nothing(cluster) -> None:
    topo = TridentTopology()
    spout = cycling("sentence", 2, *WORDS)
    out = topo.new_stream("spout-report", spout).each(Fields("sentence"), Split(), Fields("word")) \
        .name("reporting").each(Fields("word"), Reporting(), Fields("len"))
    record(out.project(Fields("word", "len")), "report")
    name = run(cluster, topo)
    seen = settled("report", 3)
    for txid in range(1, 4):
        assert sorted(seen[txid]) == sorted([w, len(w)] for w in batch_words(spout, txid))

    def reported() -> list:
        return [e for e in cluster.get_topology_info(name)["errors"] if "no moons here" in e["error"]]

    assert wait_until(lambda: reported(), timeout=30)
    assert {e["component"] for e in reported()} == {"b-0-reporting"}
    cluster.kill_topology(name)



class Tracked:
    """Records its prepare and cleanup under its class name, per component and task."""

    def prepare(self, conf, context) -> None:
        self._context = context
        Lifecycle.add(f"{type(self).__name__}.prepare", context)

    def cleanup(self) -> None:
        Lifecycle.add(f"{type(self).__name__}.cleanup", self._context)


class TFunction(Tracked, BaseFunction):
    def execute(self, tuple, collector) -> None:  # noqa: A002
        collector.emit([len(tuple[0])])


class TFilter(Tracked, BaseFilter):
    def is_keep(self, tuple) -> bool:  # noqa: A002
        return True


class TMap(Tracked, MapFunction):
    def execute(self, tuple) -> list:  # noqa: A002
        return list(tuple.values)


class TFlatMap(Tracked, FlatMapFunction):
    def execute(self, tuple) -> list:  # noqa: A002
        return [list(tuple.values)]


class TConsumer(Tracked, Consumer):
    def accept(self, tuple) -> None:  # noqa: A002
        pass


class TAggregator(Tracked, BaseAggregator):
    def init(self, batch_id, collector) -> list:
        return [0]

    def aggregate(self, state, tuple, collector) -> None:  # noqa: A002
        state[0] += tuple["len"]

    def complete(self, state, collector) -> None:
        collector.emit([state[0]])


class TReducer(Tracked, ReducerAggregator):
    def init(self) -> int:
        return 0

    def reduce(self, curr: int, tuple) -> int:  # noqa: A002
        return curr + 1


class TCombiner(Tracked, CombinerAggregator):
    def init(self, tuple) -> int:  # noqa: A002
        return 1

    def combine(self, val1: int, val2: int) -> int:
        return val1 + val2

    def zero(self) -> int:
        return 0


class TUpdater(Tracked, BaseStateUpdater):
    def update_state(self, state, tuples, collector) -> None:
        for t in tuples:
            collector.emit([t[0]])


class TQuery(Tracked, BaseQueryFunction):
    def batch_retrieve(self, state, tuples) -> list:
        return [state.partition] * len(tuples)

    def execute(self, tuple, result, collector) -> None:  # noqa: A002
        collector.emit([result])


def test_every_operation_is_prepared_and_cleaned_up_once_in_each_task_it_runs_in(cluster) -> None:
    Lifecycle.calls.clear()
    topo = TridentTopology()
    spout = cycling("sentence", 2, *WORDS)
    words = topo.new_stream("spout-lifecycle", spout).shuffle() \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .each(Fields("word"), TFunction(), Fields("len")).each(Fields("word"), TFilter()) \
        .map(TMap()).flat_map(TFlatMap()).peek(TConsumer()).parallelism_hint(2)
    words.partition_aggregate(Fields("len"), TAggregator(), Fields("sum"))
    words.aggregate(Fields("word"), TReducer(), Fields("n")).parallelism_hint(2)
    words.group_by(Fields("word")).aggregate(TCombiner(), Fields("k")).parallelism_hint(3)
    state = words.partition_persist(BufferFactory(), Fields("word"), TUpdater(), Fields("w")).parallelism_hint(2)
    record(state.new_values_stream().state_query(state, Fields("w"), TQuery(), Fields("p")), "lifecycle")
    name = run(cluster, topo)
    settled("lifecycle", 1)  # a batch went through every task of every bolt: all are prepared
    tasks = {c: v["tasks"] for c, v in cluster.get_topology_info(name)["components"].items()}
    cluster.kill_topology(name, wait_secs=0)
    where: dict[str, set] = collections.defaultdict(set)
    for (what, component, task), k in Lifecycle.calls.items():
        assert k == 1, (what, component, task, k)  # never twice in one task
        where[what].add((component, task))
    for op in ("TFunction", "TFilter", "TMap", "TFlatMap", "TConsumer", "TAggregator", "TReducer", "TCombiner",
               "TUpdater", "TQuery"):
        assert where[f"{op}.prepare"] == where[f"{op}.cleanup"], op
        components = {c for c, _ in where[f"{op}.prepare"]}
        # every task of each bolt it runs in (a combiner runs in two)
        assert len(where[f"{op}.prepare"]) == sum(tasks[c] for c in components), op
    assert len({c for c, _ in where["TCombiner.prepare"]}) == 2


def test_a_stream_merged_with_its_own_repartitioned_branch_runs_in_two_bolts(cluster) -> None:
    """merge(a, a.shuffle().each(f)): fusing every plain edge put a, f and the merge in one bolt
    reading its own shuffled stream, a batch it could never finish (Storm's GraphGrouper keeps a
    apart, with an identity partition into the merge's bolt)."""
    topo = TridentTopology()
    spout = cycling("sentence", 2, *WORDS)
    a = topo.new_stream("spout-loop", spout).each(Fields("sentence"), Split(), Fields("word")).project(Fields("word"))
    b = a.shuffle().each(Fields("word"), TrueFilter()).parallelism_hint(2)
    record(topo.merge(a, b), "loop")
    name = run(cluster, topo)
    seen = settled("loop", 3)
    for txid in range(1, 4):
        assert sorted(seen[txid]) == sorted([w] for w in batch_words(spout, txid) * 2)
    cluster.kill_topology(name)
