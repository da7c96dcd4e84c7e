"""When a failed record is emitted again: storm-kafka-client's ``KafkaSpoutRetryExponentialBackoff``,
the one retry backoff of every squall spout that retries (Kafka, Redis Streams, files, followed
tables).

Storm's formula, in seconds instead of its ``TimeInterval`` (a ``TimeInterval.milliSeconds(2)``
is ``0.002``): after a record's ``n``-th failure its retry is due

- ``initial_delay`` later if ``n == 1``,
- ``delay_period * 2 ** (n - 1)`` later otherwise,

never more than ``max_delay`` later; a record failed more than ``max_retries`` times is given up
(Storm acks it; squall dead-letters it). Storm counts every failure; squall charges only those a
record caused (`FailureCause.record_caused`), and counts the others apart, in memory, until the
record is acked (`RetrySchedule.reschedule`): they back off the same way but give nothing up. ``max_retries`` None is "no limit", the one spelling of
Storm's ``Integer.MAX_VALUE`` (as every spout's ``max_retries`` takes it). Storm's default service
is ``(0 s, 2 ms, Integer.MAX_VALUE, 10 s)``, this module's `RetryBackoff()`.

Pure: the caller passes the time; nothing here reads a clock.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from .._config import Config, setting
from .._failure import WORKER_DIED, WORKER_LOST, FailureCause

# Stale heap entries (of records removed or rescheduled) a schedule tolerates beyond as many as
# it has live ones before it rebuilds its heap.
_SLACK = 64


@dataclass(frozen=True)
class RetryBackoff:
    """``KafkaSpoutRetryExponentialBackoff(initialDelay, delayPeriod, maxRetries, maxDelay)``, its
    intervals in seconds. ``max_retries`` None: no limit (Storm's ``Integer.MAX_VALUE``, the
    default); 0: a failed record is never retried; n: retried n times, then given up."""

    initial_delay: float = 0.0
    delay_period: float = 0.002
    max_retries: int | None = None
    max_delay: float = 10.0

    def __post_init__(self) -> None:
        for name in ("initial_delay", "delay_period", "max_delay"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
                raise ValueError(f"RetryBackoff: {name} must be a number of seconds >= 0, got {value!r}")
        m = self.max_retries
        if m is not None and (not isinstance(m, int) or isinstance(m, bool) or m < 0):
            raise ValueError(f"RetryBackoff: max_retries must be an integer >= 0 or None, got {m!r}")

    def delay(self, num_fails: int) -> float:
        """Seconds from a record's ``num_fails``-th failure (1, 2, ...) to its retry."""
        if num_fails <= 1:
            d = self.initial_delay
        else:
            # the exponent's cap keeps a record failed millions of times from making a huge int;
            # 2**62 periods is past any max_delay already
            d = self.delay_period * 2 ** min(num_fails - 1, 62)
        return min(d, self.max_delay)

    def gives_up(self, num_fails: int) -> bool:
        """True if a record failed ``num_fails`` times is past ``max_retries`` (not retried)."""
        return self.max_retries is not None and num_fails > self.max_retries


M = TypeVar("M", bound=Hashable)


class RetrySchedule(Generic[M]):
    """Which failed records wait for a retry and when each is due (the schedule half of Storm's
    retry service), keyed by message id. Times are the caller's, in seconds."""

    def __init__(self, backoff: RetryBackoff) -> None:
        self.backoff = backoff
        self._due: dict[M, float] = {}
        # (due, order, id) of every schedule made; a stale entry (removed, rescheduled) is skipped
        # when it comes up, so taking the next due record costs log n, not a scan
        self._heap: list[tuple[float, int, M]] = []
        self._order = 0
        # failures not charged (a store down, a rollback, a lost worker, a timeout) per record
        # since it was last acked: not a budget, so kept in memory only, for their backoff
        self._uncharged: dict[M, int] = {}

    def schedule(self, msg_id: M, num_fails: int, now: float) -> bool:
        """Schedules ``msg_id`` after its ``num_fails``-th failure; False (and not scheduled) if
        that is past ``max_retries``."""
        if self.backoff.gives_up(num_fails):
            self.done(msg_id)
            return False
        self._put(msg_id, now + self.backoff.delay(num_fails))
        return True

    def reschedule(self, msg_id: M, num_fails: int, now: float) -> None:
        """Schedules ``msg_id`` again after a failure that is not charged (a store down, a
        rollback, a lost worker, a timeout): ``num_fails``, the charged ones, is unchanged, so
        the limit cannot be newly passed. Such failures are counted here until `done`, and the
        delay is the backoff's for that count, or for ``num_fails`` if longer: an outage that
        fails every record for minutes replays each a handful of times, ``max_delay`` apart at
        most, not in a loop as fast as the topology runs (the delay of a record never charged
        would otherwise stay ``initial_delay``, 0 s by default)."""
        uncharged = self._uncharged.get(msg_id, 0) + 1
        self._uncharged[msg_id] = uncharged
        self._put(msg_id, now + self.backoff.delay(max(uncharged, num_fails)))

    def done(self, msg_id: M) -> None:
        """``msg_id`` was acked, or is gone (dead-lettered, skipped, no longer this spout's):
        unscheduled, and its uncharged failures forgotten, so that a later failure of it backs
        off from the start again."""
        self._due.pop(msg_id, None)
        self._uncharged.pop(msg_id, None)

    def _put(self, msg_id: M, due: float) -> None:
        self._due[msg_id] = due
        self._order += 1
        heapq.heappush(self._heap, (due, self._order, msg_id))
        # Kafka's service reads due records without popping them (`ready`), so the entries its
        # removes and reschedules leave behind are never popped: rebuilt once they are most of
        # the heap, memory follows the records scheduled, at amortised O(log n) a schedule
        if len(self._heap) > 2 * len(self._due) + _SLACK:
            self._compact()

    def _compact(self) -> None:
        """The heap rebuilt with one entry per scheduled record: its latest."""
        live: dict[M, tuple[float, int, M]] = {}
        for entry in self._heap:
            due, order, msg_id = entry
            if self._due.get(msg_id) == due and (msg_id not in live or live[msg_id][1] < order):
                live[msg_id] = entry
        self._heap = list(live.values())
        heapq.heapify(self._heap)

    def is_scheduled(self, msg_id: M) -> bool:
        """True if ``msg_id`` waits for a retry (due or not)."""
        return msg_id in self._due

    def is_ready(self, msg_id: M, now: float) -> bool:
        """True if ``msg_id`` is scheduled and due at ``now``."""
        due = self._due.get(msg_id)
        return due is not None and due <= now

    def remove(self, msg_id: M) -> bool:
        """Unschedules ``msg_id`` as it is emitted again, its count of uncharged failures kept
        (a record gone is `done`); True if it was scheduled."""
        return self._due.pop(msg_id, None) is not None

    def peek_ready(self, now: float) -> M | None:
        """The record due earliest, if one is due at ``now``, left scheduled."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, msg_id = heap[0]
            if self._due.get(msg_id) == due:
                return msg_id
            heapq.heappop(heap)
        return None

    def pop_ready(self, now: float) -> M | None:
        """Unschedules and returns the record due earliest, if one is due at ``now``."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, msg_id = heapq.heappop(heap)
            if self._due.get(msg_id) == due:
                del self._due[msg_id]
                return msg_id
        return None

    def ready(self, now: float) -> dict[M, float]:
        """Every scheduled record due at ``now``, with its due time."""
        return {m: d for m, d in self._due.items() if d <= now}

    def keep_only(self, where: Callable[[M], bool]) -> None:
        """Forgets every schedule whose id fails ``where(id)`` (after a rebalance...)."""
        self._due = {m: d for m, d in self._due.items() if where(m)}
        self._uncharged = {m: n for m, n in self._uncharged.items() if where(m)}
        self._compact()

    def clear(self) -> None:
        """Forgets every schedule and every count of uncharged failures."""
        self._due.clear()
        self._heap.clear()
        self._uncharged.clear()

    def __len__(self) -> int:
        return len(self._due)


def spout_backoff(owner: str, max_retries: int | None, backoff: RetryBackoff | None,
                  default_max_retries: int | None = 3) -> RetryBackoff:
    """The backoff of a spout taking both a ``max_retries`` argument and a ``backoff``: without
    ``backoff``, Storm's default delays with ``max_retries``; with it, ``backoff`` as it is, and a
    ``max_retries`` also given (other than the default) must agree with it. ``owner`` names the
    spout in the error."""
    if max_retries is not None and (not isinstance(max_retries, int) or isinstance(max_retries, bool)
                                    or max_retries < 0):
        raise ValueError(f"{owner}: max_retries must be >= 0 or None, got {max_retries!r}")
    if backoff is None:
        return RetryBackoff(max_retries=max_retries)
    if not isinstance(backoff, RetryBackoff):
        raise TypeError(f"{owner}: backoff must be a squall.external.retry.RetryBackoff, got {backoff!r}")
    if max_retries != default_max_retries and max_retries != backoff.max_retries:
        raise ValueError(f"{owner}: max_retries={max_retries!r} disagrees with the backoff's max_retries="
                         f"{backoff.max_retries!r}; give it in the RetryBackoff alone")
    return backoff


# How many suspects of each level go out together (`AloneGate`, `Charge.level`): level 0 (never
# in flight in a group of suspects when its worker died) in groups of up to 32, level 1 and up
# alone, charged as dying. Each level before the last adds one worker death per poison record
# before that record is first charged (the group's death raises every member's level; only a death
# alone charges); each group costs one tree round trip (with a stateful bolt, a checkpoint).
# After a spout's worker dies with N records pending and none poison, they drain in N / 32
# rounds instead of N; with one poison record among them, its group's 31 good members go alone
# once each afterwards (31 rounds, a second level of 4 would make it 8, but cost every poison
# record one more death, each a worker restart, and a restart takes longer than 23 rounds).
SUSPECT_GROUPS: tuple[int, ...] = (32, 1)


def group_size(level: int) -> int:
    """How many suspects of ``level`` (`Charge.level`) may go out together (`SUSPECT_GROUPS`)."""
    return SUSPECT_GROUPS[min(max(level, 0), len(SUSPECT_GROUPS) - 1)]


class Charge(NamedTuple):
    """What a record's durable budget holds: the failures charged to it (those it caused, and
    deaths of its spout's worker while it was in flight alone), of which ``deaths`` were deaths,
    its ``level``: how many times its worker died while it was in flight in a group of suspects
    (`AloneGate`, `SUSPECT_GROUPS`), which is not a failure charged, and ``beside``: how many
    times its worker died while it was in flight as a suspect alone *set aside* (it stood still
    for the message timeout, held downstream, and others went out beside it), not a failure
    charged either but bounded apart (`beside_limit`). Its text, kept by each spout where it
    keeps its progress, is ``"<retries> <deaths>"``, then ``" <level>"`` if the level or
    ``beside`` is not 0, then ``" <beside>"`` if ``beside`` is not 0 (a text of two fields, as
    written before levels, is level 0; one of three, as written before ``beside``, beside 0)."""

    retries: int = 0
    deaths: int = 0
    level: int = 0
    beside: int = 0

    def __str__(self) -> str:
        if self.beside:
            return f"{self.retries} {self.deaths} {self.level} {self.beside}"
        if self.level:
            return f"{self.retries} {self.deaths} {self.level}"
        return f"{self.retries} {self.deaths}"

    @classmethod
    def parse(cls, text: str | None) -> Charge:
        """The charge of ``text`` (None: none yet); raises ValueError on anything else."""
        if text is None:
            return cls()
        fields = text.split(" ")
        if not 1 <= len(fields) <= 4:
            raise ValueError(f"not a charge: {text!r}")
        charge = cls(*(int(f) for f in fields))
        if (charge.retries < 0 or not 0 <= charge.deaths <= charge.retries or charge.level < 0
                or charge.beside < 0):
            raise ValueError(f"not a charge: {text!r}")
        return charge

    @property
    def is_mark(self) -> bool:
        """Whether there is anything to keep (a charge, a level or deaths beside others): else
        the record's entry goes."""
        return bool(self.retries or self.level or self.beside)

    def dying(self) -> Charge:
        """The charge written before the record goes out alone: as if its worker dies with it."""
        return Charge(self.retries + 1, self.deaths + 1, self.level, self.beside)

    def in_group(self) -> Charge:
        """The mark written before the record goes out in a group of suspects: its level raised,
        as if its worker dies with the group (nothing charged)."""
        return Charge(self.retries, self.deaths, self.level + 1, self.beside)

    def set_aside(self) -> Charge:
        """The mark of a suspect alone (charged as `dying`) once it is set aside and others go
        out beside it (`AloneGate.set_aside_alone`): the death charged before it went out taken
        back, and one death beside others counted instead, as if its worker dies now."""
        return Charge(self.retries - 1, self.deaths - 1, self.level, self.beside + 1)


def beside_limit(max_retries: int) -> int:
    """The deaths beside others (`Charge.beside`) past which a suspect is given up: twice the
    deaths alone that give one up, less one (``2 * max_retries + 1``). Each of a poison
    record's deaths alone is at most one death beside it for the suspects set aside in flight
    with it, so the poison record reaches its own limit first, by ``max_retries + 1`` deaths;
    a poison record that kills only once newer records move it on (in an event-time window)
    never dies alone, and is given up here, with every suspect set aside beside it each time:
    nothing tells them apart."""
    return 2 * max_retries + 1


WORKER_GATE_KEY = "squall.external.retry.WorkerGate"
"""The key of the worker's `WorkerGate` in its ``context.worker_resources``."""


class WorkerGate:
    """The part of the alone rule (`AloneGate`) that the spout tasks of one worker share: how
    many of their records are in flight, and which task's suspect goes alone, if one does. A
    worker's death takes all of its spout tasks down at once, so a suspect is in flight alone
    only if no record of any of them is in flight beside it.

    Each spout task's `AloneGate` joins it (`worker_gate` hands every task of a worker the same
    one); nothing else reads it. Thread-safe: the tasks of a worker may run on different loops
    (``topology.executor.own.thread``, or moved off a stalled loop), so what each gate decides
    and what it changes here happen under this object's lock. Pure: it keeps counts, no I/O."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # emitted (or let go by `AloneGate.hold`, not yet emitted) and not ended, of every task
        self._in_flight = 0
        # the gate whose suspect goes alone: waiting for the others' records to end, let go, or
        # in flight; every other gate holds back while there is one
        self._owner: AloneGate[Any] | None = None
        # records of every task acked or failed so far, and groups of suspects opened: what a
        # task held up watches to know whether the worker moves (`AloneGate.stalled`)
        self._ends = 0

    @property
    def in_flight(self) -> int:
        """The records of every task of the worker in flight (or let go and about to be)."""
        return self._in_flight

    @property
    def owner(self) -> AloneGate[Any] | None:
        """The task gate whose suspect goes alone, if one does (see `AloneGate`)."""
        return self._owner


def gate_patience(conf: Any) -> float:
    """How long a group of suspects may hold a spout task's other records back without any of
    its trees ending (`AloneGate`'s ``patience``): the topology's
    ``topology.message.timeout.secs`` (30 s by default), the time a tree may take."""
    return float(setting(conf or {}, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))


def warn_suspects_taken_back(log: logging.Logger, who: str, count: int, conf: Any) -> None:
    """Say that a spout task is taking back ``count`` records its previous life left pending
    (its worker died with them in flight, or was stopped), which go out as suspects, a group at
    a time (`AloneGate`, `SUSPECT_GROUPS`).

    After a crash with many records in flight, that replay is the recovery's whole length:
    each group waits until every tree of the one before ended, and behind a persistent window
    or another stateful bolt a tree ends only at a checkpoint, so 1,000 records take 32
    checkpoints (16 s at 500 ms) while nothing fails and the spout reads nothing new. Without
    this line a user watching the topology could not tell that wait from a hang."""
    size = SUSPECT_GROUPS[0]
    rounds = -(-count // size)
    interval = setting(conf or {}, Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL)
    log.warning("%s: taking back %d record(s) its previous life left pending (its worker died, or was stopped, "
                "with them in flight); max_retries is set, so each is a suspect of a death: they go out in groups of up to %d (one that died in a group before goes alone), "
                "at least %d group(s), each once every tree of the one before ended, and nothing else of the "
                "worker's spouts beside them; behind a persistent window or another stateful bolt a tree ends "
                "at a checkpoint (topology.state.checkpoint.interval.ms: %s), so this takes %d checkpoint(s) or "
                "more. The spout's max_retries=None sends them at once, uncounted (docs/connectors.md)",
                who, count, size, rounds, interval, rounds)


def warn_stood_alone(log: logging.Logger, who: str, count: int, patience: float | None) -> None:
    """Say that ``count`` suspects of ``who`` (a spout, named as its own warnings name it), each
    out alone, stood still for ``patience`` seconds and go on beside others
    (`AloneGate.set_aside_alone`). Behind an event-time window every suspect alone waits that
    long, and a spout whose worker died with many records pending sends one record a message
    timeout: without this, the pipeline looked stuck with nothing failing and nothing logged."""
    log.warning("%s: %d record(s) suspected of killing the worker waited %.0f s (topology.message.timeout.secs) "
                "to finish alone and now go on beside others: something downstream holds their tuples (an "
                "event-time window acks one only once newer tuples move its watermark), so each suspect that "
                "goes alone waits as long. Persistent windows, or the spout's max_retries=None, avoid the wait "
                "(docs/connectors.md)", who, count, patience or 0.0)


def worker_gate(context: Any) -> WorkerGate:
    """The `WorkerGate` of the worker ``context``'s task runs in: the same object for every
    spout task of that worker that asks (it lives in the worker's ``context.worker_resources``,
    `squall._worker_resources.WorkerResources`), or one of its own for a task opened with a
    context that lends none (a spout driven outside a worker, as tests do)."""
    resources = getattr(context, "worker_resources", None)
    if resources is None:
        return WorkerGate()
    return resources.get_or_make(WORKER_GATE_KEY, WorkerGate)


class AloneGate(Generic[M]):
    """Which of a spout task's records go out when, so that the death of the spout's worker is
    charged only to a record in flight alone in that worker (shared by the Redis Streams, file
    and Kafka spouts).

    A record delivered again after its spout stopped without acking it (Redis's delivery count
    above 1; a line read again below where the dead task had read to), or failed as being
    executed when its (other) worker died (`lost_worker`), is a *suspect*: it goes out only once
    nothing else is in flight of any spout task of its worker that joined the same `WorkerGate` (``worker``: every task that
    opens with ``worker_gate(context)``), and nothing of them goes out beside it until its tree
    ends. A suspect that must wait claims the worker: from then on the other tasks hold back
    their records too, so that what is in flight drains and the suspect is not starved.

    Suspects go out in groups (group testing): a suspect of `Charge.level` l opens a group of up
    to ``group_size(l)`` (`SUSPECT_GROUPS`), and the task's next suspects that go in groups of
    that size join it while it has room; nothing else goes out until every member's tree ended.
    Before each member goes out the spout writes its mark: in a group of more than one
    `Charge.in_group` (its level raised, nothing charged: the worker's death with a group out
    does not tell which member killed it, so the next time each goes in smaller groups); in a
    group of one (the last level) `Charge.dying`, so if the worker dies with it the charge
    stays. A member's ack deletes its mark, a failure it caused charges it, any other failure
    or the spout's ``close`` takes the mark back (`in_group` says which mark it was). So a poison
    record is charged only for deaths alone, after one death per level, and after a spout's
    worker dies with N good records pending they drain in N / 32 tree round trips, not N. Without a
    limit (``max_retries`` None) nothing is counted and no record of the task's own goes alone
    (`counting`), but the task still joins: its records count as in flight for the others'
    suspects, and wait while one goes alone. A spout that joins no gate (a plain user spout in
    the same worker) is not seen: a suspect may be in flight beside its records, and is charged
    if one of them kills the worker. One whose failure said that a bolt was executing it when
    its (other) worker died (`WORKER_DIED`) is charged for it, as a failure it caused, and is a
    suspect too: it goes out alone (its spout asks with size 1, whatever its level), so that what
    else dies with it next time is not in flight beside it.

    The calls, on the spout's own thread: `hold` before each record (False lets it go: the
    record counts as in flight from then on), `goes_alone`, then `emitted` once it is out;
    `turn_ended` as each ``next_tuple`` returns; `ended` at a record's ack or failure; `clear`
    when the spout drops what it had in flight (its ``close``, a file given up). Without
    ``worker`` the gate has a `WorkerGate` of its own, and holds back only among its own
    records. Pure: it keeps ids, the spout does the I/O.

    A task held up for ``patience`` seconds (the spout's ``topology.message.timeout.secs``;
    None: for ever) while none of its worker's records ended, its group out or a suspect of it
    waiting for the others' records to end, goes on, as `hold` (given ``now``) finds it: the
    group is *set aside* (what waited goes out beside it, new suspects in a group of their
    own), the waiting suspect goes out beside what is in flight. Something downstream holds
    those trees, not the processing of them: an event-time window acks its inputs only once
    newer tuples move its watermark past them, and the records read after them are those
    tuples, so waiting for their end waited for ever (a `FileSpout`'s worker SIGKILLed before a
    window: the restarted task sent its first 32 suspects and nothing more, its windows never
    fired again). The members set aside keep their marks (`marked`), and a death from then on
    is charged as their marks say, though others are in flight beside them: the price of going
    on; but a suspect alone set aside is listed (`set_aside_alone`) for its spout to make its
    mark a death beside others (`Charge.set_aside`, bounded apart: `beside_limit`) before
    anything goes out beside it, so that a poison record's death is not charged to it as a
    death alone (the file, Redis Streams and Kafka spouts do). From then on the task's groups of more than one neither wait for what is in flight
    nor hold the others back (one is set aside as soon as a record cannot join it): a death
    with others beside such a group charges no one either (its members' levels are raised, and
    the others are read again as suspects), so only a suspect alone waits ``patience`` each
    time. Such a group's members still count as in flight, and a suspect alone waits for them
    as for any record: their trees are being processed, and a poison member's death beside a
    suspect let go would be charged to that suspect (with ``max_retries`` 0, a good record
    dead-lettered at once for another's poison)."""

    def __init__(self, max_retries: int | None, worker: WorkerGate | None = None,
                 patience: float | None = None) -> None:
        self.max_retries = max_retries
        self.counting = max_retries is not None
        self.worker = worker if worker is not None else WorkerGate()
        self.patience = patience
        # members of groups set aside (stalled past patience, or closed once groups go beside
        # what is in flight), by the size of their group
        self._aside: dict[M, int] = {}
        # those of them set aside as they stood still: not counted in the worker's in flight any
        # more, so that nothing waits for them (the others' trees are being processed: a suspect
        # alone waits for them as for any record in flight)
        self._uncounted: set[M] = set()
        # suspects alone (charged as dying) set aside as they stood still, not yet taken by the
        # spout (`set_aside_alone`), and those whose mark the spout made a death beside others
        # (`mark_beside`): a failure or close takes that back, not a death
        self._stood_alone: list[M] = []
        self._beside: set[M] = set()
        # since when this task has been held up (a group out, or a suspect waiting for the
        # worker's records to end) with none of the worker's records ending; None: it is not
        self._stuck_since: float | None = None
        self._seen_ends = 0      # the worker's `WorkerGate` ends when `hold` last looked
        # a group of this task stood still past patience once: from then on its groups of more
        # than one go beside what is in flight (for the task's life: a window may hold trees again)
        self._holds_trees = False
        self.in_flight: set[M] = set()   # emitted, neither acked nor failed yet
        # the suspects of this task's group in flight (marked before each went out); the group is
        # open while any is, and takes members until group_size of them went out
        self.group: set[M] = set()
        self.group_size = 0      # of the open group (1: a suspect alone, charged as dying); 0: none
        self._joined = 0         # members the open group took so far
        # let go by hold and not yet emitted: None no record; False beside others (counted in the
        # worker's in flight already); True alone (the worker claimed)
        self._let_go: bool | None = None
        self._waiting = False   # a suspect of this task was held back since the last turn_ended

    @property
    def alone(self) -> M | None:
        """The suspect in flight alone (in a group of one, charged as dying), if one is."""
        if self.group_size == 1 and self.group:
            return next(iter(self.group))
        return None

    @property
    def has_room(self) -> bool:
        """Whether this task's group of suspects is out and may take more members (`hold`)."""
        return bool(self.group) and self._joined < self.group_size

    def in_group(self, msg_id: M) -> bool:
        """Whether ``msg_id`` is in flight in this task's group of more than one suspect (its
        mark's level raised, nothing charged); False for one alone (charged as dying). A member
        of a group set aside is answered by the size of that group."""
        if msg_id in self._aside:
            return self._aside[msg_id] > 1
        return self.group_size > 1 and msg_id in self.group

    def marked(self) -> list[tuple[M, bool]]:
        """The suspects in flight with a mark (the open group's and those set aside), each with
        whether it went in a group of more than one (`in_group`): what a spout that closes
        takes back."""
        return [(m, self.group_size > 1) for m in self.group] + [(m, n > 1) for m, n in self._aside.items()]

    def stalled(self, now: float | None) -> bool:
        """Whether this task has been held up (its group out, or a suspect of it waiting for
        the worker's records to end, or held back by another task's) for ``patience`` seconds,
        as of its last `hold`, with none of the worker's records ending nor a group of suspects
        opening meanwhile (False without a ``now`` or a patience)."""
        if now is None or self.patience is None or self._stuck_since is None:
            return False
        return now - self._stuck_since >= self.patience

    def _stuck(self, now: float | None) -> None:
        """This task is held up: from now, unless it was already."""
        if now is not None and self._stuck_since is None:
            self._stuck_since = now

    def _set_aside(self, stood_still: bool) -> None:
        """Sets the open group aside, under the worker's lock: its members no longer hold the
        others back; if it ``stood_still`` (past patience), they no longer count as in flight
        for the worker's suspects either. A group closed only because groups go beside what is
        in flight (`_holds_trees`) stays counted: its trees are being processed, and a poison
        member's death beside a suspect alone would be charged to that suspect."""
        w = self.worker
        # bounded by what is in flight, for a spout that never takes them (`set_aside_alone`)
        self._stood_alone = [m for m in self._stood_alone if m in self.in_flight]
        for m in self.group:
            self._aside[m] = self.group_size
            if stood_still and m in self.in_flight:
                w._in_flight -= 1
                self._uncounted.add(m)
                if self.group_size == 1:
                    self._stood_alone.append(m)
        self.group = set()
        self.group_size = self._joined = 0
        self._stuck_since = None
        if w._owner is self:
            w._owner = None

    def hold(self, suspect: bool, size: int = 1, now: float | None = None) -> bool:
        """Whether the next record (a ``suspect`` or not) must wait: another task's suspects go
        out, this task's group is in flight and the record may not join it (only a suspect that
        goes in groups of the same ``size``, `group_size`, while the group took fewer than that),
        or this one is a suspect (of a counting task) and something of the worker is in flight;
        such a suspect claims the worker, so that the others hold back until its group's trees
        end. False lets the record go: until `emitted` (or `turn_ended`, or the next ``hold``),
        it counts as in flight, so that no suspect of another task goes out before it. Given
        ``now``, a group stalled past ``patience`` is set aside first (`stalled`), and another
        task's group (or claim) holds this one back no more once either task has been held up
        that long: the other may never ask again (nothing left to send, or at max spout
        pending), and this one's records may be what that group's trees wait for."""
        w = self.worker
        with w._lock:
            self._withdraw()
            if now is not None and w._ends != self._seen_ends:
                self._seen_ends = w._ends
                if self._stuck_since is not None:
                    self._stuck_since = now   # a record of the worker ended: it moves
            late = self.stalled(now)
            joins = bool(self.group) and suspect and self.counting and size == self.group_size and self._joined < size
            if self.group and (late or (self._holds_trees and self.group_size > 1 and not joins)):
                self._holds_trees = True
                self._set_aside(late)
            owner = w._owner
            if owner is not None and owner is not self:
                if not (late or owner.stalled(now)):
                    self._stuck(now)
                    return True
                # its group (or waiting suspect) stood still: it holds no one back any more; the
                # owner may not ask again to find it out (nothing left to send, or at max spout
                # pending), so the task it held sees it. Its members still count as in flight
                w._owner = None
            if self.group:
                # a group out: only a suspect of its size joins, while it has room
                if joins:
                    self._let_go = True
                    self._stuck_since = None
                    return False
                self._stuck(now)
                return True
            if suspect and self.counting:
                w._owner = self   # the others hold back until its tree ends
                # once a group stood still, groups go beside what downstream holds at once
                beside = self._holds_trees and size > 1
                if w._in_flight and not (beside or late):
                    self._waiting = True
                    self._stuck(now)
                    return True
                if late:
                    self._holds_trees = True
                self._let_go = True
                self._stuck_since = None
                return False
            if w._owner is self:   # its suspect went another way (dead-lettered, taken away)
                w._owner = None
            w._in_flight += 1
            self._let_go = False
            self._stuck_since = None
            return False

    def set_aside_alone(self) -> list[M]:
        """The suspects alone (charged as dying) that `hold` set aside since the last call, as
        they stood still, still in flight: others go out beside each from now on, so before
        anything goes out the spout makes its mark a death beside others (`Charge.set_aside`)
        and says so (`mark_beside`). Else the death of a record sent beside it (a poison record
        upstream of the window that holds it) is charged to it as a death alone."""
        with self.worker._lock:
            out = [m for m in self._stood_alone if m in self._aside and m in self.in_flight]
            self._stood_alone = []
            return out

    def mark_beside(self, msg_id: M) -> None:
        """The spout wrote the mark of ``msg_id``, a suspect alone set aside, as a death beside
        others (`set_aside_alone`): its failure or the spout's close takes that back (`beside`)."""
        self._beside.add(msg_id)

    def beside(self, msg_id: M) -> bool:
        """Whether ``msg_id``'s mark is a death beside others (`mark_beside`), to be taken back
        at its failure (or deleted at its ack): ask before `ended`."""
        return msg_id in self._beside

    def gives_up(self, charge: Charge) -> bool:
        """Whether a suspect with ``charge`` is past its limits: ``max_retries`` failures charged
        (deaths alone among them), or `beside_limit` deaths beside others."""
        m = self.max_retries
        return m is not None and (charge.retries > m or charge.beside > beside_limit(m))

    def goes_alone(self, suspect: bool) -> bool:
        """Whether a record that may go (`hold` False) goes as a suspect, its mark written first
        (a group of one: its charge as dying; a larger group: its level raised)."""
        return suspect and self.counting

    def emitted(self, msg_id: M, alone: bool, size: int = 1) -> None:
        """``msg_id`` went out (``alone``: as a suspect, its mark written, in a group of up to
        ``size``, the size `hold` was asked with)."""
        w = self.worker
        # the common case touches nothing shared: let go beside others, and counted by hold (only
        # this task's thread makes this gate the worker's owner or stops it being one)
        if self._let_go is False and not alone and w._owner is not self and msg_id not in self.in_flight:
            self._let_go = None
            self.in_flight.add(msg_id)
            return
        with w._lock:
            let_go, self._let_go = self._let_go, None
            if msg_id in self.in_flight:   # counted already (emitted twice without ending)
                if let_go is False:
                    w._in_flight -= 1
            else:
                self.in_flight.add(msg_id)
                if let_go is not False:   # let go alone, or without asking hold: not counted yet
                    w._in_flight += 1
            if alone:
                if not self.group:   # it opens a group: the tasks it holds up wait for it anew
                    self.group_size, self._joined = max(size, 1), 0
                    w._ends += 1
                self.group.add(msg_id)
                self._joined += 1
                w._owner = self
            elif w._owner is self and not self.group:
                w._owner = None

    def turn_ended(self) -> None:
        """The spout's ``next_tuple`` returns: a record `hold` let go and that was not emitted
        (the spout dead-lettered it, or could not write its charge) no longer counts as in
        flight, and this task's claim on the worker ends unless a suspect of it was held back
        in this call (it waits on: its ``hold`` in a later call claims the worker again, but a
        suspect that left the task's queue meanwhile would hold the other tasks back for ever)."""
        w = self.worker
        if self._let_go is None and not self._waiting and w._owner is not self:
            return   # nothing let go, no claim of this task's: nothing shared to change
        with w._lock:
            self._withdraw()
            if not self._waiting and w._owner is self and not self.group:
                w._owner = None
            self._waiting = False

    def _withdraw(self) -> None:
        """A record let go by `hold` and not emitted no longer counts, under the worker's lock."""
        w = self.worker
        if self._let_go is False:
            w._in_flight -= 1
        elif self._let_go is True and w._owner is self and not self.group:
            w._owner = None
        self._let_go = None

    def ended(self, msg_id: M) -> bool:
        """``msg_id`` was acked or failed; True if it was a suspect of this task's group (its
        mark written before it went out is to be deleted, kept or taken back now: ask
        `in_group` first which). The group ends with its last member in flight."""
        w = self.worker
        with w._lock:
            aside = msg_id in self._aside
            w._ends += 1
            if msg_id in self.in_flight:
                self.in_flight.discard(msg_id)
                if msg_id not in self._uncounted:   # one set aside as it stood still was not
                    w._in_flight -= 1
            self._uncounted.discard(msg_id)
            self._beside.discard(msg_id)
            if aside:
                del self._aside[msg_id]
                return True
            if msg_id in self.group:
                self.group.discard(msg_id)
                if not self.group:
                    self.group_size = self._joined = 0
                    if w._owner is self:
                        w._owner = None
                return True
            return False

    def clear(self) -> None:
        """Forgets the records in flight and the suspect of this task (its spout closes, or
        drops them: their acks will not be asked about); the worker's other tasks no longer
        wait for them."""
        w = self.worker
        with w._lock:
            self._withdraw()
            w._in_flight -= len(self.in_flight - self._uncounted)
            self.in_flight.clear()
            self._aside.clear()
            self._uncounted.clear()
            self._stood_alone.clear()
            self._beside.clear()
            self.group.clear()
            self.group_size = self._joined = 0
            self._waiting = False
            if w._owner is self:
                w._owner = None

    @staticmethod
    def lost_worker(cause: FailureCause) -> bool:
        """Whether ``cause`` makes the record failed with it a suspect: a bolt was executing it
        when its (other) worker died (`WORKER_DIED`). A record that was only in flight there
        (`WORKER_LOST`) is not one: this spout lives, so being alone would charge it nothing for
        that death, and were every record in flight a suspect, each would go out alone after the
        previous one's whole tree (with a persistent window, a checkpoint each: after a worker's
        SIGKILL the records it held came back at one per checkpoint, those read behind them
        waiting too). Should one of them kill the spout's own worker on its replay, its
        delivery count makes it a suspect then (`AloneGate`), one death later."""
        return cause.kind == WORKER_DIED

    def death_reason(self, charge: Charge, delivered: int | None = None) -> tuple[str, FailureCause]:
        """The dead letter's reason and cause for a suspect found charged past ``max_retries``
        when it is taken again (``delivered``: how often it was, where the source counts)."""
        said = [f"delivered {delivered} times"] if delivered is not None else []
        if charge.deaths:
            said.append(f"its worker died each of the {charge.deaths} times it was in flight alone")
        if charge.retries > charge.deaths:
            said.append(f"{charge.retries - charge.deaths} failures it caused")
        if charge.beside:
            said.append(f"its worker died each of the {charge.beside} times it was in flight set aside "
                        "beside others (held downstream past the message timeout)")
        told = "; ".join(said)
        limits = f"max_retries {self.max_retries}"
        if self.max_retries is not None and charge.beside > beside_limit(self.max_retries):
            limits += f", deaths beside others {beside_limit(self.max_retries)}"
        return (f"failed {charge.retries} times ({limits}): {told}",
                FailureCause(WORKER_LOST, "", -1, "", told))
