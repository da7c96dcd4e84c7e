"""A store that is down fails every record without charging it: its replays must still back off.

The failures a record did not cause (a sink's store down, a rollback, a lost worker, a timeout)
are not charged to its retry budget, and each replay used to wait the delay of its last charged
failure, ``initial_delay`` (0 s by default) for a record never charged: while a sink's store was
down, every record in flight went emit, fail, replay in a loop as fast as the spout ran, for the
whole outage. Here each retrying spout (Redis Streams, file, Kafka, followed Parquet directory),
with ``max_retries`` 1 and the default backoff on a simulated clock, feeds records to a "bolt"
(this test) that fails every tuple as ``"unavailable"`` for 2 s, then acks every tuple. Each
record is counted: how often it went out during the outage (no more than the backoff's delays
allow: a handful, not one per turn of the spout), then acked exactly once, none dead-lettered.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from squall._failure import UNAVAILABLE, FailureCause
from squall.engine.clock import SimulatedClock
from squall.external.retry import RetryBackoff, RetrySchedule

from .conftest import redis_server  # noqa: F401 - the real redis-server fixture

DOWN = FailureCause(UNAVAILABLE, "sink", 2, "ConnectionError", "redis://127.0.0.1:1: connection refused")
N = 5            # records
OUTAGE = 2.0     # seconds the store is down, on the spout's clock
STEP = 0.001     # the clock's advance per turn of the spout during the outage
AFTER = 0.01     # and after it, until every record is acked (longer than any backoff's max_delay)


class Context:
    """The part of a TopologyContext the spouts' ``open`` reads: task 0 of 1."""

    def get_storm_id(self):
        return "t-1"

    def get_this_component_id(self):
        return "events"

    def get_this_task_index(self):
        return 0

    def get_component_tasks(self, _):
        return [0]


class Collector:
    """Keeps what a spout emits, (record's key, message id); the key is the first value, or
    the message id with ``by_id``. An error the spout reports fails the test."""

    def __init__(self, by_id: bool = False) -> None:
        self.by_id = by_id
        self.emitted: list[tuple[object, object]] = []
        self.woken = threading.Event()

    def emit(self, values, msg_id=None, stream="default"):
        self.emitted.append((msg_id if self.by_id else values[0], msg_id))

    def wake(self):
        self.woken.set()

    def report_error(self, error):
        raise AssertionError(error)


def emits_the_backoff_allows(backoff: RetryBackoff, outage: float) -> int:
    """How often a record failed at once each time goes out within ``outage``: its first emit
    at 0, its n-th replay ``delay(1) + ... + delay(n)`` later."""
    t, n = 0.0, 0
    while t < outage:
        n += 1
        t += backoff.delay(n)
    return n


def through_outage(spout, out: Collector, clock: SimulatedClock, keys: list) -> tuple[Counter, Counter]:
    """Emits every record once, fails every tuple as ``DOWN`` for ``OUTAGE`` seconds, then acks
    every tuple until each record was acked. Returns per record the emits during the outage
    and the acks after it."""
    deadline = threading.Event()
    timer = threading.Timer(60, deadline.set)   # real time: a spout that stops emitting fails the test
    timer.start()
    try:
        while {k for k, _ in out.emitted} != set(keys):   # the Redis spout reads on a thread of its own
            assert not deadline.is_set(), f"only {out.emitted} of {keys} were emitted"
            out.woken.clear()
            spout.next_tuple()
            out.woken.wait(0.05)
        during: Counter = Counter()
        seen = 0
        end = clock.now() + OUTAGE
        while clock.now() < end:
            for key, msg_id in out.emitted[seen:]:
                during[key] += 1
                spout.fail_with(msg_id, DOWN)
            seen = len(out.emitted)
            clock.advance(STEP)
            spout.next_tuple()
        acked: Counter = Counter()
        while sum(acked.values()) < len(keys):
            assert not deadline.is_set(), f"acked {dict(acked)} of {keys}"
            for key, msg_id in out.emitted[seen:]:
                acked[key] += 1
                spout.ack(msg_id)
            seen = len(out.emitted)
            clock.advance(AFTER)
            spout.next_tuple()
        for _ in range(100):   # and nothing comes again after its ack
            clock.advance(AFTER)
            spout.next_tuple()
        assert out.emitted[seen:] == []
    finally:
        timer.cancel()
    return during, acked


def check(during: Counter, acked: Counter, keys: list, backoff: RetryBackoff) -> None:
    allowed = emits_the_backoff_allows(backoff, OUTAGE)
    assert allowed == 10   # 0, 0, 4 ms, 8 ms, ..., 1.024 s: the default backoff's delays within 2 s
    # each replay waits for its turn of the spout, up to a STEP late: at most one fewer emit
    assert all(allowed - 1 <= during[k] <= allowed for k in keys), \
        f"emits per record during the {OUTAGE} s outage: {dict(during)}, the backoff allows {allowed}"
    assert acked == Counter(keys), f"acks per record after the outage: {dict(acked)}"


def test_schedule_backs_off_uncharged_failures_on_their_own_count_and_forgets_it_at_done():
    s: RetrySchedule[str] = RetrySchedule(RetryBackoff(initial_delay=0.0, delay_period=1.0, max_retries=1,
                                                       max_delay=5.0))

    def due(m: str) -> float:
        """When ``m`` is due: the earliest whole or half second it is ready at."""
        return next(t / 2 for t in range(200) if s.is_ready(m, t / 2))

    delays = []
    for _ in range(5):   # uncharged: 0, 2, 4, 5 (capped), 5 s later; never given up
        s.reschedule("a", 0, now=0.0)
        delays.append(due("a"))
    assert delays == [0.0, 2.0, 4.0, 5.0, 5.0]
    s.remove("a")          # emitted again: its count stays
    s.reschedule("a", 0, now=10.0)
    assert due("a") == 15.0
    s.done("a")            # acked: the next failure backs off from the start
    s.reschedule("a", 0, now=20.0)
    assert due("a") == 20.0
    assert s.schedule("a", 1, now=30.0) and due("a") == 30.0   # the charged count goes its own way
    assert not s.schedule("a", 2, now=30.0) and not s.is_scheduled("a")   # and alone decides giving up
    s.reschedule("a", 0, now=40.0)
    assert due("a") == 40.0   # given up is gone: its uncharged failures forgotten too
    s.reschedule("b", 3, now=0.0)
    assert due("b") == 4.0    # a record charged more waits at least its charged failure's delay
    s.keep_only(lambda m: m != "b")
    s.reschedule("b", 0, now=0.0)
    assert due("b") == 0.0    # no longer this spout's: forgotten with its schedule


def test_file_spout_backs_off_replays_while_the_sink_is_down(tmp_path: Path):
    from squall.external.files import FileSpout

    src = tmp_path / "in"
    src.mkdir()
    keys = [f"line-{i}" for i in range(N)]
    (src / "a.txt").write_text("".join(k + "\n" for k in keys))
    clock = SimulatedClock()
    spout = FileSpout(src, quiet_secs=0, max_retries=1, commit_every=1, poll_secs=0, progress_dir=tmp_path / "local",
                      dead_letter_dir=tmp_path / "dead", clock=clock)
    out = Collector()
    spout.open({}, Context(), out)
    check(*through_outage(spout, out, clock, keys), keys, spout.backoff)
    spout.close()
    dead = tmp_path / "dead"
    assert not dead.exists() or all(p.stat().st_size == 0 for p in dead.rglob("*") if p.is_file())


def test_followed_parquet_spout_backs_off_replays_while_the_sink_is_down(tmp_path: Path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from squall.external.follow import ParquetDirectorySpout

    src = tmp_path / "in"
    src.mkdir()
    keys = [f"e-{i}" for i in range(N)]
    pq.write_table(pa.table({"event": keys}), src / "part-0.parquet")
    clock = SimulatedClock()
    spout = ParquetDirectorySpout(src, ["event"], require_success=False, max_retries=1, commit_every=1,
                                  poll_secs=0, progress_dir=tmp_path / "local", dead_letter_dir=tmp_path / "dead",
                                  clock=clock)
    out = Collector()
    spout.open({}, Context(), out)
    check(*through_outage(spout, out, clock, keys), keys, spout.backoff)
    spout.close()
    dead = tmp_path / "dead"
    assert not dead.exists() or all(p.stat().st_size == 0 for p in dead.rglob("*") if p.is_file())


def test_kafka_spout_backs_off_replays_while_the_sink_is_down():
    from squall.external.kafka import KafkaSpout, KafkaSpoutConfig

    from .test_kafka import TP, MemoryConsumer

    keys = [f"r-{i}" for i in range(N)]
    dead: list = []
    backoff = RetryBackoff(max_retries=1)
    config = KafkaSpoutConfig("mem:0", ["t"], "g", consumer_factory=lambda props: MemoryConsumer({TP: keys}),
                              translator=lambda r: [r.value], output_fields=["value"], retry=backoff,
                              dead_letter=lambda r, why: dead.append((r.offset, why)))
    clock = SimulatedClock()
    spout = KafkaSpout(config, clock)
    out = Collector()
    spout.open({}, Context(), out)
    check(*through_outage(spout, out, clock, keys), keys, backoff)
    spout.close()
    assert dead == []


def test_redis_stream_spout_backs_off_replays_while_the_sink_is_down(redis_server):  # noqa: F811
    from squall.external.redis_streams import RedisStreamSpout

    r = redis_server.client()
    keys = [r.xadd("events", {"value": f"v{i}"}) for i in range(N)]
    clock = SimulatedClock()
    spout = RedisStreamSpout(redis_server.url, "events", "g", backoff=RetryBackoff(max_retries=1), clock=clock)
    out = Collector(by_id=True)
    spout.open({}, Context(), out)
    try:
        check(*through_outage(spout, out, clock, keys), keys, spout.backoff)
    finally:
        spout.close()
    assert r.xlen("events:dead") == 0 and r.xpending("events", "g")["pending"] == 0
