"""Routing: from an emitted tuple's values to the target task ids, per stream of one task.

Each emitting task gets one `Router` per declared stream, compiled when the task starts: the
subscribers' groupings become one ``choose(values) -> tasks`` function, and a stream nobody
subscribes to routes to a shared empty list at once (ENGINE-SPEED.md, lesson 4: specialise at
prepare time). Fields grouping uses a stable hash (see ``squall._stable_hash``) so every process
sends a key to the same task.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable
from typing import Any

from .._error_lines import exception_text
from .._errors import EmitError, InvalidTopologyException
from .._fields import GlobalStreamId
from .._grouping import CUSTOM, DIRECT, LoadAwareShuffleGrouping, chooser_of
from .._native import RouterBase
from .._tuple import Source
from .load_mapping import LoadMapping
from .plan import TopologyPlan

_NOWHERE: list[int] = []


class Router(RouterBase):
    """One stream of one emitting task: how to choose targets, and how much went out."""

    __slots__ = ()  # RouterBase holds them (squall._native): the compiled emit reads them in C

    def __init__(self, stream: str, src: Source, choose: Callable[[list], list[int]], direct: bool,
                 direct_targets: dict[int, bool]) -> None:
        self.stream = stream
        self.src = src
        self.choose = choose
        self.direct = bool(direct)
        # task -> True if its component subscribes to this stream with direct grouping, False if
        # with another grouping; tasks of non-subscribers are absent (emits to them are dropped).
        self.direct_targets = direct_targets
        self.emitted = 0
        self.transferred = 0
        self.nfields = len(src.fields)
        self.silent = not direct_targets  # no subscriber at all: emits go nowhere


def not_values(values: Any) -> bool:
    """Whether ``values`` given to an emit is not a list or tuple of values (a str or a dict of
    the stream's length would otherwise pass the field count, and reach the bolts as itself)."""
    return type(values) is not list and not isinstance(values, (list, tuple))


def router_of(routers: dict[str, Router], stream: Any) -> Router | None:
    """The router of ``stream``, None if it has none (an unhashable one too: a list given
    where the stream goes, Storm's ``emit(streamId, values)`` order, is `bad_stream`'s error)."""
    try:
        return routers.get(stream)
    except TypeError:
        return None


def bad_stream(stream: Any, r: Router | None, component: str, task: int) -> EmitError:
    """The error for an emit to ``stream`` whose router ``r`` is None (no such stream) or
    direct (a regular emit to a direct stream)."""
    where = f"(component [{component}], task {task})"
    if not isinstance(stream, str):
        return EmitError(f"emit's stream must be a stream id (a str), got {type(stream).__name__} {stream!r:.100} "
                         f"{where}: squall's order is emit(values, ..., stream=...); Storm's "
                         f"emit(streamId, values) is emit(values, stream=streamId)")
    if r is None:
        return EmitError(f"Unknown stream ID: {stream} {where}")
    return EmitError(f"Cannot do regular emit to direct stream [{stream}] {where}")


def direct_task(task_id: Any, r: Router) -> int:
    """``emit_direct``'s ``task_id`` as an int (one given as an ``operator.index``-able number,
    a numpy integer say, converted), or the error naming it. Only an int names a task: another
    value (a str "5", None) was looked up among the stream's subscribers, found no task, and the
    tuple was dropped as an emit to a task that does not subscribe is (Storm's rule for task ids),
    with its spout tuple acked."""
    if type(task_id) is not bool:
        try:
            return operator.index(task_id)
        except TypeError:
            pass
    s = r.src
    raise EmitError(f"emit_direct's task_id must be a task id (an int), got {type(task_id).__name__} "
                    f"{task_id!r:.100} (component [{s.component}], task {s.task}, stream [{s.stream}]); "
                    f"squall's order is emit_direct(task_id, values, ..., stream=...)")


def wrong_size(r: Router, values) -> EmitError:
    """The error for an emit whose values do not match the stream's fields (as Storm checks), or
    are not a list or tuple of values at all."""
    s = r.src
    if not_values(values):
        return EmitError(f"emit got a {type(values).__name__} as its values, not a list of them "
                         f"(component [{s.component}], task {s.task}, stream [{s.stream}], "
                         f"fields {list(s.fields)}, values {values!r:.200})")
    got = f"{len(values)} fields"
    return EmitError(f"Tuple created with wrong number of fields. Expected {r.nfields} fields but got {got} "
                     f"(component [{s.component}], task {s.task}, stream [{s.stream}], "
                     f"fields {list(s.fields)}, values {values!r:.200})")


def build_routers(plan: TopologyPlan, component: str, task_id: int, context, rng: random.Random,
                  loads: LoadMapping | None = None) -> dict[str, Router]:
    """The routers of every stream ``component`` declares, for its task ``task_id``; ``loads``
    (the worker's `LoadMapping`) makes its shuffles load-aware (`LoadAwareShuffleGrouping`)."""
    spec = plan.topology.components[component]
    routers: dict[str, Router] = {}
    for stream, info in spec.streams.items():
        src = Source(component, stream, task_id, info.fields)
        choosers = []
        direct_targets: dict[int, bool] = {}
        gsid = GlobalStreamId(component, stream)
        for sub_id in sorted(plan.topology.components):
            grouping = plan.topology.components[sub_id].inputs.get(gsid)
            if grouping is None:
                continue
            targets = sorted(plan.component_tasks[sub_id])
            is_direct = grouping.kind == DIRECT
            for t in targets:
                direct_targets[t] = is_direct
            if is_direct:
                continue
            g = grouping.make(info.fields, rng)
            if loads is not None and isinstance(g, LoadAwareShuffleGrouping):
                g.use_load(loads.get, loads.fill)
            try:
                g.prepare(context, gsid, targets)
            except Exception as e:
                if grouping.kind != CUSTOM:
                    raise
                # raised bare, it ended the worker's start: on LocalCluster "exited with status 1
                # before it started: no output", naming neither the grouping nor where it was
                raise InvalidTopologyException(
                    f"custom grouping {type(g).__qualname__} of [{sub_id}] on stream [{stream}] of component "
                    f"[{component}]: its prepare raised {exception_text(e)} (for task "
                    f"{task_id} of [{component}])") from e
            choose = chooser_of(g, task_id)
            choosers.append(_checked(choose, g, src, sub_id, targets) if grouping.kind == CUSTOM else choose)
        routers[stream] = Router(stream, src, _combine(choosers), info.direct, direct_targets)
    return routers


def _checked(choose: Callable[[list], list[int]], grouping: object, src: Source, target: str,
             targets: list[int]) -> Callable[[list], list[int]]:
    """``choose`` (a user's custom grouping) with its choices checked against the tasks of the
    component it groups for: a task of another component (an acker's, say) would get a tuple it
    cannot read, and an unknown one failed deep in the emit."""
    allowed = frozenset(targets)

    def checked(values: list) -> list[int]:
        tasks = choose(values)
        if type(tasks) is not list or not allowed.issuperset(tasks):
            bad = tasks if type(tasks) is not list else sorted({t for t in tasks if t not in allowed}, key=repr)
            raise EmitError(f"custom grouping {type(grouping).__qualname__} chose {bad!r}: choose_tasks must return a "
                            f"list of [{target}]'s task ids {targets} (component [{src.component}], task {src.task}, "
                            f"stream [{src.stream}])")
        return tasks
    return checked


def _combine(choosers: list[Callable[[list], list[int]]]) -> Callable[[list], list[int]]:
    if not choosers:
        return lambda values: _NOWHERE
    if len(choosers) == 1:
        return choosers[0]

    def choose(values: list) -> list[int]:
        out: list[int] = []
        for c in choosers:
            out += c(values)
        return out
    return choose
