"""The envelope of a message between workers: who sent it, for whom, and in what order.

A captured message must not work twice, nor anywhere else. So each message carries, under its
MAC, a small header: the topology (storm id), the sending worker's slot and launch id, a sequence
number that the sender increments for every message it sends, and the address of the worker it
is for. A receiver drops a message

* of another topology (``other_topology``): an old topology's backpressure message, say;
* addressed to another worker (``misdirected``): copied from one worker's port to another's;
* from a launch of its slot that is older than one already heard from, or than the master's
  assignment says (``stale_launch``): a dead worker's traffic, replayed after its restart;
* whose sequence number is not above the last one from the same launch (``replayed``).
  ZeroMQ's PUSH/PULL keeps one sender's messages to one receiver in order, so within a launch
  the numbers only grow (with gaps: they count the sender's messages to every peer).

A worker that restarts starts a new launch with numbers from 0, which the receiver accepts
because the launch is newer. The master gives a slot a new launch id whenever its worker may have
died: a crash, missed heartbeats, and a supervisor that was replaced (its workers died with it);
a message numbered 0 from a launch the receiver has heard from is a replay, whatever gap
preceded it. What this cannot catch: a receiver that restarted knows no sender's last number, so
one message replayed into it before its sender's first one is accepted; with encryption on
(``squall.encryption``, `squall.worker.curve`) nothing captured from the wire can be replayed at
all, as every CurveZMQ connection has its own keys.

The MAC is Poly1305's, as ChaCha20-Poly1305 (RFC 8439) computes it over associated data with
nothing to encrypt: about 2 µs for an 8 KB batch here, against 7-9 µs for HMAC-SHA256 even with
the CPU's SHA extensions (and four times that without them), at each end of every message.
Poly1305 needs a nonce that never repeats under one key, so each sender keys its own messages:
the key of a route (sender to receiver) is ``HMAC-SHA256(data key, label | route)``, where the
data key is derived from the cluster's secret for this use only (`squall._keys`) and the route
holds, besides the launch, storm id, slot and destination, 16 random bytes that the sender
(`Sealer`) draws when it starts; the nonce is the sequence number, which the sender never
repeats. So two senders never share a key, even one whose slot and launch a restart reused, and
a receiver, which derives the same key from the route in the message, can check it without
knowing the sender beforehand. A route's key is derived before the MAC is checked, from bytes
not yet authenticated, so a receiver keeps it only once a message under it has passed.

This module is pure: `Sealer` builds the messages a sender sends, `Opener` checks the messages a
receiver got; the transports move them. A message is one frame, so that ZeroMQ's per-frame size
limit (``MAXMSGSIZE``) bounds the whole message::

    mac (16 bytes) | fixed part (10 bytes) | route (26 bytes + its 3 strings) | data

The MAC covers everything after it. The fixed part is version, kind and sequence number; the
route (launch id, the sender's random bytes, then the lengths and bytes of storm id, slot and
destination) is the same for every message from one sender to one receiver, so the sender
encodes it once (`Sealer.route`) and derives its key at its first message, and a batch costs one
``struct.pack``, one MAC and two concatenations more than its own bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from time import monotonic
from typing import NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from .._keys import DATA as _KEY_PURPOSE
from .._keys import derive_key
from ..engine.transport import Origin  # who sends: the header's first part (its users import it from here)

VERSION = 3   # 1: the same fields in three frames; 2: HMAC-SHA256 under one key for every sender
DATA = 0      # kind of a batch of items
CONTROL = 1   # kind of a control message (backpressure)

_FIXED = struct.Struct(">BBQ")    # version, kind, sequence
_SALT = 16                        # the sender's random bytes in each route
_ROUTE = struct.Struct(f">I{_SALT}sHHH")  # launch id, the sender's random bytes, then the lengths of storm id, slot, destination
_MAC = 16                         # Poly1305's tag
_AT_FIXED = _MAC
_AT_ROUTE = _MAC + _FIXED.size
_MIN_SIZE = _AT_ROUTE + _ROUTE.size
_ROUTE_KEY = b"squall envelope route key v3|"  # the label of a route's key, under the data key
_NO_TEXT = b""                    # what ChaCha20-Poly1305 encrypts: nothing; the message is its associated data
SEAL_OVERHEAD = _AT_ROUTE  # a sealed message's bytes beyond its route and data: MAC and fixed part
_ROUTE_CACHE_MAX = 4096           # routes' MACs kept by a sender (one per peer) or receiver (one per sender launch)


class Header(NamedTuple):
    """What a message says about itself, authenticated by its MAC."""

    kind: int
    seq: int
    storm_id: str
    slot: str
    launch: int
    to: str


def encode_route(origin: Origin, to: str, salt: bytes) -> bytes:
    """The part of a header that is the same for every message from ``origin`` to ``to``;
    ``salt`` is the sender's random bytes (`Sealer` draws them)."""
    if len(salt) != _SALT:
        raise ValueError(f"a route's salt is {_SALT} bytes, not {len(salt)}")
    parts = [origin.storm_id.encode(), origin.slot.encode(), to.encode()]
    return _ROUTE.pack(origin.launch, salt, *map(len, parts)) + b"".join(parts)


def _decode_route(data: bytes) -> tuple[int, str, str, str]:
    launch, _, n1, n2, _ = _ROUTE.unpack_from(data)
    at = _ROUTE.size
    storm_id = data[at:at + n1].decode()
    slot = data[at + n1:at + n1 + n2].decode()
    to = data[at + n1 + n2:].decode()
    return launch, storm_id, slot, to


def _route_mac(key: bytes, route: bytes) -> ChaCha20Poly1305:
    """What MACs the messages of ``route`` (encoded) under the data key ``key``."""
    return ChaCha20Poly1305(hmac.digest(key, _ROUTE_KEY + route, hashlib.sha256))


def _nonce(seq: int) -> bytes:
    return b"\0\0\0\0" + seq.to_bytes(8, "big")


class Sealer:
    """The sending side: numbers, heads and MACs one worker's messages.

    Not thread-safe: the transport calls `seal` under its send lock, which also keeps the
    numbers in the order the messages go out.
    """

    def __init__(self, secret: bytes, origin: Origin) -> None:
        self.origin = origin
        self.seq = origin.first_seq  # above an earlier process's of the launch (a local restart)
        self._key = derive_key(secret, _KEY_PURPOSE)
        # this sender's own keys: no other sender's routes, a restart of this slot and launch
        # included, carry the same bytes (so a nonce, the sequence number, never repeats under a key)
        self._salt = os.urandom(_SALT)
        self._macs: dict[bytes, ChaCha20Poly1305] = {}  # route -> its MAC, one per peer

    def route(self, to: str) -> bytes:
        """The encoded route to the worker at address ``to`` (compute once per destination)."""
        return encode_route(self.origin, to, self._salt)

    def seal(self, kind: int, route: bytes, data: bytes) -> bytes:
        """One message, a single frame: ``mac | header | data``."""
        seq = self.seq
        self.seq = seq + 1
        mac = self._macs.get(route)
        if mac is None:  # a new peer, or a peer's new address (a worker that restarted elsewhere)
            if len(self._macs) >= _ROUTE_CACHE_MAX:
                self._macs.clear()
            mac = self._macs[route] = _route_mac(self._key, route)
        body = _FIXED.pack(VERSION, kind, seq) + route + data
        return mac.encrypt(_nonce(seq), _NO_TEXT, body) + body


def sealed_parts(message: bytes | memoryview) -> tuple[int, memoryview]:
    """The kind and data of a message this worker sealed (not checked: it is its own), so that
    it can be sealed again for another route: a peer that restarted at a new address gets what
    was held for its old one (`squall.worker.tcp.TcpTransport`)."""
    view = memoryview(message)
    _, kind, _ = _FIXED.unpack_from(view, _AT_FIXED)
    _, _, n1, n2, n3 = _ROUTE.unpack_from(view, _AT_ROUTE)
    return kind, view[_MIN_SIZE + n1 + n2 + n3:]


@dataclass
class Drops:
    """Messages a receiver dropped, by reason (reported in the worker's heartbeat)."""

    malformed: int = 0        # more than one frame, truncated, or a header this version does not write
    unauthenticated: int = 0  # bad MAC: not from a worker of this cluster, or altered
    other_topology: int = 0
    misdirected: int = 0      # meant for another worker's address
    stale_launch: int = 0     # from a launch of its slot that has been replaced
    replayed: int = 0         # a sequence number already seen
    undecodable: int = 0      # authenticated, but its batch or control message did not decode

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return asdict(self)

    def total(self) -> int:
        """All drops together."""
        return sum(asdict(self).values())


class Refused(Exception):
    """A message `Opener.open` dropped; ``reason`` names its `Drops` counter."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class Opener:
    """The receiving side: checks a message's MAC and header against the replay window.

    ``storm_id`` and ``address`` are the receiving worker's topology and data address.
    `set_floor` takes the master's launch id per slot. `open` is called by one thread at a time,
    in the order the messages came (`ZmqTransport.poll`, under its lock); `set_floor` swaps a
    whole pair (the dict and the floor of the others), which `open` picks up whole; any thread
    may call `count` and `heard_from` (which reads one entry, replaced whole).
    """

    def __init__(self, secret: bytes, storm_id: str, address: str, now: Callable[[], float] = monotonic) -> None:
        self.storm_id = storm_id
        self.address = address
        self.drops = Drops()
        self._count_lock = threading.Lock()
        self._key = derive_key(secret, _KEY_PURPOSE)
        # the master's launch per slot, and that of a slot it does not name
        self._floor: tuple[dict[str, int], int] = ({}, 0)
        self._last: dict[str, tuple[int, int]] = {}   # slot -> (launch, sequence) last accepted
        # slot -> (launch, when its first message was accepted: ``now``'s), replaced whole
        self._heard: dict[str, tuple[int, float]] = {}
        self._now = now
        # routes of messages that passed: their MAC and decoded fields
        self._routes: dict[bytes, tuple[ChaCha20Poly1305, tuple[int, str, str, str]]] = {}
        self.accepted = 0  # messages that passed

    def set_floor(self, launches: dict[str, int], others: int = 0) -> None:
        """The master's current launch id per slot, and ``others``, that of every slot it does
        not name (the master keeps no record of a slot its topology left): anything older is a
        stale launch."""
        self._floor = (dict(launches), others)  # swapped whole: `open` reads one pair

    def open(self, message: bytes) -> tuple[Header, memoryview]:
        """The header and data (a view into ``message``) of an acceptable message; raises
        `Refused` (and counts it) if not."""
        try:
            return self._open(message)
        except Refused as e:
            self.count(e.reason)
            raise

    def heard_from(self, slot: str) -> tuple[int, float] | None:
        """``(launch, when)``: the launch of ``slot`` whose messages this worker takes now, and
        when (``now``'s clock) it took the first (None: none yet). From any thread."""
        return self._heard.get(slot)

    def count(self, reason: str) -> None:
        """Count a message dropped for ``reason`` (a `Drops` field) by its receiver; from any
        thread (the transport's receiving thread counts the messages of many frames it drops)."""
        with self._count_lock:
            setattr(self.drops, reason, getattr(self.drops, reason) + 1)

    def _open(self, message: bytes) -> tuple[Header, memoryview]:
        if len(message) < _MIN_SIZE:
            raise Refused("malformed", f"a message of {len(message)} bytes, too short to be one")
        # the route's lengths are read before the MAC is checked: its key is the route's. Lengths
        # that overrun the message name no route, so no key could authenticate it: a stranger's
        # bytes, counted as such
        _, _, n1, n2, n3 = _ROUTE.unpack_from(message, _AT_ROUTE)
        end = _MIN_SIZE + n1 + n2 + n3
        if end > len(message):
            raise Refused("unauthenticated", "a message whose header lengths overrun it (wrong secret, or not a worker?)")
        raw = message[_AT_ROUTE:end]
        known = self._routes.get(raw)
        mac = _route_mac(self._key, raw) if known is None else known[0]
        view = memoryview(message)
        version, kind, seq = _FIXED.unpack_from(message, _AT_FIXED)  # the nonce's number, checked with the rest
        try:
            mac.decrypt(_nonce(seq), view[:_MAC], view[_MAC:])
        except InvalidTag:
            raise Refused("unauthenticated", "a message that failed authentication (wrong secret?)") from None
        # authenticated: a worker of this cluster wrote it, so its header is well formed unless
        # it runs another version of squall
        if version != VERSION or kind not in (DATA, CONTROL):
            raise Refused("malformed", f"a message of header version {version}, kind {kind}")
        if known is None:
            try:
                known = (mac, _decode_route(raw))
            except UnicodeDecodeError as e:
                raise Refused("malformed", f"a message with a bad header: {e}") from None
            if len(self._routes) >= _ROUTE_CACHE_MAX:
                self._routes.clear()
            self._routes[raw] = known
        launch, storm_id, slot, to = known[1]
        if storm_id != self.storm_id:
            raise Refused("other_topology", f"a message of topology {storm_id!r} from {slot}")
        if to != self.address:
            raise Refused("misdirected", f"a message from {slot} for {to}, not this worker")
        last = self._last.get(slot)
        named, others = self._floor
        if launch < named.get(slot, others) or (last is not None and launch < last[0]):
            raise Refused("stale_launch", f"a message from launch {launch} of {slot}, since replaced")
        if last is not None and launch == last[0] and seq <= last[1]:
            raise Refused("replayed", f"a message from {slot} numbered {seq}, not after {last[1]}")
        if last is None or launch != last[0]:
            self._heard[slot] = (launch, self._now())
        self._last[slot] = (launch, seq)
        self.accepted += 1
        return Header(kind, seq, storm_id, slot, launch, to), view[end:]
