"""The topology of tests/process/test_kafka_spout_sigkill.py: a `KafkaSpout` (one task, a retry
limit) over a topic of numbered values, and `CountAtCheckpoint`, a stateful bolt, in one worker.
A stateful bolt's acks take effect at its next checkpoint's commit, so each round of tuple
trees the spout waits for (a group of suspects, or one alone) takes a checkpoint: the bolt notes
each value it executes in ``seen`` and, at each PREPARE, how many it takes along (the tuples the
COMMIT then acks) in ``rounds``, with its worker's pid, so that the test counts the rounds of
each life of the worker."""

from __future__ import annotations

import os
import time
from pathlib import Path

from squall import BaseStatefulBolt, Config, TopologyBuilder
from squall.external.kafka import KafkaSpout, KafkaSpoutConfig, RetryBackoff

from ..external.poison_file_fail_fast import lines, note
from ..external.poison_kafka_exit import DeadLetters
from ..kafka_broker import utf8_value

TOPIC, GROUP = "slow-acks", "slow-acks-group"
CHECKPOINT_MS = 100


class CountAtCheckpoint(BaseStatefulBolt):
    """Counts what it executes in its state; notes each value in ``seen`` and, at each PREPARE
    that takes tuples along, ``"<pid> <how many> <time>"`` in ``rounds``."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def init_state(self, state) -> None:
        self.state = state
        self.since = 0

    def execute(self, tup) -> None:
        self.state.put("n", self.state.get("n", 0) + 1)
        note(os.path.join(self.notes, "seen"), tup.values[0])
        self.since += 1
        self.collector.ack(tup)   # it takes effect at the next commit

    def pre_prepare(self, txid: int) -> None:
        if self.since:
            note(os.path.join(self.notes, "rounds"), f"{os.getpid()} {self.since} {time.time():.3f}")
        self.since = 0


def topology(bootstrap: str, notes: Path):
    """The spout (max_retries 3, nothing dead-lettered expected: the notes' ``dead``) and the bolt."""
    config = KafkaSpoutConfig(bootstrap, [TOPIC], GROUP, offset_commit_period_ms=100, poll_timeout_ms=50,
                              retry=RetryBackoff(0.0, 0.001, 3, 0.01), translator=utf8_value,
                              output_fields=["value"], props={"log_level": 0, "fetch.wait.max.ms": 20},
                              dead_letter=DeadLetters(str(notes / "dead")))
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(config))
    b.set_bolt("count", CountAtCheckpoint(str(notes)), 1).shuffle_grouping("kafka")
    return b.create_topology()


def conf(max_pending: int) -> Config:
    c = Config()
    c.set_num_workers(1)   # the spout and the bolt die together
    c.set_max_spout_pending(max_pending)
    c.set_message_timeout_secs(300)   # no failure but the kill
    c["topology.state.checkpoint.interval.ms"] = CHECKPOINT_MS
    return c


def rounds(notes: Path) -> list[tuple[int, int, float]]:
    """(pid, tuples taken along, time) of each PREPARE that took some, in order."""
    return [(int(p), int(n), float(t)) for p, n, t in (x.split() for x in lines(notes / "rounds"))]
