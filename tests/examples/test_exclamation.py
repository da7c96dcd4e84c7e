"""examples/exclamation.py: "!!!" twice, anchored all the way, from a spout that never blocks."""

from __future__ import annotations

import time
from collections import Counter

from squall import Bolt, Fields, StormTopology, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout, complete_topology, read_tuples

from ..conftest import wait_until
from .conftest import RecordingCollector, StubContext


def test_module_defines_build_and_conf(exclamation):
    topology = exclamation.build()
    assert isinstance(topology, StormTopology)
    assert exclamation.conf["topology.workers"] == 3


def test_exclaim2_emits_every_word_with_six_exclamation_marks(exclamation):
    words = [[w] for w in exclamation.WORDS] * 8
    result = complete_topology(None, exclamation.build(), {"word": words}, storm_conf=exclamation.conf)
    assert Counter(w for [w] in read_tuples(result, "exclaim1")) == Counter(w + "!!!" for [w] in words)
    assert Counter(w for [w] in read_tuples(result, "exclaim2")) == Counter(w + "!!!!!!" for [w] in words)


def test_words_are_acked_once_through_both_bolts(exclamation, cluster):
    feeder = FeederSpout(Fields("word"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    for i, w in enumerate(exclamation.WORDS):
        feeder.feed([w], i)
    cluster.submit_topology("exclamation", exclamation.conf, exclamation.build(feeder))
    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(5)), 10)
    assert not any(tracker.is_failed(i) for i in range(5))


class FailEverything(Bolt):
    """Fails every input, to show that a failure downstream of both bolts reaches the spout."""

    def execute(self, tup):
        """Fail the input."""
        self.collector.fail(tup)


def test_emits_are_anchored_so_a_downstream_failure_reaches_the_spout(exclamation, cluster):
    feeder = FeederSpout(Fields("word"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("word", feeder)
    builder.set_bolt("exclaim1", exclamation.ExclamationBolt(), 3).shuffle_grouping("word")
    builder.set_bolt("exclaim2", exclamation.ExclamationBolt(), 2).shuffle_grouping("exclaim1")
    builder.set_bolt("fail", FailEverything()).shuffle_grouping("exclaim2")
    for i in range(4):
        feeder.feed(["mike"], i)
    cluster.submit_topology("exclamation-fail", exclamation.conf, builder.create_topology())
    assert wait_until(lambda: all(tracker.is_failed(i) for i in range(4)), 10)
    assert not any(tracker.is_acked(i) for i in range(4))


def test_word_spout_never_blocks_and_keeps_its_interval(exclamation):
    spout = exclamation.TestWordSpout(interval_secs=60)
    out = RecordingCollector()
    spout.open({}, StubContext(), out)
    start = time.monotonic()
    for _ in range(1000):
        spout.next_tuple()
    assert time.monotonic() - start < 0.5  # Storm's would have slept 100 s
    assert len(out.emitted) == 1  # the first word at once, the next not before 60 s
    assert out.emitted[0][0][0] in exclamation.WORDS


def test_word_spout_without_interval_emits_on_every_call_reproducibly(exclamation):
    def run(task_id):
        spout = exclamation.TestWordSpout(interval_secs=0, seed=7)
        out = RecordingCollector()
        spout.open({}, StubContext(task_id=task_id), out)
        for _ in range(50):
            spout.next_tuple()
        return out.emitted

    first = run(1)
    assert len(first) == 50 and {v[0] for v, _ in first} <= set(exclamation.WORDS)
    assert [msg_id for _, msg_id in first] == list(range(50))
    assert run(1) == first
    assert run(2) != first  # tasks of one seeded spout do not emit the same sequence
