"""Storm's storm-starter ``TridentReach``: the reach of a URL, computed per DRPC call by Trident.

The reach of a URL is the number of distinct people who follow someone who tweeted it:

    DRPC "reach" (args: a URL)
      -> state_query(url -> tweeters, MapGet) -> each(ExpandList: one tuple per tweeter)
      -> shuffle -> state_query(tweeter -> followers, MapGet) -> each(ExpandList: per follower)
      -> group_by(follower) -> aggregate(One)      (each follower once)
      -> aggregate(Sum)                            (how many)

The two lookup tables are static states (``new_static_state``): read-only maps, each a
`ReadOnlyState` (no batch writes it) and a `ReadOnlyMapState` (what `MapGet` reads), as in
Storm. The answer is Storm's DRPC result, the JSON of the result tuples: ``"[[16]]"``.

Run it (a few seconds on a LocalCluster)::

    python examples/storm_starter/trident_reach.py
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from squall import Config, Fields, LocalCluster, StormTopology
from squall.trident import (
    BaseFunction,
    CombinerAggregator,
    LocalDRPC,
    MapGet,
    ReadOnlyMapState,
    ReadOnlyState,
    State,
    StateFactory,
    Sum,
    TridentTopology,
)

TWEETERS_DB: dict[str, list[str]] = {
    "foo.com/blog/1": ["sally", "bob", "tim", "george", "nathan"],
    "engineering.twitter.com/blog/5": ["adam", "david", "sally", "nathan"],
    "tech.backtype.com/blog/123": ["tim", "mike", "john"],
}
"""Who tweeted each URL (Storm's example's table)."""

FOLLOWERS_DB: dict[str, list[str]] = {
    "sally": ["bob", "tim", "alice", "adam", "jim", "chris", "jai"],
    "bob": ["sally", "nathan", "jim", "mary", "david", "vivian"],
    "tim": ["alex"],
    "nathan": ["sally", "bob", "adam", "harry", "chris", "vivian", "emily", "jordan"],
    "adam": ["david", "carissa"],
    "mike": ["john", "bob"],
    "john": ["alice", "nathan", "jim", "mike", "bob"],
}
"""Who follows each person (Storm's example's table)."""

URLS = ["aaa", "foo.com/blog/1", "engineering.twitter.com/blog/5", "tech.backtype.com/blog/123"]
"""What `main` asks: Storm's three calls, and the third URL of the table."""


class StaticSingleKeyMapState(ReadOnlyState, ReadOnlyMapState):
    """A read-only map whose keys are one value (Storm's ``StaticSingleKeyMapState``)."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        self.table = table

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        return [self.table.get(key[0]) for key in keys]

    class Factory(StateFactory):
        """Makes the state of every partition from the same table."""

        def __init__(self, table: Mapping[str, Any]) -> None:
            self.table = table

        def make_state(self, conf: dict[str, Any], metrics: Any, partition_index: int, num_partitions: int) -> State:
            return StaticSingleKeyMapState(self.table)


class One(CombinerAggregator):
    """1 for any group: ``group_by(x).aggregate(One())`` keeps each x once (Storm's ``One``)."""

    def init(self, tuple: Any) -> int:
        return 1

    def combine(self, val1: int, val2: int) -> int:
        return 1

    def zero(self) -> int:
        return 1


class ExpandList(BaseFunction):
    """One tuple per element of the list in the first input field; none for None (Storm's)."""

    def execute(self, tuple: Any, collector: Any) -> None:
        for item in tuple.get_value(0) or ():
            collector.emit([item])


def build_topology(drpc: LocalDRPC | None) -> StormTopology:
    """The topology (Storm's ``buildTopology``); its DRPC stream takes calls from ``drpc``, or,
    given None on the process or Spark host, from the cluster's ``drpc.servers``."""
    topology = TridentTopology()
    url_to_tweeters = topology.new_static_state(StaticSingleKeyMapState.Factory(TWEETERS_DB))
    tweeters_to_followers = topology.new_static_state(StaticSingleKeyMapState.Factory(FOLLOWERS_DB))
    topology.new_drpc_stream("reach", drpc) \
        .state_query(url_to_tweeters, Fields("args"), MapGet(), Fields("tweeters")) \
        .each(Fields("tweeters"), ExpandList(), Fields("tweeter")) \
        .shuffle() \
        .state_query(tweeters_to_followers, Fields("tweeter"), MapGet(), Fields("followers")) \
        .each(Fields("followers"), ExpandList(), Fields("follower")) \
        .group_by(Fields("follower")) \
        .aggregate(One(), Fields("one")) \
        .aggregate(Fields("one"), Sum(), Fields("reach"))
    return topology.build()


def reach(url: str) -> int:
    """The reach of ``url`` from the tables directly: what the topology must answer."""
    return len({follower for tweeter in TWEETERS_DB.get(url, []) for follower in FOLLOWERS_DB.get(tweeter, [])})


def main() -> int:
    """Ask the reach of each of `URLS`, print it, and check it against `reach`; 0 if all agree."""
    wrong = 0
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("reach", Config(), build_topology(drpc))
        for url in URLS:
            answer = drpc.execute("reach", url)
            ok = json.loads(answer) == [[reach(url)]]
            wrong += not ok
            print(f"REACH: {url} -> {answer}{'' if ok else f'  WRONG: {reach(url)} expected'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
