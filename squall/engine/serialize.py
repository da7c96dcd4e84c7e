"""Serialization of what crosses a worker boundary: tuples, acker messages and spout replies.

Why msgpack: its C packer and unpacker are fast and its encoding is compact (a small int is one
byte, a short str one byte plus its text), and every Python primitive has a direct msgpack type.
Types msgpack lacks travel as ext types, so that every value comes back with its exact type:

=====  ==================  ===========================================================
code   type                payload
=====  ==================  ===========================================================
1      int beyond 64 bits  two's-complement big-endian bytes
2      tuple               the items, packed as a list
3      set                 the items, packed as a list
4      frozenset           the items, packed as a list
5      registered class    ``[name, data]``: the ``"module:Qualname"`` it was registered as,
                           and its serializer's output (or its ``__getstate__``/``__dict__``)
6      anything else       ``code_pickler.dumps(obj)`` (cloudpickle), only while
                           ``topology.fall.back.on.pickle`` is true
=====  ==================  ===========================================================

Payloads are packed by the same rules, so values nest freely (a dict of tuples of registered
objects). Registered classes match by exact type, as Kryo registrations do. The packer runs with
``strict_types``, so subclasses of the builtins (``OrderedDict``, an ``IntEnum``, a namedtuple)
are not flattened into their base type: they are registered or pickled like any other class.

Pickle is only a fallback, because unpickling runs code chosen by whoever wrote the bytes.
The transport must hand `Serializer.decode_batch` only bytes from authenticated peers of the
same topology; when ``topology.fall.back.on.pickle`` is false, decoding refuses pickle payloads
too.

The batch (one ``packb`` per batch) is columnar, so the per-item cost is a few appends to encode
and one ``Tuple`` construction to decode, and the stream name and source task travel once per
run instead of once per tuple (ENGINE-SPEED.md, lesson 8)::

    [FORMAT, runs, ack_targets, acks, reply_targets, replies]
    runs            [[src_task, stream, targets, values, roots, vals], ...]   one per run of
                    consecutive Tuples from one Source; roots and vals are None when the whole
                    run is untracked; a root is an int or a {root: val} map, or None
                    (SAME_ROOT) for the same int root as the run's previous Tuple; vals
                    is a list of edge values, or one unsigned int: the state its sender's
                    outbox drew the run's edge ids from (`edge_values`: a tracked emit to
                    another worker, whose ids then cost no bytes an item)
    ack_targets     the target task of each acker message
    acks            their fields one after another: kind, root, val, spout_task, kind, ...
    reply_targets   the target task of each spout reply
    replies         their fields one after another: kind, root, delta_secs, kind, ...

Decoding returns the Tuples first, then the acker messages, then the replies. Order is kept
within each kind; that is all the order that matters, because every task receives only one kind
(bolt tasks Tuples, acker tasks acker messages, spout tasks replies).
"""

from __future__ import annotations

import importlib
import logging
import pickle
import threading
from collections.abc import Callable, Mapping
from typing import Any

import msgpack

from .._config import Config, conf_value
from .._errors import SerializationError
from .._native import batch_items, group_items, interleave, pack_batch, plain_check, unpack_batch, unpack_into
from .._tuple import Source, Tuple
from . import code_pickler

__all__ = ["PLAIN_TYPES", "SerializationError", "Serializer", "nesting_depth"]

log = logging.getLogger(__name__)

FORMAT = 2
"""Version of the batch layout; a batch of another version is refused."""

SAME_ROOT = None
"""A run's root that repeats the previous Tuple's (same int object at the sender): a fan-out's
children travel together, and a receiver then makes one root int for all of them, whose
identity the held-ack and acker look-ups compare first (format 2)."""

_M64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


def edge_values(start: int, n: int) -> list[int]:
    """The ``n`` edge ids an outbox drew from ``start`` (splitmix64, as `squall._native.IdSource`
    draws ids): a run's vals sent as its first state (compiled `squall._native.Outbox`).

    Raises:
        ValueError: ``start`` is not an unsigned 64-bit int.
    """
    if not 0 <= start <= _M64:
        raise ValueError(f"a run's edge state {start!r} is not an unsigned 64-bit int")
    out = []
    for i in range(1, n + 1):
        z = (start + i * _GAMMA) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        out.append(z ^ (z >> 31))
    return out


WORD_SLOTS = 4096
"""Short words a worker's decoder remembers (a power of two; `Serializer.decode_batch`)."""

EXT_BIGINT = 1
EXT_TUPLE = 2
EXT_SET = 3
EXT_FROZENSET = 4
EXT_REGISTERED = 5
EXT_PICKLE = 6

_SKIP_MISSING = Config.TOPOLOGY_SKIP_MISSING_KRYO_REGISTRATIONS

PLAIN_TYPES = frozenset({str, int, float, bool, bytes, type(None)})
"""Types that always serialize (ints of any size): a tuple of only these needs no check at emit."""

_CONTAINERS = (list, tuple, dict, set, frozenset)

MAX_EXT_NESTING = 32
"""Tuples, sets, frozensets and registered values inside one another, at most, in a value that
crosses. Each such level is an ext type whose payload msgpack's C unpacker decodes in a call of
its own, ~45 KB of C stack apiece (its stack of 1,024 entries), which Python's recursion limit
does not see: a value of tuples nested ~200 deep encoded, and its receiver's decoding overran an
8 MB stack (a segfault of the worker, again at each replay); a thread's stack of 2 MB (glibc's
when the stack limit is unlimited) held 40 levels and not 48. So the sender refuses deeper
values at emit, and the receiver refuses deeper bytes with an error instead of decoding them."""

_RECORDS: dict[str, tuple[type, Any]] = {}  # name -> (class, serializer or None): register_record


def register_record(cls: type, serializer: Any = None) -> None:
    """Send instances of ``cls`` between workers as one of squall's own registered records (by
    name, ``module:Qualname``, with their state, or with ``serializer``'s ``serialize`` and
    ``deserialize``) in every topology, as Storm registers its own classes with Kryo; a
    topology's ``topology.kryo.register`` cannot replace them. For the packages on top of the
    engine: `squall.metric` registers its `TaskInfo` and `DataPoint` so. Registering a class
    again replaces its serializer."""
    _RECORDS[f"{cls.__module__}:{cls.__qualname__}"] = (cls, serializer)



class _TransactionAttemptSerializer:
    """Trident's batch id, which every Trident data tuple carries first
    (`squall.trident.coordinator.TransactionAttempt`), as ``[txid, attempt_id]``: pickled, it cost
    more than the rest of a word count's tuple, twice (at the emit's check and in the batch).
    Registered by name, so a worker that runs no Trident topology never imports squall.trident."""

    NAME = "squall.trident.coordinator:TransactionAttempt"

    def __init__(self) -> None:
        self._cls: type | None = None

    def serialize(self, obj: Any) -> list[int]:
        return [obj.txid, obj.attempt_id]

    def deserialize(self, data: list[int]) -> Any:
        cls = self._cls
        if cls is None:
            cls = self._cls = resolve(self.NAME)
        txid, attempt_id = data
        return cls(txid, attempt_id)


def nesting_depth(obj: Any, cap: int = 100_000) -> int:
    """Levels of lists, tuples, dicts and sets in ``obj`` (1 for a flat list), without recursion,
    so that it can measure what is too deep to serialize; ``cap`` for a value that contains itself."""
    deepest = 0
    reached: dict[int, int] = {}  # id -> deepest level it was reached at: shared parts are walked once
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if not isinstance(o, _CONTAINERS) or reached.get(id(o), 0) >= d:
            continue
        reached[id(o)] = d
        deepest = max(deepest, d)
        if d < cap:
            stack.extend((c, d + 1) for c in (o.values() if isinstance(o, dict) else o))
    return deepest


class _Unsupported(Exception):
    """Raised inside the packer for a value that may not be sent; turned into SerializationError."""

    def __init__(self, obj: Any, reason: str, fix: str | None = None) -> None:
        super().__init__(reason)
        self.obj = obj
        self.reason = reason
        self.fix = fix


class _Depth(threading.local):
    """How deep in nested ext payloads this thread's decoding is (`Serializer._ext_hook`)."""

    def __init__(self) -> None:
        self.depth = 0


class _Packers(threading.local):
    """One msgpack Packer per nesting depth, per thread (a Packer is not reentrant)."""

    def __init__(self) -> None:
        self.pool: list[msgpack.Packer] = []
        self.depth = -1


def type_name(obj: Any) -> str:
    """``module.qualname`` of ``obj``'s type, as error messages name it."""
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def resolve(name: str) -> Any:
    """The object named ``"module:Qualname"`` (or dotted ``"module.Name"``), via importlib.

    Raises:
        ImportError, AttributeError, ValueError: the name does not resolve.
    """
    if ":" in name:
        module, _, qualname = name.partition(":")
    else:
        module, _, qualname = name.rpartition(".")
    if not module or not qualname:
        raise ValueError(f"{name!r} is not of the form 'module:Qualname'")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _registrations(value: Any) -> list[tuple[str, str | None]]:
    """``topology.kryo.register`` as (class name, serializer name or None) pairs.

    Accepts squall's dict and Storm's list of class names and ``{class: serializer}`` maps (of
    any number of entries each).
    """
    if not value:
        return []
    if isinstance(value, Mapping):
        return [(str(k), v) for k, v in value.items()]
    pairs: list[tuple[str, str | None]] = []
    for entry in value:
        if isinstance(entry, Mapping):
            pairs.extend((str(k), v) for k, v in entry.items())
        else:
            pairs.append((str(entry), None))
    return pairs


class _Registered:
    """How one registered class is sent: its serializer, or its state."""

    __slots__ = ("cls", "name", "serializer")

    def __init__(self, name: str, cls: type[Any], serializer: Any) -> None:
        self.name = name
        self.cls = cls
        self.serializer = serializer

    def state(self, obj: Any) -> Any:
        if self.serializer is not None:
            return self.serializer.serialize(obj)
        getstate = getattr(obj, "__getstate__", None)
        return getstate() if getstate is not None else obj.__dict__

    def rebuild(self, data: Any) -> Any:
        if self.serializer is not None:
            return self.serializer.deserialize(data)
        cls: Any = self.cls  # type.__new__'s overloads do not fit a class made by its own __new__
        obj = cls.__new__(cls)
        setstate = getattr(obj, "__setstate__", None)
        if setstate is not None:
            setstate(data)
            return obj
        # pickle's default for a state without __setstate__: a dict, or (dict, slots dict)
        slots = None
        if type(data) is tuple and len(data) == 2:
            data, slots = data
        if data:
            obj.__dict__.update(data)
        if slots:
            for k, v in slots.items():
                setattr(obj, k, v)
        return obj


class Serializer:
    """Encodes batches of ``(target_task, item)`` for another worker, and decodes them there.

    Items are `Tuple`s, acker messages ``(kind, root, val, spout_task)`` and spout replies
    ``(kind, root, delta_secs)``. Values are sent as described in the module note; an encoded
    batch is one msgpack document.

    Thread-safe: any number of threads may encode and decode with one Serializer.

    Args:
        conf: the topology's configuration; reads ``topology.kryo.register``,
            ``topology.fall.back.on.pickle`` and ``topology.skip.missing.kryo.registrations``.
        source_of: ``source_of(src_task, stream)`` returns the shared `Source` of that emitting
            task and stream (the receiving worker caches them; their fields come from its plan).

    Raises:
        SerializationError: a registration does not resolve to a class (or its serializer), unless
            ``topology.skip.missing.kryo.registrations`` is true, when it is skipped with a warning.
    """

    def __init__(self, conf: Mapping[str, Any], source_of: Callable[[int, str], Source]) -> None:
        self.source_of = source_of
        self.allow_pickle = bool(conf_value(conf, Config.TOPOLOGY_FALL_BACK_ON_PICKLE))
        self._by_type: dict[type, _Registered] = {}
        self._by_name: dict[str, _Registered] = {}
        skip = bool(conf_value(conf, _SKIP_MISSING))
        for name, serializer_name in _registrations(conf.get(Config.TOPOLOGY_KRYO_REGISTER)):
            try:
                reg = self._register(name, serializer_name)
            except SerializationError as e:
                if not skip:
                    raise
                log.warning("%s; skipped because %s is true", e, _SKIP_MISSING)
                continue
            self._by_type[reg.cls] = reg
            self._by_name[name] = reg
        for name, (cls, serializer) in _RECORDS.items():  # squall's own (Storm registers its too)
            self._by_type[cls] = self._by_name[name] = _Registered(name, cls, serializer)
        attempt = _TransactionAttemptSerializer.NAME  # found by name at its first encode (see _default)
        self._by_name[attempt] = _Registered(attempt, object, _TransactionAttemptSerializer())
        self._packers = _Packers()
        self._decoding = _Depth()
        # the short words this worker received lately, one per slot their bytes hash to (compiled
        # decoding, `squall._native.unpack_batch`): a word that comes again is the same str
        self._words: list = [None] * WORD_SLOTS
        # a str with a lone surrogate crosses as Python holds it (Storm's Kryo carries any Java
        # String): UTF-8 with the surrogate's three bytes, written and read back so
        self._unpack_opts = {"ext_hook": self._ext_hook, "strict_map_key": False, "raw": False,
                             "unicode_errors": "surrogatepass"}

    @staticmethod
    def _register(name: str, serializer_name: str | None) -> _Registered:
        where = f"topology.kryo.register entry {name!r}"
        try:
            cls = resolve(name)
        except Exception as e:
            raise SerializationError(
                f"{where}: cannot find class {name!r} ({type(e).__name__}: {e}); the class must be "
                f"importable by that name in every worker") from e
        if not isinstance(cls, type):
            raise SerializationError(f"{where}: {name!r} is a {type(cls).__name__}, not a class")
        serializer = None
        if serializer_name is not None:
            try:
                serializer = resolve(str(serializer_name))()
            except Exception as e:
                raise SerializationError(
                    f"{where}: cannot make serializer {serializer_name!r} ({type(e).__name__}: {e})") from e
            for method in ("serialize", "deserialize"):
                if not callable(getattr(serializer, method, None)):
                    raise SerializationError(
                        f"{where}: serializer {serializer_name!r} has no {method}() method")
        return _Registered(name, cls, serializer)

    # --- encoding ----------------------------------------------------------------------------
    def _packer(self) -> msgpack.Packer:
        return msgpack.Packer(default=self._default, use_bin_type=True, strict_types=True, buf_size=4096,
                              unicode_errors="surrogatepass")

    def _pack(self, obj: Any) -> bytes:
        """Pack ``obj`` with this thread's packer for the current nesting depth."""
        st = self._packers
        d = st.depth + 1
        pool = st.pool
        if d == len(pool):
            pool.append(self._packer())
        st.depth = d
        try:
            return pool[d].pack(obj)
        finally:
            st.depth = d - 1

    def _default(self, obj: Any) -> Any:
        """The packer's hook for every value msgpack does not pack itself."""
        t = type(obj)
        if t is tuple and self._packers.depth < MAX_EXT_NESTING:
            return msgpack.ExtType(EXT_TUPLE, self._pack(list(obj)))
        if t is int:  # msgpack calls the hook for ints outside [-2**63, 2**64)
            return msgpack.ExtType(EXT_BIGINT, obj.to_bytes((obj.bit_length() + 8) // 8, "big", signed=True))
        if self._packers.depth >= MAX_EXT_NESTING:  # its receiver would refuse it (see MAX_EXT_NESTING)
            raise _Unsupported(obj, f"is nested inside more than {MAX_EXT_NESTING} tuples, sets or registered "
                                    f"values, deeper than a worker decodes",
                               "flatten it, or nest lists or dicts instead (they nest hundreds deep)")
        if t is set:
            return msgpack.ExtType(EXT_SET, self._pack(list(obj)))
        if t is frozenset:
            return msgpack.ExtType(EXT_FROZENSET, self._pack(list(obj)))
        reg = self._by_type.get(t)
        if reg is None and self._by_name:
            # The same class may exist twice in a worker: imported by name for the registration,
            # and rebuilt from the topology's pickle (user modules travel by value). Match by name.
            reg = self._by_name.get(f"{t.__module__}:{t.__qualname__}")
            if reg is not None:
                self._by_type[t] = reg
        if reg is not None:
            try:
                state = reg.state(obj)
            except Exception as e:
                raise _Unsupported(obj, f"failed in its registered serialization ({type(e).__name__}: {e})",
                                   "fix the serializer registered for it") from e
            return msgpack.ExtType(EXT_REGISTERED, self._pack([reg.name, state]))
        if not self.allow_pickle:
            raise _Unsupported(obj, "is not registered and topology.fall.back.on.pickle is false")
        try:
            # an instance of the user's class goes with the class by value (the worker got it so):
            # code_pickler rebuilds the classes cloudpickle cannot (a NamedTuple, a dataclass)
            return msgpack.ExtType(EXT_PICKLE, code_pickler.dumps(obj))
        except Exception as e:
            raise _Unsupported(obj, f"cannot be pickled ({type(e).__name__}: {e})") from e

    def encode_batch(self, items: list[Any]) -> bytes:
        """One batch as bytes for `decode_batch`: ``items`` is flat, ``[target_task, item,
        target_task, item, ...]``, as the transport's senders queue them (no pair is made per
        item: a pair lived from the emit to the flush, and was cold by then).

        Raises:
            SerializationError: a value cannot be sent; the message names its type, the component
                and stream that emitted it, and how to fix it.
        """
        # compiled: a batch of plain values in C, as msgpack would write it; None (another value,
        # or the pure path): with msgpack
        data = pack_batch(items, Tuple)
        if data is not None:
            return data
        # compiled: the columns in C; None (an item it does not know, or the pure path): in Python
        columns = group_items(items, Tuple) or self._group(items)
        runs, sources, ack_targets, acks, reply_targets, replies = columns
        batch = [FORMAT, runs, ack_targets, acks, reply_targets, replies]
        try:
            return self._pack(batch)
        except _Unsupported as e:
            raise self._unsupported_error(e, runs, sources) from e.__cause__
        except (TypeError, ValueError, OverflowError, RecursionError) as e:  # e.g. a list holding itself
            raise SerializationError(f"cannot serialize batch: {type(e).__name__}: {e}") from e

    @staticmethod
    def _group(items: list[Any]) -> list:
        """`encode_batch`'s columns (``items`` flat), in Python (`squall._native.group_items` in C): runs of
        consecutive Tuples of one source, each ``[src.task, src.stream, targets, values, roots,
        vals]`` (roots and vals None when none is tracked), then acker messages and spout
        replies, flat.

        Raises:
            SerializationError: an item is none of these.
        """
        runs: list = []
        sources: list[Source] = []
        cur = prev_root = None
        targets: list[int]
        values: list
        roots: list
        vals: list
        ack_targets: list[int] = []
        acks: list = []  # the messages' fields, flat: zip(it, it, it, it) rebuilds them in C
        reply_targets: list[int] = []
        replies: list = []
        if len(items) % 2:
            raise SerializationError(f"a batch's items are [task, item, ...] pairs, flat: got {len(items)} values")
        for target, item in zip(items[::2], items[1::2]):
            if type(item) is Tuple:
                src = item._src
                if src is not cur:
                    cur = src
                    prev_root = None
                    targets, values, roots, vals = [], [], [], []
                    runs.append([src.task, src.stream, targets, values, roots, vals])
                    sources.append(src)
                root = item._root
                targets.append(target)
                values.append(item.values)
                roots.append(SAME_ROOT if root is prev_root and type(root) is int else root)
                vals.append(item._val)
                prev_root = root
            elif type(item) is tuple and len(item) == 4:
                ack_targets.append(target)
                acks.extend(item)
            elif type(item) is tuple and len(item) == 3:
                reply_targets.append(target)
                replies.extend(item)
            else:
                raise SerializationError(
                    f"cannot send a {type_name(item)} to task {target}: a batch holds Tuples, acker "
                    f"messages (kind, root, val, spout_task) and spout replies (kind, root, delta)")
        for run in runs:
            if not any(run[4]):
                run[4] = run[5] = None  # untracked run: no ack columns
        return [runs, sources, ack_targets, acks, reply_targets, replies]

    def emit_check(self) -> Callable[[Any], None]:
        """`check` for an item a sender is given: only a `Tuple` with a value not of
        `PLAIN_TYPES` is checked (acker messages and plain tuples always serialize)."""
        return plain_check(Tuple, PLAIN_TYPES, self.check)

    def check(self, tup: Tuple) -> None:
        """Raise if ``tup``'s values cannot be sent; called at emit for a tuple bound for another
        worker (by the transport's sender, only for values that are not all `PLAIN_TYPES`), so
        the emit fails in the emitting component's code, where it can be caught.

        Raises:
            SerializationError: naming the component and stream, and the value's type or depth.
        """
        try:
            self._pack(tup.values)
        except _Unsupported as e:
            raise self._value_error(e, tup._src) from e.__cause__
        except (ValueError, TypeError, OverflowError, RecursionError) as e:
            src = tup._src
            where = f"a tuple emitted by component [{src.component}] on stream [{src.stream}]"
            if isinstance(e, RecursionError) or "recursion" in str(e):  # Python's or msgpack's nesting limit
                depth = nesting_depth(tup.values)
                shape = ("contains itself" if depth >= 100_000 else
                         f"is nested {depth - 1} levels deep (lists, tuples, dicts, sets), deeper than can be "
                         f"serialized; flatten it")
                raise SerializationError(f"cannot serialize {where}: a value {shape}") from None
            raise SerializationError(f"cannot serialize {where}: {type(e).__name__}: {e}") from e

    def _unsupported_error(self, e: _Unsupported, runs: list, sources: list[Source]) -> SerializationError:
        """The error for an unsendable value found in a batch, naming the emitting component and stream."""
        for run, src in zip(runs, sources):
            try:
                for values in run[3]:
                    self._pack(values)
            except _Unsupported:
                return self._value_error(e, src)
        return self._value_error(e, None)

    def _value_error(self, e: _Unsupported, src: Source | None) -> SerializationError:
        where = (f"a tuple emitted by component [{src.component}] on stream [{src.stream}]" if src is not None
                 else "an acker message or spout reply")
        return SerializationError(f"cannot serialize a value of type {type_name(e.obj)} in {where}: it "
                                  f"{e.reason}; {self._fix(e)}")

    def _fix(self, e: _Unsupported) -> str:
        return e.fix or ("register the type with Config.register_serialization(cls, serializer_cls)"
                         + (" or make it picklable" if self.allow_pickle else
                            " or allow pickle with topology.fall.back.on.pickle: true"))

    def encode_value(self, obj: Any, where: str, inside: int = 0) -> bytes:
        """One value as bytes for `decode_value`, by the same rules as a tuple's values (what a
        state provider stores). ``where`` names the value in an error ("state key 'x' of
        component [count]"). ``inside``: how many tuples, sets or registered values ``obj`` is
        nested in where it is decoded (a part encoded apart and then put inside them, as a state
        key's set elements: `squall.state._kv.StateCodec.key`), which count towards
        `MAX_EXT_NESTING` as if it were packed there.

        Raises:
            SerializationError: naming the value's type, ``where``, and the fix.
        """
        st = self._packers
        outer = st.depth
        st.depth = outer + inside
        while len(st.pool) <= st.depth:  # packers for the levels it is inside (idle: _pack takes the next)
            st.pool.append(self._packer())
        try:
            return self._pack(obj)
        except _Unsupported as e:
            raise SerializationError(f"cannot serialize a value of type {type_name(e.obj)} in {where}: it "
                                     f"{e.reason}; {self._fix(e)}") from e.__cause__
        except (TypeError, ValueError, OverflowError, RecursionError) as e:
            raise SerializationError(f"cannot serialize {where}: {type(e).__name__}: {e}") from e
        finally:
            st.depth = outer

    def decode_value(self, data: bytes) -> Any:
        """The value `encode_value` made of ``data`` (pickled parts only while
        ``topology.fall.back.on.pickle`` is true).

        Raises:
            SerializationError: the bytes are not such a value.
        """
        try:
            return msgpack.unpackb(data, **self._unpack_opts)
        except SerializationError:
            raise
        except Exception as e:
            raise SerializationError(f"cannot decode a value of {len(data)} bytes: {type(e).__name__}: {e}") from e

    # --- decoding ----------------------------------------------------------------------------
    def _ext_hook(self, code: int, data: bytes) -> Any:
        if code == EXT_BIGINT:  # a leaf: nothing nested to decode
            return int.from_bytes(data, "big", signed=True)
        at = self._decoding
        if at.depth >= MAX_EXT_NESTING:  # deeper would overrun the C stack (see MAX_EXT_NESTING)
            raise SerializationError(f"a value nests tuples, sets or registered values more than {MAX_EXT_NESTING} "
                                     f"deep, which no squall sender writes: refused undecoded")
        at.depth += 1
        try:
            return self._ext_value(code, data)
        finally:
            at.depth -= 1

    def _ext_value(self, code: int, data: bytes) -> Any:
        if code == EXT_TUPLE:
            return tuple(msgpack.unpackb(data, **self._unpack_opts))
        if code == EXT_SET:
            return set(msgpack.unpackb(data, **self._unpack_opts))
        if code == EXT_FROZENSET:
            return frozenset(msgpack.unpackb(data, **self._unpack_opts))
        if code == EXT_REGISTERED:
            name, state = msgpack.unpackb(data, **self._unpack_opts)
            reg = self._by_name.get(name)
            if reg is None:
                raise SerializationError(f"received a value of class {name!r}, which is not registered "
                                         f"in this worker's topology.kryo.register")
            try:
                return reg.rebuild(state)
            except Exception as e:
                raise SerializationError(f"cannot rebuild a value of registered class {name!r}: "
                                         f"{type(e).__name__}: {e}") from e
        if code == EXT_PICKLE:
            if not self.allow_pickle:
                raise SerializationError("received a pickled value but topology.fall.back.on.pickle is "
                                         "false; refusing to unpickle")
            try:
                return pickle.loads(data)
            except Exception as e:
                raise SerializationError(f"cannot unpickle a value: {type(e).__name__}: {e}") from e
        raise SerializationError(f"unknown msgpack ext type {code} ({len(data)} bytes): the batch is "
                                 f"corrupt or comes from another squall version")

    def decode_into(self, data: bytes, inboxes: dict[int, Any]) -> int | None:
        """The items of a batch made by `encode_batch` appended straight to ``inboxes[target]``
        (deques; items for a target not there are dropped), without the flat list `decode_batch`
        returns; the items delivered. None when nothing was delivered: a batch this does not take
        (a value not plain, bytes that are not such a batch, the pure path), which `decode_batch`
        then decodes or refuses with its error."""
        return unpack_into(data, self.source_of, Tuple, self._words, inboxes)

    def decode_batch(self, data: bytes) -> list[Any]:
        """The items of a batch made by `encode_batch`, flat as it took them: ``[target_task, item,
        target_task, item, ...]`` (no pair is made per item: it lived until the delivery, and was
        cold by then).

        Tuples come first, then acker messages, then spout replies (see the module note).

        Raises:
            SerializationError: the bytes are not a batch (corrupt, truncated, another format), or
                hold a value this worker cannot rebuild.
        """
        # compiled: a batch of plain values straight from its bytes; None (another value, not a
        # batch at all, or the pure path): with msgpack, which decodes it or words the error
        items = unpack_batch(data, self.source_of, Tuple, self._words)
        if items is not None:
            return items
        try:
            batch = msgpack.unpackb(data, **self._unpack_opts)
            fmt, runs, ack_targets, acks, reply_targets, replies = batch
            if fmt != FORMAT:
                raise SerializationError(f"batch format {fmt!r} is not {FORMAT}: the sender runs another "
                                         f"squall version")
            out: list[Any] = []
            extend = out.extend
            source_of = self.source_of
            for src_task, stream, targets, values, roots, vals in runs:
                _task_ids(targets)
                try:
                    src = source_of(src_task, stream)
                except Exception as e:
                    raise SerializationError(f"batch names an unknown source: task {src_task!r}, stream "
                                             f"{stream!r} ({type(e).__name__}: {e})") from e
                if type(vals) is int:  # the state the sender's outbox drew the run's edge ids from
                    vals = edge_values(vals, len(targets))
                batch_items(out, targets, values, src, roots, vals, Tuple)
            _task_ids(ack_targets)
            _task_ids(reply_targets)
            if ack_targets:
                it = iter(acks)
                extend(interleave(ack_targets, list(zip(it, it, it, it, strict=True))))
            if reply_targets:
                it = iter(replies)
                extend(interleave(reply_targets, list(zip(it, it, it, strict=True))))
            return out
        except SerializationError:
            raise
        except Exception as e:  # msgpack's errors, and a well-formed document of the wrong shape
            raise SerializationError(
                f"cannot decode batch of {len(data)} bytes: {type(e).__name__}: {e}") from e


def _task_ids(targets: Any) -> None:
    """Raise `SerializationError` unless ``targets`` (a decoded batch's column of targets) is a
    list of ints, as every encoder writes them: a map or a list there (a peer's bug, another
    version's layout) could not be looked up among the inboxes, and its TypeError, raised while
    the transport read the connection, took the rest of the connection's frames with it, and a
    worker's loop with it when the loop was the reader."""
    if type(targets) is not list or not all(type(t) is int for t in targets):
        shown = next((t for t in targets if type(t) is not int), targets) if type(targets) is list else targets
        raise SerializationError(f"a batch's targets are task ids (ints): got a {type(shown).__name__} {shown!r:.80}")


def source_cache(plan: Any) -> Any:
    """``source_of(task, stream)``: the `Source` a decoded tuple of ``plan`` carries, made once per pair."""
    cache: dict[tuple[int, str], Source] = {}

    def source_of(task: int, stream: str) -> Source:
        src = cache.get((task, stream))
        if src is None:
            component = plan.task_to_component[task]
            fields = plan.topology.components[component].streams[stream].fields
            src = cache[(task, stream)] = Source(component, stream, task, fields)
        return src
    return source_of
