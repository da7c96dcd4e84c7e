"""Storm's statistics are the same on every host: the topology page of a reliable topology at
sample rate 1.0 counts every tuple (the windows live in the workers, which heartbeat them)."""

from __future__ import annotations

import pytest

from squall import TopologyBuilder
from squall.testing import AckFailMapTracker

from ..conftest import wait_until
from .components import AckBolt, BranchingBolt
from .test_acking import tracked_feeder

N = 30


@pytest.mark.hosts
def test_the_topology_page_counts_every_tuple_at_rate_one_on_every_host(cluster):
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", BranchingBolt(2), 2).shuffle_grouping("1")
    builder.set_bolt("3", AckBolt(), 2).shuffle_grouping("2")
    cluster.submit_topology("stats", {"topology.stats.sample.rate": 1.0}, builder.create_topology())
    for i in range(N):
        feeder.feed([i], i)
    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(N)))

    def all_time() -> dict:
        page = cluster.get_topology_page("stats")
        return {"topology": next(w for w in page["topologyStats"] if w["window"] == ":all-time"),
                "bolts": {b["boltId"]: b for b in page["bolts"]}}
    # the workers' next heartbeats bring the last acks
    assert wait_until(lambda: all_time()["topology"]["acked"] == N)
    figures = all_time()
    assert figures["topology"]["failed"] == 0
    assert figures["bolts"]["2"]["executed"] == N and figures["bolts"]["2"]["emitted"] == 2 * N
    assert figures["bolts"]["3"]["executed"] == 2 * N and figures["bolts"]["3"]["acked"] == 2 * N
    ten_minutes = cluster.get_topology_page("stats", window="600")
    assert next(w for w in ten_minutes["topologyStats"] if w["window"] == "600")["acked"] == N
    assert ten_minutes["window"] == "600"
