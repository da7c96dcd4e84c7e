"""The topology of tests/process/test_poison_kafka_exit.py: a `KafkaSpout` (one task, a retry
limit) over a topic of 1,000 good values and three poison ones, and a bolt that notes each value
it is given in the file ``seen``, calls ``os._exit`` on a poison one (its worker dies at once, the
spout with it, nothing failed or flushed) and appends the others to ``out``; a dead-letter place
that appends each record given up to ``dead``; and the checks of what came out."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

from squall import Bolt, Config, TopologyBuilder
from squall.external.kafka import KafkaSpout, KafkaSpoutConfig, Record, RetryBackoff
from squall.external.retry import SUSPECT_GROUPS

from ..kafka_broker import utf8_value
from . import poison_file_fail_fast
from .poison_file_fail_fast import POISON, lines, note

values = poison_file_fail_fast.values   # the good values with the poison ones among them

TOPIC, GROUP = "poison", "poison-group"
GOOD = 1000
# No retry after a death alone: each further quick crash of the worker waits 1, 2, 4 ... s
# before its restart (squall.cluster.backoff), so a poison record costs 3 crashes at most, its
# first delivery among others, one in a group of suspects (SUSPECT_GROUPS) and one alone
# (tests/external/test_kafka_deaths.py plays max_retries 3 without a cluster)
MAX_RETRIES = 0


class Exit(Bolt):
    """Notes each value in ``seen``; on a poison one notes it in ``raised`` (with 1 if the spout's
    task is in this worker, else 0) and ends the worker's process with ``os._exit``; else
    appends it to ``out`` and acks."""

    def __init__(self, notes: str) -> None:
        self.notes = notes

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        # whether the spout's task runs in this worker: then the exit takes it down too
        self.beside_spout = bool(set(context.get_this_worker_tasks()) & set(context.get_component_tasks("kafka")))

    def execute(self, tup):
        value = tup.values[0]
        note(os.path.join(self.notes, "seen"), value)
        if value in POISON:
            note(os.path.join(self.notes, "raised"), f"{value} {int(self.beside_spout)}")
            os._exit(1)   # not 3: the worker's own code for "could not start"
        note(os.path.join(self.notes, "out"), value)
        self.collector.ack(tup)


class DeadLetters:
    """A `KafkaSpoutConfig.dead_letter`: one JSON line per record given up, in ``path``, with the
    pid of the worker that gave it up."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, record: Record, reason: str) -> None:
        value = None if record.value is None else record.value.decode()
        note(self.path, json.dumps({"partition": record.partition, "offset": record.offset, "value": value,
                                    "reason": reason, "pid": os.getpid()}))


def topology(bootstrap: str, notes: Path, local: bool = False):
    """The spout and 2 tasks of the bolt (``local``: local-or-shuffle grouped)."""
    config = KafkaSpoutConfig(bootstrap, [TOPIC], GROUP, offset_commit_period_ms=100, poll_timeout_ms=50,
                              retry=RetryBackoff(0.0, 0.001, MAX_RETRIES, 0.01), translator=utf8_value,
                              output_fields=["value"], props={"log_level": 0, "fetch.wait.max.ms": 20},
                              dead_letter=DeadLetters(str(notes / "dead")))
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(config))
    bolt = b.set_bolt("check", Exit(str(notes)), 2)
    (bolt.local_or_shuffle_grouping if local else bolt.shuffle_grouping)("kafka")
    return b.create_topology()


def conf(workers: int = 2) -> Config:
    c = Config()
    c.set_num_workers(workers)
    c.set_message_timeout_secs(300)   # no failure but the deaths
    return c


def dead_letters(notes: Path) -> list[dict]:
    return [json.loads(x) for x in lines(notes / "dead")]


def done(broker, notes: Path) -> bool:
    """Every good value out, every poison one dead-lettered, every offset committed."""
    return (len(dead_letters(notes)) >= len(POISON) and len(set(lines(notes / "out"))) == GOOD
            and broker.committed(GROUP, TOPIC) == broker.end_offsets(TOPIC))


def progress(broker, notes: Path) -> str:
    return (f"{len(dead_letters(notes))} dead letters, {len(set(lines(notes / 'out')))} of {GOOD} good values "
            f"out, {len(lines(notes / 'seen'))} deliveries, {len(lines(notes / 'raised'))} exits, committed "
            f"{broker.committed(GROUP, TOPIC)} of {broker.end_offsets(TOPIC)}")


def check_outcome(notes: Path, placed: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Every good value out at least once, each poison one dead-lettered once for its death
    alone; returns the figures: duplicates out, good values delivered again, deaths."""
    out = collections.Counter(lines(notes / "out"))
    assert set(out) == {str(i) for i in range(GOOD)}   # every good value, at least once
    seen = collections.Counter(lines(notes / "seen"))
    dead = dead_letters(notes)
    assert sorted(d["value"] for d in dead) == sorted(POISON)   # never a good one, each poison once
    for d in dead:
        assert (d["partition"], d["offset"]) == placed[d["value"]]
        assert d["reason"] == (f"failed {MAX_RETRIES + 1} times (max_retries {MAX_RETRIES}): its worker died each "
                               f"of the {MAX_RETRIES + 1} times it was in flight alone"), d["reason"]
        # its deaths: one alone, one in each level's group of suspects before it goes alone
        # (SUSPECT_GROUPS), and at most one among others (none if the first death, of another
        # poison record, found it read and not yet emitted)
        grouped = len(SUSPECT_GROUPS) - 1
        assert MAX_RETRIES + 1 + grouped <= seen[d["value"]] <= MAX_RETRIES + 2 + grouped, seen
    again = {v for v, n in seen.items() if n > 1 and v not in POISON}
    return {"duplicates": sum(out.values()) - len(out), "good delivered again": len(again),
            "deaths": sum(seen[p] for p in POISON)}
