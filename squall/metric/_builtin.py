"""Storm's built-in metrics (``builtin_metrics.clj``): each task's statistics, as data points.

Storm's built-ins are its statistics objects read as metrics, so they are sampled and scaled as
the statistics are. squall's statistics are cumulative counters per task
(`squall.engine.stats`); a task's built-ins are their differences since the previous bucket:
counts as ``{key: n}`` and latencies as ``{key: mean ms}`` of the bucket (0.0 for a key with no
sample in it, as Storm's), where the key is the stream (emitted and transferred, and a
spout's acked, failed and complete latency) or ``"source component:stream"`` (a bolt's inputs).
Every key the task ever had is reported, 0 included, as Storm's maps are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._config import Config
from ..engine.stats import (
    ACKED,
    COMPLETE_LATENCY,
    EMITTED,
    EXECUTE_LATENCY,
    EXECUTED,
    FAILED,
    LATENCIES,
    PROCESS_LATENCY,
    TRANSFERRED,
)
from ._api import DataPoint

# statistic -> Storm's built-in metric name
NAMES = {
    ACKED: "__ack-count",
    FAILED: "__fail-count",
    EMITTED: "__emit-count",
    TRANSFERRED: "__transfer-count",
    EXECUTED: "__execute-count",
    COMPLETE_LATENCY: "__complete-latency",
    PROCESS_LATENCY: "__process-latency",
    EXECUTE_LATENCY: "__execute-latency",
}
BUCKET_KEY = Config.TOPOLOGY_BUILTIN_METRICS_BUCKET_SIZE_SECS

# a snapshot (`TaskStatistics.snapshot`): (statistic, source component or "" for the task's own
# streams, stream) -> cumulative value; a latency's ms sum is under its name, its samples under "<name>#n"
Snapshot = dict[tuple[str, str, str], float]


class BuiltinMetrics:
    """The built-in metrics of one task, read each bucket from ``snapshot()`` (see the module note)."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot
        self._last: Snapshot = {}

    def data_points(self) -> list[DataPoint]:
        """This bucket's data points, one per built-in metric the task has."""
        now = self._snapshot()
        last, self._last = self._last, dict(now)
        maps: dict[str, dict[str, Any]] = {}
        for (stat, component, stream), value in now.items():
            name = NAMES.get(stat)
            if name is None:
                continue
            key = f"{component}:{stream}" if component else stream
            if stat in LATENCIES:
                nkey = (stat + "#n", component, stream)
                n = now.get(nkey, 0) - last.get(nkey, 0)
                value = (value - last.get((stat, component, stream), 0.0)) / n if n > 0 else 0.0
            else:
                value = value - last.get((stat, component, stream), 0)
            maps.setdefault(name, {})[key] = value
        return [DataPoint(name, values) for name, values in sorted(maps.items())]
