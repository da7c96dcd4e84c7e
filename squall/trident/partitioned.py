"""Partitioned Trident spouts: Storm's ``IPartitionedTridentSpout`` (transactional) and
``IOpaquePartitionedTridentSpout`` (opaque), and the adapters that make each an `ITridentSpout`
(Storm's ``PartitionedTridentSpoutExecutor`` and ``OpaquePartitionedTridentSpoutExecutor``).

A source split into partitions (Kafka partitions, files, Redis streams) only says, per partition,
how to emit a batch after the previous one and what describes the batch it emitted (its
*metadata*: offsets, byte ranges, entry ids). The adapters do the rest:

- the coordinator (one task) fixes the partitions of each txid (``get_partitions_for_batch``),
  so a replay of a txid covers the partitions it had; for the transactional spout a replayed
  txid keeps the partitions it first had;
- each task of the spout's bolt takes partitions ``i, i + n, ...`` of the ordered list, and keeps
  each partition's metadata per txid in the topology's transactional state (Storm's
  ``RotatingTransactionalState``: a key per partition and txid under ``<txid key>/user``, kept
  where the coordinator keeps its own), so a restarted task finds it. A partition that moves to
  another task (the list changed) while txids are in flight is read there from the store, and
  a txid that does not find stored, by the old task, the newest txid before it that listed the
  partition (the txid just before, or an older one where the partition was gone for a while;
  opaque: by the attempt of it that this task saw, the one that may commit) fails and is
  replayed. A task that goes back (a replay of the txid whose check passed, or of an older one)
  reads and checks the partition again: the txid before that one may be another task's, stored
  since. Storm resumes from whatever it finds stored. A task that did not see a txid before the
  one it runs, whose commit it has not heard of (its batch was lost on the way here, or the task
  restarted after running it, or before), knows what that txid listed only from the store: it
  reads the spout coordinator's stored metadata of that txid (`TridentSpoutCoordinator` keeps
  ``meta/<txid>`` until a later txid succeeds; opaque: also the master's stored attempt ids,
  the attempt that may commit) and checks every partition of its own as if new, so a restarted
  task checks its first batch as a running one does;
- transactional: a txid never emitted before calls ``emit_batch_new`` with each partition's
  metadata of the previous txid, and stores what it returns; a txid emitted before (a replay)
  calls ``re_emit_partition_batch`` with the stored metadata, which must emit exactly the same
  tuples; a txid that reaches a task after a later txid emitted there emits nothing, for good
  (the later one took the records after the txid before; Storm's rule too). That happens when
  a txid's first attempt fails in the spout coordinator after the master emitted the next
  txid's batch (a Kafka topic not there yet), or is held up there past the message timeout;
- opaque: every attempt calls ``emit_batch_new`` from the metadata of the txid before it (the one
  this task emitted last, else the stored one), and stores what it returns for the txid,
  replacing an earlier attempt's: the next txid continues after what this attempt emitted. So
  every record is in exactly one batch that succeeds, though a replayed txid may hold other
  records than its first attempt.

Storm stores an opaque batch's metadata in the emitter's ``commit`` (an ``ICommitterTridentSpout``
bolt subscribes to ``$commit``). squall's spout bolt does not get ``$commit``, so the metadata is
stored when the batch is emitted instead: the last attempt of a txid is the one its state commit
saw, so what is stored for a committed txid is what was committed, which is all the next txid
needs. A partition the source stopped listing keeps nothing for a txid whose earlier attempt read
it: each task drops that when an attempt lists other partitions than the one before it that the
task saw, at its first batch, and at the first attempt it sees of a txid after that txid's first
(the task may have run an earlier one before it restarted; Storm's commit does it), so the txid
that finds the partition
again resumes after the last committed batch. A task running behind the others (an attempt
that has failed already) never replaces or deletes what a later attempt stored; what it stores
for a partition the later attempt does not list, a task that takes the partition drops (by the
attempt of that txid it saw) rather than resume from it. Success
(``$success``) drops the metadata of older txids but the newest up to it (the one the next txid
resumes from), as the store has it; a partition the source no longer lists keeps that one key,
so that it resumes there if it comes back, but only the `GONE_PARTITIONS_KEPT` (1,000) gone
last keep theirs: a source whose partitions come and go (a directory whose files are read and
then removed) would otherwise add a key per partition it ever had, and stop every batch once
the topology's state was full (Storm keeps a ZooKeeper node per partition it ever saw, without
bound). A partition found again after its key went is read as a new one (from its start). So a
spout keeps about partitions x (txids in flight + 1) keys, and 1,000 more at most, against the
topology's limit of 10,000 (`squall._transactional.MAX_KEYS`). `tests/trident/test_partitioned_orders.py` plays
random orders of batches, successes, failures and partition changes and counts every record.
"""

from __future__ import annotations

import abc
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from .._errors import FailedException
from .._failure import DeadLetterCounts
from .._fields import Fields
from .coordinator import CURRENT_ATTEMPTS, META_PREFIX, TransactionAttempt
from .spout import BatchCoordinator, Emitter, ITridentSpout

__all__ = [
    "IOpaquePartitionedTridentSpout", "IPartitionedTridentSpout", "ISpoutPartition",
    "OpaquePartitionedTridentSpoutExecutor", "PartitionedTridentSpoutExecutor", "RotatingTransactionalState",
    "partition_key", "partitions_for_task",
]


class ISpoutPartition(Protocol):
    """Storm's ``ISpoutPartition``: a partition of a source, hashable, with a stable id."""

    def get_id(self) -> str:
        """The partition's id: the key its metadata is kept under."""


def partitions_for_task(task_index: int, num_tasks: int, ordered: list | None) -> list:
    """Storm's default ``getPartitionsForTask``: partitions ``task_index``, ``task_index +
    num_tasks``, ... of the ordered list."""
    return list((ordered or [])[task_index::num_tasks])


class TxStore(Protocol):
    """What the adapters need of the topology's transactional state (``context.transactional_state``)."""

    def get(self, key: str) -> Any:
        """The value at ``key``, or None."""

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` at ``key`` durably."""

    def delete(self, key: str) -> None:
        """Remove ``key`` (and any key under ``key/``)."""

    def list(self, prefix: str = "") -> list[str]:
        """The keys kept that start with ``prefix``."""


@dataclass(frozen=True)
class NothingEmitted:
    """What a partition keeps for a txid in which its emitter emitted nothing (returned None or
    left it out): a replay of that txid emits nothing from it, and the next txid carries on from
    ``previous``, the metadata before. Kept as None, the next txid started the partition over,
    and once the txid before was cleaned up at a success, from the source's start: duplicates."""

    previous: Any


GONE_PARTITIONS_KEPT = 1_000
"""Partitions the source no longer lists whose last metadata a spout keeps (the ones gone
last): a tenth of `squall._transactional.MAX_KEYS`, so that a source whose partitions come and
go (a directory's files, read and then removed) never fills its topology's state."""


def _resume_from(meta: Any) -> Any:
    return meta.previous if isinstance(meta, NothingEmitted) else meta


class _Kept(NamedTuple):
    """What a partition keeps for one txid: its metadata, and the attempt that stored it (None
    where it does not matter: a transactional txid's metadata is the same in every attempt)."""

    attempt: int | None
    meta: Any


class RotatingTransactionalState:
    """Storm's ``RotatingTransactionalState``: one partition's metadata per txid, durably.

    One value per txid, under ``<key>/<txid>`` in ``store`` (Storm keeps a node per txid too):
    a task writes only the txids it emits and deletes only txids older than one that succeeded,
    so two tasks that hold the same partition for a while (it moved between txids in flight)
    never overwrite each other's metadata. Read once when made (`refresh` reads again).
    """

    def __init__(self, store: TxStore, key: str, read: bool = True) -> None:
        self.store = store
        self.key = key
        self.kept: dict[int, _Kept] = {}
        if read:  # else the caller reads it (`refresh`) before using it
            self.refresh()

    def refresh(self) -> None:
        """Read what the store keeps now (another task may have written since)."""
        self.kept = {}
        for k in self.store.list(f"{self.key}/"):
            tail = k[len(self.key) + 1:]
            if tail.isdigit():
                kept = self.store.get(k)
                if isinstance(kept, _Kept):
                    self.kept[int(tail)] = kept

    @property
    def curr(self) -> dict[int, Any]:
        """The metadata kept, by txid."""
        return {t: k.meta for t, k in sorted(self.kept.items())}

    def get_last_state(self) -> Any:
        """The metadata the newest txid kept leaves the next one to start from, or None."""
        return _resume_from(self.kept[max(self.kept)].meta) if self.kept else None

    def get_state(self, txid: int) -> Any:
        """The metadata of ``txid`` (a `NothingEmitted` if the partition emitted nothing then), or None."""
        kept = self.kept.get(txid)
        return None if kept is None else kept.meta

    def attempt_of(self, txid: int) -> int | None:
        """The attempt that stored ``txid``'s metadata (None: not kept, or any attempt's)."""
        kept = self.kept.get(txid)
        return None if kept is None else kept.attempt

    def has_state(self, txid: int) -> bool:
        """Whether ``txid`` has metadata kept (None counts: an emit that found nothing)."""
        return txid in self.kept

    def has_state_after(self, txid: int) -> bool:
        """Whether a txid after ``txid`` has metadata kept: it emitted before ``txid`` did."""
        return any(t > txid for t in self.kept)

    def get_previous_state(self, txid: int) -> Any:
        """The metadata of the newest txid before ``txid``, or None."""
        older = [t for t in self.kept if t < txid]
        return _resume_from(self.kept[max(older)].meta) if older else None

    def override_state(self, txid: int, metadata: Any, attempt: int | None = None) -> None:
        """Keep ``metadata`` for ``txid`` (stored by ``attempt``), replacing any, but not what
        a later attempt stored (a task running behind the others runs an attempt that failed
        after a newer one, which may commit, stored its own)."""
        key = f"{self.key}/{txid}"
        if attempt is not None:
            stored = self.store.get(key)
            if isinstance(stored, _Kept) and stored.attempt is not None and stored.attempt > attempt:
                self.kept[txid] = stored
                return
        self.kept[txid] = _Kept(attempt, metadata)
        self.store.put(key, self.kept[txid])

    def remove_state(self, txid: int) -> None:
        """Forget ``txid``'s metadata."""
        if self.kept.pop(txid, None) is not None:
            self.store.delete(f"{self.key}/{txid}")

    def cleanup_before(self, txid: int, stored: Iterable[int] | None = None) -> None:
        """Forget the txids before ``txid``, all but the newest of those up to ``txid``: the one
        the next txid resumes from (a partition that ``txid`` did not list has no metadata at
        ``txid`` itself). ``stored``: the txids the store has now (another task may have
        deleted some this copy still holds), else this copy's."""
        if stored is not None:
            now = set(stored)
            for t in [t for t in self.kept if t not in now]:
                del self.kept[t]
        upto = [t for t in (self.kept if stored is None else now) if t <= txid]
        for t in sorted(upto)[:-1]:
            self.kept.pop(t, None)
            self.store.delete(f"{self.key}/{t}")


def partition_key(partition_id: str) -> str:
    """The transactional-state key of a partition's metadata: its id where that is a valid key
    segment, else its readable part and a digest (file paths, topic names with ``/``)."""
    pid = str(partition_id)
    if _SAFE.fullmatch(pid) and pid not in (".", "..") and len(pid) <= 80:
        return pid
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", pid)[-40:].strip(".") or "p"
    return f"{readable}-{hashlib.sha256(pid.encode()).hexdigest()[:16]}"


_SAFE = re.compile(r"[A-Za-z0-9_.-]+")


class _PartitionedSpout(abc.ABC):
    """What both partitioned spout interfaces share (Storm declares them twice)."""

    class Coordinator(abc.ABC):
        """Runs in the single coordinator task."""

        @abc.abstractmethod
        def get_partitions_for_batch(self) -> Any:
            """The partitions of the source now (kept durably with the txid: keep it small and
            picklable)."""

        def is_ready(self, txid: int) -> bool:
            """Whether batch ``txid`` may start."""
            return True

        def close(self) -> None:
            """The coordinator stops."""

    class Emitter(abc.ABC):
        """Runs in each task of the spout's bolt."""

        @abc.abstractmethod
        def get_ordered_partitions(self, all_partition_info: Any) -> list:
            """The partitions (`ISpoutPartition`) of ``all_partition_info``, in an order every task
            agrees on."""

        @abc.abstractmethod
        def emit_batch_new(self, tx: TransactionAttempt, collector: Any, partitions: set,
                           last_partition_meta: Mapping[Any, Any]) -> Mapping[Any, Any]:
            """Emit a batch for each of ``partitions`` after its metadata in
            ``last_partition_meta`` (None: from where the source starts); return the metadata of
            what each partition emitted, keyed by partition."""

        def refresh_partitions(self, partition_responsibilities: list) -> None:
            """This task is now responsible for ``partition_responsibilities``."""

        def get_partitions_for_task(self, task_index: int, num_tasks: int, ordered: list) -> list:
            """The partitions of this task (default: every ``num_tasks``-th from ``task_index``)."""
            return partitions_for_task(task_index, num_tasks, ordered)

        def close(self) -> None:
            """The task stops."""

    @abc.abstractmethod
    def get_coordinator(self, conf: dict, context: Any) -> Any:
        """The coordinator."""

    @abc.abstractmethod
    def get_emitter(self, conf: dict, context: Any) -> Any:
        """An emitter for one task."""

    @abc.abstractmethod
    def get_output_fields(self) -> Fields:
        """The fields of the tuples emitted."""

    def get_component_configuration(self) -> dict | None:
        """Configuration for the spout's components."""
        return None


class IPartitionedTridentSpout(_PartitionedSpout):
    """Storm's ``IPartitionedTridentSpout``: a transactional spout over partitions (a txid always
    replays the same tuples). ``TridentTopology.new_stream`` wraps it in
    `PartitionedTridentSpoutExecutor`."""

    class Coordinator(_PartitionedSpout.Coordinator):
        """Storm's ``IPartitionedTridentSpout.Coordinator``."""

    class Emitter(_PartitionedSpout.Emitter):
        """Storm's ``IPartitionedTridentSpout.Emitter``: ``emit_batch_new`` is called for a txid
        never emitted before, ``re_emit_partition_batch`` for a replay."""

        @abc.abstractmethod
        def re_emit_partition_batch(self, tx: TransactionAttempt, collector: Any, partition: Any,
                                    partition_meta: Any) -> None:
            """Emit again exactly what ``partition`` emitted for ``partition_meta``."""

        def covers_records(self, partition_meta: Any) -> bool:
            """Whether the batch ``partition_meta`` describes moved its partition past records,
            whether or not they became tuples (a translator's skip, a dead letter). Not Storm's:
            Spark's engine asks it of a plan that emitted no tuple, which is a micro-batch of no
            rows moving past them when this is true, and no micro-batch otherwise (the next plan
            starts from the same metadata). By default (this method not overridden) Spark's
            engine decides by the metadata instead: a partition's that changed moved past
            records, which costs a spout that answers nothing one micro-batch of no rows after
            each batch that read (one every trigger if its metadata changes at every plan, a time
            or the txid: answer here then). An override is trusted. Other hosts store every batch's
            metadata and go on after it whatever it emitted."""
            return False


class IOpaquePartitionedTridentSpout(_PartitionedSpout):
    """Storm's ``IOpaquePartitionedTridentSpout``: an opaque spout over partitions (every record
    in exactly one successful batch). ``TridentTopology.new_stream`` wraps it in
    `OpaquePartitionedTridentSpoutExecutor`."""

    class Coordinator(_PartitionedSpout.Coordinator):
        """Storm's ``IOpaquePartitionedTridentSpout.Coordinator``."""

    class Emitter(_PartitionedSpout.Emitter):
        """Storm's ``IOpaquePartitionedTridentSpout.Emitter``: every attempt of a txid calls
        ``emit_batch_new``."""


class _Coordinator(BatchCoordinator):
    """Both adapters' `BatchCoordinator`: the partitions of a txid; a transactional replay keeps
    those it had."""

    def __init__(self, coordinator: Any, keep_replayed: bool) -> None:
        self.coordinator = coordinator
        self.keep_replayed = keep_replayed

    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        """The txid's partitions."""
        if self.keep_replayed and curr_metadata is not None:
            return curr_metadata
        return self.coordinator.get_partitions_for_batch()

    def success(self, txid: int) -> None:
        """Nothing to do: the emitters keep the metadata."""

    def is_ready(self, txid: int) -> bool:
        """The spout's coordinator's answer."""
        return self.coordinator.is_ready(txid)

    def close(self) -> None:
        """Closes the spout's coordinator."""
        self.coordinator.close()


class _PartitionedEmitter(Emitter):
    """What both adapters' emitters share: the task's partitions and their metadata."""

    # whether the txid before must have been stored by the attempt this task saw (opaque: each
    # attempt stores other metadata) or by any (transactional: every attempt's is the same)
    same_attempt = False

    def __init__(self, emitter: Any, txid_key: str, context: Any) -> None:
        self.emitter = emitter
        # Storm's TransactionalState.newUserState(conf, txid key): beside the coordinator's own
        self.store = context.transactional_state(f"{txid_key}/user")
        self.context = context
        self.txid_key = txid_key
        self._coordinator_store: TxStore | None = None  # the spout coordinator's, read at a missed txid
        self.index = context.get_this_task_index()
        self.component = context.get_this_component_id()
        self.num_tasks = len(context.get_component_tasks(context.get_this_component_id()))
        self.started = False
        self.saved_coordinator_meta: Any = None
        self.partitions: dict[str, tuple[Any, RotatingTransactionalState]] = {}
        self.listed_now: frozenset[str] = frozenset()  # every partition the source lists now
        # per txid, the last attempt of it seen here and the partitions it listed
        self.seen: dict[int, tuple[int, frozenset[str]]] = {}
        # partitions new here, whose metadata another task may still be writing: read again
        # from the store until the txid before is there (`_begin`)
        self.unsettled: set[str] = set()
        # per partition that came here, the txid whose check found the txid before it stored: a
        # replay of that txid or an older one (the task goes back) reads and checks it again, as
        # the txid before that one may be another task's, written since or not yet
        self.settled_at: dict[str, int] = {}
        # txids an earlier attempt of which may have listed other partitions (kept until an
        # attempt of the txid gets past `_begin`'s check)
        self.relisted: set[int] = set()
        # per txid this task did not see (its batch lost here, or run before this task started),
        # the attempt and partitions the coordinator stored for it (`_read_missed`)
        self.read_listed: dict[int, tuple[int | None, frozenset[str]]] = {}
        # every txid below this one was seen here, read (`read_listed`) or committed (a $success
        # heard); None: nothing known yet (a task that has just started)
        self.known_below: int | None = None

    @property
    def dead_letter_counts(self) -> DeadLetterCounts | None:
        """The spout's emitter's count of the records it gave up, if it counts them (the file,
        Redis Streams and Kafka Trident spouts': `squall._failure.CountsDeadLetters`)."""
        return getattr(self.emitter, "dead_letter_counts", None)

    def _refresh(self, coordinator_meta: Any) -> None:
        if self.started and self.saved_coordinator_meta == coordinator_meta:
            return
        ordered = self.emitter.get_ordered_partitions(coordinator_meta)
        mine = self.emitter.get_partitions_for_task(self.index, self.num_tasks, ordered)
        self.unsettled |= {p.get_id() for p in mine} - set(self.partitions)
        # read from the store again; a new one (unsettled) only by `_begin`, before it is used
        self.partitions = {p.get_id(): (p, RotatingTransactionalState(self.store, partition_key(p.get_id()),
                                                                      read=p.get_id() in self.partitions))
                           for p in mine}
        self.unsettled &= set(self.partitions)
        self.settled_at = {pid: t for pid, t in self.settled_at.items() if pid in self.partitions}
        self.listed_now = frozenset(p.get_id() for p in ordered)
        self.emitter.refresh_partitions(mine)
        self.saved_coordinator_meta = coordinator_meta

    def _begin(self, tx: TransactionAttempt, coordinator_meta: Any) -> bool:
        """Takes the attempt's partitions; returns whether an earlier attempt of the txid may
        have listed others (one seen here did, or this task has just started).

        A partition new to this task (moved from another, or every one after a start) is read
        again from the store, and must have the txid before stored there, by the attempt of it
        this task saw, if that txid listed it.

        Raises:
            FailedException: a partition moved here from another task, which has not yet
                emitted (and stored) it in the txid before: resuming from an older batch would
                take that txid's records again. Tasks run apart, so the order of two txids in
                flight is kept only within a task; the batch fails and its replay finds it.
        """
        first = not self.started
        self._refresh(coordinator_meta)
        self.started = True
        if self._missed(tx.txid):
            # what a missed txid listed is known only from the store, and any partition of this
            # task may have been at another task then: each is read and checked again
            self._read_missed(tx.txid)
            self.unsettled |= set(self.partitions)
        earlier = self.seen.get(tx.txid)
        self.seen[tx.txid] = (tx.attempt_id, self.listed_now)  # also if this fails: the next txid's check
        # an attempt after the first, of a txid this task has not seen since it started: this
        # task may have run an earlier attempt of it before a restart, and stored what it read
        if first or (earlier is None and tx.attempt_id > 0) or (earlier is not None and earlier[1] != self.listed_now):
            self.relisted.add(tx.txid)
        listings = {**self.read_listed, **self.seen}
        back = {pid for pid, t in self.settled_at.items() if t >= tx.txid}
        for pid in sorted(self.unsettled | back):
            rotating = self.partitions[pid][1]
            rotating.refresh()  # written by another task
            if self.same_attempt:
                self._drop_failed_reads(tx.txid, pid, rotating, listings)
            # the newest txid before this one that listed the partition, not only the txid just
            # before: a partition gone for a txid and back at another task resumes after it
            listed = [t for t, (_attempt, pids) in listings.items() if t < tx.txid and pid in pids]
            if listed:
                prev = max(listed)
                attempt = listings[prev][0]
                if not (rotating.has_state(prev)
                        and (not self.same_attempt or attempt is None or rotating.attempt_of(prev) == attempt)):
                    raise FailedException(
                        f"spout [{self.component}] task index {self.index}: partition [{pid}] came here from "
                        f"another task, which has not yet stored its batch of txid {prev} (attempt {attempt}); "
                        f"txid {tx.txid} fails and is replayed")
            self.unsettled.discard(pid)
            self.settled_at[pid] = tx.txid
        if tx.txid in self.relisted:
            self.relisted.discard(tx.txid)
            return True
        return False

    def _drop_failed_reads(self, txid: int, pid: str, rotating: RotatingTransactionalState,
                           listings: Mapping[int, tuple[int | None, frozenset[str]]]) -> None:
        """Drops what an attempt that failed stored for ``pid`` at a txid before ``txid`` whose
        attempt seen here (or read, `_read_missed`) does not list it: a task running behind the
        others ran that attempt after the later one went out, and deletes it only when it runs the
        later one (`_OpaqueEmitter._forget_vanished`); resuming from it would skip its records,
        which no committed batch holds."""
        for t, (attempt, pids) in listings.items():
            stored = rotating.attempt_of(t)
            if t < txid and pid not in pids and stored is not None and attempt is not None and stored < attempt:
                rotating.remove_state(t)

    def _missed(self, txid: int) -> bool:
        """Whether a txid before ``txid`` may not have committed and was not seen here: its batch
        was lost on its way to this task (it times out), or this task started after running it
        (a restart), or before it heard of a commit."""
        if self.known_below is None:
            return True
        return any(t not in self.seen and t not in self.read_listed for t in range(self.known_below, txid))

    def _read_missed(self, txid: int) -> None:
        """Reads, for each txid before ``txid`` not seen here, what the spout coordinator stored
        for it (Storm's ``TridentSpoutCoordinator`` keeps each txid's metadata until a later
        one succeeds, and the master each running txid's attempt id, beside it: a restarted
        task reads them, as it reads the partitions' metadata): the partitions it listed and
        the attempt that may commit (None: any, for a txid committed already or a coordinator
        that keeps no attempt ids). A txid without stored metadata either committed before a
        later one's ``$success`` (each partition's newest metadata up to it is stored), or has
        not passed the spout coordinator yet (a batch held up there), so no task emitted it and
        a task that saw every txid knows no more of it."""
        if self._coordinator_store is None:
            self._coordinator_store = self.context.transactional_state(self.txid_key)
        store = self._coordinator_store
        attempts = store.get(CURRENT_ATTEMPTS) if self.same_attempt else None
        attempts = attempts if isinstance(attempts, dict) else {}
        for key in store.list(META_PREFIX):
            tail = key[len(META_PREFIX):]
            if not tail.isdigit() or int(tail) >= txid or int(tail) in self.seen:
                continue
            ordered = self.emitter.get_ordered_partitions(store.get(key))
            self.read_listed[int(tail)] = (attempts.get(int(tail)), frozenset(p.get_id() for p in ordered))
        self.known_below = max(self.known_below or 0, txid)

    def _by_id(self, metas: Mapping[Any, Any]) -> Iterable[tuple[str, Any]]:
        for partition, meta in metas.items():
            pid = partition if isinstance(partition, str) else partition.get_id()
            if pid not in self.partitions:
                raise ValueError(f"emit_batch_new returned metadata for partition {pid!r}, which is not one "
                                 f"of this task's ({sorted(self.partitions)})")
            yield pid, meta

    def success(self, tx: TransactionAttempt) -> None:
        """Drops the metadata of the txids before ``tx`` (the newest up to it stays: the next
        txid resumes from it), as the store has it now (one listing for every partition)."""
        stored: dict[str, list[int]] = {}
        for key in self.store.list():
            partition, _, tail = key.rpartition("/")
            if tail.isdigit():
                stored.setdefault(partition, []).append(int(tail))
        for _, rotating in self.partitions.values():
            rotating.cleanup_before(tx.txid, stored.get(rotating.key, ()))
        for t in [t for t in self.seen if t < tx.txid]:
            del self.seen[t]
        self.read_listed = {t: listed for t, listed in self.read_listed.items() if t >= tx.txid}
        self.known_below = max(self.known_below or 0, tx.txid + 1)
        self._forget_gone(tx.txid, stored)
        self.relisted = {t for t in self.relisted if t >= tx.txid}

    def _forget_gone(self, txid: int, stored: dict[str, list[int]]) -> None:
        """Drops the metadata of the partitions gone longest, beyond the newest
        `GONE_PARTITIONS_KEPT` (see the module docstring). Gone: no listing this task holds
        from ``txid`` on names it, and it stored nothing after ``txid`` (every txid up to
        ``txid`` succeeded). Each task finds the same ones in the same listing; deleting what
        another has deleted already is nothing. A task that has taken no batch yet knows no
        listing, and forgets nothing: a restarted master coordinator sends the last commit's
        ``$success`` again, which a restarted task hears before its first batch, and it took
        every partition for gone then."""
        if not self.started:
            return
        listed = {partition_key(pid) for pid in self.listed_now}
        for _attempt, partitions in [*self.seen.values(), *self.read_listed.values()]:
            listed.update(partition_key(pid) for pid in partitions)
        gone = sorted((max(txids), key) for key, txids in stored.items()
                      if key not in listed and max(txids) <= txid)
        for _last, key in gone[:max(0, len(gone) - GONE_PARTITIONS_KEPT)]:
            self.store.delete(key)

    def close(self) -> None:
        """Closes the spout's emitter."""
        self.emitter.close()


class _TransactionalEmitter(_PartitionedEmitter):
    """Storm's ``PartitionedTridentSpoutExecutor.Emitter``."""

    def emit_batch(self, tx: TransactionAttempt, metadata: Any, collector: Any) -> None:
        """Per partition (Storm's ``RotatingTransactionalState.getStateOrCreate``): a txid
        emitted before again from its metadata; a txid older than one emitted already nothing,
        for good (its batch reached this task after a later one's, whose records follow the
        txid before: emitting them here too would put them in two txids); a new txid from the
        previous txid's metadata."""
        self._begin(tx, metadata)
        txid = tx.txid
        prev = {}
        for _, (partition, rotating) in sorted(self.partitions.items()):
            if rotating.has_state(txid):
                meta = rotating.get_state(txid)
                if meta is not None and not isinstance(meta, NothingEmitted):
                    self.emitter.re_emit_partition_batch(tx, collector, partition, meta)
            elif rotating.has_state_after(txid):
                rotating.override_state(txid, NothingEmitted(rotating.get_previous_state(txid)))
            else:
                prev[partition] = rotating.get_previous_state(txid)
        if not prev:
            return
        emitted = dict(self._by_id(self.emitter.emit_batch_new(tx, collector, set(prev), prev)))
        for pid, (partition, rotating) in self.partitions.items():
            if partition in prev:
                meta = emitted.get(pid)
                rotating.override_state(txid, meta if meta is not None else NothingEmitted(prev[partition]))


class _OpaqueEmitter(_PartitionedEmitter):
    """Storm's ``OpaquePartitionedTridentSpoutExecutor.Emitter`` (metadata stored at emit; see the
    module docstring)."""

    same_attempt = True

    def __init__(self, emitter: Any, txid_key: str, context: Any) -> None:
        super().__init__(emitter, txid_key, context)
        self.cached: dict[int, dict[str, Any]] = {}

    def emit_batch(self, tx: TransactionAttempt, metadata: Any, collector: Any) -> None:
        """Every attempt emits anew from the txid before's metadata."""
        if self._begin(tx, metadata):
            self._forget_vanished(tx.txid, tx.attempt_id)
        older = [t for t in self.cached if t < tx.txid]
        prev_cached = self.cached[max(older)] if older else {}
        prev = {}
        for pid, (partition, rotating) in self.partitions.items():
            last = _resume_from(prev_cached.get(pid))
            prev[partition] = last if last is not None else rotating.get_previous_state(tx.txid)
        metas = dict(self._by_id(self.emitter.emit_batch_new(tx, collector, set(prev), prev)))
        for pid, (partition, rotating) in self.partitions.items():
            meta = metas.get(pid)
            if meta is None:  # emitted nothing this attempt: the next txid continues from the one before
                meta = metas[pid] = NothingEmitted(prev[partition])
            rotating.override_state(tx.txid, meta, tx.attempt_id)
        self.cached[tx.txid] = metas

    def _forget_vanished(self, txid: int, attempt: int) -> None:
        """Drops ``txid``'s metadata of the partitions the source no longer lists (Storm's
        emitter does this at its commit): an earlier attempt of ``txid`` that read one of them
        failed, and a later txid that finds it again must resume where the txid before left it,
        not after records that no committed batch holds. Done when this attempt lists other
        partitions than the one before it seen here, on a task's first batch, and on an attempt
        after the first of a txid this task has not seen since it started (the store still has
        what an attempt before a restart wrote, of that txid too); every task of the spout does
        it, each after its own earlier attempts (it runs them in order)."""
        listed = {partition_key(pid) for pid in self.listed_now}
        for key in self.store.list():
            partition, _, tail = key.rpartition("/")
            if tail == str(txid) and partition not in listed:
                kept = self.store.get(key)
                if isinstance(kept, _Kept) and kept.attempt is not None and kept.attempt > attempt:
                    continue  # a later attempt's, which lists it (this task runs behind)
                self.store.delete(key)

    def success(self, tx: TransactionAttempt) -> None:
        """Drops what is kept of the txids before ``tx``."""
        super().success(tx)
        for t in [t for t in self.cached if t < tx.txid]:
            del self.cached[t]


class _Executor(ITridentSpout):
    """What both adapters share: the wrapped spout, its fields and configuration."""

    _keep_replayed: bool
    _emitter: type

    def __init__(self, spout: Any) -> None:
        self.spout = spout

    def get_coordinator(self, txid_key: str, conf: dict, context: Any) -> BatchCoordinator:
        """The coordinator (the transactional one keeps a replayed txid's partitions)."""
        return _Coordinator(self.spout.get_coordinator(conf, context), keep_replayed=self._keep_replayed)

    def get_emitter(self, txid_key: str, conf: dict, context: Any) -> Emitter:
        """The task's emitter."""
        return self._emitter(self.spout.get_emitter(conf, context), txid_key, context)

    def get_output_fields(self) -> Fields:
        """The spout's fields."""
        return self.spout.get_output_fields()

    def get_component_configuration(self) -> dict | None:
        """The spout's configuration."""
        return self.spout.get_component_configuration()


class PartitionedTridentSpoutExecutor(_Executor):
    """An `IPartitionedTridentSpout` as an `ITridentSpout` (Storm's
    ``PartitionedTridentSpoutExecutor``); see the module docstring."""

    _keep_replayed = True
    _emitter = _TransactionalEmitter

    def get_partitioned_spout(self) -> IPartitionedTridentSpout:
        """The wrapped spout."""
        return self.spout


class OpaquePartitionedTridentSpoutExecutor(_Executor):
    """An `IOpaquePartitionedTridentSpout` as an `ITridentSpout` (Storm's
    ``OpaquePartitionedTridentSpoutExecutor``); see the module docstring."""

    _keep_replayed = False
    _emitter = _OpaqueEmitter
