"""Reading what components write to files while they write it.

A test polls the lines a running topology's components append to files under its temporary
directory. A read may come in the middle of a write: on Linux a read of a regular file does not
wait for a write to it, so it can see the first 4,096 bytes of a line and not the rest (a window
of 400 ids, read mid-write, failed a CI run with "Expecting ',' delimiter: line 1 column 4097").
Every writer ends its lines with a newline, so a line without one is still being written: it is
left for the next read."""

from __future__ import annotations

from pathlib import Path


def finished_lines(path: Path) -> list[str]:
    """The lines of ``path`` whose writer finished them (each ended with a newline); [] if there
    is no such file yet."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return text.split("\n")[:-1]

