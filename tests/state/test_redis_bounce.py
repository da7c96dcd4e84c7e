"""A Redis server that keeps a stateful topology's state killed under it and restarted empty
(no persistence): the topology must not take the empty server for a first start."""

import os
import signal

import pytest

from squall import Config, LocalCluster

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture
from .counting import acked, counting_topology
from .test_redis import PROVIDER

redis = pytest.importorskip("redis")

PASSWORD = "pw-of-this-test"


def _errors(cluster, name):
    return [e["error"] for e in cluster.get_topology_info(name)["errors"]]


def test_a_redis_restarted_empty_under_a_running_topology_stops_its_checkpoints_naming_it(redis_server, tmp_path):  # noqa: F811
    redis_server.client().config_set("requirepass", PASSWORD)
    url = f"redis://:{PASSWORD}@127.0.0.1:{redis_server.port}/0"
    topo_conf = Config({"topology.state.provider": PROVIDER, "topology.state.provider.config": {"url": url},
                        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 100, "test.out.dir": str(tmp_path)})
    client = redis.Redis.from_url(url, decode_responses=True)
    with LocalCluster({"squall.secret": "a-secret-of-this-test-0123456789"}) as cluster:
        cluster.submit_topology("t", topo_conf, counting_topology(None))
        assert wait_until(lambda: len(acked(tmp_path)) >= 100 and client.hget("t/count-3$txid", "commit")
                          and client.hget("t/count-4$txid", "commit"), 60)
        os.kill(redis_server.proc.pid, signal.SIGKILL)  # no persistence: it comes back empty
        redis_server.proc.wait()
        redis_server.start()
        redis_server.client().config_set("requirepass", PASSWORD)
        lost = f"(Redis at redis://:***@127.0.0.1:{redis_server.port}/0) lost committed state"
        assert wait_until(lambda: any(lost in e for e in _errors(cluster, "t")), 60), _errors(cluster, "t")
        # what the empty server holds is never committed as if it were the whole state
        assert not wait_until(lambda: client.hget("t/count-3$txid", "commit") or
                              client.hget("t/count-4$txid", "commit"), 3)
        assert not any(PASSWORD in e for e in _errors(cluster, "t"))
        cluster.kill_topology("t", wait_secs=0)
