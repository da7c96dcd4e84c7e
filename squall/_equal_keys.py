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
"""

from __future__ import annotations

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
