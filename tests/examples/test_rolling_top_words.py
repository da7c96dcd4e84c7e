"""examples/rolling_top_words.py: the counting and ranking helpers as plain objects, and the
topology ranking a fed stream on a LocalCluster."""

from __future__ import annotations

import pytest

from squall import Fields, StormTopology
from squall.testing import FeederSpout, TupleCaptureBolt

from ..conftest import wait_until
from .conftest import RecordingCollector, StubContext


def test_module_defines_build_and_conf(rolling):
    assert isinstance(rolling.build(), StormTopology)
    assert rolling.conf["topology.workers"] == 2


# --- SlotBasedCounter -------------------------------------------------------------------------

def test_slot_based_counter_counts_per_slot_and_in_total(rolling):
    c = rolling.SlotBasedCounter(3)
    for obj, slot in [("a", 0), ("a", 0), ("a", 2), ("b", 1)]:
        c.increment_count(obj, slot)
    assert [c.get_count("a", s) for s in range(3)] == [2, 0, 1]
    assert c.get_count("unknown", 0) == 0
    assert c.get_counts() == {"a": 3, "b": 1}

    c.wipe_slot(0)
    assert c.get_counts() == {"a": 1, "b": 1}
    c.wipe_slot(1)
    assert c.get_counts() == {"a": 1, "b": 0}  # zeros are reported until wiped
    c.wipe_zeros()
    assert c.get_counts() == {"a": 1}


def test_slot_based_counter_needs_a_slot(rolling):
    with pytest.raises(ValueError):
        rolling.SlotBasedCounter(0)


# --- SlidingWindowCounter ---------------------------------------------------------------------

def test_sliding_window_reports_a_count_for_exactly_window_length_advances(rolling):
    w = rolling.SlidingWindowCounter(3)
    w.increment_count("a")
    assert w.get_counts_then_advance_window() == {"a": 1}
    w.increment_count("a")
    w.increment_count("a")
    w.increment_count("b")
    assert w.get_counts_then_advance_window() == {"a": 3, "b": 1}
    assert w.get_counts_then_advance_window() == {"a": 3, "b": 1}
    assert w.get_counts_then_advance_window() == {"a": 2, "b": 1}  # the first "a" slid out
    assert w.get_counts_then_advance_window() == {"a": 0, "b": 0}  # reported once at 0 ...
    assert w.get_counts_then_advance_window() == {}  # ... then forgotten


def test_sliding_window_needs_two_slots(rolling):
    with pytest.raises(ValueError):
        rolling.SlidingWindowCounter(1)


def test_nth_last_modified_time_tracker_measures_the_last_n_marks(rolling):
    now = [100.0]
    t = rolling.NthLastModifiedTimeTracker(3, clock=lambda: now[0])
    now[0] = 101.0
    assert t.seconds_since_oldest_modification() == 1.0
    for at in (102.0, 103.0, 104.0):
        now[0] = at
        t.mark_as_modified()
    now[0] = 105.0
    assert t.seconds_since_oldest_modification() == 3.0  # oldest of the last 3 marks: 102


# --- Rankable and Rankings --------------------------------------------------------------------

def test_rankables_are_equal_by_object_and_built_from_counter_values(rolling):
    R = rolling.RankableObjectWithFields
    r = R.from_values(["storm", 7, 9.0])
    assert (r.get_object(), r.get_count(), r.get_fields()) == ("storm", 7, [9.0])
    assert r == R("storm", 1) and hash(r) == hash(R("storm", 1))
    assert r != R("spout", 7)
    assert R("a", 1) < R("b", 2)
    c = r.copy()
    c.fields.append("x")
    assert r.get_fields() == [9.0]
    with pytest.raises(ValueError):
        R("a", -1)
    with pytest.raises(ValueError):
        R(None, 1)


def test_rankings_keep_the_top_n_replacing_counts_of_the_same_object(rolling):
    R = rolling.RankableObjectWithFields
    rankings = rolling.Rankings(3)
    for obj, count in [("a", 1), ("b", 5), ("c", 3), ("d", 4), ("a", 6), ("e", 2)]:
        rankings.update_with(R(obj, count))
    assert rankings.as_pairs() == [("a", 6), ("b", 5), ("d", 4)]
    assert rankings.size() == len(rankings) == 3

    rankings.update_with(R("b", 0))  # a lower count replaces a higher one
    assert rankings.as_pairs() == [("a", 6), ("d", 4), ("b", 0)]
    rankings.prune_zero_counts()
    assert rankings.as_pairs() == [("a", 6), ("d", 4)]


def test_rankings_ties_keep_first_ranked_order(rolling):
    R = rolling.RankableObjectWithFields
    rankings = rolling.Rankings(5)
    for obj in "xyz":
        rankings.update_with(R(obj, 1))
    assert [o for o, _ in rankings.as_pairs()] == ["x", "y", "z"]


def test_rankings_merge_and_copies_are_independent(rolling):
    R = rolling.RankableObjectWithFields
    left, right = rolling.Rankings(3), rolling.Rankings(3)
    for obj, count in [("a", 10), ("b", 2)]:
        left.update_with(R(obj, count))
    for obj, count in [("c", 7), ("b", 8), ("d", 1)]:
        right.update_with(R(obj, count))
    total = rolling.Rankings(3)
    total.update_with(left)
    total.update_with(right)
    assert total.as_pairs() == [("a", 10), ("b", 8), ("c", 7)]

    snapshot = total.copy()
    total.update_with(R("z", 99))
    assert snapshot.as_pairs() == [("a", 10), ("b", 8), ("c", 7)]
    assert snapshot != total and snapshot == snapshot.copy()
    assert [r.get_object() for r in total.get_rankings()] == ["z", "a", "b"]
    with pytest.raises(ValueError):
        rolling.Rankings(0)


def test_rolling_count_bolt_window_must_span_at_least_two_emissions(rolling):
    assert rolling.RollingCountBolt(9, 3).num_slots == 3
    assert rolling.RollingCountBolt(1, 0.25).num_slots == 4
    assert rolling.RollingCountBolt(1, 0.25).get_component_configuration() == \
        {"topology.tick.tuple.freq.secs": 0.25}
    for window, freq in [(3, 3), (10, 3), (1, 2)]:
        with pytest.raises(ValueError):
            rolling.RollingCountBolt(window, freq)


def test_word_spout_is_skewed_toward_the_first_words(rolling):
    spout = rolling.WordSpout(interval_secs=0, seed=3)
    out = RecordingCollector()
    spout.open({}, StubContext(), out)
    for _ in range(2000):
        spout.next_tuple()
    counts = {w: 0 for w in rolling.WORDS}
    for [word], _ in out.emitted:
        counts[word] += 1
    assert counts[rolling.WORDS[0]] > counts[rolling.WORDS[1]] > counts[rolling.WORDS[-1]]


# --- the topology -----------------------------------------------------------------------------

def _final_rankings(capture: TupleCaptureBolt) -> list[list[tuple[str, int]]]:
    return [values[0].as_pairs() for _stream, values in capture.results().get("finalRanker", [])]


def test_final_ranker_emits_the_most_frequent_words_then_forgets_them(rolling, cluster):
    feeder = FeederSpout(Fields("word"))
    builder = rolling.make_builder(feeder, top_n=3, window_length_secs=1, emit_frequency_secs=0.25,
                                   ranker_emit_frequency_secs=0.25)
    capture = TupleCaptureBolt()
    builder.set_bolt("capture", capture).global_grouping("finalRanker")
    stream = {"apple": 40, "banana": 30, "cherry": 20, "date": 10, "elder": 5, "fig": 1}
    # interleaved, as a real stream would be, rather than word by word
    remaining = dict(stream)
    while remaining:
        for word in list(remaining):
            feeder.feed([word])
            remaining[word] -= 1
            if not remaining[word]:
                del remaining[word]
    cluster.submit_topology("rolling", rolling.conf, builder.create_topology())

    top3 = [("apple", 40), ("banana", 30), ("cherry", 20)]
    assert wait_until(lambda: top3 in _final_rankings(capture), 10), _final_rankings(capture)
    rankings = _final_rankings(capture)
    # Rankings emitted while the counts were still arriving may be partial, never overstated.
    for ranking in rankings[:rankings.index(top3)]:
        assert len(ranking) <= 3 and all(count <= stream[word] for word, count in ranking)

    # Once the words slide out of the 1 s window, their counts fall to 0 and are pruned.
    assert wait_until(lambda: _final_rankings(capture)[-1] == [], 10), _final_rankings(capture)[-3:]
