"""A shell component's subprocess dies with the worker that started it, even a SIGKILLed one
(Storm's supervisor kills the pids a dead worker's subprocesses registered)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from ..conftest import wait_until

PARENT = textwrap.dedent("""
    import subprocess, sys, threading, time
    from squall._children import die_with_parent

    def component():  # starts its subprocess, as ShellProcess.launch does, and lives on
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], preexec_fn=die_with_parent)
        print(proc.pid, flush=True)
        time.sleep(600)
    threading.Thread(target=component, daemon=True).start()
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_a_subprocess_dies_with_its_sigkilled_worker():
    from squall.multilang import process
    assert "preexec_fn=die_with_parent" in open(process.__file__).read()  # what ShellProcess.launch starts it with
    worker = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        child = int(worker.stdout.readline())
        assert _alive(child)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        assert wait_until(lambda: not _alive(child), 10), f"subprocess {child} outlived its SIGKILLed worker"
    finally:
        worker.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)
