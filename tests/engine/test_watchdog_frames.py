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
import threading

from squall import Bolt, Config, Fields, TopologyBuilder
from squall._config import topology_conf
from squall.engine.clock import Clock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import FeederSpout

from ..conftest import wait_until

LOOKS = 200
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
