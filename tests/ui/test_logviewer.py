"""Storm's logviewer routes over the workers' logs (`squall.ui.logviewer`): tail, pages,
search, download, listing, and every escape from the log root refused with Storm's error JSON."""

import http.client
import os

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from squall.ui.logviewer import DEFAULT_LENGTH, MAX_LENGTH, logviewer_routes
from squall.ui.server import UiServer


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "workers-artifacts"
    d = root / "wc-1-7" / "6700"
    d.mkdir(parents=True)
    (d / "worker.log").write_bytes(b"".join(b"line %06d needle-%d\n" % (i, i % 3) for i in range(10000)))
    (root / "wc-1-7" / "6701").mkdir()
    (root / "wc-1-7" / "6701" / "worker.log").write_text("short\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    return root


@pytest.fixture
def client(root):
    return TestClient(Starlette(routes=logviewer_routes(root)))


def test_the_log_page_is_the_tail_by_default_and_pages_by_start_and_length(client, root):
    size = (root / "wc-1-7" / "6700" / "worker.log").stat().st_size
    r = client.get("/api/v1/log", params={"file": "wc-1-7/6700/worker.log"})
    assert r.status_code == 200 and "line 009999 needle-0" in r.text and "line 000000" not in r.text
    assert f"bytes {size - DEFAULT_LENGTH}-{size} of {size}" in r.text
    r = client.get("/api/v1/log", params={"file": "wc-1-7/6700/worker.log", "start": 0, "length": 42})
    assert "line 000000 needle-0\nline 000001 needle-1" in r.text and "line 000002" not in r.text
    r = client.get("/api/v1/log", params={"file": "wc-1-7/6700/worker.log", "start": 0, "length": 100,
                                          "grep": "needle-2"})
    assert "line 000002 needle-2" in r.text and "line 000001" not in r.text


def test_search_returns_storms_json_with_context_and_the_offset_to_go_on_from(client):
    r = client.get("/api/v1/search/wc-1-7/6700/worker.log",
                   params={"search-string": "line 000100 ", "num-matches": 5})
    body = r.json()
    assert r.status_code == 200 and body["searchString"] == "line 000100 " and body["startByteOffset"] == 0
    (m,) = body["matches"]
    assert m["byteOffset"] == 100 * 21 and m["matchString"] == "line 000100 "
    assert m["beforeString"].endswith("line 000099 needle-0\n") and len(m["beforeString"].encode()) == 128
    assert m["afterString"].startswith("needle-1\nline 000101") and "file=wc-1-7%2F6700%2Fworker.log" in m["logviewerURL"]
    assert "nextByteOffset" not in body  # the only match: nothing to go on to
    r = client.get("/api/v1/search/wc-1-7/6700/worker.log", params={"search-string": "needle-2", "num-matches": 3})
    offsets = [m["byteOffset"] for m in r.json()["matches"]]
    assert offsets == [2 * 21 + 12, 5 * 21 + 12, 8 * 21 + 12]
    again = client.get("/api/v1/search/wc-1-7/6700/worker.log",
                       params={"search-string": "needle-2", "num-matches": 1,
                               "start-byte-offset": r.json()["nextByteOffset"]}).json()
    assert [m["byteOffset"] for m in again["matches"]] == [11 * 21 + 12]


def test_a_search_of_a_log_cut_short_under_it_ends_at_the_cut(root, monkeypatch):
    """A log truncated in place (``: > worker.log``, logrotate's copytruncate) after the search
    took its size: each read past the cut came back empty and the search stepped on one byte a
    read, ~210,000 reads here (a thread of the UI busy for minutes on a log of gigabytes)."""
    import builtins

    from squall.ui import logviewer
    log = root / "wc-1-7" / "6700" / "worker.log"
    reads = []

    class Counted:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def seek(self, pos):
            return self.f.seek(pos)

        def read(self, n):
            reads.append(n)
            return self.f.read(n)

    def cut_after_open(path, mode):
        f = builtins.open(path, mode)  # noqa: SIM115 (closed by Counted's __exit__, as search_file's with)
        os.truncate(path, 21 * 3)  # three lines are left
        return Counted(f)

    monkeypatch.setattr(logviewer, "open", cut_after_open, raising=False)
    matches, next_offset = logviewer.search_file(log, b"needle-2", 0, 10)
    assert [m.byte_offset for m in matches] == [2 * 21 + 12] and next_offset is None
    assert len(reads) <= 4, f"{len(reads)} reads of a file of 63 bytes"


def test_download_serves_the_whole_file_as_an_attachment(client, root):
    r = client.get("/api/v1/download", params={"file": "wc-1-7/6701/worker.log"})
    assert r.status_code == 200 and r.content == b"short\n"
    assert "attachment" in r.headers["content-disposition"]


def test_a_download_of_a_log_its_worker_writes_on_is_the_file_as_it_was_when_asked_for(root):
    """A live worker.log grows under its download: the response is the bytes it held when the
    download began, with a Content-Length that matches (read to the end, it overran it, and the
    server tore the connection down)."""
    log = root / "wc-1-7" / "6700" / "worker.log"
    before = b"".join(b"2026-12-04 23:00:00.000 app [INFO] [split:3] line %07d\n" % i for i in range(150_000))
    log.write_bytes(before)  # ~8 MB: more than the sockets' buffers hold
    server = UiServer(Starlette(routes=logviewer_routes(root)), "127.0.0.1", 0).start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", "/api/v1/download?file=wc-1-7%2F6700%2Fworker.log")
        resp = conn.getresponse()
        first = resp.read(65536)
        with log.open("ab") as f:  # the worker writes on while the rest is on its way
            f.write(b"2026-12-04 23:00:01.000 app [INFO] [split:3] a later line\n" * 40_000)
        body = first + resp.read()
        assert int(resp.getheader("content-length")) == len(before)
        assert body == before
        assert resp.getheader("content-disposition") == 'attachment; filename="wc-1-7-6700-worker.log"'
    finally:
        conn.close()
        server.stop()


def test_a_symlink_loop_in_the_log_root_is_refused_with_storms_error_json(root):
    d = root / "wc-1-7" / "6700"
    os.symlink("b", d / "a")
    os.symlink("a", d / "b")
    c = TestClient(Starlette(routes=logviewer_routes(root)), raise_server_exceptions=False)
    for r in (c.get("/api/v1/log", params={"file": "wc-1-7/6700/a"}),
              c.get("/api/v1/download", params={"file": "wc-1-7/6700/a"}),
              c.get("/api/v1/search/wc-1-7/6700/a", params={"search-string": "x"})):
        assert r.status_code == 400 and r.json()["error"].startswith("400") and "wc-1-7/6700/a" in r.json()["errorMessage"]


def test_list_logs_names_the_files_of_a_topology_or_a_port(client):
    assert client.get("/api/v1/listLogs", params={"topoId": "wc-1-7"}).json() == \
        ["wc-1-7/6700/worker.log", "wc-1-7/6701/worker.log"]
    assert client.get("/api/v1/listLogs", params={"topoId": "wc-1-7", "port": 6701}).json() == \
        ["wc-1-7/6701/worker.log"]
    assert client.get("/api/v1/listLogs", params={"topoId": "other"}).json() == []


@pytest.mark.parametrize("name", ["../secret.txt", "wc-1-7/../../secret.txt", "/etc/passwd",
                                  "wc-1-7/link/secret.txt", "x" * 5000, "wc-1-7/6700"])
def test_escapes_from_the_root_and_bad_names_are_refused_with_storms_error_json(client, root, name):
    os.symlink(root.parent, root / "wc-1-7" / "link")
    for url, params in (("/api/v1/log", {"file": name}), ("/api/v1/download", {"file": name})):
        r = client.get(url, params=params)
        assert r.status_code in (400, 404), (url, name, r.status_code)
        body = r.json()
        assert body["error"] in ("400 Bad Request", "404 Not Found") and body["errorMessage"]
        assert "top secret" not in r.text and "Traceback" not in r.text


@pytest.mark.parametrize("params", [{"start": "x"}, {"length": MAX_LENGTH + 1}, {"length": 0}, {"start": -1},
                                    {"start": 10 ** 30}, {"start": 10 ** 9}])
def test_bad_page_parameters_get_a_400_naming_them(client, params):
    r = client.get("/api/v1/log", params={"file": "wc-1-7/6700/worker.log", **params})
    assert r.status_code == 400 and r.json()["error"] == "400 Bad Request"


@pytest.mark.parametrize("params", [{"search-string": ""}, {"search-string": "x" * 1025},
                                    {"search-string": "a", "num-matches": "many"},
                                    {"search-string": "a", "start-byte-offset": 10 ** 9}])
def test_bad_search_parameters_get_a_400(client, params):
    r = client.get("/api/v1/search/wc-1-7/6700/worker.log", params=params)
    assert r.status_code == 400 and r.json()["errorMessage"]


def test_an_unknown_file_is_a_404(client):
    r = client.get("/api/v1/log", params={"file": "nope/1/worker.log"})
    assert r.status_code == 404 and r.json() == {"error": "404 Not Found",
                                                 "errorMessage": "no log file 'nope/1/worker.log'"}
    assert client.get("/api/v1/search/nope/1/worker.log", params={"search-string": "a"}).status_code == 404


@pytest.mark.parametrize("path, params, reader", [
    ("/api/v1/log", {"file": "wc-1-7/6700/worker.log"}, "read_page"),
    ("/api/v1/search/wc-1-7/6700/worker.log", {"search-string": "needle-2"}, "search_file"),
])
def test_reading_and_searching_a_log_run_off_the_event_loop(client, monkeypatch, path, params, reader):
    # a 10 MiB page or a scan of a large log on the event loop would hold up every other request
    import asyncio

    import squall.ui.logviewer as lv
    real = getattr(lv, reader)
    loops = []

    def spy(*args, **kwargs):
        try:
            loops.append(asyncio.get_running_loop())
        except RuntimeError:
            loops.append(None)  # a worker thread: no event loop runs here
        return real(*args, **kwargs)

    monkeypatch.setattr(lv, reader, spy)
    assert client.get(path, params=params).status_code == 200
    assert loops == [None]
