"""Trident state: the interfaces, the exactly-once maps and the in-memory map state.

See `squall.trident.state.api` for the interfaces, `squall.trident.state.map` for
`TransactionalMap`, `OpaqueMap`, `NonTransactionalMap` and their helpers, and
`squall.trident.state.memory` for `MemoryMapState`.
"""

from .api import BaseQueryFunction as BaseQueryFunction
from .api import BaseStateUpdater as BaseStateUpdater
from .api import CombinerAggStateUpdater as CombinerAggStateUpdater
from .api import CombinerValueUpdater as CombinerValueUpdater
from .api import IBackingMap as IBackingMap
from .api import ITupleCollection as ITupleCollection
from .api import MapCombinerAggStateUpdater as MapCombinerAggStateUpdater
from .api import MapReducerAggStateUpdater as MapReducerAggStateUpdater
from .api import MapState as MapState
from .api import QueryFunction as QueryFunction
from .api import ReadOnlyMapState as ReadOnlyMapState
from .api import ReadOnlyState as ReadOnlyState
from .api import ReducerAggStateUpdater as ReducerAggStateUpdater
from .api import ReducerValueUpdater as ReducerValueUpdater
from .api import RemovableMapState as RemovableMapState
from .api import Snapshottable as Snapshottable
from .api import State as State
from .api import StateFactory as StateFactory
from .api import StateUpdater as StateUpdater
from .api import ValueUpdater as ValueUpdater
from .map import CachedMap as CachedMap
from .map import NonTransactionalMap as NonTransactionalMap
from .map import OpaqueMap as OpaqueMap
from .map import OpaqueValue as OpaqueValue
from .map import SnapshottableMap as SnapshottableMap
from .map import TransactionalMap as TransactionalMap
from .map import TransactionalValue as TransactionalValue
from .memory import MemoryMapState as MemoryMapState

__all__ = [
    "BaseQueryFunction", "BaseStateUpdater", "CachedMap", "CombinerAggStateUpdater", "CombinerValueUpdater",
    "IBackingMap", "ITupleCollection", "MapCombinerAggStateUpdater", "MapReducerAggStateUpdater", "MapState",
    "MemoryMapState", "NonTransactionalMap", "OpaqueMap", "OpaqueValue", "QueryFunction", "ReadOnlyMapState",
    "ReadOnlyState", "ReducerAggStateUpdater",
    "ReducerValueUpdater", "RemovableMapState", "Snapshottable", "SnapshottableMap", "State", "StateFactory",
    "StateUpdater", "TransactionalMap", "TransactionalValue", "ValueUpdater",
]
