"""`TopologyContext`: what a task knows about itself and the topology it runs in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._fields import Fields, GlobalStreamId
from ._system import DEFAULT_STREAM, SYSTEM_COMPONENT, SYSTEM_STREAM, TICK_STREAM
from ._transactional import TransactionalState, transactional_state
from ._tuple import TICK_FIELDS

SYSTEM_STREAM_FIELDS = Fields("event")
"""The fields of the ``__system`` stream that Storm's system topology gives every component
(``StormCommon.addSystemStreams``): a bolt may subscribe to it (nothing is emitted on it)."""

if TYPE_CHECKING:
    from ._grouping import Grouping
    from ._topology import StormTopology
    from ._worker_resources import WorkerResources


class TopologyContext:
    """Answers a task's questions about the topology: its ids, its neighbours, their fields.

    Made by squall for each task and passed to ``open``/``prepare``; users read it.
    """

    def __init__(self, topology: StormTopology, storm_id: str, task_to_component: dict[int, str],
                 task_id: int, worker_port: int, worker_tasks: list[int], conf: dict[str, Any],
                 state_home: Any = None, transactional_home: Any = None,
                 worker_resources: WorkerResources | None = None, root_origins: Any = None) -> None:
        self._topology = topology
        self._storm_id = storm_id
        self._task_to_component = task_to_component
        self._component_tasks: dict[str, list[int]] = {}
        for t, c in sorted(task_to_component.items()):
            self._component_tasks.setdefault(c, []).append(t)
        self._task_id = task_id
        self._worker_port = worker_port
        self._worker_tasks = sorted(worker_tasks)
        self._conf = conf
        self.state_home = state_home  # what the host lends state providers (squall.state.StateHome)
        # what the host lends Trident's coordinators (squall._transactional.TransactionalBackend)
        self.transactional_home = transactional_home
        # what the worker lends all of its tasks (None outside a worker): the spouts that keep
        # retry budgets share their squall.external.retry.WorkerGate through it
        self.worker_resources = worker_resources
        # how roots name their spout task (squall.engine.origins.RootOrigins; None: they do not,
        # or outside a worker): an event-time window behind a bolt keys its watermark by them
        self.root_origins = root_origins
        # bucket secs -> name -> metric; registration closes when open/prepare returns (`seal_metrics`)
        self._metrics: dict[int, dict[str, Any]] = {}
        self._metric_names: set[str] = set()
        self._metrics_sealed = False

    def get_this_task_id(self) -> int:
        """This task's id."""
        return self._task_id

    def get_this_component_id(self) -> str:
        """This task's component id."""
        return self._task_to_component[self._task_id]

    def get_this_task_index(self) -> int:
        """Position of this task among its component's tasks (0-based)."""
        return self.get_component_tasks(self.get_this_component_id()).index(self._task_id)

    def get_component_tasks(self, component_id: str) -> list[int]:
        """The task ids of ``component_id``, sorted (empty if unknown)."""
        return list(self._component_tasks.get(component_id, []))

    def get_component_id(self, task_id: int) -> str | None:
        """The component of ``task_id`` (``__system`` for -1, None if unknown)."""
        if task_id == -1:
            return "__system"
        return self._task_to_component.get(task_id)

    def get_component_ids(self) -> list[str]:
        """All component ids, system ones included, sorted."""
        return sorted(self._component_tasks)

    def get_this_sources(self) -> dict[GlobalStreamId, Grouping]:
        """The streams this component subscribes to, with their groupings."""
        spec = self._topology.components.get(self.get_this_component_id())
        return dict(spec.inputs) if spec is not None else {}

    def get_sources(self, component_id: str) -> dict[GlobalStreamId, Grouping]:
        """The streams ``component_id`` subscribes to."""
        spec = self._topology.components.get(component_id)
        return dict(spec.inputs) if spec is not None else {}

    def get_this_targets(self) -> dict[str, dict[str, Grouping]]:
        """For each stream this component emits: ``{subscriber id: grouping}``."""
        return self.get_targets(self.get_this_component_id())

    def get_targets(self, component_id: str) -> dict[str, dict[str, Grouping]]:
        """For each stream ``component_id`` emits: ``{subscriber id: grouping}``."""
        out: dict[str, dict[str, Grouping]] = {}
        for cid, spec in self._topology.components.items():
            for (src, stream), grouping in spec.inputs.items():
                if src == component_id:
                    out.setdefault(stream, {})[cid] = grouping
        return out

    def get_this_streams(self) -> list[str]:
        """The streams this component declares."""
        spec = self._topology.components.get(self.get_this_component_id())
        return list(spec.streams) if spec is not None else []

    def get_component_output_fields(self, component_id: str, stream_id: str = DEFAULT_STREAM) -> Fields:
        """The fields of ``component_id``'s stream ``stream_id``; as in Storm, whose context
        is the system topology's, the system streams a bolt sees are known too: ``__system``'s
        tick stream ``__tick`` (``rate_secs``, the fields of a tick tuple) and the ``__system``
        stream of every component (``event``).

        Raises:
            ValueError: naming the component and stream when there is no such stream.
        """
        spec = self._topology.components.get(component_id)
        if spec is not None and stream_id in spec.streams:
            return spec.streams[stream_id].fields
        if component_id == SYSTEM_COMPONENT and stream_id == TICK_STREAM:
            return TICK_FIELDS
        if stream_id == SYSTEM_STREAM and (spec is not None or component_id in self._component_tasks
                                           or component_id == SYSTEM_COMPONENT):
            return SYSTEM_STREAM_FIELDS
        raise ValueError(f"component [{component_id}] declares no stream [{stream_id}]")

    def get_this_output_fields(self, stream_id: str = DEFAULT_STREAM) -> Fields:
        """The fields of this component's stream ``stream_id``."""
        return self.get_component_output_fields(self.get_this_component_id(), stream_id)

    def get_this_worker_port(self) -> int:
        """The port of the worker this task runs in."""
        return self._worker_port

    def get_this_worker_tasks(self) -> list[int]:
        """All task ids in this task's worker, sorted."""
        return list(self._worker_tasks)

    def get_storm_id(self) -> str:
        """The topology's id (``name-counter-epochsecs``)."""
        return self._storm_id

    def get_storm_conf(self) -> dict[str, Any]:
        """The topology's configuration as this task sees it."""
        return self._conf

    def transactional_state(self, name: str) -> TransactionalState:
        """The topology's durable state ``name`` where the host keeps it (Storm's ZooKeeper
        ``/transactional/<name>``): a `TransactionalState` (`squall._transactional`, which
        Trident re-exports as `squall.trident.txstate.TransactionalState`), the same for every
        task of the topology and for the topology submitted again under the same name.

        Raises:
            TransactionalStateError: a bad ``name``, or a host that lends none.
        """
        return transactional_state(self, name)

    def register_metric(self, name: str, metric: Any, bucket_secs: int) -> Any:
        """Report ``metric`` (an `IMetric`, or an `IReducer`/`ICombiner`, wrapped in a
        `ReducedMetric`/`CombinedMetric`) under ``name`` every ``bucket_secs``
        seconds to the topology's metrics consumers; returns the metric. Only from ``open`` or
        ``prepare``, as Storm's.

        Raises:
            RuntimeError: called after ``open``/``prepare`` returned.
            ValueError: ``name`` registered twice in this task, no metric, or a bucket size
                that is not a positive whole number of seconds (naming the metric and component).
        """
        where = f"metric {name!r} of component [{self.get_this_component_id()}] task {self._task_id}"
        if self._metrics_sealed:
            raise RuntimeError(f"TopologyContext.register_metric can only be called from within overridden "
                               f"Bolt.prepare() or Spout.open() ({where})")
        as_metric = getattr(metric, "squall_as_metric", None)  # an IReducer's, an ICombiner's
        if as_metric is not None:
            metric = as_metric()
        if metric is None or not callable(getattr(metric, "get_value_and_reset", None)):
            raise ValueError(f"Cannot register a metric without get_value_and_reset(), got "
                             f"{type(metric).__name__} ({where})")
        secs = bucket_secs
        if type(secs) is not int or secs <= 0:
            raise ValueError(f"TopologyContext.register_metric needs a positive whole number of seconds as "
                             f"bucket_secs, got {secs!r} ({where})")
        if name in self._metric_names:
            raise ValueError(f"The same metric name `{name}` was registered twice ({where})")
        self._metric_names.add(name)
        self._metrics.setdefault(secs, {})[name] = metric
        return metric

    def get_registered_metric_by_name(self, name: str) -> Any:
        """The metric registered under ``name`` in this task, or None."""
        for metrics in self._metrics.values():
            if name in metrics:
                return metrics[name]
        return None

    def seal_metrics(self) -> dict[int, dict[str, Any]]:
        """End registration (open/prepare returned); the metrics by bucket size, for the executor."""
        self._metrics_sealed = True
        return self._metrics
