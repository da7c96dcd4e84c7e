"""A windowed bolt without state after a persistent window: refused at create_topology.

A persistent window's results are unanchored (its inputs are acked at its commit), and a plain
windowed bolt keeps what it takes in windows in memory while checkpoints pass it (it acks an
input only when it leaves its last window). On LocalCluster, a persistent window of one id into
a plain count window of 100 that held 50 results of committed windows when its worker crashed:
those 50 never came out (2 runs), the first window's commit having recorded them as fired. The
way out the error names, the second window stateful with persistence, commits its windows with
the checkpoints: 300 of 300 across the same crash."""

from pathlib import Path

import pytest

from squall import (
    BaseStatefulWindowedBolt,
    BaseWindowedBolt,
    BasicBolt,
    Bolt,
    Config,
    Count,
    Fields,
    InvalidTopologyException,
    LocalCluster,
    TopologyBuilder,
)
from squall.testing import AckFailMapTracker, FeederSpout

from ..conftest import wait_until


class Results(BaseStatefulWindowedBolt):
    """Passes on each id of its windows: persistent, of one id, each id a result; of 100, the
    stateful window the error names as the way out."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        for t in window.get():
            self.collector.emit([t[0]])


class PassOn(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def execute(self, tup):
        self.collector.emit([tup[0]], anchors=tup)
        self.collector.ack(tup)


class PlainIds(BaseWindowedBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def execute(self, window):
        for t in window.get():
            self.collector.emit([t[0]])


def _after_results(last, through_a_plain_bolt=False, stream="default"):
    b = TopologyBuilder()
    b.set_spout("ids", FeederSpout(Fields("id", "ts")))
    b.set_bolt("results", Results().with_tumbling_window(Count(1)).with_persistence()).shuffle_grouping("ids")
    if through_a_plain_bolt:
        b.set_bolt("relay", PassOn()).shuffle_grouping("results")
    b.set_bolt("windows", last).shuffle_grouping("relay" if through_a_plain_bolt else "results", stream)
    return b


@pytest.mark.parametrize("through_a_plain_bolt", [False, True], ids=["direct", "through a plain bolt"])
def test_a_windowed_bolt_without_state_after_a_persistent_window_is_refused(through_a_plain_bolt):
    b = _after_results(PlainIds().with_tumbling_window(Count(20)), through_a_plain_bolt)
    with pytest.raises(InvalidTopologyException) as e:
        b.create_topology()
    via = ", through [relay]" if through_a_plain_bolt else ""
    assert str(e.value) == (
        f"Component [windows]: a windowed bolt without state cannot take the results of the persistent window "
        f"[results] (stream [default]{via}): they are unanchored, and [windows] keeps them only in memory while "
        f"checkpoints pass it, so a worker that dies loses the ones its windows held after [results]'s commit "
        f"recorded them as fired. Make [windows] a stateful windowed bolt with persistence (a "
        f"BaseStatefulWindowedBolt, .with_persistence()): its windows are then committed with the checkpoints and "
        f"restored")


def test_a_windowed_bolt_without_state_may_take_a_late_stream_anchored_to_spout_tuples():
    """A persistent window fed by a spout sends its late tuples anchored to them: they replay."""
    b = TopologyBuilder()
    b.set_spout("ids", FeederSpout(Fields("id", "ts")))
    b.set_bolt("results", Results().with_tumbling_window(Count(1)).with_timestamp_field("ts")
               .with_late_tuple_stream("late").with_persistence()).shuffle_grouping("ids")
    b.set_bolt("windows", PlainIds().with_tumbling_window(Count(20))).shuffle_grouping("results", "late")
    b.create_topology()


class Bomb(Bolt):
    """Acks every id; raises on -1, which crashes its worker (topology.bolt.fail.fast)."""

    def execute(self, tup):
        if tup[0] < 0:
            raise RuntimeError("the worker dies (test)")
        self.collector.ack(tup)


class Written(BasicBolt):
    def prepare(self, conf, context):
        self.out = open(Path(conf["test.out.dir"]) / "written.txt", "a")  # noqa: SIM115

    def execute(self, tup, collector):
        if tup[0] >= 0:
            self.out.write(f"{tup[0]}\n")
            self.out.flush()


def test_the_way_out_a_persistent_window_after_one_counts_every_id_across_a_worker_crash(tmp_path):
    """One worker. 150 ids fed and acked at the spout (the first window's commit), so the second
    window holds 50 results of committed windows; a bolt of the worker raises (fail fast: the
    worker crashes and restarts), then 150 ids more. With a plain count window there (main
    allowed it) 100..149 never came out: 200 of 300 written, the 50 lost and the 50 of the
    last window that never filled (2 runs). Persistent, its windows come back as committed:
    all 300 written, each once."""
    feeder = FeederSpout(Fields("id"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("ids", feeder)
    b.set_bolt("results", Results().with_tumbling_window(Count(1)).with_persistence()).shuffle_grouping("ids")
    b.set_bolt("windows", Results().with_tumbling_window(Count(100)).with_persistence()).shuffle_grouping("results")
    b.set_bolt("sink", Written()).shuffle_grouping("windows")
    b.set_bolt("bomb", Bomb()).shuffle_grouping("ids")
    conf = Config()
    conf["test.out.dir"] = str(tmp_path)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    conf[Config.TOPOLOGY_BOLT_FAIL_FAST] = True
    conf.set_message_timeout_secs(10)
    written_file = tmp_path / "written.txt"

    def written():
        return [int(x) for x in written_file.read_text().split()] if written_file.exists() else []

    with LocalCluster() as cluster:
        cluster.submit_topology("kept", conf, b.create_topology())

        def restarts():
            return cluster.get_topology_info("kept")["workers"][0]["restarts"]

        for i in range(150):
            feeder.feed([i], i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(150)), 15), "the first 150 never acked"
        assert wait_until(lambda: len(written()) >= 100, 5), f"{len(written())} written of the first window"
        feeder.feed([-1], -1)
        assert wait_until(lambda: restarts() >= 1, 10), "the worker never crashed"
        for i in range(150, 300):
            feeder.feed([i], i)
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(150, 300)), 15), "the last 150 never acked"
        complete = wait_until(lambda: len(written()) >= 300, 10, interval=0.1)
        crashes = restarts()
    lines = written()
    print(f"300 ids fed, {sum(tracker.is_acked(i) for i in range(300))} acked, {len(set(lines))} written "
          f"({len(lines)} lines), {crashes} worker restart(s)")
    assert complete and sorted(lines) == list(range(300)), \
        f"{len(set(range(300)) - set(lines))} of 300 ids never written: {sorted(set(range(300)) - set(lines))[:20]}"
