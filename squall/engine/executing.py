"""Which input each bolt executor of a worker is executing, kept where the worker's host can read
it after the worker died.

A record whose processing kills its worker (a library's ``os._exit``, a segfault, the kernel's OOM
killer) leaves no exception behind: every tuple in flight in that worker fails alike as a lost
worker, which no retry budget counts, so the record is replayed for ever and the worker
crash-loops (Storm's KafkaSpout counts every failure instead, and so dead-letters the good
records that were only beside it). Here each bolt executor keeps, on its line of the worker's
*board*, the root of the input it is executing and its task: stored before ``execute`` and
cleared after it (`squall._native.ExecutingEntry`, two 64-bit stores, no allocation). When the
worker dies without ending on its own, its host reads the board (`read_board`) and tells the
master, which tells the spouts: the tuple of that root fails as `squall.FailureCause`
``worker-died``, charged to its record, while the others lost with the worker stay uncharged.

The board is a buffer its host hands the worker (`ExecutingBoard`): an ``mmap`` of a file on the
process host, which outlives the process; a ``bytearray`` elsewhere (`LocalCluster`'s workers are
threads that end with an exception, not a death). Layout, in this machine's byte order (the
writer and the reader are processes of one machine): a header of `HEADER_SIZE` bytes (`MAGIC`,
the launch id, a digest of the storm id, the number of lines, the state: `LIVE`, or `ENDED` once
the worker ends on its own, when nothing it executed is to blame), then one line of `LINE_SIZE`
bytes per bolt executor: the root (0: none) and the task.

What a dead worker left is read as hostile: a torn or truncated file, another launch's board or
any other bytes give nothing, never an error; the master checks each task it names against the
worker's assignment. Only an input of one tree is named (a tuple anchored to several trees cannot
tell which record is at fault, and stays uncharged), and only on bolts (a spout's own worker's
death is its spout's business: `squall.external.retry.AloneGate`). Every line that names a root
when the worker dies is charged: on the worker's shared loop one input is executed at a time; a
component on a thread of its own (``topology.executor.own.thread``) adds its own line.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from .._native import ExecutingEntry

MAGIC = b"sqxexec1"
HEADER = struct.Struct("=8sQQII")   # magic, launch id, storm id digest, lines, state
HEADER_SIZE = HEADER.size           # 32: the lines start 8-byte aligned
LINE = struct.Struct("=Qq")         # root, task
LINE_SIZE = LINE.size               # 16
LIVE, ENDED = 1, 2
MAX_LINES = 65536                   # more than any worker runs executors; a bigger count is garbage


class ExecutingInput(NamedTuple):
    """An input a bolt ``task`` was executing when its worker died: the root of its tree."""

    task: int
    root: int


def board_size(lines: int) -> int:
    """The bytes of a board with ``lines`` lines."""
    return HEADER_SIZE + lines * LINE_SIZE


def storm_digest(storm_id: str) -> int:
    """The 64 bits of ``storm_id`` a board's header holds (a board of another topology whose
    launch id matches by chance is not taken for this one's)."""
    return int.from_bytes(hashlib.blake2b(storm_id.encode(), digest_size=8).digest(), "little")


class ExecutingBoard:
    """A worker's board of the inputs its bolt executors are executing (see the module
    docstring), written into ``memory``: a writable buffer of at least `board_size` bytes that
    its host provides (default: a ``bytearray``, for a host that reads nothing after a death).

    Args:
        storm_id, launch_id: the launch whose board it is (its host reads only that one's).
        lines: how many bolt executors get a line (`entry`).
        memory: ``size -> buffer``, how the host gives the memory.
    """

    def __init__(self, storm_id: str, launch_id: int, lines: int,
                 memory: Callable[[int], Any] = bytearray) -> None:
        if not 0 <= lines <= MAX_LINES:
            raise ValueError(f"ExecutingBoard: {lines} lines, not from 0 to {MAX_LINES}")
        self.memory = memory(board_size(lines))
        self.lines = lines
        view = memoryview(self.memory).cast("B")
        if len(view) < board_size(lines):
            raise ValueError(f"ExecutingBoard: the memory given holds {len(view)} bytes, not {board_size(lines)}")
        view[:board_size(lines)] = bytes(board_size(lines))
        self._header = (launch_id & 0xFFFFFFFFFFFFFFFF, storm_digest(storm_id), lines)
        HEADER.pack_into(view, 0, MAGIC, *self._header, LIVE)
        view.release()

    def entry(self, index: int, task: int) -> ExecutingEntry:
        """Line ``index``, for a bolt executor whose (first) task is ``task``."""
        if not 0 <= index < self.lines:
            raise IndexError(f"ExecutingBoard: line {index} of {self.lines}")
        line = ExecutingEntry(self.memory, HEADER_SIZE + index * LINE_SIZE)
        line.task = task
        return line

    def end(self) -> None:
        """The worker ends on its own (stopped, crashed on an exception it reported, could not
        start): nothing it was executing is to blame for its end."""
        with memoryview(self.memory) as view:
            HEADER.pack_into(view.cast("B"), 0, MAGIC, *self._header, ENDED)


def read_board(data: bytes, storm_id: str, launch_id: int) -> tuple[ExecutingInput, ...]:
    """The inputs the board ``data`` says the launch ``launch_id`` of ``storm_id`` was executing
    when it died; nothing if ``data`` is not such a board still `LIVE` (another launch's, one
    the worker ended, a torn or truncated one, garbage)."""
    if len(data) < HEADER_SIZE:
        return ()
    magic, launch, digest, lines, state = HEADER.unpack_from(data, 0)
    if (magic != MAGIC or launch != launch_id & 0xFFFFFFFFFFFFFFFF or digest != storm_digest(storm_id)
            or state != LIVE or lines > MAX_LINES or len(data) < board_size(lines)):
        return ()
    found = []
    for i in range(lines):
        root, task = LINE.unpack_from(data, HEADER_SIZE + i * LINE_SIZE)
        if root and task >= 0:
            found.append(ExecutingInput(task, root))
    return tuple(found)
