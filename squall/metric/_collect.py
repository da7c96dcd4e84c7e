"""Reading a task's metrics every bucket and sending them to the consumers (Storm's
``setup-metrics!`` and ``metrics-tick``).

For each bucket size its tasks registered, an executor gets one timer on its own loop, beside
its tick and timeout timers, so it runs between the executor's other calls and on the
cluster's clock (simulated time in tests). A tick reads every metric of that size in each task;
the values that are not None become `DataPoint`s, sent unanchored on ``__metrics`` as
``[TaskInfo, [DataPoint, ...]]``; a task with none sends nothing.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from .._tuple import Tuple
from ._api import DataPoint, IMetric, TaskInfo
from ._consumers import METRICS_STREAM

_HOST = socket.gethostname()


def metric_timers(executor: Any) -> list[tuple[float, Callable[[], None]]]:
    """The ``(period, callback)`` timers that read ``executor``'s metrics; none if it has no
    metric or nobody consumes them. Closes the registration of its tasks (their open/prepare
    has returned when the loop asks)."""
    contexts = getattr(executor, "contexts", None)
    if not contexts:
        return []
    registered = {t: ctx.seal_metrics() for t, ctx in contexts.items()}
    collectors = executor.collectors
    routers = {t: collectors[t].routers.get(METRICS_STREAM) for t in registered}
    if any(r is None for r in routers.values()):
        return []  # no consumer registered: nobody would read them
    buckets: dict[int, list[tuple[int, dict[str, IMetric]]]] = {}
    for t, by_secs in registered.items():
        for secs, metrics in by_secs.items():
            buckets.setdefault(secs, []).append((t, metrics))
    return [(float(secs), _tick(executor, secs, tasks, routers)) for secs, tasks in sorted(buckets.items())]


def _tick(executor: Any, secs: int, tasks: list[tuple[int, dict[str, IMetric]]], routers: dict) -> Callable[[], None]:
    wiring = executor.wiring
    deliver = wiring.deliver
    wall = wiring.clock.wall
    port = wiring.worker_port
    component = executor.component

    def tick() -> None:
        now = int(wall())
        for t, metrics in tasks:
            executor.current_task = t  # a metric that raises crashes the worker naming its task
            points = []
            for name, metric in metrics.items():
                value = metric.get_value_and_reset()
                if value is not None:
                    points.append(DataPoint(name, value))
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
