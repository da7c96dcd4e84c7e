"""The master's verbs the UI adds: supervisors with their uptime and used slots, the debug
switch, clamped and kept across a restart of the master, and the statistics pages, answered by
the pages its host gives it (a master given none refuses them, naming the verb)."""

from __future__ import annotations

import pytest

from squall._config import cluster_conf
from squall._errors import BadParameterError
from squall.cluster.served_ui import statistics_pages
from squall.cluster.server import Keeper
from squall.cluster.view import NoPagesError
from squall.engine.clock import SimulatedClock
from squall.ui import stats_pages

from .served import served
from .test_master import _register, _topology


@pytest.fixture
def conf(tmp_path):
    return cluster_conf({"storm.local.dir": str(tmp_path), "squall.secret": "a-secret-of-twenty-chars"})


def test_supervisors_report_uptime_and_used_slots(conf):
    clock = SimulatedClock()
    m = served(conf, clock=clock)
    _register(m)
    m.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    clock.advance(75)
    _register(m)  # a later sync keeps the first one's time
    assert m.op_supervisors() == [{"id": "s1", "host": "127.0.0.1", "uptime_secs": 75.0, "slots_total": 2,
                                   "slots_used": 1, "healthy": True, "health_problem": None}]
    assert m.op_cluster_info()["nimbus"]["uptime_secs"] == 75.0
    assert "squall.secret" not in m.op_configuration()


def test_debug_is_clamped_named_and_kept_across_a_restart(conf):
    m = served(conf)
    storm_id = m.op_submit(name="t", conf={}, topology=_topology())
    assert m.op_debug(name="t", component=None, enable=True, pct=300) == {"enable": True, "samplingpct": 100}
    assert m.op_debug(name="t", component="sink", enable=False, pct=-1) == {"enable": False, "samplingpct": 0}
    with pytest.raises(KeyError, match="nope"):
        m.op_debug(name="t", component="nope", enable=True, pct=5)
    again = served(conf)
    assert again.topologies["t"].debug == {storm_id: {"enable": True, "samplingpct": 100},
                                           "sink": {"enable": False, "samplingpct": 0}}


PAGE_VERBS = {"topology_page": {"name": "t"}, "component_page": {"name": "t", "component": "sink"},
              "visualization": {"name": "t"}, "visualization_init": {"name": "t"}, "statistics": {"name": "t"}}


def test_a_master_given_no_pages_refuses_the_page_verbs_naming_each(conf):
    m = served(conf)  # the pages are the UI's (squall.ui.stats_pages): a bare master has none
    m.op_submit(name="t", conf={}, topology=_topology())
    for verb, args in PAGE_VERBS.items():
        with pytest.raises(NoPagesError, match=f"^{verb}: this master serves no statistics pages"):
            Keeper(m).request(verb, args)
        with pytest.raises(NoPagesError, match=f"^{verb}:"):
            getattr(m, f"op_{verb}")(**args)


def test_the_pages_a_host_gives_its_master_answer_the_page_verbs(conf):
    m = served(conf, pages=statistics_pages())
    assert m.pages is stats_pages  # found by name: the cluster imports nothing of the UI
    storm_id = m.op_submit(name="t", conf={}, topology=_topology())
    _register(m)
    answers = {verb: Keeper(m).request(verb, args) for verb, args in PAGE_VERBS.items()}
    assert answers["topology_page"]["id"] == storm_id and answers["topology_page"]["window"] == ":all-time"
    assert [b["boltId"] for b in answers["topology_page"]["bolts"]] == ["sink"]
    assert answers["component_page"]["id"] == "sink" and answers["component_page"]["tasks"] == 2
    assert set(answers["visualization"]) == {"feed", "sink"}
    assert answers["visualization_init"] == {"visualizationTable": [{"row": [
        {"stream": "default", "sani-stream": "default", "checked": True}]}]}
    assert answers["statistics"]["id"] == storm_id and len(answers["statistics"]["workers"]) == 1
    with pytest.raises(BadParameterError, match="601"):
        m.op_topology_page(name="t", window="601")
