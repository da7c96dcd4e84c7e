"""ZmqTransport: batches reach the worker that hosts a task, and only authenticated ones."""

import threading
import time

import msgpack
import pytest

from squall import Fields
from squall._tuple import Source, Tuple
from squall.engine.serialize import SerializationError, Serializer
from squall.worker.transport import ZmqTransport


class PlainSerializer:
    """Test double: items are plain msgpack-able tuples."""

    def encode_batch(self, items):
        return msgpack.packb([[t, list(i)] for t, i in items])

    def decode_batch(self, data):
        return [(t, tuple(i)) for t, i in msgpack.unpackb(data)]

    def check(self, tup):
        pass


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


class _Opaque:
    """A type no serializer is registered for."""


def _tuple_transport(got, **conf):
    """Two transports with squall's real serializer; tuples to task 7 reach ``got``."""
    src = Source("emitter", "out", 1, Fields("v"))
    b = ZmqTransport("tcp://127.0.0.1:0", {}, Serializer(conf, lambda t, s: src), b"k", lambda t, i: got.append(i))
    a = ZmqTransport("tcp://127.0.0.1:0", {7: b.address}, Serializer(conf, lambda t, s: src), b"k")
    return a, b, src


@pytest.mark.parametrize("value, conf, named", [
    (_Opaque(), {"topology.fall.back.on.pickle": False}, f"{__name__}._Opaque"),
    (threading.Lock(), {}, "_thread.lock"),
    ("deep", {}, "nested 5000 levels deep"),
], ids=["pickle-off", "unpicklable", "deep"])
def test_a_value_that_cannot_be_sent_fails_its_emit_naming_component_stream_and_type_or_depth(value, conf, named):
    """Issue 10: such a value used to fail the whole batch at flush, after the emit had
    returned, crashing the worker again on every replay. Now the sender, called inside the
    emit, raises; nothing of it is queued, and the batch's other tuples still go."""
    if value == "deep":
        value = []
        for _ in range(4999):
            value = [value]  # 5000 lists, one in another
    got = []
    a, b, src = _tuple_transport(got, **conf)
    try:
        send = a.sender(7)
        with pytest.raises(SerializationError) as info:
            send(Tuple([value], src))
        assert "component [emitter]" in str(info.value) and "stream [out]" in str(info.value)
        assert named in str(info.value)
        send(Tuple(["fine", 1], src))
        a.flush()
        assert _wait(lambda: len(got) == 1)
        assert got[0].values == ["fine", 1]
    finally:
        a.close()
        b.close()


def test_a_value_changed_after_its_emit_is_dropped_at_flush_and_logged_once(caplog):
    got = []
    a, b, src = _tuple_transport(got, **{"topology.fall.back.on.pickle": False})
    try:
        send = a.sender(7)
        kept = ["ok"]
        for _ in range(3):
            send(Tuple([kept], src))
        send(Tuple(["fine"], src))
        kept.append(_Opaque())  # the component changed a value it had emitted
        a.flush()  # must not raise into the loop
        assert _wait(lambda: len(got) == 1)
        assert got[0].values == ["fine"]
        assert len([r for r in caplog.records if "_Opaque" in r.getMessage()]) == 1
    finally:
        a.close()
        b.close()
