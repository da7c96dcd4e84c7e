"""The control channel: mutual authentication, requests, errors, and malformed input."""

import asyncio
import logging
import socket
import struct
import threading

import pytest

from squall.worker.rpc import AuthenticationError, Client, RemoteError, serve_connection

log = logging.getLogger("test-rpc")


@pytest.fixture
def server():
    """An RPC server on a free port in a thread; handlers: echo, boom."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder = {}

    async def handle(op, args, session):
        if op == "echo":
            return args
        if op == "boom":
            raise ValueError("no such topology 'x'")
        raise KeyError(op)

    async def main():
        holder["stop"] = asyncio.Event()
        srv = await asyncio.start_server(
            lambda r, w: serve_connection(r, w, b"secret", handle, log), "127.0.0.1", 0)
        holder["port"] = srv.sockets[0].getsockname()[1]
        started.set()
        async with srv:
            await holder["stop"].wait()

    t = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    t.start()
    started.wait(5)
    yield holder["port"]
    loop.call_soon_threadsafe(holder["stop"].set)
    t.join(5)


def test_a_client_with_the_secret_gets_answers(server):
    with Client("127.0.0.1", server, b"secret") as c:
        assert c.call("echo", a=1, b=[1, "x"]) == {"a": 1, "b": [1, "x"]}


def test_a_failing_request_raises_remote_error_naming_the_type(server):
    with Client("127.0.0.1", server, b"secret") as c:
        with pytest.raises(RemoteError) as e:
            c.call("boom")
        assert e.value.type == "ValueError" and "no such topology" in str(e.value)
        assert c.call("echo", still="alive") == {"still": "alive"}


def test_a_wrong_secret_is_refused_with_a_clear_error(server, caplog):
    with caplog.at_level(logging.WARNING, logger="test-rpc"):
        with pytest.raises(AuthenticationError, match="wrong or missing secret"):
            Client("127.0.0.1", server, b"guess")
    assert any("refused connection" in r.message for r in caplog.records)


def test_garbage_does_not_crash_the_server(server):
    for junk in (b"\x00\x00\x00\x05hello", struct.pack(">I", 2**31) + b"x", b"\xff" * 64):
        s = socket.create_connection(("127.0.0.1", server))
        s.recv(1024)
        s.sendall(junk)
        s.close()
    with Client("127.0.0.1", server, b"secret") as c:
        assert c.call("echo", ok=True) == {"ok": True}
