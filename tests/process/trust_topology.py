"""A user's pipeline for the trust trial (tests/process/test_trust_trial.py): purchases on a Redis
stream as raw JSON, some malformed, some out of order, some late; a parse bolt; per user, the
distinct purchases and their amounts in 2 s event-time tumbling windows, persisted with each
checkpoint; the windows' results and the late purchases written to Redis hashes.

    events (RedisStreamSpout: id, raw) --shuffle--> parse (json -> id, user, ts, amount)
        --fields(user)--> per_window (persistent event-time window, late stream "late")
        --shuffle--> sums (RedisStreamSinkBolt: a hash per window and user)
    per_window "late" --shuffle--> late_rows (id, user, ts) --> late (a hash per late purchase)
"""

import json

from squall import BaseStatefulWindowedBolt, BasicBolt, Duration, Fields, TopologyBuilder
from squall.external.redis_streams import RedisStreamSinkBolt

from .recorded_spout import RecordedSpout

STREAM = "purchases"
GROUP = "trust"
SUMS = "sums"          # the hash sums:<window start>:<user> {start, user, total, count}
LATE = "late"          # the hash late:<entry id> {user, ts}
WINDOW = Duration.seconds(2)
LAG = Duration.seconds(30)  # above the message timeout (5 s) plus a worker's restart


class ParsePurchase(BasicBolt):
    """``[entry id, raw JSON]`` -> ``[entry id, user, ts, amount]``; raises on a purchase that is
    not JSON, lacks a field or has a timestamp or amount that is not a whole number, so that the
    input fails (and its entry is dead-lettered after the spout's retries)."""

    def execute(self, tup, collector):
        p = json.loads(tup["raw"])
        user, ts, amount = p["user"], p["ts"], p["amount"]
        if type(ts) is not int or type(amount) is not int:
            raise ValueError(f"ts and amount must be whole numbers, got {ts!r} and {amount!r}")
        collector.emit([tup["id"], str(user), ts, amount])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "user", "ts", "amount"))


class PurchasesPerWindow(BaseStatefulWindowedBolt):
    """Per user of a window: ``[key, start, user, total, count]`` over the distinct purchase ids
    (a purchase replayed after its commit has the same id); ``key`` is ``"<start>:<user>"``."""

    def execute(self, window):
        start = window.get_start_timestamp()
        per_user = {}
        for t in window.get():
            per_user.setdefault(t["user"], {})[t["id"]] = t["amount"]
        for user, amounts in sorted(per_user.items()):
            self.collector.emit([f"{start}:{user}", start, user, sum(amounts.values()), len(amounts)])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("window", "start", "user", "total", "count"))


class LateRow(BasicBolt):
    """A late purchase (the ``late_tuple`` the window emits) as ``[id, user, ts]``."""

    def execute(self, tup, collector):
        late = tup["late_tuple"]
        collector.emit([late["id"], late["user"], late["ts"]])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "user", "ts"))


def build(url, parallelism):
    """The topology on the Redis at ``url``; ``parallelism`` maps a bolt's id to its tasks."""
    b = TopologyBuilder()
    b.set_spout("events", RecordedSpout(url, STREAM, GROUP, ["raw"]))
    b.set_bolt("parse", ParsePurchase(), parallelism["parse"]).shuffle_grouping("events")
    window = PurchasesPerWindow().with_tumbling_window(WINDOW).with_timestamp_field("ts") \
        .with_lag(LAG).with_watermark_interval(Duration.of(200)).with_late_tuple_stream("late")
    b.set_bolt("per_window", window.with_persistence(), parallelism["per_window"]) \
        .fields_grouping("parse", Fields("user"))
    b.set_bolt("sums", RedisStreamSinkBolt(url, SUMS, mode="hash", id_field="window"), parallelism["sums"]) \
        .shuffle_grouping("per_window")
    b.set_bolt("late_rows", LateRow()).shuffle_grouping("per_window", "late")
    b.set_bolt("late", RedisStreamSinkBolt(url, LATE, mode="hash", id_field="id")).shuffle_grouping("late_rows")
    return b.create_topology()


def read_sums(client):
    """``(start, user) -> (total, count)`` as the sink wrote them."""
    out = {}
    for key in client.scan_iter(f"{SUMS}:*"):
        row = client.hgetall(key)
        out[int(row["start"]), row["user"]] = (int(row["total"]), int(row["count"]))
    return out


def read_late(client):
    """The entry ids the late sink wrote."""
    return {key.split(":", 1)[1] for key in client.scan_iter(f"{LATE}:*")}
