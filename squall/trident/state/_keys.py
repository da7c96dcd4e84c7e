"""One stored form per group: a map state key's numbers as Python compares them.

A batch's groups are a dict keyed by the group's values, and fields grouping hashes a value as
any value equal to it (`squall._stable_hash`), so ``1``, ``1.0`` and ``True`` (and ``0``,
``0.0``, ``-0.0`` and ``False``) are one group that reaches one partition, under whichever of
them came first in the batch. A state that stored each under its own encoding (Redis's JSON
``[1]``, ``[1.0]``, ``[true]``; `MemoryMapState`'s serialized keys) split one group's count
between two or three keys by the order records arrived in, and a cache keyed by the values
(`CachedMap`: ``(1,) == (1.0,)``) handed one key's value to the other, which then counted it
again: seven records of the keys 1, 1.0, True, 2.0 and 2 fed in five batches stored 14 counts in
a transactional `RedisMapState`, and a replay whose first value differed from its first
attempt's counted the batch under a second key.

So a map state names a key by `canonical_key`: a bool and a float equal to an int become that
int, inside tuples and frozensets too, and everything else is left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def canonical_part(value: Any) -> Any:
    """``value`` in the one form every value equal to it shares: ``int`` for a ``bool`` and for
    an integral ``float`` (``-0.0`` included), such parts for a tuple or a frozenset, itself
    otherwise (a non-integral float, NaN and infinities included: no int equals them)."""
    t = type(value)
    if t is bool:
        return int(value)
    if t is float:
        return int(value) if value.is_integer() else value
    if t is tuple:
        return tuple(canonical_part(v) for v in value)
    if t is frozenset:
        return frozenset(canonical_part(v) for v in value)
    return value


def canonical_key(key: Sequence[Any]) -> list[Any]:
    """The group values ``key`` as a map state stores them (`canonical_part` of each)."""
    return [canonical_part(v) for v in key]
