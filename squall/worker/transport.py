"""`ZmqTransport`: items between worker processes, in batches over ZeroMQ.

Each worker binds one PULL socket on its slot's port and connects a PUSH socket to every peer
worker. A sender appends ``(task, item)`` to its peer's queue; `flush` (called by the loops
after every working round, see `squall.engine.transport.Transport.flush`) encodes each queue as
one batch and sends it, so a tuple crossing processes pays for one ``send`` per batch, not per
tuple (ENGINE-SPEED.md, lesson 8). Items for tasks in this worker never come here.

Every batch carries an HMAC-SHA256 of its bytes under the cluster's secret; a receiver checks
it before decoding, because decoding may unpickle (the pickle fallback), and pickles must never
be loaded from an unauthenticated peer. Batches that fail the check are dropped and logged.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import msgpack
import zmq

from .._tuple import Tuple
from ..engine.serialize import PLAIN_TYPES, SerializationError
from ..engine.transport import Transport

log = logging.getLogger("squall.worker")

MAX_BATCH = 2048  # items per message: bounds a message's size and the receiver's latency
_CONTROL = b"ctl"  # third frame of a control message
# Plain ints: pyzmq's send_multipart/recv_multipart combine its Flag enums in Python on every
# frame, which was 4% of a worker's GIL time at 30,000 tuples/s between 2 workers.
_NOBLOCK = int(zmq.NOBLOCK)
_MORE_NOBLOCK = int(zmq.SNDMORE | zmq.NOBLOCK)
_RCVMORE = int(zmq.RCVMORE)


def _send_frames(sock: zmq.Socket, frames: list[bytes]) -> None:
    """Send one multipart message without blocking; raises zmq.Again if it was not taken.
    ZeroMQ takes a message whole or not at all: once its first frame is queued, so are the rest."""
    send = sock.send
    for frame in frames[:-1]:
        send(frame, _MORE_NOBLOCK)
    send(frames[-1], _NOBLOCK)


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
    """

    def __init__(self, bind: str, peers: dict[int, str], serializer: Any, secret: bytes,
                 receive: Callable[[int, Any], None] | None = None, ctx: zmq.Context | None = None) -> None:
        self._ctx = ctx or zmq.Context.instance()
        self._serializer = serializer
        self._secret = secret
        self._receive = receive
        self._control: Callable[[Any], None] | None = None
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
        self._unsent: dict[str, list[list[bytes]]] = {}
        self._send_lock = threading.Lock()
        self._pull = self._ctx.socket(zmq.PULL)
        self._pull.setsockopt(zmq.LINGER, 0)
        if bind.endswith(":0"):  # any free port (tests); the slot's port otherwise
            port = self._pull.bind_to_random_port(bind[:-2])
            bind = f"{bind[:-2]}:{port}"
        else:
            self._pull.bind(bind)
        self.address = bind
        self._closed = False
        self.dropped = 0  # batches refused: bad HMAC or undecodable
        self._encode_errors: set[str] = set()  # logged once each (see _encode)
        self._thread = threading.Thread(target=self._receive_loop, name=f"squall-recv-{bind}", daemon=True)
        self._thread.start()

    def _mac(self, data: bytes) -> bytes:
        """The HMAC-SHA256 of a message under the cluster's secret (sent as its first frame)."""
        return hmac.new(self._secret, data, hashlib.sha256).digest()

    def set_receiver(self, receive: Callable[[int, Any], None]) -> None:
        """Where arriving items go (the worker's ``receive``)."""
        self._receive = receive

    def set_control_handler(self, handle: Callable[[Any], None]) -> None:
        """Where arriving control messages go (see `broadcast`)."""
        self._control = handle

    def broadcast(self, message: Any) -> None:
        """Send a small msgpack-able control message (backpressure state) to every peer worker."""
        data = msgpack.packb(message)
        mac = self._mac(data)
        with self._send_lock:
            for key in self._queues:
                self._send(key, [mac, data, _CONTROL])

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
                sock = self._sockets.pop(key, None)
                if sock is not None:
                    sock.close(0)
                self._unsent.pop(key, None)

    def sender(self, task_id: int) -> Callable[[Any], None]:
        q = self._task_queue.get(task_id)
        if q is None:
            raise KeyError(f"no worker hosts task {task_id}")
        append = q.append
        check = self._serializer.check
        plain = PLAIN_TYPES

        def send(item: Any) -> None:
            # Values are serialized at flush, after the emit has returned; check the few that
            # may fail now, so that the emit raises in the emitting component's code (which may
            # catch it) instead of the whole batch failing later, attributed to nobody.
            if type(item) is Tuple:
                for v in item.values:
                    if type(v) not in plain:
                        check(item)
                        break
            append((task_id, item))
        return send

    def flush(self) -> None:
        if not self._send_lock.acquire(blocking=False):
            return  # another loop of this worker is flushing; it takes our items too
        try:
            for key, q in self._queues.items():
                while q:
                    n = min(len(q), MAX_BATCH)
                    items = [q.popleft() for _ in range(n)]
                    data = self._encode(items)
                    self._send(key, [self._mac(data), data])
        finally:
            self._send_lock.release()

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

    def _send(self, key: str, frames: list[bytes]) -> None:
        sock = self._sockets.get(key)
        if sock is None:
            sock = self._ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDHWM, 1000)  # batches, not tuples: up to ~2M tuples queued
            sock.connect(self._address[key])
            self._sockets[key] = sock
        backlog = self._unsent.get(key)
        if backlog:
            backlog.append(frames)
            self._retry(key)
            return
        try:
            # copy=True: for frames of a few KB (a batch is ~7 KB) zero-copy sends measured slower
            # here, 16 vs 12 us per send
            _send_frames(sock, frames)
        except zmq.Again:
            # The peer is gone or slow. Keep the batch: sending must never block a loop (that
            # could deadlock the ack cycle); tuples that never arrive time out and replay.
            self._unsent.setdefault(key, []).append(frames)

    def _retry(self, key: str) -> None:
        backlog = self._unsent[key]
        sock = self._sockets[key]
        while backlog:
            try:
                _send_frames(sock, backlog[0])
            except zmq.Again:
                if len(backlog) > 1000:  # the peer has been away long: give the oldest up
                    del backlog[0]
                return
            del backlog[0]

    def _receive_loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._pull, zmq.POLLIN)
        recv, get = self._pull.recv, self._pull.get
        while not self._closed:
            try:
                if not poller.poll(200):
                    continue
                while not self._closed:  # every message already here, then poll again
                    try:
                        frames = [recv(_NOBLOCK)]
                    except zmq.Again:
                        break
                    while get(_RCVMORE):  # the rest of a message arrives with its first frame
                        frames.append(recv())
                    self._handle(frames)
            except zmq.ZMQError:
                if self._closed:
                    return
                raise

    def _handle(self, frames: list[bytes]) -> None:
        """Check and deliver one message: a batch of items, or a control message."""
        if len(frames) not in (2, 3) or (len(frames) == 3 and frames[2] != _CONTROL):
            self.dropped += 1
            log.warning("dropped a malformed batch (%d frames)", len(frames))
            return
        mac, data = frames[0], frames[1]
        if not hmac.compare_digest(mac, self._mac(data)):
            self.dropped += 1
            log.warning("dropped a batch that failed authentication (wrong secret?)")
            return
        if len(frames) == 3:
            if self._control is not None:
                try:
                    self._control(msgpack.unpackb(data))
                except Exception as e:
                    log.warning("bad control message: %s", e)
            return
        try:
            items = self._serializer.decode_batch(data)
        except Exception as e:
            self.dropped += 1
            log.warning("dropped an undecodable batch: %s", e)
            return
        receive = self._receive
        if receive is None:
            return
        for task, item in items:
            try:
                receive(task, item)
            except KeyError:
                # not (or no longer) ours, e.g. sent under an old assignment: as Storm, drop
                log.debug("dropped an item for task %s, not in this worker", task)

    def close(self) -> None:
        """Stop receiving and close the sockets."""
        self._closed = True
        self._thread.join(2)
        with self._send_lock:
            for sock in self._sockets.values():
                sock.close(0)
            self._sockets.clear()
        self._pull.close(0)
