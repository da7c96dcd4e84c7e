"""A Trident function that raises on a record, on Spark's engine: the micro-batch holding it fails
at every Spark task attempt, and the query stops at its txid; started again from its checkpoint
it replays that txid and stops there again. The query's failure names the operation, the record,
and the txid (not Spark's task attempt: each attempt's error is the same text), says the query is
stalled there and how to get out; the
records before it stay counted exactly once, and once the function is fixed and the query started
again on the same checkpoint, every good record is counted exactly once.

Before: the query's failure was the task's bare ``ValueError: invalid literal for int() with base
10: 'bad-25'`` in the Python worker's traceback, naming neither operation nor txid."""

from __future__ import annotations

import collections

import pytest

from squall import Config, Fields
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.spark import start
from squall.trident.spout import FixedBatchSpout

from .ops import ParseKey, ParseKeyOrSkip

pytestmark = pytest.mark.timeout(300)

RECORDS = 60
PER_BATCH = 10
BAD = (25, 47)  # the first is in txid 3 (records 20-29)


def text_of(i: int) -> str:
    return f"bad-{i}" if i in BAD else str(i)


def topology(parse, factory) -> TridentTopology:
    spout = FixedBatchSpout(Fields("id", "text"), PER_BATCH, *[[i, text_of(i)] for i in range(RECORDS)])
    topo = TridentTopology()
    topo.new_stream("records", spout).name("parse").each(Fields("text"), parse, Fields("key")) \
        .name("count").group_by(Fields("key")).persistent_aggregate(factory, Count(), Fields("count"))
    return topo


def counts_before(end: int) -> dict[int, int]:
    return dict(collections.Counter(i % 10 for i in range(end) if i not in BAD))


@pytest.mark.parametrize("in_source", [True, False], ids=["parse-in-source", "parse-in-mapInArrow"])
def test_a_record_a_function_raises_on_stops_the_query_at_its_txid_saying_where_and_how_to_get_out(
        spark, tmp_path, in_source):
    factory = MemoryMapState.factory()  # the driver's: this process's, across the query's starts
    checkpoint = str(tmp_path / "checkpoint")
    conf = {Config.TOPOLOGY_TRIDENT_SPARK_BOLT_IN_SOURCE: in_source}

    def stored() -> dict[int, int]:
        return {key: count for key, count in factory.make_state({}, None, 0, 1).get_tuples()}

    failures = []
    for _ in range(2):  # stopped at txid 3, and again when started again
        query = start(topology(ParseKey(), factory), spark, checkpoint, conf=conf)
        try:
            with pytest.raises(Exception) as raised:
                query.processAllAvailable()
        finally:
            query.stop()
        failures.append(str(raised.value))
        assert stored() == counts_before(20)  # txids 1 and 2, once
    for failure in failures:
        assert (
            "Trident query stopped at txid 3 (micro-batch 2): its batch failed after Spark's retries "
            "(spark.task.maxFailures), the last time: each(ParseKey) named 'parse' raised ValueError: invalid literal "
            "for int() with base 10: 'bad-25'; Trident batch txid 3; its input: fields ['id', "
            "'text'] values [25, 'bad-25']. Started again from its checkpoint, the query replays txid 3 with the "
            "same records, and fails the same way while the cause stays; as in Storm's Trident, there is no way to "
            "skip a batch or a record. To get out, fix the operation so that it handles this record (a function may "
            "emit nothing for it) and start the query again on the same checkpoint: it resumes at txid 3, and what "
            "the batches before it committed stays counted once.") in failure, failure

    # the way out it names: the function fixed, the query started again on the same checkpoint
    query = start(topology(ParseKeyOrSkip(), factory), spark, checkpoint, conf=conf)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert stored() == counts_before(RECORDS)
