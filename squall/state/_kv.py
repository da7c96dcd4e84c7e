"""The key-value state every provider shares: `TransactionalKeyValueState` over a `StateStore`.

Storm's Redis state, generalised (``RedisKeyValueState``): ``put`` and ``delete`` go to changes
held in memory; ``prepare_commit(txid)`` writes them (merged with a prepare already stored) to
the store as the *prepared* transaction; ``commit(txid)`` makes that the committed state;
``rollback`` drops both. The store keeps the prepared transaction, so a worker restarted between
prepare and commit still commits (or rolls back) what its predecessor prepared, as the checkpoint
spout decides. Keys and values are stored as bytes made by the topology's serializer
(`StateCodec`): a value that cannot be serialized fails at ``put``, in the bolt's own code,
naming the component and the key.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import msgpack

from ..engine.serialize import EXT_FROZENSET, EXT_SET, MAX_EXT_NESTING, PLAIN_TYPES, Serializer
from ._api import KeyValueState, StateError

log = logging.getLogger(__name__)

Changes = dict[bytes, "bytes | None"]
"""Encoded key -> encoded value, or None for a deleted key (a tombstone)."""


class StateStore(Protocol):
    """Where one namespace's committed state and prepared transaction live."""

    def get(self, key: bytes) -> bytes | None:
        """The committed value of ``key``."""

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """The committed entries."""

    def txids(self) -> tuple[int | None, int | None]:
        """(last committed txid, prepared txid), None where there is none."""

    def prepared(self) -> Changes:
        """The prepared transaction's changes (empty if none)."""

    def prepare(self, txid: int, changes: Changes) -> None:
        """Store ``changes`` as prepared transaction ``txid`` (replacing a prepared one)."""

    def commit(self, txid: int) -> None:
        """Apply the prepared changes to the committed state, which is now at ``txid``."""

    def apply(self, changes: Changes) -> None:
        """Apply ``changes`` to the committed state at once (no transaction)."""

    def rollback(self) -> None:
        """Drop the prepared transaction."""


class MemoryStore:
    """A `StateStore` in memory: Storm's ``InMemoryKeyValueState`` kept by whoever holds it."""

    def __init__(self) -> None:
        # bytes for a KeyValueState; Trident's memory map keeps a plain key as a tuple and a plain
        # OpaqueValue as it is (squall.trident.state.memory), so the entries are typed Any
        self.committed: dict[Any, Any] = {}
        self.commit_txid: int | None = None
        self.prepared_changes: Changes = {}
        self.prepare_txid: int | None = None
        self.lock = threading.Lock()  # a restarted task may overlap its dying predecessor

    def get(self, key: bytes) -> bytes | None:
        return self.committed.get(key)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        with self.lock:
            return iter(list(self.committed.items()))

    def txids(self) -> tuple[int | None, int | None]:
        return self.commit_txid, self.prepare_txid

    def prepared(self) -> Changes:
        return dict(self.prepared_changes)

    def prepare(self, txid: int, changes: Changes) -> None:
        with self.lock:
            self.prepared_changes, self.prepare_txid = dict(changes), txid

    def commit(self, txid: int) -> None:
        with self.lock:
            _apply(self.committed, self.prepared_changes)
            self.commit_txid, self.prepared_changes, self.prepare_txid = txid, {}, None

    def apply(self, changes: Changes) -> None:
        with self.lock:
            _apply(self.committed, changes)

    def rollback(self) -> None:
        with self.lock:
            self.prepared_changes, self.prepare_txid = {}, None


def _apply(target: dict[Any, Any], changes: Mapping[Any, Any]) -> None:
    for k, v in changes.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = v


class StateCodec:
    """Keys and values to bytes and back, by the topology's serialization rules
    (``topology.kryo.register``, ``topology.fall.back.on.pickle``); ``owner`` names the state in
    errors (``"component [count] task 3"``)."""

    def __init__(self, conf: Mapping[str, Any], owner: str) -> None:
        self.owner = owner
        self._serializer = Serializer(conf, _no_sources)

    def key(self, key: Any) -> bytes:
        """``key`` encoded, the same bytes for every key equal to it: a set's elements and a
        map's entries (at any depth) in the order of their encodings, not the order a set
        happens to iterate in (its insertion history, and for strings the process's hash seed)
        or a map was built in."""
        where = f"a state key of {self.owner}"
        if type(key) in PLAIN_TYPES:
            return self._serializer.encode_value(key, where)
        return self._serializer.encode_value(self._canonical(key, where, 0), where)

    def _canonical(self, obj: Any, where: str, depth: int) -> Any:
        """``obj`` with its sets as ``ExtType``s of their sorted elements (what the serializer
        makes of a set, in a fixed order) and its maps in the order of their keys' encodings;
        ``depth``: how many tuples and sets ``obj`` is inside. A set's elements are encoded
        apart, so each is encoded as inside its sets and tuples: the serializer refuses, as for
        a value, a key nested deeper than a worker decodes (`MAX_EXT_NESTING`), which it would
        otherwise store and then fail to read back at every read of the state."""
        t = type(obj)
        if t in PLAIN_TYPES:
            return obj
        if t is list:
            return [self._canonical(v, where, depth) for v in obj]
        if t is tuple:
            return tuple(self._canonical(v, where, depth + 1) for v in obj)
        encode = self._serializer.encode_value
        if t is set or t is frozenset:
            if depth >= MAX_EXT_NESTING:
                encode(obj, where, inside=depth)  # raises, as for a value this deep (the error says so)
            items = sorted(encode(self._canonical(v, where, depth + 1), where, inside=depth + 1) for v in obj)
            return msgpack.ExtType(EXT_SET if t is set else EXT_FROZENSET, _packed_list(items))
        if t is dict:
            keys = [self._canonical(k, where, depth) for k in obj]
            pairs = sorted(zip((encode(k, where, inside=depth) for k in keys), keys, obj.values()),
                           key=lambda p: p[0])
            return {k: self._canonical(v, where, depth) for _b, k, v in pairs}
        return obj

    def value(self, key: Any, value: Any) -> bytes:
        """``value`` of ``key`` encoded."""
        return self._serializer.encode_value(value, f"state key {key!r:.100} of {self.owner}")

    def encode(self, value: Any, where: str) -> bytes:
        """``value`` encoded; ``where`` names it in an error (a `SerializationError`)."""
        return self._serializer.encode_value(value, where)

    def decode(self, data: bytes, what: str) -> Any:
        """What `key` or `value` made; ``what`` names the bytes in an error."""
        try:
            return self._serializer.decode_value(data)
        except Exception as e:
            raise StateError(f"{what} of {self.owner} cannot be read back: {e}") from e


def _packed_list(encoded: list[bytes]) -> bytes:
    """A msgpack array of values already encoded (what packing the list of them makes)."""
    return msgpack.Packer().pack_array_header(len(encoded)) + b"".join(encoded)


def _no_sources(task: int, stream: str) -> Any:
    raise StateError("a state value holds no tuples")


_ABSENT: Any = object()  # a key with no change pending, in an undo log


class TransactionalKeyValueState(KeyValueState):
    """A `KeyValueState` over a `StateStore`; see the module docstring.

    `savepoint`, `undo` and `release` bracket one ``execute`` of a stateful bolt: if it raises,
    what it changed is undone and the changes before it are kept (`StatefulBoltExecutor`); `undo`
    also tells whether the store failed to answer a read meanwhile (the record is then not at
    fault)."""

    def __init__(self, store: StateStore, codec: StateCodec) -> None:
        self.store = store
        self.codec = codec
        self._pending: Changes = {}
        self._prepared: Changes = store.prepared()
        # while a savepoint is open: each key changed since, and its pending change before it
        # (`_ABSENT`: none), so that an undo costs the keys changed, not the changes pending
        self._undo: dict[bytes, Any] | None = None
        self._store_failure: Exception | None = None  # a read the store failed since `savepoint`

    def savepoint(self) -> None:
        """From now on, record what `put` and `delete` change, for `undo`."""
        self._undo = {}
        self._store_failure = None

    def undo(self) -> Exception | None:
        """Undo every change since `savepoint` (and close it). Returns the exception of a read
        the store failed since then (a Redis server that did not answer), if one did: the
        ``execute`` raised because its state could not be read, not because of its input."""
        undo, self._undo = self._undo, None
        for k, before in (undo or {}).items():
            if before is _ABSENT:
                self._pending.pop(k, None)
            else:
                self._pending[k] = before
        failure, self._store_failure = self._store_failure, None
        return failure

    def release(self) -> None:
        """Keep the changes since `savepoint` (and close it)."""
        self._undo = None

    def _change(self, k: bytes, data: bytes | None) -> None:
        undo = self._undo
        if undo is not None and k not in undo:
            undo[k] = self._pending.get(k, _ABSENT)
        self._pending[k] = data

    def put(self, key: Any, value: Any) -> None:
        self._change(self.codec.key(key), self.codec.value(key, value))

    def get(self, key: Any, default: Any = None) -> Any:
        data = self._lookup(self.codec.key(key))
        return default if data is None else self.codec.decode(data, f"the value of state key {key!r:.100}")

    def _lookup(self, k: bytes) -> bytes | None:
        if k in self._pending:
            return self._pending[k]
        if k in self._prepared:
            return self._prepared[k]
        try:
            return self.store.get(k)
        except Exception as e:
            self._store_failure = e  # for `undo`
            raise

    def delete(self, key: Any) -> Any:
        k = self.codec.key(key)
        data = self._lookup(k)
        self._change(k, None)
        return None if data is None else self.codec.decode(data, f"the value of state key {key!r:.100}")

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        try:
            merged: dict[bytes, bytes | None] = dict(self.store.items())
        except Exception as e:
            self._store_failure = e  # for `undo`
            raise
        merged.update(self._prepared)
        merged.update(self._pending)
        for k, v in merged.items():
            if v is not None:
                yield self.codec.decode(k, "a state key"), self.codec.decode(v, "a state value")

    def committed(self) -> Iterator[tuple[Any, Any]]:
        """The ``(key, value)`` pairs of the last commit only."""
        for k, v in self.store.items():
            yield self.codec.decode(k, "a state key"), self.codec.decode(v, "a state value")

    def prepare_commit(self, txid: int) -> None:
        committed, _ = self.store.txids()
        if committed is not None and txid <= committed:
            # the checkpoint spout's txids started again below this state's (its own state was
            # lost, or started afresh where a resubmission placed it): go on from there, as
            # Storm's states do (they keep no order of txids); refused, every PREPARE failed and
            # the topology never committed again
            log.warning("%s: preparing txid %s, below the committed txid %s: the checkpoint spout's txids started "
                        "again (its state was lost or started afresh); going on from txid %s",
                        self.codec.owner, txid, committed, txid)
        merged = dict(self._prepared)
        merged.update(self._pending)
        self.store.prepare(txid, merged)
        self._prepared, self._pending = merged, {}
        self._restart_savepoint()

    def commit(self, txid: int | None = None) -> None:
        if txid is None:
            self.store.apply(self._pending)
            self._pending = {}
            self._restart_savepoint()
            return
        committed, prepared = self.store.txids()
        if prepared is None and committed is not None and txid <= committed:
            return  # committed before (a commit repeated after a restart): nothing left to do
        if prepared is not None and prepared != txid:
            raise StateError(f"{self.codec.owner}: cannot commit txid {txid}: txid {prepared} is prepared")
        if prepared is None and self._prepared:
            # the store lost the transaction this state prepared (a Redis server restarted from
            # a snapshot older than the prepare): commit it from memory, as Storm's Redis state
            # always does, rather than mark txid committed without its changes
            log.warning("%s: the store lost prepared txid %s; committing it from memory", self.codec.owner, txid)
            self.store.prepare(txid, self._prepared)
        self.store.commit(txid)
        self._prepared = {}

    def rollback(self) -> None:
        self.store.rollback()
        self._prepared, self._pending = {}, {}
        self._restart_savepoint()

    def _restart_savepoint(self) -> None:
        """The changes pending went to the store (or were dropped): an open savepoint cannot
        undo them, but goes on recording the changes after (a bolt that calls ``commit()`` in
        its ``execute`` and then raises: closed, its changes after the commit were kept)."""
        if self._undo is not None:
            self._undo = {}

    @property
    def committed_txid(self) -> int | None:
        """The txid of the last commit (None before the first)."""
        return self.store.txids()[0]
