"""Trident's coordination: Storm's ``MasterBatchCoordinator`` and ``TridentSpoutCoordinator``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class TransactionAttempt:
    """One attempt of one batch: the ``batch_id`` Trident operations see.

    ``txid`` numbers batches from 1; ``attempt_id`` changes each time the coordinator
    replays the txid after a failure.
    """

    txid: int
    attempt_id: int
