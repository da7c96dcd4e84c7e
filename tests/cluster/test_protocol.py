"""The master's verbs defined once (`squall._nimbus`): the table matches what the master serves,
records cross either transport, and a request or reply of the wrong shape is refused with an
error naming the verb and the field."""

import cloudpickle
import pytest

from squall import Bolt, TopologyBuilder
from squall._config import cluster_conf
from squall._errors import RemoteError
from squall._nimbus import (
    LEADER_ONLY,
    READS,
    VERBS,
    Assignment,
    Heartbeat,
    HeartbeatReply,
    LogConfig,
    LogLevel,
    NimbusClient,
    ProtocolError,
    RunningWorker,
    SupervisorSync,
    SyncReply,
    WorkerExit,
    decoded_request,
)
from squall.cluster.inprocess import DirectMaster
from squall.cluster.master import Master
from squall.cluster.server import Keeper
from squall.testing import FeederSpout


@pytest.fixture
def master(tmp_path):
    return Master(cluster_conf({"storm.local.dir": str(tmp_path)}))


def _topology():
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    return cloudpickle.dumps(b.create_topology())


class _Sink(Bolt):
    def execute(self, tup):
        pass


def _direct(master):
    return NimbusClient(DirectMaster(master, on_change=lambda storm_id: None).call)


def _handle(master, op, **args):
    return Keeper(master).request(op, args)


def test_every_verb_the_master_serves_is_declared_once_and_every_declared_one_is_served(master):
    served = {name[len("op_"):] for name in dir(master) if name.startswith("op_")}
    assert served == set(VERBS)
    assert LEADER_ONLY <= set(VERBS) and READS <= set(VERBS) and not LEADER_ONLY & READS
    assert {"submit", "kill", "heartbeat", "supervisor_sync"} <= LEADER_ONLY  # Storm's assertIsLeader, and squall's daemons
    assert {"list", "info", "get_leader"} <= READS


def test_a_supervisor_and_its_worker_speak_in_records_through_the_direct_transport(master):
    nimbus = _direct(master)
    storm_id = nimbus.submit("t", {}, _topology())
    reply = nimbus.supervisor_sync(SupervisorSync("s1", "127.0.0.1", [7000]))
    assert isinstance(reply, SyncReply)
    (launch,) = reply.slots.values()
    assert (launch.storm_id, launch.name) == (storm_id, "t")
    a = nimbus.get_assignment(storm_id, "127.0.0.1:7000", address="127.0.0.1:7100", launch_id=launch.launch_id)
    assert a.launch_id == launch.launch_id and a.executors and a.plan is not None
    beat = nimbus.heartbeat(Heartbeat(storm_id, "127.0.0.1:7000", launch.launch_id, stats={1: {"emitted": 0}},
                                      addresses_version=-1, lost_generation=0, epoch="another"))
    assert isinstance(beat, HeartbeatReply) and not beat.stop
    assert beat.peers is not None and beat.addresses_version == a.addresses_version  # it asked with a stale version
    # the worker ends: its exit is a record too, and the master gives the slot a new launch
    again = nimbus.supervisor_sync(SupervisorSync(
        "s1", "127.0.0.1", [7000], exits=(WorkerExit(storm_id, "127.0.0.1:7000", launch.launch_id, 1, True),),
        running=()))
    assert again.slots["7000"].launch_id == launch.launch_id + 1
    stale = nimbus.heartbeat(Heartbeat(storm_id, "127.0.0.1:7000", launch.launch_id))
    assert stale == HeartbeatReply(stop=True)


@pytest.mark.parametrize("op, args, named", [
    ("heartbeat", {"storm_id": "x", "slot": 7000, "launch_id": 1}, "heartbeat: field 'slot' must be str, got int"),
    ("heartbeat", {"storm_id": "x", "slot": "h:1"}, "heartbeat: field 'launch_id' is missing"),
    ("heartbeat", {"storm_id": "x", "slot": "h:1", "launch_id": 1, "cpu": 3}, "heartbeat: unknown field 'cpu'"),
    ("heartbeat", {"storm_id": "x", "slot": "h:1", "launch_id": True}, "heartbeat: field 'launch_id' must be int, got bool"),
    ("supervisor_sync", {"supervisor_id": "s", "host": "h", "ports": [7000],
                         "exits": [{"storm_id": "x", "slot": "h:7000", "launch_id": "1", "status": 1, "started": True}]},
     "supervisor_sync: field 'exits[0].launch_id' must be int, got str"),
    ("supervisor_sync", {"supervisor_id": "s", "host": "h", "ports": ["7000"]},
     "supervisor_sync: field 'ports[0]' must be int, got str"),
    ("supervisor_sync", {"supervisor_id": "s", "host": "h", "ports": [7000], "running": [{"port": 7000}]},
     "supervisor_sync: field 'running[0].storm_id' is missing"),
    ("kill", {"name": b"t"}, "kill: field 'name' must be str, got bytes"),
    ("format_disk", {}, "unknown operation 'format_disk'"),
])
def test_a_request_of_the_wrong_shape_is_refused_naming_the_verb_and_field(master, op, args, named):
    with pytest.raises(ProtocolError, match="^" + named.replace("[", r"\[").replace("]", r"\]")):
        _handle(master, op, **args)
    assert not master.supervisors and not master.topologies  # nothing ran


def test_the_direct_transport_checks_requests_as_rpc_does(master):
    with pytest.raises(RemoteError) as e:
        DirectMaster(master, on_change=lambda storm_id: None).call(
            "supervisor_sync", supervisor_id="s", host="h", ports=[7000], exits=[{"slot": "h:7000"}])
    assert e.value.type == "ProtocolError" and "exits[0].storm_id" in str(e.value)


def test_a_reply_of_the_wrong_shape_is_refused_naming_the_verb_and_field():
    nimbus = NimbusClient(lambda op, **args: {"stop": False, "lost": [{"generation": 1, "slot": "h:1",
                                                                        "tasks": ["3"], "time": 0.0}]})
    with pytest.raises(ProtocolError, match=r"^heartbeat reply: field 'lost\[0\].tasks\[0\]' must be int, got str"):
        nimbus.heartbeat(Heartbeat("x", "h:1", 1))
    with pytest.raises(ProtocolError, match="^list reply: field 'value' must be"):
        NimbusClient(lambda op, **args: "everything").list()


def test_a_record_verb_needs_its_record():
    with pytest.raises(ProtocolError, match="heartbeat: needs a Heartbeat, got dict"):
        NimbusClient(lambda op, **args: None).heartbeat({"storm_id": "x"})


def test_records_reach_the_master_as_the_maps_its_operations_read(master):
    sent = []
    nimbus = NimbusClient(lambda op, **args: (sent.append((op, args)), {"slots": {}})[1])
    nimbus.supervisor_sync(SupervisorSync("s", "h", [7000], (WorkerExit("x", "h:7000", 2, 1, False, "boom"),),
                                          (RunningWorker(7001, "y", 3),)))
    ((op, args),) = sent
    assert op == "supervisor_sync" and decoded_request(op, args)[0].name == op
    assert args["exits"] == [{"storm_id": "x", "slot": "h:7000", "launch_id": 2, "status": 1, "started": False,
                              "output": "boom", "executing": ()}]
    assert args["running"] == [{"port": 7001, "storm_id": "y", "launch_id": 3}]


def test_the_architecture_page_lists_every_verb_with_its_leader_and_read_marks():
    from pathlib import Path
    page = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text()
    table = page.split("### The master's protocol", 1)[1].split("\n\n|", 1)[1].split("\n\n", 1)[0]
    listed = {}
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for name in cells[0].replace("`", "").split(", "):
            listed[name] = (cells[3] == "yes", cells[4] == "yes")
    assert listed == {v.name: (v.leader_only, v.read) for v in VERBS.values()}


def test_no_client_in_squall_calls_a_verb_by_its_name_but_through_the_protocol():
    """Clients are written against `squall._nimbus.NimbusIface` (`nimbus_client`), not copies of
    its verbs: no ``.call("heartbeat", ...)``/``.request("list")`` of a verb spelt out by hand in
    ``squall/`` (the UI's reads go through `UiMasterLink.read`, checked against `READS`; a server,
    its `Keeper.request` among them, dispatches the op it was sent)."""
    import re
    from pathlib import Path

    import squall
    root = Path(squall.__file__).parent
    spelt = re.compile(r"(?<!keeper)\.(?:call|request|_call)\(\s*[\"'](" + "|".join(map(re.escape, VERBS)) + r")[\"']")
    found = [f"{path.relative_to(root.parent)}:{n}: {m.group(1)}" for path in sorted(root.rglob("*.py"))
             if path.name != "_nimbus.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if (m := spelt.search(line))]
    assert found == []


def test_a_heartbeat_through_handle_is_answered_with_the_masters_decisions_and_its_change(master):
    """`Master.handle` takes the worker's `Heartbeat` itself (the direct transport's form) and
    returns an `Outcome` whose reply is a `HeartbeatReply` of what the master decided (the log
    levels it changed since the beat's digest, the peers since its addresses version, then the
    kill) and whose changes hold what the beat changed (its error, kept with the topology)."""
    keeper = Keeper(master)
    storm_id = keeper.request("submit", {"name": "t", "conf": {}, "topology": _topology()})
    sync = keeper.request("supervisor_sync", {"sync": SupervisorSync("s1", "127.0.0.1", [7000])})
    (launch,) = sync.slots.values()
    slot = "127.0.0.1:7000"
    assignment = keeper.request("get_assignment", {"storm_id": storm_id, "slot": slot, "address": "tcp://h:1",
                                                   "launch_id": launch.launch_id, "want_plan": False})
    assert isinstance(assignment, Assignment) and assignment.plan is None
    levels = keeper.request("set_log_config", {"name": "t", "config": LogConfig({"app": LogLevel("UPDATE", "DEBUG")})})
    assert isinstance(levels, LogConfig) and levels.named_logger_level["app"].target_log_level == "DEBUG"

    beat = Heartbeat(storm_id, slot, launch.launch_id, addresses_version=assignment.addresses_version - 1,
                     log_config_digest=assignment.log_config_digest,
                     errors=[{"component": "feed", "task": 1, "time": 5.0, "error": "boom"}])
    outcome = master.handle("heartbeat", {"beat": beat})
    reply = outcome.reply
    assert isinstance(reply, HeartbeatReply) and not reply.stop and reply.active
    assert reply.log_config == levels and reply.log_config_digest not in (None, assignment.log_config_digest)
    assert reply.peers == assignment.peers and set(reply.peers.values()) == {"tcp://h:1"}  # every task here
    assert reply.addresses_version == assignment.addresses_version
    assert reply.launch_ids == {slot: launch.launch_id}
    assert reply.lost == () and reply.lost_generation is None  # it asked nothing of deaths
    (change,) = outcome.changes
    assert change.storm_id == storm_id and [e["error"] for e in change.record["errors"]] == ["boom"]
    keeper.keep(outcome)

    keeper.request("kill", {"name": "t", "wait_secs": 0})
    killed = master.handle("heartbeat", {"beat": Heartbeat(storm_id, slot, launch.launch_id)})
    assert killed.reply == HeartbeatReply(stop=True)


def test_a_reply_record_goes_on_the_wire_without_its_defaults_and_comes_back_whole():
    sent = VERBS["heartbeat"].encode_reply(HeartbeatReply(stop=False, active=True))
    assert sent == {"stop": False, "active": True}
    assert VERBS["heartbeat"].decode_reply(sent) == HeartbeatReply(stop=False, active=True)
    beat = Heartbeat("x", "h:1", 2, started=False)
    assert VERBS["heartbeat"].decode_request(VERBS["heartbeat"].encode_request(beat)) == {"beat": beat}
    assert VERBS["heartbeat"].decode_request({"beat": beat})["beat"] is beat  # in this process: as it is


def test_what_a_dead_worker_was_executing_goes_to_the_spouts_checked_against_its_assignment(master):
    """A supervisor's `WorkerExit` names ``(task, root)`` of the inputs its worker's bolts were
    executing when it died, as the worker's board said: hostile bytes, so the master passes on,
    in the `WorkerLost` the other workers hear of, only roots of 64 bits on bolt tasks of that
    worker, one per bolt executor at most, with how it ended."""
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    b.set_bolt("check", _Sink(), 2).shuffle_grouping("feed")
    nimbus = _direct(master)
    storm_id = nimbus.submit("t", {"topology.workers": 1, "topology.acker.executors": 1},
                             cloudpickle.dumps(b.create_topology()))
    (launch,) = nimbus.supervisor_sync(SupervisorSync("s1", "127.0.0.1", [7000])).slots.values()
    nimbus.get_assignment(storm_id, "127.0.0.1:7000", address="127.0.0.1:7100", launch_id=launch.launch_id)
    topo = master.topologies["t"]
    check, feed = topo.plan.component_tasks["check"], topo.plan.component_tasks["feed"]
    executing = ((check[0], 5), (feed[0], 6), (check[1], 0), (check[1], 1 << 64), (999, 7), (check[1], 8),
                 (check[0], 9))
    nimbus.supervisor_sync(SupervisorSync(
        "s1", "127.0.0.1", [7000], running=(),
        exits=(WorkerExit(storm_id, "127.0.0.1:7000", launch.launch_id, -9, True, "", executing),)))
    lost = topo.lost[-1]
    assert lost.executing == ((check[0], 5), (check[1], 8)) and lost.how == "killed by SIGKILL"
    # what a worker that knew of no death hears in its heartbeat's reply
    assert topo.lost_since(0) == (lost,)
