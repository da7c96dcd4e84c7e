"""squall.external.redis_streams against a real redis-server (tests/external/conftest.py) on
LocalCluster: flow and ack, replay on fail, dead letters, restart, claims, Redis down."""

from __future__ import annotations

import logging
import threading
import time

import pytest

redis = pytest.importorskip("redis")

from squall import Bolt, Fields, LocalCluster, TopologyBuilder
from squall.engine.clock import SimulatedClock
from squall.external.redis_streams import (
    Entry,
    ExponentialBackoff,
    LookupSpec,
    RedisFilterBolt,
    RedisLookupBolt,
    RedisStreamSinkBolt,
    RedisStreamSpout,
    _DeadLetter,
)

from ..conftest import wait_until

STREAM, GROUP = "events", "squall"
FAST = ExponentialBackoff(initial_delay=0.02, multiplier=2.0, max_delay=0.2, max_retries=3)


class Through(Bolt):
    """Passes (id, user) on, anchored; counts each attempt per id in Redis (INCR attempts:<id>)
    and fails the first ``fail_first`` attempts of each id (None: never acks; -1: always fails)."""

    def __init__(self, url: str, fail_first: int | None = 0) -> None:
        self.url = url
        self.fail_first = fail_first

    def prepare(self, conf, context, collector):
        import redis
        super().prepare(conf, context, collector)
        self.r = redis.Redis.from_url(self.url, decode_responses=True)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "user"))

    def execute(self, tup):
        n = self.r.incr(f"attempts:{tup['id']}")
        if self.fail_first is None:
            return  # never acks: the entry stays pending
        if self.fail_first < 0 or n <= self.fail_first:
            self.collector.fail(tup)
            return
        self.collector.emit([tup["id"], tup["user"]], anchors=tup)
        self.collector.ack(tup)


def topology(url: str, bolt: Bolt, backoff: ExponentialBackoff = FAST, **spout_kw) -> object:
    b = TopologyBuilder()
    b.set_spout("spout", RedisStreamSpout(url, STREAM, GROUP, ["user"], backoff=backoff, batch_size=8,
                                          **spout_kw), 2)
    b.set_bolt("work", bolt, 2).shuffle_grouping("spout")
    b.set_bolt("sink", RedisStreamSinkBolt(url, "out"), 1).shuffle_grouping("work")
    return b.create_topology()


CONF = {"topology.message.timeout.secs": 30}


def add(r, n: int, start: int = 0) -> list[str]:
    return [r.xadd(STREAM, {"user": f"u{i}"}) for i in range(start, start + n)]


def pending(r) -> int:
    """Entries of the group not acked; -1 before the spout created the group."""
    try:
        return r.xpending(STREAM, GROUP)["pending"]
    except redis.ResponseError as e:
        if "NOGROUP" in str(e):
            return -1
        raise


def written(r, ids) -> bool:
    return all(r.hget(f"out:{i}", "user") is not None for i in ids)


def test_backoff_grows_to_its_cap_and_gives_up_after_max_retries():
    b = ExponentialBackoff(initial_delay=0.5, multiplier=2.0, max_delay=3.0, max_retries=3)

    assert [b.delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert [b.gives_up(n) for n in (1, 3, 4)] == [False, False, True]
    assert not ExponentialBackoff(max_retries=None).gives_up(10**6)


def test_entries_flow_to_the_sink_and_each_is_acked_exactly_once(redis_server):
    r = redis_server.client()
    ids = add(r, 40)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(redis_server.url, Through(redis_server.url)))
        assert wait_until(lambda: written(r, ids) and pending(r) == 0, 20)
        assert wait_until(lambda: cluster.get_topology_info("t")["components"]["spout"]["acked"] == 40, 10)
        info = cluster.get_topology_info("t")["components"]["spout"]
    assert info["failed"] == 0
    assert {r.hget(f"out:{i}", "user") for i in ids} == {f"u{n}" for n in range(40)}
    assert all(r.get(f"attempts:{i}") == "1" for i in ids)


def test_a_failed_tuple_is_replayed_and_then_acked(redis_server):
    r = redis_server.client()
    ids = add(r, 10)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(redis_server.url, Through(redis_server.url, fail_first=1)))
        assert wait_until(lambda: written(r, ids) and pending(r) == 0, 20)
    assert all(r.get(f"attempts:{i}") == "2" for i in ids)
    assert r.xlen(f"{STREAM}:dead") == 0


def test_an_entry_that_always_fails_goes_to_the_dead_letter_stream_after_the_retry_limit(redis_server):
    r = redis_server.client()
    [entry] = add(r, 1)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(redis_server.url, Through(redis_server.url, fail_first=-1)))
        assert wait_until(lambda: r.xlen(f"{STREAM}:dead") == 1 and pending(r) == 0, 20)
    [(_, dead)] = r.xrange(f"{STREAM}:dead")
    assert dead["id"] == entry and dead["stream"] == STREAM
    assert "failed 4 times" in dead["error"] and '"user": "u0"' in dead["fields"]
    assert r.get(f"attempts:{entry}") == "4"  # the first try and max_retries=3 retries


def test_a_malformed_entry_goes_to_the_dead_letter_stream_naming_the_field(redis_server):
    r = redis_server.client()
    good = add(r, 3)
    bad = r.xadd(STREAM, {"name": "no user here"})
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(redis_server.url, Through(redis_server.url)))
        assert wait_until(lambda: written(r, good) and pending(r) == 0 and r.xlen(f"{STREAM}:dead") == 1, 20)
    [(_, dead)] = r.xrange(f"{STREAM}:dead")
    assert dead["id"] == bad
    assert f"stream 'events' entry {bad}: missing field 'user'" in dead["error"]


def test_a_restarted_topology_replays_the_entries_its_consumers_left_pending(redis_server):
    r = redis_server.client()
    ids = add(r, 12)
    with LocalCluster() as cluster:
        cluster.submit_topology("first", CONF, topology(redis_server.url, Through(redis_server.url, fail_first=None)))
        assert wait_until(lambda: all(r.get(f"attempts:{i}") for i in ids), 20)
        cluster.kill_topology("first", wait_secs=0)
        assert wait_until(lambda: "first" not in cluster.get_topology_names(), 10)
        assert pending(r) == 12 and not written(r, ids[:1])
        # Same component ids and task indexes: the same consumers, which replay their pending
        # long before any claim (claim_idle_ms is far away).
        cluster.submit_topology("second", CONF, topology(redis_server.url, Through(redis_server.url)))
        assert wait_until(lambda: written(r, ids) and pending(r) == 0, 20)
    assert all(r.get(f"attempts:{i}") == "2" for i in ids)


def test_entries_of_a_consumer_that_is_gone_are_claimed_after_the_idle_time(redis_server):
    r = redis_server.client()
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    ids = add(r, 5)
    r.xreadgroup(GROUP, "gone-0", {STREAM: ">"}, count=5)  # taken by a consumer that never acks
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(redis_server.url, Through(redis_server.url),
                                                    claim_idle_ms=200, claim_interval_secs=0.2))
        assert wait_until(lambda: written(r, ids) and pending(r) == 0, 20)


def test_redis_down_is_logged_retried_and_nothing_is_lost(redis_server, caplog):
    r = redis_server.client()
    before = add(r, 5)
    backoff = ExponentialBackoff(initial_delay=0.05, max_delay=0.5, max_retries=None)
    with LocalCluster() as cluster, caplog.at_level(logging.ERROR, "squall.external.redis_streams"):
        cluster.submit_topology("t", CONF, topology(redis_server.url, Through(redis_server.url), backoff,
                                                    down_retry_secs=0.2))
        assert wait_until(lambda: written(r, before) and pending(r) == 0, 20)
        redis_server.stop()
        assert wait_until(lambda: any("unreachable" in m for m in caplog.messages), 10)
        redis_server.start()
        r = redis_server.client()
        after = add(r, 5, start=5)
        assert wait_until(lambda: written(r, before + after) and pending(r) == 0, 30)
        errors = cluster.get_topology_info("t")["errors"]
        assert all(w["alive"] for w in cluster.get_topology_info("t")["workers"])
    assert any(f"Redis at {redis_server.url} unreachable reading stream 'events'" in e["error"] for e in errors)
    assert r.xlen(f"{STREAM}:dead") == 0


def test_lookup_and_filter_bolts_read_strings_and_hashes(redis_server):
    r = redis_server.client()
    r.hset("names", mapping={"u0": "Ann", "u2": "Cid"})
    ids = add(r, 3)
    b = TopologyBuilder()
    b.set_spout("spout", RedisStreamSpout(redis_server.url, STREAM, GROUP, ["user"]))
    b.set_bolt("known", RedisFilterBolt(redis_server.url, LookupSpec("user", hash_key="names"),
                                        ["id", "user"])).shuffle_grouping("spout")
    b.set_bolt("name", RedisLookupBolt(redis_server.url, LookupSpec("user", hash_key="names"),
                                       ["id", "user", "name"])).shuffle_grouping("known")
    b.set_bolt("sink", RedisStreamSinkBolt(redis_server.url, "out")).shuffle_grouping("name")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, b.create_topology())
        assert wait_until(lambda: written(r, [ids[0], ids[2]]) and pending(r) == 0, 20)
    assert r.hgetall(f"out:{ids[0]}") == {"user": "u0", "name": "Ann"}
    assert r.hgetall(f"out:{ids[2]}") == {"user": "u2", "name": "Cid"}
    assert not r.exists(f"out:{ids[1]}")


def test_the_stream_sink_writes_a_replayed_tuple_once(redis_server):
    """The sink writes each entry; a sibling bolt fails its first try, so the entry is replayed
    and the sink sees it twice, yet the output stream holds it once."""
    r = redis_server.client()
    ids = add(r, 6)
    b = TopologyBuilder()
    b.set_spout("spout", RedisStreamSpout(redis_server.url, STREAM, GROUP, ["user"], backoff=FAST))
    b.set_bolt("sink", RedisStreamSinkBolt(redis_server.url, "out", mode="stream")).shuffle_grouping("spout")
    b.set_bolt("work", Through(redis_server.url, fail_first=1)).shuffle_grouping("spout")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, b.create_topology())
        assert wait_until(lambda: pending(r) == 0 and all(r.get(f"attempts:{i}") == "2" for i in ids), 20)
    out = [fields for _, fields in r.xrange("out")]
    assert sorted(f["id"] for f in out) == sorted(ids)
    assert {f["user"] for f in out} == {f"u{n}" for n in range(6)}


# --- components driven directly (no cluster): fast regression tests -------------------------


class Recorder:
    """Stands for a spout's or bolt's collector: records what the component does."""

    def __init__(self):
        self.emitted, self.acked, self.failed, self.errors = [], [], [], []
        self.woken = threading.Event()

    def wake(self):
        self.woken.set()

    def emit(self, values, stream="default", msg_id=None, anchors=None):
        self.emitted.append((list(values), msg_id))

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)

    def report_error(self, error):
        self.errors.append(str(error))


class Context:
    def __init__(self, index: int = 0):
        self.index = index

    def get_this_component_id(self):
        return "spout"

    def get_this_task_index(self):
        return self.index

    def get_this_task_id(self):
        return self.index + 1


class Tup:
    """A tuple as the sink sees it."""

    def __init__(self, **values):
        self.values = values

    def get_fields(self):
        return Fields(*self.values)

    def get_values(self):
        return list(self.values.values())

    def get_value_by_field(self, name):
        return self.values[name]

    def get_source_component(self):
        return "spout"

    def get_source_stream_id(self):
        return "default"


def sink(url, **kw):
    bolt = RedisStreamSinkBolt(url, "out", **kw)
    collector = Recorder()
    bolt.prepare({}, Context(), collector)
    return bolt, collector


def settled(collector, n: int) -> bool:
    """Whether the sink's writer has acked or failed ``n`` tuples in all (waits for it)."""
    return wait_until(lambda: len(collector.acked) + len(collector.failed) >= n, 10)


def test_a_stream_write_that_fails_is_not_marked_written_and_its_replay_is_written(redis_server):
    r = redis_server.client()
    r.set("out", "not a stream")  # XADD fails with WRONGTYPE
    bolt, collector = sink(redis_server.url, mode="stream")
    t = Tup(id="e1", user="u1")
    bolt.execute(t)
    assert settled(collector, 1)
    assert collector.failed == [t] and not collector.acked
    assert not r.sismember("out:written", "e1")
    r.delete("out")
    bolt.execute(t)  # the replay
    assert settled(collector, 2)
    assert collector.acked == [t]
    assert [f for _, f in r.xrange("out")] == [{"id": "e1", "user": "u1"}]
    bolt.execute(t)  # a second replay is still skipped
    assert settled(collector, 3)
    assert collector.acked == [t, t]
    assert r.xlen("out") == 1
    bolt.cleanup()


def spout(url, index: int = 0, **kw):
    s = RedisStreamSpout(url, STREAM, GROUP, **kw)
    collector = Recorder()
    s.open({}, Context(index), collector)
    return s, collector


def pump(s, collector, n: int) -> None:
    """Calls ``s.next_tuple()`` until ``collector`` has ``n`` emits in all, waiting between
    calls for the spout's reading thread to wake it (as the loop does)."""
    deadline = time.monotonic() + 20
    while len(collector.emitted) < n:
        assert time.monotonic() < deadline, f"{len(collector.emitted)} of {n} emitted"
        collector.woken.clear()
        before = len(collector.emitted)
        s.next_tuple()
        if len(collector.emitted) == before:   # nothing buffered: wait for the reading thread
            collector.woken.wait(1.0)


def test_an_outage_loses_no_retry_and_gives_no_given_up_entry_a_new_retry_budget(redis_server):
    """Two entries fail just before Redis goes down. One's retry falls due during the outage:
    it is emitted again once Redis is back (its retry was taken off the schedule and lost when
    the touch before its emit failed). The other passes its retry limit during the outage: it
    goes to the dead-letter stream once Redis is back, once, and is not emitted again with a
    fresh retry budget (the replay of own pending took it as a new entry). Every entry counted."""
    r = redis_server.client()
    clock = SimulatedClock()
    s, out = spout(redis_server.url, fields=["user"], clock=clock, down_retry_secs=0.5,
                   backoff=ExponentialBackoff(initial_delay=1.0, max_delay=1.0, max_retries=1))
    ids = add(r, 6)
    pump(s, out, 6)
    retried, given_up, *rest = ids
    s.fail(given_up)                 # its first failure (the limit is one): again 1 s later
    clock.advance(1.0)
    pump(s, out, 7)
    s.fail(retried)                  # again 1 s later
    for i in rest:
        s.ack(i)
    s.next_tuple()                   # their XACK
    assert pending(r) == 2
    redis_server.stop()              # RDB saved: the two stay pending
    clock.advance(1.5)
    s.next_tuple()                   # the retry is due now; its touch meets the outage
    s.fail(given_up)                 # past the limit: its dead-letter write meets the outage
    redis_server.start()
    r = redis_server.client()
    deadline = time.monotonic() + 20
    while len(out.emitted) < 8 or r.xlen(f"{STREAM}:dead") < 1:
        assert time.monotonic() < deadline, (out.emitted, r.xlen(f"{STREAM}:dead"))
        out.woken.clear()
        clock.advance(1.0)
        s.next_tuple()
        out.woken.wait(0.1)
    s.ack(retried)
    s.next_tuple()
    emitted = [m for _, m in out.emitted]
    assert {i: emitted.count(i) for i in ids} == {retried: 2, given_up: 2, **{i: 1 for i in rest}}
    dead = r.xrange(f"{STREAM}:dead")
    assert [f["id"] for _, f in dead] == [given_up] and "failed 2 times" in dead[0][1]["error"]
    assert pending(r) == 0
    # a dead letter written again (its first write's reply lost with the server) is not doubled
    s._dead[given_up] = _DeadLetter(Entry(given_up, {"user": "u1"}), "again", None)
    s._write_dead_letters()
    assert r.xlen(f"{STREAM}:dead") == 1 and not s._dead
    s.close()


def test_a_translator_raising_any_error_dead_letters_the_entry_instead_of_killing_the_worker(redis_server):
    import json

    r = redis_server.client()
    good = r.xadd(STREAM, {"doc": '{"user": "u0"}'})
    bad = r.xadd(STREAM, {"doc": "{not json"})
    s, collector = spout(redis_server.url, translator=lambda stream, e: [json.loads(e.fields["doc"])["user"]],
                         output_fields=["user"])
    pump(s, collector, 1)
    assert collector.emitted == [(["u0"], good)]
    [(_, dead)] = r.xrange(f"{STREAM}:dead")
    assert dead["id"] == bad
    assert dead["error"].startswith(f"stream 'events' entry {bad}: translator raised JSONDecodeError")
    s.ack(good)
    s.next_tuple()  # sends the acks held back
    assert pending(r) == 0
    s.close()


def test_a_translator_returning_another_count_of_values_dead_letters_the_entry(redis_server):
    # emit raised on it: the worker died, and its restart read this pending entry first again
    r = redis_server.client()
    good = r.xadd(STREAM, {"csv": "u0,1"})
    bad = r.xadd(STREAM, {"csv": "u1,2,3"})
    s, collector = spout(redis_server.url, translator=lambda stream, e: e.fields["csv"].split(","),
                         output_fields=["user", "n"])
    pump(s, collector, 1)
    assert collector.emitted == [(["u0", "1"], good)]
    [(_, dead)] = r.xrange(f"{STREAM}:dead")
    assert dead["id"] == bad
    assert dead["error"] == (f"stream 'events' entry {bad}: the translator returned 3 value(s) for 2 "
                             f"field(s) (user, n)")
    s.ack(good)
    s.next_tuple()  # sends the acks held back
    assert pending(r) == 0
    s.close()


def test_a_spout_recreates_its_group_after_the_server_lost_everything(redis_server, caplog):
    r = redis_server.client()
    [first] = add(r, 1)
    s, collector = spout(redis_server.url, fields=["user"])
    pump(s, collector, 1)
    assert collector.emitted == [([first, "u0"], first)]
    s.ack(first)
    s.next_tuple()
    r.flushall()  # as a restart without persistence: stream and group are gone
    with caplog.at_level(logging.WARNING, "squall.external.redis_streams"):
        # the reading thread meets NOGROUP (not raised), and the next call recreates the group:
        # called until it exists, not a fixed three times, which a busy machine's reading
        # thread did not always reach in time
        assert wait_until(lambda: s.next_tuple() or pending(r) >= 0, 20, 0.02), "the group was not recreated"
    assert pending(r) == 0
    assert any("is gone from Redis" in m and "recreating" in m for m in caplog.messages)
    [second] = add(r, 1, start=1)
    pump(s, collector, 2)
    assert collector.emitted[-1] == ([second, "u1"], second)
    s.ack(second)
    s.next_tuple()
    assert pending(r) == 0
    s.close()


def test_an_unreachable_server_is_logged_and_reported_without_its_password(caplog):
    url = "redis://:s3cret@127.0.0.1:1/0"  # nothing listens on port 1
    s, collector = spout(url, fields=["user"])
    with caplog.at_level(logging.ERROR, "squall.external.redis_streams"):
        s.next_tuple()
    bolt, sink_collector = sink(url, mode="stream")
    with caplog.at_level(logging.ERROR, "squall.external.redis_streams"):
        bolt.execute(Tup(id="e1", user="u1"))
        assert settled(sink_collector, 1)
    said = caplog.messages + collector.errors + sink_collector.errors
    assert any("unreachable" in m for m in said) and sink_collector.failed
    assert any("redis://:***@127.0.0.1:1/0" in m for m in said)
    assert not any("s3cret" in m for m in said)


def test_the_sink_writes_booleans_and_none_as_json_instead_of_failing_forever(redis_server):
    bolt, collector = sink(redis_server.url, mode="hash")
    bolt.execute(Tup(id="e1", ok=True, gone=None, n=3))
    assert settled(collector, 1)
    assert collector.acked and not collector.failed
    assert redis_server.client().hgetall("out:e1") == {"ok": "true", "gone": "null", "n": "3"}


def test_successive_claims_go_on_from_where_the_previous_scan_stopped(redis_server):
    s, _collector = spout(redis_server.url, batch_size=2)
    starts = []

    class Client:
        def xautoclaim(self, stream, group, consumer, min_idle, start_id, count):
            starts.append(start_id)
            return ["5-0", [], []] if start_id == "0-0" else ["0-0", [], []]

    s.client = Client()
    s._claim()
    s._claim()
    s._claim()
    assert starts == ["0-0", "5-0", "0-0"]


def owner_and_deliveries(r, entry_id: str) -> tuple[str, int]:
    [p] = r.xpending_range(STREAM, GROUP, min=entry_id, max=entry_id, count=1)
    return p["consumer"], p["times_delivered"]


def emitted_ids(collector) -> list[str]:
    return [msg_id for _, msg_id in collector.emitted]


# The two claim tests below run the live task on a SimulatedClock and move the server's idle
# times on by hand (XCLAIM ... IDLE, as much as the live task's clock moved), with claim_idle_ms a
# minute: a test process the machine stalls cannot make the live task look dead. With real time
# and claim_idle_ms of 300 ms, a 0.35 s stall between the live task's touch and the other task's
# claim let that task claim the entry, and the test failed under load.
IDLE_MS = 60_000
TOUCH_SECS = IDLE_MS / 3000        # how often a task resets its entries' idle time


def age(r, consumer: str, secs: float) -> None:
    """As if ``secs`` passed on the server: every entry ``consumer`` holds idles that much longer
    (its owner and delivery count unchanged)."""
    for p in r.xpending_range(STREAM, GROUP, min="-", max="+", count=1000, consumername=consumer):
        r.xclaim(STREAM, GROUP, consumer, 0, [p["message_id"]], idle=p["time_since_delivered"] + int(secs * 1000),
                 justid=True)


def test_an_entry_a_live_task_retries_past_the_idle_time_is_not_claimed_but_a_dead_consumers_is(redis_server):
    """Task 0 fails an entry and waits a backoff three times the claim idle time before its
    retry; task 1 claims all the while. It takes the entry of a consumer that is gone, never the
    one task 0 still retries."""
    r = redis_server.client()
    clock = SimulatedClock()
    a, a_out = spout(redis_server.url, 0, fields=["user"], claim_idle_ms=IDLE_MS, claim_interval_secs=10**6,
                     backoff=ExponentialBackoff(initial_delay=3 * IDLE_MS / 1000, max_delay=3 * IDLE_MS / 1000,
                                                max_retries=None), clock=clock)
    b, b_out = spout(redis_server.url, 1, fields=["user"], claim_idle_ms=IDLE_MS, claim_interval_secs=0)
    [held] = add(r, 1)
    pump(a, a_out, 1)
    assert emitted_ids(a_out) == [held]
    a.fail(held)
    [dead] = add(r, 1, start=1)
    r.xreadgroup(GROUP, "gone-0", {STREAM: ">"}, count=1)  # taken by a consumer that never acks
    age(r, "gone-0", 2 * IDLE_MS / 1000)                    # ...and gone long ago
    steps = 0
    while len(a_out.emitted) < 2:   # until task 0's retry is due: 9 touch intervals on its clock
        steps += 1
        assert steps <= 10, "task 0's retry never came"
        clock.advance(TOUCH_SECS)
        age(r, "spout-0", TOUCH_SECS)
        b.next_tuple()              # claims what idled past claim_idle_ms
        a.next_tuple()              # touches its entries (due every TOUCH_SECS), re-emits when due
    assert emitted_ids(a_out) == [held, held]   # the retry, by its owner
    assert emitted_ids(b_out) == [dead]
    assert owner_and_deliveries(r, held)[0] == "spout-0"
    a.ack(held)
    b.ack(dead)
    a.next_tuple()  # each sends the acks it held back
    b.next_tuple()
    assert pending(r) == 0
    a.close()
    b.close()


def test_entries_read_while_a_task_was_deactivated_and_claimed_meanwhile_are_not_emitted_twice(redis_server):
    """Task 0 is deactivated with a read under way; the read delivers an entry, which idles
    past the claim idle time while the task stays deactivated, and task 1 claims and emits it.
    When task 0 is activated it must not emit it too: it touches it first and finds it taken."""
    r = redis_server.client()
    clock = SimulatedClock()
    a, a_out = spout(redis_server.url, 0, fields=["user"], claim_idle_ms=IDLE_MS, claim_interval_secs=10**6,
                     clock=clock, block_ms=30_000)  # its read waits for the entries, however slow the test
    b, b_out = spout(redis_server.url, 1, fields=["user"], claim_idle_ms=IDLE_MS, claim_interval_secs=0)
    [first] = add(r, 1)
    pump(a, a_out, 1)
    a.ack(first)
    a.next_tuple()                   # sends the ack, and asks the reading thread for more
    a.deactivate()
    [later] = add(r, 1, start=1)
    assert wait_until(lambda: pending(r) == 1, 10), "task 0's read did not take the new entry"
    age(r, "spout-0", 2 * IDLE_MS / 1000)
    clock.advance(2 * IDLE_MS / 1000)
    pump(b, b_out, 1)                # task 1 claims what idled past claim_idle_ms
    a.activate()
    for _ in range(3):
        a.next_tuple()
    assert emitted_ids(a_out) == [first] and emitted_ids(b_out) == [later]
    b.ack(later)
    b.next_tuple()
    assert pending(r) == 0
    a.close()
    b.close()


def test_entries_in_flight_for_longer_than_the_idle_time_stay_with_their_live_task(redis_server):
    """A slow topology at max spout pending: task 0 has emitted 12 entries and, for three times
    the claim idle time, only sees acks come back (no next_tuple). Task 1 claims all the while
    and takes none of them; task 0's own claims leave them alone too (the delivery count an
    XAUTOCLAIM would raise stays 1)."""
    r = redis_server.client()
    clock = SimulatedClock()
    kw = dict(fields=["user"], batch_size=20, claim_idle_ms=IDLE_MS, claim_interval_secs=0)
    a, a_out = spout(redis_server.url, 0, clock=clock, **kw)
    b, b_out = spout(redis_server.url, 1, **kw)
    ids = add(r, 12)
    pump(a, a_out, len(ids))
    assert emitted_ids(a_out) == ids
    for late in ids[1:]:            # 11 acks, a touch interval apart: 220 s, ids[0] still out
        clock.advance(TOUCH_SECS)
        age(r, "spout-0", TOUCH_SECS)
        b.next_tuple()
        a.ack(late)                 # touches what task 0 still holds (due on its clock)
    assert len(a._tracked) == 1 and b_out.emitted == []
    assert owner_and_deliveries(r, ids[0]) == ("spout-0", 1)
    for _ in range(10):             # task 0 claims (claim_interval_secs=0) while ids[0] is in flight
        clock.advance(TOUCH_SECS)
        age(r, "spout-0", TOUCH_SECS)
        a.next_tuple()
    assert owner_and_deliveries(r, ids[0]) == ("spout-0", 1)
    assert emitted_ids(a_out) == ids and b_out.emitted == []
    a.ack(ids[0])
    a.next_tuple()
    assert pending(r) == 0
    a.close()
    b.close()


def key_bolt(cls, url, spec):
    bolt = cls(url, spec, ["user", "value"] if cls is RedisLookupBolt else ["user"])
    collector = Recorder()
    bolt.prepare({}, Context(), collector)
    return bolt, collector


def looked_up(bolt, collector, *users):
    """What the lookup emits for each user, in order (each input acked)."""
    for user in users:
        bolt.execute(Tup(user=user))
    assert len(collector.acked) == len(users) and not collector.failed
    return [values[1] for values, _ in collector.emitted]


def passed(bolt, collector, *users):
    """The users the filter passes on (each input acked either way)."""
    for user in users:
        bolt.execute(Tup(user=user))
    assert len(collector.acked) == len(users) and not collector.failed
    return [values[0] for values, _ in collector.emitted]


def seed(r):
    r.set("name:a", "Ann")
    r.rpush("queue:a", "x", "y")
    r.hset("names", "a", "Ann")
    r.sadd("tags:a", "t1", "t2", "t3")
    r.sadd("known", "a")
    r.zadd("scores", {"a": 2.5, "c": 7})   # "a" has rank 0: a filter must still pass it
    r.pfadd("visits:a", "v1", "v2")
    r.geoadd("places", (13.361389, 38.115556, "a"))


@pytest.mark.parametrize("spec, expected", [
    (LookupSpec("user", prefix="name:"), ["Ann", None]),
    (LookupSpec("user", hash_key="names"), ["Ann", None]),
    (LookupSpec("user", data_type="HASH", additional_key="names"), ["Ann", None]),
    (LookupSpec("user", prefix="tags:", data_type="set"), [3, 0]),
    (LookupSpec("user", data_type="sorted_set", additional_key="scores"), [2.5, None]),
    (LookupSpec("user", prefix="visits:", data_type="hyper_log_log"), [2, 0]),
], ids=["string", "hash", "hash-storm-spelling", "set", "sorted_set", "hyper_log_log"])
def test_the_lookup_bolt_reads_each_storm_redis_data_type(redis_server, spec, expected):
    r = redis_server.client()
    seed(r)
    assert looked_up(*key_bolt(RedisLookupBolt, redis_server.url, spec), "a", "b") == expected


def test_the_lookup_bolt_pops_a_list_and_reads_a_geo_position(redis_server):
    r = redis_server.client()
    seed(r)
    lists = key_bolt(RedisLookupBolt, redis_server.url, LookupSpec("user", prefix="queue:", data_type="list"))
    assert looked_up(*lists, "a", "a", "a") == ["x", "y", None]   # storm-redis: LPOP, it consumes
    geo = key_bolt(RedisLookupBolt, redis_server.url, LookupSpec("user", data_type="geo", additional_key="places"))
    [(lon, lat), missing] = looked_up(*geo, "a", "b")
    assert (round(lon, 4), round(lat, 4), missing) == (13.3614, 38.1156, None)


@pytest.mark.parametrize("spec", [
    LookupSpec("user", prefix="name:"),
    LookupSpec("user", hash_key="names"),
    LookupSpec("user", data_type="set", additional_key="known"),
    LookupSpec("user", data_type="sorted_set", additional_key="scores"),
    LookupSpec("user", prefix="visits:", data_type="hyper_log_log"),
    LookupSpec("user", data_type="geo", additional_key="places"),
], ids=["string", "hash", "set", "sorted_set", "hyper_log_log", "geo"])
def test_the_filter_bolt_passes_what_exists_for_each_storm_redis_data_type(redis_server, spec):
    seed(redis_server.client())
    assert passed(*key_bolt(RedisFilterBolt, redis_server.url, spec), "a", "b", "a") == ["a", "a"]


@pytest.mark.parametrize("cls, spec, says", [
    (RedisLookupBolt, LookupSpec("user", data_type="zset"), "RedisLookupBolt: LookupSpec data_type 'zset' is not one of"),
    (RedisFilterBolt, LookupSpec("user", data_type="list"), "storm-redis's RedisFilterBolt has no 'list' either"),
    (RedisLookupBolt, LookupSpec("user", data_type="hash"), "RedisLookupBolt: LookupSpec data_type 'hash' needs additional_key"),
    (RedisLookupBolt, LookupSpec("user", data_type="sorted_set"), "data_type 'sorted_set' needs additional_key"),
    (RedisFilterBolt, LookupSpec("user", data_type="geo"), "RedisFilterBolt: LookupSpec data_type 'geo' needs additional_key"),
    (RedisFilterBolt, LookupSpec("user", data_type="set"), "RedisFilterBolt: LookupSpec data_type 'set' needs additional_key"),
    (RedisLookupBolt, LookupSpec("user", data_type="set", additional_key="known"), "takes no additional_key ('known')"),
    (RedisFilterBolt, LookupSpec("user", hash_key="names", data_type="set"), "hash_key 'names' is for data_type 'hash'"),
])
def test_a_bad_lookup_spec_is_refused_when_the_bolt_is_built_naming_the_bolt_and_parameter(cls, spec, says):
    with pytest.raises(ValueError, match="^" + cls.__name__) as e:
        cls("redis://127.0.0.1:1/0", spec, ["user"])
    assert says in str(e.value)


@pytest.mark.parametrize(("name", "bad", "least"), [("batch_size", 0, 1), ("block_ms", 0, 1), ("claim_idle_ms", 0, 1),
                                                     ("claim_interval_secs", -1, 0), ("down_retry_secs", -1, 0)])
def test_a_spout_setting_out_of_range_is_refused_naming_it(name, bad, least):
    from squall.external.redis_streams import RedisStreamSpout
    with pytest.raises(ValueError, match=f"^RedisStreamSpout: {name} must be a number of at least {least}, got {bad}"):
        RedisStreamSpout("redis://127.0.0.1:1", "s", "g", **{name: bad})


def test_a_read_block_the_urls_socket_timeout_would_cut_short_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"^RedisStreamSpout: block_ms 5000 must be below the socket_timeout "
                                         r"of the URL \(2.0 s\)"):
        RedisStreamSpout("redis://127.0.0.1:1/0?socket_timeout=2", "s", "g", block_ms=5000)


def test_at_low_load_each_entry_is_written_and_acked_without_waiting_out_the_read_block(redis_server):
    """Entries come one at a time into an idle topology whose spout's XREADGROUP blocks for a
    minute (block_ms) and whose worker's watchdog may not move executors off a blocked loop:
    each is written by the sink and acked while the next one does not exist yet, i.e. neither
    the read's block nor a flush interval holds it (the read blocks on the spout's own thread,
    and the sink writes as soon as it has a tuple). Every entry is written exactly once."""
    r = redis_server.client()
    b = TopologyBuilder()
    # the URL's socket timeout outlasts the block: else redis-py's default (5 s) would end it
    url = f"{redis_server.url}?socket_timeout=120"
    b.set_spout("spout", RedisStreamSpout(url, STREAM, GROUP, ["user"], block_ms=60_000))
    b.set_bolt("sink", RedisStreamSinkBolt(redis_server.url, "out", mode="stream")).shuffle_grouping("spout")
    conf = {**CONF, "topology.executor.blocking.move": False}
    ids = []
    with LocalCluster() as cluster:
        cluster.submit_topology("t", conf, b.create_topology())
        assert wait_until(lambda: pending(r) == 0, 20)   # the group exists: the spout reads
        for n in range(5):
            [entry] = add(r, 1, start=n)
            ids.append(entry)
            assert wait_until(lambda: r.xlen("out") == len(ids) and pending(r) == 0, 20), \
                f"entry {n} not written and acked while the read blocks for 60 s"
        info = cluster.get_topology_info("t")["components"]["spout"]
    out = [fields for _, fields in r.xrange("out")]
    assert [f["id"] for f in out] == ids and [f["user"] for f in out] == [f"u{n}" for n in range(5)]
    assert r.smembers("out:written") == set(ids)
    assert info["failed"] == 0


def xack_calls(r) -> int:
    return int(r.info("commandstats").get("cmdstat_xack", {}).get("calls", 0))


def still_pending(r, ids) -> list[str]:
    return [i for i in ids if r.xpending_range(STREAM, GROUP, min=i, max=i, count=1)]


def test_the_acks_of_a_round_go_in_one_xack_and_batch_size_of_them_at_once(redis_server):
    """Acks wait for the next next_tuple (the loop's next round), which sends them in one XACK;
    batch_size acks waiting are sent at once, without it. Every entry ends acked."""
    r = redis_server.client()
    ids = add(r, 7)
    s, collector = spout(redis_server.url, fields=["user"], batch_size=4)
    pump(s, collector, 4)
    before = xack_calls(r)
    for entry_id in ids[:3]:
        s.ack(entry_id)
    assert xack_calls(r) == before and still_pending(r, ids[:3]) == ids[:3]   # held back
    s.next_tuple()
    assert xack_calls(r) == before + 1 and still_pending(r, ids[:4]) == ids[3:4]   # one XACK, three ids
    pump(s, collector, 7)
    for entry_id in ids[3:]:
        s.ack(entry_id)   # the 4th held-back ack reaches batch_size: sent at once
    assert xack_calls(r) == before + 2 and pending(r) == 0
    assert [m for _, m in collector.emitted] == ids
    s.close()


class TickCounter(Bolt):
    """Counts the tick tuples it gets (in shared state), acks everything."""

    def __init__(self) -> None:
        from squall.testing._registry import SharedCounter
        self.ticks = SharedCounter()

    def execute(self, tup):
        from squall import is_tick_tuple
        if is_tick_tuple(tup):
            self.ticks.incr()
        self.collector.ack(tup)


def test_the_redis_bolts_skip_tick_tuples_as_storm_redis_bolts_do(redis_server):
    """With ``topology.tick.tuple.freq.secs`` set for the whole topology (a storm-starter
    rolling count beside them, say), the lookup, filter and sink bolts get ticks too; as
    storm-redis's (``BaseTickTupleAwareRichBolt``) they skip them: no error reported each tick,
    no tick failed, every entry written once."""
    r = redis_server.client()
    r.hset("names", mapping={"u0": "Ann", "u1": "Bob", "u2": "Cid"})
    ids = add(r, 3)
    b = TopologyBuilder()
    b.set_spout("spout", RedisStreamSpout(redis_server.url, STREAM, GROUP, ["user"]))
    b.set_bolt("known", RedisFilterBolt(redis_server.url, LookupSpec("user", hash_key="names"),
                                        ["id", "user"])).shuffle_grouping("spout")
    b.set_bolt("name", RedisLookupBolt(redis_server.url, LookupSpec("user", hash_key="names"),
                                       ["id", "user", "name"])).shuffle_grouping("known")
    b.set_bolt("sink", RedisStreamSinkBolt(redis_server.url, "out")).shuffle_grouping("name")
    counter = TickCounter()
    b.set_bolt("ticks", counter).shuffle_grouping("spout")
    # one worker: every bolt's ticks fire in the same round of its loop as the counter's
    conf = {**CONF, "topology.tick.tuple.freq.secs": 0.05}
    with LocalCluster() as cluster:
        cluster.submit_topology("t", conf, b.create_topology())
        assert wait_until(lambda: written(r, ids) and pending(r) == 0, 20)
        assert wait_until(lambda: counter.ticks.value >= 5, 20)
        # the redis bolts' ticks of those rounds were queued with the counter's: drained once idle
        assert wait_until(lambda: cluster.is_idle("t"), 10, 0.001)
        info = cluster.get_topology_info("t")
    assert info["errors"] == []
    assert {c: info["components"][c]["failed"] for c in ("spout", "known", "name", "sink")} == \
        {"spout": 0, "known": 0, "name": 0, "sink": 0}
    assert info["components"]["spout"]["acked"] == 3
    assert [r.hgetall(f"out:{i}") for i in ids] == [{"user": "u0", "name": "Ann"}, {"user": "u1", "name": "Bob"},
                                                   {"user": "u2", "name": "Cid"}]


def test_every_connection_has_socket_timeouts_unless_the_url_sets_its_own():
    """A Redis server that stops answering (SIGSTOP, a partition) must end a call, not hang the
    worker's loop: redis-py 5, which pyproject allows, has no socket timeout by default. Every
    client the connectors make sets one (5 s; the spout's reading one its BLOCK and a margin),
    and a URL's own query wins. No server is needed: the clients connect lazily."""
    url = "redis://127.0.0.1:1/0"

    def timeouts(client) -> tuple:
        kw = client.connection_pool.connection_kwargs
        return kw.get("socket_timeout"), kw.get("socket_connect_timeout")
    s = RedisStreamSpout(url, STREAM, GROUP, block_ms=2000)
    s.open({}, Context(), Recorder())
    assert timeouts(s.client) == (5.0, 5.0)
    assert timeouts(s._reader.client) == (7.0, 5.0)
    bolt = RedisStreamSinkBolt(url, "out")
    bolt.prepare({}, Context(), Recorder())
    assert timeouts(bolt.client) == (5.0, 5.0)
    for cls in (RedisLookupBolt, RedisFilterBolt):
        b = cls(url, LookupSpec("user"), ["user", "found"])
        b.prepare({}, Context(), Recorder())
        assert timeouts(b.client) == (5.0, 5.0), cls
    own = RedisStreamSinkBolt(url + "?socket_timeout=1.5&socket_connect_timeout=0.5", "out")
    own.prepare({}, Context(), Recorder())
    assert timeouts(own.client) == (1.5, 0.5)


def test_an_entry_given_up_by_a_task_cut_off_then_claimed_and_acked_is_not_counted_as_a_dead_letter(redis_server):
    """Task 0 gives an entry up while it is cut off from Redis (its dead letter waits), stays
    cut off past the claim idle time, and task 1 claims the entry and acks it. The entry ends
    acked and the dead-letter stream stays empty; task 0's `dead_lettered` statistic said 1
    all the same (counted when it gave the entry up, not when its dead letter was written), and
    had task 1 given it up too, the two tasks' counts said 2 for one dead letter. A dead letter
    is counted by the task whose write put it in the dead-letter stream."""
    r = redis_server.client()
    clock = SimulatedClock()
    a, a_out = spout(redis_server.url, 0, fields=["user"], claim_idle_ms=IDLE_MS, claim_interval_secs=10**6,
                     clock=clock, down_retry_secs=1.0,
                     backoff=ExponentialBackoff(initial_delay=1.0, max_delay=1.0, max_retries=0))
    b, b_out = spout(redis_server.url, 1, fields=["user"], claim_idle_ms=IDLE_MS, claim_interval_secs=0)
    [entry] = add(r, 1)
    pump(a, a_out, 1)

    def cut_off(*args, **kwargs):
        raise redis.ConnectionError("task 0 is cut off from Redis")

    write = a._dead_letter_script
    a._dead_letter_script = cut_off
    a.fail(entry)                    # past its limit of no retry: its dead-letter write meets the cut
    assert r.xlen(f"{STREAM}:dead") == 0 and pending(r) == 1
    age(r, "spout-0", 2 * IDLE_MS / 1000)
    pump(b, b_out, 1)                # task 1 claims what idled past claim_idle_ms
    assert emitted_ids(b_out) == [entry]
    b.ack(entry)
    b.next_tuple()                   # its XACK
    assert pending(r) == 0
    a._dead_letter_script = write    # task 0 reaches Redis again
    clock.advance(2 * IDLE_MS / 1000)
    a.next_tuple()
    a.next_tuple()
    assert r.xlen(f"{STREAM}:dead") == 0 and pending(r) == 0
    assert a.dead_letter_counts.total == 0 and b.dead_letter_counts.total == 0
    assert a.component_statistics() == {} and b.component_statistics() == {}
    a.close()
    b.close()

