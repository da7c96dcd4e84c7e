"""What a spout's automatic max pending reads of the stateful bolts after it: the data inputs
they executed from the components that carry the spout's tuples (`StatefulProgress`), in this
worker and in the others.

The limit of ``topology.max.spout.pending: null`` before a stateful bolt, which acks its inputs
at its commits, doubles when the spout is held at it with nothing completed and the stateful
bolts took none of its tuples for a few checkpoint intervals (`squall.engine.pending_tuner.
CompletionRateLimit`): then a join or a batching bolt in front of them waits for more tuples
than the limit lets in. Two things decide it, and both were wrong before:

- **Whose inputs.** A stateful bolt fed by two spouts, one straight and one through a batching
  bolt, executes the first one's tuples all along: counted over all its inputs, the second
  spout, held at 64 tuples by a batch of 200, looked taken care of and never doubled. Each
  spout now counts only the inputs from itself and from the components its tuples reach
  (`StatefulInput`, `committed_inputs`).
- **Where.** A stateful task in another worker than the spout was not known at all, and the
  limit never doubled: a batching bolt in front of it held the topology for good (30,000 ids
  on the process host, 2 workers: 0 acked in 90 s). Each worker that runs stateful tasks now
  tells its peers their counts every `ProgressLink.PERIOD_SECS` (``{"executed": [[task,
  source, count], ...]}``, `squall.engine.transport.Transport.broadcast`), as it tells them
  its load (`squall.engine.load_mapping`). A figure older than `StatefulProgress.EXPIRE_SECS`
  (its worker died or stopped saying) is forgotten: not known, and the limit does not double.

The counts are the stateful bolt's own (``squall_executed_from`` of
`squall.state._bolt.StatefulBoltExecutor`): every data input, by its source component,
checkpoints never, whatever ``topology.stats.enabled`` says (the engine's statistics sample
their inputs, 1 in 20 by default: a slow bolt passing on a few tuples a second showed none for
seconds, and doubled, its queue only grew).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from .clock import Clock
from .plan import TopologyPlan
from .transport import Transport

_KEY = "executed"


class StatefulInput(NamedTuple):
    """One input of a stateful bolt that carries a spout's tuples: the ``bolt`` and the
    ``source`` component its input comes from (the spout itself or a bolt after it)."""

    bolt: str
    source: str


def committed_inputs(plan: TopologyPlan, spout: str, committers: Sequence[str]) -> tuple[StatefulInput, ...]:
    """The inputs of the stateful bolts ``committers`` that ``spout``'s tuples can arrive on:
    those from ``spout`` itself and from the components its tuples reach."""
    reached = plan.downstream(spout) | {spout}
    return tuple(StatefulInput(bolt, source) for bolt in committers
                 for source in sorted(plan.data_sources(bolt)) if source in reached)


def progress_message(counts: Iterable[tuple[int, str, int]]) -> dict[str, list[list[Any]]]:
    """The control message carrying this worker's stateful tasks' ``(task, source, count)``."""
    return {_KEY: [[int(t), str(s), int(n)] for t, s, n in counts]}


def is_progress_message(message: Any) -> bool:
    """Whether a control message is a `progress_message`."""
    return isinstance(message, dict) and _KEY in message


def progress_of(message: Any) -> list[tuple[int, str, int]]:
    """The ``(task, source, count)`` figures of a `progress_message`.

    Raises:
        TypeError: ``message`` is not one, or a figure is not a task id, a component id and a
            count (the transport drops it and counts it).
    """
    figures = message.get(_KEY) if isinstance(message, dict) else None
    if not isinstance(figures, list):
        raise TypeError(f"not a stateful progress message: {message!r:.80}")
    out = []
    for f in figures:
        if (not isinstance(f, list) or len(f) != 3 or type(f[0]) is not int or type(f[1]) is not str
                or type(f[2]) is not int or f[2] < 0):
            raise TypeError(f"not a (task, source, count) figure in a stateful progress message: {f!r:.80}")
        out.append((f[0], f[1], f[2]))
    return out


class StatefulProgress:
    """The data inputs each stateful task executed, by source: this worker's from ``local``
    (``task -> counts by source``, None for a task not here), the others' as their workers last
    said, for `EXPIRE_SECS`. Time is ``clock``'s. Any thread may read it: the counts only grow
    (a restarted task's start again, and a count that changed either way is progress)."""

    EXPIRE_SECS = 3.0

    def __init__(self, local: Callable[[int], Mapping[str, int] | None], tasks_of: Mapping[str, Sequence[int]],
                 clock: Clock | None = None) -> None:
        self._local = local
        self._tasks_of = tasks_of
        self.clock = clock or Clock()
        self._remote: dict[int, tuple[dict[str, int], float]] = {}  # task -> (counts by source, when heard)
        # the topology's tasks: a figure for another (a peer of another plan, or one that lies)
        # is not kept, else every new task id a peer names stays in `_remote` for good
        self._tasks = frozenset(t for tasks in tasks_of.values() for t in tasks)

    def heard(self, figures: Iterable[tuple[int, str, int]]) -> None:
        """A peer's figures arrived (those of tasks not in the topology are left out)."""
        now = self.clock.now()
        by_task: dict[int, dict[str, int]] = {}
        known = self._tasks
        for task, source, count in figures:
            if task in known:
                by_task.setdefault(task, {})[source] = count
        for task, counts in by_task.items():
            self._remote[task] = (counts, now)

    def executed(self, inputs: Sequence[StatefulInput]) -> int | None:
        """The data inputs executed so far on ``inputs``, over every task of their bolts; None
        if one task's count is not known (not heard from its worker within `EXPIRE_SECS`)."""
        if not inputs:
            return None
        total = 0
        now = None
        for bolt, source in inputs:
            tasks = self._tasks_of.get(bolt)
            if not tasks:
                return None
            for task in tasks:
                counts = self._local(task)
                if counts is None:
                    heard = self._remote.get(task)
                    now = self.clock.now() if now is None else now
                    if heard is None or now - heard[1] > self.EXPIRE_SECS:
                        return None
                    counts = heard[0]
                total += counts.get(source, 0)
        return total


class ProgressLink:
    """Sends this worker's stateful tasks' counts (``counts()``) to its peers every
    `PERIOD_SECS`, on a daemon thread, until `stop`. A peer records them with
    `StatefulProgress.heard` (every worker does, whether or not it runs stateful tasks)."""

    PERIOD_SECS = 0.5

    def __init__(self, counts: Callable[[], list[tuple[int, str, int]]], transport: Transport,
                 name: str = "squall-progress") -> None:
        self.counts = counts
        self.transport = transport
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._send, name=name, daemon=True)
        self._thread.start()

    def _send(self) -> None:
        while not self._done.wait(self.PERIOD_SECS):
            counts = self.counts()
            if counts:
                self.transport.broadcast(progress_message(counts))

    def stop(self, timeout: float = 2.0) -> None:
        """Stop sending."""
        self._done.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
