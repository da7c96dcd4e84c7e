"""A hash of tuple values that is the same in every process and every run.

Python's ``hash()`` of str and bytes is salted per process (PYTHONHASHSEED), and ``hash(None)``
depends on an address before Python 3.12, so fields grouping cannot use it: two workers would
send the same word to different tasks. Strings and bytes go through CRC-32 (C speed, about
90 ns); numbers use their value. The result is then multiplied by a 64-bit odd constant and the
high half taken, because CRC-32 is linear and its low bits alone skew a ``% 2`` split (measured
55/45 on the W1 words, ENGINE-SPEED.md lesson 10).

The values Python's own ``hash()`` would salt or take from an address are hashed from what
they are equal by: subclasses of str, bytes and int (a ``StrEnum``, an ``IntEnum``) and of tuple
(a ``NamedTuple``) as their base values, so that each goes where an equal plain value goes;
``datetime``, ``date``, ``time`` and ``timedelta`` from their fields (an aware datetime in UTC,
so that equal instants in two zones agree); ``Decimal`` and ``Fraction`` as the equal int or
float; ``UUID`` as its int; an ``Enum`` member by its class and name; a dataclass by its class
and fields; a dict by its items, in any order; NaN as one value. Other types fall back to
``hash()``: a user type used as a grouping key must define a ``__hash__`` that is stable across
processes (one built from its fields' stable values).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import fractions
import math
import uuid
from enum import Enum
from typing import Any
from zlib import crc32

_M64 = 0xFFFFFFFFFFFFFFFF
_MIX = 0x9E3779B97F4A7C15
_NAN = 0x7FF8  # every NaN's


def _value_hash(v: Any) -> int:
    t = type(v)
    if t is str:
        return crc32(v.encode("utf-8", "surrogatepass"))
    if t is int or t is bool:
        return v & _M64
    if t is bytes or t is bytearray:
        return crc32(v)
    if v is None:
        return 0x5EED
    if t is float:
        if v.is_integer():
            return int(v) & _M64
        return _NAN if math.isnan(v) else hash(v) & _M64  # float hash is unsalted, but a NaN's is its address
    if t is tuple or t is list:
        return _values_hash(v)
    if t is frozenset or t is set:
        h = 0
        for x in v:  # order-free: xor of member hashes
            h ^= _value_hash(x)
        return h
    return _other_hash(v)


def _text_hash(text: str) -> int:
    return crc32(text.encode("utf-8", "surrogatepass"))


def _other_hash(v: Any) -> int:
    """`_value_hash` of a value of any other type: see the module docstring."""
    if isinstance(v, float):
        return _value_hash(float(v))
    if isinstance(v, Enum) and not isinstance(v, (int, str)):  # an IntEnum or StrEnum equals its value
        return _values_hash((_text_hash(type(v).__qualname__), _text_hash(v.name)))
    if isinstance(v, str):
        return _text_hash(str.__str__(v))
    if isinstance(v, int):
        return int(v) & _M64
    if isinstance(v, (bytes, bytearray)):
        return crc32(v)
    if isinstance(v, tuple):
        return _values_hash(v)
    if isinstance(v, (frozenset, set)):
        return _value_hash(frozenset(v))
    if isinstance(v, datetime.datetime):
        if v.utcoffset() is not None:  # equal instants in any zone are equal
            v = v.astimezone(datetime.UTC).replace(tzinfo=None)
            return _values_hash((1, v.toordinal(), v.hour, v.minute, v.second, v.microsecond))
        return _values_hash((0, v.toordinal(), v.hour, v.minute, v.second, v.microsecond))
    if isinstance(v, datetime.date):
        return _values_hash((2, v.toordinal()))
    if isinstance(v, datetime.time):
        offset = v.utcoffset()
        shift = int(offset.total_seconds() * 1_000_000) if offset is not None else 0
        micros = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond - shift
        return _values_hash((3 if offset is not None else 4, micros))
    if isinstance(v, datetime.timedelta):
        return ((v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds) & _M64
    if isinstance(v, (decimal.Decimal, fractions.Fraction)):
        if isinstance(v, decimal.Decimal) and not v.is_finite():
            return _value_hash(float(v))  # infinities and NaNs as the float's
        return int(v) & _M64 if v == int(v) else hash(v) & _M64  # a number's hash() is unsalted, and an equal float's
    if isinstance(v, uuid.UUID):
        return v.int & _M64
    if isinstance(v, dict):
        h = 0x0D1C7
        for key, value in v.items():  # order-free, as dicts compare
            h ^= _values_hash((key, value))
        return h
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        fields = (getattr(v, f.name) for f in dataclasses.fields(v) if f.compare)
        return _values_hash((_text_hash(type(v).__qualname__), *fields))
    return hash(v) & _M64


def _values_hash(values: Any) -> int:
    h = 1
    for v in values:
        h = (31 * h + _value_hash(v)) & _M64
    return h


def stable_hash(values: list) -> int:
    """A non-negative 32-bit hash of a list of values, stable across processes and runs."""
    if len(values) == 1:
        h = _value_hash(values[0])
    else:
        h = _values_hash(values)
    return ((h * _MIX) & _M64) >> 32


def stable_hash_one(value: Any) -> int:
    """`stable_hash` of a single value, without building a list."""
    return ((_value_hash(value) * _MIX) & _M64) >> 32
