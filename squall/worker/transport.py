"""`ZmqTransport`: items between worker processes, in batches over ZeroMQ.

Each worker binds one PULL socket on its slot's port and connects a PUSH socket to every peer
worker. Batching, sealing and opening are `squall.worker.batching.BatchingTransport`'s: a tuple
crossing processes pays for one ``send`` per batch, not per tuple. Items for tasks in this worker
never come here.

Every message is one frame, ``mac | header | data``: the header (`squall.worker.envelope`) names
the topology, the sending worker and launch, the receiving worker and a sequence number, and the
MAC (Poly1305, under a key of the sender's own derived from the cluster's secret) covers header
and data. A receiver
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

A peer that dies (its worker SIGKILLed) closes its connections; ZeroMQ's I/O thread reads every
connection, however idle, so it sees that at once, tells the transport (a monitor of each peer
socket, `ZmqTransport._heard`), and reconnects by itself. What a loop sends meanwhile (the
spouts' replays after the master's notice of the death) is not written into the dead
connection, nor given to ZeroMQ: the transport keeps it (`_unsent`, up to `SNDHWM` +
`MAX_UNSENT` messages, the oldest given up first) until ZeroMQ says the connection is made
again, to the peer's next launch at the same address, and hands it over then (at every flush
and, from the receiving thread, every `RETRY_SECS`, so it goes whether or not anything more is
sent to that peer). A peer whose next launch comes at another address (a Spark task) gets it
there, sealed again for it (`ZmqTransport._moved`). What was in flight when the peer died is
lost with it (and what ZeroMQ took before it said so, if the peer comes back elsewhere); the
master's notice fails it (it was sent before the notice).

A peer that goes silent without closing its connections (a partition, a lost machine) gives
ZeroMQ nothing to see. Its connection is kept, and only looked at, as the TCP wire's
(`squall.worker.tcp`): each peer socket's monitor tells the descriptor of its connection
(``EVENT_CONNECTED``; forgotten at ``EVENT_DISCONNECTED``/``EVENT_CLOSED``, so a descriptor
reused after a disconnect is not asked about for that peer), and about once a second (a flush,
or the receiving thread's `RETRY_SECS` work: one comparison of times otherwise, nothing per
message) `ZmqTransport._check_reach` asks the kernel (``TCP_INFO``, through a duplicate of the
descriptor: `squall.worker.tcp_info`) how long what was sent on it has gone unacknowledged. Past
``silent_secs`` (half the topology's message timeout, between 3 and `SILENT_SECS`, 10 s:
`squall.worker.batching.silent_bound`) the transport logs once which worker (address, tasks,
components) it cannot reach and counts it (`statistics`, ``peer_breaks`` and ``unreachable``: the
master's topology info per worker), and says after how long once it acknowledges again; the
kernel retransmits meanwhile, so what was sent is delivered after the heal. No
``TCP_MAXRT`` (Linux's ``TCP_USER_TIMEOUT``): Linux applies it to a receiver that keeps its window
closed too (a stopped worker, a frozen VM, answering the window probes), whose connection it
closed, losing what the kernels held for it (597 of 14,476 messages to a worker stopped 6 s under
a 3 s bound); such a receiver acknowledges all that was sent, so it is not called unreachable
and loses nothing. What waits on a silent connection reaches the peer within about a second of
the heal, not at the kernel's next retransmission (200 ms doubling: 12.6 s after the cut began),
as on the TCP wire (`squall.worker.reconnect`): its backoff is capped, and what could not leave
pushed (`_retry_sooner`, through the descriptor). An idle connection is closed once keepalive
probes went unanswered for about ``silent_secs`` (``TCP_KEEPALIVE*``; nothing waits on it, and a
stopped peer's kernel answers them): its monitor says the connection went, as at a death,
the peer is named the same way, what is sent to it waits in `_unsent`, and once a connection is
made again (an attempt to connect is given up after half the bound, so one starts soon after
the network heals) it says after how long. A spout whose tuples time out meanwhile names that
worker as the cause (`squall.engine.transport.PeerReach`). The PULL socket's connections are
closed so only after ``squall.tcp.keepalive.secs`` (60 s), as the TCP wire's accepted ones: at
the bound, a receiver closed a connection on which the sender's kernel still held data (an 8 s
cut), refused its retransmissions at the heal, and those tuples were lost (replayed at the
message timeout: the first tuple crossed 51.7 s after the heal).
Not ZMTP heartbeats (``HEARTBEAT_IVL``): with them the receiving end writes PONGs, and libzmq
4.3.5 aborts the process when a read error and a write come in one batch of events
(``Assertion failed: !_io_error (src/stream_engine_base.cpp:310)``, libzmq issue 4841), which
killed a worker at the heal of a 25 s partition.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from .._encryption import AUTO, NEVER
from .._encryption import KEY as ENCRYPTION_KEY
from ..engine.transport import IntoReceiver
from . import curve
from .batching import DEFAULT_MAX_MESSAGE_BYTES, MAX_BATCH, MAX_MESSAGE_KEY, SILENT_SECS, BatchingTransport
from .envelope import DATA, Origin, sealed_parts
from .reconnect import kernel_retries, retry_sooner, set_rto_max
from .tcp_info import REACH_CHECK_SECS, Unacknowledged, borrowed, fd_unacknowledged

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "MAX_BATCH", "MAX_MESSAGE_KEY", "ZmqTransport", "receive_queue_limit"]

log = logging.getLogger("squall.worker")

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
# What CurveZMQ adds to each frame, which ZeroMQ counts against MAXMSGSIZE: its MESSAGE
# command's name (8 bytes), nonce (8), flags (1) and Poly1305 tag (16); measured, at any size
_CURVE_OVERHEAD = 33
# Messages ZeroMQ queues per connection before it stops reading from it: 256 MB divided by the
# largest message size, but at least 8 and at most 1,000 messages. So a connection holds at most
# 256 MB of messages when the bound is 32 MB or less; above, 8 of the largest (512 MB at the
# default 64 MB). 1,000 messages is a burst of ~7 MB of ordinary ~7 KB batches.
# Messages ZeroMQ holds for a peer, connected or not (a batch is ~7 KB), and how many more
# `_unsent` keeps once it holds that many (the oldest given up first: the peer has been away
# long, and the master moves its tasks or their tuples time out).
SNDHWM = 1000
MAX_UNSENT = 1000
# How often the receiving thread hands `_unsent` to ZeroMQ again while something waits there
RETRY_SECS = 0.1
_RECEIVE_BUDGET = 256 * 1024 * 1024
_RCVHWM_MIN, _RCVHWM_MAX = 8, 1000
_HANDSHAKE_FAILED = int(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                        | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
# Plain ints: pyzmq's send_multipart/recv_multipart combine its Flag enums in Python on every
# frame, which was 4% of a worker's GIL time at 30,000 tuples/s between 2 workers.
_NOBLOCK = int(zmq.NOBLOCK)
# what a peer socket's watch is told (`ZmqTransport._heard`): a connection made is the handshake,
# not the TCP connection (a connection to a relay, or to a port whose process does not answer, is
# made at once and carries nothing; ZeroMQ hands messages over only after it); the TCP connection
# and its closing tell the descriptor that `_check_reach` asks the kernel about (the event's value)
_CONNECTION_EVENTS = int(zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
                         | zmq.EVENT_CLOSED)
_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)
_RCVMORE = int(zmq.RCVMORE)
# the lowest cap of a connection's retransmission backoff (`squall.worker.reconnect`), and
# squall.tcp.keepalive.secs: the TCP wire's defaults (`squall.worker.tcp.TcpTransport`)
MAX_WAIT_SECS = 1.0
KEEPALIVE_SECS = 60.0


def _keep_alive(sock: zmq.Socket, silent_ms: int) -> None:
    """Have the kernel close ``sock``'s idle connections whose other end has not answered
    keepalive probes for about ``silent_ms`` (probes after half of it idle, three a sixth apart,
    as `squall._connlimit.keep_alive`; whole seconds)."""
    sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
    sock.setsockopt(zmq.TCP_KEEPALIVE_IDLE, max(1, silent_ms // 2000))
    sock.setsockopt(zmq.TCP_KEEPALIVE_INTVL, max(1, silent_ms // 6000))
    sock.setsockopt(zmq.TCP_KEEPALIVE_CNT, 3)


def receive_queue_limit(max_message_bytes: int) -> int:
    """``RCVHWM`` for a data port taking messages of up to ``max_message_bytes``."""
    return max(_RCVHWM_MIN, min(_RCVHWM_MAX, _RECEIVE_BUDGET // max(1, max_message_bytes)))


class ZmqTransport(BatchingTransport):
    """Batches items per peer worker and sends them over ZeroMQ; receives this worker's.

    Args:
        bind: address to bind this worker's PULL socket to, e.g. ``tcp://127.0.0.1:6700``
            (port 0: any free port; `address` tells which).
        peers, serializer, secret, receive, origin, max_message_bytes: as `BatchingTransport`'s,
            and its other keyword arguments (``batching``).
        encryption: ``squall.encryption``: ``"auto"``, ``"true"`` or ``"false"`` (`squall.worker.curve`).
        silent_secs: a peer whose kernel acknowledges nothing for this long is unreachable (`SILENT_SECS`;
            a worker's: `squall.worker.batching.silent_bound` of its topology's message timeout).
        keepalive: ``squall.tcp.keepalive.secs``: a connection from a peer (the PULL socket's)
            whose other end has not answered keepalive probes for about this long is closed, as
            the TCP wire's accepted ones; a peer's connection, idle, after at most ``silent_secs``.
        max_wait: ``storm.messaging.netty.max_wait_ms`` in seconds: the lowest cap of a connection's
            retransmission backoff (at least 1 s), raised as a silence lasts (`squall.worker.reconnect`).
    """

    def __init__(self, bind: str, peers: dict[int, str], serializer: Any, secret: bytes,
                 receive: Callable[[int, Any], None] | None = None, ctx: zmq.Context | None = None, *,
                 origin: Origin, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 encryption: str = AUTO, silent_secs: float = SILENT_SECS, keepalive: float = KEEPALIVE_SECS,
                 max_wait: float = MAX_WAIT_SECS, **batching: Any) -> None:
        super().__init__(peers, serializer, secret, receive, origin=origin, max_message_bytes=max_message_bytes,
                         **batching)
        self._ctx = ctx or zmq.Context.instance()
        # messages as they came off the wire, waiting for a loop's `poll` to check and deliver them
        self._arrived: deque[bytes] = deque()
        self._waiting_since = 0.0  # when the oldest message in _arrived came
        self._encryption = encryption
        self._silent_ms = max(1, int(silent_secs * 1000))  # a peer silent this long is unreachable
        self._keepalive_ms = max(1, int(keepalive * 1000))
        self._keys = curve.server_keys(secret) if encryption != NEVER else None
        self._sockets: dict[str, zmq.Socket] = {}
        self._unsent: dict[str, list[bytes]] = {}
        # per peer socket, what ZeroMQ says of its connection (`_heard`); the peers whose
        # connection went (a dead worker: what is sent to it waits in `_unsent`, where a move to
        # a new address can take it), and those of which something was given up
        self._watches: dict[str, zmq.Socket] = {}
        self._away: set[str] = set()
        self._gave_up: set[str] = set()
        # per peer socket, the descriptor of its TCP connection (ZeroMQ's: only read, through a
        # duplicate), while it is connected (`_check_reach`)
        self._fds: dict[str, int] = {}
        # per connected peer socket, the cap of its connection's retransmission backoff (0.0: the
        # kernel's own, as it takes none): `_retry_sooner`
        self._rto_max: dict[str, float] = {}
        self._rto_floor = max(1.0, max_wait)
        self._retries = kernel_retries()  # net.ipv4.tcp_retries2, for `squall.worker.reconnect.rto_cap`
        self._reach_at = 0.0  # when `_check_reach` looks next
        self._unacknowledged = fd_unacknowledged  # what the kernel says of a descriptor (a test's)
        self._pull = self._ctx.socket(zmq.PULL)
        self._pull.setsockopt(zmq.LINGER, 0)
        self.encrypted = self._keys is not None and curve.wants_encryption(encryption, bind)
        self._pull.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes + (_CURVE_OVERHEAD if self.encrypted else 0))
        self._pull.setsockopt(zmq.RCVHWM, receive_queue_limit(self.max_message_bytes))
        # a connection from a peer gone for good (its machine lost, or its kernel gave the
        # connection up while a partition dropped its reset) is closed, so that none piles up;
        # not at the silence bound: what the peer's kernel holds for a live connection cut off
        # shorter than this reaches it at the heal (closed, its retransmissions would be refused,
        # and the tuples in them replayed only at the message timeout). Naming a silent peer is
        # the sending end's (`_check_reach`, its own keepalive): this end writes nothing to ask.
        _keep_alive(self._pull, self._keepalive_ms)
        self._pull.setsockopt(zmq.RCVTIMEO, 200)  # the receiving thread looks at `_closed` this often
        self._discard = bytearray()  # the extra frames of a multipart message go into nothing
        if self.encrypted and self._keys is not None:  # encrypted: there are keys
            curve.make_server(self._pull, self._keys)
        self._monitor = self._pull.get_monitor_socket(_HANDSHAKE_FAILED) if self.encrypted else None
        if bind.endswith(":0"):  # any free port (tests); the slot's port otherwise
            port = self._pull.bind_to_random_port(bind[:-2])
            bind = f"{bind[:-2]}:{port}"
        else:
            self._pull.bind(bind)
        self._listening(bind)
        if self.encrypted:
            log.info("data port %s is encrypted (CurveZMQ, %s=%s)", bind, ENCRYPTION_KEY, encryption)
        self._thread = threading.Thread(target=self._receive_loop, name=f"squall-recv-{bind}", daemon=True)
        self._thread.start()

    def set_receiver(self, receive: Callable[[int, Any], None],
                     receive_batch: Callable[[list], int] | None = None,
                     receive_into: IntoReceiver | None = None) -> None:
        """Where arriving items go: the worker's ``receive``, or ``receive_into`` and
        ``receive_batch`` for the items of a batch a loop takes with `poll` (once ``on_arrival``
        is set; until then the receiving thread delivers each item to ``receive`` itself)."""
        super().set_receiver(receive, receive_batch, receive_into)

    def _moved(self, key: str) -> bool:
        """The peer's worker restarted at a new address (a Spark task elsewhere). What waits in
        `_unsent` since its connection went (the spouts' replays at the master's notice among
        it) goes to the new address, sealed again for it. Lost, and so returns True: what
        ZeroMQ held for the old address, unless the connection went before it was given (it
        was sent before the notice, which failed it), and what was given up."""
        sock = self._sockets.pop(key, None)
        if sock is None:
            return False
        self._heard(key)
        lost = key not in self._away or key in self._gave_up
        self._forget(key, sock)
        for message in self._unsent.pop(key, ()):
            kind, data = sealed_parts(message)
            if kind == DATA:
                self._send_data(key, bytes(data))  # sealed for the new route (split if it grew too long)
            else:
                self._send(key, self._sealer.seal(kind, self._route(key), bytes(data)))
        return lost

    def _forget(self, key: str, sock: zmq.Socket) -> None:
        """Close ``key``'s socket and its watch (under the send lock)."""
        watch = self._watches.pop(key, None)
        if watch is not None:
            sock.disable_monitor()
            watch.close(0)
        sock.close(0)
        self._fds.pop(key, None)
        self._rto_max.pop(key, None)
        self._silent.discard(key)
        self.reach.forget(key)
        self._away.discard(key)
        self._gave_up.discard(key)

    def _heard(self, key: str) -> None:
        """Take what ZeroMQ said of ``key``'s connection: gone (the peer's worker died: from now
        on what is sent to it waits in `_unsent`, not in ZeroMQ, which could not give it up for a
        move), or made again (its next launch at the same address: it goes on to ZeroMQ)."""
        watch = self._watches.get(key)
        while watch is not None and int(watch.get(_EVENTS)) & _POLLIN:
            told = recv_monitor_message(watch, _NOBLOCK)
            event = told["event"]
            if event == zmq.EVENT_CONNECTED:
                fd = self._fds[key] = int(told["value"])  # its descriptor
                # a lost packet is sent again within the floor (1 s): `_retry_sooner` raises the
                # cap while the peer is silent
                with borrowed(fd) as sock:
                    capped = sock is not None and set_rto_max(sock, self._rto_floor)
                self._rto_max[key] = self._rto_floor if capped else 0.0
            elif event == zmq.EVENT_DISCONNECTED or event == zmq.EVENT_CLOSED:
                # ZeroMQ closed the descriptor, which may now be reused for anything
                self._fds.pop(key, None)
                self._rto_max.pop(key, None)
                self._silent.discard(key)
                if event == zmq.EVENT_DISCONNECTED:
                    self._away.add(key)
                    self._unreachable(key, f"its connection closed (the worker stopped or died, or, idle, its "
                                           f"machine answered no keepalive probe for about "
                                           f"{self._silent_ms / 1000:g} s: a partition, a lost machine)")
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._away.discard(key)
                self._reached(key)

    def _send(self, key: str, message: bytes) -> None:
        sock = self._sockets.get(key)
        if sock is None:
            address = self._address[key]
            sock = self._ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDHWM, SNDHWM)  # batches, not tuples: up to ~2M tuples queued
            # a silent peer is found by `_check_reach`, its connection kept; no TCP_MAXRT, which
            # would close a stopped peer's too (its window closed), losing what the kernels held
            # (the module docstring). An idle connection's silence is keepalive's to find.
            _keep_alive(sock, min(self._keepalive_ms, self._silent_ms))
            # without it, an attempt to connect to an unreachable machine waits out the kernel's
            # SYN retries (about 2 min), and the connection is made again that long after a heal
            sock.setsockopt(zmq.CONNECT_TIMEOUT, max(1, self._silent_ms // 2))
            # a connection made whose handshake does not come (through a relay to a silent peer)
            # is closed as soon, and tried again
            sock.setsockopt(zmq.HANDSHAKE_IVL, self._silent_ms)
            if self._keys is not None and curve.wants_encryption(self._encryption, address):
                curve.make_client(sock, self._keys.public)
            self._watches[key] = sock.get_monitor_socket(_CONNECTION_EVENTS)
            sock.connect(address)
            self._sockets[key] = sock
        self._heard(key)
        backlog = self._unsent.get(key)
        if backlog or key in self._away:
            if backlog is None:
                backlog = self._unsent[key] = []
            backlog.append(message)
            self._retry(key)
            return
        try:
            # copy=True: for frames of a few KB (a batch is ~7 KB) zero-copy sends measured slower
            # here, 16 vs 12 us per send
            sock.send(message, _NOBLOCK)
        except zmq.Again:
            # ZeroMQ holds SNDHWM messages for the peer, connected or not (it reconnects by
            # itself, and delivers them to the peer's next launch at the same address). Past
            # that, the peer is gone or slow: keep the batch, for `_retry` (sending must never
            # block a loop: that could deadlock the ack cycle).
            self._unsent[key] = [message]

    def _retry(self, key: str) -> None:
        """Hand ZeroMQ what waits for ``key``, until it holds no more, unless the peer's
        connection is gone (under the send lock)."""
        backlog = self._unsent[key]
        sock = self._sockets[key]
        self._heard(key)
        if key in self._away:
            # as much as ZeroMQ and `_unsent` held together before: the oldest given up first
            if len(backlog) > SNDHWM + MAX_UNSENT:
                self._gave_up_messages(key, len(backlog) - SNDHWM - MAX_UNSENT)
                del backlog[:len(backlog) - SNDHWM - MAX_UNSENT]
                self._gave_up.add(key)
            return
        while backlog:
            try:
                sock.send(backlog[0], _NOBLOCK)
            except zmq.Again:
                if len(backlog) > MAX_UNSENT:  # the peer has been away long: give the oldest up
                    del backlog[0]
                    self._gave_up.add(key)
                    self._gave_up_messages(key, 1)
                return
            del backlog[0]
        del self._unsent[key]

    def _held_messages(self, key: str) -> tuple[int, bool]:
        return len(self._unsent.get(key, ())), key in self._away

    def _flush_locked(self) -> None:
        for key in list(self._unsent):  # peers that were away or slow: try again
            self._retry(key)
        self._check_reach_due()
        super()._flush_locked()

    def _check_reach_due(self) -> None:
        """`_check_reach` if it has not looked for `REACH_CHECK_SECS` (under the send lock): one
        comparison otherwise."""
        now = self._now()
        if now >= self._reach_at:
            self._reach_at = now + REACH_CHECK_SECS
            self._check_reach()

    def _check_reach(self) -> None:
        """Say which connected peers acknowledged nothing sent to them for ``silent_secs``
        (unreachable: a partition, a lost machine), and which of those acknowledge again; their
        connections are kept (the module docstring). What waits on a silent connection is sent
        again sooner (`_retry_sooner`). What the watches said is taken first, so no descriptor
        closed since is asked about (under the send lock)."""
        for key in list(self._watches):
            self._heard(key)
        silences: dict[str, float] = {}
        for key, fd in self._fds.items():
            waiting = self._unacknowledged(fd)
            silences[key] = waiting.secs
            rto_max = self._rto_max.get(key, 0.0)
            if waiting.secs > 0.0 or (rto_max and rto_max != self._rto_floor):
                self._retry_sooner(key, fd, waiting)
        self._check_silences([(key, key) for key in silences], silences.__getitem__, self._silent_ms / 1000)

    def _retry_sooner(self, key: str, fd: int, waiting: Unacknowledged) -> None:
        """As the TCP wire's (`squall.worker.reconnect.retry_sooner`), on ZeroMQ's connection
        (descriptor ``fd``) to ``key``: what waits on it for a silent peer reaches the peer within
        about a second of a heal, not at the kernel's next retransmission or probe (up to 2 min
        later); its cap back at the floor once the peer acknowledges again. ZeroMQ set
        ``TCP_NODELAY`` on it already, so the push changes nothing else."""
        with borrowed(fd) as sock:
            if sock is None:
                return
            if waiting.secs > 0.0:
                self._rto_max[key] = retry_sooner(sock, waiting.secs, waiting.segments, self._rto_max.get(key, 0.0),
                                                  self._rto_floor, self._retries)
            elif set_rto_max(sock, self._rto_floor):  # the peer acknowledges again
                self._rto_max[key] = self._rto_floor

    def _retry_unsent(self) -> None:
        """From the receiving thread, every `RETRY_SECS`: what waits in `_unsent` goes once the
        peer (its next launch) takes it, whether or not a loop sends or flushes; and the
        connections' events are taken (`_heard`), so that none piles up unread."""
        if not self._send_lock.acquire(blocking=False):
            return  # a loop is sending or flushing: again at the next tick
        try:
            if not self._closed:
                for key in list(self._watches):
                    self._heard(key)
                for key in list(self._unsent):
                    self._retry(key)
                self._check_reach_due()
                self._check_held()  # a peer took what waited for it: the spouts may go again
        finally:
            self._send_lock.release()
        self._released()

    def _receive_loop(self) -> None:
        # One blocking receive per message (RCVTIMEO bounds it, for `close`), not a Poller and
        # non-blocking receives: each of these calls gives the GIL up and takes it back, and each
        # take-back while the loop runs makes the loop wait for the GIL in turn
        recv, get = self._pull.recv, self._pull.get
        monitor = self._monitor
        retry_at = 0.0
        while not self._closed:
            try:
                try:
                    message = recv()
                except zmq.Again:
                    message = None
                now = monotonic()
                if now >= retry_at:
                    # batches a peer away did not take: handed over once it is back; and what
                    # ZeroMQ says of the connections, taken while nothing is sent on them too
                    retry_at = now + RETRY_SECS
                    self._retry_unsent()
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
        assert self._monitor is not None  # watched only when encrypted
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

    def close(self) -> None:
        """Stop receiving and close the sockets."""
        self._closed = True
        self._thread.join(2)
        with self._send_lock:
            for key, sock in list(self._sockets.items()):
                self._forget(key, sock)
            self._sockets.clear()
        if self._monitor is not None:
            self._pull.disable_monitor()
            self._monitor.close(0)
        self._pull.close(0)
