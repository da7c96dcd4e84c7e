"""The master's store seam (`squall.cluster.store`): a master hands its store the changes of its
state, and a master made again from that store resumes them; all on a `SimulatedClock` and an
in-memory store, so nothing here waits or writes a file but the directory store's own test."""

import errno
import hashlib
import json
import os

import pytest

from squall._config import cluster_conf
from squall._errors import DiskWriteError, SquallError
from squall._sealed import seal
from squall.cluster.master import _PLAN, Master
from squall.cluster.server import MasterServer
from squall.cluster.store import (LocalDirStore, MemoryStore, PutPlan, PutSupervisors, PutTopology, PutTxState,
                                  RemovePlan, RemoveTopology, SetCounter, ZooKeeperStore)
from squall.engine.clock import SimulatedClock

from .served import served
from .test_master import _register, _topology

CONF = cluster_conf({"squall.secret": "store-test-secret-0123456789abcdef", "nimbus.task.timeout.secs": 1,
                     "nimbus.task.launch.secs": 2})


class _Recording(MemoryStore):
    """A `MemoryStore` that records each batch of changes it is handed, and fails while ``full``."""

    def __init__(self, secret):
        super().__init__(secret)
        self.batches = []
        self.full = False

    def apply(self, changes):
        changes = list(changes)
        if self.full:
            raise DiskWriteError(f"cannot write /nowhere/state.json: {os.strerror(errno.ENOSPC)}; "
                                 "state.json as last written is intact", errno.ENOSPC, "/nowhere/state.json")
        self.batches.append(changes)
        super().apply(changes)


def _store():
    return _Recording(MemoryStore.for_conf(CONF).secret)


def _launched(master, name):
    """Slot -> launch id of topology ``name``, as ``info`` shows them."""
    return {w["slot"]: w["launch_id"] for w in master.op_info(name=name)["workers"]}


def test_a_master_made_again_from_the_store_resumes_assignments_launch_ids_and_trident_state():
    clock = SimulatedClock(1000.0)
    store = _store()
    first = served(CONF, clock=clock, store=store)
    _register(first)
    storm_id = first.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    launches = _launched(first, "t")
    slot = sorted(launches)[0]
    first.op_trident_state_put(topology="t", key="coordinator/currtx", value=b"41", storm_id=storm_id, slot=slot,
                               launch_id=launches[slot])
    first.op_deactivate(name="t")

    clock.advance(30)
    again = served(CONF, clock=clock, store=store)  # the first one is gone; the store outlived it
    assert [(t["name"], t["id"], t["status"]) for t in again.op_list()] == [("t", storm_id, "INACTIVE")]
    assert _launched(again, "t") == launches  # its workers keep running: nothing relaunched
    assert again.op_trident_state_get(topology="t", key="coordinator/currtx") == b"41"
    # the workers get the launch timeout (2 s) to beat again, counted from the new master's
    # start; their supervisor syncs every second meanwhile
    clock.advance(1.5)
    _register(again)
    again.monitor()
    assert _launched(again, "t") == launches
    # storm ids stay unique: the counter was kept
    assert again.op_submit(name="u", conf={}, topology=_topology()).startswith("u-2-")


def test_an_operation_hands_the_store_only_what_it_changed():
    store = _store()
    m = served(CONF, clock=SimulatedClock(5.0), store=store)
    _register(m)
    storm_id = m.op_submit(name="t", conf={}, topology=_topology())
    m.op_submit(name="u", conf={}, topology=_topology())
    store.batches.clear()
    m.op_deactivate(name="t")
    [[change]] = store.batches
    assert isinstance(change, PutTopology) and (change.name, change.storm_id) == ("t", storm_id)
    assert change.record["status"] == "INACTIVE"
    store.batches.clear()
    m.op_deactivate(name="u")
    m.op_kill(name="t", wait_secs=0)
    kinds = [type(c) for batch in store.batches for c in batch]
    assert PutPlan not in kinds and SetCounter not in kinds
    assert RemovePlan in kinds and RemoveTopology in kinds
    assert "t" not in store.load().topologies and storm_id not in store.load().plans


def test_an_outcome_carries_exactly_the_changes_its_stimulus_made_and_its_server_keeps_them_once():
    """The master does no I/O: `Master.handle` and `Master.monitor` return an `Outcome` (the reply
    and the changes), the store is untouched until the server's `Keeper` hands it those changes,
    once each, and a read or a tick that changed nothing writes nothing."""
    clock = SimulatedClock(5.0)
    store = _store()
    m = Master(CONF, clock=clock, store=store)
    server = MasterServer(m).keeper  # what the server keeps each request's changes with
    server.request("supervisor_sync", {"supervisor_id": "s1", "host": "127.0.0.1", "ports": [7000]})
    store.batches.clear()

    submitted = m.handle("submit", {"name": "t", "conf": {}, "topology": _topology()})
    assert store.batches == [] and "t" not in store.load().topologies  # nothing written by the master
    storm_id = submitted.reply
    assert [type(c) for c in submitted.changes] == [PutPlan, SetCounter, PutTopology]
    plan, counter, record = submitted.changes
    assert (plan.storm_id, counter.counter, record.storm_id) == (storm_id, 1, storm_id) and submitted.submitted == "t"
    assert server.keep(submitted) == storm_id
    assert store.batches == [list(submitted.changes)]  # kept once, in order
    assert store.load().topologies["t"] == record.record

    listed = m.handle("list", {})
    assert listed.changes == () and server.keep(listed) == listed.reply and len(store.batches) == 1
    [slot] = m.topologies["t"].assignment
    launch = m.topologies["t"].launch_ids[slot]
    assert m.monitor().changes == ()  # nothing due yet: the tick writes nothing

    deactivated = m.handle("deactivate", {"name": "t"})
    [change] = deactivated.changes
    assert isinstance(change, PutTopology) and change.record["status"] == "INACTIVE"
    server.keep(deactivated)
    assert store.batches[1:] == [[change]]

    clock.advance(3)  # past nimbus.task.launch.secs (2): the silent worker is relaunched by the tick
    sync = {"supervisor_id": "s1", "host": "127.0.0.1", "ports": [7000]}
    assert m.handle("supervisor_sync", sync).changes == ()  # its supervisor is alive: nothing to keep
    ticked = m.monitor()
    [change] = ticked.changes
    assert change.record["slots"][slot]["launch_id"] == launch + 1
    server.keep(ticked)
    assert len(store.batches) == 3 and store.load().topologies["t"]["slots"][slot]["launch_id"] == launch + 1


def _submitted_then_full():
    """A served master whose topology ``t`` is kept, then a store that cannot write."""
    store = _store()
    m = served(CONF, clock=SimulatedClock(5.0), store=store)
    _register(m)
    m.op_submit(name="t", conf={}, topology=_topology())
    store.full = True
    return store, m


def test_a_store_that_cannot_write_fails_the_operation_and_gets_the_change_at_the_next_commit():
    """As with a full disk: a submission that cannot be kept is not run; a deactivation that
    cannot be kept raises, and is kept by the next write that succeeds."""
    store, m = _submitted_then_full()
    with pytest.raises(DiskWriteError):
        m.op_submit(name="u", conf={}, topology=_topology())
    assert [t["name"] for t in m.op_list()] == ["t"]
    with pytest.raises(DiskWriteError, match="state.json as last written is intact"):
        m.op_deactivate(name="t")
    assert store.load().topologies["t"]["status"] == "ACTIVE"
    store.full = False
    m.op_debug(name="t", component="feed", enable=True, pct=5)
    kept = store.load().topologies["t"]
    assert kept["status"] == "INACTIVE" and kept["debug"]["feed"]["enable"] is True
    assert list(store.load().topologies) == ["t"] and [p for p in store.load().plans if p.startswith("u-")] == []


def test_supervisors_and_transactional_writes_are_named_changes():
    store = _store()
    m = served(CONF, clock=SimulatedClock(5.0), store=store)
    _register(m)
    assert any(isinstance(c, PutSupervisors) and c.supervisors["s1"]["ports"] == [7000, 7001]
               for batch in store.batches for c in batch)
    m.op_trident_state_put(topology="words", key="k", value=b"v")
    assert store.batches[-1] == [PutTxState("words", "k", b"v")]


def test_the_directory_store_writes_state_json_as_before_and_a_master_resumes_from_it(tmp_path):
    conf = {**CONF, "storm.local.dir": str(tmp_path)}
    m = served(conf, clock=SimulatedClock(5.0))
    assert isinstance(m.store, LocalDirStore)
    _register(m)
    storm_id = m.op_submit(name="t", conf={}, topology=_topology())
    data = json.loads((tmp_path / "nimbus" / "state.json").read_text())
    assert data["counter"] == 1 and data["topologies"]["t"]["status"] == "ACTIVE"
    assert (tmp_path / "nimbus" / f"{storm_id}.plan").exists()
    # a state.json an older master wrote (slot records as three maps) still loads
    t = data["topologies"]["t"]
    launches = {slot: s["launch_id"] for slot, s in t.pop("slots").items()}
    t.pop("code")
    t.update(launch_ids=launches, launch_failures={}, given_up=[])
    (tmp_path / "nimbus" / "state.json").write_text(json.dumps(data))
    again = served(conf, clock=SimulatedClock(6.0))
    assert _launched(again, "t") == launches and again.op_list()[0]["id"] == storm_id


@pytest.mark.parametrize("content", [b"", b'{"counter": 3, "topolo', b"[1, 2]", b"\xff\xfe",
                                     b'{"counter": "3", "topologies": {}}', b'{"counter": 3, "topologies": {"t": 5}}',
                                     b'{"counter": -1, "topologies": {}}',
                                     b'{"counter": 1000000000000000000000000000000, "topologies": {}}',
                                     b"{}", b'{"counter": 3}', b'{"topologies": {}}'])
def test_a_state_json_cut_short_or_not_the_masters_stops_it_naming_the_file_and_what_to_do(tmp_path, content):
    d = tmp_path / "nimbus"
    LocalDirStore(d, b"s" * 40)
    (d / "state.json").write_bytes(content)
    with pytest.raises(SquallError, match=r"state .*nimbus/state\.json cannot be read .*move it aside"):
        LocalDirStore(d, b"s" * 40)


@pytest.mark.parametrize("target", ["unmounted", "loop"])
def test_a_state_json_symlink_that_does_not_resolve_stops_the_master_naming_it(tmp_path, target):
    """state.json a symlink to another disk that is not mounted (or a symlink loop): Path.exists()
    says False for both, and the master started as if it had never run: of 3 topologies it
    resumed none (their workers stopped), and its next write replaced the link. Now it stops,
    naming the file and the link's target, as for any state.json it cannot read; the state is read
    once the link resolves."""
    conf = {**CONF, "storm.local.dir": str(tmp_path)}
    m = served(conf, clock=SimulatedClock(5.0))
    _register(m)
    ids = [m.op_submit(name=name, conf={}, topology=_topology()) for name in ("a", "b", "c")]
    state = tmp_path / "nimbus" / "state.json"
    disk = tmp_path / "disk"
    disk.mkdir()
    os.replace(state, disk / "state.json")
    state.symlink_to(tmp_path / "unmounted" / "state.json" if target == "unmounted" else state)
    with pytest.raises(SquallError, match=r"state .*nimbus/state\.json cannot be read \(a symlink to "
                                          r".*state\.json that does not resolve: .*move it aside"):
        served(conf, clock=SimulatedClock(6.0))
    assert state.is_symlink()   # not written over
    state.unlink()
    state.symlink_to(disk / "state.json")   # the disk is back
    again = served(conf, clock=SimulatedClock(7.0))
    assert sorted(t["id"] for t in again.op_list()) == sorted(ids)


@pytest.mark.parametrize("sinks", [1, 2])
def test_a_plan_of_an_earlier_submission_of_a_topology_does_not_replace_the_one_it_runs(tmp_path, caplog, sinks):
    """An earlier t's plan back in the directory (a backup restored over it) is sealed by this
    cluster too. Plans were taken by topology name, the last storm id in sorted order winning:
    t-9-... over t-10-..., so the restarted master ran the old code in t's place (same
    executors) or dropped t as malformed (not). The record names its plan's digest: that one runs."""
    conf = {**CONF, "storm.local.dir": str(tmp_path)}
    d = tmp_path / "nimbus"
    m = served(conf, clock=SimulatedClock(5.0))
    _register(m)
    m.counter = 8
    old = m.op_submit(name="t", conf={}, topology=_topology())
    old_plan = (d / f"{old}.plan").read_bytes()
    m.op_kill(name="t", wait_secs=0)
    new = m.op_submit(name="t", conf={}, topology=_topology(sinks=sinks))
    assert (old, new) == ("t-9-5", "t-10-5")
    (d / f"{old}.plan").write_bytes(old_plan)
    again = served(conf, clock=SimulatedClock(6.0))
    assert [t["id"] for t in again.op_list()] == [new]
    assert f"skipped {d / (old + '.plan')}: a plan of topology t (t-9-5) that is not the one it runs" in caplog.text


def test_a_master_whose_secret_changed_stops_naming_the_secret_not_dropping_its_topologies(tmp_path, caplog):
    """The cluster's secret file cut short (or removed, or squall.secret set since): every plan
    is the master's own, byte for byte, but its seal no longer checks. The master said "state
    names topology t but its plan is missing; dropped" and stopped every topology (the process
    host's FileSpout read 0 of 100 new lines); now it stops, naming the plan and the secret, and
    starts again as it was once the secret is put back. A plan whose bytes changed is still
    dropped as before (Storm's cleanup of a topology whose code is corrupt)."""
    conf = {**CONF, "storm.local.dir": str(tmp_path)}
    m = served(conf, clock=SimulatedClock(5.0))
    _register(m)
    storm_id = m.op_submit(name="t", conf={}, topology=_topology())
    other = {**conf, "squall.secret": "another-secret-0123456789abcdef"}
    plan = tmp_path / "nimbus" / f"{storm_id}.plan"
    with pytest.raises(SquallError, match=rf"the plan {plan} of topology t is the one the master's state\.json names "
                                          r".*not sealed under this cluster's secret .*Put back the secret"):
        served(other, clock=SimulatedClock(6.0))
    again = served(conf, clock=SimulatedClock(7.0))
    assert [t["id"] for t in again.op_list()] == [storm_id]
    blob = plan.read_bytes()
    plan.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    dropped = served(other, clock=SimulatedClock(8.0))
    assert dropped.op_list() == []
    assert "state names topology t but its plan is missing; dropped" in caplog.text


# state.json is not sealed: each of these stopped the master at start (AttributeError), left it
# answering every list or info with a bare TypeError or IndexError, or crashed it when the wait
# of a pending action it could not do was over
@pytest.mark.parametrize("edit, why", [
    (lambda t: t.pop("status"), "is not a topology status"),
    (lambda t: t.update(slots={slot: "x" for slot in t["slots"]}), "slot record"),
    (lambda t: t.update(launched="x"), "launched is not a time"),
    (lambda t: t.update(launched=float("nan")), "launched is not a time"),
    (lambda t: t.update(assignment={slot: [999] for slot in t["assignment"]}), "executor indexes of the plan"),
    (lambda t: t.update(assignment={"nothost": [0]}), "slot 'nothost'"),
    (lambda t: t.update(assignment={"127.0.0.1:\u00b2": [0]}), "slot '127.0.0.1:\u00b2'"),
    (lambda t: t.update(pending_action={"kind": "X", "due": 1.0}), "malformed pending action"),
    # an integer past 64 bits: msgpack packs none, so every answer carrying it failed (a
    # supervisor's sync: the topology ran nowhere) with only a warning per refused connection
    (lambda t: next(iter(t["slots"].values())).update(launch_id=10 ** 40), "launch_id does not fit in 64 bits"),
    (lambda t: t.update(errors_happened=-(10 ** 30)), "errors_happened does not fit in 64 bits"),
    (lambda t: t.update(debug={"spout": {"enable": True, "samplingpct": 2 ** 64}}),
     "debug.spout.samplingpct does not fit in 64 bits"),
])
def test_a_malformed_topology_record_is_dropped_naming_it_and_the_others_resume(tmp_path, caplog, edit, why):
    conf = {**CONF, "storm.local.dir": str(tmp_path)}
    m = served(conf, clock=SimulatedClock(5.0))
    _register(m)
    m.op_submit(name="t", conf={}, topology=_topology())
    kept = m.op_submit(name="u", conf={}, topology=_topology())
    path = tmp_path / "nimbus" / "state.json"
    data = json.loads(path.read_text())
    edit(data["topologies"]["t"])
    path.write_text(json.dumps(data))
    again = served(conf, clock=SimulatedClock(6.0))
    assert [t["id"] for t in again.op_list()] == [kept]
    assert again.op_info(name="u")["id"] == kept
    assert f"record of topology t in {path} is malformed" in caplog.text and why in caplog.text


class _FlakyZooKeeper:
    """The parts of `squall.cluster.ha.Coordinator` the store writes through, in a dict, failing while ``down``."""

    root = "/storm"

    def __init__(self):
        self.nodes = {}
        self.down = False

    def path(self, *parts):
        return "/".join((self.root, *parts))

    def write(self, path, value):
        if self.down:
            raise ConnectionError("ZooKeeper unreachable")
        self.nodes[path] = value

    def children(self, path):
        return sorted({p[len(path) + 1:].split("/")[0] for p in self.nodes if p.startswith(path + "/")})

    def delete(self, path):
        for p in [p for p in self.nodes if p == path or p.startswith(path + "/")]:
            del self.nodes[p]


def test_a_zookeeper_write_that_fails_fails_its_request_and_is_written_at_the_next_refresh(tmp_path, caplog):
    """The request is failed (a kill acknowledged but never written was lost with the leader's
    lead), and the leader's next refresh writes it, logging while it cannot."""
    zk = _FlakyZooKeeper()
    store = ZooKeeperStore(zk, tmp_path, b"s" * 32)
    record = {"status": "ACTIVE", "previous": None, "launched": 1.0, "pending_action": None, "debug": {},
              "code": "abc", "assignment": {}, "slots": {}, "errors": []}
    zk.down = True
    with pytest.raises(SquallError, match=r"cannot write the cluster state to ZooKeeper \(ConnectionError: "):
        store.apply([SetCounter(1), PutTopology("t", "t-1-1", record)])
    store.refresh()
    assert "cannot write the cluster state to ZooKeeper (the next save tries again): ConnectionError" in caplog.text
    assert zk.nodes == {}
    zk.down = False
    store.refresh()
    assert zk.nodes[zk.path("storms", "t-1-1")]["status"] == "ACTIVE" and zk.nodes[zk.path("counter")] == {"counter": 1}
    store.apply([RemoveTopology("t", "t-1-1")])
    assert zk.path("storms", "t-1-1") not in zk.nodes


class _Session(_FlakyZooKeeper):
    """One master's stand-in `Coordinator` on a shared ``ensemble`` (its nodes, and who leads):
    the election is whatever the test sets ``ensemble.leader`` to."""

    hosts = "ensemble"
    connected = True

    def __init__(self, ensemble):
        super().__init__()
        self.ensemble = ensemble
        self.nodes = ensemble.nodes  # one ZooKeeper for every master
        self.me = None
        self.in_election = True

    def read(self, path):
        return self.nodes.get(path)

    def join(self, me, started, version):
        self.me = me

    def is_leader(self):
        return self.ensemble.leader == self.me

    def leader(self):
        return self.ensemble.leader

    def code_keys(self):
        return {sid: self.read(self.path("blobstore", sid))["code"] for sid in self.children(self.path("blobstore"))}

    def publish_code(self, storm_id, digest):
        self.write(self.path("blobstore", storm_id), {"code": digest})

    def holders(self, storm_id, digest):
        return [self.me]

    def register(self): ...
    def sweep(self): ...
    def hold(self, storm_id, digest): ...
    def forget_writes(self): ...
    def join_election(self): ...


def test_a_follower_that_becomes_leader_reads_the_store_and_takes_the_workers_over(tmp_path):
    """Nimbus HA on a SimulatedClock, ZooKeeper stood in for: the leader's commits reach the
    store; the follower, once it wins the election, reads them and leads with the same
    topologies, launch ids and counter, giving the workers the launch timeout to beat again."""
    from types import SimpleNamespace

    from squall.cluster.seeds import NimbusAddress

    ensemble = SimpleNamespace(nodes={}, leader=None)
    clock = SimulatedClock(50.0)
    conf = {**CONF, "storm.local.dir": str(tmp_path)}  # the same plan files: no code to fetch

    def master(port):
        m = served(conf, clock=clock, store=ZooKeeperStore(_Session(ensemble), tmp_path / "nimbus", b"s" * 32))
        m.port = port
        MasterServer(m.master)  # gives the master its election, as when it serves
        m.election.join()
        return m

    a = master(1)
    ensemble.leader = NimbusAddress("127.0.0.1", 1)
    assert a.election.tick(clock.now()) and a.leading
    _register(a)
    storm_id = a.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    launches = _launched(a, "t")
    assert launches and ensemble.nodes["/storm/storms/" + storm_id]["status"] == "ACTIVE"

    b = master(2)
    assert not b.election.tick(clock.now()) and not b.leading and "t" in b.topologies  # a follower reads the store
    clock.advance(10)
    a.op_deactivate(name="t")
    ensemble.leader = NimbusAddress("127.0.0.1", 2)  # a's session ends: b wins the election
    assert b.election.tick(clock.now()) and b.leading
    assert b.op_list()[0]["status"] == "INACTIVE" and _launched(b, "t") == launches
    assert all(w["alive"] is False for w in b.op_info(name="t")["workers"])  # waiting for their beats
    assert b.op_submit(name="u", conf={}, topology=_topology()).startswith("u-2-")
    assert ensemble.nodes["/storm/counter"] == {"counter": 2}


def test_what_a_failed_write_left_is_kept_by_the_next_tick_though_nothing_changed_since():
    """A deactivation the store could not keep, then space again and no other verb: the master's
    timer writes it (a master restarted after that tick must not come back ACTIVE). A read meanwhile
    still answers without writing."""
    store, m = _submitted_then_full()
    with pytest.raises(DiskWriteError):
        m.op_deactivate(name="t")
    with pytest.raises(DiskWriteError):
        m.monitor()  # still full: the tick's write fails again (its server logs it)
    store.full = False
    before = len(store.batches)
    assert m.op_list()[0]["status"] == "INACTIVE" and len(store.batches) == before  # a read writes nothing
    m.monitor()
    assert store.load().topologies["t"]["status"] == "INACTIVE"
    again = Master(CONF, clock=SimulatedClock(6.0), store=store)
    assert [(t["name"], t["status"]) for t in again.op_list()] == [("t", "INACTIVE")]
    m.monitor()
    assert len(store.batches) == before + 1  # written once: the next tick has nothing left to write


class _Shared(_Recording):
    """A `_Recording` store several masters share (Nimbus HA's kind): only the leader writes.
    Plans are sealed (a ``directory``: their digests name the code the masters hold)."""

    shared = True

    def __init__(self, secret, directory):
        super().__init__(secret)
        self.directory = directory

    def _keep(self, change):
        if isinstance(change, PutTopology):  # as ZooKeeperStore.load reads a record back: with its storm id
            change = PutTopology(change.name, change.storm_id, {**change.record, "storm_id": change.storm_id})
        super()._keep(change)


def test_what_a_leader_failed_to_write_is_not_written_after_it_leads_again(tmp_path):
    """A leader whose write failed loses the lead; another master kills the topology; this one
    follows (adopting that state) and leads again. Its next outcome holds its whole state; what
    the earlier term left unwritten is not written over it (the killed topology stays gone)."""
    store = _Shared(MemoryStore.for_conf(CONF).secret, tmp_path)
    clock = SimulatedClock(5.0)
    m = served(CONF, clock=clock, store=store)
    m.lead()
    _register(m)
    m.op_submit(name="t", conf={}, topology=_topology())
    m.op_submit(name="u", conf={}, topology=_topology())
    code = {topo.code: topo.plan for topo in m.topologies.values()}  # the code both masters hold
    store.full = True
    with pytest.raises(DiskWriteError):
        m.op_deactivate(name="t")
    m.leading = False  # lost the lead (its election's tick)
    store.full = False
    other = served(CONF, clock=clock, store=store)  # the new leader
    assert other.adopt(store.load(), code)
    other.lead()
    other.keeper.keep(other.pending())  # a new leader's whole state, as its server writes it at once
    other.op_kill(name="t", wait_secs=0)
    assert list(store.load().topologies) == ["u"]
    assert m.adopt(store.load(), code)  # this master follows it
    m.lead()  # and leads again: its whole state goes with its next outcome
    m.keeper.keep(m.pending())
    assert list(store.load().topologies) == ["u"]


def test_a_new_leader_gives_a_restarted_supervisor_its_slots_at_once_without_a_clash_error(tmp_path, caplog):
    """A rolling or whole-cluster restart under Nimbus HA: the supervisor of a machine restarts
    (a new id, the same address and ports) while the lead moves. The new leader knows the old id
    only from the store, never heard from it itself, so the newcomer is that machine's
    supervisor restarted: it takes the slots at its first sync, with new launches, and nothing
    says that two machines claim one address. (Before, it was refused its slots for 2 s and the
    master logged an ERROR telling the operator to give each machine its own address.)"""
    store = _Shared(MemoryStore.for_conf(CONF).secret, tmp_path)
    clock = SimulatedClock(5.0)
    first = served(CONF, clock=clock, store=store)
    first.lead()
    _register(first)  # supervisor s1 on 127.0.0.1:7000,7001
    first.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    launches = _launched(first, "t")
    assert len(launches) == 2
    code = {topo.code: topo.plan for topo in first.topologies.values()}
    first.leading = False  # SIGTERMed: its session ends

    leader = served(CONF, clock=clock, store=store)
    assert leader.adopt(store.load(), code)
    leader.lead()
    with caplog.at_level("INFO", logger="squall.master"):
        reply = leader.op_supervisor_sync(supervisor_id="s2", host="127.0.0.1", ports=[7000, 7001])
    assert sorted(reply["slots"]) == ["7000", "7001"], caplog.text
    assert "both claim" not in caplog.text
    assert "supervisor s2 replaces s1 on 127.0.0.1" in caplog.text
    relaunched = _launched(leader, "t")
    assert set(relaunched) == set(launches) and all(relaunched[s] != launches[s] for s in launches)

    # a second machine that claims the same address while s2 syncs is still refused
    caplog.clear()
    with caplog.at_level("ERROR", logger="squall.master"):
        assert leader.op_supervisor_sync(supervisor_id="s3", host="127.0.0.1", ports=[7000, 7001])["slots"] == {}
    assert "supervisors s2 and s3 both claim 127.0.0.1 ports 7000,7001" in caplog.text
    assert "storm.local.hostname" in caplog.text


def test_a_sealed_plan_that_does_not_load_is_named_as_such_not_as_missing(tmp_path, caplog):
    """A plan sealed by this cluster whose topology cannot be unpickled at the master's start
    (a class it names gone since) was dropped with "its plan is missing", though the file was
    there; the error now names the plan and points at the warning that says why."""
    conf = {**CONF, "storm.local.dir": str(tmp_path)}
    m = served(conf, clock=SimulatedClock(5.0))
    _register(m)
    storm_id = m.op_submit(name="t", conf={}, topology=_topology())
    plan = tmp_path / "nimbus" / f"{storm_id}.plan"
    sealed = seal(m.secret, _PLAN, b"not a pickle")
    plan.write_bytes(sealed)
    state = tmp_path / "nimbus" / "state.json"
    data = json.loads(state.read_text())
    data["topologies"]["t"]["code"] = hashlib.sha256(sealed).hexdigest()
    state.write_text(json.dumps(data))
    again = served(conf, clock=SimulatedClock(6.0))
    assert again.op_list() == []
    assert f"skipped {plan}: its topology cannot be loaded" in caplog.text
    assert f"state names topology t, whose plan {plan} did not load (said above); dropped" in caplog.text
    assert "plan is missing" not in caplog.text
