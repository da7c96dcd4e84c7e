"""Storm's storm-starter ``ReachTopology``: the reach of a URL, computed per DRPC call by a
linear DRPC topology (``LinearDRPCTopologyBuilder``), ported line by line.

The reach of a URL is the number of distinct people who follow someone who tweeted it. Each
call's tuples carry its request id first; the batch bolts see all of a request's tuples, then
``finish_batch``:

    DRPC "reach" (args: a URL)
      -> GetTweeters (4):      one [id, tweeter] per tweeter of the URL
      -> GetFollowers (12):    shuffle; one [id, follower] per follower of each tweeter
      -> PartialUniquer (6):   fields(id, follower); per task, its distinct followers: [id, n]
      -> CountAggregator (3):  fields(id); the sum of the partial counts: [id, reach]

The answer is the reach as a string (Storm's ``JoinResult``): ``"16"``.

Run it (a few seconds on a LocalCluster)::

    python examples/storm_starter/reach.py
"""

from __future__ import annotations

import sys
from typing import Any

from squall import BaseBatchBolt, BasicBolt, Config, Fields, LocalCluster, LocalDRPC
from squall.drpc import LinearDRPCTopologyBuilder

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

URLS = ["foo.com/blog/1", "engineering.twitter.com/blog/5", "notaurl.com"]
"""What `main` asks (Storm's ``urlsToTry``)."""


class GetTweeters(BasicBolt):
    """[id, url] -> one [id, tweeter] per tweeter of the URL."""

    def execute(self, tup: Any, collector: Any) -> None:
        id_ = tup.get_value(0)
        url = tup.get_string(1)
        tweeters = TWEETERS_DB.get(url)
        if tweeters is not None:
            for tweeter in tweeters:
                collector.emit([id_, tweeter])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields(["id", "tweeter"]))


class GetFollowers(BasicBolt):
    """[id, tweeter] -> one [id, follower] per follower of the tweeter."""

    def execute(self, tup: Any, collector: Any) -> None:
        id_ = tup.get_value(0)
        tweeter = tup.get_string(1)
        followers = FOLLOWERS_DB.get(tweeter)
        if followers is not None:
            for follower in followers:
                collector.emit([id_, follower])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields(["id", "follower"]))


class PartialUniquer(BaseBatchBolt):
    """Per request and task: the number of distinct followers this task saw."""

    def __init__(self) -> None:
        self.followers: set[str] = set()

    def prepare(self, conf: dict, context: Any, collector: Any, id: Any) -> None:
        self.collector = collector
        self.id = id

    def execute(self, tup: Any) -> None:
        self.followers.add(tup.get_string(1))

    def finish_batch(self) -> None:
        self.collector.emit([self.id, len(self.followers)])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields(["id", "partial-count"]))


class CountAggregator(BaseBatchBolt):
    """Per request: the sum of the partial counts, the reach."""

    def __init__(self) -> None:
        self.count = 0

    def prepare(self, conf: dict, context: Any, collector: Any, id: Any) -> None:
        self.collector = collector
        self.id = id

    def execute(self, tup: Any) -> None:
        self.count += tup.get_integer(1)

    def finish_batch(self) -> None:
        self.collector.emit([self.id, self.count])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(Fields(["id", "reach"]))


def construct() -> LinearDRPCTopologyBuilder:
    """The builder (Storm's ``construct``)."""
    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(GetTweeters(), 4)
    builder.add_bolt(GetFollowers(), 12).shuffle_grouping()
    builder.add_bolt(PartialUniquer(), 6).fields_grouping(Fields(["id", "follower"]))
    builder.add_bolt(CountAggregator(), 3).fields_grouping(Fields(["id"]))
    return builder


def reach(url: str) -> int:
    """The reach of ``url`` from the tables directly: what the topology must answer."""
    return len({follower for tweeter in TWEETERS_DB.get(url, []) for follower in FOLLOWERS_DB.get(tweeter, [])})


def main() -> int:
    """Ask the reach of each of `URLS`, print it, and check it against `reach`; 0 if all agree.
    (Storm's ``main`` submits with ``create_remote_topology`` and asks through a ``DRPCClient``:
    on the process host, do the same with ``squall jar``.)"""
    wrong = 0
    builder = construct()
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("reach-drpc", Config(), builder.create_local_topology(drpc))
        for url in URLS:
            answer = drpc.execute("reach", url)
            ok = answer == str(reach(url))
            wrong += not ok
            print(f"Reach of {url}: {answer}{'' if ok else f'  WRONG: {reach(url)} expected'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
