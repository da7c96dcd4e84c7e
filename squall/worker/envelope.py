"""The envelope of a message between workers: who sent it, for whom, and in what order.

A captured message must not work twice, nor anywhere else. So each message carries, under its
MAC (HMAC-SHA256 under a key derived from the cluster's secret for this use only,
`squall._keys`), a small header: the topology (storm id), the sending worker's slot and launch
id, a sequence number that the sender increments for every message it sends, and the address of
the worker it is for. A receiver drops a message

* of another topology (``other_topology``): an old topology's backpressure message, say;
* addressed to another worker (``misdirected``): copied from one worker's port to another's;
* from a launch of its slot that is older than one already heard from, or than the master's
  assignment says (``stale_launch``): a dead worker's traffic, replayed after its restart;
* whose sequence number is not above the last one from the same launch (``replayed``).
  ZeroMQ's PUSH/PULL keeps one sender's messages to one receiver in order, so within a launch
  the numbers only grow (with gaps: they count the sender's messages to every peer).

A worker that restarts starts a new launch with numbers from 0, which the receiver accepts
because the launch is newer. The master gives a slot a new launch id whenever its worker may
have died: a crash, missed heartbeats, and a supervisor that was replaced (its workers died with
it); a message numbered 0 from a launch the receiver has heard from is a replay, whatever gap
preceded it. What this cannot catch: a receiver that restarted knows no sender's last number, so
one message replayed into it before its sender's first one is accepted; with encryption on
(``squall.encryption``, `squall.worker.curve`) nothing captured from the wire can be replayed at
all, as every CurveZMQ connection has its own keys.

This module is pure: `Sealer` builds the messages a sender sends, `Opener` checks the messages a
receiver got; `ZmqTransport` moves them. A message is one ZeroMQ frame, so that ZeroMQ's
per-frame size limit (``MAXMSGSIZE``) bounds the whole message::

    mac (32 bytes) | fixed part (10 bytes) | route (10 bytes + its 3 strings) | data

The MAC covers everything after it. The fixed part is version, kind and sequence number; the
route (launch id, then the lengths and bytes of storm id, slot and destination) is the same for
every message from one sender to one receiver, so the sender encodes it once (`Sealer.route`) and
a batch costs one ``struct.pack``, one HMAC and one concatenation more than its own bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import threading
from dataclasses import asdict, dataclass
from typing import NamedTuple

from .._keys import DATA as _KEY_PURPOSE
from .._keys import derive_key
from ..engine.transport import Origin  # who sends: the header's first part (its users import it from here)

VERSION = 2   # 1: the same fields in three frames
DATA = 0      # kind of a batch of items
CONTROL = 1   # kind of a control message (backpressure)

_FIXED = struct.Struct(">BBQ")    # version, kind, sequence
_ROUTE = struct.Struct(">IHHH")   # launch id, then the lengths of storm id, slot, destination
_MAC = 32                         # HMAC-SHA256
_AT_FIXED = _MAC
_AT_ROUTE = _MAC + _FIXED.size
_MIN_SIZE = _AT_ROUTE + _ROUTE.size
# hashlib gives the GIL up while it hashes a buffer of 2,048 bytes or more (HASHLIB_GIL_MINSIZE).
# A worker's loop that did so for every batch it seals or opens let the worker's other threads
# take the GIL each time, and then waited for it back: beside a thread that wanted the GIL, a
# 7 KB batch's MAC took 4,086 us of wall time instead of 15 (docs/profiles/w1-scaling-model.md).
# Smaller pieces are hashed holding the GIL, for about 1 us more a batch.
_GIL_HELD_PIECE = 2047
SEAL_OVERHEAD = _AT_ROUTE  # a sealed message's bytes beyond its route and data: MAC and fixed part
_ROUTE_CACHE_MAX = 4096           # parsed routes kept by a receiver (one per sender launch)


class Header(NamedTuple):
    """What a message says about itself, authenticated by its MAC."""

    kind: int
    seq: int
    storm_id: str
    slot: str
    launch: int
    to: str


def encode_route(origin: Origin, to: str) -> bytes:
    """The part of a header that is the same for every message from ``origin`` to ``to``."""
    parts = [origin.storm_id.encode(), origin.slot.encode(), to.encode()]
    return _ROUTE.pack(origin.launch, *map(len, parts)) + b"".join(parts)


def _decode_route(data: bytes) -> tuple[int, str, str, str]:
    launch, n1, n2, _ = _ROUTE.unpack_from(data)
    at = _ROUTE.size
    storm_id = data[at:at + n1].decode()
    slot = data[at + n1:at + n1 + n2].decode()
    to = data[at + n1 + n2:].decode()
    return launch, storm_id, slot, to


class Sealer:
    """The sending side: numbers, heads and MACs one worker's messages.

    Not thread-safe: the transport calls `seal` under its send lock, which also keeps the
    numbers in the order the messages go out.
    """

    def __init__(self, secret: bytes, origin: Origin) -> None:
        self.origin = origin
        self.seq = 0
        # keyed once; copies are cheap
        self._hmac = hmac.new(derive_key(secret, _KEY_PURPOSE), digestmod=hashlib.sha256)

    def route(self, to: str) -> bytes:
        """The encoded route to the worker at address ``to`` (compute once per destination)."""
        return encode_route(self.origin, to)

    def seal(self, kind: int, route: bytes, data: bytes) -> bytes:
        """One message, a single frame: ``mac | header | data``."""
        seq = self.seq
        self.seq = seq + 1
        header = _FIXED.pack(VERSION, kind, seq) + route
        h = self._hmac.copy()
        h.update(header)
        _update(h, data)
        return b"".join((h.digest(), header, data))


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
    `set_floor` takes the master's launch id per slot. Not thread-safe: `open` is called by one
    thread at a time, in the order the messages came (`ZmqTransport.poll`, under its lock);
    `set_floor` swaps a whole dict, which `open` picks up whole.
    """

    def __init__(self, secret: bytes, storm_id: str, address: str) -> None:
        self.storm_id = storm_id
        self.address = address
        self.drops = Drops()
        self._count_lock = threading.Lock()
        self._hmac = hmac.new(derive_key(secret, _KEY_PURPOSE), digestmod=hashlib.sha256)
        self._floor: dict[str, int] = {}
        self._last: dict[str, tuple[int, int]] = {}   # slot -> (launch, sequence) last accepted
        self._routes: dict[bytes, tuple[int, str, str, str]] = {}
        self.accepted = 0  # messages that passed

    def set_floor(self, launches: dict[str, int]) -> None:
        """The master's current launch id per slot: anything older is a stale launch."""
        self._floor = dict(launches)

    def open(self, message: bytes) -> tuple[Header, memoryview]:
        """The header and data (a view into ``message``) of an acceptable message; raises
        `Refused` (and counts it) if not."""
        try:
            return self._open(message)
        except Refused as e:
            self.count(e.reason)
            raise

    def count(self, reason: str) -> None:
        """Count a message dropped for ``reason`` (a `Drops` field) by its receiver; from any
        thread (the transport's receiving thread counts the messages of many frames it drops)."""
        with self._count_lock:
            setattr(self.drops, reason, getattr(self.drops, reason) + 1)

    def _open(self, message: bytes) -> tuple[Header, memoryview]:
        if len(message) < _MIN_SIZE:
            raise Refused("malformed", f"a message of {len(message)} bytes, too short to be one")
        view = memoryview(message)
        h = self._hmac.copy()
        _update(h, view[_MAC:])
        if not hmac.compare_digest(view[:_MAC], h.digest()):
            raise Refused("unauthenticated", "a message that failed authentication (wrong secret?)")
        # authenticated: a worker of this cluster wrote it, so its header is well formed unless
        # it runs another version of squall
        version, kind, seq = _FIXED.unpack_from(message, _AT_FIXED)
        if version != VERSION or kind not in (DATA, CONTROL):
            raise Refused("malformed", f"a message of header version {version}, kind {kind}")
        _, n1, n2, n3 = _ROUTE.unpack_from(message, _AT_ROUTE)
        end = _MIN_SIZE + n1 + n2 + n3
        if end > len(message):
            raise Refused("malformed", "a message whose header lengths overrun it")
        raw = message[_AT_ROUTE:end]
        route = self._routes.get(raw)
        if route is None:
            try:
                route = _decode_route(raw)
            except UnicodeDecodeError as e:
                raise Refused("malformed", f"a message with a bad header: {e}") from None
            if len(self._routes) >= _ROUTE_CACHE_MAX:
                self._routes.clear()
            self._routes[raw] = route
        launch, storm_id, slot, to = route
        if storm_id != self.storm_id:
            raise Refused("other_topology", f"a message of topology {storm_id!r} from {slot}")
        if to != self.address:
            raise Refused("misdirected", f"a message from {slot} for {to}, not this worker")
        last = self._last.get(slot)
        if launch < self._floor.get(slot, 0) or (last is not None and launch < last[0]):
            raise Refused("stale_launch", f"a message from launch {launch} of {slot}, since replaced")
        if last is not None and launch == last[0] and seq <= last[1]:
            raise Refused("replayed", f"a message from {slot} numbered {seq}, not after {last[1]}")
        self._last[slot] = (launch, seq)
        self.accepted += 1
        return Header(kind, seq, storm_id, slot, launch, to), view[end:]


def _update(h: hmac.HMAC, data: bytes | memoryview) -> None:
    """``h.update(data)`` without giving the GIL up (see `_GIL_HELD_PIECE`)."""
    n = len(data)
    if n < _GIL_HELD_PIECE:
        h.update(data)
        return
    view = memoryview(data)
    for i in range(0, n, _GIL_HELD_PIECE):
        h.update(view[i:i + _GIL_HELD_PIECE])
