"""Owner-only files and directories, for everything squall keeps in ``storm.local.dir`` and its
logs: plans, state, the secret, supervisor configuration, pid files, worker and supervisor logs.

Another local user must not read a plan (it may hold the topology's own credentials), a log, or
a configuration file that holds ``squall.secret``, nor plant a file there. So directories squall
creates are 0700 and files 0600, set on the open file descriptor: the process's umask and the
mode of a file left by an older run do not matter.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import re
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from ._config import Config, conf_value
from ._errors import DiskWriteError, SquallError

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
        if st.st_uid != os.getuid():
            raise SquallError(f"{p} belongs to another user (uid {st.st_uid}), who can replace what squall keeps "
                              f"there and reads back: {_OWN_DIR}")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(p, DIR_MODE)
    return p


def _own_dir(setting: str) -> str:
    return f"point {setting} at a directory of your own"


_OWN_DIR = _own_dir(Config.STORM_LOCAL_DIR)


def own_local_dir(conf: Mapping[str, Any], setting: str = Config.STORM_LOCAL_DIR) -> Path:
    """``storm.local.dir``, made owner-only if it is missing (`private_dir`), after checking that
    no other user can change what is in it.

    squall reads back what it keeps there (the secret, its state, the configuration a supervisor
    and its workers start from), and the default is the relative ``storm-local``: in a shared
    directory such as ``/tmp``, another user may have made it first. Whoever owns it, or may
    write it, can put their own files in place of squall's (a supervisor's ``launch.yaml``
    swapped between the master's write and the supervisor's read named their master and their
    secret, and a root supervisor then ran their code).

    ``setting`` names where the directory was given, for the error: the file state provider's
    own ``"directory"`` keeps its key there too, and an error that named ``storm.local.dir`` sent
    its user to a setting they had not made.

    Raises:
        SquallError: another user owns it, or others (not the group) may write it; named, with
            what to do.
    """
    p = private_dir(Path(conf_value(conf, Config.STORM_LOCAL_DIR)))
    st = p.stat()
    if st.st_uid != os.getuid():
        raise SquallError(f"{setting} {p} belongs to another user (uid {st.st_uid}), who can replace what "
                          f"squall keeps there and reads back (its secret, state and configuration): "
                          f"{_own_dir(setting)}")
    if stat.S_IMODE(st.st_mode) & 0o002:
        raise SquallError(f"{setting} {p} may be written by any user (mode {stat.S_IMODE(st.st_mode):o}), "
                          f"who can replace what squall keeps there and reads back: run `chmod 700 {p}`, or "
                          f"{_own_dir(setting)}")
    return p


# subdirectories of storm.local.dir that only squall creates: an older run may have left them 0755
_OURS = frozenset({"nimbus", "supervisor", "logs"})


class Kept(NamedTuple):
    """What a file squall writes holds, for the error that names it when the write fails:
    ``what`` (``"the state of component [count] task 3, namespace 'count-3'"``) and ``setting``,
    the setting or argument that chooses its directory (``"storm.local.dir"``)."""

    what: str
    setting: str = Config.STORM_LOCAL_DIR


# errno -> (what it means, what to do); {dir}, {user} and {setting} are filled in
_MEANINGS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("no space is left on the device",
                   ("free space on the file system that holds {dir} (see `df -h {dir}`), or point {setting} at a "
                    "directory on another file system")),
    errno.EDQUOT: ("user {user}'s disk quota is used up",
                   ("free space within {user}'s quota on the file system that holds {dir} or have the quota "
                    "raised, or point {setting} at a directory on another file system")),
    errno.EROFS: ("the file system is read-only",
                  ("remount the file system that holds {dir} read-write (one turns read-only after disk errors: "
                   "see `dmesg`), or point {setting} at a writable directory")),
    errno.EACCES: ("permission denied", ("let user {user} write to {dir}, or point {setting} at a directory "
                                         "{user} owns")),
    errno.EPERM: ("operation not permitted", ("let user {user} write to {dir}, or point {setting} at a "
                                              "directory {user} owns")),
    errno.EIO: ("an I/O error: the device may be failing", ("check the device that holds {dir} (see `dmesg`), or "
                                                           "point {setting} at a directory on another device")),
    errno.EFBIG: ("the file is larger than the file system or the process's limit allows",
                  "raise the limit (`ulimit -f`), or point {setting} at another file system"),
}


_OS_ERROR = re.compile(r"\(os error (\d+)\)")
"""How an errno ends a Rust ``std::io::Error``'s text (delta-rs raises them as a plain ``DeltaError``)."""


def errno_of(error: BaseException) -> int | None:
    """The errno ``error`` carries: an `OSError`'s, or the one a Rust I/O error's text ends with
    (``... No space left on device (os error 28)``); None if it carries none."""
    if isinstance(error, OSError) and error.errno:
        return error.errno
    found = _OS_ERROR.search(str(error))
    return int(found.group(1)) if found else None


def disk_trouble(code: int | None, directory: str, setting: str) -> str | None:
    """What ``code`` (an errno) means for a write under ``directory`` and what to do, when it is
    one of the disk's troubles that the user must fix (full, a quota, read-only, permissions,
    failing); None for another. ``setting``: what chooses the directory."""
    if code not in _MEANINGS:
        return None
    meaning, todo = _MEANINGS[code]
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid without a name (a container's)
        user = str(os.getuid())
    fill = {"dir": directory, "user": user, "setting": setting}
    return f"{meaning.format(**fill)} ({errno.errorcode[code]}). To go on: {todo.format(**fill)}"


def disk_error_message(code: int | None, strerror: str | None, path: str | os.PathLike, kept: Kept,
                       atomic: bool) -> str:
    """What a failed write of ``path`` says: the file, what it holds, what ``code`` (an errno)
    means and what to do; with ``atomic`` (the file is written aside and renamed) that the file
    as it was is intact."""
    name = errno.errorcode.get(code or 0, str(code))
    meaning, todo = _MEANINGS.get(code or 0, (strerror or "an error", ("fix the cause, or point {setting} at "
                                                                       "another directory")))
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid without a name (a container's)
        user = str(os.getuid())
    directory = os.path.dirname(os.path.abspath(path))
    fill = {"dir": directory, "user": user, "setting": kept.setting}
    intact = f" {os.path.basename(path)} as last written is intact." if atomic else ""
    return (f"cannot write {path} ({kept.what}): {meaning.format(**fill)} ({name}).{intact} To go on: "
            f"{todo.format(**fill)}.")


def write_failure(error: OSError, path: str | os.PathLike, kept: Kept, atomic: bool = True) -> DiskWriteError:
    """``error``, raised writing ``path``, as a `DiskWriteError` whose message says what
    `disk_error_message` says (an error that is one already is returned as it is)."""
    if isinstance(error, DiskWriteError):
        return error
    return DiskWriteError(disk_error_message(error.errno, error.strerror, path, kept, atomic), error.errno, str(path))


def fsync_dir(directory: str | os.PathLike) -> None:
    """Make a rename or a new name in ``directory`` durable (POSIX keeps names in the directory)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private(path: str | os.PathLike, data: bytes | str, kept: Kept | None = None, durable: bool = False) -> None:
    """Replace ``path`` atomically by ``data``, owner-only (a reader never sees half a file);
    ``durable``: also fsynced, file and directory, so that after a crash ``path`` holds the old
    or the new data.

    Raises:
        DiskWriteError: it cannot be written (the message names the file, what it holds as
            ``kept`` says, the cause and what to do); ``path`` is as it was.
    """
    p = Path(path)
    try:
        private_dir(p.parent)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)  # a tmp file left by a crashed run keeps its mode through O_CREAT
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
                if durable:
                    f.flush()
                    os.fsync(fd)
            os.replace(tmp, p)
        except BaseException:  # a failed rename too: the temporary file holds all the new data
            tmp.unlink(missing_ok=True)
            raise
        if durable:
            fsync_dir(p.parent)
    except OSError as e:
        raise write_failure(e, p, kept or Kept(f"squall's {p.name}")) from e


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


def unresolved_link(path: Path, top: Path | None = None) -> Path | None:
    """The first of ``path`` and its parents up to ``top`` (``path`` alone without ``top``) that
    is a symbolic link whose target does not resolve (a disk not mounted yet, a target gone, a
    loop): a state file there cannot be read, which ``exists()``, saying False, hides as none."""
    for p in (path, *path.parents) if top is not None else (path,):
        if p.is_symlink() and not p.exists():
            return p
        if p == top:
            break
    return None


def hold_lock(path: str | os.PathLike) -> int | None:
    """An exclusive lock on ``path`` (made owner-only if missing) for as long as the returned
    descriptor is open (not inherited by child processes, released when this process ends
    however it ends); None if another holds it. A daemon's claim on a directory: unlike a pid
    file, it cannot outlive its process and name another one that got its pid.

    Raises:
        SquallError: ``path`` cannot be opened as a lock file (a symbolic link, which is never
            followed: it could point the lock's writes at another file; a directory; ...),
            naming it and what to do.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        what = ("it is a symbolic link, which squall never follows for its own files"
                if e.errno == errno.ELOOP else e.strerror or str(e))
        raise SquallError(f"cannot take the lock file {path}: {what}; remove it (squall makes it again) "
                          "if no squall daemon runs there") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def lock_held(path: str | os.PathLike) -> bool:
    """Whether a live process holds ``path``'s `hold_lock`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # and with it the shared lock, if taken
    return False


def loose_mode(path: str | os.PathLike) -> int | None:
    """The mode of ``path`` if its group or others may read or write it, else None."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    return mode if mode & 0o066 else None
