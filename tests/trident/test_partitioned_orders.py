"""The partitioned-spout adapters under orders a cluster can produce, drawn at random (seeded):
Trident's master coordinator with up to K txids in flight (a failed txid fails with every later
one in flight, and they start again in order with new attempts), the spout bolt's tasks each
running its batches in order and its ``$success`` messages in order but the two interleaved
and the tasks apart, the source's partitions appearing, vanishing and coming back (moving
between tasks), records arriving, a batch lost for one task (its txid times out) and a task
restarting. Every record the source holds must be committed exactly once, and no txid may fail
for ever. (A review's model found lost and doubled records, and txids that failed for ever, in
about one order in eight before `squall.trident.partitioned` kept a key per txid.)"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from squall import FailedException
from squall.trident.coordinator import TransactionAttempt
from squall.trident.partitioned import OpaquePartitionedTridentSpoutExecutor, PartitionedTridentSpoutExecutor

from .partition_fakes import Driver, FakeContext, Recorder
from .test_partitioned import Coord, Lists, OpaqueEmitter, OpSpout, TxSpout


class GrowingEmitter(OpaqueEmitter):
    """Takes ``batch + attempt_id % 3`` records of each partition: a replay holds other records
    than its first attempt (as `tests.trident.exactly_once.SentenceParts` does), so a batch that
    resumed from an attempt that does not commit overlaps or skips the one that does."""

    def emit_batch_new(self, tx, collector, partitions, last):
        metas = {}
        for p in partitions:
            start = last[p]["next"] if last[p] else 0
            records = self.source.data[p.pid][start:start + self.source.batch + tx.attempt_id % 3]
            for r in records:
                collector.emit([r])
            metas[p] = {"next": start + len(records)}
        return metas


class VisibleCoord(Coord):
    """Lists only the partitions the source shows now."""

    def get_partitions_for_batch(self):
        return sorted(self.source.visible)


@dataclass
class InFlight:
    attempt: int
    done: set[int] = field(default_factory=set)
    lost: bool = False  # its batch was lost for a task: it times out


class Orders:
    """One run of the model (see the module docstring), its choices drawn from ``seed``."""

    def __init__(self, seed: int, opaque: bool, tasks: int, in_flight: int, lose: bool, restart: bool) -> None:
        self.rnd = random.Random(seed)
        self.opaque, self.tasks, self.k, self.lose, self.restart = opaque, tasks, in_flight, lose, restart
        self.src = Lists(3, batch=2)
        self.src.visible = set(self.src.data)
        self.src.add(1)
        spout = OpSpout(self.src) if opaque else TxSpout(self.src)
        spout.get_coordinator = lambda conf, context: VisibleCoord(self.src)
        if opaque:
            spout.get_emitter = lambda conf, context: GrowingEmitter(self.src)
        adapter = OpaquePartitionedTridentSpoutExecutor if opaque else PartitionedTridentSpoutExecutor
        self.d = Driver(adapter(spout), num_tasks=tasks)
        self.inflight: dict[int, InFlight] = {}
        self.meta: dict[tuple[int, int], object] = {}  # each attempt's coordinator metadata
        self.out: dict[tuple[int, int, int], list[str]] = {}
        self.batches: list[list[tuple[int, int]]] = [[] for _ in range(tasks)]
        self.successes: list[list[tuple[int, int]]] = [[] for _ in range(tasks)]
        self.committed: list[str] = []
        self.next_txid = 1
        self.last_committed = 0
        self.failures: dict[int, int] = {}

    def start(self, txid: int) -> None:
        self.d.start(txid)
        attempt = self.d.attempts[txid]
        self.meta[(txid, attempt)] = self.d.metadata[txid]
        self.inflight[txid] = InFlight(attempt)
        for queue in self.batches:
            queue.append((txid, attempt))

    def fail(self, txid: int) -> None:
        self.failures[txid] = self.failures.get(txid, 0) + 1
        for t in [t for t in self.inflight if t >= txid]:
            del self.inflight[t]
        for t in range(txid, self.next_txid):
            self.start(t)

    def run(self, steps: int = 300) -> None:
        empty_commits = 0
        for step in range(steps + 3000):
            draining = step >= steps
            if draining and step == steps:
                self.src.visible = set(self.src.data)  # every partition back, nothing fails now
            if draining and empty_commits >= 6 and not self.inflight:
                return
            choices: list = []
            if len(self.inflight) < self.k and (not draining or empty_commits < 6):
                choices.append("new")
            for i in range(self.tasks):
                choices += [("batch", i)] * 3 * bool(self.batches[i]) + [("success", i)] * 2 * bool(self.successes[i])
            head = self.inflight.get(self.last_committed + 1)
            if head is not None and len(head.done) == self.tasks and not head.lost:
                choices += ["commit"] * 3
            if not draining:
                choices += ["grow", "grow", "partition"]
                if self.inflight and self.rnd.random() < 0.4:
                    choices.append("fail")
                if self.lose and any(self.batches) and self.rnd.random() < 0.1:
                    choices.append("lose")
                if self.restart and self.rnd.random() < 0.02:
                    choices.append("restart")
            if any(f.lost for f in self.inflight.values()):
                choices.append("timeout")
            choice = self.rnd.choice(choices)
            if choice == "commit":
                before = len(self.committed)
                self.commit()
                empty_commits = empty_commits + 1 if len(self.committed) == before else 0
            else:
                self.do(choice)
        raise AssertionError("the run did not drain")

    def do(self, choice) -> None:
        if choice == "new":
            self.start(self.next_txid)
            self.next_txid += 1
        elif choice == "grow":
            self.src.add(1)
        elif choice == "partition":
            self.partition()
        elif choice == "fail":
            self.fail(self.rnd.choice(sorted(self.inflight)))
        elif choice == "timeout":
            self.fail(min(t for t, f in self.inflight.items() if f.lost))
        elif choice == "lose":
            i = self.rnd.choice([i for i in range(self.tasks) if self.batches[i]])
            txid, attempt = self.batches[i].pop(0)
            if txid in self.inflight and self.inflight[txid].attempt == attempt:
                self.inflight[txid].lost = True
        elif choice == "restart":
            i = self.rnd.randrange(self.tasks)
            self.d.emitters[i] = self.d.spout.get_emitter(self.d.txid_key, {}, FakeContext(self.d.backend, i, self.tasks))
            for txid, attempt in self.batches[i]:
                if txid in self.inflight and self.inflight[txid].attempt == attempt:
                    self.inflight[txid].lost = True
            self.batches[i], self.successes[i] = [], []
        elif choice[0] == "batch":
            self.batch(choice[1])
        else:
            txid, attempt = self.successes[choice[1]].pop(0)
            self.d.emitters[choice[1]].success(TransactionAttempt(txid, attempt))

    def partition(self) -> None:
        src = self.src
        pid = self.rnd.choice([*sorted(src.data), "new"])
        if pid == "new":
            pid = f"p{len(src.data)}"
            src.data[pid] = [f"{pid}-0"]
            src.visible.add(pid)
        elif pid in src.visible and len(src.visible) > 1:
            src.visible.discard(pid)
        else:
            src.visible.add(pid)

    def batch(self, task: int) -> None:
        txid, attempt = self.batches[task].pop(0)
        out = Recorder()
        try:
            self.d.emitters[task].emit_batch(TransactionAttempt(txid, attempt), self.meta[(txid, attempt)], out)
        except FailedException:
            if txid in self.inflight and self.inflight[txid].attempt == attempt:
                self.fail(txid)
            return
        self.out[(txid, attempt, task)] = [r for [r] in out.values]
        if txid in self.inflight and self.inflight[txid].attempt == attempt:
            self.inflight[txid].done.add(task)

    def commit(self) -> None:
        txid = self.last_committed + 1
        attempt = self.inflight.pop(txid).attempt
        for task in range(self.tasks):
            self.committed += self.out[(txid, attempt, task)]
        self.last_committed = txid
        self.d.commit(txid)
        for queue in self.successes:
            queue.append((txid, attempt))


@pytest.mark.parametrize("opaque", [True, False], ids=["opaque", "transactional"])
@pytest.mark.parametrize("tasks, in_flight, lose, restart", [
    (2, 3, False, False), (3, 3, False, False), (2, 3, True, False), (3, 2, False, True), (2, 3, True, True),
    (1, 3, True, True)])
def test_every_record_is_committed_exactly_once_whatever_the_order(opaque, tasks, in_flight, lose, restart):
    for seed in range(40):
        run = Orders(seed, opaque, tasks, in_flight, lose, restart)
        run.run()
        records = sorted(r for rs in run.src.data.values() for r in rs)
        missing = sorted(set(records) - set(run.committed))
        twice = sorted({r for r in run.committed if run.committed.count(r) > 1})
        assert not missing and not twice, f"seed {seed}: missing {missing[:10]}, committed twice {twice[:10]}"
        assert max(run.failures.values(), default=0) < 50, f"seed {seed}: a txid failed {run.failures}"


@pytest.mark.parametrize("seed, tasks, in_flight, lose, restart", [(154, 2, 3, True, False), (100, 2, 3, True, True)])
def test_a_task_going_back_to_a_replay_reads_a_partition_that_moved_here_again(seed, tasks, in_flight, lose,
                                                                                 restart):
    """Orders that counted records twice (p3 in txids 18 and 19 of seed 100): a partition moved
    here at txid 20, found what txid 19 (which did not list it) needed, and the replay of txid
    19 that came next resumed from what the task read then, not from txid 18, which another task
    stored after."""
    run = Orders(seed, True, tasks, in_flight, lose, restart)
    run.run()
    twice = sorted({r for r in run.committed if run.committed.count(r) > 1})
    assert not twice, f"seed {seed}: committed twice {twice[:10]}"


def test_a_partition_back_at_another_task_waits_for_the_last_txid_that_listed_it():
    """p2 is at task 0 in txid 2, gone in txid 3 and back at task 1 in txid 4, which task 1 runs
    before task 0 runs txid 2: txid 4 must fail there (not resume from txid 1 and take txid 2's
    records too), and its replay resume after txid 2."""
    src, d = _visible_partitions(3, opaque=True, tasks=2)
    committed = [r for [r] in d.emit(1)]
    d.success(1)
    d.start(2)
    src.visible = {"p0", "p1"}
    d.start(3)
    src.visible = {"p1", "p2"}
    d.start(4)
    out = {(2, 1): d.emit_on(2, 1), (3, 1): d.emit_on(3, 1)}
    with pytest.raises(FailedException, match=r"partition \[p2\].*txid 2"):
        d.emit_on(4, 1)
    out |= {(2, 0): d.emit_on(2, 0), (3, 0): d.emit_on(3, 0)}
    d.start(4)  # the replay of txid 4
    out |= {(4, 1): d.emit_on(4, 1), (4, 0): d.emit_on(4, 0)}
    committed += [r for (_txid, _task), values in sorted(out.items()) for [r] in values]
    assert sorted(committed) == sorted(set(committed))
    assert {"p2-2", "p2-3", "p2-4", "p2-5"} <= set(committed)


@pytest.mark.parametrize("seed, tasks, in_flight, lose, restart", [
    (108, 3, 3, False, False), (124, 2, 3, True, False), (136, 2, 3, True, True)])
def test_a_partition_read_after_a_failed_attempt_of_a_task_running_behind_loses_nothing(seed, tasks, in_flight,
                                                                                         lose, restart):
    """Orders that lost records (p5-0 to p5-3 of seed 108): a task running behind ran attempt 2
    of txid 17, which listed p5, after attempt 4 (which did not) went out, and stored p5's batch
    for txid 17; another task took p5 at txid 18 and resumed after that batch, which never
    committed, before the first task ran attempt 4 and deleted it."""
    run = Orders(seed, True, tasks, in_flight, lose, restart)
    run.run()
    records = {r for rs in run.src.data.values() for r in rs}
    assert not sorted(records - set(run.committed)), f"seed {seed}: records lost"


@pytest.mark.parametrize("opaque", [True, False], ids=["opaque", "transactional"])
@pytest.mark.parametrize("missed", ["restart", "lost"])
def test_a_task_that_missed_the_txid_before_checks_a_partition_moving_here_against_the_stored_one(opaque, missed):
    """p1 is at task 1 in txid 2 and at task 0 in txid 3 (p0 left the list). Task 0 ran txid 2
    and restarted (``restart``: it lost what txid 2 listed), or never got txid 2's batch
    (``lost``: it times out); task 0 runs txid 3 before task 1 runs txid 2. Only the store (the
    coordinator's metadata of txid 2) says that txid 2 listed p1: txid 3 must fail there, not
    resume p1 after txid 1 and take txid 2's records too, and its replay resume after txid 2."""
    src, d = _visible_partitions(3, opaque=opaque, tasks=2)
    committed = [r for [r] in d.emit(1)]
    d.success(1)
    d.start(2)  # task 0: p0 and p2, task 1: p1
    src.visible = {"p1", "p2"}
    d.start(3)  # task 0: p1, task 1: p2
    out = {}
    if missed == "restart":
        out[(2, 0)] = d.emit_on(2, 0)
        d.emitters[0] = d.spout.get_emitter(d.txid_key, {}, FakeContext(d.backend, 0, 2))
    with pytest.raises(FailedException, match=r"partition \[p1\].*txid 2"):
        d.emit_on(3, 0)
    out[(2, 1)] = d.emit_on(2, 1)
    if missed == "lost":  # task 1 finds p2 missing at txid 2 too; txid 2 times out and is replayed
        with pytest.raises(FailedException, match=r"partition \[p2\].*txid 2"):
            d.emit_on(3, 1)
        d.start(2)
        out = {(2, 0): d.emit_on(2, 0), (2, 1): d.emit_on(2, 1)}
    else:
        out[(3, 1)] = d.emit_on(3, 1)
    d.start(3)  # the replay of txid 3
    out |= {(3, 0): d.emit_on(3, 0), (3, 1): d.emit_on(3, 1)}
    committed += [r for (_txid, _task), values in sorted(out.items()) for [r] in values]
    assert sorted(committed) == sorted(set(committed)), "a record committed twice"
    for pid, records in src.data.items():  # each partition from its start, without a gap
        taken = [r for r in records if r in committed]
        assert taken == records[:len(taken)], f"{pid}: records lost"
    assert {"p1-2", "p1-3", "p1-4", "p1-5", "p2-4", "p2-5"} <= set(committed)


@pytest.mark.parametrize("opaque, seed, tasks, in_flight, lose, restart", [
    (False, 187, 2, 3, True, True), (False, 193, 2, 3, True, True), (False, 215, 2, 3, True, False),
    (True, 270, 2, 3, True, True), (True, 380, 3, 2, False, True)])
def test_orders_where_a_task_missed_a_txid_count_every_record_once(opaque, seed, tasks, in_flight, lose, restart):
    """Orders that counted records twice when a task had not seen a txid before the one it ran
    (p1-38 and p1-39 of seed 187: task 0 restarted, and its first batch, txid 25, took p1, which
    txid 24 had at task 1, and resumed after txid 23 before task 1 ran txid 24; seed 215: task
    0's batch of txid 21, which moved p4 to task 1, was lost, and txid 22 moved p4 back and
    resumed it after txid 20, not knowing of txid 21): the task now reads what the missed txid
    listed from the coordinator's stored metadata."""
    run = Orders(seed, opaque, tasks, in_flight, lose, restart)
    run.run()
    _assert_each_record_committed_once(run, seed)


def test_a_restarted_task_forgets_what_it_read_in_an_attempt_before_the_restart_that_the_replay_drops():
    """The only task runs attempt 0 of txid 2, which lists p1, stores what it read of p1 and
    restarts; txid 2 fails, and its replay no longer lists p1 (gone from the source for a while).
    The task has not seen txid 2 since it started, so nothing told it that the replay lists other
    partitions than the attempt it ran: p1's batch of the failed attempt stayed stored, and p1,
    listed again at txid 4, resumed after it: p1-2 and p1-3, in no committed batch, were lost.
    Each task that runs an attempt after the first of a txid it has not seen since it started
    forgets what an earlier attempt stored for the partitions this one does not list."""
    src, d = _visible_partitions(2, opaque=True, tasks=1)
    committed = [r for [r] in d.emit(1)]
    d.success(1)
    d.start(2)
    assert sorted(r for [r] in d.emit_on(2, 0)) == ["p0-2", "p0-3", "p1-2", "p1-3"]  # does not commit
    d.emitters[0] = d.spout.get_emitter(d.txid_key, {}, FakeContext(d.backend, 0, 1))  # the worker restarts
    d.start(3)
    d.emit_on(3, 0)  # does not commit either: txid 2 fails, and txid 3 with it
    src.visible = {"p0"}
    for txid in (2, 3):  # the replays, in order, without p1
        d.start(txid)
        committed += [r for [r] in d.emit_on(txid, 0)]
    d.success(2)
    d.success(3)
    src.visible = {"p0", "p1"}
    committed += [r for [r] in d.emit(4)]
    assert sorted(committed) == sorted(set(committed)), "a record committed twice"
    for pid, records in src.data.items():  # each partition from its start, without a gap
        taken = [r for r in records if r in committed]
        assert taken == records[:len(taken)], f"{pid}: records lost: {taken}"
    assert {"p1-2", "p1-3"} <= set(committed)


@pytest.mark.parametrize("seed, tasks, in_flight", [(186, 2, 2), (310, 3, 3), (58, 1, 3), (164, 1, 3)])
def test_orders_where_a_task_restarted_after_an_attempt_that_failed_lose_no_record(seed, tasks, in_flight):
    """Orders that lost records (p1-0 and p1-1 of seed 186, p0-10 to p0-14 of seed 310): a task
    ran an attempt of a txid that listed a partition, restarted, and the txid's replay no longer
    listed it; what the failed attempt read stayed stored, and the partition resumed after it."""
    run = Orders(seed, True, tasks, in_flight, True, True)
    run.run()
    _assert_each_record_committed_once(run, seed)


def _assert_each_record_committed_once(run: Orders, seed: int) -> None:
    """Every record the source holds is in exactly one committed batch of ``run``."""
    records = sorted(r for rs in run.src.data.values() for r in rs)
    twice = sorted({r for r in run.committed if run.committed.count(r) > 1})
    assert not twice, f"seed {seed}: committed twice {twice[:10]}"
    assert sorted(set(run.committed)) == records, f"seed {seed}: records lost"


def _visible_partitions(partitions: int, opaque: bool, tasks: int) -> tuple[Lists, Driver]:
    """A source of ``partitions`` partitions holding 10 records each, all listed (its coordinator
    lists those in ``visible``: a test changes it between txids), and a driver of a spout over it
    (``opaque`` or transactional) with ``tasks`` tasks."""
    src = Lists(partitions, batch=2)
    src.add(10)
    src.visible = {f"p{i}" for i in range(partitions)}
    spout = OpSpout(src) if opaque else TxSpout(src)
    spout.get_coordinator = lambda conf, context: VisibleCoord(src)
    adapter = OpaquePartitionedTridentSpoutExecutor if opaque else PartitionedTridentSpoutExecutor
    return src, Driver(adapter(spout), num_tasks=tasks)
