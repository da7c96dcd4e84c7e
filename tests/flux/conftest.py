"""Flux files and their Python classes are in files/; the classes import as ``flux_words``
(the directory is put on sys.path, as ``squall local`` puts a Flux file's directory)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from squall import LocalCluster

from ..conftest import wait_until

FILES = Path(__file__).resolve().parent / "files"


@pytest.fixture(scope="module", autouse=True)
def flux_files_on_sys_path():
    """``flux_words`` importable, as beside a Flux file that ``squall local`` runs."""
    sys.path.insert(0, str(FILES))
    try:
        yield FILES
    finally:
        sys.path.remove(str(FILES))


@pytest.fixture(scope="module")
def cluster():
    """One LocalCluster for a module's topologies; it must leave no squall thread behind."""
    before = set(threading.enumerate())
    c = LocalCluster()
    try:
        yield c
    finally:
        c.shutdown()
    assert wait_until(lambda: not [t for t in threading.enumerate()
                                   if t not in before and t.is_alive() and t.name.startswith("squall")], 10)
