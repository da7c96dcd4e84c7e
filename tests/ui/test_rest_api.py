"""Storm's REST API on a LocalCluster running a small topology (issue 13, items 3 and 8): field
names are Storm's (../shared/STORM.md section 7), errors are Storm's shape with 4xx/503, and
actions need the cluster's secret, refuse cross-site requests and take effect."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from squall.ui.app import create_app
from squall.ui.link import DirectLink, RpcLink

from .conftest import AUTH, BASE, SECRET

# Storm's field names, copied from docs/STORM-UI-REST-API.md (STORM.md section 7)
CLUSTER = {"stormVersion", "supervisors", "topologies", "slotsTotal", "slotsUsed", "slotsFree", "executorsTotal",
           "tasksTotal", "schedulerDisplayResource", "totalMem", "totalCpu", "availMem", "availCpu",
           "memAssignedPercentUtil", "cpuAssignedPercentUtil"}
NIMBUS = {"host", "port", "status", "nimbusUpTime", "nimbusUpTimeSeconds", "nimbusLogLink", "version"}
SUPERVISOR = {"id", "host", "uptime", "uptimeSeconds", "slotsTotal", "slotsUsed", "totalMem", "totalCpu", "usedMem",
              "usedCpu"}
TOPOLOGY = {"id", "name", "status", "uptime", "uptimeSeconds", "tasksTotal", "workersTotal", "executorsTotal",
            "replicationCount", "requestedMemOnHeap", "requestedMemOffHeap", "requestedTotalMem", "requestedCpu",
            "assignedMemOnHeap", "assignedMemOffHeap", "assignedTotalMem", "assignedCpu"}


def _is_error(r, status: int, *words: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error", "errorMessage"}
    assert body["error"].startswith(f"{status} ")
    for w in words:
        assert w in body["errorMessage"], body
    assert "Traceback" not in r.text


# --- reads -------------------------------------------------------------------------------------------------
def test_cluster_summary_has_storms_fields_and_counts(api, cluster):
    body = api.get("/api/v1/cluster/summary").json()
    assert CLUSTER <= set(body)
    info = cluster.get_topology_info("demo")
    assert body["topologies"] == 1 and body["supervisors"] == 1
    assert body["tasksTotal"] == info["num_tasks"] and body["executorsTotal"] == info["num_executors"]
    assert body["slotsUsed"] == info["num_workers"] and body["slotsFree"] == body["slotsTotal"] - body["slotsUsed"]


def test_nimbus_supervisor_and_topology_summaries_have_storms_fields(api, storm_id):
    nimbuses = api.get("/api/v1/nimbus/summary").json()["nimbuses"]
    assert len(nimbuses) == 1 and NIMBUS <= set(nimbuses[0]) and nimbuses[0]["status"] == "Leader"
    sups = api.get("/api/v1/supervisor/summary").json()
    assert len(sups["supervisors"]) == 1 and SUPERVISOR <= set(sups["supervisors"][0])
    assert sups["supervisors"][0]["slotsUsed"] == 1
    tops = api.get("/api/v1/topology/summary").json()["topologies"]
    assert [t["id"] for t in tops] == [storm_id]
    assert TOPOLOGY <= set(tops[0]) and tops[0]["name"] == "demo" and tops[0]["status"] == "ACTIVE"


def test_configuration_never_shows_a_secret(api):
    r = api.get("/api/v1/cluster/configuration")
    body = r.json()
    assert body["ui.port"] == 8080 and "nimbus.thrift.port" in body
    assert "squall.secret" not in body and "storm.zookeeper.auth.password" not in body
    assert SECRET not in r.text and "zk-password-1234" not in r.text


def test_unknown_topology_and_bad_parameters_get_storms_error(api, storm_id):
    _is_error(api.get("/api/v1/topology/no-such-1-2"), 404, "no-such-1-2")
    _is_error(api.get("/api/v1/topology/no-such-1-2/visualization"), 404, "no-such-1-2")
    _is_error(api.get(f"/api/v1/topology/{storm_id}?window=601"), 400, "window", "601")
    _is_error(api.get(f"/api/v1/topology/{storm_id}/component/upper?sys=yes"), 400, "sys", "yes")
    _is_error(api.get("/api/v1/no/such/page"), 404, "/api/v1/no/such/page")
    _is_error(api.get(f"/api/v1/topology/{storm_id}/activate"), 405, "GET")


# --- actions -----------------------------------------------------------------------------------------------
def test_actions_without_or_with_a_wrong_secret_are_refused_and_do_nothing(api, cluster, storm_id):
    _is_error(api.post(f"/api/v1/topology/{storm_id}/deactivate"), 403, "X-Squall-Secret")
    _is_error(api.post(f"/api/v1/topology/{storm_id}/kill/0", headers={"X-Squall-Secret": "guess"}), 403, "secret")
    # refused before the topology is looked up: an unknown id tells nothing either
    _is_error(api.post("/api/v1/topology/nope-1-1/activate"), 403)
    assert cluster.get_topology_info("demo")["status"] == "ACTIVE"


def test_cross_site_posts_are_refused_even_with_the_secret(api, cluster, storm_id):
    url = f"/api/v1/topology/{storm_id}/deactivate"
    _is_error(api.post(url, headers={**AUTH, "Origin": "http://evil.example"}), 403, "cross-site")
    _is_error(api.post(url, headers={**AUTH, "Origin": "null"}), 403, "cross-site")
    _is_error(api.post(url, headers={**AUTH, "Referer": "http://evil.example/page"}), 403, "cross-site")
    assert cluster.get_topology_info("demo")["status"] == "ACTIVE"


def test_deactivate_activate_and_debug_take_effect(fresh):
    cluster, api, sid = fresh
    r = api.post(f"/api/v1/topology/{sid}/deactivate", headers={**AUTH, "Origin": BASE})
    assert r.json() == {"topologyOperation": "deactivate", "topologyId": sid, "status": "success"}
    assert cluster.get_topology_info("victim")["status"] == "INACTIVE"
    assert api.get("/api/v1/topology/summary").json()["topologies"][0]["status"] == "INACTIVE"
    assert api.post(f"/api/v1/topology/{sid}/activate", headers=AUTH).status_code == 200
    assert cluster.get_topology_info("victim")["status"] == "ACTIVE"

    r = api.post(f"/api/v1/topology/{sid}/debug/enable/250", headers=AUTH)
    assert r.json()["topologyOperation"] == "debug/enable"
    r = api.post(f"/api/v1/topology/{sid}/component/upper/debug/disable/-5", headers=AUTH)
    assert r.json()["topologyOperation"] == "debug/disable"
    debug = cluster.master.topologies["victim"].debug
    assert debug == {sid: {"enable": True, "samplingpct": 100}, "upper": {"enable": False, "samplingpct": 0}}
    _is_error(api.post(f"/api/v1/topology/{sid}/component/nope/debug/enable/5", headers=AUTH), 404, "nope")
    _is_error(api.post(f"/api/v1/topology/{sid}/debug/maybe/5", headers=AUTH), 400, "maybe")
    _is_error(api.post(f"/api/v1/topology/{sid}/debug/enable/lots", headers=AUTH), 400, "lots")


@pytest.mark.parametrize("body, words", [
    ('{"rebalanceOptions": {"numWorkers": 0}}', ["numWorkers", "0"]),
    ('{"rebalanceOptions": {"numWorkers": true}}', ["numWorkers"]),
    ('{"rebalanceOptions": {"executors": {"upper": "2"}}}', ["executors['upper']", "'2'"]),
    ('{"rebalanceOptions": {"executors": [1]}}', ["executors", "an array"]),
    ('{"rebalanceOptions": {"workers": 2}}', ["'workers'"]),
    ('{"rebalance": {}}', ["'rebalance'"]),
    ('[1, 2]', ["an array"]),
    ('{"rebalanceOptions": ', ["not valid JSON"]),
    # 10 KB, under the body's bound: a RecursionError, answered 500 with a traceback in the log
    pytest.param("[" * 5000 + "]" * 5000, ["not valid JSON", "nested"], id="nested-5000-deep"),
    ('{"rebalanceOptions": {"executors": {"nope": 1}}}', ["nope"]),
    ('{"rebalanceOptions": {"numWorkers": 1000000000}}', ["numWorkers", "1000000000", "tasks"]),
])
def test_a_malformed_rebalance_body_gets_400_naming_what_is_wrong(api, cluster, storm_id, body, words):
    r = api.post(f"/api/v1/topology/{storm_id}/rebalance/0", content=body,
                 headers={**AUTH, "Content-Type": "application/json"})
    _is_error(r, 400, *words)
    assert cluster.get_topology_info("demo")["status"] == "ACTIVE"


def test_rebalance_honours_its_body_and_kill_its_wait(fresh):
    cluster, api, sid = fresh
    _is_error(api.post(f"/api/v1/topology/{sid}/rebalance/soon", headers=AUTH), 400, "wait-secs", "soon")
    _is_error(api.post(f"/api/v1/topology/{sid}/rebalance/0", content="x=1",
                       headers={**AUTH, "Content-Type": "application/x-www-form-urlencoded"}), 400, "Content-Type")
    assert cluster.get_topology_info("victim")["components"]["upper"]["executors"] == 2
    r = api.post(f"/api/v1/topology/{sid}/rebalance/0", json={"rebalanceOptions": {"executors": {"upper": 1}}},
                 headers=AUTH)
    assert r.json() == {"topologyOperation": "rebalance", "topologyId": sid, "status": "success"}
    assert cluster.get_topology_info("victim")["components"]["upper"]["executors"] == 1

    _is_error(api.post(f"/api/v1/topology/{sid}/kill/-1", headers=AUTH), 400, "wait-secs")
    assert api.post(f"/api/v1/topology/{sid}/kill/0", headers=AUTH).json()["topologyOperation"] == "kill"
    assert cluster.get_topology_names() == []
    _is_error(api.get(f"/api/v1/topology/{sid}"), 404, sid)


@pytest.mark.parametrize("wait", ["9" * 400, str(10**20), "2147483648"])
def test_a_wait_beyond_storms_int_gets_400_and_changes_nothing(api, cluster, storm_id, wait):
    # a huge wait overflowed (500) or left the topology KILLED for ever
    for action in ("kill", "rebalance"):
        _is_error(api.post(f"/api/v1/topology/{storm_id}/{action}/{wait}", headers=AUTH), 400, "wait-secs")
    assert cluster.get_topology_info("demo")["status"] == "ACTIVE"


def test_actions_are_refused_when_switched_off_or_without_a_secret(cluster, storm_id):
    off = create_app(DirectLink(cluster), {"ui.actions.enabled": False}, secret=SECRET.encode())
    with TestClient(off, base_url=BASE) as api:
        _is_error(api.post(f"/api/v1/topology/{storm_id}/deactivate", headers=AUTH), 403, "ui.actions.enabled")
        assert api.get("/api/v1/topology/summary").status_code == 200  # reads stay open
    with TestClient(create_app(DirectLink(cluster), {}, secret=None), base_url=BASE) as api:
        _is_error(api.post(f"/api/v1/topology/{storm_id}/deactivate", headers=AUTH), 403, "squall.secret")
    assert cluster.get_topology_info("demo")["status"] == "ACTIVE"


# --- Host names (DNS rebinding) -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/api/v1/cluster/configuration", "/api/v1/topology/summary", "/index.html",
                                  "/api/v1/listLogs", "/metrics"])
def test_a_request_naming_another_host_is_refused_in_storms_shape(api, path):
    # a page on evil.example, its name pointed at 127.0.0.1, must not read the UI from a browser here
    _is_error(api.get(path, headers={"Host": "evil.example"}), 403, "evil.example", "ui.allowed.hosts")
    _is_error(api.get(path, headers={"Host": "evil.example:8080"}), 403, "evil.example")
    for host in ("127.0.0.1", "127.0.0.1:8080", "localhost:8080", "[::1]:8080", "LOCALHOST"):
        assert api.get(path, headers={"Host": host}).status_code == 200, host


def test_a_remote_bind_answers_its_own_address_and_ui_allowed_hosts(cluster):
    conf = {"ui.host": "10.1.2.3", "ui.allowed.hosts": ["storm.example.org", "*.corp.example"]}
    with TestClient(create_app(DirectLink(cluster), conf, secret=None), base_url=BASE) as api:
        for host in ("10.1.2.3:8080", "storm.example.org", "ui.corp.example:80", "localhost"):
            assert api.get("/api/v1/cluster/summary", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example", "corp.example.evil", "10.1.2.4", ""):
            _is_error(api.get("/api/v1/cluster/summary", headers={"Host": host}), 403)


# --- the master down, and our own failures -----------------------------------------------------------------
def test_a_master_that_is_down_gets_503_on_every_page_and_the_ui_keeps_serving(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    conf = {"nimbus.host": "127.0.0.1", "nimbus.thrift.port": port, "squall.secret": SECRET,
            "storm.local.dir": str(tmp_path)}
    with TestClient(create_app(RpcLink(conf, timeout=2), conf, secret=SECRET.encode()), base_url=BASE) as api:
        for path in ("cluster/summary", "cluster/configuration", "nimbus/summary", "supervisor/summary",
                     "topology/summary", "topology/x-1-1", "topology/x-1-1/component/c",
                     "topology/x-1-1/visualization"):
            _is_error(api.get(f"/api/v1/{path}"), 503, "master is unreachable")
        _is_error(api.post("/api/v1/topology/x-1-1/activate", headers=AUTH), 503, "master is unreachable")
        assert api.get("/api/v1/openapi.json").status_code == 200


def test_an_unexpected_failure_is_500_in_storms_shape_without_a_traceback(caplog):
    class Broken:
        def read(self, op, **args):
            raise RuntimeError("bug in the link")

    with TestClient(create_app(Broken(), {}, secret=None), base_url=BASE) as api:
        r = api.get("/api/v1/cluster/summary")
    _is_error(r, 500, "RuntimeError")
    assert "bug in the link" not in r.text
    assert "bug in the link" in caplog.text  # logged server-side, with its traceback


@pytest.mark.parametrize("error", [KeyError("a bug's key"), ValueError("a bug's value"), TypeError("a bug's call")])
def test_a_plain_key_or_value_error_is_a_logged_500_not_a_refusal(error, caplog):
    # only squall's own refusals (NotAliveException, UnknownComponentError, BadParameterError...)
    # are 404/400: a KeyError or ValueError from a bug must not pass for "not found"/"bad request"
    class Buggy:
        def read(self, op, **args):
            raise error

    with TestClient(create_app(Buggy(), {}, secret=None), base_url=BASE) as api:
        r = api.get("/api/v1/cluster/summary")
    _is_error(r, 500, type(error).__name__)
    assert "a bug's" not in r.text and "a bug's" in caplog.text


class _CountingLink:
    """A master of one topology ``x`` (id ``x-1-1``) that records every call made to it."""

    def __init__(self):
        self.calls = []

    def read(self, op, **args):
        self.calls.append(op)
        return [{"id": "x-1-1", "name": "x"}] if op == "list" else {}

    def __getattr__(self, action):  # activate, deactivate, kill, rebalance, debug
        return lambda *args: self.calls.append(action)


@pytest.mark.parametrize("path, action", [("activate", "activate"), ("deactivate", "deactivate"),
                                          ("kill/0", "kill"), ("rebalance/0", "rebalance"),
                                          ("debug/enable/5", "debug"), ("component/c/debug/disable/5", "debug")])
def test_an_action_looks_the_topology_up_once(path, action):
    link = _CountingLink()
    with TestClient(create_app(link, {}, secret=SECRET.encode()), base_url=BASE) as api:
        assert api.post(f"/api/v1/topology/x-1-1/{path}", headers=AUTH).status_code == 200
    assert link.calls == ["list", action]


@pytest.mark.parametrize("path", ["/metrics", "/api/v1/topology/x-1-1/history"])
def test_a_failure_outside_the_rest_api_is_a_logged_500_in_storms_shape(path, caplog):
    # the pages, /metrics and the logviewer are not wrapped like the REST API's endpoints: the
    # app's own handler must answer for them (not Starlette's plain-text 500)
    from squall.ui.server import _app

    class Broken:
        def read(self, op, **args):
            raise RuntimeError("bug behind " + op)

    with TestClient(_app(Broken(), {}, None), base_url=BASE, raise_server_exceptions=False) as api:
        r = api.get(path)
    _is_error(r, 500, "RuntimeError")
    assert "bug behind" not in r.text
    assert f"GET {path}" in caplog.text and "bug behind list" in caplog.text


@pytest.fixture
def rpc_master(tmp_path):
    """A real master serving RPC on a thread, with topology ``t``: (its configuration, its storm id)."""
    import asyncio
    import threading

    from squall._config import cluster_conf
    from squall.cluster.master import Master
    from squall.cluster.served_ui import statistics_pages
    from squall.cluster.server import MasterServer

    from ..cluster.test_master import _topology
    conf = cluster_conf({"storm.local.dir": str(tmp_path), "nimbus.thrift.port": 0, "squall.secret": SECRET})
    master = Master(conf, pages=statistics_pages())
    storm_id = master.op_submit(name="t", conf={}, topology=_topology())
    loop = asyncio.new_event_loop()
    listening = threading.Event()

    async def serve():
        ready = asyncio.Event()
        task = asyncio.create_task(MasterServer(master).serve(ready))
        await ready.wait()
        listening.set()
        try:
            await task
        except asyncio.CancelledError:
            pass

    main = loop.create_task(serve())
    thread = threading.Thread(target=lambda: loop.run_until_complete(main), daemon=True)
    thread.start()
    assert listening.wait(10)
    try:
        yield {**conf, "nimbus.thrift.port": master.port}, storm_id
    finally:
        loop.call_soon_threadsafe(main.cancel)
        thread.join(10)
        loop.close()


def test_the_masters_refusals_cross_the_rpc_as_squalls_errors_and_its_failures_do_not(rpc_master):
    from squall._errors import BadParameterError, NotAliveException, UnknownComponentError
    from squall._errors import RemoteError
    conf, storm_id = rpc_master
    link = RpcLink(conf, timeout=5)
    try:
        with pytest.raises(UnknownComponentError, match="nope"):
            link.read("component_page", name="t", component="nope")
        with pytest.raises(UnknownComponentError, match="nope"):
            link.debug("t", "nope", True, 5)
        with pytest.raises(BadParameterError, match="601"):
            link.read("topology_page", name="t", window="601")
        with pytest.raises(NotAliveException):
            link.read("topology_page", name="gone")
        with pytest.raises(RemoteError) as e:  # a failure of the master is not a "bad parameter"
            link.read("topology_page", name="t", bogus=1)
        assert e.value.type == "ProtocolError" and "bogus" in str(e.value)  # refused at the master's edge
        with TestClient(create_app(link, conf, secret=SECRET.encode()), base_url=BASE) as api:
            _is_error(api.get(f"/api/v1/topology/{storm_id}/component/nope"), 404, "nope")
            _is_error(api.post(f"/api/v1/topology/{storm_id}/component/nope/debug/enable/5", headers=AUTH),
                      404, "nope")
            assert api.get(f"/api/v1/topology/{storm_id}/component/sink").json()["id"] == "sink"
    finally:
        link.close()


def test_local_cluster_serves_the_api_on_ui_port_until_shutdown():
    import json
    import urllib.request
    from squall import LocalCluster
    with LocalCluster(ui_port=0) as cluster:
        port = cluster.ui_port
        assert isinstance(port, int) and port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/cluster/summary", timeout=10) as r:
            assert json.load(r)["topologies"] == 0
    assert cluster.ui_port is None
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/cluster/summary", timeout=2)
