"""A real process-host cluster for these tests: a master (with its supervisor) as a subprocess,
on free ports, in the test's own ``storm.local.dir``."""

import contextlib
import os
import signal
import subprocess
import sys

import pytest
import yaml

from squall._config import cluster_conf
from squall.cluster.client import MasterClient

from ..conftest import QUICK_CRASH_BACKOFF, processes_mentioning, wait_until
from ..ports import free_ports


def _squall_processes(marker: str) -> dict[int, str]:
    """pid -> command line of squall's processes that mention ``marker``."""
    return {pid: cmd for pid, cmd in processes_mentioning(marker).items() if "squall" in cmd}


FAST_SYNC = {"supervisor.monitor.frequency.secs": 0.2, "nimbus.monitor.freq.secs": 0.2}
"""Test clusters sync 5 times a second instead of every second: a supervisor learns of a submit
or a kill (and the master runs a due kill or rebalance, or sees a worker gone) up to 0.2 s after
it happens instead of up to 1 s, which each submit and kill of a test used to wait for."""


def topology_errors(connect, name: str) -> str:
    """The errors the master keeps for topology ``name``, one a line, for an assertion's message
    (a worker that could not start says why only there: its supervisor's log has its exit status);
    what kept them from being read if they cannot be. ``connect``: a client factory (`Cluster.client`)."""
    try:
        with connect() as m:
            errors = m.get_topology_info(name)["errors"]
    except Exception as e:  # noqa: BLE001 (a message for a failing test: the master may be down)
        return f"\n--- errors of {name}: not read ({e})"
    return "\n".join(["", f"--- errors of {name}: {len(errors)}", *(e["error"] for e in errors)])


class Cluster:
    def __init__(self, tmp_path, supervise=True, **extra):
        """``extra``: more cluster settings (keys with dots: pass them as ``**{"a.b": 1}``).
        ``supervise``: the master starts a supervisor of its own (False: the test starts them)."""
        master_port, *slots = free_ports(3)
        self.dir = tmp_path / "storm-local"
        self.conf = {"storm.local.dir": str(self.dir), "nimbus.thrift.port": master_port,
                     "supervisor.slots.ports": slots, "nimbus.task.timeout.secs": 5,
                     "squall.worker.max.launch.attempts": 2, **FAST_SYNC, **extra}
        self.file = tmp_path / "squall.yaml"
        self.file.write_text(yaml.safe_dump(self.conf))
        self.master = None
        self.supervise = supervise
        self.start_master()

    def start_master(self):
        code = ("import logging, sys; logging.basicConfig(level=logging.INFO);"
                "from squall._config import cluster_conf; from squall.cluster.process import run_nimbus;"
                f"sys.exit(run_nimbus(cluster_conf(None, {str(self.file)!r}), supervise={self.supervise!r}))")
        self.master = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                                       stderr=open(self.dir.parent / "master.log", "ab"))
        assert wait_until(self._reachable, 20), "the master did not come up"

    def _reachable(self):
        try:
            with MasterClient(cluster_conf(self.conf)) as m:
                m.list_topologies()
            return True
        except Exception:
            return False

    def client(self):
        return MasterClient(cluster_conf(self.conf))

    def workers(self):
        return {p: c for p, c in _squall_processes(str(self.dir)).items() if "squall.worker" in c}

    def supervisors(self):
        return [p for p, c in _squall_processes(str(self.dir)).items() if "squall.cluster.supervisor" in c]

    def stop(self):
        if self.master.poll() is None:
            self.master.send_signal(signal.SIGTERM)
            self.master.wait(10)
        sup = _squall_processes(str(self.dir))
        for pid in sup:  # a supervisor left by a SIGKILLed master
            # one may have ended since it was listed: the master's stop ends its supervisor,
            # which ends its workers, on their own time
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        assert wait_until(lambda: not _squall_processes(str(self.dir)), 15), _squall_processes(str(self.dir))


@pytest.fixture
def cluster(tmp_path):
    """A fresh cluster per test (for tests that kill parts of it)."""
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def roomy_cluster(tmp_path):
    """A fresh cluster per test with 4 slots, so that each component of a four-component topology
    (a spout, a window, a sink and the $checkpointspout) gets a worker of its own."""
    c = Cluster(tmp_path, **{"supervisor.slots.ports": free_ports(4)})
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def crashing_cluster(tmp_path):
    """A fresh cluster per test whose workers are expected to crash in a row (`QUICK_CRASH_BACKOFF`)."""
    c = Cluster(tmp_path, **QUICK_CRASH_BACKOFF)
    try:
        yield c
    finally:
        c.stop()


@contextlib.contextmanager
def module_cluster_of(tmp_path_factory, **extra):
    """One cluster for a whole module (each test submits its own topology, under its own name
    and directory: a master and supervisor per test cost ~1.5 s), with ``extra`` settings."""
    c = Cluster(tmp_path_factory.mktemp("cluster"), **extra)
    try:
        yield c
    finally:
        c.stop()


def clear_topologies(cluster: Cluster) -> None:
    """Kill every topology of a module's ``cluster`` and wait for their workers to end, after a
    test (one that failed before its own kill too): the next test finds both slots free and
    counts only its own workers."""
    with cluster.client() as m:
        for t in m.list_topologies():
            m.kill_topology(t["name"], wait_secs=0)
    assert wait_until(lambda: not cluster.workers(), 30), cluster.workers()


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One cluster for a whole module (each test submits its own topology)."""
    with module_cluster_of(tmp_path_factory) as c:
        yield c


