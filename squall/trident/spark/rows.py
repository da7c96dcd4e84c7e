"""How Trident tuples travel through Spark: one row per tuple, its values in typed columns or pickled.

Every DataFrame the compiled query builds has the same four columns, so the edges of any
Trident bolt (a merge of several streams, a join's two sides) are one ``union`` away:
``trident_stream`` (the planner's stream id, ``s<N>``), ``trident_key`` (on a stream the next
bolt partitions by fields: `key_bytes`, else null), ``trident_tuple`` (the pickled list of the
tuple's values) and ``trident_value`` (on a stream Spark SQL sums before the driver, a partial
that is an int, its tuple then null: see ``compiler.SqlCombine``; else null). Trident values are
any picklable Python objects, which no Spark type holds.

A key's first 4 bytes are ``squall._stable_hash.stable_hash`` of its values, big-endian: keys
equal in Python (``1``, ``1.0``, ``True``; two equal strings, one pickled by reference to the
other) hash alike, as squall's engine routes them, and Spark's hash repartition is on those 4
bytes alone (`KEY_HASH`). Their pickles may differ (a float is not an int, and pickle's memo
writes a repeated object as a reference), so the bytes are never compared as the key. On a stream
SQL sums, the pickled values follow, for the driver to rebuild the group (`key_values`).

A spout's stream, and what Spark SQL makes of it (``project``, ``FilterNull``, ``Equals``),
also has one typed column per field whose type the spout declares (str, int, float, bool,
bytes: `SQL_TYPES`), named ``trident_s<spout>_f<field>``; ``trident_tuple`` then pickles only
the other fields. A stream's `Layout` says where each of its fields is. Frames of several
spouts are unioned with the columns the other lacks as nulls.

Also here: offsets. A Spark offset is a JSON object, and Spark's checkpoint keeps it in a file
that anyone who can write the checkpoint directory can rewrite. So a spout's metadata is kept as
JSON that carries no code: JSON's own values as they are, and tuples, bytes, sets and dicts whose
keys are not strings in tagged objects (``{"$tuple": [...]}``); anything else is refused when the
batch is planned, naming the spout. Storm too keeps Trident's metadata as JSON (its
TransactionalState writes it with JSONValue); it was a pickle once, which read back from a
rewritten checkpoint would run its writer's code.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._stable_hash import stable_hash

STREAM, KEY, TUPLE, VALUE = "trident_stream", "trident_key", "trident_tuple", "trident_value"
ROW_SCHEMA = f"{STREAM} STRING, {KEY} BINARY, {TUPLE} BINARY, {VALUE} BIGINT"
_PICKLED = "$pickle"  # what squall wrote before: refused when read, never unpickled
_TAGS = ("$tuple", "$bytes", "$set", "$frozenset", "$dict", "$float")

SQL_TYPES: dict[type, str] = {str: "STRING", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN", bytes: "BINARY"}
"""The Python types a field may be declared as, and the Spark SQL type of its column."""
INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class Layout:
    """Where each field of a stream is in a row: ``slots[i]`` is the name of the typed column
    holding field ``i``, or an int, the position of its value in the pickled ``trident_tuple``."""

    slots: tuple[str | int, ...]

    @classmethod
    def pickled(cls, width: int) -> Layout:
        """Every field in the pickled list, in order: a bolt's output."""
        return cls(tuple(range(width)))

    def columns(self) -> list[str]:
        """The typed columns, in field order."""
        return [s for s in self.slots if isinstance(s, str)]

    def decode(self, rb: Any) -> list[list]:
        """The values of each row of ``rb`` (an Arrow batch or table whose rows all have this layout)."""
        cols = {name: rb.column(name).to_pylist() for name in self.columns()}
        if all(isinstance(s, str) for s in self.slots):
            if len(self.slots) == 1:
                return [[v] for v in cols[self.slots[0]]]  # type: ignore[index]
            return [list(t) for t in zip(*(cols[s] for s in self.slots))]  # type: ignore[index]
        pickled = [loads(b) for b in rb.column(TUPLE).to_pylist()]
        return [[cols[s][r] if isinstance(s, str) else pickled[r][s] for s in self.slots] for r in range(len(pickled))]


def stream_rows(batch: Any, layouts: Mapping[str, Layout]) -> Iterator[tuple[str, list[list]]]:
    """Each run of consecutive rows of one stream in ``batch`` (an Arrow batch or table of frame
    rows) as ``(stream, values of each row)``: by the stream's layout in ``layouts``, else unpickled."""
    streams = batch.column(STREAM).to_pylist()
    tuples = None
    start = 0
    for i in range(1, len(streams) + 1):
        if i == len(streams) or streams[i] != streams[start]:
            layout = layouts.get(streams[start])
            if layout is not None:
                yield streams[start], layout.decode(batch.slice(start, i - start))
            else:
                if tuples is None:
                    tuples = batch.column(TUPLE).to_pylist()
                yield streams[start], [loads(t) for t in tuples[start:i]]
            start = i


KEY_HASH = 4
"""How many leading bytes of ``trident_key`` are the key's stable hash (what a repartition hashes)."""


def key_bytes(values: Sequence[Any], with_values: bool = False) -> bytes:
    """The ``trident_key`` of a tuple whose key fields hold ``values``: their stable hash (equal
    for keys equal in Python, in every process), then, ``with_values``, their pickle.

    Raises:
        ValueError: a key value is unhashable (a list), naming it.
    """
    try:
        head = stable_hash(list(values)).to_bytes(KEY_HASH, "big")
    except TypeError:
        raise ValueError(f"partition_by/group_by: the key values {list(values)!r} are not hashable") from None
    return head + dumps(values) if with_values else head


def key_values(key: bytes) -> list:
    """The values a `key_bytes` ``with_values`` holds."""
    return loads(key[KEY_HASH:])


def dumps(values: Sequence[Any]) -> bytes:
    """The bytes of one tuple's values (a list)."""
    return pickle.dumps(list(values), protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> list:
    """The values `dumps` made bytes of."""
    return pickle.loads(data)


def digest(rows: Iterable[bytes]) -> str:
    """A short digest of a batch's pickled tuples, in order: a replay must give the same."""
    sha = hashlib.sha256()
    for row in rows:
        sha.update(len(row).to_bytes(8, "big"))
        sha.update(row)
    return sha.hexdigest()[:32]


def to_offset(value: Any, where: str = "a spout") -> Any:
    """``value`` (a spout's batch metadata) as JSON that `from_offset` turns back into an equal
    value; tuples, bytes, sets, dicts with other keys and non-finite floats are tagged.

    Raises:
        TypeError: ``value`` holds something else (a class of the spout's own, say), naming
            ``where`` and the type.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, list):
        return [to_offset(v, where) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [to_offset(v, where) for v in value]}
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (set, frozenset)):
        tag = "$set" if isinstance(value, set) else "$frozenset"
        return {tag: [to_offset(v, where) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: to_offset(v, where) for k, v in value.items()}
        return {"$dict": [[to_offset(k, where), to_offset(v, where)] for k, v in value.items()]}
    raise TypeError(f"{where}: its batch metadata holds a {type(value).__module__}.{type(value).__qualname__}, "
                    "which Trident on Spark cannot keep in Spark's checkpoint: metadata must be made of None, "
                    "bool, int, float, str, bytes, lists, tuples, sets and dicts of them (as Storm's is JSON)")


def from_offset(value: Any, where: str = "a spout") -> Any:
    """The value `to_offset` encoded.

    Raises:
        ValueError: ``value`` is not what `to_offset` writes (a checkpoint rewritten by hand or
            by another program, or one squall wrote pickled), naming ``where``.
    """
    if isinstance(value, list):
        return [from_offset(v, where) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (tag, inner), = value.items()
        try:
            if tag == _PICKLED:
                raise ValueError("it holds a pickle (squall wrote one before 2026-12), which is never loaded "
                                 "from a checkpoint: start the query on a new checkpoint location")
            if tag == "$tuple":
                return tuple(from_offset(v, where) for v in inner)
            if tag == "$bytes":
                return base64.b64decode(inner, validate=True)
            if tag in ("$set", "$frozenset"):
                items = (from_offset(v, where) for v in inner)
                return set(items) if tag == "$set" else frozenset(items)
            if tag == "$dict":
                return {from_offset(k, where): from_offset(v, where) for k, v in inner}
            if tag == "$float":
                if inner not in ("inf", "-inf", "nan"):
                    raise ValueError(f"{inner!r} is not a float to tag")
                return float(inner)
        except (TypeError, ValueError, binascii.Error) as e:
            raise ValueError(f"{where}: the batch metadata in Spark's checkpoint is not squall's ({tag}: {e})") from None
    return {k: from_offset(v, where) for k, v in value.items()}


def to_option(obj: Any) -> str:
    """``obj`` (a spout with its functions) as a Data Source option string."""
    from pyspark import cloudpickle

    return base64.b64encode(cloudpickle.dumps(obj)).decode("ascii")


def from_option(text: str) -> Any:
    """What `to_option` encoded."""
    return pickle.loads(base64.b64decode(text))


__all__ = ["INT64", "KEY", "KEY_HASH", "ROW_SCHEMA", "SQL_TYPES", "STREAM", "TUPLE", "VALUE", "Layout", "digest",
           "dumps", "from_offset", "from_option", "key_bytes", "key_values", "loads", "stream_rows", "to_offset", "to_option"]
