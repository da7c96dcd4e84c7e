"""A Trident topology's dead letters in the live figures on the process host: the topology of
tests/external/trident_dead_letters.py (a `FileTridentSpout` and a `RedisStreamTridentSpout`
with 18 bad records among 170 good ones, the first attempt of every third txid failed) on a
worker process, with a real redis-server. Every good record is counted exactly once in the
state, and the master's ``get_topology_info``, the topology and component pages and the
Prometheus text made of its ``statistics`` say 12 and 6 dead letters, at the emitter bolts
``spout-lines`` and ``spout-entries``, reason ``unreadable``, each bad record once. On main
every figure said 0."""

from __future__ import annotations

import pytest

pytest.importorskip("redis")
parser = pytest.importorskip("prometheus_client.parser", reason="needs the ui extra")

from prometheus_client import CollectorRegistry, generate_latest

from squall.ui.prometheus import _Snapshot

from ..conftest import wait_until
from ..external import trident_dead_letters as t
from ..external.conftest import running_redis

INPUT = t.Input()
DEAD = t.expected_dead(INPUT)


def _prometheus(master, name: str) -> dict[tuple[str, str, str], float]:
    """``squall_dead_lettered`` as ``/metrics`` serves it (its collector over the master's
    ``statistics``), by (component, source, stream)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot([(name, master.nimbus.statistics(name=name))]))
    out: dict[tuple[str, str, str], float] = {}
    for family in parser.text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name == "squall_dead_lettered":
            for s in family.samples:
                key = (s.labels["component"], s.labels["source"], s.labels["stream"])
                out[key] = out.get(key, 0) + s.value
    return out


@pytest.mark.timeout(120)
def test_a_trident_topologys_dead_letters_reach_the_masters_figures_once_each(cluster, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    with running_redis(tmp_path) as redis_server, cluster.client() as master:
        INPUT.write(src, redis_server.url)
        master.submit_topology("tdl", t.conf(), t.topology(src, redis_server.url))
        try:
            good = dict.fromkeys(INPUT.good, 1)
            assert wait_until(lambda: t.stored(redis_server.url) == good, 90), t.stored(redis_server.url)
            assert wait_until(lambda: t.figures(master.get_topology_info("tdl")) == DEAD, 30), \
                t.figures(master.get_topology_info("tdl"))
            # more batches commit while the figures stay: no attempt counted twice
            txid = master.get_topology_page("tdl")["trident"]["currentTxid"]
            assert wait_until(lambda: master.get_topology_page("tdl")["trident"]["currentTxid"] >= txid + 3, 30)
            info = master.get_topology_info("tdl")
            assert t.figures(info) == DEAD
            assert {cid: c["dead_lettered"] for cid, c in info["components"].items() if c["dead_lettered"]} == {
                t.FILE_SPOUT: 12, t.STREAM_SPOUT: 6}
            page = master.get_topology_page("tdl")
            assert page["topologyStats"][-1]["deadLettered"] == sum(DEAD.values())
            assert {b["boltId"]: b["deadLettered"] for b in page["bolts"] if b["deadLettered"]} == {
                t.FILE_SPOUT: 12, t.STREAM_SPOUT: 6}
            assert master.get_component_page("tdl", t.STREAM_SPOUT)["deadLetterStats"] == [
                {"spout": t.STREAM_SPOUT, "failedBy": "", "reason": "unreadable", "deadLettered": 6}]
            assert _prometheus(master, "tdl") == DEAD
            assert t.stored(redis_server.url) == good  # each good record counted once, no bad one
        finally:
            master.kill_topology("tdl", 0)
