"""`even_schedule` (Storm's EvenScheduler for one topology on free slots)."""

from __future__ import annotations

from squall.cluster.scheduler import even_schedule
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
