"""A worker's loops take no tuple before its host has recorded that the worker started (every
executor opened): a death on the first tuple is then a crash, never a failed start
(squall/engine/start_gate.py; tests/process/test_poison_exit_at_start.py on the process host)."""

from __future__ import annotations

import logging
import threading
import time

from squall import Bolt, Config, Fields, TopologyBuilder
from squall._config import topology_conf
from squall.engine.clock import Clock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.start_gate import StartGate
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import AckFailMapTracker, FeederSpout

from ..conftest import wait_until

EXECUTED: list[object] = []  # what the bolt ran, in order (one process: its copies share it)
PREPARED = threading.Event()


class SlowPrepare(Bolt):
    """Prepares on a loop of its own, slower than the spout opens on the shared one; notes and
    acks each tuple; raises in prepare when told to (a failed start)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        time.sleep(0.3)
        if self.fail:
            raise ImportError("no module named 'missing' (simulated)")
        PREPARED.set()

    def execute(self, tup):
        EXECUTED.append(tup.values[0])
        self.collector.ack(tup)


def _worker(fail=False, on_opened=None, start_wait_secs=5.0):
    EXECUTED.clear()
    PREPARED.clear()
    feed = FeederSpout(Fields(["x"]))
    tracker = AckFailMapTracker()
    feed.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("slow", SlowPrepare(fail)).shuffle_grouping("feed").add_configuration(
        Config.TOPOLOGY_EXECUTOR_OWN_THREAD, True)
    conf = Config()
    conf.set_num_workers(1)
    conf.set_message_timeout_secs(30)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    crashes = []
    worker = Worker(plan, 1, plan.executors, component_blobs(plan), InMemoryTransport(InMemoryNetwork(), "here"),
                    Clock(), TopologyActivation(active=True), Backpressure(1000), lambda rec: None,
                    lambda w, rec: crashes.append(rec), 7, on_opened=on_opened, start_wait_secs=start_wait_secs)
    assert len(worker.loops) == 2
    spout = next(ex for ex in worker.executors if ex.component == "feed")
    return worker, feed, spout, tracker, crashes


def test_no_tuple_runs_until_the_host_recorded_the_start_told_once_when_every_executor_opened():
    """The spout opens on the shared loop at once, the bolt 0.3 s later on its own: the host is
    told once, when both are open, and neither loop runs a tuple until it releases the gate."""
    told = []
    worker = None

    def on_opened():
        told.append((threading.current_thread().name, worker.opened(), PREPARED.is_set()))
    worker, feed, spout, tracker, crashes = _worker(on_opened=on_opened)
    for i in range(100):
        feed.feed([i], i)
    worker.start()
    try:
        assert wait_until(lambda: told, 10)
        assert [(opened, prepared) for _, opened, prepared in told] == [(True, True)]
        assert not wait_until(lambda: EXECUTED or spout.in_flight, 0.5)  # held: nothing taken
        worker.start_gate.release()
        assert wait_until(lambda: all(tracker.is_acked(i) for i in range(100)), 10)
        assert sorted(EXECUTED) == list(range(100))  # each once
        assert len(told) == 1 and not crashes
    finally:
        worker.stop()


def test_a_worker_that_fails_in_prepare_never_tells_it_started_and_runs_no_tuple():
    """The case that stays a failed start: the bolt's prepare raises. The host is never told
    the worker started, and the spout's loop, open, takes no tuple while the worker dies."""
    told = []
    worker, feed, spout, _tracker, crashes = _worker(fail=True, on_opened=lambda: told.append(1))
    for i in range(10):
        feed.feed([i], i)
    worker.start()
    try:
        assert wait_until(lambda: crashes, 10)
        assert not worker.opened()
        assert not wait_until(lambda: told or EXECUTED or spout.in_flight, 0.5)
    finally:
        worker.stop()
    assert all(lp.join(5) for lp in worker.loops)  # the held loop ends when the worker stops


def test_a_host_that_never_answers_holds_the_loops_only_for_the_bound(caplog):
    """A master that cannot be told (down, cut off): after ``start_wait_secs`` the loops process
    anyway, with one warning, and every tuple is processed."""
    worker, feed, _spout, tracker, _crashes = _worker(on_opened=lambda: None, start_wait_secs=0.3)
    for i in range(50):
        feed.feed([i], i)
    with caplog.at_level(logging.WARNING, logger="squall"):
        worker.start()
        try:
            assert wait_until(lambda: all(tracker.is_acked(i) for i in range(50)), 10)
            assert sorted(EXECUTED) == list(range(50))
        finally:
            worker.stop()
    warned = [r.getMessage() for r in caplog.records if "has not recorded this worker's start" in r.getMessage()]
    assert len(warned) == 1, warned
    assert worker.start_gate.released


def test_a_gate_without_a_host_holds_nothing():
    gate = StartGate(lambda: False, None, 5.0)
    assert gate.released
    gate.wait(lambda: False, "loop")  # returns at once
