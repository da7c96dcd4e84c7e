"""Storm's DRPC HTTP interface (``drpc.http.port``) for ``squall drpc``'s server (docs/drpc.md):
`start_http`, which ``squall drpc`` and ``squall nimbus`` hand to `squall.drpc.server.DRPCServer`
(the DRPC layer sits below the UI's, whose guards and uvicorn set-up this reuses).

As Storm's ``DRPCResource``: ``GET /drpc/<function>/<args>``, ``GET /drpc/<function>`` (empty
args) and ``POST /drpc/<function>`` (the body, UTF-8, is the args) run the request and answer
its result as the body (200, ``text/plain``). A failed request is answered as Storm's
``DRPCExceptionMapper`` answers it: 400 (FAILED_REQUEST), 503 (SERVER_SHUTDOWN), 504
(SERVER_TIMEOUT) or 500 (INTERNAL_ERROR), the body the JSON map
``{"error": "<type>", "errorMessage": "<message>"}``. A function no topology serves times out
(504), as in Storm.

Where squall is stricter than Storm (whose HTTP DRPC is open unless servlet filters are
configured), in this order:

1. it binds ``drpc.http.host`` (127.0.0.1 by default), not every address;
2. a request whose ``Host`` is not loopback, ``drpc.http.host`` or one of
   ``drpc.http.allowed.hosts`` gets 403 (a web page of a site whose name points at this machine,
   DNS rebinding, cannot run requests from a browser here);
3. a request needs the cluster's secret in the ``X-Squall-Secret`` header (compared in constant
   time; 403 without it) unless ``drpc.http.secret.required`` is false;
4. a body over ``drpc.max_buffer_size`` bytes gets 413 (it is not read); a request whose head and
   body have not all arrived ``ui.request.timeout.secs`` after its first byte gets 408, and at
   most ``drpc.max.connections`` connections are open (`squall.ui.slow_clients`).

Nothing of a request (its headers, args or result) is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple
from urllib.parse import unquote

from .._config import Config, setting
from .._connlimit import listening_socket
from .._errors import SquallError
from ..drpc.core import DRPCExceptionType, DRPCExecutionException, Outcome
from .guard import allowed_hosts, host_allowed

log = logging.getLogger("squall.drpc")

SECRET_HEADER = "X-Squall-Secret"

STATUS_OF = {DRPCExceptionType.FAILED_REQUEST: 400, DRPCExceptionType.SERVER_SHUTDOWN: 503,
             DRPCExceptionType.SERVER_TIMEOUT: 504, DRPCExceptionType.INTERNAL_ERROR: 500}
"""The HTTP status of each failure (Storm's ``DRPCExceptionMapper``)."""

_REASONS = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large"}

# Storm's settings that put authentication or TLS in front of its DRPC HTTP port: squall runs none
# of them, so a server started with one would serve openly what its operator believes is protected
STORM_HTTP_AUTH_KEYS = ("drpc.http.filter", "drpc.http.filter.params")


class HttpSettings(NamedTuple):
    """The ``drpc.http.*`` keys of a configuration, checked."""

    port: int
    host: str
    allowed: frozenset[str]
    secret_required: bool
    max_body: int

    @classmethod
    def of(cls, conf: Mapping[str, Any]) -> HttpSettings | None:
        """The settings, or None when ``drpc.http.port`` is unset or negative (no HTTP interface).

        Raises:
            SquallError: a key is invalid, or Storm's HTTP filters or HTTPS port are set (named).
        """
        port = setting(conf, Config.DRPC_HTTP_PORT)
        if port is None or port < 0:
            return None
        given = [key for key in STORM_HTTP_AUTH_KEYS if conf.get(key) not in (None, "", [], {})]
        https = conf.get("drpc.https.port")
        if isinstance(https, int) and https > 0:
            given.append("drpc.https.port")
        if given:
            raise SquallError(f"{', '.join(given)} set, but squall's DRPC HTTP interface runs none of Storm's "
                              f"HTTP filters or HTTPS: remove the key(s); the interface checks the cluster's "
                              f"secret ({SECRET_HEADER}) unless drpc.http.secret.required is false, and can be "
                              f"put behind a proxy that terminates TLS (docs/drpc.md)")
        host = str(setting(conf, Config.DRPC_HTTP_HOST))
        return cls(int(port), host, allowed_hosts(host, setting(conf, Config.DRPC_HTTP_ALLOWED_HOSTS) or ()),
                   bool(setting(conf, Config.DRPC_HTTP_SECRET_REQUIRED)),
                   int(setting(conf, Config.DRPC_MAX_BUFFER_SIZE)))


def _json_error(status: int, error: str, message: str) -> tuple[int, bytes, bytes]:
    return status, b"application/json", json.dumps({"error": error, "errorMessage": message}).encode()


def _refusal(status: int, message: str) -> tuple[int, bytes, bytes]:
    return _json_error(status, _REASONS.get(status, "Error"), message)


class DrpcHttpApp:
    """The ASGI app: each request runs ``execute(function, args)`` (an awaitable `Outcome`).

    Args:
        execute: the server's request runner.
        settings: `HttpSettings`.
        secret: the cluster's secret, which requests must carry in ``X-Squall-Secret`` when
            ``settings.secret_required``.
    """

    def __init__(self, execute: Callable[[str, str], Awaitable[Outcome]], settings: HttpSettings,
                 secret: bytes) -> None:
        self._execute = execute
        self._settings = settings
        self._secret = secret

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        status, kind, body = await self._answer(scope, receive)
        headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
        if status == 405:
            headers.append((b"allow", b"GET, POST"))
        if status == 413:  # the body was not read: the connection cannot carry another request
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _answer(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]]
                      ) -> tuple[int, bytes, bytes]:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not host_allowed(host, self._settings.allowed):
            return _refusal(403, f"Host {host[:100]!r} is not a name of this DRPC server; a name it is reached by "
                                 f"must be in drpc.http.allowed.hosts")
        if self._settings.secret_required:
            given = headers.get(SECRET_HEADER.lower())
            if given is None:
                return _refusal(403, f"DRPC over HTTP needs the cluster's secret in the {SECRET_HEADER} header "
                                     f"(or drpc.http.secret.required: false)")
            # the header's bytes as sent (ASGI decodes them as latin-1) against the secret's
            if not hmac.compare_digest(given.encode("latin-1"), self._secret):
                return _refusal(403, f"the {SECRET_HEADER} header does not hold the cluster's secret")
        raw = scope.get("raw_path") or scope["path"].encode("utf-8")
        parts = raw.split(b"?", 1)[0].split(b"/")
        if len(parts) == 4 and parts[3] == b"":  # /drpc/<function>/: no args
            parts = parts[:3]
        if len(parts) not in (3, 4) or parts[0] != b"" or parts[1] != b"drpc" or not parts[2]:
            return _refusal(404, "no such resource: DRPC is GET /drpc/<function>/<args>, GET /drpc/<function> "
                                 "or POST /drpc/<function> (the body is the args)")
        method = scope["method"]
        if method not in ("GET", "POST") or (method == "POST" and len(parts) == 4):
            return _refusal(405, f"{method} is not allowed here: DRPC is GET /drpc/<function>/<args>, "
                                 f"GET /drpc/<function> or POST /drpc/<function>")
        try:
            function = unquote(parts[2].decode("ascii"), errors="strict")
            path_args = unquote(parts[3].decode("ascii"), errors="strict") if len(parts) == 4 else ""
        except UnicodeError:
            return _refusal(400, "the function or args in the path are not percent-encoded UTF-8")
        if method == "GET":
            args = path_args
        else:
            body = await self._body(headers, receive)
            if isinstance(body, tuple):
                return body
            try:
                args = body.decode("utf-8")
            except UnicodeDecodeError:
                return _refusal(400, "the body (the args) is not UTF-8")
        try:
            outcome = await self._execute(function, args)
        except DRPCExecutionException as e:  # the server shutting down
            outcome = Outcome(None, e)
        if outcome.error is not None:
            return _json_error(STATUS_OF.get(outcome.error.type, 500), outcome.error.type.value, str(outcome.error))
        return 200, b"text/plain; charset=utf-8", (outcome.result or "").encode("utf-8")

    async def _body(self, headers: dict[str, str], receive: Callable[[], Awaitable[dict[str, Any]]]
                    ) -> bytes | tuple[int, bytes, bytes]:
        """The body, or the 413 refusal once it is over ``drpc.max_buffer_size`` bytes."""
        limit = self._settings.max_body
        too_big = _refusal(413, f"the body is over drpc.max_buffer_size ({limit} bytes)")
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            return too_big
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return _refusal(400, "the request ended before its body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return too_big
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def http_server(app: DrpcHttpApp, conf: Mapping[str, Any], max_connections: int) -> Any:
    """uvicorn's server for ``app``, slow clients held to ``ui.request.timeout.secs`` and
    ``max_connections`` (`squall.ui.slow_clients`). Serve it with ``_serve(sockets=[...])`` on
    the DRPC server's loop: its ``serve`` would take over the process's signal handlers.

    Raises:
        SquallError: uvicorn or starlette is not installed (``pip install squall[ui]``).
    """
    try:
        import uvicorn

        from .slow_clients import UiLimits, guarded_protocol
    except ImportError as e:
        raise SquallError(f"drpc.http.port is set, but the DRPC HTTP interface needs uvicorn ({e}): "
                          f"pip install 'squall[ui]', or unset drpc.http.port") from None
    from .._connlimit import connection_cap, open_files_limit
    limits = UiLimits(connection_cap(max_connections, open_files_limit() // 2),
                      float(setting(conf, Config.UI_REQUEST_TIMEOUT_SECS)))
    # log_config None: uvicorn's records go to the process's logging; no access log (no args in logs)
    return uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                         timeout_graceful_shutdown=2, http=guarded_protocol(limits)))


class HttpInterface:
    """The HTTP interface serving on the running loop (`start_http`)."""

    def __init__(self, server: Any, task: asyncio.Future[Any], where: tuple[str, int]) -> None:
        self._server = server
        self._task = task
        self.where = where
        """The host and port it listens on."""

    async def stop(self, grace: float) -> None:
        """Stop serving, waiting up to ``grace`` seconds for the answers being written."""
        self._server.should_exit = True
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._task), grace)
        self._task.cancel()


def start_http(conf: Mapping[str, Any], execute: Callable[[str, str], Awaitable[Outcome]], secret: bytes,
               max_connections: int) -> HttpInterface | None:
    """Serve the interface on the running loop when ``drpc.http.port`` is set (else None).

    Raises:
        SquallError: a key is invalid, Storm's HTTP filters are set, uvicorn is missing, or the
            address cannot be bound (named).
    """
    settings = HttpSettings.of(conf)
    if settings is None:
        return None
    server = http_server(DrpcHttpApp(execute, settings, secret), conf, max_connections)
    sock = listening_socket(settings.host, settings.port, "the DRPC HTTP interface",
                            "drpc.http.host, drpc.http.port")
    # uvicorn's _serve, not serve: serve would take over the process's signal handlers
    task = asyncio.ensure_future(server._serve(sockets=[sock]))
    log.info("squall drpc HTTP interface on %s port %d (%s)", settings.host, sock.getsockname()[1],
             "the X-Squall-Secret header required" if settings.secret_required
             else "open: drpc.http.secret.required is false")
    return HttpInterface(server, task, (settings.host, sock.getsockname()[1]))
