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
    with pytest.raises(SystemExit, match="W1 on the process host"):
        main(["instructions", "W2", "--host", "process", "--workers", "2"])
    with pytest.raises(ValueError, match="LocalCluster is one worker"):
        instructions.measure("W1", host="local", workers=2)


def test_only_the_worker_processes_instructions_are_summed(tmp_path):
    """The process host's count reads one cachegrind file per traced process and keeps the
    workers' (the master, the supervisor and the benchmark itself are not the engine's work)."""
    def cachegrind(pid, cmd, summary):
        (tmp_path / f"cachegrind.{pid}").write_text(
            f"version: 2\ncreator: cachegrind\npid: {pid}\ncmd: {cmd}\nevents: Ir\nfl=a.c\nfn=f\n1 {summary}\n"
            f"summary: {summary}\n")
    cachegrind(10, "python -m bench run W1 --host process", 900)
    cachegrind(11, "python -c from squall.cluster.process import run_nimbus", 800)
    cachegrind(12, "python -m squall.cluster.supervisor --conf x", 700)
    cachegrind(13, "python -m squall.worker --master 127.0.0.1:1 --slot 127.0.0.1:2", 1_000)
    cachegrind(14, "python -m squall.worker --master 127.0.0.1:1 --slot 127.0.0.1:3", 2_000)
    assert instructions.worker_instructions(tmp_path) == 3_000
    assert instructions.worker_instructions(tmp_path, expected=2) == 3_000
    # a worker killed before it exited wrote no file: one worker's count is not two workers'
    (tmp_path / "cachegrind.14").unlink()
    with pytest.raises(RuntimeError, match="1 of 2 worker processes wrote their cachegrind file"):
        instructions.worker_instructions(tmp_path, expected=2)
    for f in tmp_path.glob("cachegrind.1[34]"):
        f.unlink()
    with pytest.raises(RuntimeError, match="no worker process"):
        instructions.worker_instructions(tmp_path)


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
