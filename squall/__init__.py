"""squall: Apache Storm's model of real-time computation, in Python.

General layout: the public API lives in underscored modules of this package (``_fields``,
``_tuple``, ``_components``, ``_collectors``, ``_grouping``, ``_topology``, ``_context``,
``_config``, ``_errors``) and is re-exported here, name by name. ``squall.engine`` runs inside a
worker (executors, routing, acking) and knows nothing of hosts; ``squall.cluster`` is the master
side and the hosts (`LocalCluster`); ``squall.testing`` is Storm's testing API; ``squall.cli`` the
``squall`` command. Each layer imports only the ones before it.
"""

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
from ._system import DEFAULT_STREAM as DEFAULT_STREAM
from ._submitter import StormSubmitter as StormSubmitter
from ._topology import BoltDeclarer as BoltDeclarer
from ._topology import SpoutDeclarer as SpoutDeclarer
from ._topology import StormTopology as StormTopology
from ._topology import TopologyBuilder as TopologyBuilder
from ._tuple import Tuple as Tuple
from ._tuple import is_tick_tuple as is_tick_tuple
from .cluster.local import LocalCluster as LocalCluster
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
from .cluster.state import TopologyStatus as TopologyStatus
from .state import BaseStatefulBolt as BaseStatefulBolt
from .state import BaseStatefulWindowedBolt as BaseStatefulWindowedBolt
from .state import KeyValueState as KeyValueState
from .windowing import BaseWindowedBolt as BaseWindowedBolt
from .windowing import Count as Count
from .windowing import Duration as Duration
from .windowing import TupleWindow as TupleWindow

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_STREAM", "AlreadyAliveException", "AssignableMetric", "BaseStatefulBolt", "BaseStatefulWindowedBolt",
    "BaseWindowedBolt", "BasicBolt", "BasicOutputCollector", "Bolt", "BoltDeclarer", "CombinedMetric", "Config",
    "Count", "CountMetric", "CustomStreamGrouping", "DRPCClient", "DRPCExecutionException", "DataPoint", "DiskWriteError", "Duration", "EmitError", "FailedException", "FailureCause",
    "Fields", "GlobalStreamId", "Grouping", "ICombiner", "IMetric", "KeyValueState",
    "IMetricsConsumer", "IReducer", "IllegalStateTransition", "InvalidTopologyException",
    "LocalCluster", "LocalDRPC", "LoggingMetricsConsumer", "MeanReducer", "MessageId", "MultiCountMetric",
    "MultiReducedMetric", "NotAliveException", "ReducedMetric", "TaskInfo", "OutputCollector", "OutputFieldsDeclarer",
    "ReportedFailedException", "SerializationError", "Spout", "SpoutDeclarer",
    "SpoutOutputCollector", "SquallError", "StormSubmitter", "StormTopology", "TopologyBuilder",
    "TopologyContext", "TopologyStatus", "Tuple", "TupleWindow", "Values", "is_tick_tuple",
]
