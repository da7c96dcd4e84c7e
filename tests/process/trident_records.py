"""What tests/process/test_trident_drpc_whole_batches.py runs: records ``"key,amount"`` read from
a Redis stream by `RedisStreamTridentSpout`, parsed (a record that does not parse is counted
under ``MALFORMED``, as docs/trident.md's "Malformed records" shows), grouped by key, counted
and summed into two transactional `RedisMapState` hashes, and a DRPC function ``counts`` that
queries the counts of the keys it is given."""

from __future__ import annotations

from squall import Fields, StormTopology
from squall.external.trident_redis import Options, RedisMapState
from squall.external.trident_redis_streams import RedisStreamTridentSpout
from squall.trident import BaseFunction, TridentTopology
from squall.trident.builtin import Count, MapGet, Sum

STREAM = "records"
MALFORMED = "$malformed"
KEYS = [f"k{i}" for i in range(8)]
ROUND = len(KEYS) + 1
"""Entries a round adds (one record per key and one malformed), in one MULTI: a batch reads at
most this many entries after the last one read, so every batch is exactly one whole round."""


class Parse(BaseFunction):
    """``"key,amount"`` -> key, amount; anything else -> `MALFORMED`, 0."""

    def execute(self, tuple, collector):
        try:
            key, amount = tuple[0].split(",")
            collector.emit([key, int(amount)])
        except ValueError:
            collector.emit([MALFORMED, 0])


class Split(BaseFunction):
    def execute(self, tuple, collector):
        for word in tuple[0].split(" "):
            collector.emit([word])


def records_topology(url: str, partitions: int) -> StormTopology:
    """The topology over the Redis server at ``url``, its states in ``partitions`` partitions."""
    topology = TridentTopology()
    grouped = (topology.new_stream("records", RedisStreamTridentSpout(url, [STREAM], max_batch_entries=ROUND))
               .each(Fields("value"), Parse(), Fields("key", "amount"))
               .group_by(Fields("key")))
    counts = grouped.persistent_aggregate(RedisMapState.transactional(url, Options(data_type="hash", hash_key="counts")),
                                          Count(), Fields("count")).parallelism_hint(partitions)
    grouped.persistent_aggregate(RedisMapState.transactional(url, Options(data_type="hash", hash_key="sums")),
                                 Fields("amount"), Sum(), Fields("sum")).parallelism_hint(partitions)
    (topology.new_drpc_stream("counts")
     .each(Fields("args"), Split(), Fields("key"))
     .group_by(Fields("key"))
     .state_query(counts, Fields("key"), MapGet(), Fields("count"))
     .project(Fields("key", "count")))
    return topology.build()
