"""Trident: exactly-once batch processing on squall (Storm's ``org.apache.storm.trident``).

A `TridentTopology` is compiled into an ordinary `StormTopology` (spouts, bolts, groupings and
acking): a master coordinator spout hands out transaction ids, every operation runs inside a
batch-tracking bolt, and states commit in txid order. Names are Storm's, in snake_case.

Every name re-exported here is loaded at its first use (PEP 562's module ``__getattr__``), as in
``squall``: Spark's Python processes import ``squall.trident.spark.source`` to unpickle a source,
and with it this package, but need none of the builder, the planner or the states.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .builtin import Count as Count
    from .builtin import Debug as Debug
    from .builtin import Equals as Equals
    from .builtin import FilterNull as FilterNull
    from .builtin import FirstN as FirstN
    from .builtin import MapGet as MapGet
    from .builtin import Max as Max
    from .builtin import MaxWithComparator as MaxWithComparator
    from .builtin import Min as Min
    from .builtin import MinWithComparator as MinWithComparator
    from .builtin import Negate as Negate
    from .builtin import SnapshotGet as SnapshotGet
    from .builtin import Sum as Sum
    from .builtin import TupleCollectionGet as TupleCollectionGet
    from .coordinator import TransactionAttempt as TransactionAttempt
    from .drpc import DRPCClient as DRPCClient
    from .drpc import DRPCExecutionException as DRPCExecutionException
    from .drpc import LocalDRPC as LocalDRPC
    from .fluent import ChainedAggregatorDeclarer as ChainedAggregatorDeclarer
    from .fluent import GroupedStream as GroupedStream
    from .fluent import JoinOutFieldsMode as JoinOutFieldsMode
    from .fluent import JoinType as JoinType
    from .fluent import Stream as Stream
    from .fluent import TridentState as TridentState
    from .fluent import TridentTopology as TridentTopology
    from .operation import Assembly as Assembly
    from .operation import BaseAggregator as BaseAggregator
    from .operation import BaseFilter as BaseFilter
    from .operation import BaseFunction as BaseFunction
    from .operation import BaseOperation as BaseOperation
    from .operation import CombinerAggregator as CombinerAggregator
    from .operation import Consumer as Consumer
    from .operation import FailedException as FailedException
    from .operation import FlatMapFunction as FlatMapFunction
    from .operation import GroupedMultiReducer as GroupedMultiReducer
    from .operation import MapFunction as MapFunction
    from .operation import MultiReducer as MultiReducer
    from .operation import ReducerAggregator as ReducerAggregator
    from .operation import TridentCollector as TridentCollector
    from .operation import TridentMultiReducerContext as TridentMultiReducerContext
    from .operation import TridentOperationContext as TridentOperationContext
    from .spout import BatchCoordinator as BatchCoordinator
    from .spout import Emitter as Emitter
    from .spout import FeederBatchSpout as FeederBatchSpout
    from .spout import FixedBatchSpout as FixedBatchSpout
    from .spout import IBatchSpout as IBatchSpout
    from .spout import ITridentSpout as ITridentSpout
    from .state import BaseQueryFunction as BaseQueryFunction
    from .state import BaseStateUpdater as BaseStateUpdater
    from .state import CachedMap as CachedMap
    from .state import IBackingMap as IBackingMap
    from .state import MapState as MapState
    from .state import MemoryMapState as MemoryMapState
    from .state import NonTransactionalMap as NonTransactionalMap
    from .state import OpaqueMap as OpaqueMap
    from .state import OpaqueValue as OpaqueValue
    from .state import QueryFunction as QueryFunction
    from .state import ReadOnlyMapState as ReadOnlyMapState
    from .state import ReadOnlyState as ReadOnlyState
    from .state import Snapshottable as Snapshottable
    from .state import SnapshottableMap as SnapshottableMap
    from .state import State as State
    from .state import StateFactory as StateFactory
    from .state import StateUpdater as StateUpdater
    from .state import TransactionalMap as TransactionalMap
    from .state import TransactionalValue as TransactionalValue
    from .state import ValueUpdater as ValueUpdater
    from .tuple import TridentTuple as TridentTuple
    from .windowing import InMemoryWindowsStore as InMemoryWindowsStore
    from .windowing import InMemoryWindowsStoreFactory as InMemoryWindowsStoreFactory
    from .windowing import KeyValueWindowsStore as KeyValueWindowsStore
    from .windowing import KeyValueWindowsStoreFactory as KeyValueWindowsStoreFactory
    from .windowing import SlidingCountWindow as SlidingCountWindow
    from .windowing import SlidingDurationWindow as SlidingDurationWindow
    from .windowing import TumblingCountWindow as TumblingCountWindow
    from .windowing import TumblingDurationWindow as TumblingDurationWindow
    from .windowing import WindowConfig as WindowConfig
    from .windowing import WindowsStore as WindowsStore
    from .windowing import WindowsStoreFactory as WindowsStoreFactory

_LAZY: dict[str, str] = {
    **dict.fromkeys(["Count", "Debug", "Equals", "FilterNull", "FirstN", "MapGet", "Max", "MaxWithComparator", "Min",
                     "MinWithComparator", "Negate", "SnapshotGet", "Sum", "TupleCollectionGet"], ".builtin"),
    **dict.fromkeys(["TransactionAttempt"], ".coordinator"),
    **dict.fromkeys(["DRPCClient", "DRPCExecutionException", "LocalDRPC"], ".drpc"),
    **dict.fromkeys(["ChainedAggregatorDeclarer", "GroupedStream", "JoinOutFieldsMode", "JoinType", "Stream", "TridentState", "TridentTopology"], ".fluent"),
    **dict.fromkeys(["Assembly", "BaseAggregator", "BaseFilter", "BaseFunction", "BaseOperation", "CombinerAggregator",
                     "Consumer", "FailedException", "FlatMapFunction", "GroupedMultiReducer", "MapFunction", "MultiReducer",
                     "ReducerAggregator", "TridentCollector", "TridentMultiReducerContext", "TridentOperationContext"],
                    ".operation"),
    **dict.fromkeys(["BatchCoordinator", "Emitter", "FeederBatchSpout", "FixedBatchSpout", "IBatchSpout", "ITridentSpout"],
                    ".spout"),
    **dict.fromkeys(["BaseQueryFunction", "BaseStateUpdater", "CachedMap", "IBackingMap", "MapState", "MemoryMapState",
                     "NonTransactionalMap", "OpaqueMap", "OpaqueValue", "QueryFunction", "ReadOnlyMapState", "ReadOnlyState",
                     "Snapshottable", "SnapshottableMap", "State", "StateFactory", "StateUpdater", "TransactionalMap", "TransactionalValue", "ValueUpdater"], ".state"),
    **dict.fromkeys(["TridentTuple"], ".tuple"),
    **dict.fromkeys(["InMemoryWindowsStore", "InMemoryWindowsStoreFactory", "KeyValueWindowsStore",
                     "KeyValueWindowsStoreFactory", "SlidingCountWindow", "SlidingDurationWindow", "TumblingCountWindow",
                     "TumblingDurationWindow", "WindowConfig", "WindowsStore", "WindowsStoreFactory"], ".windowing"),
}
"""Each name re-exported here, by the module it is imported from at its first use."""


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "Assembly", "BaseAggregator", "BaseFilter", "BaseFunction", "BaseOperation", "BaseQueryFunction",
    "BaseStateUpdater", "BatchCoordinator", "CachedMap", "ChainedAggregatorDeclarer", "CombinerAggregator",
    "Consumer", "Count", "DRPCClient", "DRPCExecutionException", "Debug", "Emitter", "Equals", "FailedException",
    "FeederBatchSpout", "FilterNull", "FirstN", "FixedBatchSpout", "FlatMapFunction", "GroupedMultiReducer",
    "GroupedStream", "IBackingMap", "IBatchSpout", "ITridentSpout", "InMemoryWindowsStore",
    "InMemoryWindowsStoreFactory", "JoinOutFieldsMode", "JoinType", "KeyValueWindowsStore",
    "KeyValueWindowsStoreFactory", "LocalDRPC", "MapFunction", "MapGet", "MapState", "Max", "MaxWithComparator",
    "MemoryMapState", "Min", "MinWithComparator", "MultiReducer", "Negate", "NonTransactionalMap", "OpaqueMap",
    "OpaqueValue", "QueryFunction", "ReadOnlyMapState", "ReadOnlyState", "ReducerAggregator", "SlidingCountWindow",
    "SlidingDurationWindow", "SnapshotGet", "Snapshottable", "SnapshottableMap", "State", "StateFactory",
    "StateUpdater", "Stream", "Sum", "TransactionAttempt", "TransactionalMap", "TransactionalValue",
    "TridentCollector", "TridentMultiReducerContext", "TridentOperationContext", "TridentState", "TridentTopology",
    "TridentTuple", "TumblingCountWindow", "TumblingDurationWindow", "TupleCollectionGet", "ValueUpdater",
    "WindowConfig", "WindowsStore", "WindowsStoreFactory",
]
