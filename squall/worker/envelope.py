"""The envelope of a message between workers: who sent it, for whom, and in what order.

A captured message must not work twice, nor anywhere else. So each message carries, under its
MAC, a small header: the topology (storm id), the sending worker's slot and launch id, a
sequence number that the sender increments for every message it sends, and the address of the
worker it is for. A receiver drops a message

* of another topology (``other_topology``): an old topology's backpressure message, say;
* addressed to another worker (``misdirected``): copied from one worker's port to another's;
* from a launch of its slot that is older than one already heard from, or than the master's
  assignment says (``stale_launch``): a dead worker's traffic, replayed after its restart;
* whose sequence number is not above the last one from the same launch (``replayed``).
  ZeroMQ's PUSH/PULL keeps one sender's messages to one receiver in order, so within a launch
  the numbers only grow (with gaps: they count the sender's messages to every peer).

A worker that restarts starts a new launch with numbers from 0, which the receiver accepts
because the launch is newer. What this cannot catch: a receiver that restarted knows no sender's
last number, so one message replayed into it before its sender's first one is accepted; with
encryption on (``squall.encryption``, `squall.worker.curve`) nothing captured from the wire can
be replayed at all, as every CurveZMQ connection has its own keys.

This module is pure: `Sealer` builds the frames a sender sends, `Opener` checks the frames a
receiver got; `ZmqTransport` moves them. The header is a fixed struct (10 bytes) followed by a
per-destination part the sender encodes once (`Sealer.route`), so a batch costs one
``struct.pack`` and one HMAC over header and data more than its own bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import asdict, dataclass
from typing import NamedTuple

VERSION = 1
DATA = 0      # kind of a batch of items
CONTROL = 1   # kind of a control message (backpressure)

_FIXED = struct.Struct(">BBQ")    # version, kind, sequence
_ROUTE = struct.Struct(">IHHH")   # launch id, then the lengths of storm id, slot, destination
_ROUTE_CACHE_MAX = 4096           # parsed routes kept by a receiver (one per sender launch)


class Origin(NamedTuple):
    """Who sends: the topology, the worker's slot (``host:port``) and its launch id."""

    storm_id: str
    slot: str
    launch: int


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
    launch, n1, n2, n3 = _ROUTE.unpack_from(data)
    at = _ROUTE.size
    if len(data) != at + n1 + n2 + n3:
        raise ValueError("header lengths do not add up")
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
        self._hmac = hmac.new(secret, digestmod=hashlib.sha256)  # keyed once; copies are cheap

    def route(self, to: str) -> bytes:
        """The encoded route to the worker at address ``to`` (compute once per destination)."""
        return encode_route(self.origin, to)

    def seal(self, kind: int, route: bytes, data: bytes) -> list[bytes]:
        """The frames of one message: ``[mac, header, data]``."""
        seq = self.seq
        self.seq = seq + 1
        header = _FIXED.pack(VERSION, kind, seq) + route
        h = self._hmac.copy()
        h.update(header)
        h.update(data)
        return [h.digest(), header, data]


@dataclass
class Drops:
    """Messages a receiver dropped, by reason (reported in the worker's heartbeat)."""

    malformed: int = 0        # not three frames, or a header this version does not write
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
    `set_floor` takes the master's launch id per slot. Not thread-safe: one receiving thread
    calls `open`; `set_floor` swaps a whole dict, which that thread picks up whole.
    """

    def __init__(self, secret: bytes, storm_id: str, address: str) -> None:
        self.storm_id = storm_id
        self.address = address
        self.drops = Drops()
        self._hmac = hmac.new(secret, digestmod=hashlib.sha256)
        self._floor: dict[str, int] = {}
        self._last: dict[str, tuple[int, int]] = {}   # slot -> (launch, sequence) last accepted
        self._routes: dict[bytes, tuple[int, str, str, str]] = {}

    def set_floor(self, launches: dict[str, int]) -> None:
        """The master's current launch id per slot: anything older is a stale launch."""
        self._floor = dict(launches)

    def open(self, frames: list[bytes]) -> tuple[Header, bytes]:
        """The header and data of an acceptable message; raises `Refused` (and counts it) if not."""
        try:
            return self._open(frames)
        except Refused as e:
            setattr(self.drops, e.reason, getattr(self.drops, e.reason) + 1)
            raise

    def _open(self, frames: list[bytes]) -> tuple[Header, bytes]:
        if len(frames) != 3:
            raise Refused("malformed", f"a message of {len(frames)} frames, not 3")
        mac, header, data = frames
        h = self._hmac.copy()
        h.update(header)
        h.update(data)
        if not hmac.compare_digest(mac, h.digest()):
            raise Refused("unauthenticated", "a message that failed authentication (wrong secret?)")
        # authenticated: a worker of this cluster wrote it, so its header is well formed unless
        # it runs another version of squall
        if len(header) < _FIXED.size + _ROUTE.size:
            raise Refused("malformed", "a message with a truncated header")
        version, kind, seq = _FIXED.unpack_from(header)
        if version != VERSION or kind not in (DATA, CONTROL):
            raise Refused("malformed", f"a message of header version {version}, kind {kind}")
        raw = header[_FIXED.size:]
        route = self._routes.get(raw)
        if route is None:
            try:
                route = _decode_route(raw)
            except (ValueError, UnicodeDecodeError) as e:
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
        return Header(kind, seq, storm_id, slot, launch, to), data
