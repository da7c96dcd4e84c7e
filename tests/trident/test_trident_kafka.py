"""The Kafka Trident spouts (storm-kafka-client's KafkaTridentSpoutTransactional and
KafkaTridentSpoutOpaque) over the in-memory `Consumer` the Kafka spout's tests use (no Kafka
broker can be had here: none is packaged for the registries this project reaches): a replayed
txid re-reads exactly its offsets, also from a restarted task; the opaque spout puts every record
in exactly one successful batch; compaction breaks a transactional replay loudly; EARLIEST applies
on a new submission only; a broker that is down fails the batch. A consumer that behaves as
librdkafka's does after a seek (no position, nothing on the next poll) shows what the real one
found (test_trident_kafka_broker.py): an empty batch resumes where it started, and an opaque
replay holds every record of its earlier attempt."""

from __future__ import annotations

import pytest

from squall import FailedException
from squall.external.kafka import FirstPollOffsetStrategy as S
from squall.external.kafka import KafkaSpoutConfig, TopicPartition
from squall.external.trident_kafka import KafkaTridentSpoutOpaque, KafkaTridentSpoutTransactional
from squall.trident.coordinator import TransactionAttempt
from squall.trident.partitioned import OpaquePartitionedTridentSpoutExecutor, PartitionedTridentSpoutExecutor

from ..external.test_kafka import MemoryConsumer
from .partition_fakes import Driver, Recorder

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def config(logs, consumers=None, **kw):
    def factory(props):
        c = MemoryConsumer(logs)
        if consumers is not None:
            consumers.append(c)
        return c
    kw.setdefault("translator", lambda r: [r.partition, r.offset, r.value])
    kw.setdefault("output_fields", ["partition", "offset", "value"])
    return KafkaSpoutConfig("mem:0", ["t"], "g", consumer_factory=factory, **kw)


def produce(logs, n):
    for tp in logs:
        logs[tp] += [f"v{tp.partition}-{len(logs[tp]) + i}" for i in range(n)]


def offsets(batch):
    return [(p, o) for p, o, _ in batch]


def test_transactional_replay_re_reads_exactly_its_offsets_also_after_a_restart():
    logs = {T0: [], T1: []}
    produce(logs, 5)
    d = Driver(PartitionedTridentSpoutExecutor(KafkaTridentSpoutTransactional(config(logs))), num_tasks=2)
    first = {t: d.emit(t) for t in (1, 2, 3)}
    # sorted: which task reads which partition is the spout's choice
    assert sorted(offsets(first[1])) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert sorted(offsets(first[2])) == [(0, 3), (0, 4), (1, 3), (1, 4)]
    assert first[3] == []  # nothing new: an empty batch
    produce(logs, 4)  # more data: the replays must not take it
    assert d.emit(3) == [] and d.emit(2) == first[2]
    d.restart()
    assert d.emit(1) == first[1] and d.emit(2) == first[2] and d.emit(3) == []
    d.success(3)
    fourth = d.emit(4)
    assert sorted(offsets(fourth)) == [(0, 5), (0, 6), (0, 7), (1, 5), (1, 6), (1, 7)]
    got = [(p, o) for t in (first[1], first[2], fourth, d.emit(5)) for p, o, _ in t]
    assert sorted(got) == sorted((tp.partition, o) for tp in logs for o in range(len(logs[tp])))


def test_opaque_every_record_in_exactly_one_successful_batch():
    logs = {T0: [], T1: []}
    produce(logs, 2)
    d = Driver(OpaquePartitionedTridentSpoutExecutor(KafkaTridentSpoutOpaque(config(logs))))
    done = {1: d.emit(1)}
    d.success(1)
    assert d.emit(2) == []
    produce(logs, 4)
    done[2] = d.emit(2)  # the replay of 2 reads what came meanwhile
    d.success(2)
    d.emit(3)
    d.restart()  # the task dies before 3 commits
    done[3] = d.emit(3)
    d.success(3)
    done[4] = d.emit(4)
    got = sorted((p, o) for b in done.values() for p, o, _ in b)
    assert got == sorted((tp.partition, o) for tp in logs for o in range(len(logs[tp])))


def test_compaction_inside_a_transactional_batch_is_an_error_on_replay():
    logs = {T0: ["a", "b", "c", "d"]}
    d = Driver(PartitionedTridentSpoutExecutor(KafkaTridentSpoutTransactional(config(logs))))
    assert offsets(d.emit(1)) == [(0, 0), (0, 1), (0, 2)]
    logs[T0][2] = None  # compacted away
    d.restart()
    with pytest.raises(ValueError, match="compaction"):
        d.emit(1)


def test_earliest_applies_to_a_new_submission_only():
    logs = {T0: ["a", "b", "c", "d", "e"]}
    from squall._transactional import MemoryBackend
    backend = MemoryBackend()
    for strategy, again in ((S.UNCOMMITTED_EARLIEST, [(0, 3), (0, 4)]), (S.EARLIEST, [(0, 0), (0, 1), (0, 2)])):
        first = Driver(PartitionedTridentSpoutExecutor(KafkaTridentSpoutTransactional(
            config(logs, first_poll_offset_strategy=strategy))), backend=backend, txid_key=strategy.value)
        assert offsets(first.emit(1)) == [(0, 0), (0, 1), (0, 2)]
        first.success(1)
        # the topology submitted again (a new storm id) under the same name: its state is there
        second = Driver(PartitionedTridentSpoutExecutor(KafkaTridentSpoutTransactional(
            config(logs, first_poll_offset_strategy=strategy))), backend=backend, txid_key=strategy.value,
            storm_id="topo-2-2")
        assert offsets(second.emit(2)) == again


def test_latest_starts_at_the_end_and_a_broker_down_fails_the_batch():
    logs = {T0: ["a", "b"]}
    consumers = []
    d = Driver(PartitionedTridentSpoutExecutor(KafkaTridentSpoutTransactional(
        config(logs, consumers, first_poll_offset_strategy=S.LATEST))))
    assert d.emit(1) == []
    logs[T0].append("c")
    assert offsets(d.emit(2)) == [(0, 2)]
    for c in consumers:
        c.down = True
    with pytest.raises(FailedException, match="connection refused"):
        d.emit(3)


def test_a_new_partition_moves_no_partition_to_another_task():
    # batches 1 and 2 in flight at once, each task at its own pace: when topic a grew a partition
    # (sorted before topic b's), b's partition changed task, and its new task read it from the
    # last offsets stored, before its old task stored where batch 1 ended there
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    logs = {a0: ["x"], b0: ["y", "z"]}
    spout = KafkaTridentSpoutTransactional(KafkaSpoutConfig(
        "mem:0", ["a", "b"], "g", consumer_factory=lambda props: MemoryConsumer(logs),
        translator=lambda r: [r.topic, r.partition, r.offset], output_fields=["topic", "partition", "offset"],
        partition_refresh_period_ms=0))
    d = Driver(PartitionedTridentSpoutExecutor(spout), num_tasks=2)
    meta = {1: d.coordinator.initialize_transaction(1, None, None)}
    logs[a1] = ["w"]
    meta[2] = d.coordinator.initialize_transaction(2, meta[1], None)
    emitted = {1: Recorder(), 2: Recorder()}
    fast, slow = d.emitters
    for emitter, txid in [(fast, 1), (fast, 2), (slow, 1), (slow, 2)]:
        emitter.emit_batch(TransactionAttempt(txid, 0), meta[txid], emitted[txid])
    got = sorted(tuple(v) for r in emitted.values() for v in r.values)
    assert got == [("a", 0, 0), ("a", 1, 0), ("b", 0, 0), ("b", 0, 1)]


class LaggingConsumer(MemoryConsumer):
    """`MemoryConsumer` as librdkafka's consumer behaves after a seek: the position is unknown
    (None) until a record of the partition is polled, and the first poll after the seek brings
    nothing of it (fetching starts again)."""

    def __init__(self, logs):
        super().__init__(logs)
        self.restarting: set = set()
        self.seeks = 0

    def seek(self, tp, offset):
        super().seek(tp, offset)
        self.seeks += 1
        self.restarting.add(tp)

    def position(self, tp):
        return None if tp in self.restarting else super().position(tp)

    def poll(self, timeout, paused):
        lagging = set(self.restarting)
        self.restarting -= lagging
        return super().poll(timeout, [*paused, *lagging])


def lagging_config(logs, consumers):
    def factory(props):
        consumers.append(LaggingConsumer(logs))
        return consumers[-1]
    return KafkaSpoutConfig("mem:0", ["t"], "g", consumer_factory=factory,
                            translator=lambda r: [r.partition, r.offset, r.value],
                            output_fields=["partition", "offset", "value"])


def test_a_partition_with_nothing_new_resumes_where_its_batch_started_without_a_seek():
    # the empty batch's metadata was the consumer's position minus one; librdkafka has none after
    # a seek, so it fell back to the first offset ever sought and the next batch read it all again
    logs = {T0: [], T1: []}
    produce(logs, 2)
    consumers = []
    d = Driver(PartitionedTridentSpoutExecutor(KafkaTridentSpoutTransactional(lagging_config(logs, consumers))))
    got = [d.emit(t) for t in (1, 2)]  # 1: the first poll after the first seek; 2: the records
    seeks = consumers[-1].seeks
    got += [d.emit(3)]                 # nothing new: an empty batch
    produce(logs, 2)
    got += [d.emit(t) for t in (4, 5, 6)]
    assert sorted(offsets(b for batch in got for b in batch)) == sorted(
        (tp.partition, o) for tp in logs for o in range(len(logs[tp])))  # each record once
    assert consumers[-1].seeks == seeks  # a partition already where its batch starts is not sought


def test_an_opaque_replay_holds_every_record_its_earlier_attempt_held():
    logs = {T0: [], T1: []}
    produce(logs, 2)
    consumers = []
    d = Driver(OpaquePartitionedTridentSpoutExecutor(KafkaTridentSpoutOpaque(lagging_config(logs, consumers))))
    first = d.emit(1)
    assert sorted(offsets(first)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    produce(logs, 1)
    replay = d.emit(1)  # seeks back: its first poll brings nothing, so it polls until it is as far
    assert set(offsets(first)) <= set(offsets(replay))
    d.success(1)
    rest = d.emit(2) + d.emit(3)
    assert sorted(offsets(replay) + offsets(rest)) == sorted((tp.partition, o) for tp in logs for o in range(3))
    produce(logs, 2)
    second = d.emit(4)
    assert offsets(second)
    produce(logs, 1)
    d.restart()  # the worker died with txid 4 in flight: the task's memory is gone, the state kept it
    again = d.emit(4)
    assert set(offsets(second)) <= set(offsets(again))


def test_a_partition_with_nothing_new_emits_nothing_and_a_spark_batch_reads_only_those_that_have_records():
    pytest.importorskip("pyspark.sql.datasource")
    from squall.trident.spark.source import PartitionedSpoutReader, SpoutSpec

    logs = {T0: ["a0"], T1: []}
    reader = PartitionedSpoutReader(SpoutSpec("kafka", KafkaTridentSpoutTransactional(config(logs)), {}))
    first = reader.latestOffset(reader.initialOffset(), None)
    assert first["batch"] == ["t@0", "t@1"]  # t@1 found nothing where it started: its start is kept
    assert first["parts"]["t@1"] is not None
    logs[T0].append("a1")
    second = reader.latestOffset(first, None)
    assert second["batch"] == ["t@0"] and second["parts"]["t@1"] == first["parts"]["t@1"]
    # one Spark task (an input partition holds a tuple of spout partitions)
    assert [[t.partition.get_id() for t in p.value] for p in reader.partitions(first, second)] == [["t@0"]]
    logs[T1].append("b0")
    third = reader.latestOffset(second, None)
    assert third["batch"] == ["t@1"]
    assert [[(t.partition.get_id(), t.meta["first_offset"]) for t in p.value] for p in reader.partitions(second, third)] \
        == [[("t@1", 0)]]


@pytest.mark.parametrize("adapter, spout", [(PartitionedTridentSpoutExecutor, KafkaTridentSpoutTransactional),
                                            (OpaquePartitionedTridentSpoutExecutor, KafkaTridentSpoutOpaque)])
def test_a_record_the_translator_refuses_is_a_dead_letter_and_its_partition_goes_on(adapter, spout):
    """A translator that raises on a record (`MalformedRecord`, or any error) failed every
    attempt of its batch, which read the record again each time: the partition stalled for good.
    It is now handed to the config's ``dead_letter`` and skipped, on every attempt, as the plain
    spout does; every other record is in a batch once."""
    from squall.external.kafka import MalformedRecord

    def translator(r):
        if r.value == "BAD":
            raise MalformedRecord(f"cannot parse {r.value!r}")
        if r.value == "WORSE":
            raise KeyError("user")
        return [r.offset, r.value]
    dead = []
    logs = {T0: ["a", "BAD", "c", "WORSE", "e"]}
    cfg = config(logs, translator=translator, output_fields=["offset", "value"],
                 dead_letter=lambda r, reason: dead.append((r.offset, reason)))
    d = Driver(adapter(spout(cfg)))  # the in-memory consumer polls 3 records at a time
    assert d.emit(1) == [[0, "a"], [2, "c"]]
    assert d.emit(1) == [[0, "a"], [2, "c"]]  # the replay skips it the same way
    d.success(1)
    assert d.emit(2) == d.emit(2) == [[4, "e"]]
    d.success(2)
    logs[T0].append("f")
    assert d.emit(3) == [[5, "f"]]
    assert [o for o, _ in dead] == [1, 1, 3, 3]
    assert "cannot parse 'BAD'" in dead[0][1] and "translator raised KeyError" in dead[2][1]


def test_what_fails_a_batch_names_the_brokers_and_a_dead_letter_handler_that_raised():
    """Two failures a user could not place. A broker away failed the batch with librdkafka's words
    only (``listing partitions: metadata of topic 'clicks': ... Broker transport failure``), naming
    no broker. A ``dead_letter`` handler whose store was down (Redis restarting) failed the batch
    with its bare ``ConnectionError``, reported for ``[spout-clicks]`` as if the spout's own, then
    as a stall whose advice was to fix an operation. Now the first names the bootstrap servers,
    and the second the handler, the record's topic, partition and offset, and why it was a dead
    letter; its batch is still replayed, handing the record over again, so no dead letter is lost."""
    from squall._errors import ReportedFailedException

    def translator(r):
        if r.value == "BAD":
            raise ValueError(f"cannot parse {r.value!r}")
        return [r.offset, r.value]
    dead, store_down = [], [True]

    def dead_letter(r, reason):
        if store_down[0]:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        dead.append((r.offset, reason))
    logs = {T0: ["a", "BAD", "c"]}
    consumers = []
    d = Driver(PartitionedTridentSpoutExecutor(KafkaTridentSpoutTransactional(
        config(logs, consumers, translator=translator, output_fields=["offset", "value"], dead_letter=dead_letter))))
    with pytest.raises(ReportedFailedException) as failed:
        d.emit(1)
    assert str(failed.value) == (
        "Kafka Trident spout: the dead_letter handler raised ConnectionError: Error 111 connecting to "
        "127.0.0.1:6379. Connection refused., given the record at topic 't' partition 0 offset 1 (malformed "
        "record: cannot parse 'BAD'); the batch fails and is replayed, handing the record over again")
    store_down[0] = False
    assert d.emit(1) == [[0, "a"], [2, "c"]]  # the replay: every record once, the dead letter kept
    assert dead == [(1, "malformed record: cannot parse 'BAD'")]
    d.success(1)
    for c in consumers:
        c.down = True
    with pytest.raises(FailedException, match=r"^Kafka Trident spout \(bootstrap servers mem:0\): .*connection refused"):
        d.emit(2)


@pytest.mark.parametrize("adapter, spout", [(PartitionedTridentSpoutExecutor, KafkaTridentSpoutTransactional),
                                            (OpaquePartitionedTridentSpoutExecutor, KafkaTridentSpoutOpaque)])
def test_a_refused_record_is_logged_once_naming_its_txid_also_when_a_replay_first_reads_it(adapter, spout, caplog):
    """Without a ``dead_letter`` handler a refused record is logged when its txid first reads it,
    and not again by a replay, nor by one after a restart (the opaque spout keeps how far its
    attempts read in the topology's state); an opaque replay that reads further than the first
    attempt logs the records only it read. Each attempt logged them again (7 lines here for 3
    records)."""
    import logging

    from squall.external.kafka import MalformedRecord

    def translator(r):
        if r.value.startswith("BAD"):
            raise MalformedRecord(f"cannot parse {r.value!r}")
        return [r.offset, r.value]
    caplog.set_level(logging.ERROR)
    logs = {T0: ["a", "BAD1"]}
    d = Driver(adapter(spout(config(logs, translator=translator, output_fields=["offset", "value"]))))
    assert d.emit(1) == [[0, "a"]]
    logs[T0] += ["BAD2", "d", "BAD3"]  # the in-memory consumer polls 3 records at a time
    assert d.emit(1) == [[0, "a"]]  # opaque: reads BAD2 too, first read here; transactional: 0..1 again
    d.restart()
    assert d.emit(1) == [[0, "a"]]
    d.success(1)
    assert d.emit(2) == d.emit(2) == [[3, "d"]]
    d.success(2)
    opaque = spout is KafkaTridentSpoutOpaque
    txid_of = {(1, "BAD1"): 1, (2, "BAD2"): 1 if opaque else 2, (4, "BAD3"): 2}  # (offset, value): txid
    lines = [r.getMessage() for r in caplog.records if "dead letter" in r.getMessage()]
    assert sorted(lines) == sorted(
        f"{spout.__name__} dead letter: txid {txid}: topic 't' partition 0 offset {offset}: malformed record: "
        f"cannot parse {value!r}" for (offset, value), txid in txid_of.items())
