"""Trident's coordination: Storm's ``MasterBatchCoordinator`` and ``TridentSpoutCoordinator``.

The master coordinator is a spout (``$mastercoord-bg0``, one task) that hands out batches:
``$batch`` starts one, ``$commit`` commits it once processed, ``$success`` says it is done.
Its rules live in the pure `BatchCoordinatorCore` (time passed in); the spout only emits what
the core returns and keeps the core's durable part (the oldest uncommitted txid, the attempt
ids) in the topology's transactional state, so a restarted worker resumes where it was.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

BATCH_STREAM = "$batch"
COMMIT_STREAM = "$commit"
SUCCESS_STREAM = "$success"
EMIT_INTERVAL_KEY = "topology.trident.batch.emit.interval.millis"
MAX_PENDING_KEY = "topology.max.spout.pending"
# under each spout's transactional state (Storm's /transactional/<txid key>/coordinator/...)
CURRENT_TX = "coordinator/currtx"
CURRENT_ATTEMPTS = "coordinator/currattempts"
META_PREFIX = "meta/"


def master_coordinator_id(batch_group: str = "bg0") -> str:
    """The component id of a batch group's master coordinator spout."""
    return f"$mastercoord-{batch_group}"


def spout_coordinator_id(spout_id: str) -> str:
    """The component id of the coordinator bolt of the spout executor bolt ``spout_id``."""
    return f"$spoutcoord-{spout_id}"


@dataclass(frozen=True, order=True)
class TransactionAttempt:
    """One attempt of one batch: the ``batch_id`` Trident operations see.

    ``txid`` numbers batches from 1; ``attempt_id`` changes each time the coordinator
    replays the txid after a failure.
    """

    txid: int
    attempt_id: int


class AttemptState(enum.Enum):
    """Where an active batch is (Storm's ``AttemptStatus``)."""

    PROCESSING = "processing"   # its $batch tree is open
    PROCESSED = "processed"     # every tuple was processed; waits for its turn to commit
    COMMITTING = "committing"   # its $commit tree is open


@dataclass
class TxStatus:
    """One active txid: the attempt running and where it is."""

    attempt: TransactionAttempt
    state: AttemptState = AttemptState.PROCESSING


@dataclass(frozen=True)
class CoordinatorEmit:
    """One tuple the master coordinator must emit: ``attempt`` on ``stream``."""

    stream: str
    attempt: TransactionAttempt


@dataclass(frozen=True)
class CoordinatorSnapshot:
    """The durable part of the coordinator: what a restarted one resumes from."""

    current_txid: int
    attempt_ids: tuple[tuple[int, int], ...]


def max_active_batches(conf: dict) -> int:
    """``topology.max.spout.pending`` as the coordinator reads it: unset (or ``"auto"``, the
    tuner's, which has no meaning for batches) is 1, as Storm's null."""
    value = conf.get(MAX_PENDING_KEY)
    if value is None or value == "auto":
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{MAX_PENDING_KEY} must be a positive integer for a Trident topology, got {value!r}")
    return value


class BatchCoordinatorCore:
    """Storm's ``MasterBatchCoordinator`` rules, without I/O.

    ``current_txid`` is the oldest txid not committed; at most ``max_pending`` txids are active
    from there. A new ``$batch`` goes out only when every spout is ready for it and
    ``emit_interval_secs`` passed since the previous one (Storm's throttler, which paces
    replays too). The oldest active txid is committed once PROCESSED, so commits follow txid
    order; a committed txid gives ``$success`` and ``current_txid`` moves on. A failed attempt
    drops its txid and every later active one: they are emitted again with new attempt ids.

    Methods return what to emit; `snapshot` is what must be saved before it is emitted.
    """

    def __init__(self, max_pending: int, emit_interval_secs: float, current_txid: int = 1,
                 attempt_ids: dict[int, int] | None = None) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending}")
        self.max_pending = max_pending
        self.emit_interval_secs = emit_interval_secs
        self.current_txid = current_txid
        self.active: dict[int, TxStatus] = {}
        # only the txids that may still run: a restarted coordinator gives each a new attempt id
        self.attempt_ids: dict[int, int] = {
            t: a for t, a in (attempt_ids or {}).items() if current_txid <= t < current_txid + max_pending}
        self._last_emit: float | None = None

    @classmethod
    def restore(cls, max_pending: int, emit_interval_secs: float,
                snapshot: CoordinatorSnapshot | None) -> BatchCoordinatorCore:
        """A core resuming from ``snapshot`` (None: a new topology, from txid 1)."""
        if snapshot is None:
            return cls(max_pending, emit_interval_secs)
        return cls(max_pending, emit_interval_secs, snapshot.current_txid, dict(snapshot.attempt_ids))

    def snapshot(self) -> CoordinatorSnapshot:
        """The durable part now."""
        return CoordinatorSnapshot(self.current_txid, tuple(sorted(self.attempt_ids.items())))

    def next(self, now: float, ready: Callable[[int], bool]) -> list[CoordinatorEmit]:
        """What to emit now: a due ``$commit``, and a ``$batch`` if one may start.

        ``ready(txid)`` asks the spouts' coordinators whether ``txid`` may start.
        """
        out = self._maybe_commit()
        if len(self.active) >= self.max_pending:
            return out
        for txid in range(self.current_txid, self.current_txid + self.max_pending):
            if txid in self.active:
                continue
            if self._throttled(now) or not ready(txid):
                break
            attempt = TransactionAttempt(txid, self.attempt_ids.get(txid, -1) + 1)
            self.attempt_ids[txid] = attempt.attempt_id
            self.active[txid] = TxStatus(attempt)
            self._last_emit = now
            out.append(CoordinatorEmit(BATCH_STREAM, attempt))
        return out

    def acked(self, stream: str, attempt: TransactionAttempt) -> list[CoordinatorEmit]:
        """The ``$batch`` or ``$commit`` tree of ``attempt`` completed."""
        status = self.active.get(attempt.txid)
        if status is None or status.attempt != attempt:
            return []  # an attempt replaced since: its news is stale
        out: list[CoordinatorEmit] = []
        if stream == BATCH_STREAM and status.state is AttemptState.PROCESSING:
            status.state = AttemptState.PROCESSED
        elif stream == COMMIT_STREAM and status.state is AttemptState.COMMITTING:
            del self.active[attempt.txid]
            self.attempt_ids.pop(attempt.txid, None)
            self.current_txid = attempt.txid + 1
            out.append(CoordinatorEmit(SUCCESS_STREAM, attempt))
        return out + self._maybe_commit()

    def failed(self, stream: str, attempt: TransactionAttempt) -> list[CoordinatorEmit]:
        """The ``$batch`` or ``$commit`` tree of ``attempt`` failed or timed out: the txid and
        every later active one start again (at the next `next`)."""
        status = self.active.get(attempt.txid)
        if status is None or status.attempt != attempt:
            return []
        for txid in [t for t in self.active if t >= attempt.txid]:
            del self.active[txid]
        return []

    def _maybe_commit(self) -> list[CoordinatorEmit]:
        status = self.active.get(self.current_txid)
        if status is not None and status.state is AttemptState.PROCESSED:
            status.state = AttemptState.COMMITTING
            return [CoordinatorEmit(COMMIT_STREAM, status.attempt)]
        return []

    def _throttled(self, now: float) -> bool:
        return self._last_emit is not None and now - self._last_emit < self.emit_interval_secs
