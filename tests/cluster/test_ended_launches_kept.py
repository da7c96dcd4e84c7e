"""A dead worker launch's last word (`squall.cluster.master_records.EndedLaunch`) outlives the
master: kept with its topology's record in ``state.json`` and in Nimbus HA's ZooKeeper, so a
restarted master or a new leader still gives `squall monitor` and the UI's history the rest of a
launch that ended before their next poll; a malformed one is refused, naming where and why.

On main the master kept it in memory only: a master restarted after the death answered
``ended_task_stats`` {} where it had held the launch's 180 acks and 20 failures."""

import json
from types import SimpleNamespace

import pytest

from squall.cluster.served_ui import statistics_pages
from squall.cluster.server import MasterServer
from squall.cluster.store import ZooKeeperStore
from squall.cluster.view import LaunchCount
from squall.engine.clock import SimulatedClock

from .served import served
from .test_master import _register, _topology
from .test_master_store import CONF, _Session

ACKED, FAILED = 180, 20


def _spout_stats(task):
    return {task: {"component": "feed", "emitted": {"default": ACKED + FAILED}, "transferred": {"default": 200},
                   "acked": ACKED, "failed": FAILED, "executed": 0, "complete_latency_sum": 900.0,
                   "complete_latency_count": ACKED, "dead_lettered": [["feed", "fail", 3]], "backlog": 0}}


def _windows(task):
    rows = [["acked", "", "default", float(ACKED)], ["failed", "", "default", float(FAILED)]]
    return {task: {"600": rows, ":all-time": rows}}


def _spout_beats(m):
    """The spout's worker beats its counts; returns its slot and launch."""
    topo = m.topologies["t"]
    task = topo.plan.component_tasks["feed"][0]
    slot = next(s for s, idx in topo.assignment.items() if any(task in topo.plan.executors[i].tasks for i in idx))
    launch = topo.launch_ids[slot]
    m.op_heartbeat(storm_id=topo.plan.storm_id, slot=slot, launch_id=launch, stats=_spout_stats(task),
                   windows=_windows(task))
    return slot, launch


def _dies(m, slot, launch):
    """``slot``'s worker (``launch``) dies: its supervisor says so, and the slot is relaunched."""
    topo = m.topologies["t"]
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001],
                         exits=[{"storm_id": topo.plan.storm_id, "slot": slot, "launch_id": launch, "status": -9,
                                 "started": True}])
    assert topo.launch_ids[slot] == launch + 1


def _spout_dies(m):
    """The spout's worker beats its counts, then dies (its supervisor says so); returns its
    slot and the launch that died."""
    slot, launch = _spout_beats(m)
    _dies(m, slot, launch)
    return slot, launch


def _ended(m):
    """Task -> (slot, launch id, acked, failed) of each ended launch of the spout, as ``info`` gives them."""
    ended = m.op_info(name="t")["components"]["feed"]["ended_task_stats"]
    return {int(t): [(e["slot"], e["launch_id"], e["acked"], e["failed"]) for e in launches]
            for t, launches in ended.items()}


def test_a_restarted_master_still_has_the_last_word_of_a_launch_that_died_before_it(tmp_path):
    conf = {**CONF, "storm.local.dir": str(tmp_path)}
    m = served(conf, clock=SimulatedClock(5.0))
    _register(m)
    m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    slot, launch = _spout_dies(m)
    task = m.topologies["t"].plan.component_tasks["feed"][0]
    before = _ended(m)
    assert before == {task: [(slot, launch, ACKED, FAILED)]}
    again = served(conf, clock=SimulatedClock(6.0), pages=statistics_pages())
    assert _ended(again) == before
    # the UI's history reads the launch's all-time rows from ``statistics``
    [row] = again.op_statistics(name="t")["ended"]
    assert (row["launch_id"], row["slot"]) == (launch, slot) and [r for r in row["tasks"] if r[1] == task]
    # its exact counters as the worker beat them (dead letters included), the windows' all-time only
    [kept] = json.loads((tmp_path / "nimbus" / "state.json").read_text())["topologies"]["t"]["ended"]
    assert kept["stats"][str(task)]["dead_lettered"] == [["feed", "fail", 3]]
    assert list(kept["windows"][str(task)]) == [":all-time"]


def _leader_and_follower(tmp_path):
    """Nimbus HA on a `SimulatedClock`, ZooKeeper stood in for: master ``a`` leads and runs
    topology t, ``b`` follows; returns them and a function that ends ``a``'s lead (b wins)."""
    from squall.cluster.seeds import NimbusAddress

    ensemble = SimpleNamespace(nodes={}, leader=None)
    clock = SimulatedClock(50.0)
    conf = {**CONF, "storm.local.dir": str(tmp_path)}

    def master(port):
        m = served(conf, clock=clock, store=ZooKeeperStore(_Session(ensemble), tmp_path / "nimbus", b"s" * 32))
        m.port = port
        MasterServer(m.master)
        m.election.join()
        return m

    a = master(1)
    ensemble.leader = NimbusAddress("127.0.0.1", 1)
    assert a.election.tick(clock.now()) and a.leading
    _register(a)
    a.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    b = master(2)

    def failover():
        ensemble.leader = NimbusAddress("127.0.0.1", 2)  # a's session ends: b wins the election
        assert b.election.tick(clock.now()) and b.leading

    return a, b, failover


def test_a_new_nimbus_ha_leader_has_the_last_word_of_a_launch_that_died_under_the_old_one(tmp_path):
    a, b, failover = _leader_and_follower(tmp_path)
    slot, launch = _spout_dies(a)
    a.pending(full=True)  # the leader's tick writes what the verbs changed
    task = a.topologies["t"].plan.component_tasks["feed"][0]
    assert _ended(a) == {task: [(slot, launch, ACKED, FAILED)]}
    failover()
    assert _ended(b) == _ended(a)


@pytest.mark.parametrize(("edit", "why"), [
    (lambda e, t: e["stats"][t].update(acked=-5), "acked is -5, not a count"),
    (lambda e, t: e["stats"][t].update(failed="20"), "failed is '20', not a count"),
    (lambda e, t: e["stats"][t].update(emitted={"default": 1.5}), "emitted is not a count per stream"),
    (lambda e, t: e["stats"][t].update(dead_lettered=[["feed", "fail", -1]]), "dead_lettered is not a list"),
    (lambda e, t: e.update(slot="nowhere"), "slot 'nowhere' is not host:port"),
    (lambda e, t: e.update(launch_id=True), "launch id True"),
    (lambda e, t: e["windows"][t].update({"600": []}), "all-time rows are malformed"),
    (lambda e, t: e["windows"][t][":all-time"][0].__setitem__(3, -180.0), "all-time rows are malformed"),
    # digits to str.isdigit(), not to int(): passed, and every info and page then raised ValueError
    (lambda e, t: e.update(slot="127.0.0.1:\u00b2"), "slot '127.0.0.1:\u00b2' is not host:port"),
    (lambda e, t: e["stats"].update({"\u00b2": e["stats"].pop(t)}), "task '\u00b2': not a task id"),
    (lambda e, t: e["windows"].update({"\u00b2": e["windows"].pop(t)}), "task '\u00b2': its all-time rows"),
])
def test_a_malformed_ended_launch_in_state_json_is_refused_naming_it_and_the_topology_resumes(
        tmp_path, caplog, edit, why):
    conf = {**CONF, "storm.local.dir": str(tmp_path)}
    m = served(conf, clock=SimulatedClock(5.0))
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    _spout_dies(m)
    task = str(m.topologies["t"].plan.component_tasks["feed"][0])
    path = tmp_path / "nimbus" / "state.json"
    data = json.loads(path.read_text())
    edit(data["topologies"]["t"]["ended"][0], task)
    path.write_text(json.dumps(data))
    again = served(conf, clock=SimulatedClock(6.0), pages=statistics_pages())
    assert again.op_info(name="t")["id"] == storm_id and _ended(again) == {}
    assert again.op_statistics(name="t")["ended"] == [] and again.op_topology_page(name="t")["name"] == "t"
    assert f"the ended launches' figures of topology t in {path} are refused" in caplog.text and why in caplog.text


def test_the_record_keeps_the_newest_ended_launches_that_fit_its_budget():
    """A launch of many tasks: the record keeps the newest whole launches within
    `MAX_KEPT_ENDED_CHARS`, never a part of one."""
    from squall.cluster.master_records import MAX_KEPT_ENDED_CHARS, EndedLaunch, kept_ended

    stats = {str(t): _spout_stats(t)[t] for t in range(300)}
    ended = [EndedLaunch(f"h:{7000 + n}", n, stats, {}) for n in range(20)]
    kept = kept_ended(ended)
    size = len(json.dumps(kept[0]))
    assert len(kept) == MAX_KEPT_ENDED_CHARS // size < len(ended)
    assert [k["launch_id"] for k in kept] == list(range(20 - len(kept), 20))
    assert all(len(k["stats"]) == 300 for k in kept)


def test_a_real_zookeeper_keeps_the_ended_launches_sealed_in_the_assignment_node(tmp_path, zookeeper):
    """The leader's record with its ended launches goes into ``assignments/<storm-id>`` (with
    the slots' launch ids: a leader that dies between two nodes cannot leave a new launch
    without its old launch's rest), sealed as every node is, and a new leader reads it back."""
    pytest.importorskip("kazoo")
    from squall._config import cluster_conf
    from squall.cluster.ha import Coordinator
    from squall.cluster.store import PutTopology

    secret = b"ended-launches-zk-secret-0123456789"
    conf = cluster_conf({"squall.secret": secret.decode(), "storm.zookeeper.servers": [zookeeper.address],
                         "storm.zookeeper.root": f"/storm-{tmp_path.name}", "storm.local.dir": str(tmp_path)})
    ended = [{"slot": "127.0.0.1:7000", "launch_id": 1, "stats": {"3": _spout_stats(3)[3]},
              "windows": {"3": {":all-time": [["acked", "", "default", 180.0]]}}}]
    record = {"status": "ACTIVE", "previous": None, "launched": 1.0, "pending_action": None, "debug": {},
              "code": "abc", "assignment": {"127.0.0.1:7000": [0]}, "slots": {"127.0.0.1:7000": {"launch_id": 2}},
              "errors": [], "errors_happened": 0, "ended": ended}
    leader, reader = Coordinator(conf, secret), Coordinator(conf, secret)
    try:
        ZooKeeperStore(leader, tmp_path / "a", secret).apply([PutTopology("t", "t-1-1", record)])
        assert leader.read(leader.path("assignments", "t-1-1"))["ended"] == ended
        assert ZooKeeperStore(reader, tmp_path / "b", secret).load().topologies["t"]["ended"] == ended
    finally:
        leader.delete(leader.root)
        leader.close()
        reader.close()


def _counted_since(reader_read, m, task):
    """What `squall monitor` adds to the spout task's acks since it read ``reader_read`` (its
    `LaunchCount`), reading ``m``'s ``info`` as it does (`_launches`, `counted_across`)."""
    from squall.cli._cluster import _launches
    from squall.cluster.view import counted_across

    launches = _launches(m.op_info(name="t")["components"]["feed"], lambda st: int(st.get("acked") or 0))
    return counted_across(reader_read, launches[str(task)])[0]


def test_a_new_nimbus_ha_leader_does_not_count_a_dead_launchs_last_beat_twice(tmp_path):
    """The leader writes each worker's beat summary to ``workerbeats/<id>/<slot>``, and the next
    launch of a slot overwrites it only once it beats. A leader that died between a launch's
    death and its relaunch's first beat left the dead launch's beat there beside its last word
    in ``assignments/<id>``: the new leader took that beat for the relaunch's, and `squall
    monitor`, which had read all 180 acks of the dead launch, added 180 acks no worker made."""
    from squall.cluster.master_records import Outcome

    a, b, failover = _leader_and_follower(tmp_path)
    topo = a.topologies["t"]
    task = topo.plan.component_tasks["feed"][0]
    slot, launch = _spout_beats(a)
    a.keeper.keep(Outcome(changes=tuple(a.election.monitor(a.clock.now()))))  # the leader's second: the beats
    assert a.store.coordinator.read(f"/storm/workerbeats/{topo.plan.storm_id}/{slot}")["stats"][task]["acked"] == ACKED
    read = LaunchCount((slot, launch), ACKED)  # monitor read the launch's 180 acks
    assert _counted_since(read, a, task) == 0
    _dies(a, slot, launch)
    a.pending(full=True)
    assert _counted_since(read, a, task) == 0  # the old leader: the dead launch, over, and a relaunch not heard
    failover()
    assert _ended(b) == {task: [(slot, launch, ACKED, FAILED)]}
    assert _counted_since(read, b, task) == 0
    assert str(task) not in b.op_info(name="t")["components"]["feed"]["task_stats"]  # the relaunch has not beaten


def test_a_beat_summary_an_older_leader_wrote_without_its_launch_is_still_taken(tmp_path):
    """An older leader's ``workerbeats`` node names no launch (and it kept no ended launches):
    the new leader takes it for the slot's current launch, as it did."""
    from squall.cluster.master_records import Outcome

    a, b, failover = _leader_and_follower(tmp_path)
    topo = a.topologies["t"]
    task = topo.plan.component_tasks["feed"][0]
    slot, launch = _spout_beats(a)
    a.keeper.keep(Outcome(changes=tuple(a.election.monitor(a.clock.now()))))
    node = f"/storm/workerbeats/{topo.plan.storm_id}/{slot}"
    older = {k: v for k, v in a.store.coordinator.read(node).items() if k != "launch_id"}
    a.store.coordinator.write(node, older)
    failover()
    [stats] = [st for t, st in b.op_info(name="t")["components"]["feed"]["task_stats"].items() if int(t) == task]
    assert (stats["slot"], stats["launch_id"], stats["acked"], stats["failed"]) == (slot, launch, ACKED, FAILED)
