"""Opening a file of a source directory only if it is a regular file itself.

Whoever writes a directory a spout reads could otherwise make it emit a file they could not
read themselves: a symbolic link to ``~squall/storm-local/secret`` put in a file's place. A
check of the name before the open (``os.path.islink``) leaves the time between the two to put
the link in; the open itself must refuse it (``O_NOFOLLOW``)."""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO


def file_type(mode: int) -> str:
    """What a file that is not a regular one is (``st_mode``), for a message."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((what for test, what in kinds if test(mode)), f"mode {mode:o}")


class NotRegular(OSError):
    """What was listed as a file of the directory is a symbolic link, a FIFO or a directory now."""


def open_regular(path: str) -> BinaryIO:
    """``path`` opened for reading if it is a regular file itself. A symbolic link is not
    followed, so that whoever writes the directory cannot make the spout emit a file they could
    not read themselves (``ln -s ~squall/storm-local/secret x``: its lines went out as tuples), as
    `squall.external.files.FileSpout` and the Trident file and Parquet spouts do not; nor does a
    FIFO put in a file's place block the open until a writer comes.

    Raises:
        NotRegular: it is not a regular file (named).
        OSError: it cannot be opened (`FileNotFoundError`: gone).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotRegular(errno.ELOOP, "a symbolic link, which the spout does not follow", path) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegular(errno.EINVAL, f"not a regular file ({file_type(mode)})", path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")
