"""A topology whose bolt logs a numbered line per tuple, naming its process, for the tests of a
slot's ``worker.log`` across restarts; and a bolt that logs its last words and then dies."""

import logging
import os
import time
from pathlib import Path

from squall import BasicBolt, Fields, Spout

log = logging.getLogger("user.restart_log_topology")


class Ticker(Spout):
    """Emits 1, 2, ... (unreliably), one every ``every`` seconds, ``limit`` of them (None: endless)."""

    def __init__(self, every, limit=None):
        self.every, self.limit = every, limit

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.sent, self.next_at = 0, time.monotonic()

    def next_tuple(self):
        if (self.limit is None or self.sent < self.limit) and time.monotonic() >= self.next_at:
            self.sent += 1
            self.next_at += self.every
            self.collector.emit([self.sent])


def logged_line(pid, n):
    """What `Logs` logs for tuple ``n`` in process ``pid``."""
    return f"pid {pid} logged {n:06d}"


class Logs(BasicBolt):
    """Logs `logged_line` for every tuple."""

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup, collector):
        log.info(logged_line(os.getpid(), tup.values[0]))


class DiesOnce(BasicBolt):
    """Logs `logged_line` for every tuple; at tuple ``die_at`` of its first launch (a file in
    ``directory`` remembers it) logs ``last words`` and dies: ``how`` is ``"raise"`` (an exception
    out of ``execute``, Storm's fail-fast) or ``"exit"`` (``os._exit(7)``, nothing run after)."""

    def __init__(self, directory, die_at, how):
        self.marker, self.die_at, self.how = str(Path(directory) / "died-once"), die_at, how

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup, collector):
        n = tup.values[0]
        log.info(logged_line(os.getpid(), n))
        if n == self.die_at and self._first_death():
            log.error("last words of pid %d", os.getpid())
            if self.how == "exit":
                os._exit(7)
            raise RuntimeError(f"pid {os.getpid()} dies at tuple {n}")

    def _first_death(self):
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True
