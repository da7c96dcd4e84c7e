"""How states are named and found: the owner named in errors, the topology a state belongs to,
the host's `StateHome`, and the provider ``topology.state.provider`` names."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import msgpack

from .._config import Config, conf_value, setting
from ..engine.serialize import resolve
from ._api import KeyValueState, State, StateError, StateHome

if TYPE_CHECKING:
    from .._context import TopologyContext

log = logging.getLogger(__name__)

PROVIDER_KEY = Config.TOPOLOGY_STATE_PROVIDER
PROVIDER_CONFIG_KEY = Config.TOPOLOGY_STATE_PROVIDER_CONFIG
_NO_HOME = StateHome()


def state_home(context: TopologyContext | None) -> StateHome:
    """What the host running ``context``'s task lends its state providers (none: an empty one)."""
    return getattr(context, "state_home", None) or _NO_HOME


def topology_of(conf: Mapping[str, Any]) -> str:
    """The topology's name, which scopes its states (a resubmitted topology finds its own)."""
    return str(conf.get(Config.TOPOLOGY_NAME) or "_")


def owner_of(namespace: str, context: TopologyContext | None) -> str:
    """``"component [count] task 3"``, or the namespace without a context."""
    if context is None:
        return f"state [{namespace}]"
    return f"component [{context.get_this_component_id()}] task {context.get_this_task_id()}"


def provider_config(conf: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """``topology.state.provider.config``: a map, or a JSON object in a string (Storm's)."""
    raw = conf.get(PROVIDER_CONFIG_KEY)
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as e:
            raise StateError(f"{owner}: {PROVIDER_CONFIG_KEY!r} is not valid JSON: {e}") from None
    if not isinstance(raw, Mapping):
        raise StateError(f"{owner}: {PROVIDER_CONFIG_KEY!r} must be a map (or a JSON object), "
                         f"got {type(raw).__name__}")
    return dict(raw)


def provider_problem(conf: Mapping[str, Any]) -> str | None:
    """What is wrong with ``topology.state.provider`` as far as this process can tell, checked at
    submit: not of the ``"module:Class"`` form, or a module that imports here without that class
    (a typo: every worker would fail to make its state, and restart, again and again). None when
    the class resolves, or when its module does not import here (it may import on the workers
    alone, with an extra this machine lacks)."""
    name = conf_value(conf, PROVIDER_KEY)  # a string: the configuration's validation saw to it
    try:
        cls = resolve(name)
    except ImportError:
        return None
    except (AttributeError, ValueError) as e:
        return f"{PROVIDER_KEY!r} is {name!r}, which does not name a class ({type(e).__name__}: {e})"
    if not callable(getattr(cls, "new_state", None)):
        return f"{PROVIDER_KEY!r} is {name!r}, which has no new_state(namespace, conf, context) method"
    return None


def provider_settings_problem(conf: Mapping[str, Any], owner: str) -> str | None:
    """What the provider ``topology.state.provider`` names says of its settings
    (``topology.state.provider.config``: its ``check_config``), checked at submit: a misspelt
    ``"directory"`` of the file provider was ignored, its states kept elsewhere without a word.
    None when they pass, or when the class does not resolve here (`provider_problem` says that)."""
    try:
        cls = resolve(conf_value(conf, PROVIDER_KEY))
    except Exception:  # noqa: BLE001 (its module may import on the workers alone; a typo is provider_problem's)
        return None
    check = getattr(cls, "check_config", None)
    if not callable(check):
        return None
    try:
        check(provider_config(conf, owner), owner)
    except StateError as e:
        return str(e)
    return None


def get_state(namespace: str, conf: Mapping[str, Any], context: TopologyContext | None) -> State:
    """The state of ``namespace`` from the provider ``topology.state.provider`` names (Storm's
    ``StateFactory.getState``).

    Raises:
        StateError: the provider cannot be found or made, or it cannot reach its store; the
            message names the component and the configuration key.
    """
    owner = owner_of(namespace, context)
    name = conf_value(conf, PROVIDER_KEY)
    if not isinstance(name, str):
        raise StateError(f"{owner}: {PROVIDER_KEY!r} must be a \"module:Class\" string, got {name!r}")
    try:
        cls = resolve(name)
        provider = cls()
    except Exception as e:
        raise StateError(f"{owner}: {PROVIDER_KEY!r} is {name!r}, which cannot be made "
                         f"({type(e).__name__}: {e}); it must name a StateProvider class importable "
                         f"on the workers") from e
    if not callable(getattr(provider, "new_state", None)):
        raise StateError(f"{owner}: {PROVIDER_KEY!r} is {name!r}, which has no new_state(namespace, conf, "
                         f"context) method")
    try:
        state = provider.new_state(namespace, dict(conf), context)
    except StateError:
        raise
    except Exception as e:
        raise StateError(f"{owner}: the state provider {name!r} ({PROVIDER_KEY}) failed: "
                         f"{type(e).__name__}: {e}") from e
    if not isinstance(state, State):
        raise StateError(f"{owner}: the state provider {name!r} returned a {type(state).__name__}, not a State")
    return state


def get_key_value_state(namespace: str, conf: Mapping[str, Any], context: TopologyContext | None) -> KeyValueState:
    """`get_state` for a user that reads and writes keys (the checkpoint spout, a persistent
    window), as Storm's ``KeyValueState``.

    Raises:
        StateError: as `get_state`, or the provider's state is not a `KeyValueState`.
    """
    state = get_state(namespace, conf, context)
    if not isinstance(state, KeyValueState):
        raise StateError(f"{owner_of(namespace, context)}: the state provider ({PROVIDER_KEY}) returned a "
                         f"{type(state).__name__}, not a KeyValueState, which this component needs")
    return state




class EarlierLayout(NamedTuple):
    """How an earlier submission of a topology laid out a stateful component's states: its task
    count, and the namespace of each task index the master recorded."""

    tasks: int
    namespaces: list[str]


def earlier_layouts(keys: list[str], blobs: Mapping[str, bytes | None], prefix: str, tasks: int) -> list[EarlierLayout]:
    """The layouts recorded under ``prefix`` (``_squall_task/<component>/``) with a task count
    other than ``tasks``, from the master's ``keys`` there and their ``blobs``; fewest tasks first."""
    by_count: dict[int, list[tuple[int, str]]] = {}
    for k in keys:
        count, _, index = k[len(prefix):].partition("/")
        if not (count.isdigit() and index.isdigit()) or int(count) == tasks:
            continue
        try:
            namespace = msgpack.unpackb(blobs.get(k) or b"", raw=False)
        except Exception:  # noqa: BLE001 (a record this code did not write: named by its key)
            namespace = k
        by_count.setdefault(int(count), []).append((int(index), str(namespace)))
    return [EarlierLayout(n, [ns for _, ns in sorted(by_count[n])]) for n in sorted(by_count)]


def task_count_change_error(owner: str, component: str, topology: str, tasks: int,
                            earlier: list[EarlierLayout]) -> str:
    """Why a stateful task of a component whose task count changed is refused, and what to do."""
    was = "; ".join(f"{e.tasks} task{'s' if e.tasks != 1 else ''} (states {', '.join(e.namespaces)})"
                    for e in earlier)
    first = earlier[0].tasks
    return (f"{owner}: topology {topology!r} kept the states of component [{component}] in {was} in an earlier "
            f"submission, and [{component}] now has {tasks} task{'s' if tasks != 1 else ''}. A fields grouping "
            f"picks a task by the number of tasks, so its keys would now go to tasks whose state does not hold "
            f"them: their counts split between states, or started again from nothing (Storm does so silently). "
            f"squall cannot move the keys between the tasks' states (a state's keys are whatever the bolt put, "
            f"not the fields it is grouped on), so it refuses. Submit [{component}] with the task count its states "
            f"have (set_num_tasks({first}), with any parallelism up to it, or a Trident operation's "
            f"parallelism_hint({first}); `squall rebalance -e {component}=N` "
            f"changes its executors without moving a key), or submit the topology under another name to start "
            f"afresh, or set {Config.TOPOLOGY_STATE_ALLOW_TASK_COUNT_CHANGE}: true to go on with the states as "
            f"they are (docs/state.md)")


KEEPS_TASK_STATES = "squall_keeps_task_states"
"""The attribute, true on a component object whose tasks may keep states named per task and
recorded with the master (`recorded_namespace`): a `squall.state.StatefulBoltExecutor`, a
Trident bolt with a window whose store outlives it. The master checks another task count only
for these (`squall.cluster.master.Master._check_state_layouts`)."""


def keeps_task_states(component: Any) -> bool:
    """Whether ``component`` (a topology's bolt or spout object) may keep states laid out by its
    task count (`KEEPS_TASK_STATES`). A component that no longer does (a stateful bolt replaced
    by another of the same id) is not held to its predecessor's count: its tasks never read
    those states, and they refuse nothing at their start either."""
    return bool(getattr(component, KEEPS_TASK_STATES, False))


def earlier_task_counts(list_keys: Callable[[str, str], list[str]], get: Callable[[str, str], bytes | None],
                        topology: str, component: str, tasks: int) -> list[EarlierLayout]:
    """The layouts an earlier submission of ``topology`` kept ``component``'s states in with
    another number of tasks than ``tasks``, from the master's records (``list_keys(topology,
    prefix)`` and ``get(topology, key)``: a worker's transactional backend, or the master's
    store, which refuses such a submission before any task starts). None once this count has
    records of its own: it started before (``topology.state.allow.task.count.change`` let it),
    and goes on without the setting."""
    from .._transactional import TASK_NAMESPACE_PREFIX, name_key
    prefix = f"{TASK_NAMESPACE_PREFIX}/{name_key(component)}/"
    keys = list_keys(topology, prefix)
    if any(k.startswith(f"{prefix}{tasks}/") for k in keys):
        return []
    return earlier_layouts(keys, {k: get(topology, k) for k in keys}, prefix, tasks) if keys else []


def _refuse_another_task_count(backend: Any, context: TopologyContext, topology: str, tasks: int) -> None:
    """Raise `StateError` when an earlier submission kept this component's states in another
    number of tasks (``topology.state.allow.task.count.change`` not set). The master refuses
    such a submission first; this holds for a master that predates that check."""
    component = context.get_this_component_id()
    earlier = earlier_task_counts(backend.list, backend.get, topology, component, tasks)
    if earlier:
        owner = owner_of(f"{component}-{context.get_this_task_id()}", context)
        raise StateError(task_count_change_error(owner, component, topology, tasks, earlier))


def state_namespace(conf: Mapping[str, Any], context: TopologyContext) -> str:
    """The namespace of a stateful task's state: Storm's ``<component>-<task id>``, unless an
    earlier run of the topology kept this task's keys under another one.

    Task ids are numbered over every component in order, the ackers' included, so a topology
    submitted again with another ``topology.workers`` (which sets the number of ackers unless
    ``topology.acker.executors`` does), or with a component added, removed or renamed, gives a
    component's tasks other ids. Under Storm's namespace each task would then read the state of
    the keys the fields grouping sent another task, and its own keys would start again from
    nothing. So the master keeps, in the topology's transactional state, the namespace each
    task index of a component with that many tasks was first given
    (``_squall_task/<component>/<tasks>/<index>``), and the task goes on with that one. A host
    that lends no transactional state gives Storm's namespace. The record never changes once
    written, so a worker launch keeps the answers it got (`squall._transactional.KeptAnswers`,
    in its sealed copy of the assignment on the process host): started again by its supervisor
    while no master answers, it reads them from there.

    Raises:
        StateError: the master cannot be reached and never told this launch, or it refuses
            this worker.
    """
    return recorded_namespace(conf, context, f"{context.get_this_component_id()}-{context.get_this_task_id()}")


def recorded_namespace(conf: Mapping[str, Any], context: TopologyContext, own: str) -> str:
    """`state_namespace` for a task whose state is named ``own`` on its layout's first start: the
    namespace the master recorded for this task index of the component with this many tasks
    (``own``, recorded now, on that first start), or `StateError` when an earlier submission kept
    the component's states in another number of tasks. A Trident window's store
    (`squall.trident.KeyValueWindowsStoreFactory`, named by task index) records its layout so too:
    the tuples a removed index held would never reach a window, and the master refuses such a
    submission by these records.

    Raises:
        StateError: as `state_namespace`.
    """
    component = context.get_this_component_id()
    backend = getattr(context, "transactional_home", None)
    if backend is None:
        return own
    from .._transactional import TASK_NAMESPACE_PREFIX, name_key
    tasks = context.get_component_tasks(component)
    key = f"{TASK_NAMESPACE_PREFIX}/{name_key(component)}/{len(tasks)}/{context.get_this_task_index()}"
    topology = topology_of(conf)
    owner = owner_of(own, context)
    allow_change = setting(conf, Config.TOPOLOGY_STATE_ALLOW_TASK_COUNT_CHANGE, where=owner)
    from .._transactional import LaunchRefusedError, TransactionalStateError
    try:
        blob = backend.get(topology, key)
        if blob is None:
            # this layout's first start: an earlier one with another task count holds the keys
            if not allow_change:
                _refuse_another_task_count(backend, context, topology, len(tasks))
            backend.put(topology, key, msgpack.packb(own))
            return own
    except StateError:
        raise
    except TransactionalStateError as e:
        if isinstance(e, LaunchRefusedError):
            raise StateError(f"{owner}: the master no longer runs this worker: {e}") from e
        # a limit of the master's (squall._transactional.MAX_KEYS): Storm's namespace, unrecorded
        log.warning("%s: cannot record with the master which state this task keeps its keys in (%s); using %r",
                    owner, e, own)
        return own
    except Exception as e:  # the master unreachable: said as a StateError
        raise StateError(f"{owner}: cannot read from the master which state this task keeps its keys in "
                         f"({type(e).__name__}: {e}); the master never told this worker launch, so it needs "
                         f"the master (a launch started again while no master answers goes on with the "
                         f"namespaces the master told it before)") from e
    try:
        namespace = msgpack.unpackb(blob, raw=False)
        if type(namespace) is not str or not namespace:
            raise ValueError("not a namespace")
    except Exception:  # noqa: BLE001 (a record this code did not write: Storm's namespace)
        log.warning("%s: the master's record of the state this task keeps its keys in is malformed; using %r",
                    owner, own)
        return own
    if namespace != own:
        log.info("%s: its keys are in state %r (the task ids were numbered otherwise when it was made)",
                 owner, namespace)
    return namespace
