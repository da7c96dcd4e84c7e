"""Schedulers: which worker slot runs which executors.

`even_schedule` is Storm's ``EvenScheduler`` for one topology on free slots: executors sorted by
their first task are dealt round-robin onto the slots, so every worker gets an even share.
"""

from __future__ import annotations

from ..engine.plan import ExecutorSpec


def even_schedule(executors: list[ExecutorSpec], slots: list[int]) -> dict[int, list[ExecutorSpec]]:
    """Deal ``executors`` round-robin onto ``slots`` (ports); every slot gets a list.

    >>> from squall.engine.plan import ExecutorSpec
    >>> es = [ExecutorSpec("a", (1,)), ExecutorSpec("a", (2,)), ExecutorSpec("b", (3,))]
    >>> {p: [e.tasks for e in x] for p, x in even_schedule(es, [1024, 1025]).items()}
    {1024: [(1,), (3,)], 1025: [(2,)]}
    """
    out: dict[int, list[ExecutorSpec]] = {p: [] for p in slots}
    for i, e in enumerate(sorted(executors, key=lambda e: e.tasks[0])):
        out[slots[i % len(slots)]].append(e)
    return out
