"""storm-kafka-client's ``KafkaSpoutConfig$Builder`` over squall's `KafkaSpoutConfig`: each setter
keeps Storm's meaning (defaults Storm's), and each one squall cannot honour is refused with why."""

from __future__ import annotations

import pickle
import re
import struct
from dataclasses import astuple

import pytest

from squall import Fields
from squall.external.kafka import FirstPollOffsetStrategy, ProcessingGuarantee, Record
from squall.external.kafka import KafkaSpoutConfig as SquallConfig
from squall.external.kafka_builder import (
    Builder,
    KafkaSpoutConfig,
    KafkaSpoutRetryExponentialBackoff,
    OnlyValueRecordTranslator,
    TimeInterval,
    UnsupportedKafkaSetting,
)
from squall.external.retry import RetryBackoff

STRING = "org.apache.kafka.common.serialization.StringDeserializer"


def record(key=b"k", value=b"v") -> Record:
    return Record("t", 1, 7, key, value)


def test_the_builder_takes_storms_constructor_and_defaults():
    config = Builder("h:9092", ["a", "b"]).build()
    assert isinstance(config, SquallConfig)
    assert (config.bootstrap_servers, list(config.topics)) == ("h:9092", ["a", "b"])
    assert Builder("h:9092", "a", "b").build().topics == ["a", "b"]  # String... topics
    assert config.first_poll_offset_strategy is FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST
    assert config.processing_guarantee is ProcessingGuarantee.AT_LEAST_ONCE
    assert (config.offset_commit_period_ms, config.max_uncommitted_offsets, config.poll_timeout_ms,
            config.partition_refresh_period_ms, config.emit_null_tuples) == (30_000, 10_000_000, 200, 2_000, False)
    assert config.retry == RetryBackoff(0.0, 0.002, None, 10.0)  # Storm's DEFAULT_RETRY_SERVICE
    # DefaultRecordTranslator; new Builder sets no deserializer: the bytes as they came
    assert list(config.output_fields) == ["topic", "partition", "offset", "key", "value"]
    assert config.translator(record()) == ["t", 1, 7, b"k", b"v"]
    with pytest.raises(UnsupportedKafkaSetting, match="at least one topic"):
        Builder("h:9092")
    with pytest.raises(UnsupportedKafkaSetting, match="topic pattern"):
        Builder("h:9092", re.compile("a.*"))


def test_set_prop_one_or_a_map_group_id_and_bootstrap_servers():
    builder = Builder("h:9092", ["a"]).set_prop("fetch.min.bytes", 10).set_prop({"client.id": "c", "group.id": "g"})
    config = builder.build()
    assert config.group_id == "g"
    assert config.consumer_props() == {"group.id": "g", "fetch.min.bytes": 10, "client.id": "c",
                                       "bootstrap.servers": "h:9092", "enable.auto.commit": False,
                                       "auto.offset.reset": "earliest"}
    assert builder.set_group_id("mine").build().group_id == "mine"  # setGroupId wins over group.id
    assert builder.set_prop("bootstrap.servers", "other:1").build().bootstrap_servers == "other:1"
    assert Builder("h:9092", ["a", "b"]).build().group_id == "storm-kafka-spout-a-b"  # none set: named, logged


def test_deserializers_read_the_bytes_as_java_does_and_a_java_only_one_is_refused():
    config = KafkaSpoutConfig.builder("h:9092", ["a"]).build()  # Storm's builder(): StringDeserializer
    assert config.translator(record(b"key", "välue".encode())) == ["t", 1, 7, "key", "välue"]
    assert config.translator(record(None, None))[3:] == [None, None]
    longs = Builder("h:9092", "a").set_prop({"key.deserializer": STRING,
                                             "value.deserializer": "org.apache.kafka.common.serialization."
                                                                   "LongDeserializer"}).build()
    assert longs.translator(record(b"k", struct.pack(">q", -5)))[3:] == ["k", -5]
    assert "value.deserializer" not in longs.consumer_props()  # a Java class name: not librdkafka's
    with pytest.raises(UnsupportedKafkaSetting, match=r"setProp\('value.deserializer', 'com.x.AvroDeserializer'\)"
                                                      r": squall reads records with Kafka's StringDeserializer"):
        Builder("h:9092", "a").set_prop("value.deserializer", "com.x.AvroDeserializer")


def test_enums_by_name_or_member():
    builder = Builder("h:9092", "a")
    for name in ("EARLIEST", "LATEST", "UNCOMMITTED_EARLIEST", "UNCOMMITTED_LATEST"):
        assert builder.set_first_poll_offset_strategy(name).build().first_poll_offset_strategy.name == name
    builder.set_first_poll_offset_strategy(FirstPollOffsetStrategy.LATEST)
    assert builder.build().first_poll_offset_strategy is FirstPollOffsetStrategy.LATEST
    for name in ("AT_MOST_ONCE", "NO_GUARANTEE", "AT_LEAST_ONCE"):
        assert builder.set_processing_guarantee(name).build().processing_guarantee.name == name
    with pytest.raises(UnsupportedKafkaSetting, match="no TIMESTAMP strategies"):
        builder.set_first_poll_offset_strategy("TIMESTAMP")
    with pytest.raises(UnsupportedKafkaSetting, match=r"setProcessingGuarantee\('EXACTLY_ONCE'\): .* AT_LEAST_ONCE, "
                                                      r"AT_MOST_ONCE, NO_GUARANTEE"):
        builder.set_processing_guarantee("EXACTLY_ONCE")


def test_periods_limits_and_null_tuples():
    config = (Builder("h:9092", "a").set_offset_commit_period_ms(100).set_max_uncommitted_offsets(5)
              .set_poll_timeout_ms(50).set_partition_refresh_period_ms(700).set_emit_null_tuples(True).build())
    assert (config.offset_commit_period_ms, config.max_uncommitted_offsets, config.poll_timeout_ms,
            config.partition_refresh_period_ms, config.emit_null_tuples) == (100, 5, 50, 700, True)
    with pytest.raises(UnsupportedKafkaSetting, match=r"setPollTimeoutMs\(-1\)"):
        Builder("h:9092", "a").set_poll_timeout_ms(-1)
    with pytest.raises(UnsupportedKafkaSetting, match=r"setMaxUncommittedOffsets\(0\)"):
        Builder("h:9092", "a").set_max_uncommitted_offsets(0)


def test_retry_is_storms_exponential_backoff_in_time_intervals():
    backoff = KafkaSpoutRetryExponentialBackoff(TimeInterval(500, "MICROSECONDS"), TimeInterval.milli_seconds(2),
                                                2**31 - 1, TimeInterval.seconds(10))
    assert isinstance(backoff, RetryBackoff)
    assert astuple(backoff) == (0.0005, 0.002, None, 10.0)  # initial delay, period, max retries, max delay
    config = Builder("h:9092", "a").set_retry(KafkaSpoutRetryExponentialBackoff(
        TimeInterval.seconds(1), TimeInterval.seconds(2), 3, TimeInterval(1, "MINUTES"))).build()
    assert astuple(config.retry) == (1.0, 2.0, 3, 60.0)
    with pytest.raises(UnsupportedKafkaSetting, match=r"setRetry\(object\): .* KafkaSpoutRetryExponentialBackoff"):
        Builder("h:9092", "a").set_retry(object())  # type: ignore[arg-type]
    with pytest.raises(UnsupportedKafkaSetting, match="TimeUnit name"):
        TimeInterval(1, "FORTNIGHTS")


def test_tuple_tracking_enforced_only_where_squall_tracks_tuples():
    assert Builder("h:9092", "a").set_tuple_tracking_enforced(True).build().processing_guarantee \
        is ProcessingGuarantee.AT_LEAST_ONCE  # tracked anyway
    Builder("h:9092", "a").set_processing_guarantee("AT_MOST_ONCE").set_tuple_tracking_enforced(False)
    with pytest.raises(UnsupportedKafkaSetting, match="setTupleTrackingEnforced: tuple tracking enforced with "
                                                      "AT_MOST_ONCE: squall's Kafka spout emits without message ids"):
        Builder("h:9092", "a").set_processing_guarantee("AT_MOST_ONCE").set_tuple_tracking_enforced(True)
    with pytest.raises(UnsupportedKafkaSetting, match="setProcessingGuarantee: tuple tracking enforced with "
                                                      "NO_GUARANTEE"):
        Builder("h:9092", "a").set_tuple_tracking_enforced(True).set_processing_guarantee("NO_GUARANTEE")


class TwoStreams:
    def apply(self, rec):
        return [rec.value]

    def get_fields_for(self, stream):
        return Fields(["value"])

    def streams(self):
        return ["default", "errors"]


def test_record_translators_storms_interface_or_a_function_with_fields():
    config = Builder("h:9092", "a").set_record_translator(OnlyValueRecordTranslator()).build()
    assert (list(config.output_fields), config.translator(record())) == (["value"], [b"v"])
    config = KafkaSpoutConfig.builder("h:9092", "a").set_record_translator(
        lambda r: [r.key, len(r.value)], Fields(["k", "n"])).build()
    assert (list(config.output_fields), config.translator(record(b"x", b"abc"))) == (["k", "n"], ["x", 3])
    with pytest.raises(UnsupportedKafkaSetting, match="default stream only"):
        Builder("h:9092", "a").set_record_translator(lambda r: [r.value], ["v"], "other")
    with pytest.raises(UnsupportedKafkaSetting, match=r"streams \['default', 'errors'\]"):
        Builder("h:9092", "a").set_record_translator(TwoStreams())


@pytest.mark.parametrize(("call", "why"), [
    (lambda b: b.set_tuple_listener(object()), "setTupleListener: squall's Kafka spout has no KafkaTupleListener"),
    (lambda b: b.set_metrics_time_bucket_size_in_secs(60), ("setMetricsTimeBucketSizeInSecs: squall's Kafka spout "
                                                           "reports in the topology's metrics interval")),
    (lambda b: b.set_start_time_stamp(0), "setStartTimeStamp: squall's Kafka spout has no TIMESTAMP"),
    (lambda b: b.set_prop("max.poll.records", 100), r"setProp\('max.poll.records', 100\): squall's spout polls"),
    (lambda b: b.set_prop({"enable.auto.commit": "true"}), (r"setProp\('enable.auto.commit', 'true'\): "
                                                            r"storm-kafka-client refuses it too")),
])
def test_a_setting_squall_cannot_honour_is_refused_with_why(call, why):
    with pytest.raises(UnsupportedKafkaSetting, match=f"^{why}"):
        call(Builder("h:9092", "a"))


def test_the_built_config_pickles_as_a_worker_gets_it():
    config = KafkaSpoutConfig.builder("h:9092", "a").set_record_translator(OnlyValueRecordTranslator()).build()
    back = pickle.loads(pickle.dumps(config))
    assert back.translator(record()) == ["v"] and back.group_id == config.group_id
