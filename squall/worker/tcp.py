"""`TcpTransport`: items between worker processes over plain TCP, moved by the worker's own loops.

`squall.worker.transport.ZmqTransport` moves each message through three helper threads: ZeroMQ's
I/O thread in the sender, ZeroMQ's I/O thread and squall's receiving thread in the receiver. On
two busy cores that is ~4,500 voluntary and ~3,700 involuntary thread switches a second in a
2-worker W1 run, against ~600 and ~370 when nothing crosses (docs/profiles/w1-scaling-model.md),
and every one of them takes a core from a loop. Here no thread wakes per message: the loop that
flushes writes each sealed message to its peer's socket itself, without blocking, and the loop
that polls reads its sockets itself, at the start of each round. A loop with nothing to do
sleeps in ``poll(2)`` on its wake-up descriptor and on this transport's epoll descriptor
(`loop_event`), so the data that arrives for a sleeping worker wakes its loop directly. One
thread, the watchman, sleeps until no loop has polled for `STALE_SECS` and something has come
to read (without the GIL, in `squall._native.StaleWatch`) and then reads for the loops (they are
in a long round: a slow bolt), so that a flood still reaches the inboxes and flips backpressure;
it also looks at the peers' reach for them about once a second while none polls (below).

The wire is a stream of frames per connection: a 4-byte big-endian length, then one message
sealed as `squall.worker.envelope` says (MAC, header, data), checked before anything in it is
decoded. A frame longer than ``squall.transport.max.message.bytes`` closes its connection before
it is read, and connections that have sent nothing authentic yet hold their unfinished frames
within that bound together and for at most `UNTRUSTED_SECS`, so strangers cannot make a worker
hold more. Each sending worker has one
connection to each peer, so one sender's messages arrive in order, as the envelope's replay
check needs. A message that cannot be written now waits in its peer's backlog (at most
`MAX_BACKLOG` messages, the oldest given up first), which the next flush, or the loop that
sees the socket writable, writes on; a loop never blocks on a peer (that could deadlock the ack
cycle).

A connection to a peer that died breaks: what was written on it and not yet read by the peer
is lost with it. Every outbound connection is watched for the peer's hang-up (``EPOLLRDHUP``),
so a worker learns of it at its next poll, before the master's notice of the death, and sends
what follows to the backlog, for the peer's next launch (the process host restarts it at the
same address; a Spark task comes back at another, where the backlog goes, sealed again for
it: `TcpTransport._moved`), rather than into the dead connection; a message whose write fails waits in the
backlog too. What was written before the worker saw the hang-up was emitted before the master's
notice of the death, which fails it at once (`Worker.tasks_lost`); what is emitted after the
notice (the spouts' replays) reaches the peer's next launch, where Storm's netty client wrote it
into the dead connection and left it to one to two message timeouts. A notice that comes late,
after the next launch has sent this worker a message, fails only what was sent before the
connection to it was made, or without one, before that launch was first heard from
(`TcpTransport.loss_age`): what was sent since, that launch took, and a DRPC call it answered
must not fail. A peer stopped on purpose (a rebalance, a kill) hangs up
the same way and fails nothing.

A peer cut off by a partition (or whose machine is lost) hangs up nothing: what is written to it
stays unacknowledged in the kernel. The data path sets no ``TCP_USER_TIMEOUT``, which Linux also
applies to a receiver that keeps its window closed (a stopped worker, or one in a long round):
closing the connection then loses what the receiver's kernel took and its worker did not read,
whereas waiting loses nothing. So the connection is kept, and only looked at: about once a second
(`TcpTransport._check_reach`, from a loop's flush, from a working loop's `flush_due` when due: one
never idle never flushes, or from the watchman while no loop polls: one stuck in user code does
neither) each connected peer's kernel tells whether segments
sent wait for its acknowledgement and how long ago the last one came (``TCP_INFO``:
`unacknowledged_for`). A receiver with its window closed has acknowledged all that was sent (the
rest waits for the window to open), so it stays reachable; a peer that acknowledged none of the
segments sent to it for ``silent_secs`` is unreachable: the
transport logs once which worker (address, tasks, components), counts it (``peer_breaks``,
``unreachable``: the master's topology info per worker) and says its return once bytes are
acknowledged again, as `squall.worker.transport.ZmqTransport` does (one `PeerReach` for both). The
kernel goes on retransmitting meanwhile, so what was written is delivered after the heal, soon
after it: the transport caps the kernel's backoff, and times its own attempts to connect out
(`squall.worker.reconnect`; a sleeping loop is woken for them: `LoopEvent`; for a loop stuck in
user code the watchman raises the cap). An idle
connection (its worker's spouts wait for acks the partition holds) is found silent by keepalive
probes within ``silent_secs`` too, which close it and say so the same way: nothing sent waits on
it, and a stopped peer's kernel answers them.

This wire does not encrypt: the worker process uses it only where ``squall.encryption`` asks
for no encryption of the address (`squall._encryption.address_wants_encryption`: ``auto`` encrypts
everything but loopback), and `ZmqTransport` with CurveZMQ everywhere else.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import socket
import threading
from collections import deque
from collections.abc import Callable, Sized
from time import monotonic
from typing import Any, cast

from .._connlimit import keep_alive
from .._encryption import AUTO
from .._encryption import KEY as ENCRYPTION_KEY
from .._encryption import address_wants_encryption as wants_encryption
from .._native import StaleWatch, epoll_ready, recv_nb, send_nb
from .batching import DEFAULT_MAX_MESSAGE_BYTES, SILENT_SECS, BatchingTransport
from .envelope import DATA, Origin, sealed_parts
from .reconnect import connect_wait, kernel_retries, retry_sooner, set_rto_max
from .resolver import PeerResolver, Resolved, lookup_address
from .tcp_info import REACH_CHECK_SECS, unacknowledged

log = logging.getLogger("squall.worker")

_LENGTH = 4                 # a frame's length prefix, big-endian
_RECV_BYTES = 256 * 1024    # read from a socket at once
# read at most this much from one connection in one `poll`: a flood into a worker in a long
# round is delivered a round at a time, so that its inboxes (and backpressure) see it in steps
_POLL_BYTES = 4 * 1024 * 1024
# A loop that has not polled for this long is in a long round (a slow bolt): the transport's
# watchman reads for it, so that its inboxes, and backpressure, see what arrives. A flood into a
# bolt taking 1 ms a tuple (rounds of a second) filled its inbox with 71,408 tuples before the
# spout heard "over" when only the loops read, 14,704 with a watchman looking every 10 ms, and
# 3,674-5,866 (3 runs) every 5 ms; tests/process/test_recovery.py bounds it at 10,000. Looking
# costs an idle worker 200 wake-ups a second, against ~1,000 per message flow with ZeroMQ.
STALE_SECS = 0.005
MAX_BACKLOG = 1000          # messages kept for a peer that does not take them (~7 MB of batches)
# between attempts to connect to a peer that refused (its machine answers: no backoff needed), and
# the timeout of the first attempt to one that answers nothing (doubling per attempt up to
# MAX_WAIT_SECS: `squall.worker.reconnect`); storm.messaging.netty.min_wait_ms and max_wait_ms
MIN_WAIT_SECS = 0.1
MAX_WAIT_SECS = 1.0
# connections kept at once: past it, a new one replaces the oldest that has sent no authentic
# message, so strangers' idle connections cannot shut the peers out
MAX_INBOUND = 256
# Connections that have sent no authentic message yet hold their unfinished frames within one
# message's bound together (not each: 256 strangers a byte short of 64 MB held 16 GiB), and for
# at most this long: a peer's first frame is whole within it even at the bound, a stranger's
# trickle is closed
UNTRUSTED_SECS = 10.0
_EPOLLIN, _EPOLLOUT = select.EPOLLIN, select.EPOLLOUT
_BROKEN = select.EPOLLERR | select.EPOLLHUP
# What an outbound connection is watched for all along: the peer closed it (it died, or exited).
# A peer never writes on a connection it accepted, so anything to read there is its end too.
_HANGUP = select.EPOLLRDHUP
_PEER_GONE = _HANGUP | _EPOLLIN | _BROKEN
_GONE_EVENTS = select.POLLRDHUP | select.POLLIN | select.POLLHUP | select.POLLERR  # the same, to poll(2)
_WOULD_BLOCK = (BlockingIOError, InterruptedError)
# how the kernel says it gave a connection up (`TcpTransport._break_cause`): timed out, or the
# error an ICMP message said meanwhile (a soft error on a connection made, reported only then)
_GAVE_UP = (errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH)


def split_address(address: str) -> tuple[str, int]:
    """``tcp://host:port`` (host may be ``[v6]``) as ``(host, port)``.

    Raises:
        ValueError: not a ``tcp://host:port`` address.
    """
    scheme, sep, rest = address.partition("://")
    host, colon, port = rest.rpartition(":")
    if scheme != "tcp" or not sep or not colon or not host or not port.isdigit():
        raise ValueError(f"{address!r} is not a tcp://host:port address")
    return host.strip("[]"), int(port)


class _Inbound:
    """A connection from a peer: the bytes of the frame it is in the middle of, whether a
    message from it has passed the envelope's checks, and where it comes from (``host:port``,
    what a warning about it names: a stranger has no slot to be known by)."""

    __slots__ = ("buffer", "peer", "since", "sock", "trusted")

    def __init__(self, sock: socket.socket, since: float, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        self.buffer = bytearray()
        self.trusted = False
        self.since = since  # when it connected: untrusted, it must be authentic within UNTRUSTED_SECS


class _Outbound:
    """The connection to a peer and what it has not taken yet (under the send lock)."""

    __slots__ = ("attempts", "away", "backlog", "broken_at", "connect_by", "connected_at", "connecting", "gave_up",
                 "gave_up_at", "resolving", "retry_at", "rto_max", "sock", "unacknowledged_since", "watched")

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.connecting = False
        self.resolving = False  # its host name is being looked up (`squall.worker.resolver`): no socket yet
        self.gave_up = False  # a frame of the backlog was given up (too many, or refused)
        # when (the transport's clock) the last frame was given up, the last connection made,
        # and the last one broke or was refused: what bounds what a dead peer may have lost
        self.gave_up_at = 0.0
        self.connected_at = 0.0
        self.broken_at = 0.0
        self.backlog: deque[memoryview] = deque()  # frames not written, the first maybe in part
        self.retry_at = 0.0
        # attempts to connect abandoned in a row (the peer answered nothing in time), and when the
        # one being made is abandoned: `squall.worker.reconnect`
        self.attempts = 0
        self.connect_by = 0.0
        self.rto_max = 0.0  # the cap of the connection's retransmission backoff (0.0: the kernel's own)
        # since when (the transport's clock) the peer has acknowledged nothing written to it, as
        # the last `_check_reach` found; 0.0: nothing written waited then. What a break says (`_broken`)
        self.unacknowledged_since = 0.0
        self.watched = False  # watched for EPOLLOUT too (always for the peer's hang-up while connected)
        # the connection broke or was refused, and none has been made since: a connection being
        # made again is not the peer back (a lost machine answers no SYN for minutes)
        self.away = False


class LoopEvent:
    """A `threading.Event` for a loop of a `TcpTransport`'s worker: `wait` also returns when
    the transport has something to read or write (its epoll descriptor is readable), so a
    sleeping loop hears its peers without a thread to tell it, and when the transport has
    something of its own to look at again (``due``: seconds, or None), so that a loop asleep
    while its peer is cut off flushes, and the wire tries the peer again, on the wire's time.

    `set` writes an ``eventfd`` only when the flag was clear, so waking a busy loop, or one
    already woken, costs no system call.
    """

    def __init__(self, epoll_fd: int, due: Callable[[], float | None] = lambda: None) -> None:
        self._due = due
        self._flag = False
        self._fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._poller = select.poll()
        self._poller.register(self._fd, select.POLLIN)
        self._poller.register(epoll_fd, select.POLLIN)

    def is_set(self) -> bool:
        """`threading.Event.is_set`: whether `set` was called since the last `clear` (no system call)."""
        return self._flag

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            try:
                os.eventfd_write(self._fd, 1)
            except OSError:  # closed: its loop has ended
                pass

    def clear(self) -> None:
        # the flag first: a `set` between the two then writes again, and is not lost
        self._flag = False
        try:
            os.eventfd_read(self._fd)
        except OSError:  # nothing written (EAGAIN), or closed
            pass

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep until `set`, something to read or write, or ``timeout`` seconds; True if set."""
        if not self._flag:
            due = self._due()
            if due is not None:
                timeout = due if timeout is None else min(timeout, due)
            try:
                self._poller.poll(None if timeout is None else max(0.0, timeout) * 1000.0)
            except (OSError, ValueError):  # the transport closed under a sleeping loop: wake it
                pass
        return self._flag

    def __del__(self) -> None:
        # Not closed with the transport: a loop that outlived its worker (stuck in user code)
        # may still set it, and a closed number may since belong to another file.
        os.close(self._fd)


class TcpTransport(BatchingTransport):
    """Batches items per peer worker and sends them over plain TCP from the worker's loops;
    see the module docstring.

    Args:
        bind: address to listen on, e.g. ``tcp://127.0.0.1:6700`` (port 0: any free port;
            `address` tells which).
        peers, serializer, secret, receive, origin, max_message_bytes, transfer_batch_size,
            flush_interval_ms: as `BatchingTransport`'s.
        encryption: ``squall.encryption``: a peer whose address it would encrypt is refused
            (its worker uses `ZmqTransport`), with an error in the log.
        now: what time it is (``time.monotonic`` by default), for reconnecting and the flush interval.
        keepalive: ``squall.tcp.keepalive.secs``: an idle connection, either way, whose other
            end has not answered keepalive probes for about this long is closed
            (`squall._connlimit.keep_alive`).
        silent_secs: a peer that acknowledges nothing written to it for this long is said to be
            unreachable (its connection is kept: the module docstring; `SILENT_SECS`).
        min_wait, max_wait: ``storm.messaging.netty.min_wait_ms`` and ``max_wait_ms``, in
            seconds: the wait before connecting again to a peer that refused, and the timeouts of
            the attempts to connect to one that answers nothing, doubling from ``min_wait`` up to
            ``max_wait``; ``max_wait`` (at least 1 s) also caps the retransmission backoff of a
            connection that stays up (`squall.worker.reconnect`).
        resolve: ``(host, port) -> (family, address)``, the lookup of a peer's host name
            (`squall.worker.resolver.lookup_address`, blocking): run on a thread of its own, never
            on a loop's (`PeerResolver`); a test passes a slow one.

    Raises:
        ValueError: ``bind`` is not a ``tcp://host:port`` address, or ``min_wait`` is above
            ``max_wait``.
        OSError: the port cannot be bound.
    """

    def __init__(self, bind: str, peers: dict[int, str], serializer: Any, secret: bytes,
                 receive: Callable[[int, Any], None] | None = None, *, origin: Origin,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, encryption: str = AUTO,
                 now: Callable[[], float] = monotonic, keepalive: float = 60.0, silent_secs: float = SILENT_SECS,
                 min_wait: float = MIN_WAIT_SECS, max_wait: float = MAX_WAIT_SECS,
                 resolve: Callable[[str, int], Resolved] = lookup_address, **batching: Any) -> None:
        if not 0 < min_wait <= max_wait:
            raise ValueError(f"the wait between attempts to connect must grow from min_wait ({min_wait:g} s) up to "
                             f"max_wait ({max_wait:g} s)")
        super().__init__(peers, serializer, secret, receive, origin=origin, max_message_bytes=max_message_bytes,
                         now=now, **batching)
        self._encryption = encryption
        self._keepalive = keepalive  # squall.tcp.keepalive.secs: a connection whose other end is gone is closed
        self._silent_secs = silent_secs  # a connected peer that acknowledges nothing this long is unreachable
        self._reach_at = 0.0  # when `_check_reach` looks next
        # `_tend_at` (`BatchingTransport`'s): when a flush should come again for the wire's own
        # sake (`_flush_locked`), from a loop about to sleep (`LoopEvent`) or working on (`flush_due`)
        self._silences = False  # the last `_check_reach` found something written waiting for its acknowledgement
        # something was sent since the last `_check_reach`, which may wait for its acknowledgement
        # (a partition begun since): a loop about to sleep wakes for the next check, which raises
        # the connection's cap before the kernel's giving up on the capped backoff (`rto_cap`)
        self._wrote = False
        self._unacknowledged = unacknowledged  # what the kernel says of a connection (a test's)
        self._min_wait = min_wait
        self._connect_max_wait = max_wait  # not `_max_wait`: that is the flush interval (`BatchingTransport.flush_due`)
        self._retries = kernel_retries()  # net.ipv4.tcp_retries2, for `rto_cap`
        host, port = split_address(bind)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, port), family=family, backlog=128)
        self._listener.setblocking(False)
        port = self._listener.getsockname()[1]
        self._listening(f"tcp://{'[' + host + ']' if family == socket.AF_INET6 else host}:{port}")
        self._epoll = select.epoll()
        self._epoll.register(self._listener.fileno(), _EPOLLIN)
        # written when a peer's host name has been looked up: in the epoll, so that it wakes a
        # sleeping loop (`LoopEvent`) or the watchman, whose poll connects then (`_resolved`)
        self._resolved_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._epoll.register(self._resolved_fd, _EPOLLIN)
        self._resolver = PeerResolver(resolve, self._answered)
        self._inbound: dict[int, _Inbound] = {}
        self._sweep_at = 0.0  # when to look for untrusted connections past UNTRUSTED_SECS next
        self._outbound: dict[str, _Outbound] = {}
        self._out_fds: dict[int, str] = {}  # fd of a connected or connecting outbound connection -> its peer's key
        self._events: list[LoopEvent] = []
        # when a poll last began; the watchman reads only once there is something to read
        self._stale = StaleWatch(self._epoll.fileno())
        self._watchman = threading.Thread(target=self._watch_loops, name=f"squall-watchman-{self.address}",
                                          daemon=True)
        self._watchman.start()

    def loop_event(self) -> LoopEvent:
        event = LoopEvent(self._epoll.fileno(), self._tend_within)
        self._events.append(event)
        return event

    # --- receiving ------------------------------------------------------------------------------
    def poll(self) -> int:
        """Accept, read, check, decode and deliver what the peers sent, and write on to the
        peers that can take more, on the calling thread (a loop of the worker, every round);
        returns the items delivered."""
        if self._closed or not self._poll_lock.acquire(blocking=False):
            return 0  # another loop is reading: it takes these too (order kept)
        self._stale.touch()
        delivered = 0
        try:
            # not epoll.poll(0): that gives the GIL up, which starves the worker's other threads
            # when done every round (`squall._native.epoll_ready`)
            for fd, mask in epoll_ready(self._epoll):
                inbound = self._inbound.get(fd)
                if inbound is not None:
                    delivered += self._read(fd, inbound)
                elif fd == self._listener.fileno():
                    delivered += self._accept()
                elif fd in self._out_fds:
                    self._writable(self._out_fds[fd], mask)
                elif fd == self._resolved_fd:
                    self._resolved()
            if self._sweep_at <= self._now():
                self._sweep_untrusted()
        except (OSError, ValueError):
            if not self._closed:
                raise
        finally:
            self._poll_lock.release()
        return delivered

    def _watch_loops(self) -> None:
        """Read for the loops while none has polled for `STALE_SECS` (they are in a long
        round) and something has come; and, about once a second while none polls, look at the
        connected peers for them (`_check_reach_for_loops`). Compiled, the wait for that holds
        no GIL (`squall._native.StaleWatch`): waiting in Python, this thread took the GIL from a
        busy loop 200 times a second to find it had nothing to do (2.4-2.8% of each worker's GIL
        samples in a 2-worker W1); looking whenever the loops' rounds outlasted the span, it
        still did, each time leaving the loop to wait for the GIL back."""
        look_at = monotonic() + REACH_CHECK_SECS  # the StaleWatch's clock, not the transport's (a test's)
        while self._stale.wait_stale(STALE_SECS, look_at):
            try:
                self.poll()
                if monotonic() >= look_at:
                    look_at = monotonic() + REACH_CHECK_SECS
                    self._check_reach_for_loops()
            except Exception:
                log.exception("the transport's watchman could not read for the loops")
            finally:
                # the next look in STALE_SECS at the earliest, also when poll read nothing because
                # a loop holds the poll lock (a long delivery), or raised: never a busy loop
                self._stale.touch()

    def _check_reach_for_loops(self) -> None:
        """`_check_reach` when it is due and no loop has done it: the loops have not polled for
        `STALE_SECS` (a bolt's ``execute`` holds its worker's only loop, or they sleep) while
        something written may wait for its acknowledgement. A loop checks at its flushes, and
        a sleeping one wakes for it (`LoopEvent`), but one stuck in user code does neither: the
        connection kept its backoff capped at 1 s, the kernel gave it up 14.4 s into a
        partition, and what it held was lost (tuples failing at the message timeout and
        replaying; with acking off, gone).

        The check is a whole `flush`, as another loop's would be: a loop that finds the send
        lock taken skips its own flush, trusting the holder to send what it queued, so whoever
        holds the lock must send the queues. Skipped while a loop flushes (it checks itself)."""
        # read without the lock (a hint, so that an idle worker's watchman takes no lock):
        # `_flush_locked` decides under it
        if self._closed or self._now() < self._reach_at or not (self._wrote or self._silences):
            return
        self.flush()

    def _accept(self) -> int:
        """Accept the waiting connections, and deliver what they have sent already."""
        delivered = 0
        while True:
            try:
                sock, remote = self._listener.accept()
            except _WOULD_BLOCK:
                return delivered
            except OSError as e:  # out of descriptors, say: the peer will connect again
                self._warn.warning("could not accept a connection on %s: %s", self.address, e)
                return delivered
            if len(self._inbound) >= MAX_INBOUND:
                stranger = next((fd for fd, c in self._inbound.items() if not c.trusted), None)
                self._warn.warning("%d connections to %s: closed the %s", MAX_INBOUND, self.address,
                                   "newest (all are from workers)" if stranger is None else
                                   "oldest that has sent nothing authentic")
                if stranger is None:
                    sock.close()
                    continue
                self._drop_inbound(stranger)
            sock.setblocking(False)
            # a peer whose machine died, or gave this connection up in a partition, never says so:
            # kept, it would hold one of the MAX_INBOUND places, trusted, for ever
            keep_alive(sock, self._keepalive, unacknowledged=False)
            inbound = self._inbound[sock.fileno()] = _Inbound(sock, self._now(), _peer_name(remote))
            self._epoll.register(sock.fileno(), _EPOLLIN)
            delivered += self._read(sock.fileno(), inbound)

    def _read(self, fd: int, inbound: _Inbound) -> int:
        """Read what ``inbound`` has (up to `_POLL_BYTES`) and deliver its whole frames."""
        sock, buffer = inbound.sock, inbound.buffer
        delivered = 0
        got = 0
        while got < _POLL_BYTES:
            try:
                chunk = recv_nb(sock, _RECV_BYTES)
            except OSError:  # reset by the peer
                chunk = b""
            if chunk is None:  # nothing more now
                break
            if not chunk:  # the peer closed: a frame it was in the middle of is lost with it
                if buffer and not inbound.trusted:
                    # a stranger's truncated frame: said and counted as its oversized or trickled
                    # frames are, not dropped with no trace (a worker's dying peer is seen otherwise)
                    self._opener.count("malformed")
                    self._warn.warning("dropped a frame cut short (%s) by the close of the connection from %s to %s, "
                                       "which had sent nothing authentic", _frame_state(buffer), inbound.peer,
                                       self.address)
                self._drop_inbound(fd)
                break
            got += len(chunk)
            if buffer:
                buffer += chunk
                taken, used = self._frames(fd, inbound, buffer)
                del buffer[:used]
            else:
                # a read that begins on a frame (most do): its frames are cut from the bytes read,
                # and only a frame's unfinished rest is kept, instead of every byte copied into the
                # buffer, out of it as a slice, and again into the message
                taken, used = self._frames(fd, inbound, chunk)
                if used < len(chunk) and fd in self._inbound:
                    buffer += memoryview(chunk)[used:]
            delivered += taken
            if not inbound.trusted and buffer and fd in self._inbound and self._over_untrusted_budget():
                self._refuse_untrusted(fd, f"holding {len(buffer)} bytes of an unfinished frame beyond what "
                                           f"unauthenticated connections may hold together")
            if len(chunk) < _RECV_BYTES or fd not in self._inbound:
                break  # it had no more, or sent a frame over the bound and was closed
        return delivered

    def _over_untrusted_budget(self) -> bool:
        return sum(len(c.buffer) for c in self._inbound.values() if not c.trusted) > self.max_message_bytes

    def _sweep_untrusted(self) -> None:
        """Close the connections that have sent nothing authentic within `UNTRUSTED_SECS`
        while in the middle of a frame (a peer's first frame takes far less; an idle stranger
        holds only a descriptor, which `MAX_INBOUND` bounds)."""
        now = self._now()
        self._sweep_at = now + 1.0
        for fd, c in list(self._inbound.items()):
            if not c.trusted and c.buffer and now - c.since > UNTRUSTED_SECS:
                self._refuse_untrusted(fd, f"in the middle of a frame {now - c.since:.0f} s after it connected "
                                           f"with nothing authentic yet")

    def _refuse_untrusted(self, fd: int, why: str) -> None:
        self._opener.count("malformed")
        self._warn.warning("closed the connection from %s to %s, %s", self._inbound[fd].peer, self.address, why)
        self._drop_inbound(fd)

    def _frames(self, fd: int, inbound: _Inbound, data: bytes | bytearray) -> tuple[int, int]:
        """Deliver the whole frames at the start of ``data`` (what ``inbound`` sent): the items
        delivered, and how many bytes of ``data`` the frames took."""
        delivered = 0
        at = 0
        end = len(data)
        limit = self.max_message_bytes
        with memoryview(data) as view:  # each message copied once, out of the view
            while end - at >= _LENGTH:
                n = int.from_bytes(view[at:at + _LENGTH], "big")
                if n > limit:
                    self._opener.count("malformed")
                    self._warn.warning("closed the connection from %s to %s, which sent a frame of %d bytes, over "
                                       "the %d of squall.transport.max.message.bytes", inbound.peer, self.address,
                                       n, limit)
                    self._drop_inbound(fd)
                    return delivered, at
                if end - at - _LENGTH < n:
                    break
                start = at + _LENGTH
                at = start + n
                accepted = self._opener.accepted
                delivered += self._take(bytes(view[start:at]), inbound.peer)
                if self._opener.accepted != accepted:
                    inbound.trusted = True
        return delivered, at

    def _drop_inbound(self, fd: int) -> None:
        inbound = self._inbound.pop(fd, None)
        if inbound is not None:
            try:
                self._epoll.unregister(fd)
            except (OSError, ValueError):
                pass
            inbound.sock.close()

    # --- sending (under the send lock) --------------------------------------------------------
    def _send(self, key: str, message: bytes) -> None:
        if not self._wrote:  # the first since the last check: a loop that works on checks on time (`flush_due`)
            self._wrote = True
            self._tend_at = min(self._tend_at, self._reach_at)
        out = self._outbound.get(key)
        if out is None:
            out = self._outbound[key] = _Outbound()
        frame = memoryview(len(message).to_bytes(_LENGTH, "big") + message)
        if out.backlog or out.sock is None or out.connecting:
            out.backlog.append(frame)
            if len(out.backlog) > MAX_BACKLOG:  # the peer has been away long: give the oldest up
                self._give_up_oldest(out)
                self._gave_up_messages(key, 1)
            self._write(key, out)
            return
        try:
            sent = send_nb(out.sock, frame)
        except OSError as e:  # the peer went away: nothing of this message was written, it waits
            out.backlog.append(frame)
            self._broken(key, out, e)
            return
        if sent < len(frame):
            out.backlog.append(frame[sent:])
            self._watch(key, out)

    def _give_up_oldest(self, out: _Outbound) -> None:
        # a frame written in part must be finished, or the peer reads garbage: give up the next
        del out.backlog[1 if out.sock is not None and _is_partial(out.backlog[0]) else 0]
        out.gave_up = True
        out.gave_up_at = self._now()

    def _write(self, key: str, out: _Outbound) -> None:
        """Connect if need be, then write the backlog until the socket would block."""
        if out.sock is None:
            if self._now() < out.retry_at:
                return
            self._connect(key, out)
            if out.sock is None:
                return
        if out.connecting and not self._connected(key, out):
            if out.sock is not None and self._now() >= out.connect_by:
                self._abandon(key, out)  # the peer answered nothing in time: try again at once
            return  # not yet: EPOLLOUT tells when (`_writable`)
        backlog = out.backlog
        while backlog:
            frame = backlog[0]
            try:
                sent = send_nb(out.sock, frame)
            except OSError as e:
                self._broken(key, out, e)
                return
            if sent < len(frame):
                backlog[0] = frame[sent:]
                break
            backlog.popleft()
        if backlog:
            self._watch(key, out)
        else:
            self._unwatch(out)

    def _connect(self, key: str, out: _Outbound) -> None:
        address = self._address[key]
        if wants_encryption(self._encryption, address):
            self._warn.error("cannot send to the worker at %s: %s wants that connection encrypted, and "
                             "this worker's data port (%s) is not; bind a cluster's workers all on "
                             "loopback or all not", address, ENCRYPTION_KEY, self.address)
            if out.backlog:
                self._gave_up_messages(key, len(out.backlog))
            out.backlog.clear()
            out.gave_up = True
            out.gave_up_at = self._now()
            out.retry_at = self._now() + self._min_wait
            return
        try:
            host, port = split_address(address)
            # a host name is looked up on the resolver's thread: connecting by name looked it up
            # here, on the loop, which a slow resolver held for seconds at each attempt
            resolved = self._resolver.address_of(host, port)
            out.resolving = resolved is None
            if resolved is None:  # asked again at the retry, or when the answer wakes a poll (`_resolved`)
                out.retry_at = self._now() + self._min_wait
                return
            family, sockaddr = resolved
            sock = socket.socket(family, socket.SOCK_STREAM)
        except (ValueError, OSError) as e:
            # the peer's host name does not resolve (socket.gaierror: a DNS outage, a machine
            # taken out of DNS before its worker moved): what is sent waits, as for a peer that refuses
            out.resolving = False
            self._warn.warning("cannot connect to the worker at %s: %s", address, e)
            out.retry_at = self._now() + self._min_wait
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # batches are ours already
        # an idle connection to a peer gone silent breaks (its backlog waits for the next) within
        # silent_secs, so that a worker that sends nothing (its spouts wait for acks that the
        # partition holds) names the peer too; closing it loses nothing: probes go only when
        # nothing sent waits for its acknowledgement, and a stopped peer's kernel answers them.
        # No limit on unacknowledged data: a peer in a long round may keep its window closed a
        # while (`_check_reach` only says so, once it acknowledges nothing)
        keep_alive(sock, min(self._keepalive, self._silent_secs), unacknowledged=False)
        # a lost packet is sent again within max_wait: `_check_reach` raises the cap while the peer is silent
        out.rto_max = self._rto_floor() if set_rto_max(sock, self._rto_floor()) else 0.0
        try:
            code = sock.connect_ex(sockaddr)
        except OSError as e:
            # connect_ex raises rather than return a code for some errors, which escaped the
            # flush (the flushing loop crashed its worker, and another thread's release of the
            # send lock, `_released`, raised in the heartbeat's set_peers or the watchman). What
            # is sent waits, as for a peer that refuses
            sock.close()
            self._warn.warning("cannot connect to the worker at %s: %s", address, e)
            out.retry_at = self._now() + self._min_wait
            return
        out.sock = sock
        self._epoll.register(sock.fileno(), _HANGUP)  # the peer's end, however idle the connection
        self._out_fds[sock.fileno()] = key
        if code in (0, errno.EISCONN):
            self._made(key, out)
        elif code in (errno.EINPROGRESS, errno.EAGAIN, errno.EALREADY):
            out.connecting = True
            # not the kernel's SYN backoff (1, 2, 4 ... s apart): an attempt that has not connected
            # by then is abandoned and made again (`_write`), so one starts soon after a heal
            out.connect_by = self._now() + connect_wait(out.attempts, self._min_wait, self._connect_max_wait)
            self._tend_at = min(self._tend_at, out.connect_by)  # abandoned then, by a loop busy or not
            self._watch(key, out)
        else:
            self._broken(key, out, OSError(code, os.strerror(code)))

    def _rto_floor(self) -> float:
        return max(1.0, self._connect_max_wait)

    def _made(self, key: str, out: _Outbound) -> None:
        """``out``'s connection is made: the peer is back."""
        out.connecting = False
        out.away = False
        out.attempts = 0
        out.connected_at = self._now()
        out.unacknowledged_since = 0.0  # a new connection: what the last one waited for is not its
        self._reached(key)

    def _abandon(self, key: str, out: _Outbound) -> None:
        """Give up the attempt to connect to ``key`` that has not connected in time (nothing was
        written on it) and make another at once, with a longer timeout (`connect_wait`)."""
        self._close_outbound(out)
        out.sock = None
        out.connecting = False
        out.attempts += 1
        self._connect(key, out)

    def _connected(self, key: str, out: _Outbound) -> bool:
        """Whether ``out``'s connection, begun without blocking, is made now (closed if it failed)."""
        assert out.sock is not None
        # poll(), not select(): a worker holding many files and sockets has descriptors past
        # FD_SETSIZE (1024), which select() refuses with a ValueError
        watch = select.poll()
        watch.register(out.sock, select.POLLOUT)
        if not watch.poll(0):
            return False
        code = out.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._broken(key, out, OSError(code, os.strerror(code)))
            return False
        self._made(key, out)
        return True

    def _answered(self) -> None:
        """A peer's host name was looked up (on the resolver's thread): wake a poll."""
        try:
            os.eventfd_write(self._resolved_fd, 1)
        except OSError:  # closed with the transport
            pass

    def _resolved(self) -> None:
        """A poll saw a lookup answered: connect to the peers that waited for theirs now, not
        at their next retry (`_connect` takes the answer)."""
        try:
            os.eventfd_read(self._resolved_fd)
        except OSError:  # read already (another poll), or closed
            pass
        if not self._send_lock.acquire(blocking=False):
            return  # a loop is flushing: the peer is tried at its retry_at, a few rounds on
        try:
            for key, out in list(self._outbound.items()):
                if out.resolving and out.backlog:
                    out.retry_at = 0.0
                    self._write(key, out)
        finally:
            self._send_lock.release()
        self._released()

    def _writable(self, key: str, mask: int) -> None:
        """The epoll says a connection to ``key`` can be written, or that its peer closed it
        (a peer never writes on it: what there is to read is its end)."""
        if not self._send_lock.acquire(blocking=False):
            return  # a loop is flushing: it writes the backlog on itself (the next poll sees a hang-up)
        try:
            out = self._outbound.get(key)
            if out is not None and out.sock is not None:
                if not out.connecting and mask & _PEER_GONE:
                    # the kernel's error: ETIMEDOUT where its keepalive probes went unanswered (a partition)
                    code = out.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    self._broken(key, out, OSError(code, os.strerror(code)) if code else
                                 OSError(errno.ECONNRESET, "closed by the worker at the other end"))
                else:
                    self._write(key, out)
                self._check_held()  # the peer took its backlog (the spouts may go again), or went with it
        finally:
            self._send_lock.release()
        self._released()  # a loop's flush skipped meanwhile: this thread writes a backlog, not the queues

    def _broken(self, key: str, out: _Outbound, error: OSError) -> None:
        """Close ``key``'s connection; its backlog waits for the next (but a frame written in
        part is lost: the peer dropped its beginning with the connection)."""
        if out.sock is not None:
            if not out.connecting and key in self._silent:
                # said unreachable already, its connection kept (`_check_reach`): that it is not
                # kept after all, and what went with it, is said too
                tasks = [t for t, k in self._task_key.items() if k == key]
                log.info("the connection to %s, unreachable already, broke: %s; what is sent to it waits for the "
                         "connection to be made again", self.reach.describe(self._address[key], tasks),
                         self._break_cause(out, error))
            elif not out.connecting:
                self._unreachable(key, self._break_cause(out, error))
            self._close_outbound(out)
        out.sock = None
        out.connecting = False
        out.away = True
        self._silent.discard(key)  # said unreachable already, if it was: the next connection made says its return
        out.broken_at = self._now()
        out.retry_at = out.broken_at + self._min_wait
        self._tend_at = min(self._tend_at, out.retry_at)  # its backlog is tried again then
        if error.errno == errno.ECONNREFUSED:
            out.attempts = 0  # its machine answers: the next attempt has no reason to wait longer
        if out.backlog and _is_partial(out.backlog[0]):
            out.backlog.popleft()

    def _break_cause(self, out: _Outbound, error: OSError) -> str:
        """What happened to ``out``'s connection, which broke with ``error``, for the log. The
        kernel gives a connection up on its own in two ways, both with ETIMEDOUT (or the
        unreachable host or network an ICMP error said meanwhile): what was written on it went
        unacknowledged through all its retransmissions (``net.ipv4.tcp_retries2``, on the backoff
        the wire caps: `squall.worker.reconnect`), and is lost with it; or, idle, it went
        unanswered by its keepalive probes, and nothing is lost."""
        if error.errno not in _GAVE_UP:
            return f"the connection broke: {error}"
        if out.unacknowledged_since:
            return (f"it acknowledged nothing written to it for {self._now() - out.unacknowledged_since:.0f} s and "
                    f"the kernel gave the connection up after its retransmissions ({os.strerror(error.errno)}; a "
                    f"partition, a lost machine?): what was written on it and not acknowledged is lost with it")
        return (f"the connection was idle and its machine answered none of its keepalive probes for about "
                f"{min(self._keepalive, self._silent_secs):g} s (a partition, a lost machine?)")

    def _close_outbound(self, out: _Outbound) -> None:
        """Stop watching ``out``'s connection and close it."""
        assert out.sock is not None
        fd = out.sock.fileno()
        self._out_fds.pop(fd, None)
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):
            pass
        out.watched = False
        out.sock.close()

    def _watch(self, key: str, out: _Outbound) -> None:
        if not out.watched and out.sock is not None:
            self._epoll.modify(out.sock.fileno(), _HANGUP | _EPOLLOUT)
            out.watched = True

    def _unwatch(self, out: _Outbound) -> None:
        if out.watched and out.sock is not None:
            try:
                self._epoll.modify(out.sock.fileno(), _HANGUP)
            except (OSError, ValueError):
                pass
        out.watched = False

    def _held_messages(self, key: str) -> tuple[int, bool]:
        out = self._outbound.get(key)
        # away: refused or broken, waiting to connect again or connecting again (not a first
        # connection being made: every connection is, for a moment, at its start)
        return (len(out.backlog), out.sock is None or out.away) if out is not None else (0, False)

    def _lost_only_before(self, key: str, heard: float) -> float | None:
        """A connection that broke took what was written on it and not read: what was sent
        since it broke waits in the backlog for the next connection, made once the dead peer's
        next launch listens. A connection made since, to a live worker (not hung up now: the
        dead one's hang-up came before its next launch's first message), took what was sent
        after it was made, and was made after the death. A frame given up is lost whenever it
        was sent. With no live connection, ``heard``: the dead worker held tuples that other
        workers sent it, and a break may be an earlier launch's (nothing sent there since)."""
        out = self._outbound.get(key)
        if out is None:
            # this worker sent nothing there, but its spouts' tuples may have reached the dead
            # worker through others: 0.0 ("nothing lost") left them to the message timeout
            return heard
        if out.sock is not None and not out.connecting:
            probe = select.poll()
            probe.register(out.sock, _GONE_EVENTS)
            if probe.poll(0):  # the dead peer's, not yet seen to hang up (a loop's next poll will)
                return None
            return max(out.connected_at, out.gave_up_at)
        return max(out.broken_at, out.gave_up_at, heard)

    def _flush_locked(self) -> None:
        now = self._now()
        for key, out in self._outbound.items():  # peers that refused or were slow: try again
            if out.backlog and (out.sock is not None or now >= out.retry_at):
                self._write(key, out)
        if now >= self._reach_at:  # not per message: a loop about to sleep flushes, the timer wakes it
            self._reach_at = now + REACH_CHECK_SECS
            self._wrote = False  # the check sees what was sent so far; what is sent after, the next one
            self._silences = self._check_reach()
        super()._flush_locked()
        # when a loop should flush again though nothing is sent (`_tend_within`): an attempt to
        # connect times out, a refused peer is tried again, or (at the next `_check_reach`, which
        # raises a silent connection's cap and pushes what waits on it) a backlog, or what was
        # written, waits on a connection; inf: nothing waits on the wire. Looked at after the
        # batches above were sent: what they wrote, or began to connect for, is waited for too
        # (a loop that slept on, its connection's backoff capped at 1 s, had the kernel give the
        # connection up 14.4 s into a partition, and what it held lost with it)
        tend_at = float("inf")
        backlogged = False
        for out in self._outbound.values():
            if out.connecting:
                tend_at = min(tend_at, out.connect_by)
            elif out.backlog:
                if out.sock is None:
                    tend_at = min(tend_at, out.retry_at)
                else:
                    backlogged = True
        self._tend_at = min(tend_at, self._reach_at) if backlogged or self._silences or self._wrote else tend_at

    def _tend_within(self) -> float | None:
        """How long a loop of this worker may sleep at most (`LoopEvent`), for the wire's own
        sake (`_flush_locked`): seconds (at least 10 ms: never a busy loop), or None."""
        at = self._tend_at
        return None if at == float("inf") else max(0.01, at - self._now())

    def _check_reach(self) -> bool:
        """Say which connected peers acknowledged nothing written to them for ``silent_secs``
        (unreachable: a partition, a lost machine), and which of those acknowledge again; their
        connections are kept (the module docstring). A connection broken or not made yet is not
        asked about: `_broken` and `_connected` say so. What waits on a silent connection is sent
        again sooner (`_retry_sooner`). Returns whether anything written waits for an
        acknowledgement."""
        silences: dict[str, float] = {}
        waits = False  # segments in flight, though acknowledged a moment ago (silent 0 s)
        now = self._now()
        for key, out in self._outbound.items():
            if out.sock is None or out.connecting:
                continue
            waiting = self._unacknowledged(out.sock)
            silences[key] = waiting.secs
            out.unacknowledged_since = now - waiting.secs if waiting.secs > 0.0 else 0.0
            waits = waits or waiting.segments > 0
            if waiting.secs > 0.0:
                self._retry_sooner(out, out.sock, waiting.secs, waiting.segments)
            elif out.rto_max and out.rto_max != self._rto_floor() and set_rto_max(out.sock, self._rto_floor()):
                out.rto_max = self._rto_floor()  # the peer acknowledges again
        self._check_silences([(key, key) for key in silences], silences.__getitem__, self._silent_secs, verb="written")
        return waits or any(secs > 0.0 for secs in silences.values())

    def _retry_sooner(self, out: _Outbound, sock: socket.socket, silent: float, segments: int) -> None:
        """What waits on ``out``'s connection for a peer silent ``silent`` seconds reaches it soon
        after a heal (`squall.worker.reconnect`): segments in flight are sent again on a backoff
        capped as far as the kernel's giving up allows (`rto_cap`); what could not leave (the
        kernel probes with it, counting the probes) is pushed now, the cap lifted."""
        out.rto_max = retry_sooner(sock, silent, segments, out.rto_max, self._rto_floor(), self._retries)

    def _moved(self, key: str) -> bool:
        """The peer's worker restarted at a new address (a Spark task elsewhere): what its
        backlog holds was sent after the old connection broke (the worker died; the spouts'
        replays at the master's notice among it), and goes to the new address, sealed again
        for it, before anything sent from now on, as the process host's next launch at the same
        address gets it. Lost, and so returns True: what was written into a connection still
        open at the move (the old worker's end was not seen to close: its machine lost, say),
        and a frame given up."""
        out = self._outbound.pop(key, None)
        self.reach.forget(key)
        self._silent.discard(key)  # its connection goes: a new one is asked about afresh
        if out is None:
            return False
        lost = out.gave_up
        frames = list(out.backlog)
        if out.sock is not None:
            lost = lost or not out.connecting  # connected: what it wrote may be unread
            if frames and _is_partial(frames[0]):
                frames.pop(0)  # its beginning went into that connection
            self._close_outbound(out)
        for frame in frames:
            kind, data = sealed_parts(frame[_LENGTH:])
            if kind == DATA:
                self._send_data(key, bytes(data))  # sealed for the new route (split if it grew too long)
            else:
                self._send(key, self._sealer.seal(kind, self._route(key), bytes(data)))
        return lost

    def close(self) -> None:
        """Stop receiving and sending, and close every socket."""
        self._stale.close()
        with self._send_lock:
            self._closed = True
            for out in self._outbound.values():
                if out.sock is not None:
                    self._close_outbound(out)
            self._outbound.clear()
            self._silent.clear()
        with self._poll_lock:
            for fd in list(self._inbound):
                self._drop_inbound(fd)
            self._listener.close()
        for event in self._events:
            event.set()  # a loop asleep on the epoll wakes and sees its worker stopping
        self._watchman.join(2)
        self._resolver.close()
        self._epoll.close()
        os.close(self._resolved_fd)  # after the watchman: a lookup answered since writes to nothing (`_answered`)


def _frame_state(buffer: bytes | bytearray) -> str:
    """How far the unfinished frame in ``buffer`` got, for a warning: its length prefix, or
    the bytes of its body received against the length it announced."""
    if len(buffer) < _LENGTH:
        return f"{len(buffer)} of its {_LENGTH} length bytes"
    return f"{len(buffer) - _LENGTH} of {int.from_bytes(buffer[:_LENGTH], 'big')} bytes"


def _peer_name(remote: Any) -> str:
    """``host:port`` of an accepted connection's other end (``[host]:port`` for IPv6)."""
    if isinstance(remote, tuple) and len(remote) >= 2:
        host, port = remote[0], remote[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(remote)


def _is_partial(frame: memoryview) -> bool:
    """Whether ``frame`` is what is left of a frame written in part (a slice of it)."""
    return frame.nbytes < len(cast(Sized, frame.obj))  # the frames are views of bytes
