"""What the master tells the user when a machine is cut off: its worker and its supervisor fall
silent together. Its supervisor syncs more often than its worker beats (0.2 s against 1 s on
the test clusters), so the worker's silence reaches ``nimbus.task.timeout.secs`` first, while
the supervisor's last sync is still within it.

Seen on machines made of network namespaces, one cut off from the master: the topology's errors
said ``worker on 10.213.x.2:port (components ...) missed heartbeats for nimbus.task.timeout.secs
(3 s): restarted it (user code holding the interpreter? its output ... has the threads'
stacks)``, and nothing else: the worker was not restarted (its machine was unreachable), its
executors moved to another machine a moment later, which no error said."""

import cloudpickle

from squall import TopologyBuilder
from squall._config import cluster_conf
from squall.engine.clock import SimulatedClock
from squall.testing import FeederSpout

from ..acceptance.components import AckBolt
from .served import served


def _topology():
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 1)
    b.set_bolt("sink", AckBolt(), 2).shuffle_grouping("feed")
    return cloudpickle.dumps(b.create_topology())


def test_a_machine_cut_off_is_said_to_be_lost_with_its_executors_moved_not_its_worker_restarted(tmp_path):
    conf = cluster_conf({"storm.local.dir": str(tmp_path), "nimbus.task.timeout.secs": 3,
                         "nimbus.supervisor.timeout.secs": 3})
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    for sid, host in (("s1", "10.0.0.1"), ("s2", "10.0.0.2")):
        m.op_supervisor_sync(supervisor_id=sid, host=host, ports=[7000])
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = m.topologies["t"]
    slot = "10.0.0.1:7000"
    assert list(topo.assignment) == [slot]
    launch = topo.launch_ids[slot]
    m.op_get_assignment(storm_id=storm_id, slot=slot, address="tcp://10.0.0.1:7000", launch_id=launch,
                        want_plan=False)
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=launch, lost_generation=0)
    # the worker beats every second, both supervisors sync every 0.2 s; the link of 10.0.0.1 is
    # cut 0.8 s after the worker's last beat, right after its supervisor's last sync
    for step in range(1, 10):
        clock.advance(0.2)
        m.op_supervisor_sync(supervisor_id="s1", host="10.0.0.1", ports=[7000])
        m.op_supervisor_sync(supervisor_id="s2", host="10.0.0.2", ports=[7000])
        if step % 5 == 0:
            m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=launch, lost_generation=0)
        m.monitor()
    for _ in range(25):  # 5 s: only 10.0.0.2 is heard from
        clock.advance(0.2)
        m.op_supervisor_sync(supervisor_id="s2", host="10.0.0.2", ports=[7000])
        m.monitor()
    assert list(topo.assignment) == ["10.0.0.2:7000"]
    errors = [e["error"] for e in m.op_info(name="t")["errors"]]
    assert not [e for e in errors if "restarted it" in e], errors
    [lost] = [e for e in errors if slot in e]
    assert "components __acker, feed, sink" in lost and "lost its link to the master" in lost, lost
    assert "its executors go to the other machines' free slots" in lost, lost


def test_a_lost_machines_executors_move_together_and_the_other_workers_run_on(tmp_path):
    """As Storm's DefaultScheduler: when a machine is lost, its worker's executors go together
    to one free slot, and the topology's other workers keep their executors and their launch
    (not restarted). Before, the whole topology was placed afresh: the surviving worker got a
    new mix of executors and restarted, its tasks (their in-memory state; a file state, which is
    refused on another machine) moved, and the lost worker's executors were split over slots."""
    conf = cluster_conf({"storm.local.dir": str(tmp_path), "nimbus.task.timeout.secs": 3,
                         "nimbus.supervisor.timeout.secs": 3})
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    hosts = {"s1": "10.0.0.1", "s2": "10.0.0.2", "s3": "10.0.0.3", "s4": "10.0.0.4"}

    def sync(*sids):
        for sid in sids:
            m.op_supervisor_sync(supervisor_id=sid, host=hosts[sid], ports=[7000])

    sync(*hosts)
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]), 2)
    b.set_bolt("sink", AckBolt(), 4).shuffle_grouping("feed")
    storm_id = m.op_submit(name="t", conf={"topology.workers": 3}, topology=cloudpickle.dumps(b.create_topology()))
    topo = m.topologies["t"]
    before = {slot: (list(idx), topo.launch_ids[slot]) for slot, idx in topo.assignment.items()}
    assert len(before) == 3
    for slot, (_, launch) in before.items():
        m.op_get_assignment(storm_id=storm_id, slot=slot, address=f"tcp://{slot}", launch_id=launch, want_plan=False)
    lost, *alive = sorted(before)
    survivors = [sid for sid, h in hosts.items() if not lost.startswith(h)]
    for step in range(40):  # 8 s: the lost machine falls silent, the others sync and beat
        clock.advance(0.2)
        sync(*survivors)
        if step % 5 == 0:
            for slot in alive:
                m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=before[slot][1], lost_generation=0)
        m.monitor()
    after = {slot: (list(idx), topo.launch_ids[slot]) for slot, idx in topo.assignment.items()}
    assert lost not in after and len(after) == 3
    for slot in alive:
        assert after[slot] == before[slot], f"{slot} was given other executors or a new launch"
    [(moved, _)] = [a for s, a in after.items() if s not in before]
    assert moved == before[lost][0], "the lost worker's executors did not move together"


def _silent_worker_error(tmp_path, host: str) -> str:
    """The error of the one worker on ``host``'s slot 0 that beat once and then fell silent while
    its supervisor went on syncing."""
    conf = cluster_conf({"storm.local.dir": str(tmp_path), "nimbus.task.timeout.secs": 3})
    clock = SimulatedClock(1000.0)
    m = served(conf, clock=clock)
    m.op_supervisor_sync(supervisor_id="s1", host=host, ports=[0])
    storm_id = m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    slot = f"{host}:0"
    launch = m.topologies["t"].launch_ids[slot]
    m.op_get_assignment(storm_id=storm_id, slot=slot, address="tcp://127.0.0.1:40000", launch_id=launch,
                        want_plan=False)
    m.op_heartbeat(storm_id=storm_id, slot=slot, launch_id=launch, lost_generation=0)
    for _ in range(20):  # 4 s: the supervisor syncs, the worker is silent
        clock.advance(0.2)
        m.op_supervisor_sync(supervisor_id="s1", host=host, ports=[0])
        m.monitor()
    [error] = [e["error"] for e in m.op_info(name="t")["errors"]]
    assert f"worker on {slot} (components __acker, feed, sink) missed heartbeats" in error, error
    return error


def test_a_silent_spark_worker_is_not_sent_to_a_supervisors_log_that_spark_has_not(tmp_path):
    """On Spark no supervisor watches the worker's process or takes its stacks, and the usual
    silence is an executor lost with no free slot for the task Spark retries (a chaos run on a
    standalone cluster): the error said ``user code holding the interpreter? its output,
    worker-<port>.log of its supervisor, has the threads' stacks``, a file and a dump that do not
    exist there. The process host's error keeps its pointer."""
    spark = _silent_worker_error(tmp_path / "spark", "spark")
    assert "worker-<port>.log" not in spark and "stacks)" not in spark, spark
    assert "executor or Spark worker lost, with no free task slot" in spark, spark
    assert "see the worker's worker.log and its executor's stderr" in spark, spark
    process = _silent_worker_error(tmp_path / "process", "10.0.0.1")
    assert "its output, worker-<port>.log of its supervisor, has the threads' stacks" in process, process
