"""The partitioned-spout adapters (Storm's PartitionedTridentSpoutExecutor and
OpaquePartitionedTridentSpoutExecutor) over a toy source of named, growing lists: a transactional
replay re-emits exactly the same tuples, also from a restarted task; an opaque spout puts every
record in exactly one batch that succeeds; partitions are split between tasks."""

from __future__ import annotations

import pytest

from squall import FailedException, Fields
from squall.trident.partitioned import (
    IOpaquePartitionedTridentSpout, IPartitionedTridentSpout, OpaquePartitionedTridentSpoutExecutor,
    PartitionedTridentSpoutExecutor, RotatingTransactionalState, partition_key)
from squall.trident.txstate import MemoryTransactionalState

from squall.trident.coordinator import TransactionAttempt

from .partition_fakes import Driver


class Part:
    """A partition: one list of the source."""

    def __init__(self, pid):
        self.pid = pid

    def get_id(self):
        return self.pid

    def __hash__(self):
        return hash(self.pid)

    def __eq__(self, other):
        return isinstance(other, Part) and other.pid == self.pid


class Lists:
    """The source: partition id -> records, which the test appends to."""

    def __init__(self, n, batch):
        self.data = {f"p{i}": [] for i in range(n)}
        self.batch = batch

    def add(self, count):
        for i in range(count):
            for pid, records in self.data.items():
                records.append(f"{pid}-{len(records)}")


class Coord(IPartitionedTridentSpout.Coordinator, IOpaquePartitionedTridentSpout.Coordinator):
    def __init__(self, source):
        self.source = source

    def get_partitions_for_batch(self):
        return sorted(self.source.data)


class TxEmitter(IPartitionedTridentSpout.Emitter):
    def __init__(self, source):
        self.source = source
        self.refreshed = []

    def get_ordered_partitions(self, info):
        return [Part(p) for p in info]

    def refresh_partitions(self, mine):
        self.refreshed.append([p.pid for p in mine])

    def emit_batch_new(self, tx, collector, partitions, last):
        metas = {}
        for p in sorted(partitions, key=Part.get_id):
            start = last[p]["end"] if last[p] else 0
            end = min(start + self.source.batch, len(self.source.data[p.pid]))
            metas[p] = {"start": start, "end": end}
            self.re_emit_partition_batch(tx, collector, p, metas[p])
        return metas

    def re_emit_partition_batch(self, tx, collector, partition, meta):
        for r in self.source.data[partition.pid][meta["start"]:meta["end"]]:
            collector.emit([r])


class OpaqueEmitter(IOpaquePartitionedTridentSpout.Emitter):
    def __init__(self, source):
        self.source = source

    def get_ordered_partitions(self, info):
        return [Part(p) for p in info]

    def emit_batch_new(self, tx, collector, partitions, last):
        metas = {}
        for p in partitions:
            start = last[p]["next"] if last[p] else 0
            records = self.source.data[p.pid][start:start + self.source.batch]
            for r in records:
                collector.emit([r])
            metas[p] = {"next": start + len(records)}
        return metas


class TxSpout(IPartitionedTridentSpout):
    def __init__(self, source):
        self.source = source

    def get_coordinator(self, conf, context):
        return Coord(self.source)

    def get_emitter(self, conf, context):
        return TxEmitter(self.source)

    def get_output_fields(self):
        return Fields(["r"])


class OpSpout(IOpaquePartitionedTridentSpout):
    def __init__(self, source):
        self.source = source

    def get_coordinator(self, conf, context):
        return Coord(self.source)

    def get_emitter(self, conf, context):
        return OpaqueEmitter(self.source)

    def get_output_fields(self):
        return Fields(["r"])


def run_through(d, txids) -> list:
    """Each of ``txids`` emitted on every task and succeeded: the tuples committed."""
    committed = []
    for txid in txids:
        committed += d.emit(txid)
        d.success(txid)
    return committed


def assert_each_once(src, committed, n, also=()) -> None:
    """``committed`` holds each of the ``n`` records of ``src`` (and ``also``) exactly once."""
    records = [r for [r] in committed]
    assert sorted(records) == sorted([*(r for rs in src.data.values() for r in rs), *also]), records
    assert len(records) == len(set(records)) == n


def two_tasks_after_txid_1(opaque):
    """Partitions p1 and p2 of three records each on two tasks (task 0 has p1, task 1 p2), and
    txid 1 committed: the source, the driver and what txid 1 committed."""
    src = Lists(0, batch=2)
    src.data = {"p1": [], "p2": []}
    src.add(3)
    spout = OpSpout(src) if opaque else TxSpout(src)
    d = Driver((OpaquePartitionedTridentSpoutExecutor if opaque else PartitionedTridentSpoutExecutor)(spout),
               num_tasks=2)
    return src, d, run_through(d, (1,))


def test_transactional_replay_re_emits_the_same_tuples_also_after_a_restart():
    src = Lists(2, batch=3)
    src.add(4)
    d = Driver(PartitionedTridentSpoutExecutor(TxSpout(src)))
    first = {t: d.emit(t) for t in (1, 2)}
    assert first[1] == [["p0-0"], ["p0-1"], ["p0-2"], ["p1-0"], ["p1-1"], ["p1-2"]]
    assert first[2] == [["p0-3"], ["p1-3"]]
    src.add(5)  # the source grows: a replay of 2 must not see it
    assert d.emit(2) == first[2]
    d.restart()
    assert d.emit(1) == first[1] and d.emit(2) == first[2]
    d.success(2)
    third = d.emit(3)
    assert third == [["p0-4"], ["p0-5"], ["p0-6"], ["p1-4"], ["p1-5"], ["p1-6"]]
    everything = [r for t in (first[1], first[2], third) for [r] in t]
    assert len(everything) == len(set(everything)) == 14


def test_a_txid_first_seen_after_a_later_one_emits_nothing_and_no_record_is_in_two_txids():
    """The batch of txid 1 never reached the emitter (its first attempt failed at the spout
    coordinator: a Kafka topic not there yet), that of txid 2 did and took the first records.
    Txid 1, replayed after, must not take them again, or they are counted under both txids (seen
    on 2026-12-04: a Kafka word count's first chunk counted twice). Storm's
    RotatingTransactionalState.getStateOrCreate: a txid older than one with metadata gets none."""
    src = Lists(2, batch=2)
    src.add(3)
    d = Driver(PartitionedTridentSpoutExecutor(TxSpout(src)))
    second = d.emit(2)
    assert sorted(second) == [["p0-0"], ["p0-1"], ["p1-0"], ["p1-1"]]
    assert d.emit(1) == [] and d.emit(1) == []  # its replays too
    assert d.emit(2) == second
    d.success(2)
    third = d.emit(3)
    assert sorted(third) == [["p0-2"], ["p1-2"]]
    records = [r for [r] in second + third]
    assert sorted(records) == sorted(r for rs in src.data.values() for r in rs)


def test_transactional_replay_keeps_the_partitions_it_had():
    src = Lists(1, batch=2)
    src.add(2)
    d = Driver(PartitionedTridentSpoutExecutor(TxSpout(src)))
    assert d.emit(1) == [["p0-0"], ["p0-1"]]
    src.data["p9"] = ["p9-0"]  # a new partition appears
    assert d.emit(1) == [["p0-0"], ["p0-1"]]
    assert d.emit(2) == [["p9-0"]]


def test_partitions_are_split_between_tasks_and_refreshed_when_they_change():
    src = Lists(3, batch=1)
    src.add(1)
    d = Driver(PartitionedTridentSpoutExecutor(TxSpout(src)), num_tasks=2)
    assert d.emit(1) == [["p0-0"], ["p2-0"], ["p1-0"]]
    assert [e.emitter.refreshed for e in d.emitters] == [[["p0", "p2"]], [["p1"]]]
    src.data["p3"] = ["p3-0"]
    assert d.emit(2) == [["p3-0"]]
    assert [e.emitter.refreshed[-1] for e in d.emitters] == [["p0", "p2"], ["p1", "p3"]]


def test_opaque_every_record_in_exactly_one_successful_batch_across_replays_and_restarts():
    src = Lists(2, batch=2)
    src.add(3)
    d = Driver(OpaquePartitionedTridentSpoutExecutor(OpSpout(src)))
    committed = {}
    committed[1] = d.emit(1)
    d.success(1)
    failed = d.emit(2)
    assert failed == [["p0-2"], ["p1-2"]] or failed == [["p1-2"], ["p0-2"]]
    src.add(2)  # the replay of 2 may emit more than its first attempt
    committed[2] = d.emit(2)
    assert sorted(committed[2]) == [["p0-2"], ["p0-3"], ["p1-2"], ["p1-3"]]
    d.success(2)
    d.emit(3)  # emitted, then the worker dies before it commits
    d.restart()
    committed[3] = d.emit(3)
    d.success(3)
    committed[4] = d.emit(4)
    got = sorted(r for batch in committed.values() for [r] in batch)
    assert got == sorted(r for records in src.data.values() for r in records)


def test_success_drops_older_metadata_and_keys_are_valid():
    backend_state = MemoryTransactionalState()
    r = RotatingTransactionalState(backend_state, "p")
    for t in (1, 2, 3):
        r.override_state(t, {"end": t})
    assert r.get_previous_state(3) == {"end": 2} and r.get_last_state() == {"end": 3}
    r.cleanup_before(3)
    again = RotatingTransactionalState(backend_state, "p")
    assert again.curr == {3: {"end": 3}}
    assert again.get_previous_state(3) is None
    assert partition_key("topic-0") == "topic-0"
    odd = partition_key("/data/in/a b.txt")
    assert odd != partition_key("/data/in/a_b.txt") and "/" not in odd


def test_emitter_returning_a_partition_not_its_own_is_an_error():
    src = Lists(1, batch=1)
    src.add(1)

    class Rogue(OpaqueEmitter):
        def emit_batch_new(self, tx, collector, partitions, last):
            return {Part("elsewhere"): {"next": 1}}

    spout = OpSpout(src)
    spout.get_emitter = lambda conf, context: Rogue(src)
    d = Driver(OpaquePartitionedTridentSpoutExecutor(spout))
    with pytest.raises(ValueError, match="'elsewhere'"):
        d.emit(1)


class Skipping:
    """Wraps an emitter: its emit_batch_new leaves out the partitions in ``skip`` (a source with
    nothing new there, as a custom spout may say it)."""

    def __init__(self, inner, skip):
        self.inner, self.skip = inner, skip

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def emit_batch_new(self, tx, collector, partitions, last):
        return self.inner.emit_batch_new(tx, collector, {p for p in partitions if p.pid not in self.skip}, last)


@pytest.mark.parametrize("opaque", [False, True])
def test_a_partition_left_out_of_a_batch_carries_on_where_it_was_after_a_success_and_a_restart(opaque):
    """A txid in which p0 emitted nothing: its replay emits nothing from p0, and once it
    succeeded (which drops the metadata before it) and the task restarted, p0 resumes after its
    last records, not from its start."""
    src = Lists(2, batch=2)
    src.add(4)
    skip = set()
    spout = OpSpout(src) if opaque else TxSpout(src)
    make = spout.get_emitter
    spout.get_emitter = lambda conf, context: Skipping(make(conf, context), skip)
    d = Driver((OpaquePartitionedTridentSpoutExecutor if opaque else PartitionedTridentSpoutExecutor)(spout))
    seen = list(d.emit(1))
    d.success(1)
    skip.add("p0")
    second = d.emit(2)
    assert sorted(second) == [["p1-2"], ["p1-3"]]
    if not opaque:
        assert d.emit(2) == second  # the replay emits nothing from p0 either
    seen += second
    d.success(2)
    skip.clear()
    d.restart()
    seen += d.emit(3)
    d.success(3)
    seen += d.emit(4)
    records = [r for [r] in seen]
    assert sorted(records) == sorted(r for rs in src.data.values() for r in rs), records
    assert len(records) == len(set(records)) == 8


@pytest.mark.parametrize("restart", [False, True])
def test_an_opaque_replay_without_a_partition_leaves_its_records_to_the_next_txid(restart):
    """Txid 2's first attempt reads p0 and p1 and fails; p1 is gone when it is replayed (a
    partition the source no longer lists for a while); the replay commits p0 alone. When p1 is
    back, txid 3 must start p1 where txid 1 left it: the failed attempt's p1 records were never
    committed. (Storm clears a vanished partition's state for the txid at its commit.) With
    ``restart`` the task restarts between the two attempts, so only the store knows p1."""
    src = Lists(2, batch=2)
    src.add(2)
    d = Driver(OpaquePartitionedTridentSpoutExecutor(OpSpout(src)))
    committed = [*d.emit(1)]
    d.success(1)
    src.add(2)
    assert sorted(d.emit(2)) == [["p0-2"], ["p0-3"], ["p1-2"], ["p1-3"]]  # fails
    p1 = src.data.pop("p1")
    if restart:
        d.restart()
    replay = d.emit(2)
    assert sorted(replay) == [["p0-2"], ["p0-3"]]
    committed += replay
    d.success(2)
    src.data["p1"] = p1
    committed += run_through(d, (3, 4))
    assert_each_once(src, committed, 8)


@pytest.mark.parametrize("opaque", [False, True])
def test_a_partition_that_moves_to_another_task_waits_for_its_previous_batch(opaque):
    """A new partition reorders the list, and p2 moves from task 1 to task 0 between txids 2 and
    3, both in flight. Task 0 reaches txid 3 before task 1 has emitted txid 2 (tasks run apart):
    emitting p2 from the last batch it finds stored (txid 1's) would take txid 2's p2 records
    again, so txid 3 fails there, and its replay, once txid 2 is stored, continues after it."""
    src, d, committed = two_tasks_after_txid_1(opaque)
    d.start(2)  # [p1, p2]: task 0 has p1, task 1 p2
    src.data["p0"] = []
    src.add(2)
    d.start(3)  # [p0, p1, p2]: task 0 has p0 and p2, task 1 p1
    committed += d.emit_on(2, 0)
    with pytest.raises(FailedException, match=r"\[p2\].*txid 2"):
        d.emit_on(3, 0)
    committed += d.emit_on(2, 1)
    d.emit_on(3, 1)  # txid 3 failed: what it emitted here is not committed
    d.success(2)
    d.start(3)
    committed += d.emit(3)
    d.success(3)
    committed += run_through(d, (4, 5))
    assert_each_once(src, committed, 12)


@pytest.mark.parametrize("tasks", [1, 2])
def test_two_txids_in_flight_that_read_a_partition_and_fail_leave_its_records_to_a_later_txid(tasks):
    """Txids 2 and 3 both read p1 in attempts that fail; both replays run without p1 (the
    second with the same partitions as the first). When p1 is back it resumes after txid 1."""
    src = Lists(2, batch=2)
    src.add(2)
    d = Driver(OpaquePartitionedTridentSpoutExecutor(OpSpout(src)), num_tasks=tasks)
    committed = [*d.emit(1)]
    d.success(1)
    src.add(4)
    d.emit(2)
    d.emit(3)  # both in flight, both fail
    p1 = src.data.pop("p1")
    committed += d.emit(2)
    committed += d.emit(3)
    d.success(2)
    d.success(3)
    src.data["p1"] = p1
    committed += run_through(d, (4, 5, 6, 7))
    assert_each_once(src, committed, 12)


def test_a_moved_partition_waits_for_the_attempt_of_the_txid_before_that_will_commit():
    """Txid 2's first attempt stored p2 on task 1 and failed; txid 3's replay moves p2 to task 0,
    which reaches it before task 1 ran txid 2's replay: the failed attempt's metadata does not
    do (the replay reads further), so txid 3 fails until the replay's is stored."""
    src = Lists(0, batch=2)
    src.data = {"p1": [], "p2": []}
    src.add(2)
    d = Driver(OpaquePartitionedTridentSpoutExecutor(OpSpout(src)), num_tasks=2)
    committed = [*d.emit(1)]
    d.success(1)
    src.data["p2"].append("p2-2")
    d.emit(2)
    d.emit(3)  # first attempts of 2 and 3, which fail
    src.data["p2"].append("p2-3")
    src.data["p1"] += ["p1-2", "p1-3"]
    d.start(2)  # [p1, p2]
    src.data["p0"] = ["p0-0", "p0-1"]
    d.start(3)  # [p0, p1, p2]: p2 moves to task 0
    committed += d.emit_on(2, 0)
    with pytest.raises(FailedException, match=r"\[p2\].*txid 2 \(attempt 1\)"):
        d.emit_on(3, 0)
    committed += d.emit_on(2, 1)
    d.emit_on(3, 1)
    d.success(2)
    committed += d.emit(3)  # txid 3 replayed
    d.success(3)
    committed += run_through(d, (4, 5))
    assert_each_once(src, committed, 10)


@pytest.mark.parametrize("opaque", [False, True])
def test_the_old_owners_cleanup_keeps_what_the_new_owner_stored(opaque):
    """p2 moves to task 0 at txid 3 and back at txid 4; task 1's success(2) comes before its
    txid 3 (a $success and a $batch come by different ways): its cleanup from an old copy of p2
    must not drop task 0's p2@3, which txid 4 on task 1 resumes from."""
    src, d, committed = two_tasks_after_txid_1(opaque)
    d.start(2)  # [p1, p2]
    src.data["p0"] = ["p0-0"]
    d.start(3)  # [p0, p1, p2]: p2 to task 0
    committed += d.emit_on(2, 1) + d.emit_on(2, 0) + d.emit_on(3, 0)
    d.emitters[0].success(TransactionAttempt(2, 0))
    d.emitters[1].success(TransactionAttempt(2, 0))  # before its txid 3
    committed += d.emit_on(3, 1)
    del src.data["p0"]
    d.start(4)  # [p1, p2]: p2 back to task 1
    committed += d.emit_on(4, 0)
    d.success(3)
    src.add(1)
    committed += d.emit_on(4, 1)  # resumes p2 after task 0's txid 3
    d.success(4)
    committed += run_through(d, (5, 6))
    assert_each_once(src, committed, 9, also=["p0-0"])


class _Coming:
    """A source whose partitions come and go: a directory whose files are read and then removed."""

    def __init__(self):
        self.data = {}
        self.hidden = set()
        self.batch = 5

    def listed(self):
        return sorted(set(self.data) - self.hidden)


class _ComingCoord(Coord):
    def get_partitions_for_batch(self):
        return self.source.listed()


@pytest.mark.parametrize("opaque", [False, True])
def test_partitions_that_come_and_go_do_not_fill_the_state_and_one_that_comes_back_resumes(opaque):
    """A new partition each txid, removed three txids later (FileTridentSpout over a directory
    whose files are read, then removed): each kept its last key for ever, so after 10,000
    files the topology's transactional state was full and every batch failed for good. Only
    the 1,000 partitions gone last keep theirs now; one that was gone for a while and comes
    back still resumes where it was (every record once)."""
    kept = 1_000  # squall.trident.partitioned.GONE_PARTITIONS_KEPT
    src = _Coming()
    src.data["flap"] = []
    spout = OpSpout(src) if opaque else TxSpout(src)
    spout.get_coordinator = lambda conf, context: _ComingCoord(src)
    d = Driver((OpaquePartitionedTridentSpoutExecutor if opaque else PartitionedTridentSpoutExecutor)(spout),
               num_tasks=2)
    committed = []
    txids = kept + 300
    for txid in range(1, txids + 1):
        src.data[f"f{txid}"] = [f"f{txid}-{i}" for i in range(3)]
        src.data.pop(f"f{txid - 3}", None)
        src.data["flap"].append(f"flap-{txid}")
        if txid % 50 == 10:
            src.hidden.add("flap")  # gone for 20 txids, then back with what came meanwhile
        elif txid % 50 == 30:
            src.hidden.discard("flap")
        committed += d.emit(txid)
        d.success(txid)
        keys = [k for t in d.backend._data.values() for k in t]
        assert len(keys) <= kept + 20, (txid, len(keys))
    src.hidden.clear()
    committed += d.emit(txids + 1)
    records = [r for [r] in committed]
    assert len(records) == len(set(records)), "a record committed twice"
    assert sorted(records) == sorted([f"f{t}-{i}" for t in range(1, txids + 1) for i in range(3)]
                                     + [f"flap-{t}" for t in range(1, txids + 1)])


@pytest.mark.parametrize("opaque", [False, True])
def test_a_restarted_task_told_of_a_success_before_its_first_batch_forgets_no_listed_partition(opaque):
    """A restarted master coordinator sends the last commit's $success again, and a restarted
    spout task may hear it before its first batch: it then knew no listing yet, took every
    partition for gone and dropped the metadata of all but the 1,000 it stored last. With more
    partitions than that (a directory of 1,200 files, all still there), those partitions were
    read again from their start: every record of them committed twice."""
    from squall.trident.partitioned import GONE_PARTITIONS_KEPT
    src = Lists(GONE_PARTITIONS_KEPT + 200, batch=5)
    spout = OpSpout(src) if opaque else TxSpout(src)
    d = Driver((OpaquePartitionedTridentSpoutExecutor if opaque else PartitionedTridentSpoutExecutor)(spout))
    src.add(2)
    committed = d.emit(1)
    d.success(1)
    d.restart()  # the worker restarted
    d.success(1)  # the coordinator's $success again, before any batch here
    src.add(1)
    committed += d.emit(2)
    records = [r for [r] in committed]
    assert len(records) == len(set(records)), f"{len(records) - len(set(records))} records committed twice"
    assert sorted(records) == sorted(f"p{i}-{j}" for i in range(GONE_PARTITIONS_KEPT + 200) for j in range(3))
