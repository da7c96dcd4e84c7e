"""A stateful task's old worker cut off from the master (not dead: a zombie) while the master
moved the task to another worker, both writing one Redis state (`squall.state.redis`).

Seen on the process host with machines in network namespaces (a Redis stream -> a stateful
counter on Redis -> a Redis sink; the machine holding ``$checkpointspout`` and two counter tasks
cut off from the master only, Redis still reachable): the zombie's checkpoint spout, in recovery
for as long as the cut lasts, sent ROLLBACK to its own counter tasks every 2 x the message
timeout, and each deleted ``<ns>$prepare`` and the ``prepare`` txid of the state the task's new
copy was using. One landing between the new copy's PREPARE and its COMMIT made that COMMIT
commit nothing, while it acked the tuples: their counts lost. Here the same writes are played
directly, in that order, with the workers' launch tables as the master gave them."""

from collections import Counter

import pytest

from squall._worker_resources import LAUNCH, LaunchView, WorkerResources
from squall.state import StateError, StateHome, get_state

from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture
from .test_redis import KEY, conf

redis = pytest.importorskip("redis")

A, B, C = "10.0.0.2:6700", "10.0.0.3:6700", "10.0.0.4:6700"


class Ctx:
    """A task's context in a worker of slot ``slot``, launch ``launch``, that last heard the
    master's launch table ``table`` (floor ``floor``)."""

    def __init__(self, slot, launch, table, floor=0, run="part-1-1000"):
        self.run = run
        self.state_home = StateHome(key=KEY)
        self.worker_resources = WorkerResources()
        self.view = self.worker_resources.get_or_make(LAUNCH, lambda: LaunchView(slot, launch, table, floor))

    def get_this_component_id(self):
        return "count"

    def get_this_task_id(self):
        return 6

    def get_storm_id(self):
        return self.run


def _count(state, ids):
    for i in ids:
        state.put(i % 7, state.get(i % 7, 0) + 1)


def test_a_zombie_worker_cannot_roll_back_or_overwrite_what_the_tasks_new_copy_prepared(redis_server):  # noqa: F811
    c = conf(redis_server)
    # before the cut: task 6 runs on A (launch 1), beside B (launch 1)
    zombie = get_state("count-6", c, Ctx(A, 1, {A: 1, B: 1}))
    _count(zombie, range(70))
    zombie.prepare_commit(1)
    zombie.commit(1)
    # A is cut off from the master: after nimbus.task.timeout.secs the master replaces A's
    # launch and moves task 6 to C (a new slot: its first launch is above the floor), and B,
    # whose executors changed, restarts as launch 2
    new = get_state("count-6", c, Ctx(C, 3, {B: 2, C: 3}, floor=2))
    _count(new, range(70, 140))
    new.prepare_commit(2)
    # the zombie's checkpoint spout, in recovery, rolls its tasks back: refused, nothing deleted
    with pytest.raises(StateError, match=r"took it over") as refused:
        zombie.rollback()
    assert f"worker {C}, launch 3 took it over" in str(refused.value)
    assert f"this worker ({A}, launch 1)" in str(refused.value)
    # nor may it prepare its own changes over the new copy's, nor write at once
    _count(zombie, range(140, 210))
    with pytest.raises(StateError, match=r"took it over"):
        zombie.prepare_commit(2)
    with pytest.raises(StateError, match=r"took it over"):
        zombie.commit()
    new.commit(2)
    # every one of the 140 records counted once: what the zombie counted after the cut (ids
    # 140..209, which its peers dropped and the spout replays to the new copy) is not there
    counts = dict(get_state("count-6", c, Ctx(C, 3, {B: 2, C: 3}, floor=2)).committed())
    assert counts == dict(Counter(i % 7 for i in range(140)))


def test_a_worker_restarted_in_place_takes_the_state_over_and_its_old_launch_is_fenced(redis_server):  # noqa: F811
    """The master restarted task 6's worker on its slot (it missed heartbeats, say a long pause),
    while the old process still runs: the new launch writes, the old one no longer may. And a
    worker with no launch table (a `LocalCluster`'s, or a state read outside a worker) writes as
    before."""
    c = conf(redis_server)
    old = get_state("count-6", c, Ctx(A, 1, {A: 1}))
    _count(old, range(10))
    old.prepare_commit(1)
    old.commit(1)
    again = get_state("count-6", c, Ctx(A, 2, {A: 2}))
    _count(again, range(10, 20))
    again.prepare_commit(2)
    with pytest.raises(StateError, match=r"took it over"):
        old.rollback()
    again.commit(2)
    assert dict(get_state("count-6", c, Ctx(A, 2, {A: 2})).committed()) == dict(Counter(i % 7 for i in range(20)))
    from .test_redis import Ctx as Plain
    plain = get_state("count-3", c, Plain())
    plain.put("a", 1)
    plain.prepare_commit(1)
    plain.commit(1)
    assert get_state("count-3", c, Plain()).get("a") == 1


@pytest.mark.parametrize(("same_slot", "before", "run"), [
    (False, "part-1-1000", "part-2-2000"), (True, "part-1-1000", "part-2-2000"),
    # submitted by a Nimbus HA leader whose clock is 10 s behind the one before
    (False, "part-1-1000", "part-2-990"),
    # the master's clock set back 2 minutes between the two submissions (NTP stepped a clock
    # that ran ahead, or the master restarted on another machine on the same storm.local.dir):
    # the counter goes on, the times go backwards
    (False, "part-3-1000", "part-4-880"), (True, "part-3-1000", "part-4-880"),
    # storm.local.dir wiped (a cluster started afresh): the counter starts over, 30 s later
    (False, "part-3-1000", "part-1-1030"), (True, "part-3-1000", "part-1-1030"),
])
def test_a_topology_resubmitted_under_its_name_writes_the_states_its_last_submission_left(
        redis_server, same_slot, before, run):  # noqa: F811
    """States are scoped by the topology's name: a topology killed and submitted again finds
    them. Launch ids count afresh in each submission (a slot's first launch is 1), so the new
    submission's worker, on another slot or on the same one, finds as last writer a launch its
    table cannot know; it takes the state over, whatever the two storm ids say (a master's
    clock may lag or be set back, a wiped cluster counts afresh). A worker of the killed
    submission still running (cut off from the master when the kill came) may no longer write."""
    c = conf(redis_server)
    # the first submission: task 6's worker on A restarted twice (launch 3)
    first = get_state("count-6", c, Ctx(A, 3, {A: 3, B: 1}, run=before))
    _count(first, range(70))
    first.prepare_commit(5)
    first.commit(5)
    # killed; submitted again: task 6 on a first launch, on A again or on C
    slot = A if same_slot else C
    again = get_state("count-6", c, Ctx(slot, 1, {slot: 1}, run=run))
    assert dict(again.committed()) == dict(Counter(i % 7 for i in range(70)))
    _count(again, range(70, 140))
    again.prepare_commit(1)
    # the killed submission's worker, cut off from the master, rolls back: refused
    with pytest.raises(StateError, match=rf"later submission {run}") as refused:
        first.rollback()
    assert f"submission {before}" in str(refused.value)
    again.commit(1)
    _count(again, range(140, 150))
    again.prepare_commit(2)
    again.commit(2)
    # every one of the 150 records counted once
    counts = dict(get_state("count-6", c, Ctx(slot, 1, {slot: 1}, run=run)).committed())
    assert counts == dict(Counter(i % 7 for i in range(150)))
