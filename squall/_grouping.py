"""Stream groupings: which task(s) of a subscriber get each tuple.

`Grouping` is the declaration stored in a topology (what the user asked for); at run time each
emitting task gets its own `CustomStreamGrouping` instance from `Grouping.make()`. The built-in
groupings implement the same `CustomStreamGrouping` users implement, plus an optional
``chooser(task_id)`` that returns a specialised ``values -> tasks`` function: the engine calls it
once at prepare time so the per-tuple path is one call (ENGINE-SPEED.md, lesson 4).
"""

from __future__ import annotations

import abc
import copy
import itertools
import random
from collections.abc import Callable
from typing import TYPE_CHECKING
from zlib import crc32

from ._config import Config, conf_value
from ._errors import EmitError
from ._fields import Fields, GlobalStreamId
from ._native import memo_chooser, next_chooser
from ._stable_hash import _M64, _MIX, stable_hash, stable_hash_one

if TYPE_CHECKING:
    from ._context import TopologyContext

FIELDS_MEMO_SIZE = 16384
"""Distinct str keys a fields-grouping emitter remembers the target of (per emitting task)."""

SHUFFLE = "shuffle"
FIELDS = "fields"
PARTIAL_KEY = "partial_key"
ALL = "all"
GLOBAL = "global"
NONE = "none"
DIRECT = "direct"
LOCAL_OR_SHUFFLE = "local_or_shuffle"
CUSTOM = "custom"


class CustomStreamGrouping(abc.ABC):
    """Implement this to route tuples yourself.

    ``prepare`` is called once per emitting task with the subscriber's task ids (sorted);
    ``choose_tasks`` is called for every tuple on that task's thread and returns the target task
    ids, a subset of ``target_tasks``.
    """

    def prepare(self, context: TopologyContext, stream: GlobalStreamId, target_tasks: list[int]) -> None:
        """Remember the targets; called before any ``choose_tasks``."""
        self.target_tasks = list(target_tasks)

    @abc.abstractmethod
    def choose_tasks(self, task_id: int, values: list) -> list[int]:
        """The tasks that get ``values`` emitted by task ``task_id``."""


class Grouping:
    """A subscription's grouping as declared: its kind, fields, or custom object.

    ``kind`` is one of ``shuffle``, ``fields``, ``partial_key``, ``all``, ``global``, ``none``,
    ``direct``, ``local_or_shuffle``, ``custom``.
    """

    __slots__ = ("custom", "fields", "kind")

    def __init__(self, kind: str, fields: Fields | None = None, custom: CustomStreamGrouping | None = None):
        self.kind = kind
        self.fields = fields
        self.custom = custom

    def __repr__(self) -> str:
        extra = f", {self.fields!r}" if self.fields is not None else ""
        if self.custom is not None:
            extra = f", {type(self.custom).__name__}"
        return f"Grouping({self.kind!r}{extra})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Grouping) and other.kind == self.kind
                and other.fields == self.fields and other.custom is self.custom)

    def __hash__(self) -> int:
        return hash((self.kind, self.fields))

    def make(self, source_fields: Fields, rng: random.Random | None = None) -> CustomStreamGrouping:
        """A fresh, unprepared grouping instance for one emitting task (None for direct)."""
        kind = self.kind
        if kind == SHUFFLE:
            return LoadAwareShuffleGrouping(rng)
        if kind == FIELDS:
            assert self.fields is not None, "a fields grouping is made with its fields"
            return FieldsGrouping(source_fields, self.fields)
        if kind == PARTIAL_KEY:
            assert self.fields is not None, "a partial-key grouping is made with its fields"
            return PartialKeyGrouping(source_fields, self.fields)
        if kind == ALL:
            return AllGrouping()
        if kind == GLOBAL:
            return GlobalGrouping()
        if kind == NONE:
            return NoneGrouping(rng)
        if kind == LOCAL_OR_SHUFFLE:
            return LocalOrShuffleGrouping(rng)
        if kind == CUSTOM:
            assert self.custom is not None, "a custom grouping is made with its instance"
            return copy.deepcopy(self.custom)
        raise ValueError(f"grouping {kind!r} has no instance")


def constant_chooser(tasks: list[int]) -> Callable[[list], list[int]]:
    """A chooser that returns ``tasks`` whatever the values: compiled, without a Python call per
    emit (a lambda per word was 1% of W1)."""
    return next_chooser(itertools.repeat(tasks).__next__)


def chooser_of(grouping: CustomStreamGrouping, task_id: int) -> Callable[[list], list[int]]:
    """The fastest ``values -> tasks`` function for ``grouping`` emitting from ``task_id``."""
    make = getattr(grouping, "chooser", None)
    if make is not None:
        return make(task_id)
    choose = grouping.choose_tasks
    return lambda values: choose(task_id, values)


class ShuffleGrouping(CustomStreamGrouping):
    """Round-robin over the targets in a random order (Storm's ``ShuffleGrouping``)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def prepare(self, context, stream, target_tasks):
        choices = [[t] for t in target_tasks]
        self._rng.shuffle(choices)
        self._next = itertools.cycle(choices).__next__

    def choose_tasks(self, task_id, values):
        return self._next()

    def chooser(self, task_id):
        return next_chooser(self._next)


class LocalOrShuffleGrouping(ShuffleGrouping):
    """Shuffle among the targets in the emitting worker when there are any, else among all."""

    def prepare(self, context, stream, target_tasks):
        local = set(context.get_this_worker_tasks()) if context is not None else set()
        same_worker = [t for t in target_tasks if t in local]
        super().prepare(context, stream, same_worker or target_tasks)


class LoadAwareShuffleGrouping(ShuffleGrouping):
    """Shuffle that keeps tuples in the emitting worker while its target tasks keep up.

    Storm 2's ``LoadAwareShuffleGrouping`` with two of its scopes, worker-local and everything
    (squall has no host or rack topography): targets in the emitting worker get every tuple
    while their average load (read from `use_load`'s functions: the worker's
    `squall.engine.load_mapping.LoadMapping`) stays at or below
    ``topology.localityaware.higher.bound``, or, when the remote targets' load is known, exceeds
    theirs by no more than `MARGIN`; beyond that, tuples spread over all targets until the local
    load falls below ``topology.localityaware.lower.bound`` or to the remote one. While no
    remote target's load is known (their workers have not said yet, or stopped saying), the
    local load is Storm's own, the inboxes' fill: squall's load also counts how busy a task's loop
    is, which at full speed is 1.0 on every worker alike, and read alone it sent tuples away
    from two equally busy workers for the half second before their first figures came. Within a
    scope it is round-robin in a random order, as `ShuffleGrouping` (Storm 2 also weighs
    targets by load inside the scope; an even spread is what a plain shuffle gives, and the
    scope already moves work off an overloaded worker). The scope is looked at once every
    `CHECK_EVERY` tuples, never per tuple. Without a load source (`use_load` not called), with
    no target or every target in this worker, or with ``topology.disable.loadaware.messaging``,
    it is plain `ShuffleGrouping`.
    """

    CHECK_EVERY = 256
    """Tuples emitted between two looks at the local targets' load."""
    MARGIN = 0.1
    """How much busier than the remote targets (when their load is known) the local ones must be
    for tuples to leave the worker: two workers both at full load keep their tuples at home."""

    def __init__(self, rng: random.Random | None = None) -> None:
        super().__init__(rng)
        self._load: Callable[[int], float | None] | None = None
        self._fill: Callable[[int], float | None] | None = None
        self.local_scope = True  # whether the last look chose the worker-local targets

    def use_load(self, load: Callable[[int], float | None], fill: Callable[[int], float | None] | None = None) -> None:
        """Where the load (0.0 idle .. 1.0 full, None: unknown) of a task is read, and a local
        task's inbox fill (Storm's load: what decides while no remote load is known; without
        it, ``load``); call before `prepare`."""
        self._load = load
        self._fill = fill

    def prepare(self, context, stream, target_tasks):
        if self._load is None or context is None:
            super().prepare(context, stream, target_tasks)
            return
        conf = context.get_storm_conf()
        local = set(context.get_this_worker_tasks())
        same_worker = [t for t in target_tasks if t in local]
        if (conf_value(conf, Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING)
                or not same_worker or len(same_worker) == len(target_tasks)):
            super().prepare(context, stream, target_tasks)
            return
        self._higher = float(conf_value(conf, Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND))
        self._lower = float(conf_value(conf, Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND))
        self._local_tasks = same_worker
        self._remote_tasks = [t for t in target_tasks if t not in local]
        # the generator runs once a ring, the choices within one are C's (chain's, list's)
        self._next = itertools.chain.from_iterable(self._walk(self._ring(same_worker), self._ring(target_tasks))).__next__

    def _ring(self, tasks: list[int]) -> list[list[int]]:
        """``tasks`` in a random order, repeated to at least `CHECK_EVERY` choices."""
        choices = [[t] for t in tasks]
        self._rng.shuffle(choices)
        return choices * -(-self.CHECK_EVERY // len(choices))

    def _walk(self, local: list[list[int]], everywhere: list[list[int]]):
        load, tasks, remote = self._load, self._local_tasks, self._remote_tasks
        assert load is not None  # prepare() walks only with a load source
        fill = self._fill or load
        while True:
            there = _mean([load(t) for t in remote])  # None until their workers tell
            here = _mean([(load if there is not None else fill)(t) for t in tasks])
            if self.local_scope:
                # over the bound, and busier than the remote targets by a margin (if known)
                self.local_scope = here is None or here <= self._higher or (
                    there is not None and here - there <= self.MARGIN)
            else:
                self.local_scope = here is None or here < self._lower or (there is not None and here <= there)
            # a whole ring each time, so each target of the scope gets the same share
            yield local if self.local_scope else everywhere


def _mean(loads: list[float | None]) -> float | None:
    """The mean of the known ``loads`` (None: no figure), or None if none is known."""
    known = [x for x in loads if x is not None]
    return sum(known) / len(known) if known else None


class FieldsGrouping(CustomStreamGrouping):
    """Equal values of the grouping fields always go to the same task (a stable hash)."""

    kind = "fields grouping"  # (for errors)

    def __init__(self, source_fields: Fields, fields: Fields) -> None:
        self._indices = [source_fields.index(f) for f in fields]
        self._names = list(fields)
        self._stream: GlobalStreamId | None = None
        self._context = None

    def prepare(self, context, stream, target_tasks):
        self._choices = [[t] for t in sorted(target_tasks)]
        self._stream = stream
        self._context = context  # (named in `_unhashable`'s error)

    def _hash(self, task_id: int, values: list) -> int:
        """`stable_hash` of the key of ``values``, or `_unhashable`'s error."""
        try:
            return stable_hash([values[i] for i in self._indices])
        except TypeError as e:
            raise self._unhashable(task_id, values, e) from e

    def _unhashable(self, task_id: int, values: list, error: TypeError) -> EmitError:
        """The error of a key that `stable_hash` cannot hash (an object whose class defines
        ``__eq__`` without ``__hash__``), naming the field, its value, the component, the task
        and the stream, instead of a bare ``unhashable type`` from deep inside the emit."""
        name, value = self._names[0], values[self._indices[0]]
        for n, i in zip(self._names, self._indices, strict=True):
            try:
                stable_hash_one(values[i])
            except TypeError:
                name, value = n, values[i]
                break
        get_component = getattr(self._context, "get_component_id", None)
        target = get_component(self._choices[0][0]) if get_component is not None and self._choices else "?"
        s = self._stream
        where = f"component [{s.component_id}], task {task_id}, stream [{s.stream_id}]" if s is not None else f"task {task_id}"
        return EmitError(f"the {self.kind} of [{target}] on fields {self._names} cannot hash the value of field "
                         f"[{name}], {type(value).__qualname__} {value!r:.100} ({error}) ({where}): a grouping key "
                         f"needs a __hash__ built from values stable across processes (docs/concepts.md, groupings)")

    def choose_tasks(self, task_id, values):
        choices = self._choices
        return choices[self._hash(task_id, values) % len(choices)]

    def chooser(self, task_id):
        choices = self._choices
        n = len(choices)
        if n == 1:
            return constant_chooser(choices[0])
        if len(self._indices) == 1:
            i = self._indices[0]

            # Keys repeat (words, user ids), and in Python encoding plus CRC-32 of a str cost 3-4x
            # a dict look-up (measured 630 vs 170 ns a word on W1), so a str key's choice is
            # remembered. Only str: a dict would merge 1, 1.0 and True, which hash differently
            # here. The memo is cleared when full, so a stream of ever-new keys costs one extra
            # look-up each. Compiled, an ASCII key's choice is computed in C, which beats the
            # look-up (`squall._native.memo_chooser`).
            memo: dict[str, list[int]] = {}
            remembered = memo.get

            def choose_one(values):
                v = values[i]
                if type(v) is str:
                    got = remembered(v)
                    if got is not None:
                        return got
                    got = choices[(((crc32(v.encode("utf-8", "surrogatepass")) * _MIX) & _M64) >> 32) % n]
                    if len(memo) >= FIELDS_MEMO_SIZE:
                        memo.clear()
                    memo[v] = got
                    return got
                try:
                    return choices[stable_hash_one(v) % n]
                except TypeError as e:
                    raise self._unhashable(task_id, values, e) from e
            return memo_chooser(memo, i, choose_one, choices)
        idx = self._indices

        def choose(values):
            try:
                return choices[stable_hash([values[i] for i in idx]) % n]
            except TypeError as e:
                raise self._unhashable(task_id, values, e) from e
        return choose


class PartialKeyGrouping(FieldsGrouping):
    """Each key has two candidate tasks; a tuple goes to the one this emitter loaded less.

    Storm's ``PartialKeyGrouping`` ("the power of both choices"): spreads hot keys over two tasks,
    so a downstream aggregation must combine partial results.
    """

    kind = "partial key grouping"

    def prepare(self, context, stream, target_tasks):
        super().prepare(context, stream, target_tasks)
        self._load = [0] * len(self._choices)

    def choose_tasks(self, task_id, values):
        n = len(self._choices)
        h = self._hash(task_id, values)
        a = h % n
        b = (h * 0x2545F491 >> 7) % n
        if b == a:  # two distinct candidates, as Storm's assignment creator ensures
            b = (a + 1) % n
        pick = a if self._load[a] <= self._load[b] else b
        self._load[pick] += 1
        return self._choices[pick]

    def chooser(self, task_id):
        # Not FieldsGrouping's: that one would route by the first candidate only.
        choose = self.choose_tasks
        return lambda values: choose(task_id, values)


class AllGrouping(CustomStreamGrouping):
    """Every target task gets every tuple."""

    def prepare(self, context, stream, target_tasks):
        self._all = sorted(target_tasks)

    def choose_tasks(self, task_id, values):
        return self._all

    def chooser(self, task_id):
        return constant_chooser(self._all)


class GlobalGrouping(CustomStreamGrouping):
    """All tuples go to the target with the lowest task id."""

    def prepare(self, context, stream, target_tasks):
        self._one = [min(target_tasks)]

    def choose_tasks(self, task_id, values):
        return self._one

    def chooser(self, task_id):
        return constant_chooser(self._one)


class NoneGrouping(CustomStreamGrouping):
    """Any task, chosen at random (Storm currently treats it like shuffle)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def prepare(self, context, stream, target_tasks):
        self._choices = [[t] for t in target_tasks]

    def choose_tasks(self, task_id, values):
        return self._rng.choice(self._choices)


