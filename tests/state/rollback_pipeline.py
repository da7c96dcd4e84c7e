"""The pipeline of the rollback tests: a Redis Streams spout (``max_retries``, a dead-letter
stream) -> `CountEvents`, a stateful bolt keeping its counts in Redis that raises on a malformed
record -> a Redis sink. Good records carry a number; bad ones carry ``MALFORMED``."""

from __future__ import annotations

import json

from squall import BaseStatefulBolt, Fields, TopologyBuilder
from squall.external.redis_streams import ExponentialBackoff, RedisStreamSinkBolt, RedisStreamSpout

MALFORMED = "not-a-number"
PROVIDER = "squall.state.redis:RedisKeyValueStateProvider"
KEYS = 7


class CountEvents(BaseStatefulBolt):
    """Counts each record once per key, in its state, and emits (id, key, count), anchored.

    It adds the record to its key's count first, then reads the payload: a malformed one raises
    ValueError after the state changed, which the crash (the default fail-fast) rolls back. The
    state keeps the ids counted (``("seen", id)``), committed with the counts, so a record
    replayed after its commit is not counted again (Storm's state is at-least-once: a record
    whose commit went through and whose ack was lost replays)."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "key", "count"))

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        entry, key = tup["id"], tup["key"]
        if self.state.get(("seen", entry)) is None:
            count = self.state.get(("count", key), 0) + 1
            self.state.put(("count", key), count)
            int(tup["payload"])  # ValueError on a malformed record, after the state changed
            self.state.put(("seen", entry), True)
        self.collector.emit([entry, key, self.state.get(("count", key))], tup)
        self.collector.ack(tup)


def feed(client, stream: str, n: int, bad_at: list[int]) -> tuple[list[str], list[str]]:
    """XADDs ``n`` records to ``stream``, the ones at ``bad_at`` malformed: (good ids, bad ids)."""
    good, bad = [], []
    client.xgroup_create(stream, "g", id="0", mkstream=True)  # the spout's group, reading from the start
    pipe = client.pipeline()
    for i in range(n):
        pipe.xadd(stream, {"key": f"k{i % KEYS}", "payload": MALFORMED if i in bad_at else str(i)})
    for i, entry in enumerate(pipe.execute()):
        (bad if i in bad_at else good).append(entry)
    return good, bad


def expected_counts(n: int, bad_at: list[int]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in range(n):
        if i not in bad_at:
            counts[f"k{i % KEYS}"] = counts.get(f"k{i % KEYS}", 0) + 1
    return counts


def pipeline(url: str, max_retries: int = 3, counter: BaseStatefulBolt | None = None):
    b = TopologyBuilder()
    b.set_spout("events", RedisStreamSpout(url, "events", "g", ["key", "payload"], batch_size=50,
                                           backoff=ExponentialBackoff(initial_delay=0.01, max_delay=0.05,
                                                                      max_retries=max_retries)), 1)
    b.set_bolt("count", counter or CountEvents(), 2).fields_grouping("events", ["key"])
    b.set_bolt("sink", RedisStreamSinkBolt(url, "out", mode="hash", id_field="id"), 1).shuffle_grouping("count")
    return b.create_topology()


def conf(url: str, **extra) -> dict:
    return {"topology.state.provider": PROVIDER, "topology.state.provider.config": {"url": url},
            "topology.state.checkpoint.interval.ms": 200, "topology.message.timeout.secs": 30,
            "topology.workers": 2, **extra}


def dead_letters(client) -> dict[str, dict]:
    """id -> the dead letter (error, cause) of each entry in ``events:dead``."""
    return {d["id"]: {"error": d["error"], "cause": json.loads(d["cause"]) if "cause" in d else None,
                      "fields": json.loads(d["fields"])}
            for _, d in client.xrange("events:dead")}


class FlakyPrepare(CountEvents):
    """`CountEvents` whose ``pre_prepare`` raises at its first ``times`` prepares that have
    changes to prepare (a store that refuses a write a few times): each fails the checkpoint, so
    the state rolls back and every record it took since its last commit is failed and replays."""

    def __init__(self, times: int) -> None:
        self.times = times

    def pre_prepare(self, txid):
        if self.times > 0 and self.state._pending:
            self.times -= 1
            raise ConnectionError(f"the store refused prepare {txid} (on purpose)")
