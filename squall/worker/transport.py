"""`ZmqTransport`: items between worker processes, in batches over ZeroMQ.

Each worker binds one PULL socket on its slot's port and connects a PUSH socket to every peer
worker. A sender appends ``(task, item)`` to its peer's queue; `flush` (called by the loops
after every working round, see `squall.engine.transport.Transport.flush`) encodes each queue as
one batch and sends it, so a tuple crossing processes pays for one ``send`` per batch, not per
tuple (ENGINE-SPEED.md, lesson 8). Items for tasks in this worker never come here.

Every message is one frame, ``mac | header | data``: the header (`squall.worker.envelope`) names
the topology, the sending worker and launch, the receiving worker and a sequence number, and the
HMAC-SHA256 under a key derived from the cluster's secret covers header and data. A receiver
checks both before decoding, because decoding may unpickle (the pickle fallback), and pickles
must never be loaded from an unauthenticated peer; it drops (and counts,
`ZmqTransport.statistics`) messages that are forged, of another topology, meant for another
worker, from a replaced launch, or replayed. Warnings about them are rate-limited
(`squall._ratelimit`).

A message, header and data together, is at most ``squall.transport.max.message.bytes``: the
PULL socket refuses larger ones before reading them (ZeroMQ's ``MAXMSGSIZE``, which closes the
connection, set to the bound plus CurveZMQ's own 33 bytes when encrypted), and a sender splits a
batch that would be larger (its header grows with the topology's id), refusing with an error
only an item too large on its own.
``MAXMSGSIZE`` limits each frame of a multipart message, not the whole; as squall's messages are
single frames, the receiver drops a message of more unkept, frame by frame. ZeroMQ itself holds
all of a multipart message's frames before it hands over the first, so only encryption shuts a
stranger out entirely (docs/cluster.md).
Under ``squall.encryption`` the sockets use CurveZMQ (`squall.worker.curve`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from itertools import repeat, starmap
from time import monotonic
from typing import Any

import msgpack
import zmq
from zmq.utils.monitor import recv_monitor_message

from .._encryption import AUTO, NEVER
from .._encryption import KEY as ENCRYPTION_KEY
from .._ratelimit import RateLimitedLog
from .._native import sender as native_sender
from .._tuple import Tuple
from ..engine.serialize import PLAIN_TYPES, SerializationError
from ..engine.transport import Transport
from . import curve
from .envelope import CONTROL, DATA, SEAL_OVERHEAD, Opener, Origin, Refused, Sealer

log = logging.getLogger("squall.worker")

MAX_BATCH = 2048  # items per message: bounds a message's size and the receiver's latency
# How long a message may wait for a loop's `poll` before the receiving thread delivers it
# itself: longer than a working round of W1 (a few ms), and short enough for
# backpressure (at 50 ms, a flood at ~200k tuples/s put 22,757 tuples in a slow bolt's
# inbox of 200 before the spout heard "over"; tests/process/test_recovery.py bounds it at 10,000)
STALE_SECS = 0.01
# ... or once this many messages wait, whatever their age: a flood into a worker whose loops are
# in a long round. At 10 ms alone, a spout emitting 400k tuples/s (compiled emit) put up to
# 12,500 tuples in a slow bolt's inbox of 200 before it heard "over" (test_recovery bounds it at
# 10,000); W1's loops poll every few ms and see a handful of messages waiting at most.
STALE_MESSAGES = 8
MAX_MESSAGE_KEY = "squall.transport.max.message.bytes"
# A batch of MAX_BATCH small tuples is ~7 KB; 64 MB leaves room for large values, and bounds
# what one (single-frame) message from a stranger can make a worker allocate.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# What CurveZMQ adds to each frame, which ZeroMQ counts against MAXMSGSIZE: its MESSAGE
# command's name (8 bytes), nonce (8), flags (1) and Poly1305 tag (16); measured, at any size
_CURVE_OVERHEAD = 33
# Messages ZeroMQ queues per connection before it stops reading from it: 256 MB divided by the
# largest message size, but at least 8 and at most 1,000 messages. So a connection holds at most
# 256 MB of messages when the bound is 32 MB or less; above, 8 of the largest (512 MB at the
# default 64 MB). 1,000 messages is a burst of ~7 MB of ordinary ~7 KB batches.
_RECEIVE_BUDGET = 256 * 1024 * 1024
_RCVHWM_MIN, _RCVHWM_MAX = 8, 1000
_HANDSHAKE_FAILED = int(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                        | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
# Plain ints: pyzmq's send_multipart/recv_multipart combine its Flag enums in Python on every
# frame, which was 4% of a worker's GIL time at 30,000 tuples/s between 2 workers.
_NOBLOCK = int(zmq.NOBLOCK)
_RCVMORE = int(zmq.RCVMORE)


def receive_queue_limit(max_message_bytes: int) -> int:
    """``RCVHWM`` for a data port taking messages of up to ``max_message_bytes``."""
    return max(_RCVHWM_MIN, min(_RCVHWM_MAX, _RECEIVE_BUDGET // max(1, max_message_bytes)))


class ZmqTransport(Transport):
    """Batches items per peer worker and sends them over ZeroMQ; receives this worker's.

    Args:
        bind: address to bind this worker's PULL socket to, e.g. ``tcp://127.0.0.1:6700``
            (port 0: any free port; `address` tells which).
        peers: the address of the worker hosting each remote task (changed later by `set_peers`).
        serializer: encodes and decodes batches (`squall.engine.serialize.Serializer`).
        secret: the cluster's shared secret.
        receive: called with ``(task, item)`` for every item that arrives (the worker's
            ``receive``); set later with `set_receiver` if the worker does not exist yet.
        origin: this worker's topology, slot and launch id, which its messages carry and
            against which it checks the messages it receives.
        max_message_bytes: the largest message data sent or accepted (``squall.transport.max.message.bytes``).
        encryption: ``squall.encryption``: ``"auto"``, ``"true"`` or ``"false"`` (`squall.worker.curve`).
    """

    def __init__(self, bind: str, peers: dict[int, str], serializer: Any, secret: bytes,
                 receive: Callable[[int, Any], None] | None = None, ctx: zmq.Context | None = None, *,
                 origin: Origin, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 encryption: str = AUTO) -> None:
        self._ctx = ctx or zmq.Context.instance()
        self._serializer = serializer
        self._receive = receive
        self._receive_batch: Callable[[list], int] | None = None
        # messages as they came off the wire, waiting for a loop's `poll` to check and deliver them
        self._arrived: deque[bytes] = deque()
        self._waiting_since = 0.0  # when the oldest message in _arrived came
        self._poll_lock = threading.Lock()
        self._control: Callable[[str, Any], None] | None = None
        self.max_message_bytes = int(max_message_bytes)
        self._encryption = encryption
        self._keys = curve.server_keys(secret) if encryption != NEVER else None
        self._warn = RateLimitedLog(log, limit=5, period=10.0)
        self.refused = 0  # items refused because, alone, they exceed max_message_bytes
        self.on_refused: Callable[[int, str], None] | None = None  # told (task, why) of each
        # queues, sockets and backlogs are keyed by the address a peer worker first had: a
        # worker that restarts elsewhere (a Spark task on another executor) gets a new address
        # (`set_peers`), but the senders the executors hold keep appending to the same queue
        self._queues: dict[str, deque] = {}
        self._task_queue: dict[int, deque] = {}
        self._task_key: dict[int, str] = {}
        self._address: dict[str, str] = {}
        for task, addr in peers.items():
            self._task_queue[task] = self._queues.setdefault(addr, deque())
            self._task_key[task] = addr
            self._address[addr] = addr
        self._sockets: dict[str, zmq.Socket] = {}
        self._routes: dict[str, bytes] = {}  # key -> the encoded route to the peer's current address
        self._unsent: dict[str, list[bytes]] = {}
        self._send_lock = threading.Lock()
        self._sealer = Sealer(secret, origin)
        self._pull = self._ctx.socket(zmq.PULL)
        self._pull.setsockopt(zmq.LINGER, 0)
        self.encrypted = self._keys is not None and curve.wants_encryption(encryption, bind)
        self._pull.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes + (_CURVE_OVERHEAD if self.encrypted else 0))
        self._pull.setsockopt(zmq.RCVHWM, receive_queue_limit(self.max_message_bytes))
        self._pull.setsockopt(zmq.RCVTIMEO, 200)  # the receiving thread looks at `_closed` this often
        self._discard = bytearray()  # the extra frames of a multipart message go into nothing
        if self.encrypted:
            curve.make_server(self._pull, self._keys)
        self._monitor = self._pull.get_monitor_socket(_HANDSHAKE_FAILED) if self.encrypted else None
        if bind.endswith(":0"):  # any free port (tests); the slot's port otherwise
            port = self._pull.bind_to_random_port(bind[:-2])
            bind = f"{bind[:-2]}:{port}"
        else:
            self._pull.bind(bind)
        self.address = bind
        if self.encrypted:
            log.info("data port %s is encrypted (CurveZMQ, %s=%s)", bind, ENCRYPTION_KEY, encryption)
        self._opener = Opener(secret, origin.storm_id, bind)
        self._closed = False
        self._encode_errors: set[str] = set()  # logged once each (see _encode)
        self._thread = threading.Thread(target=self._receive_loop, name=f"squall-recv-{bind}", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """Messages received and dropped, for any reason (`statistics` tells which)."""
        return self._opener.drops.total()

    def statistics(self) -> dict[str, Any]:
        """Drops by reason, and items refused for their size (for the worker's heartbeat)."""
        return {"dropped": self._opener.drops.as_dict(), "refused": self.refused}

    def set_launches(self, launches: dict[str, int]) -> None:
        """The master's launch id per slot: messages from older launches are dropped."""
        self._opener.set_floor(launches)

    def set_receiver(self, receive: Callable[[int, Any], None],
                     receive_batch: Callable[[list], int] | None = None) -> None:
        """Where arriving items go: the worker's ``receive``, or ``receive_batch`` for the items
        of a batch a loop takes with `poll` (once ``on_arrival`` is set; until then the receiving
        thread delivers each item to ``receive`` itself)."""
        self._receive = receive
        self._receive_batch = receive_batch

    def set_control_handler(self, handle: Callable[[str, Any], None]) -> None:
        """Where arriving control messages go, with the slot of the worker that sent them (see
        `broadcast`); the handler raises an exception for a message it cannot take."""
        self._control = handle

    def broadcast(self, message: Any) -> None:
        """Send a small msgpack-able control message (backpressure state) to every peer worker,
        after the batches queued for it."""
        data = msgpack.packb(message)
        with self._send_lock:
            self._flush_locked()
            for key in self._queues:
                self._send(key, self._sealer.seal(CONTROL, self._route(key), data))

    def set_peers(self, peers: dict[int, str]) -> None:
        """Addresses of peer workers: new tasks (before `sender` is asked for them), or a new
        address for a worker that restarted elsewhere. A moved peer's unsent batches are dropped
        with its old socket: they were meant for a worker that is gone, and their tuples time
        out and replay, as in Storm."""
        with self._send_lock:
            for task, addr in peers.items():
                key = self._task_key.get(task)
                if key is None:
                    self._task_queue[task] = self._queues.setdefault(addr, deque())
                    self._task_key[task] = addr
                    self._address.setdefault(addr, addr)
                    continue
                if self._address[key] == addr:
                    continue
                log.info("peer worker of task %s moved from %s to %s", task, self._address[key], addr)
                self._address[key] = addr
                self._routes.pop(key, None)
                sock = self._sockets.pop(key, None)
                if sock is not None:
                    sock.close(0)
                self._unsent.pop(key, None)

    def sender(self, task_id: int) -> Callable[[Any], None]:
        q = self._task_queue.get(task_id)
        if q is None:
            raise KeyError(f"no worker hosts task {task_id}")
        # Values are serialized at flush, after the emit has returned; the sender checks the few
        # that may fail now (a Tuple with a value not of PLAIN_TYPES), so that the emit raises in
        # the emitting component's code (which may catch it) instead of the whole batch failing
        # later, attributed to nobody.
        return native_sender(q.append, task_id, Tuple, PLAIN_TYPES, self._serializer.check)

    def flush(self) -> None:
        if not self._send_lock.acquire(blocking=False):
            return  # another loop of this worker is flushing; it takes our items too
        try:
            self._flush_locked()
        finally:
            self._send_lock.release()

    def _flush_locked(self) -> None:
        for key, q in self._queues.items():
            while q:
                n = min(len(q), MAX_BATCH)
                # popleft, not a copy and clear: senders on other threads may append meanwhile
                self._send_batch(key, list(starmap(q.popleft, repeat((), n))))

    def _send_batch(self, key: str, items: list) -> None:
        data = self._encode(items)
        route = self._route(key)
        if SEAL_OVERHEAD + len(route) + len(data) <= self.max_message_bytes:
            self._send(key, self._sealer.seal(DATA, route, data))
        elif len(items) > 1:  # the peer would refuse it: send it in halves
            half = len(items) // 2
            self._send_batch(key, items[:half])
            self._send_batch(key, items[half:])
        else:
            task = items[0][0]
            header = SEAL_OVERHEAD + len(route)
            why = (f"an item for task {task} is {len(data)} bytes serialized, which with its message's "
                   f"{header}-byte header is over {MAX_MESSAGE_KEY} ({self.max_message_bytes}); it was "
                   f"not sent, and its tuple will time out")
            self.refused += 1
            self._warn.warning("%s", why)
            if self.on_refused is not None:
                self.on_refused(task, why)

    def _route(self, key: str) -> bytes:
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._sealer.route(self._address[key])
        return route

    def _encode(self, items: list[tuple[int, Any]]) -> bytes:
        """One batch of ``items``. Values were checked at emit (`sender`), but one may have been
        changed since (a list the component kept and appended to): then the items that cannot
        be encoded are dropped, to time out and replay as lost tuples do, and each distinct
        error is logged once, instead of the loop crashing on an error that names no emit."""
        encode = self._serializer.encode_batch
        try:
            return encode(items)
        except SerializationError:
            pass
        good = []
        for item in items:
            try:
                encode([item])
            except SerializationError as e:
                if str(e) not in self._encode_errors and len(self._encode_errors) < 100:
                    self._encode_errors.add(str(e))
                    log.error("dropped a tuple changed after its emit: %s", e)
                continue
            good.append(item)
        return encode(good)

    def _send(self, key: str, message: bytes) -> None:
        sock = self._sockets.get(key)
        if sock is None:
            address = self._address[key]
            sock = self._ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDHWM, 1000)  # batches, not tuples: up to ~2M tuples queued
            if self._keys is not None and curve.wants_encryption(self._encryption, address):
                curve.make_client(sock, self._keys.public)
            sock.connect(address)
            self._sockets[key] = sock
        backlog = self._unsent.get(key)
        if backlog:
            backlog.append(message)
            self._retry(key)
            return
        try:
            # copy=True: for frames of a few KB (a batch is ~7 KB) zero-copy sends measured slower
            # here, 16 vs 12 us per send
            sock.send(message, _NOBLOCK)
        except zmq.Again:
            # The peer is gone or slow. Keep the batch: sending must never block a loop (that
            # could deadlock the ack cycle); tuples that never arrive time out and replay.
            self._unsent.setdefault(key, []).append(message)

    def _retry(self, key: str) -> None:
        backlog = self._unsent[key]
        sock = self._sockets[key]
        while backlog:
            try:
                sock.send(backlog[0], _NOBLOCK)
            except zmq.Again:
                if len(backlog) > 1000:  # the peer has been away long: give the oldest up
                    del backlog[0]
                return
            del backlog[0]

    def _receive_loop(self) -> None:
        # One blocking receive per message (RCVTIMEO bounds it, for `close`), not a Poller and
        # non-blocking receives: each of these calls gives the GIL up and takes it back, and each
        # take-back while the loop runs makes the loop wait for the GIL in turn
        recv, get = self._pull.recv, self._pull.get
        monitor = self._monitor
        while not self._closed:
            try:
                try:
                    message = recv()
                except zmq.Again:
                    message = None
                if monitor is not None and monitor.get(zmq.EVENTS) & zmq.POLLIN:
                    self._handshake_failed()
                if message is None:
                    continue
                if get(_RCVMORE):
                    self._drop_multipart()
                    continue
                self._handle(message)
            except zmq.ZMQError:
                if self._closed:
                    return
                raise

    def _drop_multipart(self) -> None:
        """Drop the message whose first frame was just read: squall sends single frames. Each
        extra one goes into nothing as it is read, so squall keeps none of a message of many
        frames under the size limit (ZeroMQ has held them all until the last arrived)."""
        discard, recv_into, get = self._discard, self._pull.recv_into, self._pull.get
        frames = 1
        while get(_RCVMORE):  # the rest of a message arrives with its first frame
            recv_into(discard)
            frames += 1
        self._opener.count("malformed")
        self._warn.warning("dropped a message of %d frames (squall sends one)", frames)

    def _handshake_failed(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self._monitor, _NOBLOCK)
            except zmq.Again:
                return
            self._warn.warning("a peer failed the CURVE handshake on %s (%s): not a worker of this "
                               "cluster, or one whose %s or secret differs", self.address,
                               zmq.Event(event["event"]).name, ENCRYPTION_KEY)

    def _handle(self, message: bytes) -> None:
        """Queue one message, as it came off the wire, for a loop's `poll` (on this thread)."""
        on_arrival = self.on_arrival
        arrived = self._arrived
        if on_arrival is None:  # no loop polls (no worker yet, or a bare transport): deliver here
            arrived.append(message)
            self.poll()
            return
        # Checking, decoding and delivery are the loop's (`poll`, at the start of its next
        # round). Any Python work here holds the GIL that the loop needs: when this thread
        # checked every message and decoded whenever two batches were waiting, the loop of a
        # W1 worker waited for the GIL 28% of its time. But a message waiting longer than
        # `STALE_SECS`, or more than `STALE_MESSAGES` waiting, means the loops are in a long
        # round (a slow bolt): deliver here then, so that the inboxes, and backpressure, see
        # every item.
        now = monotonic()
        if not arrived:
            self._waiting_since = now
            arrived.append(message)
            on_arrival()
            return
        arrived.append(message)
        if now - self._waiting_since > STALE_SECS or len(arrived) > STALE_MESSAGES:
            self.poll()

    def poll(self) -> int:
        """Check, decode and deliver the messages that arrived, in arrival order, on the calling
        thread (a loop of the worker, every round); returns the items delivered."""
        arrived = self._arrived
        if not arrived or not self._poll_lock.acquire(blocking=False):
            return 0  # nothing, or another loop is delivering: it takes these too (order kept)
        delivered = 0
        try:
            while arrived:
                delivered += self._take(arrived.popleft())
        finally:
            self._poll_lock.release()
        if arrived:  # came while the lock was being released: another loop may have missed them
            delivered += self.poll()
        return delivered

    def _take(self, message: bytes) -> int:
        """Check one message and deliver it: the items of a batch (how many is returned), or a
        control message. The MAC is checked before anything is decoded: decoding may unpickle."""
        try:
            header, data = self._opener.open(message)
        except Refused as e:
            self._warn.warning("dropped %s", e)
            return 0
        if header.kind == CONTROL:
            if self._control is not None:
                try:
                    self._control(header.slot, msgpack.unpackb(data))
                except Exception as e:
                    self._opener.count("undecodable")
                    self._warn.warning("dropped a control message from %s: %s", header.slot, e)
            return 0
        try:
            items = self._serializer.decode_batch(data)
        except Exception as e:
            self._opener.count("undecodable")
            self._warn.warning("dropped an undecodable batch from %s: %s", header.slot, e)
            return 0
        return self._deliver(items)

    def _deliver(self, items: list[tuple[int, Any]]) -> int:
        if self._receive_batch is not None:
            return self._receive_batch(items)
        receive = self._receive
        if receive is None:
            return 0
        for task, item in items:
            try:
                receive(task, item)
            except KeyError:
                # not (or no longer) ours, e.g. sent under an old assignment: as Storm, drop
                log.debug("dropped an item for task %s, not in this worker", task)
        return len(items)

    def close(self) -> None:
        """Stop receiving and close the sockets."""
        self._closed = True
        self._thread.join(2)
        with self._send_lock:
            for sock in self._sockets.values():
                sock.close(0)
            self._sockets.clear()
        if self._monitor is not None:
            self._pull.disable_monitor()
            self._monitor.close(0)
        self._pull.close(0)
