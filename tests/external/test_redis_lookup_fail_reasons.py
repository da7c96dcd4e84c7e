"""RedisLookupBolt and RedisFilterBolt fail a tuple whose query Redis refused, or that lacks the
key field, with that reason: the record's dead letter says which query of which key on which
server (its password masked) failed and why. Before, each was a plain fail: the dead letter
said only ``last: failed in [lookup] task 3``.

Each test puts N entries of which K are bad in a password-protected Redis and counts every one:
K dead letters, each with its reason and no password, and N-K entries delivered downstream."""

from __future__ import annotations

import json

import pytest

from squall import Bolt, LocalCluster, TopologyBuilder
from squall.testing._registry import SharedLog
from tests.conftest import wait_until

redis_streams = pytest.importorskip("squall.external.redis_streams", reason="needs the redis library")

PASSWORD = "s3cret-pw"
USERS = ["ann", "bob", "cy", "dee", "eve"]  # N = 5
BAD = {"bob", "eve"}  # K = 2: their keys hold another type than the query reads


def locked(server) -> str:
    """``server`` with a password set; its URL with the password."""
    server.client().config_set("requirepass", PASSWORD)
    return server.url.replace("redis://", f"redis://:{PASSWORD}@")


class Delivered(Bolt):
    """Keeps the user of each tuple it gets, and acks it."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def execute(self, tup) -> None:
        self.log.append(tup.get_value_by_field("user"))
        self.collector.ack(tup)


def run(url: str, bolt) -> tuple[list[dict], list[str]]:
    """``USERS`` as entries of ``events``, through ``bolt`` to a bolt that keeps them; returns
    the dead letters and the users delivered, once every entry is one or the other."""
    import redis
    client = redis.Redis.from_url(url, decode_responses=True)
    for user in USERS:
        client.xadd("events", {"user": user})
    b = TopologyBuilder()
    b.set_spout("events", redis_streams.RedisStreamSpout(url, "events", "g", ["user"], id_field=None))
    b.set_bolt("lookup", bolt).shuffle_grouping("events")
    log = SharedLog()
    b.set_bolt("out", Delivered(log)).shuffle_grouping("lookup")
    with LocalCluster() as cluster:
        cluster.submit_topology("lookups", {"topology.message.timeout.secs": 10}, b.create_topology())
        assert wait_until(lambda: client.xlen("events:dead") + len(log.items()) == len(USERS), 30), \
            (client.xlen("events:dead"), log.items())
        cluster.kill_topology("lookups", wait_secs=0)
    dead = [fields for _id, fields in client.xrange("events:dead")]
    client.close()
    return dead, log.items()


def check(dead: list[dict], delivered: list[str], why) -> None:
    assert sorted(delivered) == sorted(set(USERS) - BAD)  # N - K, each once
    assert sorted(json.loads(d["fields"])["user"] for d in dead) == sorted(BAD)  # K, each once
    for d in dead:
        reason = why(json.loads(d["fields"])["user"])
        # main: "failed 4 times (max_retries 3); last: failed in [lookup] task N", no reason
        assert "last: failed in [lookup] task " in d["error"] and reason in d["error"], d["error"]
        cause = json.loads(d["cause"])
        assert (cause["kind"], cause["component"]) == ("fail", "lookup") and reason in cause["message"], cause
        assert PASSWORD not in json.dumps(d)


def test_a_lookup_redis_refuses_is_dead_lettered_saying_which_key_and_why(redis_server):
    url = locked(redis_server)
    import redis
    client = redis.Redis.from_url(url)
    for user in USERS:
        if user in BAD:
            client.hset(f"user:{user}", "name", user)  # a hash, where GET reads a string
        else:
            client.set(f"user:{user}", user.upper())
    bolt = redis_streams.RedisLookupBolt(url, redis_streams.LookupSpec("user", prefix="user:"), ["user", "name"])
    dead, delivered = run(url, bolt)
    masked = redis_server.url.replace("redis://", "redis://:***@")
    check(dead, delivered, lambda user: (
        f"RedisLookupBolt: string query of key 'user:{user}' on {masked} failed: ResponseError: WRONGTYPE"))


def test_a_filter_redis_refuses_is_dead_lettered_saying_which_key_and_why(redis_server):
    url = locked(redis_server)
    import redis
    client = redis.Redis.from_url(url)
    for user in USERS:
        if user in BAD:
            client.set(f"seen:{user}", "yes")  # a plain string, where PFCOUNT reads a HyperLogLog
        else:
            client.pfadd(f"seen:{user}", "visit")
    spec = redis_streams.LookupSpec("user", prefix="seen:", data_type="hyper_log_log")
    dead, delivered = run(url, redis_streams.RedisFilterBolt(url, spec, ["user"]))
    check(dead, delivered, lambda user: f"RedisFilterBolt: hyper_log_log query of key 'seen:{user}' on redis://:***@")


class Context:
    def get_this_component_id(self):
        return "lookup"

    def get_this_task_id(self):
        return 3


class Collector:
    def __init__(self) -> None:
        self.causes: list = []
        self.errors: list = []

    def fail_with(self, tup, cause) -> None:
        self.causes.append(cause)

    def emit(self, values, anchors=None) -> None:
        raise AssertionError(f"emitted {values!r:.100}: the query failed")

    def report_error(self, error) -> None:
        self.errors.append(error)


def test_a_tuple_without_the_key_field_fails_saying_which_field_it_lacks():
    from squall import Fields
    from squall._tuple import Source, Tuple

    out = Collector()
    bolt = redis_streams.RedisLookupBolt(f"redis://:{PASSWORD}@127.0.0.1:1/0", redis_streams.LookupSpec("user"),
                                         ["name", "value"])
    bolt.prepare({}, Context(), out)
    bolt.execute(Tuple(["ann"], Source("events", "clicks", 1, Fields(["name"]))))
    (cause,) = out.causes  # main: ValueError "'user' does not exist in ['name']", from nowhere named
    assert (cause.kind, cause.component, cause.task) == ("fail", "lookup", 3)
    assert cause.message == ("RedisLookupBolt: tuple from 'events' stream 'clicks' has no key field 'user' "
                             "(has ['name'])") == out.errors[0]
    bolt.cleanup()


def test_a_huge_key_is_cut_in_the_reason_and_the_reported_error():
    """The reason quoted the whole key, and the bolt reports the reason as its error, which is
    logged whole: a 1 MB key (the tuple's own field) whose query failed made a 1 MB log line and
    error record for each failure, and the whole key was masked for the cause each time."""
    from squall import Fields
    from squall._tuple import Source, Tuple

    out = Collector()
    bolt = redis_streams.RedisLookupBolt(f"redis://:{PASSWORD}@127.0.0.1:1/0", redis_streams.LookupSpec("user"),
                                         ["user", "value"])
    bolt.prepare({}, Context(), out)
    huge = "u" * 1_000_000
    bolt.execute(Tuple([huge], Source("events", "clicks", 1, Fields(["user"]))))  # nothing listens on port 1
    (cause,), (error,) = out.causes, out.errors
    assert error.startswith(f"RedisLookupBolt: string query of key '{'u' * 199}... (1000002 characters) on "
                            "redis://:***@127.0.0.1:1/0 failed: ConnectionError: "), error[:300]
    assert len(error) < 1000 and PASSWORD not in error  # main: 1,000,100 characters
    assert cause.message == error
    bolt.cleanup()
