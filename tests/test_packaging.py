"""The package's metadata (issue 37 item 5). Building the wheel, installing it into a fresh venv
without a compiler and running it there is scripts/check-wheel.sh's (run by .ci/run), not a test's."""

from __future__ import annotations

import tomllib
from pathlib import Path

import squall
from squall.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_written_once_in_squall_and_every_command_prints_it(capsys):
    """pyproject.toml had its own "0.1.0" beside squall.__version__'s: one could move without the
    other. Now the package metadata reads squall.__version__, as both commands do."""
    assert "version" not in PROJECT["project"] and "version" in PROJECT["project"]["dynamic"]
    assert PROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "squall.__version__"}
    for argv in (["--version"], ["version"]):
        assert main(argv) == 0
        assert capsys.readouterr().out.split()[:2] == ["squall", squall.__version__]


def test_the_metadata_names_its_license_file_readme_python_and_links():
    project = PROJECT["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert (ROOT / project["readme"]).is_file() and project["requires-python"] == ">=3.11"
    assert {"Homepage", "Documentation", "Changelog"} <= set(project["urls"])
    assert "Programming Language :: Python :: 3.11" in project["classifiers"]
    assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")
