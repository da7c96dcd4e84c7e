"""What a Trident operation or spout gets as its ``context`` when it runs under Spark.

On squall's engine that is the task's `TopologyContext`; under Spark an operation runs in one
Spark task (an executor's Python worker: one partition of one micro-batch) or on the driver
(the states), and a spout's coordinator and emitter in the Data Source's reader. `SparkTaskContext`
answers the calls Trident's operations and spouts make: which component and partition this is,
how many there are, the configuration, and an in-memory transactional state (a spout's metadata
lives in Spark's offsets, so nothing needs to outlive the process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SparkTaskContext:
    """A `TopologyContext` stand-in: ``component`` in ``num_tasks`` partitions, this one ``task_index``."""

    component: str
    task_index: int = 0
    num_tasks: int = 1
    conf: dict[str, Any] = field(default_factory=dict)
    topology_name: str = "trident-spark"
    _states: dict[str, dict[str, Any]] = field(default_factory=dict)

    def get_this_component_id(self) -> str:
        """The component (a Trident bolt's id, or a spout's)."""
        return self.component

    def get_this_task_index(self) -> int:
        """This partition's index."""
        return self.task_index

    def get_this_task_id(self) -> int:
        """This partition's index, from 1 (a task id is never 0 in squall)."""
        return self.task_index + 1

    def get_component_tasks(self, component_id: str) -> list[int]:
        """This component's partitions as task ids; any other component: one task."""
        n = self.num_tasks if component_id == self.component else 1
        return list(range(1, n + 1))

    def get_storm_id(self) -> str:
        """The topology's name (a Spark query has no Storm id)."""
        return self.topology_name

    def get_storm_conf(self) -> dict[str, Any]:
        """The topology's configuration."""
        return self.conf

    def transactional_state(self, name: str) -> _DictState:
        """An in-memory key-value under ``name`` (offsets, not this, are what Spark keeps)."""
        return _DictState(self._states.setdefault(name, {}))

    def register_metric(self, name: str, metric: Any, bucket_secs: int) -> Any:
        """Metrics are not reported from Spark tasks: the metric is returned unregistered."""
        return metric


class _DictState:
    """`TransactionalState`'s calls over a dict."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def get(self, key: str) -> Any:
        """The value under ``key``, or None."""
        return self._data.get(key)

    def put(self, key: str, value: Any) -> None:
        """Set ``key``."""
        self._data[key] = value

    def delete(self, key: str, prefix: bool = False) -> None:
        """Drop ``key`` (every key starting with it, with ``prefix``)."""
        for k in [k for k in self._data if k == key or (prefix and k.startswith(key))]:
            del self._data[k]


__all__ = ["SparkTaskContext"]
