"""A spout's emits without a message id (at most once, by the user's choice), kept un-acked by a
bolt that batches them, in a topology with a stateful bolt, on LocalCluster.

Storm's checkpoint forwarder never waits for such tuples. squall's waited for every input in no
spout's tree (to keep a persistent window's results, which are in none either, from being lost):
a batching bolt that had not filled its batch held every checkpoint, and no stateful bolt of the
topology committed, the ones on other, reliable branches too. Measured (checkpoints every 100 ms,
an unreliable spout of 100 records a second into batches of 50, 10 s): 31 and 36 commits before,
96 and 98 now (the records counted, 950 to 1,000, are the batches flushed either way). Here the
batch never fills: 300 reliable records on another branch, 0 committed in 20 s before; now all
300, in about a second."""

from squall import Config, Fields, LocalCluster, Spout, TopologyBuilder

from ..conftest import wait_until
from .batching import Batcher, NotedCountIds, commits
from .counting import ReplayingSpout


class Unreliable(Spout):
    """Emits ids 0..n-1 once each, without a message id."""

    def __init__(self, n):
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.next = 0

    def next_tuple(self):
        if self.next < self.n:
            self.collector.emit([self.next])
            self.next += 1


def test_a_batching_bolt_that_keeps_unreliable_emits_holds_no_stateful_bolts_commit(tmp_path):
    b = TopologyBuilder()
    b.set_spout("unreliable", Unreliable(100))
    b.set_bolt("batch", Batcher(size=1_000), 1).shuffle_grouping("unreliable")  # never fills
    b.set_bolt("tally", NotedCountIds(), 1).shuffle_grouping("batch")
    b.set_spout("source", ReplayingSpout(300))
    b.set_bolt("count", NotedCountIds(), 1).shuffle_grouping("source")
    conf = Config()
    conf["test.out.dir"] = str(tmp_path)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    conf.set_message_timeout_secs(5)
    with LocalCluster() as cluster:
        cluster.submit_topology("unreliable", conf, b.create_topology())

        def committed():  # the one task of [count]'s committed state
            states = (cluster.get_state("unreliable", f"count-{task}") for task in range(1, 10))
            return next((dict(s.committed()) for s in states if s is not None), {})
        done = wait_until(lambda: len(committed()) == 300, 20)
        counted = committed()
        made = commits(tmp_path)
    print(f"300 reliable records beside 100 unreliable ones a batching bolt keeps: {len(counted)} committed, "
          f"{made} commits")
    assert done and counted == dict.fromkeys(range(300), 1), f"{len(counted)} of 300 records committed, {made} commits"
