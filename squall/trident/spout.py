"""Trident spouts: Storm's ``ITridentSpout`` seam, ``IBatchSpout`` and their adapters."""

from __future__ import annotations

import abc
from typing import Any

from .._fields import Fields
from .coordinator import TransactionAttempt


class BatchCoordinator(abc.ABC):
    """The spout's side on the coordinator (Storm's ``ITridentSpout.BatchCoordinator``).

    Runs in the single ``$spoutcoord-<spout>`` task; its metadata for a txid is kept
    durably, so a replayed txid gets the same metadata.
    """

    @abc.abstractmethod
    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        """Return the metadata of batch ``txid``.

        ``curr_metadata`` is what this txid had before (a replay), else None;
        ``prev_metadata`` is the previous txid's.
        """

    @abc.abstractmethod
    def success(self, txid: int) -> None:
        """Batch ``txid`` was committed."""

    @abc.abstractmethod
    def is_ready(self, txid: int) -> bool:
        """Whether batch ``txid`` may start now."""

    def close(self) -> None:
        """Called when the coordinator stops."""


class Emitter(abc.ABC):
    """The spout's side in the spout executor bolt (Storm's ``ITridentSpout.Emitter``)."""

    @abc.abstractmethod
    def emit_batch(self, tx: TransactionAttempt, metadata: Any, collector: Any) -> None:
        """Emit the tuples of batch ``tx`` through ``collector`` (a ``TridentCollector``)."""

    @abc.abstractmethod
    def success(self, tx: TransactionAttempt) -> None:
        """Batch ``tx`` was committed."""

    def close(self) -> None:
        """Called when the emitter's task stops."""


class ITridentSpout(abc.ABC):
    """Storm's ``ITridentSpout``: a coordinator and an emitter per txid key."""

    @abc.abstractmethod
    def get_coordinator(self, txid_key: str, conf: dict, context: Any) -> BatchCoordinator:
        """The coordinator, built once in the ``$spoutcoord`` task."""

    @abc.abstractmethod
    def get_emitter(self, txid_key: str, conf: dict, context: Any) -> Emitter:
        """An emitter, built once per task of the spout executor bolt."""

    @abc.abstractmethod
    def get_output_fields(self) -> Fields:
        """The fields of the tuples the emitter emits."""

    def get_component_configuration(self) -> dict | None:
        """Configuration for the spout's components, as a squall component's."""
        return None


class IBatchSpout(abc.ABC):
    """A spout that emits whole batches (Storm's ``IBatchSpout``).

    Transactional when it emits the same tuples whenever the same ``batch_id`` (a txid,
    an int) is asked again.
    """

    @abc.abstractmethod
    def open(self, conf: dict, context: Any) -> None:
        """Called once in each task of the spout executor bolt."""

    @abc.abstractmethod
    def emit_batch(self, batch_id: int, collector: Any) -> None:
        """Emit batch ``batch_id`` through ``collector`` (``emit(values)``)."""

    @abc.abstractmethod
    def ack(self, batch_id: int) -> None:
        """Batch ``batch_id`` was committed."""

    def close(self) -> None:
        """Called when the task stops."""

    @abc.abstractmethod
    def get_output_fields(self) -> Fields:
        """The fields of every tuple this spout emits."""

    def get_component_configuration(self) -> dict | None:
        """Configuration for the spout's components."""
        return None
