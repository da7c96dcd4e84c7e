"""A process host's worker that runs no Python (user code holding the interpreter) gets its threads'
stacks written to its output, Storm's jstack, before the master restarts it.

The worker writes a count that grows every `beat_interval` into ``progress-<port>`` in its
supervisor's directory, from a thread of its own (`ProgressBeat`): the count grows only while
that thread can take the GIL. The supervisor reads it at each of its syncs (`StallWatch`); when
it has not grown for ``nimbus.task.timeout.secs / 2`` counted in syncs, it sends the worker
`STALL_DUMP_SIGNAL`, for which the worker registered `faulthandler` (``kill -QUIT`` asks a JVM
for the same dump).

Why not `faulthandler.dump_traceback_later`, re-armed by a thread, as before: its timer runs on
the wall clock, so a worker that was *paused* (SIGSTOP, a frozen container or VM, a machine that
hung) for longer than the limit fired it the moment it resumed, and the dump then read the frames
of threads that were running again, without the GIL, which CPython does not make safe: workers
died of SIGSEGV after a pause, reported as "a crash in native code" (a chaos run on the process
host: 2 of 10 runs; python/cpython#131580). Here a stopped worker (state ``T``) counts no time,
and neither does a paused supervisor (it counts its own syncs, not the clock), so only a worker
whose other threads are blocked on the GIL is dumped.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from .._config import Config, conf_value

STALL_DUMP_SIGNAL = signal.SIGQUIT
"""What the supervisor sends a stalled worker, which dumps its threads' stacks (`faulthandler`)."""


def stall_limit_secs(conf: dict[str, Any]) -> float:
    """How long a worker may run no Python before its stacks are dumped: half the master's
    patience (``nimbus.task.timeout.secs``), so they are written before it restarts the worker."""
    return float(conf_value(conf, Config.NIMBUS_TASK_TIMEOUT_SECS)) / 2


def beat_interval(stall_secs: float) -> float:
    """How often a worker's count grows: well within ``stall_secs``."""
    return min(1.0, stall_secs / 4)


class ProgressBeat:
    """The worker's side: registers the dump on `STALL_DUMP_SIGNAL`, then writes a growing count
    (8 bytes, little-endian) at the start of ``path`` every `beat_interval` from a daemon thread."""

    def __init__(self, path: Path, stall_secs: float) -> None:
        self.path = path
        self.interval = beat_interval(stall_secs)

    def start(self) -> None:
        import faulthandler
        import sys
        faulthandler.register(STALL_DUMP_SIGNAL, file=sys.stderr, all_threads=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)

        def beat() -> None:
            count = 0
            while True:
                count += 1
                with contextlib.suppress(OSError):  # a full disk: no count, never a dead worker
                    os.pwrite(fd, count.to_bytes(8, "little"), 0)
                time.sleep(self.interval)
        threading.Thread(target=beat, name="squall-worker-progress", daemon=True).start()


def read_progress(path: Path) -> int | None:
    """A worker's count, or None if it wrote none yet (or the file is not its)."""
    try:
        with open(path, "rb") as f:
            data = f.read(8)
    except OSError:
        return None
    return int.from_bytes(data, "little") if len(data) == 8 else None


def process_stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP, a frozen cgroup: state ``T``), from
    ``/proc``; False where it cannot be told."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] in ("T", "t")


class StallWatch:
    """The supervisor's side, for one worker: fed its count at every sync (`seen`), says when the
    count stood still for ``stall_secs``, counted as syncs of ``tick_secs`` each, once per stall.
    A sync that finds the worker stopped counts nothing; no count yet (a worker still starting,
    which may not have registered its dump) is never a stall."""

    def __init__(self, stall_secs: float, tick_secs: float) -> None:
        self.ticks_needed = max(1, math.ceil(stall_secs / max(tick_secs, 1e-3)))
        self.last: int | None = None
        self.still = 0
        self.told = False

    def seen(self, count: int | None, stopped: bool) -> bool:
        """True when the worker is to be dumped now."""
        if count is None or count != self.last:
            self.last, self.still, self.told = count, 0, False
            return False
        if stopped:
            self.still = 0
            return False
        self.still += 1
        if self.still >= self.ticks_needed and not self.told:
            self.told = True
            return True
        return False
