"""A shell component's files, carried with the topology as Storm carries a jar's ``resources/``.

`pack` reads a directory once, where the component is made (the submitting machine); the bytes
travel inside the pickled component to every worker, on any host; `unpack` writes them into a
fresh directory for one task, which its subprocess runs in and which goes when it ends. Unlike a
jar, the files keep their permission bits, so an executable script runs as it is.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

MAX_RESOURCE_BYTES = 64 << 20
"""The most a component's resources may hold: they travel inside the topology (to the master,
every worker and every restart), which is no place for data sets."""

_SKIPPED = {"__pycache__", ".git"}


@dataclass(frozen=True)
class Resources:
    """The files of a directory: ``(relative path, mode, contents)`` each, and where they came from."""

    source: str
    files: tuple[tuple[str, int, bytes], ...]


def pack(directory: str | os.PathLike, component: str) -> Resources:
    """Every file under ``directory`` (``__pycache__`` and ``.git`` left out).

    Raises:
        ValueError: it is not a directory, or holds more than `MAX_RESOURCE_BYTES` (naming it
            and ``component``).
    """
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"{component}: resources {str(root)!r} is not a directory")
    files = []
    total = 0
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in _SKIPPED for part in rel.parts) or not path.is_file():
            continue
        data = path.read_bytes()
        total += len(data)
        if total > MAX_RESOURCE_BYTES:
            raise ValueError(f"{component}: resources {str(root)!r} hold more than {MAX_RESOURCE_BYTES >> 20} MB; "
                             f"they travel inside the topology: install large files where the workers run instead")
        files.append((rel.as_posix(), stat.S_IMODE(path.stat().st_mode), data))
    return Resources(str(root.resolve()), tuple(files))


def unpack(resources: Resources, prefix: str, dir: str | None = None) -> str:
    """Write ``resources`` into a new directory (named from ``prefix``, in ``dir``, default the
    temporary directory); its path."""
    target = tempfile.mkdtemp(prefix=prefix, dir=dir)
    try:
        for rel, mode, data in resources.files:
            path = Path(target, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(mode)
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target
