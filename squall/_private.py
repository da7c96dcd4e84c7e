"""Owner-only files and directories, for everything squall keeps in ``storm.local.dir`` and its
logs: plans, state, the secret, supervisor configuration, pid files, worker and supervisor logs.

Another local user must not read a plan (it may hold the topology's own credentials), a log, or
a configuration file that holds ``squall.secret``, nor plant a file there. So directories squall
creates are 0700 and files 0600, set on the open file descriptor: the process's umask and the
mode of a file left by an older run do not matter.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import BinaryIO

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` (and missing parents) owner-only; a directory squall created before with a
    looser mode is tightened. An existing directory the user made and does not own (say a shared
    parent) is left alone."""
    p = Path(path)
    missing = []
    q = p
    while not q.exists() and q.parent != q:
        missing.append(q)
        q = q.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
            os.chmod(d, DIR_MODE)  # mkdir's mode passes through the umask: set it exactly
        except FileExistsError:  # another process made it meanwhile
            pass
    if not missing and p.name in _OURS:
        st = p.stat()
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(p, DIR_MODE)
    return p


# subdirectories of storm.local.dir that only squall creates: an older run may have left them 0755
_OURS = frozenset({"nimbus", "supervisor", "logs"})


def write_private(path: str | os.PathLike, data: bytes | str) -> None:
    """Replace ``path`` atomically by ``data``, owner-only (a reader never sees half a file)."""
    p = Path(path)
    private_dir(p.parent)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # a tmp file left by a crashed run keeps its mode through O_CREAT
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, p)


def open_private_log(path: str | os.PathLike, buffering: int = -1) -> BinaryIO:
    """``path`` opened for appending, owner-only (a worker's or supervisor's output); a log an
    older run left readable by others is made owner-only too. ``buffering`` as for `open`."""
    p = Path(path)
    private_dir(p.parent)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab", buffering=buffering)


def loose_mode(path: str | os.PathLike) -> int | None:
    """The mode of ``path`` if its group or others may read or write it, else None."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    return mode if mode & 0o066 else None
