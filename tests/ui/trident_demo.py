"""A Trident word count for the UI's tests: named operations, at most 3 batches in flight."""

from __future__ import annotations

from squall import Fields
from squall.testing._registry import SharedFlag
from squall.trident import BaseFilter, MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.spout import FixedBatchSpout

from ..trident.trident_ops import Split

MAX_IN_FLIGHT = 3
CONF = {"topology.max.spout.pending": MAX_IN_FLIGHT, "topology.stats.sample.rate": 1.0}
SENTENCES = [["the cow jumped over the moon"], ["four score and seven years ago"], ["to be or not to be"]]
# the bolts' ids: the spout's executor, then split and the partial count fused before the
# repartition by word, then the count that persists (Storm's b-<N>-<names>)
BOLTS = ["$spoutcoord-spout-sentences", "b-0-split-count", "b-1-count", "spout-sentences"]
SPOUTS = ["$mastercoord-bg0"]


class Gate(BaseFilter):
    """Holds every tuple until ``flag`` is raised: the batches stay in flight meanwhile."""

    def __init__(self, flag: SharedFlag) -> None:
        self.flag = flag

    def is_keep(self, tuple_) -> bool:
        """True, once the flag is up (a minute at most: then the test has failed anyway)."""
        return self.flag.wait(60)


def word_count(gate: SharedFlag | None = None) -> TridentTopology:
    """sentences (cycled forever, 2 a batch) -> split -> group by word -> count into a map state;
    with ``gate``, the sentences wait for it before the split."""
    spout = FixedBatchSpout(Fields("sentence"), 2, *SENTENCES)
    spout.set_cycle(True)
    topology = TridentTopology()
    stream = topology.new_stream("sentences", spout).name("split")
    if gate is not None:
        stream = stream.each(Fields("sentence"), Gate(gate))
    (stream.each(Fields("sentence"), Split(), Fields("word"))
     .group_by(Fields("word")).name("count")
     .persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("count")).parallelism_hint(2))
    return topology
