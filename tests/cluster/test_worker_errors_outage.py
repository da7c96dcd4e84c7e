"""A worker's errors while the master is unreachable: kept for when it is back, and bounded."""

from __future__ import annotations

import threading

from squall._errors import RpcError
from squall.cluster.master import Master
from squall.engine.executor import MAX_ERRORS_PER_COMPONENT
from squall.engine.transport import InMemoryNetwork, InMemoryTransport
from squall.worker.agent import WorkerAgent

from ..conftest import wait_until
from .served import Served
from .test_master import _register, _topology, conf  # noqa: F401 (conf: a fixture)


class _Link:
    """The master as a worker's link calls it; ``down``: heartbeats fail as when it is unreachable."""

    def __init__(self, master: Master) -> None:
        self.master = master
        self.lock = threading.Lock()
        self.down = False

    def call(self, op: str, **args):
        if self.down and op == "heartbeat":
            raise RpcError("connection refused")
        with self.lock:
            return self.master.handle(op, args).reply


def test_errors_reported_while_the_master_is_unreachable_stay_bounded_and_keep_their_counts(conf):  # noqa: F811
    """A bolt that keeps failing while the master is down (for hours, say) made the worker keep
    every error for the next heartbeat: its memory grew by a record (with its traceback) per
    error, and the heartbeat that finally went out carried them all. The master keeps only the
    newest 10 per component, folding repeats into a count: the worker keeps the same, so its
    memory stays bounded and no count is lost."""
    master = Master(conf)
    _register(Served(master))
    storm_id = master.op_submit(name="t", conf={"topology.workers": 1,
                                                "topology.max.error.report.per.interval": 1_000_000},
                                topology=_topology())
    topo = master.topologies["t"]
    link = _Link(master)
    network = InMemoryNetwork()
    slot = min(topo.assignment)

    def make_transport(plan, origin, receive):
        transport = InMemoryTransport(network, f"mem:{slot}")
        transport.set_receiver(receive)
        return transport

    agent = WorkerAgent(link, storm_id, slot, topo.launch_ids[slot], {**conf, "worker.heartbeat.frequency.secs": 600},
                        make_transport=make_transport, peer_poll_secs=0.01, seed=1)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: agent.state is not None and agent.state.active, 10)
        feed, sink = (next(ex for ex in agent.worker.executors if ex.component == c) for c in ("feed", "sink"))
        link.down = True
        rounds, per_round = 200, 25
        for r in range(rounds):
            for i in range(per_round):
                # the spout repeats one error (to be counted), the bolt's are all different
                feed.report_error(feed.task_ids[0], "ValueError: the same bad record")
                sink.report_error(sink.task_ids[0], f"KeyError: record {r}-{i}")
            agent.beat()  # fails: the master is unreachable
            assert len(agent._errors) <= 1 + MAX_ERRORS_PER_COMPONENT, r
        link.down = False
        agent.beat()
        assert not agent._errors
        # what the master keeps is what it would have kept had it heard every error
        sink_errors = [e.error for e in topo.errors if e.component == "sink"]
        assert sink_errors == [f"KeyError: record {rounds - 1}-{i}"
                               for i in range(per_round - MAX_ERRORS_PER_COMPONENT, per_round)]
        [same] = [e for e in topo.errors if e.component == "feed"]
        assert same.error == "ValueError: the same bad record" and same.count == rounds * per_round
    finally:
        agent.stop()
        thread.join(10)
