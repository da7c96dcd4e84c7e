"""pystorm's BatchingBolt (batches between tick tuples), TicklessBatchingBolt (its own batching
thread) and a Bolt's process_tick, in squall's workers: every tuple is batched, processed and
acked once; ticks arrive at topology.tick.tuple.freq.secs."""

from __future__ import annotations

from streamparse import BatchingBolt, Bolt, Grouping, ReliableSpout, TicklessBatchingBolt, Topology

from squall import LocalCluster
from squall.sparse import translate
from squall.testing._registry import SharedLog
from tests.conftest import wait_until

WORDS = [w for i in range(10) for w in ("ant", "bee", "cat", "dog")[: i % 4 + 1]]  # 25 words


class Words(ReliableSpout):
    outputs = ["word"]
    acked: SharedLog

    def initialize(self, conf, context):
        self.i = 0

    def next_tuple(self):
        if self.i < len(WORDS):
            self.emit([WORDS[self.i]], tup_id=self.i)
            self.i += 1

    def ack(self, tup_id):
        super().ack(tup_id)
        self.acked.append(tup_id)


class TickBatches(BatchingBolt):
    outputs = ["word", "count"]
    config = {"topology.tick.tuple.freq.secs": 1}

    def group_key(self, tup):
        return tup.values[0]

    def process_batch(self, key, tups):
        self.emit([key, len(tups)])  # auto_anchor: to the batch; auto_ack: the batch after this


class TimerBatches(TicklessBatchingBolt):
    outputs = ["word", "count"]
    secs_between_batches = 0.05

    def group_key(self, tup):
        return tup.values[0]

    def process_batch(self, key, tups):
        self.emit([key, len(tups)])


class Ticked(Bolt):
    config = {"topology.tick.tuple.freq.secs": 1}
    ticks: SharedLog

    def process(self, tup):
        pass

    def process_tick(self, tup):
        self.ticks.append((tup.component, tup.stream))


class Totals(Bolt):
    seen: SharedLog

    def process(self, tup):
        self.seen.append((tup.component, tup.values[0], tup.values[1]))


class Batching(Topology):
    words = Words.spec()
    ticks = TickBatches.spec(inputs={words: Grouping.fields("word")}, par=2)
    timer = TimerBatches.spec(inputs={words: Grouping.fields("word")}, par=2)
    ticked = Ticked.spec(inputs=[words])
    totals = Totals.spec(inputs=[ticks, timer])


def test_batching_bolts_batch_process_and_ack_every_tuple_and_ticks_arrive() -> None:
    Words.acked, Ticked.ticks, Totals.seen = SharedLog(), SharedLog(), SharedLog()
    t = translate(Batching)

    with LocalCluster() as cluster:
        cluster.submit_topology("batching", t.conf, t.topology)
        # a spout tuple is acked once both batching bolts processed and acked its batch
        assert wait_until(lambda: len(Words.acked.items()) >= len(WORDS), 30)
        assert wait_until(lambda: len(Ticked.ticks.items()) >= 2, 30)
        errors = cluster.get_topology_info("batching")["errors"]

    assert sorted(Words.acked.items()) == list(range(len(WORDS)))
    expected = {w: WORDS.count(w) for w in set(WORDS)}
    for bolt in ("ticks", "timer"):
        counts: dict[str, int] = {}
        for component, word, n in Totals.seen.items():
            if component == bolt:
                counts[word] = counts.get(word, 0) + n
        assert counts == expected, bolt  # every word batched once: the batches' sizes add up
    assert set(Ticked.ticks.items()) == {("__system", "__tick")}
    assert errors == []
