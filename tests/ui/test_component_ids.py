"""Component ids as Storm allows them (any string but ``__*``: Storm restricts only topology
names), through the REST API over real HTTP on a LocalCluster's UI port: the ``encoded*`` fields
are Storm's ``Utils.urlEncodeUtf8`` of the id, and a component whose id holds a "/" has its
page and its debug switch at ``/component/<id, percent-encoded>``, as Storm's JAX-RS routes
match an encoded "/" inside ``{component}``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import quote

import pytest

from squall import Fields, LocalCluster, TopologyBuilder
from squall.testing import FixedTupleSpout, TupleCaptureBolt

from ..conftest import wait_until
from .conftest import SECRET

pytest.importorskip("uvicorn")

SPOUT = "in/put ü"
BOLT = "a b/c?d#e%f~g*h"
WORDS = 12


class _Words(FixedTupleSpout):
    def __init__(self):
        super().__init__([[f"w{i}"] for i in range(WORDS)])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))


def _java_url_encoded(s: str) -> str:
    """Java's ``URLEncoder.encode(s, "UTF-8")``, written out byte by byte."""
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c.isascii() and (c.isalnum() or c in ".-*_"):
            out.append(c)
        elif c == " ":
            out.append("+")
        else:
            out.append(f"%{b:02X}")
    return "".join(out)


def _call(url, method="GET", headers=None):
    request = urllib.request.Request(url, data=b"" if method == "POST" else None, method=method,
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


@pytest.fixture(scope="module")
def served():
    b = TopologyBuilder()
    b.set_spout(SPOUT, _Words())
    b.set_bolt(BOLT, TupleCaptureBolt(), 2).shuffle_grouping(SPOUT)
    with LocalCluster({"squall.secret": SECRET}, ui_port=0) as cluster:
        cluster.submit_topology("ids", {"topology.stats.sample.rate": 1.0}, b.create_topology())
        sid = cluster.get_topology_info("ids")["id"]
        base = f"http://127.0.0.1:{cluster.ui_port}/api/v1/topology/{sid}"
        assert wait_until(lambda: _call(base)[1]["topologyStats"][3]["acked"] == WORDS, 60)
        # the acks reach the master's statistics at a worker's heartbeat; the bolt's too
        assert wait_until(lambda: _call(base)[1]["bolts"][0]["executed"] == WORDS, 30)
        yield sid, base


def test_the_encoded_ids_are_storms_url_encoding(served):
    sid, base = served
    status, page = _call(base)
    assert status == 200
    assert page["encodedId"] == _java_url_encoded(sid)
    assert [(s["spoutId"], s["encodedSpoutId"]) for s in page["spouts"]] == [(SPOUT, _java_url_encoded(SPOUT))]
    assert [(b["boltId"], b["encodedBoltId"]) for b in page["bolts"]] == [(BOLT, _java_url_encoded(BOLT))]
    status, summary = _call(base.rsplit("/", 1)[0] + "/summary")
    assert [(t["id"], t["encodedId"]) for t in summary["topologies"]] == [(sid, _java_url_encoded(sid))]
    status, bolt = _call(f"{base}/component/{quote(BOLT, safe='')}")
    assert status == 200, bolt
    assert (bolt["encodedId"], bolt["encodedTopologyId"]) == (_java_url_encoded(BOLT), _java_url_encoded(sid))
    assert [(i["component"], i["encodedComponentId"]) for i in bolt["inputStats"]] == \
        [(SPOUT, _java_url_encoded(SPOUT))]
    assert sorted(e["encodedId"] for e in bolt["executorStats"]) == \
        sorted(_java_url_encoded(e["id"]) for e in bolt["executorStats"])


@pytest.mark.parametrize("component", [SPOUT, BOLT])
def test_a_component_whose_id_holds_a_slash_has_its_page(served, component):
    _, base = served
    status, page = _call(f"{base}/component/{quote(component, safe='')}")
    assert status == 200, page
    assert page["id"] == component
    totals = (page.get("spoutSummary") or page.get("boltStats"))[3]
    if component == SPOUT:
        assert (totals["emitted"], totals["acked"], totals["failed"]) == (WORDS, WORDS, 0)
    else:
        assert (totals["executed"], totals["acked"], totals["failed"]) == (WORDS, WORDS, 0)


def test_a_component_whose_id_holds_a_slash_takes_its_debug_switch(served):
    _, base = served
    url = f"{base}/component/{quote(BOLT, safe='')}"
    origin = base.split("/api/")[0]
    status, body = _call(f"{url}/debug/enable/40", "POST", {"X-Squall-Secret": SECRET, "Origin": origin})
    assert (status, body.get("status")) == (200, "success"), body
    status, page = _call(url)
    assert (page["debug"], page["samplingPct"]) == (True, 40)
    # a wrong method on it is still Storm's 405, not a page of a component named ".../debug/..."
    status, body = _call(f"{url}/debug/enable/40")
    assert status == 405, body
