"""A worker's and a supervisor's connection to the master over the control channel
(`squall._wire`: framing, handshake, client and server; the secret is `squall._secret`'s).

The channel's names are importable from here too, as they were before the channel moved out of
`squall.worker`.
"""

from __future__ import annotations

from typing import Any

from .._errors import RemoteError, RpcError
from .._secret import load_or_create_secret
from .._wire import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_FRAME,
    HANDSHAKE_TIMEOUT_KEY,
    MAX_CONNECTIONS_KEY,
    MAX_FRAME_KEY,
    PREAUTH_MAX_FRAME,
    AuthenticationError,
    Client,
    FrameCodec,
    RpcSettings,
    pack,
    rpc_settings,
    serve_connection,
    session_keys,
)

__all__ = ["DEFAULT_HANDSHAKE_TIMEOUT", "DEFAULT_MAX_CONNECTIONS", "DEFAULT_MAX_FRAME", "HANDSHAKE_TIMEOUT_KEY",
           "MAX_CONNECTIONS_KEY", "MAX_FRAME_KEY", "PREAUTH_MAX_FRAME", "AuthenticationError", "Client", "FrameCodec",
           "MasterConnection", "RemoteError", "RpcError", "RpcSettings", "load_or_create_secret", "pack",
           "rpc_settings", "serve_connection", "session_keys"]


class MasterConnection:
    """A connection to the master, made again on the call after one that failed (a failed call
    closes its `Client`; callers retry: workers and supervisors every period, a starting
    worker until ``nimbus.task.launch.secs``). ``call`` raises `RpcError` while it is unreachable."""

    def __init__(self, host: str, port: int, secret: bytes, settings: RpcSettings, timeout: float = 10.0) -> None:
        self.host, self.port, self.secret, self.settings = host, port, secret, settings
        self.timeout = timeout
        self._client: Client | None = None

    def call(self, op: str, **args: Any) -> Any:
        """``op`` on the master with ``args``; its reply."""
        if self._client is None or self._client.broken:
            self._client = Client(self.host, self.port, self.secret, timeout=self.timeout, settings=self.settings)
        return self._client.call(op, **args)

    def close(self) -> None:
        """Close the connection (the next call makes a new one)."""
        if self._client is not None:
            self._client.close()
            self._client = None
