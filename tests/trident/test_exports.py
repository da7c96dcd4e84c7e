"""Every name API.md's Trident section names is importable from `squall.trident` (built-ins and
spouts included, as a user reading docs/trident.md imports them) and has a docstring."""

from __future__ import annotations

import pytest

import squall
import squall.trident
import squall.trident.builtin

TRIDENT_API = [
    "TridentTopology", "Stream", "GroupedStream", "TridentState", "TridentTuple",
    "BaseFunction", "BaseFilter", "MapFunction", "FlatMapFunction", "Consumer", "TridentCollector",
    "CombinerAggregator", "ReducerAggregator", "BaseAggregator", "Assembly",
    "Count", "Sum", "Max", "Min", "FirstN", "Debug", "FilterNull", "Equals", "Negate", "MapGet",
    "SnapshotGet", "TupleCollectionGet",
    "IBatchSpout", "FixedBatchSpout", "FeederBatchSpout",
    "State", "StateFactory", "MapState", "Snapshottable", "IBackingMap", "ValueUpdater",
    "TransactionalMap", "OpaqueMap", "NonTransactionalMap", "TransactionalValue", "OpaqueValue",
    "MemoryMapState", "StateUpdater", "BaseStateUpdater", "QueryFunction", "BaseQueryFunction",
    "FailedException", "LocalDRPC", "DRPCClient", "DRPCExecutionException",
]
BUILTINS = ["Count", "Sum", "Max", "Min", "FirstN", "Debug", "FilterNull", "Equals", "Negate", "MapGet",
            "SnapshotGet", "TupleCollectionGet"]


@pytest.mark.parametrize("name", TRIDENT_API)
def test_the_name_is_exported_and_documented(name):
    obj = getattr(squall.trident, name)
    assert name in squall.trident.__all__
    assert (obj.__doc__ or "").strip(), f"squall.trident.{name} has no docstring"


@pytest.mark.parametrize("name", BUILTINS)
def test_a_builtin_is_the_same_object_in_both_modules(name):
    assert getattr(squall.trident, name) is getattr(squall.trident.builtin, name)


def test_local_drpc_is_importable_from_squall_too():
    assert squall.LocalDRPC is squall.trident.LocalDRPC
    assert squall.trident.FailedException is squall.FailedException
