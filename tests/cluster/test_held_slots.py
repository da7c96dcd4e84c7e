"""The supervisor's slots while no master answers (`squall.cluster.held_slots`), driven round by
round with a fake launcher, a fake master and a simulated clock: a held launch's worker that ends
is started again under the same launch with the master's delays (`crash_backoff` after a crash,
`launch_backoff` after a failed start, given up after ``squall.worker.max.launch.attempts``); a
master that answers again and gave the slot another launch wins; the held launches survive a
restart of the supervisor in a sealed file, and a file not sealed under the cluster's secret is
ignored, named."""

import logging

import pytest

from squall._errors import RpcError, SquallError
from squall._nimbus import Launch, MasterAddress, SyncReply, WorkerExit
from squall.cluster.launcher import Launcher
from squall.cluster.local_assignment import (
    LOCAL_ASSIGNMENTS_FILE,
    SUPERVISOR_ID_FILE,
    HeldSlot,
    LocalAssignments,
    SupervisorIdFile,
)
from squall.cluster.supervisor import Supervisor
from squall.worker.agent import EXIT_CANNOT_START

from ..test_disk_full import Filler, disk  # noqa: F401 (a small tmpfs to fill: the fixture, shared)

SECRET = b"held-slots-test-secret-0123456789"
TOPO = "t-1-1"


class FakeLauncher(Launcher):
    """Records every start (``started``: port, launch id, resumes); the test ends workers."""

    host = "h"
    resumes = True

    def __init__(self, ports=(1, 2)):
        self.ports = list(ports)
        self.procs: dict[int, Launch] = {}
        self.ended: list[WorkerExit] = []
        self.started: list[tuple[int, int, int]] = []

    def slots(self):
        return list(self.ports)

    def start(self, port, launch):
        self.procs[port] = launch
        self.started.append((port, launch.launch_id, 0))

    def resume(self, port, launch, resumes):
        self.procs[port] = launch
        self.started.append((port, launch.launch_id, resumes))
        return True

    def stop(self, port):
        self.procs.pop(port, None)

    def running(self):
        return dict(self.procs)

    def exits(self):
        out, self.ended = self.ended, []
        return out

    def end(self, port, status=-9):
        launch = self.procs.pop(port)
        self.ended.append(WorkerExit(launch.storm_id, f"h:{port}", launch.launch_id, status,
                                     status != EXIT_CANNOT_START, ""))


class FakeMaster:
    """A master for `Supervisor.sync`: ``slots`` (port -> launch id of TOPO) while ``up``."""

    passes_records = True

    def __init__(self):
        self.up = True
        self.slots = {1: 1, 2: 1}
        self.syncs = []

    def call(self, op, **args):
        assert op == "supervisor_sync"
        if not self.up:
            raise RpcError("cannot reach 127.0.0.1:1: Connection refused")
        self.syncs.append(args["sync"])
        return SyncReply({str(p): Launch(TOPO, "t", lid) for p, lid in self.slots.items()}, MasterAddress("m", 1))


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _supervisor(tmp_path, launcher=None, master=None, **conf):
    launcher = launcher or FakeLauncher()
    master = master or FakeMaster()
    clock = Clock()
    sup = Supervisor({"supervisor.monitor.frequency.secs": 1, **conf}, launcher, master, "sup-1",
                     local=LocalAssignments(tmp_path, SECRET))
    sup.held.clock = clock
    return sup, launcher, master, clock


def test_a_crashed_worker_is_started_again_under_its_launch_with_the_masters_crash_delays(tmp_path):
    sup, launcher, master, clock = _supervisor(tmp_path)
    assert sup.sync()
    assert launcher.started == [(1, 1, 0), (2, 1, 0)]
    master.up = False
    launcher.end(1)
    assert not sup.sync()
    assert launcher.started[-1] == (1, 1, 1)  # the first crash: at once, same launch, first resume
    clock.now += 5  # a crash soon after the start: 1 s, then 2 s
    launcher.end(1)
    sup.sync()
    assert launcher.started[-1] == (1, 1, 1) and 1 not in launcher.running()
    clock.now += 0.9
    sup.sync()
    assert 1 not in launcher.running()
    clock.now += 0.2
    sup.sync()
    assert launcher.started[-1] == (1, 1, 2)
    clock.now += 1
    launcher.end(1)
    sup.sync()
    clock.now += 1.9
    sup.sync()
    assert 1 not in launcher.running()
    clock.now += 0.2
    sup.sync()
    assert launcher.started[-1] == (1, 1, 3)
    clock.now += 61  # a steady run: the next crash restarts at once again
    launcher.end(1)
    sup.sync()
    assert launcher.started[-1] == (1, 1, 4)
    assert sup.exits == []  # restarted here: nothing for the master to undo
    master.up = True
    assert sup.sync()
    assert master.syncs[-1].exits == () and {(r.port, r.launch_id) for r in master.syncs[-1].running} == {(1, 1), (2, 1)}
    assert launcher.started[-1] == (1, 1, 4)  # the master's launch is the one running: kept


def test_failed_starts_wait_1_2_4_s_and_are_given_up_to_the_master_after_the_limit(tmp_path):
    sup, launcher, master, clock = _supervisor(tmp_path, **{"squall.worker.max.launch.attempts": 3})
    sup.sync()
    master.up = False
    launcher.end(2, EXIT_CANNOT_START)
    sup.sync()
    assert 2 not in launcher.running()
    clock.now += 1.0
    sup.sync()
    assert launcher.started[-1] == (2, 1, 1)
    launcher.end(2, EXIT_CANNOT_START)
    sup.sync()
    clock.now += 1.9
    sup.sync()
    assert 2 not in launcher.running()
    clock.now += 0.1
    sup.sync()
    assert launcher.started[-1] == (2, 1, 2)
    launcher.end(2, EXIT_CANNOT_START)  # the third failed start in a row: given up
    sup.sync()
    clock.now += 100
    sup.sync()
    assert 2 not in launcher.running()
    assert [(e.slot, e.status) for e in sup.exits] == [("h:2", EXIT_CANNOT_START)]  # for the master to hear
    master.up = True
    master.slots = {1: 1, 2: 2}  # the master relaunches it
    sup.sync()
    assert master.syncs[-1].exits[0].slot == "h:2" and launcher.started[-1] == (2, 2, 0)


def test_a_master_that_reassigned_a_slot_meanwhile_wins(tmp_path):
    sup, launcher, master, _clock = _supervisor(tmp_path)
    sup.sync()
    master.up = False
    launcher.end(1)
    sup.sync()
    assert launcher.running()[1].launch_id == 1
    master.up = True
    master.slots = {2: 1}  # port 1's executors moved elsewhere meanwhile
    sup.sync()
    assert set(launcher.running()) == {2}
    master.slots = {1: 3, 2: 1}  # and back, under a newer launch
    sup.sync()
    assert launcher.running()[1].launch_id == 3 and launcher.started[-1] == (1, 3, 0)
    assert LocalAssignments(tmp_path, SECRET).load([1, 2]) == {1: HeldSlot(Launch(TOPO, "t", 3)),
                                                              2: HeldSlot(Launch(TOPO, "t", 1))}


def test_a_supervisor_started_while_no_master_answers_starts_what_it_held(tmp_path):
    sup, launcher, master, _clock = _supervisor(tmp_path)
    sup.sync()
    master.up = False
    launcher.end(1)
    sup.sync()  # resumed once: counted in the file before the start
    again, launcher2, _, _ = _supervisor(tmp_path, master=master)
    again.sync()
    # each resume numbers its messages above the last one's: 2 after 1 on port 1, 1 on port 2
    assert sorted(launcher2.started) == [(1, 1, 2), (2, 1, 1)]


def test_a_local_assignment_file_not_sealed_under_the_clusters_secret_is_ignored(tmp_path, caplog):
    LocalAssignments(tmp_path, b"another-clusters-secret-0123456789").save({1: HeldSlot(Launch(TOPO, "t", 7))})
    with caplog.at_level(logging.WARNING, "squall.supervisor"):
        sup, launcher, _master, _clock = _supervisor(tmp_path, master=FakeMaster())
    assert sup.held.held == {}
    assert f"ignored {tmp_path / LOCAL_ASSIGNMENTS_FILE}: not a local assignment this cluster's supervisor wrote" \
        in caplog.text
    sup.master.up = False
    sup.sync()
    assert launcher.started == []


def test_a_launcher_that_cannot_start_a_worker_without_its_master_leaves_its_exits_to_the_master(tmp_path):
    """The Spark and LocalCluster launchers cannot resume: their workers' exits wait for the
    master, as before; a process worker that kept no assignment cannot either, and its exit
    goes to the master too."""
    class Cannot(FakeLauncher):
        resumes = False
    sup, launcher, master, _clock = _supervisor(tmp_path, launcher=Cannot())
    sup.sync()
    master.up = False
    launcher.end(1)
    sup.sync()
    assert [e.slot for e in sup.exits] == ["h:1"] and 1 not in launcher.running()

    class NoCopy(FakeLauncher):
        def resume(self, port, launch, resumes):
            return False
    sup, launcher, master, _clock = _supervisor(tmp_path / "b", launcher=NoCopy())
    sup.sync()
    master.up = False
    launcher.end(2)
    sup.sync()
    sup.sync()
    assert [e.slot for e in sup.exits] == ["h:2"] and 2 not in launcher.running()
    master.up = True
    sup.sync()
    assert [e.slot for e in master.syncs[-1].exits] == ["h:2"]


def test_the_supervisor_id_is_made_once_and_kept_sealed_for_its_host(tmp_path, caplog):
    """Storm's LocalState ``supervisor-id``: the first start makes the id and keeps it; every
    later one reads it back. A file not sealed under the cluster's secret, or holding what is no
    id, is ignored, naming it (and replaced by a new id); one made for another host (a copied
    directory) is not reused."""
    made = iter(["first-id", "second-id", "third-id", "fourth-id"])
    ids = SupervisorIdFile(tmp_path, SECRET)
    assert ids.load_or_create("10.0.0.1", lambda: next(made)) == "first-id"
    assert SupervisorIdFile(tmp_path, SECRET).load_or_create("10.0.0.1", lambda: next(made)) == "first-id"
    assert (tmp_path / SUPERVISOR_ID_FILE).stat().st_mode & 0o077 == 0
    assert b"first-id" in (tmp_path / SUPERVISOR_ID_FILE).read_bytes()  # sealed, not encrypted

    SupervisorIdFile(tmp_path, b"another-clusters-secret-0123456789").save("forged-id", "10.0.0.1")
    with caplog.at_level(logging.WARNING, "squall.supervisor"):
        assert ids.load_or_create("10.0.0.1", lambda: next(made)) == "second-id"
    assert f"ignored {tmp_path / SUPERVISOR_ID_FILE}: not a supervisor id this cluster's supervisor wrote" \
        in caplog.text
    assert ids.load("10.0.0.1") == "second-id"

    from squall._sealed import seal
    (tmp_path / SUPERVISOR_ID_FILE).write_bytes(seal(SECRET, b"supervisor-id", b'{"id": "a b", "host": "10.0.0.1"}'))
    assert ids.load("10.0.0.1") is None  # sealed by this cluster, but no id squall makes

    ids.save("second-id", "10.0.0.1")
    assert ids.load_or_create("10.0.0.2", lambda: next(made)) == "third-id"
    assert ids.load("10.0.0.2") == "third-id"


def test_a_held_port_whose_kept_copy_is_of_another_launch_is_held_for_the_master_not_started_to_be_refused(
        tmp_path, caplog):
    """The master gave port 1 launch 2, and its worker ended before it kept that launch's copy:
    ``assignment-1`` is still launch 1's. The worker would refuse it and exit; with
    ``squall.worker.max.launch.attempts`` unset, the supervisor started such a doomed process
    every 30 s until a master answered. Now the process launcher checks the copy first (as the
    worker does, `AssignmentCopy.load`) and holds the slot for the master; a copy of the held
    launch is started, and one not sealed under the cluster's secret is refused too."""
    from squall._nimbus import Assignment
    from squall.cluster.held_slots import HeldSlots
    from squall.cluster.local_assignment import AssignmentCopy, copy_path
    from squall.cluster.process_launcher import ProcessLauncher

    class NoProcesses(ProcessLauncher):
        """The process launcher, recording each process it would start instead of starting it."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.spawned = []

        def _start(self, port, launch, resumes):
            self.spawned.append((port, launch.launch_id, resumes))

    def keep(secret, launch_id):
        copy = Assignment(b"plan", [0], {}, 1, 0, "e", {"h:1": launch_id}, launch_id, True)
        AssignmentCopy(copy_path(launcher.dir, 1), secret).save(TOPO, "h:1", copy)

    conf = {"storm.local.dir": str(tmp_path), "squall.secret": SECRET.decode(), "supervisor.slots.ports": [1]}
    launcher = NoProcesses(conf, "h", ("127.0.0.1", 1), tmp_path / "supervisor")
    held = HeldSlots(launcher, None, None, clock=Clock())
    held.held = {1: HeldSlot(Launch(TOPO, "t", 2), 0)}
    keep(SECRET, 1)
    with caplog.at_level(logging.WARNING, "squall.supervisor"):
        assert held.without_master([], healthy=True) == []
        assert held.without_master([], healthy=True) == []
    assert launcher.spawned == []
    assert f"{copy_path(launcher.dir, 1)} is the assignment of {TOPO} on h:1 launch 1, not of {TOPO} on h:1 " \
        "launch 2" in caplog.text

    keep(b"another-clusters-secret-0123456789", 2)
    held = HeldSlots(launcher, None, None, clock=Clock())
    held.held = {1: HeldSlot(Launch(TOPO, "t", 2), 0)}
    held.without_master([], healthy=True)
    assert launcher.spawned == []

    keep(SECRET, 2)
    held = HeldSlots(launcher, None, None, clock=Clock())
    held.held = {1: HeldSlot(Launch(TOPO, "t", 2), 0)}
    held.without_master([], healthy=True)
    assert launcher.spawned == [(1, 2, 1)]


def test_two_supervisors_of_one_machine_never_share_an_id_even_when_one_directory_is_a_copy_of_the_other(
        tmp_path, caplog):
    """Two supervisors on one machine, each with its own ``storm.local.dir``, both binding
    loopback: the second directory made by copying the first (its ``supervisor-id`` with it).
    The file's host is the same, so on main the copy registered under the first supervisor's
    id, and a master took the two for one supervisor. Now the file says which directory it was
    made in: the copy gets an id of its own, kept for its next start; the first keeps its id;
    and neither file holds the secret."""
    import shutil
    made = iter(["first-id", "second-id", "third-id"])
    one, two = tmp_path / "a" / "supervisor", tmp_path / "b" / "supervisor"
    one.mkdir(parents=True)
    assert SupervisorIdFile(one, SECRET).load_or_create("127.0.0.1", lambda: next(made)) == "first-id"
    shutil.copytree(one, two)
    with caplog.at_level(logging.WARNING, "squall.supervisor"):
        assert SupervisorIdFile(two, SECRET).load_or_create("127.0.0.1", lambda: next(made)) == "second-id"
    assert f"{two / SUPERVISOR_ID_FILE} holds the supervisor id made in {one.resolve()}" in caplog.text
    assert SupervisorIdFile(two, SECRET).load("127.0.0.1") == "second-id"
    assert SupervisorIdFile(one, SECRET).load("127.0.0.1") == "first-id"
    # named another way (a relative path, a link), the directory is the same one: the same id
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert SupervisorIdFile(tmp_path / "link" / "supervisor", SECRET).load("127.0.0.1") == "first-id"
    for d in (one, two):
        assert SECRET not in (d / SUPERVISOR_ID_FILE).read_bytes()


def test_a_copy_is_discarded_only_for_its_own_launch(tmp_path):
    """`AssignmentCopy.discard` (a worker the master told to stop): the copy of that launch goes;
    a copy of another launch of the slot, or a file not sealed under the cluster's secret, stays."""
    from squall._nimbus import Assignment
    from squall.cluster.local_assignment import AssignmentCopy

    path = tmp_path / "assignment-1"
    copy = AssignmentCopy(path, SECRET)
    copy.save(TOPO, "h:1", Assignment(b"plan", [0], {}, 1, 0, "e", {"h:1": 2}, 2, True))
    copy.discard(TOPO, "h:1", 1)
    copy.discard("other-1-1", "h:1", 2)
    copy.discard(TOPO, "h:2", 2)
    assert copy.load(TOPO, "h:1", 2).launch_id == 2
    copy.discard(TOPO, "h:1", 2)
    assert not path.exists()
    copy.discard(TOPO, "h:1", 2)  # nothing kept: nothing to do
    path.write_bytes(b"squall-sealed/1 worker-assignment\n" + b"\0" * 32 + b"forged")
    copy.discard(TOPO, "h:1", 2)
    assert path.exists()



def test_a_copy_keeps_the_namespaces_the_master_told_its_launch_for_a_restart_without_it(tmp_path):
    """The master's answers for the keys it writes once (a stateful task's namespace,
    ``_squall_task/...``) that a launch got are kept in its sealed copy, and its local restart
    serves them from there without a master (`MasterBackend` asks the master for nothing it knows):
    before, the restarted worker's stateful tasks asked the master and it crash-looped. A key
    never answered still goes to the master; another key is never kept (its value may change);
    a copy whose answers are not what a worker keeps is refused like any forged copy."""
    import msgpack

    from squall._nimbus import Assignment
    from squall._transactional import KeptAnswers, MasterBackend, StoredKey
    from squall.cluster.local_assignment import AssignmentCopy

    class Master:  # the link to the master: a dict while it answers, then unreachable
        def __init__(self):
            self.kept, self.up, self.calls = {}, True, []

        def call(self, op, topology, key, value=None, **caller):
            self.calls.append((op, key))
            if not self.up:
                raise RpcError("cannot reach the master")
            if op == "trident_state_put":
                self.kept[key] = value
                return None
            return self.kept.get(key)
    copy = AssignmentCopy(tmp_path / "assignment-1", SECRET)
    a = Assignment(b"plan", [0], {}, 1, 0, "e", {"h:1": 2}, 2, True)
    master = Master()
    first = KeptAnswers(on_learned=lambda answers: copy.save(TOPO, "h:1", a, answers))
    backend = MasterBackend(master, retries=0, sleep=lambda s: None, answers=first)
    ns = msgpack.packb("count-5")
    assert backend.get("counted", "_squall_task/count/2/0") is None
    backend.put("counted", "_squall_task/count/2/0", ns)  # as state_namespace does on a first start
    backend.put("counted", "checkpoint/mark", b"41")  # changes: never kept
    master.kept["_squall_task/count/2/1"] = msgpack.packb("count-4")
    assert backend.get("counted", "_squall_task/count/2/1") == msgpack.packb("count-4")
    assert master.kept["_squall_task/count/2/0"] == ns
    kept = copy.load_answers(TOPO, "h:1", 2)
    assert kept == {StoredKey("counted", "_squall_task/count/2/0"): ns,
                    StoredKey("counted", "_squall_task/count/2/1"): msgpack.packb("count-4")}

    master.up, master.calls = False, []  # the restart: no master answers
    again = KeptAnswers()
    again.restore(copy.load_answers(TOPO, "h:1", 2))
    resumed = MasterBackend(master, retries=0, sleep=lambda s: None, answers=again)
    assert resumed.get("counted", "_squall_task/count/2/0") == ns
    assert resumed.get("counted", "_squall_task/count/2/1") == msgpack.packb("count-4")
    assert master.calls == []
    with pytest.raises(RpcError):  # never answered to this launch: only the master knows
        resumed.get("counted", "_squall_task/count/3/0")
    with pytest.raises(RpcError):
        resumed.get("counted", "checkpoint/mark")

    copy.save(TOPO, "h:1", a, {StoredKey("counted", "checkpoint/mark"): b"41"})  # not a written-once key
    with pytest.raises(SquallError, match="holds no assignment this version of squall reads"):
        copy.load_answers(TOPO, "h:1", 2)


def test_a_local_assignment_that_cannot_be_kept_leaves_no_stale_one_for_a_restart_without_a_master(disk, caplog):  # noqa: F811
    """The supervisor's directory fills up (a 256 KiB tmpfs, filled) just as the master kills the
    topology: the new local assignment (nothing) cannot be written. The file on disk must not go
    on naming the killed launches, or a supervisor restarted while no master answers starts them
    again once space is freed (before: both ports, launch 1, local restart 1). It is removed when
    its replacement cannot be written (a full disk still removes a file), and written again at
    the next sync once there is room, though the assignment has not changed since."""
    filler = Filler(disk)
    sup, launcher, master, _ = _supervisor(disk)
    assert sup.sync() and launcher.started == [(1, 1, 0), (2, 1, 0)]
    store = LocalAssignments(disk, SECRET)
    assert set(store.load([1, 2])) == {1, 2}

    filler.fill()
    master.slots = {}  # killed
    with caplog.at_level(logging.ERROR, "squall.supervisor"):
        assert sup.sync()
    assert launcher.running() == {}
    assert f"could not keep the local assignment: cannot write {store.path}" in caplog.text
    assert store.load([1, 2]) == {}, "the killed launches are still held on disk"

    filler.free()  # the operator frees space and restarts the supervisor, while no master answers
    master.up = False
    again, relauncher, _, _ = _supervisor(disk, master=master)
    assert not again.sync() and relauncher.started == [], "the killed launches were started again"

    master.up = True
    master.slots = {1: 3}
    assert sup.sync()
    master.slots = {1: 3, 2: 3}
    filler.fill()
    assert sup.sync()  # port 2 not kept: port 1's launch 3 was
    assert {p: h.launch.launch_id for p, h in store.load([1, 2]).items()} == {}
    filler.free()
    assert sup.sync()  # the same assignment, kept now that there is room
    assert {p: h.launch.launch_id for p, h in store.load([1, 2]).items()} == {1: 3, 2: 3}
