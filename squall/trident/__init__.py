"""Trident: exactly-once batch processing on squall (Storm's ``org.apache.storm.trident``).

A `TridentTopology` is compiled into an ordinary `StormTopology` (spouts, bolts, groupings and
acking): a master coordinator spout hands out transaction ids, every operation runs inside a
batch-tracking bolt, and states commit in txid order. Names are Storm's, in snake_case.
"""

from .builtin import Count as Count
from .builtin import Debug as Debug
from .builtin import Equals as Equals
from .builtin import FilterNull as FilterNull
from .builtin import FirstN as FirstN
from .builtin import MapGet as MapGet
from .builtin import Max as Max
from .builtin import Min as Min
from .builtin import Negate as Negate
from .builtin import SnapshotGet as SnapshotGet
from .builtin import Sum as Sum
from .builtin import TupleCollectionGet as TupleCollectionGet
from .coordinator import TransactionAttempt as TransactionAttempt
from .drpc import DRPCClient as DRPCClient
from .drpc import DRPCExecutionException as DRPCExecutionException
from .drpc import LocalDRPC as LocalDRPC
from .fluent import GroupedStream as GroupedStream
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
from .operation import MapFunction as MapFunction
from .operation import ReducerAggregator as ReducerAggregator
from .operation import TridentCollector as TridentCollector
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
from .state import Snapshottable as Snapshottable
from .state import SnapshottableMap as SnapshottableMap
from .state import State as State
from .state import StateFactory as StateFactory
from .state import StateUpdater as StateUpdater
from .state import TransactionalMap as TransactionalMap
from .state import TransactionalValue as TransactionalValue
from .state import ValueUpdater as ValueUpdater
from .tuple import TridentTuple as TridentTuple

__all__ = [
    "Assembly", "BaseAggregator", "BaseFilter", "BaseFunction", "BaseOperation", "BaseQueryFunction",
    "BaseStateUpdater", "BatchCoordinator", "CachedMap", "CombinerAggregator", "Consumer", "Count",
    "DRPCClient", "DRPCExecutionException", "Debug", "Emitter", "Equals", "FailedException",
    "FeederBatchSpout", "FilterNull", "FirstN", "FixedBatchSpout", "FlatMapFunction", "GroupedStream",
    "IBackingMap", "IBatchSpout", "ITridentSpout", "LocalDRPC", "MapFunction", "MapGet", "MapState", "Max",
    "MemoryMapState", "Min", "Negate", "NonTransactionalMap", "OpaqueMap", "OpaqueValue", "QueryFunction",
    "ReducerAggregator", "SnapshotGet", "Snapshottable", "SnapshottableMap", "State", "StateFactory",
    "StateUpdater", "Stream", "Sum", "TransactionAttempt", "TransactionalMap", "TransactionalValue",
    "TridentCollector", "TridentOperationContext", "TridentState", "TridentTopology", "TridentTuple",
    "TupleCollectionGet", "ValueUpdater",
]
