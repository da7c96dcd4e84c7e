"""The worker's watchdog (`Worker.find_stalls` and `Worker.report_stuck`, which its host calls
twice a second) leaves no frame of any thread behind once a look is over.

Before, each look read ``sys._current_frames()`` into a local: that dict holds the watchdog's
own frame, whose locals hold the dict, a reference cycle that kept the frame every thread was in
at that moment alive, with everything its locals held, until the garbage collector's next pass.
A worker raises the collector's thresholds (``topology.worker.gc.thresholds``), and its tuples
come and go, so that pass was tens of minutes away: a 9-minute soak on the process host saw
each worker hold 25 more frames a second (and the locks, tuples and dicts they held), its RSS
going from 45.5 MB to 65-67 MB and still rising (57.9-59.2 MB, flattening, with this fixed).
"""

from __future__ import annotations

import gc
import itertools
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import squall
import squall._native
from squall import Bolt, Config, Fields, TopologyBuilder
from squall._config import topology_conf
from squall.engine.clock import Clock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.thread_frames import frames_of
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import FeederSpout

from ..conftest import wait_until

LOOKS = 200
LOOKS_IN_CHILD = 50
PAYLOAD = 10_000  # bytes held by each call of `_holds` while a look reads the frames

RELEASE = threading.Event()
EXECUTING = threading.Event()


class BlocksInExecute(Bolt):
    """Stays in its first ``execute`` until `RELEASE` (a loop thread in user code at every look)."""

    def execute(self, tup):
        EXECUTING.set()
        RELEASE.wait(30)
        self.collector.ack(tup)


def _holds(entered: threading.Semaphore, leave: threading.Semaphore) -> None:
    """One call of another thread's: holds a payload in its locals until told to leave."""
    payload = bytearray(PAYLOAD)
    entered.release()
    leave.acquire()
    del payload


def _frames(*names: str) -> int:
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "frame" and o.f_code.co_name in names)


def _worker() -> tuple[Worker, FeederSpout]:
    feed = FeederSpout(Fields(["x"]))
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("blocks", BlocksInExecute()).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(1)
    conf.set_message_timeout_secs(30)
    conf[Config.TOPOLOGY_WORKER_GC_THRESHOLDS] = None  # (this test's process keeps its own)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    worker = Worker(plan, 1, plan.executors, component_blobs(plan), InMemoryTransport(InMemoryNetwork(), "here"),
                    Clock(), TopologyActivation(active=True), Backpressure(1000), lambda rec: None,
                    lambda w, rec: None, 7)
    return worker, feed


def test_the_watchdogs_looks_keep_no_frame_of_any_thread_alive():
    """200 rounds of both looks, while the bolt's loop is in user code and another thread is in
    a new call (holding 10 kB) at each round: once the calls have returned, no frame of the
    looks nor of that thread's calls is left (with the collector off, as a worker's raised
    thresholds leave it for long). Before: 400 frames of the looks and 200 of the calls, the
    calls' 2 MB with them."""
    RELEASE.clear()
    EXECUTING.clear()
    worker, feed = _worker()
    worker.start()
    worker.start_gate.release()
    enabled = gc.isenabled()
    try:
        feed.feed([1], 1)
        assert wait_until(EXECUTING.is_set, 10)
        gc.collect()
        gc.disable()
        entered, leave = threading.Semaphore(0), threading.Semaphore(0)
        other = threading.Thread(target=lambda: [_holds(entered, leave) for _ in range(LOOKS)])
        other.start()
        for _ in range(LOOKS):
            assert entered.acquire(timeout=10)
            # thresholds far off: nothing is moved or reported, only looked at
            assert worker.find_stalls(worker.clock.now(), 3600.0) == []
            assert worker.report_stuck(worker.clock.now(), 3600.0) == []
            leave.release()
        other.join(10)
        assert not other.is_alive()
        assert _frames("find_stalls", "report_stuck", "_frames_of") == 0
        assert _frames("_holds") == 0
    finally:
        if enabled:
            gc.enable()
        RELEASE.set()
        worker.stop()


# The watchdog's look (`_frames_of`) made, each time, with a collection due inside
# sys._current_frames, cyclic garbage whose finalizer hands the GIL over, and a thread told to
# start another meanwhile (a worker's loops, links and a bolt's own threads start and end).
_LOOKS_WITH_A_COLLECTION_INSIDE = """
import gc, sys, threading, time
from squall.engine.worker import _frames_of

class Finalized:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it
    def __del__(self):
        time.sleep(0.01)  # hands the GIL to another thread

go = threading.Event()
def churn():  # starts a thread whenever told (as a worker's loops, links, a bolt's threads do)
    while True:
        go.wait()
        go.clear()
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()

def holds(entered, leave):  # a new call per look: its frame has no frame object until a look makes one
    entered.release()
    leave.acquire()

def holder(entered, leave):
    while True:
        holds(entered, leave)

threading.Thread(target=churn, daemon=True).start()
pairs = [(threading.Semaphore(0), threading.Semaphore(0)) for _ in range(3)]
for entered, leave in pairs:
    threading.Thread(target=holder, args=(entered, leave), daemon=True).start()
looks = int(sys.argv[1])
for n in range(1, looks + 1):
    for entered, _ in pairs:
        entered.acquire()
    threads = threading.enumerate()
    gc.collect()
    Finalized()
    go.set()
    # the next collection at the second allocation from here: sys._current_frames' own dict is
    # the first, a frame object made inside it the second
    gc.set_threshold(gc.get_count()[0] + 2)  # (+1: the tuple get_count returns is an allocation too)
    _frames_of(threads)
    gc.set_threshold(700)
    for _, leave in pairs:
        leave.release()
    print("looked", n, flush=True)
print("done", flush=True)
"""


def test_a_look_never_freezes_the_process_when_a_collection_runs_inside_it(tmp_path):
    """python/cpython#106883, stop 77's CI hang: on CPython up to 3.11 ``sys._current_frames()``
    holds the runtime's lock of the thread list while it allocates, so a collection can run
    inside it; a finalizer there handed the GIL to a thread that was starting another (which
    takes that lock holding the GIL), and the whole process froze: every thread, pytest-timeout's
    alarm too (the test run in CI stayed in LocalCluster's wait for its workers, past its 120 s
    deadline). Here the collection is made due inside each look: before, the child froze at its
    first look (3 runs of 3, at 0 s of CPU); the look now keeps the collector off while it reads
    the frames, and all 50 end (in about 1 s). In a child process, which a freeze cannot take the
    test down with."""
    out = tmp_path / "looks.out"
    env = {**os.environ, "PYTHONPATH": str(Path(squall.__file__).resolve().parents[1])}
    with out.open("w") as sink:
        child = subprocess.Popen([sys.executable, "-c", _LOOKS_WITH_A_COLLECTION_INSIDE, str(LOOKS_IN_CHILD)],
                                 stdout=sink, stderr=subprocess.STDOUT, env=env)
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    said = out.read_text().split()
    looked = max((int(n) for word, n in itertools.pairwise(said) if word == "looked"), default=0)
    assert said[-1:] == ["done"] and child.returncode == 0, \
        f"the process froze after {looked} of {LOOKS_IN_CHILD} looks (exit {child.returncode}): {' '.join(said)[-2000:]}"


TOGGLES = 800


@pytest.mark.skipif(not squall._native.COMPILED, reason="the pure-Python twin reads the frames in three calls "
                    "another thread can run between (squall.engine.thread_frames says so)")
def test_a_look_never_undoes_a_gc_disable_another_thread_made_meanwhile():
    """A user's thread turns the collector off (``gc.disable()``: a bolt tuning its worker, or
    ``timeit``) while two watchdogs read frames in a loop, 800 times: each time the collector
    stays off until the thread itself turns it back on. Before, the look turned the collector
    off and back on in three Python calls, and a ``gc.disable()`` made between them was undone
    by its ``gc.enable()`` (76 of 1,344 in 5 s, threads switched every microsecond as here; 16 of
    1,771 in 30 s at Python's default 5 ms); a ``gc.enable()`` made between them let a collection
    run inside ``sys._current_frames``, the freeze above. Now the look is one step under the GIL."""
    enabled, interval = gc.isenabled(), sys.getswitchinterval()
    stop = threading.Event()
    idents = {threading.get_ident()}

    def watchdog() -> None:
        while not stop.is_set():
            frames_of(idents)

    watchdogs = [threading.Thread(target=watchdog) for _ in range(2)]
    undone = 0
    sys.setswitchinterval(1e-6)  # threads switch as often as CPython lets them: the race shows at once
    try:
        for t in watchdogs:
            t.start()
        for _ in range(TOGGLES):
            gc.enable()
            time.sleep(0)
            gc.disable()  # the user's: off from here on
            for _ in range(20):  # a little work, while the watchdogs look
                time.sleep(0)
            undone += gc.isenabled()
    finally:
        sys.setswitchinterval(interval)
        stop.set()
        for t in watchdogs:
            t.join(10)
        if enabled:
            gc.enable()
        else:
            gc.disable()
    assert undone == 0, f"{undone} of {TOGGLES} gc.disable() calls were undone by a look at the frames"
