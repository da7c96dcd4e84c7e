"""The web pages' routes and the history endpoint, over a master link that answers from a dict."""

from starlette.applications import Starlette
from starlette.testclient import TestClient

from squall.ui.history import TaskCounts
from squall.ui.link import MasterUnavailable
from squall.ui.pages import WebPages, read_totals


class _Link:
    """A UiMasterLink whose `read` answers ``list``, ``topology_page`` and ``statistics`` from
    fixed figures: one spout task, 7, holding them all."""

    def __init__(self, acked: int = 0, down: bool = False) -> None:
        self.acked = acked
        self.down = down

    def read(self, op, **args):
        if self.down:
            raise MasterUnavailable("the master is unreachable: test")
        if op == "list":
            return [{"name": "wc", "id": "wc-1-100"}]
        if op == "statistics":
            assert args == {"name": "wc"}
            return {"tasks": [["words", 7, "acked", "", "default", self.acked],
                              ["words", 7, "failed", "", "default", 3],
                              ["words", 7, "emitted", "", "__metrics", 99],
                              ["count", 8, "failed", "words", "default", 5]]}
        assert op == "topology_page" and args["name"] == "wc" and args["window"] == ":all-time"
        return {"spouts": [{"spoutId": "words"}], "topologyStats": [
            {"window": "600", "acked": 1, "failed": 0, "completeLatency": "1.000"},
            {"window": ":all-time", "acked": self.acked, "failed": 3, "completeLatency": "12.500"}]}


def _client(link):
    pages = WebPages(link, {"squall.ui.history.interval.secs": 1})
    return pages, TestClient(Starlette(routes=pages.routes()))


def test_read_totals_takes_the_all_time_spout_figures_of_every_topology():
    (t,) = read_totals(_Link(acked=42))
    assert (t.topology_id, t.acked, t.failed, t.complete_latency_ms) == ("wc-1-100", 42, 3, 12.5)
    assert t.tasks == {7: TaskCounts(42, 3)}  # the spout's task; the bolt's failures are not the topology's


def test_history_endpoint_serves_the_samples_and_names_unknown_topologies():
    link = _Link(acked=10)
    pages, client = _client(link)
    assert client.get("/api/v1/topology/wc-1-100/history").json()["samples"] == []
    pages.sampler.sample_once()
    link.acked = 30
    pages.sampler.sample_once()
    body = client.get("/api/v1/topology/wc-1-100/history").json()
    assert body["intervalSecs"] == 1
    assert [s["acked"] for s in body["samples"]] == [10, 30]
    missing = client.get("/api/v1/topology/nope-1-1/history")
    assert missing.status_code == 404 and "nope-1-1" in missing.json()["errorMessage"]
    link.down = True
    assert client.get("/api/v1/topology/other-2-2/history").status_code == 503


def test_the_pages_and_their_static_files_are_served():
    _, client = _client(_Link())
    assert client.get("/", follow_redirects=False).headers["location"] == "/index.html"
    for page, script in [("/index.html", "cluster.js"), ("/topology.html", "topology.js"),
                         ("/component.html", "component.js")]:
        resp = client.get(page)
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
        assert f'src="/static/{script}"' in resp.text
        assert client.get(f"/static/{script}").status_code == 200
    assert client.get("/static/squall.css").status_code == 200
