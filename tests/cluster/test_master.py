"""The master's bookkeeping, driven as its server drives it (each verb through `Master.handle`, its
changes kept before it returns: `tests/cluster/served.py`), with no sockets and no processes."""

import json
import os
import pickle
import time

import cloudpickle
import msgpack
import pytest

from squall import (AlreadyAliveException, BaseStatefulBolt, Config, IllegalStateTransition, InvalidTopologyException, NotAliveException,
                    TopologyBuilder)
from squall._config import cluster_conf
from squall._errors import SquallError
from squall._sealed import seal, unseal
from squall.cluster.master_records import REBALANCE_ACTION, REMOVE_ACTION, LastBeat, PendingAction
from squall.cluster.server import MasterServer
from squall.engine.clock import SimulatedClock
from squall.testing import FeederSpout

from ..acceptance.components import AckBolt, UnrebuildableBolt
from .served import served


class _StatefulSink(BaseStatefulBolt):
    """Keeps a state by task (its layout recorded with the master), acks every input."""

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.collector.ack(tup)


def _topology(sinks=2, sink=AckBolt):
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    b.set_bolt("sink", sink(), sinks).shuffle_grouping("feed")
    return cloudpickle.dumps(b.create_topology())


@pytest.fixture
def conf(tmp_path):
    return cluster_conf({"storm.local.dir": str(tmp_path), "nimbus.task.timeout.secs": 1,
                         "nimbus.task.launch.secs": 2, "squall.worker.max.launch.attempts": 3})


def _register(master, ports=(7000, 7001)):
    return master.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=list(ports))


def test_a_submitted_topology_is_assigned_once_slots_exist(conf):
    m = served(conf)
    m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    assert m.op_list()[0]["num_workers"] == 0  # no supervisor yet: it waits, as in Storm
    reply = _register(m)
    assert sorted(reply["slots"]) == ["7000", "7001"]
    with pytest.raises(AlreadyAliveException):
        m.op_submit(name="t", conf={}, topology=_topology())


def test_a_verb_refused_during_a_kill_or_rebalance_wait_says_what_waits_and_how_long(conf):
    """Storm's words alone left the user to guess: `squall kill t -w 10` then `squall jar` of t
    (a redeploy) read ``Topology with name `t` already exists on cluster`` right after `Killed
    topology: t`; `squall rebalance -w 20` then `squall deactivate` read `No transition for event:
    inactivate, status: REBALANCING`. Each keeps Storm's words and says what waits, how long yet."""
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    _register(m)
    m.op_submit(name="t", conf={}, topology=_topology())
    m.op_deactivate(name="t")
    with pytest.raises(AlreadyAliveException, match=r"^Topology with name `t` already exists on cluster$"):
        m.op_submit(name="t", conf={}, topology=_topology())
    m.op_rebalance(name="t", wait_secs=20)
    clock.advance(4.5)
    with pytest.raises(IllegalStateTransition, match=r"^No transition for event: activate, status: REBALANCING "
                       r"\(it is being rebalanced: status REBALANCING for 16 s more, until its rebalance's wait "
                       r"ends, then INACTIVE again\)$"):
        m.op_activate(name="t")
    m.op_kill(name="t", wait_secs=10)
    clock.advance(3.5)
    kill_wait = r"\(it is being killed: status KILLED, removed in 7 s, when its kill's wait ends"
    with pytest.raises(AlreadyAliveException, match=r"^Topology with name `t` already exists on cluster "
                       + kill_wait + r"; submit it again after that\)$"):
        m.op_submit(name="t", conf={}, topology=_topology())
    with pytest.raises(IllegalStateTransition,
                       match=r"^No transition for event: rebalance, status: KILLED " + kill_wait):
        m.op_rebalance(name="t", wait_secs=0)
    clock.advance(7)
    m.monitor()
    m.op_submit(name="t", conf={}, topology=_topology())


def test_state_survives_a_restart_of_the_master(conf):
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    m.op_deactivate(name="t")
    again = served(conf)
    assert [t["name"] for t in again.op_list()] == ["t"]
    assert again.op_info(name="t")["status"] == "INACTIVE"
    # a worker of the old launch keeps its slot: its heartbeat is accepted
    slot = sorted(again.topologies["t"].assignment)[0]
    reply = again.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=again.topologies["t"].launch_ids[slot])
    assert reply == {"stop": False}  # not active: the wire leaves out a reply's fields at their default


def test_a_silent_worker_gets_a_new_launch_id(conf):
    # on the master's own clock: its supervisor beat "just now", however long the machine took
    # to get here (on the wall clock a loaded machine made the supervisor silent too, and the
    # master moved the executors instead of relaunching the worker)
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    _register(m)
    m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    before = topo.launch_ids[slot]
    topo.slot(slot).heartbeat = LastBeat(clock.now() - 5)  # it reported once, then stopped
    m.monitor()
    assert topo.launch_ids[slot] == before + 1
    # the user is told, with the components the worker ran (Storm's Nimbus only logs it)
    [error] = [e for e in m.op_info(name="t")["errors"] if "missed heartbeats" in e["error"]]
    assert error["component"] == "__master" and slot in error["error"], error
    assert "feed" in error["error"] and "sink" in error["error"], error
    assert m.op_heartbeat(storm_id=topo.plan.storm_id, slot=slot, launch_id=before) == {"stop": True}


def test_a_worker_that_keeps_failing_to_start_is_given_up_with_an_error(conf):
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    slot = next(iter(m.topologies["t"].assignment))
    for _ in range(3):
        m.op_supervisor_sync(
            supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001],
            exits=[{"storm_id": storm_id, "slot": slot, "launch_id": m.topologies["t"].launch_ids[slot], "status": 3,
                    "started": False}])
    info = m.op_info(name="t")
    assert info["workers"][0]["given_up"]
    assert "failed to start 3 times" in info["errors"][-1]["error"]
    assert _register(m)["slots"] == {}  # the supervisor is no longer asked to start it


def test_a_started_worker_that_exits_with_status_3_is_a_crash_not_a_failed_start(conf):
    """The supervisors read exit status 3 as "cannot start" (the worker's own code for it), but
    user code may exit with 3 too (a bolt's os._exit(3) on a poison record): the worker's own
    heartbeat said it started, so each such exit is a crash, restarted (with the crash backoff),
    never a failed start that squall.worker.max.launch.attempts (3 here) gives the slot up for."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    for _ in range(4):
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True)
        m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
            {"storm_id": storm_id, "slot": slot, "launch_id": topo.launch_ids[slot], "status": 3, "started": False}])
        topo.slot(slot).retry_at = time.monotonic() - 1  # the crash backoff's wait is over
    state = topo.slot(slot)
    assert not state.given_up and state.failed_starts == 0 and state.crashes == 4
    [err] = m.op_info(name="t")["errors"]
    assert "exited with status 3" in err["error"] and "before it started" not in err["error"], err
    assert err["count"] == 4


def test_by_default_a_slot_that_fails_to_start_is_retried_for_ever_as_storms_supervisor_does(tmp_path):
    # what fails a start may be outside the topology (a database down for a minute): given up
    # after a few tries, the topology would have lost a worker for good once it came back
    conf = cluster_conf({"storm.local.dir": str(tmp_path), "nimbus.task.timeout.secs": 1,
                         "nimbus.task.launch.secs": 2})
    assert conf["squall.worker.max.launch.attempts"] is None
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    slot = next(iter(m.topologies["t"].assignment))
    port = slot.rsplit(":", 1)[1]
    for failures in range(1, 21):
        reply = m.op_supervisor_sync(
            supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001],
            exits=[{"storm_id": storm_id, "slot": slot, "launch_id": m.topologies["t"].launch_ids[slot], "status": 3,
                    "started": False}])
        assert port not in reply["slots"], failures  # it waits out its backoff
        clock.advance(30.5)  # the longest backoff
        assert port in _register(m)["slots"], failures  # then the supervisor is asked to start it again
    info = m.op_info(name="t")
    assert not info["workers"][0]["given_up"]
    assert not any("gave up" in e["error"] for e in info["errors"]), info["errors"]


def test_kill_and_state_machine_errors(conf):
    m = served(conf)
    _register(m)
    m.op_submit(name="t", conf={}, topology=_topology())
    m.op_kill(name="t", wait_secs=5)
    assert m.op_info(name="t")["status"] == "KILLED"
    with pytest.raises(IllegalStateTransition, match="No transition for event: activate"):
        m.op_activate(name="t")
    m.op_kill(name="t", wait_secs=0)
    assert m.op_list() == []
    with pytest.raises(NotAliveException):
        m.op_kill(name="t")


def test_rebalance_moves_to_new_worker_and_executor_counts(conf):
    m = served(conf)
    _register(m, (7000, 7001, 7002))
    m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    m.op_rebalance(name="t", num_workers=2, executors={"sink": 1}, wait_secs=0)
    info = m.op_info(name="t")
    assert info["status"] == "ACTIVE" and info["num_workers"] == 2
    assert info["components"]["sink"]["executors"] == 1 and info["components"]["sink"]["tasks"] == 2


def test_topology_conf_may_not_set_daemon_keys(conf):
    m = served(conf)
    with pytest.raises(Exception, match="nimbus.task.timeout.secs"):
        m.op_submit(name="t", conf=Config({"nimbus.task.timeout.secs": 3}), topology=_topology())


def test_a_topology_whose_component_cannot_be_unpickled_is_refused_saying_so(conf):
    """The user's own message alone came back as a RemoteError, saying neither that the master
    could not load the topology nor what to look at."""
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    b.set_bolt("reconnecting", UnrebuildableBolt()).shuffle_grouping("feed")
    m = served(conf)
    with pytest.raises(InvalidTopologyException) as raised:
        m.op_submit(name="t", conf={}, topology=cloudpickle.dumps(b.create_topology()))
    assert str(raised.value) == (
        "the master cannot load topology 't': unpickling one of its components raised RuntimeError: needs the "
        "database this process never opened (squall copies each component per task, so it must unpickle as well "
        "as pickle: see its __setstate__ or __reduce__)")
    assert m.op_list() == []


def test_spouts_run_only_once_every_worker_has_reported_in(conf):
    """As Storm activates a topology once its workers are up: the first worker to start must not
    flood peers that are still starting."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    first, second = sorted(m.topologies["t"].assignment)
    ids = m.topologies["t"].launch_ids
    assert m.op_get_assignment(storm_id=storm_id, slot=first)["active"] is False
    reply = m.op_heartbeat(storm_id=storm_id, slot=first, launch_id=ids[first])
    assert "active" not in reply and reply["activating"] is True  # not active (a default: off the wire): beat again soon
    reply = m.op_heartbeat(storm_id=storm_id, slot=second, launch_id=ids[second])
    assert reply["active"] is True and "activating" not in reply
    assert m.op_heartbeat(storm_id=storm_id, slot=first, launch_id=ids[first])["active"] is True
    m.op_deactivate(name="t")  # inactive by the user's choice: nothing to wait for
    reply = m.op_heartbeat(storm_id=storm_id, slot=first, launch_id=ids[first])
    assert "active" not in reply and "activating" not in reply


def test_info_counts_only_the_slots_a_topology_holds_now(conf):
    m = served(conf)
    _register(m, (7000, 7001, 7002))
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    sink_task = topo.plan.component_tasks["sink"][0]
    stats = {sink_task: {"component": "sink", "emitted": {}, "transferred": {}, "acked": 500, "failed": 0,
                         "executed": 500, "complete_latency_sum": 0.0, "complete_latency_count": 0, "backlog": 0}}
    for slot in list(topo.assignment):
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], stats=stats)
    m.op_rebalance(name="t", num_workers=1, wait_secs=0)
    assert m.op_info(name="t")["components"]["sink"]["acked"] <= 500  # no stale slot's counts added


def test_workers_get_their_peers_addresses_once_every_worker_reported_one(conf):
    """On Spark a worker's address is known only once its task runs: the table has None for
    peers not yet reported, and a worker that restarts elsewhere reaches its peers through
    their next heartbeat reply."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    a, b = sorted(topo.assignment)
    first = m.op_get_assignment(storm_id=storm_id, slot=a, address="tcp://10.0.0.1:5000",
                                launch_id=topo.launch_ids[a])
    assert None in first["peers"].values() and first["plan"] is not None
    second = m.op_get_assignment(storm_id=storm_id, slot=b, address="tcp://10.0.0.2:6000",
                                 launch_id=topo.launch_ids[b], want_plan=False)
    assert set(second["peers"].values()) == {"tcp://10.0.0.1:5000", "tcp://10.0.0.2:6000"}
    assert second["plan"] is None
    version = second["addresses_version"]
    beat = m.op_heartbeat(storm_id=storm_id, slot=a, launch_id=topo.launch_ids[a], addresses_version=version)
    assert "peers" not in beat  # nothing moved
    # b's task is lost and relaunched elsewhere
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001],
                         exits=[{"storm_id": storm_id, "slot": b, "launch_id": topo.launch_ids[b], "status": -1,
                                 "started": True}])
    m.op_get_assignment(storm_id=storm_id, slot=b, address="tcp://10.0.0.3:7000", launch_id=topo.launch_ids[b])
    beat = m.op_heartbeat(storm_id=storm_id, slot=a, launch_id=topo.launch_ids[a], addresses_version=version)
    assert "tcp://10.0.0.3:7000" in beat["peers"].values() and beat["addresses_version"] > version


def test_a_worker_that_ended_gets_a_fresh_launch_id_and_its_old_copy_is_told_to_stop(conf):
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    old = topo.launch_ids[slot]
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=old)  # it started, then died
    reply = m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001],
                                 exits=[{"storm_id": storm_id, "slot": slot, "launch_id": old, "status": -1,
                                         "started": True}])
    assert reply["slots"][slot.rsplit(":", 1)[1]]["launch_id"] == old + 1
    assert m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=old) == {"stop": True}
    # a late report of that same exit does not restart the new launch
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001],
                         exits=[{"storm_id": storm_id, "slot": slot, "launch_id": old, "status": -1, "started": True}])
    assert topo.launch_ids[slot] == old + 1


def test_with_strict_slots_too_many_workers_is_refused_naming_the_slots(conf):
    m = served(conf, strict_slots=lambda n: f"the application has {n} task slots")
    _register(m)
    with pytest.raises(InvalidTopologyException, match=r"needs 3 workers .* only 2 of 2 task slots are free: "
                                                       r"the application has 2 task slots"):
        m.op_submit(name="t", conf={"topology.workers": 3}, topology=_topology())
    m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    with pytest.raises(InvalidTopologyException, match="only 0 of 2"):
        m.op_submit(name="u", conf={"topology.workers": 1}, topology=_topology())
    with pytest.raises(InvalidTopologyException, match="needs 3 workers"):
        m.op_rebalance(name="t", num_workers=3, wait_secs=0)
    m.op_rebalance(name="t", num_workers=1, wait_secs=0)  # its own slots count as free
    assert len(m.topologies["t"].assignment) == 1


def test_port_zero_listens_on_a_free_port(conf):
    import asyncio

    async def start():
        m = served({**conf, "nimbus.thrift.port": 0})
        ready = asyncio.Event()
        task = asyncio.create_task(MasterServer(m).serve(ready))
        await ready.wait()
        task.cancel()
        return m.port
    port = asyncio.run(start())
    assert port not in (0, 6627)


# --- the secret, the state directory's files, and what the master unpickles ----------------------------
def _modes(root):
    """path -> mode of everything under ``root`` (itself included)."""
    return {p: p.stat().st_mode & 0o777 for p in [root, *root.rglob("*")]}


def test_the_secret_and_daemon_settings_reach_no_plan_conf_file_or_info(tmp_path):
    conf = cluster_conf({"storm.local.dir": str(tmp_path / "local"), "squall.secret": "s3cret-never-shown",
                         "nimbus.task.timeout.secs": 9, "custom.cluster.key": "yes"})
    m = served(conf)
    _register(m)
    m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    plan = m.topologies["t"].plan

    for c in [plan.conf, *plan.component_confs.values(), m.op_info(name="t")["configuration"]]:
        assert "squall.secret" not in c and "storm.local.dir" not in c and "nimbus.task.timeout.secs" not in c
        assert c["custom.cluster.key"] == "yes" and c["topology.workers"] == 2
    for f in (tmp_path / "local").rglob("*"):
        if f.is_file():
            assert b"s3cret-never-shown" not in f.read_bytes(), f


def test_everything_the_master_writes_is_owner_only(tmp_path, conf):
    os.umask(0o022)
    m = served({**conf, "storm.local.dir": str(tmp_path / "local")})
    _register(m)
    m.op_submit(name="t", conf={}, topology=_topology())
    modes = _modes(tmp_path / "local")
    plan = f"{m.topologies['t'].plan.storm_id}.plan"
    assert {p.name for p in modes} >= {"local", "nimbus", "secret", "state.json", plan}
    assert {p: mode for p, mode in modes.items() if mode != (0o700 if p.is_dir() else 0o600)} == {}


@pytest.mark.parametrize("mode, content, fix", [(0o644, b"abc", "chmod 600"), (0o660, b"abc", "chmod 600"),
                                                (0o600, b"  \n", "is empty"),
                                                (0o600, b"guessable\n", "shorter than 16 characters")])
def test_a_secret_file_others_can_read_or_that_is_empty_is_refused_saying_how_to_fix_it(tmp_path, mode, content, fix):
    secret = tmp_path / "secret"
    secret.write_bytes(content)
    os.chmod(secret, mode)
    with pytest.raises(SquallError, match=fix) as e:
        served(cluster_conf({"storm.local.dir": str(tmp_path)}))
    assert str(secret) in str(e.value) and "delete it" in str(e.value)


def test_a_stray_plan_in_the_state_directory_is_not_unpickled(conf, tmp_path, caplog):
    m = served(conf)
    _register(m)
    m.op_submit(name="t", conf={}, topology=_topology())
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))
    stray = m.local_dir / "evil.plan"
    stray.write_bytes(pickle.dumps(Evil()))

    again = served(conf)
    assert not marker.exists()
    assert [t["name"] for t in again.op_list()] == ["t"]
    assert any(str(stray) in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("spoil", ["flip", "other secret"])
def test_a_tampered_plan_is_skipped_with_a_warning_naming_it(conf, caplog, spoil):
    m = served(conf)
    _register(m)
    m.op_submit(name="t", conf={}, topology=_topology())
    plan = m.local_dir / f"{m.topologies['t'].plan.storm_id}.plan"
    blob = bytearray(plan.read_bytes())
    if spoil == "flip":
        blob[-40] ^= 1
    else:
        blob = bytearray(seal(b"another secret", b"plan", unseal(m.secret, b"plan", bytes(blob))))
    plan.write_bytes(bytes(blob))

    again = served(conf)
    assert again.op_list() == []
    assert any(str(plan) in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)


def test_a_topology_asking_more_workers_than_it_has_executors_is_not_said_to_lack_slots(conf):
    # acking off, one spout and two sink executors: three workers at most, whatever it asks
    from squall.cli._cluster import _slots_note
    m = served(conf, clock=SimulatedClock(1000.0))
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001, 7002, 7003, 7004])
    m.op_submit(name="t", conf={"topology.workers": 5, "topology.acker.executors": 0}, topology=_topology())
    [row] = m.op_list()
    assert (row["num_workers"], row["workers_wanted"]) == (3, 3)
    assert _slots_note(row) is None  # not "running on 3 of 5 workers (only 3 slots were free)"


def test_a_topology_waiting_for_slots_is_placed_when_a_kill_or_a_rebalance_frees_some(conf):
    clock = SimulatedClock(1000.0)  # the supervisor stays alive however slow the machine is
    m = served(conf, clock=clock)
    _register(m)
    m.op_submit(name="first", conf={"topology.workers": 2}, topology=_topology())
    m.op_submit(name="second", conf={"topology.workers": 2}, topology=_topology())
    m.op_submit(name="third", conf={"topology.workers": 1}, topology=_topology())
    rows = {t["name"]: t for t in m.op_list()}
    assert (rows["second"]["num_workers"], rows["second"]["workers_wanted"]) == (0, 2)  # every slot taken
    m.op_rebalance(name="first", num_workers=1, wait_secs=0)
    assert len(m.topologies["second"].assignment) == 1  # the slot the rebalance freed
    m.op_kill(name="first", wait_secs=5)
    assert m.op_list()[0]["num_workers"] == 1  # a killed topology keeps its slot until removed
    m.topologies["first"].pending_action = PendingAction(REMOVE_ACTION, clock.wall() - 1)  # its wait is over
    m.monitor()
    assert len(m.topologies["third"].assignment) == 1 and not m.topologies["third"].given_up()
    reply = _register(m)
    assert {d["name"] for d in reply["slots"].values()} == {"second", "third"}


def test_a_restarted_supervisor_takes_over_its_slots_with_new_launches(conf):
    """The old supervisor's workers died with it. Its slots stay where they are, but each gets
    a new launch id: the new workers count their messages from 0 again, and peers that
    remember a dead worker's last number would drop all of them as replayed under the old id.
    The others hear of the deaths at once, to fail what the dead workers held."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    slots = sorted(topo.assignment)
    assignment, ids = dict(topo.assignment), dict(topo.launch_ids)
    for i, slot in enumerate(slots):  # both workers started and reported their addresses
        m.op_get_assignment(storm_id=storm_id, slot=slot, address=f"tcp://127.0.0.1:{9000 + i}",
                            launch_id=ids[slot], want_plan=False)
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=ids[slot], lost_generation=0)
    generation = topo.lost_generation
    m.supervisors["s1"].seen -= 3  # s1 fell silent (2 sync periods are enough)
    reply = m.op_supervisor_sync(supervisor_id="s2", host="127.0.0.1", ports=[7000, 7001])
    assert set(m.supervisors) == {"s2"}  # s1 must not be taken for lost when it falls silent
    assert topo.assignment == assignment  # nothing moves
    assert topo.launch_ids == {slot: ids[slot] + 1 for slot in slots}
    assert {d["launch_id"] for d in reply["slots"].values()} == set(topo.launch_ids.values())
    assert all(d["storm_id"] == storm_id for d in reply["slots"].values())
    assert topo.peers() and set(topo.peers().values()) == {None}  # old addresses are gone
    assert sorted(n.slot for n in topo.lost_since(generation)) == slots
    # the new supervisor's next sync changes nothing more
    m.op_supervisor_sync(supervisor_id="s2", host="127.0.0.1", ports=[7000, 7001])
    assert topo.launch_ids == {slot: ids[slot] + 1 for slot in slots}



def test_two_live_supervisors_that_claim_one_address_do_not_restart_each_others_slots(conf, caplog):
    """Two machines both left at --host 127.0.0.1: each would replace the other at every sync,
    and every slot would get a new launch every second. The newcomer gets no slots and an error
    names both; the first keeps its workers and their launches."""
    m = served(conf)
    _register(m)
    m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    ids = dict(topo.launch_ids)
    for _ in range(3):
        assert m.op_supervisor_sync(supervisor_id="s2", host="127.0.0.1", ports=[7001, 7002])["slots"] == {}
        assert sorted(_register(m)["slots"]) == ["7000", "7001"]
    assert topo.launch_ids == ids and set(m.supervisors) == {"s1"}
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1  # rate-limited
    assert "s1" in errors[0] and "s2" in errors[0] and "127.0.0.1 ports 7001" in errors[0]


def _reloaded_with_running_workers(conf):
    """A master whose two workers started, stopped and loaded again from its state."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    for slot in topo.assignment:
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True)
    return served(conf), storm_id


def _running(topo, storm_id):
    return [{"port": int(slot.rsplit(":", 1)[1]), "storm_id": storm_id, "launch_id": topo.launch_ids[slot]}
            for slot in topo.assignment]


def test_workers_that_died_while_the_master_was_down_get_new_launches(conf):
    """The master was stopped with its workers (or a supervisor restarted while it was down):
    its saved launch ids may have run. Started again under them, the new workers would number
    their messages from 0, and surviving peers would drop them all as replayed. The supervisor
    says which workers it runs; a slot whose launch may have run and does not gets a new one."""
    m, storm_id = _reloaded_with_running_workers(conf)
    topo = m.topologies["t"]
    ids = dict(topo.launch_ids)
    reply = m.op_supervisor_sync(supervisor_id="s9", host="127.0.0.1", ports=[7000, 7001], running=[])
    assert topo.launch_ids == {slot: ids[slot] + 1 for slot in ids}
    assert {d["launch_id"] for d in reply["slots"].values()} == set(topo.launch_ids.values())
    # idempotent: the next sync, before or after the new workers start, changes nothing
    m.op_supervisor_sync(supervisor_id="s9", host="127.0.0.1", ports=[7000, 7001], running=[])
    m.op_supervisor_sync(supervisor_id="s9", host="127.0.0.1", ports=[7000, 7001], running=_running(topo, storm_id))
    assert topo.launch_ids == {slot: ids[slot] + 1 for slot in ids}
    # and the new launches are saved: a master loaded again does not hand the old ones out
    assert served(conf).topologies["t"].launch_ids == topo.launch_ids


def test_a_pending_rebalance_and_the_slots_failed_starts_survive_a_restart_of_the_master(conf):
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    b = sorted(topo.assignment)[1]
    for _ in range(2):  # b's worker fails to start twice
        m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
            {"storm_id": storm_id, "slot": b, "launch_id": topo.launch_ids[b], "status": 1, "started": False}])
    m.op_rebalance(name="t", num_workers=1, executors={"sink": 1}, wait_secs=30)

    again = served(conf, clock=clock)
    t2 = again.topologies["t"]
    assert t2.launch_ids == topo.launch_ids and t2.slot(b).failed_starts == 2 and not t2.slot(b).given_up
    assert t2.pending_action == PendingAction(REBALANCE_ACTION, 1030.0, 1, {"sink": 1})
    _register(again)
    clock.advance(31)
    again.monitor()
    info = again.op_info(name="t")
    assert (info["status"], info["num_workers"], info["components"]["sink"]["executors"]) == ("ACTIVE", 1, 1)


def test_a_slots_worker_restarts_survive_a_restart_of_the_master(conf):
    """A worker SIGKILLed, then the master restarted (or, under Nimbus HA, another master
    leading, or the leader losing ZooKeeper and leading again): `squall info`, the REST API's
    worker rows and Prometheus's squall_worker_restarts_total said 0 restarts for the slot, as
    the count lived only in the master's memory (measured on 3 machines with 2 masters: a
    worker SIGKILLed and started again under launch 4, then ZooKeeper restarted: restarts 0)."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    a, b = sorted(topo.assignment)
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
        {"storm_id": storm_id, "slot": b, "launch_id": topo.launch_ids[b], "status": -9, "started": True}])

    def restarts(master):
        return {w["slot"]: w["restarts"] for w in master.op_info(name="t")["workers"]}
    assert restarts(m) == {a: 0, b: 1}
    assert restarts(served(conf)) == {a: 0, b: 1}


def test_a_rebalance_keeps_the_code_and_a_restarted_master_resumes_its_counts(conf):
    """As Storm's StormBase, the topology's record holds its worker and executor counts and
    the code stays as submitted: a Nimbus HA follower that holds that code can lead after a
    rebalance (a new plan was new code that only the leader held)."""
    m = served(conf)
    _register(m, ports=(7000, 7001, 7002))
    m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    code = m.topologies["t"].code
    plans = {p.name: p.read_bytes() for p in m.local_dir.glob("*.plan")}
    m.op_rebalance(name="t", num_workers=3, executors={"sink": 1}, wait_secs=0)
    assert m.topologies["t"].code == code
    assert {p.name: p.read_bytes() for p in m.local_dir.glob("*.plan")} == plans

    again = served(conf)
    info = again.op_info(name="t")
    assert (info["num_workers"], info["components"]["sink"]["executors"]) == (3, 1)
    assert again.topologies["t"].plan.parallelism == m.topologies["t"].plan.parallelism


def test_a_restarted_master_resumes_a_topology_a_rebalance_gave_more_executors(conf):
    """`squall rebalance -e sink=4` on a bolt of 4 tasks in 1 executor, then a master restart:
    the saved assignment's executor indexes were checked against the plan as submitted (3
    executors), so the record was dropped as malformed, the topology was gone and its workers
    stopped. It resumes with its 5 executors, its workers kept."""
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    b.set_bolt("sink", AckBolt(), 1).shuffle_grouping("feed").set_num_tasks(4)
    m = served(conf)
    _register(m, ports=(7000, 7001))
    m.op_submit(name="t", conf={"topology.workers": 1}, topology=cloudpickle.dumps(b.create_topology()))
    m.op_rebalance(name="t", num_workers=2, executors={"sink": 4}, wait_secs=0)
    assert max(i for idx in m.topologies["t"].assignment.values() for i in idx) >= 3  # the new executors' indexes

    again = served(conf)
    info = again.op_info(name="t")
    assert (info["num_workers"], info["components"]["sink"]["executors"]) == (2, 4)
    assert again.topologies["t"].assignment == m.topologies["t"].assignment
    assert again.topologies["t"].launch_ids == m.topologies["t"].launch_ids


def test_a_state_file_an_older_master_wrote_still_loads(conf):
    """Before the master kept one record per slot, state.json held each topology's launch ids,
    failed starts and given-up slots as three maps, and its pending kill or rebalance as a
    ``[kind, due, args]`` list: a master upgraded in place reads them."""
    m = served(conf)
    _register(m, ports=(7000, 7001, 7002))
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    m.op_submit(name="k", conf={"topology.workers": 1}, topology=_topology())
    a, b = sorted(m.topologies["t"].assignment)
    path = m.local_dir / "state.json"
    data = json.loads(path.read_text())
    t, k = data["topologies"]["t"], data["topologies"]["k"]
    for old in (t, k):
        old["launch_ids"] = {slot: s["launch_id"] for slot, s in old.pop("slots").items()}
    t.update({"status": "REBALANCING", "previous": "INACTIVE", "launch_ids": {a: 3, b: 1},
              "launch_failures": {a: 0, b: 2}, "given_up": [b],
              "pending_action": ["rebalance", time.time() - 1, {"num_workers": 1, "executors": {"sink": 1}}]})
    k.update({"status": "KILLED", "pending_action": ["remove", time.time() - 1, {}]})
    path.write_text(json.dumps(data))

    again = served(conf)
    topo = again.topologies["t"]
    assert topo.launch_ids == {a: 3, b: 1}
    assert (topo.slot(a).failed_starts, topo.slot(b).failed_starts) == (0, 2) and topo.given_up() == [b]
    assert again.op_heartbeat(storm_id=storm_id, slot=a, launch_id=3)["stop"] is False
    assert topo.pending_action == PendingAction(REBALANCE_ACTION, topo.pending_action.due, 1, {"sink": 1})
    assert again.topologies["k"].pending_action.kind == REMOVE_ACTION
    _register(again, ports=(7000, 7001, 7002))
    again.monitor()  # both waits are over
    assert [(t["name"], t["status"], t["num_workers"]) for t in again.op_list()] == [("t", "INACTIVE", 1)]
    assert again.op_info(name="t")["components"]["sink"]["executors"] == 1


def test_workers_that_survived_the_master_keep_their_launches(conf):
    m, storm_id = _reloaded_with_running_workers(conf)
    topo = m.topologies["t"]
    ids = dict(topo.launch_ids)
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], running=_running(topo, storm_id))
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001])  # an old supervisor: unknown
    assert topo.launch_ids == ids


def test_a_launch_about_to_start_for_the_first_time_is_not_taken_for_dead(conf):
    m = served(conf)
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], running=[])
    m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    ids = dict(topo.launch_ids)
    for _ in range(2):  # its supervisor has not started them yet
        m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], running=[])
    assert topo.launch_ids == ids


def test_a_supervisor_reports_the_workers_it_runs(conf):
    from squall.cluster.launcher import Launch, Launcher
    from squall.cluster.supervisor import Supervisor

    class OneWorker(Launcher):
        host = "127.0.0.1"

        def __init__(self):
            self.procs = {7000: Launch("t-1-1", "t", 4)}
            self.stopped = []

        def slots(self):
            return [7000, 7001]

        def start(self, port, launch):
            self.procs[port] = launch

        def stop(self, port):
            self.stopped.append(port)
            del self.procs[port]

        def running(self):
            return dict(self.procs)

        def exits(self):
            return []

    class Master:
        def call(self, op, **args):
            self.args = args
            return {"slots": {"7000": {"storm_id": "t-1-1", "name": "t", "launch_id": 4}}}

    launcher = OneWorker()
    sup = Supervisor(conf, launcher, Master())
    sup.sync()
    assert sup.master.args["running"] == [{"port": 7000, "storm_id": "t-1-1", "launch_id": 4}]
    assert launcher.running() == {7000: Launch("t-1-1", "t", 4)} and not launcher.stopped  # left running


def _exit(m, storm_id, slot, status, output="", executing=()):
    topo = m.topologies["t"]
    return m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
        {"storm_id": storm_id, "slot": slot, "launch_id": topo.launch_ids[slot], "status": status,
         "started": True, "output": output, "executing": executing}])


def test_a_worker_that_dies_before_it_reports_counts_as_a_failed_start_shows_its_output_and_backs_off(conf):
    """Exit status 1 with a traceback, before any heartbeat (a bad conf, an import error before
    the worker reached the master): a failed start, whatever the supervisor thinks."""
    clock = SimulatedClock(1000.0)  # the supervisor stays alive however slow the machine is
    m = served(conf, clock=clock)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    port = slot.rsplit(":", 1)[1]
    reply = _exit(m, storm_id, slot, 1, "Traceback (most recent call last):\n  ...\nValueError: bad thing\n")
    assert topo.slot(slot).failed_starts == 1
    assert port not in reply["slots"]  # held back: no restart at once
    row = m.op_list()[0]
    assert row["errors"] == 1
    assert row["last_error"] == f"[__worker] worker on {slot} exited with status 1 before it started: ValueError: bad thing"
    assert "Traceback" in m.op_info(name="t")["errors"][-1]["traceback"]
    first_wait = topo.slot(slot).retry_at - clock.now()
    topo.slot(slot).retry_at = clock.now() - 1  # the wait is over
    m.monitor()
    assert _register(m)["slots"][port]["launch_id"] == topo.launch_ids[slot]
    _exit(m, storm_id, slot, 1, "ValueError: bad thing")
    assert topo.slot(slot).retry_at - clock.now() > first_wait  # the wait grows
    topo.slot(slot).retry_at = clock.now() - 1
    _exit(m, storm_id, slot, 1, "ValueError: bad thing")
    assert topo.slot(slot).given_up  # squall.worker.max.launch.attempts: 3
    assert m.op_list()[0]["last_error"].startswith(f"[__master] worker on {slot} failed to start 3 times")


def test_a_worker_that_started_and_then_died_is_restarted_at_once_and_resets_the_count(conf):
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    _exit(m, storm_id, slot, 1)
    assert topo.slot(slot).failed_starts == 1
    topo.slot(slot).retry_at = time.monotonic() - 1
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True)
    reply = _exit(m, storm_id, slot, -9)  # SIGKILLed while it ran
    assert topo.slot(slot).failed_starts == 0
    assert reply["slots"][slot.rsplit(":", 1)[1]]["launch_id"] == topo.launch_ids[slot]
    # a worker that ran is no failed start, but its death is an error: it said nothing of it
    sigkill = "was killed by SIGKILL (the kernel's OOM killer, or a kill -9)"
    assert [e.error for e in topo.errors][1:] == [f"worker on {slot} {sigkill} without being asked to stop: no output"]


def test_a_worker_whose_output_ends_with_an_exception_it_lived_through_is_not_said_to_die_of_it(conf):
    """A new user's Kafka pipeline on the process host, a worker SIGKILLed: its output ended with
    its log of a malformed record's exception (a parse bolt raised, the record was failed, the
    worker went on), and the UI read "worker on ... was killed by SIGKILL (...) without being
    asked to stop: json.decoder.JSONDecodeError: Expecting property name ...", as if the record
    had killed it. A signal is no Python exception: a traceback is not why one came; nor is an
    error the worker reported and went on from, whatever its exit."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    decode = "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    logged = f"ERROR [split] task 3 raised:\nTraceback (most recent call last):\n  File \"p.py\", line 9, in execute\n{decode}\n"
    report = {"component": "split", "task": 3, "time": time.time(), "error": "JSONDecodeError: Expecting value",
              "traceback": f"Traceback (most recent call last):\n  File \"p.py\", line 9, in execute\n{decode}\n",
              "worker": 7000, "fatal": False}

    def error_of(status, output, errors=()):
        topo.slot(slot).retry_at = time.monotonic() - 1
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True,
                       errors=list(errors))
        _exit(m, storm_id, slot, status, output)
        return m.op_info(name="t")["errors"][-1]["error"]

    sigkill = f"worker on {slot} was killed by SIGKILL (the kernel's OOM killer, or a kill -9) without being asked to stop"
    lived = "no word of why; the last it wrote was an exception it went on from (its output is in the details)"
    # killed before its heartbeat carried the error: the traceback alone says it is no cause
    assert error_of(-9, logged) == f"{sigkill}: {lived}"
    # a line of its own after it is still its last word
    assert error_of(-9, f"{logged}loading the model (12 GB)\n") == f"{sigkill}: loading the model (12 GB)"
    # an exit status may be a traceback's (an exception that ended it) ...
    assert error_of(1, logged).endswith(f"exited with status 1 without being asked to stop: {decode}")
    # ... unless the worker reported that error, and so went on from it
    assert error_of(1, logged, [report]).endswith(f"exited with status 1 without being asked to stop: {lived}")


def test_a_signalled_worker_whose_output_ends_with_an_error_it_logged_is_not_said_to_die_of_it(conf):
    """A new user's pipeline on the process host (a Redis stream, a parse bolt failing 36 bad
    records of 3,000, a persistent window): the spout's worker SIGKILLed mid-run, its output ended
    with the spout's log of a bad record it had just given up to the dead letters, and `squall
    list`, `squall monitor` and the UI read "worker on ... was killed by SIGKILL (...) without
    being asked to stop: 2026-12-07 17:12:17,125 worker 127.0.0.1:29239 ERROR events-0: entry ...
    to dead-letter stream 'events:dead': failed 4 times (max_retries 3); last: failed in [parse]
    task 9: FailedException: amount '12,5x' is not a number", as if the bad amount had killed
    it. An error the worker logged (the only lines its log sends to stderr) is one it went on
    from: no signal comes of it."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    logged = (f"2026-12-07 17:12:17,125 worker {slot} ERROR events-0: entry 1796663537067-45 of stream 'events' "
              f"to dead-letter stream 'events:dead': failed 4 times (max_retries 3); last: failed in [parse] "
              f"task 9: FailedException: amount '12,5x' is not a number\n")

    def error_of(status, output):
        topo.slot(slot).retry_at = time.monotonic() - 1
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True)
        _exit(m, storm_id, slot, status, output)
        return m.op_info(name="t")["errors"][-1]

    sigkill = f"worker on {slot} was killed by SIGKILL (the kernel's OOM killer, or a kill -9) without being asked to stop"
    went_on = "no word of why; the last it wrote was an error it logged and went on from (its output is in the details)"
    error = error_of(-9, f"starting\n{logged}")
    assert error["error"] == f"{sigkill}: {went_on}"
    assert logged.strip() in error["traceback"]  # the output is still there, in the details
    # a line of its own after it is still its last word
    assert error_of(-9, f"{logged}loading the model (12 GB)\n")["error"] == f"{sigkill}: loading the model (12 GB)"
    # an exit status is the worker's own doing: its last logged error may say why it ended
    assert error_of(3, logged)["error"].endswith(f"exited with status 3 without being asked to stop: {logged.strip()}")


def test_a_dead_worker_is_told_to_the_others_in_their_heartbeat_replies(conf):
    """Beyond Storm: a reported exit, or a worker whose heartbeats stopped, makes a notice of
    its slot and tasks that every other worker gets once, in its next heartbeat reply."""
    clock = SimulatedClock(1000.0)  # the supervisor stays alive however slow the machine is
    m = served(conf, clock=clock)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    a, b = sorted(topo.assignment)
    gen = m.op_get_assignment(storm_id=storm_id, slot=a, launch_id=topo.launch_ids[a])["lost_generation"]
    b_tasks = sorted(t for i in topo.assignment[b] for t in topo.plan.executors[i].tasks)

    def beat(slot, generation):
        return m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot],
                              lost_generation=generation)
    assert "lost" not in beat(a, gen)
    beat(b, gen)  # b started (an exit before that is a failed start, which waits before its restart)
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001],
                         exits=[{"storm_id": storm_id, "slot": b, "launch_id": topo.launch_ids[b], "status": -9,
                                 "started": True}])
    reply = beat(a, gen)
    assert [(n["slot"], sorted(n["tasks"])) for n in reply["lost"]] == [(b, b_tasks)]
    gen = reply["lost_generation"]
    assert "lost" not in beat(a, gen)  # told once
    # b's new launch starts knowing of its own death: it is not told of it
    b_gen = m.op_get_assignment(storm_id=storm_id, slot=b, launch_id=topo.launch_ids[b])["lost_generation"]
    assert "lost" not in beat(b, b_gen)
    # a worker whose heartbeats stop is a death too
    topo.slot(b).heartbeat = LastBeat(clock.now() - 5)
    m.monitor()
    reply = beat(a, gen)
    assert [n["slot"] for n in reply["lost"]] == [b] and reply["lost_generation"] > gen


def _crash_report(task=3, text="SerializationError: [split] emitted a value on stream [default] nested deeper than 1000"):
    return {"component": "split", "task": task, "time": time.time(), "error": text, "traceback": "Traceback ...",
            "worker": 7000, "fatal": True}


def test_a_worker_that_keeps_crashing_soon_after_it_starts_backs_off_is_never_given_up_and_reports_once(conf):
    """A value that crashes its worker each time it is replayed: the worker starts, reports the
    same fatal error and exits, again and again. The first crash restarts at once (a single
    kill -9 costs nothing); each further one within a minute of its start waits 1, 2, 4 ... s;
    these are not failed starts, so squall.worker.max.launch.attempts (3 here) never gives the
    slot up; the error is one record with a count."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    port = slot.rsplit(":", 1)[1]
    waits = []
    for n in range(6):
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True,
                       errors=[_crash_report(task=3 + n % 2)])
        reply = _exit(m, storm_id, slot, 1)
        held = topo.slot(slot).retry_at - time.monotonic()
        waits.append(held if held > 0 else 0)
        assert (port in reply["slots"]) == (n == 0)  # only the first crash restarts at once
        topo.slot(slot).retry_at = time.monotonic() - 1  # the wait is over
    assert waits[0] == 0 and all(0 < a < b for a, b in zip(waits[1:], waits[2:]))  # it grows
    assert not topo.slot(slot).given_up and topo.slot(slot).failed_starts == 0
    assert _register(m)["slots"][port]["launch_id"] == topo.launch_ids[slot]  # still restarted
    [err] = m.op_info(name="t")["errors"]
    assert err["count"] == 6 and err["last_time"] >= err["time"] and err["fatal"]
    row = m.op_list()[0]
    # six crashes: six errors, all told of by the one record (before, the count was the records: 1)
    assert (row["errors"], row["errors_kept"]) == (6, 6) and row["last_error"].endswith("nested deeper than 1000 (x6)")
    # a run that lasted (a minute or more) before it crashed: restarted at once, the count reset
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True,
                   errors=[_crash_report()])
    topo.slot(slot).started_at -= 120
    assert port in _exit(m, storm_id, slot, 1)["slots"]
    # a crash its heartbeat reported as fatal counts whatever its exit status
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True,
                   errors=[_crash_report()])
    _exit(m, storm_id, slot, 1)
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True,
                   errors=[_crash_report()])
    assert port not in _exit(m, storm_id, slot, 0)["slots"]
    [err] = m.op_info(name="t")["errors"]
    assert err["count"] == 9


def test_the_crash_backoff_starts_at_squall_worker_crash_backoff_secs(tmp_path):
    """``squall.worker.crash.backoff.secs`` is the first wait (the second quick crash in a row),
    doubled for each further one: 0.25, 0.5, 1.0 s here, where the default starts at 1 s."""
    m = served(cluster_conf({"storm.local.dir": str(tmp_path), "squall.worker.crash.backoff.secs": 0.25}))
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    waits = []
    for _ in range(4):
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True)
        before = time.monotonic()
        _exit(m, storm_id, slot, 1)
        waits.append(max(0.0, topo.slot(slot).retry_at - before))
        topo.slot(slot).retry_at = time.monotonic() - 1  # the wait is over
    assert waits[0] == 0
    assert all(want <= w < want + 0.05 for w, want in zip(waits[1:], (0.25, 0.5, 1.0))), waits


def test_a_reported_error_folded_into_an_earlier_crash_does_not_make_its_launch_a_crash(conf):
    """A launch's report_error (not fatal) whose text is that of an earlier launch's crash
    keeps a record of its own beside the crash's (a fatal record counts crashes alone); the
    launch that reported it did not crash."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    port = slot.rsplit(":", 1)[1]
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True,
                   errors=[_crash_report()])
    assert port in _exit(m, storm_id, slot, 1)["slots"]  # the first crash restarts at once
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True,
                   errors=[{**_crash_report(), "fatal": False}])
    assert topo.slot(slot).fatal_launch != topo.launch_ids[slot]
    crash, report = m.op_info(name="t")["errors"]
    assert (crash["count"], crash["fatal"]) == (1, True)
    assert (report["count"], report["fatal"]) == (1, False)


def test_a_worker_that_exits_cleanly_unasked_is_an_error_and_backs_off_like_a_crash(conf):
    """The supervisor reports only the exits nobody asked for: a library's os._exit(0) while
    running left no error, and one in prepare restarted every second for ever with errors: 0."""
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    port = slot.rsplit(":", 1)[1]
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True)
    clock.advance(60)
    assert port in _exit(m, storm_id, slot, 0, "bye from a library")["slots"]  # ran a while: at once
    [err] = m.op_info(name="t")["errors"]
    assert err["error"] == f"worker on {slot} exited with status 0 without being asked to stop: bye from a library"
    for _ in range(2):  # again soon after each start: held back, as crashes are
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True)
        _exit(m, storm_id, slot, 0)
    assert port not in _register(m)["slots"] and topo.slot(slot).retry_at > clock.now()


def test_a_worker_that_dies_without_a_word_is_described_by_its_signal_its_host_and_its_board(conf):
    """A worker that left no traceback read "exited with status -11 before it started: no
    output" (and a Spark task lost by its host "status -1", which read as SIGHUP): the error
    names the signal and what it usually means, says when the host lost the worker without a
    status, and names the component and task its board said it was executing."""
    from squall._nimbus import EXIT_LOST
    m = served({**conf, "squall.worker.max.launch.attempts": None}, clock=SimulatedClock(1000.0))
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))
    sink = next(e.tasks[0] for i in topo.assignment[slot] if (e := topo.plan.executors[i]).component == "sink")

    def last_error(status, output="", executing=(), started=False):
        topo.slot(slot).retry_at = m.clock.now() - 1  # the wait after the last failed start is over
        m.monitor()
        _register(m)
        if started:
            m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True)
        _exit(m, storm_id, slot, status, output, executing)
        return m.op_info(name="t")["errors"][-1]["error"]

    assert last_error(-11) == (f"worker on {slot} was killed by SIGSEGV (a crash in native code: an extension "
                               f"module or a library's C code) before it started: no output")
    assert last_error(-9, "the kernel's OOM killer killed it") == (
        f"worker on {slot} was killed by SIGKILL (the kernel's OOM killer, or a kill -9) before it started: "
        f"the kernel's OOM killer killed it")
    assert last_error(EXIT_LOST, "Python worker exited unexpectedly (crashed)") == (
        f"worker on {slot} was lost by its host before it started: Python worker exited "
        f"unexpectedly (crashed)")
    # a library's os._exit(0) in the middle of a tuple: its board names the bolt's task
    assert last_error(0, "", ((sink, 77),), started=True) == (
        f"worker on {slot} exited with status 0 without being asked to stop while [sink] task {sink} executed "
        f"a tuple: no output")


def test_identical_errors_count_on_one_record_and_survive_a_restart_of_the_master(conf):
    """Same component and text, whatever the task: one record, counted. Another text of the
    same component is a new record; another component's error in between does not break the run."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))

    def report(*errors):
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], errors=list(errors))
    report(_crash_report(3, "ValueError: a"), _crash_report(4, "ValueError: a"))
    report({**_crash_report(5, "KeyError: x"), "component": "sink"})
    report(_crash_report(3, "ValueError: a"))
    report(_crash_report(3, "ValueError: b"))
    summary = [(e["component"], e["error"], e["count"]) for e in m.op_info(name="t")["errors"]]
    assert summary == [("sink", "KeyError: x", 1), ("split", "ValueError: a", 3), ("split", "ValueError: b", 1)]
    again = served(conf)
    assert [(e["error"], e["count"]) for e in again.op_info(name="t")["errors"]] == [
        ("KeyError: x", 1), ("ValueError: a", 3), ("ValueError: b", 1)]


def test_the_error_count_keeps_errors_without_a_record_once_and_survives_a_restart_of_the_master(conf):
    """A beat's errors without a record (``errors_unrecorded``: throttled, or folded away in the
    worker) count once per batch number, as its records do, and the count is saved."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = next(iter(topo.assignment))

    def report(seq, unrecorded, *errors):
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], errors=list(errors),
                       errors_seq=seq, errors_unrecorded=unrecorded)
    report(1, 40, _crash_report(3, "ValueError: a"), _crash_report(4, "ValueError: b"))
    report(1, 40, _crash_report(3, "ValueError: a"), _crash_report(4, "ValueError: b"))  # sent again: kept once
    report(2, 7)  # throttled only: no record
    assert [(t["errors"], t["errors_kept"]) for t in m.op_list()] == [(49, 2)]
    again = served(conf)
    assert [(t["errors"], t["errors_kept"]) for t in again.op_list()] == [(49, 2)]


def test_only_a_worker_that_may_have_held_tuples_is_told_as_lost(conf):
    """A worker that never reported its data address was sent nothing: its failed starts and
    launch timeouts must not make the spouts fail their whole pending set each time. One whose
    address its peers had (reported, or started) may have held tuples: its death is told."""
    clock = SimulatedClock(1000.0)  # the supervisor stays alive however slow the machine is
    m = served(conf, clock=clock)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    a, b = sorted(topo.assignment)

    def lost_told_to_a():
        return m.op_heartbeat(storm_id=storm_id, slot=a, launch_id=topo.launch_ids[a], lost_generation=0).get("lost")
    for _ in range(2):  # b fails to start, before it reported an address
        m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
            {"storm_id": storm_id, "slot": b, "launch_id": topo.launch_ids[b], "status": 3, "started": False}])
        topo.slot(b).retry_at = clock.now() - 1
    topo.slot(b).heartbeat = LastBeat(clock.now() - 5, starting=True)  # and then a launch that timed out
    m.monitor()
    assert lost_told_to_a() is None
    # b reports its address (peers may send to it now), then dies before it said it started
    m.op_get_assignment(storm_id=storm_id, slot=b, launch_id=topo.launch_ids[b], address="tcp://127.0.0.1:7001")
    dead = topo.launch_ids[b]
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
        {"storm_id": storm_id, "slot": b, "launch_id": dead, "status": 1, "started": True}])
    # the launch that died, by which a peer that heard from the next one bounds what it lost
    assert [(n["slot"], n["launch"]) for n in lost_told_to_a()] == [(b, dead)]
    assert topo.launch_ids[b] > dead


def test_a_worker_is_told_every_death_when_the_master_restarted_since_it_last_heard(conf):
    """Lost generations are not persisted: a restarted master counts from 0 again. A worker
    whose generation happens to equal the new master's would hear nothing; the master's epoch,
    new at each start, tells it that its generation is from another master."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    a, b = sorted(topo.assignment)
    for slot in (a, b):
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=topo.launch_ids[slot], started=True)
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
        {"storm_id": storm_id, "slot": b, "launch_id": topo.launch_ids[b], "status": -9, "started": True}])
    old = m.op_get_assignment(storm_id=storm_id, slot=a, launch_id=topo.launch_ids[a])
    assert old["lost_generation"] == 1  # a knows of b's death: generation 1 of the old master

    again = served(conf)
    _register(again)
    t2 = again.topologies["t"]
    again.op_heartbeat(storm_id=storm_id, slot=b, launch_id=t2.launch_ids[b], started=True)
    again.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
        {"storm_id": storm_id, "slot": b, "launch_id": t2.launch_ids[b], "status": -9, "started": True}])
    assert t2.lost_generation == 1  # the same number as a's, for another death
    reply = again.op_heartbeat(storm_id=storm_id, slot=a, launch_id=t2.launch_ids[a],
                               lost_generation=old["lost_generation"], epoch=old["epoch"])
    assert [n["slot"] for n in reply["lost"]] == [b] and reply["epoch"] != old["epoch"]
    assert "lost" not in again.op_heartbeat(storm_id=storm_id, slot=a, launch_id=t2.launch_ids[a],
                                            lost_generation=reply["lost_generation"], epoch=reply["epoch"])


def test_reports_for_slots_outside_the_assignment_create_nothing(conf):
    """An authenticated but confused (or hostile) supervisor or worker naming slots the master
    never assigned: no record is made for them, nothing is saved for them."""
    m = served(conf)
    _register(m)
    storm_id = m.op_submit(name="t", conf={}, topology=_topology())
    topo = m.topologies["t"]
    m.op_report_errors(storm_id=storm_id, slot="10.9.9.9:1", launch_id=1,
                       errors=[{"component": "x", "task": 1, "time": 0.0, "error": "e", "traceback": ""}])
    m.op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
        {"storm_id": storm_id, "slot": "10.9.9.9:2", "launch_id": 1, "status": 1, "started": True}])
    assert set(topo.slots) == set(topo.assignment) and not topo.errors


def test_a_machine_whose_supervisor_and_workers_fall_silent_loses_its_executors_to_the_others(conf):
    """A whole machine dies (or its link is cut): its worker and its supervisor both stop
    talking. After nimbus.task.timeout.secs (1 s here) the executors move to the other machine,
    as Storm reassigns timed-out executors; a worker silent on a machine whose supervisor still
    syncs is restarted in place instead. A machine that comes back is given nothing of it."""
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    for sid, host in (("s1", "10.0.0.1"), ("s2", "10.0.0.2")):
        m.op_supervisor_sync(supervisor_id=sid, host=host, ports=[7000])
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    assert list(topo.assignment) == ["10.0.0.1:7000"]
    launch = topo.launch_ids["10.0.0.1:7000"]
    m.op_get_assignment(storm_id=storm_id, slot="10.0.0.1:7000", address="tcp://10.0.0.1:7000",
                        launch_id=launch, want_plan=False)
    m.op_heartbeat(storm_id=storm_id, slot="10.0.0.1:7000", launch_id=launch, lost_generation=0)
    generation = topo.lost_generation

    def second_passes():
        clock.advance(0.6)
        m.op_supervisor_sync(supervisor_id="s2", host="10.0.0.2", ports=[7000])
        m.monitor()

    second_passes()
    assert list(topo.assignment) == ["10.0.0.1:7000"]  # not silent long enough yet
    second_passes()
    assert list(topo.assignment) == ["10.0.0.2:7000"]
    assert set(m.supervisors) == {"s2"}
    assert [n.slot for n in topo.lost_since(generation)] == ["10.0.0.1:7000"]  # the spouts are told
    # a worker still running there, cut off from the master only, is a replaced launch for its
    # peers: what it still sends (its spout's emits beside its new copy's) is dropped
    # (the slot's record is dropped, and the floor of the slots the table does not name is above it)
    assert "10.0.0.1:7000" not in topo.slots and topo.launch_floor > launch
    reply = m.op_heartbeat(storm_id=storm_id, slot="10.0.0.2:7000", launch_id=topo.launch_ids["10.0.0.2:7000"],
                           lost_generation=0, addresses_version=0)
    assert "10.0.0.1:7000" not in reply["launch_ids"] and reply["launch_floor"] > launch
    # the new worker never reports, but its supervisor syncs: restarted in place, not moved
    before = topo.launch_ids["10.0.0.2:7000"]
    for _ in range(5):
        second_passes()
    assert list(topo.assignment) == ["10.0.0.2:7000"] and topo.launch_ids["10.0.0.2:7000"] > before
    # the first machine's link comes back, its old worker still running: it is given nothing
    reply = m.op_supervisor_sync(supervisor_id="s1", host="10.0.0.1", ports=[7000],
                                 running=[{"port": 7000, "storm_id": storm_id, "launch_id": launch}])
    assert reply["slots"] == {} and list(topo.assignment) == ["10.0.0.2:7000"]


class _SteppedWallClock(SimulatedClock):
    """Simulated time whose wall clock NTP may step (``step``) while the monotonic one runs on."""

    def __init__(self, start: float) -> None:
        super().__init__(start)
        self.offset = 0.0

    def wall(self) -> float:  # type: ignore[override]
        return self.now() + self.offset

    def step(self, secs: float) -> None:
        self.offset += secs


@pytest.mark.parametrize("step", [3600.0, -3600.0])
def test_a_step_of_the_wall_clock_neither_restarts_live_workers_nor_keeps_silent_ones(conf, step):
    """Timeouts run on the master's monotonic clock: an hour's step of the wall clock (NTP, a
    VM resumed) must not take every supervisor and worker that beat a second ago for silent
    (forward), nor hide for an hour a worker that really fell silent (backward)."""
    clock = _SteppedWallClock(1000.0)
    m = served(conf, clock=clock)
    m.op_supervisor_sync(supervisor_id="s1", host="10.0.0.1", ports=[7000, 7001])
    storm_id = m.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = m.topologies["t"]
    slots = sorted(topo.assignment)
    launches = dict(topo.launch_ids)
    for slot in slots:
        m.op_get_assignment(storm_id=storm_id, slot=slot, address=f"tcp://{slot}", launch_id=launches[slot],
                            want_plan=False)
        m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=launches[slot], lost_generation=0, started=True)
    clock.advance(0.5)
    clock.step(step)
    m.monitor()  # the master's next tick: every beat came half a second ago
    assert set(m.supervisors) == {"s1"}
    assert sorted(topo.assignment) == slots and topo.launch_ids == launches  # nothing restarted or moved
    # the first worker falls silent, its supervisor syncs on: restarted after nimbus.task.timeout.secs (1 s)
    for _ in range(3):
        clock.advance(0.6)
        m.op_supervisor_sync(supervisor_id="s1", host="10.0.0.1", ports=[7000, 7001])
        m.op_heartbeat(storm_id=storm_id, slot=slots[1], launch_id=launches[slots[1]], lost_generation=0,
                       started=True)
        m.monitor()
    assert topo.launch_ids[slots[0]] == launches[slots[0]] + 1
    assert topo.launch_ids[slots[1]] == launches[slots[1]]


def test_the_master_logs_each_kill_activate_deactivate_and_rebalance_when_asked(conf, caplog):
    """An operator reading the master's log sees a ``squall kill -w 30`` when it is asked, not
    only 30 s later when the topology goes, and sees activations, deactivations and rebalances
    (as Storm's Nimbus logs "Delaying event :remove for 30 secs")."""
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    _register(m, ports=(7000, 7001, 7002))
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    with caplog.at_level("INFO", logger="squall.master"):
        m.op_deactivate(name="t")
        m.op_activate(name="t")
        m.op_rebalance(name="t", num_workers=2, wait_secs=5)
        assert "Rebalanced" not in caplog.text
        clock.advance(5)
        m.monitor()
        m.op_kill(name="t", wait_secs=30)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:3] == ["Deactivated topology t", "Activated topology t",
                         "Rebalancing topology t: spouts deactivated, placing it on 2 workers in 5 s"], lines
    assert "Rebalanced topology t: 2 workers" in lines
    assert lines[-1] == f"Killing topology t ({storm_id}): spouts deactivated, removing it in 30 s", lines


def test_the_slot_records_of_machines_that_came_and_went_are_not_kept_for_ever(conf):
    """Machines replaced over days (new addresses each time, as on autoscaled or rebuilt hosts):
    each one that took the topology's executors and was then lost left a slot record behind, in
    memory, in the saved state and in every launch table sent to the workers (200 machines, 200
    records). Only the slots of the assignment keep one; the launch of a slot that comes back is
    still above every one it had, and the workers still drop what a lost machine's worker sends
    (its launch is below the floor their table gives every slot it does not name)."""
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    m.op_supervisor_sync(supervisor_id="s0", host="10.1.0.0", ports=[7000])
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    launches = {}
    for i in range(1, 201):
        host = f"10.1.{i // 250}.{i % 250}"
        (old,) = topo.assignment
        launches[old] = topo.launch_ids[old]
        m.op_supervisor_sync(supervisor_id=f"s{i}", host=host, ports=[7000])
        clock.advance(1.5)  # the old machine and its worker fall silent: lost, its executors move
        m.op_supervisor_sync(supervisor_id=f"s{i}", host=host, ports=[7000])
        m.monitor()
        assert list(topo.assignment) == [f"{host}:7000"], i
    assert set(topo.slots) == set(topo.assignment) and len(topo.launch_ids) == 1
    assert topo.launch_floor > max(launches.values())
    saved = json.loads((m.local_dir / "state.json").read_text())["topologies"]["t"]
    assert len(saved["slots"]) == 1 and saved["launch_floor"] == topo.launch_floor
    # the first machine comes back and is given the executors again: a launch above its old ones
    first = "10.1.0.0:7000"
    m.op_supervisor_sync(supervisor_id="s0-again", host="10.1.0.0", ports=[7000])
    clock.advance(1.5)
    m.op_supervisor_sync(supervisor_id="s0-again", host="10.1.0.0", ports=[7000])
    m.monitor()
    assert list(topo.assignment) == [first] and topo.launch_ids[first] > launches[first]
    # a restarted master keeps the floor
    again = served(conf, clock=clock)
    assert again.topologies["t"].launch_floor == topo.launch_floor
    # a peer drops a lost machine's old launch, whose slot its table does not name
    from squall.worker.envelope import Opener, Origin, Refused, Sealer
    opener = Opener(b"k", storm_id, "tcp://10.1.0.0:7000")
    opener.set_floor(topo.launch_ids, topo.launch_floor)
    lost = "10.1.0.7:7000"
    sealer = Sealer(b"k", Origin(storm_id, lost, launches[lost]))
    with pytest.raises(Refused) as e:
        opener.open(sealer.seal(0, sealer.route("tcp://10.1.0.0:7000"), b"x"))
    assert e.value.reason == "stale_launch"



def test_a_submission_giving_a_stateful_component_another_task_count_is_refused_at_submit(conf):
    """The master's records say an earlier submission of ``t`` kept [sink]'s states in 2 tasks;
    submitted again with 3, its tasks refused to start (restarted until their launches ran out,
    a traceback each time) while the submission itself succeeded. The submitter gets the
    refusal, naming the component and its states; the same count, or the key that allows the
    change set on the component, goes through."""
    m = served(conf)
    _register(m, ports=(7000, 7001, 7002))
    m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology(sinks=2, sink=_StatefulSink))
    for index, ns in enumerate(["sink-3", "sink-4"]):  # what its stateful tasks record (state_namespace)
        m.op_trident_state_put(topology="t", key=f"_squall_task/sink/2/{index}", value=msgpack.packb(ns))

    def submit_again(topology):
        m.op_kill(name="t", wait_secs=0)
        m.monitor()
        assert "t" not in m.topologies
        m.op_submit(name="t", conf={"topology.workers": 1}, topology=topology)

    with pytest.raises(InvalidTopologyException, match=r"component \[sink\]: topology 't' kept the states of "
                       r"component \[sink\] in 2 tasks \(states sink-3, sink-4\).*now has 3 tasks.*set_num_tasks\(2\)"):
        submit_again(_topology(sinks=3, sink=_StatefulSink))
    assert "t" not in m.topologies
    m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology(sinks=2, sink=_StatefulSink))  # its states' count
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    b.set_bolt("sink", _StatefulSink(), 3).shuffle_grouping("feed").add_configuration(
        Config.TOPOLOGY_STATE_ALLOW_TASK_COUNT_CHANGE, True)
    submit_again(cloudpickle.dumps(b.create_topology()))
    assert len(m.topologies["t"].plan.component_tasks["sink"]) == 3
    for index in range(3):  # its tasks started, and recorded their states under the new count
        m.op_trident_state_put(topology="t", key=f"_squall_task/sink/3/{index}", value=msgpack.packb(f"sink-{index + 3}"))
    submit_again(_topology(sinks=3, sink=_StatefulSink))  # from then on without the setting (docs/state.md)


def test_a_component_that_no_longer_keeps_states_goes_with_another_task_count(conf):
    """[sink] kept its states in 2 tasks; submitted again as a stateless bolt with 3 tasks, the
    master refused it with the stateful one's count, though its tasks read no state and would
    have refused nothing (only a stateful task checks at its start)."""
    m = served(conf)
    _register(m, ports=(7000, 7001, 7002))
    m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology(sinks=2, sink=_StatefulSink))
    for index in range(2):
        m.op_trident_state_put(topology="t", key=f"_squall_task/sink/2/{index}", value=msgpack.packb(f"sink-{index + 3}"))
    m.op_kill(name="t", wait_secs=0)
    m.monitor()
    m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology(sinks=3))
    assert len(m.topologies["t"].plan.component_tasks["sink"]) == 3

