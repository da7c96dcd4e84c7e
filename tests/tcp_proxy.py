"""A TCP proxy on loopback, for tests that put a fault between a client and its server (a master
and ZooKeeper, a worker and the master) without touching either: the client is given the
proxy's `address` instead of the server's, and the test switches the proxy's mode as it goes.

- `forward` (the start): every byte goes through, both ways.
- `blackhole`: every byte is dropped, both ways, and the connections stay open: a silent
  partition, which the client notices only by its own timeouts.
- `cut`: the open connections are closed and new ones refused at once: a partition the
  client hears of.
- `lose_replies`: the client's requests still reach the server, but the first bytes of a reply
  close the connection instead of going back (counted in `lost`): the server did the work,
  the client never hears it did, as with a server killed after it saved a request. A new
  connection dies too, at the server's first bytes. With ``after``, replies go back until a
  request that carries those bytes has passed, and are lost from its reply on: the request
  whose reply is lost is then the one the test means, not whichever a client sent first (a
  beat sent every 0.2 s came before the one with the error under load, its reply was lost,
  and the error never reached the server).

With ``reply_delay`` (given, or set as it goes), every reply is held that many seconds before it
goes back, in order, in every mode that forwards: a server that far away (ZooKeeper in another
data centre), each request a round trip of at least that long.

`close` (or leaving the ``with`` block) closes every socket and waits for every thread the
proxy started; the proxy starts no process."""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self

FORWARD, BLACKHOLE, CUT, LOSE_REPLIES, CLOSED = "forward", "blackhole", "cut", "lose_replies", "closed"
_CONNECT_TIMEOUT = 5.0  # seconds to reach the server; once connected, reads wait as long as they need
_JOIN_TIMEOUT = 10.0  # every socket is shut down first, so a thread ends at once; this only bounds a bug


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to the server at ``127.0.0.1:target_port`` as its mode says
    (the module's docstring). The listening port is the kernel's free one, bound at once and
    held until `close`, so no other process can take it in between."""

    def __init__(self, target_port: int, reply_delay: float = 0.0) -> None:
        self.target = ("127.0.0.1", target_port)
        self.reply_delay = reply_delay
        self.mode = FORWARD
        self.lost = 0  # replies dropped in the lose_replies mode
        self._after: bytes | None = None  # lose_replies: the bytes of the request from whose reply on
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._start(self._accept)

    @property
    def address(self) -> str:
        """``host:port`` to give the client in place of the server's."""
        return f"127.0.0.1:{self.port}"

    def forward(self) -> None:
        """Let every byte through again (connections closed by `cut` or `lose_replies` stay closed)."""
        self.mode = FORWARD

    def blackhole(self) -> None:
        """Drop every byte both ways and keep the connections open."""
        self.mode = BLACKHOLE

    def cut(self) -> None:
        """Close the open connections and refuse new ones until `forward`."""
        self._close_conns(CUT)

    def lose_replies(self, after: bytes | None = None) -> None:
        """Forward requests, but close a connection at the first bytes of its reply (`lost`):
        from now on, or, with ``after``, from the reply to the first request carrying those
        bytes (a plain-text protocol's; squall's RPC is plain on loopback)."""
        with self._lock:
            self._after = after
            self.mode = LOSE_REPLIES

    def close(self) -> None:
        """Stop listening, close every connection, and wait for every thread of the proxy."""
        self._close_conns(CLOSED)
        try:
            # close() alone does not wake a thread blocked in accept(), which would go on
            # accepting on the port; shutdown() does (EINVAL)
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        while True:  # the accept thread may start pumps until it ends: join until none is left
            with self._lock:
                threads, self._threads = self._threads, []
            if not threads:
                break
            for t in threads:
                t.join(_JOIN_TIMEOUT)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- inside ---------------------------------------------------------------------------------
    def _start(self, target: Callable[..., None], *args: object) -> threading.Thread:
        t = threading.Thread(target=target, args=args, daemon=True, name="tcp-proxy")
        with self._lock:
            self._threads = [old for old in self._threads if old.is_alive()]
            self._threads.append(t)
        t.start()
        return t

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self.mode in (CUT, CLOSED):
                _shut(client)
                continue
            try:
                upstream = socket.create_connection(self.target, _CONNECT_TIMEOUT)
            except OSError:
                client.close()  # the server is down: so is the proxied connection
                continue
            upstream.settimeout(None)  # an idle connection is not a dead one
            with self._lock:
                # cut() or close() ran while this connection was being made (the client is
                # connected once the kernel accepts, before this thread does)
                refused = self.mode in (CUT, CLOSED)
                if not refused:
                    self._conns |= {client, upstream}
            if refused:
                _shut(client)
                _shut(upstream)
                continue
            self._start(self._pump, client, upstream, False)
            self._start(self._pump, upstream, client, True)

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        """Copy ``src`` to ``dst`` as the mode says until either side closes; then close both."""
        tail = b""  # the request's last bytes, for ``after`` split over two reads
        delayed: queue.Queue[tuple[float, bytes] | None] | None = None
        if replies:
            # each reply goes back reply_delay (as it is when it came) after it came, in order
            # (`_send_late`), however many came meanwhile: a latency, not a rate
            delayed = queue.Queue()
            late = self._start(self._send_late, dst, delayed)
        while True:
            try:
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    mode = self.mode
                    if mode == LOSE_REPLIES and not replies and self._after is not None:
                        seen = tail + data
                        if self._after in seen:
                            self._after = None  # before the request is sent on: its reply is lost
                        elif len(self._after) > 1:
                            tail = seen[-(len(self._after) - 1):]
                    lose = mode == LOSE_REPLIES and replies and self._after is None
                    if lose:
                        self.lost += 1
                if lose:
                    break
                if (mode == FORWARD or mode == LOSE_REPLIES) and delayed is not None:
                    delayed.put((time.monotonic() + self.reply_delay, data))
                elif mode == FORWARD or mode == LOSE_REPLIES:
                    dst.sendall(data)
                # BLACKHOLE drops the bytes; CUT and CLOSED have shut the sockets down already
            except OSError:
                break
        if delayed is not None:  # what came before the end goes back before the close
            delayed.put(None)
            late.join(_JOIN_TIMEOUT)
        with self._lock:
            self._conns -= {src, dst}
        for s in (src, dst):
            _shut(s)

    def _send_late(self, dst: socket.socket, delayed: queue.Queue[tuple[float, bytes] | None]) -> None:
        """Send each of ``delayed``'s replies to ``dst`` when it is due, until its pump ends."""
        while (item := delayed.get()) is not None:
            due, data = item
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                dst.sendall(data)
            except OSError:
                return

    def _close_conns(self, mode: str) -> None:
        """Enter ``mode`` (`CUT` or `CLOSED`) and close every connection open now; `_accept`
        closes the ones it makes from then on."""
        with self._lock:
            self.mode = mode
            conns, self._conns = self._conns, set()
        for s in conns:
            _shut(s)


def _shut(s: socket.socket) -> None:
    """Shut ``s`` down (which wakes a thread blocked on it, as close() alone does not) and close it."""
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
