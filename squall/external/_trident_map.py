"""What the Trident map states over real stores share (`squall.external.trident_redis`,
`squall.external.trident_delta`): the state type, the stack of wrappers a factory builds over a
backing map (storm-redis's ``RedisMapState.Factory.makeState``), and a backing map's own commit
hook."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

from ..state import StateError
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


_WRAPPERS: dict[StateType, Callable[[Any], Any]] = {  # each wrapper's build(backing)
    StateType.NON_TRANSACTIONAL: NonTransactionalMap.build,
    StateType.TRANSACTIONAL: TransactionalMap.build,
    StateType.OPAQUE: OpaqueMap.build,
}


_WRITES = frozenset({"multi_update", "multi_put", "update", "set", "commit"})
"""The calls `CommittingMapState` refuses in a batch in which a call failed."""


class CommittingMapState(MapState, Snapshottable):
    """The map state a factory here returns: storm-redis's stack, rebuilt after a failure, and
    whose backing map hears ``begin_commit``/``commit`` when it wants to.

    ``build()`` makes the stack (`build_map_state`). A call that raises (the store down, a value
    refused) drops it for a fresh one before the error goes on: what the stack kept of the
    batch (what it wrote, what it cached) may not be what the store has, and the task lives on
    to replay the batch, which must read the store again. The rest of that batch's writes are
    refused (`StateError`), up to its next ``begin_commit``: the fresh stack knows neither the
    batch's txid nor its writes so far, so an updater that caught the error and went on would
    write as if outside any batch (a replay would count it again). Reads go on (a
    ``state_query`` reads the store, which the fresh stack reads again). ``hooks`` (the backing
    map, or None) has ``begin_commit(txid)`` and ``commit(txid)``, called before and after the
    state's own: Storm's map wrappers keep the txid to themselves, and a store that tags each
    batch's write with it (the Delta table) needs it.
    """

    def __init__(self, build: Callable[[], Any], hooks: Any = None) -> None:
        self._build = build
        self._state = build()
        self._hooks = hooks
        self._batch: tuple[int | None] | None = None  # (txid,) between begin_commit and commit
        self._failed: str | None = None  # the error that failed the open batch

    def _run(self, method: str, *args: Any) -> Any:
        if self._failed is not None and self._batch is not None and method in _WRITES:
            raise StateError(f"the map state refuses the rest of batch txid {self._batch[0]}, in which a call "
                             f"failed ({self._failed}): the batch must fail, and its replay reads the store again")
        try:
            return getattr(self._state, method)(*args)
        except BaseException as e:
            self._state = self._build()
            if self._batch is not None:
                self._failed = f"{type(e).__name__}: {e}"
            raise

    def begin_commit(self, txid: int | None) -> None:
        """The batch ``txid`` starts updating the state."""
        self._batch, self._failed = (txid,), None
        if self._hooks is not None:
            self._hooks.begin_commit(txid)
        self._run("begin_commit", txid)

    def commit(self, txid: int | None) -> None:
        """The batch ``txid`` updated the state."""
        self._run("commit", txid)
        self._batch = None
        if self._hooks is not None:
            self._hooks.commit(txid)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list:
        """`MapState.multi_get`."""
        return self._run("multi_get", keys)

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[Any]) -> list:
        """`MapState.multi_update`."""
        return self._run("multi_update", keys, updaters)

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        """`MapState.multi_put`."""
        self._run("multi_put", keys, values)

    def get(self) -> Any:
        """`Snapshottable.get`: the global key's value."""
        return self._run("get")

    def update(self, updater: Any) -> Any:
        """`Snapshottable.update` of the global key."""
        return self._run("update", updater)

    def set(self, value: Any) -> None:
        """`Snapshottable.set` of the global key."""
        self._run("set", value)


def build_map_state(backing: Any, state_type: StateType, local_cache_size: int, global_key: str) -> Any:
    """storm-redis's ``makeState``: ``SnapshottableMap(<type>Map.build(CachedMap(backing,
    local_cache_size)), [global_key])`` (``local_cache_size`` 0: no cache), in a
    `CommittingMapState` that rebuilds it after a failure and passes ``begin_commit``/``commit`` to
    ``backing`` when it has them."""
    def build() -> Any:
        inner = CachedMap(backing, local_cache_size) if local_cache_size > 0 else backing
        return SnapshottableMap(_WRAPPERS[state_type](inner), [global_key])
    hooks = backing if hasattr(backing, "begin_commit") and hasattr(backing, "commit") else None
    return CommittingMapState(build, hooks)
