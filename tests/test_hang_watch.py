"""tests/conftest.py's watch for a hung test (`_timeout_of`): the limit it arms faulthandler
with is the one pytest-timeout applies."""

from __future__ import annotations

import os

import pytest

from .conftest import _timeout_of


class _Plugins:
    def __init__(self, timeout: bool) -> None:
        self.timeout = timeout

    def has_plugin(self, name: str) -> bool:
        return self.timeout and name == "timeout"


class _Config:
    def __init__(self, option=None, ini="120", plugin: bool = True) -> None:
        self.option, self.ini, self.pluginmanager = option, ini, _Plugins(plugin)

    def getoption(self, name, default=None):
        return self.option if name == "timeout" and self.option is not None else default

    def getini(self, name):
        if not self.pluginmanager.timeout:
            raise ValueError(f"unknown configuration value: {name!r}")  # as pytest's, for an unknown key
        return self.ini


class _Item:
    def __init__(self, config: _Config, mark=None) -> None:
        self.config, self.mark = config, mark

    def get_closest_marker(self, name):
        return self.mark if name == "timeout" else None


def test_the_hang_watch_takes_the_timeout_pytest_timeout_applies(monkeypatch) -> None:
    """PYTEST_TIMEOUT is pytest-timeout's before the ini's (a test running 400 s under
    PYTEST_TIMEOUT=600 was killed at 2 x 120 + 60 s); without pytest-timeout (-p no:timeout)
    every test's setup raised "unknown configuration value: 'timeout'"; a mark's None is the
    default, as pytest-timeout reads it."""
    monkeypatch.delenv("PYTEST_TIMEOUT", raising=False)
    assert _timeout_of(_Item(_Config())) == 120
    assert _timeout_of(_Item(_Config(option=30.0))) == 30
    assert _timeout_of(_Item(_Config(option=30.0), pytest.mark.timeout(300).mark)) == 300
    assert _timeout_of(_Item(_Config(), pytest.mark.timeout(None).mark)) == 120
    assert _timeout_of(_Item(_Config(plugin=False))) == 0
    monkeypatch.setenv("PYTEST_TIMEOUT", "600")
    assert _timeout_of(_Item(_Config())) == 600
    assert _timeout_of(_Item(_Config(option=30.0))) == 30


_CRASHING_GROUPS = '''
import os
from pathlib import Path

import os

import pytest


@pytest.mark.xdist_group("done-before")
def test_a_group_finished_before_the_crash():
    pass


@pytest.mark.xdist_group("crashed")
def test_crashes_its_worker_once():
    mark = Path(__file__).with_name("crashed-once")
    if not mark.exists():
        mark.touch()
        os._exit(1)


@pytest.mark.xdist_group("crashed")
def test_after_the_crash():
    pass


@pytest.mark.xdist_group("after")
def test_a_group_after_the_crashed_one():
    pass
'''


def test_a_crashed_workers_replacement_is_given_the_rest_and_the_run_ends(tmp_path) -> None:
    """pytest-xdist 3.8.0's loadgroup put a crashed worker's finished groups back on the queue,
    and handed one to the replacement as an empty batch: it never completed anything, so nothing
    was handed to it again, and the run hung (`_LoadGroupAfterCrash`). The run ends, each test
    reported."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_xdist_make_scheduler  # noqa: F401\n")
    (tmp_path / "test_groups.py").write_text(_CRASHING_GROUPS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # pytest-xdist only (-p xdist), not every installed plugin: loading them all (hypothesis,
    # schemathesis ...) took 3-4 s in each of the run's three processes (the controller, the
    # worker and its replacement), 27 s of this test at load 8 against 6 s without
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist", "-n", "1", "--dist", "loadgroup", "-p", "no:cacheprovider",
         "-rA", "-c", str(tmp_path / "pytest.ini"), str(tmp_path)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True, text=True, timeout=90)
    out = done.stdout
    assert "crashed while running" in out, out
    assert "PASSED test_groups.py::test_a_group_finished_before_the_crash" in out, out
    assert "PASSED test_groups.py::test_after_the_crash" in out, out
    assert "PASSED test_groups.py::test_a_group_after_the_crashed_one" in out, out


class _Worker:
    """An xdist worker's controller as the scheduler sees it: one that died after ``alive_for``
    sends (its pipe closed, as execnet says then)."""

    def __init__(self, alive_for: int) -> None:
        self.alive_for = alive_for
        self.sent: list[list[int]] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        if len(self.sent) >= self.alive_for:
            raise OSError("cannot send (already closed?)")
        self.sent.append(indices)

    def shutdown(self) -> None:
        if len(self.sent) >= self.alive_for:
            raise OSError("cannot send (already closed?)")
        self.shutting_down = True


def test_a_worker_that_dies_while_its_work_is_sent_leaves_its_groups_to_its_replacement() -> None:
    """The scheduler's first round sends a worker one group, then a second: a worker that ran
    the first and crashed meanwhile (fast, on a loaded machine) made the second send raise, an
    INTERNALERROR that ended the run with no test reported (seen once in CI). Now the send's
    error is left to the crash, heard next, which gives every unfinished group to the
    replacement."""
    from types import SimpleNamespace

    from .conftest import _LoadGroupAfterCrash

    config = SimpleNamespace(getvalue=lambda name: {"tx": ["popen"], "dist": "loadgroup"}[name],
                             option=SimpleNamespace(loadscopereorder=False))
    sched = _LoadGroupAfterCrash(config)
    collection = ["t.py::a@g1", "t.py::b@g2", "t.py::c@g2", "t.py::d@g3"]
    dying = _Worker(alive_for=1)
    sched.add_node(dying)
    sched.add_node_collection(dying, collection)
    sched.schedule()  # sends g1, then fails to send more: no error
    assert dying.sent == [[0]]
    sched.mark_test_complete(dying, 0)  # a's report came before the crash
    replacement = _Worker(alive_for=100)
    crashed = sched.remove_node(dying)
    assert crashed is not None and crashed.startswith("t.py::b")
    sched.add_node(replacement)
    sched.add_node_collection(replacement, collection)
    sched.schedule()  # as DSession does once a worker's collection is in
    done = 0
    while done < len([i for batch in replacement.sent for i in batch]):  # it runs what it is sent
        sched.mark_test_complete(replacement, [i for batch in replacement.sent for i in batch][done])
        done += 1
    assert sorted(i for batch in replacement.sent for i in batch) == [1, 2, 3]  # b, c, d: each once
    assert sched.tests_finished
