"""`python -m bench instructions`: its arguments, and the W2 spout that stops (without Valgrind)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import instructions  # noqa: E402
from bench.__main__ import main  # noqa: E402


def test_only_w1_and_w2_with_two_growing_sizes_are_measured():
    with pytest.raises(ValueError, match="W1 and W2"):
        instructions.measure("W3")
    with pytest.raises(ValueError, match="first smaller"):
        instructions.measure("W2", sizes=(60000, 20000))
    with pytest.raises(SystemExit, match="two sizes"):
        main(["instructions", "W2", "--n", "20000"])
    with pytest.raises(SystemExit, match="two sizes"):
        main(["instructions", "W2", "--n", "a,b"])


def test_the_w2_run_stops_after_its_tuples_and_all_are_acked():
    """The run Valgrind counts, here without it: n tuples, every one acked, then the end."""
    comps = instructions._run_w2(500, True, timeout=60)
    assert comps["spout"]["acked"] == 500 and comps["spout"]["failed"] == 0
    spout = instructions._LimitedConstSpout(True, 3)
    emitted = []
    spout._emit = lambda values, msg_id=None: emitted.append(msg_id)
    spout._next_id, spout._samples = 0, None
    for _ in range(10):
        spout.next_tuple()
    assert emitted == [0, 1, 2]
