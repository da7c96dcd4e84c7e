"""What the kernel says of a TCP connection's peer: whether it acknowledges what was sent
(``TCP_INFO``). Both wires ask it about once a second to name a peer that has gone silent (a
partition, a lost machine) without closing the connection: Linux's ``TCP_USER_TIMEOUT`` would
close it, but also closes one to a receiver that keeps its window closed (a stopped worker),
losing what the kernels held for it. `squall.worker.tcp` asks of its own sockets
(`unacknowledged_for`), `squall.worker.transport` of ZeroMQ's connections by their descriptor
(`fd_unacknowledged`)."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

__all__ = ["REACH_CHECK_SECS", "Unacknowledged", "borrowed", "fd_unacknowledged", "unacknowledged",
           "unacknowledged_for"]

# how often each wire asks the kernel of its connected peers (`squall.worker.tcp.TcpTransport._check_reach`,
# `squall.worker.transport.ZmqTransport._check_reach`): not per message
REACH_CHECK_SECS = 1.0

# struct tcp_info (linux/tcp.h, stable since Linux 2.6): 8 one-byte fields, of which tcpi_probes
# (window or keepalive probes sent and not answered) is the 4th, then 32-bit ones, of which
# tcpi_unacked (segments sent and not acknowledged) is the 5th and tcpi_last_ack_recv
# (milliseconds since the last acknowledgement came) the 13th
_TCP_INFO = struct.Struct("=3xB4x16xI28xI")  # probes, unacked, last_ack_recv
_TCP_INFO_BYTES = _TCP_INFO.size


class Unacknowledged(NamedTuple):
    """What the kernel says of a connection's data waiting for its peer (`unacknowledged`)."""

    secs: float  # `unacknowledged_for`
    segments: int  # segments sent and not acknowledged: the kernel sends them again on its timer
    probes: int  # window or keepalive probes sent and not answered


NOTHING_WAITS = Unacknowledged(0.0, 0, 0)


def unacknowledged(sock: socket.socket) -> Unacknowledged:
    """`unacknowledged_for`, and what waits: segments in flight, or probes (the kernel probes
    where nothing is in flight: the peer's window is closed, or the packets cannot leave)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_BYTES)
    except (OSError, AttributeError):  # closed, or not Linux
        return NOTHING_WAITS
    if len(info) < _TCP_INFO.size:
        return NOTHING_WAITS
    probes, unacked, last_ack_recv = _TCP_INFO.unpack_from(info)
    # one probe may be on its way to a live peer; a second goes only when the first went unanswered
    secs = last_ack_recv / 1000.0 if unacked > 0 or probes > 1 else 0.0
    return Unacknowledged(secs, unacked, probes)


def unacknowledged_for(sock: socket.socket) -> float:
    """Seconds since ``sock``'s peer last acknowledged anything, while what was sent on it
    waits for its acknowledgement: segments in flight, or probes unanswered (the kernel probes
    with what it has not sent yet where nothing is in flight: a peer's window is closed, or
    its packets cannot leave, as into a blackhole route); 0.0 when nothing waits, or where the
    kernel does not tell. A receiver with its window closed (a stopped worker) answers each
    probe before the next, ever more seldom (their interval doubles up to 2 min): its silence
    between them is not counted."""
    return unacknowledged(sock).secs


@contextmanager
def borrowed(fd: int) -> Iterator[socket.socket | None]:
    """A socket for the connection whose descriptor ``fd`` is owned by someone else (ZeroMQ's
    I/O thread): a duplicate, closed right after, so the owner's descriptor is never closed;
    None when ``fd`` is no longer a socket (closed meanwhile, or reused for something else)."""
    try:
        dup = os.dup(fd)
    except OSError:  # closed meanwhile
        yield None
        return
    try:
        sock = socket.socket(fileno=dup)
    except OSError:  # reused for something that is not a socket: the duplicate is ours to close
        os.close(dup)
        yield None
        return
    try:
        yield sock
    finally:
        sock.close()


def fd_unacknowledged(fd: int) -> Unacknowledged:
    """`unacknowledged` of the connection whose descriptor is ``fd``, owned by someone else
    (`borrowed`); nothing waits when ``fd`` is no longer a socket."""
    with borrowed(fd) as sock:
        return NOTHING_WAITS if sock is None else unacknowledged(sock)

