"""`LocalCluster.submit_topology` waits for its workers to report in, up to
``nimbus.task.launch.secs``, and then says which did not and what each was doing.

Before, the wait ended at its deadline as if every worker were up: the submission returned, and
a test went on against a topology that was not running (stop 77's CI hang was first read as
this wait outliving its deadline; it was the process frozen, tests/engine/test_watchdog_frames.py).
"""

from __future__ import annotations

import threading

import pytest

from squall import Bolt, Fields, LocalCluster, TopologyBuilder, WorkerStartTimeoutError
from squall.testing import FeederSpout, SimulatedClock

from ..conftest import wait_until

LAUNCH_SECS = 2
RELEASE = threading.Event()
EXECUTED: list[int] = []


class HeldWhenUnpickled(Bolt):
    """A bolt whose unpickling in its worker waits for `RELEASE`: a component that reconnects to
    a server that does not answer, in ``__setstate__``."""

    def __init__(self):
        self.server = "db.example:5432"  # (a state to unpickle: without one, no __setstate__ runs)

    def __setstate__(self, state):
        self.__dict__.update(state)
        RELEASE.wait(30)

    def execute(self, tup):
        EXECUTED.append(tup["n"])
        self.collector.ack(tup)


@pytest.mark.parametrize("clock", [None, SimulatedClock()], ids=["real-clock", "simulated-clock"])
def test_a_worker_that_never_reports_in_is_named_with_what_it_is_doing_at_the_deadline(clock):
    """A worker that never comes up: the submission raises at ``nimbus.task.launch.secs``
    (2 s here, real time, also on a simulated clock, which the test never moves and on which
    the master would never restart that worker), naming the worker, its components, what it is
    at and the user code its thread is in. The topology stays submitted: released, its worker
    reports in and every tuple fed after is executed."""
    RELEASE.clear()
    EXECUTED.clear()
    feeder = FeederSpout(Fields("n"))
    builder = TopologyBuilder()
    builder.set_spout("numbers", feeder)
    builder.set_bolt("held", HeldWhenUnpickled()).shuffle_grouping("numbers")
    with LocalCluster({"nimbus.task.launch.secs": LAUNCH_SECS}, clock=clock) as cluster:
        try:
            with pytest.raises(WorkerStartTimeoutError) as raised:
                cluster.submit_topology("held", {}, builder.create_topology())
        finally:
            RELEASE.set()
        said = str(raised.value)
        assert said.startswith("topology 'held' (held-"), said
        assert (f"1 of its 1 workers did not report in within nimbus.task.launch.secs ({LAUNCH_SECS} s): worker "
                "localhost:1024 ([__acker], [held], [numbers]) is building its executors (unpickling its "
                "components, preparing custom groupings), in HeldWhenUnpickled.__setstate__ (") in said, said
        assert ", now in Condition.wait (" in said and "threading.py:" in said, said  # RELEASE.wait
        restart = ("the master never restarts them, as its nimbus.task.launch.secs runs on the cluster's SimulatedClock"
                   if clock is not None else "the master restarts a worker that stays silent that long")
        assert said.endswith(f". The topology stays submitted ({restart}); kill_topology('held') or shutdown() "
                             "stops it"), said
        assert wait_until(lambda: cluster.get_topology_info("held")["workers"][0]["alive"], 20)  # released, it is up
        for n in range(10):
            feeder.feed([n])
        assert wait_until(lambda: len(EXECUTED) == 10, 20), EXECUTED
        assert sorted(EXECUTED) == list(range(10))
