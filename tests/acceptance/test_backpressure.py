"""Backpressure (Storm 2: always on): a spout feeding a slower bolt is throttled, so the bolt's
inbox stays near ``topology.executor.receive.buffer.size`` instead of growing without bound."""

from __future__ import annotations

import time

import pytest

from squall import Config, TopologyBuilder

from ..conftest import wait_until
from .components import FloodSpout, ReliableFloodSpout, SlowAckBolt, SlowBolt

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


def test_with_default_settings_a_slow_bolt_holds_the_spout_back_before_tuples_time_out(cluster):
    """Acking on and nothing tuned but a short message timeout: a spout emitting as fast as it
    may, into a bolt taking 1 ms per tuple in the other worker. Storm's default (unlimited max
    spout pending) queued up to the receive buffer, 32 s of work, and timed tuples out from 2T
    on; squall's automatic max spout pending keeps the queued work within the timeout."""
    builder = TopologyBuilder()
    builder.set_spout("flood", ReliableFloodSpout())
    builder.set_bolt("slow", SlowAckBolt(0.001)).shuffle_grouping("flood")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(2)
    cluster.submit_topology("slow", conf, builder.create_topology())

    def spout(key):
        return cluster.get_topology_info("slow")["components"]["flood"][key]
    assert not wait_until(lambda: spout("failed") > 0, 5.0), f"{spout('failed')} tuples timed out"
    assert spout("acked") > 0
