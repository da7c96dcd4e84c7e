"""A dead worker's figures across a master restart, on the process host (a real master process,
SIGKILLed and started again; its own supervisor process, which keeps the workers running).

The spout's worker acks 90 and fails 10 of each batch of 100 ids (`ended_launch_topology`).
`squall monitor` and the UI's history read the topology after batch 1; then batch 2 runs in the
same launch, the launch is SIGKILLed, its relaunch runs batch 3, and the master is SIGKILLed and
started again before they read once more. Between the two readings the topology emitted 200
ids, acked 180 and failed 20. On main the restarted master had lost the dead launch's last word
(its memory only), so the readers took the relaunch alone: monitor 100 emitted, the history 90
acked and 10 failed. The master now keeps it with the topology's record (``state.json``).
"""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from squall.cli import _cluster

from ..conftest import wait_until
from .conftest import Cluster, topology_errors
from .ended_launch_topology import FAIL_EVERY, ended_launch_topology, go

N = 100
pytest.importorskip("starlette", reason="the UI's history needs the ui extra: pip install -e '.[ui]'")


def _spout(m):
    """The spout task's (slot, launch id), acked, failed and worker port, as the master last heard them."""
    stats = m.get_topology_info("flow")["components"]["batches"]["task_stats"]
    if not stats:
        return None
    (st,) = stats.values()
    return (st["slot"], st["launch_id"]), st["acked"], st["failed"], st["worker"]


def _counted(m, acked, failed, after=None):
    """Whether the spout task's launch (another one than ``after``, if given) counted ``acked`` and ``failed``."""
    s = _spout(m)
    return s is not None and s[1:3] == (acked, failed) and (after is None or s[0] != after)


@pytest.mark.timeout(120)
def test_monitor_and_the_history_count_a_dead_launchs_rest_across_a_master_restart(tmp_path, monkeypatch, capsys):
    from squall.ui.history import History
    from squall.ui.link import RpcLink
    from squall.ui.pages import read_totals

    cluster = Cluster(tmp_path, supervise=False, **{"worker.heartbeat.frequency.secs": 0.2})
    with open(tmp_path / "supervisor.log", "ab") as log:  # the child holds its own copy
        sup = subprocess.Popen([sys.executable, "-m", "squall.cluster.supervisor", "--conf", str(cluster.file)],
                               stdout=subprocess.DEVNULL, stderr=log)
    out = tmp_path / "out"
    out.mkdir()
    history = History(1, 600)
    link = RpcLink(dict(cluster.conf))
    try:
        with cluster.client() as m:
            m.submit_topology("flow", {"topology.workers": 2, "topology.message.timeout.secs": 30},
                              ended_launch_topology(str(out)))
            assert wait_until(lambda: _spout(m) is not None, 60), \
                (tmp_path / "supervisor.log").read_text()[-3000:] + topology_errors(cluster.client, "flow")
            go(out, 1, N)
            assert wait_until(lambda: _counted(m, N - N // FAIL_EVERY, N // FAIL_EVERY), 30), _spout(m)
        history.record(list(read_totals(link)), time.time())

        def between_the_readings():
            """Batch 2 in the launch that then dies, batch 3 in its relaunch, then the master restarts."""
            with cluster.client() as m:
                go(out, 2, N)
                assert wait_until(lambda: _counted(m, 2 * (N - N // FAIL_EVERY), 2 * (N // FAIL_EVERY)), 30)
                launch, _acked, _failed, port = _spout(m)
                [pid] = [w["pid"] for w in m.get_topology_info("flow")["workers"] if w["slot"].endswith(f":{port}")]
                os.kill(pid, signal.SIGKILL)
                assert wait_until(lambda: (_spout(m) or (launch,))[0] != launch, 60), _spout(m)
                go(out, 3, N)
                assert wait_until(lambda: _counted(m, N - N // FAIL_EVERY, N // FAIL_EVERY, after=launch), 30), _spout(m)
            cluster.master.send_signal(signal.SIGKILL)
            cluster.master.wait(10)
            cluster.start_master()
            with cluster.client() as m:  # the relaunch beats the new master
                assert wait_until(lambda: _counted(m, N - N // FAIL_EVERY, N // FAIL_EVERY, after=launch), 30), _spout(m)

        class PolledAround:
            """The master as `squall monitor` polls it: before its second reading, the above."""

            def __init__(self, client):
                self.client, self.polls = client, 0

            def get_topology_info(self, name):
                self.polls += 1
                if self.polls == 2:
                    between_the_readings()
                return self.client.get_topology_info(name)

        with cluster.client() as m:
            monkeypatch.setattr(_cluster, "_master", lambda args: contextlib.nullcontext(PolledAround(m)))
            args = argparse.Namespace(name="flow", component="batches", stream=None, watch="emitted",
                                      interval=0.001, count=1)
            assert _cluster.cmd_monitor(args) == 0
        rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
        assert [int(r[5]) for r in rows] == [2 * N]  # batch 2 (the dead launch) and batch 3
        history.record(list(read_totals(link)), time.time() + 1)
        first, second = next(iter(history._rings.values()))
        secs = second.time - first.time
        assert (round(second.acked_per_sec * secs), round(second.failed_per_sec * secs)) == \
            (2 * (N - N // FAIL_EVERY), 2 * (N // FAIL_EVERY))
        assert (second.acked, second.failed) == (N - N // FAIL_EVERY, N // FAIL_EVERY)  # the pages': the relaunch's
        with cluster.client() as m:
            m.kill_topology("flow", wait_secs=0)
    finally:
        sup.terminate()
        sup.wait(20)
        cluster.stop()
