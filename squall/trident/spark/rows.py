"""How Trident tuples travel through Spark: one row per tuple, its values in typed columns or pickled.

Every DataFrame the compiled query builds has the same four columns, so the edges of any
Trident bolt (a merge of several streams, a join's two sides) are one ``union`` away:
``trident_stream`` (the planner's stream id, ``s<N>``), ``trident_key`` (the pickled values of
the fields the next repartition hashes, else null), ``trident_tuple`` (the pickled list of the
tuple's values) and ``trident_value`` (on a stream Spark SQL sums before the driver, a partial
that is an int, its tuple then null: see ``compiler.SqlCombine``; else null). Trident values are
any picklable Python objects, which no Spark type holds;
equal keys pickle to equal bytes for the values a grouping uses (strings, numbers, tuples of
them), so Spark's hash partitioning of the bytes sends equal keys to the same partition.

A spout's stream, and what Spark SQL makes of it (``project``, ``FilterNull``, ``Equals``),
also has one typed column per field whose type the spout declares (str, int, float, bool,
bytes: `SQL_TYPES`), named ``trident_s<spout>_f<field>``; ``trident_tuple`` then pickles only
the other fields. A stream's `Layout` says where each of its fields is. Frames of several
spouts are unioned with the columns the other lacks as nulls.

Also here: offsets. A Spark offset is a JSON object; a spout's metadata is any picklable value,
kept as itself when JSON keeps it unchanged, else as ``{"$pickle": base64}``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

STREAM, KEY, TUPLE, VALUE = "trident_stream", "trident_key", "trident_tuple", "trident_value"
ROW_SCHEMA = f"{STREAM} STRING, {KEY} BINARY, {TUPLE} BINARY, {VALUE} BIGINT"
_PICKLED = "$pickle"

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


__all__ = ["INT64", "KEY", "ROW_SCHEMA", "SQL_TYPES", "STREAM", "TUPLE", "VALUE", "Layout", "digest",
           "dumps", "from_offset", "from_option", "loads", "stream_rows", "to_offset", "to_option"]
