"""`complete_topology` of a topology whose worker crashes once by design, a test of recovery:
the cluster restarts the worker, the spout replays what died with it, and the topology completes
with every record. Only a worker that crashes again on the same error (crash-looping: a
``prepare`` that raises) fails complete_topology at once (`tests/test_testing_complete.py`)."""

from __future__ import annotations

from squall import Bolt, Config, Fields, LocalCluster, TopologyBuilder
from squall.testing import FeederSpout, complete_topology, read_tuples
from squall.testing._registry import SharedFlag


class CrashesOnce(Bolt):
    """Crashes its worker (fail-fast) on the first tuple it ever executes, then passes each on."""

    def __init__(self, crashed: SharedFlag) -> None:
        self.crashed = crashed

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if not self.crashed.is_set():
            self.crashed.set()
            raise RuntimeError("the first tuple crashes the worker, by design")
        self.collector.emit([tup["n"]], tup)
        self.collector.ack(tup)


def test_a_topology_whose_worker_crashes_once_by_design_completes_with_every_record():
    """On main complete_topology raised at the first crash (`complete_topology: a worker of the
    topology crashed in component [once] ...`), though the restarted worker took every record."""
    crashed = SharedFlag()
    builder = TopologyBuilder()
    builder.set_spout("numbers", FeederSpout(Fields("n")))
    builder.set_bolt("once", CrashesOnce(crashed)).shuffle_grouping("numbers")
    conf = {Config.TOPOLOGY_BOLT_FAIL_FAST: True, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}
    with LocalCluster() as cluster:
        result = complete_topology(cluster, builder.create_topology(), {"numbers": [[n] for n in range(10)]},
                                   storm_conf=conf, timeout_secs=60)
    assert crashed.is_set()   # it did crash
    assert sorted(read_tuples(result, "once")) == [[n] for n in range(10)]   # every record, once
