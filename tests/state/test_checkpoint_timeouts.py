"""Checkpoints that time out behind a bolt that holds an input in no spout's tree: what the user
is told, on LocalCluster."""

import logging

from squall import BaseStatefulBolt, Bolt, Config, Fields, LocalCluster, Spout, TopologyBuilder

from ..conftest import wait_until


class OneRecord(Spout):
    """Emits one record, once, without a message id: in no spout's tree, so a checkpoint waits
    for the bolt to ack it (a persistent window's result is the common case).

    (Until 2026-12-07 it had a message id: the checkpoints waited behind every input a bolt
    held. They pass a bolt's inputs in a spout's tree now, as Storm's do.)"""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.sent = False

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            self.collector.emit([1])


class NeverAcks(Bolt):
    """Holds every input (a call that has not returned): the checkpoints behind it wait."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def execute(self, tup):
        pass


class Count(BaseStatefulBolt):
    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.collector.ack(tup)


def test_checkpoints_that_time_out_are_not_named_a_replay_storm_of_max_spout_pending(caplog):
    """The checkpoint spout keeps one step in flight whatever topology.max.spout.pending says;
    each of its timeouts was taken for a replay storm that the limit let in: "1 tuples timed out
    ... topology.max.spout.pending 8 (per task) lets more tuples wait than the topology
    completes", advice that changes nothing for it."""
    b = TopologyBuilder()
    b.set_spout("records", OneRecord())
    b.set_bolt("hold", NeverAcks()).shuffle_grouping("records")
    b.set_bolt("count", Count()).shuffle_grouping("hold")
    conf = Config()
    conf.set_max_spout_pending(8)
    conf.set_message_timeout_secs(0.3)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    caplog.set_level(logging.WARNING, logger="squall")
    with LocalCluster() as cluster:
        cluster.submit_topology("held", conf, b.create_topology())
        assert wait_until(lambda: cluster.get_topology_info("held")["components"]["$checkpointspout"]["failed"] >= 3, 30)
    storms = [r.getMessage() for r in caplog.records if "replay storm" in r.getMessage()]
    assert not [m for m in storms if "$checkpointspout" in m], storms


def test_checkpoints_that_time_out_again_and_again_say_why_none_goes_through():
    """A bolt before a stateful one holds its input longer than the message timeout: every
    checkpoint step waits behind them and times out, the recovery's too, for ever. Each said
    only "checkpoint txid -1 failed, timed out (topology.message.timeout.secs); recovering"
    (22 such lines in 90 s, and not one commit, behind a slow bolt). The third in a row is
    reported as an error of the topology, naming why and the settings that end it."""
    b = TopologyBuilder()
    b.set_spout("records", OneRecord())
    b.set_bolt("hold", NeverAcks()).shuffle_grouping("records")
    b.set_bolt("count", Count()).shuffle_grouping("hold")
    conf = Config()
    conf.set_message_timeout_secs(0.3)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    with LocalCluster() as cluster:
        cluster.submit_topology("held", conf, b.create_topology())

        def errors():
            return [e["error"] for e in cluster.get_topology_info("held")["components"]["$checkpointspout"]["errors"]]
        assert wait_until(lambda: any("no checkpoint went through" in e for e in errors()), 30), errors()
        failed = cluster.get_topology_info("held")["components"]["$checkpointspout"]["failed"]
        said = [e for e in errors() if "no checkpoint went through" in e]
    # at the third in a row, then at the sixth, the twelfth ...: not a line per step
    assert 1 <= len(said) <= 1 + (failed >= 6) + (failed >= 12), (said, failed)
    for named in ("3 steps in a row", "timed out (topology.message.timeout.secs 0.3 s)", "inbox",
                  "topology.max.spout.pending", "more executors"):
        assert named in said[0], (named, said[0])
