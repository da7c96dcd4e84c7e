"""When a failed record is emitted again: storm-kafka-client's ``KafkaSpoutRetryExponentialBackoff``,
the one retry backoff of every squall spout that retries (Kafka, Redis Streams, files, followed
tables).

Storm's formula, in seconds instead of its ``TimeInterval`` (a ``TimeInterval.milliSeconds(2)``
is ``0.002``): after a record's ``n``-th failure its retry is due

- ``initial_delay`` later if ``n == 1``,
- ``delay_period * 2 ** (n - 1)`` later otherwise,

never more than ``max_delay`` later; a record failed more than ``max_retries`` times is given up
(Storm acks it; squall dead-letters it). ``max_retries`` None is "no limit", the one spelling of
Storm's ``Integer.MAX_VALUE`` (as every spout's ``max_retries`` takes it). Storm's default service
is ``(0 s, 2 ms, Integer.MAX_VALUE, 10 s)``, this module's `RetryBackoff()`.

Pure: the caller passes the time; nothing here reads a clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from .._failure import WORKER_LOST, FailureCause

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

    def schedule(self, msg_id: M, num_fails: int, now: float) -> bool:
        """Schedules ``msg_id`` after its ``num_fails``-th failure; False (and not scheduled) if
        that is past ``max_retries``."""
        if self.backoff.gives_up(num_fails):
            self._due.pop(msg_id, None)
            return False
        self._put(msg_id, now + self.backoff.delay(num_fails))
        return True

    def reschedule(self, msg_id: M, num_fails: int, now: float) -> None:
        """Schedules ``msg_id`` again after a failure that is not counted (a lost worker, a
        timeout): ``num_fails`` is unchanged, so the limit cannot be newly passed; the delay is
        that of its last counted failure (of the first, if none)."""
        self._put(msg_id, now + self.backoff.delay(max(1, num_fails)))

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
        """Unschedules ``msg_id`` (it is emitted again, or gone); True if it was scheduled."""
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
        self._compact()

    def clear(self) -> None:
        """Forgets every schedule."""
        self._due.clear()
        self._heap.clear()

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


class AloneGate(Generic[M]):
    """Which of a spout task's records go out when, so that the death of the spout's own worker
    is charged only to a record in flight alone (shared by the Redis Streams and file spouts).

    A record delivered again after its spout stopped without acking it (Redis's delivery count
    above 1; a line read again below where the dead task had read to), or failed as a lost
    worker (`lost_worker`), is a *suspect*: it goes out only once nothing else of the task is in
    flight, and nothing goes out beside it until its tree ends. The spout writes its charge as
    `Charge.dying` before it goes out (`hold` says when it may), so if the worker dies with it the
    charge stays; its ack deletes the charge, a failure it caused keeps it, any other failure or
    the spout's ``close`` takes it back (`alone`). Without a limit (``max_retries`` None) nothing
    is counted and nothing held back (`counting`). Pure: it keeps ids, the spout does the I/O."""

    def __init__(self, max_retries: int | None) -> None:
        self.max_retries = max_retries
        self.counting = max_retries is not None
        self.in_flight: set[M] = set()   # emitted, neither acked nor failed yet
        self.alone: M | None = None      # the suspect in flight alone, if one is

    def hold(self, suspect: bool) -> bool:
        """Whether the next record (a ``suspect`` or not) must wait: a suspect is in flight
        alone, or this one is a suspect and something else is in flight."""
        return self.alone is not None or (suspect and self.counting and bool(self.in_flight))

    def goes_alone(self, suspect: bool) -> bool:
        """Whether a record that may go (`hold` False) goes alone, its charge written first."""
        return suspect and self.counting

    def emitted(self, msg_id: M, alone: bool) -> None:
        """``msg_id`` went out (``alone``: as a suspect, its charge written)."""
        self.in_flight.add(msg_id)
        if alone:
            self.alone = msg_id

    def ended(self, msg_id: M) -> bool:
        """``msg_id`` was acked or failed; True if it was the suspect in flight alone (its
        charge written before it went out is to be deleted, kept or taken back now)."""
        self.in_flight.discard(msg_id)
        if msg_id == self.alone:
            self.alone = None
            return True
        return False

    @staticmethod
    def lost_worker(cause: FailureCause) -> bool:
        """Whether ``cause`` is a worker's death (not a process in one, a shell component's):
        the record failed with it becomes a suspect."""
        return cause.kind == WORKER_LOST and not cause.component

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
