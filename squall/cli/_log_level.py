"""``squall set_log_level [-l LOGGER=LEVEL[:TIMEOUT]]... [-r LOGGER]... TOPOLOGY`` (also
``set-log-level``): Storm's ``storm set_log_level``, through the master's ``set_log_config``;
every worker of TOPOLOGY applies the levels (`squall.worker.log_levels`)."""

from __future__ import annotations

import argparse
import math
import time

from .._errors import BadParameterError
from .._nimbus import LogConfig, LogLevel
from ..worker.log_levels import level_name
from ._cluster import _master
from ._options import UserError


def parse_setting(item: str) -> tuple[str, LogLevel]:
    """``-l LOGGER=LEVEL[:TIMEOUT]`` as Storm's ``LogLevelsParser`` reads it: the logger and its
    ``UPDATE`` (TIMEOUT in whole seconds, 0 or none: for good). Raises `UserError` (usage, 2)
    naming the item, and for a bad level the logger and the level."""
    logger, sep, rest = item.partition("=")
    if not sep or not logger or "=" in rest:
        raise UserError(f"-l {item!r}: expected LOGGER=LEVEL[:TIMEOUT], e.g. -l ROOT=DEBUG:30", code=2)
    level, _, timeout = rest.partition(":")
    try:
        target = level_name(logger, level)
    except BadParameterError as e:
        raise UserError(f"-l {item!r}: {e}", code=2) from None
    secs = 0
    if timeout:
        try:
            secs = int(timeout)
        except ValueError:
            secs = -1
        if secs < 0:
            raise UserError(f"-l {item!r}: the timeout {timeout!r} is not a whole number of seconds (0: none)",
                            code=2)
    return logger, LogLevel("UPDATE", target, secs)


def log_config_of(settings: list[str], removals: list[str]) -> LogConfig:
    """The request of ``-l`` ``settings`` and ``-r`` ``removals`` (a logger in both is removed, as
    in Storm, whose ``-r`` entries are put after the ``-l`` ones). Raises `UserError`."""
    if not settings and not removals:
        raise UserError("nothing to set: give -l LOGGER=LEVEL[:TIMEOUT] or -r LOGGER (e.g. -l ROOT=DEBUG:30)",
                        code=2)
    levels = dict(map(parse_setting, settings))
    for logger in removals:
        if not logger:
            raise UserError("-r '': name a logger (ROOT for the root logger)", code=2)
        levels[logger] = LogLevel("REMOVE")
    return LogConfig(levels)


def describe(config: LogConfig, now: float | None = None) -> str:
    """A topology's log levels in one line, ``LOGGER=LEVEL`` each, with the seconds left of its
    timeout; a level whose timeout has passed (``now``: wall time, default the clock's) is left
    out, as the workers have restored that logger."""
    now = time.time() if now is None else now
    parts = []
    for name, lvl in sorted(config.named_logger_level.items()):
        epoch = lvl.reset_log_level_timeout_epoch
        if epoch is not None and epoch <= now:
            continue
        parts.append(f"{name}={lvl.target_log_level}" + (f" for {math.ceil(epoch - now)} s" if epoch is not None else ""))
    return ", ".join(parts) or "none (every logger at its own level)"


def cmd_set_log_level(args: argparse.Namespace) -> int:
    """Send the levels, then print what the topology's workers now apply."""
    request = log_config_of(args.settings or [], args.removals or [])
    with _master(args) as master:
        config = master.set_log_config(args.name, request)
    print(f"Log config sent for topology {args.name}; its levels now: {describe(config)}")
    return 0
