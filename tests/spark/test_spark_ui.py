"""``SparkCluster(ui_port=...)`` serves the UI daemon's REST API in the driver, beside the master,
until shutdown."""

import json
import urllib.request

import pytest

pytest.importorskip("uvicorn")


def test_the_driver_serves_the_rest_api_until_shutdown(tmp_path):
    from squall.cluster.spark import SparkCluster
    conf = {"storm.local.dir": str(tmp_path / "storm-local"), "nimbus.thrift.port": 0}
    cluster = SparkCluster(master="local[1]", conf=conf, ui_port=0)
    try:
        port = cluster.ui_port
        base = f"http://127.0.0.1:{port}/api/v1"
        with urllib.request.urlopen(f"{base}/cluster/summary", timeout=10) as r:
            summary = json.load(r)
        assert summary["slotsTotal"] == 1 and summary["topologies"] == 0
        with urllib.request.urlopen(f"{base}/nimbus/summary", timeout=10) as r:
            assert json.load(r)["nimbuses"][0]["port"] == cluster.conf["nimbus.thrift.port"]
    finally:
        cluster.shutdown()
    assert cluster.ui_port is None
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/cluster/summary", timeout=2)
