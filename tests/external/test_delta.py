"""The Parquet and Delta sinks: batches committed whole, each id written exactly once although
tuples replay (failed upstream, failed after the sink committed them, or a crashed executor),
rows that do not fit the schema dead-lettered with the field named; read back by PySpark."""

import threading

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
deltalake = pytest.importorskip("deltalake")

from squall import Bolt, Config, Fields, LocalCluster, Spout, TopologyBuilder  # noqa: E402
from squall.external._sink_batch import (  # noqa: E402
    DEAD_LETTER_STREAM, CommittedBatch, CommittedIds, build_table)
from squall.external.delta import DeltaSinkBolt  # noqa: E402
from squall.external.parquet import ParquetSinkBolt  # noqa: E402

from ..conftest import wait_until  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64(), False), ("name", pa.string()), ("n", pa.int64())])


def row(i):
    return [i, f"user-{i}", i * 10]


# -- the pure core ---------------------------------------------------------------------------

def test_committed_ids_forget_batches_beyond_the_window():
    ids = CommittedIds(max_batches=2)
    ids.add(CommittedBatch(0, [1, 2]))
    ids.add(CommittedBatch(1, [3]))
    ids.add(CommittedBatch(2, [2, 4]))  # 2 again: written after the window by a later batch
    assert 1 not in ids and 3 in ids and 2 in ids and 4 in ids
    ids.add(CommittedBatch(3, []))
    assert 3 not in ids and 2 in ids


def test_build_table_sets_aside_rows_that_do_not_fit_naming_the_field():
    table, bad = build_table(SCHEMA, {1: row(1), 2: [2, "x", "not a number"], 3: [3, None, None]},
                             "sink")
    assert table.column("id").to_pylist() == [1, 3]
    assert list(bad) == [2]
    assert bad[2].field == "n" and "'n'" in str(bad[2]) and "'sink'" in str(bad[2])


def test_build_table_sets_aside_a_number_whose_fraction_an_integer_column_would_cut_off():
    """A producer whose field turned from integers to decimals: pyarrow converts 12.5 into an
    int64 column as 12, without a word, so such a row was written wrong, not set aside."""
    import decimal
    rows = {1: [1, "a", 12.5], 2: [2, "b", 12.0], 3: [3, "c", decimal.Decimal("0.1")], 4: [4, "d", 7]}
    table, bad = build_table(SCHEMA, rows, "sink")
    assert table.column("id").to_pylist() == [2, 4] and table.column("n").to_pylist() == [12, 7]
    assert sorted(bad) == [1, 3]
    assert bad[1].field == "n" and "12.5" in str(bad[1]) and "written as 12" in str(bad[1]) and "'sink'" in str(bad[1])


def test_build_table_sets_aside_a_fraction_bound_for_integers_in_a_list_or_struct_column():
    """pyarrow cuts the fraction off inside a list<int64> or struct column as it does in an
    int64 one: [[1.5]] was written as [[1]]."""
    schema = pa.schema([("id", pa.int64()), ("xs", pa.list_(pa.int64())), ("p", pa.struct([("n", pa.int32())]))])
    rows = {1: [1, [1, 2.5], {"n": 1}], 2: [2, [3, 4.0], {"n": 5}], 3: [3, [], {"n": 0.5}], 4: [4, None, None]}
    table, bad = build_table(schema, rows, "sink")
    assert table.column("id").to_pylist() == [2, 4] and table.column("xs").to_pylist() == [[3, 4], None]
    assert sorted(bad) == [1, 3]
    assert bad[1].field == "xs" and "2.5" in str(bad[1]) and bad[3].field == "p" and "0.5" in str(bad[3])


# -- the bolts, driven directly --------------------------------------------------------------

class FakeContext:
    def __init__(self, task=1, targets=None):
        self.task = task
        self.targets = targets or {}

    def get_this_targets(self):
        return self.targets

    def get_this_component_id(self):
        return "sink"

    def get_this_task_id(self):
        return self.task

    def get_component_tasks(self, component):
        return [self.task]


class FakeCollector:
    def __init__(self):
        self.acked, self.failed, self.emitted, self.errors = [], [], [], []

    def ack(self, t):
        self.acked.append(t.get_value_by_field("id"))

    def fail(self, t):
        self.failed.append(t.get_value_by_field("id"))

    def emit(self, values, anchors=None, stream="default"):
        self.emitted.append((stream, values))

    def report_error(self, e):
        self.errors.append(e)


def tup(values, fields=("id", "name", "n")):
    from squall._tuple import Source, Tuple
    return Tuple(list(values), Source("src", "default", 1, Fields(list(fields))))


def make_sinks(tmp_path, **kw):
    return [ParquetSinkBolt(tmp_path / "pq", SCHEMA, "id", **kw),
            DeltaSinkBolt(tmp_path / "delta", SCHEMA, "id", **kw)]


def read_ids(sink):
    if isinstance(sink, ParquetSinkBolt):
        files = sorted(p for p in __import__("pathlib").Path(sink.path).glob("part-*.parquet"))
        return sorted(i for f in files for i in pq.read_table(f).column("id").to_pylist())
    return sorted(deltalake.DeltaTable(sink.table_uri).to_pyarrow_table().column("id").to_pylist())


@pytest.mark.parametrize("which", [0, 1], ids=["parquet", "delta"])
def test_acks_only_when_the_batch_is_committed_and_never_writes_an_id_twice(tmp_path, which):
    sink = make_sinks(tmp_path, batch_size=3)[which]
    out = FakeCollector()
    sink.prepare({}, FakeContext(), out)
    sink.execute(tup(row(1)))
    sink.execute(tup(row(2)))
    sink.execute(tup(row(1)))  # a replay while the original is still in the batch
    assert out.acked == [] and read_ids(sink) == []
    sink.execute(tup(row(3)))  # the batch is full: committed, then acked
    assert sorted(out.acked) == [1, 1, 2, 3] and read_ids(sink) == [1, 2, 3]
    sink.execute(tup(row(2)))  # a replay of a committed id: acked, not written
    assert sorted(out.acked) == [1, 1, 2, 2, 3]

    # a restarted task (a new instance, as after a worker crash) rebuilds what it committed
    again = make_sinks(tmp_path, batch_size=3)[which]
    out2 = FakeCollector()
    again.prepare({}, FakeContext(), out2)
    for i in (3, 4):
        again.execute(tup(row(i)))
    assert out2.acked == [3]  # 3 was committed before the restart
    again.flush()
    assert out2.acked == [3, 4] and read_ids(again) == [1, 2, 3, 4]


class ShiftedContext(FakeContext):
    """A sink task of a resubmitted topology whose task ids were given otherwise."""

    def __init__(self, task, tasks):
        super().__init__(task)
        self.tasks = tasks

    def get_component_tasks(self, component):
        return self.tasks


@pytest.mark.parametrize("which", [0, 1], ids=["parquet", "delta"])
def test_a_restart_whose_task_ids_moved_never_writes_a_committed_id_twice(tmp_path, which):
    """Task ids are given in component order, so a topology resubmitted with a stateful bolt
    added (its checkpoint spout), other topology.workers (the ackers) or another parallelism of a
    component before the sink gives the sink's tasks other ids, and so other batch names. A
    record the restart replayed reached a task whose own batches never held it, and was written
    again: 65 of 21,870 rows twice in the Parquet directory, 63 in the Delta table, when a
    pipeline was resubmitted with a stateful bolt. Now a task starting also knows the recent
    batches of the component's other task names."""
    first = [make_sinks(tmp_path, batch_size=2)[which] for _ in range(2)]
    for task, sink in zip((3, 4), first):  # the first submission: tasks 3 and 4
        sink.prepare({}, ShiftedContext(task, [3, 4]), FakeCollector())
    for i in (1, 2, 3):
        first[0].execute(tup(row(i)))
    for i in (11, 12):
        first[1].execute(tup(row(i)))
    # resubmitted, every id one higher: old task 4's name is new task 4's, old task 3's no one's
    again = [make_sinks(tmp_path, batch_size=2)[which] for _ in range(2)]
    outs = [FakeCollector(), FakeCollector()]
    for task, sink, out in zip((4, 5), again, outs):
        sink.prepare({}, ShiftedContext(task, [4, 5]), out)
    for i in (1, 2, 3, 4):  # the first task's records replayed (3 never committed) and a new one
        again[0].execute(tup(row(i)))
    for i in (11, 12, 13):
        again[1].execute(tup(row(i)))
    for sink in again:
        sink.flush()
    assert sorted(outs[0].acked) == [1, 2, 3, 4] and sorted(outs[1].acked) == [11, 12, 13]
    assert read_ids(again[0]) == [1, 2, 3, 4, 11, 12, 13]  # each once


@pytest.mark.parametrize("which", [0, 1], ids=["parquet", "delta"])
def test_a_value_that_does_not_fit_is_dead_lettered_with_the_field_and_component(tmp_path, which):
    sink = make_sinks(tmp_path, batch_size=10)[which]
    out = FakeCollector()
    sink.prepare({}, FakeContext(), out)
    sink.execute(tup(row(1)))
    sink.execute(tup([2, "b", "twenty"]))
    sink.flush()
    assert read_ids(sink) == [1] and sorted(out.acked) == [1, 2]
    [(stream, (key, component, error, values))] = out.emitted
    assert stream == DEAD_LETTER_STREAM and key == 2 and component == "sink"
    assert "field 'n'" in error and values == [2, "b", "twenty"]
    assert any("field 'n'" in str(e) for e in out.errors)


def test_a_bad_row_no_bolt_reads_is_named_with_its_id_and_values_in_the_error(tmp_path, caplog):
    """With on_bad_row="dead_letter" and no bolt subscribed to the dead_letter stream, a row that
    did not fit was acked and its error named the field and value but not the row: 150 rows of
    a user's file whose amount turned into a string were gone, no id anywhere, no dead letter
    at the spout. The sink now says at prepare that the stream is unread, and each such error
    names the row's id and values; with a reader, the error is as before."""
    import logging
    sink = make_sinks(tmp_path, batch_size=10)[1]
    out = FakeCollector()
    with caplog.at_level(logging.WARNING):
        sink.prepare({}, FakeContext(), out)
    assert "no bolt subscribes to its 'dead_letter' stream" in caplog.text
    sink.execute(tup([2, "b", "twenty"]))
    sink.flush()
    [error] = [str(e) for e in out.errors]
    assert "field 'n'" in error and "the row is dropped: id 2, values [2, 'b', 'twenty']" in error

    read = make_sinks(tmp_path / "read", batch_size=10)[1]
    out = FakeCollector()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        read.prepare({}, FakeContext(targets={DEAD_LETTER_STREAM: {"keeper": None}}), out)
    assert "dead_letter" not in caplog.text
    read.execute(tup([2, "b", "twenty"]))
    read.flush()
    [error] = [str(e) for e in out.errors]
    assert "field 'n'" in error and "dropped" not in error


def test_a_dropped_row_named_in_the_error_shows_no_credential_field(tmp_path):
    """The error that names a dropped row's values goes to the topology's errors (the UI) and
    the log: a field whose name names a credential is masked there, as a Trident input's is."""
    schema = pa.schema([("id", pa.int64(), False), ("api_token", pa.string()), ("n", pa.int64())])
    sink = ParquetSinkBolt(tmp_path / "pq", schema, "id", batch_size=10)
    out = FakeCollector()
    sink.prepare({}, FakeContext(), out)
    sink.execute(tup([2, "tok-0123456789abcdef", "twenty"], fields=("id", "api_token", "n")))
    sink.flush()
    [error] = [str(e) for e in out.errors]
    assert "the row is dropped: id 2, values [2, '***', 'twenty']" in error and "tok-0123" not in error


@pytest.mark.parametrize("which", [0, 1], ids=["parquet", "delta"])
def test_an_id_that_cannot_be_an_id_is_dead_lettered_too(tmp_path, which):
    """An id that is a list or a dict raised TypeError (unhashable) from the sink's execute
    instead of going to its dead letters with the field named; the batch goes on."""
    sink = make_sinks(tmp_path, batch_size=10)[which]
    out = FakeCollector()
    sink.prepare({}, FakeContext(), out)
    sink.execute(tup(row(1)))
    sink.execute(tup([[2], "b", 3]))
    sink.execute(tup([{"id": 3}, "c", 3]))
    sink.execute(tup(row(4)))
    sink.flush()
    assert read_ids(sink) == [1, 4] and len(out.acked) == 4
    assert [(stream, key) for stream, (key, *_) in out.emitted] == [(DEAD_LETTER_STREAM, None)] * 2
    assert all("field 'id'" in error for _, (_, _, error, _) in out.emitted)


def test_on_bad_row_fail_fails_the_tuple(tmp_path):
    sink = ParquetSinkBolt(tmp_path / "pq", SCHEMA, "id", on_bad_row="fail")
    out = FakeCollector()
    sink.prepare({}, FakeContext(), out)
    sink.execute(tup([None, "a", 1]))  # the id column is not nullable
    sink.flush()
    assert out.failed == [None] and out.emitted == []


@pytest.mark.parametrize("which", [0, 1], ids=["parquet", "delta"])
def test_a_batch_that_cannot_be_written_fails_its_tuples_and_acks_none(tmp_path, which):
    sink = make_sinks(tmp_path, batch_size=10)[which]
    out = FakeCollector()
    sink.prepare({}, FakeContext(), out)
    sink.execute(tup(row(1)))
    sink._commit = lambda seq, table, ids: (_ for _ in ()).throw(OSError("disk full"))
    sink.flush()
    assert out.failed == [1] and out.acked == [] and read_ids(sink) == []
    assert "disk full" in str(out.errors[0]) and "'sink'" in str(out.errors[0])


def zombie_and_its_replacement(tmp_path, which):
    """A task's zombie (its worker lost to the master, on a machine that hung, still running)
    holding ids 1 and 2 in its batch, and the task restarted elsewhere: two instances of one
    task writing one sink, the second prepared after the first took its rows."""
    zombie, replacement = make_sinks(tmp_path, batch_size=10)[which], make_sinks(tmp_path, batch_size=10)[which]
    zombie_out, out = FakeCollector(), FakeCollector()
    zombie.prepare({}, FakeContext(), zombie_out)
    for i in (1, 2):
        zombie.execute(tup(row(i)))
    replacement.prepare({}, FakeContext(), out)
    for i in (1, 2, 3):  # the zombie's tuples timed out and replayed to the replacement
        replacement.execute(tup(row(i)))
    return zombie, zombie_out, replacement, out


@pytest.mark.parametrize("zombie_first", [False, True], ids=["replacement-first", "zombie-first"])
@pytest.mark.parametrize("which", [0, 1], ids=["parquet", "delta"])
def test_a_zombie_task_and_its_replacement_write_each_id_once(tmp_path, which, zombie_first):
    """Before, both committed ids 1 and 2 (the one second found its sequence number taken, or
    in Delta took the same application transaction version again, and wrote its batch anyway):
    the table held them twice. The one committing second now learns the other's batches and
    writes only the ids they do not hold; every id is acked."""
    zombie, zombie_out, replacement, out = zombie_and_its_replacement(tmp_path, which)
    first, second = (zombie, replacement) if zombie_first else (replacement, zombie)
    first.flush()
    second.flush()  # the zombie's tick or its cleanup when its worker is stopped at last
    assert read_ids(replacement) == [1, 2, 3]
    assert sorted(out.acked) == [1, 2, 3] and sorted(zombie_out.acked) == [1, 2]
    assert not out.failed and not zombie_out.failed and not out.errors and not zombie_out.errors
    # each knows the other's batch now: a later replay of any id is acked, not written
    for sink, collector in ((zombie, zombie_out), (replacement, out)):
        for i in (1, 2, 3):
            sink.execute(tup(row(i)))
        sink.flush()
        assert collector.acked.count(3) == 2 - (collector is zombie_out)
    assert read_ids(replacement) == [1, 2, 3]


def test_a_delta_zombie_whose_replacement_commits_while_it_writes_writes_no_id_twice(tmp_path, monkeypatch):
    """The replacement's commit lands between the zombie's look at the log (no batch of its
    name after its own) and its commit: the commit does not rebase past it, and the zombie
    looks again."""
    from squall.external import delta

    zombie, zombie_out, replacement, out = zombie_and_its_replacement(tmp_path, 1)
    real = delta.write_deltalake

    def write(table, data, **kw):
        if not out.acked:
            replacement.flush()
        real(table, data, **kw)

    monkeypatch.setattr(delta, "write_deltalake", write)
    zombie.flush()
    monkeypatch.undo()
    assert read_ids(replacement) == [1, 2, 3]
    assert sorted(out.acked) == [1, 2, 3] and sorted(zombie_out.acked) == [1, 2] and not zombie_out.failed


@pytest.mark.parametrize("landed", [True, False], ids=["landed", "not-landed"])
def test_a_delta_write_that_raises_acks_only_if_its_own_commit_landed(tmp_path, monkeypatch, landed):
    """An error after the commit landed (an object store's lost reply) acks the batch's tuples;
    one before fails them, although another writer of the task's name committed meanwhile."""
    from squall.external import delta

    sink = make_sinks(tmp_path, batch_size=10)[1]
    out = FakeCollector()
    sink.prepare({}, FakeContext(), out)
    sink.execute(tup(row(1)))
    real = delta.write_deltalake

    def write(table, data, **kw):
        if landed:
            real(table, data, **kw)
        raise OSError("connection reset")

    monkeypatch.setattr(delta, "write_deltalake", write)
    sink.flush()
    monkeypatch.undo()
    assert (out.acked, out.failed) == (([1], []) if landed else ([], [1]))
    assert read_ids(sink) == ([1] if landed else [])


def test_the_id_field_must_be_a_column():
    with pytest.raises(ValueError, match="'uid' is not a column"):
        ParquetSinkBolt("/nonexistent", SCHEMA, "uid")


# -- a topology on LocalCluster, read back by Spark ------------------------------------------

STATE = {}  # LocalCluster runs in this process: the spout and bolts report here


class ReplayingSpout(Spout):
    """Emits ids 0..n-1 with themselves as message ids and emits a failed id again."""

    def __init__(self, n):
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "name", "n"))

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.todo = list(range(self.n))

    def next_tuple(self):
        if self.todo:
            i = self.todo.pop(0)
            self.collector.emit(row(i), msg_id=i)

    def ack(self, msg_id):
        with STATE["lock"]:
            STATE["acked"].add(msg_id)

    def fail(self, msg_id):
        with STATE["lock"]:
            STATE["replays"] += 1
        self.todo.append(msg_id)


class FailOnce(Bolt):
    """Fails the ids divisible by ``every`` the first time it sees them, passes the rest on;
    with ``crash_on``, raises (an executor crash) the first time it sees that id."""

    def __init__(self, every, emit=True, crash_on=None):
        self.every, self.emit, self.crash_on = every, emit, crash_on

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "name", "n"))

    def execute(self, t):
        i = t.get_value_by_field("id")
        with STATE["lock"]:
            first = (self.every, i) not in STATE["seen"]
            STATE["seen"].add((self.every, i))
        if first and i == self.crash_on:
            raise RuntimeError(f"crash on {i}")
        if first and i % self.every == 0:
            self.collector.fail(t)
            return
        if self.emit:
            self.collector.emit(list(t.get_values()), anchors=t)
        self.collector.ack(t)


def test_spark_reads_exactly_the_rows_after_replays_and_a_crash(tmp_path, spark):
    n = 300
    STATE.update(lock=threading.Lock(), acked=set(), replays=0, seen=set())
    builder = TopologyBuilder()
    builder.set_spout("events", ReplayingSpout(n))
    # upstream fails ids % 7 once (they replay before any sink saw them) and crashes once on 42
    builder.set_bolt("upstream", FailOnce(7, crash_on=42)).shuffle_grouping("events")
    for name, sink in (("parquet", ParquetSinkBolt(tmp_path / "pq", SCHEMA, "id", batch_size=25)),
                       ("delta", DeltaSinkBolt(tmp_path / "delta", SCHEMA, "id", batch_size=25))):
        builder.set_bolt(name, sink, 2).fields_grouping("upstream", Fields("id"))
    # a sibling fails ids % 5 once: those replay whole, so the sinks see ids they may already
    # have committed
    builder.set_bolt("flaky", FailOnce(5, emit=False)).shuffle_grouping("upstream")
    conf = Config()
    conf.set_message_timeout_secs(10)
    conf["topology.bolt.fail.fast"] = True  # the crash on 42 crashes the worker
    with LocalCluster() as cluster:
        cluster.submit_topology("to-delta", conf, builder.create_topology())
        wait_until(lambda: len(STATE["acked"]) == n, 60)
        cluster.kill_topology("to-delta", wait_secs=0)
    assert STATE["replays"] > 0

    expected = sorted((i, f"user-{i}", i * 10) for i in range(n))
    pq_rows = spark.read.parquet(str(tmp_path / "pq")).collect()
    assert sorted((r.id, r.name, r.n) for r in pq_rows) == expected

    # no delta-spark jar offline: Delta's own reader, and Spark on the table's active files
    table = deltalake.DeltaTable(str(tmp_path / "delta"))
    rows = table.to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["name"], r["n"]) for r in rows) == expected
    spark_rows = spark.read.parquet(*table.file_uris()).collect()
    assert sorted((r.id, r.name, r.n) for r in spark_rows) == expected


def test_a_restarted_delta_sink_finds_its_batches_behind_other_writers_commits(tmp_path):
    """Another writer committed many times since this task's last batches: the restarted task
    reads the log further back until it finds them, and a replay is still not written twice."""
    sink = DeltaSinkBolt(tmp_path / "delta", SCHEMA, "id", batch_size=2, dedupe_batches=2)
    out = FakeCollector()
    sink.prepare({}, FakeContext(), out)
    for i in (1, 2, 3, 4):
        sink.execute(tup(row(i)))
    assert read_ids(sink) == [1, 2, 3, 4]
    for i in range(100, 112):  # a Spark job, say, appending while the task was down
        deltalake.write_deltalake(str(tmp_path / "delta"), pa.table(
            {"id": pa.array([i], pa.int64()), "name": ["other"], "n": pa.array([0], pa.int64())},
            schema=pa.schema(sink.schema)), mode="append")
    again = DeltaSinkBolt(tmp_path / "delta", SCHEMA, "id", batch_size=2, dedupe_batches=2)
    out2 = FakeCollector()
    again.prepare({}, FakeContext(), out2)
    again.execute(tup(row(1)))  # a replay of an id committed before the restart
    again.flush()
    assert out2.acked == [1] and read_ids(again).count(1) == 1
