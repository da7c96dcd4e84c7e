"""FileSpout tells a renamed file from a new file on the inode of a deleted one.

A progress record names its file by device and inode, a hash of its first bytes up to the
committed offset, and the inode's generation (`file_generation`). ext4 hands a freed inode to the
next file created, so after ``x.csv`` is deleted while the topology is down a new ``y.csv`` may
get its inode; with a small committed offset (a CSV header) the first bytes agree too. Without
the generation the new file was taken for ``x.csv`` renamed (logrotate's ``create``) and read on
from ``x.csv``'s offset: its header lost (20 of 21 lines), and the removal of ``x.csv``, acked
to byte 8 of 118, never reported.

The spout tasks are driven directly (open, next_tuple, ack); a crash is a task dropped without
``close``."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from squall.external.files import file_generation

from .test_file_progress import Task, lines

HEADER = b"id,name\n"  # 8 bytes: the committed offset once the header alone is acked


def rows(tag: str) -> bytes:
    return HEADER + b"".join(b"%d,%s%d\n" % (i, tag.encode(), i) for i in range(20))


def progress(local: Path) -> dict:
    return json.loads((local / "filespout" / "lines" / "task-0.json").read_bytes())


def forget_generation(local: Path) -> None:
    """Makes x.csv's progress record one an older squall wrote: no ``gen``."""
    doc = progress(local)
    doc["identity"]["x.csv"].pop("gen", None)
    (local / "filespout" / "lines" / "task-0.json").write_text(json.dumps(doc))


def read_header_and_crash(src: Path, local: Path) -> int:
    """Reads x.csv (a header and 20 rows), acks the header alone and crashes; x.csv's inode."""
    (src / "x.csv").write_bytes(rows("x"))
    task = Task(src, local)
    emitted = task.pump()
    assert len(emitted) == 21
    task.ack(emitted[:1])
    task.crash()
    assert progress(local)["files"] == {"x.csv": 8}
    return os.stat(src / "x.csv").st_ino


def create_on_inode(src: Path, ino: int, name: str, data: bytes) -> None:
    """Writes ``data`` as ``src/name`` on the freed inode ``ino``: files are created under hidden
    names (the spout skips them) until the file system hands that inode out, then renamed (which
    keeps inode and generation). Skips the test where the file system does not reuse it."""
    tries = []
    for i in range(64):
        path = src / f".try-{i}"
        path.write_bytes(data)
        tries.append(path)
        if os.stat(path).st_ino == ino:
            os.rename(path, src / name)
            tries.pop()
            break
    for path in tries:
        path.unlink()
    if not (src / name).exists():
        pytest.skip(f"this file system did not hand inode {ino} out again in 64 files")


def has_generations(directory: Path) -> bool:
    with open(directory / ".probe", "wb") as f:
        gen = file_generation(f.fileno())
    os.unlink(directory / ".probe")
    return gen is not None


@pytest.fixture
def dirs(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    return src, tmp_path / "local"


def test_a_new_file_on_a_deleted_files_inode_is_read_from_its_start_not_resumed_as_renamed(dirs):
    """x.csv acked to its header (byte 8), deleted while the topology was down; y.csv, the same
    header and 20 other rows, on x.csv's inode. Every line of y.csv once, from its header, and
    x.csv's removal reported. On main y.csv was taken for x.csv renamed and read from byte 8:
    20 of 21, nothing said. (Where the file system keeps no generations a record under another
    name is never followed on the inode alone: the same 21.)"""
    src, local = dirs
    ino = read_header_and_crash(src, local)
    os.unlink(src / "x.csv")
    create_on_inode(src, ino, "y.csv", rows("y"))
    task = Task(src, local)
    errors: list[str] = []
    task.out.report_error = errors.append
    got = task.pump(200)
    task.ack(got)
    task.pump(50)
    assert lines(got) == rows("y").decode().splitlines()
    assert len(got) == 21
    assert len(errors) == 1 and str(src / "x.csv") in errors[0] and f"committed to byte 8 of {len(rows('x'))}" in errors[0]
    assert sorted(os.listdir(src)) == ["y.csv.done"]


def test_a_new_file_of_the_same_name_on_the_deleted_files_inode_is_read_from_its_start(dirs, caplog):
    """x.csv acked to its header, deleted and written again (the same header, other rows) on the
    same inode: another generation, read from its start, with a warning naming it. On main it was
    resumed at byte 8: 20 of 21 (device, inode and first 8 bytes all agreed)."""
    src, local = dirs
    if not has_generations(src):
        pytest.skip("this file system keeps no inode generations: an inode's file cannot be told from a new one")
    ino = read_header_and_crash(src, local)
    os.unlink(src / "x.csv")
    create_on_inode(src, ino, "x.csv", rows("n"))
    with caplog.at_level(logging.WARNING, "squall.external.files"):
        task = Task(src, local)
        got = task.pump(200)
    assert lines(got) == rows("n").decode().splitlines()
    assert any("another file on the same inode" in r.getMessage() and str(src / "x.csv") in r.getMessage()
               for r in caplog.records)


def test_a_record_without_a_generation_still_resumes_its_file_and_gains_one(dirs):
    """A progress file of a squall before generations (no ``gen``) loads: the file under the
    same name, grown, is resumed at its committed offset (the inode and first bytes agree; a
    generation is unknown there, and taking the file for another would read every file again
    at the upgrade), and the next commit records the generation."""
    src, local = dirs
    read_header_and_crash(src, local)
    forget_generation(local)
    with open(src / "x.csv", "ab") as f:
        f.write(b"20,x20\n")
    task = Task(src, local, max_retries=None)
    got = task.pump(200)
    assert lines(got) == rows("x").decode().splitlines()[1:] + ["20,x20"]
    task.ack(got[:1])
    if has_generations(src):
        with open(src / "x.csv", "rb") as f:
            assert progress(local)["identity"]["x.csv"]["gen"] == file_generation(f.fileno())


def test_a_renamed_file_whose_record_has_no_generation_is_read_again_from_its_start(dirs):
    """The safe side: a record without a generation (an older squall's, or a file system without
    them) cannot tell x.csv renamed x.csv.1 from a new file on its freed inode, so x.csv.1 is read
    from its start, its header line twice, rather than perhaps a new file's lines lost."""
    src, local = dirs
    read_header_and_crash(src, local)
    forget_generation(local)
    os.rename(src / "x.csv", src / "x.csv.1")
    task = Task(src, local)
    task.out.report_error = lambda message: None  # x.csv's record dropped unfinished is reported
    got = task.pump(200)
    assert lines(got) == rows("x").decode().splitlines()
