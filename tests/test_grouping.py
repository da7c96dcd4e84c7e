"""The built-in groupings as pure objects (Storm's grouping_test.clj), and their fast
``chooser`` paths agreeing with ``choose_tasks``."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import CustomStreamGrouping, Fields, GlobalStreamId
from squall._grouping import (
    ALL, FIELDS, GLOBAL, LOCAL_OR_SHUFFLE, NONE, PARTIAL_KEY, SHUFFLE, Grouping, chooser_of,
)

STREAM = GlobalStreamId("spout", "default")
SOURCE = Fields("key", "n")


class FakeContext:
    def __init__(self, worker_tasks):
        self.worker_tasks = worker_tasks

    def get_this_worker_tasks(self):
        return list(self.worker_tasks)


def made(kind, targets, fields=None, seed=1, context=None):
    import random
    g = Grouping(kind, fields).make(SOURCE, random.Random(seed))
    g.prepare(context or FakeContext([]), STREAM, targets)
    return g


def test_shuffle_is_exactly_even_over_whole_rounds():
    g = made(SHUFFLE, [4, 5, 6, 7])
    choose = chooser_of(g, 1)

    counts = Counter(t for _ in range(4000) for t in choose(["k", 0]))
    assert counts == {4: 1000, 5: 1000, 6: 1000, 7: 1000}


@pytest.mark.parametrize("key", ["word", "", 42, -7, None, 2.5, (1, "a"), b"raw", "\u00e9t\u00e9"])
def test_fields_chooser_agrees_with_choose_tasks(key):
    g = made(FIELDS, [3, 4, 5, 6, 7], Fields("key"))

    assert chooser_of(g, 1)([key, 0]) == g.choose_tasks(1, [key, 0])


def test_fields_chooser_agrees_with_choose_tasks_on_every_kind_of_str_key():
    # compiled, an ASCII key's choice is computed in C (CRC-32 and the mix) and another str's is
    # remembered: both must be stable_hash's, for every length, character and number of targets
    import random

    class Word(str):
        pass

    rng = random.Random(7)
    keys = ["", "\x00", "\x7f", "w0", "a" * 200, Word("word"), "\ud800", "caf\u00e9", "\U0001f600x"]
    keys += ["".join(chr(rng.randrange(128)) for _ in range(rng.randrange(40))) for _ in range(300)]
    keys += ["".join(chr(rng.randrange(0x80, 0x3000)) for _ in range(rng.randrange(1, 8))) for _ in range(50)]
    for n in (2, 3, 7, 13):
        g = made(FIELDS, list(range(10, 10 + n)), Fields("key"))
        choose = chooser_of(g, 1)
        for _ in range(2):  # first sight, then remembered
            for k in keys:
                assert choose([k, 0]) == g.choose_tasks(1, [k, 0]), (n, k)
                assert choose((k, 0)) == g.choose_tasks(1, [k, 0]), (n, k)
        assert len({choose([k, 0])[0] for k in keys}) == n


def test_fields_on_two_fields_depends_on_both_and_agrees_with_choose_tasks():
    g = made(FIELDS, list(range(1, 9)), Fields("key", "n"))
    choose = chooser_of(g, 1)

    for i in range(50):
        assert choose([f"k{i}", i]) == g.choose_tasks(1, [f"k{i}", i])
    assert len({choose(["same", i])[0] for i in range(50)}) > 1


def test_fields_sends_equal_keys_to_one_task_whatever_the_other_values():
    choose = chooser_of(made(FIELDS, [1, 2, 3, 4], Fields("key")), 9)

    assert len({choose(["k", n])[0] for n in range(100)}) == 1


def test_fields_remembered_str_keys_keep_their_task_past_the_memo_and_beside_equal_numbers(monkeypatch):
    import squall._grouping as grouping
    monkeypatch.setattr(grouping, "FIELDS_MEMO_SIZE", 8)  # so the memo fills and clears
    g = made(FIELDS, list(range(1, 12)), Fields("key"))
    choose = chooser_of(g, 1)
    keys = [f"w{i}" for i in range(40)] + ["1", 1, 1.0, True]

    for _ in range(3):  # first sight, remembered, and after the memo was cleared
        for k in keys:
            assert choose([k, 0]) == g.choose_tasks(1, [k, 0]), k


def test_global_picks_the_lowest_and_all_picks_every_target():
    assert chooser_of(made(GLOBAL, [9, 3, 5], Fields()), 1)(["k", 0]) == [3]
    assert chooser_of(made(ALL, [9, 3, 5]), 1)(["k", 0]) == [3, 5, 9]


def test_none_picks_one_target_at_random():
    g = made(NONE, [1, 2, 3])

    picks = [chooser_of(g, 1)(["k", 0]) for _ in range(300)]
    assert all(len(p) == 1 and p[0] in (1, 2, 3) for p in picks)
    assert len({p[0] for p in picks}) == 3


def test_local_or_shuffle_stays_in_the_worker_when_it_can():
    local = made(LOCAL_OR_SHUFFLE, [1, 2, 3, 4], context=FakeContext([2, 4, 10]))
    remote = made(LOCAL_OR_SHUFFLE, [1, 2, 3, 4], context=FakeContext([10]))

    assert {chooser_of(local, 10)(["k", 0])[0] for _ in range(20)} == {2, 4}
    assert {chooser_of(remote, 10)(["k", 0])[0] for _ in range(20)} == {1, 2, 3, 4}


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_partial_key_spreads_every_hot_key_over_two_distinct_tasks(n):
    """Storm's PartialKeyGrouping assigns each key two different candidate tasks; a key whose
    two hashes agree must still get a second task."""
    for i in range(40):
        g = made(PARTIAL_KEY, list(range(1, n + 1)), Fields("key"))
        choose = chooser_of(g, 1)
        counts = Counter(choose([f"key-{i}", 0])[0] for _ in range(10))
        assert sorted(counts.values()) == [5, 5], (n, i, counts)


def test_partial_key_with_one_target_always_picks_it():
    g = made(PARTIAL_KEY, [7], Fields("key"))

    assert {chooser_of(g, 1)(["k", 0])[0] for _ in range(5)} == {7}


def test_a_custom_grouping_must_implement_choose_tasks():
    with pytest.raises(TypeError):
        CustomStreamGrouping()  # abstract

    class Lowest(CustomStreamGrouping):
        def choose_tasks(self, task_id, values):
            return [min(self.target_tasks)]

    g = Grouping("custom", custom=Lowest()).make(SOURCE)
    g.prepare(None, STREAM, [5, 2, 8])
    assert chooser_of(g, 1)(["k", 0]) == [2]


def test_each_emitting_task_gets_its_own_copy_of_a_custom_grouping():
    class Stateful(CustomStreamGrouping):
        def choose_tasks(self, task_id, values):
            return self.target_tasks[:1]

    declared = Grouping("custom", custom=Stateful())

    assert declared.make(SOURCE) is not declared.make(SOURCE)
    assert declared.make(SOURCE) is not declared.custom
