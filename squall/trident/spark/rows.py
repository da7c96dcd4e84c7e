"""How Trident tuples travel through Spark: one row per tuple, its values pickled.

Every DataFrame the compiled query builds has the same four columns, so the edges of any
Trident bolt (a merge of several streams, a join's two sides) are one ``union`` away:
``trident_stream`` (the planner's stream id, ``s<N>``), ``trident_key`` (the pickled values of
the fields the next repartition hashes, else null), ``trident_tuple`` (the pickled list of the
tuple's values) and ``trident_value`` (on a stream Spark SQL sums before the driver, a partial
that is an int, its tuple then null: see ``compiler.SqlCombine``; else null). Trident values are
any picklable Python objects, which no Spark type holds;
equal keys pickle to equal bytes for the values a grouping uses (strings, numbers, tuples of
them), so Spark's hash partitioning of the bytes sends equal keys to the same partition.

Also here: offsets. A Spark offset is a JSON object; a spout's metadata is any picklable value,
kept as itself when JSON keeps it unchanged, else as ``{"$pickle": base64}``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
from collections.abc import Iterable, Sequence
from typing import Any

STREAM, KEY, TUPLE, VALUE = "trident_stream", "trident_key", "trident_tuple", "trident_value"
ROW_SCHEMA = f"{STREAM} STRING, {KEY} BINARY, {TUPLE} BINARY, {VALUE} BIGINT"
SOURCE_SCHEMA = f"{TUPLE} BINARY"
_PICKLED = "$pickle"


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


def to_offset(value: Any) -> Any:
    """``value`` as a JSON value that `from_offset` turns back into an equal value."""
    try:
        if json.loads(json.dumps(value)) == value:
            return value
    except (TypeError, ValueError):
        pass
    return {_PICKLED: base64.b64encode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")}


def from_offset(value: Any) -> Any:
    """The value `to_offset` encoded."""
    if isinstance(value, dict) and set(value) == {_PICKLED}:
        return pickle.loads(base64.b64decode(value[_PICKLED]))
    return value


def to_option(obj: Any) -> str:
    """``obj`` (a spout with its functions) as a Data Source option string."""
    from pyspark import cloudpickle

    return base64.b64encode(cloudpickle.dumps(obj)).decode("ascii")


def from_option(text: str) -> Any:
    """What `to_option` encoded."""
    return pickle.loads(base64.b64decode(text))


__all__ = ["KEY", "ROW_SCHEMA", "SOURCE_SCHEMA", "STREAM", "TUPLE", "VALUE", "digest", "dumps", "from_offset",
           "from_option", "loads", "to_offset", "to_option"]
