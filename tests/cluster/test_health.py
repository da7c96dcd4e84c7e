"""Supervisor health checks (Storm's "Monitoring Health of Supervisors"): real scripts for the
verdicts, an injected runner and clock for the schedule, and a supervisor and master wired
in-process for what an unhealthy node does."""

import time

import cloudpickle
import pytest

from squall import TopologyBuilder
from squall._config import cluster_conf
from squall.cluster.health import HealthCheck, HealthMonitor, ScriptRun, run_script, scripts_in
from squall.cluster.launcher import Launcher
from squall.cluster.master import Master
from squall.cluster.supervisor import Supervisor
from squall.engine.clock import SimulatedClock
from squall.testing import FeederSpout

from ..acceptance.components import AckBolt
from ..conftest import processes_mentioning


def _script(directory, name, body, executable=True):
    path = directory / name
    path.write_text(body)
    path.chmod(0o755 if executable else 0o644)
    return path


def test_a_script_that_prints_an_error_line_exits_non_zero_or_times_out_makes_the_node_unhealthy(tmp_path):
    _script(tmp_path, "a-passes", "#!/bin/sh\necho all good\n")
    _script(tmp_path, "b-error-line", "#!/bin/sh\necho checking\necho 'ERROR disk /data is 99% full'\nexit 0\n")
    _script(tmp_path, "c-exit-code", "#!/bin/sh\nexit 3\n")
    # it starts a child that holds its stdout: the timeout must kill both, not wait for the child
    _script(tmp_path, "d-hangs", "#!/bin/sh\nsleep 30 &\nsleep 30\n")
    _script(tmp_path, "e-not-executable", "#!/bin/sh\necho ERROR never run\n", executable=False)
    _script(tmp_path, "f-no-interpreter", "echo ERROR not a script the kernel can run\n")
    (tmp_path / "g-a-directory").mkdir()
    check = HealthCheck(tmp_path, timeout_secs=0.5)
    started = time.monotonic()
    report = check.run()
    assert time.monotonic() - started < 10  # the hung script and its child were killed at the timeout
    verdicts = {r.script.name: (r.healthy, r.why) for r in report.results}
    assert verdicts["a-passes"] == (True, "")
    assert verdicts["b-error-line"] == (False, "ERROR disk /data is 99% full")
    assert verdicts["c-exit-code"] == (False, "exited with status 3")
    assert verdicts["d-hangs"] == (False, "did not finish within storm.health.check.timeout.ms (500 ms)")
    assert verdicts["f-no-interpreter"][0] is False and "could not be run" in verdicts["f-no-interpreter"][1]
    assert set(verdicts) == {"a-passes", "b-error-line", "c-exit-code", "d-hangs", "f-no-interpreter"}
    assert not report.healthy
    assert report.problem.startswith("b-error-line: ERROR disk /data is 99% full; c-exit-code: exited with status 3")


def test_a_timed_out_script_leaves_no_process_behind(tmp_path):
    marker = f"{tmp_path}/child-marker"
    _script(tmp_path, "hangs", f"#!/bin/bash\n(exec -a {marker} sleep 30) &\nsleep 30\n")
    run = run_script(tmp_path / "hangs", 0.5)
    assert run.timed_out
    deadline = time.monotonic() + 5
    while processes_mentioning(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes_mentioning(marker)


def test_timeouts_pass_when_storm_health_check_fail_on_timeouts_is_false(tmp_path):
    _script(tmp_path, "hangs", "#!/bin/sh\nsleep 30\n")
    conf = cluster_conf({"storm.health.check.dir": str(tmp_path), "storm.health.check.timeout.ms": 300,
                         "storm.health.check.fail.on.timeouts": False})
    assert HealthCheck.from_conf(conf).run().healthy


def test_no_directory_or_no_script_is_healthy(tmp_path):
    assert scripts_in(tmp_path / "missing") == []
    assert HealthCheck(tmp_path / "missing", 1).run().healthy
    assert HealthCheck(tmp_path, 1).run().healthy


def test_a_bad_health_check_setting_is_named():
    with pytest.raises(Exception, match="storm.health.check.timeout.ms"):
        cluster_conf({"storm.health.check.timeout.ms": -5})


def test_rounds_run_at_once_then_every_interval_of_the_injected_clock(tmp_path):
    _script(tmp_path, "check", "#!/bin/sh\n")
    runs = []
    outputs = iter(["", "ERROR fan failed", ""])

    def runner(path, timeout):
        runs.append((path.name, timeout))
        return ScriptRun(0, next(outputs))

    clock = SimulatedClock(100.0)
    check = HealthCheck(tmp_path, timeout_secs=2.0, interval_secs=30, runner=runner, clock=clock)
    assert check.tick().healthy and runs == [("check", 2.0)]
    clock.advance(29)
    check.tick()
    assert len(runs) == 1  # not due yet
    clock.advance(1)
    assert check.tick().problem == "check: ERROR fan failed"
    clock.advance(10)
    assert check.tick().problem == "check: ERROR fan failed"  # the verdict stands until the next round
    clock.advance(20)
    assert check.tick().healthy and len(runs) == 3


# --- an unhealthy node, supervisor and master wired in-process -------------------------------------------
class FakeWorkers(Launcher):
    """A machine's slots whose workers are entries in a dict."""

    def __init__(self, host, ports):
        self.host = host
        self.ports = ports
        self.procs = {}

    def slots(self):
        return list(self.ports)

    def start(self, port, launch):
        self.procs[port] = launch

    def stop(self, port):
        self.procs.pop(port, None)

    def running(self):
        return dict(self.procs)

    def exits(self):
        return []


class Direct:
    """The master's operations, called in this process."""

    def __init__(self, master):
        self.master = master

    def call(self, op, **args):
        return self.master.handle(op, args).reply  # the request as over RPC, the reply record as it is


def test_an_unhealthy_node_stops_its_workers_and_the_master_moves_them_to_a_healthy_one(tmp_path):
    conf = cluster_conf({"storm.local.dir": str(tmp_path / "local")})
    master = Master(conf)
    checks = tmp_path / "checks"
    checks.mkdir()
    script = _script(checks, "disk", "#!/bin/sh\necho ok\n")
    sick_check = HealthCheck(checks, timeout_secs=5)
    a, b = FakeWorkers("10.0.0.1", [6700]), FakeWorkers("10.0.0.2", [6700])
    sup_a = Supervisor(conf, a, Direct(master), "a", health=HealthMonitor(sick_check))
    sup_b = Supervisor(conf, b, Direct(master), "b")
    sup_a.sync()
    master.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    sup_a.sync()
    sup_b.sync()
    assert list(a.running()) == [6700] and not b.running()  # b joined after: the topology is on a

    script.write_text("#!/bin/sh\necho 'ERROR disk /data is full'\n")
    sick_check.run()
    sup_a.sync()  # stops its worker, and the master moves it
    assert not a.running()
    assert list(master.topologies["t"].assignment) == ["10.0.0.2:6700"]
    sup_b.sync()
    assert list(b.running()) == [6700]
    (supervisor,) = [s for s in master.op_supervisors() if s["id"] == "a"]
    assert supervisor["healthy"] is False and supervisor["health_problem"] == "disk: ERROR disk /data is full"
    assert master.op_cluster_info()["slots_total"] == 1  # a's slot can take no worker: not counted
    sup_a.sync()
    assert not a.running()  # nothing is started on an unhealthy node

    script.write_text("#!/bin/sh\necho ok\n")
    sick_check.run()
    sup_a.sync()
    assert [s["healthy"] for s in master.op_supervisors()] == [True, True]
    assert master.op_cluster_info()["slots_total"] == 2
    master.op_kill(name="t", wait_secs=0)
    master.monitor()
    master.op_submit(name="u", conf={"topology.workers": 2}, topology=_topology())
    assert sorted(master.topologies["u"].assignment) == ["10.0.0.1:6700", "10.0.0.2:6700"]  # a takes work again


def test_squall_node_health_check_prints_each_verdict_and_exits_1_when_unhealthy(tmp_path, capsys):
    from squall.cli import main

    _script(tmp_path, "a-fine", "#!/bin/sh\necho fine\n")
    assert main(["node-health-check", "-c", f"storm.health.check.dir={tmp_path}"]) == 0
    assert capsys.readouterr().out == f"{tmp_path}/a-fine: ok\n"
    _script(tmp_path, "b-memory", "#!/bin/sh\necho 'ERROR memory is low'\n")
    assert main(["node-health-check", "-c", f"storm.health.check.dir={tmp_path}"]) == 1
    assert capsys.readouterr().out.splitlines()[1] == f"{tmp_path}/b-memory: ERROR memory is low"


def test_a_node_that_starts_unhealthy_is_never_given_work(tmp_path):
    """The first round runs before the supervisor's first sync, so the master never places a
    topology on a node whose checks already fail."""
    conf = cluster_conf({"storm.local.dir": str(tmp_path / "local")})
    master = Master(conf)
    master.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    _script(tmp_path, "memory", "#!/bin/sh\n")
    clock = SimulatedClock()
    monitor = HealthMonitor(HealthCheck(tmp_path, 5, runner=lambda path, timeout: ScriptRun(0, "ERROR swap full"),
                                        clock=clock)).start()
    try:
        assert monitor.problem == "memory: ERROR swap full"  # known when start returns
        machine = FakeWorkers("10.0.0.1", [6700])
        Supervisor(conf, machine, Direct(master), "a", health=monitor).sync()
        assert not machine.running() and master.topologies["t"].assignment == {}
    finally:
        monitor.stop()


def _topology():
    builder = TopologyBuilder()
    builder.set_spout("feed", FeederSpout(["x"]), 1)
    builder.set_bolt("sink", AckBolt(), 2).shuffle_grouping("feed")
    return cloudpickle.dumps(builder.create_topology())
