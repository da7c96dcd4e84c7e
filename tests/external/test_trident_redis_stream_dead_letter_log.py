"""The entries a `RedisStreamTridentSpout` cannot read are logged once each, however often their
batch is replayed, over a real redis-server on a LocalCluster: 300 entries, 7 of them without the
declared field, into a grouped ``persistent_aggregate(RedisMapState.opaque(...), Count())``, the
batch holding two of the 7 failed once downstream and replayed. The counts are exact, the spout's
bolt (``spout-events``) counts 7 dead letters, and the log has 7 dead-letter lines, each naming
its txid.

Before: each replay logged its batch's dead letters again (9 lines here; 157 for 154 entries in a
run with two worker kills and a Redis stall), so a user counting the log, the only place the
entries are named, counted dead letters that were never there."""

from __future__ import annotations

import collections
import json
import logging
import os
from pathlib import Path

import pytest

from squall import Config, FailedException, Fields, LocalCluster
from squall.trident import TridentTopology
from squall.trident.builtin import Count
from squall.trident.operation import BaseFunction

from ..conftest import wait_until

redis = pytest.importorskip("redis")

from squall.external.trident_redis import RedisMapState
from squall.external.trident_redis_streams import RedisStreamTridentSpout

ENTRIES = 300
PER_BATCH = 50
MISSING = (3, 110, 130, 199, 200, 251, 299)  # no "text" field: dead letters as read
FAIL_AT = 120  # the batch of entries 100-149 (with 110 and 130) fails once, after they were read
SPOUT = "spout-events"


class Parse(BaseFunction):
    """The key of an entry's number (its last digit); fails its batch the first time it sees
    entry `FAIL_AT` (a marker file, shared by every copy of the function, says it did)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def execute(self, tuple, collector) -> None:
        n = int(tuple.get_value_by_field("text"))
        if n == FAIL_AT:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                raise FailedException(f"entry {n}: failed once on purpose")
        collector.emit([n % 10])


def expected() -> dict[int, int]:
    return dict(collections.Counter(i % 10 for i in range(ENTRIES) if i not in MISSING))


@pytest.mark.timeout(120)
def test_a_trident_spouts_unreadable_entries_are_logged_once_through_a_replay(redis_server, tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="squall.external.trident_redis_streams")
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    ids = [client.xadd("events", {"other": "x"} if i in MISSING else {"text": str(i)}) for i in range(ENTRIES)]
    serializer = RedisMapState.opaque(redis_server.url).serializer

    def stored() -> dict[int, int]:  # each group's key is the JSON of its values, "[3]"
        keys = [k for k in client.keys("*") if k.startswith("[")]
        return {json.loads(k)[0]: serializer.deserialize(v.encode()).curr for k, v in zip(keys, client.mget(keys))}

    topo = TridentTopology()
    spout = RedisStreamTridentSpout(redis_server.url, ["events"], ["text"], max_batch_entries=PER_BATCH)
    topo.new_stream("events", spout).each(Fields("text"), Parse(tmp_path / "failed"), Fields("key")) \
        .group_by(Fields("key")).persistent_aggregate(RedisMapState.opaque(redis_server.url), Count(), Fields("count"))
    conf = Config()
    conf["topology.max.spout.pending"] = 2
    with LocalCluster() as cluster:
        cluster.submit_topology("dl", conf, topo.build())
        assert wait_until(lambda: stored() == expected(), 60), stored()
        assert (tmp_path / "failed").exists()  # the batch with two dead letters was replayed
        assert wait_until(lambda: cluster.get_topology_info("dl")["components"][SPOUT]["dead_lettered"]
                          == len(MISSING), 30), cluster.get_topology_info("dl")["components"][SPOUT]
        logged = [r.getMessage() for r in caplog.records if "RedisStreamTridentSpout dead letter" in r.getMessage()]
        assert len(logged) == len(MISSING), logged  # once each, not again at the replay
        txid_of = {i: i // PER_BATCH + 1 for i in MISSING}  # one stream, full batches: entry i is in txid i // 50 + 1
        assert sorted(logged) == sorted(
            f"RedisStreamTridentSpout dead letter: txid {txid_of[i]}: stream 'events' entry {ids[i]}: "
            f"missing field 'text' (has ['other'])" for i in MISSING)
        cluster.kill_topology("dl", wait_secs=0)
