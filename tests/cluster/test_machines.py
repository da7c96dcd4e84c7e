"""`squall.cluster.machines`: the master's machines silent, held, reached again or lost, as a
state machine fed with times and ZooKeeper's answers, and the instructions each step returns.
No master, no cluster, no ZooKeeper: what ZooKeeper says is a `PresenceReads` built here, as the
master's shell builds it from its reads (`squall.cluster.liveness.read_presences`)."""

from squall.cluster.liveness import Presence, PresenceReads
from squall.cluster.machines import (
    Forgotten,
    MachineLost,
    Machines,
    NodeLost,
    Renew,
    RenewMachine,
    Restart,
    Say,
    Timeouts,
    WorkerAt,
    WorkerWait,
)
from squall.cluster.master_records import SupervisorInfo

T = Timeouts(supervisor=3.0, task=3.0, launch=120.0, beat=1.0)
GRACE = 1.5


def _machines(**seen):
    """Supervisors s1, s2 ... on 10.0.0.1, 10.0.0.2 ..., ports 7000 and 7001, last heard at ``seen``."""
    return {sid: SupervisorInfo(f"10.0.0.{sid[1:]}", [7000, 7001], t) for sid, t in seen.items()}


def _zookeeper_hears(sups, *sids, unanswered=()):
    return PresenceReads({sid: Presence(sid, sups[sid].host, tuple(sups[sid].ports)) for sid in sids},
                         dict.fromkeys(unanswered, ConnectionError("not connected to ZooKeeper")))


def _tick(m, now, sups, reads=None, waits=()):
    """One tick of the master: what it is told to do, as the shell runs it (lost machines dropped
    between the two steps)."""
    out = m.heard_again(now, sups, [], T)
    out += m.silent_machines(now, sups, reads, T)
    for i in out:
        if isinstance(i, MachineLost):
            del sups[i.supervisor_id]
    return out + m.silent_workers(now, sups, list(waits), T)


def _said(out):
    return [i for i in out if isinstance(i, Say)]


def test_a_machine_silent_while_another_is_heard_is_lost():
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=103.5)
    assert m.to_ask(104.0, sups, T) == ["s1"]
    assert _tick(m, 104.0, sups) == [MachineLost("s1", 4.0)]
    assert m.silence.spell is None


def test_every_machine_silent_at_once_is_held_said_once_and_given_its_timeout_anew_when_one_is_heard():
    """The master's own link is cut (or it was paused): s1 and s2 fell silent 0.5 s apart, within
    the grace. Nothing is lost, it is said once; the first machine heard again ends the spell,
    and the other machine and the workers not heard since get their timeouts anew."""
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=100.5)
    waits = [WorkerWait("t-1", "10.0.0.1:7000", 100.2, False), WorkerWait("t-1", "10.0.0.2:7000", 100.4, False)]
    first = _tick(m, 104.0, sups, waits=waits)
    [say] = first
    assert say.slots is None and not say.logged_only  # every topology with workers records it
    assert say.what.startswith("heard none of its 2 supervisors for 4 s, and they fell silent within 1.5 s")
    assert _tick(m, 106.0, sups, waits=waits) == []  # still held, not said again
    sups["s2"].seen = 108.0  # s2 syncs again
    workers = [WorkerAt("t-1", "10.0.0.1:7000", 100.2), WorkerAt("t-1", "10.0.0.2:7000", 100.4),
               WorkerAt("t-1", "10.0.0.2:7001", 108.0)]  # the last beat after the heal
    out = m.heard_again(108.2, sups, workers, T)
    assert out[:3] == [RenewMachine("s1", 108.2), Renew("t-1", "10.0.0.1:7000", 108.2, True),
                       Renew("t-1", "10.0.0.2:7000", 108.2, True)]
    assert out[3].logged_only and "hears its machines again after 8 s in which it heard none" in out[3].what
    assert m.silence.spell is None


def test_a_worker_hung_before_the_master_heard_none_keeps_what_was_left_of_its_timeout():
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=100.5)
    _tick(m, 104.0, sups)
    sups["s1"].seen = 110.0
    out = m.heard_again(110.0, sups, [WorkerAt("t-1", "10.0.0.2:7000", 98.0)], T)
    # silent 2.5 s before the last machine was heard: the 9.5 s deaf time is not counted
    assert Renew("t-1", "10.0.0.2:7000", 98.0 + 9.5, None) in out


def test_a_machine_zookeeper_hears_is_held_said_once_and_its_workers_get_the_launch_timeout_when_reached_again():
    """Only the link between the master and s1 is down: ZooKeeper hears s1, s2 syncs on. s1 is
    not lost, nor its silent worker restarted or moved; it is said once, naming its slots. When
    s1 syncs again, its workers not heard since it was held get the launch timeout from then."""
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=103.9)
    waits = [WorkerWait("t-1", "10.0.0.1:7000", 100.0, False)]
    out = _tick(m, 104.0, sups, _zookeeper_hears(sups, "s1"), waits)
    [say] = out
    assert say.slots == {"10.0.0.1:7000", "10.0.0.1:7001"} and not say.logged_only
    assert say.what.startswith("cannot reach supervisor s1 on 10.0.0.1 (unheard for 4 s), but ZooKeeper hears it")
    assert m.holds("s1") and m.zookeeper_hears == {"s1"}
    sups["s2"].seen = 111.9
    assert _tick(m, 112.0, sups, _zookeeper_hears(sups, "s1"), waits) == []  # held on, not said again
    out = m.reached("s1", "10.0.0.1", [7000, 7001], 113.0,
                    [WorkerAt("t-1", "10.0.0.1:7000", 100.0), WorkerAt("t-1", "10.0.0.1:7001", 112.5),
                     WorkerAt("t-1", "10.0.0.2:7000", 100.0)])
    assert out[0] == Renew("t-1", "10.0.0.1:7000", 113.0, True)  # only its own, not heard since held
    assert len(out) == 2 and out[1].logged_only
    assert "hears supervisor s1 on 10.0.0.1 again after 13 s in which only ZooKeeper heard it" in out[1].what
    assert not m.holds("s1") and m.reached("s1", "10.0.0.1", [7000], 114.0, []) == []


def test_a_machine_zookeeper_stops_hearing_is_lost():
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=103.9)
    _tick(m, 104.0, sups, _zookeeper_hears(sups, "s1"))
    sups["s2"].seen = 105.9
    held = m.presences.held["s1"]
    assert _tick(m, 106.0, sups, _zookeeper_hears(sups)) == [Forgotten(held), MachineLost("s1", 6.0)]
    assert "s1" not in sups and not m.holds("s1")


def test_a_machine_zookeeper_cannot_be_asked_about_is_held_unsaid_for_that_tick():
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=103.9)
    assert _tick(m, 104.0, sups, _zookeeper_hears(sups, unanswered=["s1"])) == []
    assert m.zookeeper_hears == {"s1"} and not m.holds("s1")
    out = _tick(m, 104.5, sups, PresenceReads({}, {}))  # ZooKeeper could not be asked at all
    assert out == [MachineLost("s1", 4.5)]


def test_a_node_naming_another_host_does_not_hold_the_machine():
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=103.9)
    reads = PresenceReads({"s1": Presence("s1", "10.9.9.9", (7000,))}, {})
    assert _tick(m, 104.0, sups, reads) == [MachineLost("s1", 4.0)]


def test_a_silent_worker_is_restarted_in_place_once_its_supervisor_is_heard_after_its_limit():
    m = Machines(GRACE)
    sups = _machines(s1=103.0, s2=103.0)
    waits = [WorkerWait("t-1", "10.0.0.1:7000", 99.5, False), WorkerWait("t-1", "10.0.0.2:7000", 0.0, True)]
    # the first is silent 4.5 s past its 3 s; the second started 104 s ago, within its launch limit
    assert _tick(m, 104.0, sups, waits=waits) == [Restart("t-1", "10.0.0.1:7000", 4.5, 3.0, False)]
    sups["s1"].seen = 102.0  # not heard since the worker's limit passed (102.5): waits for the next sync
    assert _tick(m, 104.0, sups, waits=waits[:1]) == []


def test_a_worker_silent_with_its_supervisor_is_lost_with_the_whole_machine():
    """s1's supervisor is silent 3.5 s (past the task timeout, not yet the supervisor's 4 s) and
    its worker too; s2 is heard: the machine is lost, both its slots go."""
    m = Machines(GRACE)
    t = Timeouts(supervisor=4.0, task=3.0, launch=120.0, beat=1.0)
    sups = _machines(s1=100.5, s2=103.9)
    waits = [WorkerWait("t-1", "10.0.0.1:7000", 100.0, False)]
    out = m.silent_machines(104.0, sups, None, t) + m.silent_workers(104.0, sups, waits, t)
    assert out == [NodeLost(("s1",), frozenset({"10.0.0.1:7000", "10.0.0.1:7001"}))]


def test_a_worker_silent_with_its_supervisor_on_a_machine_zookeeper_hears_is_left_alone():
    m = Machines(GRACE)
    t = Timeouts(supervisor=4.0, task=3.0, launch=120.0, beat=1.0)
    sups = _machines(s1=100.5, s2=103.9)
    waits = [WorkerWait("t-1", "10.0.0.1:7000", 100.0, False)]
    out = m.silent_machines(104.0, sups, _zookeeper_hears(sups, "s1"), t) + m.silent_workers(104.0, sups, waits, t)
    assert [type(i) for i in out] == [Say]


def test_taking_the_lead_forgets_every_hold_and_spell():
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=103.9)
    _tick(m, 104.0, sups, _zookeeper_hears(sups, "s1"))
    m.silence.held("s1", _machines(s1=100.0, s2=100.2), 104.0)  # a spell begun too
    assert m.holds("s1") and m.silence.spell is not None
    m.lead()
    assert not m.holds("s1") and m.silence.spell is None and not m.zookeeper_hears


def test_without_zookeeper_holds_are_forgotten_unsaid():
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=103.9)
    _tick(m, 104.0, sups, _zookeeper_hears(sups, "s1"))
    sups["s1"].seen = sups["s2"].seen = 104.5  # nothing silent: nothing to ask ZooKeeper
    assert _tick(m, 105.0, sups, None) == [] and not m.holds("s1")


def test_a_machine_only_zookeeper_hears_is_reported_again_once_after_five_supervisor_timeouts():
    """Held for as long as ZooKeeper hears it, never moved; but at 5 supervisor timeouts unheard
    (15 s here) the master says it again, once a hold, naming the machine and what to do."""
    m = Machines(GRACE)
    sups = _machines(s1=100.0, s2=103.9)
    [held] = _tick(m, 104.0, sups, _zookeeper_hears(sups, "s1"))  # 4 s unheard: held, said
    for now in (105.0, 110.0, 114.9):
        sups["s2"].seen = now
        assert _tick(m, now, sups, _zookeeper_hears(sups, "s1")) == []
    sups["s2"].seen = 115.0
    [again] = _tick(m, 115.0, sups, _zookeeper_hears(sups, "s1"))
    assert again.slots == held.slots and not again.logged_only
    assert again.what.startswith("still cannot reach supervisor s1 on 10.0.0.1 after 15 s (5 nimbus.supervisor"), \
        again.what
    assert "to move its executors now, stop the supervisor on 10.0.0.1" in again.what
    for now in (116.0, 200.0, 1000.0):  # not said again, and still not lost
        sups["s2"].seen = now
        assert _tick(m, now, sups, _zookeeper_hears(sups, "s1")) == []
    # reached again, then held again: a new hold, reported again at its own bound
    m.reached("s1", "10.0.0.1", [7000, 7001], 1001.0, [])
    sups["s1"].seen = 1001.0
    sups["s2"].seen = 1005.0
    assert len(_tick(m, 1005.0, sups, _zookeeper_hears(sups, "s1"))) == 1  # held, said
    sups["s2"].seen = 1016.0
    [again] = _tick(m, 1016.0, sups, _zookeeper_hears(sups, "s1"))
    assert again.what.startswith("still cannot reach supervisor s1 on 10.0.0.1 after 15 s"), again.what



class _Shell:
    """The master's shell around `Machines`, as `squall.cluster.master.Master` carries out what it
    returns: supervisors heard, workers' last beats moved (`RenewMachine`, `Renew`), lost machines
    dropped; what is said and restarted is kept to be counted."""

    def __init__(self, sups, beats):
        self.m, self.sups, self.beats = Machines(GRACE), sups, beats  # beats: slot -> (time, starting)
        self.said, self.restarted = [], []

    def carry_out(self, out, now):
        for i in out:
            if isinstance(i, RenewMachine):
                self.sups[i.supervisor_id].seen = i.seen
            elif isinstance(i, Renew):
                _, starting = self.beats[i.slot]
                self.beats[i.slot] = (i.time, starting if i.starting is None else i.starting)
            elif isinstance(i, MachineLost):
                del self.sups[i.supervisor_id]
            elif isinstance(i, Say):
                self.said.append(i.what)
            elif isinstance(i, Restart):  # a new launch: its start timeout runs from now
                self.restarted.append(i.slot)
                self.beats[i.slot] = (now, True)

    def tick(self, now, zookeeper_hears):
        at = [WorkerAt("t-1", slot, time) for slot, (time, _) in self.beats.items()]
        self.carry_out(self.m.heard_again(now, self.sups, at, T), now)
        asked = self.m.to_ask(now, self.sups, T)  # none to ask: no ZooKeeper read (None)
        reads = _zookeeper_hears(self.sups, *(s for s in zookeeper_hears if s in asked)) if asked else None
        self.carry_out(self.m.silent_machines(now, self.sups, reads, T), now)
        waits = [WorkerWait("t-1", slot, time, starting) for slot, (time, starting) in self.beats.items()]
        self.carry_out(self.m.silent_workers(now, self.sups, waits, T), now)

    def sync(self, sid, now):
        if self.m.holds(sid):
            at = [WorkerAt("t-1", slot, time) for slot, (time, _) in self.beats.items()]
            self.carry_out(self.m.reached(sid, self.sups[sid].host, self.sups[sid].ports, now, at), now)
        self.sups[sid].seen = now


def test_a_machine_zookeeper_holds_keeps_its_hold_when_a_spell_of_silence_ends():
    """s1 is cut off from the master alone (ZooKeeper hears it): held at 104, said once, and
    reported again at 5 timeouts (115). The master then hears nothing for 10 s (it was paused;
    s2 keeps no ZooKeeper node): a spell of silence, which ends when s2 syncs at 131. That was
    the master's own silence, not s1's: yet s1 was given its timeout anew and its worker a new
    last beat as if heard, so its hold ended unsaid, and it was held and said again (as
    "unheard for 3 s", after 35 s) and reported again; and when s1 was reached at 200 its
    worker, its beat moved past the hold's start, was not given the launch timeout but
    restarted in place at the next tick, though it had run on all along."""
    sh = _Shell(_machines(s1=100.0, s2=103.9), {"10.0.0.1:7000": (99.8, False), "10.0.0.2:7000": (103.5, False)})

    def heard_s2(now):
        sh.sync("s2", now)
        sh.beats["10.0.0.2:7000"] = (now, False)

    for step in range(1040, 1201):  # 0.1 s ticks, s2 and its worker heard at each
        heard_s2(step / 10)
        sh.tick(step / 10, ["s1"])
    sh.tick(130.0, ["s1"])  # paused from 120 to 130: nothing heard
    for step in range(1310, 2000):
        heard_s2(step / 10)
        sh.tick(step / 10, ["s1"])
    assert sh.m.holds("s1") and "s1" in sh.sups
    about_s1 = [w for w in sh.said if "supervisor s1 " in w]
    assert [w.split(" on ")[0] for w in about_s1] == ["cannot reach supervisor s1", "still cannot reach supervisor s1"], \
        about_s1
    assert sh.restarted == []
    sh.sync("s1", 200.0)  # the link heals; s1's worker beats again within the launch timeout
    heard_s2(200.0)
    sh.tick(200.1, ["s1"])
    assert sh.restarted == [], "the worker of a machine reached again was restarted in place"
    assert sh.beats["10.0.0.1:7000"] == (200.0, True)
