"""A persistent window whose ``execute`` passes ``anchors=`` (its window's tuples) before a sink
that holds its results a while before writing them, whose worker then dies: every window's
result is still written, on LocalCluster.

A persistent window acks its inputs at the commit after they came, so a result anchored to them
joins a tuple tree already complete (or one its spout would replay into the window again): it
looks in a spout's tree, but nothing replays it. Since the checkpoint forwarder passes a
checkpoint over inputs in a spout's tree (2026-12-07, as Storm's), such results let the PREPARE
past the sink before it wrote them, the commit recorded their windows as fired, and the sink's
worker died with them: 20 ids in one 500 ms window (acked at the commits before it fired), its
result held at the sink, which crashed its worker 1 s later: ids 0..19 never written. A
persistent window's emits are now unanchored whatever ``anchors=`` says, so the checkpoint waits
at the sink for them, as it does for the results emitted without anchors."""

import time
from pathlib import Path

from squall import (
    BaseStatefulWindowedBolt,
    Bolt,
    Config,
    Duration,
    Fields,
    LocalCluster,
    TopologyBuilder,
    is_tick_tuple,
)

from ..conftest import wait_until
from .counting import ReplayingSpout, acked

N = 20
CRASHED = "crashed"  # the file the sink writes before it crashes its worker


class AnchoredSums(BaseStatefulWindowedBolt):
    """Emits each window's ids, anchored to the window's tuples."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("ids"))

    def execute(self, window):
        tuples = window.get()
        self.collector.emit([sorted(t[0] for t in tuples)], anchors=tuples)


class HoldsThenCrashes(Bolt):
    """Writes each result to ``written-<pid>.txt`` then acks it. Until it crashed once, it holds
    the results it gets (a sink that writes in the background), and at the first tick 1 s or
    more after the first came it raises, crashing its worker (Storm's fail-fast) with them
    unwritten."""

    def declare_output_fields(self, declarer):
        pass

    def get_component_configuration(self):
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 1}

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.dir = Path(conf["test.out.dir"])
        self.held = []
        self.since = None

    def execute(self, tup):
        if is_tick_tuple(tup):
            if self.held and time.monotonic() - self.since >= 1 and not (self.dir / CRASHED).exists():
                (self.dir / CRASHED).write_text(str(len(self.held)))
                raise RuntimeError(f"the sink's worker dies with {len(self.held)} result(s) not written")
            return
        if not (self.dir / CRASHED).exists():
            self.held.append(tup)
            self.since = self.since or time.monotonic()
            return
        with open(self.dir / "written.txt", "a") as f:
            f.write(" ".join(map(str, tup[0])) + "\n")
        self.collector.ack(tup)


def written(out: Path) -> list[int]:
    path = out / "written.txt"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def test_a_persistent_windows_anchored_results_lost_with_the_sinks_worker_fire_again(tmp_path):
    b = TopologyBuilder()
    b.set_spout("values", ReplayingSpout(N))
    b.set_bolt("sums", AnchoredSums().with_tumbling_window(Duration.of(500)).with_persistence()).global_grouping("values")
    b.set_bolt("sink", HoldsThenCrashes()).shuffle_grouping("sums")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(10)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    conf["topology.bolt.fail.fast"] = True
    conf["test.out.dir"] = str(tmp_path)
    with LocalCluster() as cluster:
        cluster.submit_topology("anchored", conf, b.create_topology())
        done = wait_until(lambda: set(written(tmp_path)) >= set(range(N)), 20, interval=0.1)
        info = cluster.get_topology_info("anchored")
        cluster.kill_topology("anchored", wait_secs=0)
    held = (tmp_path / CRASHED).read_text() if (tmp_path / CRASHED).exists() else None
    assert held is not None, "the sink never crashed its worker"
    assert any("not written" in e["error"] and e["fatal"] for e in info["errors"]), info["errors"]
    assert acked(tmp_path) >= set(range(N))
    ids = written(tmp_path)
    assert done, (f"{held} result(s) died with the sink's worker; ids never written: "
                  f"{sorted(set(range(N)) - set(ids))}")
    # each window once, or again when it fired again after the crash rolled it back
    assert all(ids.count(i) in (1, 2) for i in range(N)), ids
