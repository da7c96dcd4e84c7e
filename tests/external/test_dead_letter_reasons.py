"""A record that squall's own bolts fail for a reason they know is dead-lettered with that
reason, not only with where it failed: an event-time window given a timestamp that is not a
number, and a Redis sink given a tuple without its id field. Each entry fails 4 times (the
spout's default max_retries 3) and its dead letter's ``error`` and ``cause`` say why."""

from __future__ import annotations

import json

import pytest

from squall import BaseWindowedBolt, Duration, Fields, LocalCluster, TopologyBuilder

from ..conftest import wait_until

redis_streams = pytest.importorskip("squall.external.redis_streams", reason="needs the redis library")


class Nothing(BaseWindowedBolt):
    def execute(self, window):
        pass


def _dead_letters(client, topology) -> list[dict]:
    """Runs ``topology`` on a LocalCluster until ``events:dead`` holds one entry, and returns the
    dead-letter entries."""
    client.xadd("events", {"user": "ann", "ts": "soon"})
    with LocalCluster() as cluster:
        cluster.submit_topology("reasons", {"topology.message.timeout.secs": 5}, topology)
        assert wait_until(lambda: client.xlen("events:dead") == 1, 30), "nothing was dead-lettered"
        cluster.kill_topology("reasons", wait_secs=0)
    return [fields for _id, fields in client.xrange("events:dead")]


def test_a_timestamp_that_is_no_number_is_dead_lettered_saying_so(redis_server):
    b = TopologyBuilder()
    # a stream entry's fields are strings: "soon" reaches the window as it is
    b.set_spout("events", redis_streams.RedisStreamSpout(redis_server.url, "events", "g", ["user", "ts"]))
    window = Nothing().with_tumbling_window(Duration.seconds(1)).with_timestamp_field("ts")
    b.set_bolt("window", window).fields_grouping("events", Fields("user"))
    (dead,) = _dead_letters(redis_server.client(), b.create_topology())
    why = "timestamp field 'ts' is 'soon', not epoch milliseconds (a number) in a tuple from component [events]"
    assert dead["error"].startswith("failed 4 times (max_retries 3); last: failed in [window] task ")
    assert why in dead["error"], dead["error"]  # main: "... last: failed in [window] task N", no reason
    cause = json.loads(dead["cause"])
    assert (cause["kind"], cause["component"]) == ("fail", "window") and why in cause["message"], cause


def test_a_tuple_without_the_sinks_id_field_is_dead_lettered_saying_so(redis_server):
    b = TopologyBuilder()
    b.set_spout("events", redis_streams.RedisStreamSpout(redis_server.url, "events", "g", ["user", "ts"],
                                                         id_field=None))
    b.set_bolt("out", redis_streams.RedisStreamSinkBolt(redis_server.url, "users", id_field="key")) \
        .shuffle_grouping("events")
    (dead,) = _dead_letters(redis_server.client(), b.create_topology())
    why = "has no field 'key' (has ['user', 'ts'])"
    assert "last: failed in [out] task " in dead["error"] and why in dead["error"], dead["error"]
    assert why in json.loads(dead["cause"])["message"]
