"""The outbox (`squall._native.Outbox`): what a worker queues for a peer, written as the batch's
bytes at emit when it is plain (compiled), and kept as objects otherwise. Whatever was written or
kept, the peer's serializer must get back every item, each task's in the order it was sent, and
a value that cannot be sent must still raise at the emit."""

import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest
from doubles import wait_until

from squall import BasicBolt, Bolt, Config, Fields, TopologyBuilder, _native
from squall._config import topology_conf
from squall._tuple import Source, Tuple
from squall.engine import serialize as serialize_module
from squall.engine.acker import ACK, ACKED, FAIL, INIT
from squall.engine.clock import SimulatedClock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.serialize import PLAIN_TYPES, SerializationError, Serializer
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import FeederSpout

SOURCES = {
    (3, "words"): Source("split", "words", 3, Fields("word")),
    (8, "words"): Source("split", "words", 8, Fields("word")),
    (1, "default"): Source("spout", "default", 1, Fields("value")),
}
TUPLE_TASKS = (5, 6, 300, 70_000)  # bolt tasks get Tuples, acker tasks acker messages, spout tasks replies
ACKER_TASK, SPOUT_TASK = 1, 4


def serializer() -> Serializer:
    return Serializer({}, lambda task, stream: SOURCES[(task, stream)])


def received(ser: Serializer, chunks: list) -> list:
    """What the peer gets from the chunks `Outbox.take` returned: bytes as sent, lists encoded
    by the serializer at the flush (`BatchingTransport._send_queue`), as ``[(task, item), ...]``."""
    out = []
    for chunk in chunks:
        data = chunk if type(chunk) is bytes else ser.encode_batch(chunk)
        items = ser.decode_batch(data)
        out += zip(items[::2], items[1::2])
    return out


def key(item):
    """What must come back of an item: a Tuple's values, source, root and edge; a message's fields."""
    if type(item) is Tuple:
        return ("T", [(type(v), v) for v in item.values], item._src.task, item._src.stream, item._root, item._val)
    return ("M", [(type(v), v) for v in item])


def by_task(pairs) -> dict:
    tasks: dict = {}
    for task, item in pairs:
        tasks.setdefault(task, []).append(key(item))
    return tasks


def random_items(rnd: random.Random, n: int, odd: float = 0.0) -> list:
    """``n`` (task, item) pairs as W1's workers send them: runs of word Tuples of a few sources,
    tracked or not, sharing a root within a sentence, with acker messages and spout replies
    between them; with ``odd``, that share of the Tuples has a value that is not plain."""
    srcs = list(SOURCES.values())
    items, root = [], 0
    for i in range(n):
        kind = rnd.random()
        if kind < 0.75:
            if rnd.random() < 0.3:  # a new sentence: a new root (or an untracked one)
                root = rnd.choice((0, 1, 2**64 - 1, rnd.getrandbits(64)))
            values = [rnd.choice(("the", "fox", "日本", "", 7, -3, 2.5, None, True, b"\x00"))
                      for _ in range(rnd.choice((0, 1, 1, 2, 16)))]
            if rnd.random() < odd:
                values.append({"not": ("plain",)})
            tup = Tuple(values, srcs[i // 9 % 3], root, rnd.getrandbits(64) if root else 0)
            items.append((rnd.choice(TUPLE_TASKS), tup))
        elif kind < 0.9:
            items.append((ACKER_TASK, (rnd.choice((INIT, ACK, FAIL)), rnd.getrandbits(64), rnd.getrandbits(63), 4)))
        else:
            items.append((SPOUT_TASK, (ACKED, rnd.getrandbits(64), rnd.random())))
    return items


def send_all(items, outbox: _native.Outbox, ser: Serializer) -> None:
    senders = {}
    for task, item in items:
        if task not in senders:
            senders[task] = _native.sender(outbox, task, Tuple, PLAIN_TYPES, ser.check)
        senders[task](item)


@pytest.mark.parametrize("odd", [0.0, 0.05])
def test_every_item_comes_back_to_its_task_in_the_order_it_was_sent(odd):
    """Plain items are written at emit, others kept as objects between them; the peer gets the
    same items, each task's in order, in batches of at most max_items."""
    ser = serializer()
    for seed in range(5):
        rnd = random.Random(seed)
        items = random_items(rnd, rnd.choice((1, 17, 500, 3000)), odd)
        outbox = _native.Outbox(1000, 1 << 20)
        send_all(items, outbox, ser)
        assert len(outbox) == len(items)
        chunks = outbox.take()
        assert len(outbox) == 0 and outbox.take() == []
        assert by_task(received(ser, chunks)) == by_task(items)
        if _native.COMPILED and odd == 0.0:  # nothing kept: every chunk a whole batch, none over max_items
            assert all(type(c) is bytes for c in chunks) and len(chunks) == -(-len(items) // 1000)


@pytest.mark.skipif(not _native.COMPILED, reason="pure path (SQUALL_PURE_PYTHON): the outbox keeps every item "
                    "as it is, and the serializer encodes them at the flush")
@pytest.mark.parametrize("seed", range(4))
def test_runs_of_words_keep_to_the_batch_s_bounds_and_come_back_in_order(seed):
    """Long runs of one-word Tuples (W1's split: after a word written with a look at the batch's
    room, the next ones of its run go without), now and then broken by an acker message, a Tuple
    of several values, a new root or another source, into outboxes with small bounds: every batch
    stays within max_items and max_bytes, and the peer gets every item back, in order."""
    rnd = random.Random(seed)
    ser = serializer()
    for max_items, max_bytes in ((7, 1 << 20), (1000, 300), (1000, 2000), (50, 4096), (1000, 1 << 20)):
        items: list = []
        root, src = 1, SOURCES[(3, "words")]
        for i in range(3000):
            r = rnd.random()
            if r < 0.02:
                items.append((ACKER_TASK, (ACK, rnd.getrandbits(64), rnd.getrandbits(63), 4)))
            elif r < 0.03:
                items.append((rnd.choice(TUPLE_TASKS), Tuple(["a", i, 2.5], src, root, rnd.getrandbits(64))))
            else:
                if r < 0.05:
                    src = rnd.choice(list(SOURCES.values()))
                if r < 0.2:
                    root = rnd.getrandbits(64) or 1
                word = "".join(rnd.choice("abcxyz") for _ in range(rnd.choice((0, 1, 5, 12, 31))))
                items.append((rnd.choice(TUPLE_TASKS[:2]), Tuple([word], src, root, rnd.getrandbits(64))))
        outbox = _native.Outbox(max_items, max_bytes)
        send_all(items, outbox, ser)
        chunks = outbox.take()
        assert all(type(c) is bytes for c in chunks)
        for c in chunks:
            assert len(c) <= max_bytes, (max_items, max_bytes)
            assert len(ser.decode_batch(c)) // 2 <= max_items, (max_items, max_bytes)
        assert by_task(received(ser, chunks)) == by_task(items)


@pytest.mark.skipif(not _native.COMPILED, reason="pure path (SQUALL_PURE_PYTHON): the outbox keeps every item "
                    "as it is, and the serializer encodes them at the flush")
def test_a_batch_written_at_emit_is_the_batch_the_serializer_writes():
    """The bytes of a batch written item by item at emit are those `pack_batch` (msgpack's,
    byte for byte) writes for the same items at the flush, so any receiver decodes them."""
    rnd = random.Random(11)
    for n in (1, 2, 15, 16, 17, 300, 2000):
        items = random_items(rnd, n)
        outbox = _native.Outbox(n, 1 << 24)
        for task, item in items:
            outbox.put(task, item, Tuple)
        [data] = outbox.take()
        assert data == _native.pack_batch([x for pair in items for x in pair], Tuple)


def test_a_value_that_cannot_be_sent_raises_at_the_emit_and_is_not_queued():
    ser = serializer()
    outbox = _native.Outbox(100, 1 << 20)
    send = _native.sender(outbox, 5, Tuple, PLAIN_TYPES, ser.check)
    send(Tuple(["ok"], SOURCES[(3, "words")], 9, 10))
    with pytest.raises(SerializationError):
        send(Tuple([threading.Lock()], SOURCES[(3, "words")], 9, 11))
    send(Tuple(["after"], SOURCES[(3, "words")], 9, 12))
    assert len(outbox) == 2
    assert [item.values for _, item in received(ser, outbox.take())] == [["ok"], ["after"]]


@pytest.mark.skipif(not _native.COMPILED, reason="pure path (SQUALL_PURE_PYTHON): the outbox keeps every item")
def test_an_item_too_large_for_a_batch_written_at_emit_is_kept_for_the_serializer():
    """An item of more than half a batch's bytes is kept as it is, so the transport can send it
    alone or refuse it (`BatchingTransport._send_batch`); the batch before it is closed first."""
    src = SOURCES[(3, "words")]
    outbox = _native.Outbox(100, 10_000)
    outbox.put(5, Tuple(["small"], src, 1, 2), Tuple)
    big = Tuple(["x" * 6000], src, 1, 3)
    outbox.put(5, big, Tuple)
    outbox.put(5, Tuple(["small again"], src, 1, 4), Tuple)
    chunks = outbox.take()
    assert [type(c) for c in chunks] == [bytes, list, bytes]
    assert chunks[1] == [5, big]
    for _ in range(40):  # 40 items of ~1 KB: closed into batches of under 10,000 bytes
        outbox.put(5, Tuple(["y" * 1000], src, 1, 5), Tuple)
    chunks = outbox.take()
    assert all(type(c) is bytes and len(c) < 10_000 for c in chunks) and len(chunks) >= 4
    assert sum(len(ser_items) // 2 for ser_items in (serializer().decode_batch(c) for c in chunks)) == 40


def test_an_outbox_that_does_not_write_keeps_every_item_as_it_is():
    """A transport whose serializer is not squall's (another format) gets every item itself."""
    outbox = _native.Outbox(100, 1 << 20, write=False)
    tup = Tuple(["w"], SOURCES[(3, "words")], 1, 2)
    outbox.put(5, tup, Tuple)
    outbox.put(ACKER_TASK, (ACK, 1, 2, 4), Tuple)
    assert outbox.take() == [[5, tup, ACKER_TASK, (ACK, 1, 2, 4)]]


def test_senders_on_several_threads_lose_nothing_while_another_takes():
    """A bolt's own threads emit while a loop flushes: every item is taken once, each thread's
    items in the order it sent them."""
    ser = serializer()
    outbox = _native.Outbox(256, 1 << 20)
    taken: list = []
    done = threading.Event()

    def taker():
        while not done.is_set():
            taken.extend(outbox.take())
        taken.extend(outbox.take())

    def emitter(k):
        send = _native.sender(outbox, TUPLE_TASKS[k], Tuple, PLAIN_TYPES, ser.check)
        for i in range(5000):
            send(Tuple([i], SOURCES[(3, "words")], k + 1, i))

    t = threading.Thread(target=taker)
    t.start()
    emitters = [threading.Thread(target=emitter, args=(k,)) for k in range(3)]
    for e in emitters:
        e.start()
    for e in emitters:
        e.join()
    done.set()
    t.join()
    got = by_task(received(ser, taken))
    for k in range(3):
        assert [values[0][1] for _, values, *_ in got[TUPLE_TASKS[k]]] == list(range(5000))


class Split(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["word"]))

    def execute(self, tup, collector):
        for word in tup[0].split():
            collector.emit([word])


class PlainSplit(Bolt):
    """`Split` as a plain Bolt: it anchors its words and acks its input itself."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["word"]))

    def execute(self, tup):
        for word in tup[0].split():
            self.collector.emit([word], anchors=[tup])
        self.collector.ack(tup)


class OutboxTransport(InMemoryTransport):
    """An in-memory transport whose senders to the other worker write into one outbox, as the
    process host's do."""

    def __init__(self):
        super().__init__(InMemoryNetwork(), "here")
        self.outbox = _native.Outbox(2048, 1 << 20)

    def sender(self, task_id):
        return _native.sender(self.outbox, task_id, Tuple, PLAIN_TYPES, lambda tup: None)


@dataclass
class SplitCountHere:
    """W1's shape on 2 workers, this worker's half: feed -> split here, count (by word) in the
    other worker, one acker."""

    plan: Any
    remote: set[int]  # the count tasks, in the other worker
    feed: FeederSpout
    worker: Worker     # not started
    spout: Any         # the feed's executor


def split_count_here(transport, acker_there: bool = False, split: Any = None) -> SplitCountHere:
    """`SplitCountHere` on ``transport``, whose peers are set to the count tasks (and the acker,
    with ``acker_there``); the split is ``split`` (a `Split` by default)."""
    feed = FeederSpout(Fields(["sentence"]))
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("split", split if split is not None else Split()).shuffle_grouping("feed")
    b.set_bolt("count", Split()).fields_grouping("split", Fields(["word"]))
    conf = Config()
    conf.set_num_workers(2)
    conf.set_num_ackers(1)
    conf.set_message_timeout_secs(30)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    remote = set(plan.component_tasks["count"]) | (set(plan.acker_tasks) if acker_there else set())
    transport.set_peers({t: "there" for t in remote})
    local = [e for e in plan.executors if not set(e.tasks) & remote]
    worker = Worker(plan, 1, local, component_blobs(plan), transport, SimulatedClock(),
                    TopologyActivation(active=True), Backpressure(1000), lambda rec: None, lambda w, rec: None, 7)
    spout = next(ex for ex in worker.executors if ex.component == "feed")
    return SplitCountHere(plan, remote, feed, worker, spout)


SENTENCES = ["the quick brown fox", "jumps over", "the lazy dog", " ".join(f"w{i}" for i in range(40))]


def feed_sentences(run: SplitCountHere) -> tuple[list[str], Serializer]:
    """Feed `SENTENCES` to ``run``'s spout (message ids m0, m1, ...); return their words, in
    order, and a Serializer that decodes the split's words as the other worker would."""
    for i, s in enumerate(SENTENCES):
        run.feed.feed([s], f"m{i}")
    src = Source("split", "default", run.plan.component_tasks["split"][0], Fields(["word"]))
    return " ".join(SENTENCES).split(), Serializer({}, lambda task, stream: src)


def test_a_tracked_emit_to_another_worker_is_written_with_its_root_and_a_new_edge():
    """A BasicBolt's emit to a task in another worker (written at the emit, compiled, with no
    Tuple made) carries its input's root and an edge id of its own; the tree stays open until the
    other worker acks those edges."""
    transport = OutboxTransport()
    run = split_count_here(transport)
    plan, remote, feed, worker, spout = run.plan, run.remote, run.feed, run.worker, run.spout
    sentences = ["the quick brown fox", "jumps over", "the lazy dog"]
    for i, s in enumerate(sentences):
        feed.feed([s], f"m{i}")
    worker.start()
    try:
        assert wait_until(lambda: len(transport.outbox) == 9)
    finally:
        worker.stop()
    src = Source("split", "default", plan.component_tasks["split"][0], Fields(["word"]))
    ser = Serializer({}, lambda task, stream: src)
    got = received(ser, transport.outbox.take())
    assert [t.values[0] for _, t in got] == " ".join(sentences).split()
    roots = [root for bucket in spout.pending._buckets for root in bucket]
    assert sorted({t._root for _, t in got}) == sorted(roots) and len(roots) == 3  # a tree per sentence, open
    edges = [t._val for _, t in got]
    assert all(0 < e < 2**64 for e in edges) and len(set(edges)) == 9
    assert all(task in remote for task, _ in got)


def test_a_received_run_s_edge_values_are_read_as_bits_and_anything_else_is_msgpack_s():
    """The decoder reads a run's edge values straight into the Tuples' 64 bits; a batch whose
    values are not such ints (a peer's bug, or bytes made by hand) gets what msgpack's path makes
    of it: the same Tuples, or the same error."""
    import msgpack

    ser = serializer()
    src = SOURCES[(3, "words")]
    edges = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1]
    items = [x for i, e in enumerate(edges) for x in (5, Tuple([f"w{i}"], src, 9, e))]
    back = ser.decode_batch(ser.encode_batch(items))
    assert [t._val for t in back[1::2]] == edges and {t._root for t in back[1::2]} == {9}
    for bad in (-1, None, "x", 1.0):
        batch = msgpack.packb([2, [[3, "words", [5, 5], [["a"], ["b"]], [9, None], [7, bad]]], [], [], [], []])
        assert outcome(ser.decode_batch, batch) == outcome(msgpack_path(ser), batch), bad


def outcome(decode, data):
    """What ``decode`` makes of ``data``: its Tuples' fields, or the type of its error."""
    try:
        items = decode(data)
    except SerializationError as e:
        return type(e)
    return [(task, t.values, t._root, t._val) for task, t in zip(items[::2], items[1::2])]


def msgpack_path(ser):
    """``ser.decode_batch`` with the compiled decoder's quick path left out."""
    def decode(data):
        real = serialize_module.unpack_batch
        serialize_module.unpack_batch = lambda *args: None
        try:
            return ser.decode_batch(data)
        finally:
            serialize_module.unpack_batch = real
    return decode


def test_the_edge_ids_an_outbox_draws_are_the_ones_the_receiver_reads_and_their_acks_complete_the_trees():
    """A tracked emit written to an outbox (compiled) has its edge id drawn there, and its run
    carries only the first state: what the other worker decodes (compiled, or msgpack's path) are
    the ids the emitting task xored into its ack, so acking each received tuple once completes
    every tree, and a wrong id completes none."""
    transport = OutboxTransport()
    transport.outbox = _native.Outbox(2048, 1 << 20, seed=12345)
    run = split_count_here(transport)
    plan, worker, spout = run.plan, run.worker, run.spout
    sentences = SENTENCES
    words, ser = feed_sentences(run)
    pending = lambda: [root for bucket in spout.pending._buckets for root in bucket]
    acker = plan.acker_tasks[0]
    worker.start()
    try:
        assert wait_until(lambda: len(transport.outbox) == len(words))
        chunks = transport.outbox.take()
        got = received(ser, chunks)
        assert [t.values[0] for _, t in got] == words
        if _native.COMPILED:  # the ids are not on the wire: each run carries its first state
            data = b"".join(c for c in chunks if type(c) is bytes)
            assert len(data) < sum(len(w) for w in words) + 12 * len(words)
            assert outcome(ser.decode_batch, chunks[0]) == outcome(msgpack_path(ser), chunks[0])
        assert len({t._val for _, t in got}) == len(words) and len(pending()) == len(sentences)
        first = {}  # each tree's first received tuple
        for _, t in got:
            first.setdefault(t._root, t)
        wrong = [(ACK, t._root, t._val ^ 1, -1) for t in first.values()]
        for msg in wrong:  # each tree acked with every id right but one: none completes
            worker.receive(acker, msg)
        for _, t in got:
            if t is not first[t._root]:
                worker.receive(acker, (ACK, t._root, t._val, -1))
        time.sleep(0.2)
        assert len(pending()) == len(sentences)
        for msg in wrong:  # the wrong one again undoes it, and the right one completes each tree
            worker.receive(acker, msg)
        for t in first.values():
            worker.receive(acker, (ACK, t._root, t._val, -1))
        assert wait_until(lambda: not pending())
    finally:
        worker.stop()


@pytest.mark.parametrize("split", [Split, PlainSplit])
def test_a_bolt_s_ack_to_an_acker_in_another_worker_carries_its_tree_s_xor(split):
    """A BasicBolt's or a plain Bolt's ack of a tree whose acker is in another worker (written
    into the outbox from its numbers, without an int or a tuple, compiled) reaches it as (ACK,
    root, x, -1): with the spout's init and the acks of the tuples it emitted there, each tree's
    values xor to zero, as the acker needs."""
    transport = OutboxTransport()
    run = split_count_here(transport, acker_there=True, split=split())
    plan, worker = run.plan, run.worker
    sentences = SENTENCES
    words, ser = feed_sentences(run)
    worker.start()
    try:  # each sentence: its words, the spout's init, the split's ack
        assert wait_until(lambda: len(transport.outbox) == len(words) + 2 * len(sentences))
    finally:
        worker.stop()
    got = received(ser, transport.outbox.take())
    acker = plan.acker_tasks[0]
    tuples = [t for _, t in got if type(t) is Tuple]
    messages = [m for task, m in got if task == acker]
    assert [t.values[0] for t in tuples] == words and len(messages) == 2 * len(sentences)
    inits = {m[1]: m for m in messages if m[0] == INIT}
    acks = {m[1]: m for m in messages if m[0] == ACK}
    assert set(inits) == set(acks) == {t._root for t in tuples} and len(inits) == len(sentences)
    assert all(type(m) is tuple and len(m) == 4 and m[3] == -1 for m in acks.values())
    for root in inits:
        x = inits[root][2] ^ acks[root][2]
        for t in tuples:
            if t._root == root:
                x ^= t._val  # the count task's ack of it
        assert x == 0
