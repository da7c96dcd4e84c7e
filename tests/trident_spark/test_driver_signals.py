"""A ``squall trident --host spark`` driver stopped by a signal to its whole process group
(``kill -TERM -PGID``, systemd's stop; Ctrl-C, SIGINT to a terminal's foreground group) ends as a
stop to its own PID does (test_standalone): exit 0 and one last line saying it stopped, though
the signal ended its JVM (SIGTERM) or Spark's Python processes (SIGINT) at the same moment. It
printed "the query failed: Connection reset" and "unexpected ConnectionRefusedError" and exited 1
(SIGTERM), or ended on the fork server's fatal error (SIGINT). Every word is counted once. The
same SIGTERM to the JVM alone, the driver not asked to stop, is still a failure."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from ..conftest import wait_until
from .conftest import delta_counts, expected_counts, sentences, write_lines
from .test_driver_kill import KilledRun, driver

pytestmark = pytest.mark.timeout(300)  # a cold driver on a loaded machine


def started(tmp_path: Path) -> tuple[KilledRun, subprocess.Popen]:
    """A word count's driver on local[2] (in its own process group) that has committed both its
    batches (16 lines, 4 a file a batch), and its run; a driver that did not get there is killed."""
    run = KilledRun(tmp_path, sentences(16, seed=7), (tmp_path / "driver.log").open("ab"))
    run.data.mkdir()
    run.gate.mkdir()
    (run.gate / "go").write_text("go")  # the state never holds
    write_lines(run.data / "a.txt", run.lines[:8])
    write_lines(run.data / "b.txt", run.lines[8:])
    first = driver(run, "local[2]", None)
    try:
        assert wait_until(lambda: (run.checkpoint / "commits" / "1").exists() or first.poll() is not None, 240, 0.1)
        assert first.poll() is None, run.tail()
    except BaseException:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        raise
    return run, first


def the_jvm_of(pid: int) -> int:
    """The PID of the gateway JVM that driver ``pid`` started (its child running SparkSubmit)."""
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid \
                and b"org.apache.spark.deploy.SparkSubmit" in cmd:
            return int(proc.name)
    raise AssertionError(f"driver {pid} has no SparkSubmit child")


def _status_after(driver, send) -> int:
    """``send()`` (a signal), then the driver's exit status; its group SIGKILLed if it outlives
    the wait."""
    try:
        send()
        return driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_drivers_process_group_stops_it_as_a_signal_to_the_driver_does(tmp_path, sig):
    run, first = started(tmp_path)
    # the driver, its JVM, Spark's Python processes, squall's fork server
    status = _status_after(first, lambda: os.killpg(first.pid, sig))
    log = run.tail()
    last = log.rstrip("\n").rsplit("\n", 1)[-1]
    assert status == 0, log
    # what else the signal ended (the JVM, Spark's Python processes) depends on which of them
    # ended before the driver stopped the query; said in parentheses when one did
    assert last.startswith(f"squall trident: query wc_topology stopped on {sig.name}"), log
    assert last.endswith("; a start on the same checkpoint resumes it"), log
    run.log.close()
    assert delta_counts(run.table) == expected_counts(run.lines)  # all 2 batches' words, once


def test_the_jvm_ended_by_sigterm_while_the_query_runs_is_still_a_failure(tmp_path):
    run, first = started(tmp_path)
    # the JVM alone: the driver was not asked to stop
    status = _status_after(first, lambda: os.kill(the_jvm_of(first.pid), signal.SIGTERM))
    log = run.tail()
    run.log.close()
    assert status == 1, log
    assert "stopped on" not in log, log
