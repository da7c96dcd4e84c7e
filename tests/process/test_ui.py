"""``squall ui`` on a real process-host cluster: it serves Storm's REST API for the master its
configuration names, reads are open, an action needs the cluster's secret (read from
``<storm.local.dir>/secret`` as every daemon reads it) and takes effect."""

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from squall import TopologyBuilder

from ..conftest import wait_until
from ..ports import free_ports
from .semantics_topology import ListSpout, RecordsConf, topology_conf

pytest.importorskip("uvicorn")


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def _post(url, headers):
    request = urllib.request.Request(url, data=b"", method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def test_squall_ui_serves_the_clusters_master(shared_cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    b = TopologyBuilder()
    b.set_spout("items", ListSpout(["a", "b"]))
    b.set_bolt("conf", RecordsConf()).shuffle_grouping("items")
    with shared_cluster.client() as master:
        master.submit_topology("ui-proc", topology_conf(out, workers=1), b.create_topology())
        storm_id = master.get_topology_info("ui-proc")["id"]
    (port,) = free_ports(1)
    ui = subprocess.Popen([sys.executable, "-m", "squall.cli", "ui", "--config", str(shared_cluster.file),
                           "-c", f"ui.port={port}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert ui.stdout.readline().strip() == f"squall ui ready at http://127.0.0.1:{port}"
        base = f"http://127.0.0.1:{port}/api/v1"
        assert wait_until(lambda: _get(f"{base}/supervisor/summary")["supervisors"], 20)
        tops = _get(f"{base}/topology/summary")["topologies"]
        assert [(t["id"], t["name"], t["status"]) for t in tops] == [(storm_id, "ui-proc", "ACTIVE")]
        assert _get(f"{base}/nimbus/summary")["nimbuses"][0]["port"] == shared_cluster.conf["nimbus.thrift.port"]

        status, body = _post(f"{base}/topology/{storm_id}/deactivate", {})
        assert status == 403 and "X-Squall-Secret" in body["errorMessage"]
        secret = (shared_cluster.dir / "secret").read_text()
        status, body = _post(f"{base}/topology/{storm_id}/deactivate", {"X-Squall-Secret": secret})
        assert (status, body["status"]) == (200, "success")
        with shared_cluster.client() as master:
            assert master.get_topology_info("ui-proc")["status"] == "INACTIVE"
            master.kill_topology("ui-proc", wait_secs=0)
    finally:
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(15) == 0
