"""The start of most topologies here: a `FeederSpout` whose acks and fails a tracker records."""

from __future__ import annotations

from squall import Fields, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout


def fed_builder(field: str) -> tuple[TopologyBuilder, FeederSpout, AckFailMapTracker]:
    """A builder with spout "feed" (one field, ``field``), the spout, and its tracker."""
    feed = FeederSpout(Fields([field]))
    tracker = AckFailMapTracker()
    feed.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    return b, feed, tracker
