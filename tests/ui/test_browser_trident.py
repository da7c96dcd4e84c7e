"""The topology page of a Trident word count in headless Chromium (issue 34, item 6): its
components under their readable ids, and the Trident Batches section with the current txid,
the batches in flight and the batch latency the REST API gives; a core topology's page has no
such section."""

from __future__ import annotations

import pytest

from bench.ui_screenshots import SECRET
from squall import LocalCluster

from ..conftest import wait_until
from .conftest import small_topology
from .test_browser import _get, _number, browser, page  # noqa: F401 - the fixtures
from .trident_demo import BOLTS, CONF, MAX_IN_FLIGHT, word_count

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def running():
    with LocalCluster({"squall.secret": SECRET}, ui_port=0) as cluster:
        cluster.submit_topology("tw", CONF, word_count().build())
        cluster.submit_topology("core", {}, small_topology())
        base = f"http://127.0.0.1:{cluster.ui_port}"
        storm_id = cluster.get_topology_info("tw")["id"]

        def committed() -> int:
            trident = _get(base, f"/api/v1/topology/{storm_id}")["trident"]
            return trident["batchesCommitted"] if trident else 0
        assert wait_until(lambda: committed() >= 5, 30, 0.2), "no Trident batch committed"
        yield base, storm_id, cluster.get_topology_info("core")["id"]


def test_the_trident_section_shows_txid_in_flight_and_latency(running, page):  # noqa: F811
    base, storm_id, _core = running
    page.goto(f"{base}/topology.html?id={storm_id}")
    section = page.locator("#trident-section")
    section.locator("#trident tbody tr").wait_for()
    cells = section.locator("#trident tbody tr td")
    assert cells.nth(0).inner_text() == "$mastercoord-bg0"
    txid = _number(cells.nth(1).inner_text())
    in_flight = _number(cells.nth(2).inner_text())
    assert txid > 5 and 0 <= in_flight <= MAX_IN_FLIGHT
    assert _number(cells.nth(3).inner_text()) == MAX_IN_FLIGHT
    # what the page read is what the API said then, or before: the txid never goes back
    assert txid <= _get(base, f"/api/v1/topology/{storm_id}")["trident"]["currentTxid"]
    all_time = section.locator("#trident-stats tbody tr", has_text="All time").locator("td")
    assert _number(all_time.nth(1).inner_text()) >= 5   # batches committed
    assert _number(all_time.nth(2).inner_text()) > 0    # batch latency (ms)
    bolts = page.locator("#bolts tbody tr td:first-child").all_inner_texts()
    assert sorted(bolts) == sorted(BOLTS)


def test_a_core_topologys_page_has_no_trident_section(running, page):  # noqa: F811
    base, _storm_id, core = running
    page.goto(f"{base}/topology.html?id={core}")
    page.locator("#spouts tbody tr").first.wait_for()
    assert page.locator("#trident-section").is_hidden()
