"""Reading a task's metrics every bucket and sending them to the consumers (Storm's
``setup-metrics!`` and ``metrics-tick``).

For each bucket size its tasks registered, an executor gets one timer on its own loop, beside
its tick and timeout timers, so it runs between the executor's other calls and on the
cluster's clock (simulated time in tests). A tick reads every metric of that size in each task;
the values that are not None become `DataPoint`s, sent unanchored on ``__metrics`` as
``[TaskInfo, [DataPoint, ...]]``; a task with none sends nothing.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from typing import Any

from .._config import conf_value
from .._tuple import Tuple
from ._api import DataPoint, IMetric, TaskInfo
from ._builtin import BUCKET_KEY, BuiltinMetrics
from ._consumers import METRICS_STREAM

_HOST = socket.gethostname()


def metric_timers(executor: Any) -> list[tuple[float, Callable[[], None]]]:
    """The ``(period, callback)`` timers that read ``executor``'s metrics (its tasks' own and
    Storm's built-ins); none if nobody consumes them. Closes the registration of its tasks
    (their open/prepare has returned when the loop asks)."""
    contexts = getattr(executor, "contexts", None)
    if not contexts:
        return []
    registered = {t: ctx.seal_metrics() for t, ctx in contexts.items()}
    collectors = executor.collectors
    routers = {t: collectors[t].routers.get(METRICS_STREAM) for t in registered}
    if any(r is None for r in routers.values()):
        return []  # no consumer registered: nobody would read them
    readers: dict[int, dict[int, list[Callable[[], list[DataPoint]]]]] = {}  # secs -> task -> readers
    builtin_secs = int(conf_value(executor.conf, BUCKET_KEY))
    for t, by_secs in registered.items():
        snapshot = task_snapshot(executor, t)
        if snapshot is not None:
            readers.setdefault(builtin_secs, {}).setdefault(t, []).append(BuiltinMetrics(snapshot).data_points)
        for secs, metrics in by_secs.items():
            readers.setdefault(secs, {}).setdefault(t, []).append(_reader(metrics, executor.component, t))
    return [(float(secs), _tick(executor, secs, by_task, routers)) for secs, by_task in sorted(readers.items())]


def task_snapshot(executor: Any, task: int) -> Callable[[], Any] | None:
    """The function that reads ``task``'s cumulative statistics for its built-in metrics
    (`Executor.sampled_snapshot`), or None where the executor keeps none."""
    if task not in getattr(executor, "sampled", {}):
        return None
    return functools.partial(executor.sampled_snapshot, task)


def _reader(metrics: dict[str, IMetric], component: str, task: int) -> Callable[[], list[DataPoint]]:
    def read() -> list[DataPoint]:
        points = []
        for name, metric in metrics.items():
            try:
                value = metric.get_value_and_reset()
            except Exception as e:  # user code: the worker stops, as for a raising execute, naming the metric
                raise RuntimeError(f"metric {name!r} of component [{component}] task {task}: "
                                   f"get_value_and_reset raised {type(e).__name__}: {e}") from e
            if value is not None:
                points.append(DataPoint(name, value))
        return points
    return read


def _tick(executor: Any, secs: int, by_task: dict[int, list[Callable[[], list[DataPoint]]]],
          routers: dict) -> Callable[[], None]:
    wiring = executor.wiring
    deliver = wiring.deliver
    wall = wiring.clock.wall
    port = wiring.worker_port
    component = executor.component

    def tick() -> None:
        now = int(wall())
        for t, readers in by_task.items():
            executor.current_task = t  # a metric that raises crashes the worker naming its task
            points = [p for read in readers for p in read()]
            if not points:
                continue
            r = routers[t]
            values = [TaskInfo(_HOST, port, component, t, now, secs), points]
            targets = r.choose(values)
            r.emitted += 1
            r.transferred += len(targets)
            tup = Tuple(values, r.src)
            for target in targets:
                deliver[target](tup)
    return tick
