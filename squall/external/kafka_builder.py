"""storm-kafka-client's configuration classes as a Flux file names them, over squall's `KafkaSpoutConfig`.

A Storm user's Flux file makes its Kafka spout as storm-kafka-client's Javadoc shows:
``KafkaSpoutConfig$Builder`` with ``constructorArgs`` (bootstrap servers, topics), ``properties``
and ``configMethods`` (Storm's setters by name, enums by their names as Flux gives them), then
``KafkaSpoutConfig`` with the builder as its constructor argument, and ``KafkaSpout`` with the
config. squall.flux's builder names this module's classes for those Java names: `Builder` keeps
each setting as Storm's builder does and `KafkaSpoutConfig` (a squall
`squall.external.kafka.KafkaSpoutConfig`) is made from it with the same meaning. A setter squall
cannot honour raises `UnsupportedKafkaSetting` naming the method and why; none is ignored.
"""

from __future__ import annotations

import enum
import logging
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._fields import Fields
from .kafka import FirstPollOffsetStrategy, ProcessingGuarantee, Record
from .kafka import KafkaSpoutConfig as _SquallConfig
from .retry import RetryBackoff

log = logging.getLogger(__name__)

DEFAULT_STREAM = "default"


class UnsupportedKafkaSetting(ValueError):
    """A storm-kafka-client setting squall's Kafka spout cannot honour (the message says why)."""


# --- deserializers: Kafka's Java classes, read as squall's records come (bytes) ------------------
def _utf8(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8")


def _raw(data: bytes | None) -> bytes | None:
    return data


def _int32(data: bytes | None) -> int | None:
    return None if data is None else struct.unpack(">i", data)[0]


def _int64(data: bytes | None) -> int | None:
    return None if data is None else struct.unpack(">q", data)[0]


def _float64(data: bytes | None) -> float | None:
    return None if data is None else struct.unpack(">d", data)[0]


DESERIALIZERS: dict[str, Callable[[bytes | None], Any]] = {
    "org.apache.kafka.common.serialization.StringDeserializer": _utf8,
    "org.apache.kafka.common.serialization.ByteArrayDeserializer": _raw,
    "org.apache.kafka.common.serialization.IntegerDeserializer": _int32,
    "org.apache.kafka.common.serialization.LongDeserializer": _int64,
    "org.apache.kafka.common.serialization.DoubleDeserializer": _float64,
}
"""Kafka's deserializer classes ``key.deserializer``/``value.deserializer`` may name, as Java reads
the bytes (UTF-8; big-endian numbers)."""

# Java client properties squall's consumer (librdkafka) has no equivalent of, and why
_NO_EQUIVALENT = {
    "max.poll.records": "squall's spout polls up to 500 records a time and librdkafka has no such property",
    "enable.auto.commit": ("storm-kafka-client refuses it too (the spout commits); "
                           "use setProcessingGuarantee"),
}


@dataclass(frozen=True)
class Deserializing:
    """A translator given the record with its key and value deserialized as the Java consumer would."""

    translator: Callable[[Record], list | None]
    key: Callable[[bytes | None], Any] = _raw
    value: Callable[[bytes | None], Any] = _raw

    def __call__(self, record: Record) -> list | None:
        """The translator's tuple for ``record`` read through the deserializers."""
        return self.translator(record._replace(key=self.key(record.key), value=self.value(record.value)))


def _method_of(translator: Any, *names: str) -> Any:
    for name in names:
        method = getattr(translator, name, None)
        if callable(method):
            return method
    return None


def _enum(kind: type[enum.Enum], value: Any, method: str) -> Any:
    """``value`` as a member of ``kind``: a member, or its name (as Flux gives a Java enum)."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str) and value in kind.__members__:
        return kind[value]
    names = ", ".join(kind.__members__)
    raise UnsupportedKafkaSetting(f"{method}({value!r}): squall's Kafka spout has the {kind.__name__}s {names}"
                                  + (" (no TIMESTAMP strategies: squall starts from committed, earliest or "
                                     "latest offsets only)" if "TIMESTAMP" in str(value) else ""))


def _millis(value: Any, method: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnsupportedKafkaSetting(f"{method}({value!r}): expected a whole number of milliseconds >= 0")
    return value


def _topics(args: Iterable[Any]) -> tuple[str, ...]:
    """Storm's ``String... topics`` or ``Set<String> topics`` (Flux gives a list) as a tuple of names."""
    out: list[str] = []
    for arg in args:
        if isinstance(arg, re.Pattern):
            raise UnsupportedKafkaSetting("Builder(bootstrapServers, Pattern): squall's Kafka spout subscribes "
                                          "to named topics only, not a topic pattern")
        items = [arg] if isinstance(arg, str) else list(arg)
        for item in items:
            if not isinstance(item, str) or not item:
                raise UnsupportedKafkaSetting(f"Builder(bootstrapServers, topics...): a topic is a name, got {item!r}")
            out.append(item)
    return tuple(out)


class Builder:
    """storm-kafka-client's ``KafkaSpoutConfig.Builder(bootstrapServers, topics...)``: each setter
    (Storm's camelCase name; squall.flux also finds these snake_case ones) keeps its setting as
    Storm's does; `build` gives squall's `KafkaSpoutConfig` with the same meaning. Defaults are
    Storm's. ``new Builder(...)`` sets no deserializers (the record's key and value stay bytes);
    `KafkaSpoutConfig.builder` sets Storm's ``StringDeserializer`` for both."""

    def __init__(self, bootstrap_servers: str, *topics: str | Sequence[str]) -> None:
        if not isinstance(bootstrap_servers, str) or not bootstrap_servers:
            raise UnsupportedKafkaSetting("Builder(bootstrapServers, topics...): bootstrap servers cannot be empty")
        self.bootstrap_servers = bootstrap_servers
        self.topics = _topics(topics)
        if not self.topics:
            raise UnsupportedKafkaSetting("Builder(bootstrapServers, topics...): at least one topic is needed")
        self.props: dict[str, Any] = {}
        self.group_id: str | None = None
        self.first_poll_offset_strategy = FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST
        self.processing_guarantee = ProcessingGuarantee.AT_LEAST_ONCE
        self.offset_commit_period_ms = 30_000
        self.max_uncommitted_offsets = 10_000_000
        self.poll_timeout_ms = 200
        self.partition_refresh_period_ms = 2_000
        self.retry = RetryBackoff()
        self.emit_null_tuples = False
        self.tuple_tracking_enforced = False
        self.translator: Callable[[Record], list | None] | None = None
        self.output_fields: tuple[str, ...] = ("topic", "partition", "offset", "key", "value")

    # --- consumer properties -------------------------------------------------------------------
    def set_prop(self, key: str | Mapping[str, Any], value: Any = None) -> Builder:
        """``setProp(key, value)``, ``setProp(Map)`` or ``setProp(Properties)``: consumer properties.
        ``key.deserializer``/``value.deserializer`` name one of `DESERIALIZERS`; ``group.id`` is the
        group; the rest go to librdkafka, which reads Kafka's property names."""
        pairs = list(key.items()) if isinstance(key, Mapping) else [(key, value)]
        for name, val in pairs:
            if not isinstance(name, str):
                raise UnsupportedKafkaSetting(f"setProp: Kafka consumer property keys must be strings, got {name!r}")
            why = _NO_EQUIVALENT.get(name)
            if why is not None:
                raise UnsupportedKafkaSetting(f"setProp({name!r}, {val!r}): {why}")
            if name in ("key.deserializer", "value.deserializer"):
                class_name = getattr(val, "__name__", val)
                if class_name not in DESERIALIZERS:
                    raise UnsupportedKafkaSetting(
                        f"setProp({name!r}, {val!r}): squall reads records with Kafka's "
                        f"{', '.join(c.rsplit('.', 1)[1] for c in DESERIALIZERS)} only (a Java deserializer "
                        f"cannot run here; read the bytes in a record translator)")
                val = class_name
            self.props[name] = val
        return self

    def set_group_id(self, group_id: str) -> Builder:
        """``setGroupId``: the consumer group (wins over a ``group.id`` property, as in Storm)."""
        self.group_id = group_id
        return self

    # --- spout settings ------------------------------------------------------------------------
    def set_first_poll_offset_strategy(self, strategy: Any) -> Builder:
        """``setFirstPollOffsetStrategy``: EARLIEST, LATEST, UNCOMMITTED_EARLIEST or UNCOMMITTED_LATEST."""
        self.first_poll_offset_strategy = _enum(FirstPollOffsetStrategy, strategy, "setFirstPollOffsetStrategy")
        return self

    def set_processing_guarantee(self, guarantee: Any) -> Builder:
        """``setProcessingGuarantee``: AT_LEAST_ONCE, AT_MOST_ONCE or NO_GUARANTEE."""
        chosen = _enum(ProcessingGuarantee, guarantee, "setProcessingGuarantee")
        self._check_tracking(chosen, self.tuple_tracking_enforced, "setProcessingGuarantee")
        self.processing_guarantee = chosen
        return self

    def set_offset_commit_period_ms(self, ms: int) -> Builder:
        """``setOffsetCommitPeriodMs``: how often acked offsets are committed."""
        self.offset_commit_period_ms = _millis(ms, "setOffsetCommitPeriodMs")
        return self

    def set_max_uncommitted_offsets(self, n: int) -> Builder:
        """``setMaxUncommittedOffsets``: per partition, how many polled offsets may await a commit."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UnsupportedKafkaSetting(f"setMaxUncommittedOffsets({n!r}): expected a whole number >= 1")
        self.max_uncommitted_offsets = n
        return self

    def set_poll_timeout_ms(self, ms: int) -> Builder:
        """``setPollTimeoutMs``: how long a poll waits for records."""
        self.poll_timeout_ms = _millis(ms, "setPollTimeoutMs")
        return self

    def set_partition_refresh_period_ms(self, ms: int) -> Builder:
        """``setPartitionRefreshPeriodMs``: how often the topics' partitions are listed again."""
        self.partition_refresh_period_ms = _millis(ms, "setPartitionRefreshPeriodMs")
        return self

    def set_retry(self, retry: RetryBackoff) -> Builder:
        """``setRetry(KafkaSpoutRetryExponentialBackoff)`` (or squall's `RetryBackoff`): when a failed
        record is emitted again. A retry service of another kind has no equivalent."""
        if not isinstance(retry, RetryBackoff):
            raise UnsupportedKafkaSetting(
                f"setRetry({type(retry).__name__}): squall's Kafka spout retries by "
                f"KafkaSpoutRetryExponentialBackoff (squall.external.retry.RetryBackoff) only")
        self.retry = retry
        return self

    def set_emit_null_tuples(self, emit: bool) -> Builder:
        """``setEmitNullTuples``: a record the translator returns null for is emitted (every field
        None) rather than acked at once."""
        self.emit_null_tuples = bool(emit)
        return self

    def set_tuple_tracking_enforced(self, enforced: bool) -> Builder:
        """``setTupleTrackingEnforced``: false (Storm's default), or true under AT_LEAST_ONCE, which
        tracks every tuple anyway; true under another guarantee has no equivalent."""
        self._check_tracking(self.processing_guarantee, bool(enforced), "setTupleTrackingEnforced")
        self.tuple_tracking_enforced = bool(enforced)
        return self

    @staticmethod
    def _check_tracking(guarantee: ProcessingGuarantee, enforced: bool, method: str) -> None:
        if enforced and guarantee is not ProcessingGuarantee.AT_LEAST_ONCE:
            raise UnsupportedKafkaSetting(
                f"{method}: tuple tracking enforced with {guarantee.value}: squall's Kafka spout emits "
                f"without message ids under {guarantee.value}, so it cannot track them (use AT_LEAST_ONCE)")

    def set_record_translator(self, translator: Any, fields: Fields | Sequence[str] | None = None,
                              stream: str = DEFAULT_STREAM) -> Builder:
        """``setRecordTranslator(RecordTranslator)``: an object with Storm's ``apply(record)`` and
        ``getFieldsFor(stream)`` (or ``get_fields_for``), on the default stream; or
        ``setRecordTranslator(func, fields[, stream])``. The record is squall's
        `squall.external.kafka.Record`."""
        if stream != DEFAULT_STREAM:
            raise UnsupportedKafkaSetting(f"setRecordTranslator(..., stream={stream!r}): squall's Kafka spout "
                                          f"emits on the default stream only")
        if fields is not None:
            if not callable(translator):
                raise UnsupportedKafkaSetting(f"setRecordTranslator(func, fields): {translator!r} is not callable")
            self.translator, self.output_fields = translator, tuple(fields)
            return self
        apply = _method_of(translator, "apply")
        fields_for = _method_of(translator, "getFieldsFor", "get_fields_for")
        if apply is None or fields_for is None:
            raise UnsupportedKafkaSetting(f"setRecordTranslator({type(translator).__name__}): a RecordTranslator "
                                          f"has apply(record) and getFieldsFor(stream)")
        streams_of = _method_of(translator, "streams")
        streams = list(streams_of()) if streams_of is not None else [DEFAULT_STREAM]
        if streams != [DEFAULT_STREAM]:
            raise UnsupportedKafkaSetting(f"setRecordTranslator({type(translator).__name__}): it emits on the "
                                          f"streams {streams}; squall's Kafka spout emits on the default stream only")
        self.translator, self.output_fields = apply, tuple(fields_for(DEFAULT_STREAM))
        return self

    # --- what squall has no equivalent of: refused, with why -----------------------------------------
    def set_tuple_listener(self, listener: Any) -> Builder:
        """``setTupleListener``: refused; squall's Kafka spout has no KafkaTupleListener hooks."""
        raise UnsupportedKafkaSetting("setTupleListener: squall's Kafka spout has no KafkaTupleListener hooks "
                                      "(a bolt downstream sees every tuple; ack/fail are in the spout's metrics)")

    def set_metrics_time_bucket_size_in_secs(self, secs: int) -> Builder:
        """``setMetricsTimeBucketSizeInSecs``: refused; the spout's metrics follow the topology's own."""
        raise UnsupportedKafkaSetting("setMetricsTimeBucketSizeInSecs: squall's Kafka spout reports in the "
                                      "topology's metrics interval (topology.builtin.metrics.bucket.size.secs)")

    def set_start_time_stamp(self, timestamp: int) -> Builder:
        """``setStartTimeStamp``: refused; squall has no TIMESTAMP first-poll strategies."""
        raise UnsupportedKafkaSetting("setStartTimeStamp: squall's Kafka spout has no TIMESTAMP or "
                                      "UNCOMMITTED_TIMESTAMP first-poll strategy to start from a time")

    # --- the config ------------------------------------------------------------------------------------
    def build(self) -> KafkaSpoutConfig:
        """``build()``: the `KafkaSpoutConfig` of these settings."""
        return KafkaSpoutConfig(self)


_Builder = Builder  # the annotations' name: KafkaSpoutConfig.Builder (Storm's nested name) shadows Builder there


class KafkaSpoutConfig(_SquallConfig):
    """storm-kafka-client's ``KafkaSpoutConfig``: ``new KafkaSpoutConfig(builder)`` (Flux's
    constructorArgs ``[ref: builder]``) or ``builder.build()``; ``KafkaSpoutConfig.builder(...)``
    and ``KafkaSpoutConfig$Builder``. It is squall's `squall.external.kafka.KafkaSpoutConfig`.

    The group is ``setGroupId``'s, else the ``group.id`` property, else (Storm's example files set
    none) ``storm-kafka-spout-`` followed by the topics, logged; ``bootstrap.servers`` set as a
    property wins over the constructor's, as in Storm."""

    Builder = Builder

    def __init__(self, builder: _Builder) -> None:
        if not isinstance(builder, _Builder):
            raise UnsupportedKafkaSetting(f"KafkaSpoutConfig(builder): expected a KafkaSpoutConfig$Builder, "
                                          f"got {type(builder).__name__}")
        props = dict(builder.props)
        key = DESERIALIZERS[props.pop("key.deserializer", "org.apache.kafka.common.serialization."
                                                          "ByteArrayDeserializer")]
        value = DESERIALIZERS[props.pop("value.deserializer", "org.apache.kafka.common.serialization."
                                                              "ByteArrayDeserializer")]
        bootstrap = props.pop("bootstrap.servers", builder.bootstrap_servers)
        group = builder.group_id or props.pop("group.id", None)
        props.pop("group.id", None)
        if not group:
            group = "storm-kafka-spout-" + "-".join(builder.topics)
            log.warning("KafkaSpoutConfig: no group.id set; the consumer group is %r", group)
        translator = builder.translator or _default_translator
        super().__init__(
            bootstrap_servers=bootstrap, topics=list(builder.topics), group_id=group,
            processing_guarantee=builder.processing_guarantee,
            first_poll_offset_strategy=builder.first_poll_offset_strategy,
            offset_commit_period_ms=builder.offset_commit_period_ms,
            max_uncommitted_offsets=builder.max_uncommitted_offsets,
            poll_timeout_ms=builder.poll_timeout_ms, retry=builder.retry,
            partition_refresh_period_ms=builder.partition_refresh_period_ms,
            translator=Deserializing(translator, key, value), output_fields=list(builder.output_fields),
            emit_null_tuples=builder.emit_null_tuples, props=props)

    @staticmethod
    def builder(bootstrap_servers: str, *topics: str | Sequence[str]) -> _Builder:
        """``KafkaSpoutConfig.builder(bootstrapServers, topics...)``: a `Builder` reading keys and
        values as strings (Storm's ``StringDeserializer``)."""
        string = "org.apache.kafka.common.serialization.StringDeserializer"
        return _Builder(bootstrap_servers, *topics).set_prop({"key.deserializer": string, "value.deserializer": string})


def _default_translator(record: Record) -> list:
    """storm-kafka-client's ``DefaultRecordTranslator``: topic, partition, offset, key, value."""
    return [record.topic, record.partition, record.offset, record.key, record.value]


# --- KafkaSpoutRetryExponentialBackoff and its TimeInterval ----------------------------------------
_UNIT_SECONDS = {"NANOSECONDS": 1e-9, "MICROSECONDS": 1e-6, "MILLISECONDS": 1e-3, "SECONDS": 1.0,
                 "MINUTES": 60.0, "HOURS": 3600.0, "DAYS": 86400.0}


@dataclass(frozen=True)
class TimeInterval:
    """``KafkaSpoutRetryExponentialBackoff.TimeInterval(length, timeUnit)``, the unit a
    ``java.util.concurrent.TimeUnit`` name; or its ``seconds``/``milliSeconds``/``microSeconds`` factories."""

    length: int
    time_unit: str

    def __post_init__(self) -> None:
        if self.time_unit not in _UNIT_SECONDS:
            raise UnsupportedKafkaSetting(f"TimeInterval({self.length!r}, {self.time_unit!r}): the unit is a "
                                          f"TimeUnit name: {', '.join(_UNIT_SECONDS)}")

    @property
    def total_seconds(self) -> float:
        """The interval in seconds."""
        return self.length * _UNIT_SECONDS[self.time_unit]

    @classmethod
    def seconds(cls, length: int) -> TimeInterval:
        """``TimeInterval.seconds(length)``."""
        return cls(length, "SECONDS")

    @classmethod
    def milli_seconds(cls, length: int) -> TimeInterval:
        """``TimeInterval.milliSeconds(length)``."""
        return cls(length, "MILLISECONDS")

    @classmethod
    def micro_seconds(cls, length: int) -> TimeInterval:
        """``TimeInterval.microSeconds(length)``."""
        return cls(length, "MICROSECONDS")


_JAVA_INT_MAX = 2**31 - 1
_TimeInterval = TimeInterval  # the annotations' name, as _Builder


class KafkaSpoutRetryExponentialBackoff(RetryBackoff):
    """``new KafkaSpoutRetryExponentialBackoff(initialDelay, delayPeriod, maxRetries, maxDelay)``
    (TimeIntervals; ``Integer.MAX_VALUE`` retries: no limit): squall's `RetryBackoff`."""

    TimeInterval = TimeInterval

    def __init__(self, initial_delay: _TimeInterval, delay_period: _TimeInterval, max_retries: int,
                 max_delay: _TimeInterval) -> None:
        for name, interval in (("initialDelay", initial_delay), ("delayPeriod", delay_period),
                               ("maxDelay", max_delay)):
            if not isinstance(interval, _TimeInterval):
                raise UnsupportedKafkaSetting(f"KafkaSpoutRetryExponentialBackoff: {name} is a TimeInterval, "
                                              f"got {interval!r}")
        super().__init__(initial_delay=initial_delay.total_seconds, delay_period=delay_period.total_seconds,
                         max_retries=None if max_retries == _JAVA_INT_MAX else max_retries,
                         max_delay=max_delay.total_seconds)


class OnlyValueRecordTranslator:
    """Storm's flux-examples ``OnlyValueRecordTranslator``: the record's value, as the field ``value``."""

    def apply(self, record: Record) -> list:
        """The tuple: the value alone."""
        return [record.value]

    def get_fields_for(self, stream: str) -> Fields:
        """``value``."""
        return Fields(["value"])
