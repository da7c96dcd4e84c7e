"""BatchingTransport.flush_due: while a worker's loop works, a peer's items wait for more until
they fill a message (``topology.transfer.batch.size``) or the flush interval
(``topology.batch.flush.interval.millis``) has passed, so one message carries several rounds'
items; `flush` (a loop about to sleep, a broadcast) sends everything at once. Driven by a clock
the test moves, so nothing here depends on the machine's speed."""

import pytest

from squall._config import Config
from squall._errors import SquallError
from squall.worker.batching import BatchingTransport
from squall.worker.envelope import DATA, Opener, Origin
from squall.worker.process import _transport_options

from doubles import STORM, PlainSerializer

SECRET = b"s3cret"
PEER = "tcp://127.0.0.1:2"


class Recording(BatchingTransport):
    """A BatchingTransport whose wire keeps the sealed messages, opened as the peer would."""

    def __init__(self, clock, **kw):
        super().__init__({7: PEER}, PlainSerializer(), SECRET, None, origin=Origin(STORM, "h:1", 1),
                         max_message_bytes=1 << 20, now=lambda: clock[0], **kw)
        self._listening("tcp://127.0.0.1:1")
        self.peer = Opener(SECRET, STORM, PEER)
        self.messages = []  # the items of each batch sent, in order
        self.controls = 0

    def _send(self, key, message):
        header, data = self.peer.open(message)
        if header.kind == DATA:
            self.messages.append(PlainSerializer().decode_batch(bytes(data))[1::2])
        else:
            assert len(self.messages) == 3  # after the batch queued before it
            self.controls += 1

    def _moved(self, key):
        pass

    def poll(self):
        return 0

    def close(self):
        self._closed = True


def test_a_working_loop_sends_several_rounds_items_in_one_message_within_the_interval():
    clock = [100.0]
    t = Recording(clock, transfer_batch_size=1000, flush_interval_ms=2)
    send = t.sender(7)
    sent = 0
    for _ in range(3):  # three rounds 0.5 ms apart: the first round's items are not 2 ms old yet
        for _ in range(10):
            send((sent,))
            sent += 1
        t.flush_due()
        clock[0] += 0.0005
    assert t.messages == []
    clock[0] += 0.001  # 2 ms since the call before the one that first found the items
    t.flush_due()
    assert t.messages == [[(i,) for i in range(30)]]
    # after a message, the interval starts again for the next items
    send((30,))
    t.flush_due()
    clock[0] += 0.0019
    t.flush_due()
    assert len(t.messages) == 1
    clock[0] += 0.0002
    t.flush_due()
    assert t.messages[1] == [(30,)]
    assert sum(len(m) for m in t.messages) == 31


def test_a_full_message_goes_at_once_and_flush_sends_everything():
    clock = [5.0]
    t = Recording(clock, transfer_batch_size=8, flush_interval_ms=1000)
    send = t.sender(7)
    for i in range(5):
        send((i,))
    t.flush_due()
    assert t.messages == []  # 5 of 8, and young
    for i in range(5, 12):
        send((i,))
    t.flush_due()  # 12 queued: at least a message's worth, however young
    assert t.messages == [[(i,) for i in range(12)]]
    send((12,))
    t.flush_due()
    assert len(t.messages) == 1
    t.flush()  # a loop about to sleep: nothing waits
    assert t.messages[1] == [(12,)]
    send((13,))
    t.broadcast({"over": True})  # items queued before a broadcast go before it
    assert t.messages[2] == [(13,)] and t.controls == 1
    assert [x for m in t.messages for x in m] == [(i,) for i in range(14)]


def test_an_interval_of_zero_sends_after_every_round_as_before():
    clock = [0.0]
    t = Recording(clock, transfer_batch_size=1000, flush_interval_ms=0)
    send = t.sender(7)
    for i in range(3):
        send((i,))
        t.flush_due()
    assert t.messages == [[(0,)], [(1,)], [(2,)]]


def test_the_topology_sets_the_batching_and_a_bad_value_names_its_key():
    cluster = {Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS: 3}
    options = _transport_options(cluster, {Config.TOPOLOGY_TRANSFER_BATCH_SIZE: 500})
    assert options["flush_interval_ms"] == 3 and options["transfer_batch_size"] == 500
    options = _transport_options(cluster, {Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS: 0.5})
    assert options["flush_interval_ms"] == 0.5
    with pytest.raises(SquallError, match="topology.batch.flush.interval.millis"):
        _transport_options({}, {Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS: -1})
    with pytest.raises(SquallError, match="topology.transfer.batch.size"):
        _transport_options({Config.TOPOLOGY_TRANSFER_BATCH_SIZE: 0}, {})


def test_a_peer_is_said_unreachable_within_half_the_topologys_message_timeout_between_3_and_10_s():
    """With topology.message.timeout.secs under ~10 s, the tuples that crossed to a peer cut off
    timed out before the wires' fixed 10 s bound named it, and a spout's warning blamed
    topology.max.spout.pending: the bound (both wires') is now half the message timeout, 3 to 10 s."""
    timeout = Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS
    assert _transport_options({}, None)["silent_secs"] == 10.0  # the default 30 s
    assert _transport_options({}, {timeout: 10})["silent_secs"] == 5.0
    assert _transport_options({timeout: 8}, {})["silent_secs"] == 4.0  # the cluster's, where the topology sets none
    assert _transport_options({}, {timeout: 2})["silent_secs"] == 3.0
    assert _transport_options({}, {timeout: 120})["silent_secs"] == 10.0
