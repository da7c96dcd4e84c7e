"""Storm's Streams API examples (storm-starter's ``streams``: WordCountToBolt,
WindowedWordCount, BranchExample, JoinExample, StatefulWordCount, StateQueryExample,
AggregateExample, GroupByKeyAndWindowExample, TypedTupleExample) ported and run on a LocalCluster,
counting every record sent: each must be acked, and counted exactly once in the results, also
when one of them fails on its first try and its spout replays it (at least once: a stream bolt
acks an input only once it is processed, and fails it when an operation raises)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from squall import Config, Count, Duration, Fields, LocalCluster, Spout
from squall.streams import (
    CombinerAggregator,
    Pair,
    PairValueMapper,
    SlidingWindows,
    StreamBuilder,
    TumblingWindows,
    TupleValueMappers,
    ValueMapper,
)
from squall.streams.bolts import ProcessorBolt, StatefulProcessorBolt
from squall.testing import TupleCaptureBolt
from squall.testing._registry import SharedFlag, SharedLog, SharedQueue

from .conftest import wait_until

SENTENCES = ["the cow jumped over the moon", "an apple a day keeps the doctor away",
             "four score and seven years ago", "snow white and the seven dwarfs", "i am at two with nature"]


class ReplayingSpout(Spout):
    """Emits what the test feeds it, each with its message id; a failed one is emitted again.
    Acks and fails are logged (shared by the spout's tasks). When it has nothing to emit, the
    windows downstream are empty: their tasks' punctuations end the merges after them."""

    def __init__(self, *fields: str) -> None:
        self.fields = Fields(*fields)
        self.queue = SharedQueue()
        self.acked = SharedLog()
        self.failed = SharedLog()

    def feed(self, values: list, msg_id: object) -> None:
        self.queue.put((values, msg_id))

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields)

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.in_flight: dict = {}

    def next_tuple(self):
        try:
            values, msg_id = self.queue.take()
        except IndexError:
            return
        self.in_flight[msg_id] = values
        self.collector.emit(values, msg_id)

    def ack(self, msg_id):
        self.in_flight.pop(msg_id, None)
        self.acked.append(msg_id)

    def fail(self, msg_id):
        self.failed.append(msg_id)
        self.queue.put((self.in_flight.pop(msg_id), msg_id))

    def all_acked(self, ids) -> bool:
        return set(self.acked.items()) >= set(ids)


class FailOnce:
    """Splits a sentence into words, but raises the first time it sees ``sentence`` (so its
    input fails, and the spout replays it)."""

    def __init__(self, sentence: str) -> None:
        self.sentence = sentence
        self.raised = SharedFlag()

    def __call__(self, sentence: str) -> list[str]:
        if sentence == self.sentence and not self.raised.is_set():
            self.raised.set()
            raise RuntimeError("failing on purpose, once")
        return sentence.split()


def expected_words(sentences: list[str]) -> Counter:
    return Counter(w for s in sentences for w in s.split())


def feed_sentences(spout: ReplayingSpout, n: int) -> tuple[list[str], list[int]]:
    sentences = [SENTENCES[i % len(SENTENCES)] for i in range(n)]
    for i, s in enumerate(sentences):
        spout.feed([s], i)
    return sentences, list(range(n))


def test_word_count_to_bolt_counts_every_word_once_though_a_sentence_failed_once():
    # WordCountToBolt: words -> (word, 1) -> count_by_key -> a bolt (here, a capture)
    spout = ReplayingSpout("sentence")
    split = FailOnce(SENTENCES[2])
    sink = TupleCaptureBolt()
    builder = StreamBuilder()
    builder.new_stream(spout, ValueMapper(0), 2).flat_map(split).map_to_pair(lambda w: Pair(w, 1)) \
        .count_by_key().to(sink, 2)
    sentences, ids = feed_sentences(spout, 60)
    expected = expected_words(sentences)
    with LocalCluster() as cluster:
        cluster.submit_topology("word-count", Config(), builder.build())
        assert wait_until(lambda: spout.all_acked(ids), 60), f"{len(set(ids) - set(spout.acked.items()))} unacked"
    # one input raised, once (the first of the copies of that sentence to arrive); replayed and acked
    (failed,) = spout.failed.items()
    assert sentences[failed] == SENTENCES[2]
    counts: dict[str, int] = {}
    updates = 0
    for _stream, (word, count) in [x for v in sink.results().values() for x in v]:
        counts[word] = max(counts.get(word, 0), count)
        updates += 1
    assert counts == dict(expected)
    assert updates == sum(expected.values())  # one update per word: nothing counted twice


def test_windowed_word_count_counts_every_word_in_exactly_one_window():
    # WindowedWordCount: a tumbling window over two spout tasks, word counts merged per window
    spout = ReplayingSpout("sentence")
    windows = SharedLog()
    builder = StreamBuilder()
    builder.new_stream(spout, ValueMapper(0), 2).window(TumblingWindows.of(Duration.of(300))) \
        .flat_map(str.split).map_to_pair(lambda w: Pair(w, 1)).count_by_key() \
        .filter(lambda kv: kv.get_second() >= 1).for_each(windows.append)
    sentences, ids = feed_sentences(spout, 80)
    expected = expected_words(sentences)

    def total() -> Counter:
        c: Counter = Counter()
        for word, n in windows.items():
            c[word] += n
        return c

    with LocalCluster() as cluster:
        cluster.submit_topology("windowed-word-count", Config(), builder.build())
        assert wait_until(lambda: total() == expected, 60), expected - total()
        assert wait_until(lambda: spout.all_acked(ids), 60)
    assert spout.failed.items() == []
    assert total() == expected


def test_branch_sends_every_number_to_the_first_branch_it_matches():
    # BranchExample: even and odd numbers, each to its own for_each
    spout = ReplayingSpout("n")
    even, odd = SharedLog(), SharedLog()
    builder = StreamBuilder()
    evens, odds = builder.new_stream(spout, ValueMapper(0)).branch(lambda x: x % 2 == 0, lambda x: x % 2 == 1)
    evens.for_each(even.append)
    odds.map(lambda x: -x).for_each(odd.append)
    for i in range(50):
        spout.feed([i], i)
    with LocalCluster() as cluster:
        cluster.submit_topology("branch", Config(), builder.build())
        assert wait_until(lambda: spout.all_acked(range(50)), 60)
    assert sorted(even.items()) == list(range(0, 50, 2))
    assert sorted(odd.items()) == sorted(-i for i in range(1, 50, 2))


def test_join_of_a_windowed_stream_with_another_matches_every_key():
    # JoinExample: (n, n*n) windowed, joined with (n, n*n*n)
    n = 30
    squares, cubes = ReplayingSpout("n", "v"), ReplayingSpout("n", "v")
    joined = SharedLog()
    builder = StreamBuilder()
    sq = builder.new_stream(squares, PairValueMapper(0, 1))
    cu = builder.new_stream(cubes, PairValueMapper(0, 1))
    # windows of 2n values of the two streams: each key's square and cube meet in one
    sq.window(TumblingWindows.of(Count(2 * n))).join(cu).for_each(joined.append)
    with LocalCluster() as cluster:
        cluster.submit_topology("join", Config(), builder.build())
        for rnd in range(2):  # a window's inputs are acked as it expires, when the next one fires
            for i in range(rnd * n, (rnd + 1) * n):
                squares.feed([i, i * i], i)
                cubes.feed([i, i * i * i], i)
            assert wait_until(lambda: len(joined.items()) == (rnd + 1) * n, 60), joined.items()  # noqa: B023
        assert wait_until(lambda: squares.all_acked(range(n)) and cubes.all_acked(range(n)), 60)
    assert sorted(joined.items()) == [Pair(i, Pair(i * i, i * i * i)) for i in range(2 * n)]
    assert squares.failed.items() == [] and cubes.failed.items() == []


def test_stateful_word_count_and_state_query():
    # StatefulWordCount (window -> count_by_key -> update_state_by_key) and StateQueryExample
    words = ReplayingSpout("word")
    queries = ReplayingSpout("word")
    updates, answers = SharedLog(), SharedLog()
    builder = StreamBuilder()
    state = builder.new_stream(words, ValueMapper(0), 2).window(TumblingWindows.of(Duration.of(300))) \
        .filter(bool).map_to_pair(lambda w: Pair(w, 1)).count_by_key().update_state_by_key(0, lambda total, n: total + n)
    state.to_pair_stream().for_each(updates.append)
    builder.new_stream(queries, ValueMapper(0)).state_query(state).for_each(answers.append)
    sent = [w for s in SENTENCES for w in s.split()] * 3
    for i, w in enumerate(sent):
        words.feed([w], i)
    expected = Counter(sent)

    def latest() -> dict:
        out: dict = {}
        for word, total in updates.items():
            out[word] = max(out.get(word, 0), total)
        return out

    conf = Config()
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    with LocalCluster() as cluster:
        cluster.submit_topology("stateful-word-count", conf, builder.build())
        assert wait_until(lambda: latest() == dict(expected), 60), (latest(), expected)
        assert wait_until(lambda: words.all_acked(range(len(sent))), 60)
        queries.feed(["the"], "q1")
        queries.feed(["no-such-word"], "q2")
        assert wait_until(lambda: queries.all_acked(["q1", "q2"]), 60)
        assert wait_until(lambda: answers.items() == [Pair("the", expected["the"])], 30), answers.items()
    assert words.failed.items() == [] and queries.failed.items() == []


class Avg(CombinerAggregator):
    """AggregateExample's average, with the sum and the count as the result (so that the test
    counts every record)."""

    def init(self):
        return (0, 0)

    def apply(self, acc, value):
        return (acc[0] + value, acc[1] + 1)

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def result(self, acc):
        return acc


def test_windowed_aggregate_over_two_tasks_merges_the_partitions_partial_aggregates():
    # AggregateExample: window -> filter -> aggregate, each task's partial merged globally
    spout = ReplayingSpout("n")
    results = SharedLog()
    builder = StreamBuilder()
    builder.new_stream(spout, ValueMapper(0), 2).window(TumblingWindows.of(Duration.of(300))) \
        .filter(lambda x: 0 < x < 500).aggregate(Avg()).for_each(results.append)
    numbers = list(range(1, 200)) + [600, 700]  # the last two filtered out, but acked
    for i, x in enumerate(numbers):
        spout.feed([x], i)

    def totals() -> tuple[int, int]:
        return sum(s for s, _c in results.items()), sum(c for _s, c in results.items())

    with LocalCluster() as cluster:
        cluster.submit_topology("aggregate", Config(), builder.build())
        assert wait_until(lambda: totals() == (sum(range(1, 200)), 199), 60), totals()
        assert wait_until(lambda: spout.all_acked(range(len(numbers))), 60)
    assert spout.failed.items() == []


def test_group_by_key_and_window_and_typed_tuples():
    # GroupByKeyAndWindowExample (sliding count windows) with TypedTupleExample's mapper
    spout = ReplayingSpout("symbol", "price", "seq")
    groups = SharedLog()
    builder = StreamBuilder()
    builder.new_stream(spout, TupleValueMappers.of(0, 1, 2)).map_to_pair(lambda t: Pair(t.value1, t.value2)) \
        .group_by_key_and_window(SlidingWindows.of(Count(6), Count(3))).for_each(groups.append)
    quotes = [("AAPL" if i % 2 else "MSFT", 100 + i, i) for i in range(12)]
    for i, q in enumerate(quotes):
        spout.feed(list(q), i)
    with LocalCluster() as cluster:
        cluster.submit_topology("group-by-key-and-window", Config(), builder.build())
        # windows end at the 3rd, 6th, 9th and 12th quote, each of the last (up to) 6
        assert wait_until(lambda: len(groups.items()) == 8, 60), groups.items()
        assert wait_until(lambda: spout.all_acked(range(6)), 60)  # the rest are still in a window
    got = Counter((k, tuple(v)) for k, v in groups.items())
    expected: Counter = Counter()
    for end in (3, 6, 9, 12):
        window = quotes[max(0, end - 6):end]
        for sym in ("MSFT", "AAPL"):
            expected[(sym, tuple(p for s, p, _ in window if s == sym))] += 1
    assert got == expected


def test_values_whose_equality_is_no_bool_pass_between_stream_bolts():
    # numpy arrays as values (as an ML pipeline passes them): a bolt after a regrouping looked for
    # the punctuation with ``value == "__punctuation"``, which an array answers with an array, and
    # failed every input ("The truth value of an array ... is ambiguous")
    np = pytest.importorskip("numpy")
    spout = ReplayingSpout("n")
    sums = SharedLog()
    builder = StreamBuilder()
    builder.new_stream(spout, ValueMapper(0)).map(lambda n: np.array([n, n + 1])).repartition(2) \
        .map(lambda a: int(a.sum())).for_each(sums.append)
    for i in range(40):
        spout.feed([i], i)
    with LocalCluster() as cluster:
        cluster.submit_topology("arrays", Config(), builder.build())
        assert wait_until(lambda: spout.all_acked(range(40)), 30), \
            f"{len(set(range(40)) - set(spout.acked.items()))} of 40 unacked, {len(spout.failed.items())} fails"
    assert spout.failed.items() == []
    assert sorted(sums.items()) == [2 * i + 1 for i in range(40)]


class ResumingSpout(Spout):
    """Emits ``items[i]`` with message id ``i`` (each of its tasks every other one), and a filler
    ``""`` (untracked) every 20 ms once it has nothing to send. A failed id is sent again. It
    resumes as a spout over a log does from its committed offsets: a task that opens (again,
    after its worker crashed) sends every one of its ids not acked yet."""

    def __init__(self, items: list) -> None:
        self.items = items
        self.acked = SharedLog()
        self.failed = SharedLog()
        self.opens = SharedLog()

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("w"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        done = set(self.acked.items())
        n = context.get_component_tasks(context.get_this_component_id())
        self.todo = [i for i in range(context.get_this_task_index(), len(self.items), len(n)) if i not in done]
        self.opens.append(len(self.todo))
        self.last_filler = 0.0

    def next_tuple(self):
        if self.todo:
            i = self.todo.pop(0)
            self.collector.emit([self.items[i]], i)
        elif time.monotonic() - self.last_filler >= 0.02:
            self.last_filler = time.monotonic()
            self.collector.emit([""])

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id):
        self.failed.append(msg_id)
        self.todo.append(msg_id)


class RaiseOnFirstCall:
    """The identity, but the first call (of every copy) raises."""

    def __init__(self) -> None:
        self.raised = SharedFlag()

    def __call__(self, value):
        if not self.raised.is_set():
            self.raised.set()
            raise RuntimeError("failing on purpose, once")
        return value


def test_an_exception_in_a_merge_of_windows_counts_no_word_twice():
    """Two spout tasks, tumbling windows on two tasks, each window's word counts merged after a
    regrouping (a bolt that holds the windows' inputs until the punctuations), then a map that
    raises on the first merged count. The exception came as the punctuation ran through the
    merge: the punctuation failed (and through its anchors the upstream windows' spout tuples,
    which were replayed) while the merge's accumulators kept their counts, and the held inputs
    were acked at the next window's end: 200 words counted 300 times. Now the bolt crashes its
    worker (as a windowed bolt does): the window is dropped whole, its words replayed, each
    counted once."""
    words = [SENTENCES[0].split()[i % 6] for i in range(200)]
    spout = ResumingSpout(words)
    merged = SharedLog()
    builder = StreamBuilder()
    builder.new_stream(spout, ValueMapper(0), 2).window(TumblingWindows.of(Duration.of(300))).filter(bool) \
        .map_to_pair(lambda w: Pair(w, 1)).repartition(1).count_by_key().map(RaiseOnFirstCall()) \
        .for_each(merged.append)
    topology = builder.build()
    (merge,) = [b.obj for b in topology.bolts.values() if isinstance(b.obj, ProcessorBolt) and b.obj.squall_holds_inputs]

    def total() -> Counter:
        c: Counter = Counter()
        for word, n in merged.items():
            c[word] += n
        return c

    with LocalCluster() as cluster:
        cluster.submit_topology("merge-raises", Config(), topology)
        assert wait_until(lambda: set(spout.acked.items()) >= set(range(len(words))), 60), \
            f"{len(set(range(len(words))) - set(spout.acked.items()))} unacked"
    assert total() == Counter(words), total()
    assert len(spout.opens.items()) == 4, spout.opens.items()  # the worker crashed once, and resumed
    assert merge.squall_fail_fast


def _key_of_five(n):
    return Pair(n % 5, n)


def _with(ids, n):
    return [*ids, n]


def _joined(a, b):
    return [*a, *b]


def test_a_windowed_merge_after_a_repartition_keeps_flowing_on_two_workers():
    """Ids repartitioned over 2 tasks of tumbling windows, each key's ids of a window merged
    after a regrouping, on 2 workers with `topology.max.spout.pending`. A merge ends a window
    once each upstream task punctuated it, and a task whose window saw no tuple sends none. The
    repartition's load-aware shuffle kept every id in the spout's worker, so the other worker's
    window task never punctuated, the merge held the ids unacked, and the spout, its 100
    pending ids outstanding, emitted nothing more until the message timeout replayed them (here
    300 s: none of the first 600 ids acked in 60 s, no window's result). A shuffle into a
    window is round-robin now: every id of a steady stream is acked, in one window, once."""
    spout = ReplayingSpout("n")
    for i in range(3000):  # a steady stream: more than the test waits for
        spout.feed([i], i)
    results = SharedLog()
    builder = StreamBuilder()
    builder.new_stream(spout, ValueMapper(0), 1).repartition(2).window(TumblingWindows.of(Duration.of(200))) \
        .map_to_pair(_key_of_five).aggregate_by_key([], _with, _joined).for_each(results.append)
    conf = Config({"topology.workers": 2, "topology.max.spout.pending": 100, "topology.message.timeout.secs": 300})
    n = 600
    with LocalCluster() as cluster:
        cluster.submit_topology("windows-on-two-workers", conf, builder.build())
        assert wait_until(lambda: spout.all_acked(range(n)), 60), \
            f"{len(set(range(n)) - set(spout.acked.items()))} of the first {n} ids unacked, {len(results.items())} results"
    seen = Counter()
    for key, ids in results.items():
        assert all(i % 5 == key for i in ids), (key, ids)
        seen.update(ids)
    assert all(seen[i] == 1 for i in range(n)), [(i, seen[i]) for i in range(n) if seen[i] != 1][:20]
    assert spout.failed.items() == []


def test_an_exception_in_a_stateful_bolt_merging_windows_counts_no_word_twice():
    """As the test above, in a bolt that holds a window's inputs and is stateful: the counts of
    each window's ``(word, running total)`` pairs, after ``update_state_by_key`` in the same bolt
    (a `StatefulProcessorBolt` whose ``count_by_key`` holds the inputs until the punctuations),
    then a map that raises on the first count. A stateful bolt's exception undoes that
    execute's state changes and fails its input, and the bolt goes on: the punctuation failed
    (and through its anchors the upstream windows' spout tuples, which were replayed) while the
    accumulators kept their counts, as in a plain stream bolt. Each word must be counted once:
    the bolt crashes its worker, as a stream bolt holding a window's inputs does."""
    words = [SENTENCES[0].split()[i % 6] for i in range(200)]
    spout = ResumingSpout(words)
    merged = SharedLog()
    builder = StreamBuilder()
    state = builder.new_stream(spout, ValueMapper(0), 2).window(TumblingWindows.of(Duration.of(300))).filter(bool) \
        .map_to_pair(lambda w: Pair(w, 1)).update_state_by_key(0, lambda total, n: total + n)
    state.to_pair_stream().count_by_key().map(RaiseOnFirstCall()).for_each(merged.append)
    topology = builder.build()
    (holder,) = [b.obj for b in topology.bolts.values() if isinstance(getattr(b.obj, "bolt", None), StatefulProcessorBolt)]
    assert holder.bolt.squall_holds_inputs

    def total() -> Counter:
        c: Counter = Counter()
        for word, n in merged.items():
            c[word] += n
        return c

    conf = Config()
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    with LocalCluster() as cluster:
        cluster.submit_topology("stateful-merge-raises", conf, topology)
        assert wait_until(lambda: set(spout.acked.items()) >= set(range(len(words))), 60), \
            f"{len(set(range(len(words))) - set(spout.acked.items()))} unacked"
    assert total() == Counter(words), total()
    assert len(spout.opens.items()) == 4, spout.opens.items()  # the worker crashed once, and resumed


def test_a_windowed_merge_ends_the_window_of_a_lone_id_while_the_other_task_is_idle():
    """Ids one at a time (the next fed once the last is acked), repartitioned over 2 tasks of
    tumbling processing-time windows, each key's ids of a window merged after a regrouping. Each
    id goes to one window task; the other's windows have no tuple. A window with no tuple does
    not fire (Storm's), and Storm's window task then sends no punctuation: the merge, which ends
    its window once every upstream task punctuated, held the lone id unacked until the message
    timeout (here 300 s) replayed it, and replayed, it waited again (the first id unacked after
    30 s, no result). A stream's window task now punctuates its empty processing-time windows
    too: each id is acked, in one window's result, once."""
    spout = ReplayingSpout("n")
    results = SharedLog()
    builder = StreamBuilder()
    builder.new_stream(spout, ValueMapper(0), 1).repartition(2).window(TumblingWindows.of(Duration.of(200))) \
        .map_to_pair(_key_of_five).aggregate_by_key([], _with, _joined).for_each(results.append)
    conf = Config({"topology.workers": 2, "topology.max.spout.pending": 100, "topology.message.timeout.secs": 300})
    n = 5
    with LocalCluster() as cluster:
        cluster.submit_topology("lone-ids", conf, builder.build())
        for i in range(n):
            spout.feed([i], i)
            assert wait_until(lambda i=i: spout.all_acked([i]), 30), \
                f"id {i} unacked after 30 s; acked {spout.acked.items()}, results {results.items()}"
    seen = Counter()
    for key, ids in results.items():
        assert all(i % 5 == key for i in ids), (key, ids)
        seen.update(ids)
    assert seen == Counter(range(n)), seen
    assert spout.failed.items() == []
