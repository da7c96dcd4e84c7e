"""Storm's metrics API v1 (``org.apache.storm.metric``): metrics a task registers with
``context.register_metric``, read every time bucket and handed to the consumers listed in
``topology.metrics.consumer.register`` (see docs/metrics.md)."""

from ..engine.loop import register_executor_timers
from ..engine.plan import register_system_components
from ..engine.serialize import register_record
from ._api import AssignableMetric as AssignableMetric
from ._api import CombinedMetric as CombinedMetric
from ._api import CountMetric as CountMetric
from ._api import DataPoint as DataPoint
from ._api import ICombiner as ICombiner
from ._api import IMetric as IMetric
from ._api import IMetricsConsumer as IMetricsConsumer
from ._api import IReducer as IReducer
from ._api import MeanReducer as MeanReducer
from ._api import MultiCountMetric as MultiCountMetric
from ._api import MultiReducedMetric as MultiReducedMetric
from ._api import ReducedMetric as ReducedMetric
from ._api import TaskInfo as TaskInfo
from ._collect import metric_timers
from ._consumers import with_metrics_consumers
from ._logging import LoggingMetricsConsumer as LoggingMetricsConsumer

# What the metrics hook into (docs/architecture.md, "Extension points"): the plan adds the
# consumer bolts, each loop the timers that read the tasks' metrics, and the data points cross
# workers as registered records.
register_system_components(with_metrics_consumers)
register_executor_timers(metric_timers)
register_record(TaskInfo)
register_record(DataPoint)

__all__ = [
    "AssignableMetric", "CombinedMetric", "CountMetric", "DataPoint", "ICombiner", "IMetric",
    "IMetricsConsumer", "IReducer", "LoggingMetricsConsumer", "MeanReducer", "MultiCountMetric",
    "MultiReducedMetric", "ReducedMetric", "TaskInfo",
]
