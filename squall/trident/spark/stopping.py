"""How ``squall trident`` tells a stop on a signal from a failure.

Why this exists: a signal sent to the driver's whole process group (``kill -TERM -PGID``, Ctrl-C
in a terminal, which signals the foreground group, systemd's stop, which signals the unit's every
process) reaches the processes the driver started as well: pyspark's gateway JVM (a child in the
same group) and the Python processes Spark starts for the query's Data Source. They end at the
same moment as the driver begins its stop: the JVM on SIGTERM (it runs its shutdown hooks and
exits 143), Spark's Python processes on SIGTERM, and, on Ctrl-C, those squall's fork server
forked (they took SIGINT again; now they keep it ignored, as the JVM, which pyspark starts with
SIGINT ignored, and whatever it starts do). The query then failed ("Connection reset", a
``KeyboardInterrupt`` in Spark's Python traceback) and every call the driver made into the JVM
failed with ``ConnectionRefusedError``; the driver reported a failure and exited 1 on every stop,
while a SIGTERM to its own PID exited 0. Nothing was lost (the query resumes from its
checkpoint), but a failure it was not.

pyspark lets its gateway be started in another process group (``launch_gateway``'s
``popen_kwargs``), but that protects against ``kill -PGID`` only, not systemd's stop,
and the JVM then outlives a SIGKILLed driver until it notices its stdin closed. So the driver does
not shield its helpers; instead, once a signal asked it to stop, what ends the query afterwards is
judged by what the signals did: `StopRequest` remembers every signal that came (a Ctrl-C, then the
group's SIGTERM), `signalled_too` says whether the query's end is their work (the JVM ended, or
ending, by one of them), and anything else stays a failure.

A JVM seen running the signal's handler is still alive: its shutdown hooks stop the SparkContext,
the query's thread logs its error, py4j connections break. The driver's last line ("stopped on
SIGTERM") is said only once that JVM has ended (`let_jvm_end`), so that none of this comes after
it. Before, a JVM that was slow to end (a loaded machine) wrote its query's error, or the
driver's own second ``spark.stop()`` logged py4j's broken connection, below the driver's last
line.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JVM_EXIT_WAIT_SECS = 15.0
"""How long a stop that met an error waits for the gateway JVM to end or to show that it is
running the signal's handler, to learn whether the signal reached it too (its shutdown hooks stop
the SparkContext first: under a second on 2 cores mostly; a wait for its exit alone, 15 s,
failed 3 of 7 runs under load, which is why the handler's thread counts as well)."""


JVM_END_WAIT_SECS = 30.0
"""How long a driver whose JVM is running the signal's handler waits for it to exit before its
last line (`let_jvm_end`): the JVM had exited 1.1-3.8 s after the group's SIGTERM on 2 cores
with two CPU hogs beside it, and took more than 15 s in 3 of 7 runs of an earlier, busier
machine (`JVM_EXIT_WAIT_SECS`); past this wait the line is said anyway."""


class StopRequest:
    """Set by SIGTERM or SIGINT once `install` ran; remembers which signal came first, and every
    signal that came (a Ctrl-C, then the group's SIGTERM when the stop seemed slow: the JVM,
    which ignores SIGINT, ends on the second).

    Install it after the SparkContext exists: pyspark installs its own SIGINT handler then (it
    cancels every job through the JVM from inside the handler, a py4j call that fails as a
    reentrant one when the main thread is itself in a py4j call, and raises KeyboardInterrupt
    wherever the main thread is), which would skip a clean stop."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signums: tuple[int, ...] = ()

    def install(self) -> Callable[[], None]:
        """Handle SIGTERM and SIGINT (in the main thread only: elsewhere signals cannot be set, and
        nothing changes). Returns what puts the previous handlers back."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if signum not in self.signums:
            self.signums += (signum,)
        self._event.set()

    def set(self) -> None:
        """Ask for a stop without a signal (a KeyboardInterrupt raised by someone else's handler)."""
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    @property
    def signum(self) -> int | None:
        """The signal that asked for the stop (the first that came), or None."""
        return self.signums[0] if self.signums else None

    @property
    def signal_name(self) -> str | None:
        """``SIGTERM`` or ``SIGINT``, or None when no signal asked for the stop."""
        return None if self.signum is None else signal.Signals(self.signum).name


@dataclass(frozen=True)
class GatewayJvm:
    """pyspark's gateway JVM of this process, as a stop found it: its PID, its exit status (None
    while it runs), and the signal whose handler it is running (its shutdown hooks, before it
    exits ``128 + N``), if any."""

    pid: int
    status: int | None
    handling: int | None = None

    def ended_or_ending_by(self, signums: Collection[int]) -> int | None:
        """Which of ``signums`` ended the JVM, or is ending it now; None when none did."""
        for signum in signums:
            if ended_by(self.status, signum) or self.handling == signum:
                return signum
        return None


def gateway_jvm(wait_secs: float = 0.0, stop: StopRequest | None = None) -> GatewayJvm | None:
    """This process's gateway JVM, waiting up to ``wait_secs`` for it to end (or, given
    ``stop``, to be seen running the handler of a signal that came to stop the driver, those
    that come during the wait included); None when pyspark did not start one here (no
    SparkContext yet, a gateway given to pyspark from elsewhere)."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)  # the Popen pyspark's launch_gateway keeps
    if not isinstance(proc, subprocess.Popen):
        return None
    deadline = time.monotonic() + wait_secs
    while True:
        status = proc.poll()
        handling = None if stop is None or status is not None else _handling(proc.pid, stop.signums)
        if status is not None or handling is not None or time.monotonic() >= deadline:
            return GatewayJvm(proc.pid, status, handling)
        time.sleep(0.05)


def let_jvm_end(stop: StopRequest, wait_secs: float = JVM_END_WAIT_SECS) -> GatewayJvm | None:
    """When a signal that asked for ``stop`` reached the gateway JVM too and it is still running
    that signal's handler (its shutdown hooks), wait up to ``wait_secs`` for it to exit: what it
    writes as it ends (its query's error) and what its end breaks (py4j's connections) then comes
    before the driver's last line. A JVM that did not get the signal (a stop to the driver's PID
    alone) is not waited for: the driver's own ``spark.stop()`` ended its query. Returns the JVM
    as last seen (None without one)."""
    if stop.signum is None:
        return gateway_jvm()
    jvm = gateway_jvm(0.0, stop)
    if jvm is None or jvm.status is not None or jvm.handling is None:
        return jvm
    return gateway_jvm(wait_secs)


def _handling(pid: int, signums: Collection[int]) -> int | None:
    """The one of ``signums`` whose handler JVM ``pid`` is running: it has the thread Java starts
    to run that signal's handler (``jdk.internal.misc.Signal`` names it ``SIGTERM handler``;
    Java's shutdown hooks run from it, and under load they took longer than any fixed wait).
    None when it runs none of them."""
    # Linux keeps 15 bytes of a thread's name
    names = {f"{signal.Signals(signum).name} handler"[:15]: signum for signum in signums}
    if not names:
        return None
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            signum = names.get((task / "comm").read_text().strip())
        except OSError:
            continue
        if signum is not None:
            return signum
    return None


def ended_by(status: int | None, signum: int) -> bool:
    """Whether an exit ``status`` is that of a process ended by signal ``signum``: killed by it
    (Popen's ``-N``), or exiting on it as the JVM does after its shutdown hooks (``128 + N``)."""
    return status is not None and status in (-signum, 128 + signum)


def signalled_too(stop: StopRequest, wait_secs: float = JVM_EXIT_WAIT_SECS) -> str | None:
    """Why the query's end after ``stop`` was asked for by a signal is a signal's work and no
    failure, in a few words for the driver's last line; None when it is not (no signal asked, or
    the JVM, waited for up to ``wait_secs``, neither ended by one of the signals that came to the
    driver nor runs its handler): the query's error or the JVM call's is then a failure.

    Any of them counts, not only the first: after a Ctrl-C (SIGINT, which the JVM ignores) a user
    whose stop seemed slow sends the group SIGTERM, which ends the JVM under the stop; that
    second signal is the stop's as much as the first."""
    if stop.signum is None:
        return None
    jvm = gateway_jvm(wait_secs, stop)
    which = None if jvm is None else jvm.ended_or_ending_by(stop.signums)
    if jvm is None or which is None:
        return None
    if which == stop.signum:
        return f"Spark's JVM (pid {jvm.pid}) got it too and ended with it"
    return f"Spark's JVM (pid {jvm.pid}) got the {signal.Signals(which).name} that followed and ended with it"
