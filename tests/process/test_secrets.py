"""The cluster's secret on a real process-host cluster: it reaches no component, plan file, log
or ``info``, and everything under ``storm.local.dir`` is owner-only (issue 10, item 1); the
credentials a configuration holds (a URL's password, API keys...) reach no UI page, REST JSON,
``squall info`` or log (issue 33, item 6)."""

import json
import signal
import subprocess
import sys
import urllib.request

import yaml

from squall import TopologyBuilder
from squall._config import cluster_conf
from squall.cluster.client import MasterClient

from ..conftest import wait_until
from ..ports import free_ports
from .conftest import Cluster
from .semantics_topology import ListSpout, LogsItsStore, RecordsConf, topology_conf

SECRET = "s3cret-that-must-not-leak"


def test_the_secret_reaches_no_component_plan_log_or_info_and_files_are_owner_only(tmp_path):
    cluster = Cluster(tmp_path, **{"squall.secret": SECRET})
    out = tmp_path / "out"
    out.mkdir()
    b = TopologyBuilder()
    b.set_spout("items", ListSpout(["a", "b"]))
    b.set_bolt("conf", RecordsConf(), 2).shuffle_grouping("items")
    try:
        with cluster.client() as master:
            master.submit_topology("secrets", topology_conf(out), b.create_topology())
            assert wait_until(lambda: len(list(out.glob("conf-*.json"))) == 2, 60)
            info = master.get_topology_info("secrets")
        seen = [f.read_text() for f in out.glob("conf-*.json")]
        # no squall.* key (the cluster's own settings) reaches a component; values may name
        # squall's classes (the default topology.state.provider)
        assert all('"test.out.dir"' in text and SECRET not in text and '"squall.' not in text
                   and "storm.local.dir" not in text for text in seen)
        assert "squall.secret" not in info["configuration"] and SECRET not in repr(info)

        files = [p for p in cluster.dir.rglob("*") if p.is_file()]
        names = {p.name for p in files}
        assert {"state.json", "conf.yaml", "launch.yaml", "pid", "supervisor.log"} <= names
        assert any(n.endswith(".plan") for n in names) and any(n.startswith("worker-") for n in names)
        loose = {str(p): oct(p.stat().st_mode & 0o777) for p in [cluster.dir, *cluster.dir.rglob("*")]
                 if p.stat().st_mode & 0o777 != (0o700 if p.is_dir() else 0o600)}
        assert loose == {}
        for p in files:
            if p.suffix in (".plan", ".log", ".json"):
                assert SECRET.encode() not in p.read_bytes(), p
    finally:
        cluster.stop()
    assert SECRET not in (tmp_path / "master.log").read_text()


# credentials a user gives in the cluster's squall.yaml and a topology's conf (issue 33, item 6)
CREDENTIALS = {"redis-pw-8a1f", "dsn-pw-77c2", "apikey-3d9e", "bearer-5b60", "private-key-e41c", "jaas-pw-9f03",
               "state-pw-c18d"}


def test_credentials_by_value_reach_no_ui_page_rest_json_info_or_log(tmp_path):
    port, ui_port, *slots = free_ports(4)
    local = tmp_path / "storm-local"
    config = tmp_path / "squall.yaml"
    config.write_text(yaml.safe_dump({
        "storm.local.dir": str(local), "nimbus.thrift.port": port, "supervisor.slots.ports": slots,
        "ui.port": ui_port,
        "redis.url": "redis://:redis-pw-8a1f@127.0.0.1:6379/0",
        "db.dsn": "host=db user=app password=dsn-pw-77c2 dbname=clicks",
        "metrics.apikey": "apikey-3d9e", "alerts.bearer": "bearer-5b60",
        "tls.private.key": "private-key-e41c",
        "kafka.sasl.jaas.config": 'PlainLoginModule required username="app" password="jaas-pw-9f03";'}))
    out = tmp_path / "out"
    out.mkdir()
    b = TopologyBuilder()
    b.set_spout("items", ListSpout(["a", "b"]))
    b.set_bolt("store", LogsItsStore()).shuffle_grouping("items")
    conf = topology_conf(out, workers=1, **{
        "topology.state.provider.config": {"url": "redis://app:state-pw-c18d@127.0.0.1:6379/1", "timeout": 5}})
    squall = [sys.executable, "-m", "squall"]
    logs = [tmp_path / "nimbus.log", tmp_path / "ui.log"]
    nimbus = subprocess.Popen([*squall, "nimbus", "--host", "process", "--config", str(config)],
                              stdout=subprocess.PIPE, stderr=open(logs[0], "wb"), text=True)
    ui = None
    try:
        assert "squall nimbus ready" in nimbus.stdout.readline()
        ui = subprocess.Popen([*squall, "ui", "--config", str(config)], stdout=subprocess.PIPE,
                              stderr=open(logs[1], "wb"), text=True)
        base = ui.stdout.readline().strip().rpartition(" ")[2]
        assert base == f"http://127.0.0.1:{ui_port}"
        with MasterClient(cluster_conf(None, str(config))) as master:
            master.submit_topology("creds", conf, b.create_topology())
            storm_id = master.get_topology_info("creds")["id"]
        assert wait_until(lambda: list(out.glob("logged-*")), 60), "the bolt did not log"

        shown = {path: _fetch(base + path) for path in (
            f"/api/v1/topology/{storm_id}", "/api/v1/cluster/configuration", f"/topology.html?id={storm_id}",
            "/index.html", f"/api/v1/topology/{storm_id}/component/store")}
        info = subprocess.run([*squall, "info", "creds", "--config", str(config)], capture_output=True, timeout=60)
        assert info.returncode == 0, info.stderr
        shown["squall info"] = info.stdout
        # shown, with the credential masked: the key is there, its host too
        topology = json.loads(shown[f"/api/v1/topology/{storm_id}"])["configuration"]
        assert topology["topology.state.provider.config"]["url"] == "redis://app:***@127.0.0.1:6379/1"
        cluster = json.loads(shown["/api/v1/cluster/configuration"])
        assert cluster["redis.url"] == "redis://:***@127.0.0.1:6379/0"
        assert cluster["db.dsn"] == "host=db user=app password=*** dbname=clicks"
        assert not {"metrics.apikey", "alerts.bearer", "tls.private.key", "kafka.sasl.jaas.config"} & set(cluster)
        assert json.loads(info.stdout)["configuration"]["redis.url"] == "redis://:***@127.0.0.1:6379/0"
        for where, body in shown.items():
            assert not _leaked(body), f"{where} shows {_leaked(body)}"
        with MasterClient(cluster_conf(None, str(config))) as master:
            master.kill_topology("creds", wait_secs=0)
    finally:
        for proc in (ui, nimbus):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
    worker_logs = [p for p in local.rglob("*") if p.is_file() and ".log" in p.name]
    assert any(p.name == "worker.log" for p in worker_logs) and any(p.name == "supervisor.log" for p in worker_logs)
    worker_log = next(p for p in worker_logs if p.name == "worker.log").read_text()
    assert "state store config: {'url': 'redis://app:***@127.0.0.1:6379/1'" in worker_log
    for path in [*logs, *worker_logs]:
        assert not _leaked(path.read_bytes()), f"{path} holds {_leaked(path.read_bytes())}"


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read()


def _leaked(raw: bytes) -> set[str]:
    return {c for c in CREDENTIALS if c.encode() in raw}
