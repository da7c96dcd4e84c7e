"""`LogLimit`: at most a few warnings per interval, and a count of the rest.

Anyone who can reach a port can make it log: 100,000 bad messages once wrote 11 MB of log in
2 s. Warnings about what strangers send go through a `LogLimit`, which writes the first few of
each interval and then, with the next warning after the interval, how many it left out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class LogLimit:
    """Rate-limits one kind of warning to ``burst`` records per ``interval`` seconds.

    ``clock`` returns seconds (monotonic); a test passes its own. Thread-safe enough for
    warnings: a race may let a record or two more through, never fewer.
    """

    def __init__(self, logger: logging.Logger, burst: int = 5, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.burst = burst
        self.interval = interval
        self.clock = clock
        self.suppressed = 0    # left out since the last record
        self._start = -float("inf")
        self._written = 0

    def warning(self, msg: str, *args: object) -> None:
        """``logger.warning(msg, *args)`` unless this interval's budget is spent."""
        now = self.clock()
        if now - self._start >= self.interval:
            if self.suppressed:
                self.logger.warning("%d similar warnings were left out in the last %.0f s",
                                    self.suppressed, now - self._start)
            self._start, self._written, self.suppressed = now, 0, 0
        if self._written < self.burst:
            self._written += 1
            self.logger.warning(msg, *args)
        else:
            self.suppressed += 1
