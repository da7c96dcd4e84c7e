"""The cluster's shared secret (``squall.secret``, else ``<storm.local.dir>/secret``): what the
control channel (`squall._wire`) authenticates with, and what sealed files and states are keyed
by. A module of its own, so that every side (the master, workers, the CLI, stateful bolts' file
states) reads it without the RPC machinery."""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._config import MIN_SECRET_CHARS, SECRET_KEY, Config, conf_value, setting
from ._errors import SquallError
from ._private import Kept, loose_mode, private_dir, write_failure

_SECRET_FILE = Kept("the cluster's secret, generated because squall.secret is not set",
                    "storm.local.dir, or squall.secret (then no file is written)")


def load_or_create_secret(conf: Mapping[str, Any]) -> bytes:
    """The cluster's shared secret: ``squall.secret`` from the configuration, else the file
    ``<storm.local.dir>/secret``, created with owner-only permissions on first use.

    Raises:
        SquallError: ``squall.secret`` is not a string of at least `MIN_SECRET_CHARS`
            characters (the message names the key, never the value); the file is too short,
            or its group or others may read or write it (the message says how to fix it).
        DiskWriteError: the file cannot be created or written (a full disk...); none is left.
    """
    given = setting(conf, SECRET_KEY)
    if given is not None:
        return given.encode() if isinstance(given, str) else bytes(given)
    path = private_dir(Path(conf_value(conf, Config.STORM_LOCAL_DIR))) / "secret"
    value = secrets.token_hex(32).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_secret_file(path)
    except OSError as e:
        raise write_failure(e, path, _SECRET_FILE, atomic=False) from e
    try:
        os.fchmod(fd, 0o600)
        if os.write(fd, value) != len(value):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a short write: the disk filled up
    except OSError as e:
        os.unlink(path)  # an empty or cut secret would stop every later start
        raise write_failure(e, path, _SECRET_FILE, atomic=False) from e
    finally:
        os.close(fd)
    return value


def _read_secret_file(path: Path) -> bytes:
    fix = "delete it to generate a new one (then restart every daemon that used the old one)"
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
