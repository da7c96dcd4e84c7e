"""tests/conftest.py's watch for a hung test (`_timeout_of`): the limit it arms faulthandler
with is the one pytest-timeout applies."""

from __future__ import annotations

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
