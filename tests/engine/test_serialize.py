"""Tests of `squall.engine.serialize`: what crosses a worker boundary comes back exactly."""

from __future__ import annotations

import collections
import itertools
import logging
import random
import threading

import msgpack
import pytest

import squall
from squall import Config, Fields, _native
from squall._tuple import Source, Tuple
from squall.engine.acker import ACK, ACKED, FAIL, FAILED, INIT, RESET_TIMEOUT
from squall.engine.serialize import FORMAT, SerializationError, Serializer

from ..conftest import stable_id

SOURCES = {
    (3, "words"): Source("split", "words", 3, Fields("word")),
    (3, "default"): Source("split", "default", 3, Fields("word", "count")),
    (1, "default"): Source("spout", "default", 1, Fields("value")),
}


def source_of(task: int, stream: str) -> Source:
    return SOURCES[(task, stream)]


def flat(pairs) -> list:
    """``[(task, item), ...]`` as the transport queues them for `Serializer.encode_batch`:
    ``[task, item, task, item, ...]``."""
    return [x for pair in pairs for x in pair]


def unflat(items: list) -> list:
    """What `Serializer.decode_batch` returns (flat, as `flat` makes) as ``[(task, item), ...]``."""
    assert len(items) % 2 == 0
    return list(zip(items[::2], items[1::2]))


def serializer(**conf) -> Serializer:
    return Serializer(conf, source_of)


def round_trip(items, ser: Serializer | None = None, receiver: Serializer | None = None):
    ser = ser or serializer()
    data = ser.encode_batch(flat(items))
    assert type(data) is bytes
    return unflat((receiver or ser).decode_batch(data))


def round_trip_value(value, ser: Serializer | None = None):
    [(_, t)] = round_trip([(9, Tuple([value], SOURCES[(1, "default")]))], ser)
    return t.values[0]


def same(a, b) -> bool:
    """Equal, with the same types all the way down (so True is not 1 and a tuple is not a list)."""
    if type(a) is not type(b):
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return (len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
                and all(same(a[k], b[k]) for k in a))
    return a == b


# --- classes for registrations (module level, so "module:Qualname" resolves) -----------------
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return type(other) is Point and (self.x, self.y) == (other.x, other.y)


class PointSerializer:
    def serialize(self, p):
        return [p.x, p.y]

    def deserialize(self, data):
        return Point(*data)


class BrokenSerializer:
    def serialize(self, obj):
        raise RuntimeError("boom")

    deserialize = serialize


class Plain:
    def __init__(self, a, b):
        self.a, self.b = a, b


class WithState:
    def __init__(self, n):
        self.n = n
        self.cache = object()  # not sent: __getstate__ leaves it out

    def __getstate__(self):
        return {"n": self.n}

    def __setstate__(self, state):
        self.n = state["n"]
        self.cache = None


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


class Unregistered:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is Unregistered and self.v == other.v


class Inner:
    class Deep:
        def __init__(self, v):
            self.v = v


def registered(*pairs, **conf) -> Serializer:
    c = Config(conf)
    for cls, ser_cls in pairs:
        c.register_serialization(cls, ser_cls)
    return Serializer(c, source_of)


# --- values ---------------------------------------------------------------------------------
VALUES = [
    None, True, False, 0, 1, -1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), 2**64, -(2**63) - 1,
    2**200, -(2**200), 0.0, -2.5, float("inf"), "", "héllo ✓", b"", b"\x00\xff", [], [1, [2, "x"]],
    {}, {"a": 1, 2: "b", None: [3]}, (), (1,), (1, (2, 3), [4]), set(), {1, "a", (2, 3)},
    frozenset(), frozenset({1, b"x"}),
    {"k": [(1, {2}), {3: (4, frozenset({5}))}], (1, 2): {"n": 2**70}, frozenset({1}): ()},
    # lone surrogates (os.fsdecode of a file name that is not UTF-8, JSON's "\ud800")
    "a\ud800b", "\udcff", ["x\udfff", ("\ud83d",)], {"\ud800": 1},
]


@pytest.mark.parametrize("value", VALUES, ids=stable_id)
def test_values_round_trip_with_their_exact_types(value):
    assert same(round_trip_value(value), value)


def test_a_tuple_of_many_values_keeps_every_value_and_its_type():
    values = [1, "a", (1, 2), {3}, None, 2**100]
    [(_, t)] = round_trip([(4, Tuple(values, SOURCES[(1, "default")]))])
    assert same(t.values, values)


def test_values_given_as_a_python_tuple_come_back_as_a_tuple():
    [(_, t)] = round_trip([(4, Tuple(("a", 1), SOURCES[(3, "default")]))])
    assert same(t.values, ("a", 1))


def test_builtin_subclasses_keep_their_class_through_pickle():
    value = collections.OrderedDict([("b", 1), ("a", (2,))])
    back = round_trip_value(value)
    assert type(back) is collections.OrderedDict and list(back.items()) == [("b", 1), ("a", (2,))]


# --- ack state and sources ------------------------------------------------------------------
def test_roots_and_edge_values_round_trip_including_64_bit_ones():
    src = SOURCES[(3, "words")]
    items = [
        (7, Tuple(["untracked"], src)),
        (7, Tuple(["one root"], src, 2**64 - 1, 2**63 + 5)),
        (8, Tuple(["several"], src, {2**64 - 1: 1, 1: 2**64 - 2, 2**63: 0})),
    ]
    out = round_trip(items)

    assert [target for target, _ in out] == [7, 7, 8]
    a, b, c = (t for _, t in out)
    assert (a._root, a._val, a.message_id.get_anchors()) == (0, 0, set())
    assert (b._root, b._val) == (2**64 - 1, 2**63 + 5)
    assert c._root == {2**64 - 1: 1, 1: 2**64 - 2, 2**63: 0} and type(c._root) is dict
    assert a._oav == b._oav == c._oav == 0


def test_a_fan_outs_repeated_root_travels_once_and_comes_back_as_one_object():
    """A run's Tuples with the same int root (a sentence's words) carry it once (SAME_ROOT after
    the first); the receiver gives them one root object. Equal roots that are different objects
    at the sender, a dict root and 0 are sent as they are."""
    src, other = SOURCES[(3, "words")], SOURCES[(3, "default")]
    r, twin = 2**64 - 3, int(str(2**64 - 3))  # equal, not the same object
    items = [(7, Tuple(["a"], src, r, 1)), (8, Tuple(["b"], src, r, 2)), (1, (ACK, r, 9, -1)),
             (7, Tuple(["c"], src, r, 3)), (7, Tuple(["d"], src, twin, 4)), (7, Tuple(["e"], src, 0, 0)),
             (7, Tuple(["f"], src, 0, 0)), (8, Tuple(["g"], src, {r: 5})), (8, Tuple(["h"], other, r, 6))]
    data = serializer().encode_batch(flat(items))

    runs = msgpack.unpackb(data, strict_map_key=False)[1]
    assert runs[0][4] == [r, None, None, r, 0, None, {r: 5}]
    assert runs[1][4] == [r]  # a new run begins with its root
    out = round_trip(items)
    tuples = [t for _, t in out[:8]]
    assert [t.values[0] for t in tuples] == list("abcdefgh")
    assert [t._root for t in tuples] == [r, r, r, r, 0, 0, {r: 5}, r]
    assert [t._val for t in tuples] == [1, 2, 3, 4, 0, 0, 0, 6]
    assert tuples[0]._root is tuples[1]._root is tuples[2]._root
    assert out[8] == (1, (ACK, r, 9, -1))


def test_an_untracked_run_comes_back_untracked():
    src = SOURCES[(3, "words")]
    out = round_trip([(7, Tuple([w], src)) for w in "abc"])
    assert [(t.values, t._root, t._val) for _, t in out] == [(["a"], 0, 0), (["b"], 0, 0), (["c"], 0, 0)]


def test_a_tuple_gets_its_source_from_source_of_once_per_run():
    calls = []

    def counting_source_of(task, stream):
        calls.append((task, stream))
        return SOURCES[(task, stream)]

    ser = Serializer({}, counting_source_of)
    words, pairs = SOURCES[(3, "words")], SOURCES[(3, "default")]
    items = [(7, Tuple(["a"], words, 5, 6)), (7, Tuple(["b"], words, 5, 7)), (8, Tuple(["c", 1], pairs))]
    out = unflat(ser.decode_batch(ser.encode_batch(flat(items))))

    assert calls == [(3, "words"), (3, "default")]
    a, b, c = (t for _, t in out)
    assert a._src is b._src is words and c._src is pairs
    assert (c.source_component, c.source_stream, c.source_task) == ("split", "default", 3)
    assert c.fields is pairs.fields and c["count"] == 1


def test_tuples_keep_their_order_across_runs_of_different_sources():
    words, pairs = SOURCES[(3, "words")], SOURCES[(3, "default")]
    items = [(7, Tuple([str(i)], words if i % 3 else pairs)) for i in range(10)]
    out = round_trip(items)
    assert [t.values[0] for _, t in out] == [str(i) for i in range(10)]
    assert [t.source_stream for _, t in out] == [t.source_stream for _, t in items]


# --- acker messages and spout replies -------------------------------------------------------
def test_acker_messages_and_replies_keep_their_tuple_shape_and_order():
    acks = [(1, (INIT, 2**64 - 1, 2**63, 5)), (2, (ACK, 7, 0, -1)), (1, (FAIL, 9, 0, -1))]
    replies = [(5, (ACKED, 2**64 - 1, 0.125)), (6, (FAILED, 3, 30.0)), (5, (RESET_TIMEOUT, 4, 0.0))]
    out = round_trip(acks + replies)

    assert out == acks + replies
    for (_, msg), (_, want) in zip(out, acks + replies):
        assert same(msg, want)


def test_a_mixed_batch_gives_tuples_then_acker_messages_then_replies_each_in_order():
    src = SOURCES[(3, "words")]
    items = [(7, Tuple(["a"], src, 1, 2)), (1, (ACK, 1, 3, -1)), (5, (ACKED, 4, 0.5)),
             (8, Tuple(["b"], src, 1, 4)), (1, (INIT, 6, 7, 3))]
    out = round_trip(items)

    assert [(target, t.values) for target, t in out[:2]] == [(7, ["a"]), (8, ["b"])]
    assert out[2:] == [(1, (ACK, 1, 3, -1)), (1, (INIT, 6, 7, 3)), (5, (ACKED, 4, 0.5))]


def test_an_empty_batch_round_trips():
    assert round_trip([]) == []


def test_an_item_of_another_kind_is_refused():
    with pytest.raises(SerializationError, match="cannot send a builtins.list to task 4"):
        serializer().encode_batch(flat([(4, [1, 2])]))


# --- registrations --------------------------------------------------------------------------
def test_a_registered_class_goes_through_its_serializer():
    ser = registered((Point, PointSerializer))
    assert round_trip_value(Point(1, (2, 3)), ser) == Point(1, (2, 3))


def test_a_registered_class_without_serializer_sends_its_dict():
    back = round_trip_value(Plain(1, {"x": (2,)}), registered((Plain, None)))
    assert type(back) is Plain and back.a == 1 and same(back.b, {"x": (2,)})


def test_a_registered_class_without_serializer_uses_getstate_and_setstate():
    back = round_trip_value(WithState(4), registered((WithState, None)))
    assert type(back) is WithState and back.n == 4 and back.cache is None


def test_a_registered_class_with_slots_round_trips():
    back = round_trip_value(Slotted(1, "b"), registered((Slotted, None)))
    assert type(back) is Slotted and (back.a, back.b) == (1, "b")


def test_a_registered_nested_class_resolves_by_qualname():
    back = round_trip_value(Inner.Deep(3), registered((Inner.Deep, None)))
    assert type(back) is Inner.Deep and back.v == 3


def test_registered_objects_nest_inside_builtin_values_without_pickle():
    ser = registered((Point, PointSerializer), (Plain, None), **{"topology.fall.back.on.pickle": False})
    value = {"pts": (Point(1, 2), [Point(3, 4)]), 7: {"plain": Plain(Point(8, 9), {(1, 2)})}}
    back = round_trip_value(value, ser)
    assert back["pts"] == (Point(1, 2), [Point(3, 4)]) and type(back["pts"]) is tuple
    plain = back[7]["plain"]
    assert plain.a == Point(8, 9) and plain.b == {(1, 2)}


def test_storms_list_form_of_registrations_is_accepted():
    key = f"{__name__}:Point"
    ser = Serializer({"topology.kryo.register": [{key: f"{__name__}:PointSerializer"}, f"{__name__}:Plain"]},
                     source_of)
    assert round_trip_value(Point(1, 2), ser) == Point(1, 2)
    assert round_trip_value(Plain(1, 2), ser).b == 2


@pytest.mark.parametrize("key, serializer_name", [
    ("no_such_module_xyz:Thing", None),
    (f"{__name__}:NoSuchClass", None),
    (f"{__name__}:Point", f"{__name__}:NoSuchSerializer"),
    (f"{__name__}:VALUES", None),
])
def test_an_unresolvable_registration_is_an_error_naming_its_key(key, serializer_name):
    with pytest.raises(SerializationError, match="topology.kryo.register") as info:
        Serializer({"topology.kryo.register": {key: serializer_name}}, source_of)
    assert repr(key) in str(info.value)


def test_an_unresolvable_registration_is_skipped_with_a_warning_when_asked(caplog):
    conf = {"topology.kryo.register": {"no_such_module_xyz:Thing": None, f"{__name__}:Point": None},
            "topology.skip.missing.kryo.registrations": True, "topology.fall.back.on.pickle": False}
    with caplog.at_level(logging.WARNING, logger="squall.engine.serialize"):
        ser = Serializer(conf, source_of)
    assert "no_such_module_xyz:Thing" in caplog.text
    assert round_trip_value(Point(1, 2), ser) == Point(1, 2)


def test_a_class_the_receiver_has_not_registered_is_an_error_naming_it():
    item = (9, Tuple([Point(1, 2)], SOURCES[(1, "default")]))
    data = registered((Point, PointSerializer)).encode_batch(flat([item]))
    with pytest.raises(SerializationError, match="Point.*not registered"):
        serializer().decode_batch(data)


# --- the pickle fallback --------------------------------------------------------------------
def test_an_unregistered_class_is_pickled_by_default():
    assert round_trip_value({"u": (Unregistered(2**70),)}) == {"u": (Unregistered(2**70),)}


def test_a_class_defined_in_a_function_is_pickled_by_value():
    class Local:
        def __init__(self):
            self.v = 3

    assert round_trip_value(Local()).v == 3


def test_without_pickle_an_unregistered_type_is_an_error_naming_type_component_and_stream():
    ser = serializer(**{"topology.fall.back.on.pickle": False})
    good = Tuple(["fine"], SOURCES[(3, "words")])
    bad = Tuple([{"nested": (1, Unregistered(1))}, 2], SOURCES[(3, "default")])
    with pytest.raises(SerializationError) as info:
        ser.encode_batch(flat([(7, good), (8, bad)]))
    msg = str(info.value)
    assert f"{__name__}.Unregistered" in msg
    assert "component [split]" in msg and "stream [default]" in msg
    assert "register_serialization" in msg and "topology.fall.back.on.pickle" in msg


def test_without_pickle_a_builtin_subclass_is_refused_too():
    ser = serializer(**{"topology.fall.back.on.pickle": False})
    with pytest.raises(SerializationError, match="collections.OrderedDict"):
        round_trip_value(collections.OrderedDict(a=1), ser)


def test_without_pickle_the_receiver_refuses_pickled_values():
    data = serializer().encode_batch(flat([(9, Tuple([Unregistered(1)], SOURCES[(1, "default")]))]))
    with pytest.raises(SerializationError, match="refusing to unpickle"):
        serializer(**{"topology.fall.back.on.pickle": False}).decode_batch(data)


def test_an_unpicklable_value_is_an_error_naming_type_and_component():
    with pytest.raises(SerializationError, match=r"_thread.lock.*component \[spout\].*cannot be pickled"):
        round_trip_value(threading.Lock())


def test_a_failing_registered_serializer_is_an_error_naming_type_and_component():
    ser = registered((Point, BrokenSerializer))
    match = r"Point in a tuple emitted by component \[spout\].*boom"
    with pytest.raises(SerializationError, match=match) as info:
        round_trip_value(Point(1, 2), ser)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_value_that_contains_itself_is_a_serialization_error():
    loop: list = []
    loop.append(loop)
    with pytest.raises(SerializationError):
        round_trip_value(loop)


def test_the_serializer_still_works_after_a_failed_encode():
    ser = serializer(**{"topology.fall.back.on.pickle": False})
    src = SOURCES[(1, "default")]
    with pytest.raises(SerializationError):
        ser.encode_batch(flat([(9, Tuple([((1, Unregistered(1)),)], src))]))
    [(_, t)] = round_trip([(9, Tuple([((1, (2,)),)], src))], ser)
    assert same(t.values, [((1, (2,)),)])


def test_threads_may_share_one_serializer():
    ser = serializer()
    src = SOURCES[(1, "default")]
    errors = []

    def work(k):
        try:
            for i in range(300):
                value = (k, (i, frozenset({k})), [{i: (k,)}])
                [_, t] = ser.decode_batch(ser.encode_batch(flat([(9, Tuple([value], src))])))
                assert same(t.values[0], value)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


# --- bad input ------------------------------------------------------------------------------
def test_an_unknown_ext_type_is_a_serialization_error():
    run = [1, "default", [9], [[msgpack.ExtType(42, b"x")]], None, None]
    data = msgpack.packb([FORMAT, [run], [], [], [], []])
    with pytest.raises(SerializationError, match="unknown msgpack ext type 42"):
        serializer().decode_batch(data)


@pytest.mark.parametrize("data", [
    b"", b"\xc1", b"\x96\x01", b"not msgpack at all \xff\xfe", msgpack.packb(5), msgpack.packb([1, 2]),
    msgpack.packb([FORMAT, [[3, "default", [7], [["a"]], None, None]], [], [], [], []]) + b"extra",
    msgpack.packb([FORMAT, [], [1], [1, 2, 3], [], []]),
    msgpack.packb([FORMAT, [], [1, 2], [1, 2, 3, 4], [], []]),
    msgpack.packb([FORMAT, [], [], [], [1], [1, 2, 3, 1, 2, 3]]),
    msgpack.packb([FORMAT, [[3, "default", [7, 7], [["a"], ["b"]], [None, 5], [1, 2]]], [], [], [], []]),
    msgpack.packb([FORMAT, [[3, "default", [7, 7], [["a"]], None, None]], [], [], [], []]),
], ids=["empty", "reserved-byte", "truncated", "garbage", "int", "short-list", "extra-data", "ragged-acks",
        "more-ack-targets-than-acks", "fewer-reply-targets-than-replies", "run-begins-with-same-root",
        "more-targets-than-values"])
def test_garbage_bytes_are_a_serialization_error(data):
    with pytest.raises(SerializationError, match="cannot decode batch") as info:
        serializer().decode_batch(data)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize("data", [
    msgpack.packb([FORMAT, [[3, "default", [{"x": 1}], [["a"]], None, None]], [], [], [], []]),
    msgpack.packb([FORMAT, [[3, "default", [[7]], [["a"]], None, None]], [], [], [], []]),
    msgpack.packb([FORMAT, [[3, "default", [7, "8"], [["a"], ["b"]], None, None]], [], [], [], []]),
    msgpack.packb([FORMAT, [], [[1]], [1, 2, 3, 4], [], []]),
    msgpack.packb([FORMAT, [], ["1"], [1, 2, 3, 4], [], []]),
    msgpack.packb([FORMAT, [], [], [], [{}], [1, 2, 3.5]]),
    msgpack.packb([FORMAT, [], [], [], [True], [1, 2, 3.5]]),
], ids=["run-target-map", "run-target-list", "run-target-str", "ack-target-list", "ack-target-str",
        "reply-target-map", "reply-target-bool"])
def test_a_batch_whose_targets_are_not_task_ids_is_refused_on_both_paths(data):
    """A target that is not an int (a peer's bug, another version's layout): the compiled decoder
    gives the batch up and msgpack's path refuses it, rather than handing the worker items whose
    target it cannot look up (a map or a list raised TypeError in the delivery, on the transport's
    reading of the connection: see tests/worker/test_tcp.py)."""
    assert _native.unpack_batch(data, source_of, Tuple, [None] * 8) is None
    with pytest.raises(SerializationError, match="targets are task ids"):
        serializer().decode_batch(data)


_NESTED_BYTES = r"""
import threading, msgpack
from squall import Fields
from squall._tuple import Source, Tuple
from squall.engine.serialize import EXT_SET, EXT_TUPLE, FORMAT, SerializationError, Serializer
src = Source("split", "words", 3, Fields("word"))
ser = Serializer({}, lambda task, stream: src)
at_bound = None
for level in range(32):  # the most a sender may send (MAX_EXT_NESTING): decoded whole
    at_bound = (at_bound,) if level % 2 else frozenset({at_bound})
value = msgpack.packb(None)
for level in range(300):  # ~1.5 KB: tuples and sets inside one another, as no squall sender writes
    value = msgpack.packb(msgpack.ExtType(EXT_TUPLE if level % 2 else EXT_SET, value))
batch = msgpack.packb([FORMAT, [[3, "words", [7], [[msgpack.ExtType(EXT_TUPLE, value)]], None, None]], [], [], [], []])

def decode():
    print("decoded" if ser.decode_batch(ser.encode_batch([7, Tuple([at_bound], src)]))[1].values == [at_bound]
          else "not the value sent")
    for decode, data in ((ser.decode_batch, batch), (ser.decode_value, value)):
        try:
            decode(data)
        except SerializationError as e:
            print(e)

threading.stack_size(2 * 1024 * 1024)  # a worker's loop thread where the stack limit is unlimited
thread = threading.Thread(target=decode)
thread.start()
thread.join()
"""


def test_bytes_nesting_ext_values_hundreds_deep_are_refused_not_decoded_into_a_segfault():
    """Each tuple or set inside another is a call of msgpack's C unpacker, ~45 KB of C stack,
    which Python's recursion limit does not count: 300 of them in a 1.5 KB batch killed the
    decoding worker with SIGSEGV (and its replay the next launch). Decoded on a thread of 2 MB,
    the smallest stack a worker's loop gets (glibc's when the stack limit is unlimited), which
    the deepest value a sender may send fits. Run in a child process, so a crash is this test's
    failure and not the suite's end."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(squall.__file__))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", _NESTED_BYTES], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, f"the decoder died ({done.returncode}): {done.stderr[-2000:]}"
    decoded, *refused = done.stdout.splitlines()
    assert decoded == "decoded"
    assert len(refused) == 2 and all("more than 32 deep" in line and "refused undecoded" in line
                                     for line in refused), refused


def nested(levels: int, leaf=1):
    value = leaf
    for level in range(levels):
        value = (value,) if level % 2 else frozenset({value})
    return value


def test_a_value_nested_in_more_tuples_and_sets_than_a_worker_decodes_is_refused_at_emit():
    """The sender refuses at emit what its receiver would refuse, naming the component; 32
    levels, the bound, cross whole."""
    src = SOURCES[(1, "default")]
    ser = serializer()
    assert round_trip_value(nested(32)) == nested(32)
    assert round_trip_value([[nested(32)]]) == [[nested(32)]]  # lists do not count
    with pytest.raises(SerializationError, match=r"component \[spout\] on stream \[default\]: it is nested "
                                                 r"inside more than 32 tuples, sets or registered values"):
        ser.check(Tuple([nested(33)], src))
    with pytest.raises(SerializationError, match="more than 32"):
        ser.encode_value(nested(33), "state key 'x'")


def test_a_batch_from_an_unknown_source_is_a_serialization_error():
    data = msgpack.packb([FORMAT, [[99, "nope", [7], [["a"]], None, None]], [], [], [], []])
    with pytest.raises(SerializationError, match="unknown source: task 99, stream 'nope'"):
        serializer().decode_batch(data)


def test_a_batch_of_another_format_version_is_refused():
    with pytest.raises(SerializationError, match="another squall version"):
        serializer().decode_batch(msgpack.packb([99, [], [], [], [], []]))


def test_serialization_error_is_public_and_a_squall_error():
    assert squall.SerializationError is SerializationError
    assert issubclass(SerializationError, squall.SquallError)


def test_check_passes_what_encodes_and_names_the_shape_of_what_cannot():
    """`Serializer.check` (run at emit for tuples bound for another worker) says why, for
    values the packer cannot take whatever pickle allows: too deep, or containing itself."""
    src = SOURCES[(1, "default")]
    ser = serializer()
    ser.check(Tuple([{"a": [1, (2, {3})]}], src))
    deep: list = []
    for _ in range(4999):
        deep = [deep]
    with pytest.raises(SerializationError, match=r"component \[spout\] on stream \[default\]: a value is "
                                                 r"nested 5000 levels deep"):
        ser.check(Tuple([deep], src))
    loop: list = []
    loop.append(loop)
    with pytest.raises(SerializationError, match="a value contains itself"):
        ser.check(Tuple([loop], src))


# --- the compiled packer (squall._native.pack_batch) -------------------------------------------
INT_EDGES = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1,
             -1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)]
PLAIN = INT_EDGES + [None, True, False, 0.0, -2.5, 1e300, float("inf"), "", "a" * 31, "a" * 32, "b" * 255,
                     "c" * 256, "d" * 65535, "e" * 65536, "héllo ✓", "日本", b"", b"\x00" * 255, b"\xff" * 256,
                     b"x" * 65536]


def msgpack_bytes(ser: Serializer, items) -> bytes:
    """The batch as msgpack writes it (the Python path of `encode_batch`)."""
    runs, _, ack_targets, acks, reply_targets, replies = Serializer._group(flat(items))
    return ser._pack([FORMAT, runs, ack_targets, acks, reply_targets, replies])


def plain_batches():
    rnd = random.Random(7)
    srcs = list(SOURCES.values())
    small = [v for v in PLAIN if not isinstance(v, (str, bytes)) or len(v) < 300]
    for size in (0, 1, 2, 15, 16, 17, 300, 100_000):  # 100,000: one run, its arrays of 32-bit length
        items = []
        for i in range(size):
            kind = rnd.random()
            if kind < 0.7:
                values = [rnd.choice(PLAIN if size <= 300 else small) for _ in range(rnd.choice((0, 1, 2, 15, 16)))]
                root = rnd.choice((0, 0, 1, 2**64 - 1, rnd.getrandbits(62)))
                tup = Tuple(values, srcs[i // 7 % 3 if size <= 300 else 0], root, rnd.getrandbits(64) if root else 0)
                items.append((rnd.choice((0, 5, 300, 70_000)), tup))
            elif kind < 0.85:
                items.append((rnd.choice((1, 2)), (rnd.choice((INIT, ACK, FAIL)), rnd.getrandbits(64),
                                                    rnd.getrandbits(63), rnd.choice((-1, 4)))))
            else:
                items.append((4, (rnd.choice((ACKED, FAILED, RESET_TIMEOUT)), rnd.getrandbits(64),
                                  rnd.random())))
        yield items


def test_the_compiled_packer_writes_msgpacks_bytes_byte_for_byte():
    """pack_batch (in C) writes plain batches itself, without the lists msgpack walks: its bytes
    must be exactly msgpack's, every int, str, bytes and array length at its encodings' edges
    included, so that either side may decode what the other wrote."""
    ser = serializer()
    for items in plain_batches():
        data = _native.pack_batch(flat(items), Tuple)
        if _native.COMPILED:
            assert data == msgpack_bytes(ser, items)
        else:
            assert data is None  # the pure path packs with msgpack
        back = unflat(ser.decode_batch(ser.encode_batch(flat(items))))
        # decoded: Tuples first, then acker messages (4 fields), then replies (3), each in order
        expected = sorted(items, key=lambda pair: 0 if type(pair[1]) is Tuple else 5 - len(pair[1]))
        assert len(back) == len(expected)
        for (tg, it), (tg2, it2) in zip(back, expected):
            assert tg == tg2
            if type(it2) is Tuple:
                assert same(it.values, it2.values) and it._src is it2._src
                assert (it._root, it._val) == (it2._root, it2._val)
            else:
                assert same(it, it2)


@pytest.mark.parametrize("values", [[[1]], [{"a": 1}], [(1, 2)], [{1}], [2**64], [-(2**63) - 1], ["\ud800"],
                                    [bytearray(b"x")], [Point(1, 2)], [True, [None]]], ids=stable_id)
def test_a_batch_with_a_value_that_is_not_plain_is_packed_by_msgpack(values):
    """The compiled packer gives such a batch up whole (None), and msgpack encodes it, or words
    the error, as before."""
    src = SOURCES[(1, "default")]
    items = [(3, Tuple(["plain"], src, 5, 6)), (3, Tuple(values, src, 5, 7))]
    assert _native.pack_batch(flat(items), Tuple) is None
    ser = registered((Point, None))
    back = unflat(ser.decode_batch(ser.encode_batch(flat(items))))
    assert same(back[0][1].values, ["plain"])
    assert back[1][1].values == values  # (a bytearray comes back as bytes, as it always did)


def test_tuples_of_several_trees_or_values_not_in_a_list_are_packed_by_msgpack():
    src = SOURCES[(3, "words")]
    for tup in (Tuple(["w"], src, {1: 2, 3: 4}), Tuple(("w",), src, 1, 2)):
        items = [(7, Tuple(["a"], src, 1, 2)), (7, tup)]
        assert _native.pack_batch(flat(items), Tuple) is None
        [_, (_, back)] = round_trip(items)
        assert same(back.values, tup.values) and back._root == tup._root


@pytest.mark.skipif(not _native.COMPILED, reason="pure path (SQUALL_PURE_PYTHON): its pack_batch returns None "
                    "for every batch, leaving it to msgpack, and reads no tuple type to refuse")
def test_the_compiled_packer_refuses_a_tuple_type_whose_slots_it_cannot_read():
    with pytest.raises(TypeError, match="TupleBase"):
        _native.pack_batch([1, (1, 2, 3, 4)], tuple)


# --- the compiled decoder (squall._native.unpack_batch) ----------------------------------------
def msgpack_items(ser: Serializer, data: bytes) -> list:
    """What `decode_batch` makes of ``data`` with msgpack (its path for what the decoder gives up)."""
    real = squall.engine.serialize.unpack_batch
    squall.engine.serialize.unpack_batch = lambda *args: None
    try:
        return ser.decode_batch(data)
    finally:
        squall.engine.serialize.unpack_batch = real


def same_items(a: list, b: list) -> bool:
    """Two decoded batches alike: the same targets, and Tuples with the same values (of the same
    types), source, root and ack value; acker messages and replies equal."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if type(x) is Tuple or type(y) is Tuple:
            if not (type(x) is type(y) and same(x.values, y.values) and x._src is y._src
                    and same(x._root, y._root) and same(x._val, y._val) and same(x._oav, y._oav)):
                return False
        elif not same(x, y):
            return False
    return True


@pytest.mark.skipif(not _native.COMPILED, reason="pure path (SQUALL_PURE_PYTHON): unpack_batch returns None, "
                    "and msgpack decodes every batch")
def test_the_compiled_decoder_makes_what_msgpack_makes_of_every_plain_batch():
    """unpack_batch reads pack_batch's bytes (msgpack's, byte for byte) into the same items as
    msgpack and batch_items: every int, str, bytes and array length at its encodings' edges, runs
    tracked and not, acker messages and replies."""
    ser = serializer()
    src = SOURCES[(1, "default")]
    # the last: a run and its columns of 32-bit array lengths
    for items in [*itertools.islice(plain_batches(), 7), [(5, Tuple([], src))] * 70_000]:  # sizes 0-300
        data = ser.encode_batch(flat(items))
        mine = _native.unpack_batch(data, source_of, Tuple, [None] * 64)
        assert mine is not None
        assert same_items(mine, msgpack_items(ser, data))


@pytest.mark.skipif(not _native.COMPILED, reason="pure path (SQUALL_PURE_PYTHON): unpack_batch returns None")
def test_a_word_that_comes_again_is_the_same_str_and_the_table_holds_one_per_slot():
    """Short ASCII strs are remembered by the bytes' slot: the second batch's words are the first
    batch's objects (no str made and freed, and a dict finds them by identity); a word of another
    slot or a longer or non-ASCII str is made anew each time."""
    src = SOURCES[(3, "words")]
    words = [None] * 1024
    batch = flat([(7, Tuple([w], src, 5, 6)) for w in ("the", "cat", "x" * 33, "héllo")])
    data = serializer().encode_batch(batch)
    first = unflat(_native.unpack_batch(data, source_of, Tuple, words))
    second = unflat(_native.unpack_batch(data, source_of, Tuple, words))
    assert [t.values[0] for _, t in second] == ["the", "cat", "x" * 33, "héllo"]
    assert [a[1].values[0] is b[1].values[0] for a, b in zip(first, second)] == [True, True, False, False]
    assert sorted(w for w in words if w is not None) == ["cat", "the", "words"]  # the stream's name too
    with pytest.raises(TypeError, match="power of two"):
        _native.unpack_batch(data, source_of, Tuple, [None] * 1000)


@pytest.mark.parametrize("values", [[[1]], [{"a": 1}], [(1, 2)], [{1}], [2**64], [-(2**63) - 1],
                                    [Point(1, 2)], [True, [None]]], ids=stable_id)
def test_a_batch_with_a_value_that_is_not_plain_is_decoded_by_msgpack(values):
    """The compiled decoder gives such a batch up whole (None), and msgpack rebuilds it."""
    src = SOURCES[(1, "default")]
    ser = registered((Point, None))
    data = ser.encode_batch(flat([(3, Tuple(["plain"], src, 5, 6)), (3, Tuple(values, src, 5, 7))]))
    assert _native.unpack_batch(data, source_of, Tuple, [None] * 8) is None
    back = unflat(ser.decode_batch(data))
    assert same(back[0][1].values, ["plain"]) and back[1][1].values == values


def test_damaged_batches_are_refused_or_decoded_as_msgpack_decodes_them():
    """Bytes past the MAC are a peer's, but read as if hostile: each cut and each changed byte
    of a batch is either given up by the compiled decoder (None: msgpack then decodes it, or
    raises SerializationError) or decoded into exactly what msgpack makes of it."""
    rnd = random.Random(11)
    ser = serializer()
    src = SOURCES[(3, "words")]
    pairs = [(7, Tuple([f"w{i % 5}", i * 1000, 2.5, b"b", None, True], src, 10**15 + i // 3, rnd.getrandbits(64)))
             for i in range(12)] + [(2, (INIT, 99, 77, 1)), (1, (ACKED, 99, 0.5))]
    data = ser.encode_batch(flat(pairs))
    damaged = [data[:n] for n in range(len(data))] + [data + b"\x00"]
    for _ in range(1500):
        b = bytearray(data)
        for _ in range(rnd.choice((1, 1, 2, 3))):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        damaged.append(bytes(b))
    decoded = 0
    for d in damaged:
        try:
            expected = msgpack_items(ser, d)
        except SerializationError:
            expected = None
        mine = _native.unpack_batch(d, source_of, Tuple, [None] * 16)
        if mine is None:
            continue  # the serializer then decodes it with msgpack: expected, or its error
        decoded += 1
        assert expected is not None and same_items(mine, expected), d
    assert decoded > 100 or not _native.COMPILED
