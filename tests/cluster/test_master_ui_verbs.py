"""The master's verbs the UI adds: supervisors with their uptime and used slots, and the debug
switch, clamped and kept across a restart of the master."""

from __future__ import annotations

import pytest

from squall._config import cluster_conf
from squall.cluster.master import Master
from squall.engine.clock import SimulatedClock

from .test_master import _register, _topology


@pytest.fixture
def conf(tmp_path):
    return cluster_conf({"storm.local.dir": str(tmp_path), "squall.secret": "a-secret-of-twenty-chars"})


def test_supervisors_report_uptime_and_used_slots(conf):
    clock = SimulatedClock()
    m = Master(conf, clock=clock)
    _register(m)
    m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    clock.advance(75)
    _register(m)  # a later sync keeps the first one's time
    assert m.op_supervisors() == [{"id": "s1", "host": "127.0.0.1", "uptime_secs": 75.0, "slots_total": 2,
                                   "slots_used": 1, "healthy": True, "health_problem": None}]
    assert m.op_cluster_info()["nimbus"]["uptime_secs"] == 75.0
    assert "squall.secret" not in m.op_configuration()


def test_debug_is_clamped_named_and_kept_across_a_restart(conf):
    m = Master(conf)
    storm_id = m.op_submit(name="t", conf={}, topology=_topology())
    assert m.op_debug(name="t", component=None, enable=True, pct=300) == {"enable": True, "samplingpct": 100}
    assert m.op_debug(name="t", component="sink", enable=False, pct=-1) == {"enable": False, "samplingpct": 0}
    with pytest.raises(KeyError, match="nope"):
        m.op_debug(name="t", component="nope", enable=True, pct=5)
    again = Master(conf)
    assert again.topologies["t"].debug == {storm_id: {"enable": True, "samplingpct": 100},
                                           "sink": {"enable": False, "samplingpct": 0}}
