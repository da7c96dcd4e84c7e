"""Storm's statistics are the same on every host: the topology page of a reliable topology at
sample rate 1.0 counts every tuple (the windows live in the workers, which heartbeat them)."""

from __future__ import annotations

import pytest

from squall import Config, TopologyBuilder
from squall.testing import AckFailMapTracker

from ..conftest import wait_until
from .components import (
    AckBolt,
    BranchingBolt,
    Counter,
    FailBranchOneOfElevenBolt,
    FailHoldOrBranchBolt,
    SlowAckBolt,
    TickCountingBasicBolt,
    TickCountingBolt,
)
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


@pytest.mark.hosts
def test_tick_tuples_are_not_counted_as_a_bolts_inputs_on_every_host(cluster):
    """A bolt's executed, acked and failed counts (``get_topology_info``, ``squall info``) are
    its data inputs, as the UI shows them: Storm's UI leaves the ``__tick`` stream out of a
    bolt's figures; with ``sys`` the component page shows it as an input stream of its own."""
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    basic_ticks, plain_ticks = Counter(), Counter()
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    (builder.set_bolt("basic", TickCountingBasicBolt(basic_ticks), 2).shuffle_grouping("1")
     .add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 0.05))
    (builder.set_bolt("plain", TickCountingBolt(plain_ticks), 2).shuffle_grouping("basic")
     .add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 0.05))
    cluster.submit_topology("ticks", {"topology.stats.sample.rate": 1.0, "topology.workers": 2},
                            builder.create_topology())
    for i in range(N):
        feeder.feed([i], i)
    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(N)))
    assert wait_until(lambda: basic_ticks.value >= 8 and plain_ticks.value >= 8)

    def ticks_seen(component: str) -> dict:
        page = cluster.get_component_page("ticks", component, sys=True)
        return next((s for s in page["inputStats"] if s["stream"] == "__tick"), {"executed": 0})
    # the master has the workers' figures of after the ticks (remote hosts: a heartbeat later)
    assert wait_until(lambda: ticks_seen("basic")["executed"] >= 8 and ticks_seen("plain")["executed"] >= 8)
    assert ticks_seen("basic")["component"] == "__system"

    def counts(component: str) -> tuple:
        c = cluster.get_topology_info("ticks")["components"][component]
        return c["executed"], c["acked"], c["failed"]
    assert counts("basic") == (N, N, 0)
    assert counts("plain") == (N, N, 0)
    bolts = {b["boltId"]: b for b in cluster.get_topology_page("ticks")["bolts"]}
    assert [(bolts[c]["executed"], bolts[c]["acked"], bolts[c]["failed"]) for c in ("basic", "plain")] == \
        [(N, N, 0), (N, N, 0)]
    assert all(not tracker.is_failed(i) for i in range(N))


FAILING_N = 100


@pytest.mark.hosts("process")  # Spark's master is the same code; its host adds 8 s of submit to the suite
def test_failures_and_timeouts_read_what_happened_at_storms_default_rate(cluster):
    """Explicit fails at two bolts and timeouts of tuples a bolt holds, at Storm's default sample
    rate (0.05): the figures squall keeps exact at any rate (a spout's acked and failed, every
    failed count, emitted and transferred: docs/ui.md) equal what the test counts happened, on
    the topology page, the component pages' stream and executor rows, and the exact counters of
    ``get_topology_info`` (the trust trial, tests/process, checks the failed counts through a
    worker's SIGKILL and /metrics)."""
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("split", FailHoldOrBranchBolt(), 2).shuffle_grouping("1")
    builder.set_bolt("sink", FailBranchOneOfElevenBolt(), 2).shuffle_grouping("split")
    cluster.submit_topology("failing", {"topology.message.timeout.secs": 1, "topology.workers": 2},
                            builder.create_topology())
    numbers = range(1, FAILING_N + 1)
    for n in numbers:
        feeder.feed([n], n)
    failed_at_split = [n for n in numbers if n % 5 == 0]
    held = [n for n in numbers if n % 5 and n % 7 == 0]
    branched = [n for n in numbers if n % 5 and n % 7]
    failed_at_sink = [n for n in branched if n % 11 == 0]
    acked = [n for n in branched if n % 11]
    assert wait_until(lambda: all(tracker.is_acked(n) or tracker.is_failed(n) for n in numbers), 60)
    assert [n for n in numbers if tracker.is_acked(n)] == acked
    failed = len(failed_at_split) + len(held) + len(failed_at_sink)  # 20 + 11 + 6

    def page() -> dict:
        return cluster.get_topology_page("failing")
    # the workers' next heartbeats bring the last figures
    assert wait_until(lambda: next(w for w in page()["topologyStats"] if w["window"] == ":all-time")["failed"]
                      == failed)
    top = page()
    for window in top["topologyStats"]:
        assert (window["acked"], window["failed"]) == (len(acked), failed), window
        assert window["emitted"] == window["transferred"] == FAILING_N + 2 * len(branched), window
    spout, = top["spouts"]
    assert (spout["emitted"], spout["transferred"], spout["acked"], spout["failed"]) == \
        (FAILING_N, FAILING_N, len(acked), failed)
    bolts = {b["boltId"]: b for b in top["bolts"]}
    assert (bolts["split"]["emitted"], bolts["split"]["transferred"], bolts["split"]["failed"]) == \
        (2 * len(branched), 2 * len(branched), len(failed_at_split))
    assert bolts["sink"]["failed"] == len(failed_at_sink)
    for component, source, failures in (("split", "1", failed_at_split), ("sink", "split", failed_at_sink)):
        comp = cluster.get_component_page("failing", component)
        assert [(s["component"], s["stream"], s["failed"]) for s in comp["inputStats"]] == \
            [(source, "default", len(failures))]
        assert sum(e["failed"] for e in comp["executorStats"]) == len(failures)
    spout_page = cluster.get_component_page("failing", "1")
    assert [(s["stream"], s["emitted"], s["acked"], s["failed"]) for s in spout_page["outputStats"]] == \
        [("default", FAILING_N, len(acked), failed)]
    # the engine's exact counters, what squall info and squall monitor show, agree
    info = cluster.get_topology_info("failing")["components"]
    assert (info["1"]["acked"], info["1"]["failed"]) == (len(acked), failed)
    assert (info["split"]["executed"], info["split"]["acked"], info["split"]["failed"]) == \
        (FAILING_N, len(branched), len(failed_at_split))
    assert (info["sink"]["executed"], info["sink"]["acked"], info["sink"]["failed"]) == \
        (2 * len(branched), 2 * len(branched) - len(failed_at_sink), len(failed_at_sink))


def test_a_slow_bolts_executed_count_keeps_up_with_its_acks(cluster):
    """A bolt on its own thread takes 0.2 s per input and acks it; 30 are fed at once. Its
    ``executed`` counts each input as its execute returns: halfway, it reads the acks less at
    most the input being executed. Before, it was added once per run of unsampled inputs (up to
    ``1 / topology.stats.sample.rate`` - 1 long: here 99, 20 s): after 16 s a 0.5 s bolt read
    acked 31, executed 14, and a 2 s one acked 8, executed 0."""
    feeder, tracker = tracked_feeder(tracker=AckFailMapTracker())
    builder = TopologyBuilder()
    builder.set_spout("1", feeder)
    builder.set_bolt("2", SlowAckBolt(0.2)).shuffle_grouping("1").set_own_thread()
    cluster.submit_topology("slow-executed", {"topology.stats.sample.rate": 0.01}, builder.create_topology())
    for i in range(N):
        feeder.feed([i], i)

    def figures() -> tuple[int, int]:
        c = cluster.get_topology_info("slow-executed")["components"]["2"]
        return c["acked"], c["executed"]
    for mark in (N // 3, 2 * N // 3):
        assert wait_until(lambda: figures()[0] >= mark, 20)  # noqa: B023 (called at once)
        acked, executed = figures()
        assert acked - 1 <= executed <= acked + 1, (mark, acked, executed)
    assert wait_until(lambda: all(tracker.is_acked(i) for i in range(N)), 20)
    assert wait_until(lambda: figures() == (N, N))
