"""squall: Apache Storm's model of real-time computation, in Python.

General layout: the public API lives in underscored modules of this package (``_fields``,
``_tuple``, ``_components``, ``_collectors``, ``_grouping``, ``_topology``, ``_context``,
``_config``, ``_errors``) and is re-exported here, name by name. ``squall.engine`` runs inside a
worker (executors, routing, acking) and knows nothing of hosts; ``squall.cluster`` is the master
side and the hosts (`LocalCluster`); ``squall.testing`` is Storm's testing API; ``squall.cli`` the
``squall`` command. Each layer imports only the ones below it: docs/architecture.md names them,
and tests/test_layers.py checks them.

Every name re-exported here is loaded at its first use (PEP 562's module ``__getattr__``): a
process imports only the modules of the names it asks for. Importing any module of squall first
runs this file, and Spark's Python processes for Trident on Spark (``squall.trident.spark``) each
import squall anew to unpickle a source, so this file imports no other part of squall than
`squall._native` (its compiled module's check) and `squall._lazy` (its names' loading).

The features (windowing, state, metrics) register on the builder's and the engine's extension
points when their package is imported. A windowed or stateful bolt's class is defined in its
feature's package, so having one imports the feature; the metrics' parts (the consumers as
system components, the timers, the records) are needed wherever a topology is planned or run,
and every host imports them through `squall.cluster.features`.
"""

from typing import TYPE_CHECKING

# loaded with the package: a compiled module older than its C source refuses `import squall`
# (StaleBuildError), in every process, before any of it runs
from . import _native as _native
from ._lazy import lazy_exports

if TYPE_CHECKING:
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
    from ._errors import WorkerStartTimeoutError as WorkerStartTimeoutError
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
    from .cluster.local import LocalCluster as LocalCluster
    from .cluster.state import TopologyStatus as TopologyStatus
    from .coordination import BaseBatchBolt as BaseBatchBolt
    from .coordination import BatchOutputCollector as BatchOutputCollector
    from .coordination import FinishedCallback as FinishedCallback
    from .coordination import IBatchBolt as IBatchBolt
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
    from .windowing import JoinBolt as JoinBolt
    from .windowing import TupleWindow as TupleWindow

_LAZY: dict[str, str] = {
    **dict.fromkeys(["BasicOutputCollector", "OutputCollector", "OutputFieldsDeclarer", "SpoutOutputCollector"
], "._collectors"),
    **dict.fromkeys(["BasicBolt", "Bolt", "Spout"], "._components"),
    **dict.fromkeys(["Config"], "._config"),
    **dict.fromkeys(["TopologyContext"], "._context"),
    **dict.fromkeys(["AlreadyAliveException", "DiskWriteError", "EmitError", "FailedException", "IllegalStateTransition",
                     "InvalidTopologyException", "NotAliveException", "ReportedFailedException", "SerializationError",
                     "SquallError", "WorkerStartTimeoutError"], "._errors"),
    **dict.fromkeys(["FailureCause"], "._failure"),
    **dict.fromkeys(["Fields", "GlobalStreamId", "MessageId", "Values"], "._fields"),
    **dict.fromkeys(["CustomStreamGrouping", "Grouping"], "._grouping"),
    **dict.fromkeys(["StormSubmitter"], "._submitter"),
    **dict.fromkeys(["DEFAULT_STREAM"], "._system"),
    **dict.fromkeys(["BoltDeclarer", "SpoutDeclarer", "StormTopology", "TopologyBuilder"], "._topology"),
    **dict.fromkeys(["Tuple", "is_tick_tuple"], "._tuple"),
    **dict.fromkeys(["DRPCClient", "DRPCExecutionException", "LocalDRPC"], ".drpc"),
    **dict.fromkeys(["BaseBatchBolt", "BatchOutputCollector", "FinishedCallback", "IBatchBolt"], ".coordination"),
    **dict.fromkeys(["AssignableMetric", "CombinedMetric", "CountMetric", "DataPoint", "ICombiner", "IMetric",
                     "IMetricsConsumer", "IReducer", "LoggingMetricsConsumer", "MeanReducer", "MultiCountMetric",
                     "MultiReducedMetric", "ReducedMetric", "TaskInfo"], ".metric"),
    **dict.fromkeys(["ShellBolt", "ShellSpout"], ".multilang"),
    **dict.fromkeys(["BaseStatefulBolt", "BaseStatefulWindowedBolt", "KeyValueState"], ".state"),
    **dict.fromkeys(["BaseWindowedBolt", "Count", "Duration", "JoinBolt", "TupleWindow"], ".windowing"),
    **dict.fromkeys(["LocalCluster"], ".cluster.local"),
    **dict.fromkeys(["TopologyStatus"], ".cluster.state"),
}
"""Each name re-exported here, by the module it is imported from at its first use."""


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__version__ = "0.1.0"

__all__ = [
    "DEFAULT_STREAM", "AlreadyAliveException", "AssignableMetric", "BaseBatchBolt", "BaseStatefulBolt",
    "BaseStatefulWindowedBolt", "BaseWindowedBolt", "BasicBolt", "BasicOutputCollector", "BatchOutputCollector",
    "Bolt", "BoltDeclarer", "CombinedMetric", "Config", "Count", "CountMetric", "CustomStreamGrouping",
    "DRPCClient", "DRPCExecutionException", "DataPoint", "DiskWriteError", "Duration", "EmitError",
    "FailedException", "FailureCause", "Fields", "FinishedCallback", "GlobalStreamId", "Grouping", "IBatchBolt",
    "ICombiner", "IMetric", "IMetricsConsumer", "IReducer", "IllegalStateTransition", "InvalidTopologyException",
    "JoinBolt", "KeyValueState", "LocalCluster", "LocalDRPC", "LoggingMetricsConsumer", "MeanReducer", "MessageId",
    "MultiCountMetric", "MultiReducedMetric", "NotAliveException", "OutputCollector", "OutputFieldsDeclarer",
    "ReducedMetric", "ReportedFailedException", "SerializationError", "ShellBolt", "ShellSpout", "Spout",
    "SpoutDeclarer", "SpoutOutputCollector", "SquallError", "StormSubmitter", "StormTopology", "TaskInfo",
    "TopologyBuilder", "TopologyContext", "TopologyStatus", "Tuple", "TupleWindow", "Values", "WorkerStartTimeoutError",
    "is_tick_tuple",
]
