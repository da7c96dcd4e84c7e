"""Spark tests share one SparkSession per module (a cold start costs 5-10 s and ~370 MB):
each module asks for ``spark_cluster`` with its Spark master, and each test submits its own
topology and kills it at the end."""

import os
from pathlib import Path

import pytest

from ..conftest import wait_until
from ..process.conftest import FAST_SYNC

pytest.importorskip("pyspark")


def spark_cluster_of(spark_master, tmp_path_factory, **extra):
    """The body of a module's ``spark_cluster`` fixture: a SparkCluster on ``spark_master``
    (``extra``: more cluster settings), shut down after the module."""
    from squall.cluster.spark import SparkCluster
    local_dir = tmp_path_factory.mktemp("spark") / "storm-local"
    conf = {"storm.local.dir": str(local_dir), "nimbus.thrift.port": 0, "nimbus.task.timeout.secs": 5,
            "squall.spark.stop.grace.secs": 3, **FAST_SYNC, **extra}
    cluster = SparkCluster(master=spark_master, conf=conf)
    try:
        yield cluster
    finally:
        cluster.shutdown()


class Running:
    """Submit, and kill at the end even if the test fails (the module shares its task slots)."""

    def __init__(self, cluster, name, conf, topology):
        self.cluster, self.name = cluster, name
        cluster.submit_topology(name, conf, topology)

    def __enter__(self):
        return self.cluster

    def __exit__(self, *exc):
        try:
            self.cluster.kill_topology(self.name, wait_secs=0)
        except Exception:
            pass
        # the next test needs the task slots back
        wait_until(lambda: not self.cluster.spark.sparkContext.statusTracker().getActiveJobsIds(), 20)


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s children (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def python_workers() -> list[int]:
    """Spark's Python worker processes under this test process: those forked by a
    ``pyspark.daemon`` (the daemon itself stays for the executor's life), not the squall workers
    each forks in turn (`spark_task_process`), whose command line is the daemon's too."""
    daemons = _daemons()
    return [p for p in _descendants(os.getpid()) if _parent(p) in daemons]


def _daemons() -> set[int]:
    """The ``pyspark.daemon`` processes under this test process (not the processes they forked)."""
    forked = {p for p in _descendants(os.getpid()) if "pyspark.daemon" in cmdline(p)}
    return {p for p in forked if _parent(p) not in forked}


def ended(pid: int) -> bool:
    """Whether process ``pid`` is gone, or dead and not yet reaped (a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def spark_task_process(worker_pid: int) -> int:
    """The Spark task's Python worker that runs the squall worker ``worker_pid`` (the pid the
    master shows) as its child (`squall.cluster.spark_task.run_watched`)."""
    parent = _parent(worker_pid)
    assert _parent(parent) in _daemons(), \
        f"worker {worker_pid}'s parent {parent} is not a Spark Python worker: {cmdline(parent)}"
    return parent


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out
