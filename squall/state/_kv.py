"""The key-value state every provider shares: `TransactionalKeyValueState` over a `StateStore`.

Storm's Redis state, generalised (``RedisKeyValueState``): ``put`` and ``delete`` go to changes
held in memory; ``prepare_commit(txid)`` writes them (merged with a prepare already stored) to
the store as the *prepared* transaction; ``commit(txid)`` makes that the committed state;
``rollback`` drops both. The store keeps the prepared transaction, so a worker restarted between
prepare and commit still commits (or rolls back) what its predecessor prepared, as the checkpoint
spout decides. Keys and values are stored as bytes made by the topology's serializer
(`StateCodec`): a value that cannot be serialized fails at ``put``, in the bolt's own code,
naming the component and the key.

Keys stored before `StateCodec.key` made equal keys one key (``1.0`` and ``True`` under their own
bytes, not the int's) are still found: opening a state scans its committed and prepared keys for
bytes `StateCodec.key` no longer makes (`old_key_forms`); a ``get`` that misses the key's bytes
reads those, and the next ``put`` or ``delete`` of the key writes the key's bytes and removes
the old ones in the same commit, so a state migrates key by key as its bolt writes it. Where an
old state holds several equal keys apart (``1`` and ``1.0`` both), the one under the key's own
bytes (the int's) wins, then the old forms in the order of their bytes; a warning at open names
each such key and its values (the next write of the key removes the others).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import msgpack

from .._equal_keys import canonical_value
from .._errors import SerializationError
from ..engine.serialize import (
    EXT_FROZENSET,
    EXT_SET,
    EXT_TUPLE,
    MAX_EXT_NESTING,
    PLAIN_TYPES,
    Serializer,
    nesting_depth,
)
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

    def keys(self) -> list[bytes]:
        """The committed entries' keys, as stored: not checked (a `get` checks its entry)."""

    def checked(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The committed values of those of ``keys`` that are stored and pass their check (a
        value that fails it is left out: a `get` of it raises), read together (Redis: HMGET
        in batches, not a round trip per key)."""

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

    def keys(self) -> list[bytes]:
        with self.lock:
            return list(self.committed)

    def checked(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        with self.lock:
            return {k: v for k in keys if (v := self.committed.get(k)) is not None}

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
        """``key`` encoded, the same bytes for every key equal to it: its bools and integral
        floats as the ints they equal (`canonical_value`: ``1``, ``1.0`` and ``True`` are one
        key, as fields grouping sends them to one task), a set's elements and a map's entries
        (at any depth) in the order of their encodings, not the order a set happens to iterate
        in (its insertion history, and for strings the process's hash seed) or a map was built
        in."""
        where = f"a state key of {self.owner}"
        t = type(key)
        if t is str or t is int or t is bytes:  # most keys: nothing to make canonical
            return self._serializer.encode_value(key, where)
        try:
            key = canonical_value(key)
        except RecursionError:  # a list holding itself: named as the serializer names it, not 1,000 frames deep
            depth = nesting_depth(key)
            shape = ("contains itself" if depth >= 100_000 else
                     f"is nested {depth - 1} levels deep (lists, tuples, dicts, sets), deeper than can be serialized")
            raise SerializationError(f"cannot serialize {where}: the key {shape}") from None
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


def old_key_forms(store: StateStore, prepared: Changes, codec: StateCodec) -> dict[bytes, tuple[bytes, ...]]:
    """The keys of ``store`` and of its ``prepared`` transaction that `StateCodec.key` no longer
    makes, by the bytes it makes of them now (each key's old forms in the order of their bytes):
    keys written before equal keys were one key (``1.0``, ``True``: the int's bytes now; a
    ``set``: its frozenset's).

    Only a key holding an integral float, a bool or a set changes form: the others are told apart by
    their msgpack alone (`_may_change_form`, which unpickles nothing), so opening a state reads
    its keys (Redis: HSCAN) but decodes few of them. A key is decoded only once its value's MAC
    checked (`StateStore.checked`, all the candidates' values read together: one HGET each took
    ~9 s to open a Redis state of 20,000 keys written as floats; the key's bytes are hostile until
    then, and may hold a pickle); one whose value fails it, or that cannot be decoded, is left
    out, to fail (as before) at the ``get`` that reads it."""
    candidates = [k for k in set(itertools.chain(store.keys(), prepared)) if _may_change_form(k)]
    stored = store.checked([k for k in candidates if k not in prepared])
    found: dict[bytes, list[bytes]] = {}
    for k in candidates:
        if k not in prepared and k not in stored:
            continue
        try:
            now = codec.key(codec.decode(k, "a state key"))
        except Exception as e:  # noqa: BLE001 (what a get of it raises then; this open must not)
            log.debug("%s: state key %r is left as it is: %s", codec.owner, k[:100], e)
            continue
        if now != k:
            found.setdefault(now, []).append(k)
    return {now: tuple(sorted(olds)) for now, olds in found.items()}


_NESTED = (EXT_TUPLE, EXT_SET, EXT_FROZENSET)  # the ext types whose payload holds a key's parts


def _may_change_form(data: bytes) -> bool:
    """Whether the serialized key ``data`` holds an integral float, a bool or a set anywhere (in
    its lists, maps, tuples and sets; not in a registered or pickled value, which
    `canonical_value` leaves as it is), read as plain msgpack: nothing is unpickled. False for
    bytes that are not msgpack."""
    found = False

    def hook(code: int, payload: bytes) -> None:
        nonlocal found
        if code == EXT_SET:
            found = True
        elif code in _NESTED and not found:
            # the unpacking calls this hook for the ext types inside, which may find a set: kept
            # (assigned over, a set in a tuple, ``("pair", {2})``, was never found, and its old
            # entry never read: the key counted from 0 beside it)
            inner = msgpack.unpackb(payload, ext_hook=hook, raw=True, use_list=False, strict_map_key=False)
            found = found or _changes_form(inner)

    try:
        top = msgpack.unpackb(data, ext_hook=hook, raw=True, use_list=False, strict_map_key=False)
    except Exception:  # noqa: BLE001 (not msgpack, or nested past Python's recursion: not a key squall made)
        return False
    return found or _changes_form(top)


def _changes_form(obj: Any) -> bool:
    t = type(obj)
    if t is bool:
        return True
    if t is float:
        return obj.is_integer()
    if t is tuple:
        return any(_changes_form(v) for v in obj)
    if t is dict:
        return any(_changes_form(k) or _changes_form(v) for k, v in obj.items())
    return False


def _warn_of_old_forms(old_forms: Mapping[bytes, tuple[bytes, ...]],
                       lookup: Callable[[list[bytes]], Mapping[bytes, bytes | None]], codec: StateCodec) -> None:
    """Log what a state opened with `old_key_forms` holds: how many keys, and each key stored
    in more than one form (equal keys kept apart before), with the value `get` answers and the
    values the key's next write removes; ``lookup`` reads the values of a list of keys at once."""
    clashes = []
    values = lookup([k for now, olds in old_forms.items() for k in (now, *olds)])
    for now, olds in old_forms.items():
        stored = [(k, v) for k in (now, *olds) if (v := values.get(k)) is not None]
        if len(stored) > 1:
            clashes.append(", ".join(f"{codec.decode(k, 'a state key')!r:.200} -> {codec.decode(v, 'a state value')!r:.200}"
                                     for k, v in stored))
    log.info("%s: %d keys are stored as squall wrote them before keys equal in Python (1, 1.0 and True; a set "
             "and its frozenset) were one key: each is found by any key equal to it, and stored in the one form "
             "at its next put or delete",
             codec.owner, sum(len(olds) for olds in old_forms.values()))
    for clash in clashes[:20]:
        log.warning("%s: one key is stored in several forms from before keys equal in Python were one key (%s): "
                    "get answers the first; the next put or delete of the key removes the others",
                    codec.owner, clash)
    if len(clashes) > 20:
        log.warning("%s: %d more keys are stored in several forms", codec.owner, len(clashes) - 20)


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
        # keys stored before equal keys were one key, by the bytes each is now (module docstring)
        self._old_forms = old_key_forms(store, self._prepared, codec)
        self._now_of = {old: now for now, olds in self._old_forms.items() for old in olds}
        if self._old_forms:
            _warn_of_old_forms(self._old_forms, self._lookup_many, codec)

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
        k = self.codec.key(key)
        self._change(k, self.codec.value(key, value))
        for old in self._old_forms.get(k, ()):
            self._change(old, None)  # the key's value is under its own bytes from this commit on

    def get(self, key: Any, default: Any = None) -> Any:
        data = self._find(self.codec.key(key))
        return default if data is None else self.codec.decode(data, f"the value of state key {key!r:.100}")

    def _find(self, k: bytes) -> bytes | None:
        """The value of the key whose bytes are ``k``: under ``k``, else under an old form of it."""
        data = self._lookup(k)
        if data is None and self._old_forms:
            for old in self._old_forms.get(k, ()):
                data = self._lookup(old)
                if data is not None:
                    break
        return data

    def _lookup_many(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        """`_lookup` of each of ``keys``, the store's entries read together (`StateStore.checked`:
        an entry that fails its check reads as none here)."""
        out: dict[bytes, bytes | None] = {k: self._pending[k] for k in keys if k in self._pending}
        out.update((k, self._prepared[k]) for k in keys if k not in out and k in self._prepared)
        stored = self.store.checked([k for k in keys if k not in out])
        out.update((k, stored.get(k)) for k in keys if k not in out)
        return out

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
        data = self._find(k)
        self._change(k, None)
        for old in self._old_forms.get(k, ()):
            self._change(old, None)
        return None if data is None else self.codec.decode(data, f"the value of state key {key!r:.100}")

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        try:
            merged: dict[bytes, bytes | None] = dict(self.store.items())
        except Exception as e:
            self._store_failure = e  # for `undo`
            raise
        merged.update(self._prepared)
        merged.update(self._pending)
        for k, v in self._resolved(merged):
            yield self.codec.decode(k, "a state key"), self.codec.decode(v, "a state value")

    def committed(self) -> Iterator[tuple[Any, Any]]:
        """The ``(key, value)`` pairs of the last commit only."""
        for k, v in self._resolved(dict(self.store.items())):
            yield self.codec.decode(k, "a state key"), self.codec.decode(v, "a state value")

    def _resolved(self, entries: Mapping[bytes, bytes | None]) -> Iterator[tuple[bytes, bytes]]:
        """``entries`` (a key's bytes -> its value, None: deleted) one per key, as `get` reads
        them: an old form of a key (`old_key_forms`) under the key's bytes, once."""
        if not self._old_forms:
            for k, v in entries.items():
                if v is not None:
                    yield k, v
            return
        done: set[bytes] = set()
        for k in entries:
            now = self._now_of.get(k, k)
            if now in done:
                continue
            done.add(now)
            v = entries.get(now)
            for old in self._old_forms.get(now, ()):
                if v is not None:
                    break
                v = entries.get(old)
            if v is not None:
                yield now, v

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
