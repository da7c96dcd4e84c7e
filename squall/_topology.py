"""Building a topology: `TopologyBuilder`, its declarers, and `StormTopology`.

`TopologyBuilder.create_topology()` checks the whole graph and raises
`InvalidTopologyException` naming the culprit (component id, stream, field), so a mistake shows
up where the topology is written, not later on a worker.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ._collectors import OutputFieldsDeclarer, StreamInfo
from ._components import BasicBolt, Bolt, Spout
from ._config import Config, checked_value, with_whole_numbers
from ._error_lines import exception_text
from ._errors import InvalidTopologyException
from ._fields import Fields, GlobalStreamId
from ._grouping import (
    ALL,
    CUSTOM,
    DIRECT,
    FIELDS,
    GLOBAL,
    LOCAL_OR_SHUFFLE,
    NONE,
    PARTIAL_KEY,
    SHUFFLE,
    CustomStreamGrouping,
    Grouping,
)
from ._system import DEFAULT_STREAM, SYSTEM_STREAM, is_system_id

# The builder's extension points. The features on top of the core API (windowing, state, ...)
# register here when they are imported, so that this module imports none of them: see
# docs/architecture.md, "Extension points".
_BOLT_KINDS: dict[type, Callable[[Any], Any] | None] = {}
_TOPOLOGY_TRANSFORMS: list[Callable[[dict[str, ComponentSpec]], dict[str, ComponentSpec]]] = []


def register_bolt_kind(cls: type, executor: Callable[[Any], Any] | None = None) -> None:
    """Let `TopologyBuilder.set_bolt` take instances of ``cls`` besides `Bolt` and `BasicBolt`.

    ``executor(bolt)`` makes the `Bolt` that runs such a bolt (a windowed bolt runs inside a
    `WindowedBoltExecutor`, as in Storm); None keeps the bolt as given, for a transform of
    `register_topology_transform` to wrap. The most derived registered class of a bolt's type
    decides. Registering a class again replaces its executor.
    """
    _BOLT_KINDS[cls] = executor


def register_topology_transform(transform: Callable[[dict[str, ComponentSpec]], dict[str, ComponentSpec]]) -> None:
    """Have `TopologyBuilder.create_topology` pass the components (id -> `ComponentSpec`, each
    with its declared streams) through ``transform`` before it validates them, as Storm's
    ``createTopology`` adds its checkpoint spout. ``transform`` returns the components to use
    (the same dict when it has nothing to do). Transforms run in the order they were registered;
    registering one twice has no effect."""
    if transform not in _TOPOLOGY_TRANSFORMS:
        _TOPOLOGY_TRANSFORMS.append(transform)


class ComponentSpec:
    """One spout or bolt of a topology: the object, its parallelism, configuration and wiring.

    ``parallelism`` is the number of executors; ``conf`` the component's own configuration
    (its ``get_component_configuration()`` overlaid with the declarer's settings); ``inputs``
    maps each subscribed stream to its grouping; ``streams`` are the declared outputs.
    """

    def __init__(self, component_id: str, obj: Any, kind: str, parallelism: int) -> None:
        self.id = component_id
        self.obj = obj
        self.kind = kind
        self.parallelism = parallelism
        self.conf: dict[str, Any] = {}
        self.inputs: dict[GlobalStreamId, Grouping] = {}
        self.streams: dict[str, StreamInfo] = {}

    def copy(self, obj: Any = None) -> ComponentSpec:
        """A shallow copy, optionally with another object (used to mock spouts)."""
        c = ComponentSpec(self.id, self.obj if obj is None else obj, self.kind, self.parallelism)
        c.conf = dict(self.conf)
        c.inputs = dict(self.inputs)
        c.streams = dict(self.streams)
        return c

    def __repr__(self) -> str:
        return f"ComponentSpec({self.id!r}, {self.kind}, parallelism={self.parallelism})"


class StormTopology:
    """A validated topology: components by id. Made by `TopologyBuilder.create_topology`."""

    def __init__(self, components: dict[str, ComponentSpec]) -> None:
        self.components = components

    @property
    def spouts(self) -> dict[str, ComponentSpec]:
        """The spouts, by id."""
        return {k: c for k, c in self.components.items() if c.kind == "spout"}

    @property
    def bolts(self) -> dict[str, ComponentSpec]:
        """The bolts, by id."""
        return {k: c for k, c in self.components.items() if c.kind == "bolt"}

    def get_spouts(self) -> dict[str, ComponentSpec]:
        """Storm's ``get_spouts``."""
        return self.spouts

    def get_bolts(self) -> dict[str, ComponentSpec]:
        """Storm's ``get_bolts``."""
        return self.bolts

    def with_components(self, components: dict[str, ComponentSpec]) -> StormTopology:
        """A validated copy with some components replaced or added."""
        merged = {k: c.copy() for k, c in self.components.items()}
        merged.update(components)
        topo = StormTopology(merged)
        validate_topology(topo)
        return topo


def not_a_topology(got: Any, verb: str = "submit_topology") -> InvalidTopologyException:
    """The error for ``verb`` given ``got`` where a `StormTopology` belongs. A record that holds
    one (`squall.sparse.translate`'s ``Translation``, `squall.sparse.load`'s ``LoadedTopology``:
    both have ``.topology`` and ``.conf``) is named with what to pass instead, as a user who
    passed the whole record needs to hear."""
    inner = getattr(got, "topology", None)
    hint = ""
    if isinstance(inner, StormTopology):
        hint = f": pass its .topology{', and its .conf as the configuration' if hasattr(got, 'conf') else ''}"
    return InvalidTopologyException(f"{verb} needs a StormTopology (from TopologyBuilder.create_topology()), "
                                    f"got {type(got).__name__}{hint}")


class _Declarer:
    def __init__(self, spec: ComponentSpec) -> None:
        self._spec = spec

    def set_num_tasks(self, n: int) -> _Declarer:
        """Number of tasks of this component (default: its parallelism hint); a whole-number float
        (a Flux file's ``numTasks: 2.0``) is its int, as Storm's ``setNumTasks(Number)`` takes it."""
        n = checked_value(Config.TOPOLOGY_TASKS, n)
        if n is not None and (type(n) is not int or n < 1):
            raise InvalidTopologyException(
                f"Component [{self._spec.id}]: number of tasks must be a positive integer, got {n!r}")
        self._spec.conf[Config.TOPOLOGY_TASKS] = n
        return self

    def add_configuration(self, key: str, value: Any) -> _Declarer:
        """Set one key of this component's configuration (an integer key's ``2.0`` as its 2:
        `squall._config.checked_value`)."""
        self._spec.conf[key] = checked_value(key, value)
        return self

    def add_configurations(self, conf: dict[str, Any]) -> _Declarer:
        """Set several keys of this component's configuration."""
        self._spec.conf.update(with_whole_numbers(conf))
        return self

    def set_max_spout_pending(self, n: int) -> _Declarer:
        """``topology.max.spout.pending`` for this component."""
        return self.add_configuration(Config.TOPOLOGY_MAX_SPOUT_PENDING, n)

    def set_max_task_parallelism(self, n: int) -> _Declarer:
        """``topology.max.task.parallelism`` for this component."""
        return self.add_configuration(Config.TOPOLOGY_MAX_TASK_PARALLELISM, n)

    def set_debug(self, flag: bool) -> _Declarer:
        """``topology.debug`` for this component."""
        return self.add_configuration(Config.TOPOLOGY_DEBUG, flag)

    def set_own_thread(self, flag: bool = True) -> _Declarer:
        """Run this component's executors on their own thread (for blocking user code)."""
        return self.add_configuration(Config.TOPOLOGY_EXECUTOR_OWN_THREAD, flag)


def _storm_order(what: Any, stream: Any, takes: Callable[[Any], bool]) -> tuple[Any, Any]:
    """``(what, stream)`` of a grouping given in squall's order, ``(component, what, stream)``,
    or in Storm's, ``fieldsGrouping(componentId, streamId, fields)`` and the like, which a Storm
    user writes out of habit: a stream id is a str, so a str followed by what the grouping takes
    (``takes``: a `Fields` or a list of names, a `CustomStreamGrouping`) can only be Storm's
    order. Anything else is left as given, for `BoltDeclarer._subscribe` to refuse naming both
    (a stream id of None is not a field list)."""
    if isinstance(what, str) and not isinstance(stream, str) and takes(stream):
        return stream, what
    return what, stream


def _is_fields(value: Any) -> bool:
    return isinstance(value, Fields) or (isinstance(value, (list, tuple)) and all(isinstance(n, str) for n in value))


def _is_custom_grouping(value: Any) -> bool:
    return isinstance(value, CustomStreamGrouping)


class SpoutDeclarer(_Declarer):
    """Returned by `TopologyBuilder.set_spout`; configures the spout."""


class BoltDeclarer(_Declarer):
    """Returned by `TopologyBuilder.set_bolt`; configures the bolt and subscribes it to streams."""

    def _subscribe(self, component_id: str, stream: str, grouping: Grouping) -> BoltDeclarer:
        if not isinstance(component_id, str) or not isinstance(stream, str):
            raise InvalidTopologyException(
                f"Component [{self._spec.id}] subscribes with a non-string id: {component_id!r}, {stream!r}")
        self._spec.inputs[GlobalStreamId(component_id, stream)] = grouping
        return self

    def shuffle_grouping(self, component_id: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Tuples are spread evenly over this bolt's tasks."""
        return self._subscribe(component_id, stream, Grouping(SHUFFLE))

    def fields_grouping(self, component_id: str, fields: Fields | list[str],
                        stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Tuples with equal values of ``fields`` always go to the same task. Storm's order,
        ``fields_grouping(component_id, stream, fields)``, is taken too (`_storm_order`)."""
        fields, stream = _storm_order(fields, stream, _is_fields)
        return self._subscribe(component_id, stream, Grouping(FIELDS, _fields(fields)))

    def partial_key_grouping(self, component_id: str, fields: Fields | list[str],
                             stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Like fields grouping, but each key is split over two tasks by load. Storm's order,
        ``partial_key_grouping(component_id, stream, fields)``, is taken too."""
        fields, stream = _storm_order(fields, stream, _is_fields)
        return self._subscribe(component_id, stream, Grouping(PARTIAL_KEY, _fields(fields)))

    def all_grouping(self, component_id: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Every task gets every tuple."""
        return self._subscribe(component_id, stream, Grouping(ALL))

    def global_grouping(self, component_id: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """All tuples go to the task with the lowest id."""
        return self._subscribe(component_id, stream, Grouping(GLOBAL, Fields()))

    def none_grouping(self, component_id: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Any task (random)."""
        return self._subscribe(component_id, stream, Grouping(NONE))

    def direct_grouping(self, component_id: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """The emitter picks the task with ``emit_direct``; the stream must be declared direct."""
        return self._subscribe(component_id, stream, Grouping(DIRECT))

    def local_or_shuffle_grouping(self, component_id: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Shuffle among this bolt's tasks in the emitter's worker, if any, else among all."""
        return self._subscribe(component_id, stream, Grouping(LOCAL_OR_SHUFFLE))

    def custom_grouping(self, component_id: str, grouping: CustomStreamGrouping,
                        stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        """Route with a `CustomStreamGrouping` (copied per emitting task). Storm's order,
        ``custom_grouping(component_id, stream, grouping)``, is taken too."""
        grouping, stream = _storm_order(grouping, stream, _is_custom_grouping)
        if not isinstance(grouping, CustomStreamGrouping):
            raise InvalidTopologyException(
                f"Component [{self._spec.id}]: custom grouping on [{component_id}] must be a "
                f"CustomStreamGrouping, got {type(grouping).__name__}")
        return self._subscribe(component_id, stream, Grouping(CUSTOM, custom=grouping))


def _fields(fields: Fields | list[str] | str) -> Fields:
    if isinstance(fields, Fields):
        return fields
    if isinstance(fields, str):
        return Fields(fields)
    return Fields(list(fields))


def _streamparse(obj: Any) -> str:
    """For a refused component that is a streamparse (pystorm) one, what runs it instead (by its
    classes' modules: the core API imports no pystorm), else nothing. A user porting a streamparse
    topology to squall's API passed its spout or bolt objects as they were."""
    if not any(k.__module__.startswith("pystorm.") for k in type(obj).__mro__):
        return ""
    return (f", a streamparse (pystorm) component: squall runs its class in process from a streamparse "
            f"Topology (squall sparse run) or a Flux file's className ({type(obj).__module__}."
            f"{type(obj).__qualname__}), or write it as a squall {'Spout' if _pystorm_spout(obj) else 'Bolt'}")


def _pystorm_spout(obj: Any) -> bool:
    return any(k.__module__.startswith("pystorm.") and k.__name__ == "Spout" for k in type(obj).__mro__)


class TopologyBuilder:
    """Wires spouts and bolts into a topology.

    >>> from squall import TopologyBuilder, Fields
    >>> from squall.testing import FeederSpout
    >>> builder = TopologyBuilder()
    >>> _ = builder.set_spout("words", FeederSpout(Fields("word")), 1)
    >>> topology = builder.create_topology()
    >>> sorted(topology.components)
    ['words']
    """

    def __init__(self) -> None:
        self._components: dict[str, ComponentSpec] = {}

    def _add(self, component_id: str, obj: Any, kind: str, parallelism_hint: int | None) -> ComponentSpec:
        if not isinstance(component_id, str) or not component_id:
            raise InvalidTopologyException(f"component id must be a non-empty string, got {component_id!r}")
        if is_system_id(component_id):
            raise InvalidTopologyException(f"{component_id} is not a valid component id.")
        if component_id in self._components:
            what = "Bolt" if kind == "bolt" else "Spout"
            raise InvalidTopologyException(
                f"Duplicate component ids: {what} has already been declared for id {component_id}")
        if parallelism_hint is None:
            parallelism_hint = 1
        if type(parallelism_hint) is not int or parallelism_hint < 1:
            raise InvalidTopologyException(
                f"Component [{component_id}]: Parallelism must be positive, got {parallelism_hint!r}")
        spec = ComponentSpec(component_id, obj, kind, parallelism_hint)
        self._components[component_id] = spec
        return spec

    def set_spout(self, component_id: str, spout: Spout, parallelism_hint: int | None = None) -> SpoutDeclarer:
        """Add a spout with ``parallelism_hint`` executors (default 1)."""
        if not isinstance(spout, Spout):
            raise InvalidTopologyException(
                f"Component [{component_id}]: set_spout needs a Spout, got {type(spout).__name__}{_streamparse(spout)}")
        return SpoutDeclarer(self._add(component_id, spout, "spout", parallelism_hint))

    def set_bolt(self, component_id: str, bolt: Any, parallelism_hint: int | None = None) -> BoltDeclarer:
        """Add a bolt (a `Bolt`, `BasicBolt`, `squall.BaseWindowedBolt` or
        `squall.BaseStatefulBolt`: every kind `register_bolt_kind` was given) with
        ``parallelism_hint`` executors (default 1). A windowed bolt runs inside a
        `WindowedBoltExecutor` (a stateful windowed one inside a
        `squall.state.StatefulWindowedBoltExecutor`), as in Storm."""
        kind = next((k for k in type(bolt).__mro__ if k in _BOLT_KINDS), None)
        if kind is not None:
            executor = _BOLT_KINDS[kind]
            if executor is not None:
                bolt = executor(bolt)
        elif not isinstance(bolt, (Bolt, BasicBolt)):
            kinds = ["Bolt", "BasicBolt", *(k.__name__ for k in _BOLT_KINDS)]
            raise InvalidTopologyException(
                f"Component [{component_id}]: set_bolt needs a {', '.join(kinds[:-1])} or {kinds[-1]}, "
                f"got {type(bolt).__name__}{_streamparse(bolt)}")
        return BoltDeclarer(self._add(component_id, bolt, "bolt", parallelism_hint))

    def create_topology(self) -> StormTopology:
        """Validate the wiring and return the topology.

        The transforms of `register_topology_transform` run first: so a topology with a
        `BaseStatefulBolt` gets Storm's checkpointing here (`squall.state._wiring`): the
        ``$checkpointspout`` and its ``$checkpoint`` streams.

        Raises:
            InvalidTopologyException: naming the component, stream or field at fault.
        """
        components: dict[str, ComponentSpec] = {}
        for cid, spec in self._components.items():
            built = spec.copy()
            built.conf = _own_conf(spec) | spec.conf  # declarer settings override the component's
            _check_methods_run(cid, spec.kind, spec.obj)
            declarer = OutputFieldsDeclarer(cid)
            try:
                spec.obj.declare_output_fields(declarer)
            except InvalidTopologyException:
                raise
            except Exception as e:
                raise InvalidTopologyException(
                    f"Component [{cid}]: declare_output_fields raised {exception_text(e)}") from e
            built.streams = declarer.streams
            components[cid] = built
        for transform in _TOPOLOGY_TRANSFORMS:
            components = transform(components)
        topology = StormTopology(components)
        validate_topology(topology)
        return topology


_CALLED_METHODS = {
    "spout": ("open", "next_tuple", "ack", "fail", "fail_with", "activate", "deactivate", "close"),
    "bolt": ("prepare", "execute", "cleanup"),
}
"""The methods of a component of each kind that squall calls for their effect, never looking at
what they return. Only those of its kind: a spout's own ``execute`` (a helper yielding a
query's rows, say) or a bolt's ``open`` is the user's, and squall never calls it."""


def _check_methods_run(cid: str, kind: str, obj: Any) -> None:
    """Raise `InvalidTopologyException` if one of ``obj``'s `_CALLED_METHODS` (of its ``kind``)
    is a generator or coroutine function: called, it returns a generator or a coroutine that
    nothing iterates or awaits, so its body never runs. A bolt whose ``execute`` held a
    ``yield`` acked nothing and reported nothing: every tuple timed out and was replayed, for
    ever, with no error shown."""
    for name in _CALLED_METHODS.get(kind, ()):
        fn = getattr(type(obj), name, None)
        if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
            what = "a generator function (it contains yield)"
        elif inspect.iscoroutinefunction(fn):
            what = "a coroutine function (async def)"
        else:
            continue
        raise InvalidTopologyException(
            f"Component [{cid}]: {type(obj).__name__}.{name} is {what}: squall calls it and never iterates or "
            f"awaits what it returns, so its body would never run")


def _own_conf(spec: ComponentSpec) -> dict[str, Any]:
    try:
        conf = spec.obj.get_component_configuration()
    except Exception as e:
        raise InvalidTopologyException(
            f"Component [{spec.id}]: get_component_configuration raised {exception_text(e)}") from e
    if conf is None:
        return {}
    if not isinstance(conf, dict):
        raise InvalidTopologyException(
            f"Component [{spec.id}]: get_component_configuration must return a dict or None, "
            f"got {type(conf).__name__}")
    return dict(conf)


def validate_topology(topology: StormTopology) -> None:
    """Check every subscription and count; raises `InvalidTopologyException` naming the culprit."""
    comps = topology.components
    if not any(c.kind == "spout" for c in comps.values()):
        raise InvalidTopologyException("a topology needs at least one spout")
    for cid, spec in comps.items():
        tasks = spec.conf.get(Config.TOPOLOGY_TASKS)
        if tasks is not None and (type(tasks) is not int or tasks < 1):
            raise InvalidTopologyException(
                f"Component [{cid}]: number of tasks must be a positive integer, got {tasks!r}")
        if spec.kind == "spout" and spec.inputs:
            raise InvalidTopologyException(f"Component [{cid}]: May not declare inputs for a spout")
        for (src, stream), grouping in spec.inputs.items():
            if src not in comps:
                raise InvalidTopologyException(
                    f"Component: [{cid}] subscribes from non-existent component [{src}]")
            info = comps[src].streams.get(stream)
            if info is None and stream == SYSTEM_STREAM:
                continue  # every component has Storm's implicit __system stream (nothing is emitted on it)
            if info is None:
                raise InvalidTopologyException(
                    f"Component: [{cid}] subscribes from non-existent stream: [{stream}] of component [{src}]")
            if grouping.fields is not None:
                missing = [f for f in grouping.fields if not info.fields.contains(f)]
                if missing:
                    raise InvalidTopologyException(
                        f"Component: [{cid}] subscribes from stream: [{stream}] of component [{src}] "
                        f"with non-existent fields: {missing}")
            if grouping.kind == DIRECT and not info.direct:
                raise InvalidTopologyException(
                    f"Component: [{cid}] subscribes to stream [{stream}] of component [{src}] with direct "
                    f"grouping, but that stream is not declared direct")
            if grouping.kind != DIRECT and info.direct:
                raise InvalidTopologyException(
                    f"Component: [{cid}] subscribes to direct stream [{stream}] of component [{src}] "
                    f"with {grouping.kind} grouping; direct streams need direct_grouping")
