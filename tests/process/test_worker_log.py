"""On the process host every worker writes its Python logging to Storm's place,
``<storm.log.dir>/workers-artifacts/<topology-id>/<port>/worker.log``, each line naming the
component and task; ``squall logs`` prints a component's lines; an error names its worker."""

from squall import TopologyBuilder
from squall.cli import main

from ..conftest import wait_until
from .conftest import Cluster
from .logconfig_topology import Numbers, Reconfigures
from .logging_topology import Counter, Reporter


def test_user_logging_reaches_the_worker_log_with_component_and_task_and_squall_logs_prints_it(tmp_path, capsys):
    cluster = Cluster(tmp_path)
    try:
        b = TopologyBuilder()
        b.set_spout("counter", Counter(20), 1)
        b.set_bolt("reporter", Reporter(), 2).shuffle_grouping("counter")
        with cluster.client() as m:
            m.submit_topology("talk", {"topology.workers": 1}, b.create_topology())
            info = m.get_topology_info("talk")
        topo_dir = cluster.dir / "logs" / "workers-artifacts" / info["id"]

        def logged():
            return any("reporter saw 20" in p.read_text() for p in topo_dir.glob("*/worker.log"))
        assert wait_until(logged, 30), sorted(str(p) for p in cluster.dir.rglob("*"))
        (log,) = topo_dir.glob("*/worker.log")
        port = int(log.parent.name)
        with cluster.client() as m:
            info = m.get_topology_info("talk")
        reporter_tasks = {int(t) for t in info["components"]["reporter"]["task_stats"]}
        (counter_task,) = {int(t) for t in info["components"]["counter"]["task_stats"]}
        lines = log.read_text().splitlines()
        saw = [line for line in lines if "reporter saw" in line]
        assert len(saw) == 20
        assert all(any(f"[INFO] [reporter:{t}] reporter saw" in line for t in reporter_tasks) for line in saw)
        assert any(f"[counter:{counter_task}] counter emits 7" in line for line in lines)
        assert log.stat().st_mode & 0o077 == 0
        # an error the bolt reported is in its worker's log with its traceback, as Storm logs each
        (at,) = [i for i, line in enumerate(lines) if "reported an error" in line]
        assert "[ERROR]" in lines[at] and "[reporter:" in lines[at]
        assert "ValueError: the tuple 3 is bad" in "\n".join(lines[at:at + 8])

        def reported():
            with cluster.client() as m:
                return [e for e in m.get_topology_info("talk")["errors"] if e["component"] == "reporter"]
        assert wait_until(reported, 15)
        (err,) = reported()
        assert (err["host"], err["worker"]) == ("127.0.0.1", port)  # what a link to the log needs

        capsys.readouterr()
        assert main(["logs", "talk", "-c", "reporter", "-n", "5", "--config", str(cluster.file)]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == f"==> {log} <=="
        assert len(out) == 6 and all("] reporter saw " in x for x in out[1:]) and not any("counter emits" in x for x in out)
        assert main(["logs", "talk", "--config", str(cluster.file), "--port", str(port + 1 if port < 65535 else 1)]) == 1
        assert "no worker logs of talk for port" in capsys.readouterr().err
    finally:
        cluster.stop()


def test_a_bolt_that_configures_logging_its_own_way_keeps_squalls_error_lines_in_the_worker_log(tmp_path):
    """dictConfig in a bolt's prepare (its disable_existing_loggers, true by default, disabled
    squall's loggers; its root replaced the worker's handler) left the worker log without the
    lines of the inputs execute raised on: every one of them is there, with its traceback."""
    cluster = Cluster(tmp_path)
    try:
        b = TopologyBuilder()
        b.set_spout("numbers", Numbers(9), 1)
        b.set_bolt("reconf", Reconfigures(), 1).shuffle_grouping("numbers")
        with cluster.client() as m:
            m.submit_topology("reconf", {"topology.workers": 1}, b.create_topology())
            tid = m.get_topology_info("reconf")["id"]
        topo_dir = cluster.dir / "logs" / "workers-artifacts" / tid

        def raised():
            return sum(p.read_text().count("execute raised on an input") for p in topo_dir.glob("*/worker.log"))
        assert wait_until(lambda: raised() >= 3, 30), raised()
        with cluster.client() as m:
            assert wait_until(lambda: len(m.get_topology_info("reconf")["errors"]) >= 3, 15)
            assert len(m.get_topology_info("reconf")["errors"]) == 3
        (log,) = topo_dir.glob("*/worker.log")
        text = log.read_text()
        assert raised() == 3
        for n in (3, 6, 9):
            assert text.count(f"ValueError: the tuple {n} is bad") == 1, text
        assert "[ERROR] [reconf:" in text and "user saw" not in text  # the user's own lines follow its configuration
    finally:
        cluster.stop()
