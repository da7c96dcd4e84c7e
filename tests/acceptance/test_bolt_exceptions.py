"""A bolt raising on one input, on every host: the worker stays up, the other inputs are acked,
and the spout learns the cause of the one failure, across worker processes too (issue 33, item 2)."""

from __future__ import annotations

import pytest

from squall import BasicBolt, Config, Fields, TopologyBuilder
from squall._failure import EXCEPTION
from squall.testing import AckFailMapTracker, FeederSpout
from squall.testing._registry import SharedLog

from ..conftest import wait_until


class Causes(FeederSpout):
    """A FeederSpout that also logs each failure's ``(msg_id, cause)``."""

    def __init__(self, fields, causes: SharedLog) -> None:
        super().__init__(fields)
        self.causes = causes

    def fail_with(self, msg_id, cause):
        self.causes.append((msg_id, tuple(cause)))
        super().fail_with(msg_id, cause)


class ToInt(BasicBolt):
    """``int(value)``: ValueError on a value that is no number."""

    def execute(self, tup, collector):
        int(tup[0])


@pytest.mark.hosts("process")
def test_a_bolt_raising_on_one_input_fails_it_with_the_cause_across_workers(cluster):
    causes, tracker = SharedLog(), AckFailMapTracker()
    feeder = Causes(Fields("v"), causes)
    feeder.set_ack_fail_delegate(tracker)
    builder = TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("to-int", ToInt(), 2).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(2)
    cluster.submit_topology("raises", conf, builder.create_topology())
    values = [str(i) for i in range(50)]
    values[20] = "twenty"
    for i, v in enumerate(values):
        feeder.feed([v], i)
    assert wait_until(lambda: all(tracker.is_acked(i) or tracker.is_failed(i) for i in range(50)), 30)
    assert [i for i in range(50) if tracker.is_failed(i)] == [20]
    [(msg_id, (kind, component, _task, error, message))] = causes.items()
    assert (msg_id, kind, component, error) == (20, EXCEPTION, "to-int", "ValueError")
    assert message == "invalid literal for int() with base 10: 'twenty'"
    info = cluster.get_topology_info("raises")
    assert wait_until(lambda: cluster.get_topology_info("raises")["errors"], 10)
    [err] = cluster.get_topology_info("raises")["errors"]
    assert err["component"] == "to-int" and not err["fatal"] and "ValueError" in err["error"]
    assert all(w.get("restarts", 0) == 0 for w in info["workers"])
