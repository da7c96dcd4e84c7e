"""Every error a task reports counts against Storm's throttle (``ReportError``): at most
``topology.max.error.report.per.interval`` (5) per ``topology.error.throttle.interval.secs``
(10) per executor, whether a bolt's or a spout's ``collector.report_error`` made it, a
`ReportedFailedException`, or an exception escaping ``execute``. The inputs are acked or failed
as they would be; only the reports are dropped."""

from __future__ import annotations

from squall import BasicBolt, Bolt, Fields, LocalCluster, ReportedFailedException, Spout, TopologyBuilder
from squall.engine.clock import SimulatedClock
from squall.testing._registry import SharedLog, SharedQueue

from ..conftest import wait_until

N = 40  # records per round, each reported by the spout and by both bolts


class Reporting(Spout):
    """Emits what is fed to it, with its value as message id, and reports each emit."""

    def __init__(self, feed: SharedQueue, log: SharedLog) -> None:
        self.feed, self.log = feed, log

    def next_tuple(self):
        try:
            item = self.feed.take()
        except IndexError:
            return
        self.collector.emit([item], msg_id=item)
        self.collector.report_error(f"spout saw record {item}")

    def ack(self, msg_id):
        self.log.append(("ack", msg_id))

    def fail(self, msg_id):
        self.log.append(("fail", msg_id))

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["n"]))


class ReportsAndAcks(Bolt):
    def execute(self, tup):
        self.collector.report_error(ValueError(f"bad record {tup[0]}"))
        self.collector.ack(tup)


class RejectsAll(BasicBolt):
    def execute(self, tup, collector):
        raise ReportedFailedException("rejected")


def _reports(cluster: LocalCluster) -> dict[str, int]:
    """Reports per component: the records' counts (identical repeats fold into one record)."""
    out: dict[str, int] = {}
    for e in cluster.get_topology_info("t")["errors"]:
        out[e["component"]] = out.get(e["component"], 0) + e["count"]
    return out


def test_every_report_counts_against_the_executors_throttle_and_no_record_is_lost():
    log = SharedLog()
    feed = SharedQueue()
    b = TopologyBuilder()
    b.set_spout("src", Reporting(feed, log))
    b.set_bolt("report", ReportsAndAcks()).shuffle_grouping("src")
    b.set_bolt("reject", RejectsAll()).shuffle_grouping("src")
    with LocalCluster(clock=SimulatedClock()) as cluster:
        cluster.submit_topology("t", {"topology.message.timeout.secs": 300}, b.create_topology())
        for i in range(N):
            feed.put(i)
        # each record goes to both bolts: RejectsAll fails every one
        assert wait_until(lambda: len(log.items()) == N), len(log.items())
        assert wait_until(lambda: _reports(cluster) == {"src": 5, "report": 5, "reject": 5}), _reports(cluster)
        # the next interval allows 5 more each
        cluster.advance_cluster_time(11)
        for i in range(N, 2 * N):
            feed.put(i)
        assert wait_until(lambda: len(log.items()) == 2 * N), len(log.items())
        assert wait_until(lambda: _reports(cluster) == {"src": 10, "report": 10, "reject": 10}), _reports(cluster)
    assert sorted(log.items()) == [("fail", i) for i in range(2 * N)]
