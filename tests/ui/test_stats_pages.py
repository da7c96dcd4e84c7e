"""The statistics pages through the REST API (the master's page verbs, reached by storm id):
Storm's field names (../shared/STORM.md section 7, STORM-OPERATIONS.md 3.1), real figures from
the running topology, ``sys``, and the debug switch shown."""

from __future__ import annotations

from starlette.testclient import TestClient

from squall import Bolt, LocalCluster, TopologyBuilder
from squall.ui.server import local_app

from ..conftest import wait_until
from .conftest import AUTH, BASE, SECRET, Words

TOPOLOGY_PAGE = {"id", "name", "status", "uptime", "uptimeSeconds", "tasksTotal", "workersTotal", "executorsTotal",
                 "msgTimeout", "windowHint", "debug", "samplingPct", "replicationCount", "topologyStats", "workers",
                 "spouts", "bolts", "configuration"}
WINDOW_STATS = {"window", "windowPretty", "emitted", "transferred", "completeLatency", "acked", "failed"}
SPOUT = {"spoutId", "executors", "tasks", "emitted", "transferred", "completeLatency", "acked", "failed",
         "lastError", "errorHost", "errorPort", "errorTime", "errorLapsedSecs", "errorWorkerLogLink"}
BOLT = {"boltId", "executors", "tasks", "emitted", "transferred", "acked", "failed", "executed", "capacity",
        "executeLatency", "processLatency", "lastError"}
WORKER = {"supervisorId", "host", "port", "topologyId", "topologyName", "executorsTotal", "componentNumTasks",
          "uptime", "workerLogLink"}
COMPONENT_PAGE = {"id", "encodedId", "name", "componentType", "executors", "tasks", "topologyId", "topologyStatus",
                  "window", "windowHint", "debug", "samplingPct", "eventLogLink", "componentErrors", "outputStats",
                  "executorStats"}
VIS = {":type", ":capacity", ":latency", ":transferred", ":stats", ":link", ":inputs"}


def _acked(api, storm_id):
    page = api.get(f"/api/v1/topology/{storm_id}").json()
    return page["spouts"][0]["acked"] if page.get("spouts") else None


def test_topology_page_has_storms_fields_and_the_runs_figures(api, storm_id):
    assert wait_until(lambda: _acked(api, storm_id) == 40, 20), _acked(api, storm_id)
    page = api.get(f"/api/v1/topology/{storm_id}?window=600").json()
    assert TOPOLOGY_PAGE <= set(page) and page["id"] == storm_id and page["name"] == "demo"
    assert {s["window"] for s in page["topologyStats"]} == {"600", "10800", "86400", ":all-time"}
    assert all(WINDOW_STATS <= set(s) for s in page["topologyStats"])
    assert [s["spoutId"] for s in page["spouts"]] == ["words"] and SPOUT <= set(page["spouts"][0])
    assert sorted(b["boltId"] for b in page["bolts"]) == ["sink", "upper"]
    assert all(BOLT <= set(b) for b in page["bolts"])
    assert page["workers"] and all(WORKER <= set(w) for w in page["workers"])
    upper = next(b for b in page["bolts"] if b["boltId"] == "upper")
    assert upper["executed"] == 40 and upper["acked"] == 40 and upper["executors"] == 2
    # no error yet: Storm's template (UIHelpers.getComponentLastErrorInfo), the port null, not ""
    for c in page["spouts"] + page["bolts"]:
        assert {k: c[k] for k in SPOUT if k.startswith(("lastError", "error"))} == {
            "lastError": "", "errorHost": "", "errorPort": None, "errorTime": None, "errorLapsedSecs": None,
            "errorWorkerLogLink": ""}


def test_sys_shows_the_acker(api, storm_id):
    plain = api.get(f"/api/v1/topology/{storm_id}?sys=0").json()
    full = api.get(f"/api/v1/topology/{storm_id}?sys=1").json()
    assert "__acker" not in {b["boltId"] for b in plain["bolts"]}
    assert "__acker" in {b["boltId"] for b in full["bolts"]}


def test_the_ackers_inputs_add_up_to_what_it_executed(api, storm_id):
    """The bolts' acks reach the acker without their sender: their figures were shown as an
    output stream ``__ack_ack`` (emitted 0) and missing from the inputs."""
    assert wait_until(lambda: _acked(api, storm_id) == 40, 20)
    page = api.get(f"/api/v1/topology/{storm_id}/component/__acker?sys=1&window=:all-time").json()
    executed = next(r for r in page["boltStats"] if r["window"] == ":all-time")["executed"]
    inputs = {(i["component"], i["stream"]): i["executed"] for i in page["inputStats"]}
    assert sum(inputs.values()) == executed > 0
    assert inputs[("words", "__ack_init")] == 40 and inputs[("", "__ack_ack")] > 0
    assert "__ack_ack" not in {o["stream"] for o in page["outputStats"]}


def test_component_page_has_storms_fields(api, storm_id):
    bolt = api.get(f"/api/v1/topology/{storm_id}/component/upper?window=:all-time").json()
    assert COMPONENT_PAGE <= set(bolt) and bolt["componentType"] == "bolt" and bolt["topologyId"] == storm_id
    assert {"boltStats", "inputStats"} <= set(bolt)
    spout = api.get(f"/api/v1/topology/{storm_id}/component/words").json()
    assert spout["componentType"] == "spout" and "spoutSummary" in spout
    r = api.get(f"/api/v1/topology/{storm_id}/component/nope")
    assert r.status_code == 404 and "nope" in r.json()["errorMessage"]


def test_visualization_and_its_init(api, storm_id):
    vis = api.get(f"/api/v1/topology/{storm_id}/visualization").json()
    assert set(vis) == {"words", "upper", "sink"} and all(VIS <= set(c) for c in vis.values())
    assert [i[":component"] for i in vis["upper"][":inputs"]] == ["words"]
    init = api.get(f"/api/v1/topology/{storm_id}/visualization-init").json()
    boxes = [box for row in init["visualizationTable"] for box in row["row"]]
    assert [(b["stream"], b["checked"]) for b in boxes] == [("default", True)]


def test_the_debug_switch_shows_on_the_pages(fresh):
    cluster, api, sid = fresh
    assert api.get(f"/api/v1/topology/{sid}").json()["debug"] is False
    api.post(f"/api/v1/topology/{sid}/debug/enable/30", headers=AUTH)
    api.post(f"/api/v1/topology/{sid}/component/sink/debug/enable/70", headers=AUTH)
    page = api.get(f"/api/v1/topology/{sid}").json()
    assert (page["debug"], page["samplingPct"]) == (True, 30)
    sink = api.get(f"/api/v1/topology/{sid}/component/sink").json()
    assert (sink["debug"], sink["samplingPct"]) == (True, 70)


class _RaisesOnThree(Bolt):
    """Raises the same error on words w0, w1 and w2 (each input fails, the bolt goes on); acks the rest."""

    def execute(self, tup):
        if tup.values[0] in ("w0", "w1", "w2"):
            raise ValueError("bad word")
        self.collector.ack(tup)


def test_an_error_repeated_three_times_reads_three_on_both_pages():
    """Three identical errors are one record counted 3 (``add_error``); the topology page's last
    error carried no count, so the web page read one error where the bolt failed three inputs."""
    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("picky", _RaisesOnThree()).shuffle_grouping("words")
    with LocalCluster({"squall.secret": SECRET}) as cluster:
        cluster.submit_topology("picky", {"topology.stats.sample.rate": 1.0}, b.create_topology())
        with TestClient(local_app(cluster), base_url=BASE) as api:
            sid = cluster.get_topology_info("picky")["id"]

            def picky() -> dict:
                page = api.get(f"/api/v1/topology/{sid}").json()
                return next((x for x in page["bolts"] if x["boltId"] == "picky"), {})
            assert wait_until(lambda: picky().get("failed") == 3 and picky().get("acked") == 37, 20), picky()
            assert wait_until(lambda: picky().get("errorCount") == 3, 20), picky()
            assert picky()["lastError"].startswith("ValueError: bad word")
            words = next(x for x in api.get(f"/api/v1/topology/{sid}").json()["spouts"] if x["spoutId"] == "words")
            assert (words["acked"], words["failed"], words["errorCount"]) == (37, 3, None)
            errors = api.get(f"/api/v1/topology/{sid}/component/picky").json()["componentErrors"]
            assert [(e["error"].splitlines()[0], e["errorCount"]) for e in errors] == [("ValueError: bad word", 3)]
