"""Stateful topologies on LocalCluster: a crash rolls state back and replays (nothing lost), and
bad input (a value that cannot be serialized with pickle off, a state provider that cannot be
reached) is reported naming the component and the key."""

from collections import Counter

import pytest

from squall import BaseStatefulBolt, BasicBolt, Config, Fields, LocalCluster, TopologyBuilder
from squall.testing import FeederSpout

from ..conftest import wait_until
from .counting import CountIds, ReplayingSpout, acked, check_counts, counting_topology, emitted

N = 1000


@pytest.fixture
def cluster():
    c = LocalCluster()
    try:
        yield c
    finally:
        c.shutdown()


def _conf(out, **extra):
    conf = Config()
    conf.set_num_workers(2)
    conf.set_max_spout_pending(100)
    conf.set_message_timeout_secs(5)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 200
    conf["test.out.dir"] = str(out)
    conf.update(extra)
    return conf


def _counts(cluster, name):
    counts = {}
    for ns in cluster._state_memory.namespaces(name):
        if ns.startswith("count-"):
            counts.update(dict(cluster.get_state(name, ns).committed()))
    return counts


def test_a_crashed_worker_rolls_state_back_and_nothing_is_lost(cluster, tmp_path):
    # the bolt that raises is a plain one (Pass): it crashes its worker with Storm's fail-fast
    cluster.submit_topology("counting", _conf(tmp_path, **{"topology.bolt.fail.fast": True}),
                            counting_topology(N, crash_at=N // 2))
    assert wait_until(lambda: acked(tmp_path) >= set(range(N)), 60), \
        f"ids never acked: {sorted(set(range(N)) - acked(tmp_path))[:20]}"
    info = cluster.get_topology_info("counting")
    assert any("crash on purpose" in e["error"] and e["fatal"] for e in info["errors"]), "the worker did not crash"
    cluster.kill_topology("counting", wait_secs=0)
    twice, replayed = check_counts(_counts(cluster, "counting"), N, tmp_path)
    assert replayed > 0, "nothing was replayed: the crash hit no tuple in flight"
    print(f"LocalCluster crash: {twice} updates applied twice, {replayed} tuples replayed")


class DeadLettering(ReplayingSpout):
    """Replays what fails, but an id whose input raised three times is given up (the
    dead-letter rule of a user's spout) and written to ``dead.txt``."""

    def fail_with(self, msg_id, cause):
        if cause.kind == "exception":
            self.raised = getattr(self, "raised", Counter())
            self.raised[msg_id] += 1
            if self.raised[msg_id] >= 3:
                with open(self.dir / "dead.txt", "a") as f:
                    f.write(f"{msg_id}\n")
                return
        self.fail(msg_id)


class RaisesOn(BasicBolt):
    """Passes ids on, and raises on ``bad`` every time (a record it cannot parse)."""

    def __init__(self, bad):
        self.bad = bad

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id"))

    def execute(self, tup, collector):
        if tup[0] == self.bad:
            raise ValueError(f"cannot parse record {tup[0]}")
        collector.emit([tup[0]])


def test_a_record_that_raises_before_a_stateful_bolt_stops_no_checkpoint(cluster, tmp_path):
    """One bad record raises in a plain bolt before a stateful one (which fails only that
    input): the checkpoints behind it went on, every other id is acked and counted, and the
    bad one is dead-lettered. It used to stall every checkpoint after it for good."""
    bad = N // 2
    b = TopologyBuilder()
    b.set_spout("source", DeadLettering(N), 1)
    b.set_bolt("work", RaisesOn(bad), 2).shuffle_grouping("source")
    b.set_bolt("count", CountIds(), 2).fields_grouping("work", ["id"])
    cluster.submit_topology("poison", _conf(tmp_path), b.create_topology())
    good = set(range(N)) - {bad}
    assert wait_until(lambda: acked(tmp_path) >= good and (tmp_path / "dead.txt").exists(), 60), \
        f"ids never acked: {sorted(good - acked(tmp_path))[:20]}"
    assert bad not in acked(tmp_path) and (tmp_path / "dead.txt").read_text().split() == [str(bad)]
    assert wait_until(lambda: set(_counts(cluster, "poison")) >= good, 30), "the last ids were never committed"
    cluster.kill_topology("poison", wait_secs=0)
    counts = _counts(cluster, "poison")
    emits = emitted(tmp_path)
    assert set(counts) == good, sorted(set(counts) ^ good)[:20]
    assert all(1 <= c <= emits[i] for i, c in counts.items()), "an update lost, or applied more often than emitted"


class Keep(BaseStatefulBolt):
    """Puts what ``make`` returns in its state."""

    def __init__(self, make):
        self.make = make

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.state.put(tup[0], self.make())
        self.collector.ack(tup)


def _lock():
    import threading
    return threading.Lock()


def _errors(cluster, name):
    return [e["error"] for e in cluster.get_topology_info(name)["errors"]]


def _keep_topology(make):
    feeder = FeederSpout(Fields("key"))
    feeder.feed(["the-key"], 1)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("keep", Keep(make)).shuffle_grouping("feed")
    return b.create_topology()


def test_a_value_that_cannot_be_serialized_with_pickle_off_is_reported_naming_component_and_key(cluster, tmp_path):
    conf = _conf(tmp_path, **{"topology.fall.back.on.pickle": False})
    cluster.submit_topology("unpicklable", conf, _keep_topology(_lock))
    assert wait_until(lambda: any("state key 'the-key'" in e for e in _errors(cluster, "unpicklable")), 20)
    [error] = {e for e in _errors(cluster, "unpicklable") if "state key" in e}
    assert "component [keep]" in error and "topology.fall.back.on.pickle" in error


def test_an_unreachable_state_provider_is_reported_naming_component_and_key(cluster, tmp_path):
    pytest.importorskip("redis")
    conf = _conf(tmp_path, **{"topology.state.provider": "squall.state.redis:RedisKeyValueStateProvider",
                              "topology.state.provider.config": {"url": "redis://127.0.0.1:1/0"}})
    cluster.submit_topology("unreachable", conf, _keep_topology(dict))
    assert wait_until(lambda: any("cannot reach Redis" in e for e in _errors(cluster, "unreachable")), 20)
    error = next(e for e in _errors(cluster, "unreachable") if "cannot reach Redis" in e)
    assert "component [" in error and "topology.state.provider.config" in error and "127.0.0.1:1" in error
