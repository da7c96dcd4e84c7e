"""`WorkerAgent` against a real `Master` called directly (no sockets, no processes)."""

from __future__ import annotations

import threading
import time

import cloudpickle

from squall import Bolt, TopologyBuilder
from squall.cluster.master import Master
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.testing import FeederSpout
from squall.testing._registry import SharedLog
from squall.worker.agent import WorkerAgent

from ..conftest import wait_until
from .served import Served
from .test_master import _register, _topology, conf  # noqa: F401 (conf: a fixture)


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



class NotesWhen(Bolt):
    """Notes when it runs each tuple (``time.monotonic()``) in ``ran``."""

    def __init__(self, ran: SharedLog) -> None:
        self.ran = ran

    def execute(self, tup):
        self.ran.append(time.monotonic())
        self.collector.ack(tup)


class _NotesStartRecorded(_Calls):
    """`_Calls`, noting when the master answered the first beat that said the worker started."""

    def __init__(self, master: Master) -> None:
        super().__init__(master)
        self.start_recorded: float | None = None

    def call(self, op: str, **args):
        reply = super().call(op, **args)
        if op == "heartbeat" and args.get("started") and self.start_recorded is None:
            self.start_recorded = time.monotonic()
        return reply


def test_the_master_has_recorded_the_start_before_the_first_tuple_runs_so_a_death_on_it_is_a_crash(conf):  # noqa: F811
    """A worker whose first tuple kills its process at once (os._exit, a segfault: no last beat)
    had started. With the heartbeat period at 60 s, the beat saying that its executors opened
    used to come a period after its first tuples, and the exit counted as a failed start. Now
    the first tuple runs only once that beat is answered: the exit reported then is a crash."""
    master = Master(conf)
    _register(Served(master))
    b = TopologyBuilder()
    feed, ran = FeederSpout(["x"]), SharedLog()
    b.set_spout("feed", feed)
    b.set_bolt("sink", NotesWhen(ran)).shuffle_grouping("feed")
    storm_id = master.op_submit(name="t", conf={"topology.workers": 1}, topology=cloudpickle.dumps(b.create_topology()))
    topo = master.topologies["t"]
    [slot] = topo.assignment
    launch = topo.launch_ids[slot]
    for i in range(20):
        feed.feed([i])
    network = InMemoryNetwork()

    def make_transport(plan, origin, receive):
        transport = InMemoryTransport(network, slot)
        transport.set_receiver(receive)
        return transport
    calls = _NotesStartRecorded(master)
    agent = WorkerAgent(calls, storm_id, slot, launch, {**conf, "worker.heartbeat.frequency.secs": 60},
                        make_transport=make_transport, peer_poll_secs=0.01, seed=1)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: len(ran.items()) == 20, 10), ran.items()
        assert calls.start_recorded is not None and calls.start_recorded < min(ran.items()), \
            (calls.start_recorded, min(ran.items()))
    finally:
        agent.stop()
        thread.join(10)
    # what its supervisor would report had the first tuple ended the process
    Served(master).op_supervisor_sync(supervisor_id="s1", host="127.0.0.1", ports=[7000, 7001], exits=[
        {"storm_id": storm_id, "slot": slot, "launch_id": launch, "status": 1, "started": True, "output": ""}])
    state = topo.slot(slot)
    assert state.failed_starts == 0 and state.crashes == 1 and not state.given_up
    # a crash that said nothing: a restart and an error that says so, not a "failed to start" one
    assert [e.error for e in topo.errors] == [f"worker on {slot} exited with status 1 without being asked to stop: no output"]
