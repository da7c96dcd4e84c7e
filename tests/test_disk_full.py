"""A full disk under the files squall keeps: a state's commit, a FileSpout's progress and
dead-letter file, the master's state and plans. The write fails with a `DiskWriteError` naming the
file, what it holds (the component, task and namespace), what ENOSPC means and what to do (free
space, or the setting that moves the directory), and what was last committed still loads.

The disk is a 256 KiB tmpfs the test mounts (root only) and fills; it is unmounted at the end."""

from __future__ import annotations

import errno
import gc
import os
import subprocess
from pathlib import Path

import cloudpickle
import pytest

from squall import DiskWriteError, TopologyBuilder
from squall._config import cluster_conf
from squall._private import Kept, disk_error_message
from squall.cluster.master import Master
from squall.cluster.server import Keeper
from squall.external.files import FileSpout, load_progress
from squall.state.file import FileKeyValueStateProvider
from squall.testing import FeederSpout

from .acceptance.components import AckBolt
from .external.test_file_progress import Context
from .external.test_file_record_limit import Collector, dead_letters

ENOSPC_SAYS = "no space is left on the device (ENOSPC)"


@pytest.fixture
def disk(tmp_path):
    """A directory on a 256 KiB file system of its own, to fill."""
    if os.geteuid() != 0:
        pytest.skip("filling a disk needs a small tmpfs of the test's own, and mounting one needs root")
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?): {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        # a file closed only when its object is freed, and that object in a reference cycle (an
        # exception's traceback holding a reader) stays open until the collector runs, which the
        # machine's load decides: "target is busy", and no holder left to name a moment later
        gc.collect()
        unmounted = subprocess.run(["umount", str(where)], capture_output=True, text=True)
        assert unmounted.returncode == 0, f"{unmounted.stderr.strip()}; held by: {_holders(where)}"


def _holders(where: Path) -> list[str]:
    """Each process with a file, its working directory, its root or a memory map under ``where``,
    and what it holds there: what keeps the test's file system busy (a file a component left
    open, or mapped)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            held = [target for link in [proc / "cwd", proc / "root", *(proc / "fd").iterdir()]
                    if (target := _target(link)).startswith(str(where))]
            held += sorted({line.split(maxsplit=5)[-1] for line in (proc / "maps").read_text().splitlines()
                            if str(where) in line})
            if held:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ")[:120].decode(errors="replace")
                found.append(f"{proc.name} {command}: {held}")
        except OSError:
            continue  # ended meanwhile, or not ours to look at
    return found


def _target(link: Path) -> str:
    """Where ``link`` points; "" once it is gone (a descriptor closed meanwhile: the one listing
    a process's own descriptors is, and made the whole process, the test's own, unlisted)."""
    try:
        return os.readlink(link)
    except OSError:
        return ""


class Filler:
    """Takes every free byte of a file system, and gives it back."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "filler"

    def fill(self) -> None:
        with open(self.path, "ab", buffering=0) as f:
            while True:
                try:
                    f.write(b"\0" * 4096)
                except OSError as e:
                    assert e.errno == errno.ENOSPC
                    return

    def free(self) -> None:
        self.path.unlink()


class StateContext:
    """The part of a TopologyContext the file state provider reads."""

    def get_this_component_id(self):
        return "count"

    def get_this_task_id(self):
        return 3


def file_state(directory: Path):
    conf = {"topology.name": "clicks", "topology.state.provider.config": {"directory": str(directory)}}
    return FileKeyValueStateProvider().new_state("count-3", conf, StateContext())


def says_what_and_where(message: str, path: Path, *parts: str) -> None:
    for part in (str(path), ENOSPC_SAYS, f"free space on the file system that holds {path.parent}", *parts):
        assert part in message, f"{part!r} is not in: {message}"


def test_a_state_commit_on_a_full_disk_names_the_file_and_state_and_the_last_commit_still_loads(disk):
    filler = Filler(disk)
    state = file_state(disk / "states")
    state.put("clicks", 10)
    state.prepare_commit(1)
    state.commit(1)
    files = disk / "states" / "clicks" / "ns-count-3"

    state.put("clicks", 20)
    filler.fill()
    with pytest.raises(DiskWriteError) as prepare:
        state.prepare_commit(2)
    filler.free()
    state.prepare_commit(2)
    filler.fill()
    with pytest.raises(DiskWriteError) as commit:
        state.commit(2)
    filler.free()

    for failed, role in ((prepare, "prepared"), (commit, "committed")):
        assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(files / role)
        says_what_and_where(str(failed.value), files / role, "the state of component [count] task 3, namespace 'count-3'",
                            'the "directory" of topology.state.provider.config', f"{role} as last written is intact")
    again = file_state(disk / "states")
    assert again.committed_txid == 1 and dict(again.committed()) == {"clicks": 10}
    assert sorted(p.name for p in files.iterdir()) == ["committed", "prepared"]  # no temporary file left


def spout(src: Path, progress: Path, **kw) -> tuple[FileSpout, Collector]:
    s = FileSpout(src, quiet_secs=0, commit_every=1, poll_secs=0, progress_dir=progress, **kw)
    out = Collector()
    s.open({}, Context(0, 1), out)
    return s, out


def test_a_file_spouts_progress_and_dead_letters_on_a_full_disk_name_the_file_and_task(tmp_path, disk):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.txt").write_text("one\ntwo\n" + "x" * 200 + "\nthree\n")
    filler = Filler(disk)
    s, out = spout(src, disk, max_record_bytes=100)
    s.next_tuple()
    s.ack(out.emitted[0][1])  # "one": committed at offset 4
    progress_file = disk / "filespout" / "lines" / "task-0.json"
    assert load_progress(progress_file, "lines", str(src)) == {"a.txt": 4}

    s.next_tuple()
    filler.fill()
    with pytest.raises(DiskWriteError) as progress:
        s.ack(out.emitted[1][1])  # "two": its commit cannot be written
    with pytest.raises(DiskWriteError) as dead:
        s.next_tuple()  # the line above the limit: its dead-letter entry cannot be written
    filler.free()

    setting = f"the FileSpout's progress_dir (storm.local.dir where the topology is built; here {disk})"
    says_what_and_where(str(progress.value), progress_file, "the progress of FileSpout 'lines' task 0", setting,
                        "task-0.json as last written is intact")
    dead_file = disk / "filespout" / "lines" / "dead-letter" / "a.txt.dead"
    says_what_and_where(str(dead.value), dead_file, "the dead-letter records of FileSpout 'lines' task 0", setting)
    assert load_progress(progress_file, "lines", str(src)) == {"a.txt": 4}  # the last commit
    assert dead_file.read_bytes() == b""  # no half entry for the next one to run into
    s.next_tuple()  # with space again, the entry is written
    [entry] = dead_letters(disk, "a.txt")
    assert (entry["offset"], entry["size"]) == (8, 201)


def test_the_masters_state_and_plans_on_a_full_disk_name_the_file_and_the_state_still_loads(disk):
    """Through the path a client's request takes (`Master.handle`, its changes kept by the
    server's `Keeper` before the reply): the verb fails, naming the file; nothing it changed is
    lost, and the next write once there is space again keeps it."""
    filler = Filler(disk)
    conf = cluster_conf({"storm.local.dir": str(disk), "squall.secret": "s" * 32})
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    b.set_bolt("sink", AckBolt(), 1).shuffle_grouping("feed")
    topology = cloudpickle.dumps(b.create_topology())
    server = Keeper(Master(conf))
    server.request("submit", {"name": "t", "conf": {}, "topology": topology})
    nimbus = disk / "nimbus"

    filler.fill()
    with pytest.raises(DiskWriteError) as submit:
        server.request("submit", {"name": "u", "conf": {}, "topology": topology})
    with pytest.raises(DiskWriteError) as deactivate:
        server.request("deactivate", {"name": "t"})
    filler.free()

    [plan] = [p for p in nimbus.iterdir() if p.name.startswith(".u-") or p.name.startswith("u-")] or [None]
    assert plan is None  # the plan that could not be written left nothing behind
    says_what_and_where(str(submit.value), Path(submit.value.filename), "the plan of topology u-", "storm.local.dir")
    says_what_and_where(str(deactivate.value), nimbus / "state.json", "the master's state", "storm.local.dir",
                        "state.json as last written is intact")
    assert [(t["name"], t["status"]) for t in Master(conf).op_list()] == [("t", "ACTIVE")]  # as last written
    server.request("debug", {"name": "t", "component": None, "enable": True, "pct": 5})  # space again: kept
    again = Master(conf)
    assert [(t["name"], t["status"]) for t in again.op_list()] == [("t", "INACTIVE")]  # the deactivation too
    assert again.topologies["t"].debug[again.storm_id_of("t")]["enable"] is True


def test_a_submit_whose_state_cannot_be_saved_is_not_run(tmp_path, monkeypatch):
    m = Master(cluster_conf({"storm.local.dir": str(tmp_path), "squall.secret": "s" * 32}))
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)

    def full(*_):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr("squall._private.os.replace", full)  # the plan's write and the state's
    with pytest.raises(DiskWriteError):
        Keeper(m).request("submit", {"name": "t", "conf": {}, "topology": cloudpickle.dumps(b.create_topology())})
    assert m.op_list() == [] and "t" not in m.topologies


@pytest.mark.parametrize("code, says, todo", [
    (errno.EDQUOT, "disk quota is used up (EDQUOT)", "have the quota raised"),
    (errno.EROFS, "the file system is read-only (EROFS)", "remount the file system that holds /d read-write"),
    (errno.EACCES, "permission denied (EACCES)", "write to /d"),
    (errno.EIO, "an I/O error: the device may be failing (EIO)", "check the device that holds /d"),
    (errno.ENAMETOOLONG, "File name too long (ENAMETOOLONG)", "fix the cause"),
])
def test_each_cause_is_named_with_what_to_do(code, says, todo):
    message = disk_error_message(code, os.strerror(code), "/d/f", Kept("the state of x", "storm.local.dir"), True)
    assert message.startswith("cannot write /d/f (the state of x): ") and says in message and todo in message
    assert "f as last written is intact" in message and "point storm.local.dir at" in message


def test_a_secret_that_cannot_be_written_is_not_left_empty(disk):
    from squall._secret import load_or_create_secret
    filler = Filler(disk)
    filler.fill()
    with pytest.raises(DiskWriteError, match=r"the cluster's secret.*no space is left"):
        load_or_create_secret({"storm.local.dir": str(disk)})
    filler.free()
    assert not (disk / "secret").exists()
    assert len(load_or_create_secret({"storm.local.dir": str(disk)})) == 64


def test_a_write_whose_rename_fails_leaves_no_temporary_file(tmp_path, monkeypatch):
    # a rename can fail too (ENOSPC for a new directory entry, EIO): the temporary file, which
    # holds all the new data (a state, a plan, the secret), must not stay beside the old one
    from squall._private import write_private
    target = tmp_path / "state" / "current"
    write_private(target, b"old", durable=True)

    def full(*_):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr("squall._private.os.replace", full)
    with pytest.raises(DiskWriteError, match="no space is left"):
        write_private(target, b"new", durable=True)
    assert sorted(p.name for p in target.parent.iterdir()) == ["current"]
    assert target.read_bytes() == b"old"
