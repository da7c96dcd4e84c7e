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
