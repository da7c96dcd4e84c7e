"""A master that hears none of its machines suspects itself, not them (`squall.cluster.silence`).

A Nimbus HA leader cut off from every supervisor but not from ZooKeeper (so it keeps the lead),
or a master paused, heard no machine for ``nimbus.supervisor.timeout.secs``, took every one for
lost, moved every executor nowhere, and when it heard them again gave every slot a new launch:
every worker of every topology restarted, though all ran on meanwhile. On a simulated clock:
three machines, each with a worker; the supervisors sync every 0.2 s, the workers beat every
second; then nothing is heard for 8 s (timeouts of 3 s), then everything again."""

import cloudpickle

from squall import TopologyBuilder
from squall._config import cluster_conf
from squall.engine.clock import SimulatedClock
from squall.testing import FeederSpout

from ..acceptance.components import AckBolt
from .served import served

HOSTS = {"s1": "10.0.0.1", "s2": "10.0.0.2", "s3": "10.0.0.3"}


class _Run:
    def __init__(self, tmp_path, workers=3, machines=tuple(HOSTS)):
        conf = cluster_conf({"storm.local.dir": str(tmp_path), "nimbus.task.timeout.secs": 3,
                             "nimbus.supervisor.timeout.secs": 3, "supervisor.monitor.frequency.secs": 0.2})
        self.clock = SimulatedClock(1000.0)
        self.m = served(conf, clock=self.clock)
        self.sync(*machines)
        b = TopologyBuilder()
        b.set_spout("feed", FeederSpout(["x"]), 1)
        b.set_bolt("sink", AckBolt(), 2).shuffle_grouping("feed")
        self.storm_id = self.m.op_submit(name="t", conf={"topology.workers": workers},
                                         topology=cloudpickle.dumps(b.create_topology()))
        self.topo = self.m.topologies["t"]
        for slot, launch in self.topo.launch_ids.items():
            self.m.op_get_assignment(storm_id=self.storm_id, slot=slot, address=f"tcp://{slot}", launch_id=launch,
                                     want_plan=False)
        self.steps = 0

    def sync(self, *sids):
        for sid in sids:
            self.m.op_supervisor_sync(supervisor_id=sid, host=HOSTS[sid], ports=[7000, 7001])

    def run(self, secs, sids=(), beating=None):
        """``secs`` of 0.2 s steps: the supervisors ``sids`` sync at each, the workers of the
        slots ``beating`` (default: of the machines ``sids``) beat each second; the master ticks."""
        for _ in range(round(secs / 0.2)):
            self.clock.advance(0.2)
            self.steps += 1
            self.sync(*sids)
            if self.steps % 5 == 0:
                for slot, launch in self.placed().items():
                    if (beating is None and slot.rsplit(":", 1)[0] in {HOSTS[s] for s in sids}) \
                            or (beating is not None and slot in beating):
                        self.m.op_heartbeat(storm_id=self.storm_id, slot=slot, launch_id=launch, lost_generation=0)
            self.m.monitor()

    def placed(self):
        """slot -> its launch id."""
        return {slot: self.topo.launch_ids[slot] for slot in self.topo.assignment}

    def errors(self):
        return [e["error"] for e in self.m.op_info(name="t")["errors"]]


def test_every_machine_silent_at_once_is_not_taken_for_lost_and_nothing_restarts_when_heard_again(tmp_path, caplog):
    r = _Run(tmp_path)
    r.run(2, sids=tuple(HOSTS))
    before = r.placed()
    assert len(before) == 3
    r.run(8)  # the master hears nothing: its link is cut, or it is paused
    assert r.placed() == before, "the master took its machines for lost though it heard none of them"
    assert len(r.m.supervisors) == 3
    r.run(6, sids=tuple(HOSTS))  # healed: every machine syncs, every worker beats
    assert r.placed() == before, "workers were restarted after the heal"
    assert all(w["alive"] and w["restarts"] == 0 for w in r.m.op_info(name="t")["workers"])
    errors = r.errors()
    assert not [e for e in errors if "taken for lost" in e or "restarted it" in e], errors
    [said] = errors
    assert said.startswith("the master heard none of its 3 supervisors for 3 s"), said
    assert "takes none of them for lost: it moves no executor and restarts no worker" in said, said
    assert "hears its machines again after 8 s in which it heard none" in caplog.text


def test_a_machine_still_silent_after_the_others_are_heard_again_is_lost_a_timeout_later(tmp_path):
    r = _Run(tmp_path)
    r.run(2, sids=tuple(HOSTS))
    before = r.placed()
    lost = next(s for s in before if s.startswith(HOSTS["s3"]))
    r.run(8)
    r.run(2, sids=("s1", "s2"))  # s3 does not come back: within its new timeout, still held
    assert r.placed() == before
    r.run(3, sids=("s1", "s2"))
    after = r.placed()
    assert lost not in after and "s3" not in r.m.supervisors
    assert {s: after[s] for s in before if s != lost} == {s: before[s] for s in before if s != lost}, \
        "the workers of the machines heard again were restarted"
    assert [e for e in r.errors() if f"worker on {lost}" in e and "taken for lost" in e]


def test_a_machine_lost_before_the_others_fell_silent_is_still_lost(tmp_path):
    """One machine dies; 2 s later (more than the grace of 1.5 s: half the 3 s timeout) the
    master hears none of the others: the first was lost on its own, and its executors go to a
    machine heard after it, whose supervisor learns of them once heard again."""
    r = _Run(tmp_path, workers=2)
    r.run(2, sids=tuple(HOSTS))
    before = r.placed()
    [dead] = [sid for sid, h in HOSTS.items() if any(s.startswith(h) for s in before)][:1]
    r.run(2, sids=tuple(s for s in HOSTS if s != dead))
    r.run(8)
    after = r.placed()
    assert dead not in r.m.supervisors and len(r.m.supervisors) == 2
    assert not [s for s in after if s.startswith(HOSTS[dead])] and len(after) == 2


def test_a_lone_machine_falling_silent_is_not_taken_for_lost(tmp_path):
    """With one machine there is nowhere to move its executors: a master that hears nothing
    keeps its assignment, and the machine heard again runs on."""
    r = _Run(tmp_path, workers=1, machines=("s1",))
    r.run(2, sids=("s1",))
    before = r.placed()
    assert list(before) == [f"{HOSTS['s1']}:7000"]
    r.run(8)
    r.run(4, sids=("s1",))
    assert r.placed() == before
    assert all(w["alive"] and w["restarts"] == 0 for w in r.m.op_info(name="t")["workers"])


def test_a_worker_hung_before_the_master_heard_none_is_restarted_when_its_own_timeout_ends(tmp_path):
    """A worker that stopped beating 2 s before the master went deaf (of its 3 s timeout: it
    had 1 s left) is hung, not cut off: after the heal it has what was left of its timeout, the
    8 s the master heard nothing not counted. Given ``nimbus.task.launch.secs`` anew as the
    workers beating until the cut are, it was restarted 121 s after the heal. The others, which
    beat on, are not restarted."""
    r = _Run(tmp_path)
    r.run(2, sids=tuple(HOSTS))
    before = r.placed()
    hung = next(s for s in before if s.startswith(HOSTS["s1"]))
    healthy = [s for s in before if s != hung]
    r.run(2, sids=tuple(HOSTS), beating=healthy)  # 2 s without a beat from the hung one
    r.run(8)  # the master hears nothing
    r.run(3, sids=tuple(HOSTS), beating=healthy)
    after = r.placed()
    assert after[hung] != before[hung], "the hung worker was not restarted 3 s after the heal"
    assert {s: after[s] for s in healthy} == {s: before[s] for s in healthy}, "a worker that beat on was restarted"
    said = [e for e in r.errors() if f"worker on {hung}" in e and "restarted it" in e]
    assert len(said) == 1 and "missed heartbeats for nimbus.task.timeout.secs (3 s)" in said[0], r.errors()
