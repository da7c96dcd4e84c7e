"""Backpressure (Storm 2: always on): a spout feeding a slower bolt is throttled, so the bolt's
inbox stays near ``topology.executor.receive.buffer.size`` instead of growing without bound."""

from __future__ import annotations

import time

import pytest

from squall import Config, TopologyBuilder

from ..conftest import wait_until
from .components import FloodSpout, SlowBolt

BUFFER = 100


def max_backlog(cluster, name, component, secs):
    """The largest inbox of ``component``'s tasks seen while sampling for ``secs``."""
    worst = 0
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        stats = cluster.get_topology_info(name)["components"][component]["task_stats"]
        worst = max([worst, *(s["backlog"] for s in stats.values())])
        time.sleep(0.01)
    return worst


@pytest.mark.parametrize("own_thread, workers", [(False, 1), (True, 1), (False, 2)],
                         ids=["same-loop", "own-thread", "other-worker"])
def test_a_flooding_spout_is_throttled_by_a_slow_bolt(cluster, own_thread, workers):
    """The spout emits unanchored tuples (max spout pending cannot help) to a bolt that stalls
    0.3 s on its first tuple, then takes 1 ms per tuple. Whether the bolt shares the spout's
    loop, has its own thread, or runs in another worker, its inbox must stay within a small
    multiple of the buffer size."""
    builder = TopologyBuilder()
    builder.set_spout("flood", FloodSpout())
    declarer = builder.set_bolt("slow", SlowBolt(0.001, first_secs=0.3)).shuffle_grouping("flood")
    if own_thread:
        declarer.set_own_thread()
    conf = Config()
    conf.set_num_workers(workers)
    conf["topology.executor.receive.buffer.size"] = BUFFER
    cluster.submit_topology("flood", conf, builder.create_topology())
    assert wait_until(lambda: cluster.get_topology_info("flood")["components"]["flood"]["emitted"] > 0)

    worst = max_backlog(cluster, "flood", "slow", 1.0)

    assert worst <= 10 * BUFFER, f"the slow bolt's inbox reached {worst} tuples (buffer {BUFFER})"
