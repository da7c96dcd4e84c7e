"""A Trident topology's dead letters in every live view, on a LocalCluster with a real
redis-server: a `FileTridentSpout` reads 3 files of 40 good lines and 4 its translator refuses,
a `RedisStreamTridentSpout` 50 good entries and 6 without the field it reads, both into one
transactional `RedisMapState` counting each record, the first attempt of every third txid failed
after the spouts emitted it (its bad records given up again by the replay). Every good record is
counted exactly once in the state, and the REST API's topology and component pages,
``get_topology_info``, Prometheus's ``/metrics``, ``squall monitor -w dead-lettered``'s counts and
``squall local``'s summary say 12 dead letters at ``spout-lines`` and 6 at ``spout-entries``
(the bolts that run the Trident spouts, where a Storm user sees them), reason ``unreadable``, no
component having failed them: each bad record once, however many attempts gave it up. On main
every figure said 0."""

from __future__ import annotations

import contextlib
import io
import time

import pytest

pytest.importorskip("redis")
pytest.importorskip("starlette")
parser = pytest.importorskip("prometheus_client.parser")

from starlette.testclient import TestClient

from squall import LocalCluster
from squall.cli import _cluster as cli_cluster
from squall.cli import _local as cli_local
from squall.ui.server import local_app
from squall.worker.stats_history import WINDOW_NAMES

from ..conftest import wait_until
from ..kafka_broker import kafka_broker  # noqa: F401 (the module-scoped broker fixture)
from ..ui.conftest import BASE
from . import trident_dead_letters as t

INPUT = t.Input()
DEAD = t.expected_dead(INPUT)
TOTAL = sum(DEAD.values())


@pytest.mark.timeout(120)
def test_a_trident_topologys_dead_letters_are_in_every_live_view_once_each(tmp_path, redis_server):
    src = tmp_path / "in"
    src.mkdir()
    INPUT.write(src, redis_server.url)
    with LocalCluster() as cluster, TestClient(local_app(cluster), base_url=BASE) as api:
        cluster.submit_topology("tdl", t.conf(), t.topology(src, redis_server.url))
        good = dict.fromkeys(INPUT.good, 1)
        assert wait_until(lambda: t.stored(redis_server.url) == good, 90), t.stored(redis_server.url)
        # every batch with a bad record committed: the figures reach the views with the heartbeats
        assert wait_until(lambda: t.figures(cluster.get_topology_info("tdl")) == DEAD, 30), \
            t.figures(cluster.get_topology_info("tdl"))
        # more batches commit (empty ones) while the figures stay: no attempt counted twice
        txid = cluster.get_topology_page("tdl")["trident"]["currentTxid"]
        assert wait_until(lambda: cluster.get_topology_page("tdl")["trident"]["currentTxid"] >= txid + 3, 30)
        info = cluster.get_topology_info("tdl")
        assert t.figures(info) == DEAD
        assert t.stored(redis_server.url) == good  # each good record counted once, no bad one

        assert {cid: c["dead_lettered"] for cid, c in info["components"].items() if c["dead_lettered"]} == {
            t.FILE_SPOUT: DEAD[(t.FILE_SPOUT, "", "unreadable")],
            t.STREAM_SPOUT: DEAD[(t.STREAM_SPOUT, "", "unreadable")]}

        storm_id = info["id"]
        page = api.get(f"/api/v1/topology/{storm_id}").json()
        assert [s["deadLettered"] for s in page["topologyStats"]] == [TOTAL] * len(WINDOW_NAMES)
        bolts = {b["boltId"]: b["deadLettered"] for b in page["bolts"] if b["deadLettered"]}
        assert bolts == {t.FILE_SPOUT: 12, t.STREAM_SPOUT: 6}, page["bolts"]
        for cid in (t.FILE_SPOUT, t.STREAM_SPOUT):
            n = DEAD[(cid, "", "unreadable")]
            comp = api.get(f"/api/v1/topology/{storm_id}/component/{cid}").json()
            assert [s["deadLettered"] for s in comp["boltStats"]] == [n] * len(WINDOW_NAMES)
            assert sum(e["deadLettered"] for e in comp["executorStats"]) == n
            assert comp["deadLetterStats"] == [
                {"spout": cid, "failedBy": "", "reason": "unreadable", "deadLettered": n}]

        metrics = {f.name: f for f in parser.text_string_to_metric_families(api.get("/metrics").text)}
        samples: dict[tuple[str, str, str], float] = {}
        for s in metrics["squall_dead_lettered"].samples:
            key = (s.labels["component"], s.labels["source"], s.labels["stream"])
            samples[key] = samples.get(key, 0) + s.value
        assert samples == DEAD

        # squall monitor -w dead-lettered
        for cid in (t.FILE_SPOUT, t.STREAM_SPOUT):
            reasons: set[str] = set()
            counted = cli_cluster._dead_letter_counts(info, cid, None, reasons)
            assert (sum(c[-1].total for c in counted.values()), reasons) == (DEAD[(cid, "", "unreadable")], {"unreadable"})

        # squall local: the live line and the summary
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            last: dict = {}
            cli_local._PlainView().show(cli_local._Sampler(time.monotonic()).sample(cluster, ["tdl"], last))
            cli_local._print_summary(last, "stopped", False)
        text = out.getvalue()
        assert "dead-lettered=12" in text and "dead-lettered=6" in text, text
        assert f"{TOTAL} dead-lettered" in text, text
        cluster.kill_topology("tdl", wait_secs=0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_a_kafka_trident_spouts_dead_letters_are_counted_once_each(tmp_path, redis_server, kafka_broker, kind):  # noqa: F811
    """The Kafka Trident spouts (a transactional into a transactional state, an opaque into an
    opaque one): 60 good records and 7 the translator refuses, every txid's first attempt
    failed; each good record counted once, and ``spout-events`` says 7 dead letters in
    ``get_topology_info`` and Prometheus, however many attempts handed each one over."""
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")
    topic = f"events-{kind}"
    values = t.kafka_values(60, 7)
    kafka_broker.produce(topic, values)
    good = {v: 1 for v in values if v.startswith("good-")}
    dead = {(t.KAFKA_SPOUT, "", "unreadable"): 7}
    with LocalCluster() as cluster, TestClient(local_app(cluster), base_url=BASE) as api:
        cluster.submit_topology("kdl", t.conf(), t.kafka_topology(kafka_broker.bootstrap, topic, redis_server.url, kind))
        assert wait_until(lambda: t.stored(redis_server.url, kind) == good, 90), t.stored(redis_server.url, kind)
        assert wait_until(lambda: t.figures(cluster.get_topology_info("kdl")) == dead, 30), \
            t.figures(cluster.get_topology_info("kdl"))
        txid = cluster.get_topology_page("kdl")["trident"]["currentTxid"]
        assert wait_until(lambda: cluster.get_topology_page("kdl")["trident"]["currentTxid"] >= txid + 3, 30)
        assert t.figures(cluster.get_topology_info("kdl")) == dead
        metrics = {f.name: f for f in parser.text_string_to_metric_families(api.get("/metrics").text)}
        assert {(s.labels["component"], s.labels["source"], s.labels["stream"]): s.value
                for s in metrics["squall_dead_lettered"].samples} == dead
        assert t.stored(redis_server.url, kind) == good
        cluster.kill_topology("kdl", wait_secs=0)
