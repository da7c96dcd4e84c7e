"""A process host's worker that runs no Python has its stacks dumped (`squall.cluster.stall_watch`);
one that was only paused (SIGSTOP, a frozen container or machine) must not be: the dump reads
the frames of running threads without the GIL, and crashed the worker with SIGSEGV."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from squall.cluster.stall_watch import StallWatch, process_stopped, read_progress

from ..conftest import wait_until


def test_a_count_that_stands_still_for_the_limit_counted_in_syncs_is_a_stall_once():
    w = StallWatch(stall_secs=1.0, tick_secs=0.25)  # 4 syncs
    assert not w.seen(None, False) and not w.seen(None, False)  # no count yet: still starting
    assert not w.seen(1, False)
    assert [w.seen(1, False) for _ in range(4)] == [False, False, False, True]
    assert not any(w.seen(1, False) for _ in range(10))  # once per stall
    assert not w.seen(2, False)  # it ran again: a new stall may be told
    assert [w.seen(2, False) for _ in range(4)] == [False, False, False, True]


def test_syncs_that_find_the_worker_stopped_count_nothing():
    w = StallWatch(stall_secs=1.0, tick_secs=0.25)
    w.seen(7, False)
    assert not any(w.seen(7, True) for _ in range(100))  # SIGSTOPped for 25 s
    assert [w.seen(7, False) for _ in range(3)] == [False, False, False]  # resumed: counting from 0
    assert not w.seen(8, False)


CHILD = """
import re, sys, threading, time
from pathlib import Path
from squall.cluster.stall_watch import ProgressBeat
ProgressBeat(Path(sys.argv[1]), 0.5).start()

def busy():  # threads that run Python all the time, as a worker's do
    while True:
        sum(range(1000))
for _ in range(3):
    threading.Thread(target=busy, daemon=True).start()

def hog_the_interpreter():  # backtracks in C for ever without letting go of the GIL
    re.match(r"(a+)+$", "a" * 64 + "b")

while not Path(sys.argv[2]).exists():
    time.sleep(0.01)
hog_the_interpreter()
"""


def test_a_worker_paused_past_the_limit_is_not_dumped_and_one_that_holds_the_interpreter_is(tmp_path):
    """The test plays the supervisor, syncing every 50 ms, with a limit of 0.5 s. A process
    SIGSTOPped for 1.5 s and resumed runs on with no dump (before, `faulthandler`'s wall-clock
    timer fired at the SIGCONT and dumped its running threads: "Timeout (0:00:00.500000)!",
    and at times a SIGSEGV); once it holds the interpreter the watch tells it, and the signal
    dumps its stacks, the hogging call among them."""
    progress, hog, err = tmp_path / "progress", tmp_path / "hog", tmp_path / "stderr"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with open(err, "wb") as stderr:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(progress), str(hog)], stderr=stderr, env=env)
    try:
        assert wait_until(lambda: (read_progress(progress) or 0) >= 2, 30), err.read_text()
        watch = StallWatch(stall_secs=0.5, tick_secs=0.05)

        def sync_for(secs: float) -> bool:
            told, end = False, time.monotonic() + secs
            while time.monotonic() < end:
                told |= watch.seen(read_progress(progress), process_stopped(child.pid))
                time.sleep(0.05)
            return told
        os.kill(child.pid, signal.SIGSTOP)
        assert wait_until(lambda: process_stopped(child.pid), 5)
        assert not sync_for(1.5)
        os.kill(child.pid, signal.SIGCONT)
        assert not sync_for(1.0)
        assert child.poll() is None and "most recent call first" not in err.read_text(), err.read_text()

        hog.touch()
        assert wait_until(lambda: watch.seen(read_progress(progress), process_stopped(child.pid)), 30, 0.05)
        os.kill(child.pid, signal.SIGQUIT)
        assert wait_until(lambda: "in hog_the_interpreter" in err.read_text(), 10), err.read_text()
        assert child.poll() is None  # dumped, not killed: the master decides its restart
    finally:
        child.kill()
        child.wait(10)
