"""How soon the TCP wire reaches a peer again after a partition heals (`squall.worker.reconnect`):
its attempts to connect time out and are made again on Storm's netty backoff, not the kernel's
SYN backoff; a connection that stays up has its retransmission backoff capped no further than
the kernel's giving up allows."""

import contextlib
import errno
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from doubles import wait_until

from squall.worker import reconnect
from squall.worker.reconnect import connect_wait, kernel_give_up_secs, rto_cap
from squall.worker.tcp import TcpTransport
from squall.worker.tcp_info import Unacknowledged
from tests.ports import free_port
from tests.worker.test_tcp import Loop, tcp


def test_the_kernels_giving_up_is_its_model_of_the_capped_backoff():
    """Linux's tcp_model_timeout: 15 attempts from 200 ms doubling, capped at 120 s, take
    924.6 s; capped at 1 s, 14.4 s (a connection so capped broke in a 20 s cut, measured)."""
    assert kernel_give_up_secs(15, 120.0) == pytest.approx(924.6)
    assert kernel_give_up_secs(15, 1.0) == pytest.approx(14.4)
    assert kernel_give_up_secs(3, 120.0) == pytest.approx(3.0)  # fewer retries than doublings


@pytest.mark.parametrize("retries", [15, 8, 3])
def test_the_cap_keeps_the_kernels_giving_up_further_than_the_silence(retries):
    """The cap is raised as the silence lasts: the kernel never gives up a connection sooner
    than the silence and a half (unless it would have without the cap: its own 120 s), and a
    short partition is tried again within a second of its heal."""
    caps = []
    for silent in range(0, 1000, 5):
        cap = rto_cap(silent, retries, 1.0)
        caps.append(cap)
        assert cap == 120.0 or kernel_give_up_secs(retries, cap) >= 1.5 * silent, (silent, cap)
    assert caps == sorted(caps)
    if retries == 15:
        assert rto_cap(8.0, retries, 1.0) == 1.0 and rto_cap(16.0, retries, 1.0) == 2.0


def test_an_attempt_to_connect_waits_longer_each_time_up_to_the_bound():
    assert [connect_wait(n, 0.1, 1.0) for n in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert connect_wait(1000, 0.1, 1.0) == 1.0


def test_the_wait_between_attempts_must_grow():
    with pytest.raises(ValueError, match=r"min_wait \(2 s\) up to max_wait \(1 s\)"):
        tcp(min_wait=2.0, max_wait=1.0)


def test_a_peer_that_answered_nothing_is_connected_to_soon_after_it_answers_again():
    """A peer's machine cut off: the SYNs of the attempt to connect to it go unanswered (here: a
    listener whose accept queue is full drops them). The kernel sends a SYN again on its own
    backoff (1, 3, 7, 15 s after the first; since Linux 6.5 the first five 1 s apart, then
    doubling: 7, 11, 19 s), so an attempt begun during a partition waited up to seconds past
    its heal. Each attempt now times out after ``min_wait`` doubling up to ``max_wait`` and is
    made again: the connection is made within about ``max_wait`` of the heal, and the message
    that waited in the backlog arrives (tests/process/test_partitions.py shows a whole cluster
    after a cut)."""
    port = free_port()
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(0)
    fill = socket.create_connection(("127.0.0.1", port), timeout=5)  # the queue is full: SYNs dropped
    address = f"tcp://127.0.0.1:{port}"
    a = tcp(peers={7: address}, min_wait=0.05, max_wait=0.2)
    loop = Loop(a)
    try:
        a.sender(7)((0,))
        a.flush()
        began = time.monotonic()
        out = a._outbound[address]
        assert wait_until(lambda: out.attempts >= 3, 5), "the attempts did not time out"
        assert out.backlog, "the message waits for the connection"
        time.sleep(max(0.0, began + 1.5 - time.monotonic()))  # the partition itself
        lst.accept()[0].close()  # the heal: the filler leaves the queue
        healed = time.monotonic()
        conn = None

        def arrived():
            nonlocal conn
            if conn is None:
                lst.settimeout(0.05)
                try:
                    conn = lst.accept()[0]
                except TimeoutError:
                    return False
                conn.settimeout(0.05)
            try:
                return len(conn.recv(4)) > 0
            except TimeoutError:
                return False
        assert wait_until(arrived, 10)
        took = time.monotonic() - healed
        # the attempt then made times out within max_wait (0.2 s), its successor connects
        assert took < 1.0, f"connected {took:.2f} s after the heal"
        # the loop's thread takes the frame off the backlog once its write returned, which may be
        # after the peer read it
        assert wait_until(lambda: not out.backlog, 5), "the message stayed in the backlog"
        conn.close()
    finally:
        loop.stop()
        a.close()
        fill.close()
        lst.close()


@dataclass
class _Capped:
    """A sender connected to a receiver that runs a loop: the sender's clock (``clock[0]``), what
    its kernel says of the connection (``said[0]``), the connection, and what arrived."""

    a: TcpTransport
    out: Any
    got: list
    clock: list
    said: list


@contextlib.contextmanager
def _capped():
    """`_Capped`, once the first item is across; skipped where the kernel has no cap to set."""
    got: list = []
    b = tcp(receive=lambda t, i: got.append(i), slot="h:2")
    clock = [100.0]
    a = tcp(peers={7: b.address}, now=lambda: clock[0])
    said = [Unacknowledged(0.0, 0, 0)]
    a._unacknowledged = lambda sock: said[0]
    loop = Loop(b)
    try:
        a.sender(7)((0,))
        assert wait_until(lambda: (a.flush(), got)[1] == [(0,)])
        out = a._outbound[b.address]
        if not out.rto_max:
            pytest.skip("this kernel has no TCP_RTO_MAX_MS (Linux 6.11 on)")
        yield _Capped(a, out, got, clock, said)
    finally:
        loop.stop()
        a.close()
        b.close()


def test_a_silent_connections_backoff_is_capped_as_far_as_the_kernels_giving_up_allows():
    """What the kernel says of a connection to a silent peer decides its cap (read back from the
    kernel): 1 s while healthy and early in a silence (a heal is tried within a second), raised
    as the silence lasts (segments in flight, whose giving up is timed), the kernel's own where
    only probes wait (counted: a cap would use them up sooner), 1 s again once it acknowledges."""
    with _capped() as c:
        a, out, clock, said = c.a, c.out, c.clock, c.said

        def cap(unacknowledged):
            said[0] = unacknowledged
            clock[0] += 1.0
            a.flush()
            kernel = out.sock.getsockopt(socket.IPPROTO_TCP, reconnect.TCP_RTO_MAX_MS)
            assert kernel == int(out.rto_max * 1000)
            return out.rto_max
        assert cap(Unacknowledged(0.0, 0, 0)) == 1.0
        assert cap(Unacknowledged(5.0, 3, 0)) == 1.0
        assert cap(Unacknowledged(20.0, 3, 0)) == 4.0
        assert cap(Unacknowledged(400.0, 3, 0)) == 120.0
        assert cap(Unacknowledged(20.0, 0, 4)) == 120.0
        assert cap(Unacknowledged(0.0, 0, 0)) == 1.0


def test_a_silent_connections_cap_is_raised_while_its_workers_loop_is_stuck_in_user_code():
    """A worker's only loop held in user code (a bolt's ``execute`` sleeping) neither flushes
    nor polls, so the reach check that raises a silent connection's cap never ran from it, and
    the kernel gave the connection up on the 1 s cap (14.4 s into a partition). The watchman,
    which wakes about once a second while no loop polls, runs the check for it."""
    with _capped() as c:  # and no loop for the sender: its loop is stuck
        out = c.out
        assert out.rto_max == 1.0
        c.said[0] = Unacknowledged(20.0, 3, 0)  # what a flushed just before the cut waits 20 s
        c.clock[0] += 1.0  # the check is due
        assert wait_until(lambda: out.rto_max == 4.0, 5), f"the cap stayed at {out.rto_max:g} s"
        kernel = out.sock.getsockopt(socket.IPPROTO_TCP, reconnect.TCP_RTO_MAX_MS)
        assert kernel == 4000


def test_a_silent_connections_cap_is_raised_while_its_workers_loop_works_every_round():
    """A worker's loop that works every round (a spout with acking off and mostly local work, a
    bolt with a deep backlog) is never idle: it calls only `flush_due`, never `flush`, from
    which alone the reach check that raises a silent connection's cap ran; and it polls, so the
    watchman, which checks for loops stuck in user code, does not either. The connection kept
    its backoff capped at 1 s, and the kernel gave it up 14.4 s into a partition, what it held
    lost with it. Now `flush_due` runs the check when it is due.

    The watchman's own check is left out here: it runs only where the working loop happens to
    miss a poll for its span (5 ms: the GIL given to another thread for a switch interval),
    which is chance, not the loop's doing."""
    with _capped() as c:  # the sender's loop is this test's thread: rounds of poll and flush_due
        a, out, got, clock, said = c.a, c.out, c.got, c.clock, c.said
        a._check_reach_for_loops = lambda: None
        assert out.rto_max == 1.0
        a.sender(7)((1,))  # written as the cut begins, from a working round
        for _ in range(210):  # 21 s of the wire's clock, every round working
            clock[0] += 0.1
            said[0] = Unacknowledged(max(0.0, clock[0] - 100.5), 3, 0)  # what was written waits
            a.poll()
            a.flush_due()
        assert out.rto_max == 4.0, f"the cap stayed at {out.rto_max:g} s through 20 s of silence"
        assert out.sock.getsockopt(socket.IPPROTO_TCP, reconnect.TCP_RTO_MAX_MS) == 4000
        assert wait_until(lambda: len(got) == 2, 5), got  # no partition here: both records arrive
        assert got == [(0,), (1,)]


@pytest.mark.parametrize("silent", [0.0, 17.0])
def test_a_connection_the_kernel_gave_up_is_said_to_have_been_idle_or_unacknowledged(silent, caplog):
    """The kernel gives a connection up with ETIMEDOUT two ways: idle, its keepalive probes went
    unanswered (nothing is lost); or what was written on it went unacknowledged through all its
    retransmissions (a partition longer than net.ipv4.tcp_retries2's giving up), and is lost with
    it. The log said "its machine answered nothing for about 10 s" for both, which the second
    is not, and said nothing at all where the peer had been said unreachable already (silent
    past silent_secs: 14.4 s into a cut at the default retries, on a 1 s cap): it is said now,
    with the silence that the last reach check found, and the loss."""
    b = tcp(slot="h:2")
    clock = [100.0]
    a = tcp(peers={7: b.address}, now=lambda: clock[0], keepalive=60.0, silent_secs=10.0)
    said = [Unacknowledged(silent, 3 if silent else 0, 0)]
    a._unacknowledged = lambda sock: said[0]
    try:
        a.sender(7)((0,))
        a.flush()
        out = a._outbound[b.address]
        assert wait_until(lambda: (a.flush(), out.sock is not None and not out.connecting)[1])
        clock[0] += 1.0  # the next reach check is due, and finds the silence said
        a.flush()
        clock[0] += 2.0
        caplog.set_level(logging.INFO, "squall.worker")
        with a._send_lock:  # as the poll that sees the kernel's error does
            a._broken(b.address, out, OSError(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT)))
        # a peer silent past silent_secs was said unreachable at the check (the connection kept):
        # the break is said apart
        [said_of_it] = [r.getMessage() for r in caplog.records if "cannot reach" in r.getMessage()
                        or "unreachable already, broke" in r.getMessage()]
        assert b.address in said_of_it and "tasks 7" in said_of_it
        if silent:
            assert "acknowledged nothing written to it for 19 s and the kernel gave the connection up after its " \
                   "retransmissions (Connection timed out;" in said_of_it
            assert "what was written on it and not acknowledged is lost with it" in said_of_it
        else:
            assert "the connection was idle and its machine answered none of its keepalive probes for about 10 s" \
                in said_of_it
    finally:
        a.close()
        b.close()


class _Wire:
    """Two ends of a TCP wire in processes of their own (`wire_side.py`), each in a network
    namespace of its own (`tests.process.nodes.Network`): ``b`` receives, ``a`` sends; the
    sender's namespace has net.ipv4.tcp_retries2 at 6, so that its kernel gives a connection
    capped at 1 s up after 5.4 s (14.4 s at the default 15)."""

    def __init__(self, tag):
        from tests.process.nodes import NetnsUnavailable, Network

        try:
            self.net = Network(2, tag=f"{tag}{os.getpid() % 100000}")
        except NetnsUnavailable as e:
            pytest.skip(f"network namespaces cannot be made here ({e})")
        self.procs = []
        try:
            subprocess.run(["ip", "netns", "exec", self.net.namespaces[1], "sysctl", "-qw",
                            "net.ipv4.tcp_retries2=6"], check=True, timeout=10)
            peer = f"tcp://{self.net.addresses[0]}:{free_port()}"
            _, self.got = self._start(self.net.namespaces[0], "b", peer)
            self.a, self.said = self._start(self.net.namespaces[1], "a", f"tcp://{self.net.addresses[1]}:0", peer)
        except BaseException:
            self.close()
            raise

    def _start(self, ns, *args):
        p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, str(Path(__file__).parent / "wire_side.py"),
                              *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                             cwd=Path(__file__).parents[2])
        self.procs.append(p)
        lines = []
        threading.Thread(target=lambda: lines.extend(line.strip() for line in p.stdout), daemon=True).start()
        assert wait_until(lambda: "ready" in lines, 20), lines
        return p, lines

    def tell(self, *lines):
        """Write ``lines`` to the sender at once."""
        self.a.stdin.write("".join(f"{line}\n" for line in lines))
        self.a.stdin.flush()

    def cut(self, up=False):
        self.net.cut(1, up=up)

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait(10)
        self.net.remove()


def test_what_a_sleeping_worker_wrote_as_a_partition_began_reaches_its_peer_after_the_heal():
    """A worker (its own network namespace, net.ipv4.tcp_retries2 at 6) sends a message as its
    link is cut, then its loop sleeps, as an engine loop with no timer due does until woken (a
    bolt-only worker waits for input the partition holds). The wire caps the connection's
    retransmission backoff at 1 s, which brings the kernel's giving up near (5.4 s here, 14.4 s
    at the default 15), and raises it at its reach checks as the silence lasts; but the loop's
    `LoopEvent` woke for those only where a backlog or an earlier check's silence waited, not
    for what was just written: no check came, and the kernel gave the connection up 5.4 s into
    an 8 s cut, the message lost with it (the kernel's own backoff, uncapped, delivered it
    after the heal). Now a loop wakes for the check after anything sent."""
    wire = _Wire("sqw")
    try:
        wire.tell("send 1")
        assert wait_until(lambda: "got 1" in wire.got, 10), wire.got
        time.sleep(1.2)  # past the reach check of the first message's flush: the loop asleep
        wire.cut()
        wire.tell("send 2")
        time.sleep(8.0)  # the partition itself
        wire.cut(up=True)
        assert wait_until(lambda: "got 2" in wire.got, 10), f"the message sent as the cut began was lost: {wire.got}"
    finally:
        wire.close()


def test_what_a_worker_stuck_in_user_code_wrote_as_a_partition_began_reaches_its_peer_after_the_heal():
    """A worker (its own network namespace, net.ipv4.tcp_retries2 at 6) sends a message as its
    link is cut, then its only loop is held in user code for 8 s (a bolt's ``execute`` sleeping,
    its component not moved off the loop: topology.executor.blocking.move false, or alone in
    its worker), neither polling nor flushing. The reach check that raises the connection's
    capped backoff as the silence lasts ran only from a loop's flush, so the cap stayed at 1 s,
    the kernel gave the connection up 5.4 s into the 9 s cut (14.4 s at the default
    net.ipv4.tcp_retries2), and the message was lost with it: on a cluster, its tuples fail at
    the message timeout and replay (with acking off, they are gone). Now the watchman, which
    wakes about once a second while no loop polls, runs the check: the connection is kept
    and the message arrives after the heal."""
    wire = _Wire("sqs")
    try:
        wire.tell("send 1")
        assert wait_until(lambda: "got 1" in wire.got, 10), wire.got
        time.sleep(1.2)  # past the reach check of the first message's flush: the loop asleep
        wire.cut()
        wire.tell("send 2", "stuck 8")
        assert wait_until(lambda: "stuck" in wire.said, 5), wire.said
        time.sleep(9.0)  # the partition itself, past the stuck loop's return
        assert "unstuck" in wire.said, wire.said
        wire.cut(up=True)
        assert wait_until(lambda: "got 2" in wire.got, 10), f"the message sent as the cut began was lost: {wire.got}"
        assert wire.got.count("got 2") == 1, wire.got
    finally:
        wire.close()
