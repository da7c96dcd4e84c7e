"""Backpressure (Storm 2: always on): a spout feeding a slower bolt is throttled, so the bolt's
inbox stays near ``topology.executor.receive.buffer.size`` instead of growing without bound."""

from __future__ import annotations

import time

import pytest

from squall import Config, TopologyBuilder

from ..conftest import wait_until
from .components import BatchAckBolt, EndlessReplayingSpout, FloodSpout, Recorder, ReliableFloodSpout, SlowAckBolt, SlowBolt

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


@pytest.mark.hosts("process")
@pytest.mark.parametrize("max_pending", [None, "auto"], ids=["unset", "auto"])
def test_a_bolt_that_acks_in_batches_larger_than_the_automatic_limit_is_not_starved(cluster, max_pending):
    """A bolt that acks its inputs in batches of 200 (once it holds 200), max spout pending left
    unset (as in Storm, where it is unlimited) or the tuner's. Each automatic limit started
    below 200 (64 per task unset, 16 for the tuner) and only moved on completions, of which
    there were none while no batch filled: unset, every tuple timed out and replayed forever (80
    of 1,000 acked in 60 s); the tuner took 37 timeouts and 528 failures before the replays held
    in the bolt made batches. Now the limit doubles while tuples time out and none completes,
    and the records flow within a few timeouts: each of the first 1,000 is acked, once (a failed
    one is replayed until it is), after 192 failures unset (64 + 128) and 112 with the tuner
    (16 + 32 + 64)."""
    recorder = Recorder()
    builder = TopologyBuilder()
    builder.set_spout("spout", EndlessReplayingSpout(recorder, 1000)).set_max_spout_pending(max_pending)
    builder.set_bolt("batch", BatchAckBolt(200)).shuffle_grouping("spout")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(1)
    cluster.submit_topology("batches", conf, builder.create_topology())

    def acked() -> list:
        return [m for _k, m in recorder.events("ack")]
    assert wait_until(lambda: len(set(acked())) == 1000, 60), \
        f"{len(set(acked()))} of the first 1000 acked, {recorder.count('fail')} failures"
    assert sorted(acked()) == list(range(1000))  # each once
    assert recorder.count("fail") <= 400
