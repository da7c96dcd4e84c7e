"""A worker's errors while the master is unreachable: kept for when it is back, and bounded."""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager

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


@contextmanager
def _running_agent(conf, topology_conf):  # noqa: F811 (conf: the fixture's value)
    """A one-worker topology submitted to a `Master`, and its `WorkerAgent` running on a thread
    with a `_Link` to the master (``link.down`` cuts it), once the agent is active; the agent is
    stopped after. Yields (master, link, agent)."""
    master = Master(conf)
    _register(Served(master))
    storm_id = master.op_submit(name="t", conf={"topology.workers": 1, **topology_conf}, topology=_topology())
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
        yield master, link, agent
    finally:
        agent.stop()
        thread.join(10)


def test_errors_reported_while_the_master_is_unreachable_stay_bounded_and_keep_their_counts(conf):  # noqa: F811
    """A bolt that keeps failing while the master is down (for hours, say) made the worker keep
    every error for the next heartbeat: its memory grew by a record (with its traceback) per
    error, and the heartbeat that finally went out carried them all. The master keeps only the
    newest 10 per component, folding repeats into a count: the worker keeps the same, so its
    memory stays bounded and no count is lost, over the two beats after the outage."""
    with _running_agent(conf, {"topology.max.error.report.per.interval": 1_000_000}) as (master, link, agent):
        topo = master.topologies["t"]
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
        # the batch the first failed beat carried goes first, under its number (the master may
        # have kept it before its reply was lost: it keeps a number once); what came since
        # waited, folded, for the beat after
        agent.beat()
        assert agent._unsent is None
        agent.beat()
        assert not agent._errors and agent._unsent is None
        # what the master keeps is what it would have kept had it heard every error
        sink_errors = [e.error for e in topo.errors if e.component == "sink"]
        assert sink_errors == [f"KeyError: record {rounds - 1}-{i}"
                               for i in range(per_round - MAX_ERRORS_PER_COMPONENT, per_round)]
        [same] = [e for e in topo.errors if e.component == "feed"]
        assert same.error == "ValueError: the same bad record" and same.count == rounds * per_round


def test_a_heartbeat_that_does_not_reach_the_master_is_said_in_the_workers_log_naming_it(conf, caplog):  # noqa: F811
    """A worker whose link to the master is cut or lossy: its failed heartbeats were swallowed
    without a word, and when the master restarted it for "missed heartbeats ... (user code
    holding the interpreter?)" its log held no trace of the network. The first failure is said,
    with the error naming the master; the next ones within a minute are not; the first beat
    through again says so."""
    with _running_agent(conf, {}) as (_master, link, agent):
        slot = agent.slot
        caplog.set_level(logging.INFO, logger="squall.worker")
        link.down = True
        for _ in range(3):
            agent.beat()
        said = [r.getMessage() for r in caplog.records if "heartbeat" in r.getMessage()]
        assert said == [(f"worker {slot}: its heartbeat did not reach the master: connection refused; the master takes "
                         f"a worker unheard for nimbus.task.timeout.secs (1 s) for dead (it restarts it, or moves its "
                         f"executors), so this worker may be stopped")], said
        link.down = False
        agent.beat()
        said = [r.getMessage() for r in caplog.records if "heartbeat" in r.getMessage()]
        assert len(said) == 2 and said[1].startswith(f"worker {slot}: its heartbeats reach the master again, after "), said


def test_a_worker_waits_for_a_leader_that_cannot_write_to_zookeeper_and_runs_on(conf, tmp_path, monkeypatch):  # noqa: F811
    """Nimbus HA, ZooKeeper stood in for in memory: a master takes the lead (its next outcome
    hands over its whole state) while ZooKeeper does not answer it, so the request that carries
    that state is refused: "cannot write the cluster state to ZooKeeper"
    (`ClusterStateUnavailableError`). A worker starting then took the refusal of its
    ``get_assignment`` for "no assignment", logged "exiting" and ended with status 0 (its slot
    stayed empty until the master launched it again); a running worker whose heartbeat was so
    refused ended the same way. Both are transient now: the worker asks again, with
    backoff, starts and runs, and its heartbeats go on through a refusal. A real "no assignment"
    (`NotAliveException`) still ends a starting worker with status 0."""
    from types import SimpleNamespace

    from squall._errors import RemoteError, SquallError
    from squall.cluster.store import ZooKeeperStore
    from squall.worker import agent as agent_module

    from .test_master_store import _Session
    monkeypatch.setattr(agent_module, "RETRY_SECS", 0.01, raising=False)  # the backoff's first wait, not the test's subject
    zk = _Session(SimpleNamespace(nodes={}, leader=None))
    master = Master(conf, store=ZooKeeperStore(zk, tmp_path / "nimbus", b"s" * 32))
    master.lead()  # no election here: this master leads
    served = Served(master)
    _register(served)
    storm_id = served.op_submit(name="t", conf={"topology.workers": 1}, topology=_topology())
    topo = master.topologies["t"]
    slot = min(topo.assignment)
    refused = []

    class Link:
        """The worker's link: the request through the leader's server (its changes written to
        ZooKeeper before the reply), a refusal coming back as a `RemoteError` naming its type."""

        def call(self, op, **args):
            try:
                return served.keeper.request(op, args)
            except SquallError as e:
                refused.append((op, type(e).__name__))
                raise RemoteError(str(e), type(e).__name__) from e

    network = InMemoryNetwork()

    def make_transport(plan, origin, receive):
        transport = InMemoryTransport(network, f"mem:{slot}")
        transport.set_receiver(receive)
        return transport

    zk.down = True
    master.lead()  # led again (a new term) while ZooKeeper is away: its whole state to write
    agent = WorkerAgent(Link(), storm_id, slot, topo.launch_ids[slot], {**conf, "worker.heartbeat.frequency.secs": 600},
                        make_transport=make_transport, peer_poll_secs=0.01, seed=1)
    status = []
    thread = threading.Thread(target=lambda: status.append(agent.run()), daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: agent.state is not None and agent.state.active or status, 10), refused
        assert not status, f"the worker ended ({status}) on {refused}"
        assert refused[0] == ("get_assignment", "ClusterStateUnavailableError")
        master.lead()  # and again, under the running worker: its heartbeat is refused
        before = len(refused)
        agent.beat()
        assert refused[before:] == [("heartbeat", "ClusterStateUnavailableError")]
        assert thread.is_alive() and not status
        zk.down = False
        agent.beat()
        assert len(refused) == before + 1 and thread.is_alive() and not status
    finally:
        agent.stop()
        thread.join(10)
    assert status == [0]

    # a real "no assignment": the topology killed while its worker starts
    served.op_kill(name="t", wait_secs=0)
    gone = WorkerAgent(Link(), storm_id, slot, topo.launch_ids[slot], conf, make_transport=make_transport, seed=1)
    assert gone.run() == 0


    # a stateful task's or a coordinator's transactional state: sent again, as to a master away
    from squall._errors import ClusterStateUnavailableError
    from squall._transactional import MasterBackend, MemoryBackend
    kept, calls = MemoryBackend(), []

    class Leader:
        """The master's transactional verbs; the first call refused as the leader cut off refuses it."""

        def call(self, op, topology, key, value=None, **caller):
            calls.append(op)
            if len(calls) == 1:
                raise RemoteError("cannot write the cluster state to ZooKeeper (ConnectionLoss)",
                                  ClusterStateUnavailableError.__name__)
            return kept.put(topology, key, value) if op == "trident_state_put" else kept.get(topology, key)
    backend = MasterBackend(Leader(), retries=2, sleep=lambda secs: None)
    backend.put("t", "some/key", b"value")
    assert calls == ["trident_state_put"] * 2 and backend.get("t", "some/key") == b"value"


def test_the_error_count_is_every_error_that_happened_not_the_records_kept(conf):  # noqa: F811
    """`squall list`'s error count was the number of records the master keeps: a bolt that
    reported 5,000 different errors showed 10 (each component's newest 10), and one error
    repeated 300 times showed 1. Now it counts every error, across an outage of the master
    (records folded in the worker meanwhile), and says how many of them the kept records tell
    of."""
    with _running_agent(conf, {"topology.max.error.report.per.interval": 1_000_000}) as (master, link, agent):
        feed, sink = (next(ex for ex in agent.worker.executors if ex.component == c) for c in ("feed", "sink"))
        for i in range(3000):
            sink.report_error(sink.task_ids[0], f"KeyError: record {i}")
        agent.beat()
        link.down = True  # the next 2,000, and 300 repeats, fold in the worker while the master is away
        for i in range(3000, 5000):
            sink.report_error(sink.task_ids[0], f"KeyError: record {i}")
        for _ in range(300):
            feed.report_error(feed.task_ids[0], "ValueError: the same bad record")
        agent.beat()
        link.down = False
        agent.beat()
        agent.beat()
        assert not agent._errors and agent._unsent is None
        [listed] = master.op_list()
        assert (listed["errors"], listed["errors_kept"]) == (5300, MAX_ERRORS_PER_COMPONENT + 300)


def test_the_error_count_includes_the_reports_the_throttle_refused(conf):  # noqa: F811
    """Storm's throttle (topology.max.error.report.per.interval) lets 5 reports through and
    records none of the rest: they happened all the same, and the count says so."""
    with _running_agent(conf, {"topology.max.error.report.per.interval": 5,
                               "topology.error.throttle.interval.secs": 3600}) as (master, _link, agent):
        sink = next(ex for ex in agent.worker.executors if ex.component == "sink")
        recorded = [sink.report_error(sink.task_ids[0], f"KeyError: record {i}") for i in range(1000)]
        assert sum(r is not None for r in recorded) == 5
        agent.beat()
        [listed] = master.op_list()
        assert (listed["errors"], listed["errors_kept"]) == (1000, 5)
        assert len(master.topologies["t"].errors) == 5
        # a beat with nothing new adds nothing
        agent.beat()
        assert master.op_list()[0]["errors"] == 1000
