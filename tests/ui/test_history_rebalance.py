"""The UI's history across a rebalance that moves the spout's task to another worker slot: slots
number their launches each on its own, so the new slot's launch may have the number the old
slot's had, and the task's counts there start from zero all the same. Every ack the moved task
counted between two samples is in the chart's rate (before, only the part above its old count:
31 acks, then 31 acks in the new slot, read 0 per second)."""

import pytest

pytest.importorskip("starlette", reason="the UI needs the ui extra: pip install -e '.[ui]'")

from squall import Bolt, Fields, Spout, TopologyBuilder
from squall._config import topology_conf
from squall.cluster.view import Stat, TopologyView, WorkerView
from squall.engine.plan import make_plan
from squall.engine.stats import ACKED
from squall.ui import stats_pages
from squall.ui.pages import WebPages

WINDOWS = ("600", "10800", "86400", ":all-time")


class _Spout(Spout):
    def declare_output_fields(self, d):
        d.declare(Fields("x"))


class _Bolt(Bolt):
    def declare_output_fields(self, d):
        pass


def _plan():
    b = TopologyBuilder()
    b.set_spout("s", _Spout(), 1)
    b.set_bolt("b", _Bolt(), 1).shuffle_grouping("s")
    conf = {"topology.acker.executors": 0, "topology.workers": 2}
    return make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))


def _view(plan, spout_port: int, launch_id: int, acked: int) -> TopologyView:
    """Two workers, each of launch ``launch_id``; the spout's task on ``spout_port`` with ``acked``."""
    (spout,) = plan.component_tasks["s"]
    (bolt,) = plan.component_tasks["b"]
    workers = []
    for port in (6700, 6701):
        task = spout if port == spout_port else bolt
        stats = [Stat(ACKED, "", "default", float(acked))] if task == spout else []
        workers.append(WorkerView(host="h", port=port, supervisor_id="sup",
                                  executors=[e for e in plan.executors if task in e.tasks],
                                  launch_id=launch_id, uptime_secs=10.0,
                                  windows={task: {w: stats for w in WINDOWS}}))
    return TopologyView(plan=plan, status="ACTIVE", uptime_secs=10.0, workers=workers, errors=[], now=0.0)


class _Link:
    """A master link over a `TopologyView` the test swaps, read by the real page functions."""

    def __init__(self, view: TopologyView) -> None:
        self.view = view

    def read(self, op, **args):
        if op == "list":
            return [{"name": "t", "id": "t-1"}]
        if op == "statistics":
            return stats_pages.statistics(self.view)
        assert op == "topology_page"
        return stats_pages.topology_page(self.view, args["window"], args["sys"])


@pytest.mark.parametrize("after", [31, 40])
def test_a_spout_task_moved_to_a_slot_of_the_same_launch_number_counts_from_zero(after):
    plan = _plan()
    link = _Link(_view(plan, spout_port=6700, launch_id=2, acked=31))
    pages = WebPages(link, {"squall.ui.history.interval.secs": 1})
    pages.sampler.sample_once()
    # rebalanced: the spout's task now on the other slot, whose launch has the same number (each
    # slot numbers its own), counting from zero there
    link.view = _view(plan, spout_port=6701, launch_id=2, acked=after)
    pages.sampler.sample_once()
    first, second = pages.sampler.samples("t-1")
    assert (first.acked, second.acked) == (31, after)
    assert second.acked_per_sec * (second.time - first.time) == pytest.approx(after)


def test_the_same_slot_and_launch_counts_on():
    plan = _plan()
    link = _Link(_view(plan, spout_port=6700, launch_id=2, acked=31))
    pages = WebPages(link, {"squall.ui.history.interval.secs": 1})
    pages.sampler.sample_once()
    link.view = _view(plan, spout_port=6700, launch_id=2, acked=40)
    pages.sampler.sample_once()
    first, second = pages.sampler.samples("t-1")
    assert second.acked_per_sec * (second.time - first.time) == pytest.approx(9)


def test_prometheus_counts_a_moved_task_in_a_series_of_its_new_slot():
    """The same move through ``/metrics``: the task's counter is a new series labelled with its
    new slot (``worker``), so Prometheus's ``rate()`` counts the 40 acks there from zero. Before,
    one series read 31 then 40: 9 acks, the move hidden as a counter that went on."""
    from prometheus_client.parser import text_string_to_metric_families
    from starlette.testclient import TestClient

    from squall.ui.server import _app

    from .conftest import BASE

    plan = _plan()
    link = _Link(_view(plan, spout_port=6700, launch_id=2, acked=31))

    def acked_series() -> dict[tuple[str, str], float]:
        with TestClient(_app(link, {}, None), base_url=BASE) as api:
            text = api.get("/metrics").text
        (family,) = [f for f in text_string_to_metric_families(text) if f.name == "squall_acked"]
        return {(s.labels["task"], s.labels["worker"]): s.value for s in family.samples
                if s.labels["component"] == "s"}

    (spout,) = plan.component_tasks["s"]
    assert acked_series() == {(str(spout), "h:6700"): 31.0}
    link.view = _view(plan, spout_port=6701, launch_id=2, acked=40)
    assert acked_series() == {(str(spout), "h:6701"): 40.0}
