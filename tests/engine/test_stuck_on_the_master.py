"""The watchdog's report of a call that does not return (`Worker.report_stuck`) names the master
when the call waits for it: a Trident coordinator's save to the transactional state
(`squall._transactional.MasterBackend`), tried again while a partition or a Nimbus HA failover
keeps the master from answering, was reported as the component's user code "stuck?", naming
neither the master nor what it waited for."""

from __future__ import annotations

import threading

from squall import Bolt, Config, Fields, TopologyBuilder
from squall._config import topology_conf
from squall._transactional import MasterBackend
from squall.cluster.seeds import NimbusAddress
from squall.engine.clock import Clock
from squall.engine.loop import Backpressure, TopologyActivation
from squall.engine.plan import make_plan
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.engine.worker import Worker, component_blobs
from squall.testing import FeederSpout

from ..conftest import wait_until

CALLED = threading.Event()
RELEASE = threading.Event()


class _CutOffMaster:
    """A link to the master at 10.0.0.1:6627 whose calls do not return until `RELEASE` (a
    partition: the call waits out its timeout)."""

    address = NimbusAddress("10.0.0.1", 6627)

    def call(self, op, **args):
        CALLED.set()
        RELEASE.wait(30)


class SavesToTheMaster(Bolt):
    """Reads its transactional state from the master in ``execute``, as a Trident coordinator does."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.state = MasterBackend(_CutOffMaster(), retries=5)

    def execute(self, tup):
        self.state.get("t", "coordinator/currtx")
        self.collector.ack(tup)


def test_a_call_waiting_for_the_master_past_the_message_timeout_is_reported_naming_the_master():
    feed = FeederSpout(Fields(["x"]))
    b = TopologyBuilder()
    b.set_spout("feed", feed)
    b.set_bolt("coord", SavesToTheMaster()).shuffle_grouping("feed")
    conf = Config()
    conf.set_num_workers(1)
    conf.set_message_timeout_secs(10)
    conf[Config.TOPOLOGY_WORKER_GC_THRESHOLDS] = None  # (this test's process keeps its own)
    plan = make_plan("t", "t-1", b.create_topology(), topology_conf({}, conf), dict(conf))
    errors = []
    worker = Worker(plan, 1, plan.executors, component_blobs(plan), InMemoryTransport(InMemoryNetwork(), "here"),
                    Clock(), TopologyActivation(active=True), Backpressure(1000), errors.append,
                    lambda w, rec: None, 7)
    CALLED.clear()
    RELEASE.clear()
    worker.start()
    worker.start_gate.release()
    try:
        feed.feed([1], 1)
        assert wait_until(CALLED.is_set, 10)
        assert worker.report_stuck(100.0, 10.0) == []  # first look: the call is seen
        assert worker.report_stuck(111.0, 10.0) == ["coord"]  # 11 s on: past the 10 s limit
        [error] = errors
        assert error.error.startswith(
            "[coord] task 2 has been in one call (execute) for over 10 s (topology.message.timeout.secs), waiting for "
            "the master at 10.0.0.1:6627 (trident_state_get, tried up to 6 times: storm.zookeeper.retry.times 5), "
            "which does not answer"), error.error
        assert "stuck?" not in error.error and "user code" not in error.error
    finally:
        RELEASE.set()
        worker.stop()
