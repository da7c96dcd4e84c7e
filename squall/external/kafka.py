"""A Kafka spout following storm-kafka-client's ``KafkaSpout``.

The pure core, each usable and tested alone:

- `OffsetManager` (`squall.external.offsets`, shared with the file spouts): per partition,
  which offsets were emitted and acked, and the next offset to commit: the end of the
  contiguous acked prefix from the committed offset, where offsets that were never emitted
  (compacted away, transaction markers) are gaps that never existed;
- `RetryService`: ``KafkaSpoutRetryExponentialBackoff`` (`squall.external.retry.RetryBackoff`:
  initial delay, delay period doubling per failure, max delay, max retries; squall counts
  against max retries only the failures a record caused, `squall.FailureCause.record_caused`,
  not a lost worker or a timeout);
- `EventTimeMerge`: a task emits, of its partitions, the waiting head with the smallest event
  time, polling a partition run dry for a bounded time before it emits past it (Kafka Streams'
  ``PartitionGroup``), so a backlog comes out in event time;
- `round_robin_assignment`, `first_poll_offset` (the four first-poll strategies and the
  "committed by this topology" rule), `is_pollable` (max uncommitted offsets), and the
  `ProcessingGuarantee` enum.

`KafkaSpout` drives them with a `Consumer` (manual partition assignment, no auto commit): one
tuple per `next_tuple` from a waiting list, a commit of each partition's ``next_commit_offset``
every ``offset_commit_period_ms``, a seek back to the earliest retriable offset to replay a
failure.

With a retry limit (``retry.max_retries`` not None), the budgets outlive the spout's worker: a
record that kills the worker the spout runs in is never failed, so the spout keeps, in each
partition's commit metadata (`squall.external.kafka_charges`), how far it may have emitted and
the `squall.external.retry.Charge` of each record marked. A record read again below that mark
after a restart, or failed as being executed when another worker died (``worker-died``), is a
suspect: it goes out only when nothing else of any spout task of its worker that keeps charges
is in flight, and nothing beside its group until every tree of the group ended (`AloneGate`
joined to the worker's `WorkerGate`, the Redis Streams and file spouts' rules). Suspects go out
in groups of up to 32 (`squall.external.retry.SUSPECT_GROUPS`), each member's level raised in a
commit before it goes out (`Charge.in_group`, nothing charged), while its worker never died
with it in a group; after such a death (or ``worker-died``) it goes alone, its charge committed
as a death before it goes out (`Charge.dying`). A mark is deleted by its record's ack (a group's
in one commit once its last tree ended, with the offsets acked), a charge kept by a failure the
record caused, and any other failure or the spout's ``close`` takes the mark back. So after the
spout's worker dies with N records pending they drain in N / 32 tuple-tree round trips, not N.
A suspect found charged past ``max_retries`` is dead-lettered when it is read again.

The consumer it drives (`Consumer`, and `ConfluentConsumer` over ``confluent_kafka``, imported
only when a spout opens, so this module imports without it: ``pip install 'squall[kafka]'``) and
the records and partitions it speaks of are `squall.external.kafka_consumer`'s, re-exported here.
"""

from __future__ import annotations

import enum
import json
import logging
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .._components import Spout
from .._failure import UNKNOWN, CountsDeadLetters, FailureCause
from .._fields import Fields
from ..engine.clock import Clock
from ._arity import arity_error
from .kafka_charges import (
    MAX_DEAD_MARKS,
    METADATA_MAX_BYTES,
    READ_AHEAD,
    MalformedCharges,
    PartitionCharges,
    TaggedCharge,
    charges_metadata,
    read_charges,
    record_tag,
)
from .kafka_consumer import (  # noqa: F401 - re-exported: their home before kafka_consumer.py
    Committed,
    ConfluentConsumer,
    Consumer,
    KafkaUnavailable,
    PartitionListing,
    Record,
    TopicPartition,
)
from .kafka_merge import HeadOrder
from .offsets import OffsetManager
from .retry import (
    AloneGate,
    Charge,
    RetryBackoff,
    RetrySchedule,
    gate_patience,
    group_size,
    warn_stood_alone,
    worker_gate,
)

log = logging.getLogger(__name__)

UNLIMITED_WARN_FAILS = 10
"""Without a retry limit, a record that failed this many times (by its own fault: a bolt failed it
or raised on it), and again at each power of ten, is warned about: a poison record that a parse bolt
raises on is retried for ever, and the partition's commits wait behind it."""


def _is_power_of_ten(n: int) -> bool:
    while n >= 10 and n % 10 == 0:
        n //= 10
    return n == 1


class MessageId(NamedTuple):
    """The spout's message id: a record's place (Storm's ``KafkaSpoutMessageId`` without the
    mutable fail count, which the spout keeps beside it)."""

    topic: str
    partition: int
    offset: int

    @property
    def tp(self) -> TopicPartition:
        """The record's partition."""
        return TopicPartition(self.topic, self.partition)


class ProcessingGuarantee(enum.Enum):
    """storm-kafka-client's processing guarantees.

    AT_LEAST_ONCE: an offset is committed only once its tuple is acked; failures are replayed.
    AT_MOST_ONCE: the polled position is committed before any record of the poll is emitted; no
    message ids, no replay. NO_GUARANTEE: emitted like AT_MOST_ONCE, positions committed on the
    commit timer whether processed or not."""

    AT_LEAST_ONCE = "AT_LEAST_ONCE"
    AT_MOST_ONCE = "AT_MOST_ONCE"
    NO_GUARANTEE = "NO_GUARANTEE"


class FirstPollOffsetStrategy(enum.Enum):
    """Where a task starts reading a partition new to it (see `first_poll_offset`)."""

    EARLIEST = "EARLIEST"
    LATEST = "LATEST"
    UNCOMMITTED_EARLIEST = "UNCOMMITTED_EARLIEST"
    UNCOMMITTED_LATEST = "UNCOMMITTED_LATEST"


# --- the pure core ----------------------------------------------------------------------------


class RetryService:
    """Which failed records are scheduled for a retry and when they are due: storm-kafka-client's
    ``KafkaSpoutRetryExponentialBackoff``, the shared `RetrySchedule` read on the spout's clock
    with the partition-wise queries the spout polls by. Time is the clock's, in seconds."""

    def __init__(self, backoff: RetryBackoff, clock: Clock) -> None:
        self.backoff = backoff
        self.clock = clock
        self._schedule: RetrySchedule[MessageId] = RetrySchedule(backoff)

    def schedule(self, msg_id: MessageId, num_fails: int) -> bool:
        """Schedules ``msg_id`` after its ``num_fails``-th failure; False (and not scheduled) if
        that is past ``max_retries``."""
        return self._schedule.schedule(msg_id, num_fails, self.clock.now())

    def reschedule(self, msg_id: MessageId, num_fails: int) -> None:
        """Schedules ``msg_id`` again after a failure that is not counted (`RetrySchedule.reschedule`)."""
        self._schedule.reschedule(msg_id, num_fails, self.clock.now())

    def is_scheduled(self, msg_id: MessageId) -> bool:
        """True if ``msg_id`` waits for a retry (due or not)."""
        return self._schedule.is_scheduled(msg_id)

    def is_ready(self, msg_id: MessageId) -> bool:
        """True if ``msg_id`` is scheduled and due."""
        return self._schedule.is_ready(msg_id, self.clock.now())

    def remove(self, msg_id: MessageId) -> bool:
        """Unschedules ``msg_id`` (it is being emitted again); True if it was scheduled."""
        return self._schedule.remove(msg_id)

    def done(self, msg_id: MessageId) -> None:
        """``msg_id`` was acked or is gone: unscheduled, its uncharged failures forgotten
        (`RetrySchedule.done`)."""
        self._schedule.done(msg_id)

    def retain_all(self, partitions: Iterable[TopicPartition]) -> None:
        """Forgets the schedules of partitions not in ``partitions`` (after a rebalance)."""
        keep = set(partitions)
        self._schedule.keep_only(lambda m: m.tp in keep)

    def earliest_retriable_offsets(self) -> dict[TopicPartition, int]:
        """Per partition, the smallest offset whose retry is due."""
        out: dict[TopicPartition, int] = {}
        for m in self._schedule.ready(self.clock.now()):
            if m.tp not in out or m.offset < out[m.tp]:
                out[m.tp] = m.offset
        return out

    def ready_message_count(self) -> int:
        """How many scheduled records are due."""
        return len(self._schedule.ready(self.clock.now()))


def round_robin_assignment(partitions: Iterable[TopicPartition], task_index: int,
                           num_tasks: int) -> list[TopicPartition]:
    """The partitions task ``task_index`` of ``num_tasks`` reads (``RoundRobinManualPartitioner``):
    sorted by (topic, partition), it gets those at ``task_index``, ``task_index + num_tasks``..."""
    if not 0 <= task_index < num_tasks:
        raise ValueError(f"task index {task_index} is not in [0, {num_tasks})")
    return sorted(set(partitions))[task_index::num_tasks]


def committed_by_topology(committed: Committed, topology_id: str) -> bool:
    """True if ``committed``'s metadata names ``topology_id`` (commits of this spout carry
    ``{"topologyId": ...}``); metadata that is not ours or not JSON is someone else's (JSON
    nested too deep to parse too: a RecursionError here failed the spout's every restart)."""
    try:
        meta = json.loads(committed.metadata or "")
    except (ValueError, RecursionError):
        return False
    return isinstance(meta, dict) and meta.get("topologyId") == topology_id


def first_poll_offset(strategy: FirstPollOffsetStrategy, committed: Committed | None,
                      topology_id: str, beginning: int, end: int,
                      committed_by_this_task: bool = False) -> int:
    """Where a task starts reading a partition new to it. A commit made by this topology (or by
    this task) is resumed whatever the strategy, so a restart or rebalance never rewinds; else
    EARLIEST reads from ``beginning``, LATEST from ``end``, and the UNCOMMITTED_ strategies from
    the commit if any (someone else's), else from ``beginning`` / ``end``."""
    S = FirstPollOffsetStrategy
    if committed is not None:
        if committed_by_this_task or committed_by_topology(committed, topology_id):
            return committed.offset
        if strategy in (S.UNCOMMITTED_EARLIEST, S.UNCOMMITTED_LATEST):
            return committed.offset
    return beginning if strategy in (S.EARLIEST, S.UNCOMMITTED_EARLIEST) else end


def is_pollable(manager: OffsetManager, max_uncommitted: int,
                earliest_retriable: int | None) -> bool:
    """AT_LEAST_ONCE: a partition may be polled while fewer than ``max_uncommitted`` of its
    offsets are uncommitted, or when a due retry lies within the first ``max_uncommitted``
    uncommitted offsets (replays inside the limit go on)."""
    if manager.num_uncommitted_offsets() < max_uncommitted:
        return True
    if earliest_retriable is None:
        return False
    at_limit = manager.nth_uncommitted_offset(max_uncommitted)
    return at_limit is None or earliest_retriable <= at_limit


class MalformedRecord(ValueError):
    """A record the translator cannot turn into a tuple; it is dead-lettered and its offset acked."""


def default_translator(record: Record) -> list:
    """storm-kafka-client's ``DefaultRecordTranslator``: topic, partition, offset, key, value."""
    return [record.topic, record.partition, record.offset, record.key, record.value]


DEFAULT_FIELDS = ("topic", "partition", "offset", "key", "value")


def record_timestamp(record: Record) -> int | None:
    """The default event time of a record: its Kafka timestamp (ms), as Kafka Streams'
    ``FailOnInvalidTimestamp`` extractor reads it; None if the record has none."""
    return record.timestamp


@dataclass(frozen=True)
class EventTimeMerge:
    """How a `KafkaSpout` task merges its partitions in event time (Kafka Streams'
    ``PartitionGroup``): it emits, among its partitions with records waiting, the head with the
    smallest ``timestamp_extractor(record)`` (Storm's windowing names such a function a
    ``TimestampExtractor``; Kafka Streams' ``default.timestamp.extractor``). A record whose
    extractor returns None or raises goes first (the translator then decides what it is).
    Before it emits past an assigned partition with nothing waiting that is not known to be at
    its end (the consumer's position below the high watermark it last heard of), the task polls
    that partition, for at most ``max_wait_ms`` (Kafka Streams' ``max.task.idle.ms``; 0: polled
    without waiting) each time it runs dry, and emits nothing meanwhile: so a backlog comes out
    in event time, not partition by partition. A partition at its end holds nothing back."""

    timestamp_extractor: Callable[[Record], Any] = record_timestamp
    max_wait_ms: int = 300


@dataclass
class KafkaSpoutConfig:
    """The spout's configuration (``KafkaSpoutConfig.Builder``; times in ms as Storm's).

    ``props`` are extra consumer properties (``group.id`` defaults to ``group_id``);
    ``enable.auto.commit`` is always false. ``translator(record)`` returns the tuple's values,
    or None to skip the record (acked at once; with ``emit_null_tuples``, emitted as a tuple
    whose every field is None); it raises
    `MalformedRecord` (or any ValueError) for a record it cannot read, which is then handed to
    ``dead_letter`` (default: logged as an error naming topic, partition and offset) and acked;
    any other exception it raises is treated the same way (the reason names the exception),
    so a poison record never kills the worker.
    ``consumer_factory(props)`` builds the `Consumer` (default `ConfluentConsumer`).
    ``event_time`` (`EventTimeMerge`, on by default) merges a task's partitions in event time;
    None emits them as storm-kafka-client does, one partition's waiting run after another."""

    bootstrap_servers: str
    topics: Sequence[str]
    group_id: str
    processing_guarantee: ProcessingGuarantee = ProcessingGuarantee.AT_LEAST_ONCE
    first_poll_offset_strategy: FirstPollOffsetStrategy = FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST
    offset_commit_period_ms: int = 30_000
    max_uncommitted_offsets: int = 10_000_000
    poll_timeout_ms: int = 200
    retry: RetryBackoff = field(default_factory=RetryBackoff)
    partition_refresh_period_ms: int = 2_000
    translator: Callable[[Record], list | None] = default_translator
    output_fields: Sequence[str] = DEFAULT_FIELDS
    emit_null_tuples: bool = False
    props: Mapping[str, Any] = field(default_factory=dict)
    consumer_factory: Callable[[Mapping[str, Any]], Consumer] | None = None
    dead_letter: Callable[[Record, str], None] | None = None
    down_retry_secs: float = 1.0
    # None: each partition's waiting run goes out before the next partition's, as
    # storm-kafka-client's spout emits (a backlog runs the partitions apart in event time)
    event_time: EventTimeMerge | None = field(default_factory=EventTimeMerge)

    def consumer_props(self) -> dict[str, Any]:
        """The consumer's properties (auto commit off: the spout commits)."""
        props = {"group.id": self.group_id, **self.props,
                 "bootstrap.servers": self.bootstrap_servers}
        auto = str(props.pop("enable.auto.commit", "")).lower()
        if auto:
            log.warning("KafkaSpout: enable.auto.commit=%s ignored; the processing guarantee "
                        "(%s) decides commits", auto, self.processing_guarantee.value)
        props["enable.auto.commit"] = False
        if self.processing_guarantee is ProcessingGuarantee.AT_LEAST_ONCE:
            props.setdefault("auto.offset.reset", "earliest")
        return props


def _offset(committed: Committed | None) -> int | None:
    """A committed offset read back, None if none."""
    return None if committed is None else committed.offset


def log_dead_letter(record: Record, reason: str) -> None:
    """The default dead-letter place: an error in the log naming the record."""
    log.error("KafkaSpout: dead letter topic %r partition %d offset %d: %s",
              record.topic, record.partition, record.offset, reason)


# How often, at most, a task whose group of suspects may take more polls the partitions whose
# records ran out without waiting (`KafkaSpout.next_tuple`): often enough to catch what the
# consumer fetched meanwhile, seldom enough to cost nothing while the group's trees run.
_TOP_UP_SECS = 0.01

# The longest poll of a partition the event-time merge waits for (`KafkaSpout._wait_for_dry`),
# ``max_wait_ms`` taken in slices of it: librdkafka's consume of up to 500 records returns once it
# has them all or at its timeout, so one poll of the whole wait would take all of it whenever the
# partition had fewer than 500 to give.
_DRY_POLL_SECS = 0.05


class _Outcome(enum.Enum):
    """What became of a record the spout took from its waiting list."""

    EMITTED = "emitted"
    SKIPPED = "skipped"   # done without a tuple: acked, in flight, not due, dead-lettered, null
    HELD = "held"         # put back: it waits for the tuples in flight, or for a commit


class KafkaSpout(Spout, CountsDeadLetters):
    """Reads Kafka topics as storm-kafka-client's spout does (see the module docstring)."""

    def __init__(self, config: KafkaSpoutConfig, clock: Clock | None = None) -> None:
        if not config.topics:
            raise ValueError("KafkaSpoutConfig.topics: at least one topic is needed")
        if config.event_time is not None and config.event_time.max_wait_ms < 0:
            raise ValueError(f"KafkaSpoutConfig.event_time.max_wait_ms: {config.event_time.max_wait_ms} "
                             "is below 0 (0: a partition with nothing waiting is polled without waiting)")
        self.config = config
        self.clock = clock or Clock()

    def declare_output_fields(self, declarer) -> None:
        """The translator's fields on the default stream."""
        declarer.declare(Fields(list(self.config.output_fields)))

    def open(self, conf, context, collector) -> None:
        """Builds the consumer; partitions are assigned on the first `next_tuple`."""
        super().open(conf, context, collector)
        cfg = self.config
        factory = cfg.consumer_factory or ConfluentConsumer
        self.consumer: Consumer = factory(cfg.consumer_props())
        self.topology_id = context.get_storm_id()
        self.task_index = context.get_this_task_index()
        self.num_tasks = len(context.get_component_tasks(context.get_this_component_id()))
        self._base_metadata = {"topologyId": self.topology_id, "taskId": self.task_index}
        self.metadata = json.dumps(self._base_metadata)
        self.retry = RetryService(cfg.retry, self.clock)
        # Retry budgets that outlive this task's worker, kept in the commit metadata
        # (squall.external.kafka_charges): what goes out when, and per partition how far the task
        # may have emitted and the charges; none counted without a limit or at most once.
        # joined with the worker's other spout tasks' gates (a suspect goes out alone in the
        # whole worker) only when it counts: without a limit nothing is charged here
        counting = cfg.retry.max_retries is not None and self._alo
        self.gate: AloneGate[MessageId] = AloneGate(cfg.retry.max_retries if self._alo else None,
                                                     worker_gate(context) if counting else None,
                                                     gate_patience(conf))
        self.budgets: dict[TopicPartition, PartitionCharges] = {}
        self.read_before: dict[TopicPartition, int] = {}   # below it: emitted by a task that stopped
        self.emitted_end: dict[TopicPartition, int] = {}   # past the last offset emitted here
        self.suspects: set[MessageId] = set()              # failed as worker-died: alone from now on
        self._aside: list[MessageId] = []                 # suspects alone set aside, their marks not yet beside
        self._unwritten: set[TopicPartition] = set()       # budgets changed since their last commit
        self._must_write = False   # and they must be committed before anything else goes out
        self._too_big_warned: set[TopicPartition] = set()
        self._top_up_at = 0.0      # the next poll that may top a group of suspects up (next_tuple)
        # event-time merge: per partition run dry (nothing waiting, not at its end), until when
        # the task waits for it before emitting past it (`_wait_for_dry`)
        self._dry_until: dict[TopicPartition, float] = {}
        self._dry_poll_at = 0.0    # the next poll, without waiting, of partitions waited for already
        # until when a partition with nothing waiting is taken as at its end without asking the
        # consumer (`_ended`): asked at every next_tuple, its two calls a partition were most of
        # what the merge cost a record
        self._ends: dict[TopicPartition, float] = {}
        # which waiting head goes out next under the event-time merge (`_next_waiting`)
        self._order = HeadOrder(self._merge_key) if cfg.event_time is not None else None
        self.managers: dict[TopicPartition, OffsetManager] = {}
        self.emitted: dict[MessageId, int] = {}  # in flight -> number of failures so far
        self.fails: dict[MessageId, int] = {}    # scheduled for retry -> failures so far
        # in flight on its last try (a failure it causes gives it up): its record's tag, for the
        # dead mark that keeps a task dying before the commit from giving it up a second time
        self.last_tries: dict[MessageId, str] = {}
        self.waiting: dict[TopicPartition, deque[Record]] = {}
        self._dead = cfg.dead_letter or log_dead_letter
        # records whose dead_letter raised: each with its reason and what follows its letter,
        # handed over again every down_retry_secs (`_hand_over`); their offsets do not commit
        self._owed: dict[MessageId, tuple[Record, str, Callable[[], None]]] = {}
        self._owed_at = 0.0
        self.start_dead_letter_counts()
        now = self.clock.now()
        self._refresh_at = now
        self._commit_at = now + cfg.offset_commit_period_ms / 1000
        self._down_until = 0.0
        self._down_since: float | None = None
        self._answers = 0   # requests the broker answered (`_answered`): what tells it back up
        # at most once and with no guarantee: the group's committed offset of each assigned
        # partition as this task last knew it (read at its assignment, then each commit it made;
        # None: none), which a close commits back past only while it is still so (`_commit_unemitted`)
        self._known_commits: dict[TopicPartition, int | None] = {}
        self._refresh_failing_since: float | None = None
        self._known: dict[str, list[TopicPartition]] = {}  # topic -> its partitions when last listed
        self._unlisted: set[str] = set()  # topics without partitions in the last listing (warned)

    def deactivate(self) -> None:
        """Commits what may be committed."""
        self._guarded(self._commit)

    def close(self) -> None:
        """Commits what may be committed and closes the consumer. The charge of a suspect in
        flight alone, or the raised level of each suspect in flight in a group, is taken back
        (its worker did not die with it), and each partition's mark comes down to what this task
        really emitted. At most once (and with no guarantee), each partition is committed at its
        first record polled and not emitted (`_commit_unemitted`)."""
        if self.gate.counting:
            self._take_back_group()
            for tp, budget in self.budgets.items():
                budget.emitted_to = max(self.read_before[tp], self.emitted_end.get(tp, 0))
                self._unwritten.add(tp)
            self.gate.clear()   # the worker's other spout tasks no longer wait for its records
        if self._owed:
            log.warning("KafkaSpout %s: %d records closed without their dead letters (the dead_letter handler "
                        "kept raising); their offsets are not committed: the partitions' next reader gives them "
                        "up again", self.config.group_id, len(self._owed))
        self._guarded(self._commit if self._alo else self._commit_unemitted)
        self.consumer.close()

    def _commit_unemitted(self) -> None:
        """At most once and with no guarantee, on close: each partition with records polled and not
        emitted (a poll brings up to 500, emitted one a ``next_tuple``) is committed at the first of
        them, so that the next reader of the partition (a new life of the task after a kill or a
        rebalance) emits them; with no guarantee, the others at their positions as the commit timer
        does. The poll's commit had passed them (at most once: before any was emitted), and a
        graceful close lost them all: three closes after 300 emits each lost 1,100 of 2,000
        records (Storm's spout loses them too; squall's file spout's at-most-once close keeps them
        as well). A record still owed its dead letter is not among them (it left the waiting list).

        Only where the group's committed offset is still the one this task last knew: another
        reader of the partition may have emitted past it (a topology submitted on the same group
        while this one waited out its kill, or the task a partition moves to as the topics'
        partitions grow, before this one's refresh gave it up), and a commit back below what it
        emitted made the next reader emit those records a second time."""
        offsets: dict[TopicPartition, int] = {}
        if self.config.processing_guarantee is ProcessingGuarantee.NO_GUARANTEE:
            for tp in self.managers:
                pos = self.consumer.position(tp)
                if pos is not None:
                    offsets[tp] = pos
        for tp, q in self.waiting.items():
            if q and tp in self.managers:
                offsets[tp] = min(r.offset for r in q)
        if offsets:
            now = self.consumer.committed(list(offsets))
            self._answered()
            offsets = {tp: off for tp, off in offsets.items() if _offset(now.get(tp)) == self._known_commits.get(tp)}
        if offsets:
            self.consumer.commit(offsets, dict.fromkeys(offsets, self.metadata))
            self._answered()

    @property
    def _alo(self) -> bool:
        return self.config.processing_guarantee is ProcessingGuarantee.AT_LEAST_ONCE

    def _guarded(self, step: Callable[[], None]) -> bool:
        """Runs ``step``; an unavailable broker is logged once per outage and left alone for
        ``down_retry_secs``. False if the broker was down. The outage ends (logged) only when
        the broker answered a request (`_answered`): a step that asked it nothing (a commit with
        nothing to commit) or a poll tells nothing (librdkafka's poll returns no error while the
        broker is down, and the records it prefetched before); taken as the end, a poll right
        after a failed commit logged "broker back" with the broker still down, and each later
        commit's failure a new outage."""
        now = self.clock.now()
        if now < self._down_until:
            return False
        answers = self._answers
        try:
            step()
        except KafkaUnavailable as e:
            if self._down_since is None:
                self._down_since = now
                log.error("KafkaSpout %s: broker %s unavailable (%s); retrying every %.1f s",
                          self.config.group_id, self.config.bootstrap_servers, e,
                          self.config.down_retry_secs)
            self._down_until = now + self.config.down_retry_secs
            return False
        if self._answers > answers:
            self._back()
        return True

    def _answered(self) -> None:
        """The broker answered a request: a commit went through, or the topics' partitions were
        listed."""
        self._answers += 1

    def _back(self) -> None:
        """The broker answered: an outage logged is over (timed now: the request that told may
        have waited for the broker's return)."""
        if self._down_since is not None:
            now = self.clock.now()
            log.warning("KafkaSpout %s: broker back after %.1f s", self.config.group_id,
                        now - self._down_since)
            self._down_since = None

    # --- the loop -------------------------------------------------------------------------------

    def next_tuple(self) -> None:
        """Refresh the assignment and commit when their timers expire; poll when nothing waits;
        emit at most one tuple."""
        now = self.clock.now()
        if now >= self._refresh_at and now >= self._down_until:
            self._refresh(now)
        if not self.managers:
            return
        if (now >= self._commit_at and self.config.processing_guarantee is not ProcessingGuarantee.AT_MOST_ONCE
                and self._guarded(self._commit)):
            self._commit_at = now + self.config.offset_commit_period_ms / 1000
        if self._owed and now >= self._owed_at:
            self._hand_over_owed(now)
        if not any(self.waiting.values()):
            self._guarded(self._poll)
        elif self.gate.has_room and now >= self._top_up_at:
            # its group of suspects may take more: the partitions whose records ran out are
            # polled without waiting, so that their next suspects join it (a group took only what
            # one poll had brought while another partition's head waited: after a poison record's
            # death, the suspects behind those that go alone went out a few at a time); at most
            # every _TOP_UP_SECS while the group's trees run
            self._top_up_at = now + _TOP_UP_SECS
            ran_out = [tp for tp in self.managers if not self.waiting.get(tp)]
            if ran_out:
                self._guarded(lambda: self._poll(0.0, ran_out))
        try:
            if self.config.event_time is not None and self._wait_for_dry(now):
                return   # a partition behind its end may hold an older record: nothing goes out past it yet
            self._emit_one()
        finally:
            self.gate.turn_ended()   # a record let go and not emitted after all, a claim not needed

    def _refresh(self, now: float) -> None:
        """Refreshes the assignment. A failed refresh is logged once until one works again and
        retried after ``down_retry_secs``; it does not hold back the polling and committing of
        the partitions already assigned (a broker that is really down fails those on its own)."""
        cfg = self.config
        try:
            self._refresh_assignment()
        except KafkaUnavailable as e:
            if self._refresh_failing_since is None:
                self._refresh_failing_since = now
                log.error("KafkaSpout %s: broker %s unavailable for the partition refresh (%s); "
                          "reading on the %d partitions assigned, retrying every %.1f s",
                          cfg.group_id, cfg.bootstrap_servers, e, len(self.managers), cfg.down_retry_secs)
            self._refresh_at = now + cfg.down_retry_secs
            return
        if self._refresh_failing_since is not None:
            log.warning("KafkaSpout %s: partition refresh works again after %.1f s", cfg.group_id,
                        now - self._refresh_failing_since)
            self._refresh_failing_since = None
        self._back()   # the listing is the broker's answer
        self._refresh_at = now + cfg.partition_refresh_period_ms / 1000

    def _listed_partitions(self) -> list[TopicPartition]:
        """The partitions of the configured topics to assign from, per topic those of its last
        listing that had any. A topic listed without partitions now (a transient error in its
        metadata; or deleted) keeps the partitions it had, so neither they nor the other topics'
        partitions move between tasks: a partition revoked and assigned again, with a LATEST
        strategy and nothing committed, would skip records. A topic never listed (not created
        yet) adds nothing until it is: Storm's ``NamedTopicFilter`` skips it with a warning.
        Each topic's absence is warned once, until it is listed again."""
        cfg = self.config
        listing = self.consumer.partitions_for(cfg.topics)
        self._answered()
        errors: Mapping[str, str] = getattr(listing, "errors", {})
        found: dict[str, list[TopicPartition]] = {}
        for tp in listing:
            found.setdefault(tp.topic, []).append(tp)
        for topic in cfg.topics:
            if topic in found:
                if topic in self._unlisted:
                    self._unlisted.discard(topic)
                    log.info("KafkaSpout %s: topic %r %s: %d partitions", cfg.group_id, topic,
                             "listed again" if topic in self._known else "found", len(found[topic]))
                self._known[topic] = found[topic]
            elif topic not in self._unlisted:
                self._unlisted.add(topic)
                why = errors.get(topic, "no partitions")
                if topic in self._known:
                    log.warning("KafkaSpout %s: topic %r has no partitions in the metadata (%s); "
                                "keeping its %d known partitions until it has", cfg.group_id, topic,
                                why, len(self._known[topic]))
                else:
                    log.warning("KafkaSpout %s: topic %r not found (%s); its partitions are read "
                                "once it exists", cfg.group_id, topic, why)
        return [tp for topic in dict.fromkeys(cfg.topics) for tp in self._known.get(topic, ())]

    def _refresh_assignment(self) -> None:
        wanted = round_robin_assignment(self._listed_partitions(), self.task_index, self.num_tasks)
        if set(wanted) == set(self.managers):
            return
        revoked = [tp for tp in self.managers if tp not in wanted]
        new = [tp for tp in wanted if tp not in self.managers]
        # their acks will be ignored: none is charged for a death, nor has its level raised
        self._take_back_group(set(revoked))
        if self._alo:
            self._commit()  # what is acked on partitions we lose is committed now
        committed = self.consumer.committed(new) if new else {}
        starts = {}
        for tp in new:
            lo, hi = self.consumer.watermarks(tp)
            starts[tp] = first_poll_offset(self.config.first_poll_offset_strategy,
                                           committed.get(tp), self.topology_id, lo, hi)
        self.consumer.assign(starts, revoked)
        for tp in revoked:
            del self.managers[tp]
            self.waiting.pop(tp, None)
            if self._order is not None:
                self._order.forget(tp)
            for d in (self.budgets, self.read_before, self.emitted_end):
                d.pop(tp, None)
            self._unwritten.discard(tp)
            self._known_commits.pop(tp, None)
        keep = set(wanted)
        self.emitted = {m: n for m, n in self.emitted.items() if m.tp in keep}
        self.fails = {m: n for m, n in self.fails.items() if m.tp in keep}
        self.last_tries = {m: t for m, t in self.last_tries.items() if m.tp in keep}
        # not handed over: their offsets did not commit, so the partition's next reader gives them up
        self._owed = {m: v for m, v in self._owed.items() if m.tp in keep}
        self.suspects = {m for m in self.suspects if m.tp in keep}
        for m in [m for m in self.gate.in_flight if m.tp not in keep]:
            self.gate.ended(m)   # its ack will be ignored: the worker's other tasks stop waiting for it
        self.retry.retain_all(keep)
        for tp, start in starts.items():
            self.managers[tp] = OffsetManager(tp, start)
            self._known_commits[tp] = _offset(committed.get(tp))
            budget = self._read_budgets(tp, committed.get(tp), start)
            self.budgets[tp] = budget
            self.read_before[tp] = budget.emitted_to
        log.info("KafkaSpout task %d/%d: partitions %s (new: %s)", self.task_index,
                 self.num_tasks, sorted(wanted), {f"{t.topic}/{t.partition}": o for t, o in starts.items()})

    def _commit(self) -> None:
        if self.config.processing_guarantee is ProcessingGuarantee.NO_GUARANTEE:
            self._commit_positions()
            return
        if not self._alo:
            return
        offsets = {}
        for tp, om in self.managers.items():
            nxt = om.next_commit_offset()
            if nxt is not None:
                offsets[tp] = nxt
            elif tp in self._unwritten:
                offsets[tp] = om.committed_offset   # its budgets changed: the same offset again
        if not offsets:
            return
        self.consumer.commit(offsets, {tp: self._metadata(tp, off) for tp, off in offsets.items()})
        self._answered()
        self._written(offsets)
        for tp, off in offsets.items():
            self.managers[tp].commit(off)
            if tp in self.budgets:
                self.budgets[tp].prune(off)
            pos = self.consumer.position(tp)
            if pos is not None and pos < off:
                self.consumer.seek(tp, off)  # it had gone back for a retry now committed past
            q = self.waiting.get(tp)
            if q:
                self.waiting[tp] = deque(r for r in q if r.offset >= off)
                self._new_head(tp)

    def _commit_positions(self) -> None:
        offsets = {}
        for tp in self.managers:
            pos = self.consumer.position(tp)
            if pos is not None:
                offsets[tp] = pos
        if offsets:
            self.consumer.commit(offsets, dict.fromkeys(offsets, self.metadata))
            self._answered()
            self._known_commits.update(offsets)

    def _poll(self, timeout: float | None = None, only: Sequence[TopicPartition] | None = None) -> None:
        """Polls the assigned partitions (``only`` those, if given) for up to ``timeout`` s
        (default ``poll_timeout_ms``), after seeking back to their due retries."""
        retriable = self.retry.earliest_retriable_offsets()
        if only is not None:
            retriable = {tp: off for tp, off in retriable.items() if tp in only}
        for tp, off in retriable.items():
            if tp in self.managers:
                self.consumer.seek(tp, off)
        paused = [] if only is None else [tp for tp in self.managers if tp not in only]
        if self._alo:
            paused += [tp for tp, om in self.managers.items()
                       if tp not in paused and not is_pollable(om, self.config.max_uncommitted_offsets, retriable.get(tp))]
        if timeout is None:
            timeout = self.config.poll_timeout_ms / 1000
        records = self.consumer.poll(timeout, paused)
        if self.config.processing_guarantee is ProcessingGuarantee.AT_MOST_ONCE and records:
            ends: dict[TopicPartition, int] = {}
            for r in records:
                ends[r.tp] = max(ends.get(r.tp, -1), r.offset + 1)
            try:
                self.consumer.commit(ends, dict.fromkeys(ends, self.metadata))  # before any of them is emitted
            except KafkaUnavailable:
                # the consumer's position is past the records now: back to the first of each
                # partition, or they would be skipped (Storm's commitSync throws out of nextTuple
                # and the restarted worker polls them again from the last commit)
                for tp, first in self._first_offsets(records).items():
                    self.consumer.seek(tp, first)
                raise
            self._answered()
            self._known_commits.update(ends)
        # queues that were empty, in the order their records came: each has a new head
        began: dict[TopicPartition, None] = {}
        for r in records:
            tp = r.tp
            if tp in self.managers:
                q = self.waiting.setdefault(tp, deque())
                if not q:
                    began[tp] = None
                q.append(r)
        for tp in began:
            self._new_head(tp)
        if self._alo:
            self._ack_compacted_retries(retriable, records)

    @staticmethod
    def _first_offsets(records: Sequence[Record]) -> dict[TopicPartition, int]:
        """Per partition, the offset of its first record in ``records`` (a poll's, in order)."""
        first: dict[TopicPartition, int] = {}
        for r in records:
            first.setdefault(r.tp, r.offset)
        return first

    def _ack_compacted_retries(self, retriable: Mapping[TopicPartition, int],
                               records: Sequence[Record]) -> None:
        """Retries whose offsets were compacted away since: after the seek to ``s`` the first
        record came at ``came > s``, so the offsets in [s, came) still scheduled are acked."""
        first = self._first_offsets(records)
        for tp, s in retriable.items():
            came = first.get(tp)
            if came is None or came <= s or tp not in self.managers:
                continue
            for m in [m for m in self.fails if m.tp == tp and s <= m.offset < came]:
                self.retry.done(m)
                del self.fails[m]
                self.managers[tp].add_to_emitted(m.offset)
                self.managers[tp].add_to_acked(m.offset)

    def _wait_for_dry(self, now: float) -> bool:
        """The event-time merge's wait (`EventTimeMerge`): while records wait, polls the
        assigned partitions run dry (nothing waiting, not known to be at their end, not paused
        by ``max_uncommitted_offsets``), each for at most ``max_wait_ms`` from when it ran dry;
        True while one is still waited for (nothing goes out past it). After its wait, a dry
        partition is polled without waiting at most every `_TOP_UP_SECS`, so what reaches it
        joins the merge. Without waiting records, `next_tuple`'s poll reads them all anyway."""
        if not any(self.waiting.values()):
            return False
        dry = [tp for tp in self.managers if not self.waiting.get(tp) and not self._ended(tp, now)]
        if dry and self._alo:
            retriable = self.retry.earliest_retriable_offsets()
            dry = [tp for tp in dry
                   if is_pollable(self.managers[tp], self.config.max_uncommitted_offsets, retriable.get(tp))]
        self._dry_until = {tp: t for tp, t in self._dry_until.items() if tp in dry}
        if not dry:
            return False
        wait = self.config.event_time.max_wait_ms / 1000 if self.config.event_time else 0.0
        for tp in dry:
            self._dry_until.setdefault(tp, now + wait)
        until = min((t for t in self._dry_until.values() if t > now), default=None)
        if until is not None:
            self._guarded(lambda: self._poll(min(until - now, _DRY_POLL_SECS), dry))
        elif now >= self._dry_poll_at:
            self._dry_poll_at = now + _TOP_UP_SECS
            self._guarded(lambda: self._poll(0.0, dry))
        else:
            return False
        # still waiting for one that is dry (its deadline not passed) and not at its end
        return any(not self.waiting.get(tp) and self._dry_until[tp] > self.clock.now() and not self._at_end(tp)
                   for tp in dry if tp in self.managers)

    def _ended(self, tp: TopicPartition, now: float) -> bool:
        """`_at_end`, a partition found at its end taken so for `_TOP_UP_SECS` without asking the
        consumer again: one whose end moved meanwhile is emitted past for at most that long (the
        consumer's high watermark is only as new as its last fetch anyway). One found behind its
        end is asked again each time: taken so while it reached its end, the task would wait for
        a partition that has nothing more to give."""
        if now < self._ends.get(tp, float("-inf")):
            return True
        ended = self._at_end(tp)
        if ended:
            self._ends[tp] = now + _TOP_UP_SECS
        return ended

    def _at_end(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is known to be read to its end: the consumer's position (else where the
        task started it) at or past the high watermark the consumer last heard of. Not heard of
        yet (``tp`` not fetched yet): not at its end. A consumer with no ``end_offset`` cannot
        say: taken as at its end, so the merge orders what waits without waiting."""
        end_offset = getattr(self.consumer, "end_offset", None)
        if end_offset is None:
            return True   # nothing to go by: the merge takes what waits, without waiting
        try:
            end = end_offset(tp)
            pos = self.consumer.position(tp)
        except KafkaUnavailable:
            return True
        if end is None:
            return False
        if pos is None:
            pos = self.managers[tp].committed_offset
        return pos >= end

    def _event_time(self, r: Record) -> Any:
        """``r``'s event time for the merge: smaller first, None (the extractor found none, or
        raised: the translator decides what the record is) before any."""
        merge = self.config.event_time
        assert merge is not None
        try:
            return merge.timestamp_extractor(r)
        except Exception:  # noqa: BLE001 (a user extractor: the record goes to the translator)
            return None

    def _new_head(self, tp: TopicPartition) -> None:
        """``tp``'s waiting queue may have a new head: the event-time merge must know it."""
        q = self.waiting.get(tp)
        if self._order is not None and q:
            self._order.head_changed(tp, q)

    def _merge_key(self, r: Record) -> tuple:
        """``r``'s place in the event-time merge, smaller first: a record without an event time
        before any with one (the translator decides what it is)."""
        t = self._event_time(r)
        return (0, 0) if t is None else (1, t)

    def _next_waiting(self, passed: Container[TopicPartition]) -> deque[Record] | None:
        """The waiting queue whose head goes out next, of partitions not in ``passed``: with
        the event-time merge, the head with the smallest event time (ties: the partition that
        got records first; `HeadOrder`); else the first partition's, as storm-kafka-client emits."""
        order = self._order
        if order is not None and not order.broken:
            tp = order.pick(self.waiting, passed)
            if not order.broken:
                return None if tp is None else self.waiting[tp]
        queues = [(tp, q) for tp, q in self.waiting.items() if q and tp not in passed]
        if not queues:
            return None
        if self.config.event_time is None or len(queues) == 1:
            return queues[0][1]
        # event times that do not compare (an extractor's mixed types): a scan that skips them
        best, best_key = queues[0][1], None
        for _, q in queues:
            key = self._merge_key(q[0])
            try:
                if best_key is None or key < best_key:
                    best, best_key = q, key
            except TypeError:   # event times that do not compare (an extractor's mixed types)
                pass
        return best

    def _emit_one(self) -> None:
        if self._must_write and not self._guarded(self._write_budgets):
            return   # a suspect's charge is settled in Kafka before anything else goes out
        passed: set[TopicPartition] = set()   # partitions whose head is held beside a group out
        while (q := self._next_waiting(passed)) is not None:
            r = q.popleft()
            outcome = self._emit(r)
            if outcome is _Outcome.HELD:
                q.appendleft(r)   # its entry in `_order` is the head's again
                if self.gate.group:
                    passed.add(r.tp)   # its group of suspects is out: another partition's next one may join it
                    continue
                return
            self._new_head(r.tp)   # the next record, if any
            if outcome is not _Outcome.SKIPPED or self._must_write:
                return

    def _emit(self, r: Record) -> _Outcome:
        """Emits ``r`` unless it is acked, in flight or waiting for a retry not yet due; with a
        retry limit, unless it must wait (`AloneGate`), its budget gives it up, or the commit
        of its budget fails."""
        msg_id = MessageId(r.topic, r.partition, r.offset)
        om = self.managers[r.tp]
        if msg_id in self._owed:
            return _Outcome.SKIPPED   # given up, its dead letter handed over again in time (`_hand_over`)
        suspect = False
        size = 1   # how many suspects it may go out with (a suspect's group, `_group_size`)
        if self._alo:
            if om.is_acked(r.offset) or msg_id in self.emitted:
                return _Outcome.SKIPPED
            if self.retry.is_scheduled(msg_id) and not self.retry.is_ready(msg_id):
                return _Outcome.SKIPPED
            if self.gate.counting:
                suspect = self._suspect(msg_id)
                size = self._group_size(r, msg_id) if suspect else 1
                held = self.gate.hold(suspect, size, self.clock.now())
                aside = self.gate.set_aside_alone()
                if aside:
                    warn_stood_alone(log, f"KafkaSpout {self.config.group_id}", len(aside), self.gate.patience)
                    self._aside.extend(aside)
                # a suspect alone set aside: its mark a death beside others, committed before
                # anything goes out beside it (`AloneGate.set_aside_alone`)
                if self._aside and not self._mark_aside():
                    return _Outcome.HELD   # read again once the broker takes the commit
                if held:
                    return _Outcome.HELD   # a suspect waits for what is in flight, and nothing goes out beside its group
                if self._given_up_before(r, msg_id, suspect):
                    return _Outcome.SKIPPED
            elif self._dead_marked(r, msg_id):
                return _Outcome.SKIPPED
        malformed = True
        try:
            values = self.config.translator(r)
        except Exception as e:  # noqa: BLE001 (a user translator: any error is a poison record)
            # Raising here would kill the worker and the restarted task would poll this record
            # again first: a crash loop. It goes to the dead letters instead.
            why = e if isinstance(e, ValueError) else f"translator raised {type(e).__name__}: {e}"
            self._malformed(r, f"malformed record: {why}")
            values = None
        else:
            if values is None and self.config.emit_null_tuples:  # a tuple of nulls, not emit(None)
                values = [None] * len(self.config.output_fields)
            # a wrong count would make emit raise: the restarted task polls this record first again
            wrong = None if values is None else arity_error(values, self.config.output_fields)
            if wrong is not None:
                self._malformed(r, f"malformed record: {wrong}")
                values = None
            else:
                malformed = False
        if not self._alo:
            if values is not None:
                self.collector.emit(values)
                return _Outcome.EMITTED
            return _Outcome.SKIPPED
        if values is None:
            if not malformed:
                self._done_without_tuple(msg_id)  # skipped: its offset may commit (malformed: after its letter)
            return _Outcome.SKIPPED
        charge = self._charge(r) if self.gate.counting else Charge()
        num_fails = self.fails.get(msg_id, charge.retries)
        alone = self.gate.goes_alone(suspect)
        if self.gate.counting and not self._charged_before(r, charge, num_fails, alone, size):
            return _Outcome.HELD   # read again once the broker takes the commit
        self.fails.pop(msg_id, None)
        self.retry.remove(msg_id)
        om.add_to_emitted(r.offset)
        self.emitted[msg_id] = num_fails
        if self.gate.counting:
            if self.config.retry.gives_up(num_fails + 1):   # a failure it causes gives it up
                self.last_tries[msg_id] = record_tag(r.key, r.value)
            self.gate.emitted(msg_id, alone, size)
            self.emitted_end[r.tp] = max(self.emitted_end.get(r.tp, 0), r.offset + 1)
        self.collector.emit(values, msg_id=msg_id)
        return _Outcome.EMITTED

    def ack(self, msg_id: Any) -> None:
        """AT_LEAST_ONCE: the offset may now commit, and the record's charge goes (at once, if
        it was a suspect in flight alone). Ids of partitions no longer assigned are ignored."""
        if not self._alo or msg_id not in self.emitted:
            return
        del self.emitted[msg_id]
        self.last_tries.pop(msg_id, None)
        self.retry.done(msg_id)   # its uncharged failures back off from the start if it comes again
        self.managers[msg_id.tp].add_to_acked(msg_id.offset)
        if not self.gate.counting:
            return
        grouped = self.gate.in_group(msg_id)
        alone = self.gate.ended(msg_id) and not grouped
        self.suspects.discard(msg_id)
        if self.budgets[msg_id.tp].charged.pop(msg_id.offset, None) is not None:
            self._unwritten.add(msg_id.tp)
        if alone:   # its charge gone before anything else goes out, with the offsets acked
            self._must_write = True
            self._guarded(self._commit)
        elif grouped and not self.gate.group:
            self._group_ended()

    def fail(self, msg_id: Any) -> None:
        """A failure without a cause: counted as one the record caused (`fail_with`)."""
        self.fail_with(msg_id, UNKNOWN)

    def fail_with(self, msg_id: Any, cause: FailureCause) -> None:
        """AT_LEAST_ONCE: schedules a replay; past ``max_retries`` failures the record caused
        (``cause.record_caused``: a bolt failed it or raised on it; a lost worker or a timeout is
        replayed without counting) the record is dead-lettered, the reason naming the cause,
        and its offset acked (Storm drops it; squall names it). A record failed as a lost
        worker is a suspect from then on; one that went out alone has the death charged before
        it went kept as the failure it caused, or taken back (see the module docstring)."""
        if not self._alo or msg_id not in self.emitted:
            return
        num_fails = self.emitted.pop(msg_id)
        last_try = self.last_tries.pop(msg_id, None)
        counting = self.gate.counting
        grouped = counting and self.gate.in_group(msg_id)
        beside = counting and self.gate.beside(msg_id)
        marked = counting and self.gate.ended(msg_id)
        alone = marked and not grouped
        if counting and self.gate.lost_worker(cause):
            self.suspects.add(msg_id)
        if cause.record_caused:
            num_fails += 1
        held = self.budgets[msg_id.tp].charged.get(msg_id.offset) if counting else None
        if held is not None and (marked or cause.record_caused):
            # alone, it was charged beforehand as a death: that charge becomes the failure it
            # caused, or is taken back (a timeout, a lost worker, a rollback: this spout lives);
            # in a group, its level raised beforehand is taken back so too, and set aside, its
            # death beside others
            c = held.charge
            self._set_charge(msg_id, Charge(num_fails, c.deaths - (alone and not beside), c.level - grouped,
                                            c.beside - beside), held.tag)
        if not cause.record_caused:
            self.retry.reschedule(msg_id, num_fails)
            self.fails[msg_id] = num_fails
        elif self.retry.schedule(msg_id, num_fails):
            self.fails[msg_id] = num_fails
            if self.config.retry.max_retries is None and _is_power_of_ten(num_fails) and num_fails >= UNLIMITED_WARN_FAILS:
                log.warning(
                    "KafkaSpout %s: topic %r partition %d offset %d failed %d times%s; with no retry limit "
                    "(RetryBackoff.max_retries None, Storm's default) it is retried for ever and the "
                    "partition's committed offset stays behind it: set max_retries to have it dead-lettered "
                    "after that many retries", self.config.group_id, msg_id.topic, msg_id.partition,
                    msg_id.offset, num_fails, cause.reason_suffix())
        else:
            def given_up() -> None:
                self.count_dead_letter(cause)
                self.managers[msg_id.tp].add_to_acked(msg_id.offset)
                self.suspects.discard(msg_id)
                # read again after a death before its commit: done, no second letter
                tag = held.tag if held is not None else last_try
                if tag is not None:
                    budget = self.budgets[msg_id.tp]
                    budget.charged.pop(msg_id.offset, None)
                    if self._mark_dead(msg_id.tp, msg_id.offset, tag) or held is not None:
                        self._unwritten.add(msg_id.tp)
                        self._must_write = True

            self._hand_over(Record(msg_id.topic, msg_id.partition, msg_id.offset, None, None),
                            f"failed {num_fails} times (max_retries {self.config.retry.max_retries})"
                            f"{cause.reason_suffix()}", given_up)
        if alone:   # settled in Kafka before the next one goes out
            self._must_write = True
        if self._must_write:
            self._guarded(self._write_budgets)
        if grouped and not self.gate.group:
            self._group_ended()

    # --- retry budgets kept in the commit metadata ------------------------------------------

    def _read_budgets(self, tp: TopicPartition, committed: Committed | None, start: int) -> PartitionCharges:
        """The budgets of ``tp`` as its commit keeps them, if the task resumes at that commit and
        counts; else none (and nothing read before). Metadata with the budgets' keys malformed
        is ignored with a warning: its records start with fresh budgets, and the next commit
        replaces it (a crash loop over a partition's metadata would stop the partition)."""
        none = PartitionCharges(start)
        if not self._alo or committed is None or committed.offset != start:
            return none
        try:
            budget = read_charges(committed.metadata)
        except MalformedCharges as e:
            log.warning("KafkaSpout %s: topic %r partition %d: the commit metadata's retry budgets are "
                        "malformed (%s); ignored: the partition's records start with fresh budgets, and "
                        "the next commit replaces them", self.config.group_id, tp.topic, tp.partition, e)
            return none
        if budget is None:
            return none
        budget.prune(start)
        if not self.gate.counting:   # no budgets without a limit: only the dead marks (`_malformed`)
            return PartitionCharges(start, dead=budget.dead)
        budget.emitted_to = max(budget.emitted_to, start)
        return budget

    def _suspect(self, msg_id: MessageId) -> bool:
        """Whether the record goes out alone (`AloneGate`): read again below where a task that
        stopped may have emitted, or failed as worker-died."""
        return msg_id.offset < self.read_before[msg_id.tp] or msg_id in self.suspects

    def _group_size(self, r: Record, msg_id: MessageId) -> int:
        """How many suspects the suspect ``r`` may go out with, itself included: one failed as
        worker-died alone, else by its level (`squall.external.retry.group_size`)."""
        if msg_id in self.suspects:
            return 1
        return group_size(self._charge(r).level)

    def _group_ended(self) -> None:
        """The last member of this task's group of suspects ended: the group's marks (the levels
        raised before its members went out, deleted by their acks or taken back) and the offsets
        its acks let move are committed together, one commit a group. Not before the next record
        goes out: a raised level a death leaves behind charges nothing (its record only goes
        alone next time), and the commit lets a later death replay none of the group's acked
        records."""
        self._guarded(self._commit)

    def _charge(self, r: Record) -> Charge:
        """``r``'s charge as its partition's budgets keep it; none, and the charge dropped, if
        it was written for another record at that offset."""
        budget = self.budgets[r.tp]
        held = budget.charged.get(r.offset)
        if held is None:
            return Charge()
        if held.tag != record_tag(r.key, r.value):
            self._stale(r, "charge")
            del budget.charged[r.offset]
            self._unwritten.add(r.tp)
            return Charge()
        return held.charge

    def _stale(self, r: Record, what: str) -> None:
        log.warning("KafkaSpout %s: topic %r partition %d offset %d: the %s the commit metadata keeps was "
                    "written for another record at this offset (the topic deleted and created again under "
                    "the group's offsets?); dropped", self.config.group_id, r.topic, r.partition, r.offset, what)

    def _given_up_before(self, r: Record, msg_id: MessageId, suspect: bool) -> bool:
        """Whether ``r`` is done without a tuple: dead-lettered by a task that died before its
        commit passed it, or a suspect charged past ``max_retries`` (dead-lettered now)."""
        budget = self.budgets[r.tp]
        if self._dead_marked(r, msg_id):
            return True
        if not suspect:
            return False
        charge = self._charge(r)
        if not self.gate.gives_up(charge):
            return False
        # its worker died with it too often (alone, or beside others)
        reason, cause = self.gate.death_reason(charge)

        def given_up() -> None:
            self.count_dead_letter(cause)
            held = budget.charged.pop(r.offset, None)
            budget.dead[r.offset] = held.tag if held is not None else record_tag(r.key, r.value)
            self._done_without_tuple(msg_id)
            self._unwritten.add(r.tp)
            self._must_write = True   # after its dead letter: a death before repeats the letter

        self._hand_over(r, reason, given_up)
        return True

    def _dead_marked(self, r: Record, msg_id: MessageId) -> bool:
        """Whether ``r`` was dead-lettered by a task that died before its commit passed it
        (its dead mark in the commit metadata): then it is done, without a second letter."""
        budget = self.budgets[r.tp]
        dead = budget.dead.get(r.offset)
        if dead is None:
            return False
        if dead == record_tag(r.key, r.value):
            self._done_without_tuple(msg_id)
            return True
        self._stale(r, "dead-letter mark")
        del budget.dead[r.offset]
        self._unwritten.add(r.tp)
        return False

    def _malformed(self, r: Record, reason: str) -> None:
        """``r`` cannot be a tuple: to the dead letters, once. AT_LEAST_ONCE: its dead mark is
        committed next, before anything else goes out, so a task that dies before the offsets
        commit past it does not leave it to be dead-lettered again by the next one (only a death
        between the letter and that commit, which takes one round trip, repeats the letter)."""
        def given_up() -> None:
            self.count_dead_letter(None)
            if not self._alo:
                return
            if self._mark_dead(r.tp, r.offset, record_tag(r.key, r.value)):
                self._unwritten.add(r.tp)
                self._must_write = True
                self._guarded(self._write_budgets)
            self._done_without_tuple(MessageId(r.topic, r.partition, r.offset))   # its offset may commit

        self._hand_over(r, reason, given_up)

    def _hand_over(self, r: Record, reason: str, given_up: Callable[[], None]) -> None:
        """Gives ``r`` up: to ``dead_letter``, then ``given_up()`` (counted in ``deadLettered``,
        its dead mark, its offset acked). A handler that raises (the topic or table it writes to
        is down) does not stop the spout: the error is logged, naming the handler, the record,
        the reason and the exception; the record is owed its letter, handed over again every
        ``down_retry_secs`` (`_hand_over_owed`), and its offset does not commit until then, so a
        task that stops first leaves it to the partition's next reader. Raised out of
        ``next_tuple`` or ``fail``, the exception had left the record with no letter and its
        offset to commit past it, or, taking the worker down, had the restarted task hand the
        record over again first: a crash loop while the store stayed down."""
        msg_id = MessageId(r.topic, r.partition, r.offset)
        if self._letter(r, reason, first=True):
            given_up()
            return
        self._owed[msg_id] = (r, reason, given_up)
        if self._alo:
            self.managers[r.tp].add_to_emitted(r.offset)   # its offset held back until the letter

    def _letter(self, r: Record, reason: str, first: bool) -> bool:
        """Calls ``dead_letter``; whether it returned. A raise is logged at the ``first`` try."""
        try:
            self._dead(r, reason)
        except Exception as e:  # noqa: BLE001 (a user handler: any error, named and logged)
            self._owed_at = self.clock.now() + self.config.down_retry_secs
            if first:
                handler = getattr(self._dead, "__qualname__", type(self._dead).__name__)
                log.error("KafkaSpout %s: the dead_letter handler %s raised %s: %s, given the record at topic "
                          "%r partition %d offset %d (%s); handed over again every %.1f s, its offset not "
                          "committed until then", self.config.group_id, handler, type(e).__name__, e,
                          r.topic, r.partition, r.offset, reason, self.config.down_retry_secs)
            return False
        return True

    def _hand_over_owed(self, now: float) -> None:
        """Hands the records owed their dead letters over again, in order, until the handler
        raises again (then the rest wait for the next try)."""
        for msg_id, (r, reason, given_up) in list(self._owed.items()):
            if not self._letter(r, reason, first=False):
                return
            del self._owed[msg_id]
            log.info("KafkaSpout %s: topic %r partition %d offset %d: its dead letter handed over",
                     self.config.group_id, r.topic, r.partition, r.offset)
            given_up()
            if self._must_write:
                self._guarded(self._write_budgets)

    def _mark_dead(self, tp: TopicPartition, offset: int, tag: str) -> bool:
        """Notes ``offset``'s dead mark; whether a commit may carry it. Past `MAX_DEAD_MARKS`
        waiting for the commit it cannot fit in Kafka's metadata (`charges_metadata` would drop
        it), so no commit is made for it: committed per mark, the metadata rebuilt each time,
        a run of malformed records behind one record in flight cost one commit each, and
        (1,600 of them) 299 s of ``next_tuple``. A later commit past the marks before it may
        still carry it."""
        dead = self.budgets[tp].dead
        dead[offset] = tag
        # the marks of the lowest offsets are the ones kept
        return len(dead) <= MAX_DEAD_MARKS or sum(1 for o in dead if o < offset) < MAX_DEAD_MARKS

    def _done_without_tuple(self, msg_id: MessageId) -> None:
        """The record counts as done (its offset may commit) without a tuple."""
        self.fails.pop(msg_id, None)
        self.retry.done(msg_id)
        self.suspects.discard(msg_id)
        om = self.managers[msg_id.tp]
        om.add_to_emitted(msg_id.offset)
        om.add_to_acked(msg_id.offset)
        if self.gate.counting and self.budgets[msg_id.tp].charged.pop(msg_id.offset, None) is not None:
            self._unwritten.add(msg_id.tp)

    def _charged_before(self, r: Record, charge: Charge, num_fails: int, alone: bool, size: int = 1) -> bool:
        """Commits, before ``r`` goes out, what a restart must find if the worker dies with it:
        a mark past it, `READ_AHEAD` offsets ahead, when it is at or past the last one, and, if
        it goes out as a suspect (``alone``, in a group of up to ``size``), its mark: in a group
        of one, its charge as a death (`Charge.dying`); in a larger one, its level raised
        (`Charge.in_group`, nothing charged). False (nothing changed) if the broker did not take
        the commit."""
        budget = self.budgets[r.tp]
        past = r.offset >= budget.emitted_to
        if not (past or alone):
            return True
        before = budget.emitted_to, budget.charged.get(r.offset)
        if past:
            budget.emitted_to = r.offset + 1 + READ_AHEAD
        if alone:
            now = Charge(num_fails, charge.deaths, charge.level, charge.beside)
            mark = now.dying() if size == 1 else now.in_group()
            budget.charged[r.offset] = TaggedCharge(mark, record_tag(r.key, r.value))
        self._unwritten.add(r.tp)
        if self._guarded(self._write_budgets):
            return True
        budget.emitted_to = before[0]
        if before[1] is None:
            budget.charged.pop(r.offset, None)
        else:
            budget.charged[r.offset] = before[1]
        return False

    def _mark_aside(self) -> bool:
        """Commits the mark of each suspect alone set aside (`_aside`) as a death beside others
        instead of a death alone (`Charge.set_aside`), and tells the gate (`mark_beside`): its
        failure or a close takes that back. False (kept for the next call) if the broker did not
        take the commit."""
        aside = [m for m in self._aside if m in self.emitted and m.offset in self.budgets[m.tp].charged]
        before = {m: self.budgets[m.tp].charged[m.offset] for m in aside}
        for m, held in before.items():
            self.budgets[m.tp].charged[m.offset] = TaggedCharge(held.charge.set_aside(), held.tag)
            self._unwritten.add(m.tp)
        if aside and not self._guarded(self._write_budgets):
            for m, held in before.items():
                self.budgets[m.tp].charged[m.offset] = held
            return False
        for m in aside:
            self.gate.mark_beside(m)
        self._aside.clear()
        return True

    def _set_charge(self, msg_id: MessageId, charge: Charge, tag: str) -> None:
        """Keeps ``charge`` for the record (none, if it is no charge and no level), to be committed."""
        charged = self.budgets[msg_id.tp].charged
        if charge.is_mark:
            charged[msg_id.offset] = TaggedCharge(charge, tag)
        else:
            charged.pop(msg_id.offset, None)
        self._unwritten.add(msg_id.tp)

    def _take_back_group(self, partitions: Container[TopicPartition] | None = None) -> None:
        """The suspects in flight in this task's group (of ``partitions``, or all) did not take
        the worker down (the spout closes, or loses their partition): each one's mark is taken
        back, alone the death charged before it went out, in a group its level raised."""
        for m, grouped in [(m, g) for m, g in self.gate.marked() if partitions is None or m.tp in partitions]:
            beside = self.gate.beside(m)
            self.gate.ended(m)   # its ack will be ignored, or is not coming
            held = self.budgets[m.tp].charged.get(m.offset)
            if held is not None:
                c = held.charge
                dying = not grouped and not beside   # alone, charged a death beforehand
                self._set_charge(m, Charge(c.retries - dying, c.deaths - dying, c.level - grouped,
                                           c.beside - beside), held.tag)

    def _metadata(self, tp: TopicPartition, offset: int) -> str:
        """``tp``'s commit metadata at ``offset``: this topology and task, and with a retry
        limit the partition's budgets (`charges_metadata`)."""
        if not self.gate.counting and not any(o >= offset for o in self.budgets[tp].dead):
            return self.metadata   # without a limit, budgets only while a dead mark waits for the commit
        text, dropped = charges_metadata(self._base_metadata, self.budgets[tp], offset)
        if dropped and tp not in self._too_big_warned:
            self._too_big_warned.add(tp)
            log.warning("KafkaSpout %s: topic %r partition %d: %d retry budgets left out of the commit "
                        "metadata, which Kafka keeps to %d bytes; a death of this worker gives those records "
                        "fresh budgets", self.config.group_id, tp.topic, tp.partition, dropped,
                        METADATA_MAX_BYTES)
        return text

    def _write_budgets(self) -> None:
        """Commits the budgets changed since their last commit, each partition at its committed
        offset (moving the offset is `_commit`'s, which also trims what waits)."""
        offsets = {tp: self.managers[tp].committed_offset for tp in self._unwritten if tp in self.managers}
        if offsets:
            self.consumer.commit(offsets, {tp: self._metadata(tp, off) for tp, off in offsets.items()})
            self._answered()
        self._written(offsets)

    def _written(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The budgets of ``offsets``' partitions are in Kafka (of those no longer assigned, moot)."""
        self._unwritten = {tp for tp in self._unwritten if tp not in offsets and tp in self.managers}
        if not self._unwritten:
            self._must_write = False
