"""What a Trident query on Spark's engine says when its batch failed on the driver, in
``foreachBatch`` (a state's update or commit raised, or an operation after it): Spark does not
retry ``foreachBatch``, and the state's cause may pass (a store that was unreachable), so the text
says where it failed, that starting the query again replays the txid and the states apply it
once, and only then the way out of a record that fails every time. Before, it said the batch
failed "after Spark's retries (spark.task.maxFailures)" and told the user to fix the operation
so that it handles "this record", for a store that went away at commit. No Spark session: the
`BatchRunner` is given the driver bolt's failure as `_run` raises it."""

from __future__ import annotations

import pytest

from squall import Fields
from squall.trident import MemoryMapState, TridentTopology
from squall.trident.builtin import Count
from squall.trident.failures import TridentOperationError
from squall.trident.spark.compiler import compile_topology
from squall.trident.spark.runner import BatchRunner, TridentQueryStalled
from squall.trident.spout import FixedBatchSpout


def test_a_batch_that_failed_on_the_driver_says_so_and_that_a_start_replays_it_once():
    topology = TridentTopology()
    topology.new_stream("words", FixedBatchSpout(Fields("word"), 2, ["a"], ["b"])).name("counts") \
        .group_by(Fields("word")).persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    runner = BatchRunner(compile_topology(topology), {})
    cause = ConnectionError("the store went away")
    failure = TridentOperationError("persistent_aggregate(Count) named 'counts'", cause,
                                    where="at the end of the batch (the state's update and commit, for a state)")

    def run(df, txid):
        raise failure

    runner._run = run  # what a driver bolt's state raises there
    with pytest.raises(TridentQueryStalled) as raised:
        runner(None, 4)
    text = str(raised.value)
    assert text.startswith(
        "Trident query stopped at txid 5 (micro-batch 4): its batch failed on the driver, in foreachBatch, which "
        "Spark does not retry: persistent_aggregate(Count) named 'counts' raised ConnectionError: the store went "
        "away; Trident batch txid 5; at the end of the batch (the state's update and commit, for a state). "
        "Started again from its checkpoint, the query replays txid 5 with the same records, and each "
        "transactional or opaque state applies it once: where the cause has passed (a store that was "
        "unreachable), that is the way out."), text
    assert "spark.task.maxFailures" not in text
    assert raised.value.__cause__ is failure
