"""The bolt every Trident bolt runs in (Storm's ``TridentBoltExecutor``).

The planner builds one :class:`TridentBoltExecutor` per Trident bolt from a
:class:`BoltSpec` (its subscriptions and output streams) and a :class:`BatchBody`
(what runs inside: the fused processors, or the spout's emitter). The executor keeps
the per-batch bookkeeping (``$coord`` counts, ``$commit``, failures); the body only
sees batches.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from .._fields import Fields
from .coordinator import TransactionAttempt


@dataclass(frozen=True)
class InputSpec:
    """One subscription of a Trident bolt.

    ``stream`` is a data stream ``s<N>`` of an upstream Trident bolt, or ``$batch`` of a
    ``$spoutcoord-<spout>`` bolt; ``fields`` are the operation-visible fields (the
    leading ``$tx`` value excluded).
    """

    component: str
    stream: str
    fields: Fields


@dataclass(frozen=True)
class BoltSpec:
    """What the planner tells a :class:`TridentBoltExecutor` about its place in the graph.

    ``outputs`` are ``("s<N>", fields)`` pairs, declared as ``["$tx", *fields]``;
    ``committer`` marks a bolt holding a state: it finishes a batch only once the batch's
    ``$commit`` arrived.
    """

    inputs: tuple[InputSpec, ...]
    outputs: tuple[tuple[str, Fields], ...]
    committer: bool
    batch_group: str = "bg0"


@dataclass
class BatchInfo:
    """One attempt of one batch, as one task sees it.

    ``state`` is free room for the body's per-batch state (keyed by processor); it is
    dropped with the batch.
    """

    attempt: TransactionAttempt
    state: dict[Any, Any] = field(default_factory=dict)


class BatchOutput(abc.ABC):
    """What a :class:`BatchBody` emits through; given to it by the executor."""

    @abc.abstractmethod
    def emit(self, batch: BatchInfo, stream: str, values: list) -> None:
        """Emit ``values`` (without the tx) on data stream ``stream`` as part of ``batch``.

        The executor adds the tx value, anchors the tuple to the input being processed
        (or to the tuple that finishes the batch) and counts it per receiving task.
        """

    @abc.abstractmethod
    def report_error(self, error: BaseException) -> None:
        """Report an error to the UI/log without failing the batch."""


class BatchBody(abc.ABC):
    """What runs inside a Trident bolt (Storm's ``ITridentBatchBolt`` / ``SubtopologyBolt``).

    Raising :class:`squall.FailedException` from ``init_batch``, ``execute`` or
    ``finish_batch`` fails the batch; it is replayed with the same txid.
    """

    @abc.abstractmethod
    def prepare(self, conf: dict, context: Any, output: BatchOutput) -> None:
        """Called once per task before any batch."""

    @abc.abstractmethod
    def init_batch(self, batch: BatchInfo) -> None:
        """A new batch (or a new attempt of one) starts on this task."""

    @abc.abstractmethod
    def execute(self, batch: BatchInfo, stream: str, values: list) -> None:
        """One data tuple of ``batch`` arrived on input ``stream`` (values without the tx)."""

    @abc.abstractmethod
    def finish_batch(self, batch: BatchInfo) -> None:
        """Every tuple of the batch arrived (and, for a committer, its ``$commit``)."""

    def success(self, attempt: TransactionAttempt) -> None:
        """The batch was committed everywhere (its ``$success``); committers and spouts only."""

    def cleanup(self) -> None:
        """Called once when the task stops."""
