"""`PeerResolver`: a peer's host name looked up off the worker's loops.

`squall.worker.tcp.TcpTransport` connects to its peers from the loop that flushes, under the
send lock. Connecting to ``(host, port)`` with a host name looks the name up first, in
``getaddrinfo``, on the calling thread: a name whose lookup is slow (a resolver that does not
answer, each attempt waiting for its timeout: 5 s by default in glibc, times the attempts and
the servers of ``/etc/resolv.conf``) held the worker's loop, and with it every executor of the
worker, for that long at each attempt to connect, and every other loop's flush skipped while the
lock was held. Here a name is looked up on a thread of its own, one lookup at a time for each
name (a second attempt while one hangs waits for it instead of starting another), and the
answer is handed back: the transport asks again at its next attempt (`address_of`) and is woken
when it comes (``done``). An address that is already a number (``127.0.0.1``, ``::1``) needs no
lookup and is answered at once.

Each answer serves one attempt to connect: the next attempt looks the name up again, as
connecting by name did, so a worker that moves to a machine re-pointed in DNS is found there.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("squall.worker")

# what a lookup gives: the address family and the socket address to connect to
Resolved = tuple[int, Any]


def lookup_address(host: str, port: int) -> Resolved:
    """The first address ``getaddrinfo`` gives ``host``'s ``port`` for a TCP connection (the
    one ``socket.create_connection`` tries first). Blocks for as long as the lookup takes.

    Raises:
        OSError: the name does not resolve (`socket.gaierror`).
    """
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    return family, address


def numeric_address(host: str, port: int) -> Resolved | None:
    """``(family, (host, port))`` when ``host`` is an IPv4 or IPv6 address in numbers (no lookup
    needed), else None."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return family, (host, port)
    return None


class _Lookup:
    """One lookup on its thread: its answer, or the error it raised, once ``done``."""

    __slots__ = ("answer", "done", "error")

    def __init__(self) -> None:
        self.done = False
        self.answer: Resolved | None = None
        self.error: OSError | None = None


class PeerResolver:
    """Looks peers' host names up on threads of their own and hands the answers back.

    Args:
        lookup: ``(host, port) -> (family, address)``, blocking (`lookup_address`; a test's
            slow one). An ``OSError`` it raises is the answer too.
        done: called (on the lookup's thread, never after `close` returned) when an answer
            is ready: the transport wakes its loops with it. It must not block.

    Thread-safe. A lookup that never returns holds only its own thread (a daemon: it does not
    keep the process from exiting) and keeps its name's next attempts waiting, not the others.
    """

    def __init__(self, lookup: Callable[[str, int], Resolved] = lookup_address,
                 done: Callable[[], None] = lambda: None) -> None:
        self._lookup = lookup
        self._done = done
        self._lock = threading.Lock()
        self._lookups: dict[tuple[str, int], _Lookup] = {}
        self._closed = False

    def address_of(self, host: str, port: int) -> Resolved | None:
        """Where to connect to ``host``'s ``port``: ``(family, address)``, at once for a numeric
        ``host``; else the answer of the lookup begun by an earlier call (each answer is given
        once), or None while it runs (one is begun if none is).

        Raises:
            OSError: the lookup failed (the name does not resolve).
        """
        numeric = numeric_address(host, port)
        if numeric is not None:
            return numeric
        key = (host, port)
        with self._lock:
            pending = self._lookups.get(key)
            if pending is None:
                if not self._closed:
                    pending = self._lookups[key] = _Lookup()
                    threading.Thread(target=self._run, args=(key, pending), name=f"squall-resolve-{host}",
                                     daemon=True).start()
                return None
            if not pending.done:
                return None
            del self._lookups[key]
        if pending.error is not None:
            raise pending.error
        return pending.answer

    def looking_up(self) -> int:
        """How many lookups have not answered yet."""
        with self._lock:
            return sum(not p.done for p in self._lookups.values())

    def close(self) -> None:
        """Begin no more lookups and call ``done`` no more (a lookup running ends on its own;
        its answer is dropped)."""
        with self._lock:
            self._closed = True
            self._lookups.clear()

    def _run(self, key: tuple[str, int], pending: _Lookup) -> None:
        try:
            pending.answer = self._lookup(*key)
        except OSError as e:
            pending.error = e
        except Exception as e:  # a lookup's bug must not end the wire: it is an error to connect
            log.exception("looking up %s failed", key[0])
            pending.error = OSError(f"looking up {key[0]} failed: {e!r}")
        with self._lock:
            pending.done = True
            if not self._closed:
                # under the lock: once `close` returns no call comes (the transport closes the
                # descriptor it writes, whose number may then be another file's)
                self._done()
