"""squall: Apache Storm's model of real-time computation, in Python.

General layout: the public API lives in underscored modules of this package (``_fields``,
``_tuple``, ``_components``, ``_collectors``, ``_grouping``, ``_topology``, ``_context``,
``_config``, ``_errors``) and is re-exported here, name by name. ``squall.engine`` runs inside a
worker (executors, routing, acking) and knows nothing of hosts; ``squall.cluster`` is the master
side and the hosts (`LocalCluster`); ``squall.testing`` is Storm's testing API; ``squall.cli`` the
``squall`` command. Each layer imports only the ones below it: docs/architecture.md names them,
and tests/test_layers.py checks them.

Importing ``squall`` loads what a topology needs (the API, the engine, windows, state, metrics,
DRPC); `LocalCluster` and `TopologyStatus` are re-exported too, but loaded at their first use
(PEP 562's module ``__getattr__``), so that a worker or a client does not load the master.
Importing this package is also what registers the features on the builder's and the engine's
extension points (each feature's ``__init__`` does it), for every process that runs squall.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._collectors import BasicOutputCollector as BasicOutputCollector
from ._collectors import OutputCollector as OutputCollector
from ._collectors import OutputFieldsDeclarer as OutputFieldsDeclarer
from ._collectors import SpoutOutputCollector as SpoutOutputCollector
from ._components import BasicBolt as BasicBolt
from ._components import Bolt as Bolt
from ._components import Spout as Spout
from ._config import Config as Config
from ._context import TopologyContext as TopologyContext
from ._errors import AlreadyAliveException as AlreadyAliveException
from ._errors import DiskWriteError as DiskWriteError
from ._errors import EmitError as EmitError
from ._errors import FailedException as FailedException
from ._errors import IllegalStateTransition as IllegalStateTransition
from ._errors import InvalidTopologyException as InvalidTopologyException
from ._errors import NotAliveException as NotAliveException
from ._errors import ReportedFailedException as ReportedFailedException
from ._errors import SerializationError as SerializationError
from ._errors import SquallError as SquallError
from ._failure import FailureCause as FailureCause
from ._fields import Fields as Fields
from ._fields import GlobalStreamId as GlobalStreamId
from ._fields import MessageId as MessageId
from ._fields import Values as Values
from ._grouping import CustomStreamGrouping as CustomStreamGrouping
from ._grouping import Grouping as Grouping
from ._submitter import StormSubmitter as StormSubmitter
from ._system import DEFAULT_STREAM as DEFAULT_STREAM
from ._topology import BoltDeclarer as BoltDeclarer
from ._topology import SpoutDeclarer as SpoutDeclarer
from ._topology import StormTopology as StormTopology
from ._topology import TopologyBuilder as TopologyBuilder
from ._tuple import Tuple as Tuple
from ._tuple import is_tick_tuple as is_tick_tuple
from .drpc import DRPCClient as DRPCClient
from .drpc import DRPCExecutionException as DRPCExecutionException
from .drpc import LocalDRPC as LocalDRPC
from .metric import AssignableMetric as AssignableMetric
from .metric import CombinedMetric as CombinedMetric
from .metric import CountMetric as CountMetric
from .metric import DataPoint as DataPoint
from .metric import ICombiner as ICombiner
from .metric import IMetric as IMetric
from .metric import IMetricsConsumer as IMetricsConsumer
from .metric import IReducer as IReducer
from .metric import LoggingMetricsConsumer as LoggingMetricsConsumer
from .metric import MeanReducer as MeanReducer
from .metric import MultiCountMetric as MultiCountMetric
from .metric import MultiReducedMetric as MultiReducedMetric
from .metric import ReducedMetric as ReducedMetric
from .metric import TaskInfo as TaskInfo
from .multilang import ShellBolt as ShellBolt
from .multilang import ShellSpout as ShellSpout
from .state import BaseStatefulBolt as BaseStatefulBolt
from .state import BaseStatefulWindowedBolt as BaseStatefulWindowedBolt
from .state import KeyValueState as KeyValueState
from .windowing import BaseWindowedBolt as BaseWindowedBolt
from .windowing import Count as Count
from .windowing import Duration as Duration
from .windowing import TupleWindow as TupleWindow

if TYPE_CHECKING:
    from .cluster.local import LocalCluster as LocalCluster
    from .cluster.state import TopologyStatus as TopologyStatus

_LAZY = {"LocalCluster": ".cluster.local", "TopologyStatus": ".cluster.state"}
"""The names re-exported from the cluster layer, by the module each is imported from at first use."""


def __getattr__(name: str) -> Any:
    """`LocalCluster` and `TopologyStatus`, imported at their first use (see the module docstring)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'squall' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later uses find it without this call
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "DEFAULT_STREAM", "AlreadyAliveException", "AssignableMetric", "BaseStatefulBolt", "BaseStatefulWindowedBolt",
    "BaseWindowedBolt", "BasicBolt", "BasicOutputCollector", "Bolt", "BoltDeclarer", "CombinedMetric", "Config",
    "Count", "CountMetric", "CustomStreamGrouping", "DRPCClient", "DRPCExecutionException", "DataPoint",
    "DiskWriteError", "Duration", "EmitError", "FailedException", "FailureCause", "Fields", "GlobalStreamId",
    "Grouping", "ICombiner", "IMetric", "IMetricsConsumer", "IReducer", "IllegalStateTransition",
    "InvalidTopologyException", "KeyValueState", "LocalCluster", "LocalDRPC", "LoggingMetricsConsumer",
    "MeanReducer", "MessageId", "MultiCountMetric", "MultiReducedMetric", "NotAliveException", "OutputCollector",
    "OutputFieldsDeclarer", "ReducedMetric", "ReportedFailedException", "SerializationError", "ShellBolt", "ShellSpout", "Spout",
    "SpoutDeclarer", "SpoutOutputCollector", "SquallError", "StormSubmitter", "StormTopology", "TaskInfo",
    "TopologyBuilder", "TopologyContext", "TopologyStatus", "Tuple", "TupleWindow", "Values", "is_tick_tuple",
]
