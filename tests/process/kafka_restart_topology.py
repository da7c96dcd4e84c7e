"""The topology of tests/process/test_kafka_broker_restart.py: a `KafkaSpout` (two tasks, one
partition each, committing every 200 ms) over a topic of numbered values, and `NoteSlowly`, a
bolt (two tasks) that notes each value it executes in ``seen`` and acks it 5 ms later, so that
tuples are in flight and acked offsets wait for their commit when the broker goes down; two
workers."""

from __future__ import annotations

import os
import time
from pathlib import Path

from squall import Bolt, Config, TopologyBuilder
from squall.external.kafka import KafkaSpout, KafkaSpoutConfig

from ..external.poison_file_fail_fast import note
from ..kafka_broker import utf8_value

TOPIC, GROUP, PARTITIONS = "restarted", "restarted-group", 2
ACK_AFTER_SECS = 0.005


class NoteSlowly(Bolt):
    """Notes each value in ``<notes>/seen``, then acks it after `ACK_AFTER_SECS`."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def execute(self, tup) -> None:
        note(os.path.join(self.notes, "seen"), tup.values[0])
        time.sleep(ACK_AFTER_SECS)
        self.collector.ack(tup)


def topology(bootstrap: str, notes: Path):
    """The spout (AT_LEAST_ONCE, Storm's default retry) and the bolt, shuffled."""
    config = KafkaSpoutConfig(bootstrap, [TOPIC], GROUP, offset_commit_period_ms=200,
                              translator=utf8_value, output_fields=["value"], props={"log_level": 0})
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(config), PARTITIONS)
    b.set_bolt("note", NoteSlowly(str(notes)), 2).shuffle_grouping("kafka")
    return b.create_topology()


def conf() -> Config:
    c = Config()
    c.set_num_workers(2)
    c.set_max_spout_pending(100)
    c.set_message_timeout_secs(30)
    return c
