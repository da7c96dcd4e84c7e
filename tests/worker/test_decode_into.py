"""A received batch decoded straight into the worker's inboxes (`Serializer.decode_into`,
`squall._native.unpack_into`): each task's inbox gets exactly what decoding the batch and
delivering its items would give it, in the same order; a batch it does not take (a value that is
not plain, bytes that are not such a batch, more tasks than it keeps apart) delivers nothing and
is left to the long way, whose result or error is the same as before."""

import random
import threading
from collections import deque

import pytest
from doubles import wait_until

from squall import Fields, _native
from squall._tuple import Source, Tuple
from squall.engine.acker import ACK, ACKED, INIT
from squall.engine.serialize import Serializer
from squall.worker.envelope import Origin
from squall.worker.tcp import TcpTransport

SOURCES = {
    (3, "words"): Source("split", "words", 3, Fields("word")),
    (8, "default"): Source("spout", "default", 8, Fields("value")),
}
compiled_only = pytest.mark.skipif(not _native.COMPILED, reason="pure path (SQUALL_PURE_PYTHON): decode_into "
                                   "takes no batch, the long way delivers it (tested below on both paths)")


def serializer() -> Serializer:
    return Serializer({}, lambda task, stream: SOURCES[(task, stream)])


def mixed_items(rng: random.Random, n: int, tasks=(5, 6, 300, 70_000)) -> list:
    """A batch's items, flat: Tuples of two sources (tracked and not), of one word and of several
    values, acker messages, replies; runs of one target and targets interleaved."""
    items: list = []
    for i in range(n):
        root = rng.getrandbits(64) or 1
        for w in range(rng.randrange(1, 4)):
            word = rng.choice(["a", "cow", "jumped", "ü", "x" * 40, ""])
            items += [rng.choice(tasks), Tuple([word, i, 2.5], SOURCES[(3, "words")], root, rng.getrandbits(64))]
            # a word alone, as W1's split emits it: the decoder's own path for [a short str]
            items += [rng.choice(tasks), Tuple([word], SOURCES[(3, "words")], root, rng.getrandbits(64))]
        if i % 3 == 0:
            items += [rng.choice(tasks), Tuple([i], SOURCES[(8, "default")])]
        items += [1, (ACK, root, rng.getrandbits(64), -1)]
        if i % 4 == 0:
            items += [2, (ACKED, root, 0.25)]
    return items


def long_way(ser: Serializer, data: bytes, tasks) -> dict:
    """What the inboxes of ``tasks`` get when the batch is decoded whole and then delivered."""
    inboxes = {t: deque() for t in tasks}
    _native.deliver_items(inboxes, ser.decode_batch(data))
    return inboxes


def same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, Tuple):
        return (a.values == b.values and type(a.values) is type(b.values) and a.source_task == b.source_task
                and a.source_stream == b.source_stream and a._root == b._root and a._val == b._val)
    return a == b


def assert_same_inboxes(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for task, items in want.items():
        assert len(got[task]) == len(items), task
        assert all(same(x, y) for x, y in zip(got[task], items)), task


@compiled_only
@pytest.mark.parametrize("seed", range(5))
def test_each_inbox_gets_what_decoding_and_delivering_the_batch_gives_it_in_order(seed):
    ser = serializer()
    items = mixed_items(random.Random(seed), 60)
    data = ser.encode_batch(items)
    tasks = (5, 6, 300, 70_000, 1, 2)
    inboxes = {t: deque() for t in tasks}
    delivered = ser.decode_into(data, inboxes)
    assert delivered == len(items) // 2
    assert_same_inboxes(inboxes, long_way(serializer(), data, tasks))


@compiled_only
def test_items_for_tasks_not_here_are_dropped_and_not_counted():
    ser = serializer()
    items = mixed_items(random.Random(7), 40)
    data = ser.encode_batch(items)
    here = (5, 1)  # 6, 300, 70,000 and the spout task 2 are elsewhere
    inboxes = {t: deque(["kept"]) for t in here}
    delivered = ser.decode_into(data, inboxes)
    assert delivered == sum(1 for t in items[::2] if t in here)
    want = long_way(serializer(), data, here)
    for t in here:
        assert inboxes[t].popleft() == "kept"  # appended after what the inbox held
    assert_same_inboxes(inboxes, want)


@pytest.mark.parametrize("value", [{"a": 1}, [1, [2]], (1, 2), b"x" * 3, 2 ** 70])
def test_a_batch_with_a_value_that_is_not_plain_is_delivered_whole_one_way_or_the_other(value):
    ser = serializer()
    items = [5, Tuple(["ok"], SOURCES[(3, "words")], 9, 10), 6, Tuple([value], SOURCES[(3, "words")], 9, 11)]
    data = ser.encode_batch(items)
    inboxes = {5: deque(), 6: deque()}
    got = ser.decode_into(data, inboxes)
    if got is None:  # not taken: nothing of it delivered
        assert not inboxes[5] and not inboxes[6]
    else:  # plain to the decoder (bytes are): taken whole, as the long way gives it
        assert got == 2
        assert_same_inboxes(inboxes, long_way(serializer(), data, (5, 6)))
    if isinstance(value, (dict, list, tuple)):
        assert got is None


@compiled_only
def test_a_batch_for_more_tasks_than_kept_apart_is_left_to_the_long_way():
    ser = serializer()
    tasks = list(range(100, 140))
    items = [x for t in tasks for x in (t, Tuple([str(t)], SOURCES[(3, "words")], 5, t))]
    data = ser.encode_batch(items)
    inboxes = {t: deque() for t in tasks}
    assert ser.decode_into(data, inboxes) is None
    assert not any(inboxes.values())
    assert_same_inboxes(long_way(serializer(), data, tasks),
                        {t: deque([Tuple([str(t)], SOURCES[(3, "words")], 5, t)]) for t in tasks})


@compiled_only
def test_cut_or_altered_bytes_deliver_nothing_or_exactly_what_the_long_way_gives():
    """The bytes have passed their MAC, but are read as if hostile: a batch cut anywhere, or with
    a byte changed, is refused whole (None, nothing delivered) or decoded as msgpack decodes it."""
    ser = serializer()
    items = mixed_items(random.Random(3), 8, tasks=(5, 6))
    data = ser.encode_batch(items)
    tasks = (5, 6, 1, 2)
    rng = random.Random(4)
    variants = [data[:k] for k in range(len(data))]
    for _ in range(300):
        b = bytearray(data)
        b[rng.randrange(len(b))] = rng.randrange(256)
        variants.append(bytes(b))
    for v in variants:
        inboxes = {t: deque() for t in tasks}
        got = ser.decode_into(v, inboxes)
        if got is None:
            assert not any(inboxes.values())
            continue
        assert_same_inboxes(inboxes, long_way(serializer(), v, tasks))
        assert got == sum(len(q) for q in inboxes.values())


class _Worker:
    """What the transport needs of a worker: its receivers, with the inboxes they fill."""

    def __init__(self, tasks):
        self.inboxes = {t: deque() for t in tasks}
        self.lock = threading.Lock()
        self.into = self.batches = 0

    def receive(self, task, item):
        self.inboxes[task].append(item)

    def receive_batch(self, items):
        self.batches += 1
        return _native.deliver_items(self.inboxes, items)

    def receive_into(self, fill):
        delivered = fill(self.inboxes)
        if delivered is not None:
            self.into += 1
        return delivered


def test_a_peers_items_reach_their_inboxes_in_order_over_tcp_by_either_way():
    """Plain batches go straight into the inboxes (compiled), others (a dict value) the long way;
    each task gets every item once, in the order it was sent, across both kinds of batch."""
    worker = _Worker((5, 6, 1))
    b = TcpTransport("tcp://127.0.0.1:0", {}, serializer(), b"s3cret", origin=Origin("t-1", "h:2", 1))
    b.set_receiver(worker.receive, worker.receive_batch, worker.receive_into)
    b.on_arrival = lambda: None
    a = TcpTransport("tcp://127.0.0.1:0", {5: b.address, 6: b.address, 1: b.address}, serializer(), b"s3cret",
                     origin=Origin("t-1", "h:1", 1))
    try:
        send = {t: a.sender(t) for t in (5, 6, 1)}
        sent: dict = {5: [], 6: [], 1: []}
        rng = random.Random(5)
        for rnd in range(30):
            for i in range(50):
                task = rng.choice((5, 6))
                value = {"k": i} if rnd % 7 == 3 and i == 10 else f"w{i}"
                t = Tuple([value], SOURCES[(3, "words")], rnd + 1, i + 1)
                send[task](t)
                sent[task].append(t)
            msg = (INIT, rnd + 1, 77, 3)
            send[1](msg)
            sent[1].append(msg)
            a.flush()
            b.poll()
        total = sum(len(v) for v in sent.values())
        assert wait_until(lambda: b.poll() >= 0 and sum(len(q) for q in worker.inboxes.values()) == total)
        for task, want in sent.items():
            assert all(same(x, y) for x, y in zip(worker.inboxes[task], want)), task
            assert len(worker.inboxes[task]) == len(want)
        assert worker.batches > 0  # the batches with a dict went the long way
        assert (worker.into > 0) == _native.COMPILED
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("start", [0, 1, 127, 128, 65535, 2**32, 2**64 - 1])
def test_a_run_whose_vals_is_a_state_gets_the_ids_drawn_from_it_on_every_path(start):
    """A run written by an outbox carries the state its edge ids were drawn from (splitmix64,
    `edge_values`) instead of the ids: the compiled decoder, straight into the inboxes or not, and
    msgpack's path give the Tuples the same ids."""
    import msgpack

    from squall.engine import serialize as serialize_module
    from squall.engine.serialize import edge_values

    data = msgpack.packb([2, [[3, "words", [5, 6, 5], [["a"], ["b"], ["c"]], [9, None, 10], start]], [], [], [], []])
    want = edge_values(start, 3)
    assert len(set(want)) == 3 and all(0 <= e < 2**64 for e in want)
    ser = serializer()
    assert [t._val for t in ser.decode_batch(data)[1::2]] == want
    real = serialize_module.unpack_batch
    serialize_module.unpack_batch = lambda *args: None
    try:
        assert [t._val for t in ser.decode_batch(data)[1::2]] == want
    finally:
        serialize_module.unpack_batch = real
    inboxes = {5: deque(), 6: deque()}
    got = ser.decode_into(data, inboxes)
    if got is not None:
        assert [t._val for t in inboxes[5]] == [want[0], want[2]] and [t._val for t in inboxes[6]] == [want[1]]
        assert [t._root for t in inboxes[5]] == [9, 10]


@pytest.mark.parametrize("start", [-1, -2**63, 1.5])
def test_a_run_whose_vals_is_not_an_unsigned_64_bit_state_is_refused(start):
    import msgpack

    from squall.engine.serialize import SerializationError

    data = msgpack.packb([2, [[3, "words", [5], [["a"]], [9], start]], [], [], [], []])
    with pytest.raises(SerializationError):
        serializer().decode_batch(data)
    inboxes = {5: deque()}
    assert serializer().decode_into(data, inboxes) is None and not inboxes[5]


@compiled_only
def test_edge_values_are_splitmix64_as_an_id_source_draws_them():
    from squall.engine.serialize import edge_values

    source = _native.IdSource(987654321)
    assert edge_values(987654321, 5) == [source() for _ in range(5)]


@pytest.mark.parametrize("seed", range(3))
def test_decoded_values_stay_right_while_the_lists_of_dead_tuples_are_reused(seed):
    """Batch after batch decoded while the Tuples of the batch before die (a worker's bursts):
    every Tuple has its own values, and a values list that something else still holds (a bolt
    kept ``tup.values``) or that grew past four items keeps what it held, never handed to the
    next batch's Tuples."""
    rng = random.Random(seed)
    ser = serializer()
    held: list = []  # (values list kept by "user code", what it held)
    for _ in range(30):
        items, want = [], []
        for i in range(rng.randrange(50, 400)):
            values = [rng.choice(["a", "cow", "jumped", "ü", ""])] + [i] * rng.randrange(0, 3)
            want.append(values)
            items += [5, Tuple(values, SOURCES[(3, "words")], rng.getrandbits(64) or 1, rng.getrandbits(64))]
        inboxes = {5: deque()}
        if ser.decode_into(ser.encode_batch(items), inboxes) is None:  # the pure path
            _native.deliver_items(inboxes, ser.decode_batch(ser.encode_batch(items)))
        got = list(inboxes[5])
        assert [t.values for t in got] == want
        assert len({id(t.values) for t in got}) == len(got)  # no list shared by two Tuples
        grown = rng.choice(got).values
        grown.extend(["x"] * 5)
        for t in rng.sample(got, 3):
            held.append((t.values, list(t.values)))
        held.append((grown, list(grown)))
        del got, inboxes, t, grown  # the batch's Tuples die: their lists may be kept for the next
        assert all(values == copy for values, copy in held)


@pytest.mark.parametrize("seed", range(3))
def test_every_word_decodes_to_its_own_text_whatever_its_length_and_letters(seed):
    """Words alone ([a str]) of every length 0-40, ASCII and not, and words that differ in one
    byte only (first, middle or last: what the decoder's remembered words are told apart by), in
    batches decoded one after the other: each comes back as its own text, and a short ASCII
    word that comes again is the str the decoder remembers."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    base = ["".join(rng.choice(letters) for _ in range(n)) for n in range(41)]
    words = list(base)
    for w in base[1:]:
        for at in {0, len(w) // 2, len(w) - 1}:
            for c in ("Z", "é"):
                words.append(w[:at] + c + w[at + 1:])
    ser = serializer()
    seen: dict[str, object] = {}
    for _ in range(4):
        batch = rng.sample(words, len(words))
        items = []
        for w in batch:
            items += [5, Tuple([w], SOURCES[(3, "words")], rng.getrandbits(64) or 1, rng.getrandbits(64))]
        data = ser.encode_batch(items)
        inboxes = {5: deque()}
        if ser.decode_into(data, inboxes) is None:  # the pure path
            _native.deliver_items(inboxes, ser.decode_batch(data))
        got = [t.values[0] for t in inboxes[5]]
        assert got == batch
        for w in got:
            seen.setdefault(w, w)
    if _native.COMPILED:  # the last batch's short ASCII words were remembered strs
        remembered = [w for w in got if len(w) <= 32 and w.isascii() and seen[w] is w]
        assert len(remembered) > len(base) // 2


@pytest.mark.parametrize("seed", range(2))
def test_acks_decoded_from_another_worker_complete_the_trees_this_worker_s_acker_began(seed):
    """W1's crossing on 2 workers: this worker's spout began trees at its acker (INIT, here),
    the bolts of the other worker acked them (ACK messages in a received batch). Decoded, each
    ack completes its own tree and the spout is told of exactly those roots, for more trees than
    the decoder remembers roots of (10,000: roots that share a remembered slot, and roots whose
    slot has since gone to another) and for acks of trees this acker never began."""
    from squall.engine.acker import Acker

    rng = random.Random(seed)
    ser = serializer()
    acker, replies = Acker(), []
    deliver = {7: lambda m: replies.append(m[:2])}
    roots = [rng.getrandbits(64) | 1 for _ in range(10_000)]
    edges = {root: rng.getrandbits(64) for root in roots}
    heard = {1: deque()}  # a worker that has had acks from another worker before these trees began
    ser.decode_into(ser.encode_batch([1, (ACK, 3, 5, -1)]), heard)
    inits = deque((INIT, root, edges[root], 7) for root in roots)
    _native.acker_run(acker, inits.popleft, len(roots), 1.0, deliver)
    assert replies == [] and len(acker) == len(roots)
    strangers = [rng.getrandbits(64) | 1 for _ in range(50)]  # no tree here: they begin one
    acked = rng.sample(roots, 6_000)
    items = []
    for root in acked + strangers:
        items += [1, (ACK, root, edges.get(root, 5), -1)]
    inboxes = {1: deque()}
    data = ser.encode_batch(items)
    if ser.decode_into(data, inboxes) is None:  # the pure path
        _native.deliver_items(inboxes, ser.decode_batch(data))
    got = inboxes[1]
    assert [m[1] for m in got] == acked + strangers
    _native.acker_run(acker, got.popleft, len(acked) + len(strangers), 2.0, deliver)
    assert replies == [(ACKED, root) for root in acked]
    left = {root for b in acker.pending._buckets for root in b}
    assert left == (set(roots) - set(acked)) | set(strangers)
