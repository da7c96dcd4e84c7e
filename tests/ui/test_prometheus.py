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
    # latencies in seconds, Prometheus's base unit (the page says ms): no family in another unit
    assert not [f for f in fams if f.endswith(("_ms", "_milliseconds"))]
    latency = [s for s in fams["squall_complete_latency_seconds"].samples if s.labels["component"] == "words"]
    assert len(latency) == 1 and latency[0].value > 0
    assert latency[0].value * 1000 == pytest.approx(float(page["spouts"][0]["completeLatency"]), abs=0.001)
    # the spout's limit now, a gauge (null in the conf: the automatic limit, at least 64 per task)
    assert "# TYPE squall_max_spout_pending gauge" in resp.text
    pending = [s for s in fams["squall_max_spout_pending"].samples if s.labels["component"] == "words"]
    assert len(pending) == 1 and pending[0].value >= 64
    rss = fams["squall_worker_resident_memory_bytes"].samples
    assert rss and all(s.value > 0 and s.labels["topology"] == "demo" for s in rss)
    assert fams["squall_worker_cpu_seconds"].samples[0].value > 0


class _Racing:
    """A master whose topology ``gone`` is killed between ``list`` and ``statistics``;
    ``statistics`` of ``kept`` raises ``error`` (None: answers)."""

    def __init__(self, error=None):
        self.error = error

    def read(self, op, **args):
        from squall._errors import NotAliveException
        if op == "list":
            return [{"id": "gone-1-1", "name": "gone"}, {"id": "kept-1-1", "name": "kept"}]
        if args["name"] == "gone":
            raise NotAliveException("Topology 'gone' is not alive")
        if self.error is not None:
            raise self.error
        return {"id": "kept-1-1", "tasks": [["c", 1, "emitted", "", "default", 3.0]], "workers": []}


def _metrics(link):
    from starlette.testclient import TestClient

    from squall.ui.server import _app
    from .conftest import BASE
    with TestClient(_app(link, {}, None), base_url=BASE, raise_server_exceptions=False) as api:
        return api.get("/metrics")


def test_a_topology_killed_during_a_scrape_is_left_out_and_a_bug_is_not():
    r = _metrics(_Racing())
    assert r.status_code == 200
    emitted = _families(r.text)["squall_emitted"].samples
    assert [(s.labels["topology"], s.value) for s in emitted] == [("kept", 3.0)]
    # a KeyError is a bug of the master or of the exporter, not a topology that went away
    r = _metrics(_Racing(KeyError("tasks")))
    assert r.status_code == 500 and r.json()["error"] == "500 Internal Server Error"


class _Relaunched:
    """A master whose topology's spout task 5 failed 10 tuples in launch 1 of its slot, then
    (``relaunched``) 12 in launch 2 of the same slot, its worker killed and launched again."""

    relaunched = False

    def read(self, op, **args):
        if op == "list":
            return [{"id": "t-1-1", "name": "t"}]
        launch, failed = (2, 12.0) if self.relaunched else (1, 10.0)
        cpu, restarts = (3.5, 1) if self.relaunched else (3.0, 0)
        worker = {"host": "127.0.0.1", "port": 6700, "launchId": launch, "cpuSecs": cpu, "restarts": restarts}
        return {"id": "t-1-1", "tasks": [["src", 5, "failed", "", "default", failed]], "workers": [worker],
                "launches": [[5, launch, "127.0.0.1:6700"]]}


def test_a_task_whose_worker_was_launched_again_in_its_slot_is_a_new_series():
    """Prometheus reads a counter reset only from a count that went down: without the launch in
    the labels, 10 failures then 12 in the relaunched worker read as 2 more failures."""
    link = _Relaunched()
    before = _families(_metrics(link).text)["squall_failed"].samples
    link.relaunched = True
    after = _families(_metrics(link).text)["squall_failed"].samples
    assert [(s.labels["worker"], s.labels["launch"], s.value) for s in before] == [("127.0.0.1:6700", "1", 10.0)]
    assert [(s.labels["worker"], s.labels["launch"], s.value) for s in after] == [("127.0.0.1:6700", "2", 12.0)]


def test_a_worker_process_launched_again_in_its_slot_is_a_new_series_and_its_slots_restarts_one():
    """The worker's own figures count from zero in each launch too (3 CPU seconds, a kill -9,
    3.5 in the next launch read as 0.5 more); its slot's restarts count across launches."""
    link = _Relaunched()
    before = _families(_metrics(link).text)
    link.relaunched = True
    after = _families(_metrics(link).text)
    cpu = "squall_worker_cpu_seconds"
    assert [(s.labels["launch"], s.value) for s in before[cpu].samples] == [("1", 3.0)]
    assert [(s.labels["launch"], s.value) for s in after[cpu].samples] == [("2", 3.5)]
    restarts = after["squall_worker_restarts"].samples
    assert [(s.labels, s.value) for s in restarts] == [({"topology": "t", "host": "127.0.0.1", "port": "6700"}, 1.0)]
