"""Storm's statistics: the even sampler, windows on a simulated clock, and the pages' rules."""

from __future__ import annotations

import random

import pytest

from squall._config import topology_conf
from squall.cluster.view import Stat, TopologyView, WorkerView
from squall.engine.plan import make_plan
from squall.engine.stats import ACKED, EXECUTED, MAX_SPOUT_PENDING, EvenSampler, TaskStatistics, sample_freq
from squall.ui import stats_pages
from squall.worker.stats_history import StatsHistory


def test_the_even_sampler_picks_exactly_one_event_in_every_block_of_freq():
    sampler = EvenSampler(20, random.Random(1))
    pos, picks = 0, []
    for _ in range(500):
        pos += sampler.gap()
        picks.append(pos)
    blocks = [(p - 1) // 20 for p in picks]
    assert blocks == list(range(500))  # one per block, every block
    assert len({(p - 1) % 20 for p in picks}) > 10  # at random places in the block


@pytest.mark.parametrize(("rate", "freq"), [(0.05, 20), (0.3, 3), (1.0, 1), (None, 20)])
def test_the_sample_frequency_is_storms_truncated_inverse_of_the_rate(rate, freq):
    assert sample_freq({"topology.stats.sample.rate": rate}) == freq


def test_a_sampled_event_counts_freq_and_counts_estimate_the_truth():
    stats = TaskStatistics(20, random.Random(7))
    for _ in range(10_000):
        stats.left -= 1
        if not stats.left:
            stats.key("", "default").acked += stats.freq
            stats.next_gap()
    assert stats.snapshot({}, {})[(ACKED, "", "default")] == 10_000  # whole blocks: exact


def test_statistics_off_never_sample():
    stats = TaskStatistics(0, random.Random(7))
    assert stats.left > 10**15


def _snap(acked: float) -> dict:
    return {1: {(ACKED, "", "default"): acked}}


def test_windows_count_only_what_happened_in_their_last_seconds():
    history = StatsHistory(start=0.0)
    # 10 acks per second for 1,200 s, recorded every second (a heartbeat)
    for now in range(1, 1201):
        history.record(float(now), _snap(10.0 * now))
    windows = history.render(1200.0, _snap(12_000.0))[1]
    value = {w: rows[0][3] for w, rows in windows.items()}
    assert value[":all-time"] == 12_000
    assert value["600"] == pytest.approx(6_000, rel=0.01)  # the last 10 minutes only
    assert value["10800"] == 12_000  # younger than 3 hours: everything
    assert value["86400"] == 12_000


def test_a_window_never_counts_what_happened_before_it():
    """1,000 acks in the worker's first 5 s, then none: past 10 minutes, the 10-minute window
    reads 0 (Storm's pro-rating read 969 at 601 s, 688 at 610 s, 62 at 630 s). Bursts later on:
    every window reads at most what happened in it, and leaves out at most its first bucket
    (10 s of the 10 minutes, a 19th of the longer ones)."""
    history = StatsHistory(start=0.0)
    bursts = {t: 200 for t in range(1, 6)} | {t: 37 for t in range(2000, 2030)} | {4000: 500, 13000: 80}
    acked = 0
    for now in range(1, 15_000):
        acked += bursts.get(now, 0)
        history.record(float(now), _snap(float(acked)))
        if not (now % 7 == 0 or 600 <= now <= 700):
            continue
        windows = history.render(float(now), _snap(float(acked)))[1]
        for w, bucket in ((600, 10), (10800, 10800 / 20)):
            shown = windows[str(w)][0][3]
            in_window = sum(n for t, n in bursts.items() if now - w < t <= now)
            at_its_start = sum(n for t, n in bursts.items() if now - w < t <= now - w + bucket + 1)
            assert in_window - at_its_start <= shown <= in_window, (now, w, shown, in_window)
        if 601 <= now <= 1999:
            assert windows["600"][0][3] == 0, now


def test_a_gauge_shows_its_value_now_in_every_window():
    """A spout's max spout pending is a value, not a count: no window takes a difference of it."""
    history = StatsHistory(start=0.0)
    for now in range(1, 700):
        history.record(float(now), {1: {(MAX_SPOUT_PENDING, "", ""): 16 + now}})
    windows = history.render(700.0, {1: {(MAX_SPOUT_PENDING, "", ""): 250}})[1]
    assert {w: rows for w, rows in windows.items()} == {
        w: [[MAX_SPOUT_PENDING, "", "", 250]] for w in ("600", "10800", "86400", ":all-time")}


def test_latency_windows_average_their_own_samples():
    history = StatsHistory(start=0.0)
    key, key_n = ("complete_latency", "", "default"), ("complete_latency#n", "", "default")
    history.record(100.0, {1: {key: 100.0 * 1, key_n: 100}})           # 100 samples of 1 ms
    for now in range(101, 800):
        history.record(float(now), {1: {key: 100.0 + 5.0 * (now - 100), key_n: now}})  # then 5 ms each
    rows = history.render(800.0, {1: {key: 100.0 + 5.0 * 700, key_n: 800}})[1]
    lat = {w: r[0][3] for w, r in rows.items()}
    assert lat["600"] == pytest.approx(5.0, rel=0.01)
    assert lat[":all-time"] == pytest.approx((100 + 3500) / 800)


def _view(stats_by_task: dict[int, list[Stat]], uptime: float = 100.0, bolt: str = "b") -> TopologyView:
    from squall import Bolt, Fields, Spout, TopologyBuilder

    class S(Spout):
        def declare_output_fields(self, d):
            d.declare(Fields("x"))

    class B(Bolt):
        def declare_output_fields(self, d):
            pass

    b = TopologyBuilder()
    b.set_spout("s", S(), 1)
    b.set_bolt(bolt, B(), 2).shuffle_grouping("s")
    conf = {"topology.acker.executors": 1, "topology.workers": 1}
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    tasks = plan.component_tasks
    worker = WorkerView(host="h", port=6700, supervisor_id="sup", executors=list(plan.executors),
                        uptime_secs=uptime,
                        windows={t: {w: stats_by_task.get(t, []) for w in ("600", "10800", "86400", ":all-time")}
                                 for c in tasks for t in tasks[c]})
    return TopologyView(plan=plan, status="ACTIVE", uptime_secs=uptime, workers=[worker], errors=[], now=0.0)


def test_pages_weight_latencies_by_their_counts_and_capacity_uses_uptime():
    view = _view({})
    b1, b2 = view.plan.component_tasks["b"]
    s1, = view.plan.component_tasks["s"]
    view = _view({
        s1: [Stat("emitted", "", "default", 400), Stat("transferred", "", "default", 400),
             Stat("acked", "", "default", 300), Stat("complete_latency", "", "default", 2.0),
             Stat("acked", "", "__ack_init", 5)],
        b1: [Stat(EXECUTED, "s", "default", 100), Stat("execute_latency", "s", "default", 10.0),
             Stat(ACKED, "s", "default", 100), Stat("process_latency", "s", "default", 10.0)],
        b2: [Stat(EXECUTED, "s", "default", 300), Stat("execute_latency", "s", "default", 2.0),
             Stat(ACKED, "s", "default", 300), Stat("process_latency", "s", "default", 2.0)],
    })
    page = stats_pages.topology_page(view, "600")
    bolt, = page["bolts"]
    assert bolt["executed"] == 400
    assert bolt["executeLatency"] == "%.3f" % ((100 * 10.0 + 300 * 2.0) / 400)
    # capacity: the busiest executor, sum(latency x executed) / (1000 x min(uptime, 600))
    assert bolt["capacity"] == "%.3f" % (100 * 10.0 / (1000 * 100))
    assert page["spouts"][0]["acked"] == 300  # the system stream is hidden without sys
    assert page["topologyStats"][0]["acked"] == 300
    assert page["topologyStats"][0]["completeLatency"] == "2.000"
    assert {b["boltId"] for b in stats_pages.topology_page(view, sys=True)["bolts"]} == {"b", "__acker"}


def test_pages_refuse_a_bad_window_and_an_unknown_component_by_name():
    view = _view({})
    with pytest.raises(ValueError, match="window must be one of 600, 10800, 86400, :all-time"):
        stats_pages.topology_page(view, "60")
    with pytest.raises(KeyError, match="nope"):
        stats_pages.component_page(view, "nope")


def test_pretty_uptime_and_sanitized_streams_are_storms():
    assert stats_pages.pretty_uptime(358) == "5m 58s"
    assert stats_pages.pretty_uptime(10800) == "3h 0m 0s"
    assert stats_pages.pretty_uptime(86400) == "1d 0h 0m 0s"
    assert stats_pages.pretty_uptime(0) == ""  # as Storm's, and the REST summaries' (one function)
    assert stats_pages.sani_stream("default") == "default"
    assert stats_pages.sani_stream("__ack init") == "_s__ack_init"


def test_the_visualizations_link_to_a_component_is_url_encoded():
    # a component id may hold any character (a metrics consumer's is "__metrics_mod:Class#2"):
    # "#" would cut the link short, "&" add a parameter
    view = _view({}, bolt="mod:Class#2&x=y")
    link = stats_pages.visualization(view)["mod:Class#2&x=y"][":link"]
    assert link == "/component.html?id=mod%3AClass%232%26x%3Dy&topology_id=t-1"
