"""A LocalCluster running a small reliable topology, and its UI app in-process (starlette's
TestClient: no network), for the REST API tests."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")  # starlette's TestClient

from starlette.testclient import TestClient  # noqa: E402

from squall import Fields, LocalCluster, TopologyBuilder  # noqa: E402
from squall import Bolt  # noqa: E402
from squall.testing import FixedTupleSpout, TupleCaptureBolt  # noqa: E402
from squall.ui.server import local_app  # noqa: E402

SECRET = "ui-test-secret-0123456789"
AUTH = {"X-Squall-Secret": SECRET}
BASE = "http://127.0.0.1"  # the test clients' Host: the UI answers only its own names (DNS rebinding)


class Upper(Bolt):
    """Emits its word upper-cased, anchored, and acks."""

    def execute(self, tup):
        self.collector.emit([tup.values[0].upper()], anchors=[tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))


class Words(FixedTupleSpout):
    """Forty words, each with a message id."""

    def __init__(self):
        super().__init__([[f"w{i}"] for i in range(40)])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("word"))


def small_topology():
    """words -> upper (2) -> sink: every tuple acked."""
    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("upper", Upper(), 2).shuffle_grouping("words")
    b.set_bolt("sink", TupleCaptureBolt()).shuffle_grouping("upper")
    return b.create_topology()


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster({"squall.secret": SECRET, "storm.zookeeper.auth.password": "zk-password-1234"}) as c:
        c.submit_topology("demo", {"topology.message.timeout.secs": 5, "topology.stats.sample.rate": 1.0},
                          small_topology())
        yield c


@pytest.fixture(scope="module")
def api(cluster):
    with TestClient(local_app(cluster), base_url=BASE) as client:
        yield client


@pytest.fixture(scope="module")
def storm_id(cluster):
    return cluster.get_topology_info("demo")["id"]


@pytest.fixture
def fresh(tmp_path):
    """A cluster of its own with topology ``victim``, for actions that change it; its client, id."""
    with LocalCluster({"squall.secret": SECRET}) as c:
        c.submit_topology("victim", {"topology.message.timeout.secs": 5}, small_topology())
        with TestClient(local_app(c), base_url=BASE) as client:
            yield c, client, c.get_topology_info("victim")["id"]
