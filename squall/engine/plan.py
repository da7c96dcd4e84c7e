"""Tasks and executors of a topology, numbered and split as Storm does.

Task ids (``StormCommon.stormTaskInfo``): all component ids of the system topology, the user's
plus ``__acker`` and the metrics consumers ``__metrics_<class>``, sorted in Java string order (code-point order, so ``"1" < "__acker" < "bolt"``),
get consecutive ids from 1, as many as each has tasks. A component's tasks are split over its
executors by `partition_fixed`: contiguous ranges, larger chunks first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._config import Config, component_conf
from .._errors import InvalidTopologyException
from .._system import ACKER_COMPONENT, CONTROL_STREAMS
from .._topology import StormTopology
from .origins import RootOrigins, feeding_spouts, root_origins

SUBMIT_CHECK = "squall_check_at_submit"
"""The method a bolt may define to check itself at submit, once its component's configuration
is merged: ``check(component_id, conf, streams, inputs, spouts=...)`` with its declared output
streams (stream -> `StreamInfo`), the `StreamInfo` of each (component, stream) it subscribes to
(None if undeclared), and, if it takes a ``spouts`` keyword, the merged configuration of each spout
whose tuples reach it (directly or through other bolts); it raises `InvalidTopologyException` to refuse the topology. A bolt that wraps
another passes the call on (Storm checks a windowed bolt's window against the message timeout
so; `squall.windowing` does it through this)."""

_SYSTEM_TRANSFORMS: list[Callable[[StormTopology, dict[str, Any]], StormTopology]] = []


def register_system_components(transform: Callable[[StormTopology, dict[str, Any]], StormTopology]) -> None:
    """Have `make_plan` pass each submitted topology and its merged configuration through
    ``transform`` before it numbers the tasks: Storm's system topology, whose components come
    from the configuration (`squall.metric` adds the consumers of
    ``topology.metrics.consumer.register`` so). ``transform`` returns the topology to plan (the
    same one when it has nothing to add); registering one twice has no effect."""
    if transform not in _SYSTEM_TRANSFORMS:
        _SYSTEM_TRANSFORMS.append(transform)


def partition_fixed(num_executors: int, tasks: list[int]) -> list[list[int]]:
    """Split sorted ``tasks`` into at most ``num_executors`` contiguous chunks, larger first.

    >>> partition_fixed(3, [1, 2, 3, 4, 5])
    [[1, 2], [3, 4], [5]]
    """
    if not tasks:
        return []
    n = min(num_executors, len(tasks))
    base, extra = divmod(len(tasks), n)
    out, i = [], 0
    for k in range(n):
        size = base + (1 if k < extra else 0)
        out.append(tasks[i:i + size])
        i += size
    return out


@dataclass(frozen=True)
class ExecutorSpec:
    """One executor: a component's contiguous range of tasks, run together on one thread."""

    component: str
    tasks: tuple[int, ...]

    @property
    def id(self) -> tuple[int, int]:
        """Storm's executor id ``[first task, last task]``."""
        return (self.tasks[0], self.tasks[-1])


@dataclass
class TopologyPlan:
    """Everything workers need to know about a submitted topology, resolved once at submit."""

    name: str
    storm_id: str
    topology: StormTopology
    conf: dict[str, Any]
    given_conf: dict[str, Any]
    component_confs: dict[str, dict[str, Any]]
    task_to_component: dict[int, str]
    component_tasks: dict[str, list[int]]
    executors: list[ExecutorSpec]
    num_workers: int
    parallelism: dict[str, int] = field(default_factory=dict)

    @property
    def acking(self) -> bool:
        """True when ackers exist (Storm's ``hasAckers``)."""
        return bool(self.component_tasks.get(ACKER_COMPONENT))

    @property
    def acker_tasks(self) -> list[int]:
        """The acker's task ids."""
        return self.component_tasks.get(ACKER_COMPONENT, [])

    @property
    def root_origins(self) -> RootOrigins | None:
        """How the roots name their spout task, for event-time windows behind bolts (None: they
        do not; `squall.engine.origins`)."""
        return root_origins(self.topology, self.task_to_component, self.component_confs)

    def downstream(self, component: str) -> set[str]:
        """Every component that ``component``'s tuples can reach (its subscribers, theirs, and
        so on; ``component`` itself only through a cycle)."""
        comps = self.topology.components
        seen: set[str] = set()
        todo = [component]
        while todo:
            src = todo.pop()
            for cid, spec in comps.items():
                if cid not in seen and any(s == src for (s, _stream) in spec.inputs):
                    seen.add(cid)
                    todo.append(cid)
        return seen

    def data_sources(self, component: str) -> set[str]:
        """The components ``component`` takes data from (its subscriptions but to checkpoint,
        tick and system streams)."""
        spec = self.topology.components.get(component)
        return {src for (src, stream) in spec.inputs if stream not in CONTROL_STREAMS} if spec is not None else set()

    def downstream_tasks(self, component: str) -> set[int]:
        """The tasks of every component in `downstream`."""
        return {t for cid in self.downstream(component) for t in self.component_tasks.get(cid, [])}

    def _rebalanceable(self) -> list[str]:
        """The components ``-e`` can name, spouts first, then bolts, each sorted by id: a
        Trident topology's are the planner's (``spout-<txid>``, ``b-<N>``), not its stream names.
        The system's (``__*``: the acker, metrics consumers) are left out."""
        comps = self.topology.components
        return sorted((cid for cid in self.parallelism if not cid.startswith("__")),
                      key=lambda cid: (cid not in comps or comps[cid].kind != "spout", cid))

    def with_parallelism(self, num_workers: int | None, executors: dict[str, int] | None) -> TopologyPlan:
        """The plan after a rebalance: same tasks, new worker and executor counts."""
        par = dict(self.parallelism)
        for cid, n in (executors or {}).items():
            if cid not in par:
                trident = f"; a Trident stream's spout runs in spout-{cid}" if f"spout-{cid}" in par else ""
                raise InvalidTopologyException(f"rebalance: topology {self.name!r} has no component [{cid}] "
                                               f"(its components: {', '.join(self._rebalanceable())}{trident})")
            if type(n) is not int or n < 1:
                raise InvalidTopologyException(
                    f"rebalance: component [{cid}] needs a positive number of executors, got {n!r}")
            par[cid] = n
        workers = self.num_workers if num_workers is None else num_workers
        if type(workers) is not int or workers < 1:
            raise InvalidTopologyException(f"rebalance: number of workers must be positive, got {workers!r}")
        return TopologyPlan(self.name, self.storm_id, self.topology, self.conf, self.given_conf,
                            self.component_confs, self.task_to_component, self.component_tasks,
                            _executors(self.component_tasks, par), workers, par)


def _cap(n: int, cap: Any) -> int:
    return min(n, cap) if cap else n


def make_plan(name: str, storm_id: str, topology: StormTopology, conf: dict[str, Any],
              given_conf: dict[str, Any]) -> TopologyPlan:
    """Number the tasks and split them into executors.

    ``conf`` is the topology's merged configuration, ``given_conf`` what the user's Config set.
    """
    for transform in _SYSTEM_TRANSFORMS:  # Storm's system topology (metrics consumer bolts ...)
        topology = transform(topology, conf)
    confs: dict[str, dict[str, Any]] = {}
    num_tasks: dict[str, int] = {}
    parallelism: dict[str, int] = {}
    for cid, spec in topology.components.items():
        cconf = component_conf(conf, spec.conf, given_conf, cid)
        # both caps hold: the merged one (the topology's Config wins) and the component's own,
        # which may be what makes it correct (a Trident coordinator, FixedBatchSpout: 1 task);
        # Storm gives the component's alone
        caps = [c for c in (cconf.get(Config.TOPOLOGY_MAX_TASK_PARALLELISM),
                            spec.conf.get(Config.TOPOLOGY_MAX_TASK_PARALLELISM)) if c]
        cap = min(caps) if caps else None
        # Storm's getComponentParallelism: the component's topology.tasks, else the topology's,
        # else the parallelism hint.
        tasks = spec.conf.get(Config.TOPOLOGY_TASKS) or conf.get(Config.TOPOLOGY_TASKS) or spec.parallelism
        num_tasks[cid] = _cap(tasks, cap)
        parallelism[cid] = _cap(spec.parallelism, cap)
        confs[cid] = cconf
    for cid, spec in topology.components.items():
        check = getattr(spec.obj, SUBMIT_CHECK, None)
        if check is not None:  # e.g. Storm's checks of a window against the message timeout
            inputs = {s: topology.components[s[0]].streams.get(s[1]) for s in spec.inputs}
            if _takes_spouts(check):
                check(cid, confs[cid], spec.streams, inputs, spouts={s: confs[s] for s in feeding_spouts(topology, cid)})
            else:  # a check written before ``spouts`` was given
                check(cid, confs[cid], spec.streams, inputs)
    workers = conf[Config.TOPOLOGY_WORKERS]
    ackers = conf.get(Config.TOPOLOGY_ACKER_EXECUTORS)
    ackers = workers if ackers is None else ackers
    if ackers:
        num_tasks[ACKER_COMPONENT] = ackers
        parallelism[ACKER_COMPONENT] = ackers
        confs[ACKER_COMPONENT] = dict(conf)
    task_to_component: dict[int, str] = {}
    component_tasks: dict[str, list[int]] = {}
    next_id = 1
    for cid in sorted(num_tasks):  # Python's str order is Java's for these ids
        ids = list(range(next_id, next_id + num_tasks[cid]))
        next_id += num_tasks[cid]
        component_tasks[cid] = ids
        for t in ids:
            task_to_component[t] = cid
    return TopologyPlan(name, storm_id, topology, conf, dict(given_conf), confs, task_to_component,
                        component_tasks, _executors(component_tasks, parallelism), workers, parallelism)


def _takes_spouts(check: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(check).parameters
    except (TypeError, ValueError):  # a callable without a signature: the four arguments it was always given
        return False
    return "spouts" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _executors(component_tasks: dict[str, list[int]], parallelism: dict[str, int]) -> list[ExecutorSpec]:
    out = []
    for cid in sorted(component_tasks):
        for chunk in partition_fixed(parallelism[cid], component_tasks[cid]):
            out.append(ExecutorSpec(cid, tuple(chunk)))
    return sorted(out, key=lambda e: e.tasks[0])
