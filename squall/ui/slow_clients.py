"""The UI daemon's HTTP connections kept from being held by clients that never finish a request.

uvicorn (over h11) waits as long as a client likes for a request's header and body, and counts
idle connections only once they have sent a request: 1,100 sockets that each sent half a header
kept a UI at a 1,024-file limit from answering anyone. `guarded_protocol` adds what is missing:

- a request whose header and body have not all arrived ``ui.request.timeout.secs`` after its
  first byte (or after the connection opened, for the first one) is answered 408 and closed;
  between requests uvicorn's keep-alive timeout (5 s) closes an idle connection;
- at most ``ui.max.connections`` are open (lowered below the file limit:
  `squall._connlimit.connection_cap`); at the cap a new connection closes the one that has waited
  longest for a request (`squall._connlimit.ConnectionTable`), and is refused with 503 only when
  every open one is being answered.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any, NamedTuple

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .._config import Config, setting
from .._connlimit import ConnectionTable, FullTableLog, connection_cap, open_files_limit
from .._ratelimit import rate_limited

log = logging.getLogger("squall.ui")



def _answer(status: str, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


_TIMED_OUT = _answer("408 Request Timeout", "the request did not all arrive in time (ui.request.timeout.secs)\n")
_FULL = _answer("503 Service Unavailable", "too many connections, all being answered (ui.max.connections)\n")
# a request has all arrived once h11 sees the peer done (or closing) with it
_RECEIVED = frozenset({h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR})


class UiLimits(NamedTuple):
    """How many connections the UI keeps open, and how long a request may take to arrive."""

    max_connections: int
    request_timeout: float


def ui_limits(conf: Any) -> UiLimits:
    """The `UiLimits` of a configuration, the cap lowered below this process's file limit."""
    return UiLimits(connection_cap(int(setting(conf, Config.UI_MAX_CONNECTIONS)), open_files_limit()),
                    float(setting(conf, Config.UI_REQUEST_TIMEOUT_SECS)))


class _ConnectionLog:
    """What uvicorn's protocol logs through (``H11Protocol.logger``), for one connection: its
    warnings (a request that is not HTTP: "Invalid HTTP request received.") name the client's
    address, which uvicorn's do not, and go through the server's rate limit (``warn``), so a
    flood of garbage writes a bounded log; everything else goes to uvicorn's logger as before."""

    def __init__(self, logger: logging.Logger, client: tuple[str, int] | None, warn: Any) -> None:
        self._logger = logger
        self._warn = warn
        self._from = f" (from {client[0]}:{client[1]})" if client else ""
        self.level = logger.level  # uvicorn reads it before a trace line

    def _said(self, msg: str, args: tuple[Any, ...]) -> str:
        # with args the message is %-formatted: an IPv6 address's "%eth0" must not be read as a format
        return msg + (self._from.replace("%", "%%") if args else self._from)

    def warning(self, msg: str, *args: Any) -> None:
        self._warn.warning(self._said(msg, args), *args)

    def error(self, msg: str, *args: Any, exc_info: Any = None) -> None:
        self._logger.error(self._said(msg, args), *args, exc_info=exc_info)

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        self._logger.log(level, msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)  # anything else a later uvicorn calls


def guarded_protocol(limits: UiLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `limits` applied (pass it as ``uvicorn.Config(http=...)``): one
    class per server, holding that server's `ConnectionTable`."""
    table: ConnectionTable[GuardedH11] = ConnectionTable(limits.max_connections)
    warn = rate_limited(log)

    class GuardedH11(H11Protocol):
        """`H11Protocol` with a deadline on each request's arrival and a place in ``table``."""

        _deadline: Any = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            """Admit the connection (making room, or refusing it with 503) and start its deadline."""
            super().connection_made(transport)
            self.logger = _ConnectionLog(self.logger, self.client, warn)  # type: ignore[assignment]
            admission = table.opened(self)
            if admission.refuse:
                warn.warning("refused a connection from %s: %d open, all being answered (ui.max.connections, "
                             "lowered below the open files limit)", self.client, len(table))
                transport.write(_FULL)
                transport.close()
                return
            if admission.evict is not None:
                warn.warning("closed the idle connection from %s to make room for %s (%d open: "
                             "ui.max.connections, lowered below the open files limit)",
                             admission.evict.client, self.client, len(table))
                admission.evict._time_out()
            self._arm()

        def data_received(self, data: bytes) -> None:
            """Start the deadline at a request's first byte; stop it once the request is all in."""
            if self._deadline is None and self.conn.their_state is h11.IDLE:
                self._arm()
            super().data_received(data)
            if self.conn.their_state in _RECEIVED:
                self._disarm()
                table.busy(self)

        def on_response_complete(self) -> None:
            """A kept-alive connection waits for its next request (uvicorn's keep-alive timeout)."""
            super().on_response_complete()
            if not self.transport.is_closing():
                table.waiting(self)

        def connection_lost(self, exc: Exception | None) -> None:
            """Forget the connection."""
            self._disarm()
            table.closed(self)
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(limits.request_timeout, self._time_out)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _time_out(self) -> None:
            """Answer 408 (nothing else was sent: the request never all arrived) and close."""
            self._deadline = None
            table.closed(self)
            if not self.transport.is_closing():
                if self.conn.our_state is h11.IDLE:
                    self.transport.write(_TIMED_OUT)
                self.transport.close()

    return GuardedH11


class GuardedServer(uvicorn.Server):
    """uvicorn's server, whose loop logs a full file table once a minute (`FullTableLog`) rather
    than a traceback per failed accept."""

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Serve as uvicorn does, with the loop's failed accepts reported through `FullTableLog`."""
        FullTableLog(log, "the UI").install(asyncio.get_running_loop())
        await super().serve(sockets)
