"""A Trident function that raises on a record, over a real Redis: the Redis Streams spout reads
1,200 entries (5 of them not numbers) into ``each(Parse)`` and a grouped
``persistent_aggregate(RedisMapState.opaque(...), Count())``. The batch holding the first bad
entry fails at every attempt and the topology stalls there, as Storm's does; the records before
it stay counted exactly once however long it stalls. What the user is told names the operation,
the record (cut, its credential masked), the txid and the attempt, and once, after
``STALL_FAILURES`` failures in a row, that the topology is stalled there and how to get out; done
(the function fixed, the topology submitted again under its name), every good record is counted
exactly once.

Before: the errors said ``ValueError: invalid literal for int() with base 10: 'bad-430 ...'`` in
``[b-0-parse] task 4``, with the Redis password in the clear, and nothing said the topology was
stalled."""

from __future__ import annotations

import collections
import json
import logging

import pytest

from squall import Config, Fields, LocalCluster
from squall.trident import TridentTopology
from squall.trident.builtin import Count
from squall.trident.operation import BaseFunction

from ..conftest import wait_until

redis = pytest.importorskip("redis")

from squall.external.trident_redis import RedisMapState
from squall.external.trident_redis_streams import RedisStreamTridentSpout

ENTRIES = 1200
PER_BATCH = 100
BAD = (430, 610, 777, 901, 1150)  # the first is in txid 5 (entries 400-499)
STALLED_TXID = BAD[0] // PER_BATCH + 1
SECRET = "hunter2"


def text_of(i: int) -> str:
    if i == BAD[0]:  # long, and quoting a URL with a password
        return f"bad-{i} redis://:{SECRET}@cache:6379/0 " + "x" * 300
    return f"bad-{i}" if i in BAD else str(i)


class Parse(BaseFunction):
    """The key of an entry's number (its last digit); raises on an entry that is no number."""

    def execute(self, tuple, collector) -> None:
        collector.emit([int(tuple.get_value_by_field("text")) % 10])


class ParseOrSkip(Parse):
    """`Parse` fixed: an entry that is no number gives nothing."""

    def execute(self, tuple, collector) -> None:
        if tuple.get_value_by_field("text").isdigit():
            super().execute(tuple, collector)


def topology(url: str, parse: BaseFunction) -> TridentTopology:
    topo = TridentTopology()
    spout = RedisStreamTridentSpout(url, ["events"], ["text"], max_batch_entries=PER_BATCH)
    topo.new_stream("events", spout).name("parse").each(Fields("text"), parse, Fields("key")) \
        .name("count").group_by(Fields("key")) \
        .persistent_aggregate(RedisMapState.opaque(url), Count(), Fields("count"))
    return topo


def expected_before(end: int) -> dict[int, int]:
    return dict(collections.Counter(i % 10 for i in range(end) if i not in BAD))


def raised() -> str:
    """How an error of ``each(Parse)`` on the first bad entry starts: the operation, the user's
    name for it, the exception (its message masked)."""
    try:
        int(text_of(BAD[0]))
    except ValueError as e:  # Python's own message (it cuts the value to 200 characters itself)
        message = str(e).replace(SECRET, "***")
    return (f"TridentOperationError: each(Parse) named 'parse' raised ValueError: {message}; Trident batch txid "
            f"{STALLED_TXID}; ")


def the_error_of_an_attempt(entry_id: str) -> str:
    """What the bolt reports for each attempt of the stalled txid, the same words each time:
    then the record, its long value cut to 200 characters."""
    shown = repr(text_of(BAD[0]).replace(SECRET, "***"))
    cut = f"{shown[:200]}... ({len(shown)} characters)"
    return raised() + f"its input: fields ['id', 'text'] values [{entry_id!r}, {cut}]"


def test_a_record_a_function_raises_on_stalls_the_topology_saying_where_and_how_to_get_out(redis_server, caplog):
    caplog.set_level(logging.ERROR)
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    ids = [client.xadd("events", {"text": text_of(i)}) for i in range(ENTRIES)]
    factory = RedisMapState.opaque(redis_server.url)
    serializer = factory.serializer

    def stored() -> dict[int, int]:  # each group's key is the JSON of its values, "[3]"
        keys = [k for k in client.keys("*") if k.startswith("[")]
        return {json.loads(k)[0]: serializer.deserialize(v.encode()).curr for k, v in zip(keys, client.mget(keys))}

    conf = Config()
    conf["topology.max.spout.pending"] = 3
    with LocalCluster() as cluster:
        cluster.submit_topology("stall", conf, topology(redis_server.url, Parse()).build())

        def errors(component: str) -> list[dict]:
            return [e for e in cluster.get_topology_info("stall")["errors"] if e["component"] == component]

        def attempts_reported() -> list[int]:
            """The counts of the records of the stalled txid's error (`add_error` folds the repeats)."""
            error = the_error_of_an_attempt(ids[BAD[0]])
            return [e["count"] for e in errors("b-0-parse-count") if e["error"] == error]

        assert wait_until(lambda: errors("$mastercoord-bg0"), timeout=120), cluster.get_topology_info("stall")["errors"]
        (stall,) = errors("$mastercoord-bg0")
        assert stall["error"].startswith(
            f"Trident topology stalled at txid {STALLED_TXID} (spout 'events'): its batch failed 3 times in a row, "
            f"the last time: exception in [b-0-parse-count] task ")
        assert raised() in stall["error"]
        assert f"its input: fields ['id', 'text'] values [{ids[BAD[0]]!r}, " in stall["error"]
        assert (f"To get out, fix the operation so that it handles this record (a function may emit nothing for "
                f"it) and submit the topology again under the same name: it resumes at txid {STALLED_TXID}") \
            in stall["error"]
        assert stored() == expected_before(BAD[0] // PER_BATCH * PER_BATCH)  # txids 1-4, once

        # it stays stalled: attempts go on failing, each in the same words, one record counted; still one stall
        assert wait_until(lambda: any(n >= 5 for n in attempts_reported()), timeout=120), errors("b-0-parse-count")
        assert len(attempts_reported()) == 1, errors("b-0-parse-count")
        assert [e["count"] for e in errors("$mastercoord-bg0")] == [1]
        assert stored() == expected_before(BAD[0] // PER_BATCH * PER_BATCH)
        every = [e["error"] + e["traceback"] for e in cluster.get_topology_info("stall")["errors"]]
        assert not [e for e in every if SECRET in e]
        logged = [r.getMessage() + (r.exc_text or "") for r in caplog.records]
        assert [line for line in logged if "each(Parse) named 'parse' raised ValueError" in line]
        assert not [line for line in logged if SECRET in line]

        # the way out it names: the function fixed, the topology submitted again under its name
        cluster.kill_topology("stall", wait_secs=0)
        cluster.submit_topology("stall", conf, topology(redis_server.url, ParseOrSkip()).build())
        assert wait_until(lambda: stored() == expected_before(ENTRIES), timeout=120), stored()
