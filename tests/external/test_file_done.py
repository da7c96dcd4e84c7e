"""FileSpout's done rename never replaces a file: a name that comes back (``events.log`` every
day) used to be renamed with ``os.replace`` over the earlier file's ``events.log.done``, which
was lost. Storm's HdfsSpout moves a finished file into its archive with a rename that fails
rather than replace one.

The spout task is driven directly (open, next_tuple, ack), as in test_file_progress.py."""

from __future__ import annotations

import logging
import os

import pytest

from tests.external.test_file_progress import Task, lines, write_lines


def finish(task: Task, expected: list[str]) -> None:
    got = task.pump()
    assert lines(got) == expected
    task.ack(got)
    task.pump()  # finds the end of the file: renamed done


def test_a_file_of_a_name_done_before_is_renamed_done_beside_the_first_one(tmp_path, caplog):
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    write_lines(src / "events.log", ["day1-a", "day1-b"])
    task = Task(src, local)
    finish(task, ["day1-a", "day1-b"])
    assert (src / "events.log.done").read_text() == "day1-a\nday1-b\n"
    write_lines(src / "events.log", ["day2-a"])  # the same name again, the next day
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        finish(task, ["day2-a"])
    write_lines(src / "events.log", ["day3-a", "day3-b", "day3-c"])
    finish(task, ["day3-a", "day3-b", "day3-c"])
    # every finished file kept, each under its own name, and nothing read twice
    assert {p.name: p.read_text() for p in src.iterdir()} == {
        "events.log.done": "day1-a\nday1-b\n", "events.log.1.done": "day2-a\n",
        "events.log.2.done": "day3-a\nday3-b\nday3-c\n"}
    assert lines(task.out.emitted) == ["day1-a", "day1-b", "day2-a", "day3-a", "day3-b", "day3-c"]
    assert any("events.log.done is taken" in r.getMessage() and "events.log.1.done" in r.getMessage()
               for r in caplog.records)


def test_rename_no_replace_keeps_the_file_in_the_way(tmp_path):
    from squall.external.files import rename_no_replace

    (tmp_path / "a").write_text("new")
    (tmp_path / "b").write_text("old")
    assert not rename_no_replace(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "a").read_text() == "new" and (tmp_path / "b").read_text() == "old"
    assert rename_no_replace(tmp_path / "a", tmp_path / "c")
    assert not (tmp_path / "a").exists() and (tmp_path / "c").read_text() == "new"


def test_rename_no_replace_after_a_crash_between_link_and_unlink_completes_it(tmp_path):
    from squall.external.files import rename_no_replace

    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")  # the crash came after the link
    assert rename_no_replace(tmp_path / "a", tmp_path / "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_rename_no_replace_whose_source_is_removed_after_the_link_reports_it_renamed(tmp_path, monkeypatch):
    """Linked is renamed: the file is at its new name. Before, the unlink of a source another
    process had removed meanwhile raised, and a sink took its committed batch for a failed one."""
    from squall.external.files import rename_no_replace

    (tmp_path / "a").write_text("x")
    real_link = os.link

    def link_then_source_removed(src, dst, **kw):
        real_link(src, dst, **kw)
        os.unlink(src)

    monkeypatch.setattr(os, "link", link_then_source_removed)
    assert rename_no_replace(tmp_path / "a", tmp_path / "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"] and (tmp_path / "b").read_text() == "x"


def producer_moves_a_new_file_in(monkeypatch, src, lines_: list[str], after_link: bool) -> None:
    """Makes the producer move a new file in under ``src``'s name (``mv``, which replaces) during
    the spout's done rename: before its link, or after it."""
    real_link = os.link

    def move_in() -> None:
        new = src.parent.parent / "new.tmp"
        write_lines(new, lines_)
        os.replace(new, src)

    def link(a, b, **kw):
        monkeypatch.setattr(os, "link", real_link)
        if not after_link:
            move_in()
        real_link(a, b, **kw)
        if after_link:
            move_in()

    monkeypatch.setattr(os, "link", link)


@pytest.mark.parametrize("after_link", [False, True], ids=["before-link", "after-link"])
def test_a_new_file_moved_in_under_the_name_being_renamed_done_is_read_not_archived(tmp_path, monkeypatch,
                                                                                    after_link):
    """The producer moves tomorrow's ``events.log`` in just as the spout renames today's done.
    Before, the rename worked by name: before its link the new file was the one renamed done,
    after it the new file was the one unlinked; either way its lines were never read."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    write_lines(src / "events.log", ["day1-a", "day1-b"])
    task = Task(src, local)
    producer_moves_a_new_file_in(monkeypatch, src / "events.log", ["day2-a", "day2-b"], after_link)
    finish(task, ["day1-a", "day1-b"])
    monkeypatch.undo()
    assert (src / "events.log.done").read_text() == "day1-a\nday1-b\n"
    assert (src / "events.log").read_text() == "day2-a\nday2-b\n"
    task.ack(task.out.emitted[2:])  # the new file's lines, read by finish's last pump
    task.pump()
    assert {p.name: p.read_text() for p in src.iterdir() if not p.name.startswith(".")} == {
        "events.log.done": "day1-a\nday1-b\n", "events.log.1.done": "day2-a\nday2-b\n"}
    assert lines(task.out.emitted) == ["day1-a", "day1-b", "day2-a", "day2-b"]


def test_a_new_file_taken_aside_in_place_of_the_one_read_is_put_back_under_its_name(tmp_path, monkeypatch, caplog):
    """The new file comes just before the done rename takes the name aside: it is the one taken,
    so it goes back under its name, to be read; the file read, replaced by it, is left as it is."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    write_lines(src / "events.log", ["day1-a"])
    task = Task(src, local)
    real_rename = os.rename

    def rename(a, b, **kw):
        monkeypatch.setattr(os, "rename", real_rename)
        write_lines(tmp_path / "new.tmp", ["day2-a"])
        os.replace(tmp_path / "new.tmp", src / "events.log")
        real_rename(a, b, **kw)

    monkeypatch.setattr(os, "rename", rename)
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        finish(task, ["day1-a"])
    monkeypatch.undo()
    assert [p.name for p in src.iterdir()] == ["events.log"] and (src / "events.log").read_text() == "day2-a\n"
    assert any("was moved or replaced while it was read" in r.getMessage() for r in caplog.records)
    task.ack(task.out.emitted[1:])
    task.pump()
    assert lines(task.out.emitted) == ["day1-a", "day2-a"]
    assert {p.name: p.read_text() for p in src.iterdir()} == {"events.log.done": "day2-a\n"}


def test_a_done_rename_that_fails_leaves_the_file_under_its_name_for_the_restarted_task(tmp_path, monkeypatch):
    """The link into the done name fails once (an I/O error), which crashes the task (its ack
    raised). Before, the file read stayed under the hidden name it was taken aside to, for good:
    the restarted task did not see it, and it never reached its done name. It goes back under
    its name, and the restarted task finds it read to its end (every ack is committed before a
    file is renamed done: nothing is emitted again) and renames it done."""
    import errno

    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    write_lines(src / "events.log", ["day1-a", "day1-b"])
    task = Task(src, local)
    got = task.pump()
    assert lines(got) == ["day1-a", "day1-b"]
    real_link = os.link

    def link_fails_once(a, b, **kw):
        monkeypatch.setattr(os, "link", real_link)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "link", link_fails_once)
    with pytest.raises(OSError, match="Input/output error"):
        task.ack(got)  # the last ack finishes the file
    assert [p.name for p in src.iterdir()] == ["events.log"]
    task.crash()
    again = Task(src, local)
    assert again.pump() == []
    assert [p.name for p in src.iterdir()] == ["events.log.done"]
    assert (src / "events.log.done").read_text() == "day1-a\nday1-b\n"
