"""Storm's storm-starter ``BasicDRPCTopology``: a DRPC function that appends "!" to its argument.

Built, as Storm's is, with ``LinearDRPCTopologyBuilder`` (docs/drpc.md): one bolt, three
executors, which gets ``[id, args]`` and emits ``[id, result]``; the builder adds the DRPC spout,
the request ids, the join with each call's return info and the return bolt.

Run it (a second or two on a LocalCluster)::

    python examples/storm_starter/basic_drpc.py
"""

from __future__ import annotations

import sys
from typing import Any

from squall import BasicBolt, Config, Fields, LocalCluster, LocalDRPC, StormTopology
from squall.drpc import LinearDRPCTopologyBuilder

FUNCTION = "exclamation"
WORDS = ["hello", "goodbye", "aaa", "bbb", "ccc"]
"""What `main` asks."""


class ExclaimBolt(BasicBolt):
    """The argument with "!" appended, with the request's id (Storm's ``ExclaimBolt``)."""

    def execute(self, tup: Any, collector: Any) -> None:
        input = tup.get_string(1)
        collector.emit([tup.get_value(0), input + "!"])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields(["id", "result"]))


def build_topology(drpc: LocalDRPC | None) -> StormTopology:
    """The topology; its spout takes the calls of ``drpc``, or, given None on the process or
    Spark host, of the cluster's ``drpc.servers``."""
    builder = LinearDRPCTopologyBuilder(FUNCTION)
    builder.add_bolt(ExclaimBolt(), 3)
    return builder.create_local_topology(drpc) if drpc is not None else builder.create_remote_topology()


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
