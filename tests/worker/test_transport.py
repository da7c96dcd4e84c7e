"""ZmqTransport: batches reach the worker that hosts a task, and only authenticated ones."""

import threading
import time

import msgpack
from squall.worker.transport import ZmqTransport


class PlainSerializer:
    """Test double: items are plain msgpack-able tuples."""

    def encode_batch(self, items):
        return msgpack.packb([[t, list(i)] for t, i in items])

    def decode_batch(self, data):
        return [(t, tuple(i)) for t, i in msgpack.unpackb(data)]


def _wait(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def test_items_reach_the_peer_worker_in_order_after_a_flush():
    got, lock = [], threading.Lock()

    def receive(task, item):
        with lock:
            got.append((task, item))

    b = ZmqTransport("tcp://127.0.0.1:0", {}, PlainSerializer(), b"s3cret", receive)
    a = ZmqTransport("tcp://127.0.0.1:0", {7: b.address}, PlainSerializer(), b"s3cret")
    try:
        send = a.sender(7)
        for i in range(5000):
            send((1, i, 0, -1))
        assert got == []  # nothing leaves before a flush
        a.flush()
        assert _wait(lambda: len(got) == 5000)
        assert got == [(7, (1, i, 0, -1)) for i in range(5000)]
    finally:
        a.close()
        b.close()


def test_a_batch_under_another_secret_is_dropped_unread():
    got = []
    decoded = []

    class Watching(PlainSerializer):
        def decode_batch(self, data):
            decoded.append(data)
            return super().decode_batch(data)

    b = ZmqTransport("tcp://127.0.0.1:0", {}, Watching(), b"right", lambda t, i: got.append(i))
    a = ZmqTransport("tcp://127.0.0.1:0", {7: b.address}, PlainSerializer(), b"wrong")
    try:
        a.sender(7)((1, 2, 3, 4))
        a.flush()
        assert _wait(lambda: b.dropped == 1)
        assert got == [] and decoded == []  # never handed to the decoder (it may unpickle)
    finally:
        a.close()
        b.close()


def test_set_peers_moves_a_peer_to_its_new_address_under_the_same_sender():
    """A peer worker restarted elsewhere (a Spark task on another executor): the sender the
    executor holds goes on working, now to the new address."""
    old_got, new_got = [], []
    old = ZmqTransport("tcp://127.0.0.1:0", {}, PlainSerializer(), b"k", lambda t, i: old_got.append(i))
    new = ZmqTransport("tcp://127.0.0.1:0", {}, PlainSerializer(), b"k", lambda t, i: new_got.append(i))
    a = ZmqTransport("tcp://127.0.0.1:0", {}, PlainSerializer(), b"k")
    try:
        a.set_peers({3: old.address, 4: old.address})
        send3, send4 = a.sender(3), a.sender(4)
        send3((1,))
        a.flush()
        assert _wait(lambda: old_got == [(1,)])
        a.set_peers({3: new.address, 4: new.address})
        send3((2,))
        send4((3,))
        a.flush()
        assert _wait(lambda: sorted(new_got) == [(2,), (3,)])
        assert old_got == [(1,)]
    finally:
        for t in (a, old, new):
            t.close()
