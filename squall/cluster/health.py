"""Supervisor health checks: Storm's "Monitoring Health of Supervisors" (``HealthChecker``).

An administrator puts scripts in ``storm.health.check.dir``. Every executable regular file there
is run, one after another, with no arguments, for at most ``storm.health.check.timeout.ms``
each. The node is unhealthy when a script

- prints a line to stdout that starts with ``ERROR`` (the rule Storm's documentation gives),
- exits with a non-zero status (Storm 2.x),
- runs past the timeout (it is killed, with the processes it started), unless
  ``storm.health.check.fail.on.timeouts`` is false (Storm 2.2+), or
- cannot be started at all (Storm 2.x).

A script that exits 0 without such a line passes; no directory, or no script in it, is healthy.
Storm 1.x's code inverts its own documentation (exit 0 with an ERROR line passed there, a
non-zero exit without one too); squall keeps the documented ERROR rule and adds 2.x's.

`HealthCheck` is the pure part: which scripts, what their runs mean, when the next round is
due, with the runner and the clock passed in. `HealthMonitor` runs it on a thread of the
supervisor, every ``squall.health.check.interval.secs`` (Storm 2.x: 30 s, fixed). While its
node is unhealthy the supervisor stops its workers, starts none and tells the master, which
moves them to healthy nodes at once (`squall.cluster.supervisor`).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .._config import Config, setting
from ..engine.clock import Clock

log = logging.getLogger("squall.supervisor")

MAX_REASON_CHARS = 300  # of a script's ERROR line, in the supervisor's log and the master's


class ScriptRun(NamedTuple):
    """What one run of a script gave."""

    exit_code: int | None            # None: it did not finish (timed out) or never started
    stdout: str = ""
    timed_out: bool = False
    launch_error: str | None = None  # why it could not be started


Runner = Callable[[Path, float], ScriptRun]
"""Runs the script at a path with a timeout in seconds."""


class ScriptResult(NamedTuple):
    """One script's verdict."""

    script: Path
    healthy: bool
    why: str = ""  # what made it fail ("" when it passed)


class HealthReport(NamedTuple):
    """One round of checks: every script's verdict."""

    results: tuple[ScriptResult, ...] = ()

    @property
    def healthy(self) -> bool:
        """True when every script passed (or there was none)."""
        return all(r.healthy for r in self.results)

    @property
    def problem(self) -> str | None:
        """Why the node is unhealthy (each failed script and its reason), or None."""
        bad = [f"{r.script.name}: {r.why}" for r in self.results if not r.healthy]
        return "; ".join(bad) if bad else None


def judge(script: Path, run: ScriptRun, timeout_secs: float, fail_on_timeouts: bool = True) -> ScriptResult:
    """What ``run`` of ``script`` says about the node; see the module docstring.

    >>> judge(Path("disk"), ScriptRun(0, "ok\\n"), 5).healthy
    True
    >>> judge(Path("disk"), ScriptRun(0, "checking\\nERROR disk full\\n"), 5).why
    'ERROR disk full'
    >>> judge(Path("disk"), ScriptRun(3, ""), 5).why
    'exited with status 3'
    >>> judge(Path("disk"), ScriptRun(None, "", timed_out=True), 5, fail_on_timeouts=False).healthy
    True
    """
    if run.launch_error is not None:
        return ScriptResult(script, False, f"could not be run: {run.launch_error}"[:MAX_REASON_CHARS])
    if run.timed_out:
        if not fail_on_timeouts:
            return ScriptResult(script, True)
        return ScriptResult(script, False,
                            f"did not finish within storm.health.check.timeout.ms ({timeout_secs * 1000:g} ms)")
    for line in run.stdout.splitlines():
        if line.strip().startswith("ERROR"):
            return ScriptResult(script, False, line.strip()[:MAX_REASON_CHARS])
    if run.exit_code != 0:
        return ScriptResult(script, False, f"exited with status {run.exit_code}")
    return ScriptResult(script, True)


def scripts_in(directory: Path) -> list[Path]:
    """The checks in ``directory``: its executable regular files, by name (none if it is missing)."""
    try:
        entries = sorted(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [p for p in entries if p.is_file() and os.access(p, os.X_OK)]


def run_script(path: Path, timeout_secs: float) -> ScriptRun:
    """Run ``path`` with no arguments, its stdout captured, for at most ``timeout_secs``; past
    that it is killed with every process it started (its own session), so that neither it nor a
    child holding its output open outlives the check."""
    try:
        proc = subprocess.Popen([str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        return ScriptRun(None, launch_error=str(e))
    try:
        out, _ = proc.communicate(timeout=timeout_secs)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, _ = proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:  # a grandchild left the session and holds stdout
            proc.kill()
            out = b""
        proc.wait()
        return ScriptRun(None, out.decode(errors="replace"), timed_out=True)
    return ScriptRun(proc.returncode, out.decode(errors="replace"))


class HealthCheck:
    """The node's health checks (see the module docstring): `run` does one round, `tick` one
    round when ``interval_secs`` of ``clock.now()`` have passed since the last.

    Args:
        directory: ``storm.health.check.dir`` (relative: from the daemon's working directory).
        timeout_secs: each script's limit (``storm.health.check.timeout.ms`` / 1000).
        interval_secs: time between rounds (``squall.health.check.interval.secs``).
        fail_on_timeouts: a script that times out makes the node unhealthy.
        runner: runs one script (default `run_script`).
        clock: gives ``now()`` in seconds.
    """

    def __init__(self, directory: Path, timeout_secs: float, interval_secs: float = 30.0,
                 fail_on_timeouts: bool = True, runner: Runner = run_script, clock: Clock | None = None) -> None:
        self.directory = Path(directory)
        self.timeout_secs = timeout_secs
        self.interval_secs = interval_secs
        self.fail_on_timeouts = fail_on_timeouts
        self.runner = runner
        self.clock = clock or Clock()
        self.report = HealthReport()     # the latest round's (healthy until one has run)
        self.next_at: float | None = None  # clock time of the next round (None: at once)

    @classmethod
    def from_conf(cls, conf: dict[str, Any], **kwargs: Any) -> HealthCheck:
        """The checks a supervisor with settings ``conf`` runs."""
        return cls(Path(setting(conf, Config.STORM_HEALTH_CHECK_DIR)),
                   float(setting(conf, Config.STORM_HEALTH_CHECK_TIMEOUT_MS)) / 1000.0,
                   float(setting(conf, Config.SQUALL_HEALTH_CHECK_INTERVAL_SECS)),
                   bool(setting(conf, Config.STORM_HEALTH_CHECK_FAIL_ON_TIMEOUTS)), **kwargs)

    def run(self) -> HealthReport:
        """Run every script once, in order, and keep and return the report."""
        results = []
        for script in scripts_in(self.directory):
            result = judge(script, self.runner(script, self.timeout_secs), self.timeout_secs, self.fail_on_timeouts)
            if not result.healthy:
                log.warning("health check %s failed: %s", script, result.why)
            results.append(result)
        was = self.report.healthy
        self.report = HealthReport(tuple(results))
        if was and not self.report.healthy:
            log.error("this node is unhealthy (%s): its workers stop and move to other nodes", self.report.problem)
        elif not was and self.report.healthy:
            log.info("this node passes its health checks again")
        return self.report

    def tick(self) -> HealthReport:
        """Run a round if one is due (the first at once); the latest report either way."""
        now = self.clock.now()
        if self.next_at is None or now >= self.next_at:
            self.run()
            self.next_at = self.clock.now() + self.interval_secs
        return self.report


class HealthMonitor:
    """Runs a `HealthCheck` on a daemon thread until `stop`; `problem` is the latest verdict."""

    def __init__(self, check: HealthCheck) -> None:
        self.check = check
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="squall-health-check", daemon=True)

    def start(self) -> HealthMonitor:
        """Run the first round now (so that a node that starts unhealthy is never given work),
        then the others on the thread; returns self."""
        self._round()
        self._thread.start()
        return self

    @property
    def problem(self) -> str | None:
        """Why the node is unhealthy after the latest round, or None."""
        return self.check.report.problem

    def _round(self) -> None:
        try:
            self.check.tick()
        except Exception:  # a check must never end the supervisor: report, retry next round
            log.exception("health checks failed to run")
            self.check.next_at = self.check.clock.now() + self.check.interval_secs

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.check.clock.wait(self._stop, min(1.0, self.check.interval_secs))
            if not self._stop.is_set():
                self._round()

    def stop(self) -> None:
        """End the thread (a script running finishes or times out first)."""
        self._stop.set()
