"""The cluster's secret on a real process-host cluster: it reaches no component, plan file, log
or ``info``, and everything under ``storm.local.dir`` is owner-only (issue 10, item 1)."""

from squall import TopologyBuilder

from ..conftest import wait_until
from .conftest import Cluster
from .semantics_topology import ListSpout, RecordsConf, topology_conf

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
