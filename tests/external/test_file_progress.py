"""FileSpout's progress across restarts: a file replaced or rewritten under the same name is read
from its start, a grown file resumes, and a change of parallelism replays exactly the unacked lines.

The spout tasks are driven directly (open, next_tuple, ack), and a crash is a task dropped without
``close``: only what it committed (``commit_every=1``: at every ack) survives it."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from squall.external.files import FileConnectorError, FileSpout, dump_progress, load_progress, owner_of


class Context:
    """The part of a TopologyContext that FileSpout.open reads."""

    def __init__(self, index: int, tasks: int) -> None:
        self.index, self.tasks = index, tasks

    def get_this_component_id(self):
        return "lines"

    def get_this_task_index(self):
        return self.index

    def get_component_tasks(self, _):
        return list(range(self.tasks))


class Collector:
    """Keeps what a spout emits: (line, message id)."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, object]] = []

    def emit(self, values, msg_id, stream):
        self.emitted.append((values[0], msg_id))

    def report_error(self, message):
        raise AssertionError(message)


class Task:
    """One spout task; ``crash`` drops it without close, as a SIGKILL would."""

    def __init__(self, src: Path, local: Path, index: int = 0, tasks: int = 1, **spout) -> None:
        # files written whole: none to wait quiet for (test_file_growing.py follows growing ones)
        self.spout = FileSpout(src, poll_secs=0, progress_dir=local, **{"commit_every": 1, "quiet_secs": 0, **spout})
        self.out = Collector()
        self.spout.open({}, Context(index, tasks), self.out)
        self.seen = 0

    def pump(self, calls: int = 100) -> list[tuple[str, object]]:
        """Calls next_tuple; returns what was emitted meanwhile."""
        for _ in range(calls):
            self.spout.next_tuple()
        new, self.seen = self.out.emitted[self.seen:], len(self.out.emitted)
        return new

    def ack(self, emitted) -> None:
        for _, msg_id in emitted:
            self.spout.ack(msg_id)

    def crash(self) -> None:
        if self.spout.handle is not None:
            self.spout.handle.close()


def lines(emitted) -> list[str]:
    return [line for line, _ in emitted]


def write_lines(path: Path, items: list[str]) -> None:
    path.write_text("".join(f"{x}\n" for x in items))


def read_six_of_ten(src: Path, local: Path) -> None:
    """Reads a.txt (old-0..old-9), acks old-0..old-5 and crashes: the committed offset is 36."""
    write_lines(src / "a.txt", [f"old-{i}" for i in range(10)])
    task = Task(src, local)
    emitted = task.pump()
    assert lines(emitted) == [f"old-{i}" for i in range(10)]
    task.ack(emitted[:6])
    task.crash()
    assert load_progress(local / "filespout" / "lines" / "task-0.json", "lines", str(src)) == {"a.txt": 36}


@pytest.fixture
def dirs(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    return src, tmp_path / "local"


def test_a_file_replaced_by_a_new_file_of_the_same_name_is_read_from_its_start(dirs, caplog):
    src, local = dirs
    read_six_of_ten(src, local)
    os.unlink(src / "a.txt")  # its inode may be reused by the new file: the first bytes tell them apart
    new = [f"replacement-{i}" for i in range(8)]  # longer than the committed offset
    write_lines(src / "a.txt", new)
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        assert lines(Task(src, local).pump()) == new
    assert any(str(src / "a.txt") in r.getMessage() and "from its start" in r.getMessage() for r in caplog.records)


def test_a_file_moved_over_by_another_of_the_same_name_is_read_from_its_start(dirs, caplog):
    src, local = dirs
    read_six_of_ten(src, local)
    new = [f"old-{i}" for i in range(6)] + ["other"]  # the same first bytes, but another file
    write_lines(src / "a.tmp.ignore", new)
    os.replace(src / "a.tmp.ignore", src / "a.txt")
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        assert lines(Task(src, local).pump()) == new
    assert any("replaced" in r.getMessage() and "a.txt" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("rewrite, why", [
    (b"x\ny\nz\n", "truncated"),
    (b"NEW-0\nNEW-1\nNEW-2\nNEW-3\nNEW-4\nNEW-5\nNEW-6\nNEW-7\nNEW-8\nNEW-9\n", "rewritten"),
], ids=["shorter-than-the-committed-offset", "same-length-other-bytes"])
def test_a_file_truncated_or_rewritten_in_place_is_read_from_its_start(dirs, caplog, rewrite, why):
    src, local = dirs
    read_six_of_ten(src, local)
    with open(src / "a.txt", "r+b") as f:  # the same inode
        f.truncate(0)
        f.write(rewrite)
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        assert lines(Task(src, local).pump()) == rewrite.decode().split()
    assert any(why in r.getMessage() and str(src / "a.txt") in r.getMessage() for r in caplog.records)


def test_a_file_that_only_grew_resumes_at_its_committed_offset(dirs, caplog):
    src, local = dirs
    read_six_of_ten(src, local)
    with open(src / "a.txt", "a") as f:
        f.write("".join(f"more-{i}\n" for i in range(3)))
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        # no retry limit: with one, the lines the crashed task read go out one at a time, each
        # once the one before it ended (tests/external/test_file_spout_deaths.py)
        again = Task(src, local, max_retries=None)
        assert lines(again.pump()) == [f"old-{i}" for i in range(6, 10)] + [f"more-{i}" for i in range(3)]
    assert not caplog.records


def test_restarts_with_other_parallelisms_replay_exactly_the_unacked_lines(dirs):
    """Runs of 1, 2, 3 and then 1 task(s), each crashing after acking a prefix of what its tasks
    read; the last run reads everything. Every line is acked exactly once in all, and the last run
    emits exactly the lines no earlier run acked."""
    src, local = dirs
    names = [f"f{i}.txt" for i in range(6)]
    content = {n: [f"{n}-{i}" for i in range(10)] for n in names}
    for n in names:
        write_lines(src / n, content[n])
    # each run's tasks own different files than the last run's, so a task finds records of files
    # it no longer owns in its own progress file, and records of its files in others' (or in a
    # task-2.json no task of a later run writes): it must keep the former and take the latter
    assert len({owner_of(n, 2) for n in names}) == 2 and len({owner_of(n, 3) for n in names}) == 3
    acked: list[str] = []
    for tasks, keep in ((1, 3), (2, 5), (3, 2)):
        for index in range(tasks):
            task = Task(src, local, index, tasks)
            emitted = task.pump()
            task.ack(emitted[:keep])  # a prefix of its current file; the rest stays unacked
            acked += lines(emitted[:keep])
            task.crash()
    last = Task(src, local, 0, 1)
    emitted_last: list[str] = []
    while len(os.listdir(src)) > sum(n.endswith(".done") for n in os.listdir(src)):
        emitted = last.pump(20)
        assert emitted or any(not n.endswith(".done") for n in os.listdir(src))
        last.ack(emitted)
        emitted_last += lines(emitted)
    everything = sorted(x for n in names for x in content[n])
    assert sorted(emitted_last) == sorted(set(everything) - set(acked))  # no line lost, none acked twice
    assert sorted(acked + emitted_last) == everything


@pytest.mark.parametrize("content, says", [
    (b"", "corrupt"),
    (b'{"version": 1, "spout": "lines", "directory": "/d", "fi', "corrupt"),
    (b"[" * 100000 + b"]" * 100000, "corrupt"),  # nested past the parser's stack: RecursionError
    (b'{"version": 1, "spout": "lines", "directory": "/d", "files": {"a": 3}, "identity": {"b": {}}}',
     "an identity for 'b'"),
    (b'{"version": 1, "spout": "lines", "directory": "/d", "files": {"a": 3}, "identity": {"a": {"dev": 1}}}',
     "malformed identity for 'a'"),
    (b'{"version": 1, "spout": "lines", "directory": "/d", "files": {"a": 3}, "identity": []}',
     "malformed 'identity'"),
    *[(b'{"version": 1, "spout": "lines", "directory": "/d", "files": {"a": 3}, "identity": {"a": {"dev": 1, '
       b'"ino": 2, "size": 3, "mtime_ns": 4, "head": "ab", "gen": %s}}}' % gen, "malformed identity for 'a'")
      for gen in (b"-1", b"4294967296", b'"7"', b"1.5", b"true")],
], ids=["empty", "torn", "deep", "identity-of-unknown-file", "identity-fields", "identity-not-a-map",
        "gen-negative", "gen-past-32-bits", "gen-a-string", "gen-a-float", "gen-a-bool"])
def test_a_corrupt_or_truncated_progress_file_is_a_clear_error_naming_it(tmp_path, content, says):
    path = tmp_path / "task-0.json"
    path.write_bytes(content)
    os.chmod(path, 0o600)
    with pytest.raises(FileConnectorError, match=says) as e:
        load_progress(path, "lines", "/d")
    assert str(path) in str(e.value)


def test_a_corrupt_progress_file_of_another_task_stops_every_task_naming_it(dirs):
    src, local = dirs
    state = local / "filespout" / "lines"
    state.mkdir(parents=True)
    (state / "task-5.json").write_bytes(dump_progress("lines", str(src), {"a.txt": 3})[:-9])
    os.chmod(state / "task-5.json", 0o600)
    with pytest.raises(FileConnectorError, match=f"progress file {state / 'task-5.json'} is corrupt"):
        Task(src, local, 0, 2)
    assert json.loads(dump_progress("lines", str(src), {"a.txt": 3}))["files"] == {"a.txt": 3}


class ErrorsCollector(Collector):
    """`Collector`, keeping the errors reported."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[str] = []

    def report_error(self, message):
        self.errors.append(str(message))


def test_a_file_taken_away_unfinished_before_a_crash_is_reported_not_dropped_silently(tmp_path):
    """A user moves the file a task reads out of the directory; the task's worker dies before
    every line is acked. The next run found its progress for a file no longer there and dropped
    it without a word: 7 lines never processed, no error anywhere. It now reports the file and
    the committed offset. A file renamed done, or taken away with every line acked, is not
    reported."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    write_lines(src / "a.txt", [f"a{i}" for i in range(10)])  # 30 bytes
    write_lines(src / "b.txt", [f"b{i}" for i in range(10)])
    first = Task(src, local)
    out = first.pump(30)
    assert lines(out) == [f"a{i}" for i in range(10)]
    first.ack(out[:3])  # committed to byte 9 (commit_every=1)
    first.crash()
    (src / "a.txt").rename(tmp_path / "a.txt")  # the user takes it away
    second = Task(src, local)
    second.out = second.spout.collector = ErrorsCollector()
    got = second.pump(30)
    assert lines(got) == [f"b{i}" for i in range(10)]
    second.ack(got)
    second.pump(5)  # b.txt renamed done
    assert (src / "b.txt.done").exists()
    [error] = second.out.errors
    assert f"{src / 'a.txt'} left the directory" in error and "committed to byte 9 of 30" in error
    assert "'lines' task 0" in error
    second.spout.close()  # its progress is gone: the error is not said again
    third = Task(src, local)
    third.out = third.spout.collector = ErrorsCollector()
    third.pump(5)
    third.spout.close()
    assert third.out.errors == []


class Crash(Exception):
    """A SIGKILL at a chosen point of the spout's code."""


def test_a_file_finished_and_archived_is_never_reported_as_taken_away_after_a_crash(tmp_path, monkeypatch):
    """A task renames its finished file done and is killed before its next commit; an archiver
    moves the .done file away. The next run found a record below the file's end, no file and no
    .done, and reported 'left the directory before every record of it was acked' (of a file whose
    every line was acked); the same for a kill while the file was taken aside to be renamed done,
    which also left it under a hidden name for good. Now a file is committed at its end before it
    is renamed done, and a file left aside is renamed done by the next run. (Collector raises on
    any reported error.)"""
    src, local, archive = tmp_path / "in", tmp_path / "local", tmp_path / "archive"
    src.mkdir()
    archive.mkdir()
    write_lines(src / "a.txt", [f"a{i}" for i in range(10)])
    write_lines(src / "b.txt", [f"b{i}" for i in range(10)])
    first = Task(src, local, commit_every=3, commit_secs=3600)  # a.txt committed to its 9th line
    real = FileSpout._rename_done

    def killed_after_the_rename(spout, name, read):
        real(spout, name, read)
        raise Crash

    monkeypatch.setattr(FileSpout, "_rename_done", killed_after_the_rename)
    got = first.pump(10)
    with pytest.raises(Crash):
        first.ack(got)
    first.crash()
    assert sorted(p.name for p in src.iterdir()) == ["a.txt.done", "b.txt"]
    (src / "a.txt.done").rename(archive / "a.txt.done")  # the archiver

    def killed_while_aside(spout, name, read):
        os.rename(src / name, src / ".finishing.0123")
        raise Crash

    monkeypatch.setattr(FileSpout, "_rename_done", killed_while_aside)
    second = Task(src, local, commit_every=1000, commit_secs=3600)
    got = second.pump(30)
    assert lines(got) == [f"b{i}" for i in range(10)]  # a.txt's lines were all acked: none again
    with pytest.raises(Crash):
        second.ack(got)
    second.crash()
    monkeypatch.setattr(FileSpout, "_rename_done", real)
    third = Task(src, local, commit_every=1000, commit_secs=3600)
    assert third.pump(30) == []
    third.spout.close()
    assert sorted(p.name for p in src.iterdir()) == ["b.txt.done"]
    assert (src / "b.txt.done").read_text() == "".join(f"b{i}\n" for i in range(10))
    assert load_progress(local / "filespout" / "lines" / "task-0.json", "lines", str(src)) == {}


def test_a_file_finished_by_another_task_and_archived_is_not_reported_by_its_earlier_owner(tmp_path):
    """Task 1 of 2 reads f2.txt part way and is killed; the spout restarts with 3 tasks, where
    task 0 owns f2.txt and finishes it, and an archiver moves f2.txt.done away. Task 1 still held
    its record of f2.txt (a task keeps the records of files it no longer owns until they are
    finished) and, at its next commit, reported f2.txt as taken away unfinished. Task 0 now keeps
    f2.txt as finished in its progress file until task 1 has dropped its record."""
    src, local, archive = tmp_path / "in", tmp_path / "local", tmp_path / "archive"
    src.mkdir()
    archive.mkdir()
    write_lines(src / "f2.txt", [f"x{i}" for i in range(10)])  # task 1 of 2, task 0 of 3
    write_lines(src / "f0.txt", [f"y{i}" for i in range(10)])  # task 0 of 2, task 1 of 3
    old = Task(src, local, 1, 2)
    got = old.pump(30)
    assert lines(got) == [f"x{i}" for i in range(10)]
    old.ack(got[:3])
    old.crash()
    zero, one = Task(src, local, 0, 3), Task(src, local, 1, 3)
    got = zero.pump(30)
    assert lines(got) == [f"x{i}" for i in range(3, 10)]  # from task 1's committed offset
    zero.ack(got)
    zero.pump(1)
    (src / "f2.txt.done").rename(archive / "f2.txt.done")  # the archiver
    progress = local / "filespout" / "lines"
    got = one.pump(30)
    assert lines(got) == [f"y{i}" for i in range(10)]
    one.ack(got)  # commits: f2.txt's record dropped, silently
    one.pump(1)
    assert set(json.loads((progress / "task-0.json").read_text())["finished"]) == {"f2.txt"}
    assert load_progress(progress / "task-1.json", "lines", str(src)) == {}
    zero.spout.close()  # its commit forgets f2.txt, which no task holds a record of any more
    assert "finished" not in json.loads((progress / "task-0.json").read_text())


class _Reported(Collector):
    """A `Collector` that keeps the errors a spout reports."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[str] = []

    def report_error(self, message):
        self.errors.append(message)


@pytest.mark.parametrize("kind", ["FIFO", "directory"])
def test_a_fifo_or_directory_put_in_a_listed_files_place_is_skipped(tmp_path, caplog, kind):
    """A name listed as a file and opened later (the listing lasts ``poll_secs``) may be a FIFO
    by then, whose open blocked the spout until a writer came (for ever, silently), or a
    directory, whose read raised IsADirectoryError naming only a descriptor out of next_tuple.
    Either is skipped now, with a warning naming it, and the files after it are read."""
    import threading

    from squall.engine.clock import SimulatedClock

    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    for name in "abc":
        write_lines(src / f"{name}.txt", [f"{name}0"])
    spout = FileSpout(src, quiet_secs=0, poll_secs=60, progress_dir=local, commit_every=1, clock=SimulatedClock())
    out = _Reported()
    spout.open({}, Context(0, 1), out)
    spout.next_tuple()  # lists a, b and c; opens a
    (src / "b.txt").unlink()
    os.mkfifo(src / "b.txt") if kind == "FIFO" else (src / "b.txt").mkdir()
    raised = []

    def read_on():
        try:
            for _ in range(2):
                for _ in range(5):
                    spout.next_tuple()
                for _, msg_id in list(out.emitted):
                    spout.ack(msg_id)
        except Exception as e:  # noqa: BLE001 - asserted below
            raised.append(e)

    with caplog.at_level(logging.WARNING, "squall.external.files"):
        reader = threading.Thread(target=read_on, daemon=True)
        reader.start()
        reader.join(10)  # a bound, not a wait: it returns at once unless the open hangs
        if reader.is_alive():  # let the hung open go, for the thread to end
            os.close(os.open(src / "b.txt", os.O_WRONLY | os.O_NONBLOCK))
        assert not reader.is_alive() and raised == [], raised
    assert lines(out.emitted) == ["a0", "c0"] and out.errors == []
    assert f"skipped {src / 'b.txt'}: not a regular file (a {kind}), put in place of the one listed" in caplog.text


class Reporting(Collector):
    """Keeps the errors a spout reports, instead of failing on the first."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[str] = []

    def report_error(self, message):
        self.errors.append(message)


def test_a_file_truncated_while_it_is_read_is_reported_not_finished_silently(dirs):
    """A file cut to its first 5,000 of 20,000 lines while the spout was at line 30 was read to
    its new end and renamed done without a word: 15,000 lines gone. Now the spout reports it,
    naming the file and the bytes no one read; every line still there is emitted once."""
    src, local = dirs
    write_lines(src / "a.txt", [f"line{i:06d}" for i in range(20000)])  # 11 bytes a line
    task = Task(src, local, commit_every=1000)
    task.spout.collector = task.out = Reporting()
    first = task.pump(30)
    os.truncate(src / "a.txt", 11 * 5000)
    task.ack(first)
    emitted = list(first)
    for _ in range(20):
        more = task.pump(500)
        task.ack(more)
        emitted += more
    assert lines(emitted) == [f"line{i:06d}" for i in range(5000)]
    assert os.listdir(src) == ["a.txt.done"]
    said = (f"FileSpout 'lines' task 0: {src / 'a.txt'} was truncated while it was read: it was 220000 bytes, and ends "
            f"at byte 55000 now; the records that were in bytes 55000 to 220000 are read by no one (the file is renamed "
            f"done as read). Write a file elsewhere and move it in whole, and never truncate one the spout may be reading")
    assert task.out.errors == [said]


def test_a_file_that_grows_while_it_is_read_is_not_reported_truncated(dirs):
    """Appends while the file is read (a producer that should have moved it in whole) are read,
    and no truncation is reported."""
    src, local = dirs
    write_lines(src / "a.txt", [f"line{i:06d}" for i in range(300)])
    task = Task(src, local, commit_every=20)  # its size looked at with each commit
    task.spout.collector = task.out = Reporting()
    first = task.pump(30)
    with open(src / "a.txt", "a") as f:
        f.write("".join(f"line{i:06d}\n" for i in range(300, 400)))
    task.ack(first)
    emitted = list(first)
    for _ in range(10):
        more = task.pump(50)
        task.ack(more)
        emitted += more
    assert lines(emitted) == [f"line{i:06d}" for i in range(400)] and not task.out.errors
    assert os.listdir(src) == ["a.txt.done"]


def test_a_file_whose_last_records_wait_for_acks_past_the_message_timeout_is_reported_once(dirs):
    """A tumbling Count.of(5) window behind a FileSpout holds the last records of each file until
    more come, and they are in the next file, which the task opens only once they are acked:
    on the process host the pipeline stopped for good after the first file of each task, with
    nothing failed and nothing said. Now the task reports it once the records have waited for
    the message timeout without an ack, naming the file and how many wait; an ack restarts the
    wait, and the report comes once a file."""
    from squall.engine.clock import SimulatedClock

    src, local = dirs
    write_lines(src / "a.txt", [f"line{i}" for i in range(10)])
    clock = SimulatedClock()
    task = Task(src, local, clock=clock)
    task.spout.collector = task.out = Reporting()
    emitted = task.pump(20)
    task.ack(emitted[:7])  # a window of 5 fired once; 2 of the file's records wait in the next
    task.pump(5)  # at the end: the wait starts
    clock.advance(29)
    task.pump(5)
    task.ack(emitted[7:8])  # an ack within the timeout: the wait starts again
    task.pump(5)
    clock.advance(29)
    task.pump(5)
    assert task.out.errors == []
    clock.advance(2)
    task.pump(5)
    clock.advance(60)
    task.pump(5)  # said once
    said = (f"FileSpout 'lines' task 0: {src / 'a.txt'} is read to its end, but 2 of its records have not been acked "
            f"for 31 s (topology.message.timeout.secs); the task opens its next file only once they are. A bolt that acks "
            f"a record only when later records reach it (a count window, or an event-time window that is not persistent) "
            f"holds them for good, as the later records are in the next file: make such a window persistent "
            f"(with_persistence(): it acks its inputs at each checkpoint), or use a duration window in processing time")
    assert task.out.errors == [said]
    task.ack(emitted[8:])
    task.pump(5)
    assert os.listdir(src) == ["a.txt.done"] and len(task.out.errors) == 1


def test_records_failing_at_a_files_end_through_an_outage_are_not_reported_as_held(dirs):
    """A store that is down fails the last records of a file again and again (at the backoff's
    pace, at most every 10 s): they are replayed, not held by a window, and not so reported."""
    from squall.engine.clock import SimulatedClock

    src, local = dirs
    write_lines(src / "a.txt", [f"line{i}" for i in range(3)])
    clock = SimulatedClock()
    task = Task(src, local, clock=clock, max_retries=None)
    task.spout.collector = task.out = Reporting()
    emitted = task.pump(10)
    task.ack(emitted[:1])
    for _ in range(12):  # 120 s of an outage: each failure's replay goes out and fails again
        for _, msg_id in emitted[1:]:
            task.spout.fail(msg_id)
        clock.advance(10)
        emitted[1:] = task.pump(10)
    task.ack(emitted[1:])
    task.pump(5)
    assert os.listdir(src) == ["a.txt.done"] and task.out.errors == []


def test_a_copy_of_a_progress_file_beside_it_is_no_tasks_and_stops_nothing(dirs):
    """An operator copies task-0.json to task-0.bak.json in the spout's state directory. The task
    reads on: a.txt from its committed offset, then b.txt, 20 lines of 20 in all. On main every
    listing took ``0.bak`` for a task index, and next_tuple raised ValueError (invalid literal
    for int()), naming no file."""
    src, local = dirs
    write_lines(src / "a.txt", [f"a{i}" for i in range(10)])
    task = Task(src, local)
    first = task.pump(20)
    task.ack(first[:4])
    task.crash()
    state = local / "filespout" / "lines"
    shutil.copy2(state / "task-0.json", state / "task-0.bak.json")
    write_lines(src / "b.txt", [f"b{i}" for i in range(10)])
    task = Task(src, local)
    got = lines(first[:4])
    for _ in range(5):
        more = task.pump(10)
        task.ack(more)
        got += lines(more)
    assert sorted(got) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    assert sorted(os.listdir(src)) == ["a.txt.done", "b.txt.done"]
