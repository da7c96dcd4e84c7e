"""tests/tcp_proxy.py, the fault-making proxy that tests/cluster/test_ha.py,
tests/process/test_trident_nimbus_ha.py and tests/process/test_errors_kept_once.py put between a
client and its server: each mode does what those tests rely on, and `close` leaves no thread and
no listening port behind."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from .conftest import wait_until
from .ports import free_port
from .tcp_proxy import TcpProxy

_QUIET = 0.3  # seconds of silence that stand for "nothing came" where nothing may come


class _Echo(socketserver.ThreadingTCPServer):
    """Echoes every byte back and keeps what it was sent, to tell a request the server got from
    one the proxy dropped."""

    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        self.got = bytearray()
        super().__init__(("127.0.0.1", 0), _EchoHandler)


class _EchoHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        with contextlib.suppress(OSError):  # the proxy closed the connection: the test sees why
            while data := self.request.recv(65536):
                self.server.got += data  # type: ignore[attr-defined]
                self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[_Echo]:
    """An `_Echo` server on loopback, shut down after the test."""
    server = _Echo()
    t = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    t.start()
    yield server
    server.shutdown()
    server.server_close()
    t.join(10)


def _connect(proxy: TcpProxy, hello: bytes = b"") -> socket.socket:
    """A connection through ``proxy``; with ``hello``, echoed once on it (so forwarding)."""
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    if hello:
        s.sendall(hello)
        assert s.recv(100) == hello
    return s


def _closed(s: socket.socket) -> bool:
    """Whether the proxy closed ``s`` (end of stream or reset) rather than sent bytes."""
    try:
        return s.recv(100) == b""
    except ConnectionResetError:
        return True


def test_forward_passes_every_byte_both_ways(echo):
    with TcpProxy(echo.server_address[1]) as proxy, _connect(proxy, b"ping") as s:
        s.sendall(b"pong")
        assert s.recv(100) == b"pong"
        assert proxy.address == f"127.0.0.1:{proxy.port}"


def test_lose_replies_lets_the_request_through_and_closes_the_connection_at_its_reply(echo):
    with TcpProxy(echo.server_address[1]) as proxy, _connect(proxy, b"one") as s:
        proxy.lose_replies()
        s.sendall(b"two")
        assert _closed(s)  # no reply, the connection closed instead
        assert bytes(echo.got) == b"onetwo" and proxy.lost == 1  # though the server had it
        proxy.forward()
        _connect(proxy, b"three").close()  # replies come back on a new connection


def test_lose_replies_after_a_request_loses_from_that_requests_reply_on(echo):
    """The bytes that arm it may come split over two reads; the replies before them go back."""
    with TcpProxy(echo.server_address[1]) as proxy, _connect(proxy) as s:
        proxy.lose_replies(after=b"flag a")
        s.sendall(b"beat")
        assert s.recv(100) == b"beat" and proxy.lost == 0
        s.sendall(b"beat, fl")
        assert s.recv(100) == b"beat, fl"
        s.sendall(b"ag a")
        assert _closed(s) and proxy.lost == 1
        assert bytes(echo.got) == b"beatbeat, flag a"
        with _connect(proxy) as again:  # and from then on, until forward()
            again.sendall(b"more")
            assert _closed(again) and proxy.lost == 2
        assert bytes(echo.got) == b"beatbeat, flag amore"


def test_blackhole_drops_every_byte_and_keeps_the_connection_open(echo):
    with TcpProxy(echo.server_address[1]) as proxy, _connect(proxy, b"one") as s:
        proxy.blackhole()
        s.sendall(b"lost")
        s.settimeout(_QUIET)
        with pytest.raises(TimeoutError):  # neither an answer nor a close: silence
            s.recv(100)
        assert bytes(echo.got) == b"one"
        proxy.forward()
        s.settimeout(10)
        s.sendall(b"two")  # the same connection carries bytes again
        assert s.recv(100) == b"two"


def test_cut_closes_the_open_connections_and_refuses_new_ones(echo):
    with TcpProxy(echo.server_address[1]) as proxy, _connect(proxy) as s:
        proxy.cut()
        assert _closed(s)
        with _connect(proxy) as late:
            assert _closed(late)
        proxy.forward()
        _connect(proxy, b"back").close()


def test_reply_delay_holds_each_reply_that_long_in_order_not_one_after_another(echo):
    """A latency (tests/cluster/test_liveness.py counts round trips by it): requests sent
    together come back together, each at least ``reply_delay`` after it went; five in a row
    come back well before five delays."""
    delay = 0.3
    with TcpProxy(echo.server_address[1], reply_delay=delay) as proxy, _connect(proxy) as s:
        sent = time.monotonic()
        for i in range(5):
            s.sendall(b"%d;" % i)
        got = b""
        while len(got) < 10:
            got += s.recv(100)
        took = time.monotonic() - sent
        assert got == b"0;1;2;3;4;" and delay <= took < 4 * delay, took


def test_close_stops_every_thread_and_the_port_listens_no_more(echo):
    before = set(threading.enumerate())
    proxy = TcpProxy(echo.server_address[1], reply_delay=0.05)  # its late senders too
    conns = [_connect(proxy, b"x") for _ in range(3)]
    proxy.blackhole()  # pumps that forward nothing still end
    proxy.close()
    assert [t for t in threading.enumerate() if t not in before and t.name == "tcp-proxy"] == []
    assert all(_closed(c) for c in conns)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=10).close()
    for c in conns:
        c.close()


def test_a_server_that_is_down_closes_the_proxied_connection():
    # nothing listens on a free port; it is below the ephemeral range the proxy's own port comes
    # from, so the proxy cannot be listening there itself (and forward to itself without end)
    with TcpProxy(free_port()) as proxy, _connect(proxy) as s:
        assert wait_until(lambda: _closed(s), 10)
