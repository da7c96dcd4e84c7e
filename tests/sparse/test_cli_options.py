"""``squall sparse run|submit``'s own options read as sparse reads them: ``-o KEY=VALUE``, and
what a mistake in one says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from squall.cli import main


@pytest.fixture
def project(quickstart: Path, tmp_path: Path) -> Path:
    """A copy of the quickstart project."""
    return Path(shutil.copytree(quickstart, tmp_path / "wordcount"))


@pytest.mark.parametrize("verb", ["run", "submit"])
def test_a_dash_o_without_equals_names_dash_o(project: Path, capsys, verb: str) -> None:
    # before the fix: "-c 'topology.debug': expected KEY=VALUE, e.g. -c ..." for an option not given
    assert main(["sparse", verb, "--project", str(project), "-o", "topology.debug"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("squall: error: -o 'topology.debug': expected KEY=VALUE, e.g. -o topology.workers=2"), err
