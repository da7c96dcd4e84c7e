"""`MetricsConsumerBolt`: the bolt ``__metrics_<class>`` that runs one registered consumer
(Storm's ``MetricsConsumerBolt``).

Each input is one task's bucket, ``[TaskInfo, [DataPoint, ...]]``. The bolt filters the points
by name, queues the batch and acks the input at once; a thread of its own hands the batches to
``handle_data_points``, so a slow consumer (a remote write) never stalls the worker's loop, which
other executors share. The queue keeps the newest ``max.retain.metric.tuples`` batches: when the
consumer falls behind, the oldest are dropped, as Storm drops them.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import deque

from .._components import Bolt
from ._api import DataPoint
from ._consumers import ConsumerSpec

log = logging.getLogger("squall.metric")

_CACHE_SIZE = 1000  # names whose filter result is kept (Storm's FilterByMetricName cache)
CLEANUP_SECS = 0.5  # a consumer task's share of its worker's stop for what it has queued


class NameFilter:
    """Keeps a metric name if a whitelist pattern matches anywhere in it, or, with a blacklist,
    if none does (Storm's ``FilterByMetricName``); no list keeps every name."""

    def __init__(self, whitelist: list[str], blacklist: list[str]) -> None:
        self._keep_on_match = bool(whitelist)
        self._patterns = [re.compile(p) for p in (whitelist or blacklist)]
        self._cache: dict[str, bool] = {}

    def keep(self, name: str) -> bool:
        """Whether ``name`` passes."""
        if not self._patterns:
            return True
        hit = self._cache.get(name)
        if hit is None:
            hit = any(p.search(name) for p in self._patterns) == self._keep_on_match
            if len(self._cache) < _CACHE_SIZE:
                self._cache[name] = hit
        return hit


def expand(points: list[DataPoint], separator: str) -> list[DataPoint]:
    """``expandMapType``: a point whose value is a map becomes one point per key, named
    ``name + separator + key``; points whose value is None are dropped."""
    out: list[DataPoint] = []
    for p in points:
        if isinstance(p.value, dict):
            out.extend(DataPoint(f"{p.name}{separator}{k}", v) for k, v in p.value.items() if v is not None)
        elif p.value is not None:
            out.append(p)
    return out


class MetricsConsumerBolt(Bolt):
    """Runs the consumer of one ``topology.metrics.consumer.register`` entry; see the module note."""

    def __init__(self, spec: ConsumerSpec) -> None:
        self.spec = spec

    def prepare(self, conf, context, collector):
        from ..engine.serialize import resolve

        super().prepare(conf, context, collector)
        s = self.spec
        try:
            self.consumer = resolve(s.class_name)()
        except Exception as e:
            raise RuntimeError(
                f"Could not instantiate a class listed in config under section topology.metrics.consumer.register "
                f"with fully qualified name {s.class_name} ({type(e).__name__}: {e}) "
                f"(component [{context.get_this_component_id()}])") from e
        self.consumer.prepare(conf, s.argument, context, collector)
        self._filter = NameFilter(s.whitelist, s.blacklist)
        self._queue: deque = deque(maxlen=s.max_retain if s.max_retain > 0 else None)  # drops the oldest
        self._ready = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._handle, daemon=True,
                                        name=f"{context.get_this_component_id()}-{context.get_this_task_id()}")
        self._thread.start()

    def execute(self, tup):
        task_info, points = tup.values
        if self.spec.expand_map_type:
            points = expand(points, self.spec.separator)
        keep = self._filter.keep
        points = [p for p in points if keep(p.name)]
        with self._ready:  # a batch filtered to nothing too, as Storm hands it over
            self._queue.append((task_info, points))
            self._ready.notify()
        self.collector.ack(tup)

    def _handle(self) -> None:
        queue = self._queue
        while True:
            with self._ready:
                while not queue and not self._stopping:
                    self._ready.wait()
                if not queue:
                    return
                task_info, points = queue.popleft()
            try:
                self.consumer.handle_data_points(task_info, points)
            except Exception:
                log.exception("metrics consumer %s failed to handle the data points of task %s",
                              self.spec.class_name, task_info.src_task_id)

    def cleanup(self):
        with self._ready:
            self._stopping = True
            self._ready.notify()
        # what is queued is handed over first, briefly: a consumer stuck in a write must not
        # take the worker's stop budget from the other components' cleanup (Storm hands over
        # nothing more, and interrupts its thread)
        self._thread.join(CLEANUP_SECS)
        self.consumer.cleanup()
