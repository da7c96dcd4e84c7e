"""squall.external.files: the replayable directory spout and the atomic rotating file sink."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from squall import Bolt, LocalCluster, TopologyBuilder
from squall.external.files import (
    FileConnectorError,
    FileSinkBolt,
    FileSpout,
    append_dead_letter,
    dump_progress,
    load_progress,
    owner_of,
)
from squall.external.offsets import OffsetManager
from squall.testing import AckFailMapTracker, FeederSpout
from squall.testing._registry import SharedLog

from ..conftest import wait_until


class Recorder(Bolt):
    """Records every line it gets; acks all but the lines in ``hold`` (which it keeps pending)
    and fails the lines in ``fail_always``."""

    def __init__(self, log: SharedLog, hold=(), fail_always=()) -> None:
        self.log, self.hold, self.fail_always = log, frozenset(hold), frozenset(fail_always)

    def execute(self, tup) -> None:
        line = tup.values[0]
        self.log.append(line)
        if line in self.fail_always:
            self.collector.fail(tup)
        elif line not in self.hold:
            self.collector.ack(tup)


def write_lines(path: Path, lines: list[str]) -> None:
    """Put a whole file under ``path``, as a writer should: written under a name the spout
    ignores, then renamed (a file written in place was once seen empty, taken and finished with
    none of its lines: 'late.txt.done' without late-0 and late-1, in the full suite)."""
    partial = path.with_name(path.name + ".ignore")
    partial.write_text("".join(f"{x}\n" for x in lines))
    os.replace(partial, path)


def spout_topology(directory, log, local_dir, parallelism=1, claim_files=False, **bolt):
    builder = TopologyBuilder()
    spout = FileSpout(directory, quiet_secs=0, commit_every=1, poll_secs=0.05, progress_dir=local_dir, claim_files=claim_files)
    builder.set_spout("lines", spout, parallelism)
    builder.set_bolt("rec", Recorder(log, **bolt), 2).shuffle_grouping("lines")
    return builder.create_topology()


CONF = {"topology.message.timeout.secs": 60}  # held lines must not time out and replay meanwhile


def cluster_at(local_dir):
    """A LocalCluster whose storm.local.dir is ``local_dir``, where the spout keeps its progress."""
    return LocalCluster({"storm.local.dir": str(local_dir)})


def progress(local_dir, spout="lines"):
    out = {}
    for p in sorted((Path(local_dir) / "filespout" / spout).glob("task-*.json")):
        out.update(json.loads(p.read_text())["files"])
    return out


# --- the pure core -----------------------------------------------------------------------------------


def test_tracker_commits_only_the_contiguous_acked_prefix():
    t = OffsetManager("a.txt", 0)
    for off, end in ((0, 5), (5, 9), (9, 14)):
        t.add_to_emitted(off, end)
    t.add_to_acked(5)
    assert t.committable == 0  # HdfsSpout's pitfall: a later ack must not skip the unacked first line
    t.add_to_acked(0)
    assert t.committable == 9
    t.add_to_acked(9)
    assert (t.committable, t.pending) == (14, 0)


def test_files_are_split_among_tasks_by_a_stable_hash_of_the_name():
    names = [f"f{i}.txt" for i in range(40)]
    owners = [owner_of(n, 3) for n in names]
    assert set(owners) == {0, 1, 2} and owners == [owner_of(n, 3) for n in names]


@pytest.mark.parametrize("content, says", [
    (b"{not json", "corrupt"),
    (b'{"version": 1, "spout": "other", "directory": "/d", "files": {}}', "belongs to spout 'other'"),
    (b'{"version": 1, "spout": "lines", "directory": "/d", "files": {"a": -3}}', "malformed 'files'"),
    (b"[1, 2]", "not a version-1"),
])
def test_a_corrupt_or_foreign_progress_file_is_a_clear_error_naming_it(tmp_path, content, says):
    path = tmp_path / "task-0.json"
    path.write_bytes(content)
    os.chmod(path, 0o600)
    with pytest.raises(FileConnectorError, match=says) as e:
        load_progress(path, "lines", "/d")
    assert str(path) in str(e.value)
    path.write_bytes(dump_progress("lines", "/d", {"a": 3}))
    assert load_progress(path, "lines", "/d") == {"a": 3}


# --- the spout on a LocalCluster ------------------------------------------------------------------------


@pytest.mark.parametrize("claim_files", [False, True], ids=["by-name-hash", "claimed"])
def test_every_line_of_every_file_is_emitted_and_acked_and_new_files_are_picked_up(tmp_path, claim_files):
    src = tmp_path / "in"
    src.mkdir()
    expected = []
    for f in range(3):
        lines = [f"f{f}-{i}" for i in range(30)]
        write_lines(src / f"file{f}.txt", lines)
        expected += lines
    (src / "skip.txt.ignore").write_text("never\n")
    log = SharedLog()
    with cluster_at(tmp_path / "local") as cluster:
        cluster.submit_topology("read", CONF, spout_topology(src, log, tmp_path / "local", parallelism=2,
                                                             claim_files=claim_files))
        assert wait_until(lambda: sorted(os.listdir(src)) == [f"file{f}.txt.done" for f in range(3)]
                          + ["skip.txt.ignore"], timeout=20)
        write_lines(src / "late.txt", ["late-0", "late-1"])
        assert wait_until(lambda: "late.txt.done" in os.listdir(src), timeout=20)
        cluster.kill_topology("read", wait_secs=0)
    assert sorted(log.items()) == sorted(expected + ["late-0", "late-1"])
    assert progress(tmp_path / "local") == {}  # finished files are forgotten
    state = tmp_path / "local" / "filespout" / "lines"
    for p in state.iterdir():
        assert p.stat().st_mode & 0o777 == (0o700 if p.is_dir() else 0o600)
    if claim_files:  # every lock released: the files done, the tasks closed
        assert [p.name for p in (state / "locks").iterdir() if not p.name.startswith(".")] == []


CRASHED: set[str] = set()


class CrashOnce(Recorder):
    """A `Recorder` whose worker crashes once, at the line ``crash_on`` (the first time it sees it)."""

    def __init__(self, log: SharedLog, crash_on: str) -> None:
        super().__init__(log)
        self.crash_on = crash_on

    def execute(self, tup) -> None:
        if tup.values[0] == self.crash_on and self.crash_on not in CRASHED:
            CRASHED.add(self.crash_on)
            raise RuntimeError(f"crash once on {self.crash_on}")
        super().execute(tup)


def test_a_claimed_file_goes_on_at_once_after_its_worker_crashed_and_restarted(tmp_path):
    """The restarted task finds the lock of its crashed predecessor (same process, gone task) and
    takes it over at once, not after lock_timeout_secs (300 s)."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    items = [f"line-{i:03d}" for i in range(200)]
    write_lines(src / "a.txt", items)
    CRASHED.discard("line-100")
    log = SharedLog()
    builder = TopologyBuilder()
    builder.set_spout("lines", FileSpout(src, quiet_secs=0, commit_every=1, poll_secs=0.05, progress_dir=local, claim_files=True))
    builder.set_bolt("rec", CrashOnce(log, "line-100")).shuffle_grouping("lines")
    with cluster_at(local) as cluster:
        cluster.submit_topology("crashy", {"topology.message.timeout.secs": 5, "topology.bolt.fail.fast": True},
                                builder.create_topology())
        assert wait_until(lambda: (src / "a.txt.done").exists(), timeout=60), sorted(os.listdir(src))
        cluster.kill_topology("crashy", wait_secs=0)
    assert "line-100" in CRASHED and set(log.items()) == set(items)


def test_after_a_restart_exactly_the_lines_from_the_committed_offset_are_replayed(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    lines = [f"line-{i:02d}" for i in range(20)]
    write_lines(src / "a.txt", lines)
    first_unacked = len("line-00\n") * 10
    local = tmp_path / "local"
    first = SharedLog()
    with cluster_at(local) as cluster:
        # lines 10, 11 and 15 stay unacked; 12-14 and 16-19 are acked after the first unacked one
        cluster.submit_topology("one", CONF, spout_topology(src, first, local, hold={"line-10", "line-11", "line-15"}))
        assert wait_until(lambda: len(first.items()) == 20 and progress(local).get("a.txt") == first_unacked)
        cluster.kill_topology("one", wait_secs=0)
    assert (src / "a.txt").exists()  # not done: lines are pending
    second = SharedLog()
    with cluster_at(local) as cluster:
        cluster.submit_topology("two", CONF, spout_topology(src, second, local))
        assert wait_until(lambda: (src / "a.txt.done").exists(), timeout=20)
        cluster.kill_topology("two", wait_secs=0)
    assert sorted(second.items()) == lines[10:]  # at-least-once: 12-14, 16-19 again, nothing before 10


def test_undecodable_bytes_go_to_the_dead_letter_file_naming_file_and_offset(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "bad.txt").write_bytes(b"ok-1\n\xff\xfebroken\nok-2\n")
    log = SharedLog()
    with cluster_at(tmp_path / "local") as cluster:
        cluster.submit_topology("bad", CONF, spout_topology(src, log, tmp_path / "local"))
        assert wait_until(lambda: (src / "bad.txt.done").exists(), timeout=20)
        cluster.kill_topology("bad", wait_secs=0)
    assert sorted(log.items()) == ["ok-1", "ok-2"]
    [entry] = [json.loads(x) for x in (tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "bad.txt.dead").read_text().splitlines()]
    assert (entry["file"], entry["offset"]) == ("bad.txt", 5)
    assert "UnicodeDecodeError" in entry["reason"] and "broken" in entry["record"]


def test_a_failed_line_is_replayed_then_dead_lettered_after_the_retry_limit(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    write_lines(src / "a.txt", ["good", "poison", "fine"])
    log = SharedLog()
    with cluster_at(tmp_path / "local") as cluster:
        cluster.submit_topology("retry", CONF, spout_topology(src, log, tmp_path / "local", fail_always={"poison"}))
        assert wait_until(lambda: (src / "a.txt.done").exists(), timeout=20)
        cluster.kill_topology("retry", wait_secs=0)
    assert log.items().count("poison") == 4  # the first emit and max_retries=3 re-emits
    [entry] = [json.loads(x) for x in (tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "a.txt.dead").read_text().splitlines()]
    assert entry["offset"] == 5 and entry["reason"].startswith("failed 4 times; last: failed in [rec] task ")
    assert (entry["cause"]["kind"], entry["cause"]["component"]) == ("fail", "rec")  # the bolt's explicit fail


def test_a_corrupt_progress_file_stops_the_spout_with_an_error_naming_it(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    state = tmp_path / "local" / "filespout" / "lines"
    state.mkdir(parents=True)
    (state / "task-0.json").write_bytes(b"\x00garbage")
    spout = FileSpout(src, quiet_secs=0, progress_dir=tmp_path / "local")

    class Context:
        def get_this_component_id(self):
            return "lines"

        def get_this_task_index(self):
            return 0

        def get_component_tasks(self, _):
            return [1]

    with pytest.raises(FileConnectorError, match=f"progress file {state / 'task-0.json'} is corrupt"):
        spout.open({}, Context(), None)


# --- the sink ---------------------------------------------------------------------------------------------


def sink_topology(feeder, sink):
    builder = TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("sink", sink).shuffle_grouping("feed")
    return builder.create_topology()


def visible_records(directory):
    names = sorted(n for n in os.listdir(directory) if not n.startswith("."))
    return names, [line for n in names for line in (Path(directory) / n).read_text().splitlines()]


def test_the_sink_writes_complete_rotated_files_holding_exactly_the_acked_tuples(tmp_path):
    out = tmp_path / "out"
    feeder = FeederSpout(["word", "n"])
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    with LocalCluster() as cluster:
        cluster.submit_topology("sink", {}, sink_topology(feeder, FileSinkBolt(out, max_records=4, tick_secs=1)))
        for i in range(10):
            feeder.feed(["w", i], msg_id=i)
        # 8 tuples rotate by count; the last 2 wait for a tick
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(8)))
        names, records = visible_records(out)
        assert len(names) == 2 and records == [f"w\t{i}" for i in range(8)]
        assert [n for n in os.listdir(out) if n.startswith(".")]  # the partial third file, hidden
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(10)), timeout=10)
        cluster.kill_topology("sink", wait_secs=0)
    names, records = visible_records(out)
    assert len(names) == 3 and records == [f"w\t{i}" for i in range(10)]
    assert not [n for n in os.listdir(out) if n.startswith(".")]
    assert not any(tracker.is_failed(i) for i in range(10))


def test_a_failed_write_fails_the_tuples_so_they_replay(tmp_path):
    out = tmp_path / "out"
    feeder = FeederSpout(["n"])
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    with LocalCluster() as cluster:
        cluster.submit_topology("fail", {}, sink_topology(feeder, FileSinkBolt(out, max_records=2, tick_secs=None)))
        feeder.feed([0], msg_id=0)
        feeder.feed([1], msg_id=1)
        assert wait_until(lambda: tracker.is_acked(0) and tracker.is_acked(1))
        feeder.feed([2], msg_id=2)  # written into a new temporary file...
        assert wait_until(lambda: any(n.startswith(".") for n in os.listdir(out)))
        shutil.rmtree(out)  # ...whose directory disappears: the rename fails, and so does the next open
        feeder.feed([3], msg_id=3)
        feeder.feed([4], msg_id=4)
        assert wait_until(lambda: all(tracker.is_failed(i) for i in (2, 3, 4)))
        cluster.kill_topology("fail", wait_secs=0)
    assert not any(tracker.is_acked(i) for i in (2, 3, 4))


def test_the_dead_letter_file_is_kept_out_of_the_watched_directory_and_never_written_through_a_symlink(tmp_path):
    src, secret = tmp_path / "in", tmp_path / "private.txt"
    src.mkdir()
    secret.write_text("mine\n")
    (src / ".dead-letter").mkdir()  # what a producer could plant where the default used to be
    (src / ".dead-letter" / "bad.txt.dead").symlink_to(secret)
    (src / "bad.txt").write_bytes(b"ok-1\n\xff\xfebroken\n")
    (src / "leak.txt").symlink_to(secret)  # a symlink in the watched directory is not read
    log = SharedLog()
    with cluster_at(tmp_path / "local") as cluster:
        cluster.submit_topology("dl", CONF, spout_topology(src, log, tmp_path / "local"))
        assert wait_until(lambda: (src / "bad.txt.done").exists(), timeout=20)
        cluster.kill_topology("dl", wait_secs=0)
    assert log.items() == ["ok-1"] and secret.read_text() == "mine\n"
    assert (src / "leak.txt").is_symlink()  # neither read nor renamed .done
    dead = tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "bad.txt.dead"
    assert json.loads(dead.read_text())["offset"] == 5

    target = tmp_path / "dl"
    target.mkdir()
    (target / "x.dead").symlink_to(secret)
    with pytest.raises(FileConnectorError, match="symlink"):
        append_dead_letter(str(target), "x", {"record": "r"})
    (tmp_path / "dl-link").symlink_to(target)
    with pytest.raises(FileConnectorError, match="not a directory of this user"):
        append_dead_letter(str(tmp_path / "dl-link"), "y", {"record": "r"})
    assert secret.read_text() == "mine\n" and not (target / "y.dead").exists()


def test_a_formatter_error_fails_only_that_tuple_and_the_worker_lives_on(tmp_path):
    out = tmp_path / "out"
    feeder = FeederSpout(["n"])
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)

    def formatter(tup):
        return f"{10 // tup.values[0]}\n".encode()  # ZeroDivisionError on a poison tuple

    with LocalCluster() as cluster:
        cluster.submit_topology("poison", {}, sink_topology(
            feeder, FileSinkBolt(out, formatter=formatter, max_records=2, tick_secs=None)))
        for i in (1, 0, 2):
            feeder.feed([i], msg_id=i)
        assert wait_until(lambda: tracker.is_failed(0) and tracker.is_acked(1) and tracker.is_acked(2))
        errors = cluster.get_topology_info("poison")["errors"]
        cluster.kill_topology("poison", wait_secs=0)
    assert visible_records(out)[1] == ["10", "5"]
    assert any("formatter raised ZeroDivisionError" in e["error"] and "'feed'" in e["error"] for e in errors)
