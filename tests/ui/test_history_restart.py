"""The UI's history (the topology page's throughput and failures charts) across a restart of
the spout's worker, on a real `LocalCluster`: the restarted worker reports its counts from zero,
and the failures it counts after the restart are in the chart's rate, not read as 0."""

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder

from ..conftest import wait_until
from ..feeders import STAGE, CrashOnceSpout

pytest.importorskip("starlette", reason="the UI needs the ui extra: pip install -e '.[ui]'")

from squall.ui.link import DirectLink
from squall.ui.pages import WebPages, read_totals

class FailAll(Bolt):
    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup):
        self.collector.fail(tup)


def _failed(link) -> int:
    return sum(t.failed for t in read_totals(link))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("before", "after"), [(50, 20), (20, 50)])
def test_the_failures_chart_counts_the_failures_after_the_spouts_worker_restarted(before, after):
    """The restarted worker's failures are all in the chart's rate: whether its count went down
    (50, then 20) or, a new launch, past its predecessor's (20, then 50: read as 30 before)."""
    b = TopologyBuilder()
    b.set_spout("src", CrashOnceSpout())
    b.set_bolt("fail", FailAll()).shuffle_grouping("src")
    STAGE.update(now="before", sends={"before": before, "after": after})
    with LocalCluster() as cluster:
        cluster.submit_topology("h", Config(), b.create_topology())
        link = DirectLink(cluster)
        pages = WebPages(link, {"squall.ui.history.interval.secs": 1})
        assert wait_until(lambda: _failed(link) == before, 20), _failed(link)
        pages.sampler.sample_once()
        STAGE["now"] = "crash"
        # the restarted worker's spout counts from zero: the topology's total is what it sent since
        assert wait_until(lambda: STAGE["now"] == "after" and _failed(link) == after, 30), _failed(link)
        pages.sampler.sample_once()
        storm_id = cluster.get_topology_info("h")["id"]
        first, second = pages.sampler.samples(storm_id)
        assert (first.failed, second.failed) == (before, after)
        # the restarted worker's failures happened between the two samples: the chart's rate shows them
        assert second.failed_per_sec * (second.time - first.time) == pytest.approx(after)
        assert second.acked_per_sec == 0.0
        cluster.kill_topology("h", wait_secs=0)
