"""`squall._connlimit`: the connection cap under the file limit, eviction of the longest-waiting
connection, and a full file table logged once per interval (issue 33, item 7)."""

import asyncio
import errno
import logging

from squall._connlimit import ConnectionTable, FullTableLog, connection_cap


def test_the_cap_stays_below_the_file_limit():
    assert connection_cap(512, 1024) == 512
    # the reserve (64) and three accept bursts of 32 that asyncio holds outside the table
    assert connection_cap(4096, 1024) == 1024 - 64 - 3 * 32
    assert connection_cap(4096, 100) == 1


def test_at_the_cap_the_longest_waiting_connection_makes_room_and_busy_ones_never_do():
    table = ConnectionTable(3)
    for c in "abc":
        assert table.opened(c) == (False, None)
    table.busy("a")
    assert table.opened("d") == (False, "b")  # b waited longest; a is busy
    table.waiting("c")  # c answered a request and waits again, from now: d has waited longer
    assert table.opened("e") == (False, "d")
    table.busy("c")
    table.busy("e")
    assert table.opened("f") == (True, None) and len(table) == 3  # every one busy: refused, not kept
    table.closed("a")
    assert table.opened("f") == (False, None) and len(table) == 3
    table.busy("evicted-long-ago")  # a late report about a connection gone changes nothing
    table.waiting("evicted-long-ago")
    assert len(table) == 3


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_full_file_table_is_logged_once_per_interval_with_the_count_held_back(caplog):
    clock = _Clock()
    full = FullTableLog(logging.getLogger("test.connlimit"), "the test server", period=60, clock=clock)
    loop = asyncio.new_event_loop()
    try:
        full.install(loop)
        with caplog.at_level(logging.ERROR, logger="test.connlimit"):
            for i in range(1856):  # the master's lines in 35 s under the probe's load
                clock.now = i * 35 / 1856
                loop.call_exception_handler({"message": "socket.accept() out of system resource",
                                             "exception": OSError(errno.EMFILE, "Too many open files")})
            clock.now = 61
            loop.call_exception_handler({"message": "socket.accept() out of system resource",
                                         "exception": OSError(errno.ENFILE, "Too many open files in system")})
        lines = [r.getMessage() for r in caplog.records if r.name == "test.connlimit"]
        assert len(lines) == 2
        assert "the test server cannot accept connections: too many open files" in lines[0]
        assert "1855 more failed accepts since the last report" in lines[1]
        # anything else still reaches the loop's usual handler
        seen = []
        loop.set_exception_handler(None)
        loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx["message"]))
        full.install(loop)
        loop.call_exception_handler({"message": "other", "exception": OSError(errno.ECONNRESET, "reset")})
        assert seen == ["other"]
    finally:
        loop.close()
