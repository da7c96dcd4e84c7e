"""Reading a slot's worker log across restarts of its worker, for the process and Spark hosts'
tests: the lines `restart_log_topology` logs, counted per process, the lines that say a launch
began, and what the logviewer serves of them."""

import os
import re
import signal

from starlette.applications import Starlette
from starlette.testclient import TestClient

from squall.cluster.logs import artifacts_root, parse_worker_log, worker_log_files
from squall.ui.logviewer import logviewer_routes

from ..conftest import wait_until
from .restart_log_topology import logged_line

PER_LINE = re.compile(r"pid (\d+) logged (\d+)$")


def numbers(lines, pid):
    """The numbers ``pid`` logged, in the order of ``lines``."""
    return [int(m[2]) for m in map(PER_LINE.search, lines) if m and int(m[1]) == pid]


def pids(lines):
    """The processes that logged `logged_line`s, in the order their first line comes."""
    return list(dict.fromkeys(int(m[1]) for m in map(PER_LINE.search, lines) if m))


def launch_lines(lines, slot, storm_id):
    """(index, launch id, pid) of each line that says a launch of ``slot`` began."""
    start = re.compile(rf"\[INFO\] \[__system:-1\] launching worker {re.escape(slot)} of {re.escape(storm_id)}, "
                       r"launch (\d+), pid (\d+)$")
    return [(i, int(m[1]), int(m[2])) for i, m in enumerate(map(start.search, lines)) if m]


def read_log(conf, storm_id, port):
    """The slot's log as one byte string: its rolled files, oldest first, then ``worker.log``."""
    return b"".join(p.read_bytes() for p in worker_log_files(conf, storm_id).get(port, []))


def check_the_logviewer(conf, storm_id, port, dead_pid, dead_last, launch_id):
    """The logviewer lists the slot's files and pages them (rolled ones too) with every line
    1..``dead_last`` of the dead worker, and its search finds that worker's last line and the
    line of launch ``launch_id`` once each."""
    root = artifacts_root(conf)
    client = TestClient(Starlette(routes=logviewer_routes(root)))
    names = client.get("/api/v1/listLogs", params={"topoId": storm_id, "port": port}).json()
    files = worker_log_files(conf, storm_id)[port]
    assert sorted(names) == sorted(str(p.relative_to(root)) for p in files)
    pages = ""
    for p in files:
        page = client.get("/api/v1/log", params={"file": str(p.relative_to(root)), "start": 0,
                                                 "length": p.stat().st_size})
        assert page.status_code == 200
        pages += page.text
    assert all(logged_line(dead_pid, n) in pages for n in range(1, dead_last + 1))
    for needle in (logged_line(dead_pid, dead_last), f"of {storm_id}, launch {launch_id}, pid "):
        found = [m["matchString"] for p in files
                 for m in client.get(f"/api/v1/search/{p.relative_to(root)}",
                                     params={"search-string": needle, "num-matches": 5}).json()["matches"]]
        assert found == [needle], (needle, found)


def kill_mid_stream_and_count(conf, storm_id, worker, stop):
    """SIGKILL the topology's one worker while its bolt logs a line every few ms, and check the
    slot's log after the restart: the log as it was at the kill (the worker stopped with SIGSTOP
    and read first, so no line comes between) is the start of the log after, byte for byte; the
    dead worker's numbers in it run 1..k, every one it wrote; one line says its launch began
    before them, and one that the next launch began after them, then the new process's lines,
    1 on; every line begins a record (none glued to a torn one). ``worker()``: the worker's
    ``info`` entry once it has a pid, else None; ``stop()``: kill the topology and wait until
    its worker has ended (its files roll no more while read). Returns (k, the log's files, the
    next launch id)."""
    assert wait_until(worker, 60), "the worker did not start"
    dead = worker()
    port = int(dead["slot"].rsplit(":", 1)[1])

    def logged(pid, n):
        return len(numbers(read_log(conf, storm_id, port).decode().splitlines(), pid)) >= n
    assert wait_until(lambda: logged(dead["pid"], 300), 60)
    os.kill(dead["pid"], signal.SIGSTOP)
    before = read_log(conf, storm_id, port)
    os.kill(dead["pid"], signal.SIGKILL)

    def restarted():
        w = worker()
        return w is not None and w["launch_id"] > dead["launch_id"] and w["pid"] != dead["pid"] and w
    assert wait_until(restarted, 60), "the worker was not restarted"
    new = restarted()
    assert new["slot"] == dead["slot"]
    assert wait_until(lambda: logged(new["pid"], 100), 60)
    stop()

    after = read_log(conf, storm_id, port)
    assert after[:len(before)] == before, "the log at the kill is not the start of the log after it"
    lines = after.decode().splitlines()
    kept = numbers(lines, dead["pid"])
    at_kill = len(numbers(before.decode().splitlines(), dead["pid"]))
    assert kept == list(range(1, at_kill + 1)) and at_kill >= 300
    assert pids(lines) == [dead["pid"], new["pid"]]
    launches = launch_lines(lines, dead["slot"], storm_id)
    assert [(launch, pid) for _, launch, pid in launches] == [(dead["launch_id"], dead["pid"]),
                                                              (new["launch_id"], new["pid"])]
    first_dead = min(i for i, line in enumerate(lines) if f"pid {dead['pid']} logged" in line)
    last_dead = max(i for i, line in enumerate(lines) if f"pid {dead['pid']} logged" in line)
    first_new = min(i for i, line in enumerate(lines) if f"pid {new['pid']} logged" in line)
    assert launches[0][0] < first_dead and last_dead < launches[1][0] < first_new
    assert numbers(lines, new["pid"])[:100] == list(range(1, 101))
    assert all(r.component is not None for r in parse_worker_log(x + "\n" for x in lines)), "a line glued to a torn one"
    check_the_logviewer(conf, storm_id, port, dead["pid"], len(kept), new["launch_id"])
    return len(kept), worker_log_files(conf, storm_id)[port], new["launch_id"]
