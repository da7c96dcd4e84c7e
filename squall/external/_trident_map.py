"""What the Trident map states over real stores share (`squall.external.trident_redis`,
`squall.external.trident_delta`): the state type, the stack of wrappers a factory builds over a
backing map (storm-redis's ``RedisMapState.Factory.makeState``), and a backing map's own commit
hook."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from ..trident.state import (
    CachedMap,
    MapState,
    NonTransactionalMap,
    OpaqueMap,
    Snapshottable,
    SnapshottableMap,
    TransactionalMap,
)


class StateType(enum.Enum):
    """Storm's ``StateType``: which `MapState` wraps the backing map, and so what it stores per key
    (a plain value, a `TransactionalValue` or an `OpaqueValue`)."""

    NON_TRANSACTIONAL = "non-transactional"
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"


_WRAPPERS = {
    StateType.NON_TRANSACTIONAL: NonTransactionalMap,
    StateType.TRANSACTIONAL: TransactionalMap,
    StateType.OPAQUE: OpaqueMap,
}


class CommittingMapState(MapState, Snapshottable):
    """A map state whose backing map hears the state's ``begin_commit``/``commit`` too.

    Storm's map wrappers keep the txid to themselves; a backing map that writes a batch as one
    transaction of its store (the Delta table: one commit per txid) needs to know when the
    batch begins and ends. ``backing`` has ``begin_commit(txid)`` and ``commit(txid)``; its
    ``commit`` runs after the wrapper's, so every ``multi_put`` of the batch is in.
    """

    def __init__(self, state: Any, backing: Any) -> None:
        self._state = state
        self._backing = backing

    def begin_commit(self, txid: int) -> None:
        """The batch ``txid`` starts updating the state."""
        self._backing.begin_commit(txid)
        self._state.begin_commit(txid)

    def commit(self, txid: int) -> None:
        """The batch ``txid`` updated the state: the backing map writes it out."""
        self._state.commit(txid)
        self._backing.commit(txid)

    def multi_get(self, keys: Sequence[list]) -> list:
        """`MapState.multi_get`."""
        return self._state.multi_get(keys)

    def multi_update(self, keys: Sequence[list], updaters: Sequence[Any]) -> list:
        """`MapState.multi_update`."""
        return self._state.multi_update(keys, updaters)

    def multi_put(self, keys: Sequence[list], values: Sequence[Any]) -> None:
        """`MapState.multi_put`."""
        self._state.multi_put(keys, values)

    def get(self) -> Any:
        """`Snapshottable.get`: the global key's value."""
        return self._state.get()

    def update(self, updater: Any) -> Any:
        """`Snapshottable.update` of the global key."""
        return self._state.update(updater)

    def set(self, value: Any) -> None:
        """`Snapshottable.set` of the global key."""
        self._state.set(value)


def build_map_state(backing: Any, state_type: StateType, local_cache_size: int, global_key: str) -> Any:
    """storm-redis's ``makeState``: ``SnapshottableMap(<type>Map.build(CachedMap(backing,
    local_cache_size)), [global_key])``; with ``local_cache_size`` 0 no cache. When ``backing``
    has a commit hook (``begin_commit``/``commit``) the result is a `CommittingMapState`."""
    inner = CachedMap(backing, local_cache_size) if local_cache_size > 0 else backing
    state = SnapshottableMap(_WRAPPERS[state_type].build(inner), [global_key])
    if hasattr(backing, "begin_commit") and hasattr(backing, "commit"):
        return CommittingMapState(state, backing)
    return state
