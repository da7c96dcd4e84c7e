"""Warnings about what strangers send, at a bounded rate.

A peer that sends garbage (a wrong secret, a malformed or forged frame) is worth a warning, but
100,000 of them must not write 100,000 lines: `RateLimit` lets ``limit`` events through per
``period`` seconds and counts the rest, and `RateLimitedLog` says, with the next line it lets
through, how many it held back. One limiter is shared by every connection of a server, since an
attacker opens as many connections (and comes from as many addresses) as it likes.

Usage::

    warn = RateLimitedLog(logging.getLogger("squall.master"))
    warn.warning("refused connection from %s: %s", peer, reason)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

DEFAULT_LIMIT = 20
DEFAULT_PERIOD = 60.0


class RateLimit:
    """At most ``limit`` events per window of ``period`` seconds (time from ``clock``)."""

    def __init__(self, limit: int = DEFAULT_LIMIT, period: float = DEFAULT_PERIOD,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.period, self.clock = limit, period, clock
        self._window_start = clock()
        self._in_window = 0
        self.suppressed = 0  # held back since the last event let through
        self.total_suppressed = 0

    def allow(self) -> int | None:
        """None if this event must be dropped; else how many were dropped since the last one
        allowed (and that count restarts)."""
        now = self.clock()
        if now - self._window_start >= self.period:
            self._window_start, self._in_window = now, 0
        if self._in_window >= self.limit:
            self.suppressed += 1
            self.total_suppressed += 1
            return None
        self._in_window += 1
        held, self.suppressed = self.suppressed, 0
        return held


class RateLimitedLog:
    """A logger's ``warning`` and ``error`` through a shared `RateLimit` (thread-safe)."""

    def __init__(self, logger: logging.Logger, limit: int = DEFAULT_LIMIT, period: float = DEFAULT_PERIOD,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.rate = RateLimit(limit, period, clock)
        self._lock = threading.Lock()

    def _log(self, level: int, msg: str, args: tuple[Any, ...], exc_info: bool = False) -> None:
        with self._lock:
            held = self.rate.allow()
        if held is None:
            return
        if held:
            msg = f"{msg} (and {held} similar messages suppressed: at most {self.rate.limit} per " \
                  f"{self.rate.period:g} s)"
        self.logger.log(level, msg, *args, exc_info=exc_info)

    def warning(self, msg: str, *args: Any) -> None:
        """``logger.warning``, unless over the rate."""
        self._log(logging.WARNING, msg, args)

    def error(self, msg: str, *args: Any) -> None:
        """``logger.error``, unless over the rate."""
        self._log(logging.ERROR, msg, args)

    def exception(self, msg: str, *args: Any) -> None:
        """``logger.exception`` (the error being handled, with its traceback), unless over the rate."""
        self._log(logging.ERROR, msg, args, exc_info=True)


_shared: dict[str, RateLimitedLog] = {}
_shared_lock = threading.Lock()


def rate_limited(logger: logging.Logger | RateLimitedLog) -> RateLimitedLog:
    """The one `RateLimitedLog` of ``logger`` in this process (every server logging there
    shares its rate); a `RateLimitedLog` is returned as it is."""
    if isinstance(logger, RateLimitedLog):
        return logger
    with _shared_lock:
        found = _shared.get(logger.name)
        if found is None or found.logger is not logger:
            found = _shared[logger.name] = RateLimitedLog(logger)
        return found
