"""Trident: exactly-once batch processing on squall (Storm's ``org.apache.storm.trident``).

A `TridentTopology` is compiled into an ordinary `StormTopology` (spouts, bolts, groupings and
acking): a master coordinator spout hands out transaction ids, every operation runs inside a
batch-tracking bolt, and states commit in txid order. Names are Storm's, in snake_case.
"""

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
from .tuple import TridentTuple as TridentTuple

__all__ = [
    "Assembly", "BaseAggregator", "BaseFilter", "BaseFunction", "BaseOperation", "CombinerAggregator",
    "Consumer", "FailedException", "FlatMapFunction", "MapFunction", "ReducerAggregator",
    "TridentCollector", "TridentOperationContext", "TridentTuple",
]
