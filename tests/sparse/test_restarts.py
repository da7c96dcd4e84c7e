"""A streamparse component that raises is replaced by a fresh instance (exit_on_exception, as
Storm restarts its process): what the old instance held is failed and replays, what arrives
after goes to the new instance, and a spout is activated again."""

from __future__ import annotations

import threading
from typing import Any

from streamparse import Bolt, ReliableSpout, Spout, TicklessBatchingBolt, Topology

from squall import Config, LocalCluster
from squall.sparse import translate
from squall.testing._registry import SharedLog
from tests.conftest import wait_until

N = 200
FIRST = 10  # ids the spout emits before the bolt has raised; the rest come after


class Ids(ReliableSpout):
    """Emits FIRST ids, then the rest only once the bolt has raised: those arrive while the
    bolt's restart is due. streamparse's default max_fails (3): an id failed again and again
    is given up on (acked without reaching the sink)."""
    outputs = ["n"]
    acked: SharedLog
    failed: SharedLog
    raised: SharedLog  # the bolt's

    def initialize(self, conf: Any, context: Any) -> None:
        self.i = 0

    def next_tuple(self) -> None:
        if self.i < N and (self.i < FIRST or self.raised.items()):
            self.emit([self.i], tup_id=self.i)
            self.i += 1

    def ack(self, tup_id: Any) -> None:
        super().ack(tup_id)
        self.acked.append(tup_id)

    def fail(self, tup_id: Any) -> None:
        self.failed.append(tup_id)
        super().fail(tup_id)


class RaisingBatch(TicklessBatchingBolt):
    """process_batch raises once, in the batcher thread."""
    outputs = ["n"]
    secs_between_batches = 0.05
    raised: SharedLog

    def process_batch(self, key: Any, tups: Any) -> None:
        if not self.raised.items():
            self.raised.append(len(tups))
            raise RuntimeError("process_batch fails once")
        for t in tups:
            self.emit([t.values[0]])


class _WatchedLock:
    """A TicklessBatchingBolt's batch lock that tells whether another thread waits for it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._count = threading.Lock()
        self.waiting = 0

    def __enter__(self) -> None:
        with self._count:
            self.waiting += 1
        self._lock.acquire()
        with self._count:
            self.waiting -= 1

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class RaisingKey(TicklessBatchingBolt):
    """group_key raises once, in the executor's thread, with the first FIRST - 1 ids still in
    their batches and the batcher thread waiting for the batch lock: once the lock is free the
    batcher would process those batches, which the exception fails (exit_on_exception). Its
    first batch after the exception waits until the spout has heard of the failure, so that
    it cannot run before."""
    outputs = ["n"]
    secs_between_batches = 0.5
    raised: SharedLog

    def initialize(self, conf: Any, context: Any) -> None:
        self._batch_lock = _WatchedLock()
        self.waited = False

    def group_key(self, tup: Any) -> Any:
        if tup.values[0] == FIRST - 1 and not self.raised.items():
            assert wait_until(lambda: self._batch_lock.waiting, 30)  # the batcher's turn is due
            self.raised.append(tup.values[0])
            raise RuntimeError("group_key fails once")
        return tup.values[0] % 4

    def process_batch(self, key: Any, tups: Any) -> None:
        if self.raised.items() and not self.waited:
            self.waited = True
            wait_until(lambda: FIRST - 1 in Ids.failed.items(), 10)
        for t in tups:
            self.emit([t.values[0]])


class Sink(Bolt):
    got: SharedLog

    def process(self, tup: Any) -> None:
        self.got.append(tup.values[0])


class BatchRaises(Topology):
    config = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 600}  # replays come from fails only
    ids = Ids.spec()
    batches = RaisingBatch.spec(inputs=[ids])
    sink = Sink.spec(inputs=[batches])


class KeyRaises(Topology):
    config = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 600}
    ids = Ids.spec()
    batches = RaisingKey.spec(inputs=[ids])
    sink = Sink.spec(inputs=[batches])


def _run_until_every_id_is_acked(topology: Any, bolt: Any) -> list[dict[str, Any]]:
    Ids.acked, Ids.failed, Sink.got = SharedLog(), SharedLog(), SharedLog()
    bolt.raised = Ids.raised = SharedLog()
    t = translate(topology)
    with LocalCluster() as cluster:
        cluster.submit_topology("restarts", t.conf, t.topology)
        assert wait_until(lambda: len(set(Ids.acked.items())) >= N, 60), len(set(Ids.acked.items()))
        errors: list[dict[str, Any]] = cluster.get_topology_info("restarts")["errors"]
    return errors


def test_a_tickless_batching_bolt_whose_batch_raises_once_restarts_once_and_loses_nothing() -> None:
    # before the fix the tuple that arrived next was failed by the restart and still given to
    # the new instance, whose ack of it was an error: a restart per tuple, every id given up on
    errors = _run_until_every_id_is_acked(BatchRaises, RaisingBatch)
    assert sorted(Ids.acked.items()) == list(range(N))  # every id, once
    assert sorted(Sink.got.items()) == list(range(N))  # every id reached the sink, once: none given up on
    assert len(RaisingBatch.raised.items()) == 1
    failed = Ids.failed.items()
    assert failed and set(failed) <= set(range(FIRST)), failed  # the batch that raised, and only it
    assert len(errors) == 1 and "process_batch fails once" in errors[0]["error"], [e["error"][-300:] for e in errors]


def test_a_tickless_batching_bolt_whose_group_key_raises_once_restarts_once_and_loses_nothing() -> None:
    # the batcher thread of the instance being replaced must not ack or emit tuples the
    # exception failed (ids then unknown: an error, and another restart)
    errors = _run_until_every_id_is_acked(KeyRaises, RaisingKey)
    assert sorted(Ids.acked.items()) == list(range(N))
    assert sorted(Sink.got.items()) == list(range(N))
    assert RaisingKey.raised.items() == [FIRST - 1]
    assert FIRST - 1 in Ids.failed.items()
    assert len(errors) == 1 and "group_key fails once" in errors[0]["error"], [e["error"][-300:] for e in errors]


M = 40
RAISE_AT = 10


class Gated(Spout):
    """Emits 0..M-1 only between activate() and deactivate() (as Storm >= 1.1 sends them to a
    shell spout), and raises once, at RAISE_AT."""
    outputs = ["n"]
    lives: SharedLog
    raised: SharedLog

    def initialize(self, conf: Any, context: Any) -> None:
        self.active = False
        self.emitted = 0
        self.lives.append("init")

    def activate(self) -> None:
        self.active = True
        self.lives.append("activate")

    def deactivate(self) -> None:
        self.active = False

    def next_tuple(self) -> None:
        if not self.active:
            return
        if self.emitted == RAISE_AT and not self.raised.items():
            self.raised.append(1)
            raise RuntimeError("spout hiccup")
        if self.emitted < M:
            self.emit([self.emitted])
            self.emitted += 1


class GatedTopology(Topology):
    gated = Gated.spec()
    sink = Sink.spec(inputs=[gated])


def test_a_restarted_pystorm_spout_is_activated_again() -> None:
    # before the fix the new instance was never activated, and never emitted
    Gated.lives, Gated.raised, Sink.got = SharedLog(), SharedLog(), SharedLog()
    t = translate(GatedTopology)
    expected = sorted([*range(RAISE_AT), *range(M)])  # the old instance's, then all of the new one's
    with LocalCluster() as cluster:
        cluster.submit_topology("gated", t.conf, t.topology)
        assert wait_until(lambda: len(Sink.got.items()) >= len(expected), 60), len(Sink.got.items())
    assert Gated.lives.items() == ["init", "activate", "init", "activate"]
    assert sorted(Sink.got.items()) == expected
