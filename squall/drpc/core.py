"""The DRPC server's bookkeeping (Storm's ``daemon/drpc/DRPC.java``), without I/O or a clock.

A client's ``execute(function, args)`` becomes an outstanding request: queued for its function
until a DRPC spout fetches it, then waiting until the topology's `ReturnResults` bolt returns its
result, the spout reports it failed, or it times out (``drpc.request.timeout.secs``). The same
`RequestBook` serves `LocalDRPC` (threads) and ``squall drpc`` (an asyncio loop): each request
carries a callback that hears its outcome once.
"""

from __future__ import annotations

import enum
import itertools
import json
import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._config import Config, default_of
from .._errors import SquallError

DEFAULT_REQUEST_TIMEOUT_SECS = float(default_of(Config.DRPC_REQUEST_TIMEOUT_SECS))
"""Storm's ``drpc.request.timeout.secs``."""


ASKED_KEPT = 1000
"""Function names a `RequestBook` remembers spouts asking for (a bound: spouts name the
functions, callers do not)."""

HOLDER_GRACE_SECS = 30.0
"""How long the requests a DRPC spout took wait for it, once its last connection to the server
closed, when it did not say (a spout gives its topology's ``topology.message.timeout.secs``, 30 by
default, as Storm's): a live spout connects again at its next call (it polls at every
`next_tuple`, and tries a server it lost again after a second), and a live spout fails a request
whose tuple tree is not done by then anyway; so past it the spout's worker stopped or died, and
its requests fail then instead of at ``drpc.request.timeout.secs``. Within it, a bolt in another
worker may still return the result, which the caller gets."""

MAX_GRACE_SECS = 86400.0
"""The longest grace a spout may ask for its requests (a day). A spout whose topology's
``topology.message.timeout.secs`` is longer (any positive number is a valid one: a topology of
long trees) asks for this: past a day, ``drpc.request.timeout.secs`` (600 s by default) has
failed its requests anyway unless it was set above a day too."""

HOLDER_MAX_CHARS = 200
"""The longest holder name a spout may give (it names the spout in its requests' errors)."""


class DRPCExceptionType(enum.Enum):
    """Why a request failed (Storm's ``DRPCExceptionType``)."""

    INTERNAL_ERROR = "INTERNAL_ERROR"
    SERVER_SHUTDOWN = "SERVER_SHUTDOWN"
    SERVER_TIMEOUT = "SERVER_TIMEOUT"
    FAILED_REQUEST = "FAILED_REQUEST"


class DRPCExecutionException(SquallError):
    """A DRPC request failed: it timed out (``drpc.request.timeout.secs``), the topology failed
    its tuple, or the server shut down. ``type`` says which (`DRPCExceptionType`)."""

    def __init__(self, message: str, type: DRPCExceptionType = DRPCExceptionType.FAILED_REQUEST) -> None:
        super().__init__(message)
        self.type = type


@dataclass(frozen=True)
class DRPCRequest:
    """One request as a DRPC spout fetches it (Storm's ``DRPCRequest``)."""

    request_id: str
    function: str
    args: str


@dataclass(frozen=True)
class ReturnInfo:
    """Where a request's result goes: the request id and the server (Storm's return-info, a JSON
    map ``{"id", "host", "port"}``). For a `LocalDRPC` the host is its service id and the port 0."""

    request_id: str
    host: str
    port: int

    def to_json(self) -> str:
        """Storm's encoding, the second field of the DRPC spout's tuples."""
        return json.dumps({"id": self.request_id, "host": self.host, "port": self.port})

    @classmethod
    def from_json(cls, text: Any) -> ReturnInfo:
        """Read what `to_json` wrote.

        Raises:
            ValueError: ``text`` is not a JSON map with a string ``id``, a string ``host`` and an
                integer ``port`` (the message says which).
        """
        if not isinstance(text, str):
            raise ValueError(f"return-info must be a JSON string, got {type(text).__name__}")  # noqa: TRY004 (its docstring: ValueError for any bad return-info)
        try:
            got = json.loads(text)
        except ValueError as e:
            raise ValueError(f"return-info is not JSON ({e}): {text[:200]!r}") from None
        if not isinstance(got, dict):
            raise ValueError(f"return-info must be a JSON map, got {text[:200]!r}")  # noqa: TRY004 (its docstring: ValueError for any bad return-info)
        request_id, host, port = got.get("id"), got.get("host"), got.get("port")
        if not isinstance(request_id, str) or not isinstance(host, str) or type(port) is not int:
            raise ValueError(f"return-info needs a string id, a string host and an integer port, got {text[:200]!r}")
        return cls(request_id, host, port)


class Outcome(NamedTuple):
    """How a request ended: its result, or the error its client gets."""

    result: str | None
    error: DRPCExecutionException | None


class BookStats(NamedTuple):
    """What a `RequestBook` has seen since it was made (Storm's DRPC meters)."""

    executed: int
    fetched: int
    returned: int
    failed: int
    timed_out: int
    outstanding: int


@dataclass(eq=False)  # compared by identity: queue.remove finds this very entry
class _Outstanding:
    request: DRPCRequest
    deadline: float
    on_done: Callable[[Outcome], None]
    submitted: float
    fetched: bool = False
    holder: _Holder | None = None  # the spout that fetched it, when it said who it is
    # for a timeout's message: which spout took it (its own name for itself) and when
    taken_by: str | None = None
    fetched_at: float | None = None


@dataclass(eq=False)
class _Holder:
    """A DRPC spout instance as the server knows it: its open connections, and, once the last
    one closed, when the requests it took fail (`HOLDER_GRACE_SECS` later)."""

    name: str
    grace: float = HOLDER_GRACE_SECS
    connections: int = 0
    held: int = 0  # the outstanding requests it took
    fails_at: float | None = None


def _after(secs: float) -> str:
    """How long after the call a spout took a request, as a timeout's message says it."""
    return "within 0.01 s of" if secs < 0.01 else f"{secs:.2f} s after"


class RequestBook:
    """Requests waiting to be fetched (a queue per function) and waiting for their outcome.

    Thread-safe. Outcomes are delivered through each request's ``on_done`` outside the lock,
    exactly once. Times are passed in (``now``, in the caller's monotonic seconds).
    """

    def __init__(self, timeout_secs: float = DEFAULT_REQUEST_TIMEOUT_SECS) -> None:
        if not timeout_secs > 0:
            raise ValueError(f"drpc.request.timeout.secs must be positive, got {timeout_secs!r}")
        self.timeout_secs = float(timeout_secs)
        self._lock = threading.Lock()
        self._queues: dict[str, deque[_Outstanding]] = {}
        self._requests: dict[str, _Outstanding] = {}
        self._ids = itertools.count(1)
        # request ids of this book only: a restarted server must not take a result a topology
        # still returns for the previous run's request of the same number (another caller's)
        self._run = secrets.token_hex(8)
        self._closed = False
        # the functions a DRPC spout asked for, found or not (the first `ASKED_KEPT`): a request
        # that times out unfetched says whether any running topology serves its function
        self._asked: set[str] = set()
        self._holders: dict[str, _Holder] = {}  # the spouts connected now, or gone with requests
        self._executed = self._fetched = self._returned = self._failed = self._timed_out = 0

    def submit(self, function: str, args: str, now: float, on_done: Callable[[Outcome], None]) -> DRPCRequest:
        """Queue a request of ``function`` with ``args``; ``on_done`` hears its outcome.

        Raises:
            TypeError: ``function`` or ``args`` is not a string (DRPC carries strings).
            ValueError: ``function`` is empty.
            DRPCExecutionException: the book was closed (the server is shutting down).
        """
        if not isinstance(function, str):
            raise TypeError(f"DRPC function must be a string, got {type(function).__name__}")
        if not function:
            raise ValueError("DRPC function must not be empty")
        if not isinstance(args, str):
            raise TypeError(f"DRPC args of {function!r} must be a string, got {type(args).__name__}")
        with self._lock:
            if self._closed:
                raise DRPCExecutionException("Server Shutting Down", DRPCExceptionType.SERVER_SHUTDOWN)
            request = DRPCRequest(f"{self._run}-{next(self._ids)}", function, args)
            entry = _Outstanding(request, now + self.timeout_secs, on_done, now)
            self._requests[request.request_id] = entry
            self._queues.setdefault(function, deque()).append(entry)
            self._executed += 1
        return request

    def fetch(self, function: str, holder: str | None = None, now: float | None = None) -> DRPCRequest | None:
        """The oldest request of ``function`` not fetched yet, or None. ``holder`` (a spout's name
        for itself) and ``now`` are remembered with the request, for its timeout's message; a
        holder `attach`-ed to its connection is also watched: if the spout goes (`detach`), the
        request fails its grace later."""
        with self._lock:
            if len(self._asked) < ASKED_KEPT:
                self._asked.add(function)
            queue = self._queues.get(function)
            if not queue:
                return None
            entry = queue.popleft()
            if not queue:
                del self._queues[function]
            entry.fetched = True
            entry.taken_by, entry.fetched_at = holder, now
            entry.holder = None if holder is None else self._holders.get(holder)
            if entry.holder is not None:
                entry.holder.held += 1
            self._fetched += 1
            return entry.request

    def attach(self, holder: str, grace: float = HOLDER_GRACE_SECS) -> None:
        """A connection of the DRPC spout ``holder`` is open (a spout that came back within its
        grace keeps the requests it took). ``grace``: how long they wait for it once it went."""
        with self._lock:
            known = self._holders.setdefault(holder, _Holder(holder))
            known.connections += 1
            known.grace = grace
            known.fails_at = None

    def detach(self, holder: str, now: float) -> float | None:
        """A connection of ``holder`` closed at ``now``: when it was the last one, the requests
        it took and did not answer fail its grace later unless it `attach`-es again. When they
        fail (for `expire`), or None when none waits."""
        with self._lock:
            known = self._holders.get(holder)
            if known is None:
                return None
            known.connections -= 1
            if known.connections > 0:
                return None
            if known.held:
                known.fails_at = now + known.grace
                return known.fails_at
            del self._holders[holder]
            return None

    def result(self, request_id: str, result: str) -> bool:
        """Answer ``request_id`` with ``result``; False if it is not outstanding (already answered,
        failed, timed out, or never known), as Storm ignores it.

        Raises:
            TypeError: ``result`` is not a string.
        """
        if not isinstance(result, str):
            raise TypeError(f"a DRPC result must be a string, got {type(result).__name__}")
        entry = self._end(request_id)
        if entry is None:
            return False
        with self._lock:
            self._returned += 1
        entry.on_done(Outcome(result, None))
        return True

    def fail(self, request_id: str, message: str | None = None) -> bool:
        """Fail ``request_id`` (its client gets `DRPCExecutionException` of type FAILED_REQUEST at
        once, rather than at the timeout); False if it is not outstanding."""
        entry = self._end(request_id)
        if entry is None:
            return False
        with self._lock:
            self._failed += 1
        text = "Request failed" + (f": {message}" if message else "")
        entry.on_done(Outcome(None, DRPCExecutionException(text, DRPCExceptionType.FAILED_REQUEST)))
        return True

    def expire(self, now: float) -> int:
        """Fail every request whose deadline is at or before ``now`` (SERVER_TIMEOUT), and every
        request whose spout went and did not come back within its grace (FAILED_REQUEST); how
        many."""
        with self._lock:
            due = [e for e in self._requests.values() if e.deadline <= now]
            for entry in due:
                self._forget(entry)
            self._timed_out += len(due)
            why = [self._timed_out_why(entry) for entry in due]
            lost = [e for e in self._requests.values()
                    if e.holder is not None and e.holder.fails_at is not None and e.holder.fails_at <= now]
            for entry in lost:
                self._forget(entry)
            self._failed += len(lost)
            for name in [n for n, h in self._holders.items() if h.fails_at is not None and h.fails_at <= now]:
                del self._holders[name]
        for entry, text in zip(due, why, strict=True):
            entry.on_done(Outcome(None, DRPCExecutionException(text, DRPCExceptionType.SERVER_TIMEOUT)))
        for entry in lost:
            entry.on_done(Outcome(None, DRPCExecutionException(self._lost_why(entry),
                                                               DRPCExceptionType.FAILED_REQUEST)))
        return len(due) + len(lost)

    @staticmethod
    def _lost_why(entry: _Outstanding) -> str:
        holder = entry.holder
        assert holder is not None
        return (f"Request failed: lost with the DRPC spout that took it ({holder.name}): its connection to the "
                f"DRPC server closed and it did not connect again within {holder.grace:g} s (its worker "
                f"stopped or died); the topology may have run part of it")

    def _timed_out_why(self, entry: _Outstanding) -> str:
        # under the lock: what a timed-out request's caller is told, where Storm's hears only
        # "Timed Out": the function, the timeout and its key, and where the request got to: taken
        # by a spout (which, and when: the topology has it, and may still run it), waiting for
        # one (the topology serves the function but did not take it), or a function no DRPC
        # spout ever asked this server for (a typo, a topology not running)
        function = entry.request.function
        text = f"Timed Out: {function!r} had no result within {self.timeout_secs:g} s (drpc.request.timeout.secs)"
        if entry.fetched:
            when = "" if entry.fetched_at is None else f" {_after(entry.fetched_at - entry.submitted)} the call"
            return (f"{text}: {entry.taken_by or 'a DRPC spout'} took it{when}, and its topology neither returned a "
                    f"result nor failed the request since (a bolt still holds its tuple, whose tree fails at the "
                    f"topology's topology.message.timeout.secs; the topology may still run it)")
        if function in self._asked:
            return (f"{text}: no DRPC spout took it, though spouts of {function!r} asked this server for requests "
                    f"(the topology is deactivated, or its spouts were held back by topology.max.spout.pending "
                    f"or backpressure)")
        if len(self._asked) >= ASKED_KEPT:
            return f"{text}: no DRPC spout took it"
        served = ", ".join(repr(f) for f in sorted(self._asked)[:20]) or "none"
        return (f"{text}: no DRPC spout has asked this server for {function!r} since it started (no running "
                f"topology serves it, or its spout has not started; the functions asked for: {served})")

    def deadline(self, request_id: str) -> float | None:
        """When ``request_id`` times out, or fails for the spout that took it having gone; None
        if it is not outstanding."""
        with self._lock:
            entry = self._requests.get(request_id)
            if entry is None:
                return None
            holder = entry.holder
            if holder is not None and holder.fails_at is not None:
                return min(entry.deadline, holder.fails_at)
            return entry.deadline

    def close(self) -> None:
        """Fail every outstanding request (SERVER_SHUTDOWN) and refuse new ones."""
        with self._lock:
            self._closed = True
            ended = list(self._requests.values())
            self._requests.clear()
            self._queues.clear()
        for entry in ended:
            entry.on_done(Outcome(None, DRPCExecutionException("Server Shutting Down",
                                                               DRPCExceptionType.SERVER_SHUTDOWN)))

    def stats(self) -> BookStats:
        """The counts so far."""
        with self._lock:
            return BookStats(self._executed, self._fetched, self._returned, self._failed, self._timed_out,
                             len(self._requests))

    def _end(self, request_id: str) -> _Outstanding | None:
        with self._lock:
            entry = self._requests.get(request_id)
            if entry is not None:
                self._forget(entry)
            return entry

    def _forget(self, entry: _Outstanding) -> None:
        # under the lock; an unfetched request leaves its queue too, so that requests of a
        # function no topology serves do not pile up there after they time out
        del self._requests[entry.request.request_id]
        holder = entry.holder
        if holder is not None:
            holder.held -= 1
            if holder.connections == 0 and not holder.held and self._holders.get(holder.name) is holder:
                del self._holders[holder.name]  # gone, and nothing of it left to fail
        if not entry.fetched:
            queue = self._queues.get(entry.request.function)
            if queue is not None:
                queue.remove(entry)
                if not queue:
                    del self._queues[entry.request.function]
