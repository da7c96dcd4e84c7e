"""What Trident's master batch coordinator reports of itself to the UI: the current txid, the
batches in flight, and how long batches take from their first ``$batch`` to their commit.

The coordinator spout hands each batch of emits to `BatchTimes.observe`; the worker's heartbeat
reads `BatchTimes.figures` (through the spout's ``component_statistics``) into the task's
statistics, which the master windows and shows as every other statistic
(`squall.ui.stats_pages.trident_stats`). Pure: time is passed in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from .._failure import DEAD_LETTERED
from ..engine.stats import (
    TRIDENT_BATCH_LATENCY,
    TRIDENT_BATCHES_COMMITTED,
    TRIDENT_BATCHES_IN_FLIGHT,
    TRIDENT_CURRENT_TXID,
    TRIDENT_MAX_BATCHES_IN_FLIGHT,
    StatKey,
)
from .executor import BATCH_STREAM, SUCCESS_STREAM


@dataclass(frozen=True)
class CoordinatorFigures:
    """The coordinator's figures now: cumulative counts since it started, gauges as they are.

    ``latency_ms`` sums the completion latency of the ``timed`` commits: those whose first
    ``$batch`` this coordinator sent (a restarted one cannot time the batches it inherited).
    """

    current_txid: int
    in_flight: int
    max_in_flight: int
    committed: int = 0
    latency_ms: float = 0.0
    timed: int = 0

    def statistics(self) -> dict[StatKey, float]:
        """The figures as a task's statistics (`squall.engine.stats.component_figures`)."""
        out: dict[StatKey, float] = {(TRIDENT_CURRENT_TXID, "", ""): self.current_txid,
                                     (TRIDENT_BATCHES_IN_FLIGHT, "", ""): self.in_flight,
                                     (TRIDENT_MAX_BATCHES_IN_FLIGHT, "", ""): self.max_in_flight,
                                     (TRIDENT_BATCHES_COMMITTED, "", ""): self.committed}
        if self.timed:
            out[(TRIDENT_BATCH_LATENCY, "", "")] = self.latency_ms
            out[(TRIDENT_BATCH_LATENCY + "#n", "", "")] = self.timed
        return out


class BatchTimes:
    """When each active txid's first ``$batch`` went out, and the figures of the commits.

    A replayed txid keeps the time of its first attempt: its latency includes the replays, as a
    user waiting for the batch sees it. ``figures`` is replaced, never changed, so that another
    thread may read it at any time.
    """

    def __init__(self, current_txid: int, max_in_flight: int) -> None:
        self._started: dict[int, float] = {}
        self.figures = CoordinatorFigures(current_txid, 0, max_in_flight)

    def observe(self, emits: Iterable[tuple[str, int]], current_txid: int, in_flight: int, now: float) -> None:
        """The coordinator emitted ``emits`` (stream, txid) at ``now``; it is at ``current_txid``
        with ``in_flight`` active batches."""
        f = self.figures
        committed, latency_ms, timed = f.committed, f.latency_ms, f.timed
        for stream, txid in emits:
            if stream == BATCH_STREAM:
                self._started.setdefault(txid, now)
            elif stream == SUCCESS_STREAM:
                committed += 1
                start = self._started.pop(txid, None)
                if start is not None:
                    latency_ms += 1000.0 * (now - start)
                    timed += 1
        if (committed, current_txid, in_flight) != (f.committed, f.current_txid, f.in_flight):
            self.figures = replace(f, current_txid=current_txid, in_flight=in_flight, committed=committed,
                                   latency_ms=latency_ms, timed=timed)


__all__ = ["BatchTimes", "CoordinatorFigures"]


class BatchDeadLetters:
    """A Trident spout task's dead letters, each record counted once, when its batch commits.

    A Trident spout's emitter (the file, Redis Streams and Kafka Trident spouts') gives up a
    record it cannot make a tuple of (a translator that raised, values not one per field, a line
    over the size limit) in every attempt of the batch that reads it, the same way each time: a
    failed batch's replay gives it up again, and counting each attempt would count it again. So
    the emitter bolt (`squall.trident.coordinator.SpoutEmitterBody`) keeps what each txid's last
    attempt gave up (`attempted`, a later attempt's replacing an earlier one's: an opaque
    spout's later attempt may read further) and adds it to the figures at the txid's
    ``$success`` (`committed`): a batch that never commits counts nothing. A restarted task
    counts from zero, as the engine's counts do, and counts the batches it emits and sees
    commit; a batch committed as its task died, before its ``$success`` arrived, is counted by
    no launch (short, never over). Reported as the task's ``dead_lettered`` statistic, keyed as
    a core spout's (`squall._failure.DEAD_LETTERED`): the component that failed the record (""
    for none) and the reason (``unreadable``).

    `attempted` and `committed` run on the bolt's thread, `figures` on the worker's heartbeat
    thread: it reads a copy."""

    __slots__ = ("_committed", "_pending")

    def __init__(self) -> None:
        self._pending: dict[int, dict[tuple[str, str], int]] = {}
        self._committed: dict[tuple[str, str], int] = {}

    def attempted(self, txid: int, given_up: dict[tuple[str, str], int]) -> None:
        """An attempt of ``txid`` gave ``given_up`` up (``{(component, reason): n}``, nothing
        left out), in place of what an earlier attempt of it here gave up."""
        self._pending[txid] = {key: n for key, n in given_up.items() if n}

    def committed(self, txid: int) -> None:
        """``txid`` committed, and every txid before it: what their last attempts gave up counts."""
        counts = dict(self._committed)
        for t in [t for t in self._pending if t <= txid]:
            for key, n in self._pending.pop(t).items():
                counts[key] = counts.get(key, 0) + n
        self._committed = counts  # one store: the heartbeat thread reads the old or the new

    def figures(self) -> dict[StatKey, float]:
        """The dead letters of the committed batches, as the task's statistics."""
        return {(DEAD_LETTERED, component, reason): n for (component, reason), n in self._committed.items()}


def given_up_since(before: dict[tuple[str, str], int], now: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """What a `squall._failure.DeadLetterCounts` counted between its ``before`` and ``now``
    (`DeadLetterCounts.by_cause`)."""
    return {key: n - before.get(key, 0) for key, n in now.items() if n != before.get(key, 0)}
