"""The UI daemon's ASGI app: Storm's REST API under ``/api/v1/`` (docs/ui.md, "REST API").

`create_app` builds it over a `UiMasterLink`. Every master call runs on a worker thread, never on
the event loop, so a slow or dead master holds up only the requests that need it: a master that
cannot be reached makes each such request answer 503 with Storm's error JSON, and the daemon
goes on serving (and answers again once the master is back). Every error is Storm's shape,
``{"error": "<status> <reason>", "errorMessage": ...}``; an unexpected one is logged here with
its traceback and answered 500 without it.
"""

from __future__ import annotations

import http
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .._config import Config, setting, shown_configuration
from .._errors import (
    BadParameterError,
    IllegalStateTransition,
    InvalidTopologyException,
    NotAliveException,
    UnknownComponentError,
)
from . import storm_json as sj
from .guard import ActionGuard, allowed_hosts, host_allowed
from .link import MasterUnavailable, UiMasterLink
from .openapi import openapi_document

log = logging.getLogger("squall.ui")

API = "/api/v1"
MAX_BODY_BYTES = 64 * 1024  # a rebalance body is a few dozen bytes


class ApiError(Exception):
    """A request that gets Storm's error JSON with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Json(JSONResponse):
    def render(self, content: Any) -> bytes:
        # a configuration may hold values JSON has no type for (a tuple is fine, a set is not)
        return json.dumps(content, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8")


def error_response(status: int, message: str) -> Response:
    """Storm's error JSON with ``status``."""
    return _Json({"error": f"{status} {http.HTTPStatus(status).phrase}", "errorMessage": message}, status)


def _status_of(e: Exception) -> int | None:
    """The status of an intended refusal (of the master, or of our own checks); None: anything
    else, a failure (500, logged). Plain KeyError and ValueError are failures too: only squall's
    own classes say "unknown" or "malformed"."""
    if isinstance(e, ApiError):
        return e.status
    if isinstance(e, MasterUnavailable):
        return 503
    if isinstance(e, (NotAliveException, UnknownComponentError)):
        return 404
    if isinstance(e, IllegalStateTransition):
        return 409
    if isinstance(e, (BadParameterError, InvalidTopologyException)):
        return 400
    return None


def _internal_error(request: Request, e: BaseException) -> Response:
    """A failure: logged here with the request and the traceback, answered 500 without it."""
    log.error("%s %s failed: %s", request.method, request.url.path, type(e).__name__, exc_info=e)
    return error_response(500, f"internal error ({type(e).__name__}); the UI daemon's log has the details")


Handler = Callable[[Request], Awaitable[Any]]


def _endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """``handler``'s result as JSON, and any exception as Storm's error JSON."""
    async def endpoint(request: Request) -> Response:
        try:
            return _Json(await handler(request))
        except Exception as e:  # noqa: BLE001 - every failure becomes Storm's error shape
            status = _status_of(e)
            if status is None:
                return _internal_error(request, e)
            return error_response(status, str(e))
    endpoint.__name__ = handler.__name__
    endpoint.__doc__ = handler.__doc__
    return endpoint


class _Api:
    """The endpoints, over one master link."""

    def __init__(self, link: UiMasterLink, guard: ActionGuard) -> None:
        self.link = link
        self.guard = guard

    async def read(self, op: str, **args: Any) -> Any:
        return await run_in_threadpool(self.link.read, op, **args)

    async def name_of(self, storm_id: str) -> str:
        """The name of the topology whose storm id is ``storm_id``. Raises ApiError 404."""
        for t in await self.read("list"):
            if t["id"] == storm_id:
                return t["name"]
        raise ApiError(404, f"topology {storm_id!r} not found")

    async def tasks_of(self, storm_id: str) -> int:
        """The number of tasks of the topology ``storm_id``. Raises ApiError 404."""
        for t in (await self.read("cluster_info"))["topologies"]:
            if t["id"] == storm_id:
                return int(t["num_tasks"])
        raise ApiError(404, f"topology {storm_id!r} not found")

    # --- reads --------------------------------------------------------------------------------------------
    async def cluster_configuration(self, request: Request) -> Any:
        return shown_configuration(await self.read("configuration"))

    async def cluster_summary(self, request: Request) -> Any:
        return sj.cluster_summary(await self.read("cluster_info"))

    async def nimbus_summary(self, request: Request) -> Any:
        return sj.nimbus_summary(await self.read("cluster_info"))

    async def supervisor_summary(self, request: Request) -> Any:
        return sj.supervisor_summary(await self.read("supervisors"))

    async def topology_summary(self, request: Request) -> Any:
        return sj.topology_summary(await self.read("cluster_info"))

    async def topology(self, request: Request) -> Any:
        params = sj.page_params(dict(request.query_params))
        name = await self.name_of(request.path_params["id"])
        return await self.read("topology_page", name=name, window=params.window, sys=params.sys)

    async def component(self, request: Request) -> Any:
        params = sj.page_params(dict(request.query_params))
        name = await self.name_of(request.path_params["id"])
        return await self.read("component_page", name=name, component=request.path_params["component"],
                               window=params.window, sys=params.sys)

    async def visualization(self, request: Request) -> Any:
        params = sj.page_params(dict(request.query_params))
        name = await self.name_of(request.path_params["id"])
        return await self.read("visualization", name=name, window=params.window, sys=params.sys)

    async def visualization_init(self, request: Request) -> Any:
        params = sj.page_params(dict(request.query_params))
        name = await self.name_of(request.path_params["id"])
        return await self.read("visualization_init", name=name, sys=params.sys)

    async def openapi(self, request: Request) -> Any:
        return openapi_document()

    # --- actions ------------------------------------------------------------------------------------------
    async def _allowed(self, request: Request) -> str:
        """Check the guard, then the topology; returns the topology's name."""
        refusal = self.guard.refusal(request.headers, request.url.scheme)
        if refusal is not None:
            raise ApiError(refusal.status, refusal.message)
        return await self.name_of(request.path_params["id"])

    async def _act(self, request: Request, name: str, op: str, fn: Callable[..., None], *args: Any) -> Any:
        """Run ``fn(name, *args)``, ``name`` as `_allowed` returned it."""
        await run_in_threadpool(fn, name, *args)
        log.info("UI action %s on %s from %s", op, name, request.client.host if request.client else "?")
        return sj.operation(op, request.path_params["id"])

    async def activate(self, request: Request) -> Any:
        return await self._act(request, await self._allowed(request), "activate", self.link.activate)

    async def deactivate(self, request: Request) -> Any:
        return await self._act(request, await self._allowed(request), "deactivate", self.link.deactivate)

    async def kill(self, request: Request) -> Any:
        name = await self._allowed(request)  # refused before the parameters are looked at
        wait = sj.wait_secs(request.path_params["wait"])
        return await self._act(request, name, "kill", self.link.kill, wait)

    async def rebalance(self, request: Request) -> Any:
        name = await self._allowed(request)
        wait = sj.wait_secs(request.path_params["wait"])
        options = sj.rebalance_options(await _json_body(request))
        if options.num_workers is not None:
            # a worker beyond the topology's tasks would hold no executor; and a LocalCluster offers
            # as many slots as asked, so a huge count must stop here
            tasks = await self.tasks_of(request.path_params["id"])
            if options.num_workers > tasks:
                raise ApiError(400, f"rebalanceOptions.numWorkers {options.num_workers} is more than the "
                                    f"topology's {tasks} tasks")
        return await self._act(request, name, "rebalance", self.link.rebalance, options.num_workers,
                               options.executors, wait)

    async def debug(self, request: Request) -> Any:
        name = await self._allowed(request)
        action = request.path_params["action"]
        enable, pct = sj.debug_args(action, request.path_params["pct"])
        component = request.path_params.get("component")
        return await self._act(request, name, f"debug/{action}", self.link.debug, component, enable, pct)


async def _json_body(request: Request) -> Any:
    """The request's JSON body; None when it has none.

    Raises:
        ApiError: 400, it is too large, not declared JSON, or not JSON (said which).
    """
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(400, f"the body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body.strip():
        return None
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(400, f"the body must be JSON (Content-Type: application/json), got {kind or 'no Content-Type'}")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the body is not valid JSON: {e}") from None
    except RecursionError:  # "[[[[...": json's parser recurses per level
        raise ApiError(400, "the body is not valid JSON: nested too deep to parse") from None


_SLASH = "\uffff"  # an encoded "/" while a raw path is matched (a noncharacter: in no id)


class _SegmentRoute(Route):
    """A `Route` whose parameters are matched segment by segment of the raw path, as JAX-RS
    matches Storm's ``{component}``: an encoded "/" (``%2F``) stays inside its segment, so the
    component ``in/put`` has its page at ``.../component/in%2Fput`` (Storm restricts only topology
    names, not component ids). Starlette matches the decoded path, where that "/" would split
    the id in two and the page would be 404."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        if scope["type"] != "http" or not raw or b"%2f" not in raw.lower():
            return super().matches(scope)
        # each segment decoded on its own, as the server decodes the whole path (UTF-8)
        segments = raw.split(b"?", 1)[0].decode("ascii", "replace").split("/")
        path = "/".join(unquote(seg).replace("/", _SLASH) for seg in segments)
        match, child = super().matches({**scope, "path": path})
        if match is not Match.NONE:
            child["path_params"] = {k: v.replace(_SLASH, "/") if isinstance(v, str) else v
                                    for k, v in child["path_params"].items()}
        return match, child


def api_routes(link: UiMasterLink, guard: ActionGuard) -> list[BaseRoute]:
    """Storm's REST endpoints under `API`."""
    api = _Api(link, guard)
    topo = f"{API}/topology/{{id}}"
    get = [("/cluster/configuration", api.cluster_configuration), ("/cluster/summary", api.cluster_summary),
           ("/nimbus/summary", api.nimbus_summary), ("/supervisor/summary", api.supervisor_summary),
           ("/topology/summary", api.topology_summary), ("/openapi.json", api.openapi)]
    routes: list[BaseRoute] = [Route(API + path, _endpoint(fn), methods=["GET"]) for path, fn in get]
    routes += [
        Route(f"{topo}/visualization", _endpoint(api.visualization), methods=["GET"]),
        Route(f"{topo}/visualization-init", _endpoint(api.visualization_init), methods=["GET"]),
        _SegmentRoute(f"{topo}/component/{{component}}", _endpoint(api.component), methods=["GET"]),
        Route(topo, _endpoint(api.topology), methods=["GET"]),
        Route(f"{topo}/activate", _endpoint(api.activate), methods=["POST"]),
        Route(f"{topo}/deactivate", _endpoint(api.deactivate), methods=["POST"]),
        Route(f"{topo}/rebalance/{{wait}}", _endpoint(api.rebalance), methods=["POST"]),
        Route(f"{topo}/kill/{{wait}}", _endpoint(api.kill), methods=["POST"]),
        Route(f"{topo}/debug/{{action}}/{{pct}}", _endpoint(api.debug), methods=["POST"]),
        _SegmentRoute(f"{topo}/component/{{component}}/debug/{{action}}/{{pct}}", _endpoint(api.debug),
                      methods=["POST"]),
    ]
    return routes


async def _unexpected(request: Request, exc: Exception) -> Response:
    """Any other route's failure (the pages, ``/metrics``, the logviewer), in Storm's shape."""
    return _internal_error(request, exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no such path) and 405 (wrong method), in Storm's shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = {404: f"no such page: {request.url.path}",
              405: f"{request.method} is not allowed on {request.url.path}"}.get(status, str(getattr(exc, "detail", "")))
    return error_response(status, detail)


class HostCheck:
    """ASGI middleware: a request whose ``Host`` is not one of ``allowed`` (`guard.allowed_hosts`)
    gets 403 in Storm's error shape, before any route runs. Starlette's TrustedHostMiddleware
    does the same but answers in plain text and cuts an IPv6 ``Host`` ([::1]:8080) at its first
    colon."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
            if not host_allowed(header, self.allowed):
                response = error_response(403, f"Host {header[:100]!r} is not a name of this UI; a name it is "
                                               f"reached by must be in ui.allowed.hosts")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(link: UiMasterLink, conf: Mapping[str, Any], *, secret: bytes | None,
               extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The UI daemon's app over ``link``.

    Args:
        link: how to reach the master (`squall.ui.link.RpcLink` or `DirectLink`).
        conf: the cluster configuration (``ui.actions.enabled``, and ``ui.host`` and
            ``ui.allowed.hosts``, the names a request's ``Host`` may give, are read from it).
        secret: the cluster's secret, which actions must carry in ``X-Squall-Secret``; None
            refuses every action (`squall.ui.guard`).
        extra_routes: more routes served beside the REST API (web pages, the logviewer: see
            `squall.ui.server.ui_routes`).
    """
    guard = ActionGuard(secret, enabled=bool(setting(conf, Config.UI_ACTIONS_ENABLED)))
    hosts = allowed_hosts(str(setting(conf, Config.UI_HOST)), setting(conf, Config.UI_ALLOWED_HOSTS))
    return Starlette(routes=[*api_routes(link, guard), *extra_routes],
                     middleware=[Middleware(HostCheck, allowed=hosts)],
                     exception_handlers={HTTPException: _http_error, Exception: _unexpected})

