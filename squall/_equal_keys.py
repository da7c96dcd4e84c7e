"""One stored form per key: a key's numbers as Python compares them.

``1``, ``1.0`` and ``True`` (and ``0``, ``0.0``, ``-0.0`` and ``False``) are equal in Python, so
they are one key of a dict, one group of a Trident ``group_by`` (a batch's groups are a dict),
and fields grouping hashes them alike (`squall._stable_hash`), sending them to one task. A
state that stored each under its own encoding kept them apart: Redis's JSON ``[1]``, ``[1.0]``,
``[true]``, the serializer's msgpack int, float and bool. A group's count was split between
two or three keys by the order records arrived in (seven records of the keys 1, 1.0, True, 2.0
and 2 fed in five batches stored 14 counts in a transactional `RedisMapState`), and a stateful
bolt's ``get(1.0)`` after ``put(1, n)`` found nothing.

So every state names a key by `canonical_value`: Trident's map states (`canonical_key` of a
group's values, `squall.trident.state.memory`, `squall.external.trident_redis`) and a stateful
bolt's `KeyValueState` (`squall.state._kv.StateCodec.key`, whose keys may be lists, sets and
maps too). This module is in the core layer so that both may import it.

A store written before (2026-12-07) holds such keys under the form each record carried: a state
finds them by the forms that canonical_value maps to a key's (`equal_forms`). A stateful bolt's
state lists its own keys once at open (`squall.state._kv.old_key_forms`); a Redis map state's
keys share the database with anything, so it asks for a key's earlier names beside the key's
own, in the same read (`squall.external.trident_redis.DefaultKeyFactory.old_names`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any


def canonical_value(value: Any) -> Any:
    """``value`` in the one form every value equal to it shares: ``int`` for a ``bool`` and for
    an integral ``float`` (``-0.0`` included), ``frozenset`` for a ``set``, such parts for a
    tuple, list, frozenset or dict (its keys and its values), itself otherwise (a non-integral float, NaN and infinities
    included: no int equals them; other types, subclasses of these included, as they are).

    Values equal before are equal after, so a set or a dict keeps its size (no two of its
    members become one)."""
    t = type(value)
    if t is bool:
        return int(value)
    if t is float:
        return int(value) if value.is_integer() else value
    if t is tuple:
        return tuple(canonical_value(v) for v in value)
    if t is list:
        return [canonical_value(v) for v in value]
    if t is frozenset:
        return frozenset(canonical_value(v) for v in value)
    if t is set:  # a set equals the frozenset of its members
        return frozenset(canonical_value(v) for v in value)
    if t is dict:
        return {canonical_value(k): canonical_value(v) for k, v in value.items()}
    return value


def canonical_key(key: Sequence[Any]) -> list[Any]:
    """The group values ``key`` as a Trident map state stores them (`canonical_value` of each)."""
    return [canonical_value(v) for v in key]


EQUAL_FORMS_LIMIT = 64
"""The most forms `equal_forms` lists: a key of 6 ints, none 0 or 1, has 63 besides its own; a
key of many ints 0 or 1 has 3 or 4 forms a part, multiplied (10 of them: 59,048)."""


def equal_forms(value: Any, limit: int = EQUAL_FORMS_LIMIT) -> list[Any] | None:
    """The values of other forms that `canonical_value` makes ``value`` (itself in that form):
    for an int, the float equal to it (exactly), and ``-0.0`` and ``False`` for 0, ``True`` for
    1; for a tuple or list, every combination of its parts' forms; ``[]`` for anything else (a
    set, a map, a string, a non-integral float). These are the values an earlier squall stored
    apart from ``value`` and that are one key now. In a fixed order (by part, an int's own form
    first, then float, -0.0, bool); None where there are more than ``limit``."""
    forms = _forms(value, limit + 1)
    return None if forms is None else forms[1:]


def _forms(value: Any, limit: int) -> list[Any] | None:
    """``value`` (first) and its `equal_forms`; None past ``limit``."""
    t = type(value)
    if t is int:
        forms: list[Any] = [value]
        try:
            f = float(value)
        except OverflowError:  # an int past float's range equals no float
            f = None
        if f is not None and f == value:
            forms.append(f)
        if value == 0:
            forms += [-0.0, False]
        elif value == 1:
            forms.append(True)
        return forms
    if t is tuple or t is list:
        parts = []
        count = 1
        for v in value:
            p = _forms(v, limit)
            if p is None:
                return None
            count *= len(p)
            if count > limit:
                return None
            parts.append(p)
        return [t(combo) for combo in itertools.product(*parts)]
    return [value]
