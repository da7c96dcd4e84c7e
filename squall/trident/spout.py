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


class _EmptyCoordinator(BatchCoordinator):
    """A coordinator with no metadata, always ready (Storm's ``BatchSpoutExecutor.EmptyCoordinator``)."""

    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        """No metadata."""
        return None

    def success(self, txid: int) -> None:
        """Nothing to do."""

    def is_ready(self, txid: int) -> bool:
        """Always ready."""
        return True


class _BatchSpoutEmitter(Emitter):
    def __init__(self, spout: IBatchSpout) -> None:
        self.spout = spout

    def emit_batch(self, tx: TransactionAttempt, metadata: Any, collector: Any) -> None:
        self.spout.emit_batch(tx.txid, collector)

    def success(self, tx: TransactionAttempt) -> None:
        self.spout.ack(tx.txid)

    def close(self) -> None:
        self.spout.close()


class BatchSpoutAdapter(ITridentSpout):
    """An `IBatchSpout` as an `ITridentSpout` (Storm's ``BatchSpoutExecutor``): the spout is
    opened in each emitter task, asked for batch ``txid`` and acked with it on ``$success``."""

    def __init__(self, spout: IBatchSpout) -> None:
        self.spout = spout

    def get_coordinator(self, txid_key: str, conf: dict, context: Any) -> BatchCoordinator:
        """No metadata; always ready."""
        return _EmptyCoordinator()

    def get_emitter(self, txid_key: str, conf: dict, context: Any) -> Emitter:
        """Opens the spout in this task."""
        self.spout.open(conf, context)
        return _BatchSpoutEmitter(self.spout)

    def get_output_fields(self) -> Fields:
        """The spout's fields."""
        return self.spout.get_output_fields()

    def get_component_configuration(self) -> dict | None:
        """The spout's."""
        return self.spout.get_component_configuration()


def _fields(fields: Fields | list[str] | tuple[str, ...], where: str) -> Fields:
    if isinstance(fields, Fields):
        return fields
    if isinstance(fields, str) or not all(isinstance(f, str) for f in fields):
        raise TypeError(f"{where}: fields must be a Fields or a list of field names, got {fields!r}")
    return Fields(list(fields))


class FixedBatchSpout(IBatchSpout):
    """Emits fixed tuples in batches of at most ``max_batch_size`` (Storm's testing spout).

    Transactional: batch ``txid`` is always the ``txid``-th slice of the tuples, so a replay,
    even after its worker restarted, emits the same tuples. Storm's keeps a map of txid to
    batch in memory, lost with its worker; with txids handed out from 1 without gaps the two
    agree. With `set_cycle` the slices start again from the first tuple after the last.
    One task at most.
    """

    def __init__(self, fields: Fields | list[str], max_batch_size: int, *values_lists: list) -> None:
        if type(max_batch_size) is not int or max_batch_size < 1:
            raise ValueError(f"FixedBatchSpout: max_batch_size must be a positive integer, got {max_batch_size!r}")
        self.fields = _fields(fields, "FixedBatchSpout")
        for i, values in enumerate(values_lists):
            if len(values) != len(self.fields):
                raise ValueError(f"FixedBatchSpout: tuple {i} {values!r} has {len(values)} values for "
                                 f"{len(self.fields)} fields {list(self.fields)}")
        self.outputs = [list(v) for v in values_lists]
        self.max_batch_size = max_batch_size
        self.cycle = False

    def set_cycle(self, flag: bool) -> None:
        """Start again from the first tuple after the last (forever)."""
        self.cycle = bool(flag)

    def open(self, conf: dict, context: Any) -> None:
        """Nothing to open: batches follow from the txid."""

    def batch(self, txid: int) -> list[list]:
        """The tuples of batch ``txid``."""
        batches = -(-len(self.outputs) // self.max_batch_size)
        index = txid - 1
        if self.cycle and batches:
            index %= batches
        start = index * self.max_batch_size
        return self.outputs[start:start + self.max_batch_size]

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        """Emit batch ``batch_id``."""
        for values in self.batch(batch_id):
            collector.emit(list(values))

    def ack(self, batch_id: int) -> None:
        """Nothing kept per batch."""

    def get_output_fields(self) -> Fields:
        """The fields given."""
        return self.fields

    def get_component_configuration(self) -> dict | None:
        """One task at most, as Storm's."""
        return {"topology.max.task.parallelism": 1}
