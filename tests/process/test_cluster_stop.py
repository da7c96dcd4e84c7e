"""The process tests' `Cluster.stop` (tests/process/conftest.py): what it stops may end on its
own meanwhile, as the master's supervisor and its workers do once the master stopped."""

import signal
import subprocess
import sys

from . import conftest
from .conftest import Cluster


def test_stop_takes_a_process_that_ended_after_its_listing_as_stopped_and_stops_the_rest(tmp_path, monkeypatch):
    """A worker the stopping supervisor ended after `Cluster.stop` listed it: its SIGTERM found
    no such process, the processes listed after it were left running, and the test, which had
    passed, failed in its teardown (ProcessLookupError; tests/process/test_nodes.py under load)."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # listed while it ran; gone (and reaped) when its signal is sent
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    listed = [False]

    def squall_processes(marker):
        if not listed[0]:
            listed[0] = True
            return {ended.pid: "python -m squall.worker ...", left.pid: "python -m squall.cluster.supervisor ..."}
        return {} if left.poll() is not None else {left.pid: "python -m squall.cluster.supervisor ..."}

    monkeypatch.setattr(conftest, "_squall_processes", squall_processes)
    cluster = Cluster.__new__(Cluster)  # no master to start: one that has exited already
    cluster.dir = tmp_path / "storm-local"
    cluster.master = subprocess.Popen([sys.executable, "-c", "pass"])
    cluster.master.wait()
    try:
        cluster.stop()
        assert left.wait(10) == -signal.SIGTERM
    finally:
        if left.poll() is None:
            left.kill()
            left.wait()
