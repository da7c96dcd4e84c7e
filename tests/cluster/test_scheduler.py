"""`even_schedule` (Storm's EvenScheduler for one topology on free slots)."""

from __future__ import annotations

from squall.cluster.scheduler import EvenScheduler, SchedulerCluster, SchedulerTopology, even_schedule
from squall.engine.plan import ExecutorSpec


def specs(*task_ranges):
    return [ExecutorSpec("c", tuple(r)) for r in task_ranges]


def test_executors_sorted_by_first_task_are_dealt_round_robin():
    executors = specs([5], [1, 2], [3, 4], [6], [7])

    out = even_schedule(executors, [1025, 1024])

    assert {p: [e.tasks for e in es] for p, es in out.items()} == {
        1025: [(1, 2), (5,), (7,)],
        1024: [(3, 4), (6,)],
    }


def test_every_slot_gets_a_list_even_if_empty():
    out = even_schedule(specs([1], [2]), [1024, 1025, 1026])

    assert [len(out[p]) for p in (1024, 1025, 1026)] == [1, 1, 0]


def test_one_slot_gets_everything():
    executors = specs([1], [2], [3])

    assert even_schedule(executors, [1024]) == {1024: executors}


def test_workers_differ_by_at_most_one_executor():
    out = even_schedule(specs(*[[i] for i in range(1, 12)]), [1, 2, 3, 4])

    sizes = sorted(len(es) for es in out.values())
    assert sizes[-1] - sizes[0] <= 1 and sum(sizes) == 11


def test_a_worker_that_runs_on_never_sees_a_peer_workers_executors_split_over_slots():
    """4 workers of 2 executors on 4 machines, one lost and no slot free: 3 slots now, of 3, 3
    and 2. Keeping one survivor's 2 and dealing the 6 others round-robin split every other old
    worker's executors over two slots; the survivor, running on, sends to each peer worker's
    tasks through one connection keyed by that worker (squall.worker.batching), so the tuples
    for the tasks that went to the other slot were dropped there, replays included. A worker
    runs on only when each other old worker's executors land together; here every worker
    restarts on the whole topology placed afresh."""
    executors = [ExecutorSpec("c", (i,)) for i in range(8)]
    before = {f"h{i}:1": [executors[i], executors[i + 4]] for i in range(4)}
    cluster = SchedulerCluster({f"h{i}": [1] for i in (1, 2, 3)}, {"t": before})

    EvenScheduler.schedule_one(SchedulerTopology("t", "t", 4, executors), cluster, None)

    after = cluster.assignments["t"]
    assert sorted(e.tasks for execs in after.values() for e in execs) == [e.tasks for e in executors]  # each once
    where = {e: slot for slot, execs in after.items() for e in execs}
    runs_on = {slot for slot, execs in after.items() if before.get(slot) == execs}
    for slot, execs in before.items():
        if slot not in runs_on:
            assert not runs_on or len({where[e] for e in execs}) == 1, (
                f"{slot}'s executors split over {sorted({where[e] for e in execs})} while {runs_on} run on")
