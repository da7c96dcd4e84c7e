"""The chaos run's two topologies over one Redis stream ``events`` (see chaos.py).

Records: ``{"key": "k<i % KEYS>", "payload": "{\"n\": i}"}`` with ids ``<i+1>-1``. Two kinds of
malformed record among them:
- NOKEY: no ``key`` field: the spout's translator refuses it (dead-lettered at once,
  ``missing field 'key'``); the Trident spout gives it up too (``unreadable``);
- BADJSON: a payload that is not JSON: ``parse`` raises on it, so it is charged, retried 3 times
  and dead-lettered with its cause (``failed 4 times (max_retries 3); last: exception in
  [parse] ...``); the Trident stream filters it out.

Plain: spout -> parse -> count (stateful, fields-grouped, Redis state, counts each id once:
``("seen", id)`` is committed with the counts) -> sink (hash ``out:<id>``).
Trident: RedisStreamTridentSpout -> parse-or-drop -> group_by key -> persistent_aggregate into a
transactional RedisMapState on db 1.
"""

from __future__ import annotations

import json

from squall import BaseStatefulBolt, Bolt, Fields, TopologyBuilder
from squall.external.redis_streams import RedisStreamSinkBolt, RedisStreamSpout
from squall.external.retry import RetryBackoff
from squall.external.trident_redis import RedisMapState
from squall.external.trident_redis_streams import RedisStreamTridentSpout
from squall.trident import BaseFunction, TridentTopology
from squall.trident.builtin import Count

KEYS = 11
STREAM = "events"
GROUP = "chaos"
PROVIDER = "squall.state.redis:RedisKeyValueStateProvider"


class Parse(Bolt):
    """JSON payload -> n; raises on a payload that is not JSON (charged to the record)."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "key", "n"))

    def execute(self, tup):
        n = json.loads(tup["payload"])["n"]
        self.collector.emit([tup["id"], tup["key"], n], tup)
        self.collector.ack(tup)


class CountPerKey(BaseStatefulBolt):
    """Counts each id once per key; emits (id, key, count) anchored."""

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "key", "count"))

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        entry, key = tup["id"], tup["key"]
        if self.state.get(("seen", entry)) is None:
            self.state.put(("count", key), self.state.get(("count", key), 0) + 1)
            self.state.put(("seen", entry), True)
        self.collector.emit([entry, key, self.state.get(("count", key))], tup)
        self.collector.ack(tup)


def plain_topology(url: str, spouts: int = 2):
    b = TopologyBuilder()
    b.set_spout("events", RedisStreamSpout(url, STREAM, GROUP, ["key", "payload"], batch_size=50,
                                           backoff=RetryBackoff(max_retries=3)), spouts)
    b.set_bolt("parse", Parse(), 2).shuffle_grouping("events")
    b.set_bolt("count", CountPerKey(), 3).fields_grouping("parse", ["key"])
    b.set_bolt("sink", RedisStreamSinkBolt(url, "out", mode="hash", id_field="id"), 2).shuffle_grouping("count")
    return b.create_topology()


def plain_conf(url: str, workers: int = 3, **extra) -> dict:
    return {"topology.workers": workers, "topology.state.provider": PROVIDER,
            "topology.state.provider.config": {"url": url},
            "topology.state.checkpoint.interval.ms": 500, "topology.message.timeout.secs": 8,
            "topology.max.spout.pending": 100, "topology.stats.sample.rate": 1.0, **extra}


class ParseOrDrop(BaseFunction):
    def execute(self, tuple, collector):
        try:
            n = json.loads(tuple[0])["n"]
        except ValueError:
            return  # a malformed payload: not counted
        collector.emit([n])


def trident_state_url(url: str) -> str:
    return url.rsplit("/", 1)[0] + "/1"


def trident_topology(url: str):
    topo = TridentTopology()
    (topo.new_stream("tev", RedisStreamTridentSpout(url, [STREAM], ["key", "payload"], max_batch_entries=200))
        .parallelism_hint(1)
        .each(Fields("payload"), ParseOrDrop(), Fields("n"))
        .group_by(Fields("key"))
        .persistent_aggregate(RedisMapState.transactional(trident_state_url(url)), Count(), Fields("count"))
        .parallelism_hint(2))
    return topo.build()


def trident_conf(workers: int = 2, **extra) -> dict:
    return {"topology.workers": workers, "topology.message.timeout.secs": 8,
            "topology.max.spout.pending": 3, "topology.trident.batch.emit.interval.millis": 200,
            "topology.stats.sample.rate": 1.0, **extra}
