"""examples/word_count.py: the split bolt's exact output, counts emitted on ticks, and a
reliable spout that replays what fails."""

from __future__ import annotations

from collections import Counter

from squall import Fields, StormTopology
from squall.testing import AckFailMapTracker, FeederSpout, TupleCaptureBolt, complete_topology, read_tuples

from ..conftest import wait_until
from .conftest import RecordingCollector, StubContext


def test_module_defines_build_and_conf(word_count):
    assert isinstance(word_count.build(), StormTopology)
    assert word_count.conf["topology.workers"] == 2
    assert word_count.conf["topology.max.spout.pending"] == 500
    assert callable(word_count.main)


def test_split_emits_exactly_the_lowercase_words(word_count):
    result = complete_topology(None, word_count.build(), {"sentences": [["the cow jumped"], ["The MAN"]]},
                               storm_conf=word_count.conf)
    assert read_tuples(result, "sentences") == [["the cow jumped"], ["The MAN"]]
    # split has 4 tasks, and read_tuples orders tuples per task only: compare as multisets
    assert sorted(read_tuples(result, "split")) == sorted([["the"], ["cow"], ["jumped"], ["the"], ["man"]])


def test_split_words_drops_punctuation_and_keeps_hashtags(word_count):
    assert word_count.split_words("@nathanmarz: Storm, #Storm & don't!") == \
        ["@nathanmarz", "storm", "#storm", "don't"]
    assert word_count.split_words("  ") == []


def _latest_counts(capture: TupleCaptureBolt) -> tuple[list[list], dict[str, int]]:
    emitted = [values for _stream, values in capture.results().get("count", [])]
    return emitted, {word: count for word, count in emitted}


def test_counts_are_emitted_on_ticks_for_changed_words(word_count, cluster):
    feeder = FeederSpout(Fields("sentence"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = word_count.make_builder(feeder, emit_frequency_secs=0.2)
    capture = TupleCaptureBolt()
    builder.set_bolt("capture", capture).global_grouping("count")
    for i, sentence in enumerate(["the cow jumped", "the man", "the cow"]):
        feeder.feed([sentence], i)
    cluster.submit_topology("wc", word_count.conf, builder.create_topology())

    expected = {"the": 3, "cow": 2, "jumped": 1, "man": 1}
    assert wait_until(lambda: _latest_counts(capture)[1] == expected, 10), _latest_counts(capture)
    assert all(tracker.is_acked(i) for i in range(3))

    # Only the words a later sentence changes are emitted again, once each.
    seen = len(_latest_counts(capture)[0])
    feeder.feed(["The dog"], 3)
    assert wait_until(lambda: Counter(map(tuple, _latest_counts(capture)[0][seen:])) ==
                      Counter({("the", 4): 1, ("dog", 1): 1}), 10), _latest_counts(capture)[0][seen:]
    assert wait_until(lambda: tracker.is_acked(3), 10)
    assert not any(tracker.is_failed(i) for i in range(4))


def test_count_tick_frequency_is_its_component_configuration(word_count):
    assert word_count.WordCount().get_component_configuration() == {"topology.tick.tuple.freq.secs": 2}
    assert word_count.WordCount(0.5).get_component_configuration() == {"topology.tick.tuple.freq.secs": 0.5}


def test_sentence_spout_cycles_and_replays_failed_sentences(word_count):
    spout = word_count.SentenceSpout(["a b", "c d", "e f"])
    out = RecordingCollector()
    spout.open({}, StubContext(task_index=1), out)
    for _ in range(4):
        spout.next_tuple()
    # task index 1 starts one sentence into the cycle, so parallel tasks do not emit in lockstep
    assert out.emitted == [(["c d"], 0), (["e f"], 1), (["a b"], 2), (["c d"], 3)]

    spout.ack(0)
    spout.fail(1)
    spout.fail(3)
    spout.ack(3)  # acked after failing (a late ack): it must not be replayed
    spout.fail(99)  # unknown ids are ignored
    del out.emitted[:]
    for _ in range(3):
        spout.next_tuple()
    assert out.emitted == [(["e f"], 1), (["e f"], 4), (["a b"], 5)]
    assert sorted(spout.pending) == [1, 2, 4, 5]
