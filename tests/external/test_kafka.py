"""squall.external.kafka: the offset manager, retry service, assignment, first-poll strategies and
the spout driven by an in-memory consumer on a simulated clock (test_kafka_broker.py runs it with
the real consumer against a Kafka-protocol broker)."""

from __future__ import annotations

import json
import logging

import pytest

from squall.engine.clock import SimulatedClock
from squall.external.kafka import (
    Committed,
    KafkaSpout,
    KafkaSpoutConfig,
    KafkaUnavailable,
    MessageId,
    OffsetManager,
    PartitionListing,
    Record,
    RetryBackoff,
    RetryService,
    TopicPartition,
    first_poll_offset,
    is_pollable,
    round_robin_assignment,
)
from squall.external.kafka import (
    FirstPollOffsetStrategy as S,
)
from squall.external.kafka import (
    ProcessingGuarantee as G,
)

TP = TopicPartition("t", 0)


# --- OffsetManager ----------------------------------------------------------------------------


def manager(emitted, acked, start=0):
    om = OffsetManager(TP, start)
    for o in emitted:
        om.add_to_emitted(o)
    for o in acked:
        om.add_to_acked(o)
    return om


def test_offset_manager_no_acks_nothing_to_commit():
    assert manager([0, 1], []).next_commit_offset() is None


def test_offset_manager_contiguous_prefix_in_any_ack_order():
    assert manager([0], [0]).next_commit_offset() == 1
    assert manager([0, 1], [1, 0]).next_commit_offset() == 2


def test_offset_manager_stops_at_emitted_unacked_hole():
    assert manager([0, 1, 2], [0, 2]).next_commit_offset() == 1
    assert manager([0, 1, 2], [1, 2]).next_commit_offset() is None


def test_offset_manager_skips_never_emitted_holes():
    # 1 was compacted away: never emitted, so the run goes on through 2
    assert manager([0, 2], [0, 2]).next_commit_offset() == 3
    # a gap before the first acked run (committed at 0, first record at 5)
    assert manager([5, 6], [5, 6]).next_commit_offset() == 7
    # a gap inside: 3 was never emitted, but 4 was and is not acked
    assert manager([0, 2, 4, 5], [0, 2, 5]).next_commit_offset() == 3


def test_offset_manager_commit_prunes_and_counts_uncommitted():
    om = manager([0, 1, 2, 3], [0, 1, 3])
    assert om.num_uncommitted_offsets() == 4
    assert om.nth_uncommitted_offset(3) == 2
    om.commit(om.next_commit_offset())
    assert om.committed_offset == 2 and om.has_committed
    assert om.num_uncommitted_offsets() == 2 and om.nth_uncommitted_offset(1) == 2
    assert om.next_commit_offset() is None
    om.add_to_acked(1)  # an ack below the committed offset commits nothing
    assert om.next_commit_offset() is None
    om.add_to_acked(2)
    assert om.next_commit_offset() == 4


# --- RetryService -----------------------------------------------------------------------------


def test_backoff_schedule_doubles_and_is_capped():
    b = RetryBackoff(initial_delay=1.0, delay_period=0.5, max_retries=10, max_delay=3.0)
    assert [b.delay(n) for n in (1, 2, 3, 4)] == [1.0, 1.0, 2.0, 3.0]


def test_retry_service_ready_earliest_and_retain():
    clock = SimulatedClock()
    rs = RetryService(RetryBackoff(initial_delay=1.0, delay_period=1.0, max_retries=2, max_delay=10), clock)
    a, b, c = MessageId("t", 0, 5), MessageId("t", 0, 3), MessageId("t", 1, 9)
    assert rs.schedule(a, 1) and rs.schedule(b, 2) and rs.schedule(c, 1)
    assert rs.is_scheduled(a) and not rs.is_ready(a) and rs.ready_message_count() == 0
    clock.advance(1.0)
    assert rs.earliest_retriable_offsets() == {TP: 5, TopicPartition("t", 1): 9}
    clock.advance(1.0)
    assert rs.earliest_retriable_offsets()[TP] == 3 and rs.ready_message_count() == 3
    rs.retain_all([TP])
    assert not rs.is_scheduled(c)
    assert rs.remove(a) and not rs.is_scheduled(a)
    assert not rs.schedule(a, 3)  # past max_retries
    assert not rs.is_scheduled(a)


def test_retry_zero_max_retries_never_schedules():
    rs = RetryService(RetryBackoff(max_retries=0), SimulatedClock())
    assert not rs.schedule(MessageId("t", 0, 0), 1)


# --- assignment, first poll, pollable ---------------------------------------------------------


def test_round_robin_assignment_over_sorted_partitions():
    parts = [TopicPartition(t, p) for t in ("b", "a") for p in (2, 0, 1)]
    assert round_robin_assignment(parts, 0, 2) == [("a", 0), ("a", 2), ("b", 1)]
    assert round_robin_assignment(parts, 1, 2) == [("a", 1), ("b", 0), ("b", 2)]
    assert round_robin_assignment(parts, 3, 4) == [("b", 0)]
    with pytest.raises(ValueError, match="task index 2"):
        round_robin_assignment(parts, 2, 2)


OURS = Committed(7, json.dumps({"topologyId": "topo-1", "taskId": 0}))
THEIRS = Committed(7, json.dumps({"topologyId": "topo-0", "taskId": 0}))


@pytest.mark.parametrize("strategy,committed,expected", [
    (S.EARLIEST, None, 2), (S.LATEST, None, 20),
    (S.UNCOMMITTED_EARLIEST, None, 2), (S.UNCOMMITTED_LATEST, None, 20),
    # a commit by another topology: EARLIEST/LATEST restart, UNCOMMITTED_* resume
    (S.EARLIEST, THEIRS, 2), (S.LATEST, THEIRS, 20),
    (S.UNCOMMITTED_EARLIEST, THEIRS, 7), (S.UNCOMMITTED_LATEST, THEIRS, 7),
    # a commit by this topology (restart, rebalance): always resumed
    (S.EARLIEST, OURS, 7), (S.LATEST, OURS, 7), (S.UNCOMMITTED_LATEST, OURS, 7),
    (S.EARLIEST, Committed(7, "not json"), 2),
    # JSON nested deeper than Python's recursion limit, within Kafka's 4096 bytes of metadata: another
    # tool's commit, not ours (it raised RecursionError out of the spout's assignment, at every restart)
    (S.EARLIEST, Committed(7, "[" * 2000 + "]" * 2000), 2), (S.UNCOMMITTED_EARLIEST, Committed(7, "[" * 2000), 7),
])
def test_first_poll_offset(strategy, committed, expected):
    assert first_poll_offset(strategy, committed, "topo-1", 2, 20) == expected


def test_first_poll_offset_committed_by_this_task():
    assert first_poll_offset(S.EARLIEST, THEIRS, "topo-1", 2, 20, committed_by_this_task=True) == 7


def test_pollable_under_limit_or_for_a_retry_inside_it():
    om = manager([0, 1, 2, 3], [])
    assert is_pollable(om, 5, None)
    assert not is_pollable(om, 4, None)
    assert is_pollable(om, 2, 1)        # retry at 1 <= the 2nd uncommitted offset (1)
    assert not is_pollable(om, 2, 3)    # retry at 3 beyond the limit


# --- the spout over an in-memory consumer -----------------------------------------------------


class MemoryConsumer:
    """A `Consumer` over lists of values per partition; commits are kept in ``commits``
    (shared with other consumers of the same group if passed in)."""

    def __init__(self, logs, commits=None, down=False):
        self.logs = logs                 # {TopicPartition: [value, ...]}
        self.commits = {} if commits is None else commits
        self.positions = {}
        self.commit_calls = []
        self.down = down
        self.closed = False
        self.metadata_down = False   # only the metadata request fails
        self.topic_errors = {}       # topic -> the error its metadata comes back with
        self.failing_commits = 0     # how many of the next commits fail
        self.assign_calls = []

    def _check(self):
        if self.down:
            raise KafkaUnavailable("connection refused")

    def partitions_for(self, topics):
        self._check()
        if self.metadata_down:
            raise KafkaUnavailable("metadata: Local: Timed out")
        return PartitionListing([tp for tp in self.logs if tp.topic in topics and tp.topic not in self.topic_errors],
                                {t: e for t, e in self.topic_errors.items() if t in topics})

    def assign(self, added, revoked):
        self.assign_calls.append((dict(added), list(revoked)))
        for tp in revoked:
            self.positions.pop(tp)
        self.positions.update(added)

    def committed(self, tps):
        return {tp: self.commits.get(tp) for tp in tps}

    def watermarks(self, tp):
        return 0, len(self.logs[tp])

    def seek(self, tp, offset):
        self.positions[tp] = offset

    def position(self, tp):
        return self.positions.get(tp)

    def poll(self, timeout, paused):
        self._check()
        out = []
        for tp, pos in list(self.positions.items()):
            if tp in paused:
                continue
            log = self.logs[tp]
            for off in range(pos, min(len(log), pos + 3)):  # max.poll.records 3 per partition
                if log[off] is not None:  # None: compacted away
                    out.append(Record(tp.topic, tp.partition, off, None, log[off]))
            self.positions[tp] = min(len(log), pos + 3)
        return out

    def commit(self, offsets, metadata):
        self._check()
        if self.failing_commits:
            self.failing_commits -= 1
            raise KafkaUnavailable("commit: Broker: Request timed out")
        self.commit_calls.append(dict(offsets))
        for tp, off in offsets.items():
            self.commits[tp] = Committed(off, metadata[tp])

    def close(self):
        self.closed = True


class Collector:
    def __init__(self):
        self.emitted = []

    def emit(self, values, stream="default", msg_id=None):
        self.emitted.append((values, msg_id))


class Context:
    def __init__(self, storm_id="topo-1", index=0, tasks=1):
        self.storm_id, self.index, self.tasks = storm_id, index, tasks

    def get_storm_id(self):
        return self.storm_id

    def get_this_task_index(self):
        return self.index

    def get_this_component_id(self):
        return "kafka"

    def get_component_tasks(self, component):
        return list(range(self.tasks))


def open_spout(consumer, clock=None, context=None, topics=("t",), **cfg):
    cfg.setdefault("offset_commit_period_ms", 1000)
    cfg.setdefault("translator", lambda r: [r.value])
    cfg.setdefault("output_fields", ["value"])
    config = KafkaSpoutConfig("mem:0", list(topics), "g", consumer_factory=lambda props: consumer, **cfg)
    clock = clock or SimulatedClock()
    spout = KafkaSpout(config, clock)
    collector = Collector()
    spout.open({}, context or Context(), collector)
    return spout, collector, clock


def run(spout, n):
    for _ in range(n):
        spout.next_tuple()


def values(collector):
    return [v[0] for v, _ in collector.emitted]


def test_spout_emits_one_tuple_per_next_tuple():
    c = MemoryConsumer({TP: list("abcde")})
    spout, col, _ = open_spout(c)
    spout.next_tuple()
    assert values(col) == ["a"]
    run(spout, 10)
    assert values(col) == list("abcde")
    assert col.emitted[0][1] == MessageId("t", 0, 0)


def test_spout_commits_only_contiguous_acked_prefix():
    c = MemoryConsumer({TP: list("abcde")})
    spout, col, clock = open_spout(c)
    run(spout, 6)
    ids = [m for _, m in col.emitted]
    for i in (0, 1, 3, 4):
        spout.ack(ids[i])
    clock.advance(1.0)
    spout.next_tuple()
    assert c.commits[TP].offset == 2
    assert json.loads(c.commits[TP].metadata)["topologyId"] == "topo-1"
    spout.ack(ids[2])
    clock.advance(1.0)
    spout.next_tuple()
    assert c.commits[TP].offset == 5


def test_spout_replays_failed_record_at_least_once_in_order():
    c = MemoryConsumer({TP: list("abcdef")})
    spout, col, clock = open_spout(c, retry=RetryBackoff(initial_delay=1.0, max_delay=1.0))
    run(spout, 4)
    ids = {v[0]: m for v, m in col.emitted}
    spout.ack(ids["a"]), spout.fail(ids["b"]), spout.ack(ids["c"])
    run(spout, 5)
    assert values(col).count("b") == 1  # not due yet
    clock.advance(1.0)
    run(spout, 5)
    assert values(col).count("b") == 2
    # the re-poll after the seek back to b does not re-emit c (acked) or d (in flight)
    assert values(col).count("c") == 1 and values(col).count("d") == 1
    for v, m in col.emitted:
        spout.ack(m)
    clock.advance(1.0)
    run(spout, 3)
    assert c.commits[TP].offset == 6


def test_spout_past_max_retries_dead_letters_and_commits():
    c = MemoryConsumer({TP: list("ab")})
    dead = []
    spout, col, clock = open_spout(c, retry=RetryBackoff(max_retries=0),
                                   dead_letter=lambda r, why: dead.append((r.offset, why)))
    run(spout, 3)
    ids = [m for _, m in col.emitted]
    spout.fail(ids[0]), spout.ack(ids[1])
    assert dead == [(0, "failed 1 times (max_retries 0)")]
    clock.advance(1.0)
    run(spout, 3)
    assert values(col) == ["a", "b"] and c.commits[TP].offset == 2


def test_a_record_failed_again_and_again_without_a_retry_limit_is_warned_about(caplog):
    """Storm's default retries a record for ever: a parse bolt that raises on a malformed record
    kept it failing, and the partition's commits behind it, without a word. Now its 10th failure
    (and each power of ten) says so, naming the record and what to set."""
    from squall._failure import FailureCause
    c = MemoryConsumer({TP: list("ab")})
    spout, col, clock = open_spout(c, retry=RetryBackoff(initial_delay=0.0, delay_period=0.0, max_delay=0.0))
    cause = FailureCause.of_reason("parse", 3, "exception in [parse] task 3: JSONDecodeError")
    with caplog.at_level(logging.WARNING, "squall.external.kafka"):
        for _ in range(100):
            run(spout, 2)
            spout.fail_with([m for v, m in col.emitted if v[0] == "a"][-1], cause)
    said = [r.getMessage() for r in caplog.records if "retried for ever" in r.getMessage()]
    assert len(said) == 2 and "failed 10 times" in said[0] and "failed 100 times" in said[1]
    assert f"topic {TP.topic!r} partition {TP.partition} offset 0" in said[0]
    assert "JSONDecodeError" in said[0] and "set max_retries" in said[0]


def test_spout_respects_max_uncommitted_offsets():
    c = MemoryConsumer({TP: list(range(20))})
    spout, col, clock = open_spout(c, max_uncommitted_offsets=4)
    run(spout, 30)
    # the poll that reached the limit may overshoot by max.poll.records - 1 (3 per poll here)
    assert 4 <= len(col.emitted) <= 6
    n = len(col.emitted)
    for _, m in col.emitted:
        spout.ack(m)
    clock.advance(1.0)
    run(spout, 30)
    assert len(col.emitted) > n  # the commit freed room


def test_spout_at_most_once_commits_before_emitting_and_never_replays():
    c = MemoryConsumer({TP: list("abc")})
    spout, col, _ = open_spout(c, processing_guarantee=G.AT_MOST_ONCE)
    spout.next_tuple()
    assert c.commits[TP].offset == 3 and values(col) == ["a"]
    assert col.emitted[0][1] is None
    run(spout, 5)
    spout.fail(MessageId("t", 0, 0))
    run(spout, 5)
    assert values(col) == list("abc")


def test_spout_at_most_once_a_failed_commit_polls_the_records_again_and_emits_them_once():
    # the commit before emit failed after the poll had moved past the records: they were
    # skipped, never emitted (Storm: commitSync throws, the worker re-polls from the last commit)
    c = MemoryConsumer({TP: list("abcdef")})
    c.failing_commits = 1
    spout, col, clock = open_spout(c, processing_guarantee=G.AT_MOST_ONCE, down_retry_secs=1.0)
    run(spout, 3)
    assert values(col) == [] and c.positions[TP] == 0  # nothing emitted, sought back
    clock.advance(1.0)
    run(spout, 10)
    assert values(col) == list("abcdef")
    assert [call[TP] for call in c.commit_calls] == [3, 6]


def test_spout_no_guarantee_commits_polled_positions_on_timer():
    c = MemoryConsumer({TP: list("abc")})
    spout, col, clock = open_spout(c, processing_guarantee=G.NO_GUARANTEE)
    spout.next_tuple()
    assert TP not in c.commits
    clock.advance(1.0)
    spout.next_tuple()
    assert c.commits[TP].offset == 3


def test_spout_skips_compacted_offsets_and_commits_past_them():
    c = MemoryConsumer({TP: ["a", None, "c"]})
    spout, col, clock = open_spout(c)
    run(spout, 3)
    for _, m in col.emitted:
        spout.ack(m)
    clock.advance(1.0)
    spout.next_tuple()
    assert values(col) == ["a", "c"] and c.commits[TP].offset == 3


def test_spout_translator_raising_any_error_dead_letters_the_record_not_the_worker():
    def translator(r):
        return [json.loads(r.value)["n"]]  # KeyError / JSONDecodeError on a poison record

    dead = []
    c = MemoryConsumer({TP: ['{"n": 1}', '{"m": 2}', '{"n": 3}']})
    spout, col, clock = open_spout(c, translator=translator,
                                   dead_letter=lambda r, why: dead.append((r.topic, r.offset, why)))
    run(spout, 4)
    assert values(col) == [1, 3]
    assert dead == [("t", 1, "malformed record: translator raised KeyError: 'n'")]
    for _, m in col.emitted:
        spout.ack(m)
    clock.advance(1.0)
    spout.next_tuple()
    assert c.commits[TP].offset == 3


@pytest.mark.parametrize("guarantee", [G.AT_LEAST_ONCE, G.AT_MOST_ONCE])
def test_spout_emit_null_tuples_emits_a_none_translation_as_a_tuple_of_nulls(guarantee):
    # it used to call emit(None), whose len() raised in next_tuple and crashed the worker
    c = MemoryConsumer({TP: ["a", "skip", "b", "skip"]})
    spout, col, _ = open_spout(c, translator=lambda r: None if r.value == "skip" else [r.value, 1],
                               output_fields=["value", "n"], emit_null_tuples=True, processing_guarantee=guarantee)
    run(spout, 10)
    assert [v for v, _ in col.emitted] == [["a", 1], [None, None], ["b", 1], [None, None]]


def test_spout_without_emit_null_tuples_skips_a_none_translation_and_commits_it():
    c = MemoryConsumer({TP: ["a", "skip", "b"]})
    spout, col, clock = open_spout(c, translator=lambda r: None if r.value == "skip" else [r.value])
    run(spout, 10)
    assert values(col) == ["a", "b"]
    for _, msg_id in col.emitted:
        spout.ack(msg_id)
    clock.advance(1.0)
    spout.next_tuple()
    assert c.commits[TP].offset == 3


def test_spout_malformed_record_dead_lettered_and_committed():
    def translator(r):
        if r.value == "bad":
            raise ValueError("not a number")
        return [int(r.value)]

    dead = []
    c = MemoryConsumer({TP: ["1", "bad", "3"]})
    spout, col, clock = open_spout(c, translator=translator,
                                   dead_letter=lambda r, why: dead.append((r.topic, r.offset, why)))
    run(spout, 4)
    assert values(col) == [1, 3] and dead == [("t", 1, "malformed record: not a number")]
    for _, m in col.emitted:
        spout.ack(m)
    clock.advance(1.0)
    spout.next_tuple()
    assert c.commits[TP].offset == 3


def test_spout_resumes_own_commit_on_restart_even_with_earliest():
    commits = {}
    c = MemoryConsumer({TP: list("abcd")}, commits)
    spout, col, clock = open_spout(c, first_poll_offset_strategy=S.EARLIEST)
    run(spout, 2)
    spout.ack(col.emitted[0][1])
    spout.close()
    assert commits[TP].offset == 1 and c.closed
    # same topology restarted: resumes at b; a new submission (new id) reads from the start
    spout2, col2, _ = open_spout(MemoryConsumer({TP: list("abcd")}, commits),
                                 first_poll_offset_strategy=S.EARLIEST)
    run(spout2, 1)
    assert values(col2) == ["b"]
    spout3, col3, _ = open_spout(MemoryConsumer({TP: list("abcd")}, commits),
                                 context=Context("topo-2"), first_poll_offset_strategy=S.EARLIEST)
    run(spout3, 1)
    assert values(col3) == ["a"]


def test_spout_tasks_split_partitions_and_drop_revoked_state():
    logs = {TopicPartition("t", p): [f"{p}{i}" for i in range(2)] for p in range(3)}
    c = MemoryConsumer(logs)
    spout, col, clock = open_spout(c, context=Context(index=1, tasks=2))
    run(spout, 5)
    assert sorted(values(col)) == ["10", "11"]
    # partitions shrink (a topic recreated): task 1 of 2 now gets nothing; late acks ignored
    del logs[TopicPartition("t", 1)], logs[TopicPartition("t", 2)]
    clock.advance(3.0)
    spout.next_tuple()
    assert spout.managers == {} and spout.emitted == {}
    spout.ack(col.emitted[0][1])  # no error: no longer tracked


def test_spout_logs_unavailable_broker_once_and_recovers(caplog):
    c = MemoryConsumer({TP: list("ab")}, down=True)
    spout, col, clock = open_spout(c, down_retry_secs=1.0)
    run(spout, 5)
    clock.advance(1.0)
    run(spout, 5)
    errors = [r for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(errors) == 1 and "mem:0" in errors[0].getMessage()
    c.down = False
    clock.advance(1.0)
    run(spout, 3)
    assert values(col) == ["a", "b"]


# --- ConfluentConsumer over a stand-in for confluent_kafka's consumer -------------------------


class _Message:
    def __init__(self, offset=None, err=None):
        self._offset, self._err = offset, err

    def error(self):
        return self._err

    def topic(self):
        return "t"

    def partition(self):
        return 0

    def offset(self):
        return self._offset

    def key(self):
        return None

    def value(self):
        return f"v{self._offset}".encode()

    def timestamp(self):
        return 1, 1_000 + self._offset   # confluent_kafka.TIMESTAMP_CREATE_TIME


class _Polled:
    """What confluent_kafka's ``Consumer.consume`` returns, one list a call."""

    def __init__(self, *batches):
        self.batches = list(batches)

    def consume(self, num, timeout):
        return self.batches.pop(0)


def test_confluent_consumer_keeps_the_records_polled_with_an_error():
    # consume() hands back records and errors together; raising on the error dropped the records,
    # the consumer's position was already past them, and the spout committed past offsets it
    # never emitted (they count as compacted away)
    ck = pytest.importorskip("confluent_kafka")
    from squall.external.kafka import ConfluentConsumer

    consumer = ConfluentConsumer({"group.id": "g", "bootstrap.servers": "127.0.0.1:9", "log_level": 0})
    real = consumer._c
    transport = ck.KafkaError(ck.KafkaError._TRANSPORT)
    consumer._c = _Polled([_Message(0), _Message(err=transport), _Message(1)],
                          [_Message(err=ck.KafkaError(ck.KafkaError._PARTITION_EOF))],
                          [_Message(err=transport)])
    try:
        assert [r.offset for r in consumer.poll(0.1, [])] == [0, 1]
        assert consumer.poll(0.1, []) == []  # the end of a partition is no error
        with pytest.raises(KafkaUnavailable, match="poll: "):
            consumer.poll(0.1, [])  # nothing but an error: the broker is away
    finally:
        real.close()


# --- topics without partitions, refresh failures ------------------------------------------------


def test_spout_a_topic_with_a_metadata_error_keeps_its_partitions_and_the_others_stay_put(caplog):
    # a per-topic error stopped the whole spout; and dropping the topic's partitions from the
    # round robin would move the other topics' partitions between tasks (revoked and assigned
    # again: with LATEST and nothing committed, records skipped)
    logs = {TopicPartition(t, p): [f"{t}{p}-{i}" for i in range(2)] for t, n in (("a", 3), ("b", 2)) for p in range(n)}
    c = MemoryConsumer(logs)
    spout, col, clock = open_spout(c, context=Context(index=1, tasks=2), topics=["a", "b"],
                                   partition_refresh_period_ms=100)
    run(spout, 10)
    mine = {TopicPartition("a", 1), TopicPartition("b", 0)}  # sorted a0 a1 a2 b0 b1, index 1 of 2
    assert set(spout.managers) == mine and sorted(values(col)) == ["a1-0", "a1-1", "b0-0", "b0-1"]
    c.topic_errors = {"a": "Broker: Leader not available"}
    logs[TopicPartition("a", 1)].append("a1-2")
    logs[TopicPartition("b", 0)].append("b0-2")
    for _ in range(5):  # five refreshes with the error
        clock.advance(0.1)
        run(spout, 3)
    assert len(c.assign_calls) == 1 and set(spout.managers) == mine
    assert sorted(values(col)) == ["a1-0", "a1-1", "a1-2", "b0-0", "b0-1", "b0-2"]
    warned = [r for r in caplog.records if "'a'" in r.getMessage()]
    assert len(warned) == 1 and "Leader not available" in warned[0].getMessage()


def test_spout_reads_the_other_topics_until_a_missing_topic_exists(caplog):
    c = MemoryConsumer({TP: list("ab")})
    c.topic_errors = {"later": "Broker: Unknown topic or partition"}
    spout, col, clock = open_spout(c, topics=["t", "later"], partition_refresh_period_ms=100)
    for _ in range(4):
        run(spout, 3)
        clock.advance(0.1)
    assert values(col) == ["a", "b"]
    warned = [r for r in caplog.records if "'later' not found" in r.getMessage()]
    assert len(warned) == 1 and "Unknown topic" in warned[0].getMessage()
    del c.topic_errors["later"]
    c.logs[TopicPartition("later", 0)] = list("xy")
    run(spout, 3)
    assert values(col) == ["a", "b", "x", "y"]


def test_spout_a_failed_refresh_does_not_stop_polling_and_is_retried_on_its_own_timer(caplog):
    c = MemoryConsumer({TP: list("ab")})
    spout, col, clock = open_spout(c, partition_refresh_period_ms=100, down_retry_secs=1.0)
    run(spout, 3)
    c.metadata_down = True
    c.logs[TP] += list("cd")
    c.logs[TopicPartition("t", 1)] = list("x")  # a partition only a refresh finds
    for _ in range(3):
        clock.advance(0.4)
        run(spout, 2)
    assert values(col) == list("abcd")
    errors = [r for r in caplog.records if "partition refresh" in r.getMessage()]
    assert len(errors) == 1 and "mem:0" in errors[0].getMessage()
    c.metadata_down = False
    clock.advance(1.0)
    run(spout, 3)
    assert values(col) == list("abcdx")
