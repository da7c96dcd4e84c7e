"""`LoggingMetricsConsumer`: every data point as one log line (Storm's, line for line)."""

from __future__ import annotations

import logging
from typing import Any

from ._api import DataPoint, IMetricsConsumer, TaskInfo

log = logging.getLogger("squall.metric.LoggingMetricsConsumer")

NAME_WIDTH = 23  # Storm pads, and cuts, the metric name to 23 characters


def format_line(task_info: TaskInfo, point: DataPoint) -> str:
    """Storm's layout: ``ts\\thost:port\\ttask:component\\tname\\tvalue``, padded as its
    ``"%d\\t%15s:%-4d\\t%3d:%-11s\\t"`` header and 23-character name."""
    header = (f"{task_info.timestamp}\t{task_info.src_worker_host:>15}:{task_info.src_worker_port:<4}\t"
              f"{task_info.src_task_id:>3}:{task_info.src_component_id:<11}\t")
    name = f"{point.name:<{NAME_WIDTH}}"[:NAME_WIDTH]
    return f"{header}{name}\t{java_string(point.value)}"


def java_string(value: Any) -> str:
    """``value`` as Java's ``String.valueOf`` writes its Java twin, which Storm's line holds:
    a map ``{k=v, k2=v2}``, a list ``[a, b]``, ``true``/``false``, ``null``."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_string(k)}={java_string(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "[" + ", ".join(java_string(v) for v in value) + "]"
    return str(value)


class LoggingMetricsConsumer(IMetricsConsumer):
    """Logs each data point at INFO on logger ``squall.metric.LoggingMetricsConsumer``.

    Register it with ``conf.register_metrics_consumer(LoggingMetricsConsumer)``; route that
    logger to a file of its own with Python's logging configuration, as Storm's ``worker.xml``
    sends it to ``worker.log.metrics``.
    """

    def prepare(self, conf: dict, registration_argument: Any, context: Any, error_reporter: Any) -> None:
        pass

    def handle_data_points(self, task_info: TaskInfo, data_points: list[DataPoint]) -> None:
        for p in data_points:
            log.info("%s", format_line(task_info, p))

    def cleanup(self) -> None:
        pass
