"""Storm's DRPC HTTP interface (``drpc.http.port``) on ``squall drpc``'s server (`BackgroundDRPC`),
driven over HTTP while a stand-in topology answers on the invocations port: GET with and
without args and POST each answered right under concurrency, Storm's statuses and error bodies
for a failed, a timed-out and an unserved request, and squall's guards (the cluster's secret,
the Host check, the body limit)."""

from __future__ import annotations

import http.client
import json
import threading
from urllib.parse import quote

import pytest

from squall._errors import SquallError
from squall.drpc.server import BackgroundDRPC, DRPCServer
from squall.ui.drpc_http import start_http

from ..conftest import wait_until
from ..ports import free_ports
from .calls import HANG_GUARD
from .test_drpc_server import SECRET, Topology

pytest.importorskip("uvicorn")


@pytest.fixture
def http_conf(tmp_path):
    port, invocations = free_ports(2)
    return {"storm.local.dir": str(tmp_path / "storm-local"), "squall.secret": SECRET,
            "drpc.servers": ["127.0.0.1"], "drpc.port": port, "drpc.invocations.port": invocations,
            "drpc.request.timeout.secs": 600, "drpc.http.port": 0, "drpc.max_buffer_size": 4096}


def start(conf):
    drpc = BackgroundDRPC.start_for_nimbus(conf, http=start_http)
    assert drpc is not None and drpc.server.listening is not None and drpc.server.listening.http is not None
    return drpc


@pytest.fixture
def server(http_conf):
    drpc = start(http_conf)
    yield drpc
    drpc.stop()


def call(drpc, method, path, body=None, secret=SECRET, headers=None, chunked=False):
    """(status, headers, body) of one request on a connection of its own."""
    host, port = drpc.server.listening.http
    conn = http.client.HTTPConnection(host, port, timeout=HANG_GUARD)
    try:
        sent = dict(headers or {})
        if secret is not None:
            sent["X-Squall-Secret"] = secret
        conn.request(method, path, body=body, headers=sent, encode_chunked=chunked)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def error_of(body):
    return json.loads(body.decode())


def test_concurrent_gets_and_posts_each_get_their_own_answer(server, http_conf):
    topology = Topology(http_conf, "exclaim")
    threads, n = 8, 24
    answers: dict[tuple[int, int], tuple[str, int, bytes]] = {}
    lock = threading.Lock()

    def caller(t):
        for i in range(n):
            args = f"t{t}-{i} é/?&%{'x' * i}"
            if i % 3 == 0:  # the args in the path, percent-encoded (a / too)
                got = call(server, "GET", f"/drpc/exclaim/{quote(args, safe='')}")
            elif i % 3 == 1:  # the args as the body
                got = call(server, "POST", "/drpc/exclaim", body=args.encode())
            else:  # no args
                args = ""
                got = call(server, "GET", "/drpc/exclaim")
            with lock:
                answers[(t, i)] = (args, got[0], got[2])
    workers = [threading.Thread(target=caller, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(HANG_GUARD)
    topology.close()
    assert len(answers) == threads * n
    wrong = {k: v for k, v in answers.items() if (v[1], v[2]) != (200, (v[0] + "!").encode())}
    assert not wrong, list(wrong.items())[:5]
    stats = server.server.book.stats()
    assert (stats.executed, stats.returned, stats.failed, stats.outstanding) == (threads * n, threads * n, 0, 0)
    assert topology.answered == threads * n


def test_a_failed_request_is_400_with_storms_error_body(server, http_conf):
    topology = Topology(http_conf, "exclaim")
    status, headers, body = call(server, "GET", "/drpc/exclaim/fail%20this")
    assert status == 400 and headers["content-type"] == "application/json"
    assert error_of(body) == {"error": "FAILED_REQUEST", "errorMessage": "Request failed: the bolt said no"}
    assert call(server, "POST", "/drpc/exclaim", body=b"fail too")[0] == 400
    assert call(server, "GET", "/drpc/exclaim/next")[::2] == (200, b"next!")
    topology.close()
    stats = server.server.book.stats()
    assert (stats.executed, stats.failed, stats.returned) == (3, 2, 1)


def test_timed_out_and_unserved_requests_are_504(http_conf):
    drpc = start({**http_conf, "drpc.request.timeout.secs": 0.3})
    try:
        # a function no topology serves times out, as in Storm
        status, _, body = call(drpc, "GET", "/drpc/nobody-serves-this/x")
        assert status == 504
        error = error_of(body)
        assert error["error"] == "SERVER_TIMEOUT" and "drpc.request.timeout.secs" in error["errorMessage"]
        # a request fetched and never answered
        fetched = []
        stop = threading.Event()

        def swallow():
            from squall.drpc.client import ClusterLinks
            links = ClusterLinks.of(http_conf)
            link = links.link("127.0.0.1", links.drpc.invocations_port)
            while not stop.is_set() and not fetched:
                request = link.call("fetch_request", function="silent")
                if request is None:
                    stop.wait(0.002)
                else:
                    fetched.append(request)
            link.close()
        swallower = threading.Thread(target=swallow, daemon=True)
        swallower.start()
        status, _, body = call(drpc, "POST", "/drpc/silent", body=b"anything")
        stop.set()
        swallower.join(HANG_GUARD)
        assert status == 504 and error_of(body)["error"] == "SERVER_TIMEOUT" and len(fetched) == 1
        stats = drpc.server.book.stats()
        assert (stats.executed, stats.timed_out, stats.outstanding) == (2, 2, 0)
    finally:
        drpc.stop()


def test_a_missing_or_wrong_secret_is_refused(server):
    status, _, body = call(server, "GET", "/drpc/exclaim/x", secret=None)
    assert status == 403 and "X-Squall-Secret" in error_of(body)["errorMessage"]
    status, _, body = call(server, "POST", "/drpc/exclaim", body=b"x", secret="not-the-cluster-secret-42")
    assert status == 403 and "does not hold" in error_of(body)["errorMessage"]
    assert SECRET not in body.decode()
    assert server.server.book.stats().executed == 0


def test_secret_not_required_when_switched_off(http_conf):
    drpc = start({**http_conf, "drpc.http.secret.required": False})
    topology = Topology(http_conf, "exclaim")
    try:
        assert call(drpc, "GET", "/drpc/exclaim/open", secret=None)[::2] == (200, b"open!")
    finally:
        topology.close()
        drpc.stop()


def test_a_foreign_host_header_is_refused(server):
    status, _, body = call(server, "GET", "/drpc/exclaim/x", headers={"Host": "rebound.example.com"})
    assert status == 403 and "drpc.http.allowed.hosts" in error_of(body)["errorMessage"]
    assert server.server.book.stats().executed == 0


def test_an_oversized_body_is_refused(server, http_conf):
    topology = Topology(http_conf, "exclaim")
    limit = http_conf["drpc.max_buffer_size"]
    status, _, body = call(server, "POST", "/drpc/exclaim", body=b"a" * (limit + 1))
    assert status == 413 and "drpc.max_buffer_size" in error_of(body)["errorMessage"]
    # without a Content-Length too (chunked)
    status, _, _ = call(server, "POST", "/drpc/exclaim", body=iter([b"a" * limit, b"b"]), chunked=True)
    assert status == 413
    assert server.server.book.stats().executed == 0
    # under it: run (the spout's fetch frames the args in drpc.max_buffer_size too, with its overhead)
    assert call(server, "POST", "/drpc/exclaim", body=b"a" * (limit // 2))[::2] == (200, b"a" * (limit // 2) + b"!")
    topology.close()


def test_other_paths_and_methods(server):
    assert call(server, "GET", "/drpc/")[0] == 404
    assert call(server, "GET", "/other/exclaim")[0] == 404
    assert call(server, "GET", "/drpc/a/b/c")[0] == 404
    status, headers, _ = call(server, "PUT", "/drpc/exclaim", body=b"x")
    assert status == 405 and headers["allow"] == "GET, POST"
    assert call(server, "POST", "/drpc/exclaim/args", body=b"x")[0] == 405
    assert server.server.book.stats().executed == 0


def test_a_waiting_request_gets_503_when_the_server_stops(http_conf):
    drpc = start(http_conf)
    got = []
    waiter = threading.Thread(target=lambda: got.append(call(drpc, "GET", "/drpc/never/x")), daemon=True)
    waiter.start()
    wait_until(lambda: drpc.server.book.stats().executed == 1, timeout=HANG_GUARD)
    drpc.stop()
    waiter.join(HANG_GUARD)
    assert got and got[0][0] == 503 and error_of(got[0][2])["error"] == "SERVER_SHUTDOWN"


def test_off_unless_the_port_is_set_and_storms_filters_refused(http_conf):
    off = {**http_conf, "drpc.http.port": None}
    drpc = BackgroundDRPC.start_for_nimbus(off, http=start_http)
    assert drpc is not None
    try:
        assert drpc.server.listening.http is None
    finally:
        drpc.stop()
    drpc = BackgroundDRPC.start_for_nimbus({**http_conf, "drpc.http.port": -1})  # Storm's "off"
    assert drpc is not None
    try:
        assert drpc.server.listening.http is None
    finally:
        drpc.stop()
    with pytest.raises(SquallError, match="without its HTTP interface"):  # never silently without it
        DRPCServer(http_conf)
    with pytest.raises(SquallError, match="drpc.http.filter"):
        BackgroundDRPC.start_for_nimbus({**http_conf, "drpc.http.filter": "org.example.AuthFilter"}, http=start_http)


def test_a_server_that_fails_to_start_always_says_so(http_conf):
    """The server thread woke its starter before it had kept the error its serve raised, so a
    DRPC server whose start failed (here, Storm's HTTP filter refused) was now and then returned
    as started (the filter test failed about once in several runs under load)."""
    import sys

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over as often as it can: the race shows at once
    try:
        for _ in range(100):
            with pytest.raises(SquallError, match="drpc.http.filter"):
                BackgroundDRPC.start_for_nimbus({**http_conf, "drpc.http.filter": "org.example.AuthFilter"},
                                                http=start_http)
    finally:
        sys.setswitchinterval(before)
