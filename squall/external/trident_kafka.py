"""Trident spouts over Kafka, as storm-kafka-client's: `KafkaTridentSpoutTransactional` (an
`IPartitionedTridentSpout`: a replayed txid re-reads exactly the offsets it first had) and
`KafkaTridentSpoutOpaque` (an `IOpaquePartitionedTridentSpout`: every record in exactly one batch
that succeeds).

Both take the `KafkaSpoutConfig` of `squall.external.kafka` (bootstrap servers, topics, group id,
first-poll offset strategy, poll timeout, translator and its output fields, consumer properties
and factory). The coordinator (`KafkaTridentSpoutCoordinator`) lists the topics' partitions for
each batch (re-read every ``partition_refresh_period_ms``); each task of the spout's bolt reads
partitions ``i, i + n, ...`` of them, sorted by (topic, partition).

A batch of a partition is what one poll returns after the previous batch's last offset; its
metadata is ``{"first_offset", "last_offset", "topology_id", "empty"}`` (storm-kafka-client's
``KafkaTridentSpoutBatchMetadata``). A partition with nothing new after its previous batch emits
nothing in the txid (None: the next txid starts after the same batch, and a Spark source reads
no input partition for it); one with nothing where it started anew (its first batch, or EARLIEST
or LATEST on a new submission) gets the offset its batch started at minus one as both (Storm's:
the consumer's position minus one, which librdkafka does not know after a seek), so the next
batch starts there, and ``empty`` set, so its replay emits nothing (Storm's replays the record at
that offset, the previous batch's last). A batch seeks only a partition whose consumer is not
already where the batch starts. An opaque attempt of a txid reads each partition at least as far
as an earlier attempt of it did (kept in the topology's transactional state). A transactional
replay seeks to ``first_offset`` and polls that partition alone until ``last_offset``: a record
past it (log compaction removed the ones in between) is an error, since compacted topics cannot
be read transactionally (use the opaque spout). Where a partition starts on its first poll follows the
strategy as Storm's emitter does: EARLIEST and LATEST apply on each new submission (the previous
batch's metadata names another topology id), the UNCOMMITTED_ strategies continue from the
previous batch. Trident spouts commit no offsets to Kafka: the batches' metadata, kept with the
coordinator's state, is where they are.

A record the translator refuses (or turns into values that are not one per field) is a dead
letter, skipped in every attempt of its batch and counted at each for the emitter bolt (which keeps
the last attempt's count per txid). Without a ``dead_letter`` handler it is logged once, when its
txid first reads it, naming the txid (``KafkaTridentSpoutTransactional dead letter: txid 4: topic
't' partition 0 offset 17: ...``): a transactional replay logs nothing, an opaque attempt logs
only the records past what earlier attempts read there (kept with the topology's transactional
state, so a task restarted since knows it too). A ``dead_letter`` handler is given
the record at every attempt (one that raised must be given it again).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._errors import FailedException, ReportedFailedException
from .._failure import CountsDeadLetters
from .._stable_hash import stable_hash_one
from ..engine.clock import Clock
from ..trident.coordinator import max_active_batches
from ..trident.partitioned import IOpaquePartitionedTridentSpout, IPartitionedTridentSpout, partition_key
from ._arity import arity_error
from .kafka import (
    ConfluentConsumer,
    Consumer,
    FirstPollOffsetStrategy,
    KafkaSpoutConfig,
    KafkaUnavailable,
    Record,
    TopicPartition,
)

__all__ = [
    "KafkaTridentSpoutCoordinator", "KafkaTridentSpoutEmitter", "KafkaTridentSpoutOpaque",
    "KafkaTridentSpoutTopicPartition", "KafkaTridentSpoutTransactional",
]

log = logging.getLogger("squall.external.trident_kafka")

_REPLAY_EMPTY_POLLS = 10  # polls returning nothing before a replay gives up (the batch fails)


@dataclass(frozen=True)
class KafkaTridentSpoutTopicPartition:
    """A Kafka partition as a Trident spout partition (Storm's ``KafkaTridentSpoutTopicPartition``)."""

    topic: str
    partition: int

    @property
    def tp(self) -> TopicPartition:
        """The `TopicPartition`."""
        return TopicPartition(self.topic, self.partition)

    def get_id(self) -> str:
        """``<topic>@<partition>``, the key its batches' metadata is kept under."""
        return f"{self.topic}@{self.partition}"


@dataclass(frozen=True)
class BatchMeta:
    """What one partition emitted in one batch (storm-kafka-client's
    ``KafkaTridentSpoutBatchMetadata``); kept as a dict."""

    first_offset: int
    last_offset: int
    topology_id: str
    empty: bool = False

    def to_map(self) -> dict:
        """The kept form."""
        return {"first_offset": self.first_offset, "last_offset": self.last_offset,
                "topology_id": self.topology_id, "empty": self.empty}

    @classmethod
    def from_map(cls, meta: Mapping[str, Any]) -> BatchMeta:
        """What `to_map` made."""
        return cls(int(meta["first_offset"]), int(meta["last_offset"]), str(meta["topology_id"]),
                   bool(meta.get("empty", False)))


def _key(tp: TopicPartition) -> str:
    return partition_key(f"{tp.topic}@{tp.partition}")


def _consumer(config: KafkaSpoutConfig) -> Consumer:
    return (config.consumer_factory or ConfluentConsumer)(config.consumer_props())


def _call(config: KafkaSpoutConfig, what: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except KafkaUnavailable as e:
        # the broker away: the batch fails, and is tried again with the same txid. librdkafka's
        # words ("Broker transport failure") name no broker: the bootstrap servers say which
        raise FailedException(f"Kafka Trident spout (bootstrap servers {config.bootstrap_servers}): "
                              f"{what}: {e}") from None


class _Attempt(NamedTuple):
    """What an attempt of a txid logs of its dead letters: the spout's name and the txid, and per
    partition the last offset an earlier attempt (of this txid or another still in flight) read:
    its dead letters up to there were logged then; None: a transactional replay, which logs none."""

    spout: str
    txid: int
    read_before: Mapping[TopicPartition, int] | None


def _dead_letter(config: KafkaSpoutConfig, record: Record, reason: str, attempt: _Attempt) -> None:
    """Hands ``record`` to the config's ``dead_letter``, or logs it when its txid first reads it
    (`_Attempt`). A handler that raises (the store it writes to is down) fails the batch, replayed
    with the same txid, which hands the record over again: the dead letter is not lost. The
    failure names the handler and the record, where the bare exception (a ``ConnectionError``
    raised in the spout) looked like the spout's own."""
    if config.dead_letter is None:
        # logged once: a replay reads the same records, and a line per attempt told a user
        # counting the log more dead letters than there were
        read = attempt.read_before
        if read is not None and record.offset > read.get(record.tp, -1):
            log.error("%s dead letter: txid %s: topic %r partition %d offset %d: %s", attempt.spout, attempt.txid,
                      record.topic, record.partition, record.offset, reason)
        return
    try:
        config.dead_letter(record, reason)
    except Exception as e:  # a user handler: any error fails the batch, named
        raise ReportedFailedException(
            f"Kafka Trident spout: the dead_letter handler raised {type(e).__name__}: {e}, given the record at "
            f"topic {record.topic!r} partition {record.partition} offset {record.offset} ({reason}); the "
            f"batch fails and is replayed, handing the record over again") from e


class KafkaTridentSpoutCoordinator(IPartitionedTridentSpout.Coordinator,
                                   IOpaquePartitionedTridentSpout.Coordinator):
    """Lists the topics' partitions for each batch (Storm's ``KafkaTridentSpoutCoordinator``),
    as JSON-able ``[{"topic", "partition"}]`` sorted by (topic, partition)."""

    def __init__(self, config: KafkaSpoutConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or Clock()
        self.consumer = _consumer(config)
        self._partitions: list[dict] | None = None
        self._refresh_at = 0.0

    def get_partitions_for_batch(self) -> list[dict]:
        """The partitions now (the last list, if the refresh period has not passed)."""
        now = self.clock.now()
        if self._partitions is None or now >= self._refresh_at:
            listing = _call(self.config, "listing partitions", self.consumer.partitions_for,
                            list(self.config.topics))
            errors = getattr(listing, "errors", None)
            if errors:
                # unlike the plain spout's, a batch never goes without a topic: an opaque txid
                # replayed without the partitions of its first attempt would resume its next txid
                # after records never committed. It fails, and is tried again with the same txid.
                topics = ", ".join(f"topic {topic!r}: {why}" for topic, why in sorted(errors.items()))
                raise FailedException(f"Kafka Trident spout (bootstrap servers {self.config.bootstrap_servers}): "
                                      f"listing partitions: {topics}")
            tps = sorted(set(listing))
            self._partitions = [{"topic": tp.topic, "partition": tp.partition} for tp in tps]
            self._refresh_at = now + self.config.partition_refresh_period_ms / 1000
        return self._partitions

    def close(self) -> None:
        """Closes the consumer."""
        self.consumer.close()


class KafkaTridentSpoutEmitter(IPartitionedTridentSpout.Emitter, IOpaquePartitionedTridentSpout.Emitter,
                               CountsDeadLetters):
    """Storm's ``KafkaTridentSpoutEmitter``, for both spouts; see the module docstring."""

    def __init__(self, config: KafkaSpoutConfig, context: Any, max_pending: int = 1, durable: bool = False) -> None:
        self.config = config
        self.consumer = _consumer(config)
        self.topology_id = context.get_storm_id()
        self.start_dead_letter_counts()  # read by the emitter bolt around each batch
        self.name = "KafkaTridentSpoutOpaque" if durable else "KafkaTridentSpoutTransactional"  # in the log
        self.max_pending = max_pending
        # per partition, the last offset that the attempts of each txid still in flight read there
        self.read_through: dict[TopicPartition, dict[int, int]] = {}
        # the opaque spout keeps it durably too, so that a restarted task's replay reads as far
        self.kept = (context.transactional_state(f"kafka-trident/{partition_key(context.get_this_component_id())}")
                     if durable else None)
        self.assigned: set[TopicPartition] = set()
        self.first_seek: dict[TopicPartition, int] = {}
        # per partition, the offset the consumer's next record comes from: where it was assigned
        # or sought, or one past the last record a poll returned (see `_seek_to`)
        self.next_offset: dict[TopicPartition, int] = {}

    def get_ordered_partitions(self, all_partition_info: Any) -> list[KafkaTridentSpoutTopicPartition]:
        """The partitions sorted by (topic, partition)."""
        return sorted((KafkaTridentSpoutTopicPartition(p["topic"], int(p["partition"])) for p in all_partition_info),
                      key=lambda p: (p.topic, p.partition))

    def get_partitions_for_task(self, task_index: int, num_tasks: int, ordered: list) -> list:
        """Partition ``p`` of a topic goes to task ``(h + p) % num_tasks``, ``h`` a digest of the
        topic's name: a topic's partitions spread over the tasks as Storm's every n-th does, and
        no partition changes task when a topic grows or another appears (its new task would read
        it from the last offsets stored while its old task had not yet stored a batch in flight)."""
        return [p for p in ordered if (stable_hash_one(p.topic) + p.partition) % num_tasks == task_index]

    def refresh_partitions(self, partition_responsibilities: list) -> None:
        """Assigns the task's partitions to the consumer (each is sought before it is read)."""
        mine = {p.tp for p in partition_responsibilities}
        added = {tp: _call(self.config, f"watermarks of {tp}", self.consumer.watermarks, tp)[0]
                 for tp in mine - self.assigned}
        _call(self.config, "assign", self.consumer.assign, added, sorted(self.assigned - mine))
        for tp in self.assigned - mine:
            self.first_seek.pop(tp, None)
            self.next_offset.pop(tp, None)
        self.next_offset.update(added)
        self.assigned = mine

    def _seek_to(self, tp: TopicPartition, offset: int) -> None:
        """The next record of ``tp`` polled is at ``offset`` (or the first after it). A consumer
        already there is left alone: librdkafka's seek drops what was fetched ahead and restarts
        fetching, which first waits out the fetch parked at the broker (``fetch.wait.max.ms``), so
        a batch that sought where it already was polled nothing (Java's seek to the current
        position keeps what was fetched)."""
        if self.next_offset.get(tp) != offset:
            _call(self.config, "seek", self.consumer.seek, tp, offset)
            self.next_offset[tp] = offset

    def _poll(self, paused: list[TopicPartition]) -> list[Record]:
        try:
            records = _call(self.config, "poll", self.consumer.poll, self.config.poll_timeout_ms / 1000, paused)
        except FailedException:
            self.next_offset.clear()  # where the consumer is now is not known: seek before reading again
            raise
        for record in records:
            self.next_offset[record.tp] = record.offset + 1
        return records

    def _seek(self, tp: TopicPartition, last: BatchMeta | None) -> int:
        """Seeks ``tp`` to where its next batch starts, after ``last``; returns that offset."""
        S = FirstPollOffsetStrategy
        strategy = self.config.first_poll_offset_strategy
        if tp not in self.first_seek:
            deployed_anew = last is None or last.topology_id != self.topology_id
            begin, end = _call(self.config, f"watermarks of {tp}", self.consumer.watermarks, tp)
            if strategy is S.EARLIEST and deployed_anew:
                offset = begin
            elif strategy is S.LATEST and deployed_anew:
                offset = end
            elif last is not None:
                offset = last.last_offset + 1
            else:
                offset = begin if strategy in (S.EARLIEST, S.UNCOMMITTED_EARLIEST) else end
            self.first_seek[tp] = offset
        elif last is not None:
            offset = last.last_offset + 1
        else:
            offset = self.first_seek[tp]
        self._seek_to(tp, offset)
        return offset

    def _emit(self, collector: Any, record: Record, attempt: _Attempt) -> None:
        try:
            values = self.config.translator(record)
        except Exception as e:  # noqa: BLE001 (a user translator: any error is a poison record)
            # Raising would fail the batch, and every replay would read this record again: its
            # partition would stall for good. Skipped as the plain spout does, in every attempt.
            why = e if isinstance(e, ValueError) else f"translator raised {type(e).__name__}: {e}"
            _dead_letter(self.config, record, f"malformed record: {why}", attempt)
            self.count_dead_letter(None)  # once handed over: a handler that raised failed the batch
            return
        # a wrong count fails the batch, and every replay of it again: the partition would stall
        wrong = None if values is None else arity_error(values, self.config.output_fields)
        if wrong is not None:
            _dead_letter(self.config, record, f"malformed record: {wrong}", attempt)
            self.count_dead_letter(None)
            return
        if values is not None or self.config.emit_null_tuples:
            collector.emit(values)

    def emit_batch_new(self, tx: Any, collector: Any, partitions: set, last_partition_meta: Mapping) -> dict:
        """One poll after each partition's previous batch; see the module docstring."""
        starts, lasts = {}, {}
        for p in partitions:
            last = last_partition_meta.get(p)
            lasts[p] = None if last is None else BatchMeta.from_map(last)
            starts[p] = self._seek(p.tp, lasts[p])
        # how far earlier attempts read, before this one's poll says how far it does: an opaque
        # replay of an earlier txid may read further than it first did, into records a later
        # txid's attempt read (and logged) since
        attempt = _Attempt(self.name, tx.txid, {p.tp: max(self._read_through(p.tp).values(), default=-1)
                                                for p in partitions})
        by_tp = self._poll_through(tx, {p.tp: starts[p] for p in partitions})
        metas: dict[Any, Any] = {}
        for p in partitions:
            records = by_tp.get(p.tp, [])
            for record in records:
                self._emit(collector, record, attempt)
            last = lasts[p]
            if records:
                meta = BatchMeta(records[0].offset, records[-1].offset, self.topology_id)
            elif last is not None and starts[p] == last.last_offset + 1:
                # nothing new after the previous batch: nothing emitted (the next txid starts after
                # that batch too), so a Spark source reads no input partition for it
                metas[p] = None
                continue
            else:
                # where this batch started, not the consumer's position: librdkafka knows none
                # after a seek until a record comes, and one from before it is another batch's
                at = starts[p] - 1
                meta = BatchMeta(at, at, self.topology_id, empty=True)
            metas[p] = meta.to_map()
        return metas

    def _poll_through(self, tx: Any, starts: Mapping[TopicPartition, int]) -> dict[TopicPartition, list[Record]]:
        """One poll; for an attempt of a txid that an earlier attempt read, more polls until each
        partition is read at least as far as that attempt read, so the replay holds every record
        the earlier attempt held (and perhaps more). The opaque spout keeps how far in the
        topology's transactional state, so a task restarted since knows it too.

        Why: an earlier attempt may have been committed by some of the state's partitions before
        the batch failed (a task's commit failed after another's succeeded). An `OpaqueMap`
        recomputes a key from its previous value only when the replay updates it again: a key
        of a record the earlier attempt held and the replay does not keep the earlier attempt's
        count, and the record, read by the next txid, is counted twice. A poll after a seek can
        return nothing for a while (the consumer restarts fetching), so a replay would often
        hold less."""
        targets = {}
        for tp, start in starts.items():
            read = self._read_through(tp)
            for t in [t for t in read if t <= tx.txid - self.max_pending]:
                del read[t]  # committed: no attempt of it comes again
            last = read.get(tx.txid)
            if last is not None and last >= start:
                targets[tp] = last
        by_tp: dict[TopicPartition, list[Record]] = {}
        empty = 0
        while True:
            records = [r for r in self._poll([]) if r.tp in starts]
            for record in records:
                by_tp.setdefault(record.tp, []).append(record)
            short = [tp for tp, last in targets.items() if not by_tp.get(tp) or by_tp[tp][-1].offset < last]
            if not short:
                break
            empty = 0 if records else empty + 1
            if empty >= _REPLAY_EMPTY_POLLS:
                raise FailedException(f"Kafka Trident spout: attempt {tx.attempt_id} of txid {tx.txid}: offsets up to "
                                      f"{ {f'{tp.topic}@{tp.partition}': targets[tp] for tp in short} }, which an "
                                      "earlier attempt read, could not be read again")
        for tp, records in by_tp.items():
            read = self.read_through[tp]
            if records[-1].offset > read.get(tx.txid, -1):
                read[tx.txid] = records[-1].offset
                if self.kept is not None:  # before the batch is emitted
                    self.kept.put(_key(tp), {str(t): o for t, o in sorted(read.items())})
        return by_tp

    def _read_through(self, tp: TopicPartition) -> dict[int, int]:
        if tp not in self.read_through:
            kept = self.kept.get(_key(tp)) if self.kept is not None else None
            self.read_through[tp] = {int(t): int(o) for t, o in (kept or {}).items()}
        return self.read_through[tp]

    def covers_records(self, partition_meta: Any) -> bool:
        """Whether the batch read records of its partition (not ``empty``), whatever the
        translator made of them: a record it skipped (None, without ``emit_null_tuples``) or
        refused is behind the partition's next batch as one it turned into a tuple."""
        return not BatchMeta.from_map(partition_meta).empty

    def re_emit_partition_batch(self, tx: Any, collector: Any, partition: Any, partition_meta: Any) -> None:
        """The records ``first_offset..last_offset`` of ``partition`` again; their dead letters
        were logged at the first read."""
        meta = BatchMeta.from_map(partition_meta)
        S = FirstPollOffsetStrategy
        if meta.topology_id != self.topology_id and self.config.first_poll_offset_strategy in (S.EARLIEST, S.LATEST):
            return  # Storm's: the strategy ignores what an earlier submission read
        if meta.empty:
            # Storm's metadata cannot tell an empty batch (position - 1 as both offsets) from one
            # of a single record, and replays the previous batch's last record; the flag can
            return
        tp = partition.tp
        self._seek_to(tp, meta.first_offset)
        paused = sorted(self.assigned - {tp})
        next_offset, empty = meta.first_offset, 0
        while next_offset <= meta.last_offset:
            records = [r for r in self._poll(paused) if r.tp == tp]
            empty = 0 if records else empty + 1
            if empty >= _REPLAY_EMPTY_POLLS:
                raise FailedException(f"Kafka Trident spout: replaying txid {tx.txid} of {partition.get_id()}: "
                                      f"offsets {next_offset}..{meta.last_offset} could not be read")
            for record in records:
                if record.offset > meta.last_offset:
                    if record.offset != meta.last_offset + 1 or next_offset <= meta.last_offset:
                        raise ValueError(
                            f"Kafka Trident spout: replaying txid {tx.txid} of {partition.get_id()}: got offset "
                            f"{record.offset} past the batch's end {meta.last_offset} before reaching it; log "
                            f"compaction is incompatible with the transactional spout (use KafkaTridentSpoutOpaque)")
                    break
                if record.offset >= next_offset:
                    self._emit(collector, record, _Attempt(self.name, tx.txid, None))  # logged at the first read
                    next_offset = record.offset + 1
                if next_offset > meta.last_offset:
                    break

    def close(self) -> None:
        """Closes the consumer."""
        self.consumer.close()


class _KafkaTridentSpout:
    """What both spouts share: the config, the coordinator, the emitter, the fields."""

    def __init__(self, config: KafkaSpoutConfig) -> None:
        if not config.topics:
            raise ValueError("KafkaSpoutConfig.topics: at least one topic is needed")
        self.config = config

    def get_coordinator(self, conf: dict, context: Any) -> KafkaTridentSpoutCoordinator:
        """Storm's ``KafkaTridentSpoutCoordinator``."""
        return KafkaTridentSpoutCoordinator(self.config)

    def get_emitter(self, conf: dict, context: Any) -> KafkaTridentSpoutEmitter:
        """Storm's ``KafkaTridentSpoutEmitter``."""
        return KafkaTridentSpoutEmitter(self.config, context, max_active_batches(conf),
                                        durable=isinstance(self, IOpaquePartitionedTridentSpout))

    def get_output_fields(self):
        """The translator's fields."""
        from .._fields import Fields
        return Fields(list(self.config.output_fields))


class KafkaTridentSpoutTransactional(_KafkaTridentSpout, IPartitionedTridentSpout):
    """storm-kafka-client's ``KafkaTridentSpoutTransactional``: give it to
    ``TridentTopology.new_stream``."""


class KafkaTridentSpoutOpaque(_KafkaTridentSpout, IOpaquePartitionedTridentSpout):
    """storm-kafka-client's ``KafkaTridentSpoutOpaque``: give it to ``TridentTopology.new_stream``."""
