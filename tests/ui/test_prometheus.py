"""``/metrics``: Storm's statistics and the workers' figures in Prometheus's exposition format."""

from __future__ import annotations

import pytest

import time

parser = pytest.importorskip("prometheus_client.parser")


def _families(text: str) -> dict:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def test_metrics_carry_the_pages_figures_labelled_by_topology_component_task_and_stream(cluster, api):
    deadline = time.monotonic() + 30
    while cluster.get_topology_info("demo")["components"]["words"]["acked"] < 40:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    resp = api.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    fams = _families(resp.text)
    acked = [s for s in fams["squall_acked"].samples if s.labels["component"] == "words"]
    assert {s.labels["stream"] for s in acked} == {"default"}
    assert all(s.labels["topology"] == "demo" and s.labels["task"].isdigit() for s in acked)
    page = cluster.get_topology_page("demo")
    assert sum(s.value for s in acked) == page["spouts"][0]["acked"] == 40  # one source of figures
    executed = [s for s in fams["squall_executed"].samples if s.labels["component"] == "upper"]
    assert {(s.labels["source"], s.labels["stream"]) for s in executed} == {("words", "default")}
    assert sum(s.value for s in executed) == 40
    assert len({s.labels["task"] for s in executed}) == 2
    latency = [s for s in fams["squall_complete_latency_ms"].samples if s.labels["component"] == "words"]
    assert latency and all(s.value >= 0 for s in latency)
    rss = fams["squall_worker_resident_memory_bytes"].samples
    assert rss and all(s.value > 0 and s.labels["topology"] == "demo" for s in rss)
    assert fams["squall_worker_cpu_seconds"].samples[0].value > 0
