"""The control channel between master, workers and clients (every side uses it, so it lives
outside `squall.worker`; the secret it authenticates with is `squall._secret`'s): framed msgpack over TCP, with a
mutual shared-secret handshake, then every frame authenticated (and optionally encrypted) under
a key of that session.

Frames are a 4-byte big-endian length and a body. The handshake's three frames are plain
msgpack maps, at most `PREAUTH_MAX_FRAME` bytes each (a stranger cannot make us allocate more):

1. server: ``{"hello": "squall", "v": 2, "nonce": Ns}``;
2. client: ``{"auth": HMAC(secret, "client" | T), "nonce": Nc, "encrypt": bool}``;
3. server: ``{"ok": true, "proof": HMAC(secret, "server" | T)}`` or ``{"ok": false, "error": ...}``;

where the transcript T is ``Ns | Nc | encrypt``, so a relay can neither replay an old answer
nor turn encryption off. Both sides then know the other holds the secret, and only then may a
side load a pickle (a topology) from the other. A server whose ``squall.encryption`` requires
encryption for this connection refuses a client that did not ask for it.

After the handshake each direction has its own key, derived by HKDF-SHA256 from the secret with
both nonces, and its own sequence number, counted by both ends and never sent. `FrameCodec`
seals every frame: without encryption the body is the msgpack payload followed by
``HMAC-SHA256(key, seq | payload)``; with it, ChaCha20-Poly1305 under the key with the sequence
number as nonce. A frame rewritten, replayed, reordered or dropped by a relay fails the check,
and the connection is closed before the request runs. A frame over ``nimbus.thrift.max_buffer_size``
bytes, not msgpack, or not a map also closes that connection only; the warnings a bad peer
causes are rate-limited (`squall._ratelimit`).

Requests are ``{"op": name, "args": {...}}``; replies ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": message, "type": exception class name}``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import select
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Self

import msgpack
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ._config import MIN_FRAME_BYTES, Config, default_of, setting
from ._connlimit import ConnectionTable, keep_alive
from ._encryption import ALWAYS, AUTO, encryption_setting, wants_encryption
from ._errors import RemoteError, RpcError
from ._ratelimit import rate_limited

if TYPE_CHECKING:
    import asyncio

PREAUTH_MAX_FRAME = MIN_FRAME_BYTES
"""The largest frame read before the peer is authenticated (the handshake's are ~100 bytes)."""
MAX_FRAME_KEY = Config.NIMBUS_THRIFT_MAX_BUFFER_SIZE  # Storm's key for the same limit
HANDSHAKE_TIMEOUT_KEY = Config.NIMBUS_THRIFT_HANDSHAKE_TIMEOUT_SECS
MAX_CONNECTIONS_KEY = Config.NIMBUS_THRIFT_MAX_CONNECTIONS
KEEPALIVE_KEY = Config.SQUALL_TCP_KEEPALIVE_SECS
DEFAULT_MAX_FRAME = default_of(MAX_FRAME_KEY)
DEFAULT_HANDSHAKE_TIMEOUT = float(default_of(HANDSHAKE_TIMEOUT_KEY))
DEFAULT_MAX_CONNECTIONS = default_of(MAX_CONNECTIONS_KEY)
_LEN = struct.Struct(">I")
_SEQ = struct.Struct(">Q")
_TAG = 32
_VERSION = 2


class AuthenticationError(RpcError):
    """The shared secret did not match."""


class FrameTooLarge(ValueError):
    """A frame to send is over the bound its receiver takes (`FrameCodec.seal`)."""


class RequestTooLarge(RpcError):
    """A request over the bound its server takes (`Client.call`): refused here, nothing sent, and
    the connection is still good."""


class RpcSettings(NamedTuple):
    """How one end runs its connections: ``squall.encryption`` (auto, true, false), the
    largest frame it accepts from an authenticated peer, and (a server) how long a peer has to
    authenticate (``nimbus.thrift.handshake.timeout.secs``) and how many connections it keeps
    open at most (``nimbus.thrift.max.connections``, lowered below the file limit:
    `squall._connlimit.connection_cap`)."""

    encryption: str = AUTO
    max_frame: int = DEFAULT_MAX_FRAME
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_key: str = MAX_CONNECTIONS_KEY  # what a refusal names (the DRPC server has its own)
    max_frame_key: str = MAX_FRAME_KEY  # what a request over ``max_frame`` names
    keepalive: float = 60.0  # a server closes a connection whose peer stopped answering this long (``squall.tcp.keepalive.secs``)


_DEFAULT_SETTINGS = RpcSettings()  # immutable: one shared by every default


def rpc_settings(conf: Mapping[str, Any]) -> RpcSettings:
    """The `RpcSettings` of a cluster configuration.

    Raises:
        SquallError: ``squall.encryption`` or ``nimbus.thrift.max_buffer_size`` is invalid (named).
    """
    return RpcSettings(encryption_setting(conf), setting(conf, MAX_FRAME_KEY), setting(conf, HANDSHAKE_TIMEOUT_KEY),
                       setting(conf, MAX_CONNECTIONS_KEY), keepalive=float(setting(conf, KEEPALIVE_KEY)))


def _transcript(server_nonce: bytes, client_nonce: bytes, encrypt: bool) -> bytes:
    return b"squall-rpc-v2|" + server_nonce + client_nonce + (b"\x01" if encrypt else b"\x00")


def _mac(secret: bytes, role: bytes, transcript: bytes) -> bytes:
    return hmac.new(secret, role + transcript, hashlib.sha256).digest()


def session_keys(secret: bytes, transcript: bytes) -> tuple[bytes, bytes]:
    """The (client-to-server, server-to-client) keys of the session ``transcript`` names:
    HKDF-SHA256 (RFC 5869) of the secret, salted with the transcript."""
    def hkdf(info: bytes) -> bytes:
        return HKDF(hashes.SHA256(), 32, transcript, info).derive(secret)
    return hkdf(b"squall rpc client->server"), hkdf(b"squall rpc server->client")


class FrameCodec:
    """Seals the frames one end sends and opens those it receives, in one session.

    MAC-only mode appends ``HMAC-SHA256(key, seq | payload)``; AEAD mode (``encrypt``) seals the
    payload with ChaCha20-Poly1305, the sequence number as nonce (each direction has its own
    key, so a nonce never repeats under a key). Sequence numbers count from 0 on both ends.
    """

    def __init__(self, send_key: bytes, recv_key: bytes, encrypt: bool) -> None:
        self.encrypt = encrypt
        self._send_key, self._recv_key = send_key, recv_key
        self._send_aead = ChaCha20Poly1305(send_key) if encrypt else None
        self._recv_aead = ChaCha20Poly1305(recv_key) if encrypt else None
        self._send_seq = 0
        self._recv_seq = 0

    @classmethod
    def for_client(cls, secret: bytes, transcript: bytes, encrypt: bool) -> FrameCodec:
        """The client end of a session."""
        c2s, s2c = session_keys(secret, transcript)
        return cls(c2s, s2c, encrypt)

    @classmethod
    def for_server(cls, secret: bytes, transcript: bytes, encrypt: bool) -> FrameCodec:
        """The server end of a session."""
        c2s, s2c = session_keys(secret, transcript)
        return cls(s2c, c2s, encrypt)

    def seal(self, obj: Any, limit: int | None = None) -> bytes:
        """``obj`` as the next frame (length prefix included).

        Raises:
            FrameTooLarge: its body would be over ``limit`` bytes (the frame is not made: the
                sequence stays where it was).
        """
        payload = msgpack.packb(obj, use_bin_type=True)
        size = len(payload) + (16 if self._send_aead is not None else 32)  # the AEAD's tag, or the HMAC
        if limit is not None and size > limit:
            raise FrameTooLarge(f"{size} bytes")
        seq = self._send_seq
        self._send_seq += 1
        if self._send_aead is not None:
            body = self._send_aead.encrypt(_nonce(seq), payload, None)
        else:
            body = payload + hmac.digest(self._send_key, _SEQ.pack(seq) + payload, "sha256")
        return _LEN.pack(len(body)) + body

    def open(self, body: bytes) -> dict:
        """The next frame's map.

        Raises:
            RpcError: it was not sealed by the other end as its next frame (rewritten, replayed,
                reordered, dropped or forged), or is not a msgpack map.
        """
        seq = self._recv_seq
        self._recv_seq += 1
        if self._recv_aead is not None:
            try:
                payload = self._recv_aead.decrypt(_nonce(seq), body, None)
            except InvalidTag:
                raise _tampered(seq) from None
        else:
            payload, tag = body[:-_TAG], body[-_TAG:]
            want = hmac.digest(self._recv_key, _SEQ.pack(seq) + payload, "sha256")
            if len(body) < _TAG or not hmac.compare_digest(tag, want):
                raise _tampered(seq)
        return _unpack(payload)


def _nonce(seq: int) -> bytes:
    return b"\0\0\0\0" + _SEQ.pack(seq)


def _tampered(seq: int) -> RpcError:
    return RpcError(f"frame {seq} of the session failed its integrity check "
                    f"(rewritten, replayed, reordered or forged)")


def pack(obj: Any) -> bytes:
    """One handshake frame (plain: before the session has keys)."""
    data = msgpack.packb(obj, use_bin_type=True)
    return _LEN.pack(len(data)) + data


def _frame_length(head: bytes, limit: int) -> int:
    (n,) = _LEN.unpack(head)
    if n > limit:
        raise RpcError(f"frame of {n} bytes is over the limit of {limit}")
    return n


def _unpack(data: bytes) -> dict:
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except msgpack.StackError as e:
        # its message is empty: the log line about the peer said "malformed frame: " and no more
        raise RpcError(f"malformed frame of {len(data)} bytes: nested deeper than msgpack unpacks") from e
    except Exception as e:
        raise RpcError(f"malformed frame of {len(data)} bytes: {str(e) or type(e).__name__}") from e
    if not isinstance(obj, dict):
        raise RpcError(f"malformed frame: expected a map, got {type(obj).__name__}")
    return obj


# --- client side (blocking sockets: the CLI, workers, supervisors) ---------------------------------
_CLOSED = "closed"
class Client:
    """A blocking, authenticated connection to an RPC server (one thread at a time)."""

    def __init__(self, host: str, port: int, secret: bytes, timeout: float | None = 10.0,
                 settings: RpcSettings = _DEFAULT_SETTINGS) -> None:
        """``timeout``: seconds for the connect and for each reply (None: no limit, as a
        submission waiting out ``topology.max.replication.wait.time.sec: -1``)."""
        # ``host:port``, named by every error of this connection: under Nimbus HA a supervisor
        # or client tries several masters, and "connection lost: timed out" did not say which
        # one a partition cut off
        self._where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise RpcError(f"cannot reach {self._where}: {e.strerror or e}") from e
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._max_frame = settings.max_frame
        self._max_frame_key = settings.max_frame_key
        self._broken: str | None = None  # why the connection may no longer be used
        try:
            self._codec = self._handshake(self._where, secret, settings.encryption)
        except BaseException:
            self._sock.close()
            raise

    def _handshake(self, where: str, secret: bytes, encryption: str) -> FrameCodec:
        hello = _unpack(self._recv_exactly(_frame_length(self._recv_exactly(4), PREAUTH_MAX_FRAME)))
        server_nonce = hello.get("nonce")
        if not isinstance(server_nonce, bytes):
            raise RpcError(f"{where} is not a squall master (no nonce in its greeting)")
        if hello.get("v", 1) != _VERSION:
            raise RpcError(f"{where} speaks version {hello.get('v', 1)} of squall's control protocol, we speak "
                           f"{_VERSION}: run the same squall on every machine of the cluster")
        nonce = secrets.token_bytes(16)
        encrypt = wants_encryption(encryption, self._sock.getpeername()[0])
        transcript = _transcript(server_nonce, nonce, encrypt)
        self._sock_send(pack({"auth": _mac(secret, b"client", transcript), "nonce": nonce, "encrypt": encrypt}))
        answer = _unpack(self._recv_exactly(_frame_length(self._recv_exactly(4), PREAUTH_MAX_FRAME)))
        if not answer.get("ok"):
            error = f"{where} refused us: {answer.get('error', 'no reason given')}"
            raise RpcError(error) if answer.get("reason") == "encryption" else AuthenticationError(error)
        proof = answer.get("proof")  # a stranger's: never converted (bytes(an int) allocates that many)
        if not isinstance(proof, bytes) or not hmac.compare_digest(proof, _mac(secret, b"server", transcript)):
            raise AuthenticationError(f"{where} does not hold the cluster's secret")
        return FrameCodec.for_client(secret, transcript, encrypt)

    @property
    def encrypted(self) -> bool:
        """Whether this session is encrypted (else authenticated only)."""
        return self._codec.encrypt

    def _sock_send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise RpcError(f"connection to {self._where} lost: {e}") from e

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self._sock.recv(n - len(buf))
            except OSError as e:
                raise RpcError(f"connection to {self._where} lost: {e}") from e
            if not chunk:
                raise RpcError(f"connection closed by {self._where}")
            buf += chunk
        return bytes(buf)

    def call(self, op: str, **args: Any) -> Any:
        """Run ``op`` on the server and return its result.

        Raises:
            RemoteError: the server ran it and it failed (``type`` names the exception).
            RpcError: the connection failed, timed out, or a reply failed its integrity check.
                The connection is then closed (`broken`) and every later call raises
                RpcError: a reply that arrives after its call gave up must never be taken
                for the next call's. Whether the server ran the request is unknown.
        """
        if self._broken is not None:
            raise RpcError(f"connection closed after an earlier error ({self._broken})" if self._broken != _CLOSED
                           else "connection closed")
        try:  # a value msgpack refuses raises here, harmless
            frame = self._codec.seal({"op": op, "args": args}, limit=self._max_frame)
        except FrameTooLarge as e:  # the server would close the connection unread: say why here
            raise RequestTooLarge(f"the request ({op}) is {e}, over the {self._max_frame} of {self._max_frame_key}; "
                                  f"nothing was sent") from None
        try:
            self._sock_send(frame)
            reply = self._codec.open(self._recv_exactly(_frame_length(self._recv_exactly(4), self._max_frame)))
        except BaseException as e:  # a timeout or an interrupt too: the sequence numbers are out of step
            self._broken = str(e) or type(e).__name__
            self._sock.close()
            raise
        if reply.get("ok"):
            return reply.get("result")
        raise RemoteError(str(reply.get("error")), str(reply.get("type", "Exception")))

    @property
    def broken(self) -> bool:
        """Whether an earlier call failed, closing the connection (make a new `Client`)."""
        return self._broken is not None

    def closed_by_peer(self) -> bool:
        """Whether the server closed this idle connection (restarted, or made room for another):
        a look at the socket that sends nothing, so a call on a connection kept idle is not
        sent into one that is gone."""
        if self._broken is not None:
            return True
        # a socket with a timeout waits for data before any recv, MSG_DONTWAIT or not; poll(), not
        # select(), which refuses a descriptor past 1023 (a process holding many files and sockets)
        watch = select.poll()
        try:
            watch.register(self._sock, select.POLLIN)
            readable = watch.poll(0)
        except (OSError, ValueError):
            return True
        return bool(readable)  # the end of the stream, or bytes no request asked for: not to be used

    def close(self) -> None:
        """Close the connection."""
        self._broken = self._broken or _CLOSED
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReconnectingClient:
    """A `Client` made again on the call after one that failed (a failed call closes its
    `Client`; callers retry: workers and supervisors every period, a starting worker until
    ``nimbus.task.launch.secs``, a DRPC spout each request). ``call`` raises `RpcError` while the
    server is unreachable, `RemoteError` when it refused the call. Workers and supervisors reach
    the master through one (`squall.worker.calls.MasterCalls`), DRPC spouts their servers."""

    def __init__(self, host: str, port: int, secret: bytes, settings: RpcSettings, timeout: float = 10.0) -> None:
        self.host, self.port, self.secret, self.settings = host, port, secret, settings
        self.timeout = timeout
        self._client: Client | None = None

    def call(self, op: str, **args: Any) -> Any:
        """``op`` on the server with ``args``; its reply."""
        if self._client is None or self._client.broken:
            self._client = Client(self.host, self.port, self.secret, timeout=self.timeout, settings=self.settings)
        return self._client.call(op, **args)

    def close(self) -> None:
        """Close the connection (the next call makes a new one)."""
        if self._client is not None:
            self._client.close()
            self._client = None


# --- server side (asyncio: the master) --------------------------------------------------------------
Handler = Callable[[str, dict, dict], Awaitable[Any]]


async def _read_body(reader: asyncio.StreamReader, limit: int) -> bytes:
    # the length is checked before anything is allocated for the body
    return await reader.readexactly(_frame_length(await reader.readexactly(4), limit))


async def _handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, secret: bytes,
                     encryption: str, timeout: float, peer: Any, warn: Any) -> FrameCodec | None:
    """Authenticate the peer within ``timeout`` seconds; its `FrameCodec`, or None (refused, and
    told why). `asyncio.TimeoutError` if its answer does not come in time."""
    import asyncio  # lazy: only a server runs asyncio; a client (the CLI, a worker) never loads it
    nonce = secrets.token_bytes(16)
    writer.write(pack({"hello": "squall", "v": _VERSION, "nonce": nonce}))
    await writer.drain()
    # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the read's result when the
    # read ends in the loop step its task is cancelled in, and the cancel is lost (CPython
    # gh-86296): a master stopping (SIGTERM) then kept serving that connection, and never exited
    async with asyncio.timeout(timeout):
        body = await _read_body(reader, PREAUTH_MAX_FRAME)
    auth = _unpack(body)
    given, client_nonce, encrypt = auth.get("auth"), auth.get("nonce"), auth.get("encrypt", False)
    if not (isinstance(given, bytes) and isinstance(client_nonce, bytes) and isinstance(encrypt, bool)):
        given, client_nonce, encrypt = None, b"", False  # refused below; nothing of it is used
    transcript = _transcript(nonce, client_nonce, encrypt)
    if given is None or not hmac.compare_digest(given, _mac(secret, b"client", transcript)):
        warn.warning("refused connection from %s: wrong or missing secret", peer)
        writer.write(pack({"ok": False, "reason": "auth", "error": "authentication failed: wrong or missing secret"}))
        await writer.drain()
        return None
    host = peer[0] if isinstance(peer, tuple) else str(peer)
    if not encrypt and wants_encryption(encryption, host):
        why = "always" if encryption == ALWAYS else "for a connection that is not loopback"
        warn.warning("refused a plaintext session from %s: squall.encryption requires encryption %s", peer, why)
        writer.write(pack({"ok": False, "reason": "encryption",
                           "error": f"this server requires encryption {why} (squall.encryption: {encryption}): "
                                    f"set squall.encryption to {AUTO} or {ALWAYS} on the client"}))
        await writer.drain()
        return None
    writer.write(pack({"ok": True, "proof": _mac(secret, b"server", transcript)}))
    await writer.drain()
    return FrameCodec.for_server(secret, transcript, encrypt)


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, secret: bytes,
                           handle: Handler, log: Any, settings: RpcSettings = _DEFAULT_SETTINGS,
                           table: ConnectionTable[asyncio.StreamWriter] | None = None,
                           idle_evictable: bool = False) -> None:
    """Authenticate one connection and answer its requests with ``handle(op, args, session)``.

    ``session`` is a dict kept for the connection (a worker stores its identity there).
    Nothing the peer sends can raise out of here: bad frames close the connection, with a
    warning on ``log`` rate-limited across every connection that logs there. A peer that has not
    authenticated within ``settings.handshake_timeout`` is closed. With ``table`` (the server's
    open connections), a connection at the cap closes the one that has waited longest for its
    handshake, or is refused when every open one is authenticated; so the socket gets TCP
    keepalive (``settings.keepalive``), which closes a connection whose peer's machine is gone
    rather than keep it, authenticated, for ever. With ``idle_evictable`` an
    authenticated connection waits again between its requests (a caller keeps its connection
    for its next call; the server may close it to make room, and the caller connects again).
    """
    import asyncio  # lazy: only a server runs asyncio; a client (the CLI, a worker) never loads it

    peer = writer.get_extra_info("peername")
    session: dict[str, Any] = {"peer": peer}
    sock = writer.get_extra_info("socket")
    if sock is not None:  # a peer whose machine died or gave it up is closed, not kept busy for ever
        keep_alive(sock, settings.keepalive)
    warn = rate_limited(log)
    if table is not None:
        admission = table.opened(writer)
        if admission.refuse:
            warn.warning("refused connection from %s: %d connections open, all authenticated "
                         "(%s, lowered below the open files limit)", peer, len(table), settings.max_connections_key)
            writer.close()
            return
        if admission.evict is not None:
            warn.warning("closed the connection from %s, not yet authenticated, to make room for %s "
                         "(%d connections open: %s, lowered below the open files limit)",
                         admission.evict.get_extra_info("peername"), peer, len(table), settings.max_connections_key)
            admission.evict.close()
    codec: FrameCodec | None = None
    try:
        codec = await _handshake(reader, writer, secret, settings.encryption, settings.handshake_timeout,
                                 peer, warn)
        if codec is None:
            return
        if table is not None:
            table.busy(writer)
        session["encrypted"] = codec.encrypt
        while True:
            if idle_evictable and table is not None:
                table.waiting(writer)
            req = codec.open(await _read_body(reader, settings.max_frame))
            if idle_evictable and table is not None:
                table.busy(writer)
            op, args = req.get("op"), req.get("args") or {}
            if not isinstance(op, str) or not isinstance(args, dict):
                raise RpcError("malformed request")
            try:
                result = await handle(op, args, session)
                reply = {"ok": True, "result": result}
            except Exception as e:  # noqa: BLE001 (reported to the caller, never fatal to the server)
                reply = {"ok": False, "error": str(e), "type": type(e).__name__}
            writer.write(codec.seal(reply))
            await writer.drain()
    except TimeoutError as e:
        # the handshake's wait (no errno), not a peer's machine gone quiet, whose connection
        # keepalive ended (ETIMEDOUT, a TimeoutError too)
        if codec is None and e.errno is None:
            warn.warning("closed connection from %s: it did not authenticate within %g s (%s)", peer,
                         settings.handshake_timeout, HANDSHAKE_TIMEOUT_KEY)
    except asyncio.IncompleteReadError as e:
        if e.partial:  # a frame cut short, not a peer that hung up between two frames
            warn.warning("closed connection from %s: it closed in the middle of a frame (%d of %s bytes%s)", peer,
                         len(e.partial), e.expected, "" if codec is not None else ", before authenticating")
    except ConnectionError:
        pass
    except RpcError as e:
        warn.warning("closed connection from %s: %s", peer, e)
    except Exception as e:  # noqa: BLE001 (whatever a peer's bytes raise: a rate-limited line, never a traceback a stranger can repeat)
        warn.warning("closed connection from %s: %s: %s", peer, type(e).__name__, e)
    finally:
        if table is not None:
            table.closed(writer)
        closer = session.get("on_close")
        if closer is not None:
            try:
                closer()
            except Exception:
                warn.logger.exception("connection close handler failed")
        writer.close()
