"""FileSpout under logrotate: a file rotated while it is read gives each of its lines once.

``create``: ``a.log`` is renamed ``a.log.1`` (same inode) while a task reads it, the logger
writes on into it until it reopens ``a.log``, a new file. The task that read ``a.log`` reads
``a.log.1`` on from where it was (it recorded the inode), renames it done under its new name,
and reads the new ``a.log`` from its start. Before, ``a.log.1`` was a new name, read again from
its start by the task its name hashes to: of 10,000 lines through two rotations, 16,400 tuples.

``copytruncate``: ``a.log`` is copied away and cut to nothing, the logger (``O_APPEND``) writes
on from its start. The task reads the file again from its start, as ``tail -F`` does. Before,
the file was renamed done as read and the logger wrote on into the ``.done`` file: of 7,000
lines written after such a cut, none was read."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter

import pytest

from squall import TopologyBuilder
from squall.engine.clock import SimulatedClock
from squall.external.files import FileSpout, owner_of
from squall.testing._registry import SharedLog

from ..conftest import wait_until
from .test_file_growing import Recorder
from .test_file_progress import Task, lines
from .test_files import CONF, cluster_at


@pytest.mark.parametrize("claim_files", [False, True])
def test_a_file_renamed_while_read_is_read_on_by_its_task_not_again_from_its_start(tmp_path, claim_files):
    """Two tasks; ``a.log`` (its name hashes to task 1; claimed, by task 0) holds 4 lines read
    and acked when logrotate renames it ``a.log.1`` (whose name hashes to task 0); the logger
    writes 2 more into it, closes it, and starts a new ``a.log``. Every line once: the task that
    read ``a.log`` reads ``a.log.1`` on from line 5 and renames it done, the other reads none of
    it. On main the other task read ``a.log.1`` from its start (4 lines twice)."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    clock = SimulatedClock()
    tasks = [Task(src, local, index=i, tasks=2, quiet_secs=5, clock=clock, claim_files=claim_files)
             for i in range(2)]
    got: list = []

    def pump(order=(0, 1)) -> None:
        for task in [tasks[i] for i in order]:
            more = task.pump(10)
            task.ack(more)
            got.extend(more)

    with open(src / "a.log", "ab", buffering=0) as logger:
        logger.write(b"old0\nold1\nold2\nold3\n")
        pump()
        assert lines(got) == ["old0", "old1", "old2", "old3"]
        os.rename(src / "a.log", src / "a.log.1")
        logger.write(b"old4\nold5\n")
        pump((1, 0))  # the task that did not read a.log looks first
    with open(src / "a.log", "ab", buffering=0) as logger:
        logger.write(b"new0\n")
        for _ in range(3):
            clock.advance(3)
            pump()
    clock.advance(6)
    for _ in range(3):
        pump()
    assert sorted(lines(got)) == sorted(["old0", "old1", "old2", "old3", "old4", "old5", "new0"])
    assert sorted(os.listdir(src)) == ["a.log.1.done", "a.log.done"]


def pump_all(tasks: list[Task], rounds: int = 80) -> list[str]:
    """Pumps and acks every task in turn; the lines emitted."""
    got: list[str] = []
    for _ in range(rounds):
        for task in tasks:
            more = task.pump(20)
            task.ack(more)
            got.extend(lines(more))
    return got


@pytest.mark.parametrize("parallelism, claim_files", [(1, False), (2, False), (2, True)],
                         ids=["one-task", "two-by-name", "two-claimed"])
def test_a_file_rotated_while_the_topology_was_down_is_read_on_from_where_it_was(tmp_path, parallelism, claim_files):
    """``a.log``, 1,000 lines, 600 acked when the topology goes down; logrotate renames it
    ``a.log.1`` and the logger starts a new ``a.log`` of 100 lines. After the restart, every line
    once: ``a.log.1`` from line 601, ``a.log`` from its start. On main the new ``a.log`` (which
    sorts first) was opened first and its record replaced the rotated file's, so ``a.log.1`` was
    read again from its start: 1,700 lines, 600 twice (claimed: the same)."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    (src / "a.log").write_bytes(b"".join(b"old%d\n" % i for i in range(1000)))
    tasks = [Task(src, local, index=i, tasks=parallelism, claim_files=claim_files) for i in range(parallelism)]
    reader = tasks[0 if claim_files else owner_of("a.log", parallelism)]
    first = reader.pump(1000)
    assert len(first) == 1000
    reader.ack(first[:600])
    for task in tasks:
        task.crash()
    os.rename(src / "a.log", src / "a.log.1")
    (src / "a.log").write_bytes(b"".join(b"new%d\n" % i for i in range(100)))
    tasks = [Task(src, local, index=i, tasks=parallelism, claim_files=claim_files) for i in range(parallelism)]
    got = lines(first[:600]) + pump_all(tasks)
    assert len(got) == 1100
    assert sorted(got) == sorted([f"old{i}" for i in range(1000)] + [f"new{i}" for i in range(100)])
    assert sorted(os.listdir(src)) == ["a.log.1.done", "a.log.done"]


def test_a_renamed_file_read_on_under_its_new_name_is_not_read_again_by_that_names_task(tmp_path):
    """Two tasks by name: task 1 (``a.log``'s) acked 300 of its 500 lines when the topology went
    down; ``a.log`` was renamed ``a.log.1`` (task 0's name). After the restart every line once:
    task 1 finds its record under the old name and hands it over under the new name, task 0
    reads on from line 301. On main task 1 read it on, its record under ``a.log.1`` then made the
    file task 0's as well, which read it from its start: 1,000 lines for 500, each twice."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    assert (owner_of("a.log", 2), owner_of("a.log.1", 2)) == (1, 0)
    (src / "a.log").write_bytes(b"".join(b"old%d\n" % i for i in range(500)))
    task = Task(src, local, index=1, tasks=2)
    first = task.pump(500)
    assert len(first) == 500
    task.ack(first[:300])
    task.crash()
    os.rename(src / "a.log", src / "a.log.1")
    tasks = [Task(src, local, index=i, tasks=2) for i in range(2)]
    got = lines(first[:300]) + pump_all(tasks[::-1])  # task 1, whose record it is, first
    assert len(got) == 500
    assert sorted(got) == sorted(f"old{i}" for i in range(500))
    assert os.listdir(src) == ["a.log.1.done"]


def committed_to(local, name: str, offset: int) -> bool:
    """Whether the spout's task 0 committed ``name`` at ``offset``, with the record of its identity."""
    try:
        doc = json.loads((local / "filespout" / "lines" / "task-0.json").read_bytes())
    except (FileNotFoundError, ValueError):  # not written yet
        return False
    return doc["files"].get(name) == offset and name in doc.get("identity", {})


def test_a_logger_going_on_after_copytruncate_has_every_line_read_once(tmp_path):
    """A logger appends 300 JSON lines; logrotate copies the file into another directory
    (``olddir``) and cuts it to nothing; the logger writes 300 more from the file's start. The
    bolt gets each of the 600 once and whole, the cut is reported, and the file is renamed done
    once the logger closed it. On main: 300, the other 300 written into ``a.log.done``."""
    src, old, local = tmp_path / "in", tmp_path / "old", tmp_path / "local"
    src.mkdir()
    old.mkdir()
    log = SharedLog()
    builder = TopologyBuilder()
    builder.set_spout("lines", FileSpout(src, commit_every=10, poll_secs=0.05, progress_dir=local, quiet_secs=0.3))
    builder.set_bolt("rec", Recorder(log), 2).shuffle_grouping("lines")

    def line(n: int) -> bytes:
        return (json.dumps({"seq": n, "pad": "x" * 30}) + "\n").encode()

    with cluster_at(local) as cluster:
        cluster.submit_topology("rotated", CONF, builder.create_topology())
        with open(src / "a.log", "ab", buffering=0) as logger:
            logger.writelines(line(n) for n in range(300))
            assert wait_until(lambda: len(log.items()) >= 300, timeout=15)
            # its commit takes the file's first bytes, which the cut changes
            assert wait_until(lambda: committed_to(local, "a.log", (src / "a.log").stat().st_size), timeout=15)
            shutil.copyfile(src / "a.log", old / "a.log.1")
            os.truncate(src / "a.log", 0)
            for n in range(300, 600):
                logger.write(line(n))
                if n % 50 == 0:
                    time.sleep(0.05)
        assert wait_until(lambda: os.listdir(src) == ["a.log.done"], timeout=15), os.listdir(src)
        errors = [e["error"] for e in cluster.get_topology_info("rotated")["errors"]]
        cluster.kill_topology("rotated", wait_secs=0)
    got = Counter(json.loads(x)["seq"] for x in log.items())
    assert set(got) == set(range(600)) and set(got.values()) == {1}
    assert len(errors) == 1 and "was cut and written again from its start while it was read" in errors[0]
