"""Storm's TridentIntegrationTest.testWordCount on LocalCluster: a DRPC stream querying the
word counts another stream persists (state_query's bolt is a committer, and the DRPC stream's
end hears from it only after the batch's $commit)."""

from __future__ import annotations

import json

from squall import Config, Fields, LocalCluster
from squall.trident import LocalDRPC, MemoryMapState, TridentTopology
from squall.trident.builtin import Count, MapGet, Sum
from squall.trident.spout import FeederBatchSpout

from .trident_ops import Split


def test_a_drpc_stream_queries_the_counts_another_stream_persists() -> None:
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        topo = TridentTopology()
        feeder = FeederBatchSpout(["sentence"])
        # every spout of a squall Trident topology shares one batch group: a feeder waiting to be
        # fed would hold the DRPC stream's batches too (docs/trident.md, "What differs from Storm")
        feeder.set_wait_to_emit(False)
        counts = topo.new_stream("tester", feeder) \
            .each(Fields("sentence"), Split(), Fields("word")) \
            .group_by(Fields("word")) \
            .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")).parallelism_hint(6)
        topo.new_drpc_stream("words", drpc) \
            .each(Fields("args"), Split(), Fields("word")) \
            .group_by(Fields("word")) \
            .state_query(counts, Fields("word"), MapGet(), Fields("count")) \
            .aggregate(Fields("count"), Sum(), Fields("sum")) \
            .project(Fields("sum"))
        cluster.submit_topology("testing", Config(), topo.build())

        feeder.feed([["hello the man said"], ["the"]])  # returns once committed
        assert json.loads(drpc.execute("words", "the")) == [[2]]
        assert json.loads(drpc.execute("words", "hello")) == [[1]]

        feeder.feed([["the man on the moon"], ["where are you"]])
        assert json.loads(drpc.execute("words", "the")) == [[4]]
        assert json.loads(drpc.execute("words", "man")) == [[2]]
        assert json.loads(drpc.execute("words", "man where you the")) == [[8]]
        cluster.kill_topology("testing", wait_secs=0)
