"""`MemoryMapState`: an opaque map state in memory (Storm's testing ``MemoryMapState``).

Storm keeps it in a static map of its worker's JVM, by the factory's id and the partition, so
every task of one partition finds the same map. squall keeps it where its in-memory state
provider keeps its states (`squall.state.memory`): on `LocalCluster` in the cluster's
`HostMemory`, outside the workers, so it survives a worker restart (as Trident's transaction
state does there, and a replayed batch finds what the batches before it stored); on the process
and Spark hosts in the worker process, as Storm's, so it dies with its worker. Values are
stored serialized by the topology's rules, as every squall state is: what a later read gets is a
copy, and a value that cannot be serialized fails at the update, naming the state. Only a value
that cannot change (built-in numbers, strings, bytes, None, and tuples of them), which a copy
could not tell apart from the original, is kept as it is, and so is a key of strings, bytes or
ints only, whose equality is that of its encoding: serializing those was most of a commit's time.
A key's bools and integral floats are kept as the int they equal (`canonical_key`), as a
``group_by`` groups them.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from ..._equal_keys import canonical_key
from ..._native import PLAIN_KEY_TYPES, PLAIN_VALUE_TYPES, opaque_commit, plain_value
from ...state._kv import MemoryStore, StateCodec
from ...state._names import state_home, topology_of
from .api import IBackingMap, ITupleCollection, RemovableMapState, State, StateFactory
from .map import OpaqueMap, OpaqueValue, SnapshottableMap

GLOBAL_KEY = "$MEMORY-MAP-STATE-GLOBAL$"
"""Storm's key for the one value of an ungrouped ``persistent_aggregate``."""

_worker_stores: dict[tuple[str, str], MemoryStore] = {}
_worker_lock = threading.Lock()


def namespace_of(factory_id: str, partition_index: int) -> str:
    """The namespace one partition of one `MemoryMapState` factory is kept under."""
    return f"$trident-memory-map/{factory_id}/{partition_index}"


def _store(conf: Mapping[str, Any], context: Any, namespace: str) -> MemoryStore:
    """The store of ``namespace``: the host's when it keeps memory (LocalCluster), else this
    worker process's."""
    home = state_home(context)
    if home.memory is not None:
        return home.memory.store(topology_of(conf), namespace)
    with _worker_lock:
        key = (topology_of(conf), namespace)
        s = _worker_stores.get(key)
        if s is None:
            s = _worker_stores[key] = MemoryStore()
        return s


_PLAIN_KEY_TYPES = PLAIN_KEY_TYPES
_PLAIN_VALUE_TYPES = PLAIN_VALUE_TYPES
_plain_value = plain_value


class _MemoryBacking(IBackingMap, ITupleCollection):
    """`OpaqueValue`s in a `MemoryStore`: a plain key (a tuple of strings, bytes or ints) and an
    `OpaqueValue` of plain values as they are, the others encoded by the topology's rules (see
    the module docstring)."""

    TUPLE_KEYS = True
    """Keys may come as tuples (`_BatchReads.delegate_keys`): ``_key`` makes one anyway."""

    def __init__(self, store: MemoryStore, codec: StateCodec) -> None:
        self.store = store
        self.codec = codec

    def _key(self, key: Sequence[Any]) -> tuple | bytes:
        k = tuple(key)
        if len(k) == 1 and type(k[0]) in _PLAIN_KEY_TYPES:  # most keys: one group field
            return k
        # 1, 1.0 and True are one group of a group_by: one key here too (`canonical_key`)
        k = tuple(canonical_key(k))
        for part in k:
            if type(part) not in _PLAIN_KEY_TYPES:
                return self.codec.key(list(k))
        return k

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        ret: list[Any] = []
        # the committed dict itself (MemoryStore.get without a call per key)
        get, key_of, plain_key = self.store.committed.get, self._key, _PLAIN_KEY_TYPES
        for k in keys:
            # a tuple of one plain part is its own key: _key, inlined for the common case
            data = get(k if type(k) is tuple and len(k) == 1 and type(k[0]) in plain_key else key_of(k))
            if data is None or type(data) is OpaqueValue:
                ret.append(data)
            else:
                ret.append(OpaqueValue.from_list(self.codec.decode(data, f"the value of key {list(k)!r:.100}")))
        return ret

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        changes: dict[Any, Any] = {}
        key_of = self._key
        plain, plain_key = _PLAIN_VALUE_TYPES, _PLAIN_KEY_TYPES
        for k, v in zip(keys, values):
            key = k if type(k) is tuple and len(k) == 1 and type(k[0]) in plain_key else key_of(k)
            if type(v) is OpaqueValue and (type(v.curr) in plain or _plain_value(v.curr)) and (
                    type(v.prev) in plain or _plain_value(v.prev)):
                changes[key] = v
            else:
                changes[key] = self.codec.value(list(k), v.to_list())
        store = self.store
        with store.lock:  # MemoryStore.apply without its per-key test for a deletion (none here)
            store.committed.update(changes)

    def commit_opaque(self, written: dict[tuple, Any], ks: list[tuple], args: list[Any], curr_tx: int | None,
                      agg: Any) -> tuple[list[Any], list[int]]:
        """`OpaqueMap.combine_partials` of the keys it can do here, without a read or a write
        through this map's interface (`squall._native.opaque_commit`, in C when built): the new
        values, and the indices of the keys left to the caller (None in the values), whose key
        or stored value is kept encoded. ``written`` is the map's batch's writes
        (`_BatchReads.written`), which this adds to as its ``multi_put`` would."""
        from ..builtin import Count  # the builtins import this package

        store = self.store
        with store.lock:  # a restarted task may overlap its dying predecessor (MemoryStore)
            ret, left, encode = opaque_commit(store.committed, written, ks, args, curr_tx,
                                              None if type(agg) is Count else agg.combine, OpaqueValue)
        if encode:  # a value that can change is stored serialized (the module docstring)
            changes = {k: self.codec.value(list(k), written[k].to_list()) for k in (ks[i] for i in encode)}
            with store.lock:
                store.committed.update(changes)
        return ret, left

    def multi_remove(self, keys: Sequence[Sequence[Any]]) -> None:
        # a plain key is a tuple in this store (see _key); apply() is typed for a KeyValueState's bytes
        self.store.apply(cast("dict[bytes, bytes | None]", {self._key(k): None for k in keys}))

    def get_tuples(self) -> Iterator[list[Any]]:
        for k, v in self.store.items():
            key = list(k) if type(k) is tuple else self.codec.decode(k, "a key")
            value = v if type(v) is OpaqueValue else OpaqueValue.from_list(
                self.codec.decode(v, f"the value of key {key!r:.100}"))
            yield [*key, value.curr]


class MemoryMapState(SnapshottableMap, ITupleCollection, RemovableMapState):
    """An opaque `MapState` (and `Snapshottable`, over Storm's global key) in memory; see the
    module docstring. Made by ``MemoryMapState.factory()``, one per partition."""

    def __init__(self, store: MemoryStore, codec: StateCodec) -> None:
        self._backing = _MemoryBacking(store, codec)
        super().__init__(OpaqueMap.build(self._backing), [GLOBAL_KEY])
        self._removed: list[Sequence[Any]] = []
        self._curr_tx: int | None = None

    @staticmethod
    def factory() -> MemoryMapStateFactory:
        """A new state (Storm's ``new MemoryMapState.Factory()``): every copy of this factory
        (the topology pickles one per task) reaches the same maps, one per partition; another
        call makes another state."""
        return MemoryMapStateFactory()

    def begin_commit(self, txid: int | None) -> None:
        super().begin_commit(txid)
        # keys removed in the last batch are nulls in both curr and prev only once a newer
        # batch starts; a replay of that batch must still find their prev (Storm's rule)
        if txid is None or txid != self._curr_tx:
            self._backing.multi_remove(self._removed)
        self._removed = []
        self._curr_tx = txid

    def multi_remove(self, keys: Sequence[Sequence[Any]]) -> None:
        self.multi_put(keys, [None] * len(keys))
        self._removed.extend(keys)

    def get_tuples(self) -> Iterator[list[Any]]:
        return self._backing.get_tuples()


class MemoryMapStateFactory(StateFactory):
    """Makes the `MemoryMapState` of each partition (Storm's ``MemoryMapState.Factory``).

    ``id`` names the state; it is made once, when the factory is, and travels with its copies.
    """

    def __init__(self, id: str | None = None) -> None:
        self.id = id or uuid.uuid4().hex

    def make_state(self, conf: dict[str, Any], metrics: Any, partition_index: int, num_partitions: int) -> State:
        namespace = namespace_of(self.id, partition_index)
        owner = (f"MemoryMapState {self.id} partition {partition_index}" if metrics is None else
                 f"MemoryMapState of component [{metrics.get_this_component_id()}] partition {partition_index}")
        return MemoryMapState(_store(conf, metrics, namespace), StateCodec(conf, owner))

    def __repr__(self) -> str:
        return f"MemoryMapState.factory(id={self.id!r})"

    def store_location(self) -> str:
        """Its maps: every copy of this factory reaches them (`StateFactory.store_location`)."""
        return f"MemoryMapState.factory(id={self.id!r})"


MemoryMapState.Factory = MemoryMapStateFactory  # type: ignore[attr-defined]  # Storm's spelling
