"""The layers of docs/architecture.md hold: what ``import squall`` loads, and which package may
import which (the import-linter contracts in pyproject.toml, run as CI runs them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import squall

ROOT = Path(__file__).resolve().parent.parent

# What a topology's process needs no part of: the master, its HA, the hosts, the worker
# process, the UI, the CLI, Trident (loaded by a Trident topology when it is unpickled).
NOT_LOADED_BY_IMPORT_SQUALL = ("squall.cluster", "squall.ui", "squall.cli", "squall.worker", "squall.trident",
                               "squall.external")


def modules_after(code: str) -> list[str]:
    """The squall modules a fresh interpreter has loaded after running ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", (f"{code}\nimport json, sys\n"
                                "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'squall')))")],
        check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr  # what failed to import, in the failure's message
    return json.loads(out.stdout.splitlines()[-1])


def test_import_squall_loads_what_a_topology_needs_and_not_the_master_or_the_ui():
    # squall's names load at their first use (tests/test_lazy_import.py): all but the cluster's
    loaded = modules_after("import squall\n"
                           "for name in set(squall.__all__) - {'LocalCluster', 'TopologyStatus'}:\n"
                           "    getattr(squall, name)")

    assert [m for m in loaded if m.startswith(NOT_LOADED_BY_IMPORT_SQUALL)] == []
    for needed in ("squall._topology", "squall.engine.plan", "squall.windowing", "squall.state", "squall.metric"):
        assert needed in loaded  # the features register on the extension points at import


def test_the_cluster_names_squall_reexports_are_loaded_at_their_first_use():
    loaded = modules_after("from squall import LocalCluster, TopologyStatus\n"
                           "assert LocalCluster.__module__ == 'squall.cluster.local'\n"
                           "assert TopologyStatus.__module__ == 'squall.cluster.state'")

    assert "squall.cluster.local" in loaded
    assert {"LocalCluster", "TopologyStatus"} <= set(dir(squall)) and set(squall.__all__) <= set(dir(squall))
    assert squall.LocalCluster is squall.cluster.local.LocalCluster


def test_a_name_squall_does_not_have_is_an_attribute_error_naming_it():
    try:
        squall.NoSuchName  # noqa: B018
    except AttributeError as e:
        assert "NoSuchName" in str(e)
    else:
        raise AssertionError("squall.NoSuchName did not raise")


def lint_imports(where: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with the repository's contracts (pyproject.toml), over the squall package
    found on ``pythonpath``."""
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.fail("lint-imports is missing: pip install -e '.[test]' (import-linter)")
    return subprocess.run([lint, "--no-cache", "--config", str(ROOT / "pyproject.toml")], check=False, cwd=where,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(pythonpath)},
                          capture_output=True, text=True, timeout=300)


def test_every_package_imports_only_the_layers_below_it():
    """docs/architecture.md's layers, as pyproject.toml's import-linter contracts write them."""
    done = lint_imports(ROOT, ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken." in done.stdout


def test_the_core_contract_names_every_core_module():
    """import-linter cannot match ``squall._*``, so the "core" contract lists the modules: a new
    core module left off the list would be checked by nothing. ``_submitter`` (StormSubmitter, a
    client of the cluster) and the package's own ``__init__``/``__main__`` are not core."""
    import tomllib
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    core = next(c for c in contracts if c["id"] == "core")
    on_disk = {f"squall.{p.stem}" for p in (ROOT / "squall").glob("_*.py")} - {
        "squall.__init__", "squall.__main__", "squall._submitter"}
    assert sorted(core["source_modules"]) == sorted(on_disk)



def test_every_package_is_in_a_layer_and_forbidden_to_the_core():
    """A package that no layer names is checked by nothing (import-linter ignores it): each of
    squall's packages but ``squall.testing`` (helpers above the cluster, as docs/architecture.md
    says) is in the "layers" contract and among the modules the core may not import."""
    import tomllib
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")
    core = next(c for c in contracts if c["id"] == "core")
    placed = {name.strip() for layer in layers["layers"] for name in layer.split("|")}
    packages = {f"squall.{p.parent.name}" for p in (ROOT / "squall").glob("*/__init__.py")} - {"squall.testing"}
    assert sorted(packages - placed) == []
    assert sorted(packages - set(core["forbidden_modules"])) == []

@pytest.mark.parametrize("module, line, broken", [
    ("engine/plan.py", "from ..windowing import executor", "squall.engine is not allowed to import squall.windowing"),
    ("_topology.py", "from .state import _wiring", "squall._topology is not allowed to import squall.state"),
    ("worker/agent.py", "from ..cluster import seeds", "squall.worker is not allowed to import squall.cluster"),
    # the master and its election import each other in no circle (issue 35 item 1)
    ("cluster/master.py", "from . import master_ha", "squall.cluster.master is not allowed to import squall.cluster.master_ha"),
    ("cluster/master_ha.py", "from . import master", "squall.cluster.master_ha is not allowed to import squall.cluster.master"),
])
def test_an_import_that_goes_up_a_layer_fails_the_check(tmp_path, module, line, broken):
    copy = tmp_path / "squall"
    shutil.copytree(ROOT / "squall", copy, ignore=shutil.ignore_patterns("*.so", "static", "__pycache__"))
    path = copy / module
    path.write_text(path.read_text() + f"\n{line}  # the violation\n")

    done = lint_imports(tmp_path, tmp_path)

    assert done.returncode != 0
    assert broken in done.stdout, done.stdout
