"""The board of the inputs a worker's bolts are executing (squall/engine/executing.py): what the
hot path writes on it, and what a host reads back from what a dead worker left."""

from __future__ import annotations

import random
import struct
from collections import deque

import pytest

from squall import Tuple, _native
from squall._fields import Fields
from squall._tuple import Source
from squall.engine.executing import (
    ENDED,
    HEADER,
    HEADER_SIZE,
    LINE_SIZE,
    MAGIC,
    ExecutingBoard,
    ExecutingInput,
    board_size,
    read_board,
    storm_digest,
)
from squall.engine.executor import TaskStats
from squall.engine.stats import TaskStatistics

SRC = Source("split", "default", 1, Fields(["x"]))


def _tuple(value, root):
    t = Tuple([value], SRC)
    t._root = root
    return t


def test_a_board_names_the_root_each_line_is_executing_for_its_own_launch_only():
    board = ExecutingBoard("t-1", 7, 3)
    first, second, idle = board.entry(0, 4), board.entry(1, 5), board.entry(2, 6)
    first.root, second.root = 2**64 - 1, 99
    second.task = 8   # an executor of several tasks names the one it drains
    data = bytes(board.memory)
    assert len(data) == board_size(3) == HEADER_SIZE + 3 * LINE_SIZE
    assert read_board(data, "t-1", 7) == (ExecutingInput(4, 2**64 - 1), ExecutingInput(8, 99))
    assert idle.root == 0 and idle.task == 6
    assert read_board(data, "t-1", 8) == ()   # another launch of the slot
    assert read_board(data, "t-2", 7) == ()   # another topology
    board.end()   # the worker ended on its own: nothing it executed is to blame
    assert read_board(bytes(board.memory), "t-1", 7) == ()


def test_what_a_dead_worker_left_is_read_as_hostile_and_gives_nothing_when_it_is_not_a_board():
    board = ExecutingBoard("t-1", 7, 2)
    board.entry(0, 4).root = 5
    good = bytes(board.memory)
    assert read_board(good, "t-1", 7) == (ExecutingInput(4, 5),)
    for data in (b"", good[:HEADER_SIZE - 1], good[:-1], bytes(len(good)), b"\xff" * len(good),
                 b"x" + good[1:]):
        assert read_board(data, "t-1", 7) == (), data
    # a count of lines past the bytes there, or past any worker's, is not believed
    for lines in (3, 2**32 - 1):
        forged = HEADER.pack(MAGIC, 7, storm_digest("t-1"), lines, 1) + good[HEADER_SIZE:]
        assert read_board(forged, "t-1", 7) == ()
    # an unknown state (a torn header) is not LIVE
    assert read_board(HEADER.pack(MAGIC, 7, storm_digest("t-1"), 2, 9) + good[HEADER_SIZE:], "t-1", 7) == ()
    assert read_board(HEADER.pack(MAGIC, 7, storm_digest("t-1"), 2, ENDED) + good[HEADER_SIZE:], "t-1", 7) == ()
    # a negative task (garbage in a line) is left out; the master checks the rest
    line = struct.pack("=Qq", 5, -3)
    assert read_board(good[:HEADER_SIZE] + line + good[HEADER_SIZE + LINE_SIZE:], "t-1", 7) == ()


def test_a_board_refuses_memory_too_small_and_lines_it_does_not_have():
    with pytest.raises(ValueError, match="holds 10 bytes"):
        ExecutingBoard("t-1", 1, 1, lambda size: bytearray(10))
    with pytest.raises(IndexError, match="line 1 of 1"):
        ExecutingBoard("t-1", 1, 1).entry(1, 3)
    with pytest.raises(ValueError, match="offset 4"):
        _native.ExecutingEntry(bytearray(64), 4)
    with pytest.raises(BufferError, match="not writable"):
        _native.ExecutingEntry(bytes(64), 0)


def test_each_input_s_root_is_on_the_line_while_it_is_executed_and_cleared_after():
    """`execute_run` and `drain_inbox` (C when compiled): the root of a one-tree input while its
    ``execute`` runs, 0 for any other (untracked, of several trees), 0 once it returned or raised
    (handed to ``on_error`` or not)."""
    board = ExecutingBoard("t-1", 1, 1)
    line = board.entry(0, 3)
    seen = []

    def execute(tup):
        seen.append((tup.values[0], line.root))
        if tup.values[0] == "boom":
            raise ValueError("boom")

    inputs = [("a", 11), ("b", 0), ("c", {12: 1, 13: 2}), ("boom", 14), ("d", 2**64 - 1)]
    want = [("a", 11), ("b", 0), ("c", 0), ("boom", 14), ("d", 2**64 - 1)]
    inbox = deque(_tuple(v, r) for v, r in inputs)
    assert _native.execute_run(execute, inbox.popleft, 5, TaskStats(), lambda tup, e: None, line) == 5
    assert seen == want and line.root == 0
    for freq in (1, 2, 20):   # every input sampled, every other, one in 20
        seen.clear()
        inbox = deque(_tuple(v, r) for v, r in inputs * 4)
        assert _native.drain_inbox(execute, inbox.popleft, 20, TaskStats(), TaskStatistics(freq, random.Random(freq)),
                                   lambda: 1.0, lambda tup, e: None, line) == 20
        assert seen == want * 4 and line.root == 0
    seen.clear()
    with pytest.raises(ValueError, match="boom"):   # raised out of the run: cleared too
        _native.execute_run(execute, deque([_tuple("boom", 15)]).popleft, 1, TaskStats(), None, line)
    assert seen == [("boom", 15)] and line.root == 0
    assert read_board(bytes(board.memory), "t-1", 1) == ()
    # without a line, as before
    assert _native.execute_run(lambda tup: None, deque([_tuple("e", 16)]).popleft, 1, TaskStats(), None, None) == 1
