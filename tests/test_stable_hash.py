"""`stable_hash`: fields grouping's hash must be the same in every process and run."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import fractions
import json
import os
import typing
import uuid
import subprocess
import sys
from pathlib import Path

from squall._stable_hash import stable_hash, stable_hash_one

REPO = Path(__file__).resolve().parents[1]

class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 7


class Unit(str, enum.Enum):
    METRE = "m"


class Point(typing.NamedTuple):
    name: str
    x: int


@dataclasses.dataclass(frozen=True)
class Key:
    user: str
    day: datetime.date


CEST = datetime.timezone(datetime.timedelta(hours=2))

SAMPLES = [
    ["word"], [""], ["\u00e9t\u00e9 \U0001F600"], [b"bytes"], [None], [0], [1], [-1], [2**70], [True],
    [1.5], [-0.25], [3.0], [float("inf")], [(1, "a", None)], [["nested", [1, 2]]], [frozenset({"x", "y"})],
    ["a", 1], ["a", None, 2.5, b"b"], [],
    # types whose Python hash() is salted or an address: each from what it is equal by
    [Color.RED], [Level.HIGH], [Unit.METRE], [Point("p", 1)], [Key("ann", datetime.date(2026, 12, 4))],
    [datetime.datetime(2026, 12, 4, 23, 0)], [datetime.datetime(2026, 12, 4, 23, 0, tzinfo=CEST)],
    [datetime.date(2026, 12, 4)], [datetime.time(23, 0, 1)], [datetime.timedelta(days=1, microseconds=5)],
    [decimal.Decimal("2.5")], [fractions.Fraction(1, 3)], [uuid.UUID(int=12345)], [{"a": 1, "b": ("x", 2)}],
    [float("nan")], [{Point("q", 2)}],
]

_CODE = ("import json; from squall._stable_hash import stable_hash; "
         "from tests.test_stable_hash import SAMPLES; print(json.dumps([stable_hash(s) for s in SAMPLES]))")


def hashes_in_subprocess(seed: str) -> list[int]:
    env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", _CODE], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_the_same_values_hash_the_same_in_processes_with_other_hash_seeds():
    here = [stable_hash(s) for s in SAMPLES]

    assert hashes_in_subprocess("1") == here
    assert hashes_in_subprocess("987654") == here


def test_hashes_are_non_negative_32_bit_ints():
    for s in SAMPLES:
        h = stable_hash(s)
        assert type(h) is int and 0 <= h < 2**32, s


def test_values_equal_in_python_hash_alike():
    assert stable_hash([1]) == stable_hash([1.0]) == stable_hash([True])
    assert stable_hash([0]) == stable_hash([0.0]) == stable_hash([False])
    assert stable_hash([(1, 2)]) == stable_hash([[1, 2]])
    assert stable_hash([frozenset({1, 2})]) == stable_hash([{2, 1}])


def test_a_value_hashes_as_a_plain_value_it_equals():
    utc = datetime.UTC
    for value, plain in [(Level.HIGH, 7), (Unit.METRE, "m"), (Point("p", 1), ("p", 1)),
                         (decimal.Decimal(3), 3), (decimal.Decimal("2.5"), 2.5), (fractions.Fraction(1, 2), 0.5),
                         (datetime.datetime(2026, 12, 4, 21, 0, tzinfo=utc), datetime.datetime(2026, 12, 4, 23, 0, tzinfo=CEST)),
                         ({"a": 1, "b": 2}, {"b": 2, "a": 1}), (float("nan"), float("nan"))]:
        assert stable_hash([value]) == stable_hash([plain]), (value, plain)


def test_stable_hash_one_is_stable_hash_of_a_one_value_list():
    for s in SAMPLES:
        if len(s) == 1:
            assert stable_hash_one(s[0]) == stable_hash(s), s


def test_different_values_usually_hash_differently():
    words = [f"w{i}" for i in range(1000)]

    assert len({stable_hash([w]) for w in words}) == 1000
    assert stable_hash([None]) != stable_hash([0])
    assert stable_hash(["a", "b"]) != stable_hash(["b", "a"])


def test_low_bits_split_words_evenly():
    """CRC-32's low bits alone skew a 2-way split; the mix step must not."""
    words = [f"word{i}" for i in range(2000)]

    for n in (2, 3, 4):
        counts = [0] * n
        for w in words:
            counts[stable_hash([w]) % n] += 1
        mean = len(words) / n
        assert all(abs(c - mean) < 0.15 * mean for c in counts), (n, counts)
