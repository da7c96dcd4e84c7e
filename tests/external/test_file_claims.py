"""FileSpout's claiming mode (``claim_files=True``): the tasks claim the next unread file with
HdfsSpout's lock files, so a task that keeps up reads more; a lock its owner stopped renewing is
taken over after ``lock_timeout_secs`` and the file resumed at its committed offset.

The tasks are driven directly on one simulated clock; a crash is a task dropped without ``close``
(its lock stays, as after a SIGKILL)."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import subprocess
import sys

import pytest

from squall.engine.clock import SimulatedClock
from squall.external._file_locks import FileLocks
from squall.external.files import FileSpout

from .test_file_progress import Task, lines, write_lines

TIMEOUT = 60.0


@pytest.fixture
def dirs(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    return src, tmp_path / "local"


def claiming(src, local, clock, index: int, tasks: int = 2, **spout) -> Task:
    return Task(src, local, index, tasks, claim_files=True, lock_timeout_secs=TIMEOUT, clock=clock, **spout)


# A task taking a file over here emits the lines from its committed offset at once, acked later:
# without a retry limit, since with one the lines another task read go out one at a time, each
# once the one before it ended (tests/external/test_file_spout_deaths.py)
NO_LIMIT = {"max_retries": None}


def two_tasks(src, local, items: list[str], **spout) -> tuple[SimulatedClock, Task, Task]:
    """``a.txt`` holding ``items``, and tasks 0 and 1 of a claiming spout on one simulated clock."""
    write_lines(src / "a.txt", items)
    clock = SimulatedClock()
    return clock, claiming(src, local, clock, 0, **spout), claiming(src, local, clock, 1, **spout)


def watch(clock, secs: float, *tasks: Task) -> list[list[tuple[str, object]]]:
    """Moves the clock ``secs`` on in quarters of the timeout, each task pumped after each step
    (a task that has no file scans the locks then); returns what each task emitted."""
    out: list[list[tuple[str, object]]] = [[] for _ in tasks]
    for _ in range(int(secs // (TIMEOUT / 4))):
        clock.advance(TIMEOUT / 4)
        for got, task in zip(out, tasks):
            got += task.pump()
    return out


def locks(local) -> list[str]:
    return sorted(n for n in os.listdir(local / "filespout" / "lines" / "locks") if not n.startswith("."))


def test_the_task_that_keeps_up_reads_more_files_and_every_line_once(dirs):
    src, local = dirs
    expected = []
    for f in range(8):
        items = [f"f{f}-{i}" for i in range(5)]
        write_lines(src / f"file{f}.txt", items)
        expected += items
    clock = SimulatedClock()
    fast, slow = claiming(src, local, clock, 0), claiming(src, local, clock, 1)
    got = {0: [], 1: []}
    for _ in range(20):  # the fast task reads a whole file while the slow one reads two lines
        for i, task, calls in ((0, fast, 7), (1, slow, 2)):
            emitted = task.pump(calls)
            task.ack(emitted)
            got[i] += lines(emitted)
    assert sorted(got[0] + got[1]) == sorted(expected)
    assert len(got[0]) >= 2 * len(got[1]) > 0
    assert sorted(os.listdir(src)) == [f"file{f}.txt.done" for f in range(8)]
    assert locks(local) == []


def test_a_crashed_tasks_file_is_taken_over_after_the_timeout_at_its_committed_offset(dirs, caplog):
    src, local = dirs
    write_lines(src / "a.txt", [f"old-{i}" for i in range(10)])
    clock = SimulatedClock()
    first = claiming(src, local, clock, 0)
    emitted = first.pump()
    first.ack(emitted[:6])
    first.crash()
    second = claiming(src, local, clock, 1, **NO_LIMIT)
    assert second.pump() == []  # locked: the first task may only be slow
    assert watch(clock, TIMEOUT - TIMEOUT / 4, second) == [[]]
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        [emitted] = watch(clock, TIMEOUT / 4, second)
    assert lines(emitted) == [f"old-{i}" for i in range(6, 10)]
    assert "took over" in caplog.text and str(src / "a.txt") in caplog.text
    assert "lines[0]@" in caplog.text and ",reading,0" in caplog.text  # the dead owner, from its lock
    second.ack(emitted)
    assert sorted(os.listdir(src)) == ["a.txt.done"] and locks(local) == []


def test_a_task_that_keeps_its_heartbeat_keeps_its_file(dirs):
    src, local = dirs
    clock, owner, other = two_tasks(src, local, [f"line-{i}" for i in range(20)])
    got = []
    for _ in range(20):  # ten lock timeouts, one line each half timeout
        got += owner.pump(1)
        assert other.pump() == []
        clock.advance(TIMEOUT / 2)
    assert lines(got) == [f"line-{i}" for i in range(20)]
    owner.ack(got)
    assert os.listdir(src) == ["a.txt.done"]


def test_a_stalled_task_gives_its_file_up_once_another_took_it_over(dirs, caplog):
    src, local = dirs
    items = [f"line-{i}" for i in range(10)]
    clock, stalled, other = two_tasks(src, local, items, **NO_LIMIT)
    early = stalled.pump(4)
    stalled.ack(early[:2])
    assert other.pump() == []
    [taken] = watch(clock, TIMEOUT, other)
    assert lines(taken) == items[2:]  # from the committed offset: lines 2 and 3 again
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        assert stalled.pump() == []  # its heartbeat finds the lock another's: it gives the file up
    assert "gave up" in caplog.text
    stalled.ack(early[2:])  # late acks of the given-up file change nothing
    other.ack(taken)
    assert os.listdir(src) == ["a.txt.done"] and locks(local) == []


def test_close_releases_the_lock_so_another_task_claims_the_file_at_once(dirs):
    src, local = dirs
    write_lines(src / "a.txt", [f"line-{i}" for i in range(6)])
    clock = SimulatedClock()
    first = claiming(src, local, clock, 0)
    first.ack(first.pump(3))
    first.spout.close()
    assert locks(local) == []
    second = claiming(src, local, clock, 1)
    assert lines(second.pump()) == ["line-3", "line-4", "line-5"]


def test_the_lock_of_a_file_renamed_done_by_a_task_that_then_died_is_removed(dirs):
    src, local = dirs
    clock = SimulatedClock()
    task = claiming(src, local, clock, 0, tasks=1)
    held = FileLocks(local / "filespout" / "lines" / "locks", "dead", TIMEOUT, clock)
    assert held.claim("gone.txt")  # and never released: the file went, then its owner
    task.pump()
    watch(clock, TIMEOUT, task)
    assert locks(local) == []


def test_only_one_of_two_tasks_takes_over_an_abandoned_lock(dirs):
    _, local = dirs
    clock = SimulatedClock()
    directory = local / "locks"
    dead = FileLocks(directory, "dead", TIMEOUT, clock)
    assert dead.claim("a.txt")
    a, b = (FileLocks(directory, name, TIMEOUT, clock) for name in "ab")
    for _ in range(4):
        assert a.abandoned() == b.abandoned() == []
        clock.advance(TIMEOUT / 4)
    assert a.abandoned() == b.abandoned() == ["a.txt"]
    assert a.take_over("a.txt") and not b.take_over("a.txt")  # b sees a's lock, not the one it watched
    assert a.holds("a.txt") and not b.holds("a.txt") and not dead.holds("a.txt")
    assert not dead.beat("a.txt", 0)


def test_a_stalled_task_that_read_its_whole_file_leaves_it_to_the_task_that_took_it_over(dirs, caplog):
    src, local = dirs
    items = [f"line-{i}" for i in range(10)]
    clock, stalled, other = two_tasks(src, local, items, **NO_LIMIT)
    read = stalled.pump()
    assert lines(read) == items and other.pump() == []
    [taken] = watch(clock, TIMEOUT, other)
    assert lines(taken) == items
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        stalled.ack(read)  # every line acked, late: it must not rename the file another task reads
    assert "gave up" in caplog.text and os.listdir(src) == ["a.txt"]
    other.ack(taken)
    assert os.listdir(src) == ["a.txt.done"] and locks(local) == []


def test_a_pause_of_every_task_longer_than_the_timeout_takes_no_file_over(dirs):
    src, local = dirs
    items = [f"line-{i}" for i in range(10)]
    clock, owner, other = two_tasks(src, local, items)
    first = owner.pump(3)
    assert other.pump() == []
    clock.advance(3 * TIMEOUT)  # deactivated, or the machine paused: neither task ran
    assert other.pump() == []  # it was not watching meanwhile, so it watches afresh
    rest = owner.pump()
    assert watch(clock, TIMEOUT, other) == [[]]  # the owner's heartbeats went on
    assert lines(first + rest) == items


def test_a_take_over_waits_for_the_task_holding_the_directory_lock(dirs):
    _, local = dirs
    clock = SimulatedClock()
    directory = local / "locks"
    assert FileLocks(directory, "dead", TIMEOUT, clock).claim("a.txt")
    taker = FileLocks(directory, "taker", TIMEOUT, clock)
    for _ in range(4):
        taker.abandoned()
        clock.advance(TIMEOUT / 4)
    assert taker.abandoned() == ["a.txt"]
    busy = os.open(directory / ".dirlock", os.O_RDWR | os.O_CREAT)  # another task taking over or releasing
    try:
        fcntl.flock(busy, fcntl.LOCK_EX)
        assert not taker.take_over("a.txt")
    finally:
        os.close(busy)
    assert taker.abandoned() == ["a.txt"] and taker.take_over("a.txt") and taker.holds("a.txt")


def test_a_file_that_cannot_be_opened_is_reported_once_and_skipped(dirs, monkeypatch):
    src, local = dirs
    write_lines(src / "a.txt", ["a-0"])
    write_lines(src / "b.txt", ["b-0"])
    clock = SimulatedClock()
    task = claiming(src, local, clock, 0, tasks=1)
    errors: list[str] = []
    task.spout.collector.report_error = errors.append
    real_open = os.open

    def refusing(path, flags, *mode):
        if str(path).endswith("a.txt") and str(path).startswith(str(src)):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *mode)

    monkeypatch.setattr(os, "open", refusing)
    assert lines(task.pump()) == ["b-0"]
    task.ack(task.out.emitted)
    task.pump()
    assert len(errors) == 1 and str(src / "a.txt") in errors[0] and "Permission denied" in errors[0]
    assert locks(local) == []  # its lock released: another task may try it
    monkeypatch.setattr(os, "open", real_open)
    assert lines(task.pump()) == ["a-0"]


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def plant_lock(local, name: str, line: str) -> None:
    """A lock file as another task would have left it."""
    directory = local / "filespout" / "lines" / "locks"
    FileLocks(directory, "planter", TIMEOUT, SimulatedClock())  # makes the directory, owner-only
    fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, line.encode())
    os.close(fd)


def test_a_lock_whose_owner_process_on_this_host_is_gone_is_taken_over_at_once(dirs, caplog):
    src, local = dirs
    write_lines(src / "a.txt", ["line-0", "line-1"])
    plant_lock(local, "a.txt", f"0,lines[0]@{socket.gethostname()}:{dead_pid()}:r1,claimed,0\n")
    task = claiming(src, local, SimulatedClock(), 1)
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        assert lines(task.pump()) == ["line-0", "line-1"]  # no timeout waited
    assert "since its owner's process is gone" in caplog.text


def test_a_lock_of_an_earlier_run_of_the_same_task_is_taken_over_at_once(dirs, caplog):
    src, local = dirs
    write_lines(src / "a.txt", [f"line-{i}" for i in range(6)])
    clock = SimulatedClock()
    first = claiming(src, local, clock, 0)
    first.ack(first.pump(3)[:2])
    # its worker restarts the task (in the same process, as LocalCluster does); the first run is
    # left alive here, as a worker cut off rather than dead would be
    clock.advance(1)
    again = claiming(src, local, clock, 0, **NO_LIMIT)
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        taken = again.pump()
        assert lines(taken) == [f"line-{i}" for i in range(2, 6)]
        assert "since its owner was an earlier run of this task" in caplog.text
        clock.advance(TIMEOUT / 4)
        assert first.pump() == [] and "gave up" in caplog.text  # at its next heartbeat
    again.ack(taken)
    assert os.listdir(src) == ["a.txt.done"]


@pytest.mark.parametrize("line", [
    "0,lines[0]@elsewhere.example:{pid}:r1,claimed,0\n",  # another host: only the timeout can tell
    "not a lock line\n",
    "",
    "0,lines[0]@{host}:-1:r1,claimed,0\n",  # not a pid (for kill, -1 is every process): never dead
    "0,lines[0]@{host}:4294967296:r1,claimed,0\n",  # past any pid: kill's OverflowError crashed the spout
])
def test_a_lock_whose_owner_cannot_be_known_dead_waits_for_the_timeout(dirs, line):
    src, local = dirs
    write_lines(src / "a.txt", ["line-0"])
    plant_lock(local, "a.txt", line.format(pid=dead_pid(), host=socket.gethostname()))
    clock = SimulatedClock()
    task = claiming(src, local, clock, 1)
    assert task.pump() == []
    assert watch(clock, TIMEOUT - TIMEOUT / 4, task) == [[]]
    assert lines(watch(clock, TIMEOUT / 4, task)[0]) == ["line-0"]


def test_a_lock_timeout_not_positive_or_not_above_twice_the_poll_is_refused_naming_both(tmp_path):
    with pytest.raises(ValueError, match="lock_timeout_secs must be > 0, not 0"):
        FileSpout(tmp_path, claim_files=True, lock_timeout_secs=0)
    with pytest.raises(ValueError, match=r"poll_secs \(5\) must be under half of lock_timeout_secs \(10\)"):
        FileSpout(tmp_path, claim_files=True, lock_timeout_secs=10, poll_secs=5)
