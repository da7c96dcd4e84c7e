"""Which offsets of a source may be committed: storm-kafka-client's ``OffsetManager``, the one
offset tracker of squall's spouts that resume from a committed position (a Kafka partition, a
file's byte offsets, a Parquet file's rows).

A record is emitted at ``offset`` and ends where the next one may start (``end``: ``offset + 1``
for Kafka and rows, the next line's byte offset for a file). The committable offset is the end of
the contiguous acked run from the committed offset: the run goes through acked records, and over
offsets that were never emitted (compacted away, transaction markers: they are not in the
source), and stops at the first emitted record not acked yet. So a restart from it replays every
record not acked, and never skips one because a later record was acked first (HdfsSpout's
pitfall).

Pure: no I/O and no clock; `commit` says an offset was made durable by the caller.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable


class OffsetManager:
    """One source's emitted and acked offsets and what may be committed (storm-kafka-client's
    ``OffsetManager``). ``tp`` names the source (a `TopicPartition`, a file name) in errors;
    ``fetch_offset`` is where reading started: the offset taken as already committed.

    The run from the committed offset is advanced as acks arrive (amortised O(1) per record),
    where Storm rescans its acked set at every commit; the result is Storm's for records acked
    after they were emitted."""

    def __init__(self, tp: Hashable, fetch_offset: int) -> None:
        self.tp = tp
        self.committed_offset = fetch_offset
        self.has_committed = False
        self._emitted: list[int] = []     # sorted, all >= committed_offset after a commit
        self._ends: dict[int, int] = {}   # an emitted offset's end, where it is not offset + 1
        self._acked: set[int] = set()
        self._unacked = 0                 # emitted and not acked
        self._run = 0                     # _emitted[:_run] are the acked run from committed_offset
        self._run_end = fetch_offset      # where that run ends: the committable offset

    def add_to_emitted(self, offset: int, end: int | None = None) -> None:
        """Records that ``offset`` was emitted (or skipped as a null tuple); ``end`` is where the
        next record may start (default ``offset + 1``). A second emit of an offset (a retry)
        changes nothing."""
        emitted = self._emitted
        if emitted and offset > emitted[-1]:   # the usual case: in order
            i = len(emitted)
        else:
            i = bisect.bisect_left(emitted, offset)
            if i < len(emitted) and emitted[i] == offset:
                return
        emitted.insert(i, offset)
        if end is not None and end != offset + 1:
            self._ends[offset] = end
        if offset not in self._acked:  # one acked before its emit is done already
            self._unacked += 1
        if i < self._run:
            # an offset inside the run emitted late (after a seek back): the run must stop at it
            self._run, self._run_end = 0, self.committed_offset
        self._advance()

    def add_to_acked(self, offset: int) -> None:
        """Records that ``offset``'s tuple was acked (or that the record is otherwise done)."""
        if offset in self._acked:
            return
        self._acked.add(offset)
        i = bisect.bisect_left(self._emitted, offset)
        if i < len(self._emitted) and self._emitted[i] == offset:
            self._unacked -= 1
            if i == self._run:
                self._advance()

    def _advance(self) -> None:
        emitted, acked, ends = self._emitted, self._acked, self._ends
        i, end = self._run, self._run_end
        while i < len(emitted) and emitted[i] in acked:
            off = emitted[i]
            end = ends.get(off, off + 1)
            i += 1
        self._run, self._run_end = i, end

    def is_acked(self, offset: int) -> bool:
        """True if ``offset`` was acked and not yet committed past."""
        return offset in self._acked

    def next_commit_offset(self) -> int | None:
        """The offset to commit (the next one to read), or None if nothing new can be committed."""
        return self._run_end if self._run_end > self.committed_offset else None

    @property
    def committable(self) -> int:
        """Where a restart would resume if committed now: `next_commit_offset`, else the
        committed offset."""
        return max(self._run_end, self.committed_offset)

    @property
    def pending(self) -> int:
        """How many emitted records are not acked yet."""
        return self._unacked

    def commit(self, offset: int) -> None:
        """Records that ``offset`` was committed: everything below it is forgotten."""
        self.committed_offset = offset
        self.has_committed = True
        emitted = self._emitted
        cut = bisect.bisect_left(emitted, offset)
        for off in emitted[:cut]:
            self._ends.pop(off, None)
            if off not in self._acked:
                self._unacked -= 1
        del emitted[:cut]
        self._acked = {a for a in self._acked if a >= offset}
        self._run = max(0, self._run - cut)
        if self._run_end < offset:
            self._run, self._run_end = 0, offset
        self._advance()

    def num_uncommitted_offsets(self) -> int:
        """How many emitted offsets are not committed yet (acked or not)."""
        return len(self._emitted)

    def nth_uncommitted_offset(self, n: int) -> int | None:
        """The n-th (1-based) emitted offset at or after the committed offset, or None."""
        return self._emitted[n - 1] if 0 < n <= len(self._emitted) else None
