"""``squall drpc``: Storm's DRPC server for the process and Spark hosts (docs/drpc.md).

Two ports, as Storm's: callers (`DRPCClient`) on ``drpc.port`` (3772) run ``execute``; the
topologies' DRPC spouts and return bolts on ``drpc.invocations.port`` (3773) run
``fetch_request``, ``result`` and ``fail_request``. Every connection is authenticated with the
cluster's secret by `squall._wire`'s handshake and frames (as the master's), at most
``drpc.max.connections`` are open, and a frame over ``drpc.max_buffer_size`` bytes closes its
connection. A request with no result within ``drpc.request.timeout.secs`` (600) fails with
`DRPCExecutionException` (SERVER_TIMEOUT). With ``drpc.http.port`` set, Storm's HTTP interface
is served on the same loop too (`squall.ui.drpc_http`, handed in by the CLI).

The server binds the addresses of the entries of ``drpc.servers`` that name this machine (so
that callers and spouts reach it by the names they are given); ``squall nimbus`` starts one
beside the master when ``drpc.servers`` names its machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from .._config import Config, setting
from .._errors import SquallError
from .._open_connections import OpenConnections
from .client import ClusterLinks, outcome_reply
from .core import HOLDER_GRACE_SECS, HOLDER_MAX_CHARS, MAX_GRACE_SECS, Outcome, RequestBook

log = logging.getLogger("squall.drpc")

SHUTDOWN_ANSWER_SECS = 5.0
"""How long a stopping server waits for its waiting callers' SERVER_SHUTDOWN answers to go out."""


# --- which entries of drpc.servers are this machine -------------------------------------------------
def local_entries(servers: Iterable[str], resolve: Callable[[str], list[str]],
                  is_local: Callable[[str], bool]) -> list[tuple[str, list[str]]]:
    """The entries of ``servers`` that name this machine, each with its addresses here: an entry
    does when an address it resolves to (``resolve``) is one of this machine's (``is_local``)."""
    found = []
    for name in servers:
        addresses = [a for a in resolve(name) if is_local(a)]
        if addresses:
            found.append((name, addresses))
    return found


def resolve_host(name: str) -> list[str]:
    """The addresses ``name`` resolves to (none if it does not)."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def is_local_address(address: str) -> bool:
    """Whether ``address`` is this machine's: loopback, or one a socket can be bound to here."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if ip.is_loopback:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        try:
            s.bind((address, 0))
        except OSError:
            return False
    return True


def addresses_to_serve(conf: Mapping[str, Any]) -> list[str]:
    """The addresses this machine serves DRPC on: those of the entries of ``drpc.servers`` that
    name it (none: ``drpc.servers`` is unset or names other machines only)."""
    from .client import DrpcSettings
    entries = local_entries(DrpcSettings.of(conf).servers, resolve_host, is_local_address)
    return list(dict.fromkeys(a for _, addresses in entries for a in addresses))


# --- the server -------------------------------------------------------------------------------------
class HttpInterface(Protocol):
    """Storm's DRPC HTTP interface as the server runs it (`squall.ui.drpc_http.HttpInterface`)."""

    where: tuple[str, int]

    async def stop(self, grace: float) -> None:
        """Stop serving, waiting up to ``grace`` seconds."""


HttpStarter = Callable[[Mapping[str, Any], Callable[[str, str], Awaitable[Outcome]], bytes, int],
                       "HttpInterface | None"]
"""Starts the HTTP interface on the running loop (configuration, the server's `DRPCServer.run`,
the cluster's secret, the connection cap), or None when ``drpc.http.port`` is off."""


class Listening(NamedTuple):
    """Where a running server listens (``http``: the HTTP interface's host and port, or None)."""

    addresses: tuple[str, ...]
    port: int
    invocations_port: int
    http: tuple[str, int] | None = None


class DRPCServer:
    """Storm's DRPC server on an asyncio loop: `serve` until cancelled.

    ``clock`` is the monotonic clock request deadlines are read on; ``http`` starts Storm's HTTP
    interface when ``drpc.http.port`` is set (`squall.ui.drpc_http.start_http`, from a layer above).
    """

    def __init__(self, conf: Mapping[str, Any], clock: Callable[[], float] = time.monotonic,
                 http: HttpStarter | None = None) -> None:
        self.links = ClusterLinks.of(conf)
        self._conf = conf
        self._http = http
        port = setting(conf, Config.DRPC_HTTP_PORT)
        if http is None and port is not None and port >= 0:
            raise SquallError("drpc.http.port is set, but this DRPC server was made without its HTTP interface "
                              "(squall drpc and squall nimbus serve it: pass http=squall.ui.drpc_http.start_http)")
        self.book = RequestBook(self.links.drpc.request_timeout)
        self.clock = clock
        self.listening: Listening | None = None
        self._in_flight = 0  # execute calls waiting for their outcome
        self._all_answered = asyncio.Event()
        self._open = OpenConnections(log, "the DRPC server")  # both ports' connections, ended by its stop

    async def serve(self, addresses: list[str], ready: asyncio.Event | None = None) -> None:
        """Listen on ``addresses`` at ``drpc.port`` and ``drpc.invocations.port`` (0: a free
        one, which `listening` tells) until cancelled; then every waiting request fails
        (SERVER_SHUTDOWN).

        Raises:
            OSError: a port is taken (EADDRINUSE) or an address cannot be bound.
        """
        from .._connlimit import ACCEPT_BACKLOG, ConnectionTable, FullTableLog, connection_cap, open_files_limit
        from .._wire import serve_connection
        # a table per port, as Storm serves them with pools of their own: callers waiting for
        # answers never shut out the topologies' spouts and return bolts that give them; and a
        # caller's connection kept between its calls makes room for a new caller
        cap = connection_cap(self.links.rpc.max_connections, open_files_limit() // 2)
        caller_table: ConnectionTable[asyncio.StreamWriter] = ConnectionTable(cap)
        invocation_table: ConnectionTable[asyncio.StreamWriter] = ConnectionTable(cap)
        FullTableLog(log, "the DRPC server").install(asyncio.get_running_loop())

        def on(handle: Any, table: ConnectionTable[asyncio.StreamWriter], idle_evictable: bool) -> Any:
            async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                if not self._open.opened(writer):
                    return  # the server is stopping: accepted just before, closed unserved
                sessions: list[dict[str, Any]] = []  # this connection's, once it made a call

                async def handle_here(op: str, args: dict[str, Any], session: dict[str, Any]) -> Any:
                    if not sessions:
                        sessions.append(session)
                    return await handle(op, args, session)
                try:
                    with contextlib.suppress(asyncio.CancelledError):  # the server stopping: end quietly
                        await serve_connection(reader, writer, self.links.secret, handle_here, log, self.links.rpc,
                                               table, idle_evictable)
                finally:
                    self._open.closed()
                    if sessions:
                        self._closed(sessions[0])
            return connection
        drpc = self.links.drpc
        callers = await asyncio.start_server(on(self._callers, caller_table, True), addresses, drpc.port,
                                             backlog=ACCEPT_BACKLOG)
        try:
            invocations = await asyncio.start_server(on(self._invocations, invocation_table, False), addresses,
                                                     drpc.invocations_port, backlog=ACCEPT_BACKLOG)
        except BaseException:
            callers.close()
            raise
        http: HttpInterface | None = None
        if self._http is not None:
            try:
                http = self._http(self._conf, self.run, self.links.secret, cap)
            except BaseException:
                callers.close()
                invocations.close()
                raise
        self.listening = Listening(tuple(addresses), callers.sockets[0].getsockname()[1],
                                   invocations.sockets[0].getsockname()[1], None if http is None else http.where)
        log.info("squall drpc listening on %s: port %d (callers), %d (invocations); requests time out after %g s; "
                 "at most %d connections a port", ", ".join(addresses), self.listening.port,
                 self.listening.invocations_port, drpc.request_timeout, cap)
        if ready is not None:
            ready.set()
        try:
            async with callers, invocations:
                try:
                    await asyncio.Event().wait()  # until cancelled
                finally:
                    # here, not after the servers' exit: on Python 3.12+ it waits until every
                    # connection has closed, and a caller or spout keeps its own open between its
                    # calls (a `squall drpc` sent SIGTERM never exited)
                    callers.close()
                    invocations.close()
                    self.book.close()
                    # let every waiting caller have its SERVER_SHUTDOWN answer before its
                    # connection ends: its connection writes it in the step that ends `execute`
                    if self._in_flight:
                        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                            await asyncio.wait_for(self._all_answered.wait(), SHUTDOWN_ANSWER_SECS)
                    await self._open.end()
        finally:
            self.book.close()  # (done above unless entering the servers failed)
            if http is not None:
                await http.stop(SHUTDOWN_ANSWER_SECS)
            stats = self.book.stats()
            log.info("squall drpc stopped: %d requests, %d answered, %d failed, %d timed out", stats.executed,
                     stats.returned, stats.failed, stats.timed_out)

    async def _callers(self, op: str, args: dict[str, Any], session: dict[str, Any]) -> Any:
        if op != "execute":
            raise ValueError(f"unknown operation {op!r} on drpc.port (callers run execute)")
        return await self.execute(**args)

    async def execute(self, function: str, args: str) -> dict[str, Any]:
        """Queue the request and wait for its outcome (`outcome_reply`)."""
        outcome = await self.run(function, args)
        return outcome_reply(outcome.result, outcome.error)

    async def run(self, function: str, args: str) -> Outcome:
        """Queue the request and wait for its outcome (for ``drpc.port`` and the HTTP interface).

        Raises:
            DRPCExecutionException: the server is shutting down (SERVER_SHUTDOWN).
            TypeError, ValueError: as `RequestBook.submit`.
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Outcome] = loop.create_future()

        def hear(outcome: Outcome) -> None:  # from this loop's thread (the book is only used here)
            if not done.done():
                done.set_result(outcome)
        request = self.book.submit(function, args, self.clock(), hear)
        log.debug("execute %r as request %s", function, request.request_id)
        self._in_flight += 1
        self._all_answered.clear()
        try:
            deadline = self.book.deadline(request.request_id)
            while deadline is not None and not done.done():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(done), max(0.0, deadline - self.clock()))
                if not done.done():
                    self.book.expire(self.clock())
                deadline = self.book.deadline(request.request_id)
            outcome = await done
        finally:
            # cancelled (the server stopping before its book closed): no request is left waiting for nobody
            if not done.done():
                self.book.fail(request.request_id, "the caller's connection closed")
            self._in_flight -= 1
            if not self._in_flight:
                self._all_answered.set()
        return outcome

    async def _invocations(self, op: str, args: dict[str, Any], session: dict[str, Any]) -> Any:
        if op == "fetch_request":
            function = _text(args, "function")
            holder = self._holder(args, session)
            request = self.book.fetch(function, holder, self.clock())
            return None if request is None else {"id": request.request_id, "args": request.args}
        if op == "result":
            return self.book.result(_text(args, "request_id"), _text(args, "result"))
        if op == "fail_request":
            message = args.get("message")
            return self.book.fail(_text(args, "request_id"), message if isinstance(message, str) else None)
        raise ValueError(f"unknown operation {op!r} on drpc.invocations.port "
                         f"(fetch_request, result, fail_request)")


    def _holder(self, args: dict[str, Any], session: dict[str, Any]) -> str | None:
        # the spout's name for itself and its grace (a spout before 2026-12-06 gives neither): the
        # first a connection gives are its for good, attached to the book until it closes
        holder, grace = args.get("holder"), args.get("grace", HOLDER_GRACE_SECS)
        if holder is None:
            return session.get(_HOLDER)
        if not isinstance(holder, str) or not holder or len(holder) > HOLDER_MAX_CHARS:
            raise ValueError(f"holder must be a string of 1 to {HOLDER_MAX_CHARS} characters")
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not 0 < grace <= MAX_GRACE_SECS:
            raise ValueError(f"grace must be a number of seconds above 0 and at most {MAX_GRACE_SECS:g}")
        known = session.get(_HOLDER)
        if known is None:
            session[_HOLDER] = holder
            self.book.attach(holder, float(grace))
            return holder
        return known

    def _closed(self, session: dict[str, Any]) -> None:
        # a spout's connection closed: what it took fails after its grace unless it comes back;
        # nothing else wakes the callers waiting for those requests before their deadlines
        holder = session.get(_HOLDER)
        if holder is None:
            return
        fails_at = self.book.detach(holder, self.clock())
        if fails_at is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closing: the book fails them all anyway
            asyncio.get_running_loop().call_later(max(0.0, fails_at - self.clock()) + 0.05,
                                                  lambda: self.book.expire(self.clock()))


_HOLDER = "drpc.holder"  # the session key of a spout connection's holder


def _text(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    return value


# --- running it -------------------------------------------------------------------------------------
def serving_addresses(conf: Mapping[str, Any]) -> list[str]:
    """`addresses_to_serve`, which must not be empty (for ``squall drpc``).

    Raises:
        SquallError: ``drpc.servers`` is unset, or none of its entries names this machine.
    """
    from .client import DrpcSettings
    servers = DrpcSettings.of(conf).servers
    if not servers:
        raise SquallError("drpc.servers is not set: list the hosts that run `squall drpc` (callers and topologies "
                          "reach the servers by these names), e.g. -c 'drpc.servers=[\"127.0.0.1\"]'")
    addresses = addresses_to_serve(conf)
    if not addresses:
        raise SquallError(f"no entry of drpc.servers {list(servers)} names this machine ({socket.gethostname()}): "
                          f"run `squall drpc` on one of them, or add this machine's name to drpc.servers")
    return addresses


def run_drpc(conf: Mapping[str, Any], on_ready: Callable[[Listening], None] | None = None,
             http: HttpStarter | None = None) -> int:
    """``squall drpc``: serve until SIGINT/SIGTERM; ``on_ready`` once it listens; ``http`` as
    `DRPCServer`'s.

    Raises:
        SquallError: as `serving_addresses`, or a key is invalid (named).
        OSError: a port is taken.
    """
    addresses = serving_addresses(conf)
    server = DRPCServer(conf, http=http)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        ready = asyncio.Event()
        serving = asyncio.create_task(server.serve(addresses, ready))
        waiting = asyncio.create_task(ready.wait())
        await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            waiting.cancel()
            serving.result()  # why it ended (a port taken)
            return
        if on_ready is not None and server.listening is not None:
            on_ready(server.listening)
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if serving.done():
            serving.result()
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    asyncio.run(main())
    return 0


class BackgroundDRPC:
    """A `DRPCServer` on a thread of its own, for ``squall nimbus`` (process and Spark hosts):
    `start_for_nimbus` starts one when ``drpc.servers`` names this machine."""

    def __init__(self, conf: Mapping[str, Any], addresses: list[str], http: HttpStarter | None = None) -> None:
        self.server = DRPCServer(conf, http=http)
        self._addresses = addresses
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="squall-drpc", daemon=True)

    @classmethod
    def start_for_nimbus(cls, conf: Mapping[str, Any], http: HttpStarter | None = None) -> BackgroundDRPC | None:
        """The DRPC server, listening, if ``drpc.servers`` names this machine; else None
        (``http`` as `DRPCServer`'s).

        Raises:
            OSError: a port is taken.
        """
        addresses = addresses_to_serve(conf)
        if not addresses:
            return None
        background = cls(conf, addresses, http)
        background._thread.start()
        background._ready.wait()
        if background._error is not None:
            raise background._error
        return background

    def _run(self) -> None:
        async def main() -> None:
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
            ready = asyncio.Event()
            serving = asyncio.ensure_future(self.server.serve(self._addresses, ready))
            waiting = asyncio.ensure_future(ready.wait())
            await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if not serving.done():  # else its error is kept first (below), then the caller woken
                self._ready.set()
            await serving
        try:
            asyncio.run(main())  # which also ends the connections still open
        except asyncio.CancelledError:
            pass
        except BaseException as e:  # noqa: BLE001 (the server thread's end: kept for the caller of start/stop)
            self._error = e
        finally:
            self._ready.set()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop serving (waiting requests fail: SERVER_SHUTDOWN) and wait for the thread."""
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(task.cancel)
        self._thread.join(timeout)
