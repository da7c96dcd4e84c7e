"""The DRPC spout and return bolt (Storm's ``DRPCSpout`` and ``ReturnResults``): the two ends of
a DRPC topology, written by hand (``DRPCSpout -> bolts -> ReturnResults``) or made by Trident's
``new_drpc_stream``.

The spout fetches its function's requests from a `LocalDRPC` (found by id: see `squall.drpc.local`)
or from every server of ``drpc.servers`` on ``drpc.invocations.port``, and emits
``["args", "return-info"]`` with a message id. When the tuple fails it tells the server, so the
caller gets `DRPCExecutionException` at once rather than at the request's timeout. The bolt takes
``["result", "return-info"]`` and sends the result to the server the return-info names.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .._collectors import OutputFieldsDeclarer
from .._components import Bolt, Spout
from .._config import Config, setting
from .._failure import fail_because
from .._fields import Fields
from .._tuple import is_tick_tuple
from .core import HOLDER_MAX_CHARS, MAX_GRACE_SECS, DRPCExecutionException, ReturnInfo
from .local import LocalDRPC, local_drpc

log = logging.getLogger("squall.drpc")

RECONNECT_SECS = 1.0
"""How long a spout leaves a DRPC server it could not reach before trying it again."""
_TRIES = 3  # Storm's retries of a result or a fail


@dataclass(frozen=True)
class DRPCMessageId:
    """A DRPC spout tuple's message id: the request, and which of the spout's servers it came from."""

    request_id: str
    server: int


class _Server:
    """One DRPC server as a spout or bolt task reaches it: its link, and when to try it again."""

    def __init__(self, host: str, port: int, link: Any) -> None:
        self.host, self.port, self.link = host, port, link
        self.retry_at = 0.0
        self.reported = False  # whether the current run of failures was reported

    def call(self, op: str, **args: Any) -> Any:
        return self.link.call(op, **args)


class DRPCSpout(Spout):
    """Emits each request of ``function`` as ``["args", "return-info"]`` (Storm's ``DRPCSpout``).

    With ``local_drpc`` it serves that `LocalDRPC` (on a `LocalCluster`); without, the cluster's
    ``drpc.servers``: with fewer tasks than servers every task polls every server, else task i
    polls server ``i % len(servers)``, as Storm's does.
    """

    def __init__(self, function: str, local_drpc: LocalDRPC | None = None) -> None:
        if not isinstance(function, str) or not function:
            raise ValueError(f"DRPCSpout: the function must be a non-empty string, got {function!r}")
        if local_drpc is not None and not isinstance(local_drpc, LocalDRPC):
            raise TypeError(f"DRPCSpout({function!r}): local_drpc must be a LocalDRPC, got {type(local_drpc).__name__}")
        self.function = function
        self.local_drpc_id = None if local_drpc is None else local_drpc.get_service_id()

    def get_function(self) -> str:
        """The DRPC function this spout serves (Storm's ``get_function``)."""
        return self.function

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """``["args", "return-info"]``."""
        declarer.declare(Fields(["args", "return-info"]))

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        """Find the servers this task polls (none to connect to for a `LocalDRPC`).

        Raises:
            DRPCExecutionException: no `LocalDRPC` was given and this process is no cluster
                worker, or ``drpc.servers`` is not set.
        """
        super().open(conf, context, collector)
        self._servers: list[_Server] = []
        if self.local_drpc_id is not None:
            # who took a request, for its timeout's message (a Trident emitter driven without a
            # task context, as a test drives one, has no component or task to name)
            self._holder = (f"DRPC spout [{context.get_this_component_id()}] task {context.get_this_task_id()}"
                            if context is not None else f"DRPC spout of function {self.function!r}")
            return
        from .client import worker_cluster
        who = f"DRPC spout [{context.get_this_component_id()}] of function {self.function!r}"
        links = worker_cluster(who)
        servers = links.drpc.servers
        n_tasks = len(context.get_component_tasks(context.get_this_component_id()))
        mine = servers if n_tasks < len(servers) else [servers[context.get_this_task_index() % len(servers)]]
        port = links.drpc.invocations_port
        self._servers = [_Server(host, port, links.link(host, port)) for host in mine]
        # who this spout is, for the servers: the requests it takes fail soon after it goes
        # (its worker killed) rather than at drpc.request.timeout.secs
        who = (f"DRPC spout [{context.get_this_component_id()}] task {context.get_this_task_id()} "
               f"of {context.get_storm_id()!r}")
        self._holder = f"{who[:HOLDER_MAX_CHARS - 15]} ({uuid.uuid4().hex[:12]})"
        self._grace = _grace(conf, context)

    def close(self) -> None:
        """Close the connections to the servers."""
        for server in getattr(self, "_servers", ()):
            server.link.close()

    def next_tuple(self) -> None:
        """Fetch one request (from the first server that has one) and emit it."""
        if self.local_drpc_id is not None:
            drpc = local_drpc(self.local_drpc_id)
            request = drpc.fetch_request(self.function, self._holder) if drpc is not None else None  # None: shut down
            if request is not None:
                info = ReturnInfo(request.request_id, self.local_drpc_id, 0)
                self.collector.emit([request.args, info.to_json()], DRPCMessageId(request.request_id, 0))
            return
        now = time.monotonic()
        for index, server in enumerate(self._servers):
            if now < server.retry_at:
                continue
            fetched = self._fetch(server, now)
            if fetched is not None:
                info = ReturnInfo(fetched["id"], server.host, server.port)
                self.collector.emit([fetched["args"], info.to_json()], DRPCMessageId(fetched["id"], index))
                return

    def _fetch(self, server: _Server, now: float) -> dict | None:
        from .._errors import RpcError
        try:
            request = server.call("fetch_request", function=self.function, holder=self._holder, grace=self._grace)
        except RpcError as e:
            server.retry_at = now + RECONNECT_SECS
            if not server.reported:  # once per run of failures, not on every poll
                server.reported = True
                self.collector.report_error(DRPCExecutionException(
                    f"DRPC spout of {self.function!r}: cannot fetch from DRPC server {server.host}:{server.port} "
                    f"(drpc.invocations.port): {e}; trying again every {RECONNECT_SECS:g} s"))
            return None
        server.reported = False
        return request

    def ack(self, msg_id: Any) -> None:
        """Nothing to do: the return bolt answered the request."""

    def fail(self, msg_id: Any) -> None:
        """Tell the server the request failed: its caller gets `DRPCExecutionException` now."""
        self._fail_request(msg_id, None)

    def fail_with(self, msg_id: Any, cause: Any) -> None:
        """As `fail`, telling the caller why (a timeout, an exception in a named bolt...)."""
        self._fail_request(msg_id, cause.describe())

    def _fail_request(self, msg_id: Any, why: str | None) -> None:
        if not isinstance(msg_id, DRPCMessageId):
            return
        if self.local_drpc_id is not None:
            drpc = local_drpc(self.local_drpc_id)
            if drpc is not None:
                drpc.fail_request(msg_id.request_id, why)
            return
        from .._errors import RemoteError, RpcError
        server = self._servers[msg_id.server]
        for attempt in range(1, _TRIES + 1):
            try:
                server.call("fail_request", request_id=msg_id.request_id, message=why)
                return
            except RemoteError as e:
                log.error("DRPC server %s:%s refused to fail request %s: %s", server.host, server.port,
                          msg_id.request_id, e)
                return
            except RpcError as e:
                if attempt == _TRIES:
                    log.error("could not fail DRPC request %s on %s:%s (%s); its caller gets it at its timeout",
                              msg_id.request_id, server.host, server.port, e)
            except Exception as e:  # noqa: BLE001 (a reason the wire refuses: the request still fails, without it)
                log.error("could not send why DRPC request %s failed (%s: %s); failing it without a reason",
                          msg_id.request_id, type(e).__name__, e)
                why = None


def _grace(conf: dict, context: Any) -> float:
    """How long the requests a DRPC spout took wait for it once its connection to the server
    closed: its topology's ``topology.message.timeout.secs``, past which a live spout fails a tree
    anyway, and a day at most (a valid timeout over a day was refused by the server, and the
    spout served nothing). With no message timeout (``topology.enable.message.timeouts`` false,
    or no ackers: the spout acks at the emit) nothing bounds a tree, and a bolt in another worker
    may return the result at any time: the day, so ``drpc.request.timeout.secs`` decides, as
    before the grace (a result 40 s after its spout's worker died was refused at 30 s)."""
    from .._system import ACKER_COMPONENT
    timeouts = bool(setting(conf, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS))
    if not timeouts or not context.get_component_tasks(ACKER_COMPONENT):
        return MAX_GRACE_SECS
    return min(float(setting(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS)), MAX_GRACE_SECS)


class ReturnResults(Bolt):
    """Sends each ``["result", "return-info"]`` tuple's result (a string) to the DRPC server its
    return-info names, and acks it (Storm's ``ReturnResults``). A tuple whose return-info is
    malformed, whose result is not a string, or whose server cannot be reached is failed, so the
    request fails at once."""

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        """Connections to the servers are made when a result first goes there."""
        super().prepare(conf, context, collector)
        self._servers: dict[tuple[str, int], _Server] = {}
        self._name = context.get_this_component_id()
        self._task = context.get_this_task_id()

    def cleanup(self) -> None:
        """Close the connections to the servers."""
        for server in getattr(self, "_servers", {}).values():
            server.link.close()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """No output (Storm's declares none)."""

    def execute(self, tup: Any) -> None:
        """Return the result to its server. A tick tuple (``topology.tick.tuple.freq.secs``
        set for the whole topology) is no result: it is skipped."""
        if is_tick_tuple(tup):
            return
        if len(tup.values) < 2:
            self._refuse(tup, f"needs [result, return-info], got {len(tup.values)} value(s)")
            return
        result, raw = tup.values[0], tup.values[1]
        if raw is None:
            self.collector.ack(tup)  # no request to answer (Storm skips it)
            return
        try:
            info = ReturnInfo.from_json(raw)
        except ValueError as e:
            self._refuse(tup, str(e))
            return
        if not isinstance(result, str):
            self._refuse(tup, f"the result of request {info.request_id} must be a string (Storm's DRPC carries "
                              f"strings; json.dumps it), got {type(result).__name__}")
            return
        if info.port == 0:  # a LocalDRPC, by its service id
            drpc = local_drpc(info.host)
            if drpc is not None:
                drpc.result(info.request_id, result)
            self.collector.ack(tup)  # a server shut down has no caller left to answer
            return
        self._send(tup, info, result)

    def _send(self, tup: Any, info: ReturnInfo, result: str) -> None:
        from .._errors import RemoteError, RpcError
        try:
            server = self._server(info)
        except DRPCExecutionException as e:
            self._refuse(tup, str(e))
            return
        for attempt in range(1, _TRIES + 1):
            try:
                server.call("result", request_id=info.request_id, result=result)
                self.collector.ack(tup)
                return
            except RemoteError as e:
                self._refuse(tup, f"DRPC server {info.host}:{info.port} refused the result: {e}")
                return
            except RpcError as e:
                if attempt == _TRIES:
                    self._refuse(tup, f"cannot reach DRPC server {info.host}:{info.port}: {e}")

    def _server(self, info: ReturnInfo) -> _Server:
        key = (info.host, info.port)
        server = self._servers.get(key)
        if server is None:
            from .client import worker_cluster
            links = worker_cluster(f"DRPC return bolt [{self._name}]")
            # only the cluster's own servers: a return-info is data, and must not steer the bolt elsewhere
            if info.host not in links.drpc.servers or info.port != links.drpc.invocations_port:
                raise DRPCExecutionException(
                    f"return-info names {info.host}:{info.port}, which is not a DRPC server of this cluster "
                    f"(drpc.servers {list(links.drpc.servers)}, drpc.invocations.port {links.drpc.invocations_port})")
            server = self._servers[key] = _Server(info.host, info.port, links.link(info.host, info.port))
        return server

    def _refuse(self, tup: Any, why: str) -> None:
        error = DRPCExecutionException(f"DRPC return bolt [{self._name}]: {why}")
        self.collector.report_error(error)  # which logs it
        # why goes with the failure: the DRPC spout tells the caller (DRPCExecutionException)
        fail_because(self.collector, tup, self._name, self._task, str(error))
