"""Whether a file is still open for writing by some process: `FileSpout`'s "closed" test.

A file that has been quiet for ``quiet_secs`` and ends in a line without its newline is finished
by the quiet rule alone, its last line then a record. But a writer that paused mid-line for
longer than that (a logger blocked on its disk, a ``cat`` of a slow pipe, a program stopped in a
debugger) still holds the file open, and its next write finishes that line: emitting the line
then splits it into two records, and renaming the file done sends the rest of the writer's
output into a file no one reads. So before it takes such a file as finished, the spout asks the
kernel whether any process has it open for writing.

How: Linux's read lease (``fcntl(F_SETLEASE, F_RDLCK)``) is refused with EAGAIN while any
process on this host, of any user, has the file open for writing (the kernel's count of the
inode's writers), and granted otherwise; it is released at once. It needs a file descriptor
opened read-only (the spout's is) and that the process own the file or hold CAP_LEASE; where it
cannot be asked (another system, a file system without leases, another user's file without the
capability) the answer is "cannot tell", and the quiet rule alone decides, as before. It counts
the writers of this host's kernel only: a writer on another host of a shared file system is not
seen, and the quiet rule decides for it too.

A lease held has a cost: a process that opens the file for writing while it is held is made to
wait for its release (the next line here) and the holder is sent a signal, SIGIO by default,
whose default action ends the process. The lease's signal is therefore set to SIGURG, which is
ignored unless a handler is installed for it.
"""

from __future__ import annotations

import errno
import fcntl
import signal

_SET_LEASE = getattr(fcntl, "F_SETLEASE", None)
_SET_SIG = getattr(fcntl, "F_SETSIG", None)
# ignored by default: a writer opening the file while the lease is held notifies with it harmlessly
_BREAK_SIGNAL = getattr(signal, "SIGURG", None)


def open_for_writing(fd: int) -> bool | None:
    """Whether the file open read-only at ``fd`` is open for writing by any process on this host:
    True or False, or None when this cannot be told here (not Linux, a file system without
    leases, a file this process neither owns nor may lease)."""
    if _SET_LEASE is None or _SET_SIG is None or _BREAK_SIGNAL is None:
        return None
    try:
        fcntl.fcntl(fd, _SET_SIG, _BREAK_SIGNAL)
        fcntl.fcntl(fd, _SET_LEASE, fcntl.F_RDLCK)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EBUSY):  # a writer has it open (EBUSY on older kernels)
            return True
        return None  # EACCES (not its owner), EINVAL (no leases here, or a write descriptor)
    fcntl.fcntl(fd, _SET_LEASE, fcntl.F_UNLCK)
    return False
