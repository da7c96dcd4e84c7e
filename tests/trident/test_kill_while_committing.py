"""A Trident topology killed while its coordinator commits batches: the master refuses the killed
launch's transactional-state calls, and the coordinator must stop quietly so that the worker
stops cleanly and every operation's ``cleanup`` runs (it crashed the worker before)."""

from __future__ import annotations

import logging

from squall import Config, Fields, LocalCluster
from squall.testing._registry import SharedLog
from squall.trident import BaseFilter, MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.spout import FixedBatchSpout

from ..conftest import wait_until
from .trident_ops import Split


class Cleaned(BaseFilter):
    """Keeps every tuple, logging the first batch it sees and its ``cleanup``."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def prepare(self, conf, context) -> None:
        self.seen = 0

    def is_keep(self, tuple) -> bool:  # noqa: A002
        self.seen += 1
        if self.seen % 10 == 0:
            self.log.append("tuples")
        return True

    def cleanup(self) -> None:
        self.log.append("cleanup")


def test_a_topology_killed_while_its_coordinator_commits_stops_cleanly(caplog):
    log = SharedLog()
    spout = FixedBatchSpout(Fields("sentence"), 2, ["a b c"], ["b c d"], ["c d e"])
    spout.set_cycle(True)
    topology = TridentTopology()
    (topology.new_stream("words", spout)
     .each(Fields("sentence"), Split(), Fields("word"))
     .each(Fields("word"), Cleaned(log))
     .group_by(Fields("word"))
     .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")))
    conf = Config()
    conf.set_max_spout_pending(3)
    conf["topology.trident.batch.emit.interval.millis"] = 0  # batches back to back: commits never stop
    with caplog.at_level(logging.WARNING), LocalCluster() as cluster:
        cluster.submit_topology("kill-while-committing", conf, topology.build())
        assert wait_until(lambda: log.items().count("tuples") >= 30, timeout=60)
        cluster.kill_topology("kill-while-committing", wait_secs=0)
        assert wait_until(lambda: "cleanup" in log.items(), timeout=30)
    crashes = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not crashes, [r.getMessage() for r in crashes]
    assert log.items().count("cleanup") == 1
