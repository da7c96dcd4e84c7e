"""Storm's integration tests of whole topologies run with `complete_topology` on mocked data."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import Bolt, Config, Fields, InvalidTopologyException, TopologyBuilder
from squall.testing import MockedSources, complete_topology, read_tuples

from .components import (
    IdentityBolt, TaskBolt, TestAggregatesCounter, TestGlobalCount, TestPlannerSpout, TestWordCounter,
    TestWordSpout,
)


def multiset(rows):
    return Counter(tuple(r) for r in rows)


def word_count_topology():
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout(True), 3)
    builder.set_bolt("2", TestWordCounter(), 4).fields_grouping("1", Fields("word"))
    builder.set_bolt("3", TestGlobalCount()).global_grouping("1")
    builder.set_bolt("4", TestAggregatesCounter()).global_grouping("2")
    return builder.create_topology()


def test_word_count_topology_emits_the_counts_storm_expects(cluster):
    """Storm's test-basic-topology: word counts per fields-grouped task, global counts."""
    conf = Config()
    conf.set_num_workers(2)
    results = complete_topology(cluster, word_count_topology(),
                                {"1": [["nathan"], ["bob"], ["joey"], ["nathan"]]}, conf)

    assert multiset(read_tuples(results, "1")) == multiset([["nathan"], ["bob"], ["joey"], ["nathan"]])
    assert multiset(read_tuples(results, "2")) == multiset(
        [["nathan", 1], ["nathan", 2], ["bob", 1], ["joey", 1]])
    assert read_tuples(results, "3") == [[1], [2], [3], [4]]
    assert read_tuples(results, "4") == [[1], [2], [3], [4]]


def test_mocked_sources_object_and_per_stream_dict_are_equivalent(cluster):
    mocked = MockedSources()
    mocked.add_mock_data("1", ["a"], ["b"])
    by_object = complete_topology(cluster, word_count_topology(), mocked)
    by_stream = complete_topology(cluster, word_count_topology(), {"1": {"default": [["a"], ["b"]]}})

    assert multiset(read_tuples(by_object, "2")) == multiset([["a", 1], ["b", 1]])
    assert multiset(read_tuples(by_stream, "2")) == multiset([["a", 1], ["b", 1]])


def test_complete_topology_without_a_cluster_runs_on_a_fresh_one():
    builder = TopologyBuilder()
    builder.set_spout("words", TestWordSpout())
    builder.set_bolt("id", IdentityBolt(Fields("word"))).shuffle_grouping("words")
    results = complete_topology(None, builder.create_topology(), {"words": [["x"], ["y"]]})

    assert multiset(read_tuples(results, "id")) == multiset([["x"], ["y"]])


def test_read_tuples_of_a_stream_nothing_was_emitted_on_is_empty(cluster):
    results = complete_topology(cluster, word_count_topology(), {"1": [["a"]]})

    assert read_tuples(results, "1", "other-stream") == []


def test_every_task_of_an_executor_with_several_tasks_processes_tuples(cluster):
    """Storm's test-multi-tasks-per-executor: 6 tasks on 3 executors, shuffled 6 tuples, each
    task reports its own index once."""
    builder = TopologyBuilder()
    builder.set_spout("1", TestWordSpout(True))
    builder.set_bolt("2", TaskBolt(), 3).set_num_tasks(6).shuffle_grouping("1")
    results = complete_topology(cluster, builder.create_topology(), {"1": [["a"]] * 6})

    assert sorted(index for _task, index, _word in read_tuples(results, "2")) == [0, 1, 2, 3, 4, 5]


def test_tuples_are_completed_with_acking_disabled(cluster):
    conf = Config()
    conf.set_num_ackers(0)
    results = complete_topology(cluster, word_count_topology(), {"1": [["a"], ["a"]]}, conf)

    assert read_tuples(results, "3") == [[1], [2]]


def test_mocking_a_spout_that_does_not_exist_is_invalid(cluster):
    with pytest.raises(InvalidTopologyException, match=r"\[nope\]"):
        complete_topology(cluster, word_count_topology(), {"nope": [["a"]]})


def test_an_unmocked_spout_that_cannot_tell_when_it_is_done_is_refused(cluster):
    builder = TopologyBuilder()
    builder.set_spout("planner", TestPlannerSpout())
    with pytest.raises(InvalidTopologyException, match=r"CompletableSpout.*\[planner\]"):
        complete_topology(cluster, builder.create_topology())


def test_storms_test_word_spout_emits_its_words_at_its_pace_and_repeats_with_a_seed():
    """squall.testing's TestWordSpout: Storm's five words, one each ``interval_secs`` without
    blocking its worker (Storm's sleeps), the same words for the same seed and task."""
    from squall.testing import TestWordSpout
    from squall.testing._storm_components import WORDS

    class Context:
        def get_this_task_id(self):
            return 3

    class Collector:
        def __init__(self):
            self.emitted = []

        def emit(self, values, msg_id=None, stream="default"):
            self.emitted.append(values[0])

    def words(seed, interval_secs, calls):
        spout, out = TestWordSpout(seed=seed, interval_secs=interval_secs), Collector()
        spout.open({}, Context(), out)
        for _ in range(calls):
            spout.next_tuple()
        return out.emitted

    fast = words(7, 0, 200)
    assert len(fast) == 200 and set(fast) <= set(WORDS) and len(set(fast)) == len(WORDS)
    assert fast == words(7, 0, 200) != words(8, 0, 200)
    assert len(words(7, 3600, 50)) == 1  # one word, then none until its hour has passed


class NeverAcks(Bolt):
    """Emits what it gets, anchored, and never acks it: only a timeout completes the tuple."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))

    def execute(self, tup):
        self.collector.emit([tup[0]], anchors=tup)


def test_on_simulated_time_tuples_time_out_and_the_topology_completes():
    """Storm's completeTopology moves a simulated clock (11 s after the submission, 10 s at
    each look): squall's never did, and a tuple only a timeout completes waited out the test."""
    from squall import LocalCluster
    from squall.testing import SimulatedClock
    builder = TopologyBuilder()
    builder.set_spout("words", TestWordSpout())
    builder.set_bolt("stuck", NeverAcks()).shuffle_grouping("words")
    conf = Config()
    conf.set_message_timeout_secs(30)
    with LocalCluster(clock=SimulatedClock()) as cluster:
        results = complete_topology(cluster, builder.create_topology(), {"words": [["a"], ["b"]]}, conf,
                                    timeout_secs=20)
    assert read_tuples(results, "words") == [["a"], ["b"]]
    assert sorted(read_tuples(results, "stuck")) == [["a"], ["b"]]


def test_a_mocked_tuple_with_the_wrong_number_of_fields_is_named_at_once(cluster):
    builder = TopologyBuilder()
    builder.set_spout("words", TestWordSpout())
    with pytest.raises(InvalidTopologyException, match=r"mocked tuple \['a', 'extra'\] for spout \[words\] "
                                                       r"stream \[default\] has 2 values; the stream declares 1"):
        complete_topology(cluster, builder.create_topology(), {"words": [["a", "extra"], ["b"]]})


def test_a_feeder_spout_refuses_a_string_for_a_list_of_values():
    from squall.testing import FeederSpout
    with pytest.raises(TypeError, match="FeederSpout.feed takes a list of values, got str 'hello'"):
        FeederSpout(Fields("word")).feed("hello")


def test_a_feeder_spout_refuses_values_that_do_not_match_its_fields():
    """Before, feed took them, and the spout's worker crashed at the emit: the test saw only its
    wait run out (tracked_wait: "the spouts emitted 0 of the 1 tuples waited for")."""
    from squall.testing import FeederSpout
    feeder = FeederSpout(Fields("word", "count"))
    with pytest.raises(ValueError, match=r"^FeederSpout.feed: \['nathan'\] has 1 values for the 2 fields "
                                         r"\['word', 'count'\] of the spout$"):
        feeder.feed(["nathan"])
    feeder.feed(["nathan", 1])


class Completable(TestWordSpout):
    """Storm's CompletableSpout: its state is set up by startup() and dropped by clean()."""

    calls: list = []

    def startup(self):
        Completable.calls.append("startup")

    def is_exhausted(self):
        return "startup" in Completable.calls

    def clean(self):
        Completable.calls.append("clean")

    def next_tuple(self):
        pass


def test_completable_spouts_are_started_up_and_cleaned_and_nothing_captured_is_kept():
    """Storm calls startup() before the submission and clean() after (cleanupState), and drops
    what its capture bolt held: squall called neither, and every run's captures stayed."""
    from squall import LocalCluster
    from squall.testing import _registry
    held = set(_registry._memory)
    builder = TopologyBuilder()
    builder.set_spout("words", TestWordSpout())
    builder.set_spout("own", Completable())
    builder.set_bolt("echo", IdentityBolt()).shuffle_grouping("words")
    with LocalCluster() as cluster:
        results = complete_topology(cluster, builder.create_topology(), {"words": [["a"], ["b"]]})
    assert sorted(read_tuples(results, "echo")) == [["a"], ["b"]]
    assert Completable.calls == ["startup", "clean"]
    assert set(_registry._memory) == held


def test_a_feeder_spout_waits_for_its_reader_as_storms_does():
    """Storm's FeederSpout.waitForReader: until a task of the spout asked for a tuple. Before,
    squall's FeederSpout had no such method (AttributeError in a ported test)."""
    from squall import LocalCluster
    from squall.testing import FeederSpout
    feeder = FeederSpout(Fields("word"))
    with pytest.raises(TimeoutError, match=r"^FeederSpout.wait_for_reader: no task of the spout asked for a tuple "
                                           r"within 0.01 s \(is its topology submitted and active"):
        feeder.wait_for_reader(0.01)
    builder = TopologyBuilder()
    builder.set_spout("words", feeder, 2)
    with LocalCluster() as cluster:
        cluster.submit_topology("reader", {}, builder.create_topology())
        feeder.wait_for_reader()
