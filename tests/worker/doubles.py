"""What tests/worker's transport tests share (this directory is not a package: its tests import
this module by name, as pytest puts the directory on the path)."""

import threading
import time

import msgpack

STORM = "topo-1-1"


def wait_until(pred, timeout=5.0):
    """Poll ``pred`` until true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return bool(pred())


class PlainSerializer:
    """Test double: items are plain msgpack-able tuples (given flat: task, item, task, item, ...)."""

    def encode_batch(self, items):
        return msgpack.packb([[t, list(i)] for t, i in zip(items[::2], items[1::2])])

    def decode_batch(self, data):
        return [x for t, i in msgpack.unpackb(data) for x in (t, tuple(i))]

    def check(self, tup):
        pass


class Collect:
    """A receiver that records ``(task, item)`` pairs, thread-safely."""

    def __init__(self):
        self.got = []
        self._lock = threading.Lock()

    def __call__(self, task, item):
        with self._lock:
            self.got.append((task, item))
