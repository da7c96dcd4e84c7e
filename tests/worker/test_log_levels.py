"""The topology log levels of ``squall set_log_level`` in one worker (`squall.worker.log_levels`):
the master's merge of a request, and a worker's manager applying a config, restoring a logger
when its timeout passes on a simulated clock, and when the setting is removed (``-r``)."""

from __future__ import annotations

import pytest

from squall._errors import BadParameterError
from squall._nimbus import LogConfig, LogLevel
from squall.engine.clock import SimulatedClock
from squall.worker.log_levels import LogLevelManager, ProcessLoggers, merge_log_config


class MapLevels:
    """A test's loggers: name -> own level."""

    def __init__(self, **levels: int) -> None:
        self.levels = dict(levels)

    def get(self, name: str) -> int:
        return self.levels.get(name, 0)

    def set(self, name: str, level: int) -> None:
        self.levels[name] = level


def update(level: str, secs: int = 0) -> LogLevel:
    return LogLevel("UPDATE", level, secs)


def test_a_request_merges_as_storms_nimbus_with_the_timeout_from_the_masters_clock():
    merged = merge_log_config({}, LogConfig({"app.db": update("debug", 30), "root": update("WARN")}), now=1000.0)
    assert merged == {"app.db": LogLevel("UPDATE", "DEBUG", 30, 1030.0), "ROOT": LogLevel("UPDATE", "WARN", 0, None)}
    merged = merge_log_config(merged, LogConfig({"app.db": LogLevel("REMOVE")}), now=1001.0)
    assert merged == {"ROOT": LogLevel("UPDATE", "WARN", 0, None)}
    with pytest.raises(BadParameterError, match=r"logger app\.db: 'LOUD' is not a log level \(one of ALL, TRACE"):
        merge_log_config({}, LogConfig({"app.db": update("LOUD")}), now=0.0)
    with pytest.raises(BadParameterError, match="use ROOT for the root logger"):
        merge_log_config({}, LogConfig({"": update("INFO")}), now=0.0)


def test_a_level_set_for_a_while_comes_back_when_the_timeout_passes_on_the_clock():
    clock = SimulatedClock()
    levels = MapLevels(**{"app.db": 30})
    manager = LogLevelManager(ProcessLoggers(levels))
    config = LogConfig(merge_log_config({}, LogConfig({"app.db": update("DEBUG", 10), "ROOT": update("TRACE")}),
                                        clock.wall()))
    manager.apply(config, clock.wall())
    assert levels.levels == {"app.db": 10, "ROOT": 5}
    assert manager.applied()["app.db"].reset_log_level == "WARN"
    clock.advance(9.5)
    assert manager.expire(clock.wall()) == [] and levels.levels["app.db"] == 10
    clock.advance(0.5)
    assert manager.expire(clock.wall()) == ["app.db"]
    assert levels.levels == {"app.db": 30, "ROOT": 5}  # the other setting has no timeout
    manager.apply(config, clock.wall())  # the same config again: a setting that ended stays ended
    assert levels.levels["app.db"] == 30


def test_a_removed_setting_restores_the_level_the_logger_had_even_inherited():
    levels = MapLevels()
    manager = LogLevelManager(ProcessLoggers(levels))
    manager.apply(LogConfig({"app": update("OFF")}), 0.0)
    assert levels.levels == {"app": 60}
    manager.apply(LogConfig({}), 1.0)  # `-r app`: the master's config no longer has it
    assert levels.levels == {"app": 0}  # NOTSET: it inherits its parent's again


def test_workers_sharing_a_process_restore_a_logger_when_the_last_lets_it_go():
    levels = MapLevels(app=20)
    loggers = ProcessLoggers(levels)
    first, second = LogLevelManager(loggers), LogLevelManager(loggers)
    config = LogConfig({"app": LogLevel("UPDATE", "DEBUG", 5, 5.0)})
    first.apply(config, 0.0)
    second.apply(config, 0.0)  # sees DEBUG, yet restores INFO: the level before the first
    first.expire(6.0)
    assert levels.levels["app"] == 10  # the second worker still holds it
    second.close()
    assert levels.levels["app"] == 20
