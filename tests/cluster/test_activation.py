"""`WorkerAgent` against a real `Master` called directly (no sockets, no processes)."""

from __future__ import annotations

import threading

from squall.cluster.master import Master
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.worker.agent import WorkerAgent

from .served import Served
from .test_master import _register, _topology, conf  # noqa: F401 (conf: a fixture)
from ..conftest import wait_until


class _Calls:
    """The master as a worker's link calls it: one operation at a time."""

    def __init__(self, master: Master) -> None:
        self.master = master
        self.lock = threading.Lock()

    def call(self, op: str, **args):
        with self.lock:
            return self.master.handle(op, args).reply  # the request as over RPC, the reply record as it is


def test_the_worker_that_beat_first_hears_of_the_activation_without_waiting_a_heartbeat_period(conf):  # noqa: F811
    """The master activates a topology once all its workers have beaten. The worker that beat
    first learns it only from a beat's reply: it must not wait its heartbeat period (here 60 s)
    for it, or its spouts start that much after the others'."""
    master = Master(conf)
    _register(Served(master))  # its supervisor's sync, as over RPC
    storm_id = master.op_submit(name="t", conf={"topology.workers": 2}, topology=_topology())
    topo = master.topologies["t"]
    calls = _Calls(master)
    network = InMemoryNetwork()

    def make_transport(plan, origin, receive, slot):
        transport = InMemoryTransport(network, slot)
        transport.set_receiver(receive)
        return transport

    agents = []
    for slot in sorted(topo.assignment):
        agents.append(WorkerAgent(
            calls, storm_id, slot, topo.launch_ids[slot], {**conf, "worker.heartbeat.frequency.secs": 60},
            make_transport=lambda plan, origin, receive, slot=slot: make_transport(plan, origin, receive, slot),
            peer_poll_secs=0.01, seed=1))
    threads = [threading.Thread(target=agent.run, daemon=True) for agent in agents]
    first, second = agents
    try:
        threads[0].start()
        # the first has beaten (its peer's address is still missing, so it waits for it first:
        # the second's get_assignment gives it, then the first beats before the second does)
        threads[1].start()
        assert wait_until(lambda: first.state is not None and second.state is not None, 10)
        assert wait_until(lambda: first.state.active and second.state.active, 10)
    finally:
        for agent in agents:
            agent.stop()
        for t in threads:
            t.join(10)
