"""What keeps a server answering when strangers hold its connections open: a cap on open
connections kept below the process's file limit, the eviction of the longest-waiting idle
connection when a new one comes at the cap, and one log line per interval, not one per failed
accept, while the file table is full.

Both of squall's servers use it: the UI daemon (`squall.ui.server`, whose HTTP connections wait
for a request) and the master's RPC server (`squall.cluster.master`, whose connections wait for
the handshake). A connection is *waiting* while it holds no request being served (an HTTP request
whose header or body has not all come, a kept-alive connection between requests, an RPC peer not
yet authenticated) and *busy* otherwise. At the cap, the new connection pushes out the connection
that has waited longest, so 1,000 sockets that send half a header and stop cannot keep a real
client out; only when every connection is busy is the new one refused.
"""

from __future__ import annotations

import errno
import logging
import resource
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

if TYPE_CHECKING:
    import asyncio  # a server's loop, in annotations: a client (a worker's keep_alive) does not load it

FILE_RESERVE = 64
"""File descriptors kept free of connections for everything else a server opens (its logs, state
files, the master's ZooKeeper session, the UI's connection to the master)."""

ACCEPT_BACKLOG = 32
"""The listen backlog both servers pass to asyncio, which also accepts up to this many
connections in one go before a protocol sees any: the cap leaves room for such bursts
(`ACCEPT_BURSTS_OPEN`)."""

ACCEPT_BURSTS_OPEN = 3
"""How many bursts of `ACCEPT_BACKLOG` descriptors an asyncio server can hold beyond its admitted
connections: asyncio's accept handler accepts a burst each loop tick but a protocol's
``connection_made`` (where the table admits it) runs two ticks later, so when a burst is accepted
the one before is not admitted yet; and a connection evicted to admit one closes its socket a
tick after eviction (``transport.close`` calls ``connection_lost`` soon). Counting one burst, as
before, let 300 half-header sockets take a UI with a 256-file limit to 251 descriptors."""

FULL_TABLE_LOG_SECS = 60.0
"""A full file table is logged at most once in this many seconds, with the count held back."""

_FULL_TABLE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})

C = TypeVar("C", bound=Hashable)


def open_files_limit() -> int:
    """This process's soft limit on open files (``RLIMIT_NOFILE``; systemd's ``LimitNOFILE``)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def keep_alive(sock: Any, secs: float, unacknowledged: bool = True) -> None:
    """Have the kernel close ``sock`` once its other end has not answered for about ``secs``
    seconds: keepalive probes after ``secs``/2 idle, 3 of them ``secs``/6 apart, and (with
    ``unacknowledged``) at most ``secs`` for sent data to be acknowledged (``TCP_USER_TIMEOUT``,
    which Linux also applies to a receiver that keeps its window closed: not for a data path
    whose receiver may fall behind). Without it a connection
    whose other end's machine died, or gave the connection up while a partition dropped its FIN,
    stays established for ever on a server that only waits to read: an authenticated one is
    never pushed out of the connection table, so enough of them shut the live peers out.
    Options the platform lacks are skipped; a socket that refuses them (closed already) is left."""
    idle, interval = max(1, int(secs / 2)), max(1, int(secs / 6))
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", 3),
                        ("TCP_USER_TIMEOUT", int(secs * 1000))):
        if hasattr(socket, name) and (unacknowledged or name != "TCP_USER_TIMEOUT"):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    try:
        for level, option, value in options:
            sock.setsockopt(level, option, value)
    except OSError:
        pass


def connection_cap(configured: int, files_limit: int) -> int:
    """The connections a server keeps open at most: ``configured``, lowered to leave
    `FILE_RESERVE` descriptors of ``files_limit`` free, and room for the `ACCEPT_BURSTS_OPEN`
    bursts of `ACCEPT_BACKLOG` accepts not (or no longer) in the table (at least 1)."""
    return max(1, min(configured, files_limit - FILE_RESERVE - ACCEPT_BURSTS_OPEN * ACCEPT_BACKLOG))


class Admission(NamedTuple, Generic[C]):
    """What to do with a connection just opened: ``refuse`` it (every open one is busy), or let it
    in after closing ``evict`` (the longest-waiting one, when at the cap), or just let it in."""

    refuse: bool
    evict: C | None


class ConnectionTable(Generic[C]):
    """A server's open connections, at most ``cap``; pure bookkeeping, the caller closes.

    Each connection is waiting (in order of when it began to wait) or busy; see the module
    docstring."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._waiting: OrderedDict[C, None] = OrderedDict()
        self._busy: set[C] = set()

    def __len__(self) -> int:
        return len(self._waiting) + len(self._busy)

    def opened(self, conn: C) -> Admission[C]:
        """Admit ``conn`` (waiting from now), making room at the cap; when refused it is not kept."""
        evict = None
        if len(self) >= self.cap:
            if not self._waiting:
                return Admission(True, None)
            evict = next(iter(self._waiting))
            del self._waiting[evict]
        self._waiting[conn] = None
        return Admission(False, evict)

    def waiting(self, conn: C) -> None:
        """``conn`` waits again from now (its request was answered; it is kept alive)."""
        if conn in self._busy or conn in self._waiting:
            self._busy.discard(conn)
            self._waiting.pop(conn, None)
            self._waiting[conn] = None

    def busy(self, conn: C) -> None:
        """``conn`` holds a request being served (or an authenticated session): never evicted."""
        if conn in self._waiting:
            del self._waiting[conn]
            self._busy.add(conn)

    def closed(self, conn: C) -> None:
        """``conn`` is gone (closed by either side, or evicted)."""
        self._waiting.pop(conn, None)
        self._busy.discard(conn)


class FullTableLog:
    """Logs that accepting a connection failed for a full file table (EMFILE, ENFILE) once per
    ``period`` seconds, saying how many more failed meanwhile; asyncio itself logs one traceback
    per failed accept (several per second while the table stays full)."""

    def __init__(self, log: logging.Logger, what: str, period: float = FULL_TABLE_LOG_SECS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log, self.what, self.period, self.clock = log, what, period, clock
        self._last: float | None = None
        self.held = 0

    def failed_accept(self) -> bool:
        """Count one failed accept; True if it was logged."""
        now = self.clock()
        if self._last is not None and now - self._last < self.period:
            self.held += 1
            return False
        since = f" ({self.held} more failed accepts since the last report)" if self.held else ""
        self.log.error("%s cannot accept connections: too many open files (limit %d)%s. Connections wait in "
                       "the listen backlog until files free up: raise the limit (systemd LimitNOFILE, ulimit -n) "
                       "or lower the connection cap. Reported at most once in %g s",
                       self.what, open_files_limit(), since, self.period)
        self._last, self.held = now, 0
        return True

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Make ``loop`` send its failed-accept reports for a full table here; it reports the rest
        as before."""
        previous = loop.get_exception_handler()

        def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            exc = context.get("exception")
            if isinstance(exc, OSError) and exc.errno in _FULL_TABLE_ERRNOS:
                self.failed_accept()
            elif previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handle)


def listening_socket(host: str, port: int, what: str, keys: str, hint: str = "") -> socket.socket:
    """A listening socket on ``host``:``port`` (0: a free port) for ``what`` (the UI, the DRPC
    HTTP interface), not inherited by child processes.

    Raises:
        SquallError: the address cannot be bound, naming it and the settings that chose it
            (``keys``), with ``hint`` when binding failed (a port taken).
    """
    from ._errors import SquallError
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as e:
        raise SquallError(f"{what} cannot listen on {host}:{port} ({keys}): {e.strerror or e}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(ACCEPT_BACKLOG)
    except OSError as e:
        sock.close()
        raise SquallError(f"{what} cannot listen on {host}:{port} ({keys}): {e.strerror or e}{hint}") from None
    sock.set_inheritable(False)
    return sock
