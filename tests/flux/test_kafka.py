"""Storm's flux-examples ``kafka_spout.yaml`` (storm-kafka-client's ``KafkaSpoutConfig$Builder``,
``KafkaSpoutConfig`` and ``KafkaSpout`` by their Java names) runs on a LocalCluster as written, but
for its bootstrap servers and topic given as Flux properties, against librdkafka's test broker
(tests/kafka_broker.py): every record of the topic split, counted and logged once, and every offset
committed."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from squall import flux
from squall.external.kafka import FirstPollOffsetStrategy, KafkaSpout, ProcessingGuarantee
from squall.external.kafka import KafkaSpoutConfig as SquallKafkaSpoutConfig

from ..conftest import wait_until
from ..kafka_broker import kafka_broker  # noqa: F401 (the module-scoped broker fixture)
from .conftest import FILES

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[test]'")

STORM_FILE = FILES / "storm_kafka" / "kafka_spout.yaml"


def logged_counts(caplog) -> list[tuple[str, int]]:
    """The (word, count) tuples LogInfoBolt logged (its log call's argument is the tuple itself)."""
    return [tuple(r.args[0].values) for r in caplog.records
            if r.name == "squall.flux.wrappers" and isinstance(r.args, tuple) and r.args]


def test_storms_kafka_spout_example_counts_every_record_of_the_topic_once(cluster, kafka_broker, tmp_path,  # noqa: F811
                                                                          caplog):
    topic = "flux-sentences"
    sentences = [f"alpha{i} beta{i} gamma{i}" for i in range(40)]
    kafka_broker.produce(topic, sentences)
    props = tmp_path / "kafka.properties"
    props.write_text(f"kafka.bootstrap.servers={kafka_broker.bootstrap}\nkafka.topic={topic}\n")

    loaded = flux.load(STORM_FILE, filter_file=props)

    assert loaded.name == "kafka-topology"
    spout = loaded.topology.components["kafka-spout"].obj
    assert isinstance(spout, KafkaSpout) and isinstance(spout.config, SquallKafkaSpoutConfig)
    config = spout.config
    assert (config.bootstrap_servers, list(config.topics)) == (kafka_broker.bootstrap, [topic])
    assert config.first_poll_offset_strategy is FirstPollOffsetStrategy.EARLIEST  # the property
    assert config.processing_guarantee is ProcessingGuarantee.AT_LEAST_ONCE  # Storm's default
    assert list(config.output_fields) == ["value"]  # OnlyValueRecordTranslator's
    assert "key.deserializer" not in config.consumer_props()  # a Java class: read here, not by librdkafka

    caplog.set_level(logging.INFO, logger="squall.flux.wrappers")
    words = 3 * len(sentences)
    cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
    try:
        assert wait_until(lambda: len(logged_counts(caplog)) >= words, 30), len(logged_counts(caplog))
        assert wait_until(lambda: cluster.is_idle(loaded.name), 10)  # the last acks reached the spout
        # deactivated, the spout commits what was acked (Storm's 30 s commit period is the file's):
        # every partition at its log end, so every record's tuple tree (split, count, log) was acked
        cluster.deactivate(loaded.name)
        assert wait_until(lambda: kafka_broker.committed(config.group_id, topic) == kafka_broker.end_offsets(topic),
                          20), (kafka_broker.committed(config.group_id, topic), kafka_broker.end_offsets(topic))
    finally:
        cluster.kill_topology(loaded.name, wait_secs=0)
    logged = logged_counts(caplog)
    expected = Counter(w for s in sentences for w in s.split())
    assert len(logged) == words == sum(expected.values())
    assert Counter(w for w, _ in logged) == expected  # each word of each record once: none lost or replayed
    assert all(count == 1 for _, count in logged)  # StringDeserializer: the value came as str, split by the script


BUILDER = """name: "k"
components:
  - id: "first"
    className: "org.apache.storm.kafka.spout.KafkaSpoutRetryExponentialBackoff$TimeInterval"
    factory: "milliSeconds"
    factoryArgs: [250]
  - id: "period"
    className: "org.apache.storm.kafka.spout.KafkaSpoutRetryExponentialBackoff$TimeInterval"
    constructorArgs: [2, "SECONDS"]
  - id: "retry"
    className: "org.apache.storm.kafka.spout.KafkaSpoutRetryExponentialBackoff"
    constructorArgs: [{ref: "first"}, {ref: "period"}, 5, {ref: "period"}]
  - id: "spoutConfigBuilder"
    className: "org.apache.storm.kafka.spout.KafkaSpoutConfig"
    factory: "builder"
    factoryArgs: ["h:9092", ["a", "b"]]
    properties:
      - name: "processingGuarantee"
        value: AT_MOST_ONCE
    configMethods:
      - name: "setRetry"
        args: [{ref: "retry"}]
      - name: "setGroupId"
        args: ["g"]
      - name: "setOffsetCommitPeriodMs"
        args: [100]
#MORE
  - id: "spoutConfig"
    className: "org.apache.storm.kafka.spout.KafkaSpoutConfig"
    constructorArgs: [{ref: "spoutConfigBuilder"}]
spouts:
  - id: "kafka-spout"
    className: "org.apache.storm.kafka.spout.KafkaSpout"
    constructorArgs: [{ref: "spoutConfig"}]
bolts:
  - id: "log"
    className: "org.apache.storm.flux.wrappers.bolts.LogInfoBolt"
streams:
  - {from: "kafka-spout", to: "log", grouping: {type: SHUFFLE}}
"""


def test_a_builder_made_by_storms_factory_with_a_retry_of_time_intervals(tmp_path):
    path = tmp_path / "k.yaml"
    path.write_text(BUILDER.replace("#MORE\n", ""))
    config = flux.load(path).topology.components["kafka-spout"].obj.config
    assert (list(config.topics), config.group_id, config.offset_commit_period_ms) == (["a", "b"], "g", 100)
    assert config.processing_guarantee is ProcessingGuarantee.AT_MOST_ONCE  # the property, by the enum's name
    assert (config.retry.initial_delay, config.retry.delay_period, config.retry.max_retries,
            config.retry.max_delay) == (0.25, 2.0, 5, 2.0)


@pytest.mark.parametrize(("more", "line", "key", "why"), [
    ('      - name: "setTupleListener"\n        args: [{ref: "retry"}]\n', 27, r"configMethods\[3\]",
     (r"Builder.setTupleListener\(...\) raised UnsupportedKafkaSetting: setTupleListener: squall's Kafka spout has "
     r"no KafkaTupleListener hooks")),
    ('      - name: "setTupleTrackingEnforced"\n        args: [true]\n', 27, r"configMethods\[3\]",
     (r"Builder.setTupleTrackingEnforced\(...\) raised UnsupportedKafkaSetting: setTupleTrackingEnforced: tuple "
     r"tracking enforced with AT_MOST_ONCE: squall's Kafka spout emits without message ids")),
    ('      - name: "setProp"\n        args: ["max.poll.records", 10]\n', 27, r"configMethods\[3\]",
     (r"Builder.setProp\(...\) raised UnsupportedKafkaSetting: setProp\('max.poll.records', 10\): squall's spout "
     r"polls up to 500")),
])
def test_a_setter_squall_cannot_honour_names_the_file_component_method_and_why(tmp_path, more, line, key, why):
    path = tmp_path / "k.yaml"
    path.write_text(BUILDER.replace("#MORE\n", more))
    with pytest.raises(flux.FluxError, match=rf"^k.yaml:{line}: components\[3\].{key}.*: 'spoutConfigBuilder': "
                                             rf"{why}"):
        flux.load(path)


def test_an_unsupported_property_names_the_component_and_why(tmp_path):
    path = tmp_path / "k.yaml"
    path.write_text(BUILDER.replace("value: AT_MOST_ONCE", "value: TIMESTAMP")
                    .replace('"processingGuarantee"', '"firstPollOffsetStrategy"'))
    with pytest.raises(flux.FluxError, match=r"^k.yaml:18: components\[3\].properties\[0\].*'spoutConfigBuilder': "
                                             r"Builder.set_first_poll_offset_strategy\(...\) raised "
                                             r"UnsupportedKafkaSetting: .*no TIMESTAMP strategies"):
        flux.load(path)
