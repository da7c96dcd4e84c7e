"""`LocalDRPC`: the DRPC server in this process, for topologies on a `LocalCluster` (Storm's
``LocalDRPC``).

squall copies components per task (it pickles them), so a DRPC spout cannot hold the
`LocalDRPC` itself: it holds the server's service id, and finds the server in this process's
registry by it (Storm's ``ServiceRegistry``), as squall.testing's shared handles do.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple, Self

from .core import (
    DEFAULT_REQUEST_TIMEOUT_SECS,
    BookStats,
    DRPCExceptionType,
    DRPCExecutionException,
    DRPCRequest,
    Outcome,
    RequestBook,
)

_registry_lock = threading.Lock()
_registry: dict[str, LocalDRPC] = {}

CRASH_POLL_SECS = 0.2
"""How often a waiting `LocalDRPC.execute` asks the `LocalCluster` running the function's topology
whether that topology crashed meanwhile."""


class Crash(NamedTuple):
    """The newest crash of a topology serving a function (a worker that died of a component's
    error: raised in ``prepare``/``open``, or under ``topology.bolt.fail.fast``), as its
    `LocalCluster` tells it: ``signature`` changes with each new crash, ``reason`` names the
    topology, the component and its error, and ``down`` says that no worker of it runs now
    (it waits for its next restart)."""

    signature: tuple
    reason: str
    down: bool


CrashProbe = Callable[[], "Crash | None"]
"""Asks a `LocalCluster` for the newest crash of one of its topologies (None: none, or gone)."""


def local_drpc(service_id: str) -> LocalDRPC | None:
    """The running `LocalDRPC` of ``service_id`` in this process, or None (shut down)."""
    with _registry_lock:
        return _registry.get(service_id)


class _Waiter:
    """One blocked ``execute``: the outcome, once it came."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.outcome: Outcome | None = None

    def __call__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.done.set()


class LocalDRPC:
    """An in-process DRPC server (Storm's ``LocalDRPC``): give it to a DRPC spout (or
    ``TridentTopology.new_drpc_stream(function, local_drpc)``) and call `execute`.

    >>> with LocalDRPC() as drpc:          # doctest: +SKIP
    ...     drpc.execute("words", "cat dog")
    '[[4]]'

    ``request_timeout_secs`` (Storm's ``drpc.request.timeout.secs``, 600) bounds each `execute`;
    ``clock`` is the monotonic clock its deadlines are read on.
    """

    def __init__(self, request_timeout_secs: float = DEFAULT_REQUEST_TIMEOUT_SECS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._book = RequestBook(request_timeout_secs)
        self._clock = clock
        self._service_id = f"local-drpc-{uuid.uuid4().hex}"
        # per function, the topologies serving it on a LocalCluster of this process (`watch`)
        self._watch_lock = threading.Lock()
        self._probes: dict[str, dict[Any, CrashProbe]] = {}
        with _registry_lock:
            _registry[self._service_id] = self

    def get_service_id(self) -> str:
        """The id DRPC spouts find this server by (Storm's ``getServiceId``)."""
        return self._service_id

    def execute(self, function: str, args: str) -> str:
        """Run ``function`` with ``args`` on the topology that serves it and return its result
        (for a Trident DRPC stream, the JSON list of the result tuples' values, e.g. ``"[[4]]"``).

        Raises:
            DRPCExecutionException: the topology failed the request, it had no result within the
                timeout, or this server was shut down (``type`` says which).
            TypeError: ``function`` or ``args`` is not a string.
        """
        waiter = _Waiter()
        request = self._book.submit(function, args, self._clock(), waiter)
        deadline = self._book.deadline(request.request_id)
        crashes = _Crashes(self._probes_of(function))
        why = crashes.down()  # a topology that crashed and has no worker now: no wait for its next crash
        while why is None and deadline is not None:
            left = max(0.0, deadline - self._clock())
            if waiter.done.wait(min(left, CRASH_POLL_SECS) if crashes else left):
                break
            why = crashes.since()
            self._book.expire(self._clock())
            deadline = self._book.deadline(request.request_id)
        if why is not None:
            # the topology serving it crashed (it crash-loops, or lost the request with its
            # worker): said now, with the component and its error, not at drpc.request.timeout.secs
            self._book.fail(request.request_id, why)
        waiter.done.wait()  # ended: by now its outcome was delivered (or is being, by another thread)
        outcome = waiter.outcome
        if outcome is None or (outcome.result is None and outcome.error is None):
            raise DRPCExecutionException("Internal Error: No Result and No Exception", DRPCExceptionType.INTERNAL_ERROR)
        if outcome.error is not None:
            raise outcome.error
        return outcome.result  # type: ignore[return-value]

    # --- what a LocalCluster running a topology that serves this server calls ----------------------
    def watch(self, function: str, key: Any, probe: CrashProbe) -> None:
        """A topology (``key``, its cluster's) serves ``function`` from this server: a waiting
        `execute` of it fails as soon as ``probe`` tells a crash of it, naming its cause."""
        with self._watch_lock:
            self._probes.setdefault(function, {})[key] = probe

    def unwatch(self, key: Any) -> None:
        """The topology ``key`` no longer runs (killed, or its cluster shut down)."""
        with self._watch_lock:
            for probes in self._probes.values():
                probes.pop(key, None)

    def _probes_of(self, function: str) -> list[CrashProbe]:
        with self._watch_lock:
            return list(self._probes.get(function, {}).values())

    # --- what the DRPC spout and the return bolt call (Storm's DistributedRPCInvocations) ---------
    def fetch_request(self, function: str, holder: str | None = None) -> DRPCRequest | None:
        """The oldest request of ``function`` no spout has fetched, or None. ``holder``: the
        fetching spout's name for itself, which the request's timeout message gives."""
        return self._book.fetch(function, holder, self._clock())

    def result(self, request_id: str, result: str) -> bool:
        """Answer ``request_id``; False if it is no longer outstanding."""
        return self._book.result(request_id, result)

    def fail_request(self, request_id: str, message: str | None = None) -> bool:
        """Fail ``request_id`` now (its `execute` raises); False if it is no longer outstanding."""
        return self._book.fail(request_id, message)

    def stats(self) -> BookStats:
        """What this server has seen: requests executed, fetched, returned, failed, timed out."""
        return self._book.stats()

    def shutdown(self) -> None:
        """Stop: every waiting `execute` raises (SERVER_SHUTDOWN), and spouts find nothing more."""
        with _registry_lock:
            _registry.pop(self._service_id, None)
        self._book.close()

    close = shutdown

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # a copy (a component holding this server, pickled per task) is this very server
        return _by_id, (self._service_id,)

    def __repr__(self) -> str:
        return f"LocalDRPC({self._service_id})"


class _Crashes:
    """The crashes of the topologies serving one request's function, from when it came."""

    def __init__(self, probes: list[CrashProbe]) -> None:
        self.probes = probes
        self.first = [probe() for probe in probes]

    def __bool__(self) -> bool:
        return bool(self.probes)

    def down(self) -> str | None:
        """Why the request cannot be served now: a topology serving it crashed and has no worker
        running (between two restarts of a crash loop); None if one may serve it."""
        if not self.first or not all(c is not None and c.down for c in self.first):
            return None
        return "; ".join(c.reason for c in self.first if c is not None)

    def since(self) -> str | None:
        """Why the request will not be answered: a topology serving it crashed since it came (its
        worker, which may have held it, died); None if none did."""
        for probe, first in zip(self.probes, self.first, strict=True):
            now = probe()
            if now is not None and (first is None or now.signature != first.signature):
                return now.reason
        return None


def _by_id(service_id: str) -> LocalDRPC:
    found = local_drpc(service_id)
    if found is None:
        raise LookupError(f"LocalDRPC {service_id} is not running in this process (shut down, or a copy "
                          f"sent to another process: a LocalDRPC serves a LocalCluster only)")
    return found
