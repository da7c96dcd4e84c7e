"""The non-blocking socket calls of `squall.worker.tcp` (`squall._native`: compiled, they keep
the GIL; the pure twins are Python's own calls): what each returns when there is something,
nothing yet, or no peer any more; and the watchman's `StaleWatch`. tests/test_native.py runs
these on the pure path too."""

import select
import socket
import threading
import time

import pytest

from squall._native import StaleWatch, epoll_ready, recv_nb, send_nb


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def test_recv_nb_gives_none_for_nothing_yet_the_bytes_then_empty_once_the_peer_closed(pair):
    a, b = pair
    assert recv_nb(b, 100) is None
    assert send_nb(a, b"hello") == 5
    assert recv_nb(b, 3) == b"hel"
    assert recv_nb(b, 100) == b"lo"
    a.close()
    assert recv_nb(b, 100) == b""


def test_send_nb_writes_what_fits_then_zero_and_raises_once_the_peer_is_gone(pair):
    a, b = pair
    data = memoryview(b"x" * 65536)
    total, sent = 0, None
    while sent != 0:
        sent = send_nb(a, data)
        total += sent
    assert total > 0  # the socket's buffers are full: nothing more now, and no blocking
    b.close()
    with pytest.raises(OSError):
        for _ in range(10):  # the first write after the close may still be taken
            send_nb(a, b"y")
    with pytest.raises(TypeError):
        send_nb(a, "not bytes")


def test_epoll_ready_lists_the_ready_descriptors_and_nothing_when_none_is(pair):
    a, b = pair
    ep = select.epoll()
    try:
        ep.register(b.fileno(), select.EPOLLIN)
        assert epoll_ready(ep) == []
        send_nb(a, b"z")
        assert epoll_ready(ep) == [(b.fileno(), select.EPOLLIN)]
        recv_nb(b, 10)
        assert epoll_ready(ep) == []
    finally:
        ep.close()
    with pytest.raises((OSError, ValueError)):
        epoll_ready(ep)  # closed


def test_wait_stale_returns_once_no_touch_came_for_its_span():
    watch = StaleWatch()
    start = time.monotonic()  # read before the touch: the span is counted from the touch, which comes later
    watch.touch()
    assert watch.wait_stale(0.05) is True
    assert time.monotonic() - start >= 0.045


def test_touches_hold_wait_stale_off_until_they_stop():
    """A loop that polls every 10 ms keeps the watchman asleep: it wakes only after a gap of
    its whole span since the last poll."""
    watch = StaleWatch()
    stop = time.monotonic() + 0.3
    last = [time.monotonic()]

    def loop():
        while time.monotonic() < stop:
            before = time.monotonic()  # a time no later than the touch, kept once the touch is done
            watch.touch()
            last[0] = before
            time.sleep(0.01)

    t = threading.Thread(target=loop)
    t.start()
    # A span far above the loop's 10 ms gaps: only a toucher kept off the CPU for half a second
    # could let the watch go stale before the loop ends.
    assert watch.wait_stale(0.5) is True
    returned = time.monotonic()
    t.join()
    assert returned - last[0] >= 0.495


def test_close_ends_a_wait_with_false_and_a_bad_span_is_refused(pair):
    # The wait watches a descriptor nothing is ever written to, so it cannot end stale however
    # long the machine keeps this test's threads off a core: only close can end it.
    _, b = pair
    watch = StaleWatch(b.fileno())
    results = []
    waiter = threading.Thread(target=lambda: results.append(watch.wait_stale(0.05)))
    waiter.start()
    waiter.join(0.1)
    assert waiter.is_alive() and results == []
    watch.close()
    waiter.join(30)
    assert results == [False]
    assert StaleWatch().wait_stale(0.05) is True  # no descriptor: stale alone ends it
    closed = StaleWatch()
    closed.close()
    assert closed.wait_stale(0.05) is False  # closed: at once
    for bad in (0.0, -1.0, 1e9):
        with pytest.raises(ValueError, match="secs"):
            watch.wait_stale(bad)


def test_given_a_descriptor_wait_stale_returns_only_once_it_is_readable_as_well(pair):
    """The watchman of a loop in long rounds takes the GIL only when there is something for it
    to read: stale and nothing readable keeps it asleep, data arriving wakes it."""
    a, b = pair
    watch = StaleWatch(b.fileno())
    results = []
    waiter = threading.Thread(target=lambda: results.append(watch.wait_stale(0.01)))
    waiter.start()
    waiter.join(0.3)  # 30 spans stale with nothing to read: still waiting
    assert waiter.is_alive() and results == []
    a.send(b"x")
    waiter.join(30)  # only the data can end this wait (or a close, which returns False)
    assert results == [True]
    assert watch.wait_stale(0.01) is True  # still readable and stale: at once
    watch.touch()
    start = time.monotonic()
    assert watch.wait_stale(0.05) is True  # readable, but stale only a span after the touch
    assert time.monotonic() - start >= 0.045
    watch.close()
    b.recv(1)
    assert watch.wait_stale(0.01) is False


def test_given_a_time_wait_stale_returns_stale_at_that_time_with_nothing_to_read(pair):
    """The watchman looks at the peers' reach for loops stuck in user code about once a second,
    when nothing arrives to wake it during a partition: ``until`` ends a stale wait too, not a
    wait while a loop polls."""
    _, b = pair
    watch = StaleWatch(b.fileno())
    start = time.monotonic()
    assert watch.wait_stale(0.01, start + 0.2) is True
    assert time.monotonic() - start >= 0.19
    assert watch.wait_stale(0.01, start) is True  # past already, and stale: at once
    polls = threading.Event()

    def poll():  # a loop polling every 10 ms until told to stop
        while not polls.is_set():
            watch.touch()
            time.sleep(0.01)
    poller = threading.Thread(target=poll)
    watch.touch()  # polled now, before the waiter starts
    poller.start()
    results = []
    # a span far above the loop's gaps: only a poller kept off the CPU for half a second could
    # let the watch go stale while it polls
    waiter = threading.Thread(target=lambda: results.append(watch.wait_stale(0.5, 0.0)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and results == []  # due long ago, but never stale
    polls.set()
    poller.join()
    waiter.join(30)
    assert results == [True]
    watch.close()
    assert watch.wait_stale(0.01, 0.0) is False
    with pytest.raises(ValueError, match="until"):
        watch.wait_stale(0.01, float("nan"))


def test_wait_stale_takes_until_by_name_and_any_until_past_or_never(pair):
    """The compiled wait took ``until`` by position only (``wait_stale(secs, until=t)``, as its
    Python twin takes it, raised a TypeError), and converted an ``until`` out of a 64-bit
    integer's range (-inf, -1e300) to nanoseconds, which C leaves undefined: checked first now,
    such a time is past (or, +inf, never). Both paths (tests/test_native.py runs this file pure)."""
    _, b = pair
    watch = StaleWatch(b.fileno())
    start = time.monotonic()
    assert watch.wait_stale(0.01, until=start) is True  # past already, and stale: at once
    assert watch.wait_stale(secs=0.01, until=start + 0.1) is True
    assert time.monotonic() - start >= 0.09
    for past in (float("-inf"), -1e300, -9.5e9, 0.0):  # nothing readable: only the time ends these waits
        assert watch.wait_stale(0.01, until=past) is True, past
        assert watch.wait_stale(0.01, past) is True, past
    results = []
    waiter = threading.Thread(target=lambda: results.append(watch.wait_stale(0.01, until=float("inf"))))
    waiter.start()
    waiter.join(0.2)  # never due, nothing readable: still waiting
    assert waiter.is_alive() and results == []
    watch.close()
    waiter.join(30)
    assert results == [False]
    with pytest.raises(TypeError):
        watch.wait_stale(0.01, 1.0, 2.0)
    with pytest.raises(TypeError):
        watch.wait_stale(0.01, when=1.0)
