"""A bolt raising on one malformed record among many, with the default settings: every good
record is processed (each counted once), only the record that raised ends in the dead-letter
place, which names the component, the exception type and its message; and a retry budget counts
only the failures a record caused, never a lost worker or a timeout. For the Redis Streams, file
and Kafka spouts (issue 33, item 2)."""

from __future__ import annotations

import json
import os
import threading

import pytest

from squall import BasicBolt, Bolt, Fields, FailureCause, LocalCluster, TopologyBuilder
from squall._failure import EXCEPTION, EXPLICIT, TIMEOUT, WORKER_LOST
from squall.engine.clock import SimulatedClock
from squall.external.files import FileSpout, GiveUp, RetryBook
from squall.external.kafka import KafkaSpoutConfig, KafkaSpout, RetryBackoff
from squall.testing._registry import SharedLog

from ..conftest import wait_until
from .test_kafka import TP, MemoryConsumer, open_spout

LOST, TIMED_OUT = FailureCause(WORKER_LOST), FailureCause(TIMEOUT)
RAISED = FailureCause(EXCEPTION, "parse", 3, "ValueError", "bad record")
MALFORMED = "{not json"


def decode_error(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return str(e)
    raise AssertionError(f"{text!r} parses")


def check_cause(cause: dict) -> None:
    """The dead letter's cause: the parse bolt raised JSONDecodeError with its message."""
    assert cause["kind"] == EXCEPTION and cause["component"] == "parse" and cause["task"] >= 0
    assert cause["error"] == "JSONDecodeError" and cause["message"] == decode_error(MALFORMED)


# --- the budgets, each spout's own ---------------------------------------------------------------


def test_the_file_spouts_retry_book_charges_only_failures_the_record_caused():
    book = RetryBook(RetryBackoff(max_retries=1))
    book.add(0, ["x"])
    now = 0.0
    for cause in [LOST, TIMED_OUT] * 5:  # any number of lost workers and timeouts: retried, not charged
        # (each after a growing delay, 10 s at most: test_outage_backoff.py)
        assert book.fail(0, cause, now=now) is None and book.next_retry(now + 10) == (0, ["x"])
        now += 10
    assert book.fail(0, RAISED, now=now) is None and book.next_retry(now + 10) == (0, ["x"])  # the first that counts
    assert book.fail(0, LOST, now=now) is None and book.next_retry(now + 10) == (0, ["x"])
    assert book.fail(0, RAISED, now=now) == GiveUp(["x"], 2, RAISED)  # max_retries 1: the second gives up
    assert 0 not in book


def test_the_kafka_spout_charges_only_failures_the_record_caused():
    dead = []
    spout, col, clock = open_spout(MemoryConsumer({TP: ["a", "b"]}),
                                   retry=RetryBackoff(initial_delay=1.0, delay_period=1.0, max_retries=1, max_delay=1.0),
                                   dead_letter=lambda r, why: dead.append((r.offset, why)))

    def emitted_a():
        spout.next_tuple(), spout.next_tuple()
        return [m for v, m in col.emitted if v == ["a"]]
    [a] = emitted_a()
    # a record failed as a lost worker goes out again alone (AloneGate): b, in flight beside it, is done
    spout.ack(next(m for v, m in col.emitted if v == ["b"]))
    for i, cause in enumerate([LOST, TIMED_OUT, LOST, RAISED, TIMED_OUT]):
        spout.fail_with(a, cause)
        clock.advance(1.0)
        ids = emitted_a()
        assert len(ids) == i + 2 and not dead  # replayed every time, never given up
        a = ids[-1]
    spout.fail_with(a, RAISED)  # the second failure the record caused: past max_retries 1
    assert dead == [(0, "failed 2 times (max_retries 1); last: exception in [parse] task 3: ValueError: bad record")]


def test_the_redis_spout_charges_only_failures_the_entry_caused(redis_server):
    from squall.external.redis_streams import ExponentialBackoff, RedisStreamSpout

    r = redis_server.client()
    entry = r.xadd("events", {"value": "v"})
    clock = SimulatedClock()
    spout = RedisStreamSpout(redis_server.url, "events", "g", backoff=ExponentialBackoff(max_retries=1), clock=clock)
    emitted = []
    collector = _Collector(emitted)
    spout.open({}, _Context(), collector)
    while not emitted:   # the spout's reading thread reads the entry and wakes the "loop"
        collector.woken.clear()
        spout.next_tuple()
        assert emitted or collector.woken.wait(10), "the spout's read never came back"
    assert emitted == [entry]
    for cause in [LOST, TIMED_OUT, RAISED, LOST]:
        spout.fail_with(entry, cause)
        clock.advance(20)  # past any backoff
        spout.next_tuple()
        assert r.xlen("events:dead") == 0
    assert emitted == [entry] * 5
    spout.fail_with(entry, RAISED)
    [(_, dead)] = r.xrange("events:dead")
    assert dead["id"] == entry and dead["error"].startswith("failed 2 times (max_retries 1); last: exception in [parse]")
    assert FailureCause(**json.loads(dead["cause"])) == RAISED
    assert r.xpending("events", "g")["pending"] == 0


class _Context:
    def get_this_component_id(self):
        return "spout"

    def get_this_task_index(self):
        return 0


class _Collector:
    def __init__(self, emitted):
        self.emitted = emitted
        self.woken = threading.Event()

    def wake(self):
        self.woken.set()

    def emit(self, values, msg_id=None, stream="default"):
        self.emitted.append(msg_id)

    def report_error(self, error):
        raise AssertionError(error)


# --- on LocalCluster: one malformed record among many ------------------------------------------


class Parse(BasicBolt):
    """``json.loads`` of the record's field: JSONDecodeError on the malformed one (the user's
    bolt of the report, which crash-looped its worker with Storm's fail-fast)."""

    def __init__(self, field: str) -> None:
        self.field = field

    def execute(self, tup, collector):
        collector.emit([json.loads(tup[self.field])["n"]])

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))


class Count(Bolt):
    """Appends each record's number to ``log``, then acks."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def execute(self, tup):
        self.log.append(tup[0])
        self.collector.ack(tup)


def pipeline(spout, log: SharedLog, field: str) -> object:
    b = TopologyBuilder()
    b.set_spout("source", spout, 2)
    b.set_bolt("parse", Parse(field), 2).shuffle_grouping("source")
    b.set_bolt("count", Count(log), 2).shuffle_grouping("parse")
    return b.create_topology()


N = 1200
BAD_AT = 600
# no replay but the failures of the malformed record: a message timeout would be a bug here
CONF = {"topology.message.timeout.secs": 300}


def payloads() -> list[str]:
    return [MALFORMED if i == BAD_AT else json.dumps({"n": i}) for i in range(N)]


def good() -> list[int]:
    return [i for i in range(N) if i != BAD_AT]


def spout_failed(cluster) -> int:
    return cluster.get_topology_page("t")["spouts"][0]["failed"]


def test_redis_stream_one_malformed_entry_among_1200_is_the_only_dead_letter(redis_server):
    from squall.external.redis_streams import ExponentialBackoff, RedisStreamSpout

    r = redis_server.client()
    ids = [r.xadd("events", {"payload": p}) for p in payloads()]
    log = SharedLog()
    spout = RedisStreamSpout(redis_server.url, "events", "g", ["payload"], batch_size=50,
                             backoff=ExponentialBackoff(initial_delay=0.01, max_delay=0.05, max_retries=3))
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, pipeline(spout, log, "payload"))
        assert wait_until(lambda: r.xlen("events:dead") == 1 and len(log.items()) == N - 1
                          and r.xpending("events", "g")["pending"] == 0, 60), (len(log.items()), r.xlen("events:dead"))
        assert spout_failed(cluster) == 4  # the first try and max_retries 3 retries; nothing else failed
    assert sorted(log.items()) == good()  # every good entry processed, each once
    [(_, dead)] = r.xrange("events:dead")
    assert dead["id"] == ids[BAD_AT] and json.loads(dead["fields"]) == {"payload": MALFORMED}
    assert dead["error"].startswith("failed 4 times (max_retries 3); last: exception in [parse] task ")
    assert "JSONDecodeError: " + decode_error(MALFORMED) in dead["error"]
    check_cause(json.loads(dead["cause"]))


def test_file_spout_one_malformed_line_among_1200_is_the_only_dead_letter(tmp_path):
    src, dead_dir = tmp_path / "in", tmp_path / "dead"
    src.mkdir()
    text = "".join(f"{p}\n" for p in payloads())
    (src / "a.txt").write_text(text)
    log = SharedLog()
    spout = FileSpout(src, quiet_secs=0, commit_every=50, poll_secs=0.05, progress_dir=tmp_path / "local",
                      dead_letter_dir=dead_dir, max_retries=3)
    with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
        cluster.submit_topology("t", CONF, pipeline(spout, log, "line"))
        assert wait_until(lambda: (src / "a.txt.done").exists(), 60), sorted(os.listdir(src))
        assert wait_until(lambda: len(log.items()) == N - 1)
        assert spout_failed(cluster) == 4
    assert sorted(log.items()) == good()
    [line] = (dead_dir / "a.txt.dead").read_text().splitlines()
    entry = json.loads(line)
    assert entry["file"] == "a.txt" and entry["offset"] == text.index(MALFORMED)
    assert json.loads(entry["record"]) == [MALFORMED]
    assert entry["reason"].startswith("failed 4 times; last: exception in [parse] task ")
    check_cause(entry["cause"])


class DeadLetters:
    """A KafkaSpoutConfig.dead_letter that logs ``(offset, reason)`` (picklable)."""

    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def __call__(self, record, reason):
        self.log.append((record.partition, record.offset, reason))


def test_kafka_one_malformed_record_among_1200_is_the_only_dead_letter():
    ck = pytest.importorskip("confluent_kafka")
    producer = ck.Producer({"test.mock.num.brokers": 1, "log_level": 0})  # owns the mock broker
    broker = next(iter(producer.list_topics(timeout=10).brokers.values()))
    bootstrap = f"{broker.host}:{broker.port}"
    for i, p in enumerate(payloads()):
        producer.produce("events", value=p.encode(), partition=i % 4)
    assert producer.flush(10) == 0
    log, dead = SharedLog(), SharedLog()
    config = KafkaSpoutConfig(bootstrap, ["events"], "squall-budget", offset_commit_period_ms=100,
                              retry=RetryBackoff(initial_delay=0.01, delay_period=0.01, max_retries=3, max_delay=0.05),
                              poll_timeout_ms=50, translator=lambda r: [r.value.decode()], output_fields=["value"],
                              props={"log_level": 0}, dead_letter=DeadLetters(dead))
    reader = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "squall-budget", "log_level": 0})
    parts = [ck.TopicPartition("events", p) for p in range(4)]

    def committed():
        return sum(max(tp.offset, 0) for tp in reader.committed(parts, timeout=5))

    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, pipeline(KafkaSpout(config), log, "value"))
        assert wait_until(lambda: committed() == N and len(dead.items()) == 1, 60), (committed(), dead.items())
        assert wait_until(lambda: len(log.items()) == N - 1)
        assert spout_failed(cluster) == 4
    reader.close()
    assert sorted(log.items()) == good()
    [(partition, offset, reason)] = dead.items()
    assert (partition, offset) == (BAD_AT % 4, BAD_AT // 4)
    assert reason.startswith("failed 4 times (max_retries 3); last: exception in [parse] task ")
    assert reason.endswith("JSONDecodeError: " + decode_error(MALFORMED))


def test_a_plain_fail_still_counts_against_the_budget():
    """A caller of the Storm-era ``fail(msg_id)`` (no cause): charged, as before."""
    book = RetryBook(RetryBackoff(max_retries=0))
    book.add(0, ["x"])
    assert book.fail(0, now=0.0) == GiveUp(["x"], 1, FailureCause(EXPLICIT))
