"""The end of a ``squall trident`` driver stopped by a signal to its whole process group, at the
racy point test_driver_signals reaches only by chance: the gateway JVM got the same SIGTERM and is
still running its handler (its shutdown hooks, slow on a loaded machine) when the driver judges
the query's failure to be the signal's work. The JVM here is a process that behaves as Java does
on SIGTERM, without Spark's half a minute: it names the thread that runs the handler
``SIGTERM handler``, runs its hooks, writes, and exits 143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import SimpleNamespace

# Java runs a signal's handler on a thread it names after the signal; the hooks here take 1 s,
# then the JVM says what Spark's query thread says as the hooks stop its SparkContext
_JVM = r"""
import os, signal, sys, threading, time

def on_term(signum, frame):
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as comm:
        comm.write("SIGTERM handler")
    time.sleep(1.0)
    os.write(2, b"ERROR MicroBatchExecution: Query wc terminated with error\n")
    os._exit(143)

signal.signal(signal.SIGTERM, on_term)
os.write(1, b"ready\n")
while True:
    time.sleep(60)
"""


class _FailedOnTheSignal:
    """A query that the signal ended (its Python source process died with it): not active, and
    its exception says so."""

    isActive = False

    def exception(self) -> Exception:
        return RuntimeError("Connection reset")

    def stop(self) -> None:
        pass


def test_a_driver_whose_jvm_got_its_signal_too_says_its_last_line_after_the_jvm_ended(capfd, monkeypatch):
    from pyspark import SparkContext

    from squall.cli._trident import _run_until_stopped
    from squall.trident.spark.stopping import StopRequest

    jvm = subprocess.Popen([sys.executable, "-c", _JVM], stdout=subprocess.PIPE)  # its stderr: this fd 2
    try:
        assert jvm.stdout is not None and jvm.stdout.readline() == b"ready\n"
        monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace(proc=jvm), raising=False)
        stop = StopRequest()
        restore = stop.install()
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the group's signal: the driver...
            jvm.send_signal(signal.SIGTERM)  # ...and its JVM
            assert stop.wait(10)
        finally:
            restore()
        assert _run_until_stopped(_FailedOnTheSignal, name="wc", stop=stop) == 0
    finally:
        try:
            jvm.wait(10)  # the JVM ends on its own, after its hooks
        except subprocess.TimeoutExpired:
            jvm.kill()
            jvm.wait()
    err = capfd.readouterr().err
    assert "Query wc terminated with error" in err
    last = err.rstrip("\n").rsplit("\n", 1)[-1]
    # before: said while the JVM ran its hooks, its error then came below the driver's last line
    assert last.startswith(f"squall trident: query wc stopped on SIGTERM (Spark's JVM (pid {jvm.pid}) got it too"), err


def test_a_ctrl_c_then_the_groups_sigterm_is_a_stop_not_a_failure(capfd, monkeypatch):
    """Ctrl-C (SIGINT to the group: the JVM ignores it), then, the stop seeming slow, SIGTERM to
    the group: the JVM ends on the second signal and the query fails with it. Before, only the
    first signal was asked about: "the query failed: Connection reset", exit 1."""
    from pyspark import SparkContext

    from squall.cli._trident import _run_until_stopped
    from squall.trident.spark.stopping import StopRequest

    jvm = subprocess.Popen([sys.executable, "-c", _JVM], stdout=subprocess.PIPE)
    try:
        assert jvm.stdout is not None and jvm.stdout.readline() == b"ready\n"
        monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace(proc=jvm), raising=False)
        stop = StopRequest()
        restore = stop.install()
        try:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: the driver (the JVM ignores SIGINT)
            assert stop.wait(10)
            os.kill(os.getpid(), signal.SIGTERM)  # then the group's SIGTERM: the driver...
            jvm.send_signal(signal.SIGTERM)  # ...and its JVM
        finally:
            restore()
        assert stop.signums == (signal.SIGINT, signal.SIGTERM)
        assert _run_until_stopped(_FailedOnTheSignal, name="wc", stop=stop) == 0
    finally:
        try:
            jvm.wait(10)
        except subprocess.TimeoutExpired:
            jvm.kill()
            jvm.wait()
    err = capfd.readouterr().err
    assert "the query failed" not in err, err
    last = err.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith(f"squall trident: query wc stopped on SIGINT (Spark's JVM (pid {jvm.pid}) got the "
                           f"SIGTERM that followed and ended with it)"), err


def test_a_jvm_that_did_not_get_the_signal_is_not_waited_for(monkeypatch):
    """A stop to the driver's PID alone: the JVM runs no handler, and the driver's end does not
    wait on it (the driver's own spark.stop() ends its query)."""
    from pyspark import SparkContext

    from squall.trident.spark.stopping import StopRequest, let_jvm_end

    jvm = subprocess.Popen([sys.executable, "-c", _JVM], stdout=subprocess.PIPE)
    try:
        assert jvm.stdout is not None and jvm.stdout.readline() == b"ready\n"
        monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace(proc=jvm), raising=False)
        stop = StopRequest()
        stop.signums = (signal.SIGTERM,)
        stop.set()
        seen = let_jvm_end(stop, wait_secs=600)  # would outlast the test's timeout if it waited
        assert seen is not None and seen.status is None and seen.handling is None
    finally:
        jvm.kill()
        jvm.wait()
