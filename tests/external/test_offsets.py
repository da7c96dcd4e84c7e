"""The one offset tracker (squall/external/offsets.py), storm-kafka-client's OffsetManager, as the
Kafka spout (offsets, gaps compacted away) and the file spouts (byte offsets, rows) use it."""

from __future__ import annotations

import bisect
import random

from squall.external.offsets import OffsetManager


def storm_find_next_commit_offset(committed: int, emitted: list[int], acked: list[int]) -> int | None:
    """OffsetManager.findNextCommitOffset of storm-kafka-client, line by line (offsets end at
    offset + 1): the reference the incremental run is checked against."""
    nxt, found = committed, False
    for cur in sorted(acked):
        if cur < nxt:
            continue
        if cur == nxt:
            found, nxt = True, cur + 1
        elif bisect.bisect_left(emitted, nxt) < len(emitted) and emitted[bisect.bisect_left(emitted, nxt)] == nxt:
            break
        else:
            i = bisect.bisect_left(emitted, nxt)
            if i < len(emitted) and emitted[i] == cur:
                found, nxt = True, cur + 1
            else:
                break
    return nxt if found else None


def test_matches_storms_scan_on_random_emits_acks_and_commits():
    rng = random.Random(35)
    for _ in range(300):
        om = OffsetManager("t-0", 0)
        emitted: list[int] = []
        acked: list[int] = []
        committed, offset = 0, 0
        for _ in range(60):
            op = rng.random()
            if op < 0.45:
                offset += rng.choice((1, 1, 1, 2, 5))       # gaps: offsets compacted away
                om.add_to_emitted(offset)
                bisect.insort(emitted, offset)
            elif op < 0.9 and emitted:
                off = rng.choice(emitted)
                if off not in acked:
                    om.add_to_acked(off)
                    bisect.insort(acked, off)
            else:
                nxt = storm_find_next_commit_offset(committed, emitted, acked)
                assert om.next_commit_offset() == nxt
                if nxt is not None:
                    om.commit(nxt)
                    committed = nxt
                    emitted = [e for e in emitted if e >= nxt]
                    acked = [a for a in acked if a >= nxt]
            assert om.next_commit_offset() == storm_find_next_commit_offset(committed, emitted, acked)
            assert om.num_uncommitted_offsets() == len(emitted)
            assert om.pending == len(set(emitted) - set(acked))


def test_a_files_lines_commit_at_the_next_unacked_lines_start():
    om = OffsetManager("a.txt", 100)                     # resumed at byte 100
    for off, end in ((100, 110), (110, 125), (125, 126)):
        om.add_to_emitted(off, end)
    om.add_to_acked(110)
    assert (om.committable, om.next_commit_offset(), om.pending) == (100, None, 2)
    om.add_to_acked(100)
    assert (om.committable, om.next_commit_offset()) == (125, 125)
    om.commit(125)
    assert (om.committed_offset, om.num_uncommitted_offsets(), om.pending) == (125, 1, 1)
    om.add_to_acked(125)
    assert (om.committable, om.pending) == (126, 0)


def test_an_offset_emitted_late_inside_the_run_stops_it():
    om = OffsetManager("t-0", 0)
    for off in (0, 5):
        om.add_to_emitted(off)
        om.add_to_acked(off)
    assert om.next_commit_offset() == 6       # 1..4 never emitted: compacted away
    om.add_to_emitted(3)                       # ...but 3 was there after all, and is not acked
    assert om.next_commit_offset() == 1
    om.add_to_acked(3)
    assert om.next_commit_offset() == 6
