"""A slot's ``worker.log`` on the process host across a restart of its worker, as Storm keeps a
worker's log per topology and port: the dead worker's lines stay (every one it logged, in
order, its last words and traceback too), the next launch's follow them after a line naming
the launch, and the logviewer pages and searches both."""

import pytest

from squall import TopologyBuilder
from squall.cluster.logs import artifacts_root

from ..conftest import wait_until
from .conftest import Cluster
from .restart_log_topology import DiesOnce, Logs, Ticker, logged_line
from .worker_log_reading import check_the_logviewer, kill_mid_stream_and_count, launch_lines, numbers, pids, read_log

ROLLED = {"squall.log.max.bytes": 16384, "squall.log.backup.count": 50}  # ~150 lines a file, none dropped here


def _submit(cluster, name, bolt, **conf):
    b = TopologyBuilder()
    b.set_spout("ticks", Ticker(0.002), 1)
    b.set_bolt("logs", bolt, 1).shuffle_grouping("ticks")
    with cluster.client() as m:
        m.submit_topology(name, {"topology.workers": 1, **conf}, b.create_topology())
        return m.get_topology_info(name)["id"]


def _worker(cluster, name):
    """The topology's one worker, once it has beaten with its pid (None before)."""
    with cluster.client() as m:
        workers = m.get_topology_info(name)["workers"]
    return workers[0] if len(workers) == 1 and workers[0]["pid"] is not None else None


def _stop(cluster, name):
    """Kill the topology and wait for its worker to end: its files roll no more while read."""
    with cluster.client() as m:
        m.kill_topology(name, wait_secs=0)
    assert wait_until(lambda: not cluster.workers(), 30), cluster.workers()


@pytest.mark.parametrize("rolling", [{}, ROLLED], ids=["one-file", "rolled"])
def test_a_sigkilled_workers_lines_stay_in_its_slots_log_above_the_next_launchs(tmp_path, rolling):
    """SIGKILL mid-stream (`kill_mid_stream_and_count`): every line the dead worker wrote is in
    the slot's log after the restart, in order, then the line of launch 2, then the new
    process's lines. Rolled, the files keep to ``squall.log.max.bytes``."""
    cluster = Cluster(tmp_path, **rolling)
    try:
        storm_id = _submit(cluster, "sigkill", Logs())
        kept, files, launch = kill_mid_stream_and_count(cluster.conf, storm_id, lambda: _worker(cluster, "sigkill"),
                                                        lambda: _stop(cluster, "sigkill"))
        if rolling:
            assert 3 <= len(files) <= ROLLED["squall.log.backup.count"] + 1
            assert all(p.stat().st_size <= ROLLED["squall.log.max.bytes"] for p in files)
        else:
            assert [p.name for p in files] == ["worker.log"]
        print(f"\nprocess host, SIGKILL ({len(files)} files): {kept} lines of the dead worker at the kill, "
              f"{kept} after the restart (1..{kept}), launch {launch} below them")
    finally:
        cluster.stop()


@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_worker_that_dies_leaves_its_last_words_in_its_slots_log(tmp_path, how):
    """A bolt logs tuples 1..150, its last words, and then raises (Storm's fail-fast, which
    ``topology.bolt.fail.fast`` asks for) or calls ``os._exit``: after the restart every one of
    those lines is in the slot's log (and the traceback, for the exception), then the line of
    the next launch, then its own lines."""
    die_at = 150
    name = f"dies-{how}"
    cluster = Cluster(tmp_path)
    try:
        storm_id = _submit(cluster, name, DiesOnce(tmp_path, die_at, how), **{"topology.bolt.fail.fast": True})
        root = artifacts_root(cluster.conf) / storm_id

        def two_launches_logged():
            logs = list(root.glob("*/worker.log"))
            if len(logs) != 1:
                return None
            port = int(logs[0].parent.name)
            lines = read_log(cluster.conf, storm_id, port).decode().splitlines()
            found = pids(lines)
            return len(found) == 2 and len(numbers(lines, found[1])) >= 50 and (port, found)
        assert wait_until(two_launches_logged, 60), sorted(str(p) for p in root.rglob("*"))
        port, (dead, new) = two_launches_logged()
        assert _worker(cluster, name)["pid"] == new
        _stop(cluster, name)
        lines = read_log(cluster.conf, storm_id, port).decode().splitlines()

        assert numbers(lines, dead) == list(range(1, die_at + 1))
        (words,) = [i for i, line in enumerate(lines) if "[ERROR] [logs:" in line and f"last words of pid {dead}" in line]
        assert lines[words - 1].endswith(logged_line(dead, die_at))
        if how == "raise":
            assert f"RuntimeError: pid {dead} dies at tuple {die_at}" in "\n".join(lines[words:])
        launches = launch_lines(lines, f"127.0.0.1:{port}", storm_id)
        assert [pid for _, _, pid in launches] == [dead, new]
        assert launches[0][1] < launches[1][1]
        assert words < launches[1][0] < min(i for i, line in enumerate(lines) if f"pid {new} logged" in line)
        print(f"\nprocess host, {how}: {die_at} lines and the last words of the dead worker kept, "
              f"launch {launches[1][1]} below them")
        check_the_logviewer(cluster.conf, storm_id, port, dead, die_at, launches[1][1])
    finally:
        cluster.stop()
