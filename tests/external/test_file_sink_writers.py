"""FileSinkBolt: a task starting clears the hidden ``.inprogress`` files a crashed run of its task
left, never the one another live writer of its names is writing (a zombie copy of the task, or a
second topology's sink with the same prefix and task index in the same directory). Before, it
removed every ``.<prefix>-<index>-*.inprogress`` file: the live writer's rename at rotation found
its file gone and failed every tuple of it, written for nothing."""

from __future__ import annotations

import os

import pytest

from squall.external.files import FileSinkBolt

from .test_sink_fail_reasons import Context, Recorder, tuples


def sink(tmp_path) -> tuple[FileSinkBolt, Recorder]:
    out = Recorder()
    bolt = FileSinkBolt(tmp_path / "out", max_records=2, tick_secs=None)
    bolt.prepare({}, Context(), out)  # task index 0: ".part-0-*.inprogress"
    return bolt, out


def lines_in(directory) -> list[str]:
    return sorted(line for n in os.listdir(directory) if not n.startswith(".")
                  for line in (directory / n).read_text().splitlines())


@pytest.mark.parametrize("when", ["mid-file", "at-rotation"])
def test_a_writer_starting_while_another_writes_leaves_its_file_alone(tmp_path, monkeypatch, when):
    """Writer "a" has tuple 1 in its hidden file when writer "b" of the same names starts: "b"
    starts after tuple 1, or at "a"'s rotation, just before its rename. Every tuple of "a" is
    acked and in a visible file, once."""
    a, out_a = sink(tmp_path)
    first, second = tuples(2)
    a.execute(first)
    if when == "mid-file":
        sink(tmp_path)
    else:
        real_replace = os.replace

        def replace(src, dst, *args, **kw):
            sink(tmp_path)
            real_replace(src, dst, *args, **kw)

        monkeypatch.setattr(os, "replace", replace)
    a.execute(second)  # the second tuple rotates the file
    monkeypatch.undo()
    assert out_a.acked == [1, 2] and not out_a.causes and not out_a.errors
    assert lines_in(tmp_path / "out") == ["1\t10", "2\t20"]
    assert not [n for n in os.listdir(tmp_path / "out") if n.startswith(".")]


def test_a_crashed_runs_hidden_file_is_still_removed(tmp_path):
    """What no live writer holds is a crashed run's: removed (its tuples were never acked, and replay)."""
    (tmp_path / "out").mkdir()
    stale = tmp_path / "out" / ".part-0-deadbeef-000001.txt.inprogress"
    stale.write_text("never acked\n")
    other = tmp_path / "out" / ".part-1-deadbeef-000001.txt.inprogress"  # task index 1's: not ours
    other.write_text("task 1's\n")
    sink(tmp_path)
    assert not stale.exists() and other.exists()
