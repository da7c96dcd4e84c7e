"""The topology of tests/process/test_kafka_stateful_sigkill.py: a new user's plain (non-Trident)
pipeline as docs/state.md, docs/windows.md and docs/connectors.md describe it.

    kafka (KafkaSpout, 2 tasks over the topic's 4 partitions; a malformed record goes to the dead
           letters from the translator) --fields(key)--> totals (a stateful bolt: per key the
           running total of the values, and per record how many times it was applied, in a
           KeyValueState on Redis)
                                        --fields(key)--> win (a persistent tumbling event-time
           window: per (window, key) the distinct record ids, the tuples and the sum over
           distinct ids) --shuffle--> sink (a Redis hash per (window, key), overwritten when a
           window fires again); win's late tuples --> late (noted)

Records are ``"<id>,<key>,<value>,<ts>"``; anything else is malformed. The spout notes each
tree that ends (``outcomes``: pid, ack or fail) and each dead letter (``dead``, with the pid),
so that the test checks the REST API's figures of the spout's live tasks against them."""

from __future__ import annotations

import os
from pathlib import Path

from squall import BaseStatefulBolt, BaseStatefulWindowedBolt, BasicBolt, Config, Duration, Fields, TopologyBuilder
from squall.external.kafka import KafkaSpout, KafkaSpoutConfig, MalformedRecord, Record, RetryBackoff
from squall.external.redis_streams import RedisStreamSinkBolt

from ..external.poison_file_fail_fast import note
from ..external.poison_kafka_exit import DeadLetters

TOPIC, GROUP = "events", "events-group"
REDIS_STATE = "squall.state.redis:RedisKeyValueStateProvider"
RESULTS = "win"   # the sink's hashes: win:<window start>:<key>
FIELDS = ["id", "key", "value", "ts"]


class Parse:
    """The spout's translator: ``[id, key, value, ts]``; anything else is malformed. Notes each
    id it translates in ``translated`` (at least once per emit)."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def __call__(self, record: Record) -> list:
        text = record.value.decode()
        try:
            rid, key, value, ts = text.split(",")
            out = [rid, key, int(value), int(ts)]
        except ValueError as e:
            raise MalformedRecord(f"not id,key,value,ts: {text!r} ({e})") from None
        note(os.path.join(self.notes, "translated"), rid)
        return out


class NotingKafkaSpout(KafkaSpout):
    """A `KafkaSpout` that notes ``"<pid> ack|fail <partition>:<offset>"`` in ``outcomes`` for
    each tree that ends."""

    def __init__(self, config: KafkaSpoutConfig, notes: str) -> None:
        super().__init__(config)
        self.notes = notes

    def ack(self, msg_id) -> None:
        note(os.path.join(self.notes, "outcomes"), f"{os.getpid()} ack {msg_id.partition}:{msg_id.offset}")
        super().ack(msg_id)

    def fail_with(self, msg_id, cause) -> None:
        note(os.path.join(self.notes, "outcomes"), f"{os.getpid()} fail {msg_id.partition}:{msg_id.offset}")
        super().fail_with(msg_id, cause)


class Totals(BaseStatefulBolt):
    """Per key, the running total of the values; per record id, how many times it was applied
    (``"applied:<id>"``). Notes each id it executes in ``executed``."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def init_state(self, state) -> None:
        self.state = state

    def execute(self, tup) -> None:
        rid, key, value = tup["id"], tup["key"], tup["value"]
        self.state.put(key, self.state.get(key, 0) + value)
        self.state.put(f"applied:{rid}", self.state.get(f"applied:{rid}", 0) + 1)
        note(os.path.join(self.notes, "executed"), rid)
        self.collector.ack(tup)


class Sums(BaseStatefulWindowedBolt):
    """Per (window, key): the distinct record ids, the ids of its tuples, the sum over distinct ids
    (a record replayed after its commit went through enters the window twice: docs/state.md)."""

    def execute(self, window) -> None:
        start = window.get_start_timestamp()
        by_key: dict[str, dict[str, int]] = {}
        tuples: dict[str, list[str]] = {}
        for t in window.get():
            by_key.setdefault(t["key"], {})[t["id"]] = t["value"]
            tuples.setdefault(t["key"], []).append(t["id"])
        for key, ids in sorted(by_key.items()):
            self.collector.emit([f"{start}:{key}", start, key, " ".join(sorted(ids)), " ".join(sorted(tuples[key])),
                                 sum(ids.values())])

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("wkey", "start", "key", "ids", "tuples", "sum"))


class LateNotes(BasicBolt):
    """Notes the id of each late tuple in ``late``."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def execute(self, tup, collector) -> None:
        note(os.path.join(self.notes, "late"), tup["late_tuple"]["id"])

    def declare_output_fields(self, declarer) -> None:
        pass


def topology(bootstrap: str, redis_url: str, notes: Path, window: Duration, lag: Duration):
    config = KafkaSpoutConfig(bootstrap, [TOPIC], GROUP, offset_commit_period_ms=100, poll_timeout_ms=50,
                              retry=RetryBackoff(0.0, 0.001, 3, 0.01), translator=Parse(str(notes)),
                              output_fields=FIELDS, props={"log_level": 0, "fetch.wait.max.ms": 20},
                              dead_letter=DeadLetters(str(notes / "dead")))
    b = TopologyBuilder()
    b.set_spout("kafka", NotingKafkaSpout(config, str(notes)), 2)
    b.set_bolt("totals", Totals(str(notes)), 2).fields_grouping("kafka", ["key"])
    sums = Sums().with_tumbling_window(window).with_timestamp_field("ts").with_lag(lag) \
        .with_watermark_interval(Duration.of(100)).with_late_tuple_stream("late")
    b.set_bolt("win", sums.with_persistence(), 2).fields_grouping("kafka", ["key"])
    b.set_bolt("sink", RedisStreamSinkBolt(redis_url, RESULTS, mode="hash", id_field="wkey"), 2) \
        .shuffle_grouping("win")
    b.set_bolt("late", LateNotes(str(notes))).shuffle_grouping("win", "late")
    return b.create_topology()


def conf(redis_url: str, timeout_secs: int, workers: int = 3) -> Config:
    c = Config()
    c.set_num_workers(workers)
    c.set_max_spout_pending(200)
    c.set_message_timeout_secs(timeout_secs)
    c[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 200
    c[Config.TOPOLOGY_STATE_PROVIDER] = REDIS_STATE
    c[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"url": redis_url}
    return c
