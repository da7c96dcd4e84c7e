"""Which copy of a file state is the latest (squall.state.file's `LastWrite`): two machines are
two state directories here, and the master's transactional state a `MemoryBackend` both reach.
A copy that is missing, or behind the last write the master recorded, is refused while the same
run wrote that write (the task moved); a resubmitted topology whose task finds no copy starts
afresh; a copy at or past the record is taken."""

import logging

import pytest

from squall._transactional import MemoryBackend
from squall.state import StateError, StateHome
from squall.state.file import FileKeyValueStateProvider, FileStore

KEY = b"k" * 32
CONF = {"topology.name": "wc"}


class Ctx:
    """A task's context on ``machine`` (its own state directory) of run ``storm_id``."""

    def __init__(self, root, machine, storm_id, backend):
        self.state_home = StateHome(directory=root, key=KEY, machine=machine)
        self.transactional_home = backend
        self._storm_id = storm_id

    def get_this_component_id(self):
        return "count"

    def get_this_task_id(self):
        return 3

    def get_storm_id(self):
        return self._storm_id


@pytest.fixture
def machines(tmp_path):
    master = MemoryBackend()
    return lambda name, storm_id="wc-1-1": Ctx(tmp_path / name, name, storm_id, master)


def commit(ctx, txid, **entries):
    state = FileKeyValueStateProvider().new_state("count-3", CONF, ctx)
    for k, v in entries.items():
        state.put(k, v)
    state.prepare_commit(txid)
    state.commit(txid)
    return state


def test_a_task_moved_to_a_machine_without_its_state_is_refused_naming_both_machines(machines):
    commit(machines("m0"), 1, a=1)
    with pytest.raises(StateError) as e:
        FileKeyValueStateProvider().new_state("count-3", CONF, machines("m1"))
    msg = str(e.value)
    assert "component [count] task 3" in msg and "another machine (m0," in msg and "this machine (m1)" in msg
    assert "has no copy" in msg and "storm.local.dir" in msg and "Redis" in msg


def test_a_task_moved_back_to_an_older_copy_is_refused_and_the_latest_goes_on(machines):
    commit(machines("m0"), 1, a=1)
    # the task ran on m1 from a copy of m0's (say the directory was copied over), and committed there
    (machines("m1").state_home.directory / "wc").mkdir(parents=True)
    import shutil
    shutil.copytree(machines("m0").state_home.directory / "wc" / "ns-count-3",
                    machines("m1").state_home.directory / "wc" / "ns-count-3")
    commit(machines("m1"), 2, a=2)
    with pytest.raises(StateError, match="holds an older copy"):
        FileKeyValueStateProvider().new_state("count-3", CONF, machines("m0"))
    state = commit(machines("m1"), 3, b=1)  # where the latest is, it goes on
    assert dict(state.committed()) == {"a": 2, "b": 1}


def test_a_resubmitted_topology_whose_task_finds_no_copy_is_refused_unless_told_to_start_afresh(machines, caplog):
    """A submission again (with another topology.workers, say: its task ids are kept by index,
    docs/state.md) may place a task on a machine without its state: refused as a moved task is,
    naming the machine that has it (it was started afresh with a warning: every update lost).
    Its states deleted on purpose, the provider's "start_afresh" lets it start from nothing."""
    commit(machines("m0"), 1, a=1)
    with pytest.raises(StateError, match=r"last committed on another machine \(m0.*placed this task elsewhere.*"
                                         r"\"start_afresh\": true"):
        FileKeyValueStateProvider().new_state("count-3", CONF, machines("m1", "wc-2-2"))
    assert dict(FileKeyValueStateProvider().new_state("count-3", CONF, machines("m0", "wc-2-2")).committed()) == {"a": 1}
    afresh = {**CONF, "topology.state.provider.config": {"start_afresh": True}}
    with caplog.at_level(logging.WARNING, logger="squall.state.file"):
        state = FileKeyValueStateProvider().new_state("count-3", afresh, machines("m1", "wc-3-3"))
    assert dict(state.committed()) == {}
    assert "starting it afresh" in caplog.text and "m0" in caplog.text
    with pytest.raises(StateError, match="start_afresh.*must be true or false, got 'yes'"):
        FileKeyValueStateProvider().new_state(
            "count-3", {**CONF, "topology.state.provider.config": {"start_afresh": "yes"}}, machines("m1", "wc-3-3"))


def test_an_older_copy_is_refused_after_a_resubmission_too(machines):
    commit(machines("m0"), 1, a=1)
    commit(machines("m0"), 2, a=2)
    import shutil
    shutil.copytree(machines("m0").state_home.directory, machines("m1").state_home.directory)
    commit(machines("m0"), 3, a=3)
    with pytest.raises(StateError, match="holds an older copy"):
        FileKeyValueStateProvider().new_state("count-3", CONF, machines("m1", "wc-2-2"))
    state = FileKeyValueStateProvider().new_state("count-3", CONF, machines("m0", "wc-2-2"))
    assert dict(state.committed()) == {"a": 3}


def test_a_copy_past_a_record_that_did_not_reach_the_master_is_taken(machines, tmp_path):
    ctx = machines("m0")
    commit(ctx, 1, a=1)

    class Down(MemoryBackend):
        def put(self, topology, key, blob):
            raise ConnectionError("master down")
    down = Ctx(tmp_path / "m0", "m0", "wc-1-1", Down())
    commit(down, 2, a=2)  # on disk, not recorded
    assert dict(FileKeyValueStateProvider().new_state("count-3", CONF, ctx).committed()) == {"a": 2}
    # and a resubmission's own write whose record failed is past an earlier run's record
    commit(Ctx(tmp_path / "m0", "m0", "wc-2-2", Down()), 3, a=3)
    assert dict(FileKeyValueStateProvider().new_state("count-3", CONF, machines("m0", "wc-2-2")).committed()) == {"a": 3}


def test_one_shared_directory_is_the_latest_copy_wherever_the_task_runs(machines, tmp_path):
    shared = {**CONF, "topology.state.provider.config": {"directory": str(tmp_path / "nfs")}}
    for i, machine in enumerate(["m0", "m1", "m0"]):
        state = FileKeyValueStateProvider().new_state("count-3", shared, machines(machine))
        state.put("a", i)
        state.prepare_commit(i)
        state.commit(i)
    assert dict(FileKeyValueStateProvider().new_state("count-3", shared, machines("m1")).committed()) == {"a": 2}


def test_a_copy_written_before_lineages_were_kept_loads_and_is_then_written_with_one(machines):
    import msgpack

    from squall._sealed import seal
    ctx = machines("m0")
    d = ctx.state_home.directory / "wc" / "ns-count-3"
    d.mkdir(parents=True)
    # squall's earlier format: [1, txid, entries]
    (d / "committed").write_bytes(seal(KEY, b"state count-3 committed", msgpack.packb([1, 4, [[b"k", b"v"]]])))
    store = FileStore(d, "count-3", KEY)
    assert (store.commit_txid, store.committed, tuple(store.lineage)) == (4, {b"k": b"v"}, (None, 0))
    state = commit(ctx, 5, a=1)
    assert dict(state.committed())["a"] == 1
    assert tuple(FileStore(d, "count-3", KEY).lineage) == ("wc-1-1", 1)


def test_a_copy_behind_a_write_made_on_its_own_machine_goes_on_with_a_warning(machines, caplog):
    """No other copy to prefer: the directory was removed, or a crash lost a write that had not
    reached the disk (the file store does not fsync)."""
    import shutil
    ctx = machines("m0")
    commit(ctx, 1, a=1)
    d = ctx.state_home.directory / "wc" / "ns-count-3"
    shutil.copytree(d, d.with_name("saved"))
    commit(ctx, 2, a=2)
    shutil.rmtree(d)
    d.with_name("saved").rename(d)  # write 2 lost
    with caplog.at_level(logging.WARNING, logger="squall.state.file"):
        state = FileKeyValueStateProvider().new_state("count-3", CONF, machines("m0"))
    assert dict(state.committed()) == {"a": 1}
    assert "at write 1" in caplog.text and "going on from it" in caplog.text
    shutil.rmtree(d)
    assert dict(FileKeyValueStateProvider().new_state("count-3", CONF, machines("m0")).committed()) == {}


def test_a_commit_does_not_wait_for_a_master_that_does_not_answer(tmp_path):
    """On the process and Spark hosts (the default provider's store there) each commit is
    recorded with the master through the worker's link. A master away (a restart, a failover, a
    partition) is tried again for seconds (storm.zookeeper.retry.times x interval) on the
    worker's one link: recorded inside the commit, every stateful task's commit, and every save
    of the checkpoint spout, held its worker's loop that long, and the topology stalled (its
    tuples timing out) for as long as the master was away. The record goes on a thread of its
    own (as the checkpoint spout's and the Trident coordinator's saves do): the commit returns."""
    import threading

    from squall._errors import RpcError
    from squall._transactional import MasterBackend

    from ..conftest import wait_until

    away = threading.Event()  # set: the master answers again
    puts = []

    class Link:
        """The master over the network: its trident_state_put does not come back while away."""

        def __init__(self):
            self.data = {}

        def call(self, op, **args):
            if op == "trident_state_get":
                return self.data.get((args["topology"], args["key"]))
            if op == "trident_state_put":
                if not away.is_set():
                    raise RpcError("connection refused")
                self.data[(args["topology"], args["key"])] = args["value"]
                puts.append(args["key"])
                return None
            raise AssertionError(op)

    link = Link()
    # the retries' waits last until the master is back (seconds each, as configured)
    backend = MasterBackend(link, retries=5, interval=1.0, sleep=lambda secs: away.wait(30))
    ctx = Ctx(tmp_path / "m0", "m0", "wc-1-1", backend)
    state = FileKeyValueStateProvider().new_state("count-3", CONF, ctx)
    state.put("a", 1)
    done = threading.Event()

    def checkpoint():
        state.prepare_commit(1)
        state.commit(1)
        done.set()
    worker = threading.Thread(target=checkpoint, daemon=True)
    worker.start()
    try:
        assert wait_until(done.is_set, 5), "the commit waited for the master"
        assert dict(FileKeyValueStateProvider().new_state("count-3", CONF, Ctx(
            tmp_path / "m0", "m0", "wc-1-1", MemoryBackend())).committed()) == {"a": 1}
    finally:
        away.set()
        worker.join(30)
    # once the master answers, the write is recorded: a copy elsewhere is refused
    assert wait_until(lambda: puts, 10)
    with pytest.raises(StateError, match="has no copy"):
        FileKeyValueStateProvider().new_state("count-3", CONF, Ctx(tmp_path / "m1", "m1", "wc-1-1", backend))


def test_a_commit_is_on_the_disk_before_it_returns(machines, monkeypatch):
    """Once a commit returns, its tuples are acked and never replayed: the committed file and its
    directory are fsynced first, so a machine's crash cannot lose it (before, the store did not
    fsync, and a copy behind its own machine's record, writes a crash lost, was taken with a
    warning: acked updates lost)."""
    import os

    import squall._private as private
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)
    monkeypatch.setattr(private.os, "fsync", fsync)
    state = FileKeyValueStateProvider().new_state("count-3", CONF, machines("m0"))
    state.put("a", 1)
    state.prepare_commit(1)
    # the prepare too: once acked, the spout saves COMMITTING, and a restart commits what it holds
    assert any(p.endswith(".tmp") and ".prepared." in p for p in synced), synced
    synced.clear()
    state.commit(1)
    directory = os.path.dirname(next(p for p in synced if p.endswith(".tmp")))
    assert any(p.endswith(".tmp") and ".committed." in p for p in synced), synced  # the file, before its rename
    assert directory in synced, synced  # and the directory that holds the rename


def test_a_launch_restarted_while_no_master_answers_goes_on_from_the_copy_it_checked(tmp_path):
    """A worker launch checks each file state against the master's record of its last write once
    (`KeptAnswers.note_checked`, kept in its sealed copy of the assignment): its local restart
    while no master answers goes on from the copy here without the record (before, it could not
    read it and crash-looped until a master answered). A launch whose check refused the copy
    (the task moved here, the latest copy elsewhere) noted nothing: restarted without a master it
    is refused still, and says it needs the master."""
    from squall._errors import RpcError
    from squall._transactional import KeptAnswers, MasterBackend

    class Link:
        """The master in this process (records go as calls); ``up`` False: unreachable."""

        passes_records = True

        def __init__(self):
            self.data, self.up = {}, True

        def call(self, op, **args):
            if not self.up:
                raise RpcError("connection refused")
            if op == "trident_state_get":
                return self.data.get((args["topology"], args["key"]))
            assert op == "trident_state_put"
            self.data[(args["topology"], args["key"])] = args["value"]
            return None

    link = Link()

    def launch(machine, kept=None):  # a worker launch's backend; ``kept``: the answers its copy holds
        answers = KeptAnswers()
        answers.restore(kept or {})
        return Ctx(tmp_path / machine, machine, "wc-1-1", MasterBackend(link, retries=0, answers=answers))
    on_m0 = launch("m0")
    commit(on_m0, 1, a=1)
    moved = launch("m1")
    with pytest.raises(StateError, match="has no copy"):
        FileKeyValueStateProvider().new_state("count-3", CONF, moved)
    again = launch("m0")  # the launch that runs it now, on m0: checked, and commits on
    commit(again, 2, a=2)

    link.up = False  # both launches restarted by their supervisors, no master answering
    state = FileKeyValueStateProvider().new_state("count-3", CONF, launch("m0", again.transactional_home.answers.all()))
    assert dict(state.committed()) == {"a": 2}
    with pytest.raises(StateError, match="has not checked it yet, so it needs the master"):
        FileKeyValueStateProvider().new_state("count-3", CONF, launch("m1", moved.transactional_home.answers.all()))
