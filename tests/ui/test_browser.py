"""The web UI end to end in headless Chromium (Debian's, driven by Playwright): a LocalCluster
serving its UI runs a reliable topology with real traffic; the cluster, topology and component
pages show its figures, the graph is drawn, and deactivating through the page's dialog takes
effect. Needs scripts/install-system-deps.sh (chromium) and the test extra (playwright)."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from bench.ui_screenshots import DEMO_CONF, SECRET, demo_topology, launch_chromium
from squall import LocalCluster

from ..conftest import wait_until

pytestmark = pytest.mark.browser

NAME = "web"


def _get(base: str, path: str):
    with urllib.request.urlopen(base + path, timeout=5) as resp:
        return json.load(resp)


def _number(text: str) -> float:
    return float(re.sub(r"[^0-9.]", "", text) or 0)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = launch_chromium(p)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def running():
    conf = {"squall.secret": SECRET, "squall.ui.history.interval.secs": 1}
    with LocalCluster(conf, ui_port=0) as cluster:
        cluster.submit_topology(NAME, DEMO_CONF, demo_topology(per_sec=200))
        storm_id = cluster.get_topology_info(NAME)["id"]
        base = f"http://127.0.0.1:{cluster.ui_port}"

        def acked() -> int:
            stats = _get(base, f"/api/v1/topology/{storm_id}")["topologyStats"]
            return next(int(s["acked"]) for s in stats if s["window"] == ":all-time")
        assert wait_until(lambda: acked() > 0, 20, 0.5), "the topology acked nothing"
        # two history samples with traffic between them: the charts have a rate to draw
        assert wait_until(lambda: len(_get(base, f"/api/v1/topology/{storm_id}/history")["samples"]) >= 3, 10, 0.5)
        yield cluster, base, storm_id


@pytest.fixture
def page(browser):
    p = browser.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    p.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def test_cluster_page_lists_the_running_topology(running, page):
    cluster, base, storm_id = running
    page.goto(base + "/")
    link = page.locator("#topologies a", has_text=NAME)
    link.wait_for()
    assert link.get_attribute("href") == f"/topology.html?id={storm_id}"
    assert page.locator("#topologies").inner_text().count("ACTIVE") == 1
    assert page.locator("#cluster tbody tr").count() == 1
    assert page.locator("#nimbus tbody tr").count() >= 1
    link.click()
    page.wait_for_url(re.compile(r"/topology\.html\?id="))


def test_topology_page_shows_real_figures_the_graph_and_the_charts(running, page):
    cluster, base, storm_id = running
    page.goto(f"{base}/topology.html?id={storm_id}")
    page.locator("#spouts tbody tr").first.wait_for()
    # the summary's sampling is the statistics' (the default 0.05), the debug switch's apart
    summary = dict(zip(page.locator("#summary th").all_inner_texts(), page.locator("#summary td").all_inner_texts()))
    assert (summary["Stats sample rate"], summary["Debug sampling %"]) == ("0.050", "10"), summary
    # the all-time row of Topology Stats: acked (5th column) is a real, non-zero count
    all_time = page.locator("#topology-stats tbody tr", has_text="All time")
    assert _number(all_time.locator("td").nth(4).inner_text()) > 0
    spout_row = page.locator("#spouts tbody tr", has_text="sentences")
    assert _number(spout_row.locator("td").nth(6).inner_text()) > 0  # acked
    assert page.locator("#bolts tbody tr").count() == 2
    # the graph: one node per component (spouts blue, bolts by capacity), an edge per input
    page.locator("svg.topology-graph").wait_for()
    nodes = page.locator("svg.topology-graph a.node")
    assert sorted(nodes.evaluate_all("ns => ns.map(n => n.dataset.component)")) == ["count", "sentences", "split"]
    edges = page.locator("svg.topology-graph g.edge")
    assert sorted(edges.evaluate_all("es => es.map(e => e.dataset.source + '>' + e.dataset.target)")) == [
        "sentences>split", "split>count"]
    assert page.locator("svg.topology-graph a.node[data-type=spout] rect").get_attribute("fill") == "rgb(0,0,255)"
    # the charts of the last minutes: a line with points, and throughput above zero
    throughput = page.locator("svg.chart[data-series=ackedPerSec]")
    assert throughput.locator("polyline").count() == 1
    assert "no samples" not in throughput.locator(".chart-now").text_content()
    # the window choice reloads the tables for that window
    page.locator("#window-choice a", has_text="10m").click()
    page.wait_for_url(re.compile(r"window=600"))
    page.locator("#spouts tbody tr").first.wait_for()
    assert "(10m 0s)" in page.locator("h2", has_text="Spouts").inner_text()


def test_component_page_shows_a_row_per_executor_and_streams(running, page):
    cluster, base, storm_id = running
    page.goto(f"{base}/topology.html?id={storm_id}")
    page.locator("svg.topology-graph a.node[data-component=split]").click()
    page.wait_for_url(re.compile(r"/component\.html\?id=split"))
    page.locator("#executors tbody tr").first.wait_for()
    assert page.locator("#executors tbody tr").count() == 2  # split has 2 tasks, one per executor
    assert page.locator("#inputs tbody tr", has_text="sentences").count() == 1
    assert page.locator("#outputs tbody tr", has_text="default").count() == 1
    rows = page.locator("#executors tbody tr")
    assert sum(_number(rows.nth(i).locator("td").nth(8).inner_text()) for i in range(2)) > 0  # executed


def test_deactivate_through_the_dialog_takes_effect(running, page):
    cluster, base, storm_id = running
    page.goto(f"{base}/topology.html?id={storm_id}")
    button = page.locator("#actions button[data-action=deactivate]")
    button.wait_for()
    button.click()
    dialog = page.locator("#action-dialog")
    dialog.wait_for()
    # a wrong secret is refused and said so; nothing happens
    page.fill("#action-secret", "not-the-secret-at-all")
    page.click("#action-confirm")
    page.locator("#action-message", has_text="Refused").wait_for()
    assert cluster.get_topology_info(NAME)["status"] == "ACTIVE"
    page.fill("#action-secret", SECRET)
    page.click("#action-confirm")
    assert wait_until(lambda: cluster.get_topology_info(NAME)["status"] == "INACTIVE", 10, 0.1)
    page.locator("#summary .status", has_text="INACTIVE").wait_for()
    assert page.evaluate("sessionStorage.getItem('squall.secret')") == SECRET


def test_every_page_says_when_the_master_is_down(running, page):
    cluster, base, storm_id = running
    down = json.dumps({"error": "503 Service Unavailable", "errorMessage": "the master is unreachable"})
    page.route("**/api/v1/**", lambda route: route.fulfill(status=503, body=down, content_type="application/json"))
    for path in ("/index.html", f"/topology.html?id={storm_id}", f"/component.html?id=split&topology_id={storm_id}"):
        page.goto(base + path)
        banner = page.locator("#banner.down")
        banner.wait_for()
        assert "master is down" in banner.inner_text()


def test_an_error_repeated_three_times_shows_its_count_on_both_pages(page):
    """Three identical errors are one record counted 3: the errors tables showed one row and no
    count, so a page read one error where the bolt had failed three inputs."""
    from squall import TopologyBuilder

    from .conftest import Words
    from .test_stats_pages import _RaisesOnThree

    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("picky", _RaisesOnThree()).shuffle_grouping("words")
    with LocalCluster({"squall.secret": SECRET}, ui_port=0) as cluster:
        cluster.submit_topology("picky", {"topology.stats.sample.rate": 1.0}, b.create_topology())
        storm_id = cluster.get_topology_info("picky")["id"]
        base = f"http://127.0.0.1:{cluster.ui_port}"
        assert wait_until(lambda: [e["count"] for e in cluster.get_topology_info("picky")["errors"]] == [3], 20)
        page.goto(f"{base}/component.html?id=picky&topology_id={storm_id}")
        row = page.locator("#errors tbody tr", has_text="bad word")
        row.wait_for()
        assert row.count() == 1
        headers = page.locator("#errors thead th").all_inner_texts()
        assert row.locator("td").nth(headers.index("Count")).inner_text() == "3"
        page.goto(f"{base}/topology.html?id={storm_id}")
        cell = page.locator("#bolts tbody tr", has_text="picky").locator(".error-text")
        cell.wait_for()
        assert "ValueError: bad word (x3)" in cell.inner_text()
        errors_row = page.locator("#errors tbody tr", has_text="bad word")
        headers = page.locator("#errors thead th").all_inner_texts()
        assert errors_row.locator("td").nth(headers.index("Count")).inner_text() == "3"
