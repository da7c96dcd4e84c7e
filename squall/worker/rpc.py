"""The control channel between master, workers and clients: framed msgpack over TCP, with a
mutual shared-secret handshake.

Frames are a 4-byte big-endian length and a msgpack map. On connect the server sends a nonce;
the client answers with ``HMAC-SHA256(secret, "client" + nonce)`` and a nonce of its own; the
server checks it (refusing and logging a wrong or missing secret) and proves itself with
``HMAC-SHA256(secret, "server" + client nonce)``. Both sides thus know the other holds the
secret before anything else is read, and only then may a side load a pickle (a topology) from
the other. A frame that is too big, not msgpack, or not a map closes that connection only.

Requests are ``{"op": name, "args": {...}}``; replies ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": message, "type": exception class name}``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import secrets
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgpack

from .._errors import SquallError

MAX_FRAME = 512 * 1024 * 1024
_LEN = struct.Struct(">I")


class RpcError(SquallError):
    """The peer could not be reached, refused us, or broke the protocol."""


class AuthenticationError(RpcError):
    """The shared secret did not match."""


class RemoteError(SquallError):
    """The peer ran the request and it failed; ``type`` names the exception it raised."""

    def __init__(self, message: str, type_name: str) -> None:
        super().__init__(message)
        self.type = type_name


def _mac(secret: bytes, role: bytes, nonce: bytes) -> bytes:
    return hmac.new(secret, role + nonce, hashlib.sha256).digest()


def load_or_create_secret(conf: dict[str, Any]) -> bytes:
    """The cluster's shared secret: ``squall.secret`` from the configuration, else the file
    ``<storm.local.dir>/secret``, created with owner-only permissions on first use."""
    given = conf.get("squall.secret")
    if given:
        return given.encode() if isinstance(given, str) else bytes(given)
    path = Path(conf.get("storm.local.dir") or "storm-local") / "secret"
    if path.exists():
        return path.read_bytes().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(32).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, value)
    finally:
        os.close(fd)
    return value


def pack(obj: Any) -> bytes:
    """One frame."""
    data = msgpack.packb(obj, use_bin_type=True)
    return _LEN.pack(len(data)) + data


def _unpack(data: bytes) -> dict:
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:
        raise RpcError(f"malformed frame: {e}") from e
    if not isinstance(obj, dict):
        raise RpcError(f"malformed frame: expected a map, got {type(obj).__name__}")
    return obj


# --- client side (blocking sockets: the CLI, workers, supervisors) ---------------------------------
class Client:
    """A blocking, authenticated connection to an RPC server."""

    def __init__(self, host: str, port: int, secret: bytes, timeout: float = 10.0) -> None:
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise RpcError(f"cannot reach {host}:{port}: {e.strerror or e}") from e
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            hello = self._read()
            nonce = secrets.token_bytes(16)
            self._write({"auth": _mac(secret, b"client", bytes(hello.get("nonce", b""))), "nonce": nonce})
            answer = self._read()
            if not answer.get("ok"):
                raise AuthenticationError(f"{host}:{port} refused us: {answer.get('error', 'no reason given')}")
            if not hmac.compare_digest(bytes(answer.get("proof", b"")), _mac(secret, b"server", nonce)):
                raise AuthenticationError(f"{host}:{port} does not hold the cluster's secret")
        except BaseException:
            self._sock.close()
            raise

    def _write(self, obj: Any) -> None:
        try:
            self._sock.sendall(pack(obj))
        except OSError as e:
            raise RpcError(f"connection lost: {e}") from e

    def _read(self) -> dict:
        head = self._recv_exactly(4)
        (n,) = _LEN.unpack(head)
        if n > MAX_FRAME:
            raise RpcError(f"frame of {n} bytes is too big")
        return _unpack(self._recv_exactly(n))

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self._sock.recv(n - len(buf))
            except OSError as e:
                raise RpcError(f"connection lost: {e}") from e
            if not chunk:
                raise RpcError("connection closed by the peer")
            buf += chunk
        return bytes(buf)

    def call(self, op: str, **args: Any) -> Any:
        """Run ``op`` on the server and return its result.

        Raises:
            RemoteError: the server ran it and it failed (``type`` names the exception).
            RpcError: the connection failed.
        """
        self._write({"op": op, "args": args})
        reply = self._read()
        if reply.get("ok"):
            return reply.get("result")
        raise RemoteError(str(reply.get("error")), str(reply.get("type", "Exception")))

    def close(self) -> None:
        """Close the connection."""
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- server side (asyncio: the master) --------------------------------------------------------------
Handler = Callable[[str, dict, dict], Awaitable[Any]]


async def _read_frame(reader: asyncio.StreamReader) -> dict:
    head = await reader.readexactly(4)
    (n,) = _LEN.unpack(head)
    if n > MAX_FRAME:
        raise RpcError(f"frame of {n} bytes is too big")
    return _unpack(await reader.readexactly(n))


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, secret: bytes,
                           handle: Handler, log: Any) -> None:
    """Authenticate one connection and answer its requests with ``handle(op, args, session)``.

    ``session`` is a dict kept for the connection (a worker stores its identity there).
    Nothing the peer sends can raise out of here: bad frames close the connection.
    """
    peer = writer.get_extra_info("peername")
    session: dict[str, Any] = {"peer": peer}
    try:
        nonce = secrets.token_bytes(16)
        writer.write(pack({"hello": "squall", "nonce": nonce}))
        await writer.drain()
        auth = await asyncio.wait_for(_read_frame(reader), 10)
        given = auth.get("auth")
        if not isinstance(given, bytes) or not hmac.compare_digest(given, _mac(secret, b"client", nonce)):
            log.warning("refused connection from %s: wrong or missing secret", peer)
            writer.write(pack({"ok": False, "error": "authentication failed: wrong or missing secret"}))
            await writer.drain()
            return
        client_nonce = auth.get("nonce")
        if not isinstance(client_nonce, bytes):
            return
        writer.write(pack({"ok": True, "proof": _mac(secret, b"server", client_nonce)}))
        await writer.drain()
        while True:
            req = await _read_frame(reader)
            op, args = req.get("op"), req.get("args") or {}
            if not isinstance(op, str) or not isinstance(args, dict):
                raise RpcError("malformed request")
            try:
                result = await handle(op, args, session)
                reply = {"ok": True, "result": result}
            except Exception as e:  # reported to the caller, never fatal to the server
                reply = {"ok": False, "error": str(e), "type": type(e).__name__}
            writer.write(pack(reply))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError):
        pass
    except RpcError as e:
        log.warning("closed connection from %s: %s", peer, e)
    finally:
        closer = session.get("on_close")
        if closer is not None:
            try:
                closer()
            except Exception:
                log.exception("connection close handler failed")
        writer.close()
