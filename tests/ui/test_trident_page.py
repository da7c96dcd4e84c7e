"""The topology page of a Trident topology (issue 34, item 6): readable component ids, and
squall's ``trident`` figures (current txid, batches in flight, batches committed and their
latency) read from the master batch coordinator through the statistics the workers heartbeat.

The word count's batches are first held by a gate: the page must show exactly the limit of
batches in flight and txid 1 not committed; once the gate opens the txid advances, one per
commit."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from squall import LocalCluster
from squall.testing._registry import SharedFlag
from squall.ui.server import local_app

from ..conftest import wait_until
from .conftest import BASE, SECRET, small_topology
from .trident_demo import BOLTS, CONF, MAX_IN_FLIGHT, SPOUTS, word_count

WINDOWS = ["600", "10800", "86400", ":all-time"]


@pytest.fixture(scope="module")
def gated():
    """A cluster running the gated word count ``tw`` and a core topology ``core``; its API
    client, the gate and the word count's storm id."""
    gate = SharedFlag()
    with LocalCluster({"squall.secret": SECRET}) as c:
        c.submit_topology("tw", CONF, word_count(gate).build())
        c.submit_topology("core", {"topology.message.timeout.secs": 5}, small_topology())
        with TestClient(local_app(c), base_url=BASE) as client:
            yield client, gate, c.get_topology_info("tw")["id"], c.get_topology_info("core")["id"]
        gate.set()  # let the held batches go before the cluster stops


def _trident(client, storm_id):
    r = client.get(f"/api/v1/topology/{storm_id}")
    assert r.status_code == 200, r.text
    return r.json()["trident"]


def test_held_batches_fill_the_limit_then_the_txid_advances_one_per_commit(gated):
    client, gate, storm_id, _core = gated
    page = client.get(f"/api/v1/topology/{storm_id}").json()
    assert [s["spoutId"] for s in page["spouts"]] == SPOUTS
    assert [b["boltId"] for b in page["bolts"]] == BOLTS

    # the gate holds txid 1, and the coordinator starts no more than the limit behind it
    assert wait_until(lambda: (_trident(client, storm_id) or {}).get("batchesInFlight") == MAX_IN_FLIGHT, 30, 0.2)
    held = _trident(client, storm_id)
    assert held["coordinators"] == ["$mastercoord-bg0"]
    assert held["currentTxid"] == 1 and held["batchesCommitted"] == 0
    assert held["maxBatchesInFlight"] == MAX_IN_FLIGHT
    assert held["batchLatency"] == "0.000"
    assert [s["window"] for s in held["stats"]] == WINDOWS

    gate.set()
    assert wait_until(lambda: _trident(client, storm_id)["currentTxid"] >= 10, 30, 0.2)
    first = _trident(client, storm_id)
    # one commit moves the current txid by one, from 1: it is the count of commits plus one
    assert first["currentTxid"] == first["batchesCommitted"] + 1
    assert 0 <= first["batchesInFlight"] <= MAX_IN_FLIGHT
    # txid 1 waited at the gate: the mean latency is above zero in every window that saw commits
    assert float(first["batchLatency"]) > 0
    all_time = first["stats"][-1]
    assert all_time["batchesCommitted"] == first["batchesCommitted"]
    assert all(0 < s["batchesCommitted"] <= all_time["batchesCommitted"] and float(s["batchLatency"]) > 0
               for s in first["stats"])

    assert wait_until(lambda: _trident(client, storm_id)["currentTxid"] > first["currentTxid"], 30, 0.2)
    later = _trident(client, storm_id)
    assert later["currentTxid"] == later["batchesCommitted"] + 1
    assert 0 <= later["batchesInFlight"] <= MAX_IN_FLIGHT


def test_the_coordinators_figures_are_no_stream_of_its_component_page(gated):
    client, _gate, storm_id, _core = gated
    assert wait_until(lambda: _trident(client, storm_id) is not None, 30, 0.2)
    page = client.get(f"/api/v1/topology/{storm_id}/component/$mastercoord-bg0").json()
    assert {o["stream"] for o in page["outputStats"]} <= {"$batch", "$commit", "$success"}


def test_a_topology_without_trident_has_none(gated):
    client, _gate, _storm_id, core = gated
    assert client.get(f"/api/v1/topology/{core}").json()["trident"] is None
