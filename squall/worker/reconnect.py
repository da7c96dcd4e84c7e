"""How soon the TCP wire (`squall.worker.tcp`) reaches a peer again once a partition heals.

Left to the kernel, a peer cut off from this worker is tried again on the kernel's exponential
backoff, which after a heal is seconds of waiting while the tuples pile up and time out:

- an attempt to connect (the connection broke, or was never made) is a SYN the kernel sends
  again 1, 3, 7, 15 and 31 s after the first (since Linux 6.5, with
  ``net.ipv4.tcp_syn_linear_timeouts`` at 4, at 1, 2, 3, 4, 5, 7, 11, 19 s): an attempt begun
  at a cut of 8 s had its next SYN 3 to 7 s after the heal. So each attempt has its own timeout, from ``storm.messaging.netty.min_wait_ms`` (100)
  doubling per attempt up to ``storm.messaging.netty.max_wait_ms`` (1000), Storm's netty
  client's names for its reconnect backoff (`connect_wait`): an attempt that has not connected
  by then is abandoned and a new one sent, so a connection is made at most about
  ``max_wait_ms`` after the heal.
- data written on a connection that stays up is sent again from 200 ms on, doubling up to
  120 s; when its packets cannot even leave the machine (a blackhole route, a local firewall
  rule) the kernel probes instead, on the same schedule. After an 8 s cut the first tuple crossed
  5.1-5.3 s after the heal, measured on the process host's simulated machines.

For the second, Linux (6.11 on) takes a cap of a connection's backoff (``TCP_RTO_MAX_MS``, at
least 1 s). But a lower cap also brings the kernel's giving up nearer: it gives up data sent
and not acknowledged once it has waited as long as ``net.ipv4.tcp_retries2`` (15) attempts on
the capped backoff would take (`kernel_give_up_secs`: 924.6 s uncapped, 14.4 s at a 1 s cap,
measured: a connection capped at 1 s broke in a 20 s cut), and what it held is lost with the
connection. So the cap is raised as the silence lasts (`rto_cap`), keeping the giving up half
again further than the silence: the next attempt after a heal comes at most 1 s later after up
to about 8 s of silence, 2 s up to 16 s, 8 s after a minute, 32 s after two (net.ipv4.tcp_retries2
at 15), and the kernel gives up when it would have without the cap, after a quarter of an hour. Where the packets
cannot leave, the kernel counts its probes instead of timing them, so a cap would use them up
sooner; there the cap is lifted, and the wire pushes what waits itself, about once a second
(`push_pending`): sent at once once the route is back, which no timer of the kernel waits for.
Both wires do so (`retry_sooner`): the TCP wire on its own sockets, the ZeroMQ wire on ZeroMQ's
connections, reached through their descriptors (`squall.worker.transport`).
"""

from __future__ import annotations

import socket
from pathlib import Path

__all__ = ["DEFAULT_RTO_MAX_SECS", "MIN_RTO_MAX_SECS", "connect_wait", "kernel_give_up_secs", "kernel_retries",
           "push_pending", "retry_sooner", "rto_cap", "set_rto_max"]

TCP_RTO_MAX_MS = getattr(socket, "TCP_RTO_MAX_MS", 44)  # linux/tcp.h; Python 3.11 does not name it
DEFAULT_RTO_MAX_SECS = 120.0  # the kernel's own cap (TCP_RTO_MAX)
MIN_RTO_MAX_SECS = 1.0  # the lowest cap the kernel takes
_RTO_MIN_SECS = 0.2  # the kernel's first retransmission timeout on a short round trip (TCP_RTO_MIN)
_RETRIES = 15  # net.ipv4.tcp_retries2's default
# how much further than the silence the kernel's giving up is kept: the cap is looked at about once
# a second (`squall.worker.tcp_info.REACH_CHECK_SECS`), and a worker busy a while looks later
_MARGIN = 1.5


def connect_wait(attempts: int, min_wait: float, max_wait: float) -> float:
    """How long an attempt to connect may take after ``attempts`` abandoned ones in a row:
    ``min_wait`` doubling per attempt, at most ``max_wait`` (seconds). Storm's netty client
    waits so between its attempts; here an attempt to a peer that answers nothing is that wait."""
    return min(max_wait, min_wait * 2 ** min(attempts, 32))


def kernel_give_up_secs(retries: int, rto_max: float, rto_base: float = _RTO_MIN_SECS) -> float:
    """How long Linux waits for data to be acknowledged before it gives the connection up, for
    ``retries`` (``net.ipv4.tcp_retries2``) and a backoff capped at ``rto_max`` seconds: its
    ``tcp_model_timeout`` (net/ipv4/tcp_timer.c), the time ``retries`` attempts take from
    ``rto_base`` doubling up to the cap."""
    doublings = max(0, int(rto_max / rto_base).bit_length() - 1)  # ilog2
    if retries <= doublings:
        return (2 ** (retries + 1) - 1) * rto_base
    return (2 ** (doublings + 1) - 1) * rto_base + (retries - doublings) * rto_max


def rto_cap(silent: float, retries: int, floor: float) -> float:
    """The cap of a connection's retransmission backoff after its peer has acknowledged nothing
    for ``silent`` seconds: the lowest of ``floor`` doubling (up to the kernel's own 120 s) with
    which the kernel gives the connection up (`kernel_give_up_secs`) well after the silence; the
    kernel's own cap when none does (it gives up then as it would have anyway)."""
    cap = max(MIN_RTO_MAX_SECS, floor)
    while cap < DEFAULT_RTO_MAX_SECS and kernel_give_up_secs(retries, cap) < _MARGIN * (silent + 1.0):
        cap = min(DEFAULT_RTO_MAX_SECS, cap * 2)
    return cap


def kernel_retries(path: str = "/proc/sys/net/ipv4/tcp_retries2") -> int:
    """``net.ipv4.tcp_retries2`` of this process's network namespace (15 where it cannot be read)."""
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return _RETRIES


def set_rto_max(sock: socket.socket, secs: float) -> bool:
    """Cap ``sock``'s retransmission backoff at ``secs`` (``TCP_RTO_MAX_MS``); False where the
    kernel does not know the option (before Linux 6.11) or the socket is closed."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS, int(secs * 1000))
    except OSError:
        return False
    return True


def push_pending(sock: socket.socket) -> None:
    """Have the kernel send what ``sock`` holds unsent now, as a write would: setting
    ``TCP_NODELAY`` (set already) pushes the pending frames. What could not leave the machine
    (a route missing during the partition) goes at once once it can, instead of at the kernel's
    next probe, up to 2 min later."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass


def retry_sooner(sock: socket.socket, silent: float, segments: int, rto_max: float, floor: float,
                 retries: int) -> float:
    """What waits on ``sock``'s connection for a peer silent ``silent`` seconds reaches it soon
    after a heal: ``segments`` in flight are sent again on a backoff capped as far as the
    kernel's giving up allows (`rto_cap` from ``floor``, for ``retries``); what could not leave
    (no segment in flight: the kernel probes with it, counting the probes) is pushed now
    (`push_pending`), the cap lifted. ``rto_max``: the connection's cap now, 0.0 where the kernel
    takes none. Returns its cap from now on."""
    push_pending(sock)
    if not rto_max:
        return rto_max  # the kernel has no cap to set
    cap = rto_cap(silent, retries, floor) if segments else DEFAULT_RTO_MAX_SECS
    if cap != rto_max and set_rto_max(sock, cap):
        return cap
    return rto_max
