"""A hash of tuple values that is the same in every process and every run.

Python's ``hash()`` of str and bytes is salted per process (PYTHONHASHSEED), and ``hash(None)``
depends on an address before Python 3.12, so fields grouping cannot use it: two workers would
send the same word to different tasks. Strings and bytes go through CRC-32 (C speed, about
90 ns); numbers use their value. The result is then multiplied by a 64-bit odd constant and the
high half taken, because CRC-32 is linear and its low bits alone skew a ``% 2`` split (measured
55/45 on the W1 words, ENGINE-SPEED.md lesson 10).

Other types fall back to ``hash()``: a user type used as a grouping key must define a
``__hash__`` that is stable across processes (one built from its fields' stable values).
"""

from __future__ import annotations

from typing import Any
from zlib import crc32

_M64 = 0xFFFFFFFFFFFFFFFF
_MIX = 0x9E3779B97F4A7C15


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
        return int(v) & _M64 if v.is_integer() else hash(v) & _M64  # float hash is unsalted
    if t is tuple or t is list:
        return _values_hash(v)
    if t is frozenset or t is set:
        h = 0
        for x in v:  # order-free: xor of member hashes
            h ^= _value_hash(x)
        return h
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
