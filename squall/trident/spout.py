"""Trident spouts: Storm's ``ITridentSpout`` seam, ``IBatchSpout`` and their adapters."""

from __future__ import annotations

import abc
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from .._collectors import OutputFieldsDeclarer, SpoutOutputCollector
from .._components import Spout
from .._config import Config, conf_value
from .._failure import TIMEOUT, UNKNOWN, FailureCause
from .._fields import Fields
from .._system import DEFAULT_STREAM
from ..testing._registry import SharedCounter, SharedLog, SharedQueue
from .coordinator import SPOUT_COORDINATOR_PREFIX, TransactionAttempt

MAX_BATCH_SIZE_KEY = Config.TOPOLOGY_SPOUT_MAX_BATCH_SIZE


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
        return {Config.TOPOLOGY_MAX_TASK_PARALLELISM: 1}


@dataclass(frozen=True)
class FeederBatch:
    """The metadata of one `FeederBatchSpout` batch: the fed batch's id (None: nothing was fed)
    and its tuples split among the emitter tasks by index."""

    batch_id: str | None
    partitions: dict[int, list[list]] = field(default_factory=dict)


class _FeederCoordinator(BatchCoordinator):
    def __init__(self, spout: FeederBatchSpout, emitters: int) -> None:
        self.spout = spout
        self.emitters = emitters
        self._batch_ids: dict[int, str] = {}
        self._readied: set[int] = set()

    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        begun = self.spout._begun
        if txid > begun.value:  # this task alone writes it (the spout coordinator has one)
            begun.incr(txid - begun.value)
        if curr_metadata is not None:  # a replay: the same tuples
            if curr_metadata.batch_id is not None:
                self._batch_ids[txid] = curr_metadata.batch_id
            return curr_metadata
        try:
            batch_id, tuples = self.spout._queue.take()
        except IndexError:
            return FeederBatch(None)
        self.spout._taken.incr()
        self.spout._took.append((batch_id, txid))
        self._batch_ids[txid] = batch_id
        partitions: dict[int, list[list]] = {i: [] for i in range(self.emitters)}
        for i, values in enumerate(tuples):
            partitions[i % self.emitters].append(values)
        return FeederBatch(batch_id, partitions)

    def success(self, txid: int) -> None:
        batch_id = self._batch_ids.pop(txid, None)
        if batch_id is not None:
            self.spout._done.append(batch_id)

    def is_ready(self, txid: int) -> bool:
        # a batch fed and not yet taken; a txid already let through stays so, for its replays.
        # With several batches in flight a txid may be let through for a batch that an earlier
        # txid then takes: it runs empty, which is harmless. A txid the spout coordinator began
        # is a replay too: a restarted master coordinator, which let nothing through yet, must
        # let its uncommitted txid go again, or it waits for the next feed.
        if not self.spout.wait_to_emit or txid in self._readied or txid <= self.spout._begun.value:
            return True
        if self.spout._fed.value > self.spout._taken.value:
            self._readied.add(txid)
            return True
        return False


class _FeederEmitter(Emitter):
    def __init__(self, index: int) -> None:
        self.index = index

    def emit_batch(self, tx: TransactionAttempt, metadata: Any, collector: Any) -> None:
        for values in metadata.partitions.get(self.index, []):
            collector.emit(list(values))

    def success(self, tx: TransactionAttempt) -> None:
        pass


class FeederBatchSpout(ITridentSpout):
    """A Trident spout emitting what a test feeds it (Storm's ``FeederBatchSpout``).

    Each `feed` call is one batch, split among the spout's tasks; `feed` returns once that
    batch is committed. It works across squall's copies of the spout as `squall.testing.
    FeederSpout` does (made inside `squall.testing.shared_state_dir`, across processes too).
    Transactional: a batch's tuples are its metadata, kept by the spout coordinator, so a
    replay emits them again. With ``set_wait_to_emit(False)`` batches start whether or not
    anything was fed (empty ones).
    """

    def __init__(self, fields: Fields | list[str]) -> None:
        self.fields = _fields(fields, "FeederBatchSpout")
        self.wait_to_emit = True
        self._queue = SharedQueue()
        self._fed = SharedCounter()
        self._taken = SharedCounter()
        self._done = SharedLog()
        self._begun = SharedCounter()  # the highest txid the spout coordinator began
        self._took = SharedLog()  # (batch id, txid) of each batch fed, as the spout coordinator took it

    def set_wait_to_emit(self, flag: bool) -> None:
        """Whether a batch starts only when one was fed (the default)."""
        self.wait_to_emit = bool(flag)

    def feed_no_wait(self, tuples: list[list]) -> str:
        """Queue one batch of ``tuples`` (each a list of values); returns its id."""
        rows = [list(t) for t in tuples]
        for i, values in enumerate(rows):
            if len(values) != len(self.fields):
                raise ValueError(f"FeederBatchSpout.feed: tuple {i} {values!r} has {len(values)} values for "
                                 f"{len(self.fields)} fields {list(self.fields)}")
        batch_id = uuid.uuid4().hex
        self._queue.put((batch_id, rows))
        self._fed.incr()
        return batch_id

    def feed(self, tuples: list[list], timeout: float = 120.0) -> None:
        """Feed one batch of ``tuples`` and wait until it is committed.

        Raises:
            TimeoutError: it was not committed within ``timeout`` seconds, saying how far it got.
        """
        self.wait_committed(self.feed_no_wait(tuples), timeout)

    def wait_committed(self, batch_id: str, timeout: float = 120.0) -> None:
        """Wait until the batch `feed_no_wait` returned ``batch_id`` for is committed.

        Raises:
            TimeoutError: it was not committed within ``timeout`` seconds, saying how far it got.
        """
        deadline = time.monotonic() + timeout
        while batch_id not in self._done.items():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"FeederBatchSpout: the batch fed was not committed within {timeout} s: "
                                   f"{self._where(batch_id)}")
            time.sleep(0.005)

    def _where(self, batch_id: str) -> str:
        """How far the batch ``batch_id`` got, for `wait_committed`'s timeout: a topology that is
        not running, and one that runs and fails or crashes on the batch, looked alike ("is the
        topology submitted and active?")."""
        errors = "the topology's errors (cluster.get_topology_info(name)['errors']) say why"
        txids = [txid for taken, txid in self._took.items() if taken == batch_id]
        if txids:
            return (f"the topology took it as Trident batch txid {txids[0]} but has not committed it: a bolt fails "
                    f"it or raises on it (it is replayed), or a worker crashes; {errors}")
        if self._begun.value == 0:
            return ("the topology began no batch: is it submitted and active, and its workers up (a worker that "
                    f"crashes as it starts begins none)? {errors}")
        return (f"the topology has not taken it yet: it waits behind batch txid {self._begun.value}, begun and not "
                f"committed; {errors}")

    def get_coordinator(self, txid_key: str, conf: dict, context: Any) -> BatchCoordinator:
        """Takes fed batches; on the spout coordinator, splits them among the emitter tasks."""
        component = context.get_this_component_id()
        prefix = SPOUT_COORDINATOR_PREFIX  # the master coordinator only asks is_ready
        emitters = len(context.get_component_tasks(component[len(prefix):])) if component.startswith(prefix) else 1
        return _FeederCoordinator(self, max(1, emitters))

    def get_emitter(self, txid_key: str, conf: dict, context: Any) -> Emitter:
        """Emits this task's part of each batch."""
        return _FeederEmitter(context.get_this_task_index())

    def get_output_fields(self) -> Fields:
        """The fields given."""
        return self.fields


class _CaptureCollector(SpoutOutputCollector):
    """What a plain spout emits through inside a Trident batch: into the batch, its message
    ids kept for the batch's ack or fail (Storm's ``RichSpoutBatchExecutor.CaptureCollector``)."""

    def __init__(self) -> None:
        self.target: Any = None
        self.ids: list[Any] = []
        self.emitted = 0

    def emit(self, values: list, msg_id: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        """Add ``values`` to the batch."""
        if msg_id is not None:
            self.ids.append(msg_id)
        self.emitted += 1
        self.target.emit(list(values))
        return []

    def emit_direct(self, task_id: int, values: list, msg_id: Any = None, stream: str = DEFAULT_STREAM) -> None:
        """Trident has no direct streams."""
        raise ValueError("a Spout in a Trident stream cannot emit_direct (Trident does not support direct streams)")

    def report_error(self, error: BaseException | str) -> None:
        """Report ``error``."""
        self.target.report_error(error if isinstance(error, BaseException) else RuntimeError(error))


class _RichSpoutEmitter(Emitter):
    def __init__(self, spout: Spout, conf: dict, context: Any, max_batch_size: int | None = None) -> None:
        self.spout = spout
        self.conf = conf
        self.context = context
        self.max_batch_size = max_batch_size or int(conf_value(conf, MAX_BATCH_SIZE_KEY))
        self.timeout = float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
        self.collector = _CaptureCollector()
        self.opened = False
        self.pending: dict[int, tuple[float, list[Any]]] = {}  # txid -> (emitted at, msg ids)

    def emit_batch(self, tx: TransactionAttempt, metadata: Any, collector: Any) -> None:
        now = time.monotonic()
        for txid, (at, _) in list(self.pending.items()):
            if now - at > self.timeout:  # never committed: its tree timed out long ago
                self._fail(txid, FailureCause(TIMEOUT))
        self._fail(tx.txid, UNKNOWN)  # a replay: the spout replays what it emitted itself, at least once
        self.collector.target = collector
        self.collector.ids = []
        if not self.opened:
            self.spout.open(self.conf, self.context, self.collector)
            self.spout.activate()
            self.opened = True
        for _ in range(self.max_batch_size):
            before = self.collector.emitted
            self.spout.next_tuple()
            if self.collector.emitted == before:
                break  # nothing more now: the batch ends here
        self.pending[tx.txid] = (now, self.collector.ids)

    def success(self, tx: TransactionAttempt) -> None:
        _, ids = self.pending.pop(tx.txid, (0.0, []))
        for msg_id in ids:
            self.spout.ack(msg_id)

    def failed_with(self, txid: int, cause: FailureCause) -> None:
        """Batch ``txid`` failed for ``cause`` and is replayed now: its records fail with it (a
        DRPC request's caller is told why)."""
        self._fail(txid, cause)

    def _fail(self, txid: int, cause: FailureCause) -> None:
        _, ids = self.pending.pop(txid, (0.0, []))
        fail_with = getattr(self.spout, "fail_with", None)
        for msg_id in ids:
            if fail_with is not None and cause is not UNKNOWN:
                fail_with(msg_id, cause)
            else:
                self.spout.fail(msg_id)

    def close(self) -> None:
        if self.opened:
            self.spout.close()


def spout_output_fields(spout: Spout) -> Fields:
    """The fields of the one stream a plain spout declares (Trident takes one stream).

    Raises:
        ValueError: the spout declares no stream or several, naming them.
    """
    declarer = OutputFieldsDeclarer(type(spout).__name__)
    spout.declare_output_fields(declarer)
    if len(declarer.streams) != 1:
        raise ValueError(f"a Spout in a Trident stream must declare exactly one stream; "
                         f"{type(spout).__name__} declares {sorted(declarer.streams)}")
    return next(iter(declarer.streams.values())).fields


class RichSpoutAdapter(ITridentSpout):
    """A plain `squall.Spout` as an `ITridentSpout` (Storm's ``RichSpoutBatchExecutor``):
    at least once. A batch is what ``next_tuple`` emits in one go, up to
    ``topology.spout.max.batch.size`` tuples (1000), stopping at a call that emits nothing.
    Once the batch commits, the spout's message ids in it are acked; when the same txid is
    asked again (a replay), or it never committed within the message timeout, they are
    failed, and the spout replays them as it would without Trident.

    ``max_batch_size``, when given, is the batch size whatever the configuration says (a DRPC
    stream's spout: one call per batch).
    """

    def __init__(self, spout: Spout, max_batch_size: int | None = None) -> None:
        self.spout = spout
        self.fields = spout_output_fields(spout)
        self.max_batch_size = max_batch_size

    def get_coordinator(self, txid_key: str, conf: dict, context: Any) -> BatchCoordinator:
        """No metadata; always ready."""
        return _EmptyCoordinator()

    def get_emitter(self, txid_key: str, conf: dict, context: Any) -> Emitter:
        """Runs the spout in this task, opened at its first batch."""
        return _RichSpoutEmitter(self.spout, conf, context, self.max_batch_size)

    def get_output_fields(self) -> Fields:
        """The spout's one stream's fields."""
        return self.fields

    def get_component_configuration(self) -> dict | None:
        """The spout's."""
        return self.spout.get_component_configuration()
