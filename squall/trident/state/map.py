"""Exactly-once map states over any `IBackingMap` (Storm's ``trident.state.map``).

Trident commits batches strictly in txid order and replays a failed batch with the same txid.
So a value stored with the txid that last changed it tells a replay apart from a new batch:

- `TransactionalMap` stores `TransactionalValue(txid, val)`: a key already written by this txid
  is left alone (the replay brings the very same tuples, whose update is in already).
- `OpaqueMap` stores `OpaqueValue(curr_txid, curr, prev)`: a key already written by this txid is
  recomputed from ``prev`` (an opaque spout's replay may bring other tuples), a newer txid moves
  ``curr`` to ``prev``; an older txid than the stored one is an error, as in Storm.
- `NonTransactionalMap` stores the bare value: at-least-once.

Within one batch both maps remember what they wrote (Storm's ``CachedBatchReadsMap``), so two
updates of a key in one batch add up rather than the second looking like a replay. A
`TransactionalMap` writes a batch's values at its commit, so that a replay finds each key's
whole update of the batch in the store or none of it.
Each map is also `Snapshottable` over one global key, for an ungrouped ``persistent_aggregate``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Self, TypeGuard, TypeVar

from ...state import StateError
from .api import CombinerValueUpdater, IBackingMap, MapState, Snapshottable, ValueUpdater

T = TypeVar("T")
Key = tuple
"""A map key as kept in dicts: the tuple of the group's values."""

GLOBAL_KEY = "$MAP-STATE-GLOBAL$"
"""The key under which a map keeps its `Snapshottable` value (one value: ``[GLOBAL_KEY]``)."""


@dataclass(frozen=True)
class TransactionalValue(Generic[T]):
    """A value and the txid of the batch that last changed it (Storm's ``TransactionalValue``)."""

    txid: int | None
    val: T

    def get_txid(self) -> int | None:
        """The txid that last changed the value."""
        return self.txid

    def get_val(self) -> T:
        """The value."""
        return self.val

    def to_list(self) -> list[Any]:
        """``[txid, val]``, Storm's JSON form (``JSONTransactionalSerializer``)."""
        return [self.txid, self.val]

    @classmethod
    def from_list(cls, data: Sequence[Any]) -> TransactionalValue[Any]:
        """What `to_list` made."""
        txid, val = data
        return cls(txid, val)


@dataclass(frozen=True, slots=True)
class OpaqueValue(Generic[T]):
    """A value, the one before it and the txid that made it (Storm's ``OpaqueValue``).

    Slotted: a commit makes one a key (a `MemoryMapState` keeps one a key), and an object with
    no ``__dict__`` is about 15% cheaper to make in W1T's commit and smaller to keep."""

    curr_txid: int | None
    curr: T
    prev: T | None = None

    def update(self, batch_txid: int | None, new_val: T) -> OpaqueValue[T]:
        """The value after batch ``batch_txid`` set it to ``new_val``: a newer batch keeps
        ``curr`` as ``prev``; the same batch again (a replay) keeps ``prev``.

        Raises:
            StateError: ``batch_txid`` is older than the stored txid.
        """
        return OpaqueValue(batch_txid, new_val, self._base(batch_txid))

    def get(self, batch_txid: int | None) -> T | None:
        """The value batch ``batch_txid`` builds on: ``curr``, or ``prev`` if this very batch
        wrote ``curr`` (it is being replayed).

        Raises:
            StateError: ``batch_txid`` is older than the stored txid.
        """
        return self._base(batch_txid)

    def for_batch(self, batch_txid: int | None, its_own: bool) -> tuple[T | None, T | None]:
        """Storm's opaque rule for one key: (the value batch ``batch_txid`` builds on, the one
        its new value keeps as ``prev``). ``its_own``: this value is what the batch itself wrote
        earlier (Storm's ``CachedBatchReadsMap``), so the batch builds on its ``curr``. Every
        opaque update goes through here (`OpaqueMap`'s, `squall._native.opaque_commit`'s pure
        twin); the compiled ``opaque_commit`` is this rule's twin in C.

        Raises:
            StateError: ``batch_txid`` is older than the stored txid.
        """
        prev = self._base(batch_txid)
        return (self.curr if its_own else prev), prev

    def _base(self, batch_txid: int | None) -> T | None:
        # a stored txid of None (written outside any batch) is older than every batch
        if batch_txid is None or self.curr_txid is None or self.curr_txid < batch_txid:
            return self.curr
        if batch_txid == self.curr_txid:
            return self.prev
        raise StateError(f"Current batch ({batch_txid}) is behind state's batch: {self!r}; the state was "
                         f"written by a later batch than the coordinator's (its transaction state was "
                         f"reset, or another topology writes this state)")

    def get_curr(self) -> T:
        """The latest value."""
        return self.curr

    def get_prev(self) -> T | None:
        """The value before the latest."""
        return self.prev

    def get_curr_txid(self) -> int | None:
        """The txid that wrote ``curr``."""
        return self.curr_txid

    def to_list(self) -> list[Any]:
        """``[curr_txid, curr, prev]``, Storm's JSON form (``JSONOpaqueSerializer``)."""
        return [self.curr_txid, self.curr, self.prev]

    @classmethod
    def from_list(cls, data: Sequence[Any]) -> OpaqueValue[Any]:
        """What `to_list` made."""
        curr_txid, curr, prev = data
        return cls(curr_txid, curr, prev)


def _keys(keys: Sequence[Sequence[Any]]) -> list[Key]:
    return [tuple(k) for k in keys]


def _get(backing: IBackingMap, keys: Sequence[Sequence[Any]]) -> list[Any]:
    """``backing.multi_get(keys)``, checked to give one value per key."""
    vals = backing.multi_get(keys)
    if len(vals) != len(keys):
        raise StateError(f"{type(backing).__name__}.multi_get returned {len(vals)} values for {len(keys)} keys")
    return list(vals)


def _check_pairs(keys: Sequence[Any], others: Sequence[Any], what: str) -> None:
    if len(keys) != len(others):
        raise ValueError(f"{len(keys)} keys and {len(others)} {what}: one per key is needed")


class _SnapshotMap(MapState, Snapshottable):
    """A `MapState` that is also `Snapshottable` over the one key ``[global_key]``."""

    def __init__(self, global_key: Any) -> None:
        self._snapshot_keys = [[global_key]]

    def get(self) -> Any:
        return self.multi_get(self._snapshot_keys)[0]

    def update(self, updater: ValueUpdater) -> Any:
        return self.multi_update(self._snapshot_keys, [updater])[0]

    def set(self, value: Any) -> None:
        self.multi_put(self._snapshot_keys, [value])

    def combine_partials(self, ks: list[Key], args: list[Any], agg: Any) -> list[Any]:
        """``multi_update`` of the keys ``ks`` (tuples) with a `CombinerValueUpdater(agg, arg)`
        each: what a grouped ``persistent_aggregate`` of a combiner does at its commit. A map
        may do it without an updater per key (`OpaqueMap` does)."""
        return self.multi_update([list(k) for k in ks], [CombinerValueUpdater(agg, a) for a in args])


def inlines_combine(state: Any) -> TypeGuard[_SnapshotMap]:
    """Whether a grouped combiner's commit may hand ``state`` the batch's partials
    (`_SnapshotMap.combine_partials`) rather than `CombinerValueUpdater`s: only a map of this
    package, whose ``combine_partials`` does what its ``multi_update`` does (a subclass that
    overrides ``multi_update`` is sent there). A user's map, or a wrapper that forwards other names
    to one of ours, is updated through its own ``multi_update``, as Storm's
    ``MapCombinerAggStateUpdater`` does."""
    return isinstance(state, _SnapshotMap)


class _Read(NamedTuple):
    val: Any
    cached: bool  # written earlier in this batch, so not a replay's leftover


class _BatchReads:
    """Remembers what the current batch wrote (Storm's ``CachedBatchReadsMap``)."""

    def __init__(self, delegate: IBackingMap) -> None:
        self.delegate = delegate
        self.written: dict[Key, Any] = {}

    def reset(self) -> None:
        self.written.clear()

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[_Read]:
        vals = _get(self.delegate, keys)
        ret = []
        for k, v in zip(_keys(keys), vals):
            ret.append(_Read(self.written[k], True) if k in self.written else _Read(v, False))
        return ret

    def fetch(self, keys: Sequence[Sequence[Any]]) -> tuple[list[Key], list[Any]]:
        """The keys as dict keys and the stored value of each, this batch's write where there is
        one: ``(keys, values)``; a key this batch wrote is ``in self.written``."""
        ks = _keys(keys)
        vals = _get(self.delegate, keys)
        written = self.written
        if written:
            vals = [written.get(k, v) for k, v in zip(ks, vals)]
        return ks, vals

    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[Any], ks: list[Key] | None = None) -> None:
        """Write ``vals``; ``ks``: the keys as dict keys, if made already."""
        self.delegate.multi_put(keys, vals)
        self.written.update(zip(_keys(keys) if ks is None else ks, vals))

    def delegate_keys(self, ks: list[Key]) -> Sequence[Sequence[Any]]:
        """The keys ``ks`` (tuples) as the backing map takes them: lists (Storm's
        ``List<List<Object>>``, which a backing map may rely on), or ``ks`` themselves for one
        that says it takes tuples (``TUPLE_KEYS``)."""
        return ks if getattr(self.delegate, "TUPLE_KEYS", False) else [list(k) for k in ks]


class _TxidMap(_SnapshotMap):
    """What `TransactionalMap` and `OpaqueMap` share: the batch's txid and what it wrote."""

    def __init__(self, backing: IBackingMap, global_key: Any = GLOBAL_KEY) -> None:
        super().__init__(global_key)
        self.backing = _BatchReads(backing)
        self.curr_tx: int | None = None

    @classmethod
    def build(cls, backing: IBackingMap, global_key: Any = GLOBAL_KEY) -> Self:
        """The map over ``backing`` (Storm's ``<Map>.build``)."""
        return cls(backing, global_key)

    def begin_commit(self, txid: int | None) -> None:
        self.curr_tx = txid
        self.backing.reset()

    def commit(self, txid: int | None) -> None:
        self.curr_tx = None
        self.backing.reset()


class TransactionalMap(_TxidMap):
    """A `MapState` for transactional spouts (Storm's ``TransactionalMap``): the backing map
    holds `TransactionalValue`s; see the module docstring.

    In a batch its writes wait for the batch's `commit`, which hands them to the backing map in
    one ``multi_put`` (Storm's writes at each update). So a failed attempt left in the store
    nothing, or (its commit's write failed part-way) the whole batch's value of some keys; a
    replay that finds a key stored with its own txid skips every update and put of that key in
    the batch. Written at each update, a batch that updated a key twice (a ``partition_persist``
    updater calling ``multi_update`` a tuple) and failed between the two was replayed onto half
    its update, and a read-then-put updater's replay read its failed attempt's write."""

    def __init__(self, backing: IBackingMap, global_key: Any = GLOBAL_KEY) -> None:
        super().__init__(backing, global_key)
        self.staged: dict[Key, None] = {}  # the keys written in this batch, in order, for its commit

    def begin_commit(self, txid: int | None) -> None:
        super().begin_commit(txid)
        self.staged.clear()

    def commit(self, txid: int | None) -> None:
        """Writes the batch's values (a subclass that overrides this must call it)."""
        staged, self.staged = list(self.staged), {}
        try:
            if staged:
                written = self.backing.written
                self.backing.delegate.multi_put(self.backing.delegate_keys(staged), [written[k] for k in staged])
        finally:  # written or not, the batch is over: a write outside any batch goes to the store
            super().commit(txid)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        return [None if r.val is None else r.val.val for r in self.backing.multi_get(keys)]

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> list[Any]:
        _check_pairs(keys, updaters, "updaters")
        ks, stored_vals = self.backing.fetch(keys)
        new_keys, new_ks, new_vals, ret = [], [], [], []
        for key, k, stored, updater in zip(keys, ks, stored_vals, updaters):
            if self._replayed(k, stored):
                ret.append(stored.val)
                continue
            new = TransactionalValue(self.curr_tx, updater.update(None if stored is None else stored.val))
            ret.append(new.val)
            new_keys.append(key)
            new_ks.append(k)
            new_vals.append(new)
        self._write(new_keys, new_ks, new_vals)
        return ret

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        _check_pairs(keys, values, "values")
        if self.curr_tx is None:
            self._write(keys, _keys(keys), [TransactionalValue(None, v) for v in values])
            return
        ks, stored_vals = self.backing.fetch(keys)
        put = [i for i, (k, stored) in enumerate(zip(ks, stored_vals)) if not self._replayed(k, stored)]
        self._write([keys[i] for i in put], [ks[i] for i in put],
                    [TransactionalValue(self.curr_tx, values[i]) for i in put])

    def _replayed(self, k: Key, stored: Any) -> bool:
        """Whether the batch's whole update of ``k`` is in the store already: this txid stored
        it (an earlier attempt's commit), and this attempt has not written it."""
        return (stored is not None and self.curr_tx is not None and stored.txid == self.curr_tx
                and k not in self.backing.written)

    def _write(self, keys: Sequence[Sequence[Any]], ks: list[Key], vals: list[TransactionalValue]) -> None:
        if not ks:
            return
        if self.curr_tx is None:  # outside a batch: at once
            self.backing.multi_put(keys, vals, ks)
            return
        self.backing.written.update(zip(ks, vals))
        self.staged.update(dict.fromkeys(ks))


class _Replace(ValueUpdater):
    """Sets a value whatever was stored (Storm's ``OpaqueMap.ReplaceUpdater``)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def update(self, stored: Any) -> Any:
        return self.value


class OpaqueMap(_TxidMap):
    """A `MapState` for opaque (and transactional) spouts (Storm's ``OpaqueMap``): the backing
    map holds `OpaqueValue`s; see the module docstring."""

    def _base(self, read: _Read) -> Any:
        if read.val is None:
            return None
        return read.val.curr if read.cached else read.val.get(self.curr_tx)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        return [self._base(r) for r in self.backing.multi_get(keys)]

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> list[Any]:
        _check_pairs(keys, updaters, "updaters")
        ks, stored_vals = self.backing.fetch(keys)
        written, curr_tx = self.backing.written, self.curr_tx
        new_vals, ret = [], []
        for k, stored, updater in zip(ks, stored_vals, updaters):
            if stored is None:
                new = updater.update(None)
                new_vals.append(OpaqueValue(curr_tx, new))
            else:
                base, prev = stored.for_batch(curr_tx, k in written)
                new = updater.update(base)
                new_vals.append(OpaqueValue(curr_tx, new, prev))
            ret.append(new)
        self.backing.multi_put(keys, new_vals, ks)
        return ret

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        _check_pairs(keys, values, "values")
        self.multi_update(keys, [_Replace(v) for v in values])

    def combine_partials(self, ks: list[Key], args: list[Any], agg: Any) -> list[Any]:
        """`multi_update` with `CombinerValueUpdater`s, inlined: per key one read, one
        ``combine`` and one new `OpaqueValue` (the commit of a grouped combiner aggregate). A
        backing map that can do this itself (``commit_opaque``: `MemoryMapState`'s) does the
        keys it can, without a read or a write through its interface."""
        if type(self).multi_update is not OpaqueMap.multi_update:  # a subclass's own update runs
            return super().combine_partials(ks, args, agg)
        _check_pairs(ks, args, "partial aggregates")
        backing = self.backing
        commit = getattr(backing.delegate, "commit_opaque", None)
        if commit is None:
            return self._combine(ks, args, agg)
        ret, left = commit(backing.written, ks, args, self.curr_tx, agg)
        if left:
            for i, new in zip(left, self._combine([ks[i] for i in left], [args[i] for i in left], agg)):
                ret[i] = new
        return ret

    def _combine(self, ks: list[Key], args: list[Any], agg: Any) -> list[Any]:
        backing = self.backing
        keys = backing.delegate_keys(ks)
        stored_vals = _get(backing.delegate, keys)
        written, curr_tx, combine = backing.written, self.curr_tx, agg.combine
        if written:  # what this batch wrote already is what it builds on (see _BatchReads)
            stored_vals = [written.get(k, v) for k, v in zip(ks, stored_vals)]
        new_vals: list[OpaqueValue] = []
        ret: list[Any] = []
        append_new, append_ret = new_vals.append, ret.append
        for k, stored, arg in zip(ks, stored_vals, args):
            if stored is None:
                append_new(OpaqueValue(curr_tx, arg))
                append_ret(arg)
                continue
            base, prev = stored.for_batch(curr_tx, k in written)
            new = arg if base is None else combine(base, arg)
            append_new(OpaqueValue(curr_tx, new, prev))
            append_ret(new)
        backing.multi_put(keys, new_vals, ks)
        return ret


class NonTransactionalMap(_SnapshotMap):
    """A `MapState` that stores bare values (Storm's ``NonTransactionalMap``): a replayed batch
    is applied again (at-least-once)."""

    def __init__(self, backing: IBackingMap, global_key: Any = GLOBAL_KEY) -> None:
        super().__init__(global_key)
        self.backing = backing

    @classmethod
    def build(cls, backing: IBackingMap, global_key: Any = GLOBAL_KEY) -> NonTransactionalMap:
        """The map over ``backing`` (Storm's ``NonTransactionalMap.build``)."""
        return cls(backing, global_key)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        return _get(self.backing, keys)

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> list[Any]:
        _check_pairs(keys, updaters, "updaters")
        ret = [u.update(v) for v, u in zip(_get(self.backing, keys), updaters)]
        self.backing.multi_put(keys, ret)
        return ret

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        _check_pairs(keys, values, "values")
        self.backing.multi_put(keys, values)

    def begin_commit(self, txid: int | None) -> None:
        pass

    def commit(self, txid: int | None) -> None:
        pass


class SnapshottableMap(_SnapshotMap):
    """A `MapState` that is `Snapshottable` over the key ``snapshot_key`` (Storm's
    ``SnapshottableMap``); everything else goes to ``delegate``."""

    def __init__(self, delegate: MapState, snapshot_key: Sequence[Any]) -> None:
        _SnapshotMap.__init__(self, None)
        self.delegate = delegate
        self._snapshot_keys = [list(snapshot_key)]

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        return self.delegate.multi_get(keys)

    def multi_update(self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]) -> list[Any]:
        return self.delegate.multi_update(keys, updaters)

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        self.delegate.multi_put(keys, values)

    def combine_partials(self, ks: list[Key], args: list[Any], agg: Any) -> list[Any]:
        delegate = self.delegate
        if type(self).multi_update is not SnapshottableMap.multi_update or not inlines_combine(delegate):
            return super().combine_partials(ks, args, agg)  # through multi_update: a user's runs
        return delegate.combine_partials(ks, args, agg)

    def begin_commit(self, txid: int | None) -> None:
        self.delegate.begin_commit(txid)

    def commit(self, txid: int | None) -> None:
        self.delegate.commit(txid)


class CachedMap(IBackingMap):
    """An `IBackingMap` that keeps the last ``cache_size`` keys it read or wrote in memory
    (Storm's ``CachedMap``, an LRU): reads of cached keys skip ``delegate``; writes go to both.

    Only right while this task is the only writer of its keys (Trident's partitioning makes it
    so); an absent key is cached as absent too.
    """

    def __init__(self, delegate: IBackingMap, cache_size: int) -> None:
        if not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"CachedMap cache_size must be a positive int, got {cache_size!r}")
        self.delegate = delegate
        self.cache_size = cache_size
        self._cache: OrderedDict[Key, Any] = OrderedDict()

    def _put(self, key: Key, value: Any) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        ks = _keys(keys)
        results: dict[Key, Any] = {}
        missing: dict[Key, None] = {}  # ordered, each key once
        for k in ks:
            if k in self._cache:
                self._cache.move_to_end(k)
                results[k] = self._cache[k]
            else:
                missing[k] = None
        if missing:
            to_get = list(missing)
            for k, v in zip(to_get, _get(self.delegate, [list(k) for k in to_get])):
                self._put(k, v)
                results[k] = v
        return [results[k] for k in ks]

    def multi_put(self, keys: Sequence[Sequence[Any]], values: Sequence[Any]) -> None:
        _check_pairs(keys, values, "values")
        ks = _keys(keys)
        try:
            self.delegate.multi_put(keys, values)
        except BaseException:
            # the store may hold some, all or none of them: the next read asks it. Cached first,
            # a failed write stayed here as if stored, and the batch's replay skipped it as applied
            for k in ks:
                self._cache.pop(k, None)
            raise
        for k, v in zip(ks, values):
            self._put(k, v)

    def __len__(self) -> int:
        return len(self._cache)

    def cached_keys(self) -> Iterator[Key]:
        """The cached keys, least recently used first."""
        return iter(list(self._cache))
