"""``topology.max.spout.pending: auto`` on a running topology: the tuner moves the limit and the
component page shows it (`squall.engine.pending_tuner`; the tuner itself is tested on synthetic
curves in tests/engine/test_pending_tuner.py)."""

from __future__ import annotations

import time

import pytest

from squall import Bolt, Config, Spout, TopologyBuilder, is_tick_tuple

from ..conftest import wait_until

DELAY = 0.05  # seconds each tuple is held: acked tuples/s = tuples in flight / DELAY


class CountingSpout(Spout):
    """Emits 0, 1, 2, ... with message ids, as fast as max spout pending lets it."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.n = 0

    def next_tuple(self):
        self.n += 1
        self.collector.emit([self.n], msg_id=self.n)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class DelayBolt(Bolt):
    """Holds every tuple DELAY seconds before acking it (on a fast tick): a topology whose
    throughput is set by the tuples in flight, so a higher limit always pays."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.held = []

    def execute(self, tup):
        now = time.monotonic()
        if not is_tick_tuple(tup):
            self.held.append((now, tup))
            return
        due = [t for t0, t in self.held if now - t0 >= DELAY]
        self.held = self.held[len(due):]
        for t in due:
            self.collector.ack(t)

    def declare_output_fields(self, declarer):
        pass


def executor_limits(cluster, name):
    page = cluster.get_component_page(name, "spout")
    return [e.get("maxSpoutPending") for e in page["executorStats"]]


@pytest.mark.hosts("process")
def test_auto_max_spout_pending_climbs_within_its_bounds_and_shows_in_the_stats(cluster):
    builder = TopologyBuilder()
    builder.set_spout("spout", CountingSpout()).set_max_spout_pending("auto")
    builder.set_bolt("delay", DelayBolt()).shuffle_grouping("spout").add_configuration(
        "topology.tick.tuple.freq.secs", 0.01)
    conf = Config()
    conf.update({"topology.max.spout.pending.auto.min": 4, "topology.max.spout.pending.auto.max": 64,
                 "topology.max.spout.pending.auto.interval.secs": 0.25})
    cluster.submit_topology("tuned", conf, builder.create_topology())
    seen = set()

    def at_the_top():
        limits = executor_limits(cluster, "tuned")
        seen.update(limit for limit in limits if limit is not None)  # None: no heartbeat yet
        return limits == [64]
    # 4 in flight: 80 tuples/s; each probe multiplies both by 4 until the bound (64: 1,280/s)
    assert wait_until(at_the_top, 20, 0.1), f"limits seen: {sorted(seen, key=str)}"
    assert all(4 <= limit <= 64 for limit in seen)
    page = cluster.get_component_page("tuned", "spout")
    assert [s["maxSpoutPending"] for s in page["spoutSummary"]] == [64] * 4
    assert page["taskStats"][0]["maxSpoutPending"] == 64
    assert page["spoutSummary"][-1]["failed"] == 0


def test_a_fixed_max_spout_pending_shows_in_the_stats_too(cluster):
    builder = TopologyBuilder()
    builder.set_spout("spout", CountingSpout()).set_max_spout_pending(7)
    builder.set_bolt("delay", DelayBolt()).shuffle_grouping("spout").add_configuration(
        "topology.tick.tuple.freq.secs", 0.01)
    cluster.submit_topology("fixed", {}, builder.create_topology())
    assert wait_until(lambda: executor_limits(cluster, "fixed") == [7], 10, 0.1)


def test_auto_with_acking_off_limits_nothing_and_shows_no_limit(cluster):
    """Nothing is tracked with acking off, so no limit applies (as with a number): the spout
    runs freely and the page's maxSpoutPending is null."""
    builder = TopologyBuilder()
    builder.set_spout("spout", CountingSpout()).set_max_spout_pending("auto")
    builder.set_bolt("delay", DelayBolt()).shuffle_grouping("spout")
    conf = Config()
    conf.set_num_ackers(0)
    cluster.submit_topology("untracked", conf, builder.create_topology())
    assert wait_until(lambda: cluster.get_topology_info("untracked")["components"]["spout"]["emitted"] > 1_000)
    page = cluster.get_component_page("untracked", "spout")
    assert [e["maxSpoutPending"] for e in page["executorStats"]] == [None]
    assert not cluster.get_topology_info("untracked")["errors"]
