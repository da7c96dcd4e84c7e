"""Storm's statistics pages of a running topology on LocalCluster."""

from __future__ import annotations

import time

import pytest

from squall import Bolt, Fields, LocalCluster, NotAliveException, Spout, TopologyBuilder

N = 1000


class Words(Spout):
    def open(self, conf, context, collector):
        self.collector = collector
        self.n = 0

    def next_tuple(self):
        if self.n < N:
            self.n += 1
            self.collector.emit(["ab"], msg_id=self.n)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("w"))


class Split(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        for ch in tup[0]:
            self.collector.emit([ch], anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("ch"))


class Sink(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        pass


def _run(cluster: LocalCluster, rate: float) -> None:
    b = TopologyBuilder()
    b.set_spout("words", Words(), 1)
    b.set_bolt("split", Split(), 2).shuffle_grouping("words")
    b.set_bolt("sink", Sink(), 1).fields_grouping("split", Fields("ch"))
    cluster.submit_topology("t", {"topology.stats.sample.rate": rate}, b.create_topology())
    deadline = time.monotonic() + 30
    while cluster.get_topology_info("t")["components"]["words"]["acked"] < N:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_at_rate_one_the_pages_count_every_tuple_with_storms_fields():
    with LocalCluster() as cluster:
        _run(cluster, 1.0)
        page = cluster.get_topology_page("t")
        assert {s["window"] for s in page["topologyStats"]} == {"600", "10800", "86400", ":all-time"}
        for window in page["topologyStats"]:
            assert window["acked"] == N and window["failed"] == 0
            assert window["emitted"] == N + 2 * N  # spout + split, system streams hidden
        bolts = {b["boltId"]: b for b in page["bolts"]}
        split, sink = bolts["split"], bolts["sink"]
        assert split["executed"] == N and split["acked"] == N and split["emitted"] == 2 * N
        assert sink["executed"] == 2 * N
        assert set(split) >= {"boltId", "executors", "tasks", "emitted", "transferred", "acked", "failed",
                              "executed", "capacity", "executeLatency", "processLatency", "lastError"}
        assert float(page["spouts"][0]["completeLatency"]) > 0
        comp = cluster.get_component_page("t", "split", window="600")
        assert comp["componentType"] == "bolt" and comp["executors"] == 2
        assert [(i["component"], i["stream"], i["executed"]) for i in comp["inputStats"]] == [("words", "default", N)]
        assert sum(e["executed"] for e in comp["executorStats"]) == N
        assert len(comp["taskStats"]) == 2
        # with sys, the acker and the system streams show
        sys_page = cluster.get_topology_page("t", sys=True)
        assert "__acker" in {b["boltId"] for b in sys_page["bolts"]}


def test_at_storms_default_rate_counts_are_estimates_scaled_by_the_sampling_but_a_spouts_are_exact():
    with LocalCluster() as cluster:
        _run(cluster, 0.05)
        page = cluster.get_topology_page("t")
        assert page["spouts"][0]["acked"] == N  # every tree counted (issue 33): not a multiple of 20 near N
        executed = sum(b["executed"] for b in page["bolts"] if b["boltId"] == "split")
        assert executed % 20 == 0 and abs(executed - N) < 2 * 20  # two tasks, each within one block


def test_unknown_topology_component_or_window_is_named():
    with LocalCluster() as cluster:
        _run(cluster, 1.0)
        with pytest.raises(NotAliveException):
            cluster.get_topology_page("nope")
        with pytest.raises(KeyError, match="nope"):
            cluster.get_component_page("t", "nope")
        with pytest.raises(ValueError, match="window"):
            cluster.get_topology_page("t", window="7")


def test_squall_locals_live_table_shows_the_pages_statistics():
    from squall.cli._local import _Sampler

    with LocalCluster() as cluster:
        _run(cluster, 0.05)
        last: dict = {}
        (info, _rates), = _Sampler(time.monotonic()).sample(cluster, ["t"], last)
        page = cluster.get_topology_page("t")
        spout, = page["spouts"]
        assert info["components"]["words"]["acked"] == spout["acked"]  # sampled, as the UI shows
        assert info["components"]["words"]["complete_latency_ms"] == float(spout["completeLatency"])
        split = next(b for b in page["bolts"] if b["boltId"] == "split")
        assert info["components"]["split"]["executed"] == split["executed"]


def test_the_topology_page_shows_no_credential_of_the_topologys_configuration():
    b = TopologyBuilder()
    b.set_spout("words", Words(), 1)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"redis.password": "hunter2-pw", "my.api.token": "tok-123",
                                      "my.settings": {"db_password": "nested-pw", "host": "db"}}, b.create_topology())
        shown = str(cluster.get_topology_page("t")["configuration"])
    assert "hunter2-pw" not in shown and "tok-123" not in shown and "nested-pw" not in shown
    assert "'host': 'db'" in shown


HELD = 5000


class Numbers(Spout):
    """Emits 1..HELD with ids."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.n = 0

    def next_tuple(self):
        if self.n < HELD:
            self.n += 1
            self.collector.emit([self.n], msg_id=self.n)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))


class HoldsThemAll(Bolt):
    """Acks its inputs all at once, after the last (a batching writer, a count window)."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.held = []

    def execute(self, tup):
        self.held.append(tup)
        if len(self.held) == HELD:
            for t in self.held:
                self.collector.ack(t)
            self.held = []


def test_at_rate_one_a_bolt_that_holds_thousands_of_inputs_counts_every_ack():
    """A bolt task keeps its sampled inputs until they are acked; past 1,024 the oldest were
    forgotten, and their acks not counted: 5,000 inputs acked at once read 1,024 acked at
    rate 1.0, where the counts are documented exact."""
    from ..conftest import wait_until

    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("holds", HoldsThemAll()).shuffle_grouping("numbers")
    with LocalCluster() as cluster:
        cluster.submit_topology("held", {"topology.stats.sample.rate": 1.0, "topology.max.spout.pending": HELD},
                                b.create_topology())
        assert wait_until(lambda: cluster.get_topology_info("held")["components"]["numbers"]["acked"] == HELD, 60)

        def bolt() -> dict:
            return next(x for x in cluster.get_topology_page("held")["bolts"] if x["boltId"] == "holds")
        assert wait_until(lambda: bolt()["acked"] == HELD, 20), bolt()
        assert bolt()["executed"] == HELD


class _Clock:
    """``squall.cli._local``'s ``time``: its readings one second apart, so a rate is a count."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize(("before", "after"), [(300, 50), (50, 300)])
def test_squall_locals_live_rates_count_a_restarted_worker_from_zero(monkeypatch, before, after):
    """``emit/s`` and the spout's latency of the last second after its worker restarted: the
    restarted spout's tuples, all of them. Before, the drop from 300 to 50 read -250/s and no
    latency (the acked count went down, so nothing seemed acked since); a restarted worker that
    sent more than its predecessor had (50, then 300) read 250/s."""
    from squall.cli import _local

    from ..conftest import wait_until
    from ..feeders import STAGE, CrashOnceSpout

    clock = _Clock()
    monkeypatch.setattr(_local, "time", clock)
    b = TopologyBuilder()
    b.set_spout("src", CrashOnceSpout())
    b.set_bolt("sink", Sink()).shuffle_grouping("src")
    STAGE.update(now="before", sends={"before": before, "after": after})
    with LocalCluster() as cluster:
        cluster.submit_topology("r", {"topology.stats.sample.rate": 1.0}, b.create_topology())

        def acked() -> int:
            return cluster.get_topology_info("r")["components"]["src"]["acked"]
        assert wait_until(lambda: acked() == before, 30), acked()
        sampler, last = _local._Sampler(0.0), {}
        clock.now = 1.0
        (_info, rates), = sampler.sample(cluster, ["r"], last)
        assert rates["src"][0] == before and rates["src"][1] > 0
        STAGE["now"] = "crash"
        assert wait_until(lambda: STAGE["now"] == "after" and acked() == after, 30), acked()
        clock.now = 2.0
        (info, rates), = sampler.sample(cluster, ["r"], last)
        emit_rate, latency = rates["src"]
        assert info["components"]["src"]["emitted"] == after
        assert emit_rate == after
        assert latency is not None and latency > 0
        assert rates["sink"] == (0.0, None)  # a bolt: no emits, no complete latency


def test_past_ten_minutes_the_pages_ten_minute_window_holds_none_of_a_burst_before_it():
    """1,000 trees acked in the first second of a topology on simulated time, then none: from
    605 s on, the topology page's 10-minute window reads 0 acked, while the longer windows keep
    them (it read a share of them until 632 s when the windows pro-rated their oldest bucket)."""
    from squall.engine.clock import SimulatedClock

    b = TopologyBuilder()
    b.set_spout("words", Words(), 1)
    b.set_bolt("sink", Sink(), 1).shuffle_grouping("words")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("t", {"topology.stats.sample.rate": 1.0}, b.create_topology())
        cluster.advance_cluster_time(1)
        deadline = time.monotonic() + 30
        while cluster.get_topology_info("t")["components"]["words"]["acked"] < N:
            assert time.monotonic() < deadline
            time.sleep(0.05)

        def acked() -> dict[str, int]:
            return {s["window"]: s["acked"] for s in cluster.get_topology_page("t")["topologyStats"]}
        cluster.advance_cluster_time(1)
        assert acked() == {"600": N, "10800": N, "86400": N, ":all-time": N}
        cluster.advance_cluster_time(603, step=3)
        for _ in range(4):
            cluster.advance_cluster_time(5)
            assert acked() == {"600": 0, "10800": N, "86400": N, ":all-time": N}
