"""FileSpout never finishes a file that a process still has open for writing: a writer that
pauses after a whole line for longer than ``quiet_secs`` (a logger with nothing to say, a batch
job between steps) goes on writing into the file, so the file is not renamed done at the pause;
the task sets it aside (`FileSpout._park`), reads its other files, and reads the file on from its
committed offset at its next listing, until the writer closes it.

Before, the file was renamed done at the first such pause and everything the writer wrote after
it went into the ``.done`` file, read by no one: of 10,000 JSON lines from four loggers pausing
1.5 s every 500 lines (``quiet_secs`` 0.5), 2,000 were emitted and 8,000 lost, nothing said."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from squall import TopologyBuilder
from squall.engine.clock import SimulatedClock
from squall.external._writers import open_for_writing
from squall.external.files import FileSpout
from squall.testing._registry import SharedLog

from ..conftest import wait_until
from .test_file_growing import Recorder
from .test_file_progress import Task, lines
from .test_files import CONF, cluster_at


def leases_work(tmp_path: Path) -> bool:
    """Whether this host and file system tell a file open for writing (Linux read leases)."""
    probe = tmp_path / "probe"
    probe.write_bytes(b"x")
    fd = os.open(probe, os.O_RDONLY)
    try:
        return open_for_writing(fd) is not None
    finally:
        os.close(fd)
        probe.unlink()


def test_a_file_whose_writer_pauses_after_a_whole_line_is_set_aside_not_finished(tmp_path):
    """a.log's writer pauses a minute after its 3rd line (``quiet_secs`` is 5), its file open:
    the task reads b.log meanwhile (renamed done), leaves a.log under its name, reads the writer's
    next lines from where it was when it comes back, and renames a.log done once it is closed and
    quiet. Every line once. On main: a.log renamed done at the pause, its next lines read by no
    one, and b.log read only after that."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    if not leases_work(tmp_path):
        pytest.skip("no read leases here: the quiet time alone decides")
    clock = SimulatedClock()
    with open(src / "a.log", "ab", buffering=0) as writer:
        writer.write(b"a0\na1\na2\n")
        task = Task(src, local, quiet_secs=5, clock=clock)
        got = task.pump(10)
        task.ack(got)
        (src / "b.log").write_bytes(b"b0\nb1\n")
        for _ in range(12):  # a minute, looked at every 5 s
            clock.advance(5)
            more = task.pump(10)
            task.ack(more)
            got += more
        assert sorted(os.listdir(src)) == ["a.log", "b.log.done"]
        writer.write(b"a3\na4\n")
        for _ in range(3):
            clock.advance(1)
            more = task.pump(10)
            task.ack(more)
            got += more
    clock.advance(6)  # closed, and quiet
    for _ in range(3):
        more = task.pump(10)
        task.ack(more)
        got += more
    assert lines(got) == ["a0", "a1", "a2", "b0", "b1", "a3", "a4"]
    assert sorted(os.listdir(src)) == ["a.log.done", "b.log.done"]
    assert task.spout.committed() == {}


def test_loggers_pausing_longer_than_the_quiet_time_lose_no_line_on_a_local_cluster(tmp_path):
    """Two loggers append 600 JSON lines each to their files, pausing 3x ``quiet_secs`` after a
    whole line every 200 lines, and once mid-line; two spout tasks read the directory. Every line
    reaches the bolt once and whole, and both files are renamed done once their loggers closed
    them. On main: 200 of each logger's 600 lines, the rest written into the ``.done`` files."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    if not leases_work(tmp_path):
        pytest.skip("no read leases here: the quiet time alone decides")
    quiet, per_file = 0.3, 600
    log = SharedLog()

    def record(k: int, n: int) -> bytes:
        return (json.dumps({"f": k, "seq": n}) + "\n").encode()

    def logger(k: int) -> None:
        with open(src / f"app-{k}.log", "ab", buffering=0) as f:
            for n in range(per_file):
                data = record(k, n)
                if n == 350:  # mid-line
                    f.write(data[:7])
                    time.sleep(quiet * 3)
                    f.write(data[7:])
                    continue
                f.write(data)
                if n % 200 == 199:  # after a whole line
                    time.sleep(quiet * 3)

    builder = TopologyBuilder()
    builder.set_spout("lines", FileSpout(src, commit_every=20, poll_secs=0.05, progress_dir=local, quiet_secs=quiet), 2)
    builder.set_bolt("rec", Recorder(log), 2).shuffle_grouping("lines")
    with cluster_at(local) as cluster:
        cluster.submit_topology("held", CONF, builder.create_topology())
        writers = [threading.Thread(target=logger, args=(k,)) for k in range(2)]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        done = ["app-0.log.done", "app-1.log.done"]
        assert wait_until(lambda: sorted(os.listdir(src)) == done, timeout=20), os.listdir(src)
        errors = cluster.get_topology_info("held")["errors"]
        cluster.kill_topology("held", wait_secs=0)
    got = Counter(log.items())
    expected = {json.dumps({"f": k, "seq": n}) for k in range(2) for n in range(per_file)}
    assert set(got) == expected and set(got.values()) == {1} and not errors
