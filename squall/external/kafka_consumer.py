"""The Kafka consumer a `squall.external.kafka.KafkaSpout` drives: the records and partitions it
speaks of, the `Consumer` protocol (manual assignment, no auto commit: what storm-kafka-client's
spout asks of ``KafkaConsumer``; tests drive the spout over an in-memory one), and
`ConfluentConsumer`, that protocol over ``confluent_kafka``, imported only when a spout opens, so
this module imports without it (``pip install 'squall[kafka]'``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

log = logging.getLogger("squall.external.kafka")


class TopicPartition(NamedTuple):
    """A partition of a topic; sorts by (topic, partition) as storm-kafka-client's assignment."""

    topic: str
    partition: int


class Record(NamedTuple):
    """One consumed record. ``timestamp``: the record's Kafka timestamp in ms (its producer's
    create time, or the broker's log append time, as the topic keeps it), None if it has none."""

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    timestamp: int | None = None

    @property
    def tp(self) -> TopicPartition:
        """The record's partition."""
        return TopicPartition(self.topic, self.partition)


class Committed(NamedTuple):
    """A committed offset read back from Kafka, with its commit metadata (a JSON string)."""

    offset: int
    metadata: str | None = None


class PartitionListing(list[TopicPartition]):
    """What `Consumer.partitions_for` returns: the partitions found, as a list, and ``errors``:
    for each topic that has none (it does not exist, or its metadata came back with an error),
    why, as Kafka said it. A plain list of partitions is a listing without reasons."""

    def __init__(self, partitions: Iterable[TopicPartition] = (),
                 errors: Mapping[str, str] | None = None) -> None:
        super().__init__(partitions)
        self.errors: dict[str, str] = dict(errors or {})


class Consumer(Protocol):
    """What the spout needs from a Kafka consumer (manual assignment, no auto commit)."""

    def partitions_for(self, topics: Sequence[str]) -> list[TopicPartition]:
        """All partitions of ``topics`` that exist. A topic that does not exist or whose
        metadata has an error has none (a `PartitionListing` may say why); `KafkaUnavailable`
        only if a metadata request itself failed (the broker did not answer)."""

    def assign(self, added: Mapping[TopicPartition, int], revoked: Sequence[TopicPartition]) -> None:
        """Stops reading ``revoked``; starts reading each of ``added`` at its offset."""

    def committed(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, Committed | None]:
        """The group's committed offsets."""

    def watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        """(beginning, end) offsets of ``tp``."""

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Next poll of ``tp`` starts at ``offset``."""

    def position(self, tp: TopicPartition) -> int | None:
        """The offset the next poll of ``tp`` starts at, if known."""

    def poll(self, timeout: float, paused: Sequence[TopicPartition]) -> list[Record]:
        """Records of the assigned partitions except ``paused``, waiting up to ``timeout`` s."""

    # Optional (the spout asks with getattr): a consumer without it never tells a partition at its
    # end, so the spout merges the partitions' waiting records in event time without waiting for
    # a partition that has none (`squall.external.kafka.EventTimeMerge`).
    # def end_offset(self, tp: TopicPartition) -> int | None:
    #     """``tp``'s end (high watermark) as the consumer last heard it, without a request; None
    #     if it has not heard yet."""

    def commit(self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str]) -> None:
        """Commits ``offsets`` synchronously, each partition with its ``metadata`` text."""

    def close(self) -> None:
        """Leaves; the commits stay."""


class KafkaUnavailable(Exception):
    """The broker cannot be reached or refused a request; the spout logs it and tries later."""


BROKER_WAIT_MS = 2_000
"""How long a commit or a listing of the topics' partitions, the requests a running spout makes,
waits for the broker before it fails: a commit waits this long for the group's coordinator
(librdkafka's ``session.timeout.ms``, which `ConfluentConsumer` sets to it unless the properties
do), a listing for its metadata answer."""


def _librdkafka_props(props: Mapping[str, Any]) -> dict[str, Any]:
    """``props`` as `ConfluentConsumer` hands them to librdkafka: ``session.timeout.ms``
    `BROKER_WAIT_MS` unless they set it, and ``group.protocol`` other than ``classic`` dropped,
    with a warning. librdkafka refuses ``session.timeout.ms`` with ``group.protocol=consumer``
    (KIP-848's protocol: "Failed to create consumer: `session.timeout.ms` is not supported"), so
    a user's props carrying it crashed every spout task at open (0 of 400 records read, where
    they were all read before the 2 s wait was set); and under that protocol a commit during an
    outage waited past 4 minutes (measured with librdkafka 2.16). The spout assigns its
    partitions itself and never joins the group, so the protocol decides nothing else for it,
    as ``enable.auto.commit`` decides nothing (`KafkaSpoutConfig.consumer_props`)."""
    out = dict(props)
    protocol = out.get("group.protocol")
    if protocol is not None and str(protocol).lower() != "classic":
        del out["group.protocol"]
        log.warning("KafkaSpout: group.protocol=%s ignored: the spout assigns its partitions itself and never "
                    "joins the group, and under that protocol librdkafka refuses session.timeout.ms, which "
                    "bounds a commit's wait for an unreachable broker (%d ms)", protocol, BROKER_WAIT_MS)
    out.setdefault("session.timeout.ms", BROKER_WAIT_MS)
    return out


class ConfluentConsumer:
    """`Consumer` over ``confluent_kafka.Consumer`` (imported here, lazily).

    A commit is synchronous, and librdkafka's waits for the group coordinator with no timeout of
    its own: while the broker is down it fails only after ``session.timeout.ms`` (45 s by default),
    measured 45.5 s, all of it inside the spout's ``next_tuple``, so the spout neither emitted nor
    took an ack, the outage was named nowhere, and the worker reported the spout stuck in user code
    after the message timeout. The consumer never joins the group (manual assignment: no
    heartbeats, no session), so ``session.timeout.ms`` bounds nothing else: it is `BROKER_WAIT_MS`
    (a failed commit is then the spout's "broker unavailable", retried every ``down_retry_secs``),
    unless the properties set it. The partitions' listing waits as long (it waited 5 s). The
    group protocol is the classic one whatever the properties say (`_librdkafka_props`)."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        import confluent_kafka as ck

        self._ck = ck
        self._c = ck.Consumer(_librdkafka_props(props))

    def _tps(self, tps, offsets=None):
        ck = self._ck
        if offsets is None:
            return [ck.TopicPartition(t.topic, t.partition) for t in tps]
        return [ck.TopicPartition(t.topic, t.partition, offsets[t]) for t in tps]

    def _call(self, what: str, f, *args, **kwargs):
        try:
            return f(*args, **kwargs)
        except self._ck.KafkaException as e:
            raise KafkaUnavailable(f"{what}: {e}") from e

    def partitions_for(self, topics):
        """See `Consumer`. One metadata request per topic (librdkafka asks for one topic or
        for all of the cluster's); an error in a topic's answer (UNKNOWN_TOPIC_OR_PART for a
        topic not created yet) is that topic's, in the listing's ``errors``, not an outage."""
        out = PartitionListing()
        for topic in topics:
            md = self._call(f"metadata of topic {topic!r}", self._c.list_topics, topic,
                            timeout=BROKER_WAIT_MS / 1000)
            t = md.topics.get(topic)
            if t is None or t.error is not None:
                out.errors[topic] = str(t.error) if t is not None else "not in the broker's answer"
                continue
            out += [TopicPartition(topic, p) for p in t.partitions]
        return out

    def assign(self, added, revoked):
        """See `Consumer`."""
        if revoked:
            self._call("unassign", self._c.incremental_unassign, self._tps(revoked))
        if added:
            self._call("assign", self._c.incremental_assign, self._tps(list(added), added))

    def committed(self, tps):
        """See `Consumer`."""
        got = self._call("committed offsets", self._c.committed, self._tps(tps), timeout=10)
        return {TopicPartition(t.topic, t.partition):
                (Committed(t.offset, t.metadata) if t.offset >= 0 else None) for t in got}

    def watermarks(self, tp):
        """See `Consumer`."""
        return self._call(f"watermarks of {tp}", self._c.get_watermark_offsets,
                          self._tps([tp])[0], timeout=10)

    def seek(self, tp, offset):
        """See `Consumer`. A partition whose fetch has not started refuses a seek: it is
        re-assigned at ``offset`` instead."""
        target = self._ck.TopicPartition(tp.topic, tp.partition, offset)
        try:
            self._c.seek(target)
        except self._ck.KafkaException:
            self.assign({tp: offset}, [tp])

    def position(self, tp):
        """See `Consumer`."""
        off = self._call("position", self._c.position, self._tps([tp]))[0].offset
        return off if off >= 0 else None

    def end_offset(self, tp):
        """``tp``'s high watermark as the last fetch response gave it (librdkafka's cached
        watermarks: no request); None before the first fetch of ``tp``."""
        try:
            _, hi = self._c.get_watermark_offsets(self._tps([tp])[0], cached=True)
        except self._ck.KafkaException:
            return None
        return hi if hi is not None and hi >= 0 else None

    def poll(self, timeout, paused):
        """See `Consumer`."""
        if paused:
            self._c.pause(self._tps(paused))
        try:
            msgs = self._call("poll", self._c.consume, 500, timeout)
        finally:
            if paused:
                self._c.resume(self._tps(paused))
        out, errors = [], []
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() != self._ck.KafkaError._PARTITION_EOF:
                    errors.append(err)
                continue
            kind, ts = m.timestamp()
            out.append(Record(m.topic(), m.partition(), m.offset(), m.key(), m.value(),
                              ts if kind != self._ck.TIMESTAMP_NOT_AVAILABLE else None))
        if errors and not out:
            raise KafkaUnavailable(f"poll: {errors[0]}")
        if errors:
            # the records came with them and the consumer's position is past them now: raising
            # would drop them, and the spout would commit past offsets it never emitted
            log.warning("Kafka consumer: %d records polled with errors, the first: %s", len(out), errors[0])
        return out

    def commit(self, offsets, metadata):
        """See `Consumer`."""
        ck = self._ck
        tps = [ck.TopicPartition(t.topic, t.partition, o, metadata=metadata[t])
               for t, o in offsets.items()]
        self._call("commit", self._c.commit, offsets=tps, asynchronous=False)

    def close(self):
        """See `Consumer`."""
        self._c.close()


# --- the spout --------------------------------------------------------------------------------
