"""Checkpoints that time out behind a bolt that holds a persistent window's result (in no spout's
tree): what the user is told, on LocalCluster."""

import logging

from squall import (
    BaseStatefulBolt,
    BaseStatefulWindowedBolt,
    Bolt,
    Config,
    Fields,
    LocalCluster,
    Spout,
    TopologyBuilder,
)
from squall import Count as Tuples  # (a window's length; Count below is a bolt)

from ..conftest import wait_until


class OneRecord(Spout):
    """Emits one record, once (with a message id)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.sent = False

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            self.collector.emit([1], 1)


class OneResult(BaseStatefulWindowedBolt):
    """A persistent window of one record: its result is in no spout's tree (Storm's unanchored
    emit), so a checkpoint waits for the bolt after it to ack it.

    (Until 2026-12-07 the record itself was emitted without a message id, which held the
    checkpoints too. An unreliable emit no longer does, as in Storm: only what may carry a
    persistent window's results.)"""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        for t in window.get():
            self.collector.emit([t[0]])


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


def _held_topology():
    b = TopologyBuilder()
    b.set_spout("records", OneRecord())
    b.set_bolt("window", OneResult().with_tumbling_window(Tuples.of(1)).with_persistence()).shuffle_grouping("records")
    b.set_bolt("hold", NeverAcks()).shuffle_grouping("window")
    b.set_bolt("count", Count()).shuffle_grouping("hold")
    return b.create_topology()


def test_checkpoints_that_time_out_are_not_named_a_replay_storm_of_max_spout_pending(caplog):
    """The checkpoint spout keeps one step in flight whatever topology.max.spout.pending says;
    each of its timeouts was taken for a replay storm that the limit let in: "1 tuples timed out
    ... topology.max.spout.pending 8 (per task) lets more tuples wait than the topology
    completes", advice that changes nothing for it."""
    conf = Config()
    conf.set_max_spout_pending(8)
    conf.set_message_timeout_secs(0.3)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    caplog.set_level(logging.WARNING, logger="squall")
    with LocalCluster() as cluster:
        cluster.submit_topology("held", conf, _held_topology())
        assert wait_until(lambda: cluster.get_topology_info("held")["components"]["$checkpointspout"]["failed"] >= 3, 30)
    storms = [r.getMessage() for r in caplog.records if "replay storm" in r.getMessage()]
    assert not [m for m in storms if "$checkpointspout" in m], storms


def test_checkpoints_that_time_out_again_and_again_say_why_none_goes_through():
    """A bolt before a stateful one holds its input longer than the message timeout: every
    checkpoint step waits behind them and times out, the recovery's too, for ever. Each said
    only "checkpoint txid -1 failed, timed out (topology.message.timeout.secs); recovering"
    (22 such lines in 90 s, and not one commit, behind a slow bolt). The third in a row is
    reported as an error of the topology, naming why and the settings that end it."""
    conf = Config()
    conf.set_message_timeout_secs(0.3)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    with LocalCluster() as cluster:
        cluster.submit_topology("held", conf, _held_topology())

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


def test_with_message_timeouts_off_a_checkpoint_held_for_good_is_reported_once_after_the_bound_set():
    """With topology.enable.message.timeouts false the checkpoint spout waits for its step for
    ever: no new checkpoint came to the bolt that held it, which looked only then, and a
    checkpoint held for good behind a kept window result was never reported (nothing in 20 s).
    Now a timer of the bolt's reports it once it has waited
    topology.state.checkpoint.held.report.secs (30 s when not set), naming the bolt, the txid
    and the key, once."""
    conf = Config()
    conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS] = False
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_HELD_REPORT_SECS] = 1
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    with LocalCluster() as cluster:
        cluster.submit_topology("held", conf, _held_topology())

        def errors():
            return [e["error"] for e in cluster.get_topology_info("held")["components"]["hold"]["errors"]]
        assert wait_until(lambda: errors(), 20), "no report of the held checkpoint in 20 s"
        assert not wait_until(lambda: len(errors()) > 1, 2.5), errors()  # once, though it is still held
        said = errors()
    assert len(said) == 1, said
    assert said[0].startswith("component [hold] task "), said[0]
    for named in ("checkpoint PREPARE at txid ", "over topology.state.checkpoint.held.report.secs 1)",
                  "behind 1 input(s) [hold] has neither acked nor failed that may carry a persistent window's results"):
        assert named in said[0], (named, said[0])


def test_the_bound_of_a_held_checkpoint_is_the_message_timeout_or_30_s_with_timeouts_off():
    from squall.state._bolt import overdue_bound
    assert (overdue_bound({}).secs, str(overdue_bound({}))) == (30.0, "topology.message.timeout.secs 30")
    off = overdue_bound({Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: False})
    assert (off.secs, str(off)) == (30.0, ("topology.state.checkpoint.held.report.secs 30, the bound with "
                                           "topology.enable.message.timeouts false"))
    given = overdue_bound({Config.TOPOLOGY_STATE_CHECKPOINT_HELD_REPORT_SECS: 5,
                           Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 60})
    assert (given.secs, str(given)) == (5.0, "topology.state.checkpoint.held.report.secs 5")



def test_on_a_simulated_clock_a_checkpoint_held_past_the_bound_is_reported_once():
    """The report's timer runs on the engine's clock, but the held checkpoints were timed by
    real time: on a simulated clock (`squall.testing.SimulatedClock`, as Storm's simulated
    time) moved 45 s, past the 30 s bound, in about 2 s of real time, nothing was reported (0
    reports in 8 s more). Now both go by the engine's clock: reported once, however far the
    clock moves on."""
    import time

    from squall.testing import SimulatedClock
    conf = Config()
    conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS] = False  # the bound: 30 s
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    with LocalCluster(clock=SimulatedClock(1000.0)) as cluster:
        cluster.submit_topology("held", conf, _held_topology())

        def errors():
            return [e["error"] for e in cluster.get_topology_info("held")["components"]["hold"]["errors"]]

        def moved_and_reported():  # simulated time at 10 s a real second, in small steps, so
            cluster.advance_cluster_time(0.5)  # the checkpoints and the window move as they would
            time.sleep(0.05)
            return errors()
        # real time measured it, 30 real seconds were needed
        assert wait_until(moved_and_reported, 15, interval=0), "no report of the held checkpoint in 15 s"
        for _ in range(80):  # 40 s more: still one report
            moved_and_reported()
        said = errors()
    assert len(said) == 1, said
    assert said[0].startswith("component [hold] task "), said[0]
    assert "over topology.state.checkpoint.held.report.secs 30, the bound with topology.enable.message.timeouts false" \
        in said[0], said[0]
