"""The cluster's shared secret (``squall.secret``, else ``<storm.local.dir>/secret``): what the
control channel (`squall._wire`) authenticates with, and what sealed files and states are keyed
by. A module of its own, so that every side (the master, workers, the CLI, stateful bolts' file
states) reads it without the RPC machinery."""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._config import MIN_SECRET_CHARS, SECRET_KEY, Config, setting
from ._errors import SquallError
from ._private import Kept, fsync_dir, loose_mode, own_local_dir, write_failure

_SECRET_FILE = Kept("the cluster's secret, generated because squall.secret is not set",
                    "storm.local.dir, or squall.secret (then no file is written)")


def load_or_create_secret(conf: Mapping[str, Any], named: str = Config.STORM_LOCAL_DIR) -> bytes:
    """The cluster's shared secret: ``squall.secret`` from the configuration, else the file
    ``<storm.local.dir>/secret``, created with owner-only permissions on first use. ``named``
    says where the directory was set, for the errors (the file state provider's ``"directory"``
    keeps its own key this way).

    Raises:
        SquallError: ``squall.secret`` is not a string of at least `MIN_SECRET_CHARS`
            characters (the message names the key, never the value); the file is too short,
            or its group or others may read or write it (the message says how to fix it).
        DiskWriteError: the file cannot be created or written (a full disk...); none is left.
    """
    given = setting(conf, SECRET_KEY)
    if given is not None:
        return given.encode() if isinstance(given, str) else bytes(given)
    path = own_local_dir(conf, named) / "secret"
    if os.path.lexists(path):
        return _read_secret_file(path, named)
    # Written whole under a name of its own, then linked into place: the master, its supervisor,
    # workers and file states may all start at once on a fresh directory, and one that found the
    # name while another wrote it read it empty and refused to start; a process killed there left
    # it empty, refused by every later start. The link never replaces: the first to make it wins
    value = secrets.token_hex(32).encode()
    tmp = path.with_name(f".secret.{secrets.token_hex(8)}.tmp")
    try:
        try:
            _write_new(tmp, value)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return _read_secret_file(path, named)  # another process's, made meanwhile
            except OSError as e:
                if e.errno not in _NO_HARD_LINKS:
                    raise
                return _create_in_place(path, value, named)
            fsync_dir(path.parent)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as e:
        kept = _SECRET_FILE if named == Config.STORM_LOCAL_DIR else Kept(_SECRET_FILE.what, named)
        raise write_failure(e, path, kept, atomic=False) from e
    return value


# a file system without hard links (some FUSE or SMB mounts): created in place, as before
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK})


def _write_new(path: Path, value: bytes) -> None:
    """Creates ``path`` owner-only holding ``value``, fsynced (a secret linked into place must not
    come back empty after a power loss)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        if os.write(fd, value) != len(value):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a short write: the disk filled up
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_in_place(path: Path, value: bytes, named: str) -> bytes:
    """The secret created at ``path`` itself (another process's if it made it first)."""
    try:
        _write_new(path, value)
    except FileExistsError:
        return _read_secret_file(path, named)
    except OSError:
        path.unlink(missing_ok=True)  # an empty or cut secret would stop every later start
        raise
    return value


def _read_secret_file(path: Path, named: str = Config.STORM_LOCAL_DIR) -> bytes:
    fix = "delete it to generate a new one (then restart every daemon that used the old one)"
    st = os.stat(path)
    if st.st_uid != os.getuid():
        # whoever wrote it knows it, and whoever knows it runs code as this cluster's user: another
        # user who made storm.local.dir first (the default "storm-local" is relative, so in a
        # shared directory such as /tmp anyone may) gave a root daemon a secret of their choosing
        raise SquallError(f"the cluster's secret {path} belongs to another user (uid {st.st_uid}), who may know "
                          f"what it holds: use a {named} of your own, or set squall.secret")
    if not stat.S_ISREG(st.st_mode):
        raise SquallError(f"the cluster's secret {path} is not a regular file: {fix}")
    mode = loose_mode(path)
    if mode is not None:
        raise SquallError(f"the cluster's secret {path} is open to other users (mode {mode:o}): "
                          f"run `chmod 600 {path}`, or {fix}")
    value = path.read_bytes().strip()
    if not value:
        raise SquallError(f"the cluster's secret {path} is empty: write a secret into it "
                          f"(readable by its owner only), or {fix}")
    if len(value) < MIN_SECRET_CHARS:  # the same floor as squall.secret's
        raise SquallError(f"the cluster's secret {path} is shorter than {MIN_SECRET_CHARS} characters, "
                          f"short enough to guess: write a longer one into it, or {fix}")
    return value
