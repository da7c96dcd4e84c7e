"""A Trident window's bolt on Spark's driver, run as the tasks it has on squall's engine.

On squall's engine each task of a window's bolt windows the tuples its input grouping routes to
it, and takes its batches at their commit, in txid order (the bolt is a committer). Under Spark a
committer's bolt runs on the driver, in ``foreachBatch``, once per micro-batch and in batchId
order, which is that txid order already; what the driver lacks is the split into tasks. So for a
bolt holding a window (``compiler.SparkBolt.driver_tasks``) the driver keeps one copy of the bolt
per task index of its parallelism, each prepared with that index (`SparkTaskContext`), and hands
each the rows squall's engine would have sent it (`TaskRoute`, per input stream):

- ``partition_by``/``group_by`` (a fields grouping): the stable hash of the key's values modulo
  the tasks, as `squall._grouping.FieldsGrouping` chooses (``squall._stable_hash``);
- ``global_``: task 0 (the lowest task id, `GlobalGrouping`'s); ``batch_global``: the batch's
  task by txid (``processors.batch_partition``);
- ``shuffle``/``local_or_shuffle``: random on squall's engine, so any fixed spread is one it could
  have made; here the stable hash of the whole tuple, which a batch Spark re-runs repeats (a
  spread by position would depend on the order the rows came in, which a re-run need not keep;
  a tuple holding a value with no hash goes by its position in the batch);
- ``broadcast``: every task.

Every task finishes every batch, with or without rows, as every task of a committer bolt does.
So a window's keys in its store are per task index as on squall's engine, and a store that
outlives the query (`KeyValueWindowsStoreFactory` over a state provider that outlives the
driver) resumes each task's window; a micro-batch Spark runs again (same batchId, so same txid)
is, in each task that took it, the batch taken last: not added twice, its results emitted again.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import Any, NamedTuple

from ..._stable_hash import stable_hash
from ..coordinator import TransactionAttempt
from ..executor import BatchInfo, BatchOutput
from ..processors import batch_partition
from .context import SparkTaskContext

KEY = "key"
FIRST = "first"
BATCH = "batch"
SPREAD = "spread"
EVERY = "every"

_KINDS = {"fields": KEY, "global": FIRST, "batch_global": BATCH, "shuffle": SPREAD, "local_or_shuffle": SPREAD,
          "all": EVERY}


class TaskRoute(NamedTuple):
    """How one input stream's rows reach the tasks of a window's bolt on the driver (see the
    module docstring): ``kind`` `KEY` (``positions``: the key fields' places in the stream's
    tuples), `FIRST`, `BATCH`, `SPREAD` or `EVERY`."""

    kind: str
    positions: tuple[int, ...] = ()

    @classmethod
    def of(cls, partitioning: str, positions: tuple[int, ...] = ()) -> TaskRoute | None:
        """The route of a subscription of ``partitioning`` (a planner `Partitioning`'s kind); None
        for the ones the driver cannot follow (``identity``: the emitting task's index, and a
        custom grouping, which may read it: a row on the driver has no emitting task)."""
        kind = _KINDS.get(partitioning)
        if kind is None:
            return None
        return cls(kind, positions if kind == KEY else ())

    def tasks(self, values: list, txid: int, n: int) -> Iterable[int]:
        """The task indexes (of ``n``) that get ``values`` of batch ``txid``."""
        if n == 1 or self.kind == FIRST:
            return (0,)
        if self.kind == KEY:
            return (stable_hash([values[i] for i in self.positions]) % n,)
        if self.kind == SPREAD:
            return (stable_hash(values) % n,)
        if self.kind == BATCH:
            return (batch_partition("batch_global", TransactionAttempt(txid, 0), n),)
        return range(n)


def route(routes: dict[str, TaskRoute], rows: dict[str, list[list]], streams: Iterable[str], txid: int,
          n: int) -> list[dict[str, list[list]]]:
    """Per task index (of ``n``), the rows of each of ``streams`` it gets, in their order."""
    split: list[dict[str, list[list]]] = [{} for _ in range(n)]
    for stream in streams:
        got = rows.get(stream)
        if not got:
            continue
        if n == 1:
            split[0][stream] = got
            continue
        r = routes[stream]
        for at, values in enumerate(got):
            try:
                chosen = r.tasks(values, txid, n)
            except TypeError:  # an unhashable value: a key's fails as on squall's engine
                if r.kind != SPREAD:
                    raise
                chosen = (at % n,)
            for i in chosen:
                split[i].setdefault(stream, []).append(values)
    return split


class DriverTasks:
    """The ``n`` task copies of one window's bolt on the driver (see the module docstring).

    ``body_bytes``: the bolt's body pickled as built (each task starts from it); ``inputs``:
    the streams it reads, in the order the driver hands them over; ``routes``: how each reaches
    the tasks. ``prepare`` makes and prepares the copies, emitting into ``output``.

    Raises:
        ValueError: an input stream without a route (the compiler gives each one).
    """

    def __init__(self, component: str, n: int, body_bytes: bytes, inputs: tuple[str, ...],
                 routes: dict[str, TaskRoute]) -> None:
        missing = sorted(set(inputs) - set(routes))
        if missing:
            raise ValueError(f"Trident bolt {component}: its input streams {missing} have no route to its {n} tasks")
        self.component = component
        self.n = n
        self.inputs = inputs
        self.routes = routes
        self._body_bytes = body_bytes
        self.bodies: list[Any] = []

    def prepare(self, conf: dict, output: BatchOutput, clock: Any = None) -> None:
        """Each task's copy, prepared as task ``i`` of ``n`` of the component; ``clock``, if
        given, handed to it (the windows' time)."""
        self.bodies = []
        for i in range(self.n):
            body = pickle.loads(self._body_bytes)
            body.prepare(conf, SparkTaskContext(self.component, i, self.n, conf), output)
            if clock is not None:
                body.use_clock(clock)
            self.bodies.append(body)

    def run(self, txid: int, rows: dict[str, list[list]]) -> None:
        """Batch ``txid`` in every task, in task order: its rows (``rows``, by stream) routed."""
        for body, mine in zip(self.bodies, route(self.routes, rows, self.inputs, txid, self.n)):
            batch = BatchInfo(TransactionAttempt(txid, 0))
            body.init_batch(batch)
            for stream in self.inputs:
                got = mine.get(stream)
                if got:
                    body.execute_many(batch, stream, got)
            body.finish_batch(batch)

    def cleanup(self) -> None:
        """Clean up every task's copy (their operations' ``cleanup``, the windows' stores)."""
        bodies, self.bodies = self.bodies, []
        errors = []
        for body in bodies:
            try:
                body.cleanup()
            except Exception as e:  # noqa: BLE001 (every copy is cleaned up; the first error is raised after)
                errors.append(e)
        if errors:
            raise errors[0]


__all__ = ["BATCH", "EVERY", "FIRST", "KEY", "SPREAD", "DriverTasks", "TaskRoute", "route"]
