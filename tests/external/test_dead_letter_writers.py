"""Two writers of one dead-letter file: two spouts sharing a ``dead_letter_dir`` whose inputs
have a name in common (``events.log``), or a task and a live copy of it. An append that fails (a
full disk) is cut off again, back to the size the file had before it: before, another writer's
entry appended meanwhile was cut off with it, and that record, counted as done, was lost."""

from __future__ import annotations

import errno
import json
import os
import threading

import pytest

from squall import DiskWriteError
from squall.external import files
from squall.external.files import append_dead_letter


class SaysWhenItWaits:
    """The lock appends take in this process, telling ``waiting`` when ``thread`` has to wait."""

    def __init__(self, lock, waiting: threading.Event) -> None:
        self.lock, self.waiting = lock, waiting
        self.thread: threading.Thread | None = None

    def __enter__(self):
        if not self.lock.acquire(blocking=False):
            if threading.current_thread() is self.thread:
                self.waiting.set()
            self.lock.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()


def test_a_failed_append_never_cuts_off_the_entry_another_writer_appended_meanwhile(tmp_path, monkeypatch):
    directory = str(tmp_path / "dead-letter")
    append_dead_letter(directory, "events.log", {"offset": 0})
    settled = threading.Event()  # the other writer appended, or waits for this one's append to end
    lock = SaysWhenItWaits(files._APPENDING, settled)
    monkeypatch.setattr(files, "_APPENDING", lock)

    def other_writer() -> None:
        append_dead_letter(directory, "events.log", {"offset": 20})
        settled.set()

    lock.thread = other = threading.Thread(target=other_writer)
    real_write = os.write

    def write(fd, data):
        if threading.current_thread() is other:
            return real_write(fd, data)
        other.start()
        assert settled.wait(30)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(DiskWriteError, match="no space is left"):
        append_dead_letter(directory, "events.log", {"offset": 10})
    other.join(30)
    monkeypatch.undo()
    with open(os.path.join(directory, "events.log.dead")) as f:
        assert [json.loads(line)["offset"] for line in f] == [0, 20]  # main: [0], the other's entry cut off
