"""A differential fuzzer of the compiled hot path (``squall._speedups``) against its pure-Python twins.

Two halves:

- `fuzz_decoders`: valid batches of many shapes (written by `Serializer.encode_batch`, the compiled
  `pack_batch` and `Outbox`) are damaged (bits flipped, bytes set, cut, extended, spliced, and
  msgpack headers rewritten with other and huge lengths or wider int forms) and fed to every
  compiled decoder (`unpack_batch`, `unpack_into`, `batch_items`, `deliver_items`, and the
  serializer's `decode_batch` whole); each result is compared with the pure twin's (msgpack and
  the twins of `squall._native`): the same items, or both refuse.
- `fuzz_objects`: odd Python values (subclasses of str, int, list; huge ints; NaN; objects whose
  ``__eq__``/``__hash__`` raise; re-entrant callables that change the list or dict being walked)
  thrown at the compiled entry points that take objects (`pack_batch`, `group_items`,
  `batch_items`, `deliver_items`); what the compiled one returns is compared with the twin's where
  both are defined, and it must never crash.

Run under AddressSanitizer (see docs/native.md) or plainly:
``python -m tests.native_fuzz --seconds 300 --seed 1``; tests/test_native_fuzz.py runs a short seeded
round of each in the suite. Every disagreement is collected as a `Finding` (the input and what each side
made of it), not raised at the first, so that one run reports them all.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

import squall
from squall import Fields, _native
from squall._tuple import Source, Tuple
from squall.engine.acker import ACK, ACKED, FAIL, FAILED, INIT, RESET_TIMEOUT
from squall.engine.serialize import SerializationError, Serializer


def _load_twins() -> Any:
    """squall/_native.py loaded a second time with SQUALL_PURE_PYTHON set: its pure-Python twins."""
    path = Path(_native.__file__)
    spec = importlib.util.spec_from_file_location("squall._native_twins", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "squall"
    was = os.environ.get("SQUALL_PURE_PYTHON")
    os.environ["SQUALL_PURE_PYTHON"] = "1"
    try:
        spec.loader.exec_module(module)
    finally:
        if was is None:
            del os.environ["SQUALL_PURE_PYTHON"]
        else:
            os.environ["SQUALL_PURE_PYTHON"] = was
    assert not module.COMPILED
    return module


TWINS = _load_twins()

SOURCES = {
    (3, "words"): Source("split", "words", 3, Fields("word")),
    (3, "default"): Source("split", "default", 3, Fields("word", "count")),
    (1, "default"): Source("spout", "default", 1, Fields("value")),
    (70_000, "s\u00fc"): Source("wide", "s\u00fc", 70_000, Fields("a", "b", "c")),
}


def source_of(task: Any, stream: Any) -> Source:
    return SOURCES[(task, stream)]


@dataclass
class Finding:
    """One input on which the compiled code and its twin disagree (or the compiled one failed)."""

    entry: str       # the entry point: "unpack_batch", "pack_batch", ...
    what: str        # what differed
    data: Any        # the input (bytes for a decoder, a repr for objects)

    def __str__(self) -> str:
        shown = self.data if not isinstance(self.data, bytes) else self.data.hex()
        return f"{self.entry}: {self.what}\n    input: {str(shown)[:2000]}"


def show(x: Any, limit: int = 200) -> str:
    """repr(x) cut at ``limit``, or what it is when its repr raises (a Tuple of a root that is a list)."""
    try:
        r = repr(x)
    except Exception as e:  # noqa: BLE001 - the fuzzer compares whatever either side raises
        r = f"<{type(x).__name__} whose repr raises {type(e).__name__}>"
    return r[:limit]


# --- equality with types, all the way down --------------------------------------------------
def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down; NaN equals NaN (the same bits decoded twice)."""
    if type(a) is not type(b):
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b)) and all(same(a[k], b[k]) for k in a)
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, _native.TupleBase):
        return (same(a.values, b.values) and a._src is b._src and same(a._root, b._root)
                and same(a._val, b._val) and same(a._oav, b._oav))
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an odd value whose __eq__ raises: only itself is the same
        return False


# --- valid batches of many shapes -----------------------------------------------------------
def _ints() -> list:
    edges = [0, 1, 31, 32, 127, 128, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
             2**63 - 1, 2**63, 2**64 - 1]
    return edges + [-v for v in edges if 0 < v <= 2**63] + [-33, -129, -32769, -(2**31) - 1]


PLAIN = [None, True, False, *_ints(), 0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"),
         "", "a", "the", "x" * 31, "x" * 32, "y" * 33, "z" * 255, "w" * 256, "h\u00e9llo", "\u2713" * 11, "\U0001f600",
         b"", b"\x00", b"\xff" * 300]
NOT_PLAIN = [2**64, -(2**63) - 1, 2**100, [1, 2], {"a": 1}, (1, "x"), {1, 2}, frozenset({3}), "a\ud800b", [[[]]]]
TASKS = [0, 1, 5, 127, 128, 300, 70_000, 2**32, 2**64 - 1]


def random_items(rnd: random.Random, n: int, plain_only: bool) -> list:
    """A batch's items, flat: Tuples of several sources (tracked, untracked, fan-outs sharing a
    root), acker messages and replies."""
    srcs = list(SOURCES.values())
    items: list = []
    root = 0
    for i in range(n):
        kind = rnd.random()
        if kind < 0.7:
            width = rnd.choice((0, 1, 1, 1, 2, 3, 15, 16, 17))
            pool = PLAIN if plain_only or rnd.random() < 0.9 else PLAIN + NOT_PLAIN
            values = [rnd.choice(pool) for _ in range(width)]
            if rnd.random() < 0.3:
                values = [rnd.choice(["the", "cat", "a", "jumped", "\u00fc", ""])]
            if rnd.random() < 0.4:  # a new tree; else the previous tuple's (a fan-out: SAME_ROOT on the wire)
                root = rnd.choice((0, 0, 1, 2**64 - 1, rnd.getrandbits(62), rnd.getrandbits(64)))
            val = rnd.getrandbits(rnd.choice((1, 8, 33, 64))) if root else 0
            src = srcs[rnd.randrange(len(srcs))] if rnd.random() < 0.3 or not i else srcs[i // 5 % len(srcs)]
            items += [rnd.choice(TASKS), Tuple(values, src, root, val)]
        elif kind < 0.85:
            items += [rnd.choice(TASKS), (rnd.choice((INIT, ACK, FAIL)), rnd.getrandbits(64),
                                          rnd.getrandbits(rnd.choice((7, 63, 64))), rnd.choice((-1, 4, 300)))]
        else:
            items += [rnd.choice(TASKS), (rnd.choice((ACKED, FAILED, RESET_TIMEOUT)), rnd.getrandbits(64),
                                          rnd.choice((0.5, 0, float("nan"), -1.0)))]
    return items


def seed_batches(rnd: random.Random, count: int) -> list[bytes]:
    """``count`` valid batches: encode_batch's (pack_batch's bytes, or msgpack's for a value that
    is not plain), and an Outbox's (a run's vals as the state its edge ids are drawn from)."""
    ser = Serializer({}, source_of)
    out: list[bytes] = []
    while len(out) < count:
        n = rnd.choice((0, 1, 2, 3, 7, 16, 17, 40, 300))
        items = random_items(rnd, n, plain_only=rnd.random() < 0.7)
        try:
            out.append(ser.encode_batch(items))
        except SerializationError:
            continue
        if _native.COMPILED and rnd.random() < 0.5:
            box = _native.Outbox(rnd.choice((1, 5, 1000)), rnd.choice((64, 1 << 20)), True, rnd.getrandbits(64))
            for task, item in zip(items[::2], items[1::2]):
                if type(item) is Tuple and item._root and type(item._root) is int and rnd.random() < 0.5:
                    item = Tuple(item.values, item._src, item._root, 0)  # let the outbox draw its edge id
                box.put(task, item, Tuple)
            for chunk in box.take():
                if type(chunk) is bytes:
                    out.append(chunk)
    return out[:count]


# --- a msgpack walker: where each header is, for the mutations that rewrite them -------------
@dataclass
class Header:
    at: int       # offset of the tag
    kind: str     # "array", "map", "str", "bin", "uint", "int", "float", "ext", "other"
    size: int     # its header's bytes (tag included)
    n: int        # its length (items, bytes), or its value for an int


def headers(data: bytes) -> list[Header]:
    """The headers of a msgpack document, in order, as far as it parses (damaged bytes: a prefix)."""
    out: list[Header] = []
    p, end = 0, len(data)

    def be(at: int, k: int) -> int:
        return int.from_bytes(data[at:at + k], "big")

    while p < end:
        t = data[p]
        if t <= 0x7F:
            out.append(Header(p, "uint", 1, t)); p += 1
        elif 0x80 <= t <= 0x8F:
            out.append(Header(p, "map", 1, t & 15)); p += 1
        elif 0x90 <= t <= 0x9F:
            out.append(Header(p, "array", 1, t & 15)); p += 1
        elif 0xA0 <= t <= 0xBF:
            out.append(Header(p, "str", 1, t & 31)); p += 1 + (t & 31)
        elif t >= 0xE0:
            out.append(Header(p, "int", 1, t - 256)); p += 1
        elif t in (0xC0, 0xC2, 0xC3):
            out.append(Header(p, "other", 1, 0)); p += 1
        elif t in (0xC4, 0xC5, 0xC6, 0xD9, 0xDA, 0xDB):
            k = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}[t]
            n = be(p + 1, k)
            out.append(Header(p, "bin" if t <= 0xC6 else "str", 1 + k, n)); p += 1 + k + n
        elif 0xCC <= t <= 0xCF:
            k = 1 << (t - 0xCC)
            out.append(Header(p, "uint", 1 + k, be(p + 1, k))); p += 1 + k
        elif 0xD0 <= t <= 0xD3:
            k = 1 << (t - 0xD0)
            out.append(Header(p, "int", 1 + k, int.from_bytes(data[p + 1:p + 1 + k], "big", signed=True))); p += 1 + k
        elif t in (0xCA, 0xCB):
            out.append(Header(p, "float", 1, 0)); p += 5 if t == 0xCA else 9
        elif t in (0xDC, 0xDD, 0xDE, 0xDF):
            k = 2 if t in (0xDC, 0xDE) else 4
            out.append(Header(p, "array" if t <= 0xDD else "map", 1 + k, be(p + 1, k))); p += 1 + k
        elif t in (0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
            out.append(Header(p, "ext", 2, 0)); p += 2 + (1 << (t - 0xD4))
        elif t in (0xC7, 0xC8, 0xC9):
            k = {0xC7: 1, 0xC8: 2, 0xC9: 4}[t]
            n = be(p + 1, k)
            out.append(Header(p, "ext", 2 + k, n)); p += 2 + k + n
        else:
            break
    return out


HUGE = [0, 1, 2, 5, 6, 7, 15, 16, 17, 31, 32, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1]


def encode_header(kind: str, n: int, width: int) -> bytes | None:
    """A header of ``kind`` for length (or uint value) ``n`` in the form of ``width`` bytes of
    length (0: the fix form); None when that form cannot hold it."""
    if n < 0 or n >= 2**32 and kind != "uint":
        return None
    if kind == "array":
        return (bytes([0x90 | n]) if width == 0 and n < 16 else b"\xdc" + n.to_bytes(2, "big") if width == 2 and n < 65536
                else b"\xdd" + n.to_bytes(4, "big") if width == 4 else None)
    if kind == "map":
        return (bytes([0x80 | n]) if width == 0 and n < 16 else b"\xde" + n.to_bytes(2, "big") if width == 2 and n < 65536
                else b"\xdf" + n.to_bytes(4, "big") if width == 4 else None)
    if kind in ("str", "bin"):
        base = 0xD9 if kind == "str" else 0xC4
        if width == 0:
            return bytes([0xA0 | n]) if kind == "str" and n < 32 else None
        if width == 1 and n < 256:
            return bytes([base]) + n.to_bytes(1, "big")
        if width == 2 and n < 65536:
            return bytes([base + 1]) + n.to_bytes(2, "big")
        return bytes([base + 2]) + n.to_bytes(4, "big") if width == 4 else None
    if kind == "uint":  # an unsigned int in any of its forms (msgpack takes a wider one than needed)
        if width == 0:
            return bytes([n]) if n < 128 else None
        if n >= 1 << (8 * width):
            return None
        return bytes([{1: 0xCC, 2: 0xCD, 4: 0xCE, 8: 0xCF}[width]]) + n.to_bytes(width, "big")
    return None


def mutate(rnd: random.Random, data: bytes, others: list[bytes]) -> tuple[str, bytes]:
    """One damaged copy of ``data``, and the kind of damage."""
    kind = rnd.choice(("flip", "set", "cut", "extend", "splice", "insert", "delete", "header", "header",
                       "int", "retag", "multi"))
    b = bytearray(data)
    if kind == "flip" and b:
        for _ in range(rnd.choice((1, 1, 2, 4))):
            i = rnd.randrange(len(b))
            b[i] ^= 1 << rnd.randrange(8)
    elif kind == "set" and b:
        for _ in range(rnd.choice((1, 1, 2, 3))):
            b[rnd.randrange(len(b))] = rnd.choice((0, 0x7F, 0x80, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC4, 0xC6,
                                                   0xCC, 0xCF, 0xD3, 0xD9, 0xDB, 0xDC, 0xDD, 0xDF, 0xE0, 0xFF,
                                                   rnd.randrange(256)))
    elif kind == "cut":
        b = b[:rnd.randrange(len(b) + 1)]
    elif kind == "extend":
        b += rnd.choice((b"\x00", b"\xc0", b"\x90", bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40)))))
    elif kind == "splice" and others:
        other = rnd.choice(others)
        i, j = rnd.randrange(len(b) + 1), rnd.randrange(len(other) + 1)
        b = b[:i] + other[j:j + rnd.randrange(1, 200)] + (b[i:] if rnd.random() < 0.5 else b[i + rnd.randrange(40):])
    elif kind == "insert":
        i = rnd.randrange(len(b) + 1)
        b[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 9)))
    elif kind == "delete" and b:
        i = rnd.randrange(len(b))
        del b[i:i + rnd.randrange(1, 9)]
    elif kind in ("header", "int", "retag"):
        hs = headers(data)
        if kind == "header":
            hs = [h for h in hs if h.kind in ("array", "map", "str", "bin")]
        elif kind == "int":
            hs = [h for h in hs if h.kind == "uint"]
        if hs:
            h = rnd.choice(hs)
            if kind == "retag":  # another type's tag, same length bytes
                b[h.at] = rnd.choice((0xC0, 0xC2, 0xC3, 0xCA, 0xCB, 0xD0, 0xD3, 0xD9, 0xC4, 0xDC, 0xDE, 0x80, 0x90,
                                      0xA0, 0xC7, 0xD4, 0xD8, 0xC1, 0x7F, 0xE0))
            else:
                if kind == "int":  # a wider form of the same value, or another value
                    n = h.n if rnd.random() < 0.6 else rnd.choice((0, 127, 128, 2**32, 2**63, 2**64 - 1))
                else:
                    n = rnd.choice(HUGE + [h.n - 1, h.n + 1, h.n * 2])
                new = None
                for _ in range(6):
                    new = encode_header(h.kind, n, rnd.choice((0, 1, 2, 4, 8)))
                    if new is not None:
                        break
                if new is not None:
                    b[h.at:h.at + h.size] = new
    elif kind == "multi":
        d = bytes(b)
        for _ in range(rnd.randrange(2, 5)):
            d = mutate(rnd, d, others)[1]
        b = bytearray(d)
    return kind, bytes(b)


# --- the decoders, compiled and twin --------------------------------------------------------
_SER = Serializer({}, source_of)


def twin_decode(data: bytes) -> list | SerializationError:
    """What the pure path makes of ``data``: `decode_batch` with msgpack and the twins (its items, or the error)."""
    saved = {name: getattr(squall.engine.serialize, name) for name in ("unpack_batch", "batch_items", "interleave")}
    squall.engine.serialize.unpack_batch = TWINS.unpack_batch
    squall.engine.serialize.batch_items = TWINS.batch_items
    squall.engine.serialize.interleave = TWINS.interleave
    try:
        return _SER.decode_batch(data)
    except SerializationError as e:
        return e
    finally:
        for name, f in saved.items():
            setattr(squall.engine.serialize, name, f)


def _inboxes(tasks: list) -> dict:
    return {t: deque() for t in tasks}


def check_decoders(data: bytes, words: list, findings: list[Finding]) -> str:
    """Every compiled decoder on ``data`` against the twin; returns what the compiled unpack_batch
    did ("decoded", "gave up") for the counts."""
    want = twin_decode(data)
    refused = isinstance(want, SerializationError)
    # unpack_batch: None (left to msgpack), or exactly the twin's items
    got = _native.unpack_batch(data, source_of, Tuple, words)
    if got is not None and (refused or not same(got, want)):
        findings.append(Finding("unpack_batch", f"decoded {len(got)} items where the twin made "
                                f"{show(want)}" if refused else "decoded other items than the twin", data))
    # the serializer's decode_batch, compiled, whole
    try:
        whole: Any = _SER.decode_batch(data)
    except SerializationError as e:
        whole = e
    if isinstance(whole, SerializationError) != refused or (not refused and not same(whole, want)):
        findings.append(Finding("decode_batch", f"compiled {show(whole)} against the twin's {show(want)}", data))
    # unpack_into: None with nothing delivered, or each inbox as the twin's delivery fills it
    tasks = [5, 127, 70_000, 2**64 - 1]
    inboxes = _inboxes(tasks)
    n = _native.unpack_into(data, source_of, Tuple, words, inboxes)
    if n is None:
        if any(inboxes.values()):
            findings.append(Finding("unpack_into", "gave the batch up but delivered some of it", data))
    elif refused:
        findings.append(Finding("unpack_into", f"delivered {n} items of a batch the twin refuses", data))
    else:
        expected = _inboxes(tasks)
        count = TWINS.deliver_items(expected, want)
        if n != count or not all(same(list(inboxes[t]), list(expected[t])) for t in tasks):
            findings.append(Finding("unpack_into", f"delivered {n} items, the twin {count}, or others", data))
    if not refused:  # deliver_items on the decoded items
        a, b = _inboxes(tasks), _inboxes(tasks)
        if _call(_native.deliver_items, a, want) != _call(TWINS.deliver_items, b, want) or not all(
                same(list(a[t]), list(b[t])) for t in tasks):
            findings.append(Finding("deliver_items", "delivered otherwise than the twin", data))
    check_batch_items_columns(data, findings)
    return "gave up" if got is None else "decoded"


def _call(f: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", f(*args)
    except Exception as e:  # noqa: BLE001 - the two sides must fail alike: compared by type
        return "raised", type(e)


def check_batch_items_columns(data: bytes, findings: list[Finding]) -> None:
    """batch_items, compiled and twin, on each run's columns as msgpack decodes them (whatever they hold)."""
    try:
        batch = msgpack.unpackb(data, strict_map_key=False, raw=False, unicode_errors="surrogatepass")
    except Exception:  # noqa: BLE001 - the fuzzer compares whatever either side raises
        return
    if type(batch) is not list or len(batch) != 6 or type(batch[1]) is not list:
        return
    src = SOURCES[(3, "words")]
    for run in batch[1][:50]:
        if type(run) is not list or len(run) != 6:
            continue
        _, _, targets, values, roots, vals = run
        out_c: list = []
        out_t: list = []
        c = _call(_native.batch_items, out_c, targets, values, src, roots, vals, Tuple)
        t = _call(TWINS.batch_items, out_t, targets, values, src, roots, vals, Tuple)
        if c[0] != t[0] or (c[0] == "ok" and not same(out_c, out_t)):
            findings.append(Finding("batch_items", f"compiled {c} against the twin's {t} on run {show(run, 300)}", data))


def fuzz_decoders(seed: int, seconds: float, max_inputs: int | None = None, log: Any = None) -> tuple[list[Finding], dict]:
    """Damaged batches into every decoder for ``seconds`` (or ``max_inputs``); the findings, and counts."""
    rnd = random.Random(seed)
    seeds = seed_batches(rnd, 60)
    words: list = [None] * 64
    findings: list[Finding] = []
    counts: dict = {}
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline and (max_inputs is None or i < max_inputs):
        base = rnd.choice(seeds)
        kind, data = ("valid", base) if i % 20 == 0 else mutate(rnd, base, seeds)
        outcome = check_decoders(data, words, findings)
        counts[(kind, outcome)] = counts.get((kind, outcome), 0) + 1
        i += 1
        if i % 500 == 0 and rnd.random() < 0.2:  # fresh seeds now and then
            seeds[rnd.randrange(len(seeds))] = seed_batches(rnd, 1)[0]
        if log and i % 20000 == 0:
            log(f"decoders: {i} inputs, {len(findings)} findings")
    return findings, counts


# --- odd Python values at the entry points that take objects --------------------------------
class Str(str):
    pass


class Int(int):
    pass


class Float(float):
    pass


class Bytes(bytes):
    pass


class List(list):
    pass


class BadEq:
    """A key whose __eq__ and __hash__ raise."""

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")


class EqAll:
    """A key equal to everything, with a fixed hash (a task that matches every inbox on compare)."""

    def __hash__(self) -> int:
        return 5

    def __eq__(self, other: object) -> bool:
        return True


def odd_values(rnd: random.Random) -> Any:
    pool = [*PLAIN, *NOT_PLAIN, Str("s"), Int(5), Float(1.5), Bytes(b"b"), List([1]), BadEq(), EqAll(),
            10**400, -(10**400), float("nan"), object(), Source, [None] * 20, "\x00", "\udcff"]
    return rnd.choice(pool)


class Clearing:
    """A value whose attribute read (or call) clears ``target`` (the list or dict being walked)."""

    def __init__(self, target: Any, value: Any = 1) -> None:
        self.target, self.value = target, value

    def _clear(self) -> Any:
        self.target.clear()
        return self.value

    task = property(_clear)
    stream = property(lambda self: (self.target.clear(), "default")[1])

    def __bool__(self) -> bool:
        self.target.clear()
        return True

    def __hash__(self) -> int:
        return 5

    def __eq__(self, other: object) -> bool:
        self.target.clear()
        return True


class ClearingInbox:
    """An inbox whose append clears the items being delivered (a re-entrant deliver)."""

    def __init__(self, items: list) -> None:
        self.items, self.got = items, []

    def append(self, item: Any) -> None:
        self.items.clear()
        self.got.append(item)

    def extend(self, items: Any) -> None:
        self.items.clear()
        self.got.extend(items)


def odd_items(rnd: random.Random) -> list:
    """A batch's items (flat) with odd targets, values, sources and roots, some re-entrant."""
    items: list = []
    src_pool = list(SOURCES.values())
    for _ in range(rnd.randrange(0, 12)):
        r = rnd.random()
        target = rnd.choice(TASKS) if rnd.random() < 0.7 else odd_values(rnd)
        if r < 0.6:
            values: Any = [odd_values(rnd) if rnd.random() < 0.3 else rnd.choice(PLAIN) for _ in range(rnd.randrange(4))]
            if rnd.random() < 0.1:
                values = rnd.choice((List(values), tuple(values), None, "abc"))
            src: Any = rnd.choice(src_pool)
            if rnd.random() < 0.15:
                src = Clearing(items, rnd.choice((1, "x", 2**70)))
            root: Any = rnd.choice((0, 1, 2**64 - 1, 7))
            if rnd.random() < 0.15:
                root = rnd.choice((Int(3), True, -1, 2**64, 1.5, None, {1: 2}, Clearing(items)))
            t = Tuple(values, src, 0, rnd.getrandbits(64))
            try:
                t._root = root
            except (TypeError, ValueError):
                pass
            items += [target, t]
        elif r < 0.8:
            items += [target, tuple(odd_values(rnd) for _ in range(4))]
        elif r < 0.95:
            items += [target, tuple(odd_values(rnd) for _ in range(3))]
        else:
            items += [target, odd_values(rnd)]
    if rnd.random() < 0.05:
        items.append(1)  # odd length
    return items


def _twin_group(items: list) -> tuple[str, Any]:
    try:
        return "ok", Serializer._group(list(items))
    except Exception as e:  # noqa: BLE001 - the fuzzer compares whatever either side raises
        return "raised", type(e)


def check_objects(rnd: random.Random, findings: list[Finding]) -> None:
    items = odd_items(rnd)
    shown = show(items, 500)
    # pack_batch: bytes exactly as msgpack writes the twin's columns, or None (msgpack's path then)
    before = list(items)
    packed = _call(_native.pack_batch, items, Tuple)
    if packed[0] == "ok" and packed[1] is not None:
        items[:] = before  # a re-entrant value may have cleared them
        grouped = _twin_group(before)
        try:
            want = _SER._pack([2, *[grouped[1][k] for k in (0, 2, 3, 4, 5)]]) if grouped[0] == "ok" else None
        except Exception:  # noqa: BLE001 - the fuzzer compares whatever either side raises
            want = None
        if want is not None and packed[1] != want:
            findings.append(Finding("pack_batch", "wrote other bytes than msgpack", shown))
    items[:] = before
    grouped_c = _call(_native.group_items, items, Tuple)
    items[:] = before
    if grouped_c[0] == "ok" and grouped_c[1] is not None:
        grouped_t = _twin_group(before)
        if grouped_t[0] != "ok" or not same(grouped_c[1][0], grouped_t[1][0]) or not all(
                same(grouped_c[1][k], grouped_t[1][k]) for k in (2, 3, 4, 5)):
            findings.append(Finding("group_items", f"grouped otherwise than the twin: {show(grouped_c[1], 300)} "
                                    f"against {show(grouped_t[1], 300)}", shown))
    # deliver_items: inboxes of odd keys and re-entrant appends
    items[:] = before
    inboxes: dict = {t: deque() for t in rnd.sample(TASKS, 3)}
    if rnd.random() < 0.3:
        inboxes[rnd.choice(TASKS)] = ClearingInbox(items)
    if rnd.random() < 0.1:
        inboxes[EqAll()] = deque()
    _call(_native.deliver_items, inboxes, items)
    # an Outbox (a sender's queue, written as the batch's bytes as items are put): what it gives
    # back decodes into the Tuples put, in order, unless a re-entrant value changed them meanwhile
    items[:] = before
    box = _native.Outbox(rnd.choice((1, 3, 1000)), rnd.choice((40, 1 << 16)))
    for k in range(0, len(before) - 1, 2):
        _call(box.put, before[k], before[k + 1], Tuple)
    reentrant = any(type(x) is Tuple and (type(x._src) is Clearing or type(x._root) is Clearing) for x in before)
    taken = box.take()
    if not reentrant:
        check_outbox(taken, before, shown, findings)
    # batch_items with odd columns
    items[:] = before
    cols = [odd_values(rnd) if rnd.random() < 0.3 else [odd_values(rnd) for _ in range(rnd.randrange(4))]
            for _ in range(4)]
    if rnd.random() < 0.5:
        n = rnd.randrange(4)
        cols = [[rnd.choice(TASKS) for _ in range(n)], [[odd_values(rnd)] for _ in range(n)],
                rnd.choice((None, [rnd.choice((None, 1, Int(2), -1, 2**70, 1.5)) for _ in range(n)])),
                [rnd.choice((0, 1, 2**64 - 1, 2**64, -1, Int(4), 1.5, None)) for _ in range(n)]]
    out_c: list = []
    out_t: list = []
    c = _call(_native.batch_items, out_c, cols[0], cols[1], SOURCES[(1, "default")], cols[2], cols[3], Tuple)
    t = _call(TWINS.batch_items, out_t, cols[0], cols[1], SOURCES[(1, "default")], cols[2], cols[3], Tuple)
    if c[0] != t[0] or (c[0] == "ok" and not same(out_c, out_t)):
        findings.append(Finding("batch_items", f"compiled {c} against the twin's {t}", show(cols, 500)))


def check_outbox(taken: list, items: list, shown: str, findings: list[Finding]) -> None:
    """The Tuples of an Outbox's chunks (bytes decoded by the twin, lists as they are) are those
    of ``items`` that it took, in order: target, values, source, root and edge value."""
    got: list = []
    for chunk in taken:
        flat = twin_decode(chunk) if type(chunk) is bytes else chunk
        if isinstance(flat, SerializationError):
            findings.append(Finding("Outbox", f"wrote a batch the twin refuses: {flat}", shown))
            return
        got += [(flat[k], flat[k + 1]) for k in range(0, len(flat), 2) if type(flat[k + 1]) is Tuple]
    want = [(items[k], items[k + 1]) for k in range(0, len(items) - 1, 2) if type(items[k + 1]) is Tuple]
    def key(pair: tuple) -> tuple:
        t = pair[1]
        return pair[0], t.values, t._src, t._root, t._val if t._root else 0  # untracked: no edge value crosses
    if len(got) != len(want) or not all(same(key(a), key(b)) for a, b in zip(got, want)):
        findings.append(Finding("Outbox", f"gave back {len(got)} Tuples, other than the {len(want)} put", shown))


def _trident_case(rnd: random.Random) -> Any:
    """A maker of one Trident call's inputs (each side gets its own, so a re-entrant callable
    changes only the lists of the side it was made for): (rows, combine, choose, width)."""
    width = rnd.choice((1, 2, 3))
    n = rnd.choice((0, 1, 5, 40))
    shape = [[rnd.choice(["k", "j", 1, 2, 2.5, Int(1), Str("k")]) for _ in range(width)] for _ in range(n)]
    odd_at = rnd.randrange(n) if n and rnd.random() < 0.3 else -1
    odd_kind = rnd.randrange(5)
    reentrant = rnd.random() < 0.4
    clear_after = rnd.randrange(1, 6)

    def make() -> tuple:
        rows: list = [list(r) for r in shape]
        if odd_at >= 0:
            rows[odd_at] = (tuple(rows[odd_at]), rows[odd_at][:-1], "ab", None, [[]] * width)[odd_kind]
        calls = [0]

        def mutate() -> None:
            calls[0] += 1
            if reentrant and calls[0] == clear_after:
                rows.clear()

        def combine(old: Any, value: Any) -> Any:
            mutate()
            return (old, value)

        def choose(full: list) -> list:
            mutate()
            return [calls[0] % 3]
        return rows, combine, choose
    return make, width


def check_trident(rnd: random.Random, findings: list[Finding]) -> None:
    """combine_rows and pack_rows, compiled and twin, on the same rows (odd ones, re-entrant callables)."""
    make, width = _trident_case(rnd)
    gi, vi = rnd.randrange(width), rnd.randrange(width)
    results = []
    for side in (_native, TWINS):
        rows, combine, choose = make()
        groups: dict = {}
        r1 = _call(side.combine_rows, rows, groups, width, gi, vi, combine)
        rows, combine, choose = make()
        packs: dict = {}
        counts: dict = {}
        r2 = _call(side.pack_rows, rows, 7, choose, width, packs, "s", counts)
        results.append((r1, groups, r2, packs, counts))
    (a1, ga, a2, pa, ca), (b1, gb, b2, pb, cb) = results
    if a1 != b1 or not same(ga, gb):
        findings.append(Finding("combine_rows", f"compiled {a1} {show(ga)} against the twin's {b1} {show(gb)}", show(make()[0])))
    if a2 != b2 or not same(pa, pb) or not same(ca, cb):
        findings.append(Finding("pack_rows", f"compiled {a2} against the twin's {b2}", show(make()[0])))


def fuzz_objects(seed: int, seconds: float, max_inputs: int | None = None, log: Any = None) -> tuple[list[Finding], int]:
    rnd = random.Random(seed)
    findings: list[Finding] = []
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline and (max_inputs is None or i < max_inputs):
        check_objects(rnd, findings)
        check_trident(rnd, findings)
        i += 1
        if log and i % 20000 == 0:
            log(f"objects: {i} inputs, {len(findings)} findings")
    return findings, i


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="for each half")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=("decoders", "objects"))
    args = parser.parse_args(argv)
    if not _native.COMPILED:
        print("squall._speedups is not built (or SQUALL_PURE_PYTHON is set): nothing to compare", file=sys.stderr)
        return 2

    def log(msg: str) -> None:
        print(msg, flush=True)

    all_findings: list[Finding] = []
    if args.only != "objects":
        found, counts = fuzz_decoders(args.seed, args.seconds, log=log)
        all_findings += found
        for (kind, outcome), n in sorted(counts.items()):
            print(f"  {kind:8} {outcome:8} {n}")
        print(f"decoders: {sum(counts.values())} inputs, {len(found)} findings", flush=True)
    if args.only != "decoders":
        found, n = fuzz_objects(args.seed, args.seconds, log=log)
        all_findings += found
        print(f"objects: {n} inputs, {len(found)} findings", flush=True)
    seen = set()
    for f in all_findings:
        key = (f.entry, f.what[:40])
        if key not in seen:
            seen.add(key)
            print(f)
    return 1 if all_findings else 0


if __name__ == "__main__":
    sys.exit(main())
