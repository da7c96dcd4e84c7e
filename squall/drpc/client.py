"""Reaching ``squall drpc``: `DRPCClient` for callers (Storm's ``DRPCClient``, on ``drpc.port``)
and the invocations links of the DRPC spouts and return bolts (Storm's
``DRPCInvocationsClient``, on ``drpc.invocations.port``).

Every connection is authenticated with the cluster's secret, by `squall._wire`'s handshake.
A caller has the secret in its configuration (``squall.secret`` or ``<storm.local.dir>/secret``);
a topology's components never see it in theirs, so the worker process records how it reaches
the cluster (`remember_cluster`) and the spouts and bolts ask for that (`worker_cluster`).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from .._config import Config, setting
from .._errors import RpcError
from .core import DRPCExceptionType, DRPCExecutionException

REPLY_SLACK_SECS = 30.0
"""How much longer than ``drpc.request.timeout.secs`` a client waits for the server's answer:
the server answers a request that timed out itself, so the client's socket timeout is only for
a server that died or a network that broke."""


@dataclass(frozen=True)
class DrpcSettings:
    """The DRPC keys of a cluster configuration, checked (an error names the key)."""

    servers: tuple[str, ...]
    port: int
    invocations_port: int
    request_timeout: float
    max_buffer: int
    max_connections: int

    @classmethod
    def of(cls, conf: Mapping[str, Any]) -> DrpcSettings:
        """Read and check them.

        Raises:
            InvalidTopologyException: a key has the wrong type (named).
        """
        return cls(tuple(setting(conf, Config.DRPC_SERVERS) or ()), int(setting(conf, Config.DRPC_PORT)),
                   int(setting(conf, Config.DRPC_INVOCATIONS_PORT)),
                   float(setting(conf, Config.DRPC_REQUEST_TIMEOUT_SECS)),
                   int(setting(conf, Config.DRPC_MAX_BUFFER_SIZE)),
                   int(setting(conf, Config.DRPC_MAX_CONNECTIONS)))

    def need_servers(self, who: str) -> tuple[str, ...]:
        """``servers``, which must not be empty.

        Raises:
            DRPCExecutionException: ``drpc.servers`` is not set (INTERNAL_ERROR; says what to set).
        """
        if not self.servers:
            raise DRPCExecutionException(
                f"{who}: drpc.servers is not set, so there is no DRPC server to reach: list the hosts that run "
                f"`squall drpc` (or `squall nimbus`) in the cluster's squall.yaml, e.g. drpc.servers: [\"127.0.0.1\"]",
                DRPCExceptionType.INTERNAL_ERROR)
        return self.servers


@dataclass(frozen=True)
class ClusterLinks:
    """How this process reaches the cluster's DRPC servers: the secret, the RPC settings and the
    DRPC keys of its configuration."""

    secret: bytes = field(repr=False)
    rpc: Any  # squall._wire.RpcSettings, with drpc.max_buffer_size as its frame limit
    drpc: DrpcSettings

    @classmethod
    def of(cls, conf: Mapping[str, Any], secret: bytes | None = None) -> ClusterLinks:
        """From a cluster configuration (the secret read as every daemon reads it, if not given).

        Raises:
            SquallError: a key is invalid, or the secret cannot be read (named).
        """
        from .._secret import load_or_create_secret
        from .._wire import rpc_settings
        drpc = DrpcSettings.of(conf)
        rpc = rpc_settings(conf)._replace(max_frame=drpc.max_buffer, max_connections=drpc.max_connections,
                                          max_connections_key=Config.DRPC_MAX_CONNECTIONS,
                                          max_frame_key=Config.DRPC_MAX_BUFFER_SIZE)
        return cls(load_or_create_secret(conf) if secret is None else secret, rpc, drpc)

    def link(self, host: str, port: int, timeout: float = 10.0) -> Any:
        """A connection to ``host:port`` that reconnects on the call after one that failed
        (`squall._wire.ReconnectingClient`)."""
        from .._wire import ReconnectingClient
        return ReconnectingClient(host, port, self.secret, self.rpc, timeout=timeout)


_worker_lock = threading.Lock()
_worker_conf: list[Any] = [None]  # (conf, secret) of this worker process, or None


def remember_cluster(conf: Mapping[str, Any], secret: bytes) -> None:
    """Record, in a worker process, the cluster configuration and secret its DRPC spouts and
    return bolts reach the DRPC servers with (read when one asks: `worker_cluster`)."""
    with _worker_lock:
        _worker_conf[0] = (dict(conf), secret)


def worker_cluster(who: str) -> ClusterLinks:
    """This worker process's `ClusterLinks`.

    Raises:
        DRPCExecutionException: this process is no worker of a cluster (on a `LocalCluster`, give
            the DRPC spout a `LocalDRPC`), or ``drpc.servers`` is not set.
    """
    with _worker_lock:
        remembered = _worker_conf[0]
    if remembered is None:
        raise DRPCExecutionException(
            f"{who}: no LocalDRPC was given and this process is no worker of a process-host or Spark-host "
            f"cluster: on a LocalCluster, pass a LocalDRPC to the DRPC spout (or to new_drpc_stream)",
            DRPCExceptionType.INTERNAL_ERROR)
    links = ClusterLinks.of(remembered[0], remembered[1])
    links.drpc.need_servers(who)
    return links


@dataclass(frozen=True)
class _Connection:
    """A connection of `DRPCClient` to one DRPC server, and that server (``host:port``, for errors)."""

    rpc: Any
    server: str

    def call(self, op: str, **args: Any) -> Any:
        return self.rpc.call(op, **args)

    def closed_by_peer(self) -> bool:
        return bool(self.rpc.closed_by_peer())

    def close(self) -> None:
        self.rpc.close()


class DRPCClient:
    """Calls ``squall drpc`` (Storm's ``DRPCClient``): ``DRPCClient(conf).execute(function, args)``.

    ``conf`` is overlaid on the defaults and the cluster's ``squall.yaml`` (as Storm's
    ``getConfiguredClient`` does); it names the servers (``drpc.servers``, tried in random order),
    their port (``drpc.port``, 3772) and the cluster's secret (``squall.secret`` or
    ``<storm.local.dir>/secret``). Thread-safe: concurrent calls use connections of their own.
    """

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        from .._config import cluster_conf
        self._links = ClusterLinks.of(cluster_conf(dict(conf or {})))
        self._servers = list(self._links.drpc.need_servers("DRPCClient"))
        random.shuffle(self._servers)
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []  # connected clients no call is using
        self._closed = False

    def execute(self, function: str, args: str) -> str:
        """Run ``function`` with ``args`` on the cluster's DRPC topology that serves it; its result
        (for a Trident DRPC stream, JSON of the result tuples' values, e.g. ``"[[4]]"``).

        Raises:
            DRPCExecutionException: the request failed in the topology, timed out
                (``drpc.request.timeout.secs``) or the server shut down (``type`` says which).
            TypeError: ``function`` or ``args`` is not a string.
            AuthenticationError: the server does not hold our secret, or we not its.
            RpcError: no server in ``drpc.servers`` answered (the request was not sent: safe
                to retry), the request is over ``drpc.max_buffer_size`` (not sent: `RequestTooLarge`),
                or the connection broke while waiting (the request may have run: retry only if the
                function is safe to run twice); the message says which.
        """
        if not isinstance(function, str) or not function:
            raise TypeError(f"DRPC function must be a non-empty string, got {function!r}")
        if not isinstance(args, str):
            raise TypeError(f"DRPC args of {function!r} must be a string, got {type(args).__name__}")
        from .._wire import RequestTooLarge
        client = self._take(function)
        try:
            answer = client.call("execute", function=function, args=args)
        except RequestTooLarge as e:
            self._give_back(client)  # nothing was sent: the connection is as good as before
            raise RequestTooLarge(f"DRPC call of {function!r}: {e} (its args are {len(args)} characters): "
                                  f"not run; send smaller args, or raise drpc.max_buffer_size on the DRPC "
                                  f"servers and their callers") from None
        except RpcError as e:
            client.close()
            # sent, and no answer: the topology may have run it (Storm's TTransportException
            # mid-call), so whether to call again is the caller's to decide, knowing that
            raise RpcError(f"DRPC call of {function!r}: the DRPC server {client.server} stopped answering "
                           f"after the request was sent ({e}); it may have run, so retry only if running "
                           f"{function!r} twice is harmless") from None
        except BaseException:
            client.close()  # broken, or an error we do not know the connection survived
            raise
        self._give_back(client)
        return _outcome(answer)

    def _take(self, function: str) -> _Connection:
        with self._lock:
            if self._closed:
                raise RpcError("the DRPCClient was closed")
            while self._idle:
                client = self._idle.pop()
                if not client.closed_by_peer():  # a server restarted, or one that made room
                    return client
                client.close()
        return self._connect(function)

    def _give_back(self, client: _Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(client)
                return
        client.close()

    def _connect(self, function: str) -> _Connection:
        from .._wire import AuthenticationError, Client
        timeout = self._links.drpc.request_timeout + REPLY_SLACK_SECS
        port, errors = self._links.drpc.port, []
        for host in self._servers:
            try:
                return _Connection(Client(host, port, self._links.secret, timeout=timeout, settings=self._links.rpc),
                                   f"{host}:{port}")
            except AuthenticationError as e:
                raise AuthenticationError(f"DRPC server {host}:{port}: {e} (squall.secret or <storm.local.dir>/secret "
                                          f"must be the cluster's)") from None
            except RpcError as e:
                errors.append(str(e))
        # nothing was sent: Storm's TTransportException on connect; the usual cause is the
        # master that serves DRPC (squall nimbus with drpc.servers naming its host) down or
        # restarting, and the call can simply be made again once one answers
        raise RpcError(f"DRPC call of {function!r}: none of the DRPC servers of drpc.servers answered on drpc.port "
                       f"{port} (tried {', '.join(errors)}); the request was not sent, so retrying it is safe: "
                       f"start `squall drpc` (or the `squall nimbus` that runs it) on one of them, or check "
                       f"drpc.servers and drpc.port")

    def close(self) -> None:
        """Close the idle connections (calls still running close theirs when they end)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for client in idle:
            client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def outcome_reply(result: str | None, error: DRPCExecutionException | None) -> dict[str, Any]:
    """How the server answers ``execute`` (a map, so that the error's type crosses too)."""
    if error is not None:
        return {"failed": error.type.value, "message": str(error)}
    return {"result": result}


def _outcome(answer: Any) -> str:
    if isinstance(answer, dict) and isinstance(answer.get("result"), str):
        return answer["result"]
    if isinstance(answer, dict) and "failed" in answer:
        try:
            kind = DRPCExceptionType(answer["failed"])
        except ValueError:
            kind = DRPCExceptionType.INTERNAL_ERROR
        raise DRPCExecutionException(str(answer.get("message")), kind)
    raise DRPCExecutionException(f"Internal Error: the DRPC server's answer is malformed: {answer!r:.200}",
                                 DRPCExceptionType.INTERNAL_ERROR)
