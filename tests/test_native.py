"""The compiled hot path (squall._speedups) and its pure-Python twins (squall._native)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from squall import Tuple
from squall import _native
from squall._fields import Fields
from squall._tuple import Source

ROOT = Path(__file__).resolve().parents[1]

# The engine's own tests and the acceptance tests that run BasicBolts (acking, errors, whole
# topologies): what the two implementations must agree on.
TWIN_TESTS = ["tests/engine", "tests/test_tuple.py", "tests/acceptance/test_acking.py",
              "tests/acceptance/test_errors.py", "tests/acceptance/test_complete_topology.py"]


@pytest.mark.skipif(bool(os.environ.get("SQUALL_PURE_PYTHON")), reason="the pure path was asked for")
def test_pip_install_built_the_compiled_hot_path():
    # gcc and Python's headers are on every machine scripts/install-system-deps.sh prepares
    assert _native.COMPILED, "squall._speedups was not built: run `pip install -e .` with a C compiler"
    assert Tuple.__mro__[1].__module__ == "squall._speedups"


@pytest.mark.timeout(600)
def test_the_pure_python_path_passes_the_same_engine_tests():
    env = dict(os.environ, SQUALL_PURE_PYTHON="1")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=",
                          *TWIN_TESTS], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    probe = subprocess.run([sys.executable, "-c", "import squall._native as n; print(n.COMPILED)"],
                           cwd=ROOT, env=env, capture_output=True, text=True)
    assert probe.stdout.strip() == "False"


def test_a_tuple_keeps_its_ack_slots_through_pickle_and_attribute_writes():
    src = Source("split", "default", 3, Fields("word"))
    t = Tuple(["a"], src, 5, 7)
    t._oav ^= 12
    back = pickle.loads(pickle.dumps(t))
    assert (back.values, back._root, back._val, back._oav) == (["a"], 5, 7, 12)
    assert back.source_component == "split" and back.get_value_by_field("word") == "a"
    untracked = Tuple(["b"], src)
    assert (untracked._root, untracked._val, untracked._oav) == (0, 0, 0)
    with pytest.raises(AttributeError):
        t.other = 1  # no __dict__: a Tuple stays small on both paths
