"""examples/stateful_topology.py: Storm's StatefulTopology, its sums kept in checkpointed state."""

from __future__ import annotations

from itertools import accumulate

from squall import Config, Fields, StormTopology
from squall.testing import AckFailMapTracker, FeederSpout

from ..conftest import wait_until


def test_module_defines_build_and_conf(stateful):
    topology = stateful.build()
    assert isinstance(topology, StormTopology)
    assert "$checkpointspout" in topology.components  # a stateful topology is checkpointed
    assert stateful.conf["topology.debug"] is False


def _run(stateful, cluster, values, first_id):
    feeder = FeederSpout(Fields("value", "ts", "msgid"))
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    ids = range(first_id, first_id + len(values))
    for i, v in zip(ids, values):
        feeder.feed([v, 0, i], i)
    conf = Config(stateful.conf)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    cluster.submit_topology("stateful", conf, stateful.build(feeder))
    # an input is acked only once the commit after it went through
    assert wait_until(lambda: all(tracker.is_acked(i) for i in ids), 20), "not every value was acked"
    assert not any(tracker.is_failed(i) for i in ids)
    cluster.kill_topology("stateful", wait_secs=0)
    assert wait_until(lambda: "stateful" not in cluster.get_topology_names(), 10)


def _sum(cluster, component):
    [namespace] = [n for n in cluster._state_memory.namespaces("stateful") if n.startswith(component + "-")]
    return cluster.get_state("stateful", namespace).get("sum")


def test_sums_are_committed_and_a_resubmitted_topology_goes_on_from_them(stateful, cluster):
    first, then = list(range(1, 21)), [100, 200, 300]
    _run(stateful, cluster, first, 0)
    assert _sum(cluster, "partialsum") == sum(first)
    # total adds up partialsum's running sums; the printers' order does not change their sum
    assert _sum(cluster, "total") == sum(accumulate(first))
    _run(stateful, cluster, then, 100)  # the same name: init_state gets the last commit
    assert _sum(cluster, "partialsum") == sum(first + then)
    assert _sum(cluster, "total") == sum(accumulate(first + then))
