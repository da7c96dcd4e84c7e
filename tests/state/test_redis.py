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


def test_a_stateful_bolt_counts_keys_equal_in_python_as_one_key_in_redis(redis_server, tmp_path):  # noqa: F811
    """A source giving one key as 1, 1.0 and True (JSON numbers from two producers): fields
    grouping sends the three to one task, whose `KeyValueState` kept each under its own bytes, so
    500 records of 1, 1.0, True, 2, 2.0 were counted as five keys of 100 (1's 300 split three
    ways). Now every record is counted under 1 (300) or 2 (200), in Redis and by ``get(1.0)``."""
    from squall import Config, LocalCluster
    from squall.state import state_key

    from ..conftest import wait_until
    from .counting import acked
    n, secret = 500, "a-secret-of-this-test-0123456789"
    topo_conf = Config(conf(redis_server))
    topo_conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    topo_conf["test.out.dir"] = str(tmp_path)
    with LocalCluster({"squall.secret": secret}) as cluster:
        cluster.submit_topology("t", topo_conf, _equal_keys_topology(n))
        assert wait_until(lambda: acked(tmp_path) >= set(range(n)), 30)
        cluster.kill_topology("t", wait_secs=0)
    emitted = sum(len(f.read_text().split()) for f in tmp_path.glob("emitted-*.txt"))
    entries, states = [], []
    for key in redis_server.client().keys("t/count-*"):
        if "$" not in key:
            states.append(get_state(key[2:], topo_conf, Ctx(state_key(secret.encode()))))
            entries += states[-1].committed()
    assert sorted(repr(k) for k, _v in entries) == ["1", "2"], entries  # one entry per key, in one task
    counts = dict(entries)
    assert counts[1] >= 300 and counts[2] >= 200 and sum(counts.values()) <= emitted, (counts, emitted)
    owner = next(s for s in states if s.get(1) is not None)
    assert owner.get(1.0) == owner.get(True) == counts[1]


KEYS = (1, 1.0, True, 2, 2.0)


def _equal_keys_topology(n):
    from squall import Fields, TopologyBuilder

    from .counting import CountIds, ReplayingSpout

    class KeySpout(ReplayingSpout):
        """`ReplayingSpout` of ids 0..n-1, each with its key ``KEYS[id % 5]``."""

        def declare_output_fields(self, declarer):
            declarer.declare(Fields("key", "id"))

        def next_tuple(self):
            i = self.next_id()
            if i is not None:
                self.emits.write(f"{i}\n")
                self.emits.flush()
                self.collector.emit([KEYS[i % len(KEYS)], i], i)

    b = TopologyBuilder()
    b.set_spout("source", KeySpout(n), 1)
    b.set_bolt("count", CountIds(), 2).fields_grouping("source", ["key"])
    return b.create_topology()
