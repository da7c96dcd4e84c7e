"""ZmqTransport: batches reach the worker that hosts a task, only authenticated ones, once, and
no larger than the configured bound; optionally over CurveZMQ."""

import logging
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import zmq

from squall import Fields
from squall._tuple import Source, Tuple
from squall.engine.serialize import SerializationError, Serializer
from squall.worker.envelope import Origin
from squall.worker.reconnect import TCP_RTO_MAX_MS
from squall.worker.tcp_info import Unacknowledged, borrowed
from squall.worker import transport as transport_module
from squall.worker.transport import ZmqTransport

from doubles import STORM, Collect, PlainSerializer, wait_until


def transport(secret=b"s3cret", receive=None, slot="h:1", launch=1, storm=STORM, peers=None, **kw):
    """A transport on a free loopback port, as worker ``slot`` (launch ``launch``) of ``storm``."""
    return ZmqTransport("tcp://127.0.0.1:0", peers or {}, PlainSerializer(), secret, receive,
                        origin=Origin(storm, slot, launch), **kw)


def capture(t):
    """Record every message ``t`` receives, as it came off the wire."""
    seen = []
    handle = t._handle

    def tapped(message):
        seen.append(message)
        handle(message)
    t._handle = tapped
    return seen


def send_raw(address, message, n=1, **sockopts):
    """Send ``message`` (bytes, or a list of frames) ``n`` times from a plain PUSH socket, as an
    attacker on the network would."""
    sock = zmq.Context.instance().socket(zmq.PUSH)
    for opt, value in sockopts.items():
        setattr(sock, opt, value)
    sock.setsockopt(zmq.LINGER, 10_000)
    sock.connect(address)
    for _ in range(n):
        if isinstance(message, bytes):
            sock.send(message)
        else:
            sock.send_multipart(message)
    sock.close()


def test_a_worker_s_loops_take_whole_batches_with_poll_in_order(monkeypatch):
    """Wired to a worker (``on_arrival`` set), the receiving thread only authenticates a batch:
    it waits for a loop's `poll`, which delivers its items at once, however many batches came
    meanwhile. A batch that has waited longer than ``STALE_SECS`` when the next arrives, or more
    than ``STALE_MESSAGES`` batches waiting (the loops are in a long round: a slow bolt), are
    delivered by the receiving thread, so that the inboxes and backpressure see every item;
    order is kept either way."""
    batches, arrivals = [], []
    b = transport(slot="h:2")
    b.set_receiver(lambda task, item: pytest.fail("items of a batch go to receive_batch"),
                   lambda items: batches.append(list(zip(items[::2], items[1::2]))) or len(items) // 2)
    b.on_arrival = lambda: arrivals.append(1)
    a = transport(peers={7: b.address})
    monkeypatch.setattr(transport_module, "STALE_SECS", 60.0)
    try:
        send = a.sender(7)
        for i in range(1000):  # one batch
            send((1, i, 0, -1))
        a.flush()
        assert wait_until(lambda: len(arrivals) == 1)
        assert batches == []  # nothing is delivered on the receiving thread
        assert b.poll() == 1000
        assert [item for batch in batches for item in batch] == [(7, (1, i, 0, -1)) for i in range(1000)]
        assert b.poll() == 0
        batches.clear()
        for i in range(5000):  # three batches (MAX_BATCH), long before the first is stale
            send((1, i, 0, -1))
        a.flush()
        assert wait_until(lambda: len(arrivals) == 2)  # one wake-up, for the first
        time.sleep(0.2)
        assert batches == []  # all wait for the loop, which takes them at once
        assert b.poll() == 5000
        assert [item for batch in batches for item in batch] == [(7, (1, i, 0, -1)) for i in range(5000)]
        batches.clear()
        monkeypatch.setattr(transport_module, "STALE_SECS", 0.01)
        for i in range(1000):
            send((1, i, 0, -1))
        a.flush()
        assert wait_until(lambda: len(arrivals) == 3)
        time.sleep(0.1)  # no loop polls: the batch goes stale
        for i in range(1000, 2000):
            send((1, i, 0, -1))
        a.flush()
        assert wait_until(lambda: sum(map(len, batches)) == 2000)  # the receiving thread delivered
        assert [item for batch in batches for item in batch] == [(7, (1, i, 0, -1)) for i in range(2000)]
        batches.clear()
        monkeypatch.setattr(transport_module, "STALE_SECS", 60.0)
        for n in range(transport_module.STALE_MESSAGES + 2):  # a flood of small batches, none stale
            send((1, n, 0, -1))
            a.flush()
        # more than STALE_MESSAGES waiting: the receiving thread delivers them, in order
        assert wait_until(lambda: sum(map(len, batches)) == transport_module.STALE_MESSAGES + 1)
        assert [item for batch in batches for item in batch] == [
            (7, (1, n, 0, -1)) for n in range(transport_module.STALE_MESSAGES + 1)]
    finally:
        a.close()
        b.close()


def test_a_loop_s_poll_checks_and_delivers_batches_and_control_messages_in_the_order_sent(monkeypatch):
    """Wired to a worker, the receiving thread only queues what it receives: a control message
    (backpressure, load, dropped items) waits with the batches sent before it and is handled
    after them, on the loop's thread, as `Transport.broadcast` promises; a forged message is
    counted when a loop looks at it."""
    events = []
    b = transport(slot="h:2")
    b.set_receiver(lambda task, item: pytest.fail("items of a batch go to receive_batch"),
                   lambda items: events.append(("batch", len(items) // 2)) or len(items) // 2)
    b.set_control_handler(lambda sender, msg: events.append(("control", sender, msg)))
    arrivals = []
    b.on_arrival = lambda: arrivals.append(1)
    a = transport(peers={7: b.address})
    monkeypatch.setattr(transport_module, "STALE_SECS", 60.0)
    try:
        send = a.sender(7)
        for i in range(10):
            send((1, i, 0, -1))
        a.broadcast({"over": True})  # after the batch queued before it
        send_raw(b.address, b"\0" * 200)  # not from a worker of this cluster
        assert wait_until(lambda: arrivals)
        time.sleep(0.2)
        assert events == [] and b.dropped == 0  # all of it waits for a loop
        assert wait_until(lambda: b.poll() or events)
        assert wait_until(lambda: b.poll() == 0 and b.dropped == 1)
        assert events == [("batch", 10), ("control", "h:1", {"over": True})]
        assert b.statistics()["dropped"]["unauthenticated"] == 1
    finally:
        a.close()
        b.close()


def test_items_reach_the_peer_worker_in_order_after_a_flush():
    got = Collect()
    b = transport(receive=got, slot="h:2")
    a = transport(peers={7: b.address})
    try:
        send = a.sender(7)
        for i in range(5000):
            send((1, i, 0, -1))
        assert got.got == []  # nothing leaves before a flush
        a.flush()
        assert wait_until(lambda: len(got.got) == 5000)
        assert got.got == [(7, (1, i, 0, -1)) for i in range(5000)]
        assert b.dropped == 0
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

    b = ZmqTransport("tcp://127.0.0.1:0", {}, Watching(), b"right", lambda t, i: got.append(i),
                     origin=Origin(STORM, "h:2", 1))
    a = transport(secret=b"wrong", peers={7: b.address})
    try:
        a.sender(7)((1, 2, 3, 4))
        a.flush()
        assert wait_until(lambda: b.dropped == 1)
        assert b.statistics()["dropped"]["unauthenticated"] == 1
        assert got == [] and decoded == []  # never handed to the decoder (it may unpickle)
    finally:
        a.close()
        b.close()


def test_set_peers_moves_a_peer_to_its_new_address_under_the_same_sender():
    """A peer worker restarted elsewhere (a Spark task on another executor): the sender the
    executor holds goes on working, now to the new address."""
    old_got, new_got = Collect(), Collect()
    old = transport(receive=old_got, slot="h:2")
    new = transport(receive=new_got, slot="h:2", launch=2)
    a = transport()
    try:
        a.set_peers({3: old.address, 4: old.address})
        send3, send4 = a.sender(3), a.sender(4)
        send3((1,))
        a.flush()
        assert wait_until(lambda: old_got.got == [(3, (1,))])
        a.set_peers({3: new.address, 4: new.address})
        send3((2,))
        send4((3,))
        a.flush()
        assert wait_until(lambda: sorted(new_got.got) == [(3, (2,)), (4, (3,))])
        assert old_got.got == [(3, (1,))]
    finally:
        for t in (a, old, new):
            t.close()


# --- replays (issue 10, item 3) ---------------------------------------------------------------------

def test_a_captured_batch_replayed_into_the_port_is_dropped_and_counted():
    got = Collect()
    b = transport(receive=got, slot="h:2")
    wire = capture(b)
    a = transport(peers={7: b.address})
    try:
        a.sender(7)((1, 2))
        a.flush()
        assert wait_until(lambda: len(got.got) == 1)
        send_raw(b.address, wire[0], n=3)
        assert wait_until(lambda: b.dropped == 3)
        assert b.statistics()["dropped"]["replayed"] == 3
        a.sender(7)((3, 4))  # the genuine sender goes on as before
        a.flush()
        assert wait_until(lambda: len(got.got) == 2)
        assert got.got == [(7, (1, 2)), (7, (3, 4))]  # nothing delivered twice
    finally:
        a.close()
        b.close()


def test_a_batch_copied_to_another_worker_of_the_topology_is_dropped():
    got_b, got_c = Collect(), Collect()
    b = transport(receive=got_b, slot="h:2")
    c = transport(receive=got_c, slot="h:3")
    wire = capture(b)
    a = transport(peers={7: b.address, 8: c.address})
    try:
        a.sender(7)((1,))
        a.flush()
        assert wait_until(lambda: len(got_b.got) == 1)
        send_raw(c.address, wire[0])
        assert wait_until(lambda: c.statistics()["dropped"]["misdirected"] == 1)
        assert got_c.got == []
    finally:
        for t in (a, b, c):
            t.close()


def test_a_batch_of_another_topology_is_dropped_and_counted():
    got = Collect()
    b = transport(receive=got, slot="h:2", storm="new-2-2")
    a = transport(peers={7: b.address}, storm="old-1-1")
    try:
        a.sender(7)((1,))
        a.flush()
        assert wait_until(lambda: b.statistics()["dropped"]["other_topology"] == 1)
        assert got.got == []
    finally:
        a.close()
        b.close()


def test_a_backpressure_message_of_an_old_topology_never_reaches_the_handler():
    """The replayed ``{over: true}`` of a killed topology used to stop a new one's spouts."""
    handled = []
    b = transport(slot="h:2", storm="new-2-2")
    b.set_control_handler(lambda sender, msg: handled.append((sender, msg)))
    old = transport(peers={7: b.address}, storm="old-1-1")
    same = transport(peers={7: b.address}, storm="new-2-2", slot="h:3")
    try:
        old.broadcast({"over": True})
        assert wait_until(lambda: b.statistics()["dropped"]["other_topology"] == 1)
        same.broadcast({"over": False})
        assert wait_until(lambda: handled == [("h:3", {"over": False})])
    finally:
        for t in (old, same, b):
            t.close()


def test_a_restarted_peer_is_heard_and_its_old_launch_no_longer():
    """A legitimate restart: new launch id, sequence numbers from 0 again. The old launch's
    traffic, replayed afterwards, is stale; so is any launch older than the master's."""
    got = Collect()
    b = transport(receive=got, slot="h:2")
    wire = capture(b)
    first = transport(peers={7: b.address}, slot="h:1", launch=1)
    try:
        for i in range(3):
            first.sender(7)((i,))
            first.flush()
        assert wait_until(lambda: len(got.got) == 3)
        first.close()
        second = transport(peers={7: b.address}, slot="h:1", launch=2)
        try:
            second.sender(7)((10,))
            second.flush()
            assert wait_until(lambda: len(got.got) == 4)  # sequence 0 of launch 2 is accepted
            send_raw(b.address, wire[2])  # launch 1's last message
            assert wait_until(lambda: b.statistics()["dropped"]["stale_launch"] == 1)
            b.set_launches({"h:1": 3})  # the master replaced launch 2 too
            second.sender(7)((11,))
            second.flush()
            assert wait_until(lambda: b.statistics()["dropped"]["stale_launch"] == 2)
            assert [i for _, i in got.got] == [(0,), (1,), (2,), (10,)]
        finally:
            second.close()
    finally:
        b.close()


def gone(t, key):
    """Whether ``t`` has heard that its connection to the peer first known as ``key`` went."""
    with t._send_lock:
        t._heard(key)
        return key in t._away


@pytest.mark.parametrize("encryption", ["false", "true"])
def test_what_is_sent_to_a_dead_peer_reaches_its_next_launch_without_another_send(encryption):
    """The peer dies (its worker SIGKILLed: its sockets close) and ZeroMQ sees its connection
    go. What the sender sends meanwhile (the spouts' replays, a burst) must reach the peer's
    next launch at the same address, every item once and in order, with nothing more sent to
    that peer: the transport keeps them (`_unsent`, as many as ZeroMQ's ``SNDHWM`` and
    `MAX_UNSENT` together) until ZeroMQ says the connection is made again. Those used to wait
    for the next message to that peer, which, in a topology whose spouts had nothing more for
    it, came with the replays of their message timeout."""
    got1, got2 = Collect(), Collect()
    b = transport(receive=got1, slot="h:2", encryption=encryption)
    address = b.address
    a = transport(peers={7: address}, encryption=encryption)
    try:
        a.sender(7)((0,))
        a.flush()
        assert wait_until(lambda: got1.got == [(7, (0,))])
        push = next(iter(a._sockets.values()))
        n = push.getsockopt(zmq.SNDHWM) + 50  # more than ZeroMQ holds
        b.close()
        assert wait_until(lambda: gone(a, address), 10), "ZeroMQ did not see the connection go"
        for i in range(1, n + 1):
            a.sender(7)((i,))
            a.flush()
        b = ZmqTransport(address, {}, PlainSerializer(), b"s3cret", got2, origin=Origin(STORM, "h:2", 2),
                         encryption=encryption)
        assert wait_until(lambda: len(got2.got) >= n, timeout=20), f"{len(got2.got)} of {n} arrived"
        assert got2.got == [(7, (i,)) for i in range(1, n + 1)]
    finally:
        a.close()
        b.close()


def test_a_peer_that_cannot_be_reached_is_named_once_counted_and_its_return_said(caplog):
    """Two workers cut off from each other for 25 s on the ZeroMQ wire: no line named the other
    worker, and the topology info's transport figures showed nothing. ZeroMQ now closes such a
    connection (kernel timeouts, the module docstring); whatever closed it, the transport says
    once which worker it cannot reach (address, tasks, components), counts it in `statistics`,
    and says when it is reached again. Here the peer's worker stops and comes back: every item
    sent reaches a launch of it, once."""
    got1, got2 = Collect(), Collect()
    b = transport(receive=got1, slot="h:2")
    address = b.address
    a = transport(peers={7: address, 8: address})
    a.reach.components = lambda tasks: ["sink"]
    try:
        with caplog.at_level(logging.INFO, logger="squall.worker"):
            a.sender(7)((0,))
            a.flush()
            assert wait_until(lambda: got1.got == [(7, (0,))])
            assert a.statistics()["peer_breaks"] == 0 and a.statistics()["unreachable"] == []
            b.close()
            assert wait_until(lambda: gone(a, address), 10), "ZeroMQ did not see the connection go"
            assert gone(a, address) and a.statistics()["peer_breaks"] == 1  # heard again: counted once
            assert a.statistics()["unreachable"] == [address]
            a.sender(8)((1,))
            a.flush()
            b = ZmqTransport(address, {}, PlainSerializer(), b"s3cret", got2, origin=Origin(STORM, "h:2", 2))
            assert wait_until(lambda: got2.got == [(8, (1,))], 10), got2.got
            assert wait_until(lambda: a.statistics()["unreachable"] == [], 5)
        said = [r.getMessage() for r in caplog.records if address in r.getMessage()]
        assert len([m for m in said if m.startswith("cannot reach")]) == 1, said
        assert f"cannot reach the worker at {address} (tasks 7, 8: sink)" in said[0]
        assert any(m.startswith(f"reached the worker at {address} again, after") for m in said), said
        assert a.statistics()["peer_breaks"] == 1
        assert got1.got == [(7, (0,))]
    finally:
        a.close()
        b.close()


def known_fd(t, key):
    """The descriptor of ``t``'s connection to the peer first known as ``key``, as its watch told."""
    with t._send_lock:
        t._heard(key)
        return t._fds.get(key)


def test_a_silent_connections_backoff_is_capped_and_the_receiving_end_keeps_its_connections_longer():
    """As on the TCP wire (tests/worker/test_reconnect.py), what the kernel says of ZeroMQ's
    connection to a silent peer decides its cap, set through the descriptor and read back from
    the kernel: 1 s while healthy, raised as a silence lasts, the kernel's own where only probes
    wait, 1 s again once it acknowledges. The PULL socket's connections are kept for
    squall.tcp.keepalive.secs (probes after half of it idle), not closed at the silence bound:
    closed, a partition shorter than the bound's keepalive lost what the sender's kernel held."""
    clock = [100.0]
    got = Collect()
    b = transport(receive=got, slot="h:2", silent_secs=3.0, keepalive=60.0)
    address = b.address
    a = transport(peers={7: address}, now=lambda: clock[0], silent_secs=3.0)
    said = [Unacknowledged(0.0, 0, 0)]
    a._unacknowledged = lambda fd: said[0]
    try:
        assert b._pull.getsockopt(zmq.TCP_KEEPALIVE_IDLE) == 30 and b._pull.getsockopt(zmq.TCP_KEEPALIVE_INTVL) == 10
        assert a._pull.getsockopt(zmq.TCP_KEEPALIVE_IDLE) == 30  # the default, squall.tcp.keepalive.secs' (60)
        a.sender(7)((0,))
        a.flush()
        assert wait_until(lambda: got.got == [(7, (0,))])
        assert wait_until(lambda: known_fd(a, address) is not None)
        if not a._rto_max.get(address):
            pytest.skip("this kernel has no TCP_RTO_MAX_MS (Linux 6.11 on)")

        def cap(unacknowledged):
            said[0] = unacknowledged
            clock[0] += 1.0
            a.flush()
            with a._send_lock, borrowed(a._fds[address]) as sock:
                assert sock is not None
                assert sock.getsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS) == int(a._rto_max[address] * 1000)
                return a._rto_max[address]
        assert cap(Unacknowledged(0.0, 0, 0)) == 1.0
        assert cap(Unacknowledged(2.0, 3, 0)) == 1.0
        assert cap(Unacknowledged(20.0, 3, 0)) == 4.0
        assert cap(Unacknowledged(20.0, 0, 4)) == 120.0
        assert cap(Unacknowledged(0.0, 0, 0)) == 1.0
        assert a.statistics()["peer_breaks"] == 1  # named past the bound, as before, and back
    finally:
        a.close()
        b.close()


def test_a_receiver_that_reads_nothing_for_longer_than_the_bound_loses_no_message():
    """A worker stopped (SIGSTOP, a frozen VM) past the silence bound while data was sent to it
    lost what the kernels held for it (597 of 14,476 messages at a 3 s bound and a 6 s stop):
    the PUSH sockets' TCP_MAXRT (TCP_USER_TIMEOUT) closed its connection, Linux counting a
    window kept closed as silence. Here the receiver's ZeroMQ socket reads nothing for four
    times the bound, its queue and buffer tiny, so its window closes: every message arrives,
    once, and the receiver is not called unreachable (it answers the window probes)."""
    receiver = zmq.Context.instance().socket(zmq.PULL)
    receiver.setsockopt(zmq.LINGER, 0)
    receiver.setsockopt(zmq.RCVHWM, 1)
    receiver.setsockopt(zmq.RCVBUF, 4096)
    address = f"tcp://127.0.0.1:{receiver.bind_to_random_port('tcp://127.0.0.1')}"
    a = transport(peers={7: address}, silent_secs=0.5)
    n = 900  # under SNDHWM: ZeroMQ holds them all, none waits in `_unsent`
    try:
        for i in range(n):
            a.sender(7)((i, b"x" * 8000))  # ~8 MB in all: more than the kernels' buffers
            a.flush()
        time.sleep(2.0)  # the receiver stopped: nothing to wait for, only time passing
        got = 0
        receiver.setsockopt(zmq.RCVTIMEO, 5000)
        while got < n:
            try:
                receiver.recv()
            except zmq.Again:
                break
            got += 1
        assert got == n, f"{n - got} of {n} messages lost"
        a.flush()
        assert a.statistics()["peer_breaks"] == 0 and a._fds.get(address) is not None
    finally:
        a.close()
        receiver.close(0)


def test_a_silent_peer_is_named_from_its_connections_descriptor_once_a_second_and_its_connection_kept(caplog):
    """Without TCP_MAXRT, a silent peer's connection stays up: the kernel is asked about it
    (TCP_INFO of the descriptor its watch told at EVENT_CONNECTED), at most once a second, and
    the peer named once past the bound, its connection kept, its return said; the descriptor
    is forgotten when its connection goes (ZeroMQ may reuse it), and no longer asked about."""
    clock = [100.0]
    got = Collect()
    b = transport(receive=got, slot="h:2")
    address = b.address
    a = transport(peers={7: address}, now=lambda: clock[0], silent_secs=3.0)
    a.reach.components = lambda tasks: ["sink"]
    silence = [0.0]  # what the kernel says of the descriptor, in seconds
    asked = []
    a._unacknowledged = lambda fd: (asked.append(fd), Unacknowledged(silence[0], 1, 0))[1]

    def check(secs, advance=1.0):
        silence[0] = secs
        clock[0] += advance
        a.flush()  # looks, unless the receiving thread looked since the clock moved
        return a.statistics()
    try:
        with caplog.at_level(logging.INFO, logger="squall.worker"):
            a.sender(7)((0,))
            a.flush()
            assert wait_until(lambda: got.got == [(7, (0,))])
            assert wait_until(lambda: known_fd(a, address) is not None)
            fd = known_fd(a, address)
            assert check(2.9)["unreachable"] == [] and asked[-1] == fd
            looked = len(asked)
            assert check(3.0, advance=0.5)["unreachable"] == []  # once a second, not per flush
            assert len(asked) == looked
            assert check(3.0, advance=0.5)["unreachable"] == [address]
            assert check(4.0)["peer_breaks"] == 1  # said and counted once
            assert address in a._sockets and address not in a._away  # kept
            stats = check(0.0)
            assert stats["unreachable"] == [] and stats["peer_breaks"] == 1
            b.close()
            assert wait_until(lambda: gone(a, address), 10), "ZeroMQ did not see the connection go"
            assert known_fd(a, address) is None
            looked = len(asked)
            check(5.0)
            assert len(asked) == looked  # a descriptor closed is not asked about
        said = [r.getMessage() for r in caplog.records if address in r.getMessage()]
        assert said[0].startswith(f"cannot reach the worker at {address} (tasks 7: sink): it has acknowledged "
                                  f"nothing sent to it for 3 s"), said
        assert "the connection is kept" in said[0]
        assert said[1] == f"reached the worker at {address} again, after 2 s unreachable", said
        assert said[2].startswith(f"cannot reach the worker at {address} (tasks 7: sink): its connection closed")
        assert got.got == [(7, (0,))]
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("encryption", ["false", "true"])
def test_what_waits_for_a_dead_peer_reaches_its_next_launch_at_a_new_address_and_nothing_is_lost(encryption):
    """As on Spark, the dead peer's next launch comes at another port. What the sender sent
    after ZeroMQ saw the connection go (the spouts' replays at the master's notice) goes to the
    new address, sealed again for it, every item once, in order, before what is sent after the
    move; and the move reports no task to which something may have been lost, so the spouts do
    not fail those replays again (before, they went into ZeroMQ's queue for the old address,
    closed with its socket, and every pending tuple failed a second time: each lost tuple
    reached the live branches three times). A peer whose connection was up at the move may
    have lost what ZeroMQ held for it: reported."""
    got1, got2, got3 = Collect(), Collect(), Collect()
    b = transport(receive=got1, slot="h:2", encryption=encryption)
    old = b.address
    a = transport(peers={7: old, 8: old, 9: old}, encryption=encryption)
    controls = []
    b2 = b3 = None
    try:
        a.sender(7)((1,))
        a.flush()
        assert wait_until(lambda: got1.got == [(7, (1,))])
        b.close()
        b = None
        assert wait_until(lambda: gone(a, old), 10), "ZeroMQ did not see the connection go"
        for i in range(2, 12):
            a.sender(7 + i % 2)((i,))
            a.flush()
        a.broadcast({"x": 1})  # a control message waits too
        b2 = transport(receive=got2, slot="h:2", launch=2, encryption=encryption)
        b2.set_control_handler(lambda slot, message: controls.append((slot, message)))
        assert a.set_peers({7: b2.address, 8: b2.address, 9: b2.address}) == frozenset()
        a.sender(7)((12,))
        a.flush()
        assert wait_until(lambda: len(got2.got) >= 11, timeout=10), got2.got
        assert got2.got == [(7 + i % 2, (i,)) for i in range(2, 12)] + [(7, (12,))]
        assert controls == [("h:1", {"x": 1})]
        assert got1.got == [(7, (1,))]
        b3 = transport(receive=got3, slot="h:2", launch=3, encryption=encryption)
        assert a.set_peers({7: b3.address, 8: b3.address, 9: b3.address}) == {7, 8, 9}
        a.sender(8)((13,))
        a.flush()
        assert wait_until(lambda: got3.got == [(8, (13,))], timeout=10)
    finally:
        for t in (a, b, b2, b3):
            if t is not None:
                t.close()


# --- bounds on what a stranger can cost (issue 10, item 5) --------------------------------------------

_RECEIVER = textwrap.dedent("""
    import sys, time
    import zmq
    from zmq.utils.monitor import recv_monitor_message
    from squall.worker.envelope import Origin
    from squall.worker.transport import ZmqTransport

    def rss_kb(field):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1])

    handled = []
    t = ZmqTransport("tcp://127.0.0.1:0", {}, None, b"k", origin=Origin("s", "h:2", 1),
                     max_message_bytes=1 << 20)
    t._handle = lambda message: handled.append(len(message))
    monitor = t._pull.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    print(t.address, rss_kb("VmHWM"), flush=True)
    want_handled, want_malformed, want_disconnects = map(int, sys.stdin.readline().split())
    # Wait for what the test sent to be dealt with, not for a fixed time (a sleep lost the race
    # on a loaded machine): each sender's connection ends in a disconnect, whether it closed
    # or ZeroMQ refused a frame over the bound, and every message is handled or malformed.
    # Each malformed one is told as it is dropped, so that a test can send the next only then.
    disconnects, malformed, deadline = 0, 0, time.monotonic() + 60
    while time.monotonic() < deadline and (
            len(handled) < want_handled or malformed < want_malformed or disconnects < want_disconnects):
        if monitor.poll(10):
            recv_monitor_message(monitor)
            disconnects += 1
        now = t.statistics()["dropped"]["malformed"]
        if now != malformed:
            malformed = now
            print("malformed", malformed, flush=True)
    print("done", len(handled), malformed, rss_kb("VmHWM"), flush=True)
    t.close()
""")


def _receive_in_child(send, *, handled: int, malformed: int, disconnects: int = 2):
    """Start a receiver bounded at 1 MB in a child process, ``send(address, dropped)`` to it,
    and return how many messages reached its handler, how many it dropped as malformed, and by
    how many KB its peak memory grew. ``dropped(k)`` waits until the child has dropped ``k``
    malformed messages. The child reads its figures once ``handled`` and ``malformed`` messages
    are counted and ``disconnects`` senders' connections have ended (or after 60 s)."""
    child = subprocess.Popen([sys.executable, "-c", _RECEIVER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    lines = []
    malformed_seen = [0]

    def line():
        got = child.stdout.readline()
        assert got, "the receiving child ended early"
        fields = got.split()
        if fields[0] in ("malformed", "done"):
            malformed_seen[0] = int(fields[1] if fields[0] == "malformed" else fields[2])
        lines.append(fields)
        return fields

    def dropped(k):
        while malformed_seen[0] < k:
            line()

    try:
        address, hwm_before = line()
        child.stdin.write(f"{handled} {malformed} {disconnects}\n")
        child.stdin.flush()
        send(address, dropped)
        while lines[-1][0] != "done":
            line()
        handled, malformed, hwm_after = map(int, lines[-1][1:])
        return handled, malformed, hwm_after - int(hwm_before)
    finally:
        child.kill()
        child.wait()


def test_a_message_over_the_bound_is_refused_before_it_is_read():
    """A 100 MB frame to a worker bounded at 1 MB never reaches the handler, and the receiving
    process does not grow by its size (it used to take each whole, ten 200 MB ones: 1.4 GB)."""
    def send(address, dropped):
        send_raw(address, b"x" * (100 << 20))
        send_raw(address, b"x" * 1000)  # within the bound: handled

    handled, _, grown_kb = _receive_in_child(send, handled=1, malformed=0)
    assert handled == 1
    assert grown_kb < 50 * 1024  # far less than the 100 MB sent


def test_a_message_of_many_frames_each_under_the_bound_is_dropped_unkept():
    """ZeroMQ's size limit bounds each frame, not a multipart message: 40 frames of 1 MB under
    a 1 MB limit used to reach the handler whole (and its frames were all copied into the
    worker first). squall's messages are one frame; one of more is dropped as malformed, its
    frames read into nothing. ZeroMQ still holds a whole message until its last frame arrives
    (without encryption, a stranger can make a worker hold one that large), but the worker
    keeps none of it: three such messages, each sent once the one before was dropped, grow its
    peak memory by about one, not by two or three (it grew by ~2 before). Sent all at once,
    ZeroMQ's I/O thread may read the next while a busy machine's receiving thread has not
    taken the last yet, and hold two: ZeroMQ's queue (``RCVHWM``), not the worker's copies."""
    frame = b"x" * 1_000_000

    def send(address, dropped):
        for k in range(1, 4):
            send_raw(address, [frame] * 40)
            dropped(k)
        send_raw(address, b"x" * 1000)  # a single frame, within the bound: handled

    handled, malformed, grown_kb = _receive_in_child(send, handled=1, malformed=3, disconnects=4)
    assert (handled, malformed) == (1, 3)
    assert grown_kb < 60 * 1024  # KB: one 40 MB message held by ZeroMQ, and no copy of it


def test_a_batch_over_the_bound_is_sent_in_parts_and_an_item_too_large_alone_is_refused():
    got = Collect()
    b = transport(receive=got, slot="h:2", max_message_bytes=4096)
    a = transport(peers={7: b.address}, max_message_bytes=4096)
    refused = []
    a.on_refused = lambda task, why: refused.append((task, why))
    try:
        send = a.sender(7)
        for i in range(1000):  # ~ 6 KB in one batch: split in two
            send((i, "abc"))
        send(("x" * 5000,))
        a.flush()
        assert wait_until(lambda: len(got.got) == 1000)
        assert got.got == [(7, (i, "abc")) for i in range(1000)]
        assert a.refused == 1 and len(refused) == 1
        task, why = refused[0]
        assert task == 7 and "squall.transport.max.message.bytes" in why and "4096" in why
        # a tuple's is its emitter's error (the worker files it under that task's component)
        send(Tuple(["x" * 5000], Source("split", "words", 3, Fields("word"))))
        a.flush()
        assert a.refused == 2
        task, why = refused[1]
        assert task == 3 and why.startswith("a tuple emitted by [split] task 3 on stream [words] for task 7 is ")
        assert b.dropped == 0
    finally:
        a.close()
        b.close()


def test_the_bound_counts_the_header_whose_topology_id_may_be_long():
    """The header carries the topology's id, whose length has no cap: a sender that bounded only
    the data sent messages a whole header larger than the bound, and with a long enough id the
    receiver refused them (closing the connection) and every tuple in them was lost."""
    storm = "a-topology-with-a-long-name-" * 120 + "-1-1"  # 3,364 characters
    got = Collect()
    b = transport(receive=got, slot="h:2", storm=storm, max_message_bytes=4096)
    a = transport(peers={7: b.address}, storm=storm, max_message_bytes=4096)
    seen = capture(b)
    try:
        send = a.sender(7)
        for i in range(1000):
            send((i, "abc"))
        a.flush()
        assert wait_until(lambda: len(got.got) == 1000)
        assert got.got == [(7, (i, "abc")) for i in range(1000)]
        assert max(map(len, seen)) <= 4096 and b.dropped == 0
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("encryption", ["false", "true"])
def test_a_message_of_exactly_the_bound_arrives_encrypted_or_not(encryption):
    """The receiver allows the bound exactly, plus what CurveZMQ adds to a frame when encrypted."""
    got = Collect()
    b = transport(receive=got, slot="h:2", max_message_bytes=4096, encryption=encryption)
    a = transport(peers={7: b.address}, max_message_bytes=4096, encryption=encryption)
    seen = capture(b)
    try:
        header = len(a._sealer.seal(0, a._route(b.address), b""))
        n = next(n for n in range(4096, 0, -1) if header + len(PlainSerializer().encode_batch([7, ("x" * n,)])) <= 4096)
        a.sender(7)(("x" * n,))
        a.flush()
        assert wait_until(lambda: got.got == [(7, ("x" * n,))])
        assert list(map(len, seen)) == [4096] and a.refused == 0
    finally:
        a.close()
        b.close()

class _Opaque:
    """A type no serializer is registered for."""


def _tuple_transport(got, **conf):
    """Two transports with squall's real serializer; tuples to task 7 reach ``got``."""
    src = Source("emitter", "out", 1, Fields("v"))
    b = ZmqTransport("tcp://127.0.0.1:0", {}, Serializer(conf, lambda t, s: src), b"k", lambda t, i: got.append(i),
                     origin=Origin(STORM, "h:2", 1))
    a = ZmqTransport("tcp://127.0.0.1:0", {7: b.address}, Serializer(conf, lambda t, s: src), b"k",
                     origin=Origin(STORM, "h:1", 1))
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
        assert wait_until(lambda: len(got) == 1)
        assert got[0].values == ["fine", 1]
    finally:
        a.close()
        b.close()


def test_ten_thousand_bad_messages_write_a_few_log_lines(caplog):
    b = transport(slot="h:2")
    try:
        with caplog.at_level(logging.WARNING, logger="squall.worker"):
            send_raw(b.address, b"forged mac, header and data" * 3, n=10_000)
            assert wait_until(lambda: b.dropped == 10_000, timeout=30)
        records = [r for r in caplog.records if r.name == "squall.worker"]
        assert 1 <= len(records) <= 10
        assert b._warn.rate.total_suppressed >= 10_000 - len(records)
    finally:
        b.close()


# --- encryption (issue 10, item 6) ---------------------------------------------------------------------

def test_with_encryption_on_two_workers_exchange_a_batch_and_a_plaintext_peer_is_shut_out(caplog):
    got = Collect()
    b = transport(receive=got, slot="h:2", encryption="true")
    a = transport(peers={7: b.address}, encryption="true")
    try:
        assert b.encrypted and b._pull.getsockopt(zmq.CURVE_SERVER) == 1
        a.sender(7)((1, 2))
        a.flush()
        assert wait_until(lambda: got.got == [(7, (1, 2))])
        # a peer that speaks plain ZeroMQ (even a worker with the right secret and a valid
        # message) cannot complete the handshake: nothing it sends arrives
        plain = transport(peers={7: b.address}, encryption="false", slot="h:3")
        try:
            with caplog.at_level(logging.WARNING, logger="squall.worker"):
                plain.sender(7)((3, 4))
                plain.flush()
                assert not wait_until(lambda: len(got.got) > 1 or b.dropped, timeout=1.0)
            # and the receiver says why, for the operator who set squall.encryption unevenly
            assert any("failed the CURVE handshake" in r.getMessage() for r in caplog.records)
        finally:
            plain.close()
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("setting, encrypted", [("auto", False), ("false", False), ("true", True)])
def test_encryption_auto_leaves_loopback_in_clear(setting, encrypted):
    got = Collect()
    b = transport(receive=got, slot="h:2", encryption=setting)
    a = transport(peers={7: b.address}, encryption=setting)
    try:
        assert b.encrypted == encrypted
        assert b._pull.getsockopt(zmq.CURVE_SERVER) == int(encrypted)
        a.sender(7)((1,))
        a.flush()
        assert wait_until(lambda: got.got == [(7, (1,))])
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
        assert wait_until(lambda: len(got) == 1)
        assert got[0].values == ["fine"]
        assert len([r for r in caplog.records if "_Opaque" in r.getMessage()]) == 1
    finally:
        a.close()
        b.close()
