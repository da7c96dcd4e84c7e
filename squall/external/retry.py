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
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

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


class Charge(NamedTuple):
    """What a record's durable budget holds: the failures charged to it (those it caused, and
    deaths of its spout's worker while it was in flight alone), of which ``deaths`` were deaths.
    Its text, kept by each spout where it keeps its progress, is ``"<retries> <deaths>"``."""

    retries: int = 0
    deaths: int = 0

    def __str__(self) -> str:
        return f"{self.retries} {self.deaths}"

    @classmethod
    def parse(cls, text: str | None) -> Charge:
        """The charge of ``text`` (None: none yet); raises ValueError on anything else."""
        if text is None:
            return cls()
        retries, _, deaths = text.partition(" ")
        charge = cls(int(retries), int(deaths or 0))
        if charge.retries < 0 or not 0 <= charge.deaths <= charge.retries:
            raise ValueError(f"not a charge: {text!r}")
        return charge

    def dying(self) -> Charge:
        """The charge written before the record goes out alone: as if its worker dies with it."""
        return Charge(self.retries + 1, self.deaths + 1)


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

    @property
    def in_flight(self) -> int:
        """The records of every task of the worker in flight (or let go and about to be)."""
        return self._in_flight

    @property
    def owner(self) -> AloneGate[Any] | None:
        """The task gate whose suspect goes alone, if one does (see `AloneGate`)."""
        return self._owner


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
    charged only to a record in flight alone in that worker (shared by the Redis Streams and
    file spouts).

    A record delivered again after its spout stopped without acking it (Redis's delivery count
    above 1; a line read again below where the dead task had read to), or failed as being
    executed when its (other) worker died (`lost_worker`), is a *suspect*: it goes out only once
    nothing else is in flight of any spout task of its worker that joined the same `WorkerGate` (``worker``: every task that
    opens with ``worker_gate(context)``), and nothing of them goes out beside it until its tree
    ends. A suspect that must wait claims the worker: from then on the other tasks hold back
    their records too, so that what is in flight drains and the suspect is not starved. The
    spout writes its charge as `Charge.dying` before it goes out (`hold` says when it may), so
    if the worker dies with it the charge stays; its ack deletes the charge, a failure it caused
    keeps it, any other failure or the spout's ``close`` takes it back (`alone`). Without a
    limit (``max_retries`` None) nothing is counted and no record of the task's own goes alone
    (`counting`), but the task still joins: its records count as in flight for the others'
    suspects, and wait while one goes alone. A spout that joins no gate (a plain user spout in
    the same worker) is not seen: a suspect may be in flight beside its records, and is charged
    if one of them kills the worker. One whose failure said that a bolt was executing it when
    its (other) worker died (`WORKER_DIED`) is charged for it, as a failure it caused, and is a
    suspect too: it goes out alone, so that what else dies with it next time is not in flight
    beside it.

    The calls, on the spout's own thread: `hold` before each record (False lets it go: the
    record counts as in flight from then on), `goes_alone`, then `emitted` once it is out;
    `turn_ended` as each ``next_tuple`` returns; `ended` at a record's ack or failure; `clear`
    when the spout drops what it had in flight (its ``close``, a file given up). Without
    ``worker`` the gate has a `WorkerGate` of its own, and holds back only among its own
    records. Pure: it keeps ids, the spout does the I/O."""

    def __init__(self, max_retries: int | None, worker: WorkerGate | None = None) -> None:
        self.max_retries = max_retries
        self.counting = max_retries is not None
        self.worker = worker if worker is not None else WorkerGate()
        self.in_flight: set[M] = set()   # emitted, neither acked nor failed yet
        self.alone: M | None = None      # the suspect in flight alone, if one is
        # let go by hold and not yet emitted: None no record; False beside others (counted in the
        # worker's in flight already); True alone (the worker claimed)
        self._let_go: bool | None = None
        self._waiting = False   # a suspect of this task was held back since the last turn_ended

    def hold(self, suspect: bool) -> bool:
        """Whether the next record (a ``suspect`` or not) must wait: another task's suspect goes
        alone, this task's is in flight alone, or this one is a suspect (of a counting task) and
        something of the worker is in flight; such a suspect claims the worker, so that the
        others hold back until its tree ends. False lets the record go: until `emitted` (or
        `turn_ended`, or the next ``hold``), it counts as in flight, so that no suspect of
        another task goes out before it."""
        w = self.worker
        with w._lock:
            self._withdraw()
            if (w._owner is not None and w._owner is not self) or self.alone is not None:
                return True
            if suspect and self.counting:
                w._owner = self   # the others hold back until its tree ends
                if w._in_flight:
                    self._waiting = True
                    return True
                self._let_go = True
                return False
            if w._owner is self:   # its suspect went another way (dead-lettered, taken away)
                w._owner = None
            w._in_flight += 1
            self._let_go = False
            return False

    def goes_alone(self, suspect: bool) -> bool:
        """Whether a record that may go (`hold` False) goes alone, its charge written first."""
        return suspect and self.counting

    def emitted(self, msg_id: M, alone: bool) -> None:
        """``msg_id`` went out (``alone``: as a suspect, its charge written)."""
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
                self.alone = msg_id
                w._owner = self
            elif w._owner is self and self.alone is None:
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
            if not self._waiting and w._owner is self and self.alone is None:
                w._owner = None
            self._waiting = False

    def _withdraw(self) -> None:
        """A record let go by `hold` and not emitted no longer counts, under the worker's lock."""
        w = self.worker
        if self._let_go is False:
            w._in_flight -= 1
        elif self._let_go is True and w._owner is self and self.alone is None:
            w._owner = None
        self._let_go = None

    def ended(self, msg_id: M) -> bool:
        """``msg_id`` was acked or failed; True if it was the suspect in flight alone (its
        charge written before it went out is to be deleted, kept or taken back now)."""
        w = self.worker
        with w._lock:
            if msg_id in self.in_flight:
                self.in_flight.discard(msg_id)
                w._in_flight -= 1
            if msg_id == self.alone:
                self.alone = None
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
            w._in_flight -= len(self.in_flight)
            self.in_flight.clear()
            self.alone = None
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
        told = "; ".join(said)
        return (f"failed {charge.retries} times (max_retries {self.max_retries}): {told}",
                FailureCause(WORKER_LOST, "", -1, "", told))
