"""Loopback ports for the servers and workers the tests start.

A port found free with ``bind(0)`` is only free at that moment, and it comes from the kernel's
ephemeral range, the same range every outgoing connection of every process takes its own port
from: a test that starts its server a second later (a JVM, a worker process, a sender that
connects first on purpose) can find the port taken by another process's connection
(EADDRINUSE; seen once in ``tests/worker/test_tcp.py`` in a whole-suite run). Ports below the
ephemeral range, as Storm's slot ports 6700-6703 are, are never handed out that way: only an
explicit bind can take one, so here they are drawn at random below it, each checked free."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_SPAN = 8192  # ports below the ephemeral range to draw from
_TRIES = 200


def _ephemeral_low() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_ports(n: int, avoid: Iterable[int] = ()) -> list[int]:
    """``n`` distinct loopback TCP ports free now, below the ephemeral range (``bind(0)``'s
    where there is no room below it), none of ``avoid`` (ports chosen already but not yet
    bound: a test's DRPC ports, then its master's, drew the same port once)."""
    low = _ephemeral_low()
    first = max(1024, low - _SPAN)
    rng = random.Random()
    taken = set(avoid)
    ports: list[int] = []
    for _ in range(_TRIES if low - first >= 64 else 0):
        if len(ports) == n:
            break
        port = rng.randrange(first, low)
        if port in ports or port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
    while len(ports) < n:  # no room below the range: the kernel's choice
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in ports and port not in taken:
            ports.append(port)
    return ports


def free_port() -> int:
    """One loopback TCP port free now (`free_ports`)."""
    return free_ports(1)[0]
