"""Storm's storm-starter ``BasicDRPCTopology``: a DRPC function that appends "!" to its argument.

Storm builds it with ``LinearDRPCTopologyBuilder``, which squall does not have (docs/drpc.md):
the same topology is written out by hand, as Storm's ``ManualDRPC`` does:

    drpc (DRPCSpout "exclamation": args, return-info) --shuffle--> exclaim (ExclaimBolt)
        --shuffle--> return (ReturnResults: sends each result back to its caller)

Run it (a second or two on a LocalCluster)::

    python examples/storm_starter/basic_drpc.py
"""

from __future__ import annotations

import sys
from typing import Any

from squall import BasicBolt, Config, Fields, LocalCluster, LocalDRPC, StormTopology, TopologyBuilder
from squall.drpc import DRPCSpout, ReturnResults

FUNCTION = "exclamation"
WORDS = ["hello", "goodbye", "aaa", "bbb", "ccc"]
"""What `main` asks."""


class ExclaimBolt(BasicBolt):
    """The argument with "!" appended, with the request's return info (Storm's ``ExclaimBolt``)."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields(["result", "return-info"]))

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup.get_string(0) + "!", tup.get_value(1)])


def build_topology(drpc: LocalDRPC | None) -> StormTopology:
    """The topology; its spout takes the calls of ``drpc``, or, given None on the process or
    Spark host, of the cluster's ``drpc.servers``."""
    builder = TopologyBuilder()
    builder.set_spout("drpc", DRPCSpout(FUNCTION, drpc))
    builder.set_bolt("exclaim", ExclaimBolt(), 3).shuffle_grouping("drpc")
    builder.set_bolt("return", ReturnResults(), 3).shuffle_grouping("exclaim")
    return builder.create_topology()


def main() -> int:
    """Call the function for each of `WORDS` and print the answers; 0 if each is the word with "!"."""
    wrong = 0
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("drpc-demo", Config(), build_topology(drpc))
        for word in WORDS:
            result = drpc.execute(FUNCTION, word)
            wrong += result != word + "!"
            print(f'Result for "{word}": {result}')
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
