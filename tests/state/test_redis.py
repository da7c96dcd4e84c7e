"""The Redis state provider against a real redis-server (tests/external/conftest.py starts it)."""

import pytest

from squall.state import StateError, StateHome, get_state

from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture

KEY = b"k" * 32
PROVIDER = "squall.state.redis:RedisKeyValueStateProvider"


class Ctx:
    def __init__(self, key=KEY):
        self.state_home = StateHome(key=key)

    def get_this_component_id(self):
        return "count"

    def get_this_task_id(self):
        return 3


def conf(server, **extra):
    return {"topology.name": "t", "topology.state.provider": PROVIDER,
            "topology.state.provider.config": {"url": server.url}, **extra}


def test_prepare_commit_and_rollback_in_redis(redis_server):  # noqa: F811
    c = conf(redis_server)
    s = get_state("count-3", c, Ctx())
    s.put("a", 1)
    s.put(("t", 1), {"x": [1.5]})
    s.prepare_commit(0)
    s.commit(0)
    s.put("a", 2)
    s.delete(("t", 1))
    s.prepare_commit(1)
    restarted = get_state("count-3", c, Ctx())  # a restarted task sees the prepared transaction
    assert restarted.get("a") == 2 and restarted.get(("t", 1)) is None
    restarted.rollback()
    again = get_state("count-3", c, Ctx())
    assert again.get("a") == 1 and again.get(("t", 1)) == {"x": [1.5]}
    assert dict(again) == {"a": 1, ("t", 1): {"x": [1.5]}}
    again.put("b", 5)
    again.prepare_commit(1)
    get_state("count-3", c, Ctx()).commit(1)  # committed by the next incarnation
    assert get_state("count-3", c, Ctx()).get("b") == 5
    # Storm's layout, under the topology's name
    client = redis_server.client()
    assert client.hget("t/count-3$txid", "commit") == "1" and not client.exists("t/count-3$prepare")


def test_a_value_not_written_under_this_clusters_key_is_refused(redis_server):  # noqa: F811
    c = conf(redis_server)
    s = get_state("count-3", c, Ctx())
    s.put("a", 1)
    s.commit()
    with pytest.raises(StateError, match="fails its MAC"):
        get_state("count-3", c, Ctx(key=b"o" * 32)).get("a")


def test_an_unreachable_redis_names_the_component_and_key():
    pytest.importorskip("redis")
    with pytest.raises(StateError) as e:
        get_state("count-3", {"topology.state.provider": PROVIDER,
                              "topology.state.provider.config": '{"url": "redis://:pw@127.0.0.1:1/0"}'}, Ctx())
    msg = str(e.value)
    assert "component [count] task 3" in msg and "topology.state.provider.config" in msg
    assert "pw" not in msg and "127.0.0.1:1" in msg


def test_a_topology_on_local_cluster_keeps_its_state_in_redis(redis_server, tmp_path):  # noqa: F811
    from squall import Config, LocalCluster
    from squall.state import state_key

    from ..conftest import wait_until
    from .counting import acked, check_counts, counting_topology
    n, secret = 300, "a-secret-of-this-test-0123456789"
    topo_conf = Config(conf(redis_server))
    topo_conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    topo_conf["test.out.dir"] = str(tmp_path)
    with LocalCluster({"squall.secret": secret}) as cluster:
        cluster.submit_topology("t", topo_conf, counting_topology(n))
        assert wait_until(lambda: acked(tmp_path) >= set(range(n)), 30)
        cluster.kill_topology("t", wait_secs=0)
    counts = {}
    for key in redis_server.client().keys("t/count-*"):
        if "$" not in key:
            counts.update(dict(get_state(key[2:], topo_conf, Ctx(state_key(secret.encode()))).committed()))
    check_counts(counts, n, tmp_path)  # each id at least once, never more often than it was emitted
