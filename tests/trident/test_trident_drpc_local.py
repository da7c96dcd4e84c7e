"""Storm's TridentIntegrationTest word count (``testMemoryMapState``) on LocalCluster: a
FeederBatchSpout's sentences counted into a MemoryMapState and queried through a LocalDRPC
stream (MapGet, FilterNull, Sum), each answer exact after each fed batch committed, and asked
again with nothing fed in between (the feeder's part of the topology waits for a feed; the DRPC
part must not wait with it)."""

from __future__ import annotations

import re

from squall import Config, Fields, LocalCluster
from squall.trident import LocalDRPC, MemoryMapState, TridentTopology
from squall.trident.builtin import Count, FilterNull, MapGet, Sum
from squall.trident.spout import FeederBatchSpout

from ..drpc.calls import guarded
from .trident_ops import Split


def word_count_with_drpc(topo: TridentTopology, feeder: FeederBatchSpout, drpc: LocalDRPC | None = None) -> None:
    """Storm's testMemoryMapState topology: ``feeder``'s sentences counted per word, and the DRPC
    function ``words`` answering the sum of its words' counts."""
    counts = topo.new_stream("tester", feeder) \
        .each(Fields("sentence"), Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count")) \
        .parallelism_hint(6)
    topo.new_drpc_stream("words", drpc) \
        .each(Fields("args"), Split(), Fields("word")) \
        .group_by(Fields("word")) \
        .state_query(counts, Fields("word"), MapGet(), Fields("count")) \
        .each(Fields("count"), FilterNull()) \
        .aggregate(Fields("count"), Sum(), Fields("sum")) \
        .project(Fields("sum"))


def test_word_count_queried_through_drpc_between_feeds() -> None:
    with LocalCluster() as cluster, LocalDRPC() as drpc:
        feeder = FeederBatchSpout(["sentence"])
        topo = TridentTopology()
        word_count_with_drpc(topo, feeder, drpc)
        cluster.submit_topology("testMemoryMapState", Config(), topo.build())
        feeder.feed([["hello the man said"], ["the"]])
        # nothing fed from here on: the DRPC calls get batches of their own
        assert guarded(drpc.execute, "words", "the") == ("[[2]]", None)
        assert guarded(drpc.execute, "words", "hello") == ("[[1]]", None)
        assert guarded(drpc.execute, "words", "nobody") == ("[[0]]", None)  # Sum of nothing: its zero
        feeder.feed([["the man on the moon"], ["where are you"]])
        assert guarded(drpc.execute, "words", "the") == ("[[4]]", None)
        assert guarded(drpc.execute, "words", "man") == ("[[2]]", None)
        assert guarded(drpc.execute, "words", "man where you the") == ("[[8]]", None)


def test_a_trident_drpc_request_that_fails_says_why_as_a_plain_topologys_does() -> None:
    """A Trident DRPC stream's caller got ``Request failed`` alone; the cause of its batch's
    failure now reaches the stream's spout with the batch's replay: the exception and where it
    was raised, or a FailedException's message. A request that did not fail is answered."""
    from squall.trident import BaseFunction, DRPCExecutionException, FailedException

    class Checked(BaseFunction):
        def execute(self, tup, collector):
            if tup[0] == "bad":
                raise ValueError("cannot read 'bad'")
            if tup[0] == "refused":
                raise FailedException("'refused' is refused")
            collector.emit([len(tup[0])])

    with LocalCluster() as cluster, LocalDRPC() as drpc:
        topo = TridentTopology()
        topo.new_drpc_stream("check", drpc).each(Fields("args"), Checked(), Fields("n")).project(Fields("n"))
        cluster.submit_topology("checked", Config(), topo.build())
        _, bad = guarded(drpc.execute, "check", "bad")
        assert isinstance(bad, DRPCExecutionException)
        # the exception as the operation's error (squall.trident.failures): the operation, the batch, the request
        assert re.fullmatch(r"Request failed: exception in \[b-0\] task \d+: TridentOperationError: each\(Checked\) "
                            r"raised ValueError: cannot read 'bad'; Trident batch txid \d+; its input: fields \['args'\] "
                            r"values \['bad'\]",
                            str(bad)), str(bad)
        _, refused = guarded(drpc.execute, "check", "refused")
        assert str(refused).startswith("Request failed: failed in [b-0] task ")
        assert str(refused).endswith(": FailedException: 'refused' is refused")
        assert guarded(drpc.execute, "check", "good") == ("[[4]]", None)
