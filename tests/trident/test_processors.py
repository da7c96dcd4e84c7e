"""The fused bolt body (`SubtopologyBody`) without a cluster: what each processor hands on
between operations, and the combiner's partial aggregate run as one dict update per tuple."""

from __future__ import annotations

import pytest

from squall import Fields
from squall.trident import BaseFilter, BaseFunction, CombinerAggregator, TridentTuple
from squall.trident.coordinator import TransactionAttempt
from squall.trident.executor import BatchInfo, BatchOutput
from squall.trident.failures import TridentOperationError
from squall.trident.processors import (
    AggregateProcessor,
    BodyNode,
    CombinerCombineAggregator,
    CombinerInitFunction,
    EachProcessor,
    FilterProcessor,
    GroupedAggregator,
    SubtopologyBody,
)


class Context:
    """The calls a body and its operations make of a `TopologyContext`."""

    def get_this_component_id(self) -> str:
        return "b-0"

    def get_component_tasks(self, component: str) -> list[int]:
        return [1]

    def get_this_task_index(self) -> int:
        return 0

    def get_this_task_id(self) -> int:
        return 1


class Output(BatchOutput):
    """Keeps what the body emits out of the bolt."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, list]] = []

    def emit(self, batch: BatchInfo, stream: str, values: list) -> None:
        self.emitted.append((stream, values))

    def report_error(self, error: BaseException) -> None:
        raise AssertionError(error)


class Split(BaseFunction):
    def __init__(self) -> None:
        self.seen: list[TridentTuple] = []

    def execute(self, tuple, collector) -> None:  # noqa: A002
        self.seen.append(tuple)
        for word in tuple[0].split(" "):
            collector.emit([word])


class NotStop(BaseFilter):
    def is_keep(self, tuple) -> bool:  # noqa: A002
        return tuple["word"] != "stop"


class Counting(CombinerAggregator):
    """Count, recording each call: the partial aggregate must make the wrappers' calls."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def init(self, tuple) -> int:  # noqa: A002
        self.calls.append(("init", list(tuple.get_fields()), list(tuple)))
        return 1

    def combine(self, val1: int, val2: int) -> int:
        self.calls.append(("combine", val1, val2))
        return val1 + val2

    def zero(self) -> int:
        self.calls.append(("zero",))
        return 0


def word_count_body(split: Split, counting: Counting) -> SubtopologyBody:
    """The split bolt of a word count: Split, a filter, the combiner's init and partial count."""
    sentence, words = Fields("sentence"), Fields("sentence", "word")
    with_init = Fields("sentence", "word", "count")
    nodes = [
        BodyNode("split", EachProcessor(sentence, split), words, (("stream", "s0"),), ((1, 0),), ()),
        BodyNode("keep", FilterProcessor(Fields("word"), NotStop()), words, (("node", 0),), ((2, 0),), ()),
        BodyNode("init", EachProcessor(Fields("word"), CombinerInitFunction(counting)), with_init,
                 (("node", 1),), ((3, 0),), ()),
        BodyNode("partial", AggregateProcessor(Fields("word", "count"), GroupedAggregator(
            CombinerCombineAggregator(counting), Fields("word"), Fields("count"))),
            Fields("word", "count"), (("node", 2),), (), ("s1",)),
    ]
    return SubtopologyBody(nodes, {"s0": sentence}, {})


def run_batch(body: SubtopologyBody, sentences: list[str]) -> None:
    batch = BatchInfo(TransactionAttempt(1, 0))
    body.init_batch(batch)
    for s in sentences:
        body.execute(batch, "s0", [s])
    body.finish_batch(batch)


def test_a_word_count_partial_aggregate_emits_each_group_once_with_the_combiners_calls():
    split, counting, out = Split(), Counting(), Output()
    body = word_count_body(split, counting)
    body.prepare({}, Context(), out)
    run_batch(body, ["a b a", "stop b a"])

    assert out.emitted == [("s1", ["a", 3]), ("s1", ["b", 2])]
    # the function saw TridentTuples of its input fields
    assert [(list(t.get_fields()), list(t)) for t in split.seen] == [(["sentence"], ["a b a"]),
                                                                     (["sentence"], ["stop b a"])]
    assert all(isinstance(t, TridentTuple) for t in split.seen)
    # init per tuple (seeing only its input field), zero once per group, combine per tuple
    assert counting.calls == [
        ("init", ["word"], ["a"]), ("zero",), ("combine", 0, 1),
        ("init", ["word"], ["b"]), ("zero",), ("combine", 0, 1),
        ("init", ["word"], ["a"]), ("combine", 1, 1),
        ("init", ["word"], ["b"]), ("combine", 1, 1),
        ("init", ["word"], ["a"]), ("combine", 2, 1),
    ]


def test_each_batch_starts_its_groups_over():
    out = Output()
    body = word_count_body(Split(), Counting())
    body.prepare({}, Context(), out)
    run_batch(body, ["a a"])
    run_batch(body, ["a"])
    assert out.emitted == [("s1", ["a", 2]), ("s1", ["a", 1])]


def test_an_unhashable_group_value_fails_naming_group_by():
    nodes = [BodyNode("partial", AggregateProcessor(Fields("g", "v"), GroupedAggregator(
        CombinerCombineAggregator(Counting()), Fields("g"), Fields("v"))), Fields("g", "v"),
        (("stream", "s0"),), (), ("s1",))]
    body = SubtopologyBody(nodes, {"s0": Fields("g", "v")}, {})
    body.prepare({}, Context(), Output())
    batch = BatchInfo(TransactionAttempt(1, 0))
    body.init_batch(batch)
    # raised naming the operation (here its node's name) and the tuple (squall.trident.failures)
    with pytest.raises(TridentOperationError, match=r"^partial raised ValueError: group_by: the group values "
                       r"\[\['x'\]\] are not hashable; its input: fields \['g', 'v'\] values \[\['x'\], 1\]$"):
        body.execute(batch, "s0", [["x"], 1])


def test_a_tuple_of_the_wrong_width_fails_naming_its_stream_and_fields():
    body = word_count_body(Split(), Counting())
    body.prepare({}, Context(), Output())
    batch = BatchInfo(TransactionAttempt(1, 0))
    body.init_batch(batch)
    with pytest.raises(ValueError, match=r"fields \['sentence'\] on stream 's0' got 2 values"):
        body.execute(batch, "s0", ["a", "b"])


def test_a_function_emitting_the_wrong_width_fails_naming_it():
    class Two(BaseFunction):
        def execute(self, tuple, collector) -> None:  # noqa: A002
            collector.emit(["x", "y"])

    nodes = [BodyNode("two", EachProcessor(Fields("a"), Two()), Fields("a", "b"), (("stream", "s0"),), (), ("s1",))]
    body = SubtopologyBody(nodes, {"s0": Fields("a")}, {})
    body.prepare({}, Context(), Output())
    batch = BatchInfo(TransactionAttempt(1, 0))
    body.init_batch(batch)
    with pytest.raises(TridentOperationError, match=r"^two raised ValueError: two: Two emitted 3 values "
                       r"\['a', 'x', 'y'\] for the fields \['a', 'b'\]; its input: fields \['a'\] values \['a'\]$"):
        body.execute(batch, "s0", ["a"])


def test_an_ungrouped_combiner_partial_combines_each_tuple_from_zero():
    counting, out = Counting(), Output()
    nodes = [BodyNode("partial", AggregateProcessor(Fields("v"), CombinerCombineAggregator(counting)), Fields("v"),
                      (("stream", "s0"),), (), ("s1",))]
    body = SubtopologyBody(nodes, {"s0": Fields("x", "v")}, {})
    body.prepare({}, Context(), out)
    batch = BatchInfo(TransactionAttempt(1, 0))
    body.init_batch(batch)
    for x, v in [("a", 2), ("b", 3)]:
        body.execute(batch, "s0", [x, v])
    body.finish_batch(batch)
    empty = BatchInfo(TransactionAttempt(2, 0))
    body.init_batch(empty)
    body.finish_batch(empty)
    assert out.emitted == [("s1", [5]), ("s1", [0])]
    assert counting.calls == [("zero",), ("combine", 0, 2), ("combine", 2, 3), ("zero",)]


def builtin_count_body(split: BaseFunction) -> SubtopologyBody:
    """The split bolt of W1T: Split, then the built-in Count's init and grouped partial count."""
    from squall.trident.builtin import Count

    sentence, words = Fields("sentence"), Fields("sentence", "word")
    count = Count()
    nodes = [
        BodyNode("split", EachProcessor(sentence, split), words, (("stream", "s0"),), ((1, 0),), ()),
        BodyNode("init", EachProcessor(Fields("word"), CombinerInitFunction(count)),
                 Fields("sentence", "word", "count"), (("node", 0),), ((2, 0),), ()),
        BodyNode("partial", AggregateProcessor(Fields("word", "count"), GroupedAggregator(
            CombinerCombineAggregator(count), Fields("word"), Fields("count"))),
            Fields("word", "count"), (("node", 1),), (), ("s1",)),
    ]
    return SubtopologyBody(nodes, {"s0": sentence}, {})


def test_a_function_before_a_grouped_builtin_count_has_its_emits_counted_per_word():
    """The built-in Count's partial needs no tuple per word: the function's collector counts its
    emits straight into the batch's groups. What comes out is the counts the generic path gives
    (the Counting combiner above makes the same calls as Count)."""
    split, out, generic = Split(), Output(), Output()
    body = builtin_count_body(split)
    body.prepare({}, Context(), out)
    ref = word_count_body(Split(), Counting())
    ref.prepare({}, Context(), generic)
    sentences = ["a b a", "b c a", "", "c c c c"]
    for _ in range(2):  # a second batch starts its groups over
        run_batch(body, sentences)
        run_batch(ref, sentences)
    assert type(body.nodes[0].processor._coll).__name__ == "_CountingCollector"
    assert out.emitted == generic.emitted == [("s1", ["a", 3]), ("s1", ["b", 2]), ("s1", ["c", 5]),
                                              ("s1", ["", 1])] * 2
    assert [list(t) for t in split.seen] == [[s] for s in sentences] * 2


def test_a_counted_function_emitting_the_wrong_width_or_an_unhashable_word_fails_naming_it():
    class Emit(BaseFunction):
        def execute(self, tuple, collector) -> None:  # noqa: A002
            collector.emit(tuple[0])

    body = builtin_count_body(Emit())
    body.prepare({}, Context(), Output())
    batch = BatchInfo(TransactionAttempt(1, 0))
    body.init_batch(batch)
    with pytest.raises(TridentOperationError, match=r"^split raised ValueError: split: Emit emitted 3 values "
                       r"\[\['x', 'y'\], 'x', 'y'\] for the fields \['sentence', 'word'\]; its input: "
                       r"fields \['sentence'\] values \[\['x', 'y'\]\]$"):
        body.execute(batch, "s0", [["x", "y"]])
    with pytest.raises(TridentOperationError, match=r"^split raised ValueError: group_by: the group values "
                       r"\[\['x'\]\] are not hashable; its input: fields \['sentence'\] values \[\[\['x'\]\]\]$"):
        body.execute(batch, "s0", [[["x"]]])
