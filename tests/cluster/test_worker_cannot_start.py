"""A worker that cannot start says why in its own log, as well as to the master."""

from __future__ import annotations

import logging
import threading

import pytest

from squall import InvalidTopologyException
from squall.cluster.master import Master
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.worker.agent import EXIT_CANNOT_START, WorkerAgent

from .served import Served
from .test_master import _register, _topology, conf  # noqa: F401 (conf: a fixture)
from .test_worker_errors_outage import _Link


def test_a_worker_that_cannot_bind_its_port_says_why_in_its_own_log(conf, caplog):  # noqa: F811
    """Its slot's port bound by another process, the worker cannot open its transport: it exits
    as a failed start, and says why in its log (on the process host its worker.log, with the
    traceback), not only in the error it reports to the master. Before, the master's error was
    all: the supervisor's log said "exited with status 3", the worker's log nothing."""
    master = Master(conf)
    _register(Served(master))
    storm_id = master.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = master.topologies["t"]
    slot = min(topo.assignment)

    def make_transport(plan, origin, receive):
        raise OSError(98, f"Address already in use (while attempting to bind on address {slot!r})")

    agent = WorkerAgent(_Link(master), storm_id, slot, topo.launch_ids[slot], conf, make_transport=make_transport,
                        peer_poll_secs=0.01, seed=1)
    with caplog.at_level(logging.ERROR, logger="squall.worker"):
        assert agent.run() == EXIT_CANNOT_START
    said = f"worker on {slot} cannot start: OSError: [Errno 98] Address already in use"
    [logged] = [r for r in caplog.records if r.name == "squall.worker" and r.levelno == logging.ERROR]
    assert logged.getMessage().startswith(said) and logged.exc_info is not None
    assert [e.error for e in topo.errors if e.error.startswith(said)] != []


def test_a_worker_whose_start_fails_after_its_links_leaves_no_thread_and_names_the_setting(conf):  # noqa: F811
    """``topology.worker.gc.thresholds`` [2**31] in a topology stored before submit checked the
    range (submit refuses it now) is refused by ``gc.set_threshold`` as the worker starts its
    loops, after its links to the peers started their threads. Before, the refusal (a bare
    ``OverflowError``) escaped the worker past the ``finally`` that stops those threads: every
    failed launch left its backpressure link running in the process (on LocalCluster, the
    user's), one more per relaunch. Now the start is a failed one (reported, naming the setting
    and the slot) and every thread it started has ended."""
    master = Master(conf)
    _register(Served(master))
    bad = [2**31]
    with pytest.raises(InvalidTopologyException, match="topology.worker.gc.thresholds"):
        master.op_submit(name="refused", conf={"topology.workers": 1, "topology.worker.gc.thresholds": bad},
                         topology=_topology())
    storm_id = master.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = master.topologies["t"]
    topo.plan.conf["topology.worker.gc.thresholds"] = bad  # as stored by a squall without the check
    slot = min(topo.assignment)

    def make_transport(plan, origin, receive):
        transport = InMemoryTransport(InMemoryNetwork(), slot)
        transport.set_receiver(receive)
        return transport

    before = set(threading.enumerate())
    agent = WorkerAgent(_Link(master), storm_id, slot, topo.launch_ids[slot], conf, make_transport=make_transport,
                        peer_poll_secs=0.01, seed=1)
    try:
        status: object = agent.run()
    except Exception as e:  # noqa: BLE001 (before: the refusal escaped run())
        status = f"{type(e).__name__}: {e}"
    left = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == []
    assert status == EXIT_CANNOT_START
    said = f"worker on {slot} cannot start: InvalidTopologyException: topology.worker.gc.thresholds = {bad!r}"
    assert [e.error for e in topo.errors if e.error.startswith(said)] != []
