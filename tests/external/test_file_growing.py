"""FileSpout on a file still being written (a logger, ``cat >> f``): a line without its newline is
held until the newline comes, the file is followed while it grows and finished only once it has
been quiet for ``quiet_secs``, when a last line without a newline is a record. No line is split,
lost or doubled, across a restart too; a file truncated under the spout is reported.

Before, the spout read a half-written line as a record and its rest as another, and renamed the
file done at the first end it met: of 400 records appended in chunks of one and a half, a bolt
saw 13 (3 of them halves) and 390 were written into the `.done` file, read by no one."""

from __future__ import annotations

import os
import time

import pytest

from squall import Bolt, TopologyBuilder
from squall.engine.clock import SimulatedClock
from squall.external.files import DEFAULT_QUIET_SECS, FileSpout, load_progress
from squall.testing._registry import SharedLog

from ..conftest import wait_until
from .test_file_progress import Context, Task, lines
from .test_file_record_limit import Collector
from .test_files import CONF, cluster_at


class Recorder(Bolt):
    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def execute(self, tup) -> None:
        self.log.append(tup.values[0])
        self.collector.ack(tup)


def test_a_file_appended_to_in_pieces_of_lines_gives_every_record_once_whole(tmp_path):
    """A writer appends 120 records in chunks of one and a half, waits for the spout to reach the
    file's end, pauses, then appends 80 more, the last without a newline: the bolt gets each of
    the 200 once and whole, and the file is renamed done once it is quiet (the last line then a
    record). On main: 11 tuples, the 11th half a line; the 190 records after it were written
    into `a.log.done`, which the spout had renamed done at the first end it met."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    records = [f"rec-{i:04d}-" + "x" * 20 for i in range(200)]
    data = "\n".join(records).encode()  # the last without its newline
    chunk = (len(records[0]) + 1) * 3 // 2
    log = SharedLog()
    builder = TopologyBuilder()
    builder.set_spout("lines", FileSpout(src, commit_every=1, poll_secs=0.05, progress_dir=local, quiet_secs=2.0))
    builder.set_bolt("rec", Recorder(log), 2).shuffle_grouping("lines")
    with cluster_at(local) as cluster, open(src / "a.log", "ab") as f:
        cluster.submit_topology("grow", CONF, builder.create_topology())
        first = (len(records[0]) + 1) * 120
        for at in range(0, len(data), chunk):
            if at <= first < at + chunk:
                f.write(data[at:first])
                f.flush()
                wait_until(lambda: len(log.items()) >= 120, timeout=10)  # at the file's end
                time.sleep(0.3)  # the writer's pause, under the quiet time
                f.write(data[first:at + chunk])
            else:
                f.write(data[at:at + chunk])
            f.flush()
            time.sleep(0.002)  # a writer's pace, between two pieces of lines
        f.close()
        assert wait_until(lambda: (src / "a.log.done").exists(), timeout=20), os.listdir(src)
        errors = cluster.get_topology_info("grow")["errors"]
        cluster.kill_topology("grow", wait_secs=0)
    assert sorted(log.items()) == records and not errors
    assert not (local / "filespout" / "lines" / "dead-letter").exists()


def test_a_restart_while_a_line_is_half_written_resumes_at_its_start_and_emits_it_whole(tmp_path):
    """The committed offset never points inside a line: the half-written line is not emitted, so
    the progress stops at its start, and the next run emits it whole once its newline comes, then
    holds the last line (no newline) until the file, closed, has been quiet for ``quiet_secs``."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    clock = SimulatedClock()
    with open(src / "a.log", "ab") as f:
        f.write(b"r0\nr1\nr2-ha")
        f.flush()
        task = Task(src, local, quiet_secs=5, clock=clock)
        got = task.pump(10)
        assert lines(got) == ["r0", "r1"]
        task.ack(got)
        assert task.pump(10) == [] and not (src / "a.log.done").exists()  # "r2-ha" is held
        task.crash()
        assert load_progress(local / "filespout" / "lines" / "task-0.json", "lines", str(src)) == {"a.log": 6}
        f.write(b"lf\nr3")
        f.flush()
        again = Task(src, local, quiet_secs=5, clock=clock)
        got = again.pump(10)
        assert lines(got) == ["r2-half"]
        again.ack(got)
    # the writer closed the file: "r3" is its last line (one still open for writing is held:
    # test_file_unfinished_lines.py)
    clock.advance(4.9)
    assert again.pump(10) == []  # "r3" without its newline, the file changed 4.9 s ago
    clock.advance(0.2)
    got = again.pump(10)
    assert lines(got) == ["r3"]
    again.ack(got)
    again.pump(5)
    assert os.listdir(src) == ["a.log.done"]


def test_a_line_over_the_limit_still_being_written_is_dead_lettered_whole(tmp_path):
    """A line longer than ``max_record_bytes`` whose newline is not written yet is skipped once
    it is whole, in one dead letter: before, its first part was dead-lettered and the rest emitted
    as a record of its own."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    clock = SimulatedClock()
    with open(src / "a.log", "ab") as f:
        f.write(b"ok\n" + b"y" * 30)
        f.flush()
        spout = FileSpout(src, commit_every=1, poll_secs=0, progress_dir=local, max_record_bytes=10, clock=clock)
        out = Collector()
        spout.open({}, Context(0, 1), out)
        for _ in range(10):
            spout.next_tuple()
        f.write(b"y" * 5 + b"\nend\n")
        f.flush()
        for _ in range(10):
            spout.next_tuple()
    assert [line for line, _ in out.emitted] == ["ok", "end"]
    [error] = out.errors
    assert "record too large: 36 bytes" in error and "a.log at byte offset 3" in error


def test_a_followed_file_cut_and_written_again_is_read_again_from_its_start(tmp_path):
    """A file truncated to less than the task read of it (``copytruncate``, then a logger going
    on from its start) is reported, naming it, and read again from its start, as ``tail -F``
    does: the logger's new lines are read once, and the file is renamed done once it is closed
    and quiet. Before, it was renamed done as read, and the logger wrote on into the ``.done``
    file (``new0`` and ``new1`` read by no one)."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    clock = SimulatedClock()
    with open(src / "a.log", "ab") as f:
        f.write(b"".join(b"line%02d\n" % i for i in range(10)))
        f.flush()
        task = Task(src, local, quiet_secs=5, clock=clock)
        task.spout.collector = task.out = Collector()
        got = task.pump(20)
        task.ack(got)
        f.truncate(0)
        f.write(b"new0\nnew1\n")
        f.flush()
        again = task.pump(5)
        task.ack(again)
        f.write(b"new2\n")
        f.flush()
        more = task.pump(5)
        task.ack(more)
        assert os.listdir(src) == ["a.log"]
    clock.advance(6)
    task.pump(5)
    assert lines(got) == [f"line{i:02d}" for i in range(10)] and lines(again + more) == ["new0", "new1", "new2"]
    assert os.listdir(src) == ["a.log.done"]
    said = (f"FileSpout 'lines' task 0: {src / 'a.log'} was cut and written again from its start while it was read "
            f"(logrotate's copytruncate, ': > file'): it is read again from its start. Rotate by renaming the file "
            f"(logrotate's create) to lose none")
    assert task.out.errors == [said]



def test_a_file_last_written_longer_ago_than_the_quiet_time_is_finished_at_once(tmp_path):
    """A backlog costs no wait: a file whose mtime is older than ``quiet_secs`` (default 5 s) is
    finished at its end at once, its last line (no newline) a record; a bad quiet time is refused."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    (src / "a.log").write_bytes(b"a\nb\nc")
    an_hour_ago = time.time() - 3600
    os.utime(src / "a.log", (an_hour_ago, an_hour_ago))
    task = Task(src, local, quiet_secs=DEFAULT_QUIET_SECS, clock=SimulatedClock())
    got = task.pump(10)
    task.ack(got)
    task.pump(5)
    assert lines(got) == ["a", "b", "c"] and os.listdir(src) == ["a.log.done"]
    with pytest.raises(ValueError, match="quiet_secs must be a number of seconds >= 0, not -1"):
        FileSpout(src, quiet_secs=-1)
