"""A topology's log levels in its workers: Storm's ``LogConfigManager`` over Python's `logging`.

``squall set_log_level`` (Storm's ``storm set_log_level``) asks the master to set a logger's level
in every worker of a topology, optionally for a number of seconds; the master keeps the
topology's `LogConfig` (the logger names with their target level and, for a timeout, the wall
time it ends) and each worker's heartbeat reply carries it when it changed. A worker's
`LogLevelManager` applies it (`LogLevelManager.apply`) and, at each beat, restores the level a
logger had before once its timeout passed (`LogLevelManager.expire`), as Storm's workers do
(there every ``worker.log.level.reset.poll.secs``; here every heartbeat). A logger named ``ROOT``
(any case) is the root logger. Time is passed in: the caller's clock.

The levels are Storm's (log4j's) names, mapped onto `logging`'s numbers (`LEVELS`): TRACE, which
`logging` lacks, is 5, below DEBUG; OFF is above CRITICAL, so that nothing passes; ALL is 1, so
that everything does (0 would mean "inherit from the parent" in `logging`).

Several workers of a `LocalCluster` share one process, hence one set of loggers: the level a
logger had before is kept once per process (`ProcessLoggers`), and restored when the last worker
that set the logger lets it go.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import Protocol

from .._errors import BadParameterError
from .._nimbus import LogConfig, LogLevel, encode

log = logging.getLogger(__name__)

LEVELS: dict[str, int] = {"ALL": 1, "TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
                          "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
                          "OFF": logging.CRITICAL + 10}
"""Storm's level names (log4j's) -> `logging`'s numbers."""

_ALIASES = {"WARNING": "WARN", "CRITICAL": "FATAL"}  # Python's own names are taken too

ROOT = "ROOT"
"""The logger name that means the root logger (Storm's, any case)."""


def level_name(logger: str, level: str) -> str:
    """``level`` as Storm's name (any case; Python's WARNING and CRITICAL too) for ``logger``.
    Raises `BadParameterError` naming both."""
    name = level.strip().upper()
    name = _ALIASES.get(name, name)
    if name not in LEVELS:
        raise BadParameterError(f"logger {logger}: {level!r} is not a log level (one of {', '.join(LEVELS)})")
    return name


def logger_name(name: str) -> str:
    """``name`` as the config keeps it: ``ROOT`` in any case is ``ROOT``."""
    return ROOT if name.upper() == ROOT else name


def config_digest(config: LogConfig) -> str:
    """What tells one `LogConfig` from another ("" for none): the heartbeat carries the digest of
    the config a worker applied, and the master sends the config only when its own differs."""
    if not config.named_logger_level:
        return ""
    text = json.dumps(encode(config), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def merge_log_config(current: dict[str, LogLevel], request: LogConfig, now: float) -> dict[str, LogLevel]:
    """A topology's log levels ``current`` with a ``set_log_config`` ``request`` merged in at wall
    time ``now``, as Storm's Nimbus merges them: an ``UPDATE`` replaces the logger's setting (its
    level checked, a timeout of N > 0 seconds ending at ``now + N``, none otherwise), a ``REMOVE``
    drops it, ``UNCHANGED`` changes nothing. Raises `BadParameterError` for an empty logger name,
    a level or an action that is none of Storm's, naming the logger."""
    merged = dict(current)
    for name, setting in request.named_logger_level.items():
        if not name:
            raise BadParameterError("named loggers need a valid name: use ROOT for the root logger")
        name = logger_name(name)
        if setting.action == "UPDATE":
            target = level_name(name, setting.target_log_level or "")
            secs = setting.reset_log_level_timeout_secs
            merged[name] = LogLevel("UPDATE", target, secs, now + secs if secs > 0 else None)
        elif setting.action == "REMOVE":
            merged.pop(name, None)
        elif setting.action != "UNCHANGED":
            raise BadParameterError(f"logger {name}: the action {setting.action!r} is none of UPDATE, REMOVE, "
                                    "UNCHANGED")
    return merged


class Loggers(Protocol):
    """Where levels are set: a worker's process loggers (`ProcessLoggers`) or a test's."""

    def hold(self, name: str, holder: object, level: int) -> None:
        """``holder`` sets ``name``'s level to ``level`` (the level it had first is remembered)."""
        ...

    def release(self, name: str, holder: object) -> int | None:
        """``holder`` lets ``name`` go: the level it had before comes back once no holder is left
        (that level; None while another holder keeps it)."""
        ...

    def before(self, name: str) -> int | None:
        """The level ``name`` had before it was held (None: not held)."""
        ...


class Levels(Protocol):
    """Reads and sets a logger's level (`logging`'s, or a test's map)."""

    def get(self, name: str) -> int:
        """``name``'s own level (0: it inherits its parent's)."""
        ...

    def set(self, name: str, level: int) -> None:
        """Set ``name``'s own level."""
        ...


class PythonLevels:
    """`logging`'s loggers; ``ROOT`` is the root logger."""

    def get(self, name: str) -> int:
        """``name``'s own level (0: it inherits its parent's)."""
        return _logger(name).level

    def set(self, name: str, level: int) -> None:
        """Set ``name``'s own level."""
        _logger(name).setLevel(level)


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


class ProcessLoggers:
    """The loggers of one process, shared by the workers in it: each logger's level before the
    first holder set it, and who holds it (`Loggers`)."""

    def __init__(self, levels: Levels | None = None) -> None:
        self.levels: Levels = levels or PythonLevels()
        self._lock = threading.Lock()
        self._held: dict[str, tuple[int, set[int]]] = {}  # name -> (level before, holders' ids)

    def hold(self, name: str, holder: object, level: int) -> None:
        """``holder`` sets ``name`` to ``level``; the level ``name`` had before the first holder is kept."""
        with self._lock:
            _, holders = self._held.setdefault(name, (self.levels.get(name), set()))
            holders.add(id(holder))
            self.levels.set(name, level)

    def release(self, name: str, holder: object) -> int | None:
        """``holder`` lets ``name`` go; the level before comes back when no holder is left (returned)."""
        with self._lock:
            entry = self._held.get(name)
            if entry is None:
                return None
            before, holders = entry
            holders.discard(id(holder))
            if holders:
                return None
            del self._held[name]
            self.levels.set(name, before)
            return before

    def before(self, name: str) -> int | None:
        """The level ``name`` had before it was held (None: not held)."""
        with self._lock:
            entry = self._held.get(name)
            return None if entry is None else entry[0]

    def holds(self, name: str) -> bool:
        """Whether a worker holds ``name``'s level now (``ROOT``: the root logger)."""
        return name in self._held


PROCESS_LOGGERS = ProcessLoggers()
"""This process's loggers, which every worker in it sets through."""


class LogLevelManager:
    """One worker's share of its topology's `LogConfig` (Storm's ``LogConfigManager``): what it set,
    so that a setting removed or timed out gives the logger its level back. Not thread-safe: one
    worker's heartbeat calls it."""

    def __init__(self, loggers: Loggers = PROCESS_LOGGERS) -> None:
        self.loggers = loggers
        self._applied: dict[str, LogLevel] = {}  # logger -> the setting this worker applied

    def apply(self, config: LogConfig, now: float) -> None:
        """Make the loggers match ``config`` at wall time ``now``: each setting whose timeout has
        not passed is applied, and what this worker set that ``config`` no longer holds (removed,
        or timed out) gets the level it had before."""
        wanted: dict[str, tuple[LogLevel, int]] = {}  # logger -> its setting, the level to set
        for name, setting in config.named_logger_level.items():
            if setting.action == "REMOVE" or setting.target_log_level is None or _ended(setting, now):
                continue
            wanted[logger_name(name)] = setting, LEVELS[level_name(name, setting.target_log_level)]
        named = {logger_name(n) for n in config.named_logger_level}
        for name in [n for n in self._applied if n not in wanted]:
            self._restore(name, "its timeout passed" if name in named else "removed")
        for name, (setting, level) in wanted.items():
            if self._applied.get(name) == setting:
                continue
            self.loggers.hold(name, self, level)
            self._applied[name] = setting
            log.info("logger %s: level %s%s (set_log_level)", name, setting.target_log_level,
                     "" if setting.reset_log_level_timeout_epoch is None
                     else f" for {setting.reset_log_level_timeout_secs} s")

    def expire(self, now: float) -> list[str]:
        """Restore every logger whose setting's timeout passed by wall time ``now``; their names."""
        ended = [name for name, setting in self._applied.items() if _ended(setting, now)]
        for name in ended:
            self._restore(name, "its timeout passed")
        return ended

    def close(self) -> None:
        """The worker stops: every logger it set gets its level back (other workers in this process
        may keep it)."""
        for name in list(self._applied):
            self._restore(name, "the worker stopped")

    def applied(self) -> dict[str, LogLevel]:
        """What this worker set now, by logger, with the level it restores (``reset_log_level``)."""
        out = {}
        for name, setting in self._applied.items():
            level = self.loggers.before(name)
            reset = None if level is None else _level_text(level)
            out[name] = LogLevel(setting.action, setting.target_log_level, setting.reset_log_level_timeout_secs,
                                 setting.reset_log_level_timeout_epoch, reset)
        return out

    def _restore(self, name: str, why: str) -> None:
        del self._applied[name]
        level = self.loggers.release(name, self)
        if level is not None:
            log.info("logger %s: level back to %s (%s)", name, _level_text(level), why)


def _ended(setting: LogLevel, now: float) -> bool:
    epoch = setting.reset_log_level_timeout_epoch
    return epoch is not None and epoch <= now


def _level_text(level: int) -> str:
    """A `logging` level as Storm's name where it has one (NOTSET: "inherits its parent's")."""
    for name, number in LEVELS.items():
        if number == level:
            return name
    return logging.getLevelName(level)
