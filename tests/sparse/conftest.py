"""A streamparse project made by streamparse's own ``sparse quickstart`` (its template, from the
streamparse package), once per session: the project users start from."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("streamparse", reason="the streamparse extra (pip install squall[streamparse])")


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``sparse quickstart wordcount`` in a fresh directory; the project's path."""
    where = tmp_path_factory.mktemp("sparse")
    sparse = shutil.which("sparse") or str(Path(sys.executable).with_name("sparse"))
    done = subprocess.run([sparse, "quickstart", "wordcount"], cwd=where, capture_output=True, text=True,
                          env={**os.environ, "LEIN_ROOT": "1"}, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    project = where / "wordcount"
    assert (project / "config.json").is_file() and (project / "topologies" / "wordcount.py").is_file()
    return project
