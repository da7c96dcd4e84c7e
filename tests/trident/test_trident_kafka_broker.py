"""The Kafka Trident spouts through their real code path (the real ``confluent_kafka`` Consumer)
against a Kafka-protocol broker in another process (librdkafka's built-in test broker, not Apache
Kafka: tests/kafka_broker.py says why): a word count on LocalCluster whose batches fail (in Split,
in Count's combine, in the state's multi_put before and after writing and in its commit, and a
commit held past the message timeout until its batch is replayed) stores counts equal to the input
exactly, every word compared: `KafkaTridentSpoutTransactional` into a `TransactionalMap`,
`KafkaTridentSpoutOpaque` into an `OpaqueMap`. The sentences are produced in chunks while the
topology runs, each once the words before it are stored, so they come in many batches."""

from __future__ import annotations

import logging

import pytest

from squall import Config, LocalCluster
from squall.external.kafka import KafkaSpoutConfig
from squall.external.trident_kafka import KafkaTridentSpoutOpaque, KafkaTridentSpoutTransactional
from squall.testing._registry import SharedLog
from squall.trident import TridentTopology
from squall.trident.partitioned import OpaquePartitionedTridentSpoutExecutor, PartitionedTridentSpoutExecutor

from ..conftest import wait_until
from ..kafka_broker import QUIET, kafka_broker, utf8_value  # noqa: F401 (the module-scoped broker fixture)
from .exactly_once import (
    Faults,
    FlakyCount,
    FlakyMapState,
    FlakySplit,
    Store,
    Watched,
    counted,
    emitted_in_two_txids,
    plain,
    replays,
    sentences,
    word_count,
)

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")

TEXT = sentences(120)
CHUNK = 6  # sentences produced at a time: 20 chunks, so at least 20 batches hold words
# call numbers below what one pass makes (120 sentences, ~540 words, >= 20 batches with words in
# them, commits of empty batches too): each fails one batch attempt
PLAN = {"split": [25, 90], "combine": [60, 400], "put": [4], "put_written": [7], "commit": [10],
        "slow_commit": [13]}
PENDING = 3
MESSAGE_TIMEOUT_SECS = 1  # the held commit waits for it (between T and 2T); the counts take replays


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster() as c:
        yield c


def spouts(bootstrap: str, topic: str):
    # each record's partition and offset beside its sentence: what names it when a count is off
    config = KafkaSpoutConfig(bootstrap, [topic], f"group-{topic}", poll_timeout_ms=50,
                              translator=lambda r: [*utf8_value(r), r.partition, r.offset],
                              output_fields=["sentence", "partition", "offset"], props={**QUIET, "fetch.wait.max.ms": 20})
    return {"transactional": PartitionedTridentSpoutExecutor(KafkaTridentSpoutTransactional(config)),
            "opaque": OpaquePartitionedTridentSpoutExecutor(KafkaTridentSpoutOpaque(config))}


@pytest.mark.parametrize("spout_kind,state_kind", [("transactional", "transactional"), ("opaque", "opaque")])
def test_a_kafka_word_count_stores_every_word_exactly_once_while_batches_fail(cluster, kafka_broker, spout_kind,  # noqa: F811
                                                                               state_kind):
    topic = f"sentences-{spout_kind}"
    faults = Faults(f"kafka-{spout_kind}", PLAN)
    attempts, emitted = SharedLog(), SharedLog()
    store = Store(f"kafka-{spout_kind}")
    topo = TridentTopology()
    word_count(topo, f"kafka-{spout_kind}", Watched(spouts(kafka_broker.bootstrap, topic)[spout_kind], attempts, emitted),
               FlakyMapState(state_kind, store, faults, attempts), split=FlakySplit(faults), count=FlakyCount(faults))
    conf = Config()
    conf["topology.max.spout.pending"] = PENDING
    conf["topology.message.timeout.secs"] = MESSAGE_TIMEOUT_SECS

    def stored() -> dict:
        return {k[0]: plain(state_kind, v) for k, v in store.items().items()}

    name = f"kafka-{spout_kind}"
    cluster.submit_topology(name, conf, topo.build())
    try:
        for at in range(0, len(TEXT), CHUNK):
            kafka_broker.produce(topic, TEXT[at:at + CHUNK])
            words = sum(counted(TEXT[:at + CHUNK]).values())
            assert wait_until(lambda: sum(stored().values()) >= words, 120), (at, stored())  # noqa: B023
        # every batch in flight when the last words were stored has committed once a txid
        # PENDING past the last one emitted then is emitted (commits go in txid order)
        last = max(txid for txid, _ in attempts.items())
        assert wait_until(lambda: max(txid for txid, _ in attempts.items()) > last + PENDING, 60)
    finally:
        cluster.kill_topology(name, wait_secs=0)
    counts = stored()
    # when off (seen once in a full suite, 2026-12-04: one chunk counted twice), say which
    # sentences the spout emitted under two txids, and which txids were tried when
    twice = {} if spout_kind != "transactional" else emitted_in_two_txids(emitted)
    off = [(word,) for word, n in counted(TEXT).items() if counts.get(word) != n]
    assert counts == counted(TEXT), (f"emitted under two txids: {twice}; "
                                     f"attempts: {sorted(set(attempts.items()))}; writes of the keys off: "
                                     f"{store.writes_of(off)}; induced: {faults.fired()} {faults.notes()}")
    assert faults.fired() == faults.planned()  # every induced failure happened
    assert [n for n in faults.notes() if "timed out" in n], "the held commit was not replayed"
    seen = replays(attempts)
    assert seen.replayed_batches >= 1, seen
    ends = kafka_broker.end_offsets(topic)
    print(f"{spout_kind} Kafka spout -> {state_kind} map: {len(TEXT)} records over {len(ends)} partitions "
          f"(log ends {sorted(ends.values())}), {sum(counts.values())} words stored over {len(counts)} keys; "
          f"{len(faults.fired())} failures induced, {seen.batches} batches, {seen.replayed_batches} replayed")


def test_a_topic_created_after_the_topology_started_is_counted_exactly(cluster, kafka_broker, caplog):  # noqa: F811
    """Until the topic exists each batch fails in the spout coordinator and is replayed; a
    txid's batch that fails there after the master emitted the next one is overtaken by it,
    which counted the first records twice before squall.trident.partitioned gave such a txid
    nothing (seen 2026-12-04 in the word count above, whose topic is created as it starts)."""
    topic = "sentences-late"
    attempts, emitted = SharedLog(), SharedLog()
    store = Store("kafka-late")
    topo = TridentTopology()
    word_count(topo, "kafka-late", Watched(spouts(kafka_broker.bootstrap, topic)["transactional"], attempts, emitted),
               FlakyMapState("transactional", store, Faults("kafka-late", {}), attempts))
    conf = Config()
    conf["topology.max.spout.pending"] = PENDING
    conf["topology.message.timeout.secs"] = MESSAGE_TIMEOUT_SECS
    text = sentences(30)

    def stored() -> dict:
        return {k[0]: plain("transactional", v) for k, v in store.items().items()}

    caplog.set_level(logging.INFO, logger="squall.trident.coordinator")
    cluster.submit_topology("kafka-late", conf, topo.build())
    try:
        # the topic is created once a batch has failed for want of it (the master says so)
        assert wait_until(lambda: any("failed on $batch" in r.getMessage() for r in caplog.records), 60), \
            "no batch failed while the topic was missing"
        kafka_broker.produce(topic, text)
        assert wait_until(lambda: sum(stored().values()) >= sum(counted(text).values()), 60), stored()
        last = max(txid for txid, _ in attempts.items())
        assert wait_until(lambda: max(txid for txid, _ in attempts.items()) > last + PENDING, 60)
    finally:
        cluster.kill_topology("kafka-late", wait_secs=0)
    assert emitted_in_two_txids(emitted) == {}
    assert stored() == counted(text)
